//! The process's attributes read or set through heap objects: its supplementary groups, the
//! processors it may run on, its resource usage, its scheduling, its threads' names, the
//! system's name and figures.
//!
//! Each of these calls reads its argument or writes its result with the kernel's own copy, so
//! a heap object whose page lost its entry makes it fail with `EFAULT` (see the parent
//! module). The calls that read first and act after, or only write a result they can write
//! again, are made again after `EFAULT` with the object's pages mapped (`call_again!`).
//!
//! `setgroups` is different: the C library makes it in every thread of the process (a
//! process's threads share their credentials), each thread's kernel reading the list itself,
//! and aborts the process when the threads' results differ ("setxid" failure). With the list
//! in a heap object, a pageout between two threads' reads killed a threaded program; so a heap
//! list is handed to the C library as a copy on the stack, which the kernel pages back in by
//! itself. `initgroups` builds its list in a heap object of the C library's own and calls the
//! C library's `setgroups` directly, so it is done here as the C library does it, with the
//! list got by `getgrouplist` into the stack. Lists of more than `GROUPS_LOCAL` groups are
//! left to the C library, made again after `EFAULT`.
//!
//! `times`' result goes through a local (`out_local`). The resource limits go through locals
//! too (`rlimit::prlimit`). `pthread_getaffinity_np` and `pthread_setaffinity_np` return their
//! error instead of setting `errno`.

use core::ffi::{c_char, c_int};
use core::sync::atomic::AtomicUsize;

use super::{again, again_code, out_local, path_args, raw, real, through_local};
use crate::alias;
use crate::sys;

type Gid = libc::gid_t;

/// Most groups a list handed to the kernel from the stack holds (1 KiB).
const GROUPS_LOCAL: usize = 256;

call_again! {
    /// `getgroups(2)`: see the module's documentation.
    fn getgroups(size: c_int, list: *mut Gid) -> c_int;
    libc::SYS_getgroups, [size, list];
    alias::map_again(list as usize, size.max(0) as usize * core::mem::size_of::<Gid>())
}

/// `setgroups(2)`: a list in the alias arena is handed to the C library as a copy on the
/// stack (see the module's documentation).
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn setgroups(n: usize, list: *const Gid) -> c_int {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(usize, *const Gid) -> c_int> = unsafe { real_fn!(setgroups) };
    let Some(g) = real else {
        return raw(libc::SYS_setgroups, path_args([n, list as usize])) as c_int;
    };
    if n == 0 || n > GROUPS_LOCAL || !through_local(list as usize) {
        // SAFETY: the caller's arguments.
        let call = || unsafe { g(n, list) } as isize;
        return again(call, || alias::map_again(list as usize, n * core::mem::size_of::<Gid>())) as c_int;
    }
    let mut local = [0 as Gid; GROUPS_LOCAL];
    // SAFETY: the program's list of `n` groups, read here in user mode, where a page that lost
    // its entry is mapped again by the fault handler; `n` fits the local.
    unsafe { core::ptr::copy_nonoverlapping(list, local.as_mut_ptr(), n) };
    // SAFETY: the C library's function with a list of `n` groups on this stack.
    unsafe { g(n, local.as_ptr()) }
}

/// `initgroups(3)`: the groups `getgrouplist` finds for `user`, and `group`, set with
/// `setgroups` from the stack, fewer when the kernel takes fewer (`EINVAL`), as the C
/// library's own does; more than `GROUPS_LOCAL` groups are left to the C library's own, made
/// again after `EFAULT` (see the module's documentation).
///
/// # Safety
/// The C contract of the function.
#[no_mangle]
pub unsafe extern "C" fn initgroups(user: *const c_char, group: Gid) -> c_int {
    // SAFETY: the C library's function of this name has this type.
    let real: Option<unsafe extern "C" fn(*const c_char, Gid) -> c_int> = unsafe { real_fn!(initgroups) };
    if crate::is_ready() {
        let mut local = [0 as Gid; GROUPS_LOCAL];
        let mut n = GROUPS_LOCAL as c_int;
        // SAFETY: the caller's user name; a list of `n` groups on this stack, which the C
        // library fills in user mode.
        if unsafe { libc::getgrouplist(user, group, local.as_mut_ptr(), &mut n) } >= 0 {
            let mut n = (n.max(0) as usize).min(GROUPS_LOCAL);
            loop {
                // SAFETY: `n` groups of the local list.
                let r = unsafe { setgroups(n, local.as_ptr()) };
                if r == 0 || sys::errno() != libc::EINVAL || n <= 1 {
                    return r;
                }
                n -= 1;
            }
        }
    }
    let Some(g) = real else {
        sys::set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: the caller's arguments. The C library's list is its own heap object, allocated
    // anew by each call: a call made again has it freshly mapped.
    again(|| unsafe { g(user, group) } as isize, || 1) as c_int
}

type CpuSet = *mut libc::cpu_set_t;
type CCpuSet = *const libc::cpu_set_t;

call_again! {
    /// `sched_getaffinity(2)`: see the module's documentation (sets of `CPU_ALLOC` are heap
    /// objects).
    fn sched_getaffinity(pid: libc::pid_t, size: usize, set: CpuSet) -> c_int;
    libc::SYS_sched_getaffinity, [pid, size, set];
    alias::map_again(set as usize, size)
}
call_again! {
    /// `sched_setaffinity(2)`: as `sched_getaffinity`.
    fn sched_setaffinity(pid: libc::pid_t, size: usize, set: CCpuSet) -> c_int;
    libc::SYS_sched_setaffinity, [pid, size, set];
    alias::map_again(set as usize, size)
}

code_again! {
    /// `pthread_getaffinity_np(3)`: as `sched_getaffinity`, with the error returned.
    fn pthread_getaffinity_np(thread: libc::pthread_t, size: usize, set: CpuSet);
    alias::map_again(set as usize, size)
}
code_again! {
    /// `pthread_setaffinity_np(3)`: as `sched_setaffinity`, with the error returned.
    fn pthread_setaffinity_np(thread: libc::pthread_t, size: usize, set: CCpuSet);
    alias::map_again(set as usize, size)
}

call_again! {
    /// `getrusage(2)`: see the module's documentation.
    fn getrusage(who: c_int, usage: *mut libc::rusage) -> c_int;
    libc::SYS_getrusage, [who, usage];
    alias::map_again(usage as usize, core::mem::size_of::<libc::rusage>())
}
forward! {
    /// `times(2)`: through a local. The C library's own, on `EFAULT`, touches the buffer (here
    /// in user mode, mapping its page again) and returns -14 as the time, without filling it.
    fn times(buf: *mut libc::tms) -> libc::clock_t;
    type unsafe extern "C" fn(*mut libc::tms) -> libc::clock_t;
    libc::SYS_times, [buf as usize, 0, 0, 0, 0, 0];
    |f| out_local(buf, f)
}
call_again! {
    /// `uname(2)`: see the module's documentation.
    fn uname(buf: *mut libc::utsname) -> c_int;
    libc::SYS_uname, [buf];
    alias::map_again(buf as usize, core::mem::size_of::<libc::utsname>())
}
call_again! {
    /// `sysinfo(2)`: see the module's documentation.
    fn sysinfo(info: *mut libc::sysinfo) -> c_int;
    libc::SYS_sysinfo, [info];
    alias::map_again(info as usize, core::mem::size_of::<libc::sysinfo>())
}

type Param = *const libc::sched_param;
const PARAM_BYTES: usize = core::mem::size_of::<libc::sched_param>();

call_again! {
    /// `sched_getparam(2)`: see the module's documentation.
    fn sched_getparam(pid: libc::pid_t, param: *mut libc::sched_param) -> c_int;
    libc::SYS_sched_getparam, [pid, param];
    alias::map_again(param as usize, PARAM_BYTES)
}
call_again! {
    /// `sched_setparam(2)`: see the module's documentation.
    fn sched_setparam(pid: libc::pid_t, param: Param) -> c_int;
    libc::SYS_sched_setparam, [pid, param];
    alias::map_again(param as usize, PARAM_BYTES)
}
call_again! {
    /// `sched_setscheduler(2)`: see the module's documentation.
    fn sched_setscheduler(pid: libc::pid_t, policy: c_int, param: Param) -> c_int;
    libc::SYS_sched_setscheduler, [pid, policy, param];
    alias::map_again(param as usize, PARAM_BYTES)
}
call_again! {
    /// `sched_rr_get_interval(2)`: see the module's documentation.
    fn sched_rr_get_interval(pid: libc::pid_t, time: *mut libc::timespec) -> c_int;
    libc::SYS_sched_rr_get_interval, [pid, time];
    alias::map_again(time as usize, core::mem::size_of::<libc::timespec>())
}

/// The most bytes of a thread's name, with its NUL (the kernel's `TASK_COMM_LEN`).
const NAME_BYTES: usize = 16;

code_again! {
    /// `pthread_getname_np(3)`: the C library's own reads the name with `prctl` (this thread)
    /// or from `/proc` with its own `read` (another), into the caller's buffer: made again
    /// after `EFAULT`, with the error returned.
    fn pthread_getname_np(thread: libc::pthread_t, buf: *mut c_char, len: usize);
    alias::map_again(buf as usize, len.min(NAME_BYTES))
}
code_again! {
    /// `pthread_setname_np(3)`: as `pthread_getname_np` (another thread's name is written to
    /// `/proc` with the C library's own `write`).
    fn pthread_setname_np(thread: libc::pthread_t, name: *const c_char);
    alias::map_again(name as usize, NAME_BYTES)
}
