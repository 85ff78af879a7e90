//! Formatted output and input into the program's buffers, held to the bounds of heap objects.
//!
//! **Output.** `sprintf(buf, "%s", name)` into a heap buffer writes as much as the arguments
//! make, and `snprintf` as much as its length allows, which a program may have taken from a
//! bigger buffer. How much that is, is known only once the text is made; so a call into a live heap
//! object is made with the C library's bounded function, bounded by the room left in the
//! object, and a text that did not fit is reported (the call was to write past the end): it
//! was cut at the object's end, nothing after it was written. A text that fits is the one the
//! call would have made, and the call returns as the C library's does. The fortified
//! functions (`__sprintf_chk`, ...) keep their own checks: the bounded call is their bounded
//! kin with the same flag, and a call whose own bound lies within the object is passed on as
//! it is. The wide-character `swprintf` and its kin are bounded the same way, in characters,
//! and so are `strftime`, `strftime_l`, the wide `wcsftime` and its kin (see `strftime_of`) and
//! `inet_ntop`.
//! The variadic functions are entered through a stub that saves the argument registers
//! and makes the `va_list` the C library's `v...` functions take; their `v` forms through the
//! same stub, which passes the return address on; the times and `inet_ntop` through the
//! copies' (`copies::entry`).
//!
//! **Input.** `sscanf(line, "%s", name)` into a heap buffer writes the whole word the input
//! holds, whatever the room: the classic overflow a scan of text into a fixed field makes
//! (`fscanf` and `scanf` the same from a stream). A scan cannot be bounded from outside
//! without changing what it matches, so it is checked as the system calls that receive are
//! (`io`): when the call returns, its format is read again, and every string (`%s`, `%[`,
//! `%c`, and their wide forms) the call assigned into a live heap object is held to the
//! object's end (the string and its terminator, or the characters `%c` took). An overflow is
//! reported before the program goes on, and before what was written over is used. A format
//! the check does not follow (arguments taken by position, `%n$`, or a conversion it does not
//! know) is checked up to there; so is a call that wrote a string it then did not count (a
//! `%20c` that met the end of its input after more characters than the buffer holds), which
//! the canary after the object is left to find. The wide calls (`swscanf` and kin) the same,
//! with their wide format; a narrow string they write ends in two NULs, not one (see
//! `heap::mend_library_nul`).

use core::ffi::{c_char, c_int, c_void, CStr};
use core::sync::atomic::AtomicUsize;

use libc::wchar_t;

use crate::copies::{entry, from_program, next, outside_library, room_below};
use crate::io::Way;

/// One x86-64 `va_list` (the C library's functions take a pointer to it). A copy of it walks
/// the same arguments (`va_copy`).
#[repr(C)]
#[derive(Clone, Copy)]
struct VaList {
    gp_offset: u32,
    fp_offset: u32,
    overflow_arg_area: *mut c_void,
    reg_save_area: *mut c_void,
}

/// The argument registers a stub saved (`rdi`, `rsi`, `rdx`, `rcx`, `r8`, `r9`).
type Args = [usize; 6];

type VSprintf = unsafe extern "C" fn(*mut c_char, *const c_char, *mut VaList) -> c_int;
type VSnprintf = unsafe extern "C" fn(*mut c_char, usize, *const c_char, *mut VaList) -> c_int;
type VSprintfChk = unsafe extern "C" fn(*mut c_char, c_int, usize, *const c_char, *mut VaList) -> c_int;
type VSnprintfChk = unsafe extern "C" fn(*mut c_char, usize, c_int, usize, *const c_char, *mut VaList) -> c_int;

static VSPRINTF: AtomicUsize = AtomicUsize::new(0);
static VSNPRINTF: AtomicUsize = AtomicUsize::new(0);
static VSPRINTF_CHK: AtomicUsize = AtomicUsize::new(0);
static VSNPRINTF_CHK: AtomicUsize = AtomicUsize::new(0);

/// Defines an exported function as a stub that saves the argument registers and builds a
/// `va_list` of the arguments after the first `$named` (integer ones, as every function here
/// has), then calls `$body(args, va_list, return address)` and returns what it returns. The
/// stub has call-frame information, so that a report's stack goes on to the caller.
macro_rules! formatting {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) => $body:ident, $named:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The C contract of the function.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            core::arch::naked_asm!(
                ".cfi_startproc",
                // Entered with rsp 8 past a multiple of 16: 200 bytes below are 16-aligned.
                "sub rsp, 200",
                ".cfi_adjust_cfa_offset 200",
                "mov [rsp], rdi",
                "mov [rsp + 8], rsi",
                "mov [rsp + 16], rdx",
                "mov [rsp + 24], rcx",
                "mov [rsp + 32], r8",
                "mov [rsp + 40], r9",
                // al: how many vector registers a variadic call passes.
                "test al, al",
                "je 2f",
                "movaps [rsp + 48], xmm0",
                "movaps [rsp + 64], xmm1",
                "movaps [rsp + 80], xmm2",
                "movaps [rsp + 96], xmm3",
                "movaps [rsp + 112], xmm4",
                "movaps [rsp + 128], xmm5",
                "movaps [rsp + 144], xmm6",
                "movaps [rsp + 160], xmm7",
                "2:",
                // The va_list at rsp + 176: the named arguments' registers used, the vector
                // registers after the integer ones, the caller's stack arguments above the
                // return address.
                "mov dword ptr [rsp + 176], {gp}",
                "mov dword ptr [rsp + 180], 48",
                "lea rax, [rsp + 208]",
                "mov [rsp + 184], rax",
                "mov [rsp + 192], rsp",
                "mov rdi, rsp",
                "lea rsi, [rsp + 176]",
                "mov rdx, [rsp + 200]",
                "call {f}",
                "add rsp, 200",
                ".cfi_adjust_cfa_offset -200",
                "ret",
                ".cfi_endproc",
                gp = const $named * 8,
                f = sym $body,
            )
        }
    };
}

formatting! {
    /// `sprintf`: see "Formatted output" in the module.
    fn sprintf(d: *mut c_char, fmt: *const c_char) => sprintf_checked, 2
}
formatting! {
    /// `vsprintf`: see "Formatted output" in the module.
    fn vsprintf(d: *mut c_char, fmt: *const c_char, ap: *mut c_void) => vsprintf_checked, 3
}
formatting! {
    /// `snprintf`: see "Formatted output" in the module.
    fn snprintf(d: *mut c_char, n: usize, fmt: *const c_char) => snprintf_checked, 3
}
formatting! {
    /// `vsnprintf`: see "Formatted output" in the module.
    fn vsnprintf(d: *mut c_char, n: usize, fmt: *const c_char, ap: *mut c_void) => vsnprintf_checked, 4
}
formatting! {
    /// `__sprintf_chk` (`sprintf` fortified): see "Formatted output" in the module.
    fn __sprintf_chk(d: *mut c_char, flag: c_int, slen: usize, fmt: *const c_char) => sprintf_chk_checked, 4
}
formatting! {
    /// `__vsprintf_chk`: see "Formatted output" in the module.
    fn __vsprintf_chk(d: *mut c_char, flag: c_int, slen: usize, fmt: *const c_char, ap: *mut c_void)
        => vsprintf_chk_checked, 5
}
formatting! {
    /// `__snprintf_chk` (`snprintf` fortified): see "Formatted output" in the module.
    fn __snprintf_chk(d: *mut c_char, n: usize, flag: c_int, slen: usize, fmt: *const c_char)
        => snprintf_chk_checked, 5
}
formatting! {
    /// `__vsnprintf_chk`: see "Formatted output" in the module.
    fn __vsnprintf_chk(d: *mut c_char, n: usize, flag: c_int, slen: usize, fmt: *const c_char, ap: *mut c_void)
        => vsnprintf_chk_checked, 6
}

/// What a formatting call bounded by an object's `room` returned (`r`, the length of the whole
/// text): a text that did not fit is reported, as a write of what the call would have written
/// (at most `bound` bytes).
fn fitted(d: usize, room: usize, bound: usize, r: c_int, op: &'static str) -> c_int {
    if r >= 0 && r as usize >= room {
        crate::io::bounded_live(d, (r as usize + 1).min(bound), Way::WouldWrite, op);
    }
    r
}

/// `sprintf`/`vsprintf` of `fmt` with `ap` into `d`.
fn sprintf_of(d: *mut c_char, fmt: *const c_char, ap: *mut VaList, ret: usize, op: &'static str) -> c_int {
    match room_below(ret, d as usize, usize::MAX) {
        Some(room) => {
            let f = next!(VSNPRINTF, c"vsnprintf", VSnprintf);
            // SAFETY: the caller's format and arguments, into `room` bytes of its object.
            let r = unsafe { f(d, room, fmt, ap) };
            fitted(d as usize, room, usize::MAX, r, op)
        }
        None => {
            let f = next!(VSPRINTF, c"vsprintf", VSprintf);
            // SAFETY: the caller's call, passed on.
            unsafe { f(d, fmt, ap) }
        }
    }
}

/// `snprintf`/`vsnprintf` of `fmt` with `ap` into `n` bytes at `d`.
fn snprintf_of(d: *mut c_char, n: usize, fmt: *const c_char, ap: *mut VaList, ret: usize, op: &'static str) -> c_int {
    let f = next!(VSNPRINTF, c"vsnprintf", VSnprintf);
    match room_below(ret, d as usize, n) {
        Some(room) => {
            // SAFETY: the caller's format and arguments, into `room` (< n) bytes of its object.
            let r = unsafe { f(d, room, fmt, ap) };
            fitted(d as usize, room, n, r, op)
        }
        // SAFETY: the caller's call, passed on.
        None => unsafe { f(d, n, fmt, ap) },
    }
}

/// `__sprintf_chk`/`__vsprintf_chk` (the text may take `slen` bytes, or the C library aborts).
fn sprintf_chk_of(a: &Args, ap: *mut VaList, ret: usize, op: &'static str) -> c_int {
    let (d, flag, slen, fmt) = (a[0] as *mut c_char, a[1] as c_int, a[2], a[3] as *const c_char);
    match room_below(ret, d as usize, slen) {
        Some(room) => {
            let f = next!(VSNPRINTF_CHK, c"__vsnprintf_chk", VSnprintfChk);
            // SAFETY: the caller's format, flag and arguments, into `room` (< slen) bytes of
            // its object.
            let r = unsafe { f(d, room, flag, room, fmt, ap) };
            fitted(d as usize, room, slen, r, op)
        }
        None => {
            let f = next!(VSPRINTF_CHK, c"__vsprintf_chk", VSprintfChk);
            // SAFETY: the caller's call, passed on.
            unsafe { f(d, flag, slen, fmt, ap) }
        }
    }
}

/// `__snprintf_chk`/`__vsnprintf_chk` (`n` bytes, which the C library checks against `slen`).
fn snprintf_chk_of(a: &Args, ap: *mut VaList, ret: usize, op: &'static str) -> c_int {
    let (d, n, flag, slen, fmt) = (a[0] as *mut c_char, a[1], a[2] as c_int, a[3], a[4] as *const c_char);
    let f = next!(VSNPRINTF_CHK, c"__vsnprintf_chk", VSnprintfChk);
    // A length past the compiler's size of the buffer is the C library's to fail.
    match room_below(ret, d as usize, n).filter(|_| n <= slen) {
        Some(room) => {
            // SAFETY: the caller's format, flag and arguments, into `room` (< n) bytes.
            let r = unsafe { f(d, room, flag, slen, fmt, ap) };
            fitted(d as usize, room, n, r, op)
        }
        // SAFETY: the caller's call, passed on.
        None => unsafe { f(d, n, flag, slen, fmt, ap) },
    }
}

extern "C" fn sprintf_checked(a: &Args, ap: *mut VaList, ret: usize) -> c_int {
    sprintf_of(a[0] as _, a[1] as _, ap, ret, "sprintf")
}

extern "C" fn vsprintf_checked(a: &Args, _: *mut VaList, ret: usize) -> c_int {
    sprintf_of(a[0] as _, a[1] as _, a[2] as _, ret, "vsprintf")
}

extern "C" fn snprintf_checked(a: &Args, ap: *mut VaList, ret: usize) -> c_int {
    snprintf_of(a[0] as _, a[1], a[2] as _, ap, ret, "snprintf")
}

extern "C" fn vsnprintf_checked(a: &Args, _: *mut VaList, ret: usize) -> c_int {
    snprintf_of(a[0] as _, a[1], a[2] as _, a[3] as _, ret, "vsnprintf")
}

extern "C" fn sprintf_chk_checked(a: &Args, ap: *mut VaList, ret: usize) -> c_int {
    sprintf_chk_of(a, ap, ret, "__sprintf_chk")
}

extern "C" fn vsprintf_chk_checked(a: &Args, _: *mut VaList, ret: usize) -> c_int {
    sprintf_chk_of(a, a[4] as _, ret, "__vsprintf_chk")
}

extern "C" fn snprintf_chk_checked(a: &Args, ap: *mut VaList, ret: usize) -> c_int {
    snprintf_chk_of(a, ap, ret, "__snprintf_chk")
}

extern "C" fn vsnprintf_chk_checked(a: &Args, _: *mut VaList, ret: usize) -> c_int {
    snprintf_chk_of(a, a[5] as _, ret, "__vsnprintf_chk")
}

// Wide-character output: `swprintf` and its kin. Unlike `snprintf`, a call whose text does
// not fit returns -1 (leaving `errno` as it was; an encoding error sets `EILSEQ`), not the
// text's length. A text that does not fit in the object's room would not have fitted either in
// the object under the caller's larger length: the C library would have written past its end.

type VSwprintf = unsafe extern "C" fn(*mut wchar_t, usize, *const wchar_t, *mut VaList) -> c_int;
type VSwprintfChk = unsafe extern "C" fn(*mut wchar_t, usize, c_int, usize, *const wchar_t, *mut VaList) -> c_int;

static VSWPRINTF: AtomicUsize = AtomicUsize::new(0);
static VSWPRINTF_CHK: AtomicUsize = AtomicUsize::new(0);

formatting! {
    /// `swprintf`: see "Wide-character output" above.
    fn swprintf(d: *mut wchar_t, n: usize, fmt: *const wchar_t) => swprintf_checked, 3
}
formatting! {
    /// `vswprintf`: see "Wide-character output" above.
    fn vswprintf(d: *mut wchar_t, n: usize, fmt: *const wchar_t, ap: *mut c_void) => vswprintf_checked, 4
}
formatting! {
    /// `__swprintf_chk` (`swprintf` fortified): see "Wide-character output" above.
    fn __swprintf_chk(d: *mut wchar_t, n: usize, flag: c_int, slen: usize, fmt: *const wchar_t)
        => swprintf_chk_checked, 5
}
formatting! {
    /// `__vswprintf_chk`: see "Wide-character output" above.
    fn __vswprintf_chk(d: *mut wchar_t, n: usize, flag: c_int, slen: usize, fmt: *const wchar_t, ap: *mut c_void)
        => vswprintf_chk_checked, 6
}

/// Runs `call` (a wide formatting call into `d`, bounded by the room of `chars` characters of
/// its object) and returns what it returned: a text that did not fit is reported, as a write of
/// one character past the room; an encoding error or a lack of memory is the call's own.
fn wide_fitted(d: usize, chars: usize, op: &'static str, call: impl FnOnce(usize) -> c_int) -> c_int {
    let saved = crate::sys::errno();
    crate::sys::set_errno(0);
    let r = call(chars);
    let e = crate::sys::errno();
    if r < 0 && e != libc::EILSEQ && e != libc::ENOMEM {
        crate::io::bounded_live(d, (chars + 1) * core::mem::size_of::<wchar_t>(), Way::WouldWrite, op);
    }
    if e == 0 {
        crate::sys::set_errno(saved);
    }
    r
}

/// `swprintf`/`vswprintf` of `fmt` with `ap` into `n` characters at `d`.
fn swprintf_of(d: *mut wchar_t, n: usize, fmt: *const wchar_t, ap: *mut VaList, ret: usize, op: &'static str) -> c_int {
    let f = next!(VSWPRINTF, c"vswprintf", VSwprintf);
    match room_below(ret, d as usize, n.saturating_mul(core::mem::size_of::<wchar_t>())) {
        Some(room) => wide_fitted(d as usize, room / core::mem::size_of::<wchar_t>(), op, |chars| {
            // SAFETY: the caller's format and arguments, into the characters its object holds
            // (fewer than `n`).
            unsafe { f(d, chars, fmt, ap) }
        }),
        // SAFETY: the caller's call, passed on.
        None => unsafe { f(d, n, fmt, ap) },
    }
}

/// `__swprintf_chk`/`__vswprintf_chk` (`n` characters, which the C library checks against
/// `slen`).
fn swprintf_chk_of(a: &Args, ap: *mut VaList, ret: usize, op: &'static str) -> c_int {
    let (d, n, flag, slen, fmt) = (a[0] as *mut wchar_t, a[1], a[2] as c_int, a[3], a[4] as *const wchar_t);
    let f = next!(VSWPRINTF_CHK, c"__vswprintf_chk", VSwprintfChk);
    // A length past the compiler's size of the buffer is the C library's to fail.
    match room_below(ret, d as usize, n.saturating_mul(core::mem::size_of::<wchar_t>())).filter(|_| n <= slen) {
        Some(room) => wide_fitted(d as usize, room / core::mem::size_of::<wchar_t>(), op, |chars| {
            // SAFETY: the caller's format, flag and arguments, into the characters its object
            // holds (fewer than `n`).
            unsafe { f(d, chars, flag, slen, fmt, ap) }
        }),
        // SAFETY: the caller's call, passed on.
        None => unsafe { f(d, n, flag, slen, fmt, ap) },
    }
}

extern "C" fn swprintf_checked(a: &Args, ap: *mut VaList, ret: usize) -> c_int {
    swprintf_of(a[0] as _, a[1], a[2] as _, ap, ret, "swprintf")
}

extern "C" fn vswprintf_checked(a: &Args, _: *mut VaList, ret: usize) -> c_int {
    swprintf_of(a[0] as _, a[1], a[2] as _, a[3] as _, ret, "vswprintf")
}

extern "C" fn swprintf_chk_checked(a: &Args, ap: *mut VaList, ret: usize) -> c_int {
    swprintf_chk_of(a, ap, ret, "__swprintf_chk")
}

extern "C" fn vswprintf_chk_checked(a: &Args, _: *mut VaList, ret: usize) -> c_int {
    swprintf_chk_of(a, a[5] as _, ret, "__vswprintf_chk")
}

// Times: `strftime`, `strftime_l` and the wide `wcsftime`, `wcsftime_l`, `__wcsftime_l` (what
// the C++ library's `std::time_put<wchar_t>` calls). They return 0 for a text that does not fit
// in their length (the contents of the buffer are then undefined), and also for an empty text.

type Strftime = unsafe extern "C" fn(*mut c_char, usize, *const c_char, *const c_void) -> usize;
type StrftimeL = unsafe extern "C" fn(*mut c_char, usize, *const c_char, *const c_void, *mut c_void) -> usize;
type Wcsftime = unsafe extern "C" fn(*mut libc::wchar_t, usize, *const libc::wchar_t, *const c_void) -> usize;
type WcsftimeL =
    unsafe extern "C" fn(*mut libc::wchar_t, usize, *const libc::wchar_t, *const c_void, *mut c_void) -> usize;

static STRFTIME: AtomicUsize = AtomicUsize::new(0);
static STRFTIME_L: AtomicUsize = AtomicUsize::new(0);
static WCSFTIME: AtomicUsize = AtomicUsize::new(0);
static WCSFTIME_L: AtomicUsize = AtomicUsize::new(0);
static WCSFTIME_L_INTERNAL: AtomicUsize = AtomicUsize::new(0);

entry! {
    /// `strftime`: see `strftime_of`.
    fn strftime(d: *mut c_char, max: usize, fmt: *const c_char, tm: *const c_void) -> usize, "r8", ret => {
        let f = next!(STRFTIME, c"strftime", Strftime, or 0);
        // SAFETY: the caller's format and time, into `n` bytes at `d` that `strftime_of` gives.
        strftime_of(d, max, ret, "strftime", |d, n| unsafe { f(d, n, fmt, tm) })
    }
}
entry! {
    /// `strftime_l`: see `strftime_of`.
    fn strftime_l(d: *mut c_char, max: usize, fmt: *const c_char, tm: *const c_void, loc: *mut c_void) -> usize,
        "r9", ret => {
        let f = next!(STRFTIME_L, c"strftime_l", StrftimeL, or 0);
        // SAFETY: the caller's format, time and locale, into `n` bytes at `d` that
        // `strftime_of` gives.
        strftime_of(d, max, ret, "strftime_l", |d, n| unsafe { f(d, n, fmt, tm, loc) })
    }
}
entry! {
    /// `wcsftime`: see `strftime_of`.
    fn wcsftime(d: *mut libc::wchar_t, max: usize, fmt: *const libc::wchar_t, tm: *const c_void) -> usize, "r8",
        ret => {
        let f = next!(WCSFTIME, c"wcsftime", Wcsftime, or 0);
        // SAFETY: the caller's format and time, into `n` characters at `d` that `strftime_of`
        // gives.
        strftime_of(d, max, ret, "wcsftime", |d, n| unsafe { f(d, n, fmt, tm) })
    }
}
entry! {
    /// `wcsftime_l`: see `strftime_of`.
    fn wcsftime_l(d: *mut libc::wchar_t, max: usize, fmt: *const libc::wchar_t, tm: *const c_void,
        loc: *mut c_void) -> usize, "r9", ret => {
        let f = next!(WCSFTIME_L, c"wcsftime_l", WcsftimeL, or 0);
        // SAFETY: the caller's format, time and locale, into `n` characters at `d` that
        // `strftime_of` gives.
        strftime_of(d, max, ret, "wcsftime_l", |d, n| unsafe { f(d, n, fmt, tm, loc) })
    }
}
entry! {
    /// `__wcsftime_l`: see `strftime_of`.
    fn __wcsftime_l(d: *mut libc::wchar_t, max: usize, fmt: *const libc::wchar_t, tm: *const c_void,
        loc: *mut c_void) -> usize, "r9", ret => {
        let f = next!(WCSFTIME_L_INTERNAL, c"__wcsftime_l", WcsftimeL, or 0);
        // SAFETY: the caller's format, time and locale, into `n` characters at `d` that
        // `strftime_of` gives.
        strftime_of(d, max, ret, "__wcsftime_l", |d, n| unsafe { f(d, n, fmt, tm, loc) })
    }
}

/// `strftime` (or a wide one, of `T` characters) of `max` characters into `d`, made by
/// `call(buffer, length)`. Into a live heap object with less room than `max`, the text is made
/// with the room as its length. When it does not fit there, it is made once more into memory
/// of the library's own with the caller's length: a text that fits that length is one the C
/// library would have written past the object's end, and is reported; one that does not fit it
/// either (its contents undefined, so no telling how far the C library would have written)
/// returns 0 as under glibc, cut at the object's end.
fn strftime_of<T: Copy + Default + PartialEq + From<bool>>(
    d: *mut T,
    max: usize,
    ret: usize,
    op: &'static str,
    call: impl Fn(*mut T, usize) -> usize,
) -> usize {
    let unit = size_of::<T>();
    let Some(room) = room_below(ret, d as usize, max.saturating_mul(unit)).map(|r| r / unit) else {
        return call(d, max);
    };
    if room == 0 {
        // Even an empty text writes its NUL.
        crate::io::bounded_live(d as usize, unit, Way::WouldWrite, op);
        return 0;
    }
    // A mark in the first character, which an empty text overwrites with its NUL: a call that
    // returns 0 and leaves it (or the text's first character) had text that did not fit.
    // SAFETY: `d` starts `room` (> 0) characters of its object.
    unsafe { d.write(T::from(true)) };
    let r = call(d, room);
    // SAFETY: as above.
    if r > 0 || unsafe { d.read() } == T::default() {
        return r;
    }
    let len = max.min(1 << 24);
    let scratch = crate::sys::map_meta(len * unit);
    if scratch.is_null() {
        return 0;
    }
    let whole = call(scratch.cast(), len);
    crate::sys::unmap(scratch, len * unit);
    if whole > 0 {
        crate::io::bounded_live(d as usize, (whole + 1) * unit, Way::WouldWrite, op);
    }
    0
}

// Network addresses: `inet_ntop` writes an address's text (at most 46 bytes with its NUL)
// when it fits in the length given, and nothing otherwise (`ENOSPC`). A length taken from
// `INET6_ADDRSTRLEN` with a buffer sized for IPv4 is the classic mistake.

type InetNtop = unsafe extern "C" fn(c_int, *const c_void, *mut c_char, u32) -> *const c_char;

static INET_NTOP: AtomicUsize = AtomicUsize::new(0);

entry! {
    /// `inet_ntop`: into a live heap object with less room than the length given, the text is
    /// made first in the library's own buffer; one that fits the length but not the object is
    /// reported before it is written.
    fn inet_ntop(af: c_int, src: *const c_void, d: *mut c_char, size: u32) -> *const c_char, "r8", ret => {
        let f = next!(INET_NTOP, c"inet_ntop", InetNtop, or core::ptr::null());
        if let Some(room) = room_below(ret, d as usize, size as usize) {
            let mut text = [0 as c_char; 64];
            // SAFETY: the caller's address, its text into the local buffer (longer than any).
            if !unsafe { f(af, src, text.as_mut_ptr(), text.len() as u32) }.is_null() {
                // SAFETY: the text the call just made, ending in its NUL.
                let len = unsafe { libc::strlen(text.as_ptr()) } + 1;
                if len <= size as usize && len > room {
                    crate::io::bounded_live(d as usize, len, Way::WouldWrite, "inet_ntop");
                }
            }
        }
        // SAFETY: the caller's call, passed on (its text fits the object, or is not written).
        unsafe { f(af, src, d, size) }
    }
}

// Formatted input.

type VScan = unsafe extern "C" fn(*const c_void, *const c_char, *mut VaList) -> c_int;
type VScanStdin = unsafe extern "C" fn(*const c_char, *mut VaList) -> c_int;

/// Which reading of a format: the GNU one of the plain names (`%as` allocates, as `%ms` does),
/// C99's (`__isoc99_*`, what compilers call) or C23's (`__isoc23_*`, what glibc 2.38's and
/// later headers make of the calls of a program built for C23, GCC 15's default, or with
/// `_GNU_SOURCE`, which `g++` always defines). C23 adds `%b` and the `wN`
/// lengths, which the check does not follow (it stops at them, as at any conversion it does
/// not know).
#[derive(Clone, Copy, PartialEq)]
enum Dialect {
    Gnu,
    C99,
    C23,
}

/// The pointer arguments a copy of a `va_list` leads to, in order (every argument of a
/// scanning function after its format is a pointer).
struct Pointers(VaList);

impl Pointers {
    fn next(&mut self) -> usize {
        let a = &mut self.0;
        if a.gp_offset < 48 {
            // SAFETY: an argument the call's format names: the caller passed it in a register,
            // saved at this offset of the register save area, where the C library reads it.
            let p = unsafe { *(a.reg_save_area.wrapping_byte_add(a.gp_offset as usize) as *const usize) };
            a.gp_offset += 8;
            p
        } else {
            // SAFETY: as above, on the caller's stack.
            let p = unsafe { *(a.overflow_arg_area as *const usize) };
            a.overflow_arg_area = a.overflow_arg_area.wrapping_byte_add(8);
            p
        }
    }
}

/// The bytes a string conversion wrote at `p`: the string (of `unit`-byte characters) and its
/// terminator.
fn written(p: usize, unit: usize) -> usize {
    let mut n = 0;
    loop {
        // SAFETY: the string the call just wrote at `p` (assigned, hence terminated); a wide
        // one is read as the C library wrote it, whatever the buffer's alignment.
        let end = unsafe {
            if unit == 1 {
                *((p + n) as *const u8) == 0
            } else {
                core::ptr::read_unaligned((p + n) as *const u32) == 0
            }
        };
        n += unit;
        if end {
            return n;
        }
    }
}

/// Whether a scanning call's format (and the text it reads) is of bytes (`sscanf`) or of wide
/// characters (`swscanf`). The wide calls write the same things as the narrow ones: `%s`,
/// `%[` and `%c` write bytes (each wide character they take converted to its multibyte
/// form), `%ls`, `%l[`, `%lc` (`%S`, `%C`) wide characters.
#[derive(Clone, Copy, PartialEq)]
enum Text {
    Narrow,
    Wide,
}

/// The format `fmt` of a scanning call, read a character at a time as a byte: a wide
/// character past ASCII reads as 0x80, which is no part of any conversion; past the end, 0.
struct Format {
    fmt: usize,
    len: usize,
    text: Text,
}

impl Format {
    fn new(fmt: *const c_char, text: Text) -> Format {
        let mut f = Format { fmt: fmt as usize, len: 0, text };
        // SAFETY: the call's format, a string of its kind: read up to its terminator.
        while unsafe { f.unit(f.len) } != 0 {
            f.len += 1;
        }
        f
    }

    /// The `i`th character, `i` within the format and its terminator.
    ///
    /// # Safety
    /// `i` must be at most the format's length.
    unsafe fn unit(&self, i: usize) -> u32 {
        // SAFETY: a character of the format or its terminator (the caller's bound).
        unsafe {
            match self.text {
                Text::Narrow => *((self.fmt + i) as *const u8) as u32,
                Text::Wide => core::ptr::read_unaligned((self.fmt + i * 4) as *const u32),
            }
        }
    }

    fn at(&self, i: usize) -> u8 {
        if i >= self.len {
            return 0;
        }
        // SAFETY: `i` is within the format.
        match unsafe { self.unit(i) } {
            c @ 0..=0x7f => c as u8,
            _ => 0x80,
        }
    }
}

/// Which walk of a scanning call's format: `Before` a wide call, the canaries of the objects
/// its narrow strings go to are checked (see `heap::mend_library_nul`); `After` a call, the
/// strings it wrote are held to their objects' ends (`check`) and what a wide call's second
/// NUL did to a canary is mended.
#[derive(Clone, Copy, PartialEq)]
enum Walk {
    Before,
    After { check: bool },
}

/// A walk of the format `fmt` of a scanning call that assigned `assigned` items (before the
/// call: all of them) to the pointers `args` leads to: see `Walk`.
fn scanned(
    fmt: *const c_char,
    text: Text,
    mut args: Pointers,
    assigned: c_int,
    dialect: Dialect,
    op: &'static str,
    walk: Walk,
) {
    if assigned <= 0 || fmt.is_null() {
        return;
    }
    let fmt = Format::new(fmt, text);
    let at = |i: usize| fmt.at(i);
    let (mut done, mut i) = (0, 0);
    while i < fmt.len {
        if at(i) != b'%' {
            i += 1;
            continue;
        }
        i += 1;
        if at(i) == b'%' {
            i += 1;
            continue;
        }
        let keep = at(i) != b'*';
        if !keep {
            i += 1;
        }
        let mut width = None;
        while at(i).is_ascii_digit() {
            width = Some(width.unwrap_or(0usize).saturating_mul(10).saturating_add((at(i) - b'0') as usize));
            i += 1;
        }
        if at(i) == b'$' {
            return; // arguments taken by position: not followed
        }
        let allocates =
            at(i) == b'm' || (dialect == Dialect::Gnu && at(i) == b'a' && matches!(at(i + 1), b's' | b'S' | b'['));
        if allocates {
            i += 1;
        }
        let mut longs = 0;
        while matches!(at(i), b'h' | b'l' | b'L' | b'q' | b'j' | b'z' | b't') {
            longs += (at(i) == b'l') as u32;
            i += 1;
        }
        let conv = at(i);
        i += 1;
        match conv {
            b'n' => {
                // Assigns, but is not counted.
                if keep {
                    args.next();
                }
                continue;
            }
            b'[' => {
                // The set; a `]` right after `[` or `[^` belongs to it.
                i += (at(i) == b'^') as usize;
                i += (at(i) == b']') as usize;
                while i < fmt.len && at(i) != b']' {
                    i += 1;
                }
                if i >= fmt.len {
                    return;
                }
                i += 1;
            }
            b's' | b'S' | b'c' | b'C' => {}
            b'd' | b'i' | b'o' | b'u' | b'x' | b'X' | b'a' | b'A' | b'e' | b'E' | b'f' | b'F' | b'g' | b'G' | b'p' => {}
            _ => return, // not followed
        }
        if !keep {
            continue;
        }
        if done == assigned {
            return;
        }
        let p = args.next();
        done += 1;
        let unit = if longs == 1 || matches!(conv, b'S' | b'C') { 4 } else { 1 };
        if matches!(conv, b'[' | b's' | b'S' | b'c' | b'C') && !allocates && crate::io::in_heap(p) {
            let two_nuls = text == Text::Wide && unit == 1 && matches!(conv, b'[' | b's');
            let Walk::After { check } = walk else {
                if two_nuls {
                    crate::heap::check_canary_of(p, op);
                }
                continue;
            };
            // A wide call's `%c` writes at least one byte a character (as many as their
            // multibyte forms take, which are not marked): the least is held to the end.
            let n = if matches!(conv, b'c' | b'C') { width.unwrap_or(1) * unit } else { written(p, unit) };
            if check {
                crate::io::bounded(p, n, Way::Into, op);
            }
            if two_nuls {
                crate::heap::mend_library_nul(p, p + n);
            }
        }
    }
}

/// A C library function found at its first call (`sys::next_symbol`); `or`, the one used
/// where the C library has none of that name: C99's reading for C23's names in a C library
/// older than 2.38, which no program built for it calls (it could not be loaded), only a
/// program that looks the name up (the tests).
struct Next {
    slot: AtomicUsize,
    name: &'static CStr,
    or: Option<&'static CStr>,
}

/// A scanning call: `name(source, format, ...)` (`format` = 1) or `name(format, ...)`
/// (standard input, `format` = 0), or its `v` form, with the arguments `ap` leads to: the C
/// library's `v` function, then the check of what it wrote (when the program made it).
#[allow(clippy::too_many_arguments)]
fn scan(
    a: &Args,
    ap: *mut VaList,
    ret: usize,
    lib: &Next,
    text: Text,
    dialect: Dialect,
    op: &'static str,
    format: usize,
) -> c_int {
    let found = crate::sys::next_symbol(&lib.slot, lib.name);
    let Some(f) = found.or_else(|| lib.or.and_then(|or| crate::sys::next_symbol(&lib.slot, or))) else { return -1 };
    // SAFETY: the call's `va_list`, copied before the call consumes it.
    let walk = Pointers(unsafe { *ap });
    // The wide calls' strings are walked with the checks off too, for the C library's second
    // NUL (`heap::mend_library_nul`), first before the call.
    let check = from_program(ret);
    let mend = text == Text::Wide && outside_library(ret);
    if mend {
        // SAFETY: as above.
        let before = Pointers(unsafe { *ap });
        scanned(a[format] as _, text, before, c_int::MAX, dialect, op, Walk::Before);
    }
    // SAFETY: the C library's function of that name, of the type its arguments say, with the
    // caller's arguments.
    let r = unsafe {
        if format == 0 {
            core::mem::transmute::<usize, VScanStdin>(f)(a[0] as _, ap)
        } else {
            core::mem::transmute::<usize, VScan>(f)(a[0] as _, a[1] as _, ap)
        }
    };
    if check || mend {
        scanned(a[format] as _, text, walk, r, dialect, op, Walk::After { check });
    }
    r
}

/// The first of `names`, if any (a `Next`'s `or`, made in a static).
const fn first(names: &[&'static CStr]) -> Option<&'static CStr> {
    if names.is_empty() {
        None
    } else {
        Some(names[0])
    }
}

/// Defines an exported scanning function: its stub (`formatting!`) and what the stub calls,
/// `scan` of the C library's `v` function `$lib` (or `$or` where it has none) with the format
/// (of `$text`) at argument `$format`, and the stub's own `va_list` (`variadic`) or the one
/// the caller passed as argument `$k` (`list $k`).
macro_rules! scanning {
    (fn $name:ident => $body:ident, $named:literal, $format:literal, variadic, $lib:literal $(or $or:literal)?, $dialect:ident $text:ident) => {
        scanning!(@ $name, $body, $named, $format, |_a: &Args, ap: *mut VaList| ap, $lib, [$($or)?], $dialect, $text);
    };
    (fn $name:ident => $body:ident, $named:literal, $format:literal, list $k:literal, $lib:literal $(or $or:literal)?, $dialect:ident $text:ident) => {
        scanning!(@ $name, $body, $named, $format, |a: &Args, _ap: *mut VaList| a[$k] as *mut VaList, $lib, [$($or)?], $dialect, $text);
    };
    (@ $name:ident, $body:ident, $named:literal, $format:literal, $list:expr, $lib:literal, [$($or:literal)?], $dialect:ident, $text:ident) => {
        formatting! {
            #[doc = concat!("`", stringify!($name), "`: see \"Input\" in the module.")]
            fn $name(src: *const c_void, fmt: *const c_char) => $body, $named
        }
        extern "C" fn $body(a: &Args, ap: *mut VaList, ret: usize) -> c_int {
            static LIB: Next = Next { slot: AtomicUsize::new(0), name: $lib, or: first(&[$($or)?]) };
            scan(a, ($list)(a, ap), ret, &LIB, Text::$text, Dialect::$dialect, stringify!($name), $format)
        }
    };
}

scanning!(fn sscanf => sscanf_checked, 2, 1, variadic, c"vsscanf", Gnu Narrow);
scanning!(fn vsscanf => vsscanf_checked, 3, 1, list 2, c"vsscanf", Gnu Narrow);
scanning!(fn __isoc99_sscanf => sscanf99_checked, 2, 1, variadic, c"__isoc99_vsscanf", C99 Narrow);
scanning!(fn __isoc99_vsscanf => vsscanf99_checked, 3, 1, list 2, c"__isoc99_vsscanf", C99 Narrow);
scanning!(fn fscanf => fscanf_checked, 2, 1, variadic, c"vfscanf", Gnu Narrow);
scanning!(fn vfscanf => vfscanf_checked, 3, 1, list 2, c"vfscanf", Gnu Narrow);
scanning!(fn __isoc99_fscanf => fscanf99_checked, 2, 1, variadic, c"__isoc99_vfscanf", C99 Narrow);
scanning!(fn __isoc99_vfscanf => vfscanf99_checked, 3, 1, list 2, c"__isoc99_vfscanf", C99 Narrow);
scanning!(fn scanf => scanf_checked, 1, 0, variadic, c"vscanf", Gnu Narrow);
scanning!(fn vscanf => vscanf_checked, 2, 0, list 1, c"vscanf", Gnu Narrow);
scanning!(fn __isoc99_scanf => scanf99_checked, 1, 0, variadic, c"__isoc99_vscanf", C99 Narrow);
scanning!(fn __isoc99_vscanf => vscanf99_checked, 2, 0, list 1, c"__isoc99_vscanf", C99 Narrow);
scanning!(fn __isoc23_sscanf => sscanf23_checked, 2, 1, variadic, c"__isoc23_vsscanf" or c"__isoc99_vsscanf", C23 Narrow);
scanning!(fn __isoc23_vsscanf => vsscanf23_checked, 3, 1, list 2, c"__isoc23_vsscanf" or c"__isoc99_vsscanf", C23 Narrow);
scanning!(fn __isoc23_fscanf => fscanf23_checked, 2, 1, variadic, c"__isoc23_vfscanf" or c"__isoc99_vfscanf", C23 Narrow);
scanning!(fn __isoc23_vfscanf => vfscanf23_checked, 3, 1, list 2, c"__isoc23_vfscanf" or c"__isoc99_vfscanf", C23 Narrow);
scanning!(fn __isoc23_scanf => scanf23_checked, 1, 0, variadic, c"__isoc23_vscanf" or c"__isoc99_vscanf", C23 Narrow);
scanning!(fn __isoc23_vscanf => vscanf23_checked, 2, 0, list 1, c"__isoc23_vscanf" or c"__isoc99_vscanf", C23 Narrow);

scanning!(fn swscanf => swscanf_checked, 2, 1, variadic, c"vswscanf", Gnu Wide);
scanning!(fn vswscanf => vswscanf_checked, 3, 1, list 2, c"vswscanf", Gnu Wide);
scanning!(fn __isoc99_swscanf => swscanf99_checked, 2, 1, variadic, c"__isoc99_vswscanf", C99 Wide);
scanning!(fn __isoc99_vswscanf => vswscanf99_checked, 3, 1, list 2, c"__isoc99_vswscanf", C99 Wide);
scanning!(fn fwscanf => fwscanf_checked, 2, 1, variadic, c"vfwscanf", Gnu Wide);
scanning!(fn vfwscanf => vfwscanf_checked, 3, 1, list 2, c"vfwscanf", Gnu Wide);
scanning!(fn __isoc99_fwscanf => fwscanf99_checked, 2, 1, variadic, c"__isoc99_vfwscanf", C99 Wide);
scanning!(fn __isoc99_vfwscanf => vfwscanf99_checked, 3, 1, list 2, c"__isoc99_vfwscanf", C99 Wide);
scanning!(fn wscanf => wscanf_checked, 1, 0, variadic, c"vwscanf", Gnu Wide);
scanning!(fn vwscanf => vwscanf_checked, 2, 0, list 1, c"vwscanf", Gnu Wide);
scanning!(fn __isoc99_wscanf => wscanf99_checked, 1, 0, variadic, c"__isoc99_vwscanf", C99 Wide);
scanning!(fn __isoc99_vwscanf => vwscanf99_checked, 2, 0, list 1, c"__isoc99_vwscanf", C99 Wide);
scanning!(fn __isoc23_swscanf => swscanf23_checked, 2, 1, variadic, c"__isoc23_vswscanf" or c"__isoc99_vswscanf", C23 Wide);
scanning!(fn __isoc23_vswscanf => vswscanf23_checked, 3, 1, list 2, c"__isoc23_vswscanf" or c"__isoc99_vswscanf", C23 Wide);
scanning!(fn __isoc23_fwscanf => fwscanf23_checked, 2, 1, variadic, c"__isoc23_vfwscanf" or c"__isoc99_vfwscanf", C23 Wide);
scanning!(fn __isoc23_vfwscanf => vfwscanf23_checked, 3, 1, list 2, c"__isoc23_vfwscanf" or c"__isoc99_vfwscanf", C23 Wide);
scanning!(fn __isoc23_wscanf => wscanf23_checked, 1, 0, variadic, c"__isoc23_vwscanf" or c"__isoc99_vwscanf", C23 Wide);
scanning!(fn __isoc23_vwscanf => vwscanf23_checked, 2, 0, list 1, c"__isoc23_vwscanf" or c"__isoc99_vwscanf", C23 Wide);
