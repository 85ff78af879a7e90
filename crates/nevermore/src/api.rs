//! The exported C ABI: the glibc allocation API and every C++ `operator new`/`delete`, and
//! glibc's `clone` (a fork under another name, see there). Semantics follow glibc (errno
//! values, `realloc(p, 0)` frees, `malloc(0)` is a unique pointer). Nothing here is compiled
//! into the unit-test binary, which keeps the system allocator.

use core::ffi::{c_int, c_void};
use core::ptr;

use crate::heap::{self, Family};
use crate::sys::{self, PAGE};
use crate::{passthrough, streams};

/// `free` (or `op`, a deallocation function of `family`) that leaves `errno` alone.
#[inline]
fn free_keep_errno(p: *mut c_void, op: &'static str, family: Family) {
    let saved = sys::errno();
    heap::check_family(p as *mut u8, family, op);
    heap::free(p as *mut u8, op);
    sys::set_errno(saved);
}

/// Runs an allocation and keeps `errno` as it was unless the allocation failed: like glibc,
/// a successful call never changes `errno` (programs such as PostgreSQL rely on that when they
/// allocate between a system call and the check of its `errno`). When the allocator's heap
/// could not be set up, `fallback` runs instead (the C library's allocator, `passthrough`),
/// and leaves `errno` as the C library does.
#[inline]
fn keep_errno_or(f: impl FnOnce() -> *mut u8, fallback: impl FnOnce() -> *mut c_void) -> *mut c_void {
    let saved = sys::errno();
    let p = f();
    if p.is_null() && passthrough::on() {
        sys::set_errno(saved);
        return fallback();
    }
    if !p.is_null() {
        sys::set_errno(saved);
    }
    p as *mut c_void
}

// `malloc`, `calloc` and `realloc` pass on their return address: the dynamic linker's own
// allocations are told apart by it (`heap::needs_view`). One load and a jump.

#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn malloc(size: usize) -> *mut c_void {
    core::arch::naked_asm!("mov rsi, qword ptr [rsp]", "jmp {f}", f = sym malloc_from)
}

extern "C" fn malloc_from(size: usize, caller: usize) -> *mut c_void {
    if heap::needs_view(caller, size) {
        return keep_errno_or(|| heap::view_malloc(size, false, caller), || passthrough::malloc(size));
    }
    keep_errno_or(|| heap::malloc(size), || passthrough::malloc(size))
}

/// `free` passes on its return address too: the C library's own frees of a stream's buffer
/// are told apart by it (`streams`).
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn free(p: *mut c_void) {
    core::arch::naked_asm!("mov rsi, qword ptr [rsp]", "jmp {f}", f = sym free_from)
}

extern "C" fn free_from(p: *mut c_void, caller: usize) {
    if streams::frees_from(caller) {
        let saved = sys::errno();
        heap::free_stream_buffer(p as *mut u8);
        sys::set_errno(saved);
        return;
    }
    free_keep_errno(p, "free", Family::Malloc)
}

#[no_mangle]
pub extern "C" fn cfree(p: *mut c_void) {
    free_keep_errno(p, "free", Family::Malloc)
}

#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    core::arch::naked_asm!("mov rdx, qword ptr [rsp]", "jmp {f}", f = sym calloc_from)
}

extern "C" fn calloc_from(n: usize, size: usize, caller: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(total) if heap::needs_view(caller, total) => {
            keep_errno_or(|| heap::view_malloc(total, true, caller), || passthrough::calloc(n, size))
        }
        Some(total) => keep_errno_or(|| heap::malloc_zeroed(total), || passthrough::calloc(n, size)),
        None => {
            sys::set_errno(libc::ENOMEM);
            ptr::null_mut()
        }
    }
}

#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    core::arch::naked_asm!("mov rdx, qword ptr [rsp]", "jmp {f}", f = sym realloc_from)
}

extern "C" fn realloc_from(p: *mut c_void, size: usize, caller: usize) -> *mut c_void {
    if passthrough::on() {
        return passthrough::realloc(p, size);
    }
    let saved = sys::errno();
    heap::check_family(p as *mut u8, Family::Malloc, "realloc");
    let q = if heap::needs_view(caller, size) {
        heap::view_realloc(p as *mut u8, size)
    } else {
        heap::realloc(p as *mut u8, size)
    };
    if !q.is_null() || size == 0 {
        sys::set_errno(saved);
    }
    q as *mut c_void
}

#[no_mangle]
pub extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(total) => realloc(p, total),
        None => {
            sys::set_errno(libc::ENOMEM);
            ptr::null_mut()
        }
    }
}

/// # Safety
/// `out` must be valid for a pointer write (C contract of `posix_memalign`).
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if !align.is_power_of_two() || !align.is_multiple_of(core::mem::size_of::<usize>()) {
        return libc::EINVAL;
    }
    // posix_memalign reports through its return value and leaves errno alone.
    let saved = sys::errno();
    let p = aligned(size, align);
    sys::set_errno(saved);
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: guaranteed by the caller.
    unsafe { *out = p };
    0
}

#[no_mangle]
pub extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        sys::set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    aligned(size, align)
}

/// An allocation aligned to `align` (a power of two), leaving `errno` alone on success.
fn aligned(size: usize, align: usize) -> *mut c_void {
    keep_errno_or(|| heap::malloc_aligned(size, align), || passthrough::memalign(align, size))
}

#[no_mangle]
pub extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    // glibc rounds a non-power-of-two alignment up to the next power of two.
    let Some(align) = align.checked_next_power_of_two() else {
        sys::set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    aligned(size, align)
}

#[no_mangle]
pub extern "C" fn valloc(size: usize) -> *mut c_void {
    aligned(size, PAGE)
}

#[no_mangle]
pub extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let Some(rounded) = size.max(1).checked_add(PAGE - 1) else {
        sys::set_errno(libc::ENOMEM);
        return ptr::null_mut();
    };
    aligned(rounded & !(PAGE - 1), PAGE)
}

#[no_mangle]
pub extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if passthrough::on() {
        return passthrough::usable_size(p);
    }
    heap::usable_size(p as *mut u8)
}

#[no_mangle]
pub extern "C" fn malloc_trim(pad: usize) -> c_int {
    if passthrough::on() {
        return passthrough::malloc_trim(pad);
    }
    // These take locks: inside a signal handler that interrupted the allocator they do nothing.
    let scope = crate::reentry::Scope::enter();
    if scope.nested() || !crate::ensure_init() {
        return 0;
    }
    (crate::pool::POOL.trim() | crate::slab::trim_idle()) as c_int
}

/// Accepted and ignored: glibc's tuning knobs have no meaning here (forwarded to the C
/// library when the process runs on its allocator, `passthrough`).
#[no_mangle]
pub extern "C" fn mallopt(param: c_int, value: c_int) -> c_int {
    if passthrough::on() {
        return passthrough::mallopt(param, value);
    }
    1
}

/// glibc's `struct mallinfo2`.
#[repr(C)]
pub struct Mallinfo2 {
    pub arena: usize,
    pub ordblks: usize,
    pub smblks: usize,
    pub hblks: usize,
    pub hblkhd: usize,
    pub usmblks: usize,
    pub fsmblks: usize,
    pub uordblks: usize,
    pub fordblks: usize,
    pub keepcost: usize,
}

/// glibc's deprecated `struct mallinfo` (int fields).
#[repr(C)]
pub struct Mallinfo {
    pub arena: c_int,
    pub ordblks: c_int,
    pub smblks: c_int,
    pub hblks: c_int,
    pub hblkhd: c_int,
    pub usmblks: c_int,
    pub fsmblks: c_int,
    pub uordblks: c_int,
    pub fordblks: c_int,
    pub keepcost: c_int,
}

/// What `mallinfo2` and `malloc_info` report: bytes in use by objects, bytes of pool pages
/// held (in use or dirty and free), and the peak of pool pages in use, in bytes. None inside a
/// signal handler that interrupted the allocator (they take locks) or before initialisation.
struct Figures {
    in_use: usize,
    arena: usize,
    peak: usize,
}

fn figures() -> Option<Figures> {
    let scope = crate::reentry::Scope::enter();
    if scope.nested() || !crate::ensure_init() {
        return None;
    }
    let t = crate::cache::totals();
    let (ps, _, dirty) = crate::pool::POOL.stats();
    Some(Figures {
        in_use: t.alloc_bytes.saturating_sub(t.free_bytes) as usize,
        arena: (ps.pages_in_use as usize + dirty as usize) * PAGE,
        peak: ps.peak_pages_in_use as usize * PAGE,
    })
}

#[no_mangle]
pub extern "C" fn mallinfo2() -> Mallinfo2 {
    if passthrough::on() {
        return passthrough::mallinfo2();
    }
    let Some(Figures { in_use, arena, .. }) = figures() else {
        // SAFETY: all-zero is a valid value of this plain struct.
        return unsafe { core::mem::zeroed() };
    };
    Mallinfo2 {
        arena,
        ordblks: 1,
        smblks: 0,
        hblks: 0,
        hblkhd: 0,
        usmblks: 0,
        fsmblks: 0,
        uordblks: in_use,
        fordblks: arena.saturating_sub(in_use),
        keepcost: 0,
    }
}

#[no_mangle]
pub extern "C" fn mallinfo() -> Mallinfo {
    if passthrough::on() {
        return passthrough::mallinfo();
    }
    let m = mallinfo2();
    let c = |v: usize| v.min(c_int::MAX as usize) as c_int;
    Mallinfo {
        arena: c(m.arena),
        ordblks: c(m.ordblks),
        smblks: c(m.smblks),
        hblks: c(m.hblks),
        hblkhd: c(m.hblkhd),
        usmblks: c(m.usmblks),
        fsmblks: c(m.fsmblks),
        uordblks: c(m.uordblks),
        fordblks: c(m.fordblks),
        keepcost: c(m.keepcost),
    }
}

/// glibc's `malloc_info`: the figures of `mallinfo2` and the peak in glibc's XML layout (one
/// heap), written to `stream`. Options other than 0 are refused with EINVAL, as glibc does.
///
/// # Safety
/// `stream` must be a valid `FILE *` open for writing (C contract of `malloc_info`).
#[no_mangle]
pub unsafe extern "C" fn malloc_info(options: c_int, stream: *mut libc::FILE) -> c_int {
    if passthrough::on() {
        return passthrough::malloc_info(options, stream);
    }
    if options != 0 {
        return libc::EINVAL;
    }
    use core::fmt::Write;
    let f = figures().unwrap_or(Figures { in_use: 0, arena: 0, peak: 0 });
    let (cur, used, peak) = (f.arena, f.in_use, f.peak);
    let free = cur.saturating_sub(used);
    let mut b = crate::report::Buf::<2048>::new();
    let totals = |b: &mut crate::report::Buf<2048>, mmap: bool| {
        let _ = writeln!(b, "<total type=\"fast\" count=\"0\" size=\"0\"/>");
        let _ = writeln!(b, "<total type=\"rest\" count=\"{}\" size=\"{free}\"/>", (free > 0) as u8);
        if mmap {
            let _ = writeln!(b, "<total type=\"mmap\" count=\"0\" size=\"0\"/>");
        }
        let _ =
            write!(b, "<system type=\"current\" size=\"{cur}\"/>\n<system type=\"max\" size=\"{}\"/>\n", peak.max(cur));
        let _ = write!(b, "<aspace type=\"total\" size=\"{cur}\"/>\n<aspace type=\"mprotect\" size=\"{cur}\"/>\n");
    };
    let _ = write!(b, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n</sizes>\n");
    totals(&mut b, false);
    let _ = writeln!(b, "</heap>");
    totals(&mut b, true);
    let _ = write!(b, "<!-- nevermore: {used} bytes in use -->\n</malloc>\n");
    let bytes = b.as_bytes();
    // SAFETY: `bytes` is valid for its length; `stream` is guaranteed by the caller. Nothing of
    // the allocator is held here, so stdio may allocate its buffer through it.
    if unsafe { libc::fwrite(bytes.as_ptr() as *const c_void, 1, bytes.len(), stream) } != bytes.len() {
        return -1;
    }
    0
}

/// glibc's `malloc_stats`: prints the allocator's counters.
#[no_mangle]
pub extern "C" fn malloc_stats() {
    if passthrough::on() {
        return passthrough::malloc_stats();
    }
    let scope = crate::reentry::Scope::enter();
    if !scope.nested() && crate::ensure_init() {
        crate::stats::print();
    }
}

// ---- C++ -------------------------------------------------------------------------------
//
// The throwing `operator new`s must run the new-handler loop and throw `std::bad_alloc`,
// which means calling into libstdc++ and letting a C++ exception unwind through our frame.
// They are therefore written as naked functions with explicit unwind (CFI) information; the
// libstdc++ entry points are weak references, so C programs (without libstdc++) still load.

/// Allocation attempt for `operator new` (`family` New) or `operator new[]` (NewArray):
/// `align` 0 means the default alignment.
extern "C" fn new_attempt(size: usize, align: usize, family: u32) -> *mut u8 {
    let p = if align == 0 {
        malloc(size) as *mut u8
    } else if align.is_power_of_two() {
        aligned(size, align) as *mut u8
    } else {
        ptr::null_mut()
    };
    heap::note_family(p, Family::of_bits(family));
    p
}

/// No handler and no libstdc++ to throw with: report and abort.
extern "C" fn new_failed(size: usize) -> ! {
    crate::report::fatal(crate::report::Report {
        kind: crate::report::Kind::OutOfMemory,
        addr: size,
        op: "operator new",
        what: "the request cannot be satisfied and std::bad_alloc cannot be thrown",
        object: None,
        claimed: None,
        pointer: None,
    })
}

/// The shared body of the throwing `operator new`s: rdi = size, rsi = alignment (0: default),
/// edx = the family (`Family::New` or `Family::NewArray`).
#[unsafe(naked)]
extern "C" fn new_throwing() {
    core::arch::naked_asm!(
        ".weak _ZSt15get_new_handlerv",
        ".weak _ZSt17__throw_bad_allocv",
        ".cfi_startproc",
        "push rbx",
        ".cfi_adjust_cfa_offset 8",
        ".cfi_offset rbx, -16",
        "push r12",
        ".cfi_adjust_cfa_offset 8",
        ".cfi_offset r12, -24",
        "push r13",
        ".cfi_adjust_cfa_offset 8",
        ".cfi_offset r13, -32",
        "mov rbx, rdi",
        "mov r12, rsi",
        "mov r13d, edx",
        "2:",
        "mov rdi, rbx",
        "mov rsi, r12",
        "mov edx, r13d",
        "call {attempt}",
        "test rax, rax",
        "jnz 4f",
        // A new-handler installed? Call it and try again.
        "mov rax, qword ptr [rip + _ZSt15get_new_handlerv@GOTPCREL]",
        "test rax, rax",
        "jz 3f",
        "call rax",
        "test rax, rax",
        "jz 3f",
        "call rax",
        "jmp 2b",
        // No handler: throw std::bad_alloc if libstdc++ is there.
        "3:",
        "mov rax, qword ptr [rip + _ZSt17__throw_bad_allocv@GOTPCREL]",
        "test rax, rax",
        "jz 5f",
        "call rax",
        "5:",
        "mov rdi, rbx",
        "call {failed}",
        "ud2",
        "4:",
        "pop r13",
        ".cfi_adjust_cfa_offset -8",
        "pop r12",
        ".cfi_adjust_cfa_offset -8",
        "pop rbx",
        ".cfi_adjust_cfa_offset -8",
        "ret",
        ".cfi_endproc",
        attempt = sym new_attempt,
        failed = sym new_failed,
    )
}

// Family numbers as the naked entry points load them.
const NEW: u32 = Family::New as u32;
const NEW_ARRAY: u32 = Family::NewArray as u32;

macro_rules! new_default {
    ($($name:ident = $family:ident),*) => {$(
        /// `operator new(size_t)` / `operator new[](size_t)`.
        #[no_mangle]
        #[unsafe(naked)]
        pub extern "C" fn $name() {
            core::arch::naked_asm!(
                "xor esi, esi",
                "mov edx, {family}",
                "jmp {body}",
                family = const $family,
                body = sym new_throwing,
            )
        }
    )*};
}

macro_rules! new_aligned {
    ($($name:ident = $family:ident),*) => {$(
        /// `operator new(size_t, align_val_t)` and the array form.
        #[no_mangle]
        #[unsafe(naked)]
        pub extern "C" fn $name() {
            core::arch::naked_asm!("mov edx, {family}", "jmp {body}", family = const $family, body = sym new_throwing)
        }
    )*};
}

new_default!(_Znwm = NEW, _Znam = NEW_ARRAY);
new_aligned!(_ZnwmSt11align_val_t = NEW, _ZnamSt11align_val_t = NEW_ARRAY);

macro_rules! new_nothrow {
    ($($name:ident = $family:expr),*) => {$(
        /// `operator new(size_t, const nothrow_t&)` and the array form: null on failure.
        #[no_mangle]
        pub extern "C" fn $name(size: usize, _nt: *const c_void) -> *mut c_void {
            new_attempt(size, 0, $family as u32) as *mut c_void
        }
    )*};
}

macro_rules! new_aligned_nothrow {
    ($($name:ident = $family:expr),*) => {$(
        /// `operator new(size_t, align_val_t, const nothrow_t&)` and the array form.
        #[no_mangle]
        pub extern "C" fn $name(size: usize, align: usize, _nt: *const c_void) -> *mut c_void {
            new_attempt(size, align, $family as u32) as *mut c_void
        }
    )*};
}

new_nothrow!(_ZnwmRKSt9nothrow_t = Family::New, _ZnamRKSt9nothrow_t = Family::NewArray);
new_aligned_nothrow!(
    _ZnwmSt11align_val_tRKSt9nothrow_t = Family::New,
    _ZnamSt11align_val_tRKSt9nothrow_t = Family::NewArray
);

macro_rules! delete {
    ($($name:ident ( $($arg:ident : $ty:ty),* ) = $op:literal, $family:expr;)*) => {$(
        /// An unsized `operator delete` variant (the alignment and `nothrow` are not needed).
        #[no_mangle]
        pub extern "C" fn $name(p: *mut c_void $(, $arg: $ty)*) {
            $(let _ = $arg;)*
            free_keep_errno(p, $op, $family)
        }
    )*};
}

delete!(
    _ZdlPv() = "operator delete", Family::New;
    _ZdaPv() = "operator delete[]", Family::NewArray;
    _ZdlPvSt11align_val_t(align: usize) = "operator delete", Family::New;
    _ZdaPvSt11align_val_t(align: usize) = "operator delete[]", Family::NewArray;
    _ZdlPvRKSt9nothrow_t(nt: *const c_void) = "operator delete", Family::New;
    _ZdaPvRKSt9nothrow_t(nt: *const c_void) = "operator delete[]", Family::NewArray;
    _ZdlPvSt11align_val_tRKSt9nothrow_t(align: usize, nt: *const c_void) = "operator delete", Family::New;
    _ZdaPvSt11align_val_tRKSt9nothrow_t(align: usize, nt: *const c_void) = "operator delete[]", Family::NewArray;
);

/// `free` told the object's size (or `op`, a sized deallocation function of `family`),
/// leaving `errno` alone.
#[inline]
fn free_sized_keep_errno(p: *mut c_void, size: usize, op: &'static str, family: Family) {
    let saved = sys::errno();
    heap::check_family(p as *mut u8, family, op);
    heap::free_sized(p as *mut u8, size, op);
    sys::set_errno(saved);
}

macro_rules! delete_sized {
    ($($name:ident ( $($arg:ident : $ty:ty),* ) = $op:literal, $family:expr;)*) => {$(
        /// A sized `operator delete` variant: the size must be the one given to `operator new`
        /// (C++14 [expr.delete]); another is reported as `size-mismatch`, as a deletion through
        /// a base class without a virtual destructor, or of the wrong type, would give.
        #[no_mangle]
        pub extern "C" fn $name(p: *mut c_void, size: usize $(, $arg: $ty)*) {
            $(let _ = $arg;)*
            free_sized_keep_errno(p, size, $op, $family)
        }
    )*};
}

delete_sized!(
    _ZdlPvm() = "operator delete", Family::New;
    _ZdaPvm() = "operator delete[]", Family::NewArray;
    _ZdlPvmSt11align_val_t(align: usize) = "operator delete", Family::New;
    _ZdaPvmSt11align_val_t(align: usize) = "operator delete[]", Family::NewArray;
);

// ---- C23 and glibc's internal names ---------------------------------------------------------

/// C23 `free_sized`: `size` must be the size the object was allocated with (for `calloc`, the
/// product); another is reported as `size-mismatch`.
#[no_mangle]
pub extern "C" fn free_sized(p: *mut c_void, size: usize) {
    free_sized_keep_errno(p, size, "free_sized", Family::Malloc)
}

/// C23 `free_aligned_sized`, for objects from `aligned_alloc`: as `free_sized`.
#[no_mangle]
pub extern "C" fn free_aligned_sized(p: *mut c_void, align: usize, size: usize) {
    let _ = align;
    free_sized_keep_errno(p, size, "free_aligned_sized", Family::Malloc)
}

// glibc exports its allocator under these names as well, and some programs call them directly
// (wrappers that define `malloc` themselves and forward to `__libc_malloc`). Left to glibc,
// they would hand out, or free, memory of another heap than the one `free` and `malloc` use.

#[no_mangle]
pub extern "C" fn __libc_malloc(size: usize) -> *mut c_void {
    malloc(size)
}

#[no_mangle]
pub extern "C" fn __libc_free(p: *mut c_void) {
    free_keep_errno(p, "free", Family::Malloc)
}

#[no_mangle]
pub extern "C" fn __libc_calloc(n: usize, size: usize) -> *mut c_void {
    calloc(n, size)
}

#[no_mangle]
pub extern "C" fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void {
    realloc(p, size)
}

#[no_mangle]
pub extern "C" fn __libc_memalign(align: usize, size: usize) -> *mut c_void {
    memalign(align, size)
}

#[no_mangle]
pub extern "C" fn __libc_valloc(size: usize) -> *mut c_void {
    valloc(size)
}

#[no_mangle]
pub extern "C" fn __libc_pvalloc(size: usize) -> *mut c_void {
    pvalloc(size)
}

#[no_mangle]
pub extern "C" fn __libc_mallinfo() -> Mallinfo {
    mallinfo()
}

// ---- signals ----------------------------------------------------------------------------
//
// The allocator's SIGSEGV/SIGBUS handler must stay installed; see the `fault` module.

/// # Safety
/// The C contract of `sigaction`.
#[no_mangle]
pub unsafe extern "C" fn sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    crate::ensure_init();
    // SAFETY: forwarded under the same contract.
    unsafe { crate::fault::sigaction(sig, act, old) }
}

/// # Safety
/// The C contract of `sigaltstack`.
#[no_mangle]
pub unsafe extern "C" fn sigaltstack(ss: *const libc::stack_t, oss: *mut libc::stack_t) -> c_int {
    // SAFETY: forwarded under the same contract.
    unsafe { crate::fault::sigaltstack(ss, oss) }
}

/// `signal` with glibc's (BSD) semantics, through our `sigaction`.
#[no_mangle]
pub extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    set_handler(sig, handler, libc::SA_RESTART, true)
}

/// `bsd_signal`: another name of `signal`.
#[no_mangle]
pub extern "C" fn bsd_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    signal(sig, handler)
}

/// `ssignal`: another name of `signal`.
#[no_mangle]
pub extern "C" fn ssignal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    signal(sig, handler)
}

/// `__sysv_signal`: System V's `signal`, which a program built for a strict C standard (zstd's
/// `-std=c99`) calls by the name `signal`: the handler is reset to the default as it runs and
/// its signal is not blocked meanwhile; calls it interrupts are not restarted. Through our
/// `sigaction`: zstd's crash handler, installed so behind the library's back, took the SIGBUS
/// of a page the kernel had paged out, and zstd died of it.
#[no_mangle]
pub extern "C" fn __sysv_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    set_handler(sig, handler, libc::SA_RESETHAND | libc::SA_NODEFER, false)
}

/// `sysv_signal`: another name of `__sysv_signal`.
#[no_mangle]
pub extern "C" fn sysv_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    __sysv_signal(sig, handler)
}

/// Sets `handler` for `sig` through our `sigaction`, with `flags`, blocking `sig` in the
/// handler if `block_self`; the previous handler, or `SIG_ERR`.
fn set_handler(sig: c_int, handler: libc::sighandler_t, flags: c_int, block_self: bool) -> libc::sighandler_t {
    if handler == libc::SIG_ERR {
        sys::set_errno(libc::EINVAL);
        return libc::SIG_ERR;
    }
    // SAFETY: plain structures passed to our sigaction.
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        let mut old: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_flags = flags;
        if block_self && (1..=64).contains(&sig) {
            sa.sa_mask = one_signal(sig);
        }
        if sigaction(sig, &sa, &mut old) != 0 {
            return libc::SIG_ERR;
        }
        old.sa_sigaction
    }
}

/// A set of the one signal `sig` (1..=64).
fn one_signal(sig: c_int) -> libc::sigset_t {
    // SAFETY: an all-zero sigset is the empty set.
    let mut set: libc::sigset_t = unsafe { core::mem::zeroed() };
    crate::fault::add_signal(&mut set, sig);
    set
}

/// Whether `sig` is a signal number.
fn valid_signal(sig: c_int) -> bool {
    if (1..=64).contains(&sig) {
        return true;
    }
    sys::set_errno(libc::EINVAL);
    false
}

/// `sigset` (System V): `SIG_HOLD` blocks the signal, another disposition is set (with an
/// empty mask and no flags) and unblocks it; the previous disposition, or `SIG_HOLD` if the
/// signal was blocked. Through our `sigaction` and mask: vim installs its handlers of
/// SIGSEGV and SIGBUS so.
#[no_mangle]
pub extern "C" fn sigset(sig: c_int, disp: libc::sighandler_t) -> libc::sighandler_t {
    const SIG_HOLD: libc::sighandler_t = 2;
    if disp == libc::SIG_ERR || !valid_signal(sig) {
        sys::set_errno(libc::EINVAL);
        return libc::SIG_ERR;
    }
    let set = one_signal(sig);
    // SAFETY: an all-zero sigset is valid.
    let mut was: libc::sigset_t = unsafe { core::mem::zeroed() };
    let blocked = |was: &libc::sigset_t| crate::fault::has_signal(was, sig);
    if disp == SIG_HOLD {
        if set_mask(libc::SIG_BLOCK, &set, &mut was) != 0 {
            return libc::SIG_ERR;
        }
        if blocked(&was) {
            return SIG_HOLD;
        }
        // SAFETY: an all-zero sigaction is valid to be written over.
        let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: our sigaction with a null new action and a valid old one.
        if unsafe { sigaction(sig, ptr::null(), &mut old) } != 0 {
            return libc::SIG_ERR;
        }
        return old.sa_sigaction;
    }
    let old = set_handler(sig, disp, 0, false);
    if old == libc::SIG_ERR || set_mask(libc::SIG_UNBLOCK, &set, &mut was) != 0 {
        return libc::SIG_ERR;
    }
    if blocked(&was) {
        SIG_HOLD
    } else {
        old
    }
}

/// `sigignore` (System V): the signal ignored, through our `sigaction`.
#[no_mangle]
pub extern "C" fn sigignore(sig: c_int) -> c_int {
    if !valid_signal(sig) || set_handler(sig, libc::SIG_IGN, 0, false) == libc::SIG_ERR {
        -1
    } else {
        0
    }
}

/// `sighold` (System V): the signal blocked, through our mask (which never blocks SIGSEGV
/// and SIGBUS).
#[no_mangle]
pub extern "C" fn sighold(sig: c_int) -> c_int {
    if !valid_signal(sig) {
        return -1;
    }
    set_mask(libc::SIG_BLOCK, &one_signal(sig), ptr::null_mut())
}

/// `sigrelse` (System V): the signal unblocked.
#[no_mangle]
pub extern "C" fn sigrelse(sig: c_int) -> c_int {
    if !valid_signal(sig) {
        return -1;
    }
    set_mask(libc::SIG_UNBLOCK, &one_signal(sig), ptr::null_mut())
}

/// `sigblock` (BSD): the signals of the old-style mask (bit `n - 1` for signal `n`, up to 32)
/// blocked through our mask; the old-style mask before.
#[no_mangle]
pub extern "C" fn sigblock(mask: c_int) -> c_int {
    old_style_mask(libc::SIG_BLOCK, mask)
}

/// `sigsetmask` (BSD): the old-style mask set through our mask; the one before.
#[no_mangle]
pub extern "C" fn sigsetmask(mask: c_int) -> c_int {
    old_style_mask(libc::SIG_SETMASK, mask)
}

fn old_style_mask(how: c_int, mask: c_int) -> c_int {
    // SAFETY: all-zero sigsets are empty.
    let (mut set, mut was): (libc::sigset_t, libc::sigset_t) = unsafe { core::mem::zeroed() };
    // SAFETY: glibc's sigset_t is an array of unsigned longs; the first holds signals 1..=64.
    unsafe { *(&mut set as *mut libc::sigset_t as *mut u64) = mask as u32 as u64 };
    if set_mask(how, &set, &mut was) != 0 {
        return -1;
    }
    // SAFETY: as above.
    unsafe { *(&was as *const libc::sigset_t as *const u64) as u32 as c_int }
}

/// The mask change itself, as glibc does it: its two internal signals (cancellation and
/// set-id broadcast, 32 and 33) are never blocked either.
fn set_mask(how: c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> c_int {
    // SAFETY: an all-zero sigset is valid.
    let mut copy: libc::sigset_t = unsafe { core::mem::zeroed() };
    let mut set = crate::fault::unblockable(how, set, &mut copy);
    let mut copy2: libc::sigset_t;
    if !set.is_null() && how != libc::SIG_UNBLOCK {
        // SAFETY: `set` is valid per the caller's contract.
        unsafe { copy2 = *set };
        // Not with sigdelset: glibc's refuses its internal signals and sets errno.
        crate::fault::clear_signal(&mut copy2, 32);
        crate::fault::clear_signal(&mut copy2, 33);
        set = &copy2;
    }
    // SAFETY: rt_sigprocmask with valid (or null) pointers and the kernel's sigset size.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, how, set, old, 8usize) as c_int }
}

/// # Safety
/// The C contract of `sigprocmask`.
#[no_mangle]
pub unsafe extern "C" fn sigprocmask(how: c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> c_int {
    if set_mask(how, set, old) == 0 {
        0
    } else {
        -1
    }
}

/// # Safety
/// The C contract of `pthread_sigmask`.
#[no_mangle]
pub unsafe extern "C" fn pthread_sigmask(how: c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> c_int {
    if set_mask(how, set, old) == 0 {
        0
    } else {
        sys::errno()
    }
}

/// The C library's `fcntl` (resolved once; the system call if there is none).
static REAL_FCNTL: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// `fcntl`. The library's own descriptors (the pool's memory file, its userfaultfd, the copy
/// of standard error kept for a leak report) look closed to the program's calls that read or
/// set their flags or duplicate them (`EBADF`). bash takes a close-on-exec descriptor above 9
/// for one it saved for itself and puts it back after a redirection: `exec 800>file` in a
/// script left the pool's memory file at 800, and the script's writes to 800 went into the
/// heap (corrupted objects, reported in detect mode as an overflow). Seen as closed, the
/// number is simply taken by the script's file; the library notices that its descriptor is
/// gone and does without it. A lock record (or owner) in a heap object whose page lost its
/// entry is mapped again and the call made again after `EFAULT` (see `io`). (C declares
/// `fcntl` variadic; on x86-64 the optional argument travels as this fixed one.)
///
/// # Safety
/// The C contract of `fcntl(2)`.
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    let flags_or_dup = matches!(
        cmd,
        libc::F_GETFD | libc::F_SETFD | libc::F_GETFL | libc::F_SETFL | libc::F_DUPFD | libc::F_DUPFD_CLOEXEC
    );
    if flags_or_dup && crate::is_ready() && own_descriptor(fd) {
        sys::set_errno(libc::EBADF);
        return -1;
    }
    let Some(real) = sys::next_symbol(&REAL_FCNTL, c"fcntl") else {
        // SAFETY: the system call with the caller's arguments.
        return unsafe { libc::syscall(libc::SYS_fcntl, fd, cmd, arg) } as c_int;
    };
    // SAFETY: `real` is the C library's `fcntl`; its optional argument travels as `arg`.
    let real: unsafe extern "C" fn(c_int, c_int, usize) -> c_int = unsafe { core::mem::transmute(real) };
    // SAFETY: the caller's arguments.
    let call = || unsafe { real(fd, cmd, arg) } as isize;
    match record_bytes(cmd) {
        // A lock record or owner in a heap object whose page lost its entry: the kernel reads
        // it before it acts (and writes `F_GETLK`'s answer after acting on nothing), so the
        // call is made again after `EFAULT` (see `io`).
        Some(n) => again(call, || crate::alias::map_again(arg, n)) as c_int,
        None => call() as c_int,
    }
}

/// `io::again`: `call` made again after `EFAULT` while `heal` maps pages again. The build
/// linked into a program (`embed`, the coverage-guided fuzzer) has no I/O wrappers: one call.
#[cfg(not(feature = "embed"))]
fn again(call: impl FnMut() -> isize, heal: impl Fn() -> usize) -> isize {
    crate::io::again(call, heal)
}

#[cfg(feature = "embed")]
fn again(mut call: impl FnMut() -> isize, _heal: impl Fn() -> usize) -> isize {
    call()
}

/// The size of the record `fcntl`'s command `cmd` reads or writes through its argument.
fn record_bytes(cmd: c_int) -> Option<usize> {
    match cmd {
        libc::F_GETLK | libc::F_SETLK | libc::F_SETLKW | libc::F_OFD_GETLK | libc::F_OFD_SETLK | libc::F_OFD_SETLKW => {
            Some(core::mem::size_of::<libc::flock>())
        }
        // F_GETOWN_EX, F_SETOWN_EX (a `struct f_owner_ex`).
        15 | 16 => Some(8),
        _ => None,
    }
}

/// `fcntl64`, the same call under the name large-file builds use.
///
/// # Safety
/// The C contract of `fcntl(2)`.
#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { fcntl(fd, cmd, arg) }
}

/// Whether `fd` is one of the library's own descriptors (its number, and still its file).
pub fn own_descriptor(fd: c_int) -> bool {
    crate::pool::POOL.is_own_fd(fd)
        || crate::alias::is_own_uffd(fd)
        || crate::leak::is_stderr_copy(fd)
        || crate::report::is_report_file(fd)
}

/// The C library's `dlopen` (resolved once).
static REAL_DLOPEN: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// `dlopen`, without `RTLD_DEEPBIND`. A library opened with it looks its symbols up in itself
/// and its own dependencies first, and the C library, a dependency of nearly every library,
/// defines `malloc` and `free`: the library would free this allocator's objects with the C
/// library's `free`, and hand it the C library's (PHP opens its extensions so: `php` aborted
/// at start-up with `free(): invalid pointer`). Without the flag it shares the program's
/// allocator, as it does under AddressSanitizer, for which PHP leaves the flag out itself;
/// what the flag is for, keeping the library's own symbols from being overridden by the
/// program's, is lost for those symbols the program also defines. `verbose=1` says so when
/// it happens.
///
/// # Safety
/// The C contract of `dlopen(3)`.
#[no_mangle]
pub unsafe extern "C" fn dlopen(file: *const core::ffi::c_char, flags: c_int) -> *mut c_void {
    let Some(real) = sys::next_symbol(&REAL_DLOPEN, c"dlopen") else { return ptr::null_mut() };
    let mut flags = flags;
    if flags & libc::RTLD_DEEPBIND != 0 {
        flags &= !libc::RTLD_DEEPBIND;
        if crate::options().verbose {
            crate::report::say(format_args!(
                "dlopen with RTLD_DEEPBIND: opened without it, so that the library shares this allocator"
            ));
        }
    }
    // SAFETY: `real` is the C library's `dlopen`, which has this signature.
    let real: unsafe extern "C" fn(*const core::ffi::c_char, c_int) -> *mut c_void =
        unsafe { core::mem::transmute(real) };
    // SAFETY: the caller's arguments, the flag aside.
    unsafe { real(file, flags) }
}

#[cfg(target_arch = "x86_64")]
extern "C" {
    /// glibc's `clone`, under the name it also exports it by (`clone` is its weak alias).
    fn __clone(
        f: Option<crate::fork::clone::CloneFn>,
        stack: *mut c_void,
        flags: c_int,
        arg: *mut c_void,
        parent_tid: *mut libc::pid_t,
        tls: *mut c_void,
        child_tid: *mut libc::pid_t,
    ) -> c_int;
}

/// glibc's `clone`. A child that does not share its parent's memory (no `CLONE_VM`) is a fork
/// in all but name, but glibc runs no fork handlers for it: it would write the pages of the
/// pool, a shared memory file, that its parent uses (container runtimes and sandboxes make
/// children this way). Such a clone goes through the same steps as `fork` (`fork::prepare`,
/// then `fork::child` in the child before the program's function, `fork::parent` in the
/// parent). Clones that share the memory (threads, `posix_spawn`'s `CLONE_VM|CLONE_VFORK`)
/// pass straight through. (C declares it variadic; on x86-64 the optional arguments travel
/// exactly as these fixed ones, and glibc reads them only when `flags` asks.)
///
/// # Safety
/// The C contract of `clone(2)`.
#[cfg(target_arch = "x86_64")]
#[no_mangle]
pub unsafe extern "C" fn clone(
    f: Option<crate::fork::clone::CloneFn>,
    stack: *mut c_void,
    flags: c_int,
    arg: *mut c_void,
    parent_tid: *mut libc::pid_t,
    tls: *mut c_void,
    child_tid: *mut libc::pid_t,
) -> c_int {
    let Some(function) = f.filter(|_| flags & libc::CLONE_VM == 0 && crate::is_ready()) else {
        // SAFETY: the caller's own arguments, passed on unchanged.
        return unsafe { __clone(f, stack, flags, arg, parent_tid, tls, child_tid) };
    };
    crate::fork::prepare();
    // On this stack frame; the child reads its copy of it (its memory is a copy of ours).
    let start = crate::fork::clone::CloneStart { function, arg };
    // SAFETY: the caller's arguments, but for the function, which runs ours first in the child.
    let r = unsafe {
        __clone(
            Some(crate::fork::clone::clone_child),
            stack,
            flags,
            &start as *const crate::fork::clone::CloneStart as *mut c_void,
            parent_tid,
            tls,
            child_tid,
        )
    };
    let saved = sys::errno();
    crate::fork::parent();
    sys::set_errno(saved);
    r
}

static REAL_FORK_NO_HANDLERS: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// `_Fork` (glibc 2.34, POSIX 2024): a fork that runs no fork handlers, so that a signal
/// handler may call it. Without ours, parent and child would write the same pages of the pool
/// (a shared memory file), each seeing the other's writes. It takes the same steps as `fork`
/// (`fork::prepare`, then `fork::child` or `fork::parent`); glibc's `fork` calls its own
/// `_Fork` directly, not this one. In a handler that interrupted the allocator holding one
/// of its locks, its child exits 127 as `fork`'s does (`fork::prepare`). Without a `_Fork` in
/// the C library, fails with ENOSYS (no program built against one can call it).
#[no_mangle]
#[allow(non_snake_case)]
pub extern "C" fn _Fork() -> libc::pid_t {
    let Some(real) = sys::next_symbol(&REAL_FORK_NO_HANDLERS, c"_Fork") else {
        sys::set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: the C library's `_Fork`, which takes no arguments.
    let real: extern "C" fn() -> libc::pid_t = unsafe { core::mem::transmute(real) };
    crate::fork::around(|| real())
}

/// `mlockall`. Locked mappings refuse `MADV_DONTNEED` and `MADV_REMOVE`, so revocation would
/// fail (the library aborts rather than leave a freed object reachable), and locking the
/// current or future mappings (`MCL_CURRENT`, `MCL_FUTURE`) would also fill every page of the
/// pool's views and mirrors, tens of GiB of address space: an OOM kill (of other processes
/// too, by a global OOM killer). So `MCL_ONFAULT` is always added (nothing is filled by the
/// call itself), the pool's views and the alias arena are unlocked again, and so is every
/// view made later (`sys::map_shared`) while `MCL_FUTURE` holds. For `MCL_CURRENT` without
/// `MCL_ONFAULT`, the program's own mappings are then filled and locked as the kernel would
/// have done (`maps::after_mlockall`); its later mappings under `MCL_FUTURE` are locked as
/// they are touched rather than filled when made, and heap objects are not locked
/// (docs/usage.md).
#[no_mangle]
pub extern "C" fn mlockall(flags: c_int) -> c_int {
    if !crate::is_ready() {
        // SAFETY: plain system call.
        return unsafe { libc::syscall(libc::SYS_mlockall, flags) } as c_int;
    }
    // SAFETY: plain system call.
    let r = unsafe { libc::syscall(libc::SYS_mlockall, flags | libc::MCL_ONFAULT) } as c_int;
    if r == 0 {
        let saved = sys::errno();
        if flags & libc::MCL_FUTURE != 0 {
            sys::FUTURE_LOCKED.store(true, core::sync::atomic::Ordering::Relaxed);
        }
        crate::maps::after_mlockall(flags & libc::MCL_CURRENT != 0 && flags & libc::MCL_ONFAULT == 0);
        sys::set_errno(saved);
    }
    r
}

/// `munlockall`: mappings made from now on are no longer locked.
#[no_mangle]
pub extern "C" fn munlockall() -> c_int {
    // SAFETY: plain system call.
    let r = unsafe { libc::syscall(libc::SYS_munlockall) } as c_int;
    if r == 0 {
        sys::FUTURE_LOCKED.store(false, core::sync::atomic::Ordering::Relaxed);
    }
    r
}

// ---- seccomp ----------------------------------------------------------------------------
//
// Filters the program installs while it runs let the allocator's own calls through (see the
// `seccomp` module).

/// A system call's result (minus the error number on failure) as C functions return it:
/// -1 with `errno` set, or the result.
fn c_result(r: isize) -> isize {
    if r < 0 {
        sys::set_errno(-r as c_int);
        -1
    } else {
        r
    }
}

/// `prctl`; `PR_SET_SECCOMP` with a filter goes through `seccomp::prctl`. A thread's name
/// (`PR_SET_NAME`, `PR_GET_NAME`) in a heap object whose page lost its entry is mapped again
/// and the call made again after `EFAULT` (see `io`). (C declares it variadic; on x86-64 the
/// optional arguments travel exactly as these fixed ones.)
#[no_mangle]
pub extern "C" fn prctl(option: c_int, a2: usize, a3: usize, a4: usize, a5: usize) -> c_int {
    let call = || c_result(crate::seccomp::prctl(option as usize, a2, a3, a4, a5));
    if option == libc::PR_SET_NAME || option == libc::PR_GET_NAME {
        // The name and its NUL: at most 16 bytes (`TASK_COMM_LEN`).
        return again(call, || crate::alias::map_again(a2, 16)) as c_int;
    }
    call() as c_int
}

/// glibc's `syscall(number, ...)`, the same instructions: the number and six arguments moved
/// into the kernel's registers, -1 and `errno` on failure. Only `SYS_seccomp` goes elsewhere
/// (`seccomp_call`: libseccomp installs filters with it), and so do forks made with it
/// (`forking_call`), `SYS_rt_sigaction` (`sigaction_call`), `SYS_rt_sigprocmask`
/// (`mask_call`) and `SYS_sigaltstack` (`altstack_call`). These calls come from the library's
/// code, but are the program's: `seccomp` exempts none of them (`syscall_resume`), and those
/// sent elsewhere are made with calls its exemptions do not cover either (the C library's
/// `sigaction`; blocking, not unblocking, signals; `sigaltstack`). Written without a stack frame, so
/// that a call that returns twice or on another stack (`SYS_clone`, `SYS_vfork`) behaves as
/// with glibc's.
///
/// # Safety
/// The C contract of `syscall(2)`.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn syscall() -> core::ffi::c_long {
    core::arch::naked_asm!(
        "cmp rdi, {seccomp}",
        "je {filtered}",
        "cmp rdi, {rt_sigaction}",
        "je {sigaction_call}",
        "cmp rdi, {sigaltstack}",
        "je {altstack_call}",
        // Unblocking changes nothing here: made from the program's own `syscall`, its seccomp
        // filter (which lets the library's own unblocking through) still judges it.
        "cmp rdi, {rt_sigprocmask}",
        "jne 5f",
        "cmp rsi, {sig_unblock}",
        "jne {mask_call}",
        "5:",
        // fork, and clone or clone3 without CLONE_VM nor a stack of the child's own.
        "cmp rdi, {fork}",
        "je {forking}",
        "cmp rdi, {clone}",
        "jne 2f",
        "test esi, {clone_vm}",
        "jnz 3f",
        "test rdx, rdx",
        "jz {forking}",
        "jmp 3f",
        "2:",
        "cmp rdi, {clone3}",
        "jne 3f",
        "test rsi, rsi",
        "jz 3f",
        "test qword ptr [rsi], {clone_vm}",
        "jnz 3f",
        "cmp qword ptr [rsi + 40], 0",
        "je {forking}",
        "3:",
        "mov rax, rdi",
        "mov rdi, rsi",
        "mov rsi, rdx",
        "mov rdx, rcx",
        "mov r10, r8",
        "mov r8, r9",
        "mov r9, [rsp + 8]",
        "syscall",
        ".globl nevermore_syscall_resume",
        ".hidden nevermore_syscall_resume",
        "nevermore_syscall_resume:",
        "cmp rax, -4095",
        "mov rdi, rax",
        "jae {failed}",
        "ret",
        seccomp = const libc::SYS_seccomp,
        filtered = sym seccomp_call,
        rt_sigaction = const libc::SYS_rt_sigaction,
        sigaction_call = sym sigaction_call,
        rt_sigprocmask = const libc::SYS_rt_sigprocmask,
        mask_call = sym mask_call,
        sig_unblock = const libc::SIG_UNBLOCK,
        sigaltstack = const libc::SYS_sigaltstack,
        altstack_call = sym altstack_call,
        fork = const libc::SYS_fork,
        clone = const libc::SYS_clone,
        clone3 = const libc::SYS_clone3,
        clone_vm = const libc::CLONE_VM,
        forking = sym forking_call,
        failed = sym syscall_failed,
    )
}

extern "C" {
    /// The instruction after the `syscall` instruction of `syscall` (where the kernel sees
    /// the program's calls made through it come from).
    static nevermore_syscall_resume: u8;
}

/// Where the program's calls through `syscall` come from, for `seccomp`: the library's own
/// calls are let through its filters, but not those the program makes through `syscall`.
pub fn syscall_resume() -> usize {
    (&raw const nevermore_syscall_resume) as usize
}

/// `syscall(SYS_fork)`, or `SYS_clone`/`SYS_clone3` making a process that does not share the
/// memory and goes on on a copy of this stack, jumped to from `syscall` with its registers (the
/// sixth argument on the stack): a fork in all but name, which glibc's `fork` would have run
/// the library's fork handlers around. Without them the child would share the pool's pages
/// (a shared memory file) with its parent, and each would write the other's heap (vsftpd makes
/// its per-connection processes so). So they run here, as around `fork`.
#[allow(clippy::too_many_arguments)]
extern "C" fn forking_call(
    nr: core::ffi::c_long,
    a1: usize,
    a2: usize,
    a3: usize,
    a4: usize,
    a5: usize,
    a6: usize,
) -> core::ffi::c_long {
    // SAFETY: the program's own call; the child goes on in a copy of this frame.
    let r = crate::fork::around(|| unsafe { sys::raw_syscall(nr, [a1, a2, a3, a4, a5, a6]) });
    c_result(r) as core::ffi::c_long
}

/// `syscall(SYS_seccomp, op, flags, args)`, jumped to from `syscall` with its registers.
extern "C" fn seccomp_call(_nr: core::ffi::c_long, op: usize, flags: usize, args: usize) -> core::ffi::c_long {
    c_result(crate::seccomp::seccomp(op, flags, args)) as core::ffi::c_long
}

/// `syscall(SYS_rt_sigaction, sig, act, old, 8)`, jumped to from `syscall` with its registers:
/// made through our `sigaction`, as the C library's would be. Made as it was, the program's
/// SIGSEGV or SIGBUS handler would replace the library's (a use-after-free would reach the
/// program's handler instead of a report, and so would the fault of a live page that lost its
/// entry), and other handlers would not go through the relay. The signals the C library keeps
/// for itself (32 and 33) and other sizes of signal sets go to the kernel as they are.
extern "C" fn sigaction_call(
    nr: core::ffi::c_long,
    sig: usize,
    act: usize,
    old: usize,
    setsize: usize,
) -> core::ffi::c_long {
    const SIGRTMIN_KERNEL: usize = 32;
    if setsize != 8 || sig == SIGRTMIN_KERNEL || sig == SIGRTMIN_KERNEL + 1 || sig == 0 || sig > 64 {
        // SAFETY: the program's own call, made as it asked.
        return c_result(unsafe { sys::raw_syscall(nr, [sig, act, old, setsize, 0, 0]) }) as core::ffi::c_long;
    }
    crate::ensure_init();
    // SAFETY: a `sigaction` record is plain data: all zeroes is a valid one.
    let mut new: libc::sigaction = unsafe { core::mem::zeroed() };
    if act != 0 {
        // SAFETY: `act` points to the kernel's record per the contract of `rt_sigaction`.
        let k = unsafe { core::ptr::read_unaligned(act as *const sys::KernelSigaction) };
        new.sa_sigaction = k.handler;
        new.sa_flags = k.flags as u32 as c_int;
        new.sa_restorer = (k.restorer != 0).then(|| {
            // SAFETY: a restorer is code the kernel jumps to, as C takes it.
            unsafe { core::mem::transmute::<usize, extern "C" fn()>(k.restorer) }
        });
        // SAFETY: the first 8 bytes of the C library's set are the kernel's set.
        unsafe { core::ptr::write(&mut new.sa_mask as *mut libc::sigset_t as *mut u64, k.mask) };
    }
    // SAFETY: as above.
    let mut before: libc::sigaction = unsafe { core::mem::zeroed() };
    // SAFETY: both records are ours.
    let r = unsafe {
        crate::fault::sigaction(
            sig as c_int,
            if act != 0 { &new } else { core::ptr::null() },
            if old != 0 { &mut before } else { core::ptr::null_mut() },
        )
    };
    if r == 0 && old != 0 {
        let k = sys::KernelSigaction {
            handler: before.sa_sigaction,
            flags: before.sa_flags as u32 as u64,
            restorer: before.sa_restorer.map_or(0, |f| f as usize),
            // SAFETY: the first 8 bytes of the C library's set, as above.
            mask: unsafe { core::ptr::read(&before.sa_mask as *const libc::sigset_t as *const u64) },
        };
        // SAFETY: `old` points to a record of the kernel's per the contract of `rt_sigaction`.
        unsafe { core::ptr::write_unaligned(old as *mut sys::KernelSigaction, k) };
    }
    r as core::ffi::c_long
}

/// `syscall(SYS_rt_sigprocmask, how, set, old, 8)` with `how` other than `SIG_UNBLOCK`, jumped
/// to from `syscall` with its registers: SIGSEGV and SIGBUS are taken out of a set to block, as
/// `sigprocmask` does. With them blocked, the fault of a live page that lost its entry (a
/// pageout, the program's own `MADV_DONTNEED`) killed the process instead of being mended, and
/// a use-after-free in detect mode killed it without a report. The library's own calls come
/// here too, with sets that already leave those two alone.
extern "C" fn mask_call(
    nr: core::ffi::c_long,
    how: usize,
    set: usize,
    old: usize,
    setsize: usize,
) -> core::ffi::c_long {
    let mask: u64;
    let set = if set != 0 && setsize == 8 {
        // SAFETY: `set` points to the kernel's 8-byte set per the contract of `rt_sigprocmask`.
        mask = crate::fault::unblockable_mask(how as c_int, unsafe { core::ptr::read_unaligned(set as *const u64) });
        &mask as *const u64 as usize
    } else {
        set
    };
    // SAFETY: the program's call, with our copy of its set (live across the call).
    let r = unsafe { sys::raw_syscall(nr, [how, set, old, setsize, 0, 0]) };
    c_result(r) as core::ffi::c_long
}

/// `syscall(SYS_sigaltstack, ss, oss)`, jumped to from `syscall` with its registers: through
/// `fault::sigaltstack`, so that an alternate stack in a heap object is replaced for the kernel
/// by one of the library's (the kernel's `stack_t` is the C library's). Set so, a stack in the
/// heap went to the kernel as it was, and a signal arriving after the kernel had paged it out
/// killed the process.
extern "C" fn altstack_call(_nr: core::ffi::c_long, ss: usize, oss: usize) -> core::ffi::c_long {
    // SAFETY: the pointers per the contract of `sigaltstack(2)`.
    unsafe { crate::fault::sigaltstack(ss as *const libc::stack_t, oss as *mut libc::stack_t) as core::ffi::c_long }
}

/// A failed `syscall`: `errno` from the kernel's result, -1 returned.
extern "C" fn syscall_failed(result: isize) -> core::ffi::c_long {
    c_result(result) as core::ffi::c_long
}

// ---- resource limits --------------------------------------------------------------------
//
// An address-space limit the program sets leaves room for the library's reservations (see
// the `rlimit` module); other limits pass unchanged.

/// # Safety
/// The C contract of `getrlimit`.
#[no_mangle]
pub unsafe extern "C" fn getrlimit(resource: u32, out: *mut crate::rlimit::Rlimit) -> c_int {
    // SAFETY: forwarded under the same contract.
    c_result(unsafe { crate::rlimit::prlimit(resource, core::ptr::null(), out) }) as c_int
}

/// # Safety
/// The C contract of `getrlimit64`.
#[no_mangle]
pub unsafe extern "C" fn getrlimit64(resource: u32, out: *mut crate::rlimit::Rlimit) -> c_int {
    // SAFETY: forwarded under the same contract.
    unsafe { getrlimit(resource, out) }
}

/// # Safety
/// The C contract of `setrlimit`.
#[no_mangle]
pub unsafe extern "C" fn setrlimit(resource: u32, new: *const crate::rlimit::Rlimit) -> c_int {
    // SAFETY: forwarded under the same contract.
    c_result(unsafe { crate::rlimit::prlimit(resource, new, core::ptr::null_mut()) }) as c_int
}

/// # Safety
/// The C contract of `setrlimit64`.
#[no_mangle]
pub unsafe extern "C" fn setrlimit64(resource: u32, new: *const crate::rlimit::Rlimit) -> c_int {
    // SAFETY: forwarded under the same contract.
    unsafe { setrlimit(resource, new) }
}

/// # Safety
/// The C contract of `prlimit`.
#[no_mangle]
pub unsafe extern "C" fn prlimit(
    pid: libc::pid_t,
    resource: u32,
    new: *const crate::rlimit::Rlimit,
    old: *mut crate::rlimit::Rlimit,
) -> c_int {
    if pid != 0 && pid as u32 != sys::getpid() {
        // Another process's limits: as they are.
        // SAFETY: the caller's records, passed on (in locals when in heap objects).
        let r = unsafe {
            crate::rlimit::through_locals(new, old, |n, o| {
                sys::raw_syscall(libc::SYS_prlimit64, [pid as usize, resource as usize, n as usize, o as usize, 0, 0])
            })
        };
        return c_result(r) as c_int;
    }
    // SAFETY: forwarded under the same contract.
    c_result(unsafe { crate::rlimit::prlimit(resource, new, old) }) as c_int
}

/// # Safety
/// The C contract of `prlimit64`.
#[no_mangle]
pub unsafe extern "C" fn prlimit64(
    pid: libc::pid_t,
    resource: u32,
    new: *const crate::rlimit::Rlimit,
    old: *mut crate::rlimit::Rlimit,
) -> c_int {
    // SAFETY: forwarded under the same contract.
    unsafe { prlimit(pid, resource, new, old) }
}
