//! Address-space limits (`RLIMIT_AS`) that the program sets while it runs.
//!
//! The library reserves address space at start-up (the pool's view, the alias arena, the arena
//! of large objects: tens of TiB, nearly none of it memory). A limit set before the program
//! starts sizes those reservations (docs/usage.md, "Hostile environments"). A program that
//! lowers the limit itself once it runs (vsftpd caps its processes at 100–200 MiB) would find
//! the process already far past it: every later `mmap` fails, the program's own and the
//! allocator's, and the program dies of it.
//!
//! So the limit the program sets (`setrlimit`, `prlimit`) reaches the kernel raised by the
//! address space the process had when the program first set one (`RAISED_BY`: the library's
//! reservations and the program's own mappings of the moment), and reads (`getrlimit`,
//! `prlimit`) give back what the program set. What the limit is for, bounding the memory a
//! process can take, holds for the heap through the pool instead: it hands out no more than
//! the program's limit in pages (`pool::set_cap`), and allocations beyond fail with ENOMEM as
//! under the C library's allocator. Mappings the program makes itself count against the raised
//! limit, which leaves them what the program allowed, as before.
//!
//! A program the process becomes by `exec` inherits the raised limit, which carries a mark and
//! the program's own value (`raise`): the library, loaded again there, sets the limit back to
//! that value before it reserves anything (`after_exec`), so that `ulimit -v` in a shell and
//! `prlimit --as=N PROGRAM` limit the program they start. (A program started without the
//! library keeps the raised limit.) Not seen: limits set with a raw system call, and limits of
//! other processes (`prlimit` with another process id), which pass unchanged.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::sys;

/// Bytes added to the address-space limits the program sets (0 until it sets one).
static RAISED_BY: AtomicU64 = AtomicU64::new(0);
/// The limits the program last set (soft, hard), and what the kernel was given for them.
static PROGRAM: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static GIVEN: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
/// Room for the library's own later mappings (metadata, stack store), beyond the address
/// space of the moment.
const SLACK: u64 = 1 << 30;
const INFINITY: u64 = u64::MAX;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Rlimit {
    pub cur: u64,
    pub max: u64,
}

/// `prlimit64` of this process for `resource` (no translation): 0 or minus the error number.
pub fn raw(new: *const Rlimit, old: *mut Rlimit, resource: u32) -> isize {
    // SAFETY: prlimit64 of this process with the caller's (or our own) records.
    unsafe { sys::raw_syscall(libc::SYS_prlimit64, [0, resource as usize, new as usize, old as usize, 0, 0]) }
}

/// Marks a raised limit (bits 40-43), so that a program the process becomes by `exec` can
/// tell it from one set by anyone else and take the program's own back (`after_exec`).
const MARK: u64 = 0xb << 40;
const MARK_MASK: u64 = 0xf << 40;
/// Limits below this are raised in the marked form: `(n << 44) | MARK | v`.
const LOW: u64 = 1 << 40;

/// `v` raised by at least `by`: marked, so that it can be decoded after an `exec`, when `v` is
/// below 1 TiB (any limit a program lowers itself to).
fn raise(v: u64, by: u64) -> u64 {
    if v == INFINITY {
        v
    } else if v < LOW {
        (by.div_ceil(1 << 44).max(1) << 44) | MARK | v
    } else {
        v.saturating_add(by).min(INFINITY - 1)
    }
}

/// The limit a marked value stands for, or None.
fn unmark(v: u64) -> Option<u64> {
    (v != INFINITY && v >= 1 << 44 && v & MARK_MASK == MARK).then_some(v & (LOW - 1))
}

/// The limit a marked value in the kernel stood for at start-up (soft, hard), to be set for
/// the program once the library has reserved its address space (`after_init`); 0: none.
static INHERITED: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// At start-up, before anything is reserved: a limit raised by the library of the process this
/// one was before `exec` (a shell's `ulimit -v`, `prlimit --as=N PROGRAM`, dovecot's
/// `default_vsz_limit` set for the service it starts) is what that program asked for the new
/// one. It stays raised in the kernel while the library reserves its address space, and
/// `after_init` then sets it for the program as if the program had set it itself: the heap is
/// held to it, and the program reads it back. (Set back in the kernel before the reservations,
/// as it once was, it left a 256 MiB limit a one-time address space of 64 MiB, which dovecot's
/// processes used up within seconds: their allocations failed.)
pub fn after_exec() {
    let mut real = Rlimit { cur: 0, max: 0 };
    if raw(core::ptr::null(), &mut real, libc::RLIMIT_AS) != 0 {
        return;
    }
    let (cur, max) = (unmark(real.cur), unmark(real.max));
    if cur.is_none() && max.is_none() {
        return;
    }
    let max = max.unwrap_or(real.max);
    let cur = cur.unwrap_or(real.cur).min(max);
    INHERITED[0].store(cur, Ordering::Relaxed);
    INHERITED[1].store(max, Ordering::Relaxed);
}

/// At the end of start-up: the limit `after_exec` found, set for the program.
pub fn after_init() {
    let wanted = Rlimit { cur: INHERITED[0].load(Ordering::Relaxed), max: INHERITED[1].load(Ordering::Relaxed) };
    if wanted.max != 0 && set_for_program(wanted).is_err() {
        // As before: the kernel gets the program's own value.
        raw(&wanted, core::ptr::null_mut(), libc::RLIMIT_AS);
    }
}

/// The limits as the program sees them, from the kernel's: what it set, while the kernel
/// holds what it was given for that; else the kernel's (never set, or set by a raw call).
fn seen(real: Rlimit) -> Rlimit {
    let given = Rlimit { cur: GIVEN[0].load(Ordering::Relaxed), max: GIVEN[1].load(Ordering::Relaxed) };
    if RAISED_BY.load(Ordering::Relaxed) != 0 && real.cur == given.cur && real.max == given.max {
        Rlimit { cur: PROGRAM[0].load(Ordering::Relaxed), max: PROGRAM[1].load(Ordering::Relaxed) }
    } else {
        real
    }
}

/// `prlimit64(0, resource, new, old)` as the program sees it: for `RLIMIT_AS`, `new` raised
/// by `RAISED_BY` and `old` as the program set it (`seen`). Returns the system call's result
/// (minus the error number).
///
/// # Safety
/// `new` and `old` are null or valid for reading and writing one `Rlimit` respectively.
pub unsafe fn prlimit(resource: u32, new: *const Rlimit, old: *mut Rlimit) -> isize {
    if resource != libc::RLIMIT_AS || !crate::is_ready() {
        // SAFETY: the caller's contract.
        return unsafe { through_locals(new, old, |n, o| raw(n, o, resource)) };
    }
    let mut real_old = Rlimit { cur: 0, max: 0 };
    if new.is_null() {
        let r = raw(core::ptr::null(), &mut real_old, resource);
        if r == 0 && !old.is_null() {
            // SAFETY: the caller's contract.
            unsafe { *old = seen(real_old) };
        }
        return r;
    }
    // SAFETY: the caller's contract.
    let wanted = unsafe { *new };
    if wanted.cur > wanted.max {
        return -(libc::EINVAL as isize);
    }
    match set_for_program(wanted) {
        Ok(visible) => {
            if !old.is_null() {
                // SAFETY: the caller's contract.
                unsafe { *old = visible };
            }
            0
        }
        Err(r) => r,
    }
}

/// `call(new, old)` with `new` and `old` in locals when they lie in heap objects: the kernel's
/// own copy fails with `EFAULT` on a page that lost its entry (see `io`), and `prlimit` sets
/// the new limit before it writes the old one, so it cannot be made again. Read and written
/// here, in user mode, where such a page is mapped again (and a freed object's is reported).
///
/// # Safety
/// As `prlimit`.
pub unsafe fn through_locals(
    new: *const Rlimit,
    old: *mut Rlimit,
    call: impl FnOnce(*const Rlimit, *mut Rlimit) -> isize,
) -> isize {
    let in_heap = |p: usize| p != 0 && crate::is_ready() && crate::alias::in_arena(p);
    if !in_heap(new as usize) && !in_heap(old as usize) {
        return call(new, old);
    }
    // SAFETY: the caller's record, valid for reading when not null.
    let new_local = (!new.is_null()).then(|| unsafe { new.read_unaligned() });
    let mut old_local = Rlimit { cur: 0, max: 0 };
    let n = new_local.as_ref().map_or(core::ptr::null(), |l| l as *const Rlimit);
    let o = if old.is_null() { core::ptr::null_mut() } else { &mut old_local as *mut Rlimit };
    let r = call(n, o);
    if r == 0 && !old.is_null() {
        // SAFETY: the caller's record, valid for writing.
        unsafe { old.write_unaligned(old_local) };
    }
    r
}

/// Sets the address-space limit the program asked for (`wanted`): the kernel gets it raised
/// by the address space the process had when the first one was set, and the heap is held to
/// it. Returns the limits the program saw before, or the system call's error (negative).
fn set_for_program(wanted: Rlimit) -> Result<Rlimit, isize> {
    let resource = libc::RLIMIT_AS;
    let mut real_old = Rlimit { cur: 0, max: 0 };
    let r = raw(core::ptr::null(), &mut real_old, resource);
    if r != 0 {
        return Err(r);
    }
    let visible = seen(real_old);
    let mut by = RAISED_BY.load(Ordering::Relaxed);
    if by == 0 && (wanted.cur != INFINITY || wanted.max != INFINITY) {
        // The first limit the program sets: what the process maps now, and room for ours.
        by = crate::stats::proc_status_kb(b"VmSize").map_or(0, |kb| kb << 10) + SLACK;
    }
    // A hard limit the program does not raise (as it sees it) stays within the kernel's, which
    // only a privileged process may raise; one it raises is for the kernel to allow or refuse.
    let max = if wanted.max <= visible.max { raise(wanted.max, by).min(real_old.max) } else { raise(wanted.max, by) };
    let ours = Rlimit { cur: raise(wanted.cur, by).min(max), max };
    let r = raw(&ours, core::ptr::null_mut(), resource);
    if r == 0 {
        RAISED_BY.store(by, Ordering::Relaxed);
        PROGRAM[0].store(wanted.cur, Ordering::Relaxed);
        PROGRAM[1].store(wanted.max, Ordering::Relaxed);
        GIVEN[0].store(ours.cur, Ordering::Relaxed);
        GIVEN[1].store(ours.max, Ordering::Relaxed);
        crate::pool::POOL.set_cap(wanted.cur);
        Ok(visible)
    } else {
        Err(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raised_limit_is_at_least_the_raise_and_decodes_to_the_program_s_own() {
        let by = (32u64 << 40) + (3 << 30);
        for v in [0, 4096, 100 << 20, 256 << 20, (1 << 40) - 1] {
            let r = raise(v, by);
            assert!(r >= v + by, "{v}: {r}");
            assert_eq!(unmark(r), Some(v));
        }
        // Limits of a TiB and more, and none, are raised plainly and not taken for marked ones.
        assert_eq!(raise(1 << 40, by), (1 << 40) + by);
        assert_eq!(unmark(raise(1 << 40, by)), None);
        assert_eq!(raise(INFINITY, by), INFINITY);
        assert_eq!(unmark(INFINITY), None);
        // Limits anyone else sets: not marked (but for one with exactly those bits).
        for v in [8u64 << 30, 64 << 40, (1 << 44) + (1 << 40)] {
            assert_eq!(unmark(v), None, "{v:#x}");
        }
    }
}
