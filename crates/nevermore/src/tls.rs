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

global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".balign 4",
    ".globl nevermore_tls_depth",
    ".hidden nevermore_tls_depth",
    ".type nevermore_tls_depth, @object",
    ".size nevermore_tls_depth, 4",
    "nevermore_tls_depth:",
    ".zero 4",
    ".popsection",
);

/// Counts one more level of allocator calls on this thread; returns the previous depth (0 for
/// an outermost call). A signal arriving between the load and the store runs its handler to
/// completion first (handlers leave the count as they found it), so the count stays exact.
#[inline(always)]
pub fn enter() -> u32 {
    let d: u32;
    // SAFETY: reads and writes this thread's own depth word.
    unsafe {
        asm!(
            "mov {t}, qword ptr [rip + nevermore_tls_depth@GOTTPOFF]",
            "mov {d:e}, dword ptr fs:[{t}]",
            "add dword ptr fs:[{t}], 1",
            t = out(reg) _,
            d = out(reg) d,
            options(nostack)
        );
    }
    d
}

/// Ends the level `enter` began.
#[inline(always)]
pub fn leave() {
    // SAFETY: writes this thread's own depth word.
    unsafe {
        asm!(
            "mov {t}, qword ptr [rip + nevermore_tls_depth@GOTTPOFF]",
            "sub dword ptr fs:[{t}], 1",
            t = out(reg) _,
            options(nostack)
        );
    }
}

/// The offset of the depth word from a thread's thread pointer (`%fs` base): the same for
/// every thread, so that another task can read any stopped thread's depth (`stop`).
pub fn depth_offset() -> usize {
    let t: usize;
    // SAFETY: reads the GOT entry that holds the slot's offset; no thread-local access.
    unsafe {
        asm!(
            "mov {t}, qword ptr [rip + nevermore_tls_depth@GOTTPOFF]",
            t = out(reg) t,
            options(nostack, readonly, preserves_flags)
        );
    }
    t
}

global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".balign 4",
    ".globl nevermore_tls_views",
    ".hidden nevermore_tls_views",
    ".type nevermore_tls_views, @object",
    ".size nevermore_tls_views, 4",
    "nevermore_tls_views:",
    ".zero 4",
    ".popsection",
);

/// The thread's views word: its low half counts the calls the thread is inside whose
/// allocations get views of their own (`setlocale`, `newlocale`: `heap::needs_view`), its high
/// half the program's own `opendir` and `fdopendir` calls, whose directory stream stays an
/// ordinary object (`streams::opens_directory`).
#[inline(always)]
fn views_word() -> u32 {
    let v: u32;
    // SAFETY: reads this thread's own word.
    unsafe {
        asm!(
            "mov {t}, qword ptr [rip + nevermore_tls_views@GOTTPOFF]",
            "mov {v:e}, dword ptr fs:[{t}]",
            t = out(reg) _,
            v = out(reg) v,
            options(nostack, readonly, preserves_flags)
        );
    }
    v
}

/// What `add_views` adds to enter a call of the program's own `opendir` or `fdopendir`.
pub const PLAIN_DIR: i32 = 1 << 16;

/// Whether the thread is inside a call whose allocations get views of their own
/// (`heap::needs_view`).
#[inline(always)]
pub fn in_views() -> bool {
    views_word() & 0xffff != 0
}

/// Whether the thread is inside the program's own `opendir` or `fdopendir`.
#[inline(always)]
pub fn in_plain_dir() -> bool {
    views_word() >> 16 != 0
}

/// Adds `d` to the thread's views word: 1 to begin a call whose allocations get views, -1 to
/// end it; `PLAIN_DIR` and `-PLAIN_DIR` for the program's own `opendir`.
#[inline(always)]
pub fn add_views(d: i32) {
    // SAFETY: writes this thread's own word.
    unsafe {
        asm!(
            "mov {t}, qword ptr [rip + nevermore_tls_views@GOTTPOFF]",
            "add dword ptr fs:[{t}], {d:e}",
            t = out(reg) _,
            d = in(reg) d,
            options(nostack)
        );
    }
}
