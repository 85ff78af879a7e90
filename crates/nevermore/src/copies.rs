//! The C library's memory and string copies, held to the bounds of heap objects.
//!
//! A heap overflow is most often a copy of a length the attacker chose: `memcpy(buf, packet,
//! len)` into a fixed buffer writes over the live objects after it, which the program may use
//! (a callback, a length, a key) long before the canary is checked at `free`; and a copy *out*
//! of a heap object past its end (Heartbleed's `memcpy`) hands out what follows it, which no
//! canary ever sees. So `memcpy`, `memmove`, `mempcpy`, `memset`, `explicit_bzero`, `strcpy`,
//! `stpcpy`, `strcat`, `strncpy`, `stpncpy`, `strncat`, `strlcpy` and `strlcat` (see "The
//! size-bounded copies" below), their wide-character forms
//! (`wmemcpy`, `wcscpy`, ...), and the fortified names of both (`__memcpy_chk`,
//! `__wmemcpy_chk`, ...: see "The fortified copies" below), when the program calls them on a
//! heap buffer, look its object up first (as the I/O calls do, `io::bounded_live`) and report
//! a copy that would run past the end of a live object before a byte is written
//! (`heap-buffer-overflow`). A copy through a dangling
//! pointer is left to the alias engine: it traps in detect mode, and in prevent mode it reaches
//! only the dead object's own memory. The duplicates (`strdup`, `strndup`, `wcsdup`) are held
//! to the end of the object they read (see "Duplicates" below); the conversions `mbstowcs` and
//! `wcstombs` are measured before they write (see "Conversions"), and `iconv` converts into
//! memory of its own first when its length runs past its object's end (see `iconv` below),
//! and the sorts (`qsort`, `qsort_r`) hold their arrays to their objects' ends (see "Sorting").
//!
//! Cost. A copy of at most `guard::CANARY` bytes is not looked at: starting inside an object
//! it can reach no further than the canary after it, which `free` checks. A buffer outside the
//! heap costs two comparisons and a table's look-up; a heap buffer its object's look-up
//! (`heap::object_at`, about 10 ns, more where the metadata has left the cache): up to 8 % of the
//! time of the real programs of the benchmarks (BENCHMARKS.md, "Copies held to their objects'
//! bounds"), less since a buffer in the object the thread made last is bounded from its cache
//! (`heap::object_at`; "Copies into the newest object"). `check_copies=0` turns the checks off.
//!
//! The library's own copies are not checked: each function is entered through a stub that
//! passes the caller's return address on, and a call from the library's own code (which the
//! compiler makes for its copies, and which may run on an object being set up) goes straight
//! to the C library's function. Until that function is known (the library's first steps), a
//! plain copy of its own does the work.

use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

use libc::wchar_t;

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
    outside_library(ret) && crate::options().check_copies
}

/// Whether a call returning to `ret` came from outside this library (the program or another
/// library). Unknown before initialisation: then no call is.
#[inline(always)]
pub(crate) fn outside_library(ret: usize) -> bool {
    crate::stack::own_text().is_some_and(|(lo, hi)| !(lo..hi).contains(&ret))
}

/// The room a call into `d` may use (a formatting call's text, a conversion), when the program
/// made it and `d` lies in a live heap object with less room than `bound`, the most the call
/// could write.
#[inline(always)]
pub(crate) fn room_below(ret: usize, d: usize, bound: usize) -> Option<usize> {
    if !from_program(ret) {
        return None;
    }
    crate::io::room_live(d).filter(|&room| room < bound)
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

/// Defines an exported function as a stub that passes its caller's return address on (in
/// `$reg`, the first free argument register) to a function of the same arguments and that
/// address (`$r`), whose body is `$body`: the stub reads the address where the call left it,
/// so that the checks know who called (`from_program`). For the copies, and `formats`'
/// `strftime`.
macro_rules! entry {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty, $reg:literal, $r:ident => $body:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The C contract of the function.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            core::arch::naked_asm!(concat!("mov ", $reg, ", [rsp]"), "jmp {f}", f = sym $name::checked)
        }

        #[doc(hidden)]
        mod $name {
            use super::*;
            pub(super) extern "C" fn checked($($arg: $ty,)* $r: usize) -> $ret {
                $body
            }
        }
    };
}

pub(crate) use entry;

/// The C library's function `name` of C type `$ty` (looked up at the first call, from a
/// function the allocator itself never calls, so `dlsym` cannot come back here), or the
/// calling function returns `$fail` (-1 when not given).
macro_rules! next {
    ($slot:ident, $name:literal, $ty:ty) => {
        next!($slot, $name, $ty, or - 1)
    };
    ($slot:ident, $name:literal, $ty:ty, or $fail:expr) => {
        match crate::sys::next_symbol(&$slot, $name) {
            // SAFETY: the C library's function of that name, whose C type `$ty` is.
            Some(f) => unsafe { core::mem::transmute::<usize, $ty>(f) },
            None => return $fail,
        }
    };
}
pub(crate) use next;

entry! {
    /// `memcpy`: see the module's notes.
    fn memcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void, "rcx", ret => {
        move_of::<u8>(d.cast(), s.cast(), n, ANY, ret, "memcpy");
        d
    }
}
entry! {
    /// `memmove`: see the module's notes.
    fn memmove(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void, "rcx", ret => {
        move_of::<u8>(d.cast(), s.cast(), n, ANY, ret, "memmove");
        d
    }
}
entry! {
    /// `mempcpy` (GNU; gnulib's programs call it): see the module's notes.
    fn mempcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void, "rcx", ret => {
        move_of::<u8>(d.cast(), s.cast(), n, ANY, ret, "mempcpy");
        d.wrapping_byte_add(n)
    }
}
entry! {
    /// `__mempcpy` (what older headers made of `mempcpy`): see the module's notes.
    fn __mempcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void, "rcx", ret => {
        move_of::<u8>(d.cast(), s.cast(), n, ANY, ret, "__mempcpy");
        d.wrapping_byte_add(n)
    }
}
entry! {
    /// `memset`: see the module's notes.
    fn memset(d: *mut c_void, c: c_int, n: usize) -> *mut c_void, "rcx", ret => {
        fill_of(d, c, n, ANY, ret, "memset")
    }
}
entry! {
    /// `explicit_bzero` (a key's or a password's buffer cleared): see the module's notes.
    fn explicit_bzero(d: *mut c_void, n: usize) -> (), "rdx", ret => {
        fill_of(d, 0, n, ANY, ret, "explicit_bzero");
    }
}
entry! {
    /// `bzero` (BSD's; older programs clear buffers with it, and a compiler told
    /// `-fno-builtin` leaves their calls to it): see the module's notes.
    fn bzero(d: *mut c_void, n: usize) -> (), "rdx", ret => {
        fill_of(d, 0, n, ANY, ret, "bzero");
    }
}
entry! {
    /// `__bzero` (the C library's own name for `bzero`, which older programs import).
    fn __bzero(d: *mut c_void, n: usize) -> (), "rdx", ret => {
        fill_of(d, 0, n, ANY, ret, "__bzero");
    }
}
entry! {
    /// `bcopy` (BSD's `memmove`, the source first): see the module's notes.
    fn bcopy(s: *const c_void, d: *mut c_void, n: usize) -> (), "rcx", ret => {
        move_of::<u8>(d.cast(), s.cast(), n, ANY, ret, "bcopy");
    }
}
entry! {
    /// `memccpy`: the bytes of `s` up to and including the first `c` among its first `n`
    /// (or those `n`) are copied to `d`, once checked as `memcpy`'s; returns the byte after the
    /// copied `c` in `d`, or null when there was none.
    fn memccpy(d: *mut c_void, s: *const c_void, c: c_int, n: usize) -> *mut c_void, "r8", ret => {
        // The caller's source, read up to its first `c` within `n` bytes, as the C library's
        // `memccpy` reads it.
        let hit = crate::reads::find_byte(s, c, n);
        let len = if hit.is_null() { n } else { hit as usize - s as usize + 1 };
        move_of::<u8>(d.cast(), s.cast(), len, ANY, ret, "memccpy");
        if hit.is_null() {
            core::ptr::null_mut()
        } else {
            d.wrapping_byte_add(len)
        }
    }
}
entry! {
    /// `strcpy`: see the module's notes.
    fn strcpy(d: *mut c_char, s: *const c_char) -> *mut c_char, "rdx", ret => {
        strcpy_of(d, s, ANY, ret, "strcpy");
        d
    }
}
entry! {
    /// `stpcpy`: see the module's notes. Returns the copied NUL's address.
    fn stpcpy(d: *mut c_char, s: *const c_char) -> *mut c_char, "rdx", ret => {
        d.wrapping_add(strcpy_of(d, s, ANY, ret, "stpcpy"))
    }
}
entry! {
    /// `strcat`: see the module's notes.
    fn strcat(d: *mut c_char, s: *const c_char) -> *mut c_char, "rdx", ret => {
        strcat_of(d, s, ANY, ret, "strcat")
    }
}
entry! {
    /// `strncpy`: see the module's notes.
    fn strncpy(d: *mut c_char, s: *const c_char, n: usize) -> *mut c_char, "rcx", ret => {
        strncpy_of(d, s, n, ANY, ret, "strncpy");
        d
    }
}
entry! {
    /// `stpncpy`: see the module's notes. Returns the address of the first NUL written, or of
    /// the end when none was.
    fn stpncpy(d: *mut c_char, s: *const c_char, n: usize) -> *mut c_char, "rcx", ret => {
        d.wrapping_add(strncpy_of(d, s, n, ANY, ret, "stpncpy"))
    }
}
entry! {
    /// `__stpncpy` (the C library's own name for `stpncpy`, which older programs import).
    fn __stpncpy(d: *mut c_char, s: *const c_char, n: usize) -> *mut c_char, "rcx", ret => {
        d.wrapping_add(strncpy_of(d, s, n, ANY, ret, "__stpncpy"))
    }
}
entry! {
    /// `strncat`: see the module's notes.
    fn strncat(d: *mut c_char, s: *const c_char, n: usize) -> *mut c_char, "rcx", ret => {
        strncat_of(d, s, n, ANY, ret, "strncat")
    }
}

// The fortified copies. A program built with `_FORTIFY_SOURCE` calls these where the compiler
// knows the size of the destination (`dl`, the last argument), and the C library aborts the
// call when it would write more than that. The object the buffer lies in is checked first
// (its size may be smaller than the type the compiler saw, and the report says more); then
// the C library's own rule, with its own message (`__chk_fail`).

entry! {
    /// `__memcpy_chk`: see "The fortified copies" in the module.
    fn __memcpy_chk(d: *mut c_void, s: *const c_void, n: usize, dl: usize) -> *mut c_void, "r8", ret => {
        move_of::<u8>(d.cast(), s.cast(), n, dl, ret, "__memcpy_chk");
        d
    }
}
entry! {
    /// `__memmove_chk`: see "The fortified copies" in the module.
    fn __memmove_chk(d: *mut c_void, s: *const c_void, n: usize, dl: usize) -> *mut c_void, "r8", ret => {
        move_of::<u8>(d.cast(), s.cast(), n, dl, ret, "__memmove_chk");
        d
    }
}
entry! {
    /// `__mempcpy_chk`: see "The fortified copies" in the module.
    fn __mempcpy_chk(d: *mut c_void, s: *const c_void, n: usize, dl: usize) -> *mut c_void, "r8", ret => {
        move_of::<u8>(d.cast(), s.cast(), n, dl, ret, "__mempcpy_chk");
        d.wrapping_byte_add(n)
    }
}
entry! {
    /// `__memset_chk`: see "The fortified copies" in the module.
    fn __memset_chk(d: *mut c_void, c: c_int, n: usize, dl: usize) -> *mut c_void, "r8", ret => {
        fill_of(d, c, n, dl, ret, "__memset_chk")
    }
}
entry! {
    /// `__explicit_bzero_chk`: see "The fortified copies" in the module.
    fn __explicit_bzero_chk(d: *mut c_void, n: usize, dl: usize) -> (), "rcx", ret => {
        fill_of(d, 0, n, dl, ret, "__explicit_bzero_chk");
    }
}
entry! {
    /// `__strcpy_chk`: see "The fortified copies" in the module.
    fn __strcpy_chk(d: *mut c_char, s: *const c_char, dl: usize) -> *mut c_char, "rcx", ret => {
        strcpy_of(d, s, dl, ret, "__strcpy_chk");
        d
    }
}
entry! {
    /// `__stpcpy_chk`: see "The fortified copies" in the module.
    fn __stpcpy_chk(d: *mut c_char, s: *const c_char, dl: usize) -> *mut c_char, "rcx", ret => {
        d.wrapping_add(strcpy_of(d, s, dl, ret, "__stpcpy_chk"))
    }
}
entry! {
    /// `__strcat_chk`: see "The fortified copies" in the module.
    fn __strcat_chk(d: *mut c_char, s: *const c_char, dl: usize) -> *mut c_char, "rcx", ret => {
        strcat_of(d, s, dl, ret, "__strcat_chk")
    }
}
entry! {
    /// `__strncpy_chk`: see "The fortified copies" in the module.
    fn __strncpy_chk(d: *mut c_char, s: *const c_char, n: usize, dl: usize) -> *mut c_char, "r8", ret => {
        strncpy_of(d, s, n, dl, ret, "__strncpy_chk");
        d
    }
}
entry! {
    /// `__stpncpy_chk`: see "The fortified copies" in the module.
    fn __stpncpy_chk(d: *mut c_char, s: *const c_char, n: usize, dl: usize) -> *mut c_char, "r8", ret => {
        d.wrapping_add(strncpy_of(d, s, n, dl, ret, "__stpncpy_chk"))
    }
}
entry! {
    /// `__strncat_chk`: see "The fortified copies" in the module.
    fn __strncat_chk(d: *mut c_char, s: *const c_char, n: usize, dl: usize) -> *mut c_char, "r8", ret => {
        strncat_of(d, s, n, dl, ret, "__strncat_chk")
    }
}

// The wide-character copies (`wchar_t`, 4 bytes here): the same checks, on lengths counted in
// characters, and for the fortified names a destination's size in characters too. C++'s
// `std::wstring` copies through `wmemcpy`, `wmemmove` and `wmemset`.

entry! {
    /// `wmemcpy`: see the module's notes.
    fn wmemcpy(d: *mut wchar_t, s: *const wchar_t, n: usize) -> *mut wchar_t, "rcx", ret => {
        move_of(d, s, n, ANY, ret, "wmemcpy");
        d
    }
}
entry! {
    /// `wmemmove`: see the module's notes.
    fn wmemmove(d: *mut wchar_t, s: *const wchar_t, n: usize) -> *mut wchar_t, "rcx", ret => {
        move_of(d, s, n, ANY, ret, "wmemmove");
        d
    }
}
entry! {
    /// `wmempcpy` (GNU): see the module's notes.
    fn wmempcpy(d: *mut wchar_t, s: *const wchar_t, n: usize) -> *mut wchar_t, "rcx", ret => {
        move_of(d, s, n, ANY, ret, "wmempcpy");
        d.wrapping_add(n)
    }
}
entry! {
    /// `wmemset`: see the module's notes.
    fn wmemset(d: *mut wchar_t, c: wchar_t, n: usize) -> *mut wchar_t, "rcx", ret => {
        wfill_of(d, c, n, ANY, ret, "wmemset")
    }
}
entry! {
    /// `wcscpy`: see the module's notes.
    fn wcscpy(d: *mut wchar_t, s: *const wchar_t) -> *mut wchar_t, "rdx", ret => {
        strcpy_of(d, s, ANY, ret, "wcscpy");
        d
    }
}
entry! {
    /// `wcpcpy`: see the module's notes. Returns the copied NUL's address.
    fn wcpcpy(d: *mut wchar_t, s: *const wchar_t) -> *mut wchar_t, "rdx", ret => {
        d.wrapping_add(strcpy_of(d, s, ANY, ret, "wcpcpy"))
    }
}
entry! {
    /// `wcscat`: see the module's notes.
    fn wcscat(d: *mut wchar_t, s: *const wchar_t) -> *mut wchar_t, "rdx", ret => {
        strcat_of(d, s, ANY, ret, "wcscat")
    }
}
entry! {
    /// `wcsncpy`: see the module's notes.
    fn wcsncpy(d: *mut wchar_t, s: *const wchar_t, n: usize) -> *mut wchar_t, "rcx", ret => {
        strncpy_of(d, s, n, ANY, ret, "wcsncpy");
        d
    }
}
entry! {
    /// `wcpncpy`: see the module's notes (and `stpncpy`).
    fn wcpncpy(d: *mut wchar_t, s: *const wchar_t, n: usize) -> *mut wchar_t, "rcx", ret => {
        d.wrapping_add(strncpy_of(d, s, n, ANY, ret, "wcpncpy"))
    }
}
entry! {
    /// `wcsncat`: see the module's notes.
    fn wcsncat(d: *mut wchar_t, s: *const wchar_t, n: usize) -> *mut wchar_t, "rcx", ret => {
        strncat_of(d, s, n, ANY, ret, "wcsncat")
    }
}
entry! {
    /// `__wmemcpy_chk`: see "The fortified copies" in the module.
    fn __wmemcpy_chk(d: *mut wchar_t, s: *const wchar_t, n: usize, dl: usize) -> *mut wchar_t, "r8", ret => {
        move_of(d, s, n, dl, ret, "__wmemcpy_chk");
        d
    }
}
entry! {
    /// `__wmemmove_chk`: see "The fortified copies" in the module.
    fn __wmemmove_chk(d: *mut wchar_t, s: *const wchar_t, n: usize, dl: usize) -> *mut wchar_t, "r8", ret => {
        move_of(d, s, n, dl, ret, "__wmemmove_chk");
        d
    }
}
entry! {
    /// `__wmempcpy_chk`: see "The fortified copies" in the module.
    fn __wmempcpy_chk(d: *mut wchar_t, s: *const wchar_t, n: usize, dl: usize) -> *mut wchar_t, "r8", ret => {
        move_of(d, s, n, dl, ret, "__wmempcpy_chk");
        d.wrapping_add(n)
    }
}
entry! {
    /// `__wmemset_chk`: see "The fortified copies" in the module.
    fn __wmemset_chk(d: *mut wchar_t, c: wchar_t, n: usize, dl: usize) -> *mut wchar_t, "r8", ret => {
        wfill_of(d, c, n, dl, ret, "__wmemset_chk")
    }
}
entry! {
    /// `__wcscpy_chk`: see "The fortified copies" in the module.
    fn __wcscpy_chk(d: *mut wchar_t, s: *const wchar_t, dl: usize) -> *mut wchar_t, "rcx", ret => {
        strcpy_of(d, s, dl, ret, "__wcscpy_chk");
        d
    }
}
entry! {
    /// `__wcpcpy_chk`: see "The fortified copies" in the module.
    fn __wcpcpy_chk(d: *mut wchar_t, s: *const wchar_t, dl: usize) -> *mut wchar_t, "rcx", ret => {
        d.wrapping_add(strcpy_of(d, s, dl, ret, "__wcpcpy_chk"))
    }
}
entry! {
    /// `__wcscat_chk`: see "The fortified copies" in the module.
    fn __wcscat_chk(d: *mut wchar_t, s: *const wchar_t, dl: usize) -> *mut wchar_t, "rcx", ret => {
        strcat_of(d, s, dl, ret, "__wcscat_chk")
    }
}
entry! {
    /// `__wcsncpy_chk`: see "The fortified copies" in the module.
    fn __wcsncpy_chk(d: *mut wchar_t, s: *const wchar_t, n: usize, dl: usize) -> *mut wchar_t, "r8", ret => {
        strncpy_of(d, s, n, dl, ret, "__wcsncpy_chk");
        d
    }
}
entry! {
    /// `__wcpncpy_chk`: see "The fortified copies" in the module.
    fn __wcpncpy_chk(d: *mut wchar_t, s: *const wchar_t, n: usize, dl: usize) -> *mut wchar_t, "r8", ret => {
        d.wrapping_add(strncpy_of(d, s, n, dl, ret, "__wcpncpy_chk"))
    }
}
entry! {
    /// `__wcsncat_chk`: see "The fortified copies" in the module.
    fn __wcsncat_chk(d: *mut wchar_t, s: *const wchar_t, n: usize, dl: usize) -> *mut wchar_t, "r8", ret => {
        strncat_of(d, s, n, dl, ret, "__wcsncat_chk")
    }
}

// The size-bounded copies of the BSDs, in glibc since 2.38 (and in libbsd before): `strlcpy`
// and `strlcat` copy what fits of the source into a destination of `n` characters, always
// with a NUL, and return the length they tried to make, so that a caller can tell a cut
// string. `n` is meant to be the destination's size, and a wrong one (another buffer's size,
// a constant) lets them write past it, while they read the whole source whatever `n` says.
// They are made here (their work is two copies), so that they are checked whether the C
// library has them or not, with their fortified names (glibc's `_FORTIFY_SOURCE` checks `n`
// against the destination's size the compiler knows).

entry! {
    /// `strlcpy`: see "The size-bounded copies" above.
    fn strlcpy(d: *mut c_char, s: *const c_char, n: usize) -> usize, "rcx", ret => {
        strlcpy_of(d, s, n, ANY, ret, "strlcpy")
    }
}
entry! {
    /// `strlcat`: see "The size-bounded copies" above.
    fn strlcat(d: *mut c_char, s: *const c_char, n: usize) -> usize, "rcx", ret => {
        strlcat_of(d, s, n, ANY, ret, "strlcat")
    }
}
entry! {
    /// `__strlcpy_chk`: see "The fortified copies" in the module.
    fn __strlcpy_chk(d: *mut c_char, s: *const c_char, n: usize, dl: usize) -> usize, "r8", ret => {
        strlcpy_of(d, s, n, dl, ret, "__strlcpy_chk")
    }
}
entry! {
    /// `__strlcat_chk`: see "The fortified copies" in the module.
    fn __strlcat_chk(d: *mut c_char, s: *const c_char, n: usize, dl: usize) -> usize, "r8", ret => {
        strlcat_of(d, s, n, dl, ret, "__strlcat_chk")
    }
}
entry! {
    /// `wcslcpy`: see "The size-bounded copies" above.
    fn wcslcpy(d: *mut wchar_t, s: *const wchar_t, n: usize) -> usize, "rcx", ret => {
        strlcpy_of(d, s, n, ANY, ret, "wcslcpy")
    }
}
entry! {
    /// `wcslcat`: see "The size-bounded copies" above.
    fn wcslcat(d: *mut wchar_t, s: *const wchar_t, n: usize) -> usize, "rcx", ret => {
        strlcat_of(d, s, n, ANY, ret, "wcslcat")
    }
}
entry! {
    /// `__wcslcpy_chk`: see "The fortified copies" in the module.
    fn __wcslcpy_chk(d: *mut wchar_t, s: *const wchar_t, n: usize, dl: usize) -> usize, "r8", ret => {
        strlcpy_of(d, s, n, dl, ret, "__wcslcpy_chk")
    }
}
entry! {
    /// `__wcslcat_chk`: see "The fortified copies" in the module.
    fn __wcslcat_chk(d: *mut wchar_t, s: *const wchar_t, n: usize, dl: usize) -> usize, "r8", ret => {
        strlcat_of(d, s, n, dl, ret, "__wcslcat_chk")
    }
}

unsafe extern "C" {
    /// The C library's end of a fortified call that would overflow its destination: prints
    /// "*** buffer overflow detected ***: terminated" and aborts.
    fn __chk_fail() -> !;
    /// The C library's `wcsnlen` (which this library does not replace).
    fn wcsnlen(s: *const wchar_t, n: usize) -> usize;
}

/// The C library's rule for a fortified call that writes `n` characters into a destination of
/// `dl`.
#[inline(always)]
fn fortified(n: usize, dl: usize) {
    if n > dl {
        // SAFETY: takes no argument; does not return.
        unsafe { __chk_fail() }
    }
}

/// No fortified size: the plain functions.
const ANY: usize = usize::MAX;

/// The bytes of `n` elements of `T` (saturated: a count that large runs past any object).
#[inline(always)]
fn bytes<T>(n: usize) -> usize {
    n.saturating_mul(core::mem::size_of::<T>())
}

/// `memcpy`/`memmove`/`mempcpy`, their wide forms (`T` the element) and their fortified names
/// (`dl`): `n` elements from `s` to `d` once checked.
#[inline(always)]
fn move_of<T>(d: *mut T, s: *const T, n: usize, dl: usize, ret: usize, op: &'static str) {
    let b = bytes::<T>(n);
    check(ret, d as usize, Some(s as usize), b, op);
    fortified(n, dl);
    // SAFETY: the caller's buffers.
    unsafe { move_bytes(d.cast(), s.cast(), b) };
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

/// `wmemset` and `__wmemset_chk`.
#[inline(always)]
fn wfill_of(d: *mut wchar_t, c: wchar_t, n: usize, dl: usize, ret: usize, op: &'static str) -> *mut wchar_t {
    check(ret, d as usize, None, bytes::<wchar_t>(n), op);
    fortified(n, dl);
    if c as u32 == (c as u8 as u32).wrapping_mul(0x0101_0101) {
        // SAFETY: the caller's buffer of `n` characters, whose bytes are all the same.
        unsafe { fill(d.cast(), c_int::from(c as u8), bytes::<wchar_t>(n)) };
    } else {
        for i in 0..n {
            // SAFETY: the caller's buffer of `n` characters (`write_unaligned`: the C library
            // does not ask for alignment either).
            unsafe { d.add(i).write_unaligned(c) };
        }
    }
    d
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

/// The characters of the string functions: bytes (`char`) and wide characters (`wchar_t`).
trait Char: core::marker::Copy {
    const NUL: Self;
    /// The length of the string at `s`, in characters.
    ///
    /// # Safety
    /// `s` a string ending in NUL.
    unsafe fn len(s: *const Self) -> usize;
    /// The length of the string at `s`, reading at most `n` characters.
    ///
    /// # Safety
    /// `s` a string ending in NUL, or valid for `n` characters.
    unsafe fn len_within(s: *const Self, n: usize) -> usize;
}

impl Char for c_char {
    const NUL: Self = 0;
    unsafe fn len(s: *const Self) -> usize {
        // SAFETY: the caller's string; the C library's `strlen` (not replaced here).
        unsafe { libc::strlen(s) }
    }
    unsafe fn len_within(s: *const Self, n: usize) -> usize {
        // SAFETY: the caller's string, read no further than `n`.
        unsafe { libc::strnlen(s, n) }
    }
}

impl Char for wchar_t {
    const NUL: Self = 0;
    unsafe fn len(s: *const Self) -> usize {
        // SAFETY: the caller's string; the C library's `wcslen` (not replaced here).
        unsafe { libc::wcslen(s) }
    }
    unsafe fn len_within(s: *const Self, n: usize) -> usize {
        // SAFETY: the caller's string, read no further than `n`.
        unsafe { wcsnlen(s, n) }
    }
}

/// Copies `n` characters from `s` to `d` (whose string functions' buffers never overlap).
///
/// # Safety
/// `d` and `s` valid for `n` characters.
#[inline(always)]
unsafe fn copy<C: Char>(d: *mut C, s: *const C, n: usize) {
    // SAFETY: the caller's buffers.
    unsafe { move_bytes(d.cast(), s.cast(), bytes::<C>(n)) };
}

/// `strcpy`/`stpcpy`, their wide forms and their fortified names: copies the string at `s`
/// with its NUL to `d` once checked, and returns its length.
#[inline(always)]
fn strcpy_of<C: Char>(d: *mut C, s: *const C, dl: usize, ret: usize, op: &'static str) -> usize {
    // SAFETY: the caller's string (as the C library's `strcpy` reads it).
    let n = unsafe { C::len(s) } + 1;
    check(ret, d as usize, Some(s as usize), bytes::<C>(n), op);
    fortified(n, dl);
    // SAFETY: the caller's buffers, `n` characters with the NUL.
    unsafe { copy(d, s, n) };
    n - 1
}

/// `strcat`, `wcscat` and their fortified names.
#[inline(always)]
fn strcat_of<C: Char>(d: *mut C, s: *const C, dl: usize, ret: usize, op: &'static str) -> *mut C {
    // SAFETY: the caller's strings.
    let (dl0, n) = unsafe { (C::len(d), C::len(s) + 1) };
    // The bytes from `d` on that the call writes: its string, then the source and its NUL.
    if bytes::<C>(n) > crate::guard::CANARY && from_program(ret) {
        bounded(d as usize, bytes::<C>(dl0 + n), Way::WouldWrite, op);
        bounded(s as usize, bytes::<C>(n), Way::OutOf, op);
    }
    fortified(dl0 + n, dl);
    // SAFETY: the caller's buffers.
    unsafe { copy(d.add(dl0), s, n) };
    d
}

/// `strncpy`, `stpncpy`, their wide forms and their fortified names: returns how many
/// characters of the source were copied (the offset of the first NUL written, or `n`).
#[inline(always)]
fn strncpy_of<C: Char>(d: *mut C, s: *const C, n: usize, dl: usize, ret: usize, op: &'static str) -> usize {
    // It reads the source up to its NUL or `n` characters, and writes `n` (padding with NULs).
    // SAFETY: the caller's string, read no further than the C library's `strncpy` reads it.
    let read = unsafe { C::len_within(s, n) };
    if bytes::<C>(n) > crate::guard::CANARY && from_program(ret) {
        bounded(d as usize, bytes::<C>(n), Way::WouldWrite, op);
        bounded(s as usize, bytes::<C>((read + 1).min(n)), Way::OutOf, op);
    }
    fortified(n, dl);
    // SAFETY: the caller's buffers: `read` characters of the source, then NULs up to `n`
    // (a NUL of either kind is all zero bytes).
    unsafe {
        copy(d, s, read);
        fill(d.add(read).cast(), 0, bytes::<C>(n - read));
    }
    read
}

/// `strncat`, `wcsncat` and their fortified names.
#[inline(always)]
fn strncat_of<C: Char>(d: *mut C, s: *const C, n: usize, dl: usize, ret: usize, op: &'static str) -> *mut C {
    // It appends the source up to its NUL or `n` characters, then a NUL.
    // SAFETY: the caller's strings, the source read no further than `strncat` reads it.
    let (dl0, read) = unsafe { (C::len(d), C::len_within(s, n)) };
    if bytes::<C>(read + 1) > crate::guard::CANARY && from_program(ret) {
        bounded(d as usize, bytes::<C>(dl0 + read + 1), Way::WouldWrite, op);
        bounded(s as usize, bytes::<C>(read), Way::OutOf, op);
    }
    fortified(dl0 + read + 1, dl);
    // SAFETY: the caller's buffers, with room for the appended characters and the NUL (the C
    // contract).
    unsafe {
        copy(d.add(dl0), s, read);
        d.add(dl0 + read).write_unaligned(C::NUL);
    }
    d
}

/// `strlcpy`, `wcslcpy` and their fortified names: copies what fits of the string at `s` into
/// the `n` characters at `d` (at most `n - 1`, then a NUL; nothing when `n` is 0) once
/// checked, and returns the source's length.
#[inline(always)]
fn strlcpy_of<C: Char>(d: *mut C, s: *const C, n: usize, dl: usize, ret: usize, op: &'static str) -> usize {
    // SAFETY: the caller's string, all of which the call reads (its length is the answer).
    let len = unsafe { C::len(s) };
    let wrote = if n == 0 { 0 } else { len.min(n - 1) + 1 };
    if bytes::<C>(len.max(wrote) + 1) > crate::guard::CANARY && from_program(ret) {
        bounded(d as usize, bytes::<C>(wrote), Way::WouldWrite, op);
        bounded(s as usize, bytes::<C>(len + 1), Way::OutOf, op);
    }
    fortified(n, dl);
    if wrote > 0 {
        // SAFETY: the caller's buffers: `wrote - 1` characters of the source, then a NUL,
        // within the `n` the caller says `d` holds.
        unsafe {
            copy(d, s, wrote - 1);
            d.add(wrote - 1).write_unaligned(C::NUL);
        }
    }
    len
}

/// `strlcat`, `wcslcat` and their fortified names: appends what fits of the string at `s` to
/// the string in the `n` characters at `d` (none when that string fills them: no NUL among
/// them), with a NUL, once checked; returns the length of the string it tried to make.
#[inline(always)]
fn strlcat_of<C: Char>(d: *mut C, s: *const C, n: usize, dl: usize, ret: usize, op: &'static str) -> usize {
    // SAFETY: the caller's strings: the whole source, the destination's within `n`.
    let (len, had) = unsafe { (C::len(s), if n == 0 { 0 } else { C::len_within(d, n) }) };
    let appended = if had < n { len.min(n - had - 1) } else { 0 };
    if bytes::<C>(len.max(appended) + 1) > crate::guard::CANARY && from_program(ret) {
        if had < n {
            bounded(d as usize, bytes::<C>(had + appended + 1), Way::WouldWrite, op);
        }
        bounded(s as usize, bytes::<C>(len + 1), Way::OutOf, op);
    }
    fortified(n, dl);
    if had < n {
        // SAFETY: the caller's buffers: the appended characters and the NUL end within the
        // `n` the caller says `d` holds.
        unsafe {
            copy(d.add(had), s, appended);
            d.add(had + appended).write_unaligned(C::NUL);
        }
    }
    had.saturating_add(len)
}

// Duplicates, `strdup`, `strndup` and `wcsdup` (and `__strdup`, the C library's own name
// for `strdup`): a new object holding a copy of a string, read as `strcpy` reads it, up to
// its NUL (or `n` characters for `strndup`). Of a string in a live heap object with no NUL
// before the object's end (a buffer filled by `read` or `recv` without one), the copy takes
// what follows the object with it, into an object the program goes on to use or send: a read
// past the end, reported before it is made. The string is measured no further than the
// object's end (the C library's own measure would run on into what follows, or into the
// guard page after a page object); the call then goes to the C library's function.

type Dup<C> = unsafe extern "C" fn(*const C) -> *mut C;
type Ndup = unsafe extern "C" fn(*const c_char, usize) -> *mut c_char;

static STRDUP: AtomicUsize = AtomicUsize::new(0);
static STRNDUP: AtomicUsize = AtomicUsize::new(0);
static WCSDUP: AtomicUsize = AtomicUsize::new(0);

entry! {
    /// `strdup`: see "Duplicates" above.
    fn strdup(s: *const c_char) -> *mut c_char, "rsi", ret => {
        let f = next!(STRDUP, c"strdup", Dup<c_char>, or core::ptr::null_mut());
        read_within(s, ANY, ret, "strdup");
        // SAFETY: the caller's call, passed on.
        unsafe { f(s) }
    }
}
entry! {
    /// `__strdup` (the C library's own name for `strdup`, which older programs import).
    fn __strdup(s: *const c_char) -> *mut c_char, "rsi", ret => {
        let f = next!(STRDUP, c"strdup", Dup<c_char>, or core::ptr::null_mut());
        read_within(s, ANY, ret, "__strdup");
        // SAFETY: the caller's call, passed on.
        unsafe { f(s) }
    }
}
entry! {
    /// `strndup`: see "Duplicates" above.
    fn strndup(s: *const c_char, n: usize) -> *mut c_char, "rdx", ret => {
        let f = next!(STRNDUP, c"strndup", Ndup, or core::ptr::null_mut());
        read_within(s, n, ret, "strndup");
        // SAFETY: the caller's call, passed on.
        unsafe { f(s, n) }
    }
}
entry! {
    /// `wcsdup`: see "Duplicates" above.
    fn wcsdup(s: *const wchar_t) -> *mut wchar_t, "rsi", ret => {
        let f = next!(WCSDUP, c"wcsdup", Dup<wchar_t>, or core::ptr::null_mut());
        read_within(s, ANY, ret, "wcsdup");
        // SAFETY: the caller's call, passed on.
        unsafe { f(s) }
    }
}

/// Reports a read of the string at `s` (up to its NUL, at most `n` characters) by a call the
/// program made, when `s` lies in a live heap object and the string runs on past its end.
#[inline(always)]
fn read_within<C: Char>(s: *const C, n: usize, ret: usize, op: &'static str) {
    if !from_program(ret) {
        return;
    }
    let Some(room) = crate::io::room_live(s as usize) else { return };
    // The whole characters the object holds from `s` on.
    let chars = room / core::mem::size_of::<C>();
    if n <= chars {
        return;
    }
    // SAFETY: the caller's string, read no further than its object's end.
    if unsafe { C::len_within(s, chars) } == chars {
        // No NUL within the object: the call reads the character after it, at least.
        bounded(s as usize, bytes::<C>(chars + 1), Way::OutOf, op);
    }
}

// Conversions between multibyte and wide strings, `mbstowcs` and `wcstombs`. They write the
// converted string, with its NUL when it fits, in at most `n` characters or bytes, a length a
// program easily gets wrong (bytes for characters: `mbstowcs(w, s, strlen(s) + 1)` into
// `malloc(strlen(s) + 1)`). Into a live heap object with less room than `n`, what the call
// would write is measured first (a conversion that writes nothing) and one that would run past
// the object is reported before it is made. A string the call cannot convert (an invalid
// sequence) is passed on as it is.

type Mbstowcs = unsafe extern "C" fn(*mut wchar_t, *const c_char, usize) -> usize;
type Wcstombs = unsafe extern "C" fn(*mut c_char, *const wchar_t, usize) -> usize;

static MBSTOWCS: AtomicUsize = AtomicUsize::new(0);
static WCSTOMBS: AtomicUsize = AtomicUsize::new(0);

entry! {
    /// `mbstowcs`: see "Conversions" above.
    fn mbstowcs(d: *mut wchar_t, s: *const c_char, n: usize) -> usize, "rcx", ret => {
        let f = next!(MBSTOWCS, c"mbstowcs", Mbstowcs, or usize::MAX);
        if !d.is_null() && room_below(ret, d as usize, bytes::<wchar_t>(n)).is_some() {
            // SAFETY: the caller's string, measured (no destination: nothing is written).
            let need = unsafe { f(core::ptr::null_mut(), s, 0) };
            if need != usize::MAX {
                // One character for each of the string's, then its NUL if there is room.
                let chars = if need < n { need + 1 } else { n };
                crate::io::bounded_live(d as usize, bytes::<wchar_t>(chars), Way::WouldWrite, "mbstowcs");
            }
        }
        // SAFETY: the caller's call, passed on.
        unsafe { f(d, s, n) }
    }
}

entry! {
    /// `wcstombs`: see "Conversions" above.
    fn wcstombs(d: *mut c_char, s: *const wchar_t, n: usize) -> usize, "rcx", ret => {
        let f = next!(WCSTOMBS, c"wcstombs", Wcstombs, or usize::MAX);
        if !d.is_null() && room_below(ret, d as usize, n).is_some() {
            // SAFETY: the caller's string, measured (no destination: nothing is written).
            let need = unsafe { f(core::ptr::null_mut(), s, 0) };
            if need != usize::MAX && need < n {
                crate::io::bounded_live(d as usize, need + 1, Way::WouldWrite, "wcstombs");
            } else if need != usize::MAX {
                // The whole does not fit in `n`: the call writes the characters that do (a
                // character's bytes are never cut), without a NUL; how many, a conversion into
                // memory of the library's own tells.
                let scratch = crate::sys::map_meta(n);
                if !scratch.is_null() {
                    // SAFETY: the caller's string, into `n` bytes of the library's own.
                    let wrote = unsafe { f(scratch.cast(), s, n) };
                    crate::sys::unmap(scratch, n);
                    if wrote != usize::MAX {
                        crate::io::bounded_live(d as usize, wrote, Way::WouldWrite, "wcstombs");
                    }
                }
            }
        }
        // SAFETY: the caller's call, passed on.
        unsafe { f(d, s, n) }
    }
}

// The restartable conversions, `mbsrtowcs`, `mbsnrtowcs`, `wcsrtombs` and `wcsnrtombs`, write
// as `mbstowcs` and `wcstombs` do, from `*src` (which they move on) with a conversion state
// (`ps`, or one of the C library's own when null). Into a live heap object with less room than
// their length, the conversion is made first into memory of the library's own, from copies of
// `*src` and of the state, told the room plus `RESTART_MARGIN` units (a character's bytes are
// never cut, so what fits the room is written whole and anything past it shows); one that
// would write past the room is reported before it is made. With a null `ps` the copy starts
// from the initial state (the C library's own is there after every complete conversion).

type Mbsrtowcs = unsafe extern "C" fn(*mut wchar_t, *mut *const c_char, usize, *mut libc::mbstate_t) -> usize;
type Mbsnrtowcs = unsafe extern "C" fn(*mut wchar_t, *mut *const c_char, usize, usize, *mut libc::mbstate_t) -> usize;
type Wcsrtombs = unsafe extern "C" fn(*mut c_char, *mut *const wchar_t, usize, *mut libc::mbstate_t) -> usize;
type Wcsnrtombs = unsafe extern "C" fn(*mut c_char, *mut *const wchar_t, usize, usize, *mut libc::mbstate_t) -> usize;

static MBSRTOWCS: AtomicUsize = AtomicUsize::new(0);
static MBSNRTOWCS: AtomicUsize = AtomicUsize::new(0);
static WCSRTOMBS: AtomicUsize = AtomicUsize::new(0);
static WCSNRTOMBS: AtomicUsize = AtomicUsize::new(0);

/// Units past the room a restartable conversion is measured with: more than one character's
/// bytes (`MB_LEN_MAX`).
const RESTART_MARGIN: usize = 16;

/// A copy of the conversion state `ps`, or the initial state for a null one.
fn state_copy(ps: *const libc::mbstate_t) -> libc::mbstate_t {
    // SAFETY: the caller's state when given; an all-zero state is the initial one.
    unsafe {
        if ps.is_null() {
            core::mem::zeroed()
        } else {
            core::ptr::read(ps)
        }
    }
}

/// Checks a restartable conversion `call(d, src, n, ps)` the program makes into `d` (units of
/// `D`) from `*src` (units of `S`): see above.
fn restartable<D, S>(
    ret: usize,
    d: *mut D,
    src: *mut *const S,
    n: usize,
    ps: *mut libc::mbstate_t,
    op: &'static str,
    call: impl Fn(*mut D, *mut *const S, usize, *mut libc::mbstate_t) -> usize,
) {
    if d.is_null() || src.is_null() {
        return;
    }
    let Some(room) = room_below(ret, d as usize, bytes::<D>(n)) else { return };
    let probe = n.min(room / core::mem::size_of::<D>() + RESTART_MARGIN);
    let len = bytes::<D>(probe).max(1);
    let scratch = crate::sys::map_meta(len);
    if scratch.is_null() {
        return;
    }
    // SAFETY: the caller's source pointer.
    let mut from = unsafe { *src };
    let mut state = state_copy(ps);
    // The caller's string, converted from copies of its pointer and state into `probe` units
    // of the library's own.
    let r = call(scratch.cast(), &mut from, probe, &mut state);
    crate::sys::unmap(scratch, len);
    if r != usize::MAX {
        // The units converted, and the NUL when the conversion reached it (the source pointer
        // is then null).
        let wrote = r + usize::from(from.is_null());
        bounded(d as usize, bytes::<D>(wrote), Way::WouldWrite, op);
    }
}

entry! {
    /// `mbsrtowcs`: see "The restartable conversions" above.
    fn mbsrtowcs(d: *mut wchar_t, s: *mut *const c_char, n: usize, ps: *mut libc::mbstate_t) -> usize, "r8", ret => {
        let f = next!(MBSRTOWCS, c"mbsrtowcs", Mbsrtowcs, or usize::MAX);
        // SAFETY: the caller's source, into memory of the library's own (`restartable`).
        restartable(ret, d, s, n, ps, "mbsrtowcs", |d, s, n, ps| unsafe { f(d, s, n, ps) });
        // SAFETY: the caller's call, passed on.
        unsafe { f(d, s, n, ps) }
    }
}

entry! {
    /// `mbsnrtowcs`: see "The restartable conversions" above.
    fn mbsnrtowcs(d: *mut wchar_t, s: *mut *const c_char, nms: usize, n: usize, ps: *mut libc::mbstate_t) -> usize, "r9", ret => {
        let f = next!(MBSNRTOWCS, c"mbsnrtowcs", Mbsnrtowcs, or usize::MAX);
        // SAFETY: the caller's source, into memory of the library's own (`restartable`).
        restartable(ret, d, s, n, ps, "mbsnrtowcs", |d, s, n, ps| unsafe { f(d, s, nms, n, ps) });
        // SAFETY: the caller's call, passed on.
        unsafe { f(d, s, nms, n, ps) }
    }
}

entry! {
    /// `wcsrtombs`: see "The restartable conversions" above.
    fn wcsrtombs(d: *mut c_char, s: *mut *const wchar_t, n: usize, ps: *mut libc::mbstate_t) -> usize, "r8", ret => {
        let f = next!(WCSRTOMBS, c"wcsrtombs", Wcsrtombs, or usize::MAX);
        // SAFETY: the caller's source, into memory of the library's own (`restartable`).
        restartable(ret, d, s, n, ps, "wcsrtombs", |d, s, n, ps| unsafe { f(d, s, n, ps) });
        // SAFETY: the caller's call, passed on.
        unsafe { f(d, s, n, ps) }
    }
}

entry! {
    /// `wcsnrtombs`: see "The restartable conversions" above.
    fn wcsnrtombs(d: *mut c_char, s: *mut *const wchar_t, nwc: usize, n: usize, ps: *mut libc::mbstate_t) -> usize, "r9", ret => {
        let f = next!(WCSNRTOMBS, c"wcsnrtombs", Wcsnrtombs, or usize::MAX);
        // SAFETY: the caller's source, into memory of the library's own (`restartable`).
        restartable(ret, d, s, n, ps, "wcsnrtombs", |d, s, n, ps| unsafe { f(d, s, nwc, n, ps) });
        // SAFETY: the caller's call, passed on.
        unsafe { f(d, s, nwc, n, ps) }
    }
}

// One character at a time, `wcrtomb` and `mbrtowc`: the bytes of one character (up to
// `MB_CUR_MAX`) or one wide character are written at the destination, which a program moves
// along its buffer and may take past the end. Into a live heap object with less room than the
// most they can write, the conversion is made first into memory of the library's own, from a
// copy of the state (the initial one for a null `ps`, where the C library's own is after every
// complete character); one that would write past the object is reported before it is made.
// One that fails (an invalid character, an incomplete sequence) writes nothing and is passed
// on as it is. `wctomb` and `mbtowc` keep their state inside the C library, where it cannot
// be copied; in an encoding without shift states (UTF-8, or one byte a character: the
// `stateless` ones) that state is the initial one after every complete character, and they
// are measured the same way from it. In another, they are not checked.

type Wcrtomb = unsafe extern "C" fn(*mut c_char, wchar_t, *mut libc::mbstate_t) -> usize;
type Mbrtowc = unsafe extern "C" fn(*mut wchar_t, *const c_char, usize, *mut libc::mbstate_t) -> usize;

static WCRTOMB: AtomicUsize = AtomicUsize::new(0);
static MBRTOWC: AtomicUsize = AtomicUsize::new(0);

/// The most bytes one character takes in any locale (`MB_LEN_MAX`).
const MB_LEN_MAX: usize = 16;

/// The check of one character converted to bytes at `d` (`wcrtomb`'s, from the state `ps`,
/// the initial one when null): when `d` lies in a live heap object with less room than any
/// character takes, and `checked` says so (`stateless`, for a state hidden in the C library),
/// the character is converted by `f` into a local buffer first, and one that would run past
/// the object is reported.
fn to_bytes_checked(
    f: Wcrtomb,
    d: *mut c_char,
    wc: wchar_t,
    ps: *const libc::mbstate_t,
    ret: usize,
    checked: impl Fn() -> bool,
    op: &'static str,
) {
    if !d.is_null() && room_below(ret, d as usize, MB_LEN_MAX).is_some() && checked() {
        let mut state = state_copy(ps);
        let mut bytes = [0 as c_char; MB_LEN_MAX];
        // SAFETY: the caller's character, into a local buffer that holds any character.
        let n = unsafe { f(bytes.as_mut_ptr(), wc, &mut state) };
        if n != usize::MAX {
            bounded(d as usize, n, Way::WouldWrite, op);
        }
    }
}

/// The same for one wide character made at `d` from the bytes at `s` (`mbrtowc`'s, `n` of
/// them): an invalid or incomplete sequence writes nothing and is passed on.
#[allow(clippy::too_many_arguments)]
fn to_wide_checked(
    f: Mbrtowc,
    d: *mut wchar_t,
    s: *const c_char,
    n: usize,
    ps: *const libc::mbstate_t,
    ret: usize,
    checked: impl Fn() -> bool,
    op: &'static str,
) {
    let unit = core::mem::size_of::<wchar_t>();
    if !d.is_null() && !s.is_null() && room_below(ret, d as usize, unit).is_some() && checked() {
        let mut state = state_copy(ps);
        let mut wide: wchar_t = 0;
        // SAFETY: the caller's bytes, converted into a local wide character.
        let r = unsafe { f(&mut wide, s, n, &mut state) };
        // -1: an invalid sequence; -2: an incomplete one (nothing written either way).
        if r < usize::MAX - 1 {
            bounded(d as usize, unit, Way::WouldWrite, op);
        }
    }
}

/// Whether the calling thread's locale encodes characters without shift states: one byte a
/// character, or UTF-8.
fn stateless() -> bool {
    extern "C" {
        fn __ctype_get_mb_cur_max() -> usize;
    }
    // SAFETY: the C library's `MB_CUR_MAX` and the name of the locale's encoding (a string of
    // the locale's, never null).
    unsafe {
        __ctype_get_mb_cur_max() == 1
            || core::ffi::CStr::from_ptr(libc::nl_langinfo(libc::CODESET)).to_bytes() == b"UTF-8"
    }
}

type Wctomb = unsafe extern "C" fn(*mut c_char, wchar_t) -> c_int;
type Mbtowc = unsafe extern "C" fn(*mut wchar_t, *const c_char, usize) -> c_int;

static WCTOMB: AtomicUsize = AtomicUsize::new(0);
static MBTOWC: AtomicUsize = AtomicUsize::new(0);

entry! {
    /// `wctomb`: see "One character at a time" above.
    fn wctomb(d: *mut c_char, wc: wchar_t) -> c_int, "rdx", ret => {
        let f = next!(WCTOMB, c"wctomb", Wctomb);
        let probe = next!(WCRTOMB, c"wcrtomb", Wcrtomb);
        to_bytes_checked(probe, d, wc, core::ptr::null_mut(), ret, stateless, "wctomb");
        // SAFETY: the caller's call, passed on.
        unsafe { f(d, wc) }
    }
}

entry! {
    /// `mbtowc`: see "One character at a time" above.
    fn mbtowc(d: *mut wchar_t, s: *const c_char, n: usize) -> c_int, "rcx", ret => {
        let f = next!(MBTOWC, c"mbtowc", Mbtowc);
        let probe = next!(MBRTOWC, c"mbrtowc", Mbrtowc);
        to_wide_checked(probe, d, s, n, core::ptr::null_mut(), ret, stateless, "mbtowc");
        // SAFETY: the caller's call, passed on.
        unsafe { f(d, s, n) }
    }
}

entry! {
    /// `wcrtomb`: see "One character at a time" above.
    fn wcrtomb(d: *mut c_char, wc: wchar_t, ps: *mut libc::mbstate_t) -> usize, "rcx", ret => {
        let f = next!(WCRTOMB, c"wcrtomb", Wcrtomb, or usize::MAX);
        to_bytes_checked(f, d, wc, ps, ret, || true, "wcrtomb");
        // SAFETY: the caller's call, passed on.
        unsafe { f(d, wc, ps) }
    }
}

entry! {
    /// `mbrtowc`: see "One character at a time" above.
    fn mbrtowc(d: *mut wchar_t, s: *const c_char, n: usize, ps: *mut libc::mbstate_t) -> usize, "r8", ret => {
        let f = next!(MBRTOWC, c"mbrtowc", Mbrtowc, or usize::MAX);
        to_wide_checked(f, d, s, n, ps, ret, || true, "mbrtowc");
        // SAFETY: the caller's call, passed on.
        unsafe { f(d, s, n, ps) }
    }
}

// `iconv` converts into `*outbuf`, whose length `*outbytesleft` says; a length that runs past
// the end of the buffer's heap object (the input's length for an output whose characters take
// more bytes: Latin-1 to UTF-8) lets a conversion write past it. Such a call converts into
// memory of the library's own instead, with the caller's length (or the room plus a margin no
// character's bytes reach, for a longer one): what fits the object is copied there and the
// call returns as the C library's did, with the pointers and lengths it left; one that wrote
// past the room is reported before a byte of it reaches the object.

type Iconv = unsafe extern "C" fn(*mut c_void, *mut *mut c_char, *mut usize, *mut *mut c_char, *mut usize) -> usize;

static ICONV: AtomicUsize = AtomicUsize::new(0);

/// More bytes than one character's conversion writes (with a shift sequence, or a
/// transliteration into several characters).
const CHAR_MARGIN: usize = 4096;

entry! {
    /// `iconv`: see above.
    fn iconv(
        cd: *mut c_void,
        inbuf: *mut *mut c_char,
        inleft: *mut usize,
        outbuf: *mut *mut c_char,
        outleft: *mut usize
    ) -> usize, "r9", ret => {
        let f = next!(ICONV, c"iconv", Iconv, or usize::MAX);
        let (out, left) = if outbuf.is_null() || outleft.is_null() {
            (core::ptr::null_mut(), 0)
        } else {
            // SAFETY: the caller's output pointer and length (the C contract).
            unsafe { (*outbuf, *outleft) }
        };
        let Some(room) = (if out.is_null() { None } else { room_below(ret, out as usize, left) }) else {
            // SAFETY: the caller's call, passed on.
            return unsafe { f(cd, inbuf, inleft, outbuf, outleft) };
        };
        let len = left.min(room.saturating_add(CHAR_MARGIN));
        let scratch = crate::sys::map_meta(len);
        if scratch.is_null() {
            // SAFETY: the caller's call, passed on unchecked.
            return unsafe { f(cd, inbuf, inleft, outbuf, outleft) };
        }
        let (mut at, mut free) = (scratch.cast::<c_char>(), len);
        // SAFETY: the caller's input and state, converted into `len` bytes of the library's own.
        let r = unsafe { f(cd, inbuf, inleft, &mut at, &mut free) };
        let e = crate::sys::errno();
        let wrote = len - free;
        // A conversion past the room would have written past the object's end: reported here.
        crate::io::bounded_live(out as usize, wrote, Way::WouldWrite, "iconv");
        // SAFETY: `wrote` bytes of the scratch, within the room of the caller's object; then
        // the caller's pointer and length moved as the C library moves them.
        unsafe {
            move_bytes(out.cast(), scratch.cast(), wrote);
            *outbuf = out.add(wrote);
            *outleft = left - wrote;
        }
        crate::sys::unmap(scratch, len);
        crate::sys::set_errno(e);
        r
    }
}

// ---- Sorting ----
//
// `qsort` and `qsort_r` move the elements of their array about in place: an element count or
// size past the array's heap object (a count of another array's, a size of the wrong type)
// makes the C library read the bytes after the object as elements and write them back, in
// another order, over the neighbours. The array's bytes are held to its object's end before a
// byte moves, as a copy's are.

static QSORT: AtomicUsize = AtomicUsize::new(0);
static QSORT_R: AtomicUsize = AtomicUsize::new(0);

type Compare = unsafe extern "C" fn(*const c_void, *const c_void) -> c_int;
type CompareWith = unsafe extern "C" fn(*const c_void, *const c_void, *mut c_void) -> c_int;

/// A sort cannot be passed on (the C library's function was not found): there is no error to
/// return, and returning would leave the array unsorted unseen.
#[cold]
fn lost(name: &str) -> ! {
    crate::report::say(format_args!("{name}: the C library's function cannot be found; aborting"));
    crate::sys::die()
}

/// Checks a sort of `n` elements of `size` bytes at `base`, made by the program.
#[inline(always)]
fn sort_of(ret: usize, base: *mut c_void, n: usize, size: usize, op: &'static str) {
    if n > 1 && from_program(ret) {
        bounded(base as usize, n.saturating_mul(size), Way::WouldWrite, op);
    }
}

entry! {
    /// `qsort`: see "Sorting" above.
    fn qsort(base: *mut c_void, n: usize, size: usize, compare: Compare) -> (), "r8", ret => {
        sort_of(ret, base, n, size, "qsort");
        type F = unsafe extern "C" fn(*mut c_void, usize, usize, Compare);
        let f = crate::sys::next_symbol(&QSORT, c"qsort").unwrap_or_else(|| lost("qsort"));
        // SAFETY: the C library's `qsort`, of this type; the caller's call, passed on.
        unsafe { core::mem::transmute::<usize, F>(f)(base, n, size, compare) }
    }
}
entry! {
    /// `qsort_r` (GNU): see "Sorting" above.
    fn qsort_r(base: *mut c_void, n: usize, size: usize, compare: CompareWith, arg: *mut c_void) -> (), "r9", ret => {
        sort_of(ret, base, n, size, "qsort_r");
        type F = unsafe extern "C" fn(*mut c_void, usize, usize, CompareWith, *mut c_void);
        let f = crate::sys::next_symbol(&QSORT_R, c"qsort_r").unwrap_or_else(|| lost("qsort_r"));
        // SAFETY: the C library's `qsort_r`, of this type; the caller's call, passed on.
        unsafe { core::mem::transmute::<usize, F>(f)(base, n, size, compare, arg) }
    }
}
