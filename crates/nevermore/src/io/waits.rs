//! Signals, sleeps, timers, eventfd counters, System V and POSIX messages through heap
//! objects.
//!
//! As in the parent module: a call that reads its argument before it does anything fails
//! with `EFAULT` when the argument's page lost its entry, and is made again with the page
//! mapped (`sigpending`, `signalfd`, `getitimer`, `timerfd_gettime`, `timer_gettime`,
//! `msgsnd`, `msgctl`, `shmctl`, `semop`, `semtimedop`, `semctl`, `mq_send`, `mq_getattr`,
//! the signal sets of the waits, the requested time of a sleep, the new value of a timer). What the kernel writes after doing
//! what cannot be done again goes through a local copied here in user mode:
//!
//! - `sigtimedwait` and `sigwaitinfo` write the signal's `siginfo_t` after taking the signal:
//!   the signal was lost;
//! - `nanosleep` and `clock_nanosleep` write the time left when a signal interrupts them,
//!   and fail with `EFAULT` instead of `EINTR` when they cannot: made again, they would sleep
//!   the whole time again;
//! - `setitimer`, `timerfd_settime` and `timer_settime` write the old value after setting the
//!   new one;
//! - `eventfd_read` is the C library's own `read` of the counter, which the kernel resets
//!   before it writes it out: the count was lost;
//! - `msgrcv` and `mq_receive` take the message off its queue before they copy it out: the
//!   message was lost. A buffer of up to `MESSAGE_LOCAL` bytes goes through a local, a longer
//!   one through memory of the library's own mapped for the call (when that cannot be mapped,
//!   the call is made into the program's buffer). `mq_setattr` writes the old attributes after
//!   setting the new.

use core::ffi::{c_int, c_long, c_void};
use core::sync::atomic::AtomicUsize;

use super::{again, again_code, out_local, path_args, raw, real, through_local};
use crate::alias;
use crate::sys;

type SigSet = *const libc::sigset_t;
type Info = *mut libc::siginfo_t;
type Time = *const libc::timespec;
type Rest = *mut libc::timespec;

const SIGSET_BYTES: usize = core::mem::size_of::<libc::sigset_t>();
const TIMESPEC_BYTES: usize = core::mem::size_of::<libc::timespec>();

// ---- signals ----

forward! {
    /// `sigtimedwait(2)`: see the module's documentation.
    fn sigtimedwait(set: SigSet, info: Info, timeout: Time) -> c_int;
    type unsafe extern "C" fn(SigSet, Info, Time) -> c_int;
    libc::SYS_rt_sigtimedwait, [set as usize, info as usize, timeout as usize, 8, 0, 0];
    |f| again(
        || out_local(info, |i| f(set, i, timeout)),
        || alias::map_again(set as usize, SIGSET_BYTES) + alias::map_again(timeout as usize, TIMESPEC_BYTES),
    )
}

forward! {
    /// `sigwaitinfo(2)`: as `sigtimedwait`.
    fn sigwaitinfo(set: SigSet, info: Info) -> c_int;
    type unsafe extern "C" fn(SigSet, Info) -> c_int;
    libc::SYS_rt_sigtimedwait, [set as usize, info as usize, 0, 8, 0, 0];
    |f| again(|| out_local(info, |i| f(set, i)), || alias::map_again(set as usize, SIGSET_BYTES))
}

code_again! {
    /// `sigwait(3)`: the set made again after `EFAULT` (the C library's own receives the
    /// signal in a local and writes its number in user mode).
    fn sigwait(set: SigSet, sig: *mut c_int);
    alias::map_again(set as usize, SIGSET_BYTES)
}

call_again! {
    /// `sigpending(2)`: see the module's documentation.
    fn sigpending(set: *mut libc::sigset_t) -> c_int;
    libc::SYS_rt_sigpending, [set, 8];
    alias::map_again(set as usize, SIGSET_BYTES)
}

call_again! {
    /// `signalfd(2)`: see the module's documentation.
    fn signalfd(fd: c_int, mask: SigSet, flags: c_int) -> c_int;
    libc::SYS_signalfd4, [fd, mask, 8, flags];
    alias::map_again(mask as usize, SIGSET_BYTES)
}

// ---- sleeps ----

/// `call(rest)` with the time left received in a local when `rest` lies in the alias arena,
/// copied to `rest` when `interrupted` says the kernel wrote it (see the module's
/// documentation).
fn rest_local(rest: Rest, call: impl FnOnce(Rest) -> isize, interrupted: impl Fn(isize) -> bool) -> isize {
    if !through_local(rest as usize) {
        return call(rest);
    }
    let mut local = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    let r = call(&mut local);
    if interrupted(r) {
        // SAFETY: the program's result, written here in user mode (a page that lost its entry
        // is mapped again by the fault handler, which keeps `errno`).
        unsafe { rest.write_unaligned(local) };
    }
    r
}

forward! {
    /// `nanosleep(2)`: see the module's documentation.
    fn nanosleep(time: Time, rest: Rest) -> c_int;
    type unsafe extern "C" fn(Time, Rest) -> c_int;
    libc::SYS_nanosleep, [time as usize, rest as usize, 0, 0, 0, 0];
    |f| again(
        || rest_local(rest, |r| f(time, r), |r| r < 0 && sys::errno() == libc::EINTR),
        || alias::map_again(time as usize, TIMESPEC_BYTES),
    )
}

/// `clock_nanosleep(2)`: as `nanosleep`, with the error returned.
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn clock_nanosleep(clock: libc::clockid_t, flags: c_int, time: Time, rest: Rest) -> c_int {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(libc::clockid_t, c_int, Time, Rest) -> c_int> =
        unsafe { real_fn!(clock_nanosleep) };
    let Some(g) = real else { return libc::ENOSYS };
    again_code(
        || {
            // SAFETY: the caller's arguments, the time left perhaps in a local.
            let sleep = |r: Rest| unsafe { g(clock, flags, time, r) } as isize;
            rest_local(rest, sleep, |r| r == libc::EINTR as isize) as c_int
        },
        || alias::map_again(time as usize, TIMESPEC_BYTES),
    )
}

// ---- timers ----

type ItimerVal = *mut libc::itimerval;
type ItimerSpec = *mut libc::itimerspec;

forward! {
    /// `setitimer(2)`: see the module's documentation.
    fn setitimer(which: c_int, new: *const libc::itimerval, old: ItimerVal) -> c_int;
    type unsafe extern "C" fn(c_int, *const libc::itimerval, ItimerVal) -> c_int;
    libc::SYS_setitimer, [which as usize, new as usize, old as usize, 0, 0, 0];
    |f| again(
        || out_local(old, |o| f(which, new, o)),
        || alias::map_again(new as usize, core::mem::size_of::<libc::itimerval>()),
    )
}

call_again! {
    /// `getitimer(2)`: see the module's documentation.
    fn getitimer(which: c_int, value: ItimerVal) -> c_int;
    libc::SYS_getitimer, [which, value];
    alias::map_again(value as usize, core::mem::size_of::<libc::itimerval>())
}

const ITIMERSPEC_BYTES: usize = core::mem::size_of::<libc::itimerspec>();

type Timer = *mut c_void;

/// Defines the wrappers of a timer's `settime` and `gettime` (`timerfd_*`, `timer_*`),
/// which name the timer by a `$handle`.
macro_rules! timer_calls {
    ($set:ident, $set_nr:expr, $get:ident, $get_nr:expr, $handle:ty) => {
        forward! {
            /// `timerfd_settime(2)`, `timer_settime(2)`: see the module's documentation. (The
            /// system call, without the C library, takes the kernel's timer number, which a
            /// `timer_t` of `SIGEV_THREAD` is not.)
            fn $set(timer: $handle, flags: c_int, new: *const libc::itimerspec, old: ItimerSpec) -> c_int;
            type unsafe extern "C" fn($handle, c_int, *const libc::itimerspec, ItimerSpec) -> c_int;
            $set_nr, [timer as usize, flags as usize, new as usize, old as usize, 0, 0];
            |f| again(|| out_local(old, |o| f(timer, flags, new, o)), || alias::map_again(new as usize, ITIMERSPEC_BYTES))
        }
        call_again! {
            /// `timerfd_gettime(2)`, `timer_gettime(2)`: see the module's documentation.
            fn $get(timer: $handle, value: ItimerSpec) -> c_int;
            $get_nr, [timer, value];
            alias::map_again(value as usize, ITIMERSPEC_BYTES)
        }
    };
}
timer_calls!(timerfd_settime, libc::SYS_timerfd_settime, timerfd_gettime, libc::SYS_timerfd_gettime, c_int);
timer_calls!(timer_settime, libc::SYS_timer_settime, timer_gettime, libc::SYS_timer_gettime, Timer);

forward! {
    /// `eventfd_read(3)`: see the module's documentation.
    fn eventfd_read(fd: c_int, value: *mut u64) -> c_int;
    type unsafe extern "C" fn(c_int, *mut u64) -> c_int;
    libc::SYS_read, [fd as usize, value as usize, 8, 0, 0, 0];
    |f| out_local(value, |v| f(fd, v))
}

// ---- System V messages and semaphores ----

/// The longest message `msgrcv` and `mq_receive` receive through a local: the default bound
/// on a System V message (`MSGMAX`) and on a POSIX queue's messages (`msgsize_max`).
const MESSAGE_LOCAL: usize = 8192;

call_again! {
    /// `msgsnd(2)`: see the module's documentation (its type and text).
    fn msgsnd(id: c_int, msg: *const c_void, size: usize, flags: c_int) -> c_int;
    libc::SYS_msgsnd, [id, msg, size, flags];
    alias::map_again(msg as usize, size.saturating_add(8))
}

forward! {
    /// `msgrcv(2)`: see the module's documentation.
    fn msgrcv(id: c_int, msg: *mut c_void, size: usize, kind: c_long, flags: c_int) -> isize;
    type unsafe extern "C" fn(c_int, *mut c_void, usize, c_long, c_int) -> isize;
    libc::SYS_msgrcv, [id as usize, msg as usize, size, kind as usize, flags as usize, 0];
    |f| message_in(msg, size, 8, |m| f(id, m, size, kind, flags))
}

/// `call(msg)` with the message received, when `msg` lies in the alias arena, in memory the
/// kernel cannot fail to write, copied out after: its `header` bytes (`msgrcv`'s type) and the
/// `r` bytes the call returns. A local when its `size` bytes fit `MESSAGE_LOCAL`, else a
/// mapping of the library's own for the call; `msg` itself when that cannot be mapped.
fn message_in(msg: *mut c_void, size: usize, header: usize, call: impl FnOnce(*mut c_void) -> isize) -> isize {
    if !through_local(msg as usize) {
        return call(msg);
    }
    let copy_out = |from: *const u8, r: isize| {
        if r >= 0 {
            // SAFETY: the kernel wrote the header and `r` (at most `size`) bytes at `from`; the
            // program's buffer holds the header and `size` bytes; written in user mode.
            unsafe { core::ptr::copy_nonoverlapping(from, msg as *mut u8, header + r as usize) };
        }
        r
    };
    if size <= MESSAGE_LOCAL {
        let mut local = core::mem::MaybeUninit::<[u64; 1 + MESSAGE_LOCAL / 8]>::uninit();
        let r = call(local.as_mut_ptr() as *mut c_void);
        return copy_out(local.as_ptr() as *const u8, r);
    }
    let len = size.saturating_add(header);
    let own = sys::map_meta(len);
    if own.is_null() {
        return call(msg);
    }
    let r = call(own as *mut c_void);
    let r = copy_out(own, r);
    sys::unmap(own, len);
    r
}

call_again! {
    /// `msgctl(2)`: see the module's documentation.
    fn msgctl(id: c_int, cmd: c_int, buf: *mut libc::msqid_ds) -> c_int;
    libc::SYS_msgctl, [id, cmd, buf];
    alias::map_again(buf as usize, core::mem::size_of::<libc::msqid_ds>())
}

call_again! {
    /// `shmctl(2)`: see the module's documentation.
    fn shmctl(id: c_int, cmd: c_int, buf: *mut libc::shmid_ds) -> c_int;
    libc::SYS_shmctl, [id, cmd, buf];
    alias::map_again(buf as usize, core::mem::size_of::<libc::shmid_ds>())
}

call_again! {
    /// `semop(2)`: see the module's documentation.
    fn semop(id: c_int, ops: *mut libc::sembuf, n: usize) -> c_int;
    libc::SYS_semop, [id, ops, n];
    alias::map_again(ops as usize, n.saturating_mul(core::mem::size_of::<libc::sembuf>()))
}

call_again! {
    /// `semtimedop(2)`: as `semop`, and its timeout.
    fn semtimedop(id: c_int, ops: *mut libc::sembuf, n: usize, timeout: Time) -> c_int;
    libc::SYS_semtimedop, [id, ops, n, timeout];
    alias::map_again(ops as usize, n.saturating_mul(core::mem::size_of::<libc::sembuf>()))
        + alias::map_again(timeout as usize, TIMESPEC_BYTES)
}

/// `semctl(2)`: the record (`IPC_STAT`, `IPC_SET`, `SEM_STAT`, `IPC_INFO`, ...) or the array
/// of values (`GETALL`, `SETALL`) its fourth argument points to, made again after `EFAULT`;
/// `GETALL` writes after reading, and `SETALL` reads before setting. (C declares it variadic,
/// the fourth argument a `union semun`; on x86-64 it travels as this fixed word.)
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn semctl(id: c_int, num: c_int, cmd: c_int, arg: usize) -> c_int {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(c_int, c_int, c_int, usize) -> c_int> = unsafe { real_fn!(semctl) };
    let call = || match real {
        // SAFETY: the caller's arguments.
        Some(g) => (unsafe { g(id, num, cmd, arg) }) as isize,
        None => raw(libc::SYS_semctl, [id as usize, num as usize, cmd as usize, arg, 0, 0]),
    };
    let record = match cmd & !IPC_64 {
        libc::IPC_STAT | libc::IPC_SET | SEM_STAT | SEM_STAT_ANY => core::mem::size_of::<libc::semid_ds>(),
        libc::IPC_INFO | libc::SEM_INFO => core::mem::size_of::<libc::seminfo>(),
        libc::GETALL | libc::SETALL => usize::MAX,
        _ => return call() as c_int,
    };
    again(call, || {
        // The values of every semaphore of the set: two bytes each.
        let n = if record == usize::MAX { semaphores(id, real) * 2 } else { record };
        alias::map_again(arg, n)
    }) as c_int
}

/// `IPC_64`, which the C library adds to `semctl`'s commands itself; `SEM_STAT` and
/// `SEM_STAT_ANY` without it.
const IPC_64: c_int = 0x100;
const SEM_STAT: c_int = 18;
const SEM_STAT_ANY: c_int = 20;

/// The number of semaphores in the set `id` (`IPC_STAT` into a local), or 0.
fn semaphores(id: c_int, real: Option<unsafe extern "C" fn(c_int, c_int, c_int, usize) -> c_int>) -> usize {
    let Some(g) = real else { return 0 };
    let mut ds = core::mem::MaybeUninit::<libc::semid_ds>::zeroed();
    // SAFETY: the C library's semctl(IPC_STAT) into a record on this stack.
    if unsafe { g(id, 0, libc::IPC_STAT, ds.as_mut_ptr() as usize) } != 0 {
        return 0;
    }
    // SAFETY: filled by the call above.
    unsafe { ds.assume_init() }.sem_nsems as usize
}

// ---- POSIX message queues ----

type Mqd = c_int;
type Priority = *mut libc::c_uint;
const MQ_ATTR_BYTES: usize = core::mem::size_of::<libc::mq_attr>();

forward! {
    /// `mq_receive(3)`: see the module's documentation; its message and priority, which the
    /// kernel writes after taking the message off the queue, through locals (as `msgrcv`).
    fn mq_receive(q: Mqd, buf: *mut libc::c_char, len: usize, priority: Priority) -> isize;
    type unsafe extern "C" fn(Mqd, *mut libc::c_char, usize, Priority) -> isize;
    libc::SYS_mq_timedreceive, [q as usize, buf as usize, len, priority as usize, 0, 0];
    |f| out_local(priority, |p| message_in(buf as *mut c_void, len, 0, |b| f(q, b as *mut libc::c_char, len, p)))
}

forward! {
    /// `mq_timedreceive(3)`: as `mq_receive`; its timeout made again after `EFAULT`.
    fn mq_timedreceive(q: Mqd, buf: *mut libc::c_char, len: usize, priority: Priority, timeout: Time) -> isize;
    type unsafe extern "C" fn(Mqd, *mut libc::c_char, usize, Priority, Time) -> isize;
    libc::SYS_mq_timedreceive, [q as usize, buf as usize, len, priority as usize, timeout as usize, 0];
    |f| again(
        || out_local(priority, |p| message_in(buf as *mut c_void, len, 0, |b| f(q, b as *mut libc::c_char, len, p, timeout))),
        || alias::map_again(timeout as usize, TIMESPEC_BYTES),
    )
}

call_again! {
    /// `mq_send(3)`: see the module's documentation.
    fn mq_send(q: Mqd, buf: *const libc::c_char, len: usize, priority: libc::c_uint) -> c_int;
    libc::SYS_mq_timedsend, [q, buf, len, priority, 0];
    alias::map_again(buf as usize, len)
}

call_again! {
    /// `mq_timedsend(3)`: as `mq_send`, and its timeout.
    fn mq_timedsend(q: Mqd, buf: *const libc::c_char, len: usize, priority: libc::c_uint, timeout: Time) -> c_int;
    libc::SYS_mq_timedsend, [q, buf, len, priority, timeout];
    alias::map_again(buf as usize, len) + alias::map_again(timeout as usize, TIMESPEC_BYTES)
}

call_again! {
    /// `mq_getattr(3)`: see the module's documentation.
    fn mq_getattr(q: Mqd, attr: *mut libc::mq_attr) -> c_int;
    libc::SYS_mq_getsetattr, [q, 0, attr];
    alias::map_again(attr as usize, MQ_ATTR_BYTES)
}

forward! {
    /// `mq_setattr(3)`: the old attributes, written after the new are set, through a local.
    fn mq_setattr(q: Mqd, new: *const libc::mq_attr, old: *mut libc::mq_attr) -> c_int;
    type unsafe extern "C" fn(Mqd, *const libc::mq_attr, *mut libc::mq_attr) -> c_int;
    libc::SYS_mq_getsetattr, [q as usize, new as usize, old as usize, 0, 0, 0];
    |f| again(|| out_local(old, |o| f(q, new, o)), || alias::map_again(new as usize, MQ_ATTR_BYTES))
}
