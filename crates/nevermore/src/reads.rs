//! The C library's string and memory reads, held to the bounds of heap objects (`check_reads`,
//! on in detect mode).
//!
//! `strlen` of a buffer that `read` or `recv` filled without a NUL, `memcmp` of a length the
//! peer claimed, `strchr` looking for a character that is not there: each reads on past the end
//! of its heap object, through the canary into the neighbour's bytes, which no canary check
//! and, for an object that shares its page, no trap ever sees. In detect mode, which is for
//! finding such bugs, the functions below look, when the program's call returns, at how far it
//! read (from what it returned: where it stopped), and report a read that ran past the end of a
//! live heap object (`heap-buffer-overflow`, the call named), as AddressSanitizer's
//! interceptors do. How far is what the C library's contract makes it read, not what its
//! vectorised code touched: `memcmp` up to the first difference, `strchr` up to the character
//! or the NUL, `strstr` up to the end of the match.
//!
//! In prevent mode they are off by default (`check_reads=1` turns them on): a read leaks nothing
//! by itself, and a check costs a look-up of the buffer's object; the calls that hand on what
//! they read (`memcpy` out of an object, `strdup`, `write`, `send`) are checked in every mode.
//! Off, a call costs a test and the jump to the C library's function.
//!
//! Each function is entered through a stub that passes the caller's return address on
//! (`copies::entry`): the library's own calls (the compiler makes some for it: `memcmp`, `bcmp`,
//! `strlen`) go straight to the C library's. The C library's functions are looked up when the
//! library is loaded; before that, a plain loop of the library's own does the work.

use core::ffi::{c_char, c_int, c_void};
use core::ptr::read_volatile as at;
use core::sync::atomic::{AtomicUsize, Ordering};

use libc::wchar_t;

use crate::copies::entry;
use crate::io::Way;

/// The functions, in the order of `NAMES`, found when the library is loaded.
static REAL: [AtomicUsize; 28] = [const { AtomicUsize::new(0) }; 28];

const NAMES: [&core::ffi::CStr; 28] = [
    c"strlen",
    c"strnlen",
    c"strchr",
    c"strchrnul",
    c"strrchr",
    c"memchr",
    c"memrchr",
    c"memcmp",
    c"bcmp",
    c"strcmp",
    c"strncmp",
    c"strcasecmp",
    c"strncasecmp",
    c"strstr",
    c"memmem",
    c"strspn",
    c"strcspn",
    c"strpbrk",
    c"wcslen",
    c"wcscmp",
    c"wmemcmp",
    c"rawmemchr",
    c"strcasestr",
    c"wcschr",
    c"wcsrchr",
    c"wmemchr",
    c"wcsncmp",
    c"wcsnlen",
];

#[used]
#[link_section = ".init_array"]
static RESOLVE: extern "C" fn() = {
    extern "C" fn resolve() {
        for (slot, name) in REAL.iter().zip(NAMES) {
            let _ = crate::sys::next_symbol(slot, name);
        }
    }
    resolve
};

/// Calls the C library's function at `NAMES[$i]` (of C type `$ty`) as `$call` does with `$f`,
/// or, before it is known, does `$fallback`.
macro_rules! call {
    ($i:expr, $ty:ty, |$f:ident| $call:expr, $fallback:expr) => {
        match REAL[$i].load(Ordering::Relaxed) {
            // SAFETY: the library's own loop, on the caller's arguments (the C contract).
            0 => unsafe { $fallback },
            f => {
                // SAFETY: the C library's function named `NAMES[$i]`, whose C type `$ty` is.
                let $f = unsafe { core::mem::transmute::<usize, $ty>(f) };
                // SAFETY: the caller's arguments, passed on (the C contract).
                unsafe { $call }
            }
        }
    };
}

/// The call of a function (as `call!`), then, when reads are checked, `$check` with its result
/// as `$r`. Unchecked, the call is the function's last step (a jump to the C library's).
macro_rules! checked_call {
    ($ret:ident, $i:expr, $ty:ty, |$f:ident| $call:expr, $fallback:expr, |$r:ident| $check:block) => {{
        if !reads_checked($ret) {
            return call!($i, $ty, |$f| $call, $fallback);
        }
        let $r = call!($i, $ty, |$f| $call, $fallback);
        $check
        $r
    }};
}

/// Whether reads are checked for a call from `ret`: made by the program (or another library),
/// not by this library, with `check_reads` on.
#[inline(always)]
fn reads_checked(ret: usize) -> bool {
    crate::options().check_reads && crate::copies::outside_library(ret)
}

/// Reports a read of `n` bytes from `p` that ran past the end of the live heap object `p` lies in.
#[inline(always)]
fn read(p: *const c_void, n: usize, op: &'static str) {
    crate::io::bounded_live(p as usize, n, Way::Read, op);
}

/// The bytes of `p` up to its NUL, and the NUL (the C library's `strlen`, or a loop).
#[inline(always)]
fn string_bytes(p: *const c_char) -> usize {
    type F = unsafe extern "C" fn(*const c_char) -> usize;
    call!(0, F, |f| f(p), fallback::len(p)) + 1
}

/// How many characters of `a` and `b` a comparison reads: up to the first pair that differs
/// (by `same`) or the first NUL, at most `n`.
///
/// # Safety
/// `a` and `b` strings that the comparison the caller checks has read that far.
unsafe fn compared<T: Copy + PartialEq + Default>(
    a: *const T,
    b: *const T,
    n: usize,
    same: impl Fn(T, T) -> bool,
) -> usize {
    let mut i = 0;
    while i < n {
        // SAFETY: within what the comparison read (see above).
        let (x, y) = unsafe { (at(a.add(i)), at(b.add(i))) };
        if !same(x, y) || x == T::default() {
            return i + 1;
        }
        i += 1;
    }
    n
}

/// How many elements of `a` and `b` a memory comparison of `n` that found them different
/// (`differ`) reads: up to the first that differs.
fn mem_compared<T: Copy + PartialEq>(a: *const T, b: *const T, n: usize, differ: bool) -> usize {
    if !differ {
        return n;
    }
    let mut i = 0;
    // SAFETY: the comparison read both up to their first difference, which lies within `n`.
    while i < n && unsafe { at(a.add(i)) == at(b.add(i)) } {
        i += 1;
    }
    (i + 1).min(n)
}

/// How many bytes from `s` a search read that stopped at `r` (null: not found, having read
/// `whole`), `len` bytes from there on being part of what it found.
fn searched(s: *const c_char, r: *const c_char, len: usize, whole: impl FnOnce() -> usize) -> usize {
    if r.is_null() {
        whole()
    } else {
        r as usize - s as usize + len
    }
}

entry! {
    /// `strlen`: see the module's notes.
    fn strlen(s: *const c_char) -> usize, "rsi", ret => {
        type F = unsafe extern "C" fn(*const c_char) -> usize;
        checked_call!(ret, 0, F, |f| f(s), fallback::len(s), |r| {
            read(s.cast(), r + 1, "strlen");
        })
    }
}
entry! {
    /// `strnlen`: see the module's notes.
    fn strnlen(s: *const c_char, n: usize) -> usize, "rdx", ret => {
        type F = unsafe extern "C" fn(*const c_char, usize) -> usize;
        checked_call!(ret, 1, F, |f| f(s, n), fallback::nlen(s, n), |r| {
            read(s.cast(), (r + 1).min(n), "strnlen");
        })
    }
}
entry! {
    /// `strchr`: see the module's notes.
    fn strchr(s: *const c_char, c: c_int) -> *mut c_char, "rdx", ret => {
        type F = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_char;
        checked_call!(ret, 2, F, |f| f(s, c), fallback::chr(s, c, false), |r| {
            read(s.cast(), searched(s, r, 1, || string_bytes(s)), "strchr");
        })
    }
}
entry! {
    /// `strchrnul` (GNU): see the module's notes.
    fn strchrnul(s: *const c_char, c: c_int) -> *mut c_char, "rdx", ret => {
        type F = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_char;
        checked_call!(ret, 3, F, |f| f(s, c), fallback::chr(s, c, true), |r| {
            read(s.cast(), searched(s, r, 1, || 0), "strchrnul");
        })
    }
}
entry! {
    /// `strrchr`: see the module's notes (it reads the whole string).
    fn strrchr(s: *const c_char, c: c_int) -> *mut c_char, "rdx", ret => {
        type F = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_char;
        checked_call!(ret, 4, F, |f| f(s, c), fallback::rchr(s, c), |r| {
            read(s.cast(), string_bytes(s), "strrchr");
        })
    }
}
/// The C library's `memchr` (or, before it is known, the library's own loop), unchecked: for
/// the library's own searches of the program's buffers (`memccpy`).
pub(crate) fn find_byte(s: *const c_void, c: c_int, n: usize) -> *mut c_void {
    type F = unsafe extern "C" fn(*const c_void, c_int, usize) -> *mut c_void;
    call!(5, F, |f| f(s, c, n), fallback::mchr(s, c, n))
}

entry! {
    /// `memchr`: see the module's notes.
    fn memchr(s: *const c_void, c: c_int, n: usize) -> *mut c_void, "rcx", ret => {
        type F = unsafe extern "C" fn(*const c_void, c_int, usize) -> *mut c_void;
        checked_call!(ret, 5, F, |f| f(s, c, n), fallback::mchr(s, c, n), |r| {
            read(s, searched(s.cast(), r.cast(), 1, || n), "memchr");
        })
    }
}
entry! {
    /// `memrchr` (GNU): see the module's notes (it reads from the end, so all `n` bytes count).
    fn memrchr(s: *const c_void, c: c_int, n: usize) -> *mut c_void, "rcx", ret => {
        type F = unsafe extern "C" fn(*const c_void, c_int, usize) -> *mut c_void;
        checked_call!(ret, 6, F, |f| f(s, c, n), fallback::mrchr(s, c, n), |r| {
            read(s, n, "memrchr");
        })
    }
}
entry! {
    /// `memcmp`: see the module's notes.
    fn memcmp(a: *const c_void, b: *const c_void, n: usize) -> c_int, "rcx", ret => {
        mem_cmp(7, a, b, n, ret, "memcmp")
    }
}
entry! {
    /// `bcmp`: as `memcmp` (what the compiler makes of a comparison for equality).
    fn bcmp(a: *const c_void, b: *const c_void, n: usize) -> c_int, "rcx", ret => {
        mem_cmp(8, a, b, n, ret, "bcmp")
    }
}

/// `memcmp` and `bcmp` (`i`: which).
#[inline(always)]
fn mem_cmp(i: usize, a: *const c_void, b: *const c_void, n: usize, ret: usize, op: &'static str) -> c_int {
    type F = unsafe extern "C" fn(*const c_void, *const c_void, usize) -> c_int;
    checked_call!(ret, i, F, |f| f(a, b, n), fallback::mcmp(a, b, n), |r| {
        if n > 0 {
            let k = mem_compared(a.cast::<u8>(), b.cast::<u8>(), n, r != 0);
            read(a, k, op);
            read(b, k, op);
        }
    })
}

entry! {
    /// `strcmp`: see the module's notes.
    fn strcmp(a: *const c_char, b: *const c_char) -> c_int, "rdx", ret => {
        type F = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
        checked_call!(ret, 9, F, |f| f(a, b), fallback::cmp(a, b, usize::MAX, false), |r| {
            str_compared(a, b, usize::MAX, false, "strcmp");
        })
    }
}
entry! {
    /// `strncmp`: see the module's notes.
    fn strncmp(a: *const c_char, b: *const c_char, n: usize) -> c_int, "rcx", ret => {
        type F = unsafe extern "C" fn(*const c_char, *const c_char, usize) -> c_int;
        checked_call!(ret, 10, F, |f| f(a, b, n), fallback::cmp(a, b, n, false), |r| {
            str_compared(a, b, n, false, "strncmp");
        })
    }
}
entry! {
    /// `strcasecmp`: see the module's notes.
    fn strcasecmp(a: *const c_char, b: *const c_char) -> c_int, "rdx", ret => {
        type F = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
        checked_call!(ret, 11, F, |f| f(a, b), fallback::cmp(a, b, usize::MAX, true), |r| {
            str_compared(a, b, usize::MAX, true, "strcasecmp");
        })
    }
}
entry! {
    /// `strncasecmp`: see the module's notes.
    fn strncasecmp(a: *const c_char, b: *const c_char, n: usize) -> c_int, "rcx", ret => {
        type F = unsafe extern "C" fn(*const c_char, *const c_char, usize) -> c_int;
        checked_call!(ret, 12, F, |f| f(a, b, n), fallback::cmp(a, b, n, true), |r| {
            str_compared(a, b, n, true, "strncasecmp");
        })
    }
}

/// The check of a string comparison (`caseless`: by `tolower`): both strings as far as it read.
#[inline(always)]
fn str_compared(a: *const c_char, b: *const c_char, n: usize, caseless: bool, op: &'static str) {
    both_compared(a, b, n, op, |x, y| {
        x == y || (caseless && fallback::lower(c_int::from(x as u8)) == fallback::lower(c_int::from(y as u8)))
    });
}

/// The check of a comparison of two strings of `T` (`same`: whether two characters compare
/// equal): both as far as it read, up to `n` characters.
#[inline(always)]
fn both_compared<T: Copy + PartialEq + Default>(
    a: *const T,
    b: *const T,
    n: usize,
    op: &'static str,
    same: impl Fn(T, T) -> bool,
) {
    if n == 0 || !(crate::io::in_heap(a as usize) || crate::io::in_heap(b as usize)) {
        return;
    }
    // SAFETY: the comparison just read both that far.
    let k = unsafe { compared(a, b, n, same) }.saturating_mul(core::mem::size_of::<T>());
    read(a.cast(), k, op);
    read(b.cast(), k, op);
}

entry! {
    /// `strstr`: see the module's notes.
    fn strstr(h: *const c_char, needle: *const c_char) -> *mut c_char, "rdx", ret => {
        type F = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut c_char;
        checked_call!(ret, 13, F, |f| f(h, needle), fallback::find(h, needle), |r| {
            let nl = string_bytes(needle);
            read(needle.cast(), nl, "strstr");
            read(h.cast(), searched(h, r, nl - 1, || string_bytes(h)), "strstr");
        })
    }
}
entry! {
    /// `memmem` (GNU): see the module's notes.
    fn memmem(h: *const c_void, hl: usize, needle: *const c_void, nl: usize) -> *mut c_void, "r8", ret => {
        type F = unsafe extern "C" fn(*const c_void, usize, *const c_void, usize) -> *mut c_void;
        checked_call!(ret, 14, F, |f| f(h, hl, needle, nl), fallback::mfind(h, hl, needle, nl), |r| {
            if nl <= hl {
                read(needle, nl, "memmem");
                read(h, searched(h.cast(), r.cast(), nl, || hl), "memmem");
            }
        })
    }
}
entry! {
    /// `strspn`: see the module's notes.
    fn strspn(s: *const c_char, set: *const c_char) -> usize, "rdx", ret => {
        type F = unsafe extern "C" fn(*const c_char, *const c_char) -> usize;
        checked_call!(ret, 15, F, |f| f(s, set), fallback::span(s, set, true), |r| {
            spanned(s, r + 1, set, "strspn");
        })
    }
}
entry! {
    /// `strcspn`: see the module's notes.
    fn strcspn(s: *const c_char, set: *const c_char) -> usize, "rdx", ret => {
        type F = unsafe extern "C" fn(*const c_char, *const c_char) -> usize;
        checked_call!(ret, 16, F, |f| f(s, set), fallback::span(s, set, false), |r| {
            spanned(s, r + 1, set, "strcspn");
        })
    }
}
entry! {
    /// `strpbrk`: see the module's notes.
    fn strpbrk(s: *const c_char, set: *const c_char) -> *mut c_char, "rdx", ret => {
        type F = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut c_char;
        checked_call!(ret, 17, F, |f| f(s, set), fallback::brk(s, set), |r| {
            spanned(s, searched(s, r, 1, || string_bytes(s)), set, "strpbrk");
        })
    }
}

/// The check of `strspn` and its kin: `n` bytes of `s`, and the set to its NUL.
#[inline(always)]
fn spanned(s: *const c_char, n: usize, set: *const c_char, op: &'static str) {
    read(s.cast(), n, op);
    read(set.cast(), string_bytes(set), op);
}

entry! {
    /// `wcslen`: see the module's notes.
    fn wcslen(s: *const wchar_t) -> usize, "rsi", ret => {
        type F = unsafe extern "C" fn(*const wchar_t) -> usize;
        checked_call!(ret, 18, F, |f| f(s), fallback::wlen(s), |r| {
            read(s.cast(), (r + 1).saturating_mul(4), "wcslen");
        })
    }
}
entry! {
    /// `wcscmp`: see the module's notes.
    fn wcscmp(a: *const wchar_t, b: *const wchar_t) -> c_int, "rdx", ret => {
        type F = unsafe extern "C" fn(*const wchar_t, *const wchar_t) -> c_int;
        checked_call!(ret, 19, F, |f| f(a, b), fallback::wcmp(a, b), |r| {
            both_compared(a, b, usize::MAX, "wcscmp", |x, y| x == y);
        })
    }
}
entry! {
    /// `wmemcmp`: see the module's notes.
    fn wmemcmp(a: *const wchar_t, b: *const wchar_t, n: usize) -> c_int, "rcx", ret => {
        type F = unsafe extern "C" fn(*const wchar_t, *const wchar_t, usize) -> c_int;
        checked_call!(ret, 20, F, |f| f(a, b, n), fallback::wmcmp(a, b, n), |r| {
            if n > 0 {
                let k = mem_compared(a, b, n, r != 0);
                read(a.cast(), k.saturating_mul(4), "wmemcmp");
                read(b.cast(), k.saturating_mul(4), "wmemcmp");
            }
        })
    }
}

entry! {
    /// `rawmemchr` (GNU): see the module's notes (it reads up to the character, unbounded).
    fn rawmemchr(s: *const c_void, c: c_int) -> *mut c_void, "rdx", ret => {
        type F = unsafe extern "C" fn(*const c_void, c_int) -> *mut c_void;
        checked_call!(ret, 21, F, |f| f(s, c), fallback::rawchr(s, c), |r| {
            read(s, r as usize - s as usize + 1, "rawmemchr");
        })
    }
}
entry! {
    /// `strcasestr` (GNU): see the module's notes.
    fn strcasestr(h: *const c_char, needle: *const c_char) -> *mut c_char, "rdx", ret => {
        type F = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut c_char;
        checked_call!(ret, 22, F, |f| f(h, needle), fallback::casefind(h, needle), |r| {
            let nl = string_bytes(needle);
            read(needle.cast(), nl, "strcasestr");
            read(h.cast(), searched(h, r, nl - 1, || string_bytes(h)), "strcasestr");
        })
    }
}

/// The bytes of the wide string `p` up to its NUL, and the NUL (the C library's `wcslen`, or a
/// loop).
#[inline(always)]
fn wide_string_bytes(p: *const wchar_t) -> usize {
    type F = unsafe extern "C" fn(*const wchar_t) -> usize;
    (call!(18, F, |f| f(p), fallback::wlen(p)) + 1).saturating_mul(4)
}

entry! {
    /// `wcschr`: see the module's notes.
    fn wcschr(s: *const wchar_t, c: wchar_t) -> *mut wchar_t, "rdx", ret => {
        type F = unsafe extern "C" fn(*const wchar_t, wchar_t) -> *mut wchar_t;
        checked_call!(ret, 23, F, |f| f(s, c), fallback::wchr(s, c), |r| {
            read(s.cast(), searched(s.cast(), r.cast(), 4, || wide_string_bytes(s)), "wcschr");
        })
    }
}
entry! {
    /// `wcsrchr`: see the module's notes (it reads the whole string).
    fn wcsrchr(s: *const wchar_t, c: wchar_t) -> *mut wchar_t, "rdx", ret => {
        type F = unsafe extern "C" fn(*const wchar_t, wchar_t) -> *mut wchar_t;
        checked_call!(ret, 24, F, |f| f(s, c), fallback::wrchr(s, c), |r| {
            read(s.cast(), wide_string_bytes(s), "wcsrchr");
        })
    }
}
entry! {
    /// `wmemchr`: see the module's notes.
    fn wmemchr(s: *const wchar_t, c: wchar_t, n: usize) -> *mut wchar_t, "rcx", ret => {
        type F = unsafe extern "C" fn(*const wchar_t, wchar_t, usize) -> *mut wchar_t;
        checked_call!(ret, 25, F, |f| f(s, c, n), fallback::wmchr(s, c, n), |r| {
            read(s.cast(), searched(s.cast(), r.cast(), 4, || n.saturating_mul(4)), "wmemchr");
        })
    }
}
entry! {
    /// `wcsncmp`: see the module's notes.
    fn wcsncmp(a: *const wchar_t, b: *const wchar_t, n: usize) -> c_int, "rcx", ret => {
        type F = unsafe extern "C" fn(*const wchar_t, *const wchar_t, usize) -> c_int;
        checked_call!(ret, 26, F, |f| f(a, b, n), fallback::wncmp(a, b, n), |r| {
            both_compared(a, b, n, "wcsncmp", |x, y| x == y);
        })
    }
}
entry! {
    /// `wcsnlen`: see the module's notes.
    fn wcsnlen(s: *const wchar_t, n: usize) -> usize, "rdx", ret => {
        type F = unsafe extern "C" fn(*const wchar_t, usize) -> usize;
        checked_call!(ret, 27, F, |f| f(s, n), fallback::wnlen(s, n), |r| {
            read(s.cast(), (r + 1).min(n).saturating_mul(4), "wcsnlen");
        })
    }
}

/// Plain loops of the library's own, for the moments before the C library's functions are
/// known (the library's first steps, when only its own calls come here). Reads are volatile so
/// that the compiler does not make them calls of the functions they stand in for.
mod fallback {
    use super::*;

    /// `tolower` of the C locale.
    pub(super) fn lower(c: c_int) -> c_int {
        if (c_int::from(b'A')..=c_int::from(b'Z')).contains(&c) {
            c + 32
        } else {
            c
        }
    }

    /// # Safety
    /// `s` a string.
    pub(super) unsafe fn len(s: *const c_char) -> usize {
        // SAFETY: the caller's string, read up to its NUL.
        unsafe { nlen(s, usize::MAX) }
    }

    /// # Safety
    /// `s` a string, or `n` bytes.
    pub(super) unsafe fn nlen(s: *const c_char, n: usize) -> usize {
        let mut i = 0;
        // SAFETY: the caller's string, read up to its NUL or `n` bytes.
        while i < n && unsafe { at(s.add(i)) } != 0 {
            i += 1;
        }
        i
    }

    /// `strchr` (`nul`: `strchrnul`).
    ///
    /// # Safety
    /// `s` a string.
    pub(super) unsafe fn chr(s: *const c_char, c: c_int, nul: bool) -> *mut c_char {
        let mut p = s;
        loop {
            // SAFETY: the caller's string, read up to its NUL.
            let x = unsafe { at(p) };
            if x as u8 == c as u8 {
                return p.cast_mut();
            }
            if x == 0 {
                return if nul { p.cast_mut() } else { core::ptr::null_mut() };
            }
            // SAFETY: within the string.
            p = unsafe { p.add(1) };
        }
    }

    /// # Safety
    /// `s` a string.
    pub(super) unsafe fn rchr(s: *const c_char, c: c_int) -> *mut c_char {
        // SAFETY: the caller's string.
        let n = unsafe { len(s) };
        // SAFETY: the string and its NUL, searched from its end.
        unsafe { mrchr(s.cast(), c, n + 1).cast() }
    }

    /// # Safety
    /// `s` valid for `n` bytes.
    pub(super) unsafe fn mchr(s: *const c_void, c: c_int, n: usize) -> *mut c_void {
        let s = s.cast::<u8>();
        // SAFETY: the caller's `n` bytes.
        (0..n).find(|&i| unsafe { at(s.add(i)) } == c as u8).map_or(core::ptr::null_mut(), |i| s.wrapping_add(i) as _)
    }

    /// # Safety
    /// `s` valid for `n` bytes.
    pub(super) unsafe fn mrchr(s: *const c_void, c: c_int, n: usize) -> *mut c_void {
        let s = s.cast::<u8>();
        // SAFETY: the caller's `n` bytes.
        (0..n)
            .rev()
            .find(|&i| unsafe { at(s.add(i)) } == c as u8)
            .map_or(core::ptr::null_mut(), |i| s.wrapping_add(i) as _)
    }

    /// # Safety
    /// `a` and `b` valid for `n` bytes.
    pub(super) unsafe fn mcmp(a: *const c_void, b: *const c_void, n: usize) -> c_int {
        let (a, b) = (a.cast::<u8>(), b.cast::<u8>());
        for i in 0..n {
            // SAFETY: the caller's `n` bytes.
            let (x, y) = unsafe { (at(a.add(i)), at(b.add(i))) };
            if x != y {
                return c_int::from(x) - c_int::from(y);
            }
        }
        0
    }

    /// `strncmp` (`caseless`: `strncasecmp` in the C locale).
    ///
    /// # Safety
    /// `a` and `b` strings, or valid for `n` bytes.
    pub(super) unsafe fn cmp(a: *const c_char, b: *const c_char, n: usize, caseless: bool) -> c_int {
        let fold = |x: c_char| if caseless { lower(c_int::from(x as u8)) } else { c_int::from(x as u8) };
        for i in 0..n {
            // SAFETY: the caller's strings, up to their first difference or NUL.
            let (x, y) = unsafe { (fold(at(a.add(i))), fold(at(b.add(i)))) };
            if x != y || x == 0 {
                return x - y;
            }
        }
        0
    }

    /// # Safety
    /// `h` and `needle` strings.
    pub(super) unsafe fn find(h: *const c_char, needle: *const c_char) -> *mut c_char {
        // SAFETY: the caller's strings.
        let (hl, nl) = unsafe { (len(h), len(needle)) };
        // SAFETY: the same, as bytes.
        unsafe { mfind(h.cast(), hl, needle.cast(), nl).cast() }
    }

    /// # Safety
    /// `h` valid for `hl` bytes, `needle` for `nl`.
    pub(super) unsafe fn mfind(h: *const c_void, hl: usize, needle: *const c_void, nl: usize) -> *mut c_void {
        if nl > hl {
            return core::ptr::null_mut();
        }
        // SAFETY: within both buffers.
        (0..=hl - nl)
            .find(|&i| unsafe { mcmp(h.cast::<u8>().add(i).cast(), needle, nl) } == 0)
            .map_or(core::ptr::null_mut(), |i| h.cast::<u8>().wrapping_add(i) as _)
    }

    /// `strspn` (`inside`), or `strcspn`.
    ///
    /// # Safety
    /// `s` and `set` strings.
    pub(super) unsafe fn span(s: *const c_char, set: *const c_char, inside: bool) -> usize {
        let mut i = 0;
        loop {
            // SAFETY: the caller's string, up to its NUL.
            let x = unsafe { at(s.add(i)) };
            // SAFETY: the caller's set, up to its NUL.
            if x == 0 || unsafe { !chr(set, c_int::from(x as u8), false).is_null() } != inside {
                return i;
            }
            i += 1;
        }
    }

    /// # Safety
    /// `s` and `set` strings.
    pub(super) unsafe fn brk(s: *const c_char, set: *const c_char) -> *mut c_char {
        // SAFETY: the caller's strings; `k` is within `s` (at its NUL at most).
        unsafe {
            let k = span(s, set, false);
            if at(s.add(k)) == 0 {
                core::ptr::null_mut()
            } else {
                s.add(k).cast_mut()
            }
        }
    }

    /// # Safety
    /// `s` a wide string.
    pub(super) unsafe fn wlen(s: *const wchar_t) -> usize {
        let mut i = 0;
        // SAFETY: the caller's string, up to its NUL.
        while unsafe { at(s.add(i)) } != 0 {
            i += 1;
        }
        i
    }

    /// # Safety
    /// `s` holds `c` at or after it.
    pub(super) unsafe fn rawchr(s: *const c_void, c: c_int) -> *mut c_void {
        let mut p = s.cast::<u8>();
        // SAFETY: the caller's bytes, read up to `c`, which is there.
        while unsafe { at(p) } != c as u8 {
            // SAFETY: as above.
            p = unsafe { p.add(1) };
        }
        p as *mut c_void
    }

    /// `strcasestr` in the C locale.
    ///
    /// # Safety
    /// `h` and `needle` strings.
    pub(super) unsafe fn casefind(h: *const c_char, needle: *const c_char) -> *mut c_char {
        // SAFETY: the caller's strings.
        let (hl, nl) = unsafe { (len(h), len(needle)) };
        if nl > hl {
            return core::ptr::null_mut();
        }
        // SAFETY: within both strings.
        (0..=hl - nl)
            .find(|&i| unsafe { cmp(h.add(i), needle, nl, true) } == 0)
            .map_or(core::ptr::null_mut(), |i| h.wrapping_add(i).cast_mut())
    }

    /// # Safety
    /// `s` a wide string.
    pub(super) unsafe fn wchr(s: *const wchar_t, c: wchar_t) -> *mut wchar_t {
        let mut p = s;
        loop {
            // SAFETY: the caller's string, read up to its NUL.
            let x = unsafe { at(p) };
            if x == c {
                return p.cast_mut();
            }
            if x == 0 {
                return core::ptr::null_mut();
            }
            // SAFETY: within the string.
            p = unsafe { p.add(1) };
        }
    }

    /// # Safety
    /// `s` a wide string.
    pub(super) unsafe fn wrchr(s: *const wchar_t, c: wchar_t) -> *mut wchar_t {
        // SAFETY: the caller's string, with its NUL.
        let n = unsafe { wlen(s) } + 1;
        // SAFETY: as above, searched from its end.
        (0..n)
            .rev()
            .find(|&i| unsafe { at(s.add(i)) } == c)
            .map_or(core::ptr::null_mut(), |i| s.wrapping_add(i).cast_mut())
    }

    /// # Safety
    /// `s` valid for `n` wide characters.
    pub(super) unsafe fn wmchr(s: *const wchar_t, c: wchar_t, n: usize) -> *mut wchar_t {
        // SAFETY: the caller's `n` characters.
        (0..n).find(|&i| unsafe { at(s.add(i)) } == c).map_or(core::ptr::null_mut(), |i| s.wrapping_add(i).cast_mut())
    }

    /// # Safety
    /// `a` and `b` wide strings, or valid for `n` characters.
    pub(super) unsafe fn wncmp(a: *const wchar_t, b: *const wchar_t, n: usize) -> c_int {
        // SAFETY: the caller's strings.
        unsafe { wmcmp_to(a, b, n, true) }
    }

    /// # Safety
    /// `s` a wide string, or valid for `n` characters.
    pub(super) unsafe fn wnlen(s: *const wchar_t, n: usize) -> usize {
        let mut i = 0;
        // SAFETY: the caller's string, up to its NUL or `n` characters.
        while i < n && unsafe { at(s.add(i)) } != 0 {
            i += 1;
        }
        i
    }

    /// # Safety
    /// `a` and `b` wide strings.
    pub(super) unsafe fn wcmp(a: *const wchar_t, b: *const wchar_t) -> c_int {
        // SAFETY: the caller's strings.
        unsafe { wmcmp_to(a, b, usize::MAX, true) }
    }

    /// # Safety
    /// `a` and `b` valid for `n` wide characters.
    pub(super) unsafe fn wmcmp(a: *const wchar_t, b: *const wchar_t, n: usize) -> c_int {
        // SAFETY: the caller's buffers.
        unsafe { wmcmp_to(a, b, n, false) }
    }

    /// # Safety
    /// `a` and `b` valid for `n` wide characters, or strings up to their NUL (`nul`).
    unsafe fn wmcmp_to(a: *const wchar_t, b: *const wchar_t, n: usize, nul: bool) -> c_int {
        for i in 0..n {
            // SAFETY: the caller's buffers (see above).
            let (x, y) = unsafe { (at(a.add(i)), at(b.add(i))) };
            if x != y {
                return if x < y { -1 } else { 1 };
            }
            if nul && x == 0 {
                return 0;
            }
        }
        0
    }
}
