//! Heap protection after Robertson et al. (LISA 2003): every object is followed by a canary
//! keyed with a per-process secret and with the canary's own address, and the canary is
//! checked whenever the object is freed or reallocated. Because the secret comes from
//! `getrandom` and the address is mixed in, an attacker who overflows an object can neither
//! predict the canary nor copy a canary seen elsewhere; and since no allocator metadata lives
//! next to objects (it is all out of band), an overflow can corrupt only program data — which
//! the canary check then reports.
//!
//! With userfaultfd, page objects may also end against a guard page that traps any access
//! past them at once; one whose size is a whole number of pages then has no canary at all
//! (`heap::page_layout`).

use core::slice;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::sys;

/// Bytes of canary after every object.
pub const CANARY: usize = 8;

static K0: AtomicU64 = AtomicU64::new(0x243f_6a88_85a3_08d3);
static K1: AtomicU64 = AtomicU64::new(0x1319_8a2e_0370_7345);
static K2: AtomicU64 = AtomicU64::new(0xa409_3822_299f_31d1);

/// Draws the secret. Called once during initialisation. Returns false if the kernel gave no
/// randomness (the constants above then stay, which is weaker but not unsafe).
pub fn init_secret() -> bool {
    let mut b = [0u8; 24];
    if !sys::getrandom(&mut b) {
        return false;
    }
    let word =
        |i: usize| u64::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6], b[i + 7]]);
    K0.store(word(0), Ordering::Relaxed);
    K1.store(word(8) | 1, Ordering::Relaxed);
    K2.store(word(16), Ordering::Relaxed);
    true
}

/// The canary value for the canary stored at `addr`.
#[inline]
pub fn canary_for(addr: usize) -> u64 {
    let mut x = (addr as u64) ^ K0.load(Ordering::Relaxed);
    x = x.wrapping_mul(K1.load(Ordering::Relaxed));
    x ^= x >> 29;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 32;
    x ^= K2.load(Ordering::Relaxed);
    // The first canary byte is never 0 nor ASCII: an off-by-one NUL (or text) written past
    // the end can never leave the canary intact.
    (x & !0xff) | 0x80 | (x & 0x7f)
}

/// Writes the canary for an object of `size` bytes at `obj`.
///
/// # Safety
/// `obj + size .. obj + size + CANARY` must be writable memory of the object's slot.
#[inline]
pub unsafe fn arm(obj: usize, size: usize) {
    let at = obj + size;
    // SAFETY: guaranteed by the caller; the canary may be unaligned.
    unsafe { (at as *mut u64).write_unaligned(canary_for(at)) }
}

/// Checks the canary after an object of `size` bytes at `obj`, reading its bytes where `view`
/// maps the object (`obj` itself, or another view of the same memory: `alias::backing`); the
/// value expected is the one for the canary's address after `obj`.
///
/// # Safety
/// `view + size .. view + size + CANARY` must be readable and hold the object's canary bytes.
#[inline]
pub unsafe fn intact_via(obj: usize, size: usize, view: usize) -> bool {
    // SAFETY: guaranteed by the caller.
    unsafe { ((view + size) as *const u64).read_unaligned() == canary_for(obj + size) }
}

/// Fills `[from, to)` with canary bytes: the gap between a large object's canary and the end of
/// its view, where an access past the object does not fault (`large::arm`). The byte at
/// address `a` is byte `a % 8` of the canary for `key` (the view's start), so that aligned
/// words all hold that canary: as unpredictable as one canary per word, and filled and checked
/// at memory speed (a `realloc` growing an object in place re-arms up to a page every time).
///
/// # Safety
/// `[from, to)` must be writable memory that belongs to no object.
pub unsafe fn arm_tail(key: usize, from: usize, to: usize) {
    let c = canary_for(key);
    let bytes = c.to_le_bytes();
    let (head, words) = split_tail(from, to);
    for a in from..head {
        // SAFETY: `a` lies inside `[from, to)`, writable (the caller's promise).
        unsafe { *(a as *mut u8) = bytes[a % 8] };
    }
    if words > 0 {
        // SAFETY: with words to fill, `head` is `from` rounded up to 8 (an empty range may
        // leave it unaligned, which even an empty slice must not be), and `head .. head + 8 *
        // words` lies inside `[from, to)`.
        unsafe { slice::from_raw_parts_mut(head as *mut u64, words).fill(c) };
    }
    for a in head + 8 * words..to {
        // SAFETY: as above.
        unsafe { *(a as *mut u8) = bytes[a % 8] };
    }
}

/// The first byte of `[from, to)` that no longer holds what `arm_tail` wrote with `key`, if any.
///
/// # Safety
/// `[from, to)` must be readable memory.
pub unsafe fn tail_damage(key: usize, from: usize, to: usize) -> Option<usize> {
    let c = canary_for(key);
    let bytes = c.to_le_bytes();
    // SAFETY: `a` lies inside `[from, to)`, readable (the caller's promise).
    let bad = |a: usize| unsafe { *(a as *const u8) } != bytes[a % 8];
    let (head, words) = split_tail(from, to);
    if let Some(a) = (from..head).find(|&a| bad(a)) {
        return Some(a);
    }
    let w: &[u64] = if words == 0 {
        &[]
    } else {
        // SAFETY: as in `arm_tail`: `head` is 8-aligned and the words lie inside `[from, to)`.
        unsafe { slice::from_raw_parts(head as *const u64, words) }
    };
    // Blocks of 8 words compared at once (vectorised); the damaged one is searched byte-wise.
    for (i, block) in w.chunks(8).enumerate() {
        if block.iter().fold(0, |acc, &x| acc | (x ^ c)) != 0 {
            let at = head + 64 * i;
            return (at..at + 8 * block.len()).find(|&a| bad(a));
        }
    }
    (head + 8 * words..to).find(|&a| bad(a))
}

/// `[from, to)` as its unaligned head `[from, h)`, then `n` aligned words from `h`: (h, n).
fn split_tail(from: usize, to: usize) -> (usize, usize) {
    let head = ((from + 7) & !7).min(to.max(from));
    let words = to.saturating_sub(head) / 8;
    (head, words)
}

/// The tests that arm and check canaries, and the one that draws a new secret, run one at a
/// time: a new secret drawn between arming and checking changes every canary.
#[cfg(test)]
pub(crate) static TEST_SECRET: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canary_depends_on_address_and_detects_one_byte() {
        let _one = TEST_SECRET.lock().unwrap();
        init_secret();
        assert_ne!(canary_for(0x1000), canary_for(0x1008));
        let mut buf = [0u8; 64];
        let base = buf.as_mut_ptr() as usize;
        for size in [0usize, 1, 7, 13, 24, 40] {
            // SAFETY: base + size + 8 <= base + 64.
            unsafe {
                arm(base, size);
                assert!(intact_via(base, size, base));
                buf[size] ^= 1;
                assert!(!intact_via(base, size, base), "size {size}");
                buf[size] ^= 1;
                assert!(intact_via(base, size, base));
            }
        }
    }

    /// Read through another view of the same bytes (here a copy), the canary is still the one
    /// for the object's own address, not the view's.
    #[test]
    fn a_canary_read_through_another_view_is_checked_for_the_objects_address() {
        let _one = TEST_SECRET.lock().unwrap();
        init_secret();
        let mut buf = [0u8; 64];
        let base = buf.as_mut_ptr() as usize;
        // SAFETY: base + 24 + 8 <= base + 64.
        unsafe { arm(base, 24) };
        let copy = buf;
        let view = copy.as_ptr() as usize;
        // SAFETY: both arrays hold 64 bytes; the canary lies at 24..32.
        unsafe {
            assert!(intact_via(base, 24, view));
            assert!(!intact_via(view, 24, view), "the view's own address gave the same canary");
        }
    }

    #[test]
    fn tail_canaries_find_the_first_damaged_byte() {
        let _one = TEST_SECRET.lock().unwrap();
        init_secret();
        let mut buf = [0u8; 200];
        let base = buf.as_mut_ptr() as usize;
        for (from, to) in [(3usize, 3usize), (3, 4), (5, 21), (8, 64), (1, 199), (0, 200)] {
            // SAFETY: every range lies inside `buf`.
            unsafe {
                arm_tail(base, base + from, base + to);
                assert_eq!(tail_damage(base, base + from, base + to), None);
                if to - from >= 8 {
                    assert_ne!(tail_damage(base + 8, base + from, base + to), None, "another key, {from}..{to}");
                }
                for at in base + from..base + to {
                    *(at as *mut u8) ^= 0x10;
                    assert_eq!(tail_damage(base, base + from, base + to), Some(at), "{from}..{to}");
                    *(at as *mut u8) ^= 0x10;
                }
                assert_eq!(tail_damage(base, base + from, base + to), None);
            }
        }
    }

    #[test]
    fn first_canary_byte_defeats_nul_and_text() {
        for a in 0..4096usize {
            let b = canary_for(0x7000_0000 + a * 8).to_le_bytes()[0];
            assert!(b >= 0x80, "address {a}: byte {b:#x}");
        }
    }

    #[test]
    fn secret_changes_canary() {
        let _one = TEST_SECRET.lock().unwrap();
        let before = canary_for(0x5000);
        assert!(init_secret());
        assert_ne!(before, canary_for(0x5000));
    }
}
