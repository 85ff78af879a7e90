//! Small objects: size classes, striped slabs, the central per-class free lists and the
//! per-thread caches.
//!
//! A slab of class c is `k` consecutive pool pages; each page holds `spp` slots of the class
//! size. Slot i lives on page `i % k` at position `i / k`, so slots with consecutive indices
//! lie on *different* pages: a refill that takes the lowest free indices takes one slot from
//! each of k consecutive pages (a *striped* refill), which is the layout the alias engine
//! installs with one `UFFDIO_CONTINUE` per refill.
//!
//! All slot state is out of band: a free bitmap (slots neither live nor cached) and a table of
//! requested sizes, where `FREE_SLOT` marks a slot that is not live. `free` flips the size to
//! `FREE_SLOT` with a compare-and-swap before anything else changes, which is what detects
//! double frees (also concurrent ones) while the slot still sits in a cache.

use core::sync::atomic::{AtomicU16, AtomicU64, Ordering};

use crate::guard::CANARY;
use crate::lock::Locked;
use crate::pool::{self, POOL};
use crate::sys::PAGE;
use crate::{meta, stats};

/// Slot sizes. Multiples of 16 (the malloc alignment); above 256 they are chosen to fill a
/// 4 KiB page with little waste.
pub const SIZES: [u32; 25] = [
    16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 192, 224, 256, 288, 320, 368, 400, 448, 512, 576, 672, 816, 1024, 1360,
    2048,
];
pub const NCLASS: usize = SIZES.len();
/// Largest slot; bigger requests (object + canary) are page objects.
pub const MAX_SLOT: usize = 2048;
/// Requested sizes up to this fit a slot together with their canary.
pub const MAX_SMALL: usize = MAX_SLOT - CANARY;

/// Size table marker for a slot that is not live.
pub const FREE_SLOT: u16 = u16::MAX;

#[derive(Clone, Copy)]
pub struct Class {
    pub size: u32,
    /// Slots per page.
    pub spp: u32,
    /// Pages per slab.
    pub pages: u32,
    pub nslots: u32,
    /// ceil(2^32 / size): position in page = (offset * inv) >> 32 for offsets < 4096.
    pub inv: u64,
    /// Slot table bytes: bitmap words, then one u16 size per slot.
    pub bitmap_words: u32,
    pub meta_bytes: u32,
    /// Thread cache capacity.
    pub cache_cap: u32,
}

const fn make_class(size: u32) -> Class {
    let spp = PAGE as u32 / size;
    let mut pages = 64u32.div_ceil(spp);
    if pages < 4 {
        pages = 4;
    }
    if pages > 16 {
        pages = 16;
    }
    let nslots = spp * pages;
    let bitmap_words = nslots.div_ceil(64);
    let cache_cap = if size <= 256 {
        64
    } else if size <= 1024 {
        32
    } else {
        16
    };
    Class {
        size,
        spp,
        pages,
        nslots,
        inv: (1u64 << 32).div_ceil(size as u64),
        bitmap_words,
        meta_bytes: bitmap_words * 8 + nslots * 2,
        cache_cap,
    }
}

pub static CLASSES: [Class; NCLASS] = {
    let mut out = [make_class(16); NCLASS];
    let mut i = 0;
    while i < NCLASS {
        out[i] = make_class(SIZES[i]);
        i += 1;
    }
    out
};

/// Class for a slot of at least `need` bytes (index by need/16, rounded up).
static LOOKUP: [u8; MAX_SLOT / 16 + 1] = {
    let mut t = [0u8; MAX_SLOT / 16 + 1];
    let mut q = 0;
    let mut c = 0;
    while q <= MAX_SLOT / 16 {
        while (SIZES[c] as usize) < q * 16 {
            c += 1;
        }
        t[q] = c as u8;
        q += 1;
    }
    t
};

/// The class serving a request of `size` bytes (default alignment), if it is small.
#[inline]
pub fn class_for(size: usize) -> Option<usize> {
    if size > MAX_SMALL {
        return None;
    }
    Some(LOOKUP[(size + CANARY).div_ceil(16)] as usize)
}

/// The smallest class whose slots are all aligned to `align` (a power of two <= 4096) and
/// hold `size` bytes plus the canary.
pub fn class_for_aligned(size: usize, align: usize) -> Option<usize> {
    let first = class_for(size)?;
    (first..NCLASS).find(|&c| SIZES[c] as usize % align == 0)
}

/// The thread cache of one class: a stack of free slot addresses.
#[repr(C)]
pub struct Bin {
    pub n: u32,
    pub slots: [usize; 64],
}

/// Per-class central state.
pub struct Central {
    /// Slabs with free slots in their bitmap.
    partial: u32,
    /// How many slabs on `partial` are entirely free (one is kept; more are released).
    empty: u32,
    /// Recycled slot tables of this class.
    free_meta: *mut u8,
    pub slabs: u64,
}

// SAFETY: only reached through its lock.
unsafe impl Send for Central {}

pub static CENTRAL: [Locked<Central>; NCLASS] =
    [const { Locked::new(Central { partial: pool::NONE, empty: 0, free_meta: core::ptr::null_mut(), slabs: 0 }) };
        NCLASS];

#[inline]
fn bitmap(s: &pool::Span) -> *const AtomicU64 {
    s.meta as *const AtomicU64
}

#[inline]
pub fn sizes(s: &pool::Span, c: &Class) -> *const AtomicU16 {
    // SAFETY: the size table follows the bitmap inside the slot table.
    unsafe { s.meta.add(c.bitmap_words as usize * 8) as *const AtomicU16 }
}

/// Where a pointer sits inside a slab.
pub enum Slot {
    /// Exactly the start of slot `i`.
    Start(u32),
    /// Inside slot `i`, `off` bytes past its start.
    Interior(u32, usize),
    /// In the unused tail of a page.
    Tail,
}

#[inline]
pub fn locate(s: &pool::Span, c: &Class, p: usize) -> Slot {
    let off = p - s.addr;
    let page = (off / PAGE) as u32;
    let in_page = off % PAGE;
    let pos = ((in_page as u64 * c.inv) >> 32) as u32;
    let pos = if pos * c.size > in_page as u32 { pos - 1 } else { pos };
    if pos >= c.spp {
        return Slot::Tail;
    }
    let i = pos * c.pages + page;
    let delta = in_page - (pos * c.size) as usize;
    if delta == 0 {
        Slot::Start(i)
    } else {
        Slot::Interior(i, delta)
    }
}

#[inline]
pub fn slot_addr(s: &pool::Span, c: &Class, i: u32) -> usize {
    s.addr + (i % c.pages) as usize * PAGE + ((i / c.pages) * c.size) as usize
}

/// Marks slot `p` (taken from a cache or the central lists) live with `size` bytes.
#[inline]
pub fn mark_live(p: usize, size: usize) {
    if let Some((_, s)) = POOL.span_at(p) {
        let c = &CLASSES[s.class as usize];
        if let Slot::Start(i) = locate(s, c, p) {
            // SAFETY: `i` < nslots; the size table has nslots entries.
            unsafe { (*sizes(s, c).add(i as usize)).store(size as u16, Ordering::Release) };
        }
    }
}

/// Moves up to `want` free slots of class `ci` into `out` (lowest indices first, so each
/// batch is striped across the slab's pages). Returns how many were moved.
pub fn refill(ci: usize, out: &mut [usize]) -> usize {
    let c = &CLASSES[ci];
    let mut central = CENTRAL[ci].lock();
    let mut got = 0;
    while got < out.len() {
        let idx = if central.partial != pool::NONE {
            central.partial
        } else {
            match new_slab(&mut central, ci) {
                Some(i) => i,
                None => break,
            }
        };
        let s = POOL.span_owned(idx);
        if s.nfree == c.nslots {
            central.empty -= 1;
        }
        let bm = bitmap(s);
        let mut w = 0;
        while w < c.bitmap_words as usize && got < out.len() && s.nfree > 0 {
            // SAFETY: `w` < bitmap_words.
            let word = unsafe { &*bm.add(w) };
            let mut bits = word.load(Ordering::Relaxed);
            while bits != 0 && got < out.len() {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                out[got] = slot_addr(s, c, w as u32 * 64 + b);
                got += 1;
                s.nfree -= 1;
            }
            word.store(bits, Ordering::Relaxed);
            w += 1;
        }
        if s.nfree == 0 {
            let mut head = central.partial;
            POOL.unlink_list(&mut head, idx);
            central.partial = head;
        }
    }
    stats::add(&stats::REFILLS, 1);
    got
}

fn new_slab(central: &mut Central, ci: usize) -> Option<u32> {
    let c = &CLASSES[ci];
    let meta = if !central.free_meta.is_null() {
        let m = central.free_meta;
        // SAFETY: a recycled slot table starts with the link to the next one.
        central.free_meta = unsafe { *(m as *mut *mut u8) };
        m
    } else {
        let m = meta::alloc(c.meta_bytes as usize);
        if m.is_null() {
            return None;
        }
        m
    };
    let (idx, _) = match POOL.alloc_run(c.pages, pool::SLAB) {
        Some(r) => r,
        None => {
            // SAFETY: `meta` is an unused slot table of this class.
            unsafe { *(meta as *mut *mut u8) = central.free_meta };
            central.free_meta = meta;
            return None;
        }
    };
    let s = POOL.span_owned(idx);
    s.class = ci as u8;
    s.addr = POOL.page_addr(s.start);
    s.meta = meta;
    s.nfree = c.nslots;
    // SAFETY: `meta` has meta_bytes bytes: bitmap_words words, then nslots sizes.
    unsafe {
        let bm = meta as *mut u64;
        for w in 0..c.bitmap_words as usize {
            let left = c.nslots as usize - w * 64;
            *bm.add(w) = if left >= 64 { u64::MAX } else { (1u64 << left) - 1 };
        }
        let sz = sizes(s, c) as *mut u16;
        for i in 0..c.nslots as usize {
            *sz.add(i) = FREE_SLOT;
        }
    }
    let mut head = central.partial;
    POOL.push_list(&mut head, idx);
    central.partial = head;
    central.empty += 1;
    central.slabs += 1;
    stats::add(&stats::SLABS_CREATED, 1);
    Some(idx)
}

/// Returns free slots (already marked `FREE_SLOT`) of class `ci` to their slabs.
pub fn release(ci: usize, slots: &[usize]) {
    let mut central = CENTRAL[ci].lock();
    // SAFETY: the class lock is held.
    unsafe { release_locked(&mut central, ci, slots) }
}

/// # Safety
/// `central` must be class `ci`'s state with its lock held (or all locks held across fork).
pub unsafe fn release_locked(central: &mut Central, ci: usize, slots: &[usize]) {
    let c = &CLASSES[ci];
    for &p in slots {
        let Some((idx, _)) = POOL.span_at(p) else { continue };
        let s = POOL.span_owned(idx);
        let Slot::Start(i) = locate(s, c, p) else { continue };
        // SAFETY: i < nslots, so the word is inside the bitmap.
        unsafe { (*bitmap(s).add(i as usize / 64)).fetch_or(1 << (i % 64), Ordering::Relaxed) };
        s.nfree += 1;
        if s.nfree == 1 {
            let mut head = central.partial;
            POOL.push_list(&mut head, idx);
            central.partial = head;
        }
        if s.nfree == c.nslots {
            if central.empty >= 1 {
                let mut head = central.partial;
                POOL.unlink_list(&mut head, idx);
                central.partial = head;
                let m = s.meta;
                // SAFETY: the slab is entirely free, so its slot table is unused now.
                unsafe { *(m as *mut *mut u8) = central.free_meta };
                central.free_meta = m;
                central.slabs -= 1;
                POOL.free_run(idx);
                stats::add(&stats::SLABS_RELEASED, 1);
            } else {
                central.empty += 1;
            }
        }
    }
}

/// Bytes of pool held by slabs and their count, summed over classes.
pub fn slab_count() -> u64 {
    CENTRAL.iter().map(|c| c.lock().slabs).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_sane() {
        for (i, c) in CLASSES.iter().enumerate() {
            assert_eq!(c.size % 16, 0);
            assert!(c.spp >= 2, "class {i}");
            assert!(c.spp * c.size <= PAGE as u32);
            assert!((4..=16).contains(&c.pages));
            if i > 0 {
                assert!(c.size > CLASSES[i - 1].size);
            }
            // page waste stays below 1/8
            assert!((PAGE as u32 - c.spp * c.size) * 8 <= PAGE as u32, "class {}", c.size);
        }
    }

    #[test]
    fn every_small_size_gets_room_for_its_canary() {
        for size in 0..=MAX_SMALL {
            let c = class_for(size).unwrap();
            assert!(SIZES[c] as usize >= size + CANARY);
            if c > 0 {
                assert!((SIZES[c - 1] as usize) < size + CANARY, "size {size} not in the smallest class");
            }
        }
        assert!(class_for(MAX_SMALL + 1).is_none());
    }

    #[test]
    fn aligned_classes() {
        for align in [16usize, 32, 64, 128, 256, 512, 1024, 2048] {
            for size in [0usize, 1, 100, 1000, 2000] {
                if let Some(c) = class_for_aligned(size, align) {
                    assert_eq!(SIZES[c] as usize % align, 0);
                    assert!(SIZES[c] as usize >= size + CANARY);
                }
            }
        }
        assert!(class_for_aligned(8, 64).is_some());
        assert!(class_for_aligned(2000, 4096).is_none());
    }

    #[test]
    fn locate_inverts_slot_addr() {
        for c in CLASSES.iter() {
            let s = pool::Span {
                start: 0,
                npages: c.pages,
                kind: pool::SLAB,
                class: 0,
                dirty: false,
                nfree: 0,
                next: 0,
                prev: 0,
                size: Default::default(),
                addr: 0x10_0000,
                view: 0,
                view_len: 0,
                meta: core::ptr::null_mut(),
            };
            for i in 0..c.nslots {
                let a = slot_addr(&s, c, i);
                assert!(matches!(locate(&s, c, a), Slot::Start(j) if j == i));
                assert!(matches!(locate(&s, c, a + 8), Slot::Interior(j, 8) if j == i));
                assert!(matches!(locate(&s, c, a + c.size as usize - 1), Slot::Interior(j, _) if j == i));
            }
            // consecutive indices are on consecutive pages (striping)
            assert_eq!(slot_addr(&s, c, 1) - slot_addr(&s, c, 0), PAGE);
            if c.spp * c.size < PAGE as u32 {
                assert!(matches!(locate(&s, c, s.addr + PAGE - 1), Slot::Tail));
            }
        }
    }
}
