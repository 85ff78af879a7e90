//! When the system refuses the pool's memory file, the process runs on the C library's
//! allocator.
//!
//! The pool is a memory file (`memfd_create`). A process confined by a seccomp filter that
//! refuses it (man-db runs its filters, `col` among them, under one that answers `ENOSYS` to
//! every call it does not list, `memfd_create` and writable `open`s included) used to be
//! aborted at its first allocation: `man` printed nothing. Such a process now gets the C
//! library's own functions, found with `dlsym(RTLD_NEXT, ...)` when the set-up fails, and
//! runs unprotected; the library says so once on standard error.
//!
//! Nothing is handed out before the set-up is tried, so every object of such a process is the
//! C library's. The exported functions forward here when the allocator's own path gives
//! nothing back (`api`) or, for `free`, finds no heap (`heap::free_in_claiming`): no cost on
//! the common path of a process that has a heap.

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

static ON: AtomicBool = AtomicBool::new(false);

/// The C library's `__libc_malloc`, `__libc_free`, `__libc_calloc`, `__libc_realloc`,
/// `__libc_memalign`, `malloc_usable_size` and the functions that describe or tune its heap.
static FNS: [AtomicUsize; 12] = [const { AtomicUsize::new(0) }; 12];
const NAMES: [&core::ffi::CStr; 12] = [
    c"__libc_malloc",
    c"__libc_free",
    c"__libc_calloc",
    c"__libc_realloc",
    c"__libc_memalign",
    c"malloc_usable_size",
    c"mallinfo2",
    c"mallinfo",
    c"malloc_info",
    c"malloc_trim",
    c"malloc_stats",
    c"mallopt",
];
const MALLOC: usize = 0;
const FREE: usize = 1;
const CALLOC: usize = 2;
const REALLOC: usize = 3;
const MEMALIGN: usize = 4;
const USABLE: usize = 5;
const MALLINFO2: usize = 6;
const MALLINFO: usize = 7;
const MALLOC_INFO: usize = 8;
const MALLOC_TRIM: usize = 9;
const MALLOC_STATS: usize = 10;
const MALLOPT: usize = 11;

/// Whether the process runs on the C library's allocator.
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Acquire)
}

/// Looks the C library's functions up and turns forwarding on; false if one is missing.
pub fn enable() -> bool {
    if !FNS.iter().zip(NAMES).all(|(slot, name)| crate::sys::next_symbol(slot, name).is_some()) {
        return false;
    }
    ON.store(true, Ordering::Release);
    true
}

fn f(i: usize) -> usize {
    FNS[i].load(Ordering::Relaxed)
}

pub fn malloc(size: usize) -> *mut c_void {
    // SAFETY: the C library's `__libc_malloc` (set by `enable` before `on` is true).
    unsafe { core::mem::transmute::<usize, extern "C" fn(usize) -> *mut c_void>(f(MALLOC))(size) }
}

pub fn free(p: *mut c_void) {
    // SAFETY: the C library's `__libc_free`; every object of the process is the C library's.
    unsafe { core::mem::transmute::<usize, extern "C" fn(*mut c_void)>(f(FREE))(p) }
}

pub fn calloc(n: usize, size: usize) -> *mut c_void {
    // SAFETY: the C library's `__libc_calloc`.
    unsafe { core::mem::transmute::<usize, extern "C" fn(usize, usize) -> *mut c_void>(f(CALLOC))(n, size) }
}

pub fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the C library's `__libc_realloc`; `p` is one of its objects or null.
    unsafe { core::mem::transmute::<usize, extern "C" fn(*mut c_void, usize) -> *mut c_void>(f(REALLOC))(p, size) }
}

pub fn memalign(align: usize, size: usize) -> *mut c_void {
    // SAFETY: the C library's `__libc_memalign`.
    unsafe { core::mem::transmute::<usize, extern "C" fn(usize, usize) -> *mut c_void>(f(MEMALIGN))(align, size) }
}

#[cfg(not(test))]
pub fn mallinfo2() -> crate::api::Mallinfo2 {
    // SAFETY: the C library's `mallinfo2`, which returns the same `struct mallinfo2`.
    unsafe { core::mem::transmute::<usize, extern "C" fn() -> crate::api::Mallinfo2>(f(MALLINFO2))() }
}

#[cfg(not(test))]
pub fn mallinfo() -> crate::api::Mallinfo {
    // SAFETY: the C library's `mallinfo`, which returns the same `struct mallinfo`.
    unsafe { core::mem::transmute::<usize, extern "C" fn() -> crate::api::Mallinfo>(f(MALLINFO))() }
}

pub fn malloc_info(options: c_int, stream: *mut libc::FILE) -> c_int {
    // SAFETY: the C library's `malloc_info`, with the caller's stream.
    unsafe {
        core::mem::transmute::<usize, extern "C" fn(c_int, *mut libc::FILE) -> c_int>(f(MALLOC_INFO))(options, stream)
    }
}

pub fn malloc_trim(pad: usize) -> c_int {
    // SAFETY: the C library's `malloc_trim`.
    unsafe { core::mem::transmute::<usize, extern "C" fn(usize) -> c_int>(f(MALLOC_TRIM))(pad) }
}

pub fn malloc_stats() {
    // SAFETY: the C library's `malloc_stats`.
    unsafe { core::mem::transmute::<usize, extern "C" fn()>(f(MALLOC_STATS))() }
}

pub fn mallopt(param: c_int, value: c_int) -> c_int {
    // SAFETY: the C library's `mallopt`.
    unsafe { core::mem::transmute::<usize, extern "C" fn(c_int, c_int) -> c_int>(f(MALLOPT))(param, value) }
}

pub fn usable_size(p: *mut c_void) -> usize {
    // SAFETY: the C library's `malloc_usable_size`; `p` is one of its objects or null.
    unsafe { core::mem::transmute::<usize, extern "C" fn(*mut c_void) -> usize>(f(USABLE))(p) }
}
