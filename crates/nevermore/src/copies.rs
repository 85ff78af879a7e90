//! The C library's memory and string copies, held to the bounds of heap objects.
//!
//! A heap overflow is most often a copy of a length the attacker chose: `memcpy(buf, packet,
//! len)` into a fixed buffer writes over the live objects after it, which the program may use
//! (a callback, a length, a key) long before the canary is checked at `free`; and a copy *out*
//! of a heap object past its end (Heartbleed's `memcpy`) hands out what follows it, which no
//! canary ever sees. So `memcpy`, `memmove`, `mempcpy`, `memset`, `strcpy`, `stpcpy`, `strcat`,
//! `strncpy` and `strncat`, and their fortified names (`__memcpy_chk`, ...: see "The fortified
//! copies" below), when the program calls them on a heap buffer, look its object up first (as
//! the I/O calls do, `io::bounded_live`) and report a copy that would run past the end of a
//! live object before a byte is written (`heap-buffer-overflow`). A copy through a dangling
//! pointer is left to the alias engine: it traps in detect mode, and in prevent mode it reaches
//! only the dead object's own memory.
//!
//! Cost. A copy of at most `guard::CANARY` bytes is not looked at: starting inside an object
//! it can reach no further than the canary after it, which `free` checks. A buffer outside the
//! heap costs two comparisons and a table's look-up; a heap buffer its object's look-up
//! (`heap::object_at`, about 10 ns, more where the metadata has left the cache): up to 8 % of the
//! time of the real programs of the benchmarks (BENCHMARKS.md, "Copies held to their objects'
//! bounds"). `check_copies=0` turns the checks off.
//!
//! The library's own copies are not checked: each function is entered through a stub that
//! passes the caller's return address on, and a call from the library's own code (which the
//! compiler makes for its copies, and which may run on an object being set up) goes straight
//! to the C library's function. Until that function is known (the library's first steps), a
//! plain copy of its own does the work.

use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::io::{bounded_live as bounded, Way};

/// The C library's functions, found when the library is loaded (never looked up from inside
/// a copy: `dlsym` may allocate, and the allocator copies). Every copy goes through `memmove`:
/// the C library's `memcpy` is the same code on x86-64, and a program built before glibc 2.14
/// calls the `memcpy` of that time, which allowed overlapping buffers.
static MEMMOVE: AtomicUsize = AtomicUsize::new(0);
static MEMSET: AtomicUsize = AtomicUsize::new(0);

#[used]
#[link_section = ".init_array"]
static RESOLVE: extern "C" fn() = {
    extern "C" fn resolve() {
        let _ = crate::sys::next_symbol(&MEMMOVE, c"memmove");
        let _ = crate::sys::next_symbol(&MEMSET, c"memset");
    }
    resolve
};

type Copy = unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> *mut c_void;
type Fill = unsafe extern "C" fn(*mut c_void, c_int, usize) -> *mut c_void;

/// Whether the call came from the program (or another library), not from this library, and
/// copies are checked (`check_copies`).
#[inline(always)]
pub(crate) fn from_program(ret: usize) -> bool {
    // Unknown before initialisation: then no call is checked.
    crate::stack::own_text().is_some_and(|(lo, hi)| !(lo..hi).contains(&ret)) && crate::options().check_copies
}

/// Checks a copy of `n` bytes into `d` (and out of `s`, when given) made by the program.
#[inline(always)]
fn check(ret: usize, d: usize, s: Option<usize>, n: usize, op: &'static str) {
    if n > crate::guard::CANARY && from_program(ret) {
        bounded(d, n, Way::WouldWrite, op);
        if let Some(s) = s {
            bounded(s, n, Way::OutOf, op);
        }
    }
}

/// `n` bytes from `s` to `d` (which may overlap) through the C library's `memmove`, or, before
/// it is known, a plain copy.
///
/// # Safety
/// `d` and `s` valid for `n` bytes.
#[inline(always)]
unsafe fn move_bytes(d: *mut c_void, s: *const c_void, n: usize) {
    match MEMMOVE.load(Ordering::Relaxed) {
        // SAFETY: the C library's `memmove`, the caller's buffers.
        f if f != 0 => unsafe {
            core::mem::transmute::<usize, Copy>(f)(d, s, n);
        },
        // SAFETY: the caller's buffers; `rep movsb` copies forward (DF clear, as the ABI
        // keeps it), backward with DF set when `d` lies inside the source (then restored).
        _ => unsafe {
            if (d as usize).wrapping_sub(s as usize) >= n {
                core::arch::asm!("rep movsb", inout("rcx") n => _, inout("rdi") d => _, inout("rsi") s => _,
                    options(nostack, preserves_flags));
            } else {
                core::arch::asm!("std", "rep movsb", "cld", inout("rcx") n => _,
                    inout("rdi") (d as usize + n - 1) => _, inout("rsi") (s as usize + n - 1) => _,
                    options(nostack));
            }
        },
    }
}

/// Defines an exported copy function as a stub that passes its caller's return address on
/// (in the first free argument register) to `$checked`.
macro_rules! entry {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $checked:ident, $reg:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The C contract of the function.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            core::arch::naked_asm!(concat!("mov ", $reg, ", [rsp]"), "jmp {f}", f = sym $checked)
        }
    };
}

entry! {
    /// `memcpy`: see the module's notes.
    fn memcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void => memcpy_checked, "rcx"
}
entry! {
    /// `memmove`: see the module's notes.
    fn memmove(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void => memmove_checked, "rcx"
}
entry! {
    /// `mempcpy` (GNU; gnulib's programs call it): see the module's notes.
    fn mempcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void => mempcpy_checked, "rcx"
}
entry! {
    /// `__mempcpy` (what older headers made of `mempcpy`): see the module's notes.
    fn __mempcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void => __mempcpy_checked, "rcx"
}
entry! {
    /// `memset`: see the module's notes.
    fn memset(d: *mut c_void, c: c_int, n: usize) -> *mut c_void => memset_checked, "rcx"
}
entry! {
    /// `strcpy`: see the module's notes.
    fn strcpy(d: *mut c_char, s: *const c_char) -> *mut c_char => strcpy_checked, "rdx"
}
entry! {
    /// `stpcpy`: see the module's notes.
    fn stpcpy(d: *mut c_char, s: *const c_char) -> *mut c_char => stpcpy_checked, "rdx"
}
entry! {
    /// `strcat`: see the module's notes.
    fn strcat(d: *mut c_char, s: *const c_char) -> *mut c_char => strcat_checked, "rdx"
}
entry! {
    /// `strncpy`: see the module's notes.
    fn strncpy(d: *mut c_char, s: *const c_char, n: usize) -> *mut c_char => strncpy_checked, "rcx"
}
entry! {
    /// `strncat`: see the module's notes.
    fn strncat(d: *mut c_char, s: *const c_char, n: usize) -> *mut c_char => strncat_checked, "rcx"
}

// The fortified copies. A program built with `_FORTIFY_SOURCE` calls these where the compiler
// knows the size of the destination (`dl`, the last argument), and the C library aborts the
// call when it would write more than that. The object the buffer lies in is checked first
// (its size may be smaller than the type the compiler saw, and the report says more); then
// the C library's own rule, with its own message (`__chk_fail`).

entry! {
    /// `__memcpy_chk`: see "The fortified copies" in the module.
    fn __memcpy_chk(d: *mut c_void, s: *const c_void, n: usize, dl: usize) -> *mut c_void => memcpy_chk_checked, "r8"
}
entry! {
    /// `__memmove_chk`: see "The fortified copies" in the module.
    fn __memmove_chk(d: *mut c_void, s: *const c_void, n: usize, dl: usize) -> *mut c_void => memmove_chk_checked, "r8"
}
entry! {
    /// `__mempcpy_chk`: see "The fortified copies" in the module.
    fn __mempcpy_chk(d: *mut c_void, s: *const c_void, n: usize, dl: usize) -> *mut c_void => mempcpy_chk_checked, "r8"
}
entry! {
    /// `__memset_chk`: see "The fortified copies" in the module.
    fn __memset_chk(d: *mut c_void, c: c_int, n: usize, dl: usize) -> *mut c_void => memset_chk_checked, "r8"
}
entry! {
    /// `__strcpy_chk`: see "The fortified copies" in the module.
    fn __strcpy_chk(d: *mut c_char, s: *const c_char, dl: usize) -> *mut c_char => strcpy_chk_checked, "rcx"
}
entry! {
    /// `__stpcpy_chk`: see "The fortified copies" in the module.
    fn __stpcpy_chk(d: *mut c_char, s: *const c_char, dl: usize) -> *mut c_char => stpcpy_chk_checked, "rcx"
}
entry! {
    /// `__strcat_chk`: see "The fortified copies" in the module.
    fn __strcat_chk(d: *mut c_char, s: *const c_char, dl: usize) -> *mut c_char => strcat_chk_checked, "rcx"
}
entry! {
    /// `__strncpy_chk`: see "The fortified copies" in the module.
    fn __strncpy_chk(d: *mut c_char, s: *const c_char, n: usize, dl: usize) -> *mut c_char => strncpy_chk_checked, "r8"
}
entry! {
    /// `__strncat_chk`: see "The fortified copies" in the module.
    fn __strncat_chk(d: *mut c_char, s: *const c_char, n: usize, dl: usize) -> *mut c_char => strncat_chk_checked, "r8"
}

unsafe extern "C" {
    /// The C library's end of a fortified call that would overflow its destination: prints
    /// "*** buffer overflow detected ***: terminated" and aborts.
    fn __chk_fail() -> !;
}

/// The C library's rule for a fortified call that writes `n` bytes into a destination of `dl`.
#[inline(always)]
fn fortified(n: usize, dl: usize) {
    if n > dl {
        // SAFETY: takes no argument; does not return.
        unsafe { __chk_fail() }
    }
}

/// No fortified size: the plain functions.
const ANY: usize = usize::MAX;

/// `memcpy`/`memmove`/`mempcpy` and their fortified names (`dl`): `n` bytes from `s` to `d`
/// once checked.
#[inline(always)]
fn move_of(d: *mut c_void, s: *const c_void, n: usize, dl: usize, ret: usize, op: &'static str) {
    check(ret, d as usize, Some(s as usize), n, op);
    fortified(n, dl);
    // SAFETY: the caller's buffers.
    unsafe { move_bytes(d, s, n) };
}

extern "C" fn memcpy_checked(d: *mut c_void, s: *const c_void, n: usize, ret: usize) -> *mut c_void {
    move_of(d, s, n, ANY, ret, "memcpy");
    d
}

extern "C" fn memmove_checked(d: *mut c_void, s: *const c_void, n: usize, ret: usize) -> *mut c_void {
    move_of(d, s, n, ANY, ret, "memmove");
    d
}

extern "C" fn mempcpy_checked(d: *mut c_void, s: *const c_void, n: usize, ret: usize) -> *mut c_void {
    move_of(d, s, n, ANY, ret, "mempcpy");
    d.wrapping_byte_add(n)
}

extern "C" fn __mempcpy_checked(d: *mut c_void, s: *const c_void, n: usize, ret: usize) -> *mut c_void {
    move_of(d, s, n, ANY, ret, "__mempcpy");
    d.wrapping_byte_add(n)
}

extern "C" fn memcpy_chk_checked(d: *mut c_void, s: *const c_void, n: usize, dl: usize, ret: usize) -> *mut c_void {
    move_of(d, s, n, dl, ret, "__memcpy_chk");
    d
}

extern "C" fn memmove_chk_checked(d: *mut c_void, s: *const c_void, n: usize, dl: usize, ret: usize) -> *mut c_void {
    move_of(d, s, n, dl, ret, "__memmove_chk");
    d
}

extern "C" fn mempcpy_chk_checked(d: *mut c_void, s: *const c_void, n: usize, dl: usize, ret: usize) -> *mut c_void {
    move_of(d, s, n, dl, ret, "__mempcpy_chk");
    d.wrapping_byte_add(n)
}

/// `memset` and `__memset_chk`.
#[inline(always)]
fn fill_of(d: *mut c_void, c: c_int, n: usize, dl: usize, ret: usize, op: &'static str) -> *mut c_void {
    check(ret, d as usize, None, n, op);
    fortified(n, dl);
    // SAFETY: the caller's buffer.
    unsafe { fill(d, c, n) };
    d
}

extern "C" fn memset_checked(d: *mut c_void, c: c_int, n: usize, ret: usize) -> *mut c_void {
    fill_of(d, c, n, ANY, ret, "memset")
}

extern "C" fn memset_chk_checked(d: *mut c_void, c: c_int, n: usize, dl: usize, ret: usize) -> *mut c_void {
    fill_of(d, c, n, dl, ret, "__memset_chk")
}

/// Sets `n` bytes at `d` to `c` through the C library's `memset`, or, before it is known,
/// `rep stosb`.
///
/// # Safety
/// `d` valid for `n` bytes.
#[inline(always)]
unsafe fn fill(d: *mut c_void, c: c_int, n: usize) {
    match MEMSET.load(Ordering::Relaxed) {
        // SAFETY: the C library's `memset`, with the caller's arguments.
        f if f != 0 => unsafe {
            core::mem::transmute::<usize, Fill>(f)(d, c, n);
        },
        // SAFETY: the caller's buffer; `rep stosb` fills forward (DF clear).
        _ => unsafe {
            core::arch::asm!("rep stosb", inout("rcx") n => _, inout("rdi") d => _, in("al") c as u8,
                options(nostack, preserves_flags));
        },
    }
}

/// The length of the NUL-terminated string at `s` (the C library's `strlen`, which this
/// library does not replace).
///
/// # Safety
/// `s` a NUL-terminated string.
#[inline(always)]
unsafe fn len(s: *const c_char) -> usize {
    // SAFETY: the caller's string.
    unsafe { libc::strlen(s) }
}

/// Copies `n` bytes from `s` to `d` (whose string functions' buffers never overlap).
///
/// # Safety
/// `d` and `s` valid for `n` bytes.
#[inline(always)]
unsafe fn copy(d: *mut c_char, s: *const c_char, n: usize) {
    // SAFETY: the caller's buffers.
    unsafe { move_bytes(d.cast(), s.cast(), n) };
}

/// `strcpy`/`stpcpy` and their fortified names: copies the string at `s` with its NUL to
/// `d` once checked, and returns its length.
#[inline(always)]
fn strcpy_of(d: *mut c_char, s: *const c_char, dl: usize, ret: usize, op: &'static str) -> usize {
    // SAFETY: the caller's string (as the C library's `strcpy` reads it).
    let n = unsafe { len(s) } + 1;
    check(ret, d as usize, Some(s as usize), n, op);
    fortified(n, dl);
    // SAFETY: the caller's buffers, `n` bytes with the NUL.
    unsafe { copy(d, s, n) };
    n - 1
}

extern "C" fn strcpy_checked(d: *mut c_char, s: *const c_char, ret: usize) -> *mut c_char {
    strcpy_of(d, s, ANY, ret, "strcpy");
    d
}

extern "C" fn stpcpy_checked(d: *mut c_char, s: *const c_char, ret: usize) -> *mut c_char {
    // The copied NUL's address.
    d.wrapping_add(strcpy_of(d, s, ANY, ret, "stpcpy"))
}

extern "C" fn strcpy_chk_checked(d: *mut c_char, s: *const c_char, dl: usize, ret: usize) -> *mut c_char {
    strcpy_of(d, s, dl, ret, "__strcpy_chk");
    d
}

extern "C" fn stpcpy_chk_checked(d: *mut c_char, s: *const c_char, dl: usize, ret: usize) -> *mut c_char {
    d.wrapping_add(strcpy_of(d, s, dl, ret, "__stpcpy_chk"))
}

/// `strcat` and `__strcat_chk`.
#[inline(always)]
fn strcat_of(d: *mut c_char, s: *const c_char, dl: usize, ret: usize, op: &'static str) -> *mut c_char {
    // SAFETY: the caller's strings.
    let (dl0, n) = unsafe { (len(d), len(s) + 1) };
    // The bytes from `d` on that the call writes: its string, then the source and its NUL.
    if n > crate::guard::CANARY && from_program(ret) {
        bounded(d as usize, dl0 + n, Way::WouldWrite, op);
        bounded(s as usize, n, Way::OutOf, op);
    }
    fortified(dl0 + n, dl);
    // SAFETY: the caller's buffers.
    unsafe { copy(d.add(dl0), s, n) };
    d
}

extern "C" fn strcat_checked(d: *mut c_char, s: *const c_char, ret: usize) -> *mut c_char {
    strcat_of(d, s, ANY, ret, "strcat")
}

extern "C" fn strcat_chk_checked(d: *mut c_char, s: *const c_char, dl: usize, ret: usize) -> *mut c_char {
    strcat_of(d, s, dl, ret, "__strcat_chk")
}

/// `strncpy` and `__strncpy_chk`.
#[inline(always)]
fn strncpy_of(d: *mut c_char, s: *const c_char, n: usize, dl: usize, ret: usize, op: &'static str) -> *mut c_char {
    // It reads the source up to its NUL or `n` bytes, and writes `n` bytes (padding with NULs).
    // SAFETY: the caller's string, read no further than the C library's `strncpy` reads it.
    let read = unsafe { libc::strnlen(s, n) };
    if n > crate::guard::CANARY && from_program(ret) {
        bounded(d as usize, n, Way::WouldWrite, op);
        bounded(s as usize, (read + 1).min(n), Way::OutOf, op);
    }
    fortified(n, dl);
    // SAFETY: the caller's buffers: `read` bytes of the source, then NULs up to `n`.
    unsafe {
        copy(d, s, read);
        fill(d.add(read).cast(), 0, n - read);
    }
    d
}

extern "C" fn strncpy_checked(d: *mut c_char, s: *const c_char, n: usize, ret: usize) -> *mut c_char {
    strncpy_of(d, s, n, ANY, ret, "strncpy")
}

extern "C" fn strncpy_chk_checked(d: *mut c_char, s: *const c_char, n: usize, dl: usize, ret: usize) -> *mut c_char {
    strncpy_of(d, s, n, dl, ret, "__strncpy_chk")
}

/// `strncat` and `__strncat_chk`.
#[inline(always)]
fn strncat_of(d: *mut c_char, s: *const c_char, n: usize, dl: usize, ret: usize, op: &'static str) -> *mut c_char {
    // It appends the source up to its NUL or `n` bytes, then a NUL.
    // SAFETY: the caller's strings, the source read no further than `strncat` reads it.
    let (dl0, read) = unsafe { (len(d), libc::strnlen(s, n)) };
    if read + 1 > crate::guard::CANARY && from_program(ret) {
        bounded(d as usize, dl0 + read + 1, Way::WouldWrite, op);
        bounded(s as usize, read, Way::OutOf, op);
    }
    fortified(dl0 + read + 1, dl);
    // SAFETY: the caller's buffers, with room for the appended bytes and the NUL (the C
    // contract).
    unsafe {
        copy(d.add(dl0), s, read);
        *d.add(dl0 + read) = 0;
    }
    d
}

extern "C" fn strncat_checked(d: *mut c_char, s: *const c_char, n: usize, ret: usize) -> *mut c_char {
    strncat_of(d, s, n, ANY, ret, "strncat")
}

extern "C" fn strncat_chk_checked(d: *mut c_char, s: *const c_char, n: usize, dl: usize, ret: usize) -> *mut c_char {
    strncat_of(d, s, n, dl, ret, "__strncat_chk")
}
