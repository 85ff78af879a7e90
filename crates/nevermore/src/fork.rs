//! `fork` support. The pool is a shared memory file, so a plain `fork` would leave parent and
//! child writing the same physical pages. Around `fork` (registered with `pthread_atfork`):
//!
//! - *prepare* (parent, before the fork): take every allocator lock, so no metadata is
//!   mid-update, then copy the pool's populated pages into a fresh memfd (holes stay holes:
//!   `SEEK_DATA`/`SEEK_HOLE` find the data);
//! - *child*: map the copy over the canonical view, every live mirror and every large-object
//!   view (`MAP_FIXED`), then give parts of them back the protection the program had set
//!   (`maps::Protections`); open a userfaultfd of its own and register the mirrors with it;
//!   release the locks; adopt the caches of threads that do not exist in the child; and install
//!   every live alias again, so that the kernel, too, can access live objects at once (a
//!   missing entry would make `read(2)` into a live buffer fail with EFAULT);
//! - *parent*: drop the copy's descriptor and release the locks.
//!
//! The copy is taken before the fork while other threads may still be writing their own
//! objects: the child sees each such object as it was at some moment during the copy — the
//! same uncertainty a child has about any memory that other threads write around a `fork`.

use core::sync::atomic::{AtomicI32, Ordering};

use crate::pool::{self, POOL};
use crate::sys::{self, PAGE, PAGE_SHIFT};
use crate::{alias, cache, large, meta, report, slab, stats, tls};

/// The copy made by *prepare*: its descriptor, or -1 when the copy failed.
static COPY_FD: AtomicI32 = AtomicI32::new(-1);

fn all_locks(mut f: impl FnMut(&crate::lock::RawMutex)) {
    f(cache::stage_lock());
    f(cache::raw_lock());
    for c in slab::CENTRAL.iter() {
        f(c.raw());
    }
    for t in slab::FREE_TABLES.iter() {
        f(t.raw());
    }
    f(alias::raw_lock());
    f(POOL.raw_lock());
    f(large::raw_lock());
    f(meta::raw_lock());
    f(crate::stack::loader_lock());
}

/// Makes a process with `fork_call` (a fork that runs no fork handlers: the C library's
/// `_Fork`, or the system call itself) around the steps `fork`'s handlers take: `prepare`
/// before, then `child` where it returns 0, else `parent`, keeping the call's errno.
pub fn around<T: PartialEq + Default>(fork_call: impl FnOnce() -> T) -> T {
    let ready = crate::is_ready();
    if ready {
        prepare();
    }
    let r = fork_call();
    if ready {
        let saved = sys::errno();
        if r == T::default() {
            child();
        } else {
            parent();
        }
        sys::set_errno(saved);
    }
    r
}

pub extern "C" fn prepare() {
    if !crate::is_ready() {
        return;
    }
    let mut held_here = false;
    all_locks(|l| held_here |= l.held_here());
    if held_here {
        // A fork in a signal handler that interrupted this thread inside the allocator, which
        // holds a lock there: waiting for it would wait for ever, and copying the heap without
        // it could copy metadata half-changed. The fork goes on (glibc's `fork` cannot be
        // refused from here), and the child, which shares the pool with its parent, exits
        // before it touches the heap (`child`).
        REFUSED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    cache::flush_before_fork();
    // From here until `parent`/`child` this thread holds every lock: a signal handler that
    // allocates meanwhile must take the re-entrant paths.
    tls::enter();
    all_locks(|l| l.lock());
    IN_FORK.store(true, Ordering::Relaxed);
    COPY_FD.store(copy_pool(), Ordering::Relaxed);
}

/// Forks under way whose `prepare` found a lock held by its own thread (a fork in a signal
/// handler that interrupted the allocator), each counted until its `parent`, or seen by its
/// `child`. A count, not a flag: two threads may be in that case at once. A fork whose
/// `prepare` took every lock never sees one: another thread's refused fork holds (below its
/// handler) a lock that such a `prepare` waits for until that fork's `parent` ran.
static REFUSED: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

/// Set while a forking thread holds every lock (between `prepare` and `parent`/`child`), so
/// that those leave exactly the allocator level that `prepare` entered.
static IN_FORK: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

fn leave_fork() {
    if IN_FORK.swap(false, Ordering::Relaxed) {
        tls::leave();
    }
}

/// Copies the pool's populated pages into a new memfd; returns it, or -1.
fn copy_pool() -> i32 {
    let l = POOL.layout();
    // SAFETY: the pool lock is held (taken in `prepare`).
    let (bump, _) = unsafe { POOL.fork_view() };
    let used = (bump as usize) << PAGE_SHIFT;
    let fd = sys::memfd(crate::pool::MEMFD_NAME);
    if fd < 0 {
        return -1;
    }
    if !sys::ftruncate(fd, (l.pages as usize) << PAGE_SHIFT) {
        sys::close(fd);
        return -1;
    }
    if used == 0 {
        return fd;
    }
    let mut copied = 0usize;
    // Copies from the canonical view with `pwrite`, not through a mapping of the copy: that
    // would take as much address space as the heap in use, which a process near its
    // `RLIMIT_AS` does not have (its fork failed). Returns false when the copy fell short.
    let copy = |from: usize, to: usize, copied: &mut usize| {
        pool::prefill_small(fd, from, to - from);
        // SAFETY: `from..to` lies inside `used` bytes of the canonical view.
        let n = unsafe { sys::write_at(fd, (l.base + from) as *const u8, to - from, from) };
        *copied += n;
        n == to - from
    };
    let mut whole = true;
    if sys::file_id(l.fd) == Some(l.file) {
        let mut off = 0;
        while off < used {
            let Some(data) = sys::seek(l.fd, off, libc::SEEK_DATA) else { break };
            if data >= used {
                break;
            }
            let hole = sys::seek(l.fd, data, libc::SEEK_HOLE).unwrap_or(used).min(used);
            let pages = ((data >> PAGE_SHIFT) as u32, hole.div_ceil(PAGE) as u32);
            // SAFETY: the pool lock is held; the range lies below the bump.
            unsafe {
                POOL.fork_ranges(pages.0, pages.1, |a, b| {
                    let (a, b) = (((a as usize) << PAGE_SHIFT).max(data), ((b as usize) << PAGE_SHIFT).min(hole));
                    // In the kernel first: twice as fast here as copying through mappings,
                    // and it leaves the canonical view unmapped (read through it, every page
                    // of the heap would count twice in the parent's RSS from then on).
                    pool::prefill_small(fd, a, b - a);
                    let done = sys::copy_range(l.fd, fd, a, b - a);
                    copied += done;
                    if a + done < b && whole {
                        whole = copy(a + done, b, &mut copied);
                    }
                })
            };
            off = hole;
        }
    } else if seccomp_in_force() {
        // The program closed or replaced our descriptor, and a seccomp filter may kill the
        // process for `mincore` (systemd's `SystemCallFilter=@system-service` leaves it out):
        // copy every page of the spans in use, whether it holds data or not (those that did
        // not become memory, in both processes).
        // SAFETY: the pool lock is held; the range lies below the bump.
        unsafe {
            POOL.fork_ranges(0, bump, |a, b| {
                whole = whole && copy((a as usize) << PAGE_SHIFT, (b as usize) << PAGE_SHIFT, &mut copied);
            })
        };
    } else {
        // The program closed or replaced our descriptor: find the populated pages with
        // `mincore` (for a shared file mapping it reports the file's cached pages) and copy
        // those. Pages of the pool that were swapped out are not seen this way; this is the
        // one case where a child could miss data, and it needs both a closed descriptor and
        // swap. A small table (2 MiB of the pool per call): `fork` is async-signal-safe, and
        // this frame may sit on a small alternate signal stack.
        let mut vec = [0u8; 512];
        let mut off = 0;
        let mut run: Option<usize> = None;
        while off < used && whole {
            let len = (used - off).min(vec.len() << PAGE_SHIFT);
            // SAFETY: the range lies inside the canonical view; `vec` has a byte per page.
            let ok = unsafe { libc::mincore((l.base + off) as *mut libc::c_void, len, vec.as_mut_ptr()) } == 0;
            for (i, v) in vec.iter().enumerate().take(len >> PAGE_SHIFT) {
                let page = off + (i << PAGE_SHIFT);
                let resident = !ok || v & 1 != 0;
                match (resident, run) {
                    (true, None) => run = Some(page),
                    (false, Some(from)) => {
                        whole = whole && copy(from, page, &mut copied);
                        run = None;
                    }
                    _ => {}
                }
            }
            off += len;
        }
        if let (Some(from), true) = (run, whole) {
            whole = copy(from, used, &mut copied);
        }
    }
    if !whole {
        sys::close(fd);
        return -1;
    }
    stats::add(&stats::FORKS, 1);
    stats::add(&stats::FORK_COPIED_BYTES, copied as u64);
    fd
}

/// Whether a seccomp filter is in force (or that cannot be told): the `Seccomp:` line of
/// `/proc/self/status`, which also shows filters installed before the program started.
fn seccomp_in_force() -> bool {
    crate::seccomp::filtered() || crate::stats::proc_status_kb(b"Seccomp") != Some(0)
}

pub extern "C" fn parent() {
    if !crate::is_ready() {
        return;
    }
    if REFUSED.load(Ordering::Relaxed) > 0 {
        REFUSED.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    let fd = COPY_FD.swap(-1, Ordering::Relaxed);
    if fd >= 0 {
        sys::close(fd);
    }
    let entered = IN_FORK.swap(false, Ordering::Relaxed);
    all_locks(|l| l.unlock());
    if entered {
        tls::leave();
    }
}

pub extern "C" fn child() {
    if !crate::is_ready() {
        return;
    }
    if REFUSED.load(Ordering::Relaxed) > 0 {
        report::say(format_args!(
            "fork in a signal handler that interrupted the allocator on the same thread (which holds \
             one of its locks): the child could not get a heap of its own, and exits with status 127"
        ));
        // SAFETY: ending the child before it can write memory it shares with its parent.
        unsafe { libc::_exit(127) };
    }
    let fd = COPY_FD.swap(-1, Ordering::Relaxed);
    // Mapping the views afresh drops what the program's `mprotect` made of parts of them.
    let protections = crate::maps::Protections::record();
    // SAFETY: this is the only thread of the child and it holds every lock.
    let ok = fd >= 0 && adopt_copy(fd) && unsafe { alias::reopen_uffd_in_child() && alias::remap_in_child() };
    if !ok {
        report::say(format_args!(
            "fork: could not give the child its own copy of the heap (errno {}); the child exits",
            sys::errno()
        ));
        // SAFETY: ending the child before it can write memory it shares with its parent.
        unsafe { libc::_exit(127) };
    }
    all_locks(|l| l.reset());
    crate::fault::fork_child();
    // A thread that a sweep's holder let go on to leave the allocator may fork meanwhile: the
    // child has no holder, and no sweep of its own runs.
    crate::reentry::end_park();
    crate::sweep::fork_child();
    // SAFETY: single-threaded child, locks reset.
    unsafe {
        alias::retrap_in_child();
        cache::fork_child(tls::get());
    }
    protections.restore();
    alias::reinstall_live();
    leave_fork();
}

/// glibc's `clone()` without `CLONE_VM`: a fork without fork handlers (see `api::clone`).
#[cfg(target_arch = "x86_64")]
pub mod clone {
    use super::child;
    use crate::{report, sys};

    /// The function of a `clone` child (C's `int (*)(void *)`).
    pub type CloneFn = unsafe extern "C" fn(*mut core::ffi::c_void) -> core::ffi::c_int;

    /// What the child of a fork-like `clone` (see `api::clone`) runs after our `child` handler.
    #[repr(C)]
    pub struct CloneStart {
        pub function: CloneFn,
        pub arg: *mut core::ffi::c_void,
    }

    /// Stack of the child handler of a fork-like `clone` (see `clone_child`).
    const CLONE_HANDLER_STACK: usize = 256 << 10;

    /// The first code of a fork-like `clone`'s child: the steps of `fork`'s child handler, then
    /// the program's function. The stack it starts on is the program's, and programs often cut it
    /// out of the heap (`clone(f, malloc(N) + N, ...)`): the handler maps the child's copy of the
    /// pool over the heap, which takes the stack's contents back to when the copy was made, so
    /// that the frames written since (this one's among them) would be lost. So the handler runs
    /// on a stack of its own, and the program's function is then called on a fresh start of the
    /// program's stack, never returning into frames from before the copy; its result ends the
    /// process, as glibc's `clone` does.
    ///
    /// # Safety
    /// `start` points to a `CloneStart` in the memory the child copied from its parent, outside
    /// the pool (`api::clone` passes a record on its own stack).
    pub unsafe extern "C" fn clone_child(start: *mut core::ffi::c_void) -> core::ffi::c_int {
        let top = sys::new_stack(CLONE_HANDLER_STACK);
        if top == 0 {
            report::say(format_args!(
                "clone: no stack for the child's fork handler (errno {}); the child exits",
                sys::errno()
            ));
            // SAFETY: ending the child before it can write memory it shares with its parent.
            unsafe { libc::_exit(127) }
        }
        let mut job = (start, crate::stack::regs_here().sp);
        // SAFETY: a fresh stack of ours; `job` is read there before anything is remapped.
        unsafe { sys::run_on_stack(top, clone_child_on_own_stack, &mut job as *mut _ as *mut core::ffi::c_void) }
    }

    /// `clone_child` on the handler's own stack; `job` holds the `CloneStart` and where the
    /// program's stack was.
    extern "C" fn clone_child_on_own_stack(job: *mut core::ffi::c_void) -> ! {
        // SAFETY: `clone_child`'s record, read before the handler remaps the pool (the program's
        // stack, where it lies, may be in it); `start` is valid (`clone_child`'s contract) and
        // outside the pool.
        let (function, arg, program_sp) = unsafe {
            let (start, sp) = *(job as *const (*mut core::ffi::c_void, usize));
            let s = &*(start as *const CloneStart);
            (s.function, s.arg, sp)
        };
        child();
        let mut start = (function, arg);
        // SAFETY: the program's function on its own stack, below everything written there so far
        // (16-byte aligned as the ABI wants it at a call), from the stack's outermost frame;
        // `start` stays on this stack, which is never unmapped.
        unsafe { sys::run_on_stack(program_sp & !15, run_program, &mut start as *mut _ as *mut core::ffi::c_void) }
    }

    /// The program's function of a fork-like `clone` (`start`: the function and its argument),
    /// then the exit system call with its result, as glibc's `clone` ends its child.
    extern "C" fn run_program(start: *mut core::ffi::c_void) -> ! {
        // SAFETY: `clone_child_on_own_stack`'s record, on the handler's stack.
        let (function, arg) = unsafe { *(start as *const (CloneFn, *mut core::ffi::c_void)) };
        // SAFETY: the program's function and argument, as it gave them to `clone`.
        let status = unsafe { function(arg) };
        loop {
            // SAFETY: ends the calling thread (the child's only one) with that status.
            unsafe { sys::raw_syscall(libc::SYS_exit, [status as usize, 0, 0, 0, 0, 0]) };
        }
    }
}

/// Maps the copy in place of the shared pool, in the canonical view and in every live large
/// object's view.
fn adopt_copy(fd: i32) -> bool {
    // SAFETY: the only thread of the child, holding every lock.
    let l = unsafe { POOL.layout_mut() };
    let len = (l.pages as usize) << PAGE_SHIFT;
    if sys::map_shared(l.base as *mut u8, len, fd, 0).is_null() {
        return false;
    }
    pool::keep_view_small(l.base, len);
    // SAFETY: as above.
    let (_, mut idx) = unsafe { POOL.fork_view() };
    while idx != pool::NONE {
        let s = POOL.span(idx);
        // A view still being set up or torn down by another thread of the parent belongs to
        // no live object here: that thread does not exist in the child.
        if s.view_len != 0
            && s.size.load(core::sync::atomic::Ordering::Acquire) & pool::DEAD_BIT == 0
            && !sys::duplicate_view(POOL.page_addr(s.start) as *mut u8, s.view as *mut u8, s.view_len)
        {
            return false;
        }
        idx = s.next;
    }
    // The parent's descriptor, unless the program closed it or put one of its own at that
    // number (`dup2`): then the number is the program's, and stays open.
    if sys::file_id(l.fd) == Some(l.file) {
        sys::close(l.fd);
    }
    l.fd = fd;
    l.file = sys::file_id(fd).unwrap_or((0, 0));
    true
}
