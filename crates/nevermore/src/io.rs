//! System calls on live objects whose pages lost their page-table entries.
//!
//! The kernel may drop the page-table entry of a live alias page at any time: its pageout does
//! (swap-out; a DAMON `pageout` scheme, which on some hosts runs even without swap; a memory
//! manager's `MADV_PAGEOUT`), and so does the program's own `madvise`. The program's next
//! access to the page traps, and the fault handler maps it again (`fault`). An access by the
//! kernel, inside a system call, reaches no handler: the userfaultfd traps accesses from user
//! mode only, and the kernel's copy fails. `read(2)` into such a buffer, or `write(2)` from
//! it, fails with `EFAULT`, or stops short at that page; under the C library's `malloc` the
//! kernel brings the page back itself. (A server then drops a connection whose buffer sat idle
//! long enough to be paged out.)
//!
//! So the library exports the C library's calls that move data between files or sockets and
//! the program's buffers, and calls the C library's own:
//!
//! - when one fails with `EFAULT`, the pages of its buffers (and of the descriptions of its
//!   buffers: `iovec` arrays, `msghdr`s, addresses) that belong to live objects and lost their
//!   entries are mapped again (`alias::map_again`), and the call is made again, up to `TRIES`
//!   times. A buffer of a freed object has no live page, nor has the rest of one that runs
//!   past the end of its object into freed memory or a guard page: such a call is reported
//!   (`fault::examine`) instead of failing with `EFAULT`. A call that fails with `EFAULT` has transferred nothing (the kernel returns the
//!   count instead when it transferred some), so making it again repeats nothing, with one
//!   exception: a datagram whose copy failed is dropped by the kernel, and the call made
//!   again waits for the next one;
//! - when a read or write of a regular file or block device stops short at the page of a live
//!   object that lost its entry, the page is mapped again and the rest is read or written by
//!   further calls, so that the caller gets the count it would have had (PostgreSQL, for one,
//!   takes a short read of a data file for an error). For other files (sockets, pipes) the
//!   short count is returned as it is: a count the program must be ready for, and its next
//!   call starts at that page, which is now mapped.
//!
//! The calls: `read`, `write`, `pread`, `pwrite`, `readv`, `writev`, `preadv`, `pwritev`,
//! `preadv2`, `pwritev2` (and their `64` names), `recv`, `recvfrom`, `recvmsg`, `send`,
//! `sendto`, `sendmsg`, `epoll_wait`, `epoll_pwait`, `poll`, `ppoll`, `select`, `pselect`, and the checked
//! `__read_chk`, `__pread_chk`, `__pread64_chk`, `__recv_chk`, `__recvfrom_chk`, `__poll_chk`
//! of programs built with `_FORTIFY_SOURCE`; and the common calls that take a path (a path
//! kept in a heap object: a threaded Python server answered 404 for an existing file when its
//! `open` failed, most likely so): `open`, `openat`, `creat`, `stat`, `lstat`, `fstatat`, `statx`, `access`,
//! `faccessat`, `unlink`, `unlinkat`, `rename`, `renameat`, `renameat2`, `link`, `linkat`,
//! `symlink`, `symlinkat`, `mkdir`, `mkdirat`, `mknod`, `mkfifo`, `rmdir`, `chdir`, `chroot`,
//! `readlink`, `readlinkat`, `chmod`, `fchmodat`, `chown`, `lchown`, `fchownat`, `truncate`,
//! `utimensat`, `statfs`, `statvfs` (and the `64` names), `inotify_add_watch`, the checked
//! and old names of some (`__openat_2`, `__xstat`, ...), and the
//! extended attribute calls, with their `stat`, `statfs`, `readlink` and times buffers and
//! their attributes' names, values and lists; `getcwd`'s buffer; the wait calls and `accept`,
//! whose results go through locals instead (see "results written after what cannot be
//! undone" below); `execve`, `execv`, `execvp` and `execvpe`, with their `argv` and `envp`
//! arrays and strings (`execl`, `execlp` and `execle` read theirs first: `exec_list`); and `fstat`, `getrandom`, `getdents64`, `recvmmsg` and `sendmmsg`;
//! `futimens`; `sendfile`, `copy_file_range` and `splice`, whose offsets go through locals;
//! the calls on the process's attributes (`process`: groups, processors, usage, scheduling,
//! names, the system's name and figures); and signals, sleeps, timers, eventfd counters,
//! System V messages and semaphores and POSIX message queues (`waits`).
//!
//! The C library makes system calls of its own inside its functions, which these wrappers
//! never see. For stdio, a stream's buffer is a view of its own (`streams`); `fread` and
//! `fwrite`, whose big requests go straight between the file and the caller's buffer, are
//! made again for the rest when the stream's error came from such a page (and, with `fgets`,
//! hold the program's buffer to its heap object's bounds, as the system calls below are);
//! `fopen` is made
//! again after `EFAULT`, `freopen` reads its path first. `readdir` is made again after `EFAULT`
//! with the `DIR` (which holds the buffer the kernel fills) mapped again and the directory's
//! position set back where the kernel moved it past entries it did not return, and `readdir_r`
//! reads through it; the directory
//! streams the C library opens for itself, and reads with its own `readdir` (inside
//! `scandir`, `glob`, `nftw`, `ftw`, `fts_read`), are views (`streams`). `posix_spawn`,
//! `posix_spawnp`, `system` and `popen` read first what their child and its `execve` will
//! read (`spawn_call`). The calls that write a name or a message of the C library's into the
//! caller's buffer (`gethostname`, `strerror_r`, `getnameinfo`, `ctime_r`, ...) are held to
//! its heap object's bounds (`fills`). Not reached: the other calls the C library makes inside
//! its own functions (`realpath`'s, whose result only is held to its buffer's bounds), calls made
//! through `syscall()` or a `syscall` instruction, the other calls that take buffers or paths
//! (`io_uring`, `ioctl`, `mount`, ...); those still fail as described above.
//! `ioctl` is left on purpose: its argument's size is the driver's to know, and some requests
//! act before they copy their result out, so one made again would act twice.
//!
//! The descriptions of buffers are read with `sys::probe_word`, which a fault cannot crash: a
//! program may hand the kernel a bad `iovec` array on purpose, for the `EFAULT`. A call that
//! succeeds costs a comparison, and a short one that ends in the alias arena a load.

use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::alias;
use crate::sys;

/// Calls made again, at most, after mapping pages again.
const TRIES: u32 = 4;

/// Most `iovec` entries looked at (the kernel's `UIO_MAXIOV`).
const MAX_IOV: usize = 1024;

/// Makes `call` again while it fails with `EFAULT` and `heal` maps pages again; `errno` is
/// put back as it was before the call when a call made again succeeds.
#[inline(always)]
pub(crate) fn again(mut call: impl FnMut() -> isize, heal: impl Fn() -> usize) -> isize {
    let saved = sys::errno();
    let r = call();
    if r >= 0 {
        return r;
    }
    again_slow(saved, call, heal)
}

#[cold]
#[inline(never)]
fn again_slow(saved: i32, mut call: impl FnMut() -> isize, heal: impl Fn() -> usize) -> isize {
    let mut r = -1;
    for _ in 0..TRIES {
        if sys::errno() != libc::EFAULT || !crate::is_ready() || healed(&heal) == 0 {
            break;
        }
        sys::set_errno(saved);
        r = call();
        if r >= 0 {
            return r;
        }
    }
    if sys::errno() == libc::EFAULT {
        crate::fault::examine(&heal);
        sys::set_errno(libc::EFAULT);
    }
    r
}

/// Calls `call`, which returns an error number, again while it returns `EFAULT` and `heal`
/// maps pages again, at most `TRIES` times more.
fn again_code(call: impl Fn() -> c_int, heal: impl Fn() -> usize) -> c_int {
    let mut r = call();
    for _ in 0..TRIES {
        if r != libc::EFAULT || !crate::is_ready() || healed(&heal) == 0 {
            break;
        }
        r = call();
    }
    if r == libc::EFAULT {
        let saved = sys::errno();
        crate::fault::examine(&heal);
        sys::set_errno(saved);
    }
    r
}

/// Runs `heal` after a call failed with `EFAULT`; returns its count of live pages (0: making
/// the call again is of no use). When it mapped no page again although the buffers hold live
/// pages, the call met a page that is not a live object's, unless another thread mapped it
/// meanwhile: the buffers are examined first, so that a buffer running past the end of its
/// object is reported rather than met again (a datagram whose copy failed is dropped, and the
/// call made again would wait for the next).
fn healed(heal: &impl Fn() -> usize) -> usize {
    let before = alias::SYSCALL_PAGES_MAPPED.load(Ordering::Relaxed);
    let live = heal();
    if live > 0 && alias::SYSCALL_PAGES_MAPPED.load(Ordering::Relaxed) == before {
        crate::fault::examine(heal);
    }
    live
}

/// A read or write of `n` bytes at `buf`; `call(done)` transfers the bytes from `done` on.
/// `file`: the descriptor is known to be a regular file (positioned calls), or false to look.
#[inline(always)]
fn transfer(fd: c_int, buf: usize, n: usize, file: bool, way: Way, mut call: impl FnMut(usize) -> isize) -> isize {
    if way == Way::OutOf {
        sending(buf, n);
    }
    let r = again(|| call(0), || alias::map_again(buf, n));
    let r = if r <= 0 || r as usize >= n || !alias::in_arena(buf + r as usize) {
        r
    } else {
        transfer_rest(fd, buf, n, file, r as usize, call)
    };
    if way == Way::Into {
        moved(buf, n, r)
    } else {
        r
    }
}

/// Which way a call moves bytes through a buffer: the kernel writes into it, or reads from it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    /// The call wrote into the buffer.
    Into,
    /// The call is to read out of it.
    OutOf,
    /// The call is to write into it (a copy, checked before it is made).
    WouldWrite,
    /// The call read out of it (a string function, checked when it returns: `reads`).
    Read,
}

/// The bounds of the heap buffers of the calls that move bytes. A call that reads out of a
/// heap buffer (`write`, `send`, ...) more bytes than its object holds from there would hand
/// out what follows it (a reply sent with a length the peer chose, as Heartbleed's was, which
/// no canary sees): it is reported before it is made (`sending`), as AddressSanitizer checks
/// the whole length. A call that writes into one may be given more room than the object has
/// and still move only what arrives: it is reported when the bytes it moved ran past the end
/// (`moved`), before the program uses what was written over, and before the canary after
/// the object would find it at `free`; so is one that fills a buffer with what the kernel
/// holds (`getrandom`, `readlink`, the extended attributes, `getdents64`, `getcwd`: a length
/// taken from a bigger buffer, and a link or a name longer than the object). A buffer that is
/// not the heap's costs two comparisons and a table's look-up; a heap buffer, its object's
/// look-up.
#[inline(always)]
fn sending(buf: usize, n: usize) {
    bounded(buf, n, Way::OutOf, crate::fault::SYSCALL);
}

/// A call moved `r` bytes into the `n` at `buf` (`MSG_TRUNC` returns a datagram's whole
/// length, more than was moved): see `sending`.
#[inline(always)]
fn moved(buf: usize, n: usize, r: isize) -> isize {
    if r > 0 {
        bounded(buf, (r as usize).min(n), Way::Into, crate::fault::SYSCALL);
    }
    r
}

/// `sending` or `moved`, for `done` bytes; `op` names the call in a report.
#[inline(always)]
pub(crate) fn bounded(buf: usize, done: usize, way: Way, op: &'static str) {
    if done > 0 && in_heap(buf) {
        overrun(buf, done, way, op, true);
    }
}

/// `bounded` for the copies (`copies`): only a live object's end is checked. A copy through a
/// dangling pointer into a freed object whose page is still mapped stays as prevent mode
/// leaves any other access there (its documented granularity); in detect mode the page is
/// gone and the copy traps.
#[inline(always)]
pub(crate) fn bounded_live(buf: usize, done: usize, way: Way, op: &'static str) {
    if done > 0 && in_heap(buf) {
        overrun(buf, done, way, op, false);
    }
}

/// The bytes from `buf` to the end of the live heap object it lies in (0 from its end on), or
/// None for a buffer in no live heap object. For the calls whose length is known only once
/// they have run (`copies`' formatted output): they are run with this as their bound.
#[inline(always)]
pub(crate) fn room_live(buf: usize) -> Option<usize> {
    if !in_heap(buf) {
        return None;
    }
    match crate::heap::object_at(buf) {
        Some((o, true)) => Some((o.start + o.size).saturating_sub(buf)),
        _ => None,
    }
}

/// Whether `addr` may be a heap object's: in the alias arena, or in a gigabyte that holds
/// large objects (`heap::object_at` looks it up).
#[inline(always)]
pub(crate) fn in_heap(addr: usize) -> bool {
    alias::in_arena(addr) || crate::large::may_hold(addr)
}

/// Reports `done` bytes at `buf` that run past the end of the live object `buf` lies in, or a
/// buffer in a freed object whose alias is still mapped (its group lives on in prevent mode):
/// the kernel would read the dead object's old contents out, or has written into it.
#[inline(never)]
fn overrun(buf: usize, done: usize, way: Way, op: &'static str, freed_too: bool) {
    let o = match crate::heap::object_at(buf) {
        Some((o, true)) => o,
        Some((o, false)) if freed_too => crate::report::fatal(crate::fault::in_freed(buf, o, op)),
        Some(_) => return,
        None => {
            if let Some(o) = crate::heap::object_after(buf) {
                before_start_of(buf, o, way, op);
            }
            return;
        }
    };
    if buf.saturating_add(done) > o.start + o.size {
        past_end_of(o, buf, way, op);
    }
}

/// Reports a call (`op`) that ran, or was to run, past the end of the object `o` its buffer
/// `buf` starts in, the way `way` says.
fn past_end_of(o: crate::report::Object, buf: usize, way: Way, op: &'static str) -> ! {
    let what = match way {
        Way::Into => "the call wrote past the end of the object its buffer starts in",
        Way::OutOf => "the call was to read past the end of the object its buffer starts in",
        Way::WouldWrite => "the call was to write past the end of the object its buffer starts in",
        Way::Read => "the call read past the end of the object its buffer starts in",
    };
    crate::report::fatal(crate::fault::past_end(o, buf, what, op))
}

/// Reports a call's buffer at `buf`, before the start of the live object `o` in the same page
/// (`heap::object_after`).
#[cold]
fn before_start_of(buf: usize, o: crate::report::Object, way: Way, op: &'static str) -> ! {
    let what = match way {
        Way::Into => "the call wrote before the start of the object, in its first page",
        Way::OutOf => "the call was to read before the start of the object, in its first page",
        Way::WouldWrite => "the call was to write before the start of the object, in its first page",
        Way::Read => "the call read before the start of the object, in its first page",
    };
    let r = crate::report::Report {
        kind: crate::report::Kind::HeapBufferOverflow,
        addr: buf,
        op,
        what,
        object: Some(o),
        claimed: None,
        pointer: None,
    };
    crate::report::fatal(r)
}

/// `sending` or `moved` for the `cnt` buffers of an `iovec` array, in order, with `limit`
/// bytes in all (a call moved that many; `usize::MAX` for every buffer in full).
fn bounds_iov(iov: usize, cnt: usize, limit: usize, way: Way) {
    let mut left = limit;
    for i in 0..cnt.min(MAX_IOV) {
        let (Some(base), Some(len)) = (word(iov, 2 * i), word(iov, 2 * i + 1)) else { break };
        let n = len.min(left);
        match way {
            Way::OutOf => sending(base, n),
            Way::Into | Way::WouldWrite | Way::Read => _ = moved(base, n, n as isize),
        }
        left -= n;
        if left == 0 {
            break;
        }
    }
}

/// A call on the `cnt` buffers of an `iovec` array: their bounds are checked before a call
/// that reads out of them, and after one that wrote `r` bytes into them.
#[inline(always)]
fn through_iov(iov: usize, cnt: usize, way: Way, call: impl FnOnce() -> isize) -> isize {
    if way == Way::OutOf {
        bounds_iov(iov, cnt, usize::MAX, way);
    }
    let r = call();
    if way == Way::Into && r > 0 {
        bounds_iov(iov, cnt, r as usize, way);
    }
    r
}

/// `through_iov` for the buffers of a `msghdr`.
#[inline(always)]
fn through_msg(msg: usize, way: Way, call: impl FnOnce() -> isize) -> isize {
    match (word(msg, 2), word(msg, 3)) {
        (Some(iov), Some(cnt)) => through_iov(iov, cnt, way, call),
        _ => call(),
    }
}

/// The rest of a transfer that stopped short at `done`, in the alias arena: continued if it
/// stopped at a live object's page that had lost its entry, in a regular file or block device.
#[cold]
#[inline(never)]
fn transfer_rest(
    fd: c_int,
    buf: usize,
    n: usize,
    file: bool,
    mut done: usize,
    mut call: impl FnMut(usize) -> isize,
) -> isize {
    let saved = sys::errno();
    let seekable = || {
        let st = sys::stat(fd);
        st.is_some_and(|st| matches!(st.st_mode & libc::S_IFMT, libc::S_IFREG | libc::S_IFBLK))
    };
    if !crate::is_ready() || !lost_page_at(buf + done) || !(file || seekable()) {
        return done as isize;
    }
    while done < n {
        let from = done;
        let r = again(|| call(from), || alias::map_again(buf + from, n - from));
        if r <= 0 {
            // What the first calls transferred stands; an error of a further call is the
            // next call's to meet.
            sys::set_errno(saved);
            break;
        }
        done += r as usize;
        if done < n && (!alias::in_arena(buf + done) || !lost_page_at(buf + done)) {
            break;
        }
    }
    done as isize
}

/// Whether the page of `addr` is a live object's that had lost its page-table entry (it is
/// mapped again now). The aligned word is read, which never crosses into the next page.
fn lost_page_at(addr: usize) -> bool {
    sys::probe_word(addr & !7).status == sys::PROBE_MAPPED_AGAIN
}

/// The C library's function named `name` (looked up once into `slot`), as a `T`.
///
/// # Safety
/// `T` must be the function's type.
unsafe fn real<T: Copy>(slot: &AtomicUsize, name: &core::ffi::CStr) -> Option<T> {
    let f = sys::next_symbol(slot, name)?;
    // SAFETY: `T` is a function pointer type (the caller's contract), as wide as `usize`.
    Some(unsafe { core::mem::transmute_copy::<usize, T>(&f) })
}

/// Reads the `n`-th word at `addr`, if it can be read.
fn word(addr: usize, n: usize) -> Option<usize> {
    let p = sys::probe_word(addr.checked_add(n * 8)?);
    (p.status != sys::PROBE_FAILED).then_some(p.value)
}

/// Maps again the pages of an `iovec` array of `cnt` entries and of the buffers it names.
fn heal_iov(iov: usize, cnt: usize) -> usize {
    let cnt = cnt.min(MAX_IOV);
    let mut mapped = alias::map_again(iov, cnt * 16);
    for i in 0..cnt {
        let (Some(base), Some(len)) = (word(iov, 2 * i), word(iov, 2 * i + 1)) else { break };
        mapped += alias::map_again(base, len);
    }
    mapped
}

/// Maps again the pages of a `msghdr` and of everything it names.
fn heal_msg(msg: usize) -> usize {
    let mut mapped = alias::map_again(msg, core::mem::size_of::<libc::msghdr>());
    // msg_name, msg_namelen, msg_iov, msg_iovlen, msg_control, msg_controllen.
    let w = |n| word(msg, n);
    if let (Some(name), Some(namelen), Some(iov), Some(iovlen), Some(control), Some(controllen)) =
        (w(0), w(1), w(2), w(3), w(4), w(5))
    {
        mapped += alias::map_again(name, namelen & 0xffff_ffff);
        mapped += heal_iov(iov, iovlen);
        mapped += alias::map_again(control, controllen);
    }
    mapped
}

/// Bytes of a socket address buffer mapped again (a `sockaddr_storage`).
const ADDR_BYTES: usize = 128;

/// The system call `nr` with `a`, setting `errno`: where the C library's function is missing.
fn raw(nr: i64, a: [usize; 6]) -> isize {
    // SAFETY: the caller's arguments, handed to the kernel, which checks them.
    unsafe { sys::own_syscall(nr, a) }
}

/// Defines an exported function that calls the C library's function of the same name,
/// declared as `$ty`, through `$call` (which names it `f`), and the system call `$nr` with
/// `$raw` when the C library has no such function.
macro_rules! forward {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $aty:ty),*) -> $ret:ty;
     type $ty:ty; $nr:expr, $raw:expr; |$f:ident| $body:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $aty),*) -> $ret {
            // SAFETY: the C library's function of this name has this type.
            let real: Option<$ty> = unsafe { real_fn!($name) };
            let $f = |$($arg: $aty),*| -> isize {
                match real {
                    // SAFETY: the caller's arguments, as the caller passed them.
                    Some(g) => unsafe { g($($arg),*) as isize },
                    None => raw($nr, $raw),
                }
            };
            ($body) as $ret
        }
    };
}

/// The C library's function of the same name as the one this is used in, `$name` (`real`):
/// looked up when the library is loaded, since a first call may come from a signal handler,
/// where `dlsym` must not run. Unsafe: the caller names the function's type.
macro_rules! real_fn {
    ($name:ident) => {{
        static REAL: AtomicUsize = AtomicUsize::new(0);
        #[used]
        #[link_section = ".init_array"]
        static RESOLVE: extern "C" fn() = {
            extern "C" fn resolve() {
                let _ = sys::next_symbol(&REAL, c_name!($name));
            }
            resolve
        };
        real(&REAL, c_name!($name))
    }};
}

/// The name of a function as a C string, made at compile time (in a constant: as an
/// expression, the check for a NUL ran on every call, 19 % of a small `fread`'s time).
macro_rules! c_name {
    ($name:ident) => {{
        const NAME: &core::ffi::CStr =
            match core::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                Ok(name) => name,
                Err(_) => panic!("a function name with a NUL in it"),
            };
        NAME
    }};
}

type Fd = c_int;
type Buf = *mut c_void;
type CBuf = *const c_void;
type Iov = *const libc::iovec;
type Addr = *mut libc::sockaddr;
type AddrLen = *mut libc::socklen_t;

forward! {
    /// `read(2)`: see the module's documentation.
    fn read(fd: Fd, buf: Buf, n: usize) -> isize;
    type unsafe extern "C" fn(Fd, Buf, usize) -> isize;
    libc::SYS_read, [fd as usize, buf as usize, n, 0, 0, 0];
    |f| transfer(fd, buf as usize, n, false, Way::Into, |d| f(fd, (buf as usize + d) as Buf, n - d))
}

forward! {
    /// `write(2)`: see the module's documentation.
    fn write(fd: Fd, buf: CBuf, n: usize) -> isize;
    type unsafe extern "C" fn(Fd, CBuf, usize) -> isize;
    libc::SYS_write, [fd as usize, buf as usize, n, 0, 0, 0];
    |f| transfer(fd, buf as usize, n, false, Way::OutOf, |d| f(fd, (buf as usize + d) as CBuf, n - d))
}

macro_rules! positioned {
    ($name:ident, $buf:ty, $nr:expr, $way:expr) => {
        forward! {
            /// `pread(2)`/`pwrite(2)` under one of their names: see the module's documentation.
            fn $name(fd: Fd, buf: $buf, n: usize, off: i64) -> isize;
            type unsafe extern "C" fn(Fd, $buf, usize, i64) -> isize;
            $nr, [fd as usize, buf as usize, n, off as usize, 0, 0];
            |f| transfer(fd, buf as usize, n, true, $way, |d| f(fd, (buf as usize + d) as $buf, n - d, off + d as i64))
        }
    };
}
positioned!(pread, Buf, libc::SYS_pread64, Way::Into);
positioned!(pread64, Buf, libc::SYS_pread64, Way::Into);
positioned!(pwrite, CBuf, libc::SYS_pwrite64, Way::OutOf);
positioned!(pwrite64, CBuf, libc::SYS_pwrite64, Way::OutOf);

forward! {
    /// `__read_chk`, `read` of a program built with `_FORTIFY_SOURCE`.
    fn __read_chk(fd: Fd, buf: Buf, n: usize, size: usize) -> isize;
    type unsafe extern "C" fn(Fd, Buf, usize, usize) -> isize;
    libc::SYS_read, [fd as usize, buf as usize, n.min(size), 0, 0, 0];
    |f| transfer(fd, buf as usize, n, false, Way::Into, |d| {
        f(fd, (buf as usize + d) as Buf, n - d, size.saturating_sub(d))
    })
}

macro_rules! positioned_chk {
    ($name:ident) => {
        forward! {
            /// `pread` of a program built with `_FORTIFY_SOURCE`.
            fn $name(fd: Fd, buf: Buf, n: usize, off: i64, size: usize) -> isize;
            type unsafe extern "C" fn(Fd, Buf, usize, i64, usize) -> isize;
            libc::SYS_pread64, [fd as usize, buf as usize, n.min(size), off as usize, 0, 0];
            |f| transfer(fd, buf as usize, n, true, Way::Into, |d| {
                f(fd, (buf as usize + d) as Buf, n - d, off + d as i64, size.saturating_sub(d))
            })
        }
    };
}
positioned_chk!(__pread_chk);
positioned_chk!(__pread64_chk);

macro_rules! vectored {
    ($name:ident, $nr:expr, $way:expr) => {
        forward! {
            /// `readv(2)`/`writev(2)`: see the module's documentation.
            fn $name(fd: Fd, iov: Iov, cnt: c_int) -> isize;
            type unsafe extern "C" fn(Fd, Iov, c_int) -> isize;
            $nr, [fd as usize, iov as usize, cnt as usize, 0, 0, 0];
            |f| through_iov(iov as usize, cnt.max(0) as usize, $way, || {
                again(|| f(fd, iov, cnt), || heal_iov(iov as usize, cnt.max(0) as usize))
            })
        }
    };
}
vectored!(readv, libc::SYS_readv, Way::Into);
vectored!(writev, libc::SYS_writev, Way::OutOf);

macro_rules! vectored_at {
    ($name:ident, $nr:expr, $way:expr) => {
        forward! {
            /// `preadv(2)`/`pwritev(2)` under one of their names: see the module's documentation.
            fn $name(fd: Fd, iov: Iov, cnt: c_int, off: i64) -> isize;
            type unsafe extern "C" fn(Fd, Iov, c_int, i64) -> isize;
            $nr, [fd as usize, iov as usize, cnt as usize, off as usize, 0, 0];
            |f| through_iov(iov as usize, cnt.max(0) as usize, $way, || {
                again(|| f(fd, iov, cnt, off), || heal_iov(iov as usize, cnt.max(0) as usize))
            })
        }
    };
}
vectored_at!(preadv, libc::SYS_preadv, Way::Into);
vectored_at!(preadv64, libc::SYS_preadv, Way::Into);
vectored_at!(pwritev, libc::SYS_pwritev, Way::OutOf);
vectored_at!(pwritev64, libc::SYS_pwritev, Way::OutOf);

macro_rules! vectored_at_flags {
    ($name:ident, $nr:expr, $way:expr) => {
        forward! {
            /// `preadv2(2)`/`pwritev2(2)` under one of their names: see the module's documentation.
            fn $name(fd: Fd, iov: Iov, cnt: c_int, off: i64, flags: c_int) -> isize;
            type unsafe extern "C" fn(Fd, Iov, c_int, i64, c_int) -> isize;
            $nr, [fd as usize, iov as usize, cnt as usize, off as usize, 0, flags as usize];
            |f| through_iov(iov as usize, cnt.max(0) as usize, $way, || {
                again(|| f(fd, iov, cnt, off, flags), || heal_iov(iov as usize, cnt.max(0) as usize))
            })
        }
    };
}
vectored_at_flags!(preadv2, libc::SYS_preadv2, Way::Into);
vectored_at_flags!(preadv64v2, libc::SYS_preadv2, Way::Into);
vectored_at_flags!(pwritev2, libc::SYS_pwritev2, Way::OutOf);
vectored_at_flags!(pwritev64v2, libc::SYS_pwritev2, Way::OutOf);

forward! {
    /// `recv(2)`: see the module's documentation.
    fn recv(fd: Fd, buf: Buf, n: usize, flags: c_int) -> isize;
    type unsafe extern "C" fn(Fd, Buf, usize, c_int) -> isize;
    libc::SYS_recvfrom, [fd as usize, buf as usize, n, flags as usize, 0, 0];
    |f| moved(buf as usize, n, again(|| f(fd, buf, n, flags), || alias::map_again(buf as usize, n)))
}

forward! {
    /// `__recv_chk`, `recv` of a program built with `_FORTIFY_SOURCE`.
    fn __recv_chk(fd: Fd, buf: Buf, n: usize, size: usize, flags: c_int) -> isize;
    type unsafe extern "C" fn(Fd, Buf, usize, usize, c_int) -> isize;
    libc::SYS_recvfrom, [fd as usize, buf as usize, n.min(size), flags as usize, 0, 0];
    |f| moved(buf as usize, n, again(|| f(fd, buf, n, size, flags), || alias::map_again(buf as usize, n)))
}

forward! {
    /// `send(2)`: see the module's documentation.
    fn send(fd: Fd, buf: CBuf, n: usize, flags: c_int) -> isize;
    type unsafe extern "C" fn(Fd, CBuf, usize, c_int) -> isize;
    libc::SYS_sendto, [fd as usize, buf as usize, n, flags as usize, 0, 0];
    |f| {
        sending(buf as usize, n);
        again(|| f(fd, buf, n, flags), || alias::map_again(buf as usize, n))
    }
}

/// Maps again a buffer and a socket address with its length.
fn heal_addressed(buf: usize, n: usize, addr: usize, len: usize) -> usize {
    alias::map_again(buf, n) + alias::map_again(addr, ADDR_BYTES) + alias::map_again(len, 4)
}

forward! {
    /// `recvfrom(2)`: see the module's documentation.
    fn recvfrom(fd: Fd, buf: Buf, n: usize, flags: c_int, addr: Addr, len: AddrLen) -> isize;
    type unsafe extern "C" fn(Fd, Buf, usize, c_int, Addr, AddrLen) -> isize;
    libc::SYS_recvfrom, [fd as usize, buf as usize, n, flags as usize, addr as usize, len as usize];
    |f| {
        let r = again(|| f(fd, buf, n, flags, addr, len), || heal_addressed(buf as usize, n, addr as usize, len as usize));
        moved(buf as usize, n, r)
    }
}

forward! {
    /// `__recvfrom_chk`, `recvfrom` of a program built with `_FORTIFY_SOURCE`.
    fn __recvfrom_chk(fd: Fd, buf: Buf, n: usize, size: usize, flags: c_int, addr: Addr, len: AddrLen) -> isize;
    type unsafe extern "C" fn(Fd, Buf, usize, usize, c_int, Addr, AddrLen) -> isize;
    libc::SYS_recvfrom, [fd as usize, buf as usize, n.min(size), flags as usize, addr as usize, len as usize];
    |f| {
        let heal = || heal_addressed(buf as usize, n, addr as usize, len as usize);
        moved(buf as usize, n, again(|| f(fd, buf, n, size, flags, addr, len), heal))
    }
}

forward! {
    /// `sendto(2)`: see the module's documentation.
    fn sendto(fd: Fd, buf: CBuf, n: usize, flags: c_int, addr: *const libc::sockaddr, len: libc::socklen_t) -> isize;
    type unsafe extern "C" fn(Fd, CBuf, usize, c_int, *const libc::sockaddr, libc::socklen_t) -> isize;
    libc::SYS_sendto, [fd as usize, buf as usize, n, flags as usize, addr as usize, len as usize];
    |f| {
        let heal = || alias::map_again(buf as usize, n) + alias::map_again(addr as usize, len as usize);
        sending(buf as usize, n);
        again(|| f(fd, buf, n, flags, addr, len), heal)
    }
}

forward! {
    /// `recvmsg(2)`: see the module's documentation.
    fn recvmsg(fd: Fd, msg: *mut libc::msghdr, flags: c_int) -> isize;
    type unsafe extern "C" fn(Fd, *mut libc::msghdr, c_int) -> isize;
    libc::SYS_recvmsg, [fd as usize, msg as usize, flags as usize, 0, 0, 0];
    |f| through_msg(msg as usize, Way::Into, || again(|| f(fd, msg, flags), || heal_msg(msg as usize)))
}

forward! {
    /// `sendmsg(2)`: see the module's documentation.
    fn sendmsg(fd: Fd, msg: *const libc::msghdr, flags: c_int) -> isize;
    type unsafe extern "C" fn(Fd, *const libc::msghdr, c_int) -> isize;
    libc::SYS_sendmsg, [fd as usize, msg as usize, flags as usize, 0, 0, 0];
    |f| through_msg(msg as usize, Way::OutOf, || again(|| f(fd, msg, flags), || heal_msg(msg as usize)))
}

/// Bytes of `n` `epoll_event`s (packed, 12 bytes each, on x86-64).
fn events_bytes(n: c_int) -> usize {
    n.max(0) as usize * core::mem::size_of::<libc::epoll_event>()
}

forward! {
    /// `epoll_wait(2)`: see the module's documentation (the ready events the kernel could not
    /// copy stay ready, so a wait made again returns them).
    fn epoll_wait(ep: Fd, events: *mut libc::epoll_event, max: c_int, timeout: c_int) -> c_int;
    type unsafe extern "C" fn(Fd, *mut libc::epoll_event, c_int, c_int) -> c_int;
    libc::SYS_epoll_pwait, [ep as usize, events as usize, max as usize, timeout as usize, 0, 8];
    |f| events_local(events, max, |e, m| again(|| f(ep, e, m, timeout), || alias::map_again(e as usize, events_bytes(m))))
}

forward! {
    /// `epoll_pwait(2)`: as `epoll_wait`.
    fn epoll_pwait(ep: Fd, events: *mut libc::epoll_event, max: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int;
    type unsafe extern "C" fn(Fd, *mut libc::epoll_event, c_int, c_int, *const libc::sigset_t) -> c_int;
    libc::SYS_epoll_pwait, [ep as usize, events as usize, max as usize, timeout as usize, mask as usize, 8];
    |f| events_local(events, max, |e, m| {
        again(|| f(ep, e, m, timeout, mask), || alias::map_again(e as usize, events_bytes(m)))
    })
}

// ---- waits through locals ----
//
// A wait writes its result when it ends (`epoll_wait` its events, `poll` each entry's
// `revents`), and a wait may last long: a result array in a heap object had time to be paged
// out, the copy failed with `EFAULT`, and the call made again waited again, the pageout taking
// the page once more (a Python server's `poll` of its listening socket, every 0.5 s, ended with
// `EFAULT` after 4 tries under a pageout every 5 ms). An array in the alias arena goes through a
// local on the stack instead, which the kernel always reaches: `poll`'s entries copied in
// and out, up to `LOCAL_POLLFDS` of them (more go as they are); `epoll_wait`'s events copied
// out, the wait asking for at most `LOCAL_EVENTS` (fewer than asked for is always allowed:
// the rest stay ready for the next wait).

/// `pollfd`s a `poll` takes through a local.
const LOCAL_POLLFDS: usize = 256;
/// Events an `epoll_wait` takes through a local.
const LOCAL_EVENTS: usize = 256;

/// `epoll_wait` (`call(events, max)`) through a local when `events` lies in the alias arena.
fn events_local(
    events: *mut libc::epoll_event,
    max: c_int,
    call: impl FnOnce(*mut libc::epoll_event, c_int) -> isize,
) -> isize {
    if max <= 0 || !through_local(events as usize) {
        return call(events, max);
    }
    let m = (max as usize).min(LOCAL_EVENTS);
    // Left unset: the kernel writes what it returns, and only that is read (zeroing 3 KiB on
    // every wait of an event loop would be work for nothing).
    let mut local = core::mem::MaybeUninit::<[libc::epoll_event; LOCAL_EVENTS]>::uninit();
    let at = local.as_mut_ptr() as *mut libc::epoll_event;
    let r = call(at, m as c_int);
    if r > 0 {
        // SAFETY: the program's array of `max` events, written in user mode (a page that lost
        // its entry is mapped again by the fault handler); the kernel filled `r` ≤ `m` of the
        // local's.
        unsafe { core::ptr::copy_nonoverlapping(at, events, r as usize) };
    }
    r
}

/// `poll` (`call(fds)`) through a local copy of the `n` entries when they lie in the alias
/// arena and are at most `LOCAL_POLLFDS`.
fn pollfds_local(fds: *mut libc::pollfd, n: libc::nfds_t, call: impl FnOnce(*mut libc::pollfd) -> isize) -> isize {
    let k = n as usize;
    if k == 0 || k > LOCAL_POLLFDS || !through_local(fds as usize) {
        return call(fds);
    }
    // Only the first `k` entries are set and used (see `events_local`).
    let mut local = core::mem::MaybeUninit::<[libc::pollfd; LOCAL_POLLFDS]>::uninit();
    let at = local.as_mut_ptr() as *mut libc::pollfd;
    // SAFETY: the program's `n` entries, read in user mode (see `events_local`), into the
    // local's first `k`.
    unsafe { core::ptr::copy_nonoverlapping(fds, at, k) };
    let r = call(at);
    if r >= 0 {
        for i in 0..k {
            // SAFETY: entry `i` of the local (set above) and of the program's array, written in
            // user mode; only what the kernel writes, the returned events.
            unsafe { core::ptr::addr_of_mut!((*fds.add(i)).revents).write((*at.add(i)).revents) };
        }
    }
    r
}

/// Bytes of `n` `pollfd`s.
fn pollfds_bytes(n: libc::nfds_t) -> usize {
    (n as usize).saturating_mul(core::mem::size_of::<libc::pollfd>())
}

forward! {
    /// `poll(2)`: see the module's documentation (a descriptor that was ready stays ready, so
    /// a poll made again returns it).
    fn poll(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int;
    type unsafe extern "C" fn(*mut libc::pollfd, libc::nfds_t, c_int) -> c_int;
    libc::SYS_poll, [fds as usize, n as usize, timeout as usize, 0, 0, 0];
    |f| pollfds_local(fds, n, |p| again(|| f(p, n, timeout), || alias::map_again(p as usize, pollfds_bytes(n))))
}

forward! {
    /// `__poll_chk`, `poll` of a program built with `_FORTIFY_SOURCE`.
    fn __poll_chk(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int, size: usize) -> c_int;
    type unsafe extern "C" fn(*mut libc::pollfd, libc::nfds_t, c_int, usize) -> c_int;
    libc::SYS_poll, [fds as usize, n as usize, timeout as usize, 0, 0, 0];
    |f| pollfds_local(fds, n, |p| {
        // The program's size still checked against `n`, as it would be.
        again(|| f(p, n, timeout, size), || alias::map_again(p as usize, pollfds_bytes(n)))
    })
}

forward! {
    /// `ppoll(2)`: as `poll`; the timeout and the mask too may lie in heap objects (ninja's
    /// mask does: "ninja: ppoll: Bad address" under pageout).
    fn ppoll(
        fds: *mut libc::pollfd,
        n: libc::nfds_t,
        timeout: *const libc::timespec,
        mask: *const libc::sigset_t
    ) -> c_int;
    type unsafe extern "C" fn(*mut libc::pollfd, libc::nfds_t, *const libc::timespec, *const libc::sigset_t) -> c_int;
    libc::SYS_ppoll, [fds as usize, n as usize, timeout as usize, mask as usize, 8, 0];
    |f| pollfds_local(fds, n, |p| again(
        || f(p, n, timeout, mask),
        || {
            alias::map_again(p as usize, pollfds_bytes(n))
                + alias::map_again(timeout as usize, core::mem::size_of::<libc::timespec>())
                + alias::map_again(mask as usize, 8)
        },
    ))
}

type FdSet = *mut libc::fd_set;

/// Bytes of an `fd_set` the kernel reads and writes for descriptors below `n` (whole longs).
fn fdset_bytes(n: c_int) -> usize {
    (n.max(0) as usize).div_ceil(64) * 8
}

/// Maps again the pages of `select`'s descriptor sets and its timeout of `t_bytes`.
fn heal_select(n: c_int, sets: [FdSet; 3], t: usize, t_bytes: usize) -> usize {
    let b = fdset_bytes(n);
    sets.iter().map(|&s| alias::map_again(s as usize, b)).sum::<usize>() + alias::map_again(t, t_bytes)
}

forward! {
    /// `select(2)`: see the module's documentation. The kernel reads the sets before it waits
    /// and writes the ready ones back after; when a write fails, the sets written before it
    /// hold ready descriptors, which are still ready, so a select made again returns them
    /// (CMake's runs of its compilers under pageout failed with EFAULT here).
    fn select(n: c_int, r: FdSet, w: FdSet, e: FdSet, timeout: *mut libc::timeval) -> c_int;
    type unsafe extern "C" fn(c_int, FdSet, FdSet, FdSet, *mut libc::timeval) -> c_int;
    libc::SYS_select, [n as usize, r as usize, w as usize, e as usize, timeout as usize, 0];
    |f| again(
        || f(n, r, w, e, timeout),
        || heal_select(n, [r, w, e], timeout as usize, core::mem::size_of::<libc::timeval>()),
    )
}

forward! {
    /// `pselect(2)`: as `select`, with the signal mask of the wait.
    fn pselect(
        n: c_int,
        r: FdSet,
        w: FdSet,
        e: FdSet,
        timeout: *const libc::timespec,
        mask: *const libc::sigset_t
    ) -> c_int;
    type unsafe extern "C" fn(c_int, FdSet, FdSet, FdSet, *const libc::timespec, *const libc::sigset_t) -> c_int;
    NO_SYSCALL, [0, 0, 0, 0, 0, 0];
    |f| again(
        || f(n, r, w, e, timeout, mask),
        || heal_select(n, [r, w, e], timeout as usize, core::mem::size_of::<libc::timespec>())
            + alias::map_again(mask as usize, 8),
    )
}

// ---- calls that take paths ----

/// Bytes of a path the kernel may read: `PATH_MAX`, the name's terminating NUL included. A
/// path lies on two pages at most, and only live objects' pages among them are mapped again.
const PATH_BYTES: usize = 4096;

type Path = *const core::ffi::c_char;
type StatBuf = *mut libc::stat;

/// Maps the pages of a path again: its bytes to its NUL (`string_reach`), at most
/// `PATH_BYTES`. Not a fixed length: a short path at the end of its object would run, for
/// `fault::syscall_buffer`, into whatever follows (a page object's guard page; a call that
/// failed for good over another argument was reported as "the buffer runs past the end").
fn heal_path(path: Path) -> usize {
    alias::map_again(path as usize, string_reach(path as usize).min(PATH_BYTES))
}

/// Defines the wrapper of a call that takes one path (and perhaps an output buffer of
/// `$out_len` bytes at `$out`): made again after `EFAULT` like the calls above. The call
/// fails with `EFAULT` when copying the path in, before it does anything, or when copying a
/// result out, after something that can be done again (`stat`, `readlink`).
macro_rules! path_call {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $aty:ty),*) -> $ret:ty;
     $nr:expr, [$($raw:expr),*]; $path:ident $(, $out:ident, $out_len:expr)?) => {
        call_again! {
            $(#[$doc])*
            fn $name($($arg: $aty),*) -> $ret;
            $nr, [$($raw),*];
            heal_path($path) $(+ alias::map_again($out as usize, $out_len))?
        }
    };
    // A call that takes a second path.
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $aty:ty),*) -> $ret:ty;
     $nr:expr, [$($raw:expr),*]; $path:ident, path $second:ident) => {
        call_again! {
            $(#[$doc])*
            fn $name($($arg: $aty),*) -> $ret;
            $nr, [$($raw),*];
            heal_path($path) + heal_path($second)
        }
    };
    // A call that returns the bytes it wrote into `$out`, held to its heap object's bounds
    // (`moved`).
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $aty:ty),*) -> $ret:ty;
     $nr:expr, [$($raw:expr),*]; $path:ident, moved $out:ident, $out_len:expr) => {
        call_again! {
            $(#[$doc])*
            fn $name($($arg: $aty),*) -> $ret;
            $nr, [$($raw),*];
            heal_path($path) + alias::map_again($out as usize, $out_len);
            moved $out, $out_len
        }
    };
}

/// Defines the wrapper of a call made again after `EFAULT` while `$heal` maps pages again
/// (`again`), with the system call `$nr` of up to six arguments `$raw` where the C library has
/// no such function.
macro_rules! call_again {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $aty:ty),*) -> $ret:ty;
     $nr:expr, [$($raw:expr),*]; $heal:expr $(; moved $out:ident, $out_len:expr)?) => {
        forward! {
            $(#[$doc])*
            fn $name($($arg: $aty),*) -> $ret;
            type unsafe extern "C" fn($($aty),*) -> $ret;
            $nr, path_args([$($raw as usize),*]);
            |f| call_again!(@moved again(|| f($($arg),*), || $heal) $(, $out, $out_len)?)
        }
    };
    // What the call returned, or (for a call that returns the bytes it wrote into `$out`)
    // that, held to the bounds of `$out`'s heap object (`moved`).
    (@moved $r:expr) => {
        $r
    };
    (@moved $r:expr, $out:ident, $out_len:expr) => {
        moved($out as usize, $out_len, $r)
    };
}

/// Defines the wrapper of a C library function that returns its error instead of setting
/// `errno` (`pthread_*`, `sigwait`), made again after `EFAULT` while `$heal` maps pages again
/// (`again_code`); `ENOSYS` when the C library has no such function.
macro_rules! code_again {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $aty:ty),*); $heal:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $aty),*) -> c_int {
            // SAFETY: the C library's function of this name has this type.
            let real: Option<unsafe extern "C" fn($($aty),*) -> c_int> = unsafe { real_fn!($name) };
            let Some(g) = real else { return libc::ENOSYS };
            // SAFETY: the caller's arguments, as the caller passed them.
            again_code(|| unsafe { g($($arg),*) }, || $heal)
        }
    };
}

/// The raw system call's six arguments from fewer.
fn path_args<const N: usize>(a: [usize; N]) -> [usize; 6] {
    let mut six = [0; 6];
    six[..N].copy_from_slice(&a);
    six
}

const STAT_BYTES: usize = core::mem::size_of::<libc::stat>();
const STATX_BYTES: usize = core::mem::size_of::<libc::statx>();

path_call! {
    /// `open(2)`: see the module's documentation. (`mode` is read only with `O_CREAT` or
    /// `O_TMPFILE`, as the C library's own does; on x86-64 a variadic argument arrives where a
    /// third one does.)
    fn open(path: Path, flags: c_int, mode: libc::c_uint) -> c_int;
    libc::SYS_open, [path, flags, mode]; path
}
path_call! {
    /// `open64`: as `open`.
    fn open64(path: Path, flags: c_int, mode: libc::c_uint) -> c_int;
    libc::SYS_open, [path, flags, mode]; path
}
path_call! {
    /// `openat(2)`: as `open`.
    fn openat(dir: c_int, path: Path, flags: c_int, mode: libc::c_uint) -> c_int;
    libc::SYS_openat, [dir, path, flags, mode]; path
}
path_call! {
    /// `openat64`: as `open`.
    fn openat64(dir: c_int, path: Path, flags: c_int, mode: libc::c_uint) -> c_int;
    libc::SYS_openat, [dir, path, flags, mode]; path
}
path_call! {
    /// `creat(2)`: as `open`.
    fn creat(path: Path, mode: libc::mode_t) -> c_int;
    libc::SYS_creat, [path, mode]; path
}
forward! {
    /// `chroot(2)`: the `/proc` directory is kept first (`sys::keep_proc`), so that the
    /// library still reads the process's files there under the new root (sweeps, the leak
    /// check, the statistics); the path is made again after `EFAULT` like the calls above.
    fn chroot(path: Path) -> c_int;
    type unsafe extern "C" fn(Path) -> c_int;
    libc::SYS_chroot, path_args([path as usize]);
    |f| ({
        sys::keep_proc();
        again(|| f(path), || heal_path(path))
    })
}
path_call! {
    /// `stat(2)`: see the module's documentation.
    fn stat(path: Path, buf: StatBuf) -> c_int;
    libc::SYS_stat, [path, buf]; path, buf, STAT_BYTES
}
path_call! {
    /// `stat64`: as `stat`.
    fn stat64(path: Path, buf: StatBuf) -> c_int;
    libc::SYS_stat, [path, buf]; path, buf, STAT_BYTES
}
path_call! {
    /// `lstat(2)`: as `stat`.
    fn lstat(path: Path, buf: StatBuf) -> c_int;
    libc::SYS_lstat, [path, buf]; path, buf, STAT_BYTES
}
path_call! {
    /// `lstat64`: as `stat`.
    fn lstat64(path: Path, buf: StatBuf) -> c_int;
    libc::SYS_lstat, [path, buf]; path, buf, STAT_BYTES
}
path_call! {
    /// `fstatat(2)`: as `stat`.
    fn fstatat(dir: c_int, path: Path, buf: StatBuf, flags: c_int) -> c_int;
    libc::SYS_newfstatat, [dir, path, buf, flags]; path, buf, STAT_BYTES
}
path_call! {
    /// `fstatat64`: as `stat`.
    fn fstatat64(dir: c_int, path: Path, buf: StatBuf, flags: c_int) -> c_int;
    libc::SYS_newfstatat, [dir, path, buf, flags]; path, buf, STAT_BYTES
}
path_call! {
    /// `statx(2)`: as `stat`.
    fn statx(dir: c_int, path: Path, flags: c_int, mask: libc::c_uint, buf: *mut libc::statx) -> c_int;
    libc::SYS_statx, [dir, path, flags, mask, buf]; path, buf, STATX_BYTES
}
path_call! {
    /// `access(2)`: see the module's documentation.
    fn access(path: Path, mode: c_int) -> c_int;
    libc::SYS_access, [path, mode]; path
}
path_call! {
    /// `faccessat(2)`: as `access`.
    fn faccessat(dir: c_int, path: Path, mode: c_int, flags: c_int) -> c_int;
    libc::SYS_faccessat2, [dir, path, mode, flags]; path
}
path_call! {
    /// `unlink(2)`: see the module's documentation.
    fn unlink(path: Path) -> c_int;
    libc::SYS_unlink, [path]; path
}
path_call! {
    /// `unlinkat(2)`: as `unlink`.
    fn unlinkat(dir: c_int, path: Path, flags: c_int) -> c_int;
    libc::SYS_unlinkat, [dir, path, flags]; path
}
path_call! {
    /// `mkdir(2)`: see the module's documentation.
    fn mkdir(path: Path, mode: libc::mode_t) -> c_int;
    libc::SYS_mkdir, [path, mode]; path
}
path_call! {
    /// `rmdir(2)`: see the module's documentation.
    fn rmdir(path: Path) -> c_int;
    libc::SYS_rmdir, [path]; path
}
path_call! {
    /// `chdir(2)`: see the module's documentation.
    fn chdir(path: Path) -> c_int;
    libc::SYS_chdir, [path]; path
}
path_call! {
    /// `readlink(2)`: see the module's documentation (the link's text may go to a heap
    /// buffer too).
    fn readlink(path: Path, buf: *mut core::ffi::c_char, n: usize) -> isize;
    libc::SYS_readlink, [path, buf, n]; path, moved buf, n
}
path_call! {
    /// `rename(2)`: see the module's documentation; `to` is the second path.
    fn rename(from: Path, to: Path) -> c_int;
    libc::SYS_rename, [from, to]; from, path to
}

path_call! {
    /// `renameat(2)`: as `rename`.
    fn renameat(from_dir: c_int, from: Path, to_dir: c_int, to: Path) -> c_int;
    libc::SYS_renameat, [from_dir, from, to_dir, to]; from, path to
}
path_call! {
    /// `renameat2(2)`: as `rename`.
    fn renameat2(from_dir: c_int, from: Path, to_dir: c_int, to: Path, flags: libc::c_uint) -> c_int;
    libc::SYS_renameat2, [from_dir, from, to_dir, to, flags]; from, path to
}
path_call! {
    /// `link(2)`: as `rename`.
    fn link(from: Path, to: Path) -> c_int;
    libc::SYS_link, [from, to]; from, path to
}
path_call! {
    /// `linkat(2)`: as `rename`.
    fn linkat(from_dir: c_int, from: Path, to_dir: c_int, to: Path, flags: c_int) -> c_int;
    libc::SYS_linkat, [from_dir, from, to_dir, to, flags]; from, path to
}
path_call! {
    /// `symlink(2)`: the link's text and its path, as `rename`'s two paths.
    fn symlink(target: Path, path: Path) -> c_int;
    libc::SYS_symlink, [target, path]; target, path path
}
path_call! {
    /// `symlinkat(2)`: as `symlink`.
    fn symlinkat(target: Path, dir: c_int, path: Path) -> c_int;
    libc::SYS_symlinkat, [target, dir, path]; target, path path
}
path_call! {
    /// `readlinkat(2)`: as `readlink`.
    fn readlinkat(dir: c_int, path: Path, buf: *mut core::ffi::c_char, n: usize) -> isize;
    libc::SYS_readlinkat, [dir, path, buf, n]; path, moved buf, n
}
path_call! {
    /// `mkdirat(2)`: as `mkdir`.
    fn mkdirat(dir: c_int, path: Path, mode: libc::mode_t) -> c_int;
    libc::SYS_mkdirat, [dir, path, mode]; path
}
path_call! {
    /// `mknod(2)`: see the module's documentation.
    fn mknod(path: Path, mode: libc::mode_t, dev: libc::dev_t) -> c_int;
    libc::SYS_mknod, [path, mode, dev]; path
}
path_call! {
    /// `mkfifo(3)`: a `mknod` of a FIFO.
    fn mkfifo(path: Path, mode: libc::mode_t) -> c_int;
    libc::SYS_mknod, [path, mode | libc::S_IFIFO, 0]; path
}
path_call! {
    /// `chmod(2)`: see the module's documentation.
    fn chmod(path: Path, mode: libc::mode_t) -> c_int;
    libc::SYS_chmod, [path, mode]; path
}
path_call! {
    /// `fchmodat(2)`: as `chmod`.
    fn fchmodat(dir: c_int, path: Path, mode: libc::mode_t, flags: c_int) -> c_int;
    libc::SYS_fchmodat, [dir, path, mode, flags]; path
}
path_call! {
    /// `chown(2)`: see the module's documentation.
    fn chown(path: Path, uid: libc::uid_t, gid: libc::gid_t) -> c_int;
    libc::SYS_chown, [path, uid, gid]; path
}
path_call! {
    /// `lchown(2)`: as `chown`.
    fn lchown(path: Path, uid: libc::uid_t, gid: libc::gid_t) -> c_int;
    libc::SYS_lchown, [path, uid, gid]; path
}
path_call! {
    /// `fchownat(2)`: as `chown`.
    fn fchownat(dir: c_int, path: Path, uid: libc::uid_t, gid: libc::gid_t, flags: c_int) -> c_int;
    libc::SYS_fchownat, [dir, path, uid, gid, flags]; path
}
path_call! {
    /// `truncate(2)`: see the module's documentation.
    fn truncate(path: Path, len: i64) -> c_int;
    libc::SYS_truncate, [path, len]; path
}
path_call! {
    /// `truncate64`: as `truncate`.
    fn truncate64(path: Path, len: i64) -> c_int;
    libc::SYS_truncate, [path, len]; path
}
path_call! {
    /// `utimensat(2)`: see the module's documentation (the path may be null: the file of
    /// `dir` itself); the times too may lie in a heap object.
    fn utimensat(dir: c_int, path: Path, times: *const libc::timespec, flags: c_int) -> c_int;
    libc::SYS_utimensat, [dir, path, times, flags]; path, times, TIMES_BYTES
}
path_call! {
    /// `statfs(2)`: as `stat`.
    fn statfs(path: Path, buf: *mut libc::statfs) -> c_int;
    libc::SYS_statfs, [path, buf]; path, buf, STATFS_BYTES
}
path_call! {
    /// `statfs64`: as `statfs`.
    fn statfs64(path: Path, buf: *mut libc::statfs) -> c_int;
    libc::SYS_statfs, [path, buf]; path, buf, STATFS_BYTES
}

// ---- the same calls under the names of programs built with `_FORTIFY_SOURCE`, or against
// a C library older than 2.33 (`__xstat` and the like, which `stat` was then) ----
//
// tar calls `__openat_2` (an `openat` whose flags are not known when it is compiled): under a
// steady pageout it failed with "Cannot open: Bad address".

path_call! {
    /// `__open_2`: `open` without a mode, checked.
    fn __open_2(path: Path, flags: c_int) -> c_int;
    libc::SYS_open, [path, flags]; path
}
path_call! {
    /// `__open64_2`: as `__open_2`.
    fn __open64_2(path: Path, flags: c_int) -> c_int;
    libc::SYS_open, [path, flags]; path
}
path_call! {
    /// `__openat_2`: `openat` without a mode, checked.
    fn __openat_2(dir: c_int, path: Path, flags: c_int) -> c_int;
    libc::SYS_openat, [dir, path, flags]; path
}
path_call! {
    /// `__openat64_2`: as `__openat_2`.
    fn __openat64_2(dir: c_int, path: Path, flags: c_int) -> c_int;
    libc::SYS_openat, [dir, path, flags]; path
}
path_call! {
    /// `__xstat`: `stat` with the structure's version first.
    fn __xstat(ver: c_int, path: Path, buf: StatBuf) -> c_int;
    libc::SYS_stat, [path, buf]; path, buf, STAT_BYTES
}
path_call! {
    /// `__xstat64`: as `__xstat`.
    fn __xstat64(ver: c_int, path: Path, buf: StatBuf) -> c_int;
    libc::SYS_stat, [path, buf]; path, buf, STAT_BYTES
}
path_call! {
    /// `__lxstat`: `lstat` with the structure's version first.
    fn __lxstat(ver: c_int, path: Path, buf: StatBuf) -> c_int;
    libc::SYS_lstat, [path, buf]; path, buf, STAT_BYTES
}
path_call! {
    /// `__lxstat64`: as `__lxstat`.
    fn __lxstat64(ver: c_int, path: Path, buf: StatBuf) -> c_int;
    libc::SYS_lstat, [path, buf]; path, buf, STAT_BYTES
}
path_call! {
    /// `__fxstatat`: `fstatat` with the structure's version first.
    fn __fxstatat(ver: c_int, dir: c_int, path: Path, buf: StatBuf, flags: c_int) -> c_int;
    libc::SYS_newfstatat, [dir, path, buf, flags]; path, buf, STAT_BYTES
}
path_call! {
    /// `__fxstatat64`: as `__fxstatat`.
    fn __fxstatat64(ver: c_int, dir: c_int, path: Path, buf: StatBuf, flags: c_int) -> c_int;
    libc::SYS_newfstatat, [dir, path, buf, flags]; path, buf, STAT_BYTES
}
forward! {
    /// `__fxstat`: `fstat` with the structure's version first.
    fn __fxstat(ver: c_int, fd: Fd, buf: StatBuf) -> c_int;
    type unsafe extern "C" fn(c_int, Fd, StatBuf) -> c_int;
    libc::SYS_fstat, [fd as usize, buf as usize, 0, 0, 0, 0];
    |f| unless_own(fd, || again(|| f(ver, fd, buf), || alias::map_again(buf as usize, STAT_BYTES)))
}
forward! {
    /// `__fxstat64`: as `__fxstat`.
    fn __fxstat64(ver: c_int, fd: Fd, buf: StatBuf) -> c_int;
    type unsafe extern "C" fn(c_int, Fd, StatBuf) -> c_int;
    libc::SYS_fstat, [fd as usize, buf as usize, 0, 0, 0, 0];
    |f| unless_own(fd, || again(|| f(ver, fd, buf), || alias::map_again(buf as usize, STAT_BYTES)))
}
path_call! {
    /// `__readlink_chk`: `readlink`, checked.
    fn __readlink_chk(path: Path, buf: *mut core::ffi::c_char, n: usize, room: usize) -> isize;
    libc::SYS_readlink, [path, buf, n]; path, moved buf, n
}
path_call! {
    /// `__readlinkat_chk`: `readlinkat`, checked.
    fn __readlinkat_chk(dir: c_int, path: Path, buf: *mut core::ffi::c_char, n: usize, room: usize) -> isize;
    libc::SYS_readlinkat, [dir, path, buf, n]; path, moved buf, n
}

const TIMES_BYTES: usize = 2 * core::mem::size_of::<libc::timespec>();
const STATFS_BYTES: usize = core::mem::size_of::<libc::statfs>();

/// A C library function with no system call of its own: where the C library has none, the
/// call fails with `ENOSYS`.
const NO_SYSCALL: i64 = -1;

path_call! {
    /// `statvfs(3)`: the C library's `statfs` into a buffer of its own, so only the path is
    /// the kernel's to read.
    fn statvfs(path: Path, buf: *mut libc::statvfs) -> c_int;
    NO_SYSCALL, [path, buf]; path
}
path_call! {
    /// `statvfs64`: as `statvfs`.
    fn statvfs64(path: Path, buf: *mut libc::statvfs) -> c_int;
    NO_SYSCALL, [path, buf]; path
}
path_call! {
    /// `inotify_add_watch(2)`: the path (a watcher's paths are often kept in heap objects).
    fn inotify_add_watch(fd: Fd, path: Path, mask: u32) -> c_int;
    libc::SYS_inotify_add_watch, [fd, path, mask]; path
}

/// `realpath(3)`: the C library resolves the path in its own memory and copies it out into
/// `resolved`, which its contract wants of `PATH_MAX` bytes; into a smaller heap object the
/// copy of a long path runs past its end, silently. The path and its NUL are held to the
/// object's bounds when the call returns (as `moved` does; the report names `realpath`).
/// Given no buffer, the C library allocates one of the path's size.
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn realpath(
    path: *const core::ffi::c_char,
    resolved: *mut core::ffi::c_char,
) -> *mut core::ffi::c_char {
    type Realpath = unsafe extern "C" fn(*const core::ffi::c_char, *mut core::ffi::c_char) -> *mut core::ffi::c_char;
    // SAFETY: the C library's function of this name has this type.
    let real: Option<Realpath> = unsafe { real_fn!(realpath) };
    // SAFETY: the caller's arguments, as the caller passed them.
    resolved_within(real.map(|f| move || unsafe { f(path, resolved) }), resolved, "realpath")
}

/// `__realpath_chk`: `realpath` of a program built with `_FORTIFY_SOURCE` where the compiler
/// knows the buffer's size (`len`). The C library's own rule first (a buffer the compiler
/// knows to be smaller than `PATH_MAX` ends the program with its message), then `realpath`'s
/// check of the buffer's object.
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn __realpath_chk(
    path: *const core::ffi::c_char,
    resolved: *mut core::ffi::c_char,
    len: usize,
) -> *mut core::ffi::c_char {
    type RealpathChk =
        unsafe extern "C" fn(*const core::ffi::c_char, *mut core::ffi::c_char, usize) -> *mut core::ffi::c_char;
    // SAFETY: the C library's function of this name has this type.
    let real: Option<RealpathChk> = unsafe { real_fn!(__realpath_chk) };
    // SAFETY: the caller's arguments, as the caller passed them.
    resolved_within(real.map(|f| move || unsafe { f(path, resolved, len) }), resolved, "__realpath_chk")
}

/// Makes a `realpath` call (`None`: the C library has no such function, `ENOSYS`) and holds
/// the path it wrote into `resolved` to the bounds of the object there.
fn resolved_within(
    call: Option<impl FnOnce() -> *mut core::ffi::c_char>,
    resolved: *mut core::ffi::c_char,
    op: &'static str,
) -> *mut core::ffi::c_char {
    let Some(call) = call else {
        sys::set_errno(libc::ENOSYS);
        return core::ptr::null_mut();
    };
    let r = call();
    if !r.is_null() && !resolved.is_null() {
        // SAFETY: the path the call just wrote into the caller's buffer.
        let len = unsafe { libc::strlen(resolved) };
        bounded(resolved as usize, len + 1, Way::Into, op);
    }
    r
}

/// `getcwd(3)`: the kernel copies the path out into the caller's buffer; after `EFAULT` its
/// pages are mapped again and the call made again. Given no buffer, the C library allocates
/// one and the kernel writes it at once: a fresh object, whose pages are mapped.
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn getcwd(buf: *mut core::ffi::c_char, size: usize) -> *mut core::ffi::c_char {
    type Getcwd = unsafe extern "C" fn(*mut core::ffi::c_char, usize) -> *mut core::ffi::c_char;
    // SAFETY: the C library's function of this name has this type.
    let real: Option<Getcwd> = unsafe { real_fn!(getcwd) };
    // The result as `again` takes it: the path's address (a user-space one, below 2^47), or
    // -1 for null.
    let call = || -> isize {
        let p = match real {
            // SAFETY: the caller's arguments, as the caller passed them.
            Some(g) => unsafe { g(buf, size) as usize },
            // The system call returns the path's length, the path in `buf`.
            None if raw(libc::SYS_getcwd, [buf as usize, size, 0, 0, 0, 0]) >= 0 => buf as usize,
            None => 0,
        };
        if p == 0 {
            -1
        } else {
            p as isize
        }
    };
    let heal = || if buf.is_null() { 0 } else { alias::map_again(buf as usize, size) };
    match again(call, heal) {
        r if r < 0 => core::ptr::null_mut(),
        r => {
            if !buf.is_null() {
                // The path and its NUL, held to the buffer's heap object (`moved`).
                // SAFETY: the path the call just wrote into the caller's buffer.
                let len = unsafe { libc::strlen(buf) };
                moved(buf as usize, size, len as isize + 1);
            }
            r as *mut core::ffi::c_char
        }
    }
}

// ---- extended attributes ----
//
// A name (a string, read as a path is) and a value or list buffer, besides the path: each
// fails with `EFAULT` before it changes anything, or after reading, when copying out.

type Name = *const core::ffi::c_char;

macro_rules! xattr_get {
    ($(#[$doc:meta])* fn $name:ident($file:ident: $fty:ty); $nr:expr; $($path:ident)?) => {
        call_again! {
            $(#[$doc])*
            fn $name($file: $fty, name: Name, value: Buf, size: usize) -> isize;
            $nr, [$file, name, value, size];
            $(heal_path($path) +)? heal_path(name) + alias::map_again(value as usize, size);
            moved value, size
        }
    };
}
xattr_get! {
    /// `getxattr(2)`: see the group's comment.
    fn getxattr(path: Path); libc::SYS_getxattr; path
}
xattr_get! {
    /// `lgetxattr(2)`: as `getxattr`.
    fn lgetxattr(path: Path); libc::SYS_lgetxattr; path
}
xattr_get! {
    /// `fgetxattr(2)`: as `getxattr`.
    fn fgetxattr(fd: Fd); libc::SYS_fgetxattr;
}

macro_rules! xattr_set {
    ($(#[$doc:meta])* fn $name:ident($file:ident: $fty:ty); $nr:expr; $($path:ident)?) => {
        call_again! {
            $(#[$doc])*
            fn $name($file: $fty, name: Name, value: CBuf, size: usize, flags: c_int) -> c_int;
            $nr, [$file, name, value, size, flags];
            $(heal_path($path) +)? heal_path(name) + alias::map_again(value as usize, size)
        }
    };
}
xattr_set! {
    /// `setxattr(2)`: see the group's comment.
    fn setxattr(path: Path); libc::SYS_setxattr; path
}
xattr_set! {
    /// `lsetxattr(2)`: as `setxattr`.
    fn lsetxattr(path: Path); libc::SYS_lsetxattr; path
}
xattr_set! {
    /// `fsetxattr(2)`: as `setxattr`.
    fn fsetxattr(fd: Fd); libc::SYS_fsetxattr;
}

macro_rules! xattr_list {
    ($(#[$doc:meta])* fn $name:ident($file:ident: $fty:ty); $nr:expr; $($path:ident)?) => {
        call_again! {
            $(#[$doc])*
            fn $name($file: $fty, list: *mut core::ffi::c_char, size: usize) -> isize;
            $nr, [$file, list, size];
            $(heal_path($path) +)? alias::map_again(list as usize, size);
            moved list, size
        }
    };
}
xattr_list! {
    /// `listxattr(2)`: see the group's comment.
    fn listxattr(path: Path); libc::SYS_listxattr; path
}
xattr_list! {
    /// `llistxattr(2)`: as `listxattr`.
    fn llistxattr(path: Path); libc::SYS_llistxattr; path
}
xattr_list! {
    /// `flistxattr(2)`: as `listxattr`.
    fn flistxattr(fd: Fd); libc::SYS_flistxattr;
}

macro_rules! xattr_remove {
    ($(#[$doc:meta])* fn $name:ident($file:ident: $fty:ty); $nr:expr; $($path:ident)?) => {
        call_again! {
            $(#[$doc])*
            fn $name($file: $fty, name: Name) -> c_int;
            $nr, [$file, name];
            $(heal_path($path) +)? heal_path(name)
        }
    };
}
xattr_remove! {
    /// `removexattr(2)`: see the group's comment.
    fn removexattr(path: Path); libc::SYS_removexattr; path
}
xattr_remove! {
    /// `lremovexattr(2)`: as `removexattr`.
    fn lremovexattr(path: Path); libc::SYS_lremovexattr; path
}
xattr_remove! {
    /// `fremovexattr(2)`: as `removexattr`.
    fn fremovexattr(fd: Fd); libc::SYS_fremovexattr;
}

// ---- calls that fill a buffer without a path ----

/// `call`, on the descriptor `fd`, unless `fd` is one of the library's own, which looks closed
/// (`EBADF`) to the calls that read a descriptor's attributes, as it does to `fcntl`
/// (`api::fcntl`): programs list their open descriptors by probing every number with one or
/// the other (CPython's `subprocess` tests with `fstat`, daemons closing what they did not
/// open), and found the pool's memory file and the userfaultfd among theirs.
fn unless_own(fd: Fd, call: impl FnOnce() -> isize) -> isize {
    if crate::is_ready() && crate::api::own_descriptor(fd) {
        sys::set_errno(libc::EBADF);
        return -1;
    }
    call()
}

forward! {
    /// `fstat(2)`: the `stat` buffer may lie in a heap object (a file's cached attributes);
    /// the library's own descriptors look closed (`unless_own`).
    fn fstat(fd: Fd, buf: StatBuf) -> c_int;
    type unsafe extern "C" fn(Fd, StatBuf) -> c_int;
    libc::SYS_fstat, [fd as usize, buf as usize, 0, 0, 0, 0];
    |f| unless_own(fd, || again(|| f(fd, buf), || alias::map_again(buf as usize, STAT_BYTES)))
}

forward! {
    /// `fstat64`: as `fstat`.
    fn fstat64(fd: Fd, buf: StatBuf) -> c_int;
    type unsafe extern "C" fn(Fd, StatBuf) -> c_int;
    libc::SYS_fstat, [fd as usize, buf as usize, 0, 0, 0, 0];
    |f| unless_own(fd, || again(|| f(fd, buf), || alias::map_again(buf as usize, STAT_BYTES)))
}

forward! {
    /// `getrandom(2)`: fails with `EFAULT` before it fills anything, when it fails so.
    fn getrandom(buf: Buf, n: usize, flags: libc::c_uint) -> isize;
    type unsafe extern "C" fn(Buf, usize, libc::c_uint) -> isize;
    libc::SYS_getrandom, [buf as usize, n, flags as usize, 0, 0, 0];
    |f| moved(buf as usize, n, again(|| f(buf, n, flags), || alias::map_again(buf as usize, n)))
}

call_again! {
    /// `futimens(3)`: its two times are read before the file is changed.
    fn futimens(fd: Fd, times: *const libc::timespec) -> c_int;
    libc::SYS_utimensat, [fd, 0, times, 0];
    alias::map_again(times as usize, 2 * core::mem::size_of::<libc::timespec>())
}

forward! {
    /// `getdents64(2)`: the entries that fit before a page that lost its entry are returned.
    /// The call fails with `EFAULT` when the first does not fit, and also when its last write
    /// fails (the last entry's `d_off`, written after the entries were taken): a page taken
    /// while the kernel fills the buffer can leave the directory's position past entries it
    /// never returned. So for a buffer in the heap the position is read first, and set back
    /// before the call is made again (else a listing lost its first entries: CPython found no
    /// module `json` under a steady pageout).
    fn getdents64(fd: Fd, buf: Buf, n: usize) -> isize;
    type unsafe extern "C" fn(Fd, Buf, usize) -> isize;
    libc::SYS_getdents64, [fd as usize, buf as usize, n, 0, 0, 0];
    |f| {
        let at = if alias::in_arena(buf as usize) { directory_position(fd) } else { -1 };
        let heal = || {
            let live = alias::map_again(buf as usize, n);
            if live > 0 && at >= 0 && directory_position(fd) != at {
                raw(libc::SYS_lseek, [fd as usize, at as usize, libc::SEEK_SET as usize, 0, 0, 0]);
            }
            live
        };
        // The last tries with the buffer's pages locked (see `locked`).
        let mut calls = 0;
        let call = || {
            calls += 1;
            if calls > 2 && at >= 0 {
                locked(buf as usize, || f(fd, buf, n))
            } else {
                f(fd, buf, n)
            }
        };
        moved(buf as usize, n, again(call, heal))
    }
}

/// The position of the directory open as `fd` (`lseek`), or -1; `errno` is left alone.
fn directory_position(fd: Fd) -> isize {
    let saved = sys::errno();
    let at = raw(libc::SYS_lseek, [fd as usize, 0, libc::SEEK_CUR as usize, 0, 0, 0]);
    sys::set_errno(saved);
    at
}

/// Bytes of one `mmsghdr`: a `msghdr` and the count received.
const MMSGHDR_BYTES: usize = core::mem::size_of::<libc::mmsghdr>();

/// Maps again the pages of an array of `n` `mmsghdr`s and of everything they name.
fn heal_mmsg(v: usize, n: libc::c_uint) -> usize {
    let n = (n as usize).min(MAX_IOV);
    let mut mapped = alias::map_again(v, n * MMSGHDR_BYTES);
    for i in 0..n {
        mapped += heal_msg(v + i * MMSGHDR_BYTES);
    }
    mapped
}

forward! {
    /// `recvmmsg(2)`: fails with `EFAULT` only when the first message could not be copied
    /// (a datagram whose copy failed is dropped by the kernel, as for `recvmsg`).
    fn recvmmsg(fd: Fd, v: *mut libc::mmsghdr, n: libc::c_uint, flags: c_int, timeout: *mut libc::timespec) -> c_int;
    type unsafe extern "C" fn(Fd, *mut libc::mmsghdr, libc::c_uint, c_int, *mut libc::timespec) -> c_int;
    libc::SYS_recvmmsg, [fd as usize, v as usize, n as usize, flags as usize, timeout as usize, 0];
    |f| {
        let r = again(|| f(fd, v, n, flags, timeout), || heal_mmsg(v as usize, n));
        if r > 0 {
            bounds_mmsg(v as usize, r as usize, Way::Into);
        }
        r
    }
}

forward! {
    /// `sendmmsg(2)`: as `recvmmsg`.
    fn sendmmsg(fd: Fd, v: *mut libc::mmsghdr, n: libc::c_uint, flags: c_int) -> c_int;
    type unsafe extern "C" fn(Fd, *mut libc::mmsghdr, libc::c_uint, c_int) -> c_int;
    libc::SYS_sendmmsg, [fd as usize, v as usize, n as usize, flags as usize, 0, 0];
    |f| {
        bounds_mmsg(v as usize, n as usize, Way::OutOf);
        again(|| f(fd, v, n, flags), || heal_mmsg(v as usize, n))
    }
}

/// The bounds of the buffers of `n` `mmsghdr`s (`sending`, `moved`): every buffer in full
/// before `sendmmsg`; after `recvmmsg`, the `msg_len` bytes each of the `n` messages received.
fn bounds_mmsg(v: usize, n: usize, way: Way) {
    for i in 0..n.min(MAX_IOV) {
        let m = v + i * MMSGHDR_BYTES;
        // `msg_iov` and `msg_iovlen` are the msghdr's words 2 and 3; `msg_len` follows it.
        let (Some(iov), Some(cnt), Some(len)) = (word(m, 2), word(m, 3), word(m, 7)) else { break };
        let limit = if way == Way::OutOf { usize::MAX } else { len as u32 as usize };
        bounds_iov(iov, cnt, limit, way);
    }
}

// ---- exec ----

/// Most entries of an `argv` or `envp` array looked at.
const MAX_STRINGS: usize = 1 << 16;

/// Maps again the pages of a NULL-terminated array of strings (`argv`, `envp`) and of the
/// strings (`alias::map_again`, which counts them whoever mapped them). Both are read with
/// `sys::probe_word`, which fails on a bad pointer instead of crashing.
fn heal_strings(v: usize) -> usize {
    let mut mapped = 0;
    let n = each_string(v, |s| mapped += alias::map_again(s, string_reach(s)));
    mapped + alias::map_again(v, (n + 1) * 8)
}

/// Calls `f` with each string of the NULL-terminated array at `v`, read with
/// `sys::probe_word` (a bad pointer ends the array instead of crashing); returns how many.
fn each_string(v: usize, mut f: impl FnMut(usize)) -> usize {
    let mut n = 0;
    while n < MAX_STRINGS {
        let p = sys::probe_word(v.wrapping_add(n * 8));
        if p.status == sys::PROBE_FAILED || p.value == 0 {
            break;
        }
        f(p.value);
        n += 1;
    }
    n
}

/// Bytes of the NUL-terminated string at `s`, its NUL included, as far as it can be read.
fn string_bytes(s: usize) -> usize {
    string_extent(s).0.max(1)
}

/// Bytes of the NUL-terminated string at `s` that the kernel reads: its bytes and its NUL, or,
/// when it cannot be read that far, those before the first byte that cannot be read and that
/// byte.
fn string_reach(s: usize) -> usize {
    match string_extent(s) {
        (n, true) => n,
        (n, false) => n + 1,
    }
}

/// The NUL-terminated string at `s`: its bytes with the NUL and true, or, when it cannot be
/// read that far, the bytes before the first word that cannot be read and false.
fn string_extent(s: usize) -> (usize, bool) {
    let mut w = s & !7;
    loop {
        let p = sys::probe_word(w);
        if p.status == sys::PROBE_FAILED {
            return (w.saturating_sub(s), false);
        }
        // The bytes of this word from the string's start on (little-endian).
        let skip = s.saturating_sub(w).min(8);
        if let Some(b) = (skip..8).find(|b| (p.value >> (8 * b)) & 0xff == 0) {
            return (w + b + 1 - s, true);
        }
        w += 8;
    }
}

extern "C" {
    static environ: *const *const core::ffi::c_char;
}

type Strings = *const *const core::ffi::c_char;

/// The process's environment, as `execv` and `execvp` pass it.
fn environment() -> usize {
    // SAFETY: reading the C library's `environ` pointer.
    unsafe { environ as usize }
}

forward! {
    /// `execve(2)`: see the module's documentation. It fails with `EFAULT` before the program
    /// is replaced, so making it again repeats nothing.
    fn execve(path: Path, argv: Strings, envp: Strings) -> c_int;
    type unsafe extern "C" fn(Path, Strings, Strings) -> c_int;
    libc::SYS_execve, [path as usize, argv as usize, envp as usize, 0, 0, 0];
    |f| again(|| f(path, argv, envp), || heal_path(path) + heal_strings(argv as usize) + heal_strings(envp as usize))
}

forward! {
    /// `execv`: as `execve`, with the process's environment.
    fn execv(path: Path, argv: Strings) -> c_int;
    type unsafe extern "C" fn(Path, Strings) -> c_int;
    libc::SYS_execve, [path as usize, argv as usize, environment(), 0, 0, 0];
    |f| again(|| f(path, argv), || heal_path(path) + heal_strings(argv as usize) + heal_strings(environment()))
}

forward! {
    /// `execvp`: as `execve`, with the process's environment, the program looked for in
    /// `PATH` (by the C library; without its function, the system call takes `file` as it is).
    fn execvp(file: Path, argv: Strings) -> c_int;
    type unsafe extern "C" fn(Path, Strings) -> c_int;
    libc::SYS_execve, [file as usize, argv as usize, environment(), 0, 0, 0];
    |f| again(|| f(file, argv), || heal_path(file) + heal_strings(argv as usize) + heal_strings(environment()))
}

forward! {
    /// `execvpe`: as `execvp`, with the environment given.
    fn execvpe(file: Path, argv: Strings, envp: Strings) -> c_int;
    type unsafe extern "C" fn(Path, Strings, Strings) -> c_int;
    libc::SYS_execve, [file as usize, argv as usize, envp as usize, 0, 0, 0];
    |f| again(|| f(file, argv, envp), || heal_path(file) + heal_strings(argv as usize) + heal_strings(envp as usize))
}

/// Defines `execl`, `execlp` or `execle`, which take their arguments as variadic ones, as a
/// shim that reads them (`touch_execl`: the path, every argument up to the NULL, and `envp`
/// or the process's environment) and then jumps to the C library's own with the registers and
/// the stack as they came (`rax` too: a variadic call's count of vector registers). The C
/// library's own makes `execve` itself, where a wrapper of it never sees a failure, so what
/// the kernel will read is read here first, where a fault of this thread's own is mended (a
/// page taken again in between is still lost). On entry the stack is 8 bytes off 16-byte
/// alignment; seven pushes bring it on it for the call.
macro_rules! exec_list {
    ($name:ident, $real:ident, $with_env:expr) => {
        static $real: AtomicUsize = AtomicUsize::new(0);

        /// `execl` and the like: see `exec_list`.
        ///
        /// # Safety
        /// The C contract of the function.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name() {
            core::arch::naked_asm!(
                "push rax",
                "push rdi",
                "push rsi",
                "push rdx",
                "push rcx",
                "push r8",
                "push r9",
                "mov rdi, rsp",
                "lea rsi, [rsp + 64]",
                "mov edx, {with_env}",
                "lea rcx, [rip + {real}]",
                "call {touch}",
                "pop r9",
                "pop r8",
                "pop rcx",
                "pop rdx",
                "pop rsi",
                "pop rdi",
                "pop rax",
                "jmp qword ptr [rip + {real}]",
                with_env = const $with_env as u32,
                real = sym $real,
                touch = sym touch_execl,
            )
        }
    };
}
exec_list!(execl, REAL_EXECL, 0);
exec_list!(execlp, REAL_EXECLP, 0);
exec_list!(execle, REAL_EXECLE, 1);

/// What `execl`, `execlp` (`with_env` 0) and `execle` (1) will hand the kernel, read:
/// `regs` holds the registers the shim pushed (`r9`, `r8`, `rcx`, `rdx`, `rsi`, `rdi`),
/// `stack` the arguments past the sixth. Looks the C library's function up into `real` when
/// the library's constructor has not (named by which `real` it is).
extern "C" fn touch_execl(regs: *const usize, stack: *const usize, with_env: u32, real: &AtomicUsize) {
    if real.load(core::sync::atomic::Ordering::Relaxed) == 0 {
        let name = if core::ptr::eq(real, &REAL_EXECL) {
            c"execl"
        } else if core::ptr::eq(real, &REAL_EXECLP) {
            c"execlp"
        } else {
            c"execle"
        };
        if sys::next_symbol(real, name).is_none() {
            // No such function: the jump would go nowhere.
            crate::report::say(format_args!("the C library has no {}", name.to_str().unwrap_or("exec")));
            sys::die();
        }
    }
    if !crate::is_ready() {
        return;
    }
    // The n-th argument, the path being the 0th: six in registers, the rest on the stack.
    let arg = |n: usize| -> Option<usize> {
        let at = if n < 6 { regs as usize + (5 - n) * 8 } else { stack as usize + (n - 6) * 8 };
        let p = sys::probe_word(at);
        (p.status != sys::PROBE_FAILED).then_some(p.value)
    };
    let Some(path) = arg(0) else { return };
    string_bytes(path);
    let mut n = 1;
    while n <= MAX_STRINGS {
        match arg(n) {
            Some(0) => break,
            Some(s) => {
                string_bytes(s);
            }
            None => return,
        }
        n += 1;
    }
    match (with_env, arg(n + 1)) {
        (1, Some(envp)) => touch_strings(envp),
        _ => touch_strings(environment()),
    }
}

/// Looks the C library's `execl`, `execlp` and `execle` up when the library is loaded (a
/// first call may come from a child of `fork`, where `dlsym` should not run).
#[used]
#[link_section = ".init_array"]
static RESOLVE_EXEC_LIST: extern "C" fn() = {
    extern "C" fn resolve() {
        let _ = sys::next_symbol(&REAL_EXECL, c"execl");
        let _ = sys::next_symbol(&REAL_EXECLP, c"execlp");
        let _ = sys::next_symbol(&REAL_EXECLE, c"execle");
    }
    resolve
};

// ---- locale data, directory streams ----

/// Defines an exported function that calls the C library's own of the same name with
/// `$views` added to the thread's views word (`tls::add_views`) during the call: 1 for the
/// thread's allocations of locale data tables to go to views of their own
/// (`heap::needs_view`), `tls::PLAIN_DIR` for the directory stream it opens to stay an
/// ordinary object (`streams::opens_directory`).
macro_rules! with_views {
    ($views:expr; $(#[$doc:meta])* fn $name:ident($($arg:ident: $aty:ty),*) -> $ret:ty; $fail:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $aty),*) -> $ret {
            // SAFETY: the C library's function of this name has this type.
            let real: Option<unsafe extern "C" fn($($aty),*) -> $ret> = unsafe { real_fn!($name) };
            let Some(real) = real else { return $fail };
            crate::tls::add_views($views);
            // SAFETY: the caller's arguments, as the caller passed them.
            let r = unsafe { real($($arg),*) };
            crate::tls::add_views(-$views);
            r
        }
    };
}

with_views! { 1;
    /// `setlocale`: the C library's own, its data tables in views of their own. A new thread
    /// reads the global locale's `LC_CTYPE` data with every signal blocked (`__ctype_init`),
    /// and once the program has called `setlocale` (Python does at start) that data is on the
    /// heap: see `heap::view_malloc` for why such objects get views.
    fn setlocale(category: c_int, name: *const core::ffi::c_char) -> *mut core::ffi::c_char;
    core::ptr::null_mut()
}

with_views! { 1;
    /// `newlocale`: as `setlocale` (a locale made with it may become a thread's own).
    fn newlocale(mask: c_int, name: *const core::ffi::c_char, base: libc::locale_t) -> libc::locale_t;
    core::ptr::null_mut()
}

/// `opendir`: the C library's own, and the directory stream an ordinary object: the program
/// reads it with `readdir`, whose wrapper mends it (`readdir_call`). The C library's own
/// directory streams, which it reads with its own `readdir` inside `scandir`, `glob`, `nftw`,
/// `ftw` and `fts_read`, are views (`streams::opens_directory`). The C library opens the path
/// with a system call of its own: made again after `EFAULT` with the path's pages mapped
/// (`open_stream`; CPython's `os.listdir` at a child's start-up failed so under pageout).
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn opendir(path: Path) -> Dir {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(Path) -> Dir> = unsafe { real_fn!(opendir) };
    let Some(real) = real else { return core::ptr::null_mut() };
    crate::tls::add_views(crate::tls::PLAIN_DIR);
    // SAFETY: the caller's path, as the caller passed it.
    let r = open_stream(path, || unsafe { real(path) } as *mut u8);
    crate::tls::add_views(-crate::tls::PLAIN_DIR);
    r as Dir
}

with_views! { crate::tls::PLAIN_DIR;
    /// `fdopendir`: as `opendir`.
    fn fdopendir(fd: Fd) -> Dir;
    core::ptr::null_mut()
}

// ---- streams ----

/// glibc's `FILE` (`struct _IO_FILE`, public in `<stdio.h>`): `_flags` is its first word,
/// and the stream's buffer lies between `_IO_buf_base` and `_IO_buf_end`, its 8th and 9th.
const FILE_BUF_BASE: usize = 7;
const FILE_BUF_END: usize = 8;
/// The stream's error indicator among its `_flags` (`_IO_ERR_SEEN`).
const FILE_ERR_SEEN: u32 = 0x20;

type Stream = *mut libc::FILE;

extern "C" {
    fn flockfile(f: Stream);
    fn funlockfile(f: Stream);
}

/// Whether the stream's error indicator is set.
///
/// # Safety
/// `f` must be a stream.
unsafe fn stream_error(f: Stream) -> bool {
    // SAFETY: the caller's stream, whose first word is `_flags`; read as the stdio
    // functions read it.
    unsafe { (f as *const u32).read_volatile() & FILE_ERR_SEEN != 0 }
}

/// A `fread` or `fwrite` of `n` items of `size` bytes at `buf`, made as one of `size * n`
/// single bytes (the same call to the C library, which returns the bytes moved):
/// `call(at, item_size, items)` moves from `at` on. The stream's buffer is a view
/// (`heap::needs_view`), but a request at least as big as it goes straight between the file
/// and the caller's buffer, by the C library's own system calls: when one fails with `EFAULT`
/// on a live object that lost its page-table entry, the stream's error indicator is set and
/// the count is short. Then the pages are mapped again, the indicator cleared as it was
/// before, and the rest moved by further calls.
///
/// The caller's buffer is held to the bounds of its heap object as the system calls' buffers
/// are (`sending`, `moved`): `fwrite` before the call on the whole request, `fread` after it on
/// the bytes it moved. The C library copies between its stream buffer and the caller's in
/// user mode, where nothing else would see an over-read that a `fwrite` sends to a file or a
/// socket, and an overflow by `fread` only at the next `free` of the object.
#[inline(always)]
fn stream_transfer(
    buf: usize,
    size: usize,
    n: usize,
    f: Stream,
    (way, op): (Way, &'static str),
    mut call: impl FnMut(usize, usize, usize) -> usize,
) -> usize {
    let total = match size.checked_mul(n) {
        Some(t) if t > 0 && size > 0 => t,
        // Nothing to move, or a product that overflows: the C library's answer, as it is.
        _ => return call(buf, size, n),
    };
    if let Way::OutOf = way {
        bounded(buf, total, way, op);
    }
    // SAFETY: the caller's stream.
    let clean = !unsafe { stream_error(f) };
    let saved = sys::errno();
    let mut done = call(buf, 1, total);
    if done < total && clean {
        done = stream_rest(buf, total, f, saved, done, call);
    }
    if let Way::Into = way {
        bounded(buf, done.min(total), way, op);
    }
    if done >= total {
        n
    } else {
        done / size
    }
}

/// The rest of a stream transfer that stopped short at `done` (see `stream_transfer`): the
/// bytes moved in all.
#[cold]
#[inline(never)]
fn stream_rest(
    buf: usize,
    total: usize,
    f: Stream,
    saved: i32,
    mut done: usize,
    mut call: impl FnMut(usize, usize, usize) -> usize,
) -> usize {
    for _ in 0..TRIES {
        // SAFETY: the caller's stream.
        if !unsafe { stream_error(f) } || sys::errno() != libc::EFAULT || !crate::is_ready() {
            break;
        }
        let stream_buf = match (word(f as usize, FILE_BUF_BASE), word(f as usize, FILE_BUF_END)) {
            (Some(lo), Some(hi)) if hi > lo => alias::map_again(lo, hi - lo),
            _ => 0,
        };
        if alias::map_again(buf + done, total - done) + stream_buf == 0 {
            break;
        }
        // SAFETY: the caller's stream, locked (the C library's lock is recursive) while its
        // flags change, as its own functions change them.
        unsafe {
            flockfile(f);
            let flags = f as *mut u32;
            flags.write_volatile(flags.read_volatile() & !FILE_ERR_SEEN);
            funlockfile(f);
        }
        sys::set_errno(saved);
        done += call(buf + done, 1, total - done);
        if done >= total {
            return total;
        }
    }
    done
}

/// `fread` and `fwrite` (`B`: their buffer's type), and `__fread_chk`.
type StreamFn<B> = unsafe extern "C" fn(B, usize, usize, Stream) -> usize;
type StreamChkFn = unsafe extern "C" fn(Buf, usize, usize, usize, Stream) -> usize;

/// Defines the wrapper of `fread`, `fwrite` or one of their names (`stream_transfer`).
macro_rules! stream_call {
    ($(#[$doc:meta])* fn $name:ident($buf:ty, $way:expr)) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(buf: $buf, size: usize, n: usize, f: Stream) -> usize {
            // SAFETY: the C library's function of this name has this type.
            let real: Option<StreamFn<$buf>> = unsafe { real_fn!($name) };
            let Some(g) = real else { return 0 };
            let op = stringify!($name);
            // SAFETY: the caller's arguments, the buffer advanced past what was moved.
            stream_transfer(buf as usize, size, n, f, ($way, op), |at, size, n| unsafe { g(at as $buf, size, n, f) })
        }
    };
}

stream_call! {
    /// `fread`: see `stream_transfer`.
    fn fread(Buf, Way::Into)
}
stream_call! {
    /// `fread_unlocked`: as `fread`.
    fn fread_unlocked(Buf, Way::Into)
}
stream_call! {
    /// `fwrite`: see `stream_transfer`.
    fn fwrite(CBuf, Way::OutOf)
}
stream_call! {
    /// `fwrite_unlocked`: as `fwrite`.
    fn fwrite_unlocked(CBuf, Way::OutOf)
}

/// Defines the wrapper of `__fread_chk` or `__fread_unlocked_chk`, `fread` of a program built
/// with `_FORTIFY_SOURCE`, which also takes the buffer's size.
macro_rules! stream_call_chk {
    ($name:ident) => {
        /// `fread` of a program built with `_FORTIFY_SOURCE`: see `stream_transfer`.
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(buf: Buf, room: usize, size: usize, n: usize, f: Stream) -> usize {
            // SAFETY: the C library's function of this name has this type.
            let real: Option<StreamChkFn> = unsafe { real_fn!($name) };
            let Some(g) = real else { return 0 };
            let start = buf as usize;
            // SAFETY: the caller's arguments, the buffer and its size advanced past what was
            // moved (the C library checks the request against the size, as before).
            stream_transfer(start, size, n, f, (Way::Into, stringify!($name)), |at, size, n| unsafe {
                g(at as Buf, room.saturating_sub(at - start), size, n, f)
            })
        }
    };
}
stream_call_chk!(__fread_chk);
stream_call_chk!(__fread_unlocked_chk);

/// A line `fgets` (or the wide `fgetws`) wrote into the `n` characters (of type `C`) at `buf`
/// (it returned `buf`): held to the bounds of its heap object, as `fread`'s bytes are. The
/// characters written are the line up to its NUL (a line with a NUL inside it counts up to the
/// first: fewer, never more).
fn line_written<C: Copy + Default + PartialEq>(buf: *mut C, n: usize, op: &'static str) {
    if n > 0 && in_heap(buf as usize) {
        let len = if core::mem::size_of::<C>() == 1 {
            // SAFETY: the call returned `buf`: it wrote a NUL within the first `n` bytes.
            unsafe { libc::strnlen(buf.cast(), n - 1) }
        } else {
            let mut len = 0;
            // SAFETY: as above, within the first `n` characters.
            while len < n - 1 && unsafe { buf.add(len).read_unaligned() } != C::default() {
                len += 1;
            }
            len
        };
        overrun(buf as usize, (len + 1) * core::mem::size_of::<C>(), Way::Into, op, true);
    }
}

/// Defines the wrapper of `fgets`, `fgets_unlocked` or their wide forms (characters of `$c`):
/// `line_written`.
macro_rules! line_call {
    ($name:ident, $c:ty) => {
        /// `fgets` and its kin: the line written is held to its heap object's bounds
        /// (`line_written`).
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(buf: *mut $c, n: c_int, f: Stream) -> *mut $c {
            type Line = unsafe extern "C" fn(*mut $c, c_int, Stream) -> *mut $c;
            // SAFETY: the C library's function of this name has this type.
            let real: Option<Line> = unsafe { real_fn!($name) };
            let Some(g) = real else { return core::ptr::null_mut() };
            // SAFETY: the caller's arguments.
            let r = unsafe { g(buf, n, f) };
            if !r.is_null() {
                line_written(buf, n.max(0) as usize, stringify!($name));
            }
            r
        }
    };
}
line_call!(fgets, c_char);
line_call!(fgets_unlocked, c_char);
line_call!(fgetws, libc::wchar_t);
line_call!(fgetws_unlocked, libc::wchar_t);

/// Defines the wrapper of `__fgets_chk`, `__fgets_unlocked_chk` or their wide forms, `fgets`
/// of a program built with `_FORTIFY_SOURCE`, which also takes the buffer's size.
macro_rules! line_call_chk {
    ($name:ident, $c:ty) => {
        /// `fgets` and its kin of a program built with `_FORTIFY_SOURCE`: see `line_written`.
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(buf: *mut $c, room: usize, n: c_int, f: Stream) -> *mut $c {
            type Chk = unsafe extern "C" fn(*mut $c, usize, c_int, Stream) -> *mut $c;
            // SAFETY: the C library's function of this name has this type.
            let real: Option<Chk> = unsafe { real_fn!($name) };
            let Some(g) = real else { return core::ptr::null_mut() };
            // SAFETY: the caller's arguments (the C library checks `n` against `room`).
            let r = unsafe { g(buf, room, n, f) };
            if !r.is_null() {
                line_written(buf, n.max(0) as usize, stringify!($name));
            }
            r
        }
    };
}
line_call_chk!(__fgets_chk, c_char);
line_call_chk!(__fgets_unlocked_chk, c_char);
line_call_chk!(__fgetws_chk, libc::wchar_t);
line_call_chk!(__fgetws_unlocked_chk, libc::wchar_t);

extern "C" {
    static mut stdin: Stream;
    fn getc_unlocked(f: Stream) -> c_int;
}

type GetsFn = unsafe extern "C" fn(*mut c_char) -> *mut c_char;

/// `gets(3)`, a line of any length from `stdin` into a buffer of unknown size (gone from C11,
/// still in the C library for programs built before). Into a live heap object, the line is
/// read here as the C library reads it (`getc_unlocked` under the stream's lock, the newline
/// dropped, a new error answered with NULL), and a line with no room left for its next byte or
/// for its NUL in the object is reported before that byte is written, instead of running over
/// what follows. Any other buffer is the C library's.
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn gets(buf: *mut c_char) -> *mut c_char {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<GetsFn> = unsafe { real_fn!(gets) };
    let object = if buf.is_null() || !in_heap(buf as usize) { None } else { crate::heap::object_at(buf as usize) };
    let Some((o, true)) = object else {
        // SAFETY: the caller's buffer.
        return real.map_or(core::ptr::null_mut(), |g| unsafe { g(buf) });
    };
    let room = o.start + o.size - buf as usize;
    // SAFETY: the C library's standard input, locked while it is read as its own `gets` reads
    // it; the bytes are written into the caller's object only below `room`.
    unsafe {
        let f = stdin;
        flockfile(f);
        let mut c = getc_unlocked(f);
        if c == libc::EOF {
            funlockfile(f);
            return core::ptr::null_mut();
        }
        // Only an error of this call's answers NULL: the flag is cleared, and set again after.
        let old_error = stream_error(f);
        let flags = f as *mut u32;
        flags.write_volatile(flags.read_volatile() & !FILE_ERR_SEEN);
        let mut n = 0;
        while c != libc::EOF && c != b'\n' as c_int {
            if n + 1 >= room {
                // No room for this character and the NUL after it.
                funlockfile(f);
                past_end_of(o, buf as usize, Way::WouldWrite, "gets");
            }
            *buf.add(n) = c as c_char;
            n += 1;
            c = getc_unlocked(f);
        }
        if n >= room {
            // An empty line into an object of 0 bytes: no room for the NUL.
            funlockfile(f);
            past_end_of(o, buf as usize, Way::WouldWrite, "gets");
        }
        let failed = stream_error(f);
        if !failed {
            if old_error {
                flags.write_volatile(flags.read_volatile() | FILE_ERR_SEEN);
            }
            *buf.add(n) = 0;
        }
        funlockfile(f);
        if failed {
            core::ptr::null_mut()
        } else {
            buf
        }
    }
}

/// A line read by `getdelim` (`getline`, `__getdelim`) into `*line`, whose size the caller
/// says is `*n`. The C library writes a line that fits `*n` in place and grows the buffer with
/// `realloc` for a longer one; a `*n` past the end of the heap object `*line` starts (a size
/// kept from a bigger buffer) lets a long line run past the object's end. Such a call is made
/// with `*n` cut to the object's size, so that the C library grows the buffer instead; a line
/// that did not fit the object but fitted the caller's `*n` would have been written past the
/// object's end: reported when the call returns (the line itself went to the grown buffer,
/// and nothing past the object was written). When the buffer was not grown, the caller's `*n`
/// is given back.
fn line_grown(line: *mut *mut c_char, n: *mut usize, call: impl FnOnce() -> isize, op: &'static str) -> isize {
    if line.is_null() || n.is_null() {
        return call();
    }
    // SAFETY: the caller's buffer pointer and size (the C contract).
    let (buf, asked) = unsafe { (*line, *n) };
    let object = if buf.is_null() || !in_heap(buf as usize) { None } else { crate::heap::object_at(buf as usize) };
    // Only an object the buffer starts (a buffer the C library may `realloc`), with a size
    // that is not 0 (which would make it allocate a new one).
    let Some((o, true)) = object.filter(|(o, _)| o.start == buf as usize && o.size > 0 && o.size < asked) else {
        return call();
    };
    // SAFETY: the caller's size, cut to its object's.
    unsafe { *n = o.size };
    let r = call();
    // SAFETY: the caller's buffer pointer and size, as the call left them.
    unsafe {
        if *line == buf {
            *n = asked;
        }
    }
    if r >= 0 && (r as usize) < asked && r as usize >= o.size {
        past_end_of(o, buf as usize, Way::WouldWrite, op);
    }
    r
}

type GetdelimFn = unsafe extern "C" fn(*mut *mut c_char, *mut usize, c_int, Stream) -> isize;
type GetlineFn = unsafe extern "C" fn(*mut *mut c_char, *mut usize, Stream) -> isize;

/// Defines the wrapper of `getdelim` or `__getdelim` (`line_grown`).
macro_rules! delim_call {
    ($name:ident) => {
        /// `getdelim`: see `line_grown`.
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(line: *mut *mut c_char, n: *mut usize, delim: c_int, f: Stream) -> isize {
            // SAFETY: the C library's function of this name has this type.
            let real: Option<GetdelimFn> = unsafe { real_fn!($name) };
            let Some(g) = real else { return -1 };
            // SAFETY: the caller's arguments (the size perhaps cut to its object's).
            line_grown(line, n, || unsafe { g(line, n, delim, f) }, stringify!($name))
        }
    };
}
delim_call!(getdelim);
delim_call!(__getdelim);

/// `getline`: see `line_grown`.
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn getline(line: *mut *mut c_char, n: *mut usize, f: Stream) -> isize {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<GetlineFn> = unsafe { real_fn!(getline) };
    let Some(g) = real else { return -1 };
    // SAFETY: the caller's arguments (the size perhaps cut to its object's).
    line_grown(line, n, || unsafe { g(line, n, f) }, "getline")
}

/// Opens a stream (a `FILE`, a `DIR`) on a path through `open`, which returns null on failure:
/// made again after `EFAULT` when the path's pages were mapped again, as the calls that take
/// paths above.
fn open_stream<T>(path: Path, mut open: impl FnMut() -> *mut T) -> *mut T {
    let r = again(
        || {
            let s = open();
            if s.is_null() {
                -1
            } else {
                s as isize
            }
        },
        || heal_path(path),
    );
    if r < 0 {
        core::ptr::null_mut()
    } else {
        r as *mut T
    }
}

/// Defines the wrapper of `fopen` or `fopen64`.
macro_rules! fopen_call {
    ($name:ident) => {
        /// `fopen`: the C library's own, which opens the path with a system call of its own;
        /// see `open_stream`.
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: Path, mode: Path) -> Stream {
            // SAFETY: the C library's function of this name has this type.
            let real: Option<unsafe extern "C" fn(Path, Path) -> Stream> = unsafe { real_fn!($name) };
            let Some(g) = real else { return core::ptr::null_mut() };
            // SAFETY: the caller's arguments.
            open_stream(path, || unsafe { g(path, mode) })
        }
    };
}
fopen_call!(fopen);
fopen_call!(fopen64);

/// Defines the wrapper of `freopen` or `freopen64`. A `freopen` that fails has closed the
/// stream, so it cannot be made again: the path's pages are mapped again before the call
/// instead, by reading the path (a fault of this thread's own mends a page).
macro_rules! freopen_call {
    ($name:ident) => {
        /// `freopen`: the C library's own, the path's pages mapped first.
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: Path, mode: Path, f: Stream) -> Stream {
            // SAFETY: the C library's function of this name has this type.
            let real: Option<unsafe extern "C" fn(Path, Path, Stream) -> Stream> = unsafe { real_fn!($name) };
            let Some(g) = real else { return core::ptr::null_mut() };
            if !path.is_null() {
                string_bytes(path as usize);
            }
            // SAFETY: the caller's arguments.
            unsafe { g(path, mode, f) }
        }
    };
}
freopen_call!(freopen);
freopen_call!(freopen64);

/// The stream's buffer is the program's, which the C library never frees, among its `_flags`
/// (`_IO_USER_BUF`).
const FILE_USER_BUF: u32 = 0x1;

/// Gives the stream `f` a buffer of the program's, `buf` of `size` bytes, through `give` (the
/// C library's `setvbuf`, `setbuf` or `setbuffer`, which takes the buffer to use). A buffer in
/// the heap is behind an alias, and the C library reads into it and writes it out with system
/// calls of its own (`streams`): the stream gets a view of the same size in its place
/// (`streams::lend`), and the C library owns that view as it owns the buffers it allocates
/// (`_IO_USER_BUF` cleared), freeing it when the stream is closed or given another buffer.
/// Anything else, or when no view can be had, goes to the C library as it is.
///
/// # Safety
/// `f` must be a stream, and `give` the C library's function with the caller's other
/// arguments.
unsafe fn give_buffer(f: Stream, buf: *mut core::ffi::c_char, size: usize, give: impl FnOnce(*mut core::ffi::c_char)) {
    if buf.is_null() || size == 0 || f.is_null() || !alias::in_arena(buf as usize) {
        return give(buf);
    }
    // Making the view leaves `errno` as it was.
    let saved = sys::errno();
    let lent = crate::streams::lend(buf as usize, size);
    sys::set_errno(saved);
    let Some(view) = lent else { return give(buf) };
    // SAFETY: the caller's stream, locked (the C library's lock is recursive) while its buffer
    // and flags change, as its own functions change them.
    let taken = unsafe {
        flockfile(f);
        give(view as *mut core::ffi::c_char);
        let taken = word(f as usize, FILE_BUF_BASE) == Some(view);
        if taken {
            let flags = f as *mut u32;
            flags.write_volatile(flags.read_volatile() & !FILE_USER_BUF);
        }
        funlockfile(f);
        taken
    };
    if !taken {
        // The C library refused it (a failed flush of what the stream held, a bad mode).
        crate::streams::repay(view);
        crate::heap::free(view as *mut u8, "free");
    }
}

/// `setvbuf`: the C library's own, with a heap buffer replaced by a view (`give_buffer`).
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn setvbuf(f: Stream, buf: *mut core::ffi::c_char, mode: c_int, size: usize) -> c_int {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(Stream, *mut core::ffi::c_char, c_int, usize) -> c_int> =
        unsafe { real_fn!(setvbuf) };
    let Some(g) = real else { return -1 };
    if mode == libc::_IONBF {
        // SAFETY: the caller's arguments (an unbuffered stream uses no buffer of the program's).
        return unsafe { g(f, buf, mode, size) };
    }
    let mut r = -1;
    // SAFETY: the caller's stream, and the C library's function with the caller's mode and size.
    unsafe { give_buffer(f, buf, size, |b| r = g(f, b, mode, size)) };
    r
}

/// `setbuf`: the C library's own (`BUFSIZ` bytes, or unbuffered for null), with a heap buffer
/// replaced by a view (`give_buffer`).
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn setbuf(f: Stream, buf: *mut core::ffi::c_char) {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(Stream, *mut core::ffi::c_char)> = unsafe { real_fn!(setbuf) };
    let Some(g) = real else { return };
    // SAFETY: the caller's stream, and the C library's function.
    unsafe { give_buffer(f, buf, libc::BUFSIZ as usize, |b| g(f, b)) }
}

/// `setbuffer`: the C library's own, with a heap buffer replaced by a view (`give_buffer`).
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn setbuffer(f: Stream, buf: *mut core::ffi::c_char, size: usize) {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(Stream, *mut core::ffi::c_char, usize)> = unsafe { real_fn!(setbuffer) };
    let Some(g) = real else { return };
    // SAFETY: the caller's stream, and the C library's function with the caller's size.
    unsafe { give_buffer(f, buf, size, |b| g(f, b, size)) }
}

// ---- directory streams ----

type Dir = *mut c_void;

/// Defines the wrapper of `readdir` or `readdir64`. The C library reads a directory's entries
/// with its own `getdents64` into the `DIR`, a heap object that `opendir` allocated: when a
/// page of it lost its entry, the call fails with `EFAULT` (or returns the entries that fit
/// before that page, and the next call starts again at the buffer's start). Then the `DIR`'s
/// pages are mapped again and the call made again; the C library's `readdir` changes nothing
/// in the `DIR` when `getdents64` fails, but the kernel may have moved the directory's
/// position past entries it took before a last write failed (see `getdents64`): the position
/// is set back to the one after the last entry returned first (`set_back`); a directory
/// listed under a steady pageout lost entries in 78 % of the listings without.
/// `errno` is set to 0 around the call to tell its end of the directory (`errno` kept, null)
/// from its failure, and put back.
macro_rules! readdir_call {
    ($name:ident) => {
        /// `readdir`: see `readdir_call`.
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(d: Dir) -> *mut c_void {
            // SAFETY: the C library's function of this name has this type.
            let real: Option<unsafe extern "C" fn(Dir) -> *mut c_void> = unsafe { real_fn!($name) };
            let Some(g) = real else { return core::ptr::null_mut() };
            let saved = sys::errno();
            sys::set_errno(0);
            // SAFETY: the caller's directory stream.
            let mut e = unsafe { g(d) };
            let mut tries = 0;
            while e.is_null() && sys::errno() == libc::EFAULT && tries < DIR_TRIES && heal_dir(d as usize) > 0 {
                // SAFETY: the caller's directory stream; its pages were just mapped again.
                unsafe { set_back(d as *mut libc::DIR) };
                sys::set_errno(0);
                // SAFETY: as above.
                let refill = || unsafe { g(d) };
                // The last tries with the stream's pages locked, which no pageout takes.
                e = if tries + 1 >= TRIES { locked(d as usize, refill) } else { refill() };
                tries += 1;
            }
            if sys::errno() == 0 {
                sys::set_errno(saved);
            }
            e
        }
    };
}
readdir_call!(readdir);
readdir_call!(readdir64);

/// Refills of a directory stream made again, at most. A refill fills up to 32 KiB and more,
/// and after a seek some file systems read the whole directory first: a thread paging the
/// heap out without pause took a page of the buffer again in four refills in a row in 15–60 %
/// of the listings of a directory of 300 entries (7–13 % with 64 tries; none with a pause of
/// 100 µs between its passes). So the tries after the first `TRIES` are made with the
/// stream's pages locked (`locked`).
const DIR_TRIES: u32 = 8;

/// Runs `call` with the pages of the live heap object holding `at` locked (`mlock`), so that
/// no pageout takes them (`MADV_PAGEOUT` and DAMON leave locked pages alone) while the kernel
/// fills a buffer there: for the last tries of calls a steady pageout kept failing. The lock
/// is always undone, also when `mlock` failed (`errno` is `call`'s): a page it could not
/// fill (taken again meanwhile: the kernel cannot fill a page of the arena) fails it with the
/// mapping locked all the same, and a locked page refuses `MADV_DONTNEED`, which revokes the
/// object once freed (a live object's pages are in no revocation meanwhile). Locking splits
/// the object's mirror mapping for a moment; unlocking merges it again. Where the program may
/// lock no more memory (`RLIMIT_MEMLOCK`) nothing is locked, and the call is as any other.
fn locked<T>(at: usize, call: impl FnOnce() -> T) -> T {
    let Some((o, true)) = crate::heap::object_at(at) else { return call() };
    let start = o.start & !(sys::PAGE - 1);
    let len = sys::round_up(o.start + o.size.max(1), sys::PAGE) - start;
    let before = sys::errno();
    raw(libc::SYS_mlock, [start, len, 0, 0, 0, 0]);
    // A failed lock leaves `errno` alone: `readdir` puts back the one it met at the end.
    sys::set_errno(before);
    let r = call();
    let failed = sys::errno();
    raw(libc::SYS_munlock, [start, len, 0, 0, 0, 0]);
    sys::set_errno(failed);
    r
}

/// After a refill of the directory stream `d` failed with `EFAULT`: when the directory's
/// position moved past the entry after the last one returned (`telldir`), it is set back
/// there (`seekdir`). Only then: a seek makes some file systems read the directory again
/// (ext4's hashed directories rebuild their order), and with it each call made again took
/// long enough for a steady pageout to take the buffer's pages again, four times in a row.
///
/// # Safety
/// `d` must be an open directory stream.
unsafe fn set_back(d: *mut libc::DIR) {
    // SAFETY: the caller's directory stream.
    unsafe {
        let told = libc::telldir(d);
        if told >= 0 && directory_position(libc::dirfd(d)) != told as isize {
            libc::seekdir(d, told);
        }
    }
}

/// Defines the wrapper of `readdir_r` or `readdir64_r`: the next entry by `readdir` (whose
/// wrapper mends the `DIR`), copied into the caller's. The C library's own fills the `DIR`
/// as `readdir` does, but keeps a failed refill's `EFAULT` in the `DIR` and returns it again
/// at the end of the directory, so it cannot be made again. An entry whose name is longer
/// than `NAME_MAX` is skipped with `ENAMETOOLONG` returned at the end, as the C library's own
/// does.
macro_rules! readdir_r_call {
    ($name:ident, $next:ident) => {
        /// `readdir_r`: see `readdir_r_call`.
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(d: Dir, entry: *mut libc::dirent64, result: *mut *mut libc::dirent64) -> c_int {
            let saved = sys::errno();
            let mut error = 0;
            loop {
                sys::set_errno(0);
                // SAFETY: the caller's directory stream.
                let e = unsafe { $next(d) } as *const libc::dirent64;
                if e.is_null() {
                    let failed = sys::errno();
                    sys::set_errno(saved);
                    // SAFETY: the caller's result pointer.
                    unsafe { *result = core::ptr::null_mut() };
                    return if failed != 0 { failed } else { error };
                }
                let name = core::mem::offset_of!(libc::dirent64, d_name);
                // SAFETY: the C library's entry, a name ended by a NUL after its fixed part.
                let len = unsafe { libc::strlen((e as *const u8).add(name).cast()) };
                if len > NAME_MAX {
                    error = libc::ENAMETOOLONG;
                    continue;
                }
                sys::set_errno(saved);
                // SAFETY: the caller's entry, a `struct dirent64` (room for `NAME_MAX` bytes and
                // the NUL); the C library's entry holds the name and its NUL.
                unsafe {
                    core::ptr::copy_nonoverlapping(e as *const u8, entry as *mut u8, name + len + 1);
                    (*entry).d_reclen = (name + len + 1) as u16;
                    *result = entry;
                }
                return 0;
            }
        }
    };
}
readdir_r_call!(readdir_r, readdir);
readdir_r_call!(readdir64_r, readdir64);

/// The longest name `readdir_r` copies.
const NAME_MAX: usize = 255;

/// Maps again the pages of the `DIR` at `d`, a live object of the heap.
#[cold]
#[inline(never)]
fn heal_dir(d: usize) -> usize {
    match crate::heap::live_object_size(d) {
        Some(size) if crate::is_ready() => alias::map_again(d, size),
        _ => 0,
    }
}

// ---- results written after what cannot be undone ----
//
// Some calls write their result after doing what cannot be done again: `wait4` writes the
// status after it has reaped the child, `accept` the peer's address after it has taken the
// connection. A result in a heap object whose page lost its entry meanwhile made the call fail
// with `EFAULT`, the child's status or the connection lost (GCC's driver: "failed to get exit
// status: Bad address"). Making such a call again cannot help, so a result that lies in the
// alias arena is received in a local, read from the program's object first (a read here is
// mended), and copied there after the call, where a fault is mended too. A result elsewhere is
// the kernel's to write, as before.

/// Whether the result at `p` goes through a local: it lies in the alias arena.
fn through_local(p: usize) -> bool {
    p != 0 && crate::is_ready() && alias::in_arena(p)
}

/// Calls `call` with `out`, or, when `out` lies in the alias arena, with a local holding what
/// `out` holds, copied back to `out` after a call that did not fail.
fn out_local<T: Copy>(out: *mut T, call: impl FnOnce(*mut T) -> isize) -> isize {
    if !through_local(out as usize) {
        return call(out);
    }
    // SAFETY: `out` is the program's result buffer, in a heap object: read and written here in
    // user mode, where a page that lost its entry is mapped again by the fault handler.
    unsafe {
        let mut local = out.read_unaligned();
        let r = call(&mut local);
        if r >= 0 {
            out.write_unaligned(local);
        }
        r
    }
}

type Status = *mut c_int;
type Usage = *mut libc::rusage;

forward! {
    /// `waitpid(2)`: see the group's comment.
    fn waitpid(pid: libc::pid_t, status: Status, options: c_int) -> libc::pid_t;
    type unsafe extern "C" fn(libc::pid_t, Status, c_int) -> libc::pid_t;
    libc::SYS_wait4, [pid as usize, status as usize, options as usize, 0, 0, 0];
    |f| out_local(status, |s| f(pid, s, options))
}

forward! {
    /// `wait(2)`: see the group's comment.
    fn wait(status: Status) -> libc::pid_t;
    type unsafe extern "C" fn(Status) -> libc::pid_t;
    libc::SYS_wait4, [usize::MAX, status as usize, 0, 0, 0, 0];
    |f| out_local(status, f)
}

forward! {
    /// `wait4(2)`: see the group's comment (the status and the resource usage).
    fn wait4(pid: libc::pid_t, status: Status, options: c_int, usage: Usage) -> libc::pid_t;
    type unsafe extern "C" fn(libc::pid_t, Status, c_int, Usage) -> libc::pid_t;
    libc::SYS_wait4, [pid as usize, status as usize, options as usize, usage as usize, 0, 0];
    |f| out_local(status, |s| out_local(usage, |u| f(pid, s, options, u)))
}

forward! {
    /// `wait3(2)`: as `wait4` of any child.
    fn wait3(status: Status, options: c_int, usage: Usage) -> libc::pid_t;
    type unsafe extern "C" fn(Status, c_int, Usage) -> libc::pid_t;
    libc::SYS_wait4, [usize::MAX, status as usize, options as usize, usage as usize, 0, 0];
    |f| out_local(status, |s| out_local(usage, |u| f(s, options, u)))
}

forward! {
    /// `waitid(2)`: see the group's comment (the child's `siginfo_t`).
    fn waitid(idtype: libc::idtype_t, id: libc::id_t, info: *mut libc::siginfo_t, options: c_int) -> c_int;
    type unsafe extern "C" fn(libc::idtype_t, libc::id_t, *mut libc::siginfo_t, c_int) -> c_int;
    libc::SYS_waitid, [idtype as usize, id as usize, info as usize, options as usize, 0, 0];
    |f| out_local(info, |i| f(idtype, id, i, options))
}

/// `accept`, `accept4`, `getsockname` or `getpeername` (`call(addr, len)`) with the address
/// received in locals when the program's address or length lies in the alias arena: see the
/// group's comment.
fn address_out(addr: Addr, len: AddrLen, call: impl FnOnce(Addr, AddrLen) -> isize) -> isize {
    if addr.is_null() || len.is_null() || !(through_local(addr as usize) || through_local(len as usize)) {
        return call(addr, len);
    }
    // SAFETY: an all-zero sockaddr_storage is valid.
    let mut local: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
    // SAFETY: the program's length, read in user mode (see the group's comment).
    let room = unsafe { len.read_unaligned() };
    let mut got = room.min(core::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t);
    let r = call(&mut local as *mut libc::sockaddr_storage as Addr, &mut got);
    if r >= 0 {
        // SAFETY: the program's buffers, of `room` bytes and one length, written in user mode;
        // the kernel would have written `min(room, got)` bytes and the full length.
        unsafe {
            let n = room.min(got) as usize;
            core::ptr::copy_nonoverlapping(&local as *const libc::sockaddr_storage as *const u8, addr as *mut u8, n);
            len.write_unaligned(got);
        }
    }
    r
}

forward! {
    /// `accept(2)`: see the group's comment (the peer's address and its length).
    fn accept(fd: Fd, addr: Addr, len: AddrLen) -> c_int;
    type unsafe extern "C" fn(Fd, Addr, AddrLen) -> c_int;
    libc::SYS_accept, [fd as usize, addr as usize, len as usize, 0, 0, 0];
    |f| address_out(addr, len, |a, l| f(fd, a, l))
}

forward! {
    /// `accept4(2)`: as `accept`.
    fn accept4(fd: Fd, addr: Addr, len: AddrLen, flags: c_int) -> c_int;
    type unsafe extern "C" fn(Fd, Addr, AddrLen, c_int) -> c_int;
    libc::SYS_accept4, [fd as usize, addr as usize, len as usize, flags as usize, 0, 0];
    |f| address_out(addr, len, |a, l| f(fd, a, l, flags))
}

forward! {
    /// `getsockname(2)`: as `accept` (the socket's own address; nothing to undo, but one path
    /// for every address a call writes).
    fn getsockname(fd: Fd, addr: Addr, len: AddrLen) -> c_int;
    type unsafe extern "C" fn(Fd, Addr, AddrLen) -> c_int;
    libc::SYS_getsockname, [fd as usize, addr as usize, len as usize, 0, 0, 0];
    |f| address_out(addr, len, |a, l| f(fd, a, l))
}

forward! {
    /// `getpeername(2)`: as `getsockname`.
    fn getpeername(fd: Fd, addr: Addr, len: AddrLen) -> c_int;
    type unsafe extern "C" fn(Fd, Addr, AddrLen) -> c_int;
    libc::SYS_getpeername, [fd as usize, addr as usize, len as usize, 0, 0, 0];
    |f| address_out(addr, len, |a, l| f(fd, a, l))
}

/// The most bytes of an option `getsockopt` receives in a local (`TCP_INFO`'s 232 among them).
const OPTION_LOCAL: usize = 256;

forward! {
    /// `getsockopt(2)`: its result through a local, as `accept`'s address: reading some options
    /// consumes what they report (`SO_ERROR` clears the socket's pending error), so the call
    /// cannot be made again. An option longer than `OPTION_LOCAL` is made again after `EFAULT`
    /// with its pages mapped.
    fn getsockopt(fd: Fd, level: c_int, name: c_int, val: Buf, len: AddrLen) -> c_int;
    type unsafe extern "C" fn(Fd, c_int, c_int, Buf, AddrLen) -> c_int;
    libc::SYS_getsockopt, [fd as usize, level as usize, name as usize, val as usize, len as usize, 0];
    |f| option_out(val, len, |v, l| f(fd, level, name, v, l))
}

/// `getsockopt` (`call(val, len)`) with the option received in locals when the program's
/// buffer or length lies in the alias arena.
fn option_out(val: Buf, len: AddrLen, call: impl Fn(Buf, AddrLen) -> isize) -> isize {
    if val.is_null() || len.is_null() || !(through_local(val as usize) || through_local(len as usize)) {
        return call(val, len);
    }
    // SAFETY: the program's length, read in user mode (see the group's comment).
    let room = unsafe { len.read_unaligned() };
    if room as usize > OPTION_LOCAL {
        return again(
            || call(val, len),
            || alias::map_again(val as usize, room as usize) + alias::map_again(len as usize, 4),
        );
    }
    let mut local = [0u8; OPTION_LOCAL];
    let mut got = room;
    let r = call(local.as_mut_ptr() as Buf, &mut got);
    if r >= 0 {
        // SAFETY: the program's buffers, of `room` bytes and one length, written in user mode;
        // the kernel would have written `min(room, got)` bytes and the length it reports.
        unsafe {
            let n = room.min(got) as usize;
            core::ptr::copy_nonoverlapping(local.as_ptr(), val as *mut u8, n);
            len.write_unaligned(got);
        }
    }
    r
}

// Calls that read a socket address or an option first and fail with `EFAULT` before they do
// anything: made again after `EFAULT` with the pages mapped, as the calls that take paths. A
// client that reconnects to an address it resolved long ago (`getaddrinfo`'s results are heap
// objects) connects through such a page.

type CAddr = *const libc::sockaddr;

call_again! {
    /// `connect(2)`: see above.
    fn connect(fd: Fd, addr: CAddr, len: libc::socklen_t) -> c_int;
    libc::SYS_connect, [fd, addr, len];
    alias::map_again(addr as usize, len as usize)
}
call_again! {
    /// `bind(2)`: see above.
    fn bind(fd: Fd, addr: CAddr, len: libc::socklen_t) -> c_int;
    libc::SYS_bind, [fd, addr, len];
    alias::map_again(addr as usize, len as usize)
}
call_again! {
    /// `setsockopt(2)`: see above.
    fn setsockopt(fd: Fd, level: c_int, name: c_int, val: CBuf, len: libc::socklen_t) -> c_int;
    libc::SYS_setsockopt, [fd, level, name, val, len];
    alias::map_again(val as usize, len as usize)
}
// `pipe`, `pipe2` and `socketpair` write the two descriptors last, and close them again when
// that fails: made again after `EFAULT` too.
call_again! {
    /// `pipe(2)`: see above.
    fn pipe(fds: *mut c_int) -> c_int;
    libc::SYS_pipe2, [fds, 0];
    alias::map_again(fds as usize, 8)
}
call_again! {
    /// `pipe2(2)`: see above.
    fn pipe2(fds: *mut c_int, flags: c_int) -> c_int;
    libc::SYS_pipe2, [fds, flags];
    alias::map_again(fds as usize, 8)
}
call_again! {
    /// `socketpair(2)`: see above.
    fn socketpair(domain: c_int, kind: c_int, protocol: c_int, fds: *mut c_int) -> c_int;
    libc::SYS_socketpair, [domain, kind, protocol, fds];
    alias::map_again(fds as usize, 8)
}
call_again! {
    /// `epoll_ctl(2)`: see above (the event it adds or changes).
    fn epoll_ctl(ep: Fd, op: c_int, fd: Fd, event: *mut libc::epoll_event) -> c_int;
    libc::SYS_epoll_ctl, [ep, op, fd, event];
    alias::map_again(event as usize, core::mem::size_of::<libc::epoll_event>())
}

// `sendfile`, `copy_file_range` and `splice` write the offsets they were given after moving
// the bytes: made again, they would move them twice. Their offsets go through locals.

type Offset = *mut i64;

macro_rules! sendfile_call {
    ($name:ident) => {
        forward! {
            /// `sendfile(2)`: see the group's comment.
            fn $name(out: Fd, input: Fd, offset: Offset, n: usize) -> isize;
            type unsafe extern "C" fn(Fd, Fd, Offset, usize) -> isize;
            libc::SYS_sendfile, [out as usize, input as usize, offset as usize, n, 0, 0];
            |f| out_local(offset, |o| f(out, input, o, n))
        }
    };
}
sendfile_call!(sendfile);
sendfile_call!(sendfile64);

forward! {
    /// `copy_file_range(2)`: see the group's comment.
    fn copy_file_range(input: Fd, in_off: Offset, out: Fd, out_off: Offset, n: usize, flags: libc::c_uint) -> isize;
    type unsafe extern "C" fn(Fd, Offset, Fd, Offset, usize, libc::c_uint) -> isize;
    libc::SYS_copy_file_range, [input as usize, in_off as usize, out as usize, out_off as usize, n, flags as usize];
    |f| out_local(in_off, |i| out_local(out_off, |o| f(input, i, out, o, n, flags)))
}

forward! {
    /// `splice(2)`: see the group's comment.
    fn splice(input: Fd, in_off: Offset, out: Fd, out_off: Offset, n: usize, flags: libc::c_uint) -> isize;
    type unsafe extern "C" fn(Fd, Offset, Fd, Offset, usize, libc::c_uint) -> isize;
    libc::SYS_splice, [input as usize, in_off as usize, out as usize, out_off as usize, n, flags as usize];
    |f| out_local(in_off, |i| out_local(out_off, |o| f(input, i, out, o, n, flags)))
}

// ---- spawning ----

/// Maps the pages of the `len` bytes at `addr` that belong to live objects and lost their
/// entries, by reading a word of each page here, where a fault of this thread's own is
/// mended (`sys::probe_word`: a bad address cannot crash it).
fn touch(addr: usize, len: usize) {
    let end = addr.saturating_add(len.min(MAP_TOUCH_MAX));
    let mut w = addr & !7;
    while w < end {
        sys::probe_word(w);
        w = (w & !(sys::PAGE - 1)) + sys::PAGE;
    }
}

/// Most bytes of one region `touch` reads: the kernel's own bound on `argv` and `envp`
/// together is a quarter of the stack limit.
const MAP_TOUCH_MAX: usize = 32 << 20;

/// Reads a NULL-terminated array of strings (`argv`, `envp`) and the strings (`touch`).
fn touch_strings(v: usize) {
    each_string(v, |s| {
        string_bytes(s);
    });
}

/// Bytes of one of glibc's file actions (`struct __spawn_action`), and the most read.
const SPAWN_ACTION_BYTES: usize = 32;
const MAX_SPAWN_ACTIONS: usize = 1 << 12;

/// Reads what the child of `posix_spawn` reads: the path, the file actions (glibc's
/// `posix_spawn_file_actions_t`: the count used in the high half of its first word, the array
/// of actions in its second, and in the actions the paths of `addopen` and `addchdir`, taken
/// as any word that points into the alias arena), the attributes, `argv`, `envp` and the
/// process's environment (`posix_spawnp` looks the program up in its `PATH`).
fn touch_spawn(path: Path, fa: usize, attr: usize, argv: Strings, envp: Strings) {
    string_bytes(path as usize);
    if fa != 0 {
        // Every word the child reads is read here (`word` maps a page as it reads it).
        if let (Some(counts), Some(actions)) = (word(fa, 0), word(fa, 1)) {
            let used = ((counts >> 32) as u32 as usize).min(MAX_SPAWN_ACTIONS);
            for i in 0..used * SPAWN_ACTION_BYTES / 8 {
                match word(actions, i) {
                    Some(p) if alias::in_arena(p) => {
                        string_bytes(p);
                    }
                    _ => {}
                }
            }
        }
    }
    if attr != 0 {
        touch(attr, core::mem::size_of::<libc::posix_spawnattr_t>());
    }
    touch_strings(argv as usize);
    touch_strings(envp as usize);
    touch_strings(environment());
}

/// Most file actions copied (`ActionsCopy`), and bytes of their paths.
const COPY_ACTIONS: usize = 32;
const COPY_PATHS: usize = 8192;
/// Kinds of glibc's file actions that hold a path (`addopen`, `addchdir_np`), and the last
/// kind it has (`addtcsetpgrp_np`); the others hold descriptors.
const SPAWN_DO_OPEN: u32 = 2;
const SPAWN_DO_CHDIR: u32 = 3;
const SPAWN_DO_LAST: u32 = 6;
/// Words of glibc's `posix_spawn_file_actions_t`.
const FILE_ACTIONS_WORDS: usize = core::mem::size_of::<libc::posix_spawn_file_actions_t>() / 8;

/// A copy of the program's file actions whose paths lie here, on the stack of the wrapper,
/// which the child reads instead: a path in a heap object that the kernel paged out again
/// after it was read (`touch_spawn`) made the child's `open` fail with `EFAULT`, every time
/// the call was made again under a steady pageout (ninja: "posix_spawn: Bad address"), and
/// the actions themselves, a heap object, killed the child with SIGBUS. The stack is
/// ordinary memory, where the kernel brings a page back itself.
#[repr(C)]
struct ActionsCopy {
    fa: [usize; FILE_ACTIONS_WORDS],
    actions: [[usize; SPAWN_ACTION_BYTES / 8]; COPY_ACTIONS],
    paths: [u8; COPY_PATHS],
}

impl ActionsCopy {
    /// Copies the file actions at `fa`: false when they are too many, or their paths too long,
    /// or a word cannot be read (the program's own are then given to the C library).
    fn copy(&mut self, fa: usize) -> bool {
        if !copy_words(fa, &mut self.fa) {
            return false;
        }
        let used = (self.fa[0] >> 32) as u32 as usize;
        if used > COPY_ACTIONS || !copy_words(self.fa[1], self.actions[..used].as_flattened_mut()) {
            return false;
        }
        let mut at = 0;
        for action in &mut self.actions[..used] {
            // The word of the action's path, by its kind (glibc's `struct __spawn_action`: the
            // kind in the low half of the first word, the arguments from the second word on;
            // the other words are padding, whatever the heap held there before).
            let path = match action[0] as u32 {
                SPAWN_DO_OPEN => 2,
                SPAWN_DO_CHDIR => 1,
                kind if kind <= SPAWN_DO_LAST => continue,
                _ => return false,
            };
            let w = &mut action[path];
            if !alias::in_arena(*w) {
                continue;
            }
            let Some(n) = copy_string(*w, &mut self.paths[at..]) else { return false };
            *w = self.paths[at..].as_ptr() as usize;
            at += n;
        }
        self.fa[1] = self.actions.as_ptr() as usize;
        true
    }
}

/// Copies the NUL-terminated string at `from`, its NUL included, into `to`, a word at a time
/// (`word`): its length, or None when it does not fit or cannot be read.
fn copy_string(from: usize, to: &mut [u8]) -> Option<usize> {
    let mut n = 0;
    loop {
        let a = from + n;
        let bytes = word(a & !7, 0)?.to_le_bytes();
        for &c in &bytes[a & 7..] {
            *to.get_mut(n)? = c;
            n += 1;
            if c == 0 {
                return Some(n);
            }
        }
    }
}

/// Copies the words at `from` into `to` (`word`): false when one cannot be read.
fn copy_words(from: usize, to: &mut [usize]) -> bool {
    for (k, w) in to.iter_mut().enumerate() {
        let Some(v) = word(from, k) else { return false };
        *w = v;
    }
    true
}

/// Words of glibc's `posix_spawnattr_t`.
const SPAWN_ATTR_WORDS: usize = core::mem::size_of::<libc::posix_spawnattr_t>() / 8;

/// `posix_spawn` and `posix_spawnp`.
type SpawnFn = unsafe extern "C" fn(
    *mut libc::pid_t,
    Path,
    *const libc::posix_spawn_file_actions_t,
    *const libc::posix_spawnattr_t,
    Strings,
    Strings,
) -> c_int;

/// Defines the wrapper of `posix_spawn` or `posix_spawnp` (`$search`: the C library's looks
/// the program up in `PATH`). The child runs with every signal blocked until its `execve`,
/// and reads the file actions, and the program's path, `argv` and `envp` through the kernel:
/// a page of them that lost its entry killed it with SIGBUS (`posix_spawn` then said nothing
/// went wrong), or made its `execve` fail with `EFAULT`. So they are read here first, in the
/// parent, where a fault is mended (the child shares the parent's memory until its
/// `execve`). A page taken again in between is still lost: the window is the time to start
/// the child, and a steady pageout of the whole process hit it (ninja: "posix_spawn: Bad
/// address"). So the file actions go to the C library as a copy whose paths lie on this
/// wrapper's stack (`ActionsCopy`; up to 32 actions and 8 KiB of paths), the attributes and
/// the program's path as copies too, and the pid through a local; `posix_spawnp`'s search of
/// `PATH`, which the child made reading the path and the environment itself, is made here
/// (`search_path`); and when the child's `execve` fails with `EFAULT` (the child ran nothing
/// of the program's; the C library has reaped it), what it reads of the program's memory is
/// read again and the call made again, up to `TRIES` times; the file actions, which the child
/// carried out before its `execve`, are carried out again.
macro_rules! spawn_call {
    ($name:ident, $search:expr) => {
        /// `posix_spawn`: the C library's own, what the child reads mapped first.
        ///
        /// # Safety
        /// The C contract of the function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            pid: *mut libc::pid_t,
            path: Path,
            fa: *const libc::posix_spawn_file_actions_t,
            attr: *const libc::posix_spawnattr_t,
            argv: Strings,
            envp: Strings,
        ) -> c_int {
            // SAFETY: the C library's function of this name has this type.
            let real: Option<SpawnFn> = unsafe { real_fn!($name) };
            let Some(g) = real else { return libc::ENOSYS };
            let ready = crate::is_ready();
            // SAFETY: all-zero words and bytes.
            let mut copy: ActionsCopy = unsafe { core::mem::zeroed() };
            let copied = !fa.is_null() && ready && copy.copy(fa as usize);
            let actions = if copied { copy.fa.as_ptr() as *const libc::posix_spawn_file_actions_t } else { fa };
            // The attributes, read by the child with every signal blocked, copied here too.
            let mut attr_copy = [0usize; SPAWN_ATTR_WORDS];
            let attr_copied = !attr.is_null() && ready && copy_words(attr as usize, &mut attr_copy);
            let attr = if attr_copied { attr_copy.as_ptr() as *const libc::posix_spawnattr_t } else { attr };
            // What the child still reads of the program's memory.
            let (touch_fa, touch_attr) =
                (if copied { 0 } else { fa as usize }, if attr_copied { 0 } else { attr as usize });
            let spawn = |path: Path| {
                let mut tries = 0;
                loop {
                    if ready {
                        touch_spawn(path, touch_fa, touch_attr, argv, envp);
                    }
                    // The C library writes the child's pid with every signal blocked, after
                    // the child started: a pid in a heap object paged out meanwhile killed
                    // ninja with SIGBUS. So it goes through a local (`out_local`).
                    // SAFETY: the caller's arguments, its path, file actions and attributes
                    // perhaps as copied.
                    let r = out_local(pid, |p| unsafe { g(p, path, actions, attr, argv, envp) } as isize) as c_int;
                    if r != libc::EFAULT || !ready || tries == TRIES {
                        return r;
                    }
                    tries += 1;
                }
            };
            let mut path_copy = [0u8; PATH_COPY];
            let n = if ready && !path.is_null() { copy_string(path as usize, &mut path_copy) } else { None };
            let Some(n) = n else { return spawn(path) };
            let file = &path_copy[..n - 1];
            if $search && !file.contains(&b'/') {
                if let Some(r) = search_path(file, &spawn) {
                    return r;
                }
            }
            spawn(path_copy.as_ptr() as Path)
        }
    };
}
spawn_call!(posix_spawn, false);
spawn_call!(posix_spawnp, true);

/// Bytes of a program's path copied for the child (`PATH_MAX`).
const PATH_COPY: usize = 4096;
/// The longest file name `posix_spawnp` looks up, and the path it looks it up in without one.
const NAME_MAX_BYTES: usize = 255;
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// `posix_spawnp`'s search of `PATH` for `file` (no `/` in it), made in the parent with each
/// candidate on this stack, as the C library's child makes it: each directory in turn (an
/// empty one is the current directory), the next after `ENOENT`, `ENOTDIR`, `ESTALE`,
/// `ENODEV`, `ETIMEDOUT` or `EACCES`, which is returned at the end if one gave it, else
/// `ENOENT`. A candidate that does not exist is passed over without starting a child for it.
/// `spawn` starts the child with a path that holds a `/`, so the C library searches no more.
/// None: a name or `PATH` too long to copy, left to the C library.
fn search_path(file: &[u8], spawn: impl Fn(Path) -> c_int) -> Option<c_int> {
    if file.is_empty() || file.len() > NAME_MAX_BYTES {
        return None;
    }
    // SAFETY: the C library's `getenv`, reading the environment in user mode.
    let var = unsafe { libc::getenv(c"PATH".as_ptr()) } as usize;
    let mut copy = [0u8; PATH_COPY];
    let dirs: &[u8] = if var == 0 {
        DEFAULT_PATH
    } else {
        let n = copy_string(var, &mut copy)?;
        &copy[..n - 1]
    };
    let saved = sys::errno();
    let mut denied = false;
    let mut candidate = [0u8; PATH_COPY];
    for dir in dirs.split(|&b| b == b':') {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let n = dir.len() + 1 + file.len();
        if n >= PATH_COPY {
            continue;
        }
        candidate[..dir.len()].copy_from_slice(dir);
        candidate[dir.len()] = b'/';
        candidate[dir.len() + 1..n].copy_from_slice(file);
        candidate[n] = 0;
        let c = candidate.as_ptr() as Path;
        // SAFETY: a NUL-terminated path on this stack.
        let absent =
            unsafe { libc::access(c, libc::F_OK) } != 0 && matches!(sys::errno(), libc::ENOENT | libc::ENOTDIR);
        sys::set_errno(saved);
        if absent {
            continue;
        }
        match spawn(c) {
            libc::EACCES => denied = true,
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
            r => return Some(r),
        }
    }
    Some(if denied { libc::EACCES } else { libc::ENOENT })
}

/// `system`: the C library's own, which starts `/bin/sh -c command` with its own
/// `posix_spawn`; the command and the environment are read first (`spawn_call`).
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn system(command: Path) -> c_int {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(Path) -> c_int> = unsafe { real_fn!(system) };
    let Some(g) = real else { return -1 };
    if crate::is_ready() && !command.is_null() {
        string_bytes(command as usize);
        touch_strings(environment());
    }
    // SAFETY: the caller's argument.
    unsafe { g(command) }
}

/// `popen`: as `system`.
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn popen(command: Path, mode: Path) -> Stream {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(Path, Path) -> Stream> = unsafe { real_fn!(popen) };
    let Some(g) = real else { return core::ptr::null_mut() };
    if crate::is_ready() && !command.is_null() {
        string_bytes(command as usize);
        touch_strings(environment());
    }
    // SAFETY: the caller's arguments.
    unsafe { g(command, mode) }
}

mod fills;
mod process;
mod waits;
