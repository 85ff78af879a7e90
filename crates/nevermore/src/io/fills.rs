//! Names, messages and times the C library writes into the caller's buffer, held to the bounds
//! of the buffer's heap object.
//!
//! Told a length (`gethostname`, `getdomainname`, `ttyname_r`, `ptsname_r`, `confstr`,
//! `strerror_r` and the XSI `__xpg_strerror_r`, `getnameinfo`'s two buffers; the database
//! look-ups, which write an entry's strings into the buffer: `getpwnam_r`, `getpwuid_r`,
//! `getgrnam_r`, `getgrgid_r`, `gethostbyname_r`, `gethostbyname2_r`, `gethostbyaddr_r`,
//! `getservbyname_r`, `getservbyport_r`, `getprotobyname_r`, `getprotobynumber_r`,
//! `getspnam_r`; the enumerations `getpwent_r`, `getgrent_r`, `getspent_r`, `fgetpwent_r`,
//! `fgetgrent_r`, `fgetspent_r`; `getgrouplist`, told a count of groups; the collation
//! transforms `strxfrm`, `wcsxfrm` and their `_l` kin, which write the whole length when the
//! transformed string does not fit), the C library writes as far as the name needs, up to
//! that length: a length past the buffer's object (the size of another buffer, a constant such
//! as `NI_MAXHOST` or a `sysconf` value with a smaller allocation) lets a long name run over
//! the neighbours, and some calls write the whole length whatever the name: `ttyname_r` reads
//! the link into it, and the look-ups in files read each line of the file into it (a buffer of 100 bytes told 1 000
//! was written past even for root's short entry of `/etc/passwd`). Told no more than the room
//! left in the object, the C library answers as for any buffer too small (an error, or a cut
//! string); only then is the call made again, into memory of the library's own of the
//! caller's length, to see how far it would have written: past the object's end, the call is
//! reported (before the program goes on); otherwise the caller gets the answer for a buffer
//! too small, as the C library would have given it. A look-up's entry record (`struct passwd`,
//! `struct hostent`, ...) is held to its object's bounds before the call.
//!
//! Told no length, the C library writes what the standard says the buffer holds:
//! `if_indextoname` `IF_NAMESIZE` bytes (the name, then NULs: `strncpy`), `ctime_r` and
//! `asctime_r` the time's text (26 bytes with the NUL, as the standard requires). They are made
//! into a local buffer, and what they wrote is held to the heap object before it is copied
//! out: a buffer too small is reported before a byte is written past it. `getentropy` writes
//! all the bytes asked for: a length past the object is reported before the call, and after
//! `EFAULT` (a page that lost its entry) the call is made again with the pages mapped.
//!
//! Buffers outside the heap go to the C library's functions untouched.

use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::AtomicUsize;
use core::{ptr, slice};

use super::{again, bounded, bounded_live, in_heap, real, room_live, Way};
use crate::{alias, sys};

/// The longest memory of the library's own a call is made again into: a length past it is
/// held to this much (a name longer than it that runs past the object is left unreported).
const SCRATCH: usize = 1 << 20;

/// How far a call writes into a buffer of `len` bytes (`call(buf, len)`), or None if that
/// cannot be found: it is made into memory of the library's own filled with one byte, then
/// with another, and the last byte changed either time ends what it wrote (a byte the call
/// writes may equal one filling, not both).
fn reach(len: usize, call: impl Fn(*mut c_char, usize)) -> Option<usize> {
    let n = len.min(SCRATCH);
    let scratch = sys::map_meta(n.max(1));
    if scratch.is_null() {
        return None;
    }
    let mut most = 0;
    for fill in [0xa5u8, 0x5a] {
        // SAFETY: `scratch` holds `n` bytes of the library's own, written by no one else.
        let bytes = unsafe {
            ptr::write_bytes(scratch, fill, n);
            call(scratch.cast(), n);
            slice::from_raw_parts(scratch, n)
        };
        if let Some(i) = bytes.iter().rposition(|&b| b != fill) {
            most = most.max(i + 1);
        }
    }
    sys::unmap(scratch, n.max(1));
    Some(most)
}

/// A call told that `buf` holds `len` bytes (`call(b, n)` makes it into `b` told `n`), held to
/// the bounds of `buf`'s heap object: see the module's documentation. `whole(r, b, n)`: whether
/// the call's answer `r`, made into `b` told `n`, is complete (the name fitted).
fn told<R>(
    buf: *mut c_char,
    len: usize,
    op: &'static str,
    call: impl Fn(*mut c_char, usize) -> R,
    whole: impl Fn(&R, *mut c_char, usize) -> bool,
) -> R {
    let Some(room) = room_live(buf as usize).filter(|&room| room < len) else { return call(buf, len) };
    let r = call(buf, room);
    if whole(&r, buf, room) {
        return r;
    }
    past_room(buf, len, room, op, |b, n| drop(call(b, n)));
    r
}

/// Reports the call `call(b, n)` on `buf` (`op`), told `len` bytes where its heap object has
/// `room`, if made into memory of the library's own of that length (`reach`) it writes past the
/// room: the C library would have written past the object's end. `errno` is left as it was.
fn past_room(buf: *mut c_char, len: usize, room: usize, op: &'static str, call: impl Fn(*mut c_char, usize)) {
    let e = sys::errno();
    if let Some(wrote) = reach(len, call).filter(|&w| w > room) {
        bounded_live(buf as usize, wrote, Way::WouldWrite, op);
    }
    sys::set_errno(e);
}

/// Whether the `n` bytes at `b` hold a string that ends before their last byte (a string that
/// fills them may have been cut).
fn ends_before(b: *const c_char, n: usize) -> bool {
    // SAFETY: the call just wrote its string into the `n` bytes at `b`, which are readable.
    n > 0 && unsafe { slice::from_raw_parts(b.cast::<u8>(), n) }.iter().position(|&c| c == 0).is_some_and(|i| i + 1 < n)
}

/// `gethostname(3)`: see the module's documentation. (The C library copies what fits and
/// fails with `ENAMETOOLONG` when the name does not.)
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn gethostname(name: *mut c_char, len: usize) -> c_int {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(*mut c_char, usize) -> c_int> = unsafe { real_fn!(gethostname) };
    let Some(g) = real else { return enosys() };
    // SAFETY: the caller's buffer, told no more than it holds, or the library's own.
    told(name, len, "gethostname", |b, n| unsafe { g(b, n) }, |&r, _, _| r == 0)
}

/// `getdomainname(2)`: see the module's documentation. (The C library copies what fits,
/// without a NUL when the name does not, and answers 0 either way.)
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn getdomainname(name: *mut c_char, len: usize) -> c_int {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(*mut c_char, usize) -> c_int> = unsafe { real_fn!(getdomainname) };
    let Some(g) = real else { return enosys() };
    // SAFETY: the caller's buffer, told no more than it holds, or the library's own.
    told(name, len, "getdomainname", |b, n| unsafe { g(b, n) }, |&r, b, n| r != 0 || ends_before(b, n))
}

/// Defines the wrapper of a call that answers `ERANGE` when its buffer is too small.
macro_rules! told_erange {
    ($(#[$doc:meta])* fn $name:ident($key:ident: $kty:ty)) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name($key: $kty, buf: *mut c_char, len: usize) -> c_int {
            // SAFETY: the C library's function of this name has this type.
            let real: Option<unsafe extern "C" fn($kty, *mut c_char, usize) -> c_int> = unsafe { real_fn!($name) };
            let Some(g) = real else { return libc::ENOSYS };
            // SAFETY: the caller's buffer, told no more than it holds, or the library's own.
            told(buf, len, stringify!($name), |b, n| unsafe { g($key, b, n) }, |&r, _, _| r != libc::ERANGE)
        }
    };
}

told_erange! {
    /// `ttyname_r(3)`: see the module's documentation. (The C library reads the terminal's
    /// link into the whole length it is told.)
    fn ttyname_r(fd: c_int)
}
told_erange! {
    /// `ptsname_r(3)`: see the module's documentation.
    fn ptsname_r(fd: c_int)
}
told_erange! {
    /// `__xpg_strerror_r`, the XSI `strerror_r` (what the headers name it without
    /// `_GNU_SOURCE`): see the module's documentation. (The C library copies what fits and
    /// answers `ERANGE` when the message does not.)
    fn __xpg_strerror_r(errnum: c_int)
}

/// `strerror_r(3)`, the GNU one, which returns the message: a static one for a known error,
/// else one written into the caller's buffer ("Unknown error N"), cut to the length told. See
/// the module's documentation.
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn strerror_r(errnum: c_int, buf: *mut c_char, len: usize) -> *mut c_char {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(c_int, *mut c_char, usize) -> *mut c_char> = unsafe { real_fn!(strerror_r) };
    let Some(g) = real else { return ptr::null_mut() };
    // SAFETY: the caller's buffer, told no more than it holds, or the library's own.
    let call = |b: *mut c_char, n: usize| unsafe { g(errnum, b, n) };
    told(buf, len, "strerror_r", call, |&r, b, n| r != b || ends_before(b, n))
}

/// `confstr(3)`: see the module's documentation. (The C library copies what fits, cut, and
/// answers the length the whole value needs.)
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn confstr(name: c_int, buf: *mut c_char, len: usize) -> usize {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(c_int, *mut c_char, usize) -> usize> = unsafe { real_fn!(confstr) };
    let Some(g) = real else {
        sys::set_errno(libc::ENOSYS);
        return 0;
    };
    if buf.is_null() {
        // SAFETY: no buffer: the C library answers the length alone.
        return unsafe { g(name, buf, len) };
    }
    // SAFETY: the caller's buffer, told no more than it holds, or the library's own.
    told(buf, len, "confstr", |b, n| unsafe { g(name, b, n) }, |&r, _, n| r <= n)
}

/// `getnameinfo(3)`: its host and service buffers each held to its heap object's bounds, as
/// the module's documentation says. (The C library answers `EAI_OVERFLOW` when either name
/// does not fit.)
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn getnameinfo(
    sa: *const libc::sockaddr,
    salen: libc::socklen_t,
    host: *mut c_char,
    hostlen: libc::socklen_t,
    serv: *mut c_char,
    servlen: libc::socklen_t,
    flags: c_int,
) -> c_int {
    type F = unsafe extern "C" fn(
        *const libc::sockaddr,
        libc::socklen_t,
        *mut c_char,
        libc::socklen_t,
        *mut c_char,
        libc::socklen_t,
        c_int,
    ) -> c_int;
    // SAFETY: the C library's function of this name has this type.
    let real: Option<F> = unsafe { real_fn!(getnameinfo) };
    let Some(g) = real else { return libc::EAI_SYSTEM };
    // SAFETY: the caller's address and buffers, told no more than they hold, or the library's own.
    let call = |h: *mut c_char, hl: libc::socklen_t, s: *mut c_char, sl: libc::socklen_t| unsafe {
        g(sa, salen, h, hl, s, sl, flags)
    };
    let cut = |b: *mut c_char, len: libc::socklen_t| match room_live(b as usize) {
        Some(room) if !b.is_null() && room < len as usize => room as libc::socklen_t,
        _ => len,
    };
    let (host_room, serv_room) = (cut(host, hostlen), cut(serv, servlen));
    let r = call(host, host_room, serv, serv_room);
    if r != libc::EAI_OVERFLOW || (host_room == hostlen && serv_room == servlen) {
        return r;
    }
    // Each name alone, at the caller's length, into memory of the library's own.
    let len = |n: usize| n.min(libc::socklen_t::MAX as usize) as libc::socklen_t;
    if host_room < hostlen {
        past_room(host, hostlen as usize, host_room as usize, "getnameinfo", |b, n| {
            call(b, len(n), ptr::null_mut(), 0);
        });
    }
    if serv_room < servlen {
        past_room(serv, servlen as usize, serv_room as usize, "getnameinfo", |b, n| {
            call(ptr::null_mut(), 0, b, len(n));
        });
    }
    r
}

/// Defines the wrapper of a collation transform (`strxfrm` and kin) of `$unit` characters:
/// see the module's documentation. (The C library writes the transformed string as far as
/// the length allows, the whole length when it does not fit, and answers the length the whole
/// string needs.) Told 0, no buffer is written (a length query, often with a null one).
macro_rules! xfrm {
    ($(#[$doc:meta])* fn $name:ident($unit:ty $(, $loc:ident)?)) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(d: *mut $unit, src: *const $unit, n: usize $(, $loc: *mut c_void)?) -> usize {
            type F = unsafe extern "C" fn(*mut $unit, *const $unit, usize $(, xfrm!(@loc $loc))?) -> usize;
            // SAFETY: the C library's function of this name has this type.
            let real: Option<F> = unsafe { real_fn!($name) };
            let Some(g) = real else { return 0 };
            const UNIT: usize = core::mem::size_of::<$unit>();
            let bytes = n.saturating_mul(UNIT);
            if n == 0 {
                // SAFETY: the caller's call, passed on: told 0, it writes nothing.
                return unsafe { g(d, src, n $(, $loc)?) };
            }
            // Told `k` bytes: the caller's own length when `k` is all of it, else whole units.
            let units = |k: usize| if k == bytes { n } else { k / UNIT };
            // SAFETY: the caller's string, into the caller's buffer told no more than it holds,
            // or into the library's own.
            let call = |b: *mut c_char, k: usize| unsafe { g(b.cast(), src, units(k) $(, $loc)?) };
            told(d.cast(), bytes, stringify!($name), call, |&r, _, k| r < units(k))
        }
    };
    (@loc $loc:ident) => { *mut c_void };
}

xfrm! {
    /// `strxfrm(3)`.
    fn strxfrm(c_char)
}
xfrm! {
    /// `strxfrm_l(3)`.
    fn strxfrm_l(c_char, loc)
}
xfrm! {
    /// `__strxfrm_l`, which the C++ library's `std::collate` calls.
    fn __strxfrm_l(c_char, loc)
}
xfrm! {
    /// `wcsxfrm(3)`.
    fn wcsxfrm(libc::wchar_t)
}
xfrm! {
    /// `wcsxfrm_l(3)`.
    fn wcsxfrm_l(libc::wchar_t, loc)
}
xfrm! {
    /// `__wcsxfrm_l`, which the C++ library's `std::collate` calls.
    fn __wcsxfrm_l(libc::wchar_t, loc)
}

/// A database look-up into the caller's entry record `ent`, buffer `buf` of `len` bytes and
/// `result` (`call(ent, buf, len, result)`: the C library's call with its other arguments), held
/// to the bounds of their heap objects: see the module's documentation. Made again into memory
/// of the library's own, it is given an entry record and a result of the library's too.
fn looked_up<E>(
    ent: *mut E,
    buf: *mut c_char,
    len: usize,
    result: *mut *mut E,
    op: &'static str,
    call: impl Fn(*mut E, *mut c_char, usize, *mut *mut E) -> c_int,
) -> c_int {
    bounded(ent as usize, core::mem::size_of::<E>(), Way::WouldWrite, op);
    let mut own = core::mem::MaybeUninit::<E>::uninit();
    let mut own_result: *mut E = ptr::null_mut();
    let (own, own_result) = (own.as_mut_ptr(), &mut own_result as *mut *mut E);
    let to = |b: *mut c_char, n: usize| if b == buf { call(ent, b, n, result) } else { call(own, b, n, own_result) };
    told(buf, len, op, to, |&r, _, _| r != libc::ERANGE)
}

/// Defines the wrapper of a database look-up (`looked_up`): `$key`s are its arguments before
/// the entry record, `$herr` its `h_errno` pointer after the result, if it has one (the
/// library's own look-ups get one of the library's).
macro_rules! database_lookup {
    ($(#[$doc:meta])* fn $name:ident($($key:ident: $kty:ty),*) -> $ent:ty $(; $herr:ident)?) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            $($key: $kty,)*
            ent: *mut $ent,
            buf: *mut c_char,
            len: usize,
            result: *mut *mut $ent
            $(, $herr: *mut c_int)?
        ) -> c_int {
            type F = unsafe extern "C" fn(
                $($kty,)* *mut $ent, *mut c_char, usize, *mut *mut $ent $(, database_lookup!(@int $herr))?
            ) -> c_int;
            // SAFETY: the C library's function of this name has this type.
            let real: Option<F> = unsafe { real_fn!($name) };
            let Some(f) = real else { return libc::ENOSYS };
            $(let mut own_herr: c_int = 0;
            // The caller's `h_errno` pointer, and one of the library's own.
            let (own_herr, $herr): (*mut c_int, *mut c_int) = (&mut own_herr, $herr);)?
            looked_up(ent, buf, len, result, stringify!($name), |e, b, n, r| {
                // SAFETY: the caller's key, and the caller's entry, buffer (told no more than
                // it holds) and result, or the library's own.
                unsafe { f($($key,)* e, b, n, r $(, if b == buf { $herr } else { own_herr })?) }
            })
        }
    };
    (@int $herr:ident) => { *mut c_int };
}

database_lookup! {
    /// `getpwnam_r(3)`: see the module's documentation.
    fn getpwnam_r(name: *const c_char) -> libc::passwd
}
database_lookup! {
    /// `getpwuid_r(3)`: see the module's documentation.
    fn getpwuid_r(uid: libc::uid_t) -> libc::passwd
}
database_lookup! {
    /// `getgrnam_r(3)`: see the module's documentation.
    fn getgrnam_r(name: *const c_char) -> libc::group
}
database_lookup! {
    /// `getgrgid_r(3)`: see the module's documentation.
    fn getgrgid_r(gid: libc::gid_t) -> libc::group
}
database_lookup! {
    /// `gethostbyname_r(3)`: see the module's documentation.
    fn gethostbyname_r(name: *const c_char) -> libc::hostent; h_errnop
}
database_lookup! {
    /// `gethostbyname2_r(3)`: see the module's documentation.
    fn gethostbyname2_r(name: *const c_char, af: c_int) -> libc::hostent; h_errnop
}
database_lookup! {
    /// `gethostbyaddr_r(3)`: see the module's documentation.
    fn gethostbyaddr_r(addr: *const core::ffi::c_void, addr_len: libc::socklen_t, kind: c_int) -> libc::hostent; h_errnop
}
database_lookup! {
    /// `getservbyname_r(3)`: see the module's documentation.
    fn getservbyname_r(name: *const c_char, proto: *const c_char) -> libc::servent
}
database_lookup! {
    /// `getservbyport_r(3)`: see the module's documentation.
    fn getservbyport_r(port: c_int, proto: *const c_char) -> libc::servent
}
database_lookup! {
    /// `getprotobyname_r(3)`: see the module's documentation.
    fn getprotobyname_r(name: *const c_char) -> libc::protoent
}
database_lookup! {
    /// `getprotobynumber_r(3)`: see the module's documentation.
    fn getprotobynumber_r(proto: c_int) -> libc::protoent
}
database_lookup! {
    /// `getspnam_r(3)`: see the module's documentation.
    fn getspnam_r(name: *const c_char) -> libc::spwd
}

// The enumerations. Told no more than the room, an entry that does not fit gets `ERANGE` and
// stays the next one (the C library goes back to it); made again into memory of the library's
// own at the caller's length, it is read once more, and if it fits there (the enumeration then
// moves past it) the call is reported and the process ends: an enumeration moves on only when
// the caller would have had the entry written past its object.
database_lookup! {
    /// `getpwent_r(3)`: see the module's documentation and the enumerations' note above.
    fn getpwent_r() -> libc::passwd
}
database_lookup! {
    /// `getgrent_r(3)`: see the module's documentation and the enumerations' note above.
    fn getgrent_r() -> libc::group
}
database_lookup! {
    /// `getspent_r(3)`: see the module's documentation and the enumerations' note above.
    fn getspent_r() -> libc::spwd
}
database_lookup! {
    /// `fgetpwent_r(3)`: see the module's documentation and the enumerations' note above.
    fn fgetpwent_r(stream: *mut libc::FILE) -> libc::passwd
}
database_lookup! {
    /// `fgetgrent_r(3)`: see the module's documentation and the enumerations' note above.
    fn fgetgrent_r(stream: *mut libc::FILE) -> libc::group
}
database_lookup! {
    /// `fgetspent_r(3)`: see the module's documentation and the enumerations' note above.
    fn fgetspent_r(stream: *mut libc::FILE) -> libc::spwd
}

/// `getgrouplist(3)`: `*ngroups` is the count of groups the list holds, cut to the room left
/// in its heap object as a buffer's length is (see the module's documentation). The C library
/// writes the groups that fit, and answers -1 with the count needed in `*ngroups` when they do
/// not all fit.
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn getgrouplist(
    user: *const c_char,
    group: libc::gid_t,
    groups: *mut libc::gid_t,
    ngroups: *mut c_int,
) -> c_int {
    type F = unsafe extern "C" fn(*const c_char, libc::gid_t, *mut libc::gid_t, *mut c_int) -> c_int;
    // SAFETY: the C library's function of this name has this type.
    let real: Option<F> = unsafe { real_fn!(getgrouplist) };
    let Some(f) = real else { return enosys() };
    const GID: usize = core::mem::size_of::<libc::gid_t>();
    bounded(ngroups as usize, core::mem::size_of::<c_int>(), Way::WouldWrite, "getgrouplist");
    // SAFETY: the caller's count, which the C library reads too.
    let Ok(count) = usize::try_from(unsafe { *ngroups }) else {
        // SAFETY: the caller's arguments, as the caller passed them.
        return unsafe { f(user, group, groups, ngroups) };
    };
    let mut own_count: c_int = 0;
    let own_count: *mut c_int = &mut own_count;
    // The list as a buffer of `n` bytes: as many whole groups as it holds.
    let call = |b: *mut c_char, n: usize| {
        let at = if b == groups.cast() { ngroups } else { own_count };
        // SAFETY: the caller's count, or the library's own for a list of the library's, set to
        // the groups the list holds; then the caller's user and group, and that list.
        unsafe {
            *at = (n / GID).min(c_int::MAX as usize) as c_int;
            f(user, group, b.cast(), at)
        }
    };
    told(groups.cast(), count.saturating_mul(GID), "getgrouplist", call, |&r, _, _| r >= 0)
}

/// A call that writes at most `N` bytes into `buf` (`call(b)` makes it into `b`, answering `b`
/// or null), made into a local buffer when `buf` is in the heap; `wrote(local)` is how many of
/// the local's bytes it wrote. Those are held to `buf`'s heap object, then copied out.
fn through_local<const N: usize>(
    buf: *mut c_char,
    op: &'static str,
    call: impl Fn(*mut c_char) -> *mut c_char,
    wrote: impl Fn(&[u8; N]) -> usize,
) -> *mut c_char {
    if buf.is_null() || !in_heap(buf as usize) {
        return call(buf);
    }
    let mut local = [0u8; N];
    if call(local.as_mut_ptr().cast()).is_null() {
        return ptr::null_mut();
    }
    let n = wrote(&local).min(N);
    bounded(buf as usize, n, Way::WouldWrite, op);
    // SAFETY: `buf`'s heap object holds `n` bytes from `buf` (just checked: a report of a
    // buffer too small does not return).
    unsafe { ptr::copy_nonoverlapping(local.as_ptr(), buf.cast::<u8>(), n) };
    buf
}

/// The bytes of the string in `b`, with its NUL.
fn string_bytes<const N: usize>(b: &[u8; N]) -> usize {
    b.iter().position(|&c| c == 0).map_or(N, |i| i + 1)
}

/// Bytes `if_indextoname` writes: a whole `IF_NAMESIZE` (`strncpy`).
const IF_NAMESIZE: usize = 16;

/// `if_indextoname(3)`: see the module's documentation.
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn if_indextoname(index: libc::c_uint, name: *mut c_char) -> *mut c_char {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(libc::c_uint, *mut c_char) -> *mut c_char> =
        unsafe { real_fn!(if_indextoname) };
    let Some(g) = real else { return enosys_null() };
    // SAFETY: the caller's buffer, or a local of `IF_NAMESIZE` bytes.
    through_local::<IF_NAMESIZE>(name, "if_indextoname", |b| unsafe { g(index, b) }, |_| IF_NAMESIZE)
}

/// Bytes of the buffer `ctime_r` and `asctime_r` are given, by the standard.
const TIME_TEXT: usize = 26;

/// `asctime_r(3)`: see the module's documentation.
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn asctime_r(tm: *const libc::tm, buf: *mut c_char) -> *mut c_char {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(*const libc::tm, *mut c_char) -> *mut c_char> =
        unsafe { real_fn!(asctime_r) };
    let Some(g) = real else { return enosys_null() };
    // SAFETY: the caller's time, and its buffer or a local of `TIME_TEXT` bytes.
    through_local::<TIME_TEXT>(buf, "asctime_r", |b| unsafe { g(tm, b) }, string_bytes)
}

/// `ctime_r(3)`: see the module's documentation.
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn ctime_r(t: *const libc::time_t, buf: *mut c_char) -> *mut c_char {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(*const libc::time_t, *mut c_char) -> *mut c_char> =
        unsafe { real_fn!(ctime_r) };
    let Some(g) = real else { return enosys_null() };
    // SAFETY: the caller's time, and its buffer or a local of `TIME_TEXT` bytes.
    through_local::<TIME_TEXT>(buf, "ctime_r", |b| unsafe { g(t, b) }, string_bytes)
}

/// Most bytes `getentropy` gives in one call (more: `EIO`).
const ENTROPY_MAX: usize = 256;

/// `getentropy(3)`: see the module's documentation.
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn getentropy(buf: *mut core::ffi::c_void, len: usize) -> c_int {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(*mut core::ffi::c_void, usize) -> c_int> = unsafe { real_fn!(getentropy) };
    let Some(g) = real else { return enosys() };
    if len <= ENTROPY_MAX {
        bounded(buf as usize, len, Way::WouldWrite, "getentropy");
    }
    // SAFETY: the caller's arguments, as the caller passed them.
    again(|| unsafe { g(buf, len) } as isize, || alias::map_again(buf as usize, len.min(ENTROPY_MAX))) as c_int
}

/// -1 with `ENOSYS`: the C library has no such function.
fn enosys() -> c_int {
    sys::set_errno(libc::ENOSYS);
    -1
}

/// Null with `ENOSYS`: the C library has no such function.
fn enosys_null() -> *mut c_char {
    sys::set_errno(libc::ENOSYS);
    ptr::null_mut()
}
