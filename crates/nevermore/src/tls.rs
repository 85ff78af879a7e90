//! The per-thread cache pointer, kept in one initial-exec TLS slot defined in assembly.
//!
//! Rust's `thread_local!` is not available in `no_std`, and TLS with a destructor would
//! recurse into malloc (`__cxa_thread_atexit_impl` allocates). An initial-exec slot is one
//! `%fs`-relative load and never allocates. Thread exit is seen through a pthread key whose
//! destructor returns the cache (`pthread_setspecific` on a low key does not allocate).

use core::arch::{asm, global_asm};

use crate::cache::Cache;

global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".balign 8",
    ".globl nevermore_tls_cache",
    ".hidden nevermore_tls_cache",
    ".type nevermore_tls_cache, @object",
    ".size nevermore_tls_cache, 8",
    "nevermore_tls_cache:",
    ".zero 8",
    ".popsection",
);

/// Marks a thread whose cache was already returned (it is exiting); such a thread
/// allocates straight from the central lists.
pub const EXITED: *mut Cache = core::ptr::without_provenance_mut(1);

#[inline(always)]
pub fn get() -> *mut Cache {
    let p: *mut Cache;
    // SAFETY: reads this thread's slot; the GOT entry holds the slot's offset from %fs.
    unsafe {
        asm!(
            "mov {p}, qword ptr [rip + nevermore_tls_cache@GOTTPOFF]",
            "mov {p}, qword ptr fs:[{p}]",
            p = out(reg) p,
            options(nostack, readonly, preserves_flags)
        );
    }
    p
}

#[inline(always)]
pub fn set(v: *mut Cache) {
    // SAFETY: writes this thread's slot.
    unsafe {
        asm!(
            "mov {t}, qword ptr [rip + nevermore_tls_cache@GOTTPOFF]",
            "mov qword ptr fs:[{t}], {v}",
            t = out(reg) _,
            v = in(reg) v,
            options(nostack, preserves_flags)
        );
    }
}
