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
//! Not seen: limits set with a raw system call, and limits of other processes (`prlimit` with
//! another process id), which pass unchanged. A program the process becomes by `exec` keeps
//! the raised limit.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::sys;

/// Bytes added to the address-space limits the program sets (0 until it sets one).
static RAISED_BY: AtomicU64 = AtomicU64::new(0);
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

fn raw(new: *const Rlimit, old: *mut Rlimit, resource: u32) -> isize {
    // SAFETY: prlimit64 of this process with the caller's (or our own) records.
    unsafe { sys::raw_syscall(libc::SYS_prlimit64, [0, resource as usize, new as usize, old as usize, 0, 0]) }
}

fn raise(v: u64, by: u64) -> u64 {
    if v == INFINITY {
        v
    } else {
        v.saturating_add(by).min(INFINITY - 1)
    }
}

fn lower(v: u64, by: u64) -> u64 {
    if v == INFINITY {
        v
    } else {
        v.saturating_sub(by)
    }
}

/// `prlimit64(0, resource, new, old)` as the program sees it: for `RLIMIT_AS`, `new` raised
/// and `old` lowered by `RAISED_BY`. Returns the system call's result (minus the error number).
///
/// # Safety
/// `new` and `old` are null or valid for reading and writing one `Rlimit` respectively.
pub unsafe fn prlimit(resource: u32, new: *const Rlimit, old: *mut Rlimit) -> isize {
    if resource != libc::RLIMIT_AS || !crate::is_ready() {
        return raw(new, old, resource);
    }
    let mut real_old = Rlimit { cur: 0, max: 0 };
    if new.is_null() {
        let r = raw(core::ptr::null(), &mut real_old, resource);
        if r == 0 && !old.is_null() {
            let by = RAISED_BY.load(Ordering::Relaxed);
            // SAFETY: the caller's contract.
            unsafe { *old = Rlimit { cur: lower(real_old.cur, by), max: lower(real_old.max, by) } };
        }
        return r;
    }
    // SAFETY: the caller's contract.
    let wanted = unsafe { *new };
    if wanted.cur > wanted.max {
        return -(libc::EINVAL as isize);
    }
    let r = raw(core::ptr::null(), &mut real_old, resource);
    if r != 0 {
        return r;
    }
    let prev = RAISED_BY.load(Ordering::Relaxed);
    let mut by = prev;
    if by == 0 && (wanted.cur != INFINITY || wanted.max != INFINITY) {
        // The first limit the program sets: what the process maps now, and room for ours.
        by = crate::stats::proc_status_kb(b"VmSize").map_or(0, |kb| kb << 10) + SLACK;
        RAISED_BY.store(by, Ordering::Relaxed);
    }
    // An unprivileged process cannot raise its hard limit: never past the current one.
    let max = raise(wanted.max, by).min(real_old.max);
    let ours = Rlimit { cur: raise(wanted.cur, by).min(max), max };
    let r = raw(&ours, core::ptr::null_mut(), resource);
    if r == 0 {
        crate::pool::POOL.set_cap(wanted.cur);
        if !old.is_null() {
            // SAFETY: the caller's contract.
            unsafe { *old = Rlimit { cur: lower(real_old.cur, prev), max: lower(real_old.max, prev) } };
        }
    }
    r
}
