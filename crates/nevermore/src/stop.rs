//! Other threads held still while a sweep reads the process (prevent mode).
//!
//! A sweep's proof (`sweep`) needs the process to stand still: a running thread could move a
//! pointer from memory not yet read to memory already read, or keep it only in a register. In
//! a process with one thread the sweeping thread is all there is. With more, a *holder* task
//! stops the others with ptrace, as debuggers and LeakSanitizer do:
//!
//! - The holder is a task of its own (`clone` without `CLONE_THREAD`: no thread may trace a
//!   thread of its own group) that shares the address space. It runs on a stack of ours with
//!   every signal blocked and makes raw system calls only (`sys::raw_syscall`, the futex calls): it shares the sweeping thread's
//!   thread pointer, so it must touch no thread-local state (not even `errno`).
//! - It seizes every other thread listed in `/proc/PID/task` (`PTRACE_SEIZE`) and stops it
//!   (`PTRACE_INTERRUPT`). A thread stopped so inside a system call goes on with the call
//!   afterwards as if nothing happened: no `EINTR`, which stopping threads with a signal would
//!   cause in `poll`, `epoll_wait`, `nanosleep`, `sem_wait` and more. It lists the threads
//!   again until no new one appeared.
//! - A thread stopped inside the allocator (its depth word, read through its thread pointer,
//!   is not zero) may be half-way through changing what the sweep reads, or hold a lock the
//!   sweep takes: it is let go on for a moment and stopped again, until every thread is
//!   outside, for at most `MAX_ROUNDS` rounds (then the sweep waits for another time).
//! - The sweep reads the stopped threads' registers through the holder: the general-purpose
//!   ones and the vector ones (`NT_X86_XSTATE`: `memcpy` and `memmove` carry pointers there).
//! - While the threads are held, the holder also reads a share of the heap (`Scan::share`)
//!   beside the sweeping thread, on a second processor. A fault there (a live alias that lost
//!   its page-table entry: dropped by the program's `madvise`, a swap-in) goes to a handler of its own (`on_fault`),
//!   which maps the page again (`Scan::fault`); any other fault ends the holder, and the sweep
//!   gives up. In a process with one thread, `helper` starts the same task to read a share of
//!   the heap without holding anything.
//! - Afterwards the holder lets every thread go, handing back any signal that stopped one
//!   meanwhile, and exits; the sweeping thread waits for its exit (`CLONE_CHILD_CLEARTID`)
//!   before the holder's stack may be used again, and reaps it.
//!
//! The threads are listed in `/proc`: where `/proc` belongs to another PID namespace (a process
//! started by `unshare --pid --fork` without a `/proc` of its own), its thread ids are not
//! the ones ptrace takes, and holding is refused (`Fail::Refused`) as below.
//! ptrace is refused when another tracer (a debugger, `strace`) holds one of the threads, in a
//! process that is not dumpable (without `CAP_SYS_PTRACE`), under Yama's
//! `kernel.yama.ptrace_scope` 1 or more without `CAP_SYS_PTRACE` (the holder is the process's
//! child, not its ancestor), and by a security module's policy (AppArmor's `ptrace` rules).
//! After one refusal (`Fail::Refused`) the process is not swept while it has threads, as with
//! `sweep_threads=0`, and ptrace is not tried again (a security module would log every try).
//! Naming the holder with `PR_SET_PTRACER` would lift Yama's restriction but replace whatever
//! tracer the program named itself (crash reporters do).

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::{meta, stats, sys, tls};

/// Threads held at most; a process with more is not swept while it has them.
const MAX_THREADS: usize = 16384;
/// Rounds of letting threads found inside the allocator go on and stopping them again, about
/// 10 ms in all: one that left wait at its exit, so a thread still inside after that is
/// blocked there (another thread forks, which holds every lock while the pool is copied).
const MAX_ROUNDS: u32 = 16;
/// Bytes of `NT_X86_XSTATE` read per thread (the whole area is 2.7 KiB with AVX-512, 11 KiB
/// with AMX tiles).
const XSTATE_BYTES: usize = 16 << 10;
/// The holder's stack.
const STACK_BYTES: usize = 64 << 10;
/// Bytes of directory entries read per `getdents64`.
const DIRENTS_BYTES: usize = 16 << 10;
/// How long the sweeping thread waits for the holder to stop the others before it gives up
/// (a thread blocked where no stop reaches it: a `vfork` parent waiting for its child, a
/// read from a hung disk).
const STOP_TIMEOUT_NS: u64 = 1_000_000_000;

// Holder states (`Shared::state`).
const STARTING: u32 = 0;
const HELD: u32 = 1;
const SCAN: u32 = 2;
const SCANNED: u32 = 3;
const RELEASE: u32 = 4;
const DONE: u32 = 5;
const BUSY: u32 = 6;
const REFUSED: u32 = 7;
const FAILED: u32 = 8;

/// Why other threads were not held.
pub enum Fail {
    /// ptrace is not allowed (see the module's comment), or too many threads.
    Refused,
    /// Some thread stayed inside the allocator for every round.
    Busy,
    /// Something else went wrong (no memory, a thread that did not stop in time).
    Failed,
}

/// Sweeps that held other threads still, and the threads they held.
pub static HOLDS: AtomicU64 = AtomicU64::new(0);
pub static HELD_THREADS: AtomicU64 = AtomicU64::new(0);
/// Attempts given up because some thread stayed inside the allocator.
pub static BUSY_MISSES: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Copy)]
struct Tracee {
    tid: u32,
    /// In a ptrace stop now.
    stopped: bool,
    /// Exited (or never seized).
    gone: bool,
    /// Found inside the allocator in the last look.
    busy: bool,
    /// A signal that stopped it, to hand back when it goes on.
    sig: u32,
}

/// What the holder does for the sweep besides holding threads.
#[derive(Clone, Copy)]
pub struct Scan {
    /// Reads words (the held threads' registers).
    pub words: fn(&[u8]),
    /// Reads the holder's share of the heap, beside the sweeping thread.
    pub share: fn(),
    /// A fault at this address while reading it: whether the address can be read again (its
    /// page was mapped again).
    pub fault: fn(usize) -> bool,
}

const NO_SCAN: Scan = Scan { words: |_| {}, share: || {}, fault: |_| false };

/// What the sweeping thread and the holder share. Before the holder starts, the sweeping
/// thread writes the fields; meanwhile the holder owns `threads` and `n`, and the sweeping
/// thread reads `n` only after seeing `HELD` (`state`: Release/Acquire).
struct Shared {
    state: AtomicU32,
    /// Cleared by the kernel when the holder has exited (`CLONE_CHILD_CLEARTID`).
    alive: AtomicU32,
    pid: u32,
    me: u32,
    tpoff: usize,
    scan: Scan,
    /// Whether to hold the other threads (`others`), or only read a share of the heap (`helper`).
    hold: bool,
    threads: *mut Tracee,
    n: usize,
    regs: *mut u8,
    dirents: *mut u8,
    stack_top: usize,
}

struct Cell(UnsafeCell<Shared>);

// SAFETY: see `Shared`: accesses are ordered by `state` (and by the sweep's own `BUSY` flag:
// one sweep at a time).
unsafe impl Sync for Cell {}

static SHARED: Cell = Cell(UnsafeCell::new(Shared {
    state: AtomicU32::new(DONE),
    alive: AtomicU32::new(0),
    pid: 0,
    me: 0,
    tpoff: 0,
    scan: NO_SCAN,
    hold: false,
    threads: core::ptr::null_mut(),
    n: 0,
    regs: core::ptr::null_mut(),
    dirents: core::ptr::null_mut(),
    stack_top: 0,
}));
/// Whether the buffers were set up (they are kept from then on).
static READY: AtomicUsize = AtomicUsize::new(0);

fn shared() -> *mut Shared {
    SHARED.0.get()
}

/// Every other thread, held still outside the allocator; they go on when this is dropped.
/// (None from `helper`.)
pub struct Held {
    holder: Holder,
    /// Threads held.
    pub threads: usize,
    /// Whether the other threads were looked for (`others`).
    hold: bool,
}

/// The running holder task.
struct Holder {
    pid: i32,
}

/// Stops every thread of the process but the calling one, each outside the allocator.
/// `scan` is what `Held::start_scan` runs in the holder: their registers, then its share.
pub fn others(scan: Scan) -> Result<Held, Fail> {
    start(scan, true)
}

/// Starts the holder without holding anything (a process with one thread), to read a share of
/// the heap when `Held::start_scan` says.
pub fn helper(scan: Scan) -> Result<Held, Fail> {
    start(scan, false)
}

fn start(scan: Scan, hold: bool) -> Result<Held, Fail> {
    if !buffers() {
        return Err(Fail::Failed);
    }
    // The threads are found in `/proc`; ids of another PID namespace would be held in vain
    // (a sweep then ran while the threads went on).
    if hold && !sys::proc_numbers_us() {
        return Err(Fail::Refused);
    }
    let s = shared();
    // SAFETY: no holder runs (the last one was waited for: `alive` is 0), so the sweeping
    // thread owns every field until it starts the next.
    unsafe {
        (*s).pid = sys::getpid();
        (*s).me = sys::gettid();
        (*s).tpoff = tls::depth_offset();
        (*s).scan = scan;
        (*s).hold = hold;
        (*s).n = 0;
        (*s).state.store(STARTING, Ordering::Relaxed);
        (*s).alive.store(1, Ordering::Relaxed);
    }
    // SAFETY: `stack_top` is the top of the holder's own stack, unused by anything else now;
    // `holder` never returns.
    let pid = unsafe { spawn((*s).stack_top, (*s).alive.as_ptr()) };
    if pid < 0 {
        // SAFETY: as above: no holder runs.
        unsafe { (*s).alive.store(0, Ordering::Relaxed) };
        return Err(Fail::Failed);
    }
    let holder = Holder { pid: pid as i32 };
    let deadline = sys::precise_ns() + STOP_TIMEOUT_NS;
    // SAFETY: `state` is an atomic of the shared record.
    let state = unsafe { &(*s).state };
    loop {
        let v = state.load(Ordering::Acquire);
        if v == HELD {
            // SAFETY: the holder wrote `n` before it published HELD.
            return Ok(Held { holder, threads: unsafe { (*s).n }, hold });
        }
        if v != STARTING {
            holder.end();
            return Err(match v {
                BUSY => {
                    stats::add(&BUSY_MISSES, 1);
                    Fail::Busy
                }
                REFUSED => Fail::Refused,
                _ => Fail::Failed,
            });
        }
        if sys::precise_ns() > deadline {
            // The holder is stuck waiting for a thread to stop: end it; the kernel lets its
            // tracees go.
            holder.kill();
            holder.end();
            return Err(Fail::Failed);
        }
        sys::futex_wait_for(state, STARTING, Some(10_000_000), true);
    }
}

impl Held {
    /// Has the holder read the held threads' registers and then its share of the heap
    /// (`Scan`), while the sweeping thread goes on.
    pub fn start_scan(&self) {
        let s = shared();
        // SAFETY: an atomic of the shared record.
        let state = unsafe { &(*s).state };
        state.store(SCAN, Ordering::Release);
        sys::futex_wake(state);
    }

    /// Waits until the holder has done what `start_scan` asked; false if it could not (it
    /// ended on a fault, or is still at it after `STOP_TIMEOUT_NS`: it is then ended). Either
    /// way the holder reads and marks nothing more once this returns.
    pub fn finish_scan(&self) -> bool {
        let s = shared();
        // SAFETY: atomics of the shared record.
        let (state, alive) = unsafe { (&(*s).state, &(*s).alive) };
        let deadline = sys::precise_ns() + STOP_TIMEOUT_NS;
        loop {
            match state.load(Ordering::Acquire) {
                SCANNED => return true,
                SCAN if alive.load(Ordering::Acquire) != 0 && sys::precise_ns() < deadline => {
                    sys::futex_wait_for(state, SCAN, Some(10_000_000), true)
                }
                _ => break,
            }
        }
        // Stuck, or gone: make sure it is gone (`Drop` reaps it).
        self.holder.kill();
        while alive.load(Ordering::Acquire) != 0 {
            // The kernel's wake at the holder's exit is a shared futex's.
            sys::futex_wait_for(alive, 1, Some(10_000_000), false);
        }
        false
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let s = shared();
        // SAFETY: an atomic of the shared record.
        let state = unsafe { &(*s).state };
        state.store(RELEASE, Ordering::Release);
        sys::futex_wake(state);
        self.holder.end();
        if self.hold {
            stats::add(&HOLDS, 1);
            stats::add(&HELD_THREADS, self.threads as u64);
        }
    }
}

impl Holder {
    /// Kills the holder (its tracees go on).
    fn kill(&self) {
        // SAFETY: a signal to our own child task.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
    }

    /// Waits for the holder's exit and reaps it.
    fn end(&self) {
        let s = shared();
        // SAFETY: an atomic of the shared record; the kernel clears it when the holder exits.
        let alive = unsafe { &(*s).alive };
        let deadline = sys::precise_ns() + STOP_TIMEOUT_NS;
        let mut killed = false;
        while alive.load(Ordering::Acquire) != 0 {
            if !killed && sys::precise_ns() > deadline {
                self.kill();
                killed = true;
            }
            // The kernel's wake at the holder's exit is a shared futex's.
            sys::futex_wait_for(alive, 1, Some(10_000_000), false);
        }
        let mut status = 0;
        // SAFETY: reaps our own child; `status` is a local.
        unsafe { libc::waitpid(self.pid, &mut status, libc::__WALL) };
        // A holder killed before it let them go must not leave threads waiting.
        crate::reentry::end_park();
    }
}

/// Sets up the holder's buffers and stack once (metadata memory, which sweeps do not read).
fn buffers() -> bool {
    if READY.load(Ordering::Acquire) != 0 {
        return true;
    }
    let tracees = MAX_THREADS * core::mem::size_of::<Tracee>();
    let p = meta::alloc(tracees + XSTATE_BYTES + DIRENTS_BYTES);
    let top = sys::new_stack(STACK_BYTES);
    if p.is_null() || top == 0 {
        return false;
    }
    let s = shared();
    // SAFETY: only the sweeping thread (one at a time) gets here, and no holder runs yet.
    unsafe {
        (*s).threads = p as *mut Tracee;
        (*s).regs = p.add(tracees);
        (*s).dirents = p.add(tracees + XSTATE_BYTES);
        (*s).stack_top = top;
    }
    READY.store(1, Ordering::Release);
    true
}

/// Starts `holder` as a task of its own that shares the address space, on the stack at
/// `top`; `alive` is cleared by the kernel when it exits. Returns its process id or minus the
/// error number.
///
/// # Safety
/// `top` is the top of a stack nothing else uses until the holder has exited.
unsafe fn spawn(top: usize, alive: *mut u32) -> isize {
    // No `CLONE_FILES`: the holder's descriptors stay its own, out of reach of a program that
    // closes every descriptor it does not know. Exit signal 0: no SIGCHLD for the program.
    let flags = (libc::CLONE_VM | libc::CLONE_UNTRACED | libc::CLONE_CHILD_CLEARTID) as usize;
    let r: isize;
    // SAFETY: the child starts on its own stack (16-byte aligned) and calls `holder`, which
    // never returns; the parent goes on as after any system call.
    unsafe {
        core::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "call {f}",
            "ud2",
            "2:",
            f = sym holder,
            inlateout("rax") libc::SYS_clone as isize => r,
            in("rdi") flags,
            in("rsi") top,
            in("rdx") 0usize,
            in("r10") alive,
            in("r8") 0usize,
            lateout("rcx") _,
            lateout("r11") _,
        );
    }
    r
}

/// The holder's name (`comm`).
const HOLDER_NAME: &core::ffi::CStr = c"nevermore-hold";

/// The holder's whole life.
extern "C" fn holder() -> ! {
    // SAFETY: the sweeping thread filled the record before starting the holder and waits on
    // `state` meanwhile; the holder alone writes `threads` and `n`.
    let s = unsafe { &mut *shared() };
    // A name of its own in `ps` and `/proc` (it would show the program's otherwise), by which
    // tools that sum memory over a process tree know it shares its parent's.
    // SAFETY: PR_SET_NAME reads a NUL-terminated name of at most 16 bytes.
    unsafe {
        sys::raw_syscall(libc::SYS_prctl, [libc::PR_SET_NAME as usize, HOLDER_NAME.as_ptr() as usize, 0, 0, 0, 0])
    };
    set_fault_handler();
    let outcome = if s.hold { stop_all(s) } else { HELD };
    if outcome == HELD {
        s.state.store(HELD, Ordering::Release);
        sys::futex_wake(&s.state);
        loop {
            let v = s.state.load(Ordering::Acquire);
            match v {
                SCAN => {
                    scan_all(s);
                    (s.scan.share)();
                    s.state.store(SCANNED, Ordering::Release);
                    sys::futex_wake(&s.state);
                }
                RELEASE => break,
                _ => {
                    // The sweeping thread went away (its process was killed): let go.
                    // SAFETY: a signal-0 probe of a thread id.
                    if unsafe { sys::raw_syscall(libc::SYS_tgkill, [s.pid as usize, s.me as usize, 0, 0, 0, 0]) }
                        == -(libc::ESRCH as isize)
                    {
                        break;
                    }
                    sys::futex_wait_for(&s.state, v, Some(50_000_000), true);
                }
            }
        }
        release_all(s);
        s.state.store(DONE, Ordering::Release);
    } else {
        release_all(s);
        s.state.store(outcome, Ordering::Release);
    }
    sys::futex_wake(&s.state);
    // SAFETY: ends this task only; the kernel then clears `alive` and wakes the sweeping thread.
    unsafe { sys::raw_syscall(libc::SYS_exit, [0; 6]) };
    loop {
        core::hint::spin_loop();
    }
}

/// Gives the holder a handler of its own for SIGSEGV and SIGBUS (it has its own table of
/// signal actions: no `CLONE_SIGHAND`), instead of the allocator's, which keeps state per
/// thread and reports. Both signals stay unblocked (the sweeping thread blocked the others
/// before starting it), with every signal blocked while the handler runs.
fn set_fault_handler() {
    for sig in [libc::SIGSEGV, libc::SIGBUS] {
        sys::set_action(sig, on_fault, 0, !0);
    }
}

/// The holder's SIGSEGV/SIGBUS handler: a fault the scan can recover from (`Scan::fault`) is
/// retried; any other ends the holder (its sweep then gives up: the sweeping thread sees it gone,
/// and the kernel lets go of the threads it held).
extern "C" fn on_fault(_sig: i32, info: *mut libc::siginfo_t, _ctx: *mut core::ffi::c_void) {
    // SAFETY: the kernel passes a valid siginfo.
    let addr = unsafe { (*info).si_addr() } as usize;
    // SAFETY: `scan` was written before the holder started and does not change meanwhile.
    let fault = unsafe { (*shared()).scan.fault };
    if fault(addr) {
        return;
    }
    // SAFETY: ends this task only.
    unsafe { sys::raw_syscall(libc::SYS_exit, [1, 0, 0, 0, 0, 0]) };
}

fn threads(s: &mut Shared) -> &mut [Tracee] {
    // SAFETY: `threads` holds MAX_THREADS records, the first `n` in use, owned by the holder.
    unsafe { core::slice::from_raw_parts_mut(s.threads, s.n) }
}

fn ptrace(req: u32, tid: u32, addr: usize, data: usize) -> isize {
    // SAFETY: ptrace requests on our tracees; `addr`/`data` point at buffers of the holder
    // where the request writes.
    unsafe { sys::raw_syscall(libc::SYS_ptrace, [req as usize, tid as usize, addr, data, 0, 0]) }
}

/// Seizes and stops every other thread, each outside the allocator: HELD, or why not.
fn stop_all(s: &mut Shared) -> u32 {
    let mut path = [0u8; 32];
    let mut at = 0;
    for b in b"/proc/" {
        path[at] = *b;
        at += 1;
    }
    at += write_decimal(&mut path[at..], s.pid);
    for b in b"/task" {
        path[at] = *b;
        at += 1;
    }
    // Under a root the program changed, in the `/proc` directory kept from before.
    let (at, path) = sys::proc_path(path.as_ptr() as *const core::ffi::c_char);
    // SAFETY: a NUL-terminated path on the stack.
    let dir = unsafe {
        sys::raw_syscall(
            libc::SYS_openat,
            [at as usize, path as usize, (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) as usize, 0, 0, 0],
        )
    };
    if dir < 0 {
        return FAILED;
    }
    let mut outcome = FAILED;
    for _ in 0..64 {
        let before = s.n;
        if let Err(e) = seize_new(s, dir as usize) {
            outcome = e;
            break;
        }
        for k in before..s.n {
            wait_stopped(&mut threads(s)[k]);
        }
        if !settle(s) {
            outcome = BUSY;
            break;
        }
        if s.n == before {
            // No thread appeared since the last listing, and all are held.
            s.n = compact(s);
            outcome = HELD;
            break;
        }
    }
    // SAFETY: closes the holder's own descriptor.
    unsafe { sys::raw_syscall(libc::SYS_close, [dir as usize, 0, 0, 0, 0, 0]) };
    outcome
}

/// Drops the records of threads that are gone; returns how many remain.
fn compact(s: &mut Shared) -> usize {
    let t = threads(s);
    let mut kept = 0;
    for k in 0..t.len() {
        if !t[k].gone {
            t[kept] = t[k];
            kept += 1;
        }
    }
    kept
}

/// Seizes and interrupts every thread in the listing not seized yet.
fn seize_new(s: &mut Shared, dir: usize) -> Result<(), u32> {
    // SAFETY: rewinds the holder's own directory descriptor.
    unsafe { sys::raw_syscall(libc::SYS_lseek, [dir, 0, libc::SEEK_SET as usize, 0, 0, 0]) };
    loop {
        // SAFETY: the kernel writes at most DIRENTS_BYTES into the holder's buffer.
        let got = unsafe { sys::raw_syscall(libc::SYS_getdents64, [dir, s.dirents as usize, DIRENTS_BYTES, 0, 0, 0]) };
        if got < 0 {
            return Err(FAILED);
        }
        if got == 0 {
            return Ok(());
        }
        let mut off = 0usize;
        while off < got as usize {
            // SAFETY: inside the bytes the kernel wrote: a `linux_dirent64` record (8-byte
            // inode, 8-byte offset, 2-byte length, 1-byte type, then the NUL-terminated name),
            // its length kept within them.
            let (len, name) = unsafe {
                let rec = s.dirents.add(off);
                let len = (u16::from_ne_bytes([*rec.add(16), *rec.add(17)]) as usize).min(got as usize - off);
                (len, core::slice::from_raw_parts(rec, len).get(19..).unwrap_or(&[]))
            };
            off += len.max(1);
            let Some(tid) = parse_tid(name) else { continue };
            if tid == s.me || threads(s).iter().any(|t| t.tid == tid) {
                continue;
            }
            if s.n == MAX_THREADS {
                return Err(REFUSED);
            }
            let r = ptrace(libc::PTRACE_SEIZE, tid, 0, 0);
            if r == -(libc::ESRCH as isize) {
                continue;
            }
            if r < 0 {
                // EPERM: ptrace's own rules and Yama; EACCES: a security module (AppArmor).
                let refused = r == -(libc::EPERM as isize) || r == -(libc::EACCES as isize);
                return Err(if refused { REFUSED } else { FAILED });
            }
            // SAFETY: below MAX_THREADS records.
            unsafe { *s.threads.add(s.n) = Tracee { tid, stopped: false, gone: false, busy: false, sig: 0 } };
            s.n += 1;
            if ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) < 0 {
                let last = s.n - 1;
                threads(s)[last].gone = true;
            }
        }
    }
}

/// The thread id a task directory's name spells (the bytes up to its NUL), if it is one.
fn parse_tid(name: &[u8]) -> Option<u32> {
    let name = &name[..name.iter().position(|&c| c == 0)?];
    crate::config::parse_uint(name).and_then(|v| u32::try_from(v).ok())
}

fn write_decimal(out: &mut [u8], mut v: u32) -> usize {
    let mut digits = [0u8; 10];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for k in 0..n {
        out[k] = digits[n - 1 - k];
    }
    n
}

/// Waits until the (interrupted) thread `t` is in a ptrace stop, or gone.
fn wait_stopped(t: &mut Tracee) {
    if !t.gone {
        reap_stop(t, 0);
    }
}

/// Stops thread `t` (let go on since its last stop) again. If it stopped by itself meanwhile
/// (at a trap left pending by an earlier interrupt, when a signal's stop came first), that
/// stop is taken instead: interrupting a stopped thread would leave a trap pending again,
/// which would stop it at once, at the same place, each time it is let go.
fn stop_again(t: &mut Tracee) {
    if reap_stop(t, libc::WNOHANG) {
        return;
    }
    if ptrace(libc::PTRACE_INTERRUPT, t.tid, 0, 0) < 0 {
        t.gone = true;
        return;
    }
    wait_stopped(t);
}

/// Takes thread `t`'s next stop (or exit) with `wait4` and `flags`: false when `WNOHANG` found
/// none.
fn reap_stop(t: &mut Tracee, flags: i32) -> bool {
    loop {
        let mut status: i32 = 0;
        let options = (libc::__WALL | flags) as usize;
        // SAFETY: `status` is a local the kernel writes.
        let r = unsafe {
            sys::raw_syscall(libc::SYS_wait4, [t.tid as usize, &mut status as *mut i32 as usize, options, 0, 0, 0])
        };
        if r == -(libc::EINTR as isize) {
            continue;
        }
        if r == 0 {
            return false;
        }
        if r < 0 {
            t.gone = true;
            return true;
        }
        if libc::WIFSTOPPED(status) {
            if (status >> 16) != libc::PTRACE_EVENT_STOP {
                // A signal-delivery stop: the signal is handed back when the thread goes on.
                t.sig = libc::WSTOPSIG(status) as u32;
            }
            t.stopped = true;
            return true;
        }
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            t.gone = true;
            return true;
        }
    }
}

/// The general-purpose registers of stopped thread `tid`.
fn regs_of(tid: u32) -> Option<libc::user_regs_struct> {
    // SAFETY: all-zero is a valid register record.
    let mut r: libc::user_regs_struct = unsafe { core::mem::zeroed() };
    (ptrace(libc::PTRACE_GETREGS, tid, 0, &mut r as *mut _ as usize) == 0).then_some(r)
}

/// Whether thread `t` is inside the allocator: its depth word, at its thread pointer plus the
/// word's offset. None when that cannot be read.
fn inside(s: &Shared, t: &Tracee) -> Option<bool> {
    let r = regs_of(t.tid)?;
    let mut depth: u32 = 0;
    let local = libc::iovec { iov_base: &mut depth as *mut u32 as *mut libc::c_void, iov_len: 4 };
    let remote = libc::iovec { iov_base: (r.fs_base as usize).wrapping_add(s.tpoff) as *mut libc::c_void, iov_len: 4 };
    // SAFETY: reads 4 bytes of the shared address space into a local (a bad address fails
    // with EFAULT instead of faulting); pid 0 is not allowed, so the holder names itself.
    let me = unsafe { sys::raw_syscall(libc::SYS_getpid, [0; 6]) } as usize;
    // SAFETY: as above.
    let n = unsafe {
        sys::raw_syscall(
            libc::SYS_process_vm_readv,
            [me, &local as *const _ as usize, 1, &remote as *const _ as usize, 1, 0],
        )
    };
    (n == 4).then_some(depth != 0)
}

/// Lets threads found inside the allocator go on for a moment and stops them again, until
/// none is inside; false when some still were after `MAX_ROUNDS`, or could not be looked at.
fn settle(s: &mut Shared) -> bool {
    for round in 0..MAX_ROUNDS {
        let mut busy = 0;
        for k in 0..s.n {
            let t = threads(s)[k];
            if t.gone || !t.stopped {
                continue;
            }
            let b = match inside(s, &t) {
                Some(b) => b,
                None if regs_of(t.tid).is_none() => {
                    // Gone between the stop and the look.
                    threads(s)[k].gone = true;
                    false
                }
                None => return false,
            };
            threads(s)[k].busy = b;
            busy += b as usize;
        }
        if busy == 0 {
            return true;
        }
        // Once outside, they wait there (`reentry::drain_and_leave`) rather than enter again.
        crate::reentry::begin_park();
        for t in threads(s).iter_mut().filter(|t| t.busy && !t.gone) {
            ptrace(libc::PTRACE_CONT, t.tid, 0, t.sig as usize);
            t.sig = 0;
            t.stopped = false;
        }
        // A moment to leave the allocator: 20 µs, growing to 1 ms.
        let ns = (20_000u64 << round.min(6)).min(1_000_000);
        let ts = libc::timespec { tv_sec: 0, tv_nsec: ns as i64 };
        // SAFETY: a sleep with a timespec on the stack.
        unsafe { sys::raw_syscall(libc::SYS_nanosleep, [&ts as *const _ as usize, 0, 0, 0, 0, 0]) };
        for t in threads(s).iter_mut().filter(|t| t.busy && !t.gone) {
            stop_again(t);
        }
    }
    false
}

/// Hands every held thread's registers to the scan.
fn scan_all(s: &mut Shared) {
    let scan = s.scan.words;
    let regs = s.regs;
    for t in threads(s).iter().filter(|t| !t.gone) {
        if let Some(r) = regs_of(t.tid) {
            // SAFETY: a plain record of 64-bit registers, read as bytes.
            scan(unsafe {
                core::slice::from_raw_parts(&r as *const _ as *const u8, core::mem::size_of::<libc::user_regs_struct>())
            });
        }
        let mut v = libc::iovec { iov_base: regs as *mut libc::c_void, iov_len: XSTATE_BYTES };
        if ptrace(libc::PTRACE_GETREGSET, t.tid, NT_X86_XSTATE, &mut v as *mut _ as usize) == 0 {
            // SAFETY: the kernel wrote `iov_len` bytes (at most XSTATE_BYTES) into the buffer.
            scan(unsafe { core::slice::from_raw_parts(regs, v.iov_len.min(XSTATE_BYTES) & !7) });
        }
    }
}

/// The regset of the extended processor state (x87, SSE, AVX, AVX-512 registers).
const NT_X86_XSTATE: usize = 0x202;

/// Lets every seized thread go, handing back the signals that stopped them.
fn release_all(s: &mut Shared) {
    crate::reentry::end_park();
    for t in threads(s).iter_mut().filter(|t| !t.gone) {
        if !t.stopped {
            // Interrupted but not yet seen stopped (an attempt cut short): a detach needs a
            // stopped tracee.
            wait_stopped(t);
            if t.gone {
                continue;
            }
        }
        if let Some(r) = regs_of(t.tid) {
            map_futex_words(&r);
            if t.sig == 0 && !wait_again_from_user_mode(t.tid, r) {
                restart_endless_wait(t.tid, r);
            }
        }
        ptrace(libc::PTRACE_DETACH, t.tid, 0, t.sig as usize);
    }
    s.n = 0;
}

/// Maps again the futex words that a thread stopped inside `futex` reads when it goes on.
/// A stop breaks a futex wait, and the kernel starts it again afterwards, reading the futex
/// word itself: a word in a heap object whose page lost its entry while the thread slept
/// (pageout, swap) made the wait fail with `EFAULT`, and glibc aborts the process on that
/// ("The futex facility returned an unexpected error code": CPython's regression tests under
/// steady pageout, nearly every module). The holder reads each word (a fault on a live alias is
/// mended by `on_fault`), so that the page is there when the thread is let go.
fn map_futex_words(r: &libc::user_regs_struct) {
    if r.orig_rax as i64 == libc::SYS_futex {
        crate::futex::memory(r.rdi as usize, r.rsi as usize, r.r10 as usize, r.r8 as usize, touch_word);
    }
}

/// The kernel's codes for a system call it starts again itself (`-ERESTARTSYS`,
/// `-ERESTARTNOINTR`, `-ERESTARTNOHAND`, `-ERESTART_RESTARTBLOCK`).
const RESTART_CODES: [i64; 4] = [-512, -513, -514, -516];

/// Sends thread `tid`, stopped (registers `r`) in a futex wait on a word in the alias arena
/// that the kernel would start again, to be made again from user mode (`futex::send`); false
/// when it is not in such a wait. A wait with a timeout is made again with its own arguments:
/// glibc's timeouts are absolute.
fn wait_again_from_user_mode(tid: u32, mut r: libc::user_regs_struct) -> bool {
    if r.orig_rax as i64 != libc::SYS_futex || !RESTART_CODES.contains(&(r.rax as i64)) {
        return false;
    }
    let back = r.rip as usize;
    let (uaddr, op, arg4) = (r.rdi as usize, r.rsi as usize, r.r10 as usize);
    let regs =
        crate::futex::Regs { rip: &mut r.rip, rsp: &mut r.rsp, rax: &mut r.rax, rcx: &mut r.rcx, r11: &mut r.r11 };
    // SAFETY: the registers of a thread stopped by ptrace, which goes on with them; nothing
    // lies below its red zone (`Slot::Write`).
    if !unsafe { crate::futex::send(back, uaddr, op, arg4, crate::futex::Slot::Write, regs) } {
        return false;
    }
    ptrace(libc::PTRACE_SETREGS, tid, 0, &r as *const _ as usize) == 0
}

/// Reads the 4-byte word at `addr` (a futex word, or a timeout's) if it lies in the alias arena
/// (elsewhere the kernel brings a page back itself).
fn touch_word(addr: usize) {
    if addr & 3 == 0 && crate::alias::in_arena(addr) {
        // SAFETY: a futex word a thread waits on, in the shared address space: a live object's
        // (a fault on its page is mended by `on_fault`; one that cannot be ends the holder, and
        // its sweep gives up).
        unsafe { core::ptr::read_volatile(addr as *const u32) };
    }
}

/// Makes a thread stopped in a wait without a timeout that a stop breaks with `EINTR`
/// (`epoll_wait`, `semop`, `sigwaitinfo`: see signal(7), "Interruption of system calls by
/// stop signals") wait again, as if never stopped: the kernel's own restart of other calls
/// (the call's number back in `rax`, the instruction pointer back onto the 2-byte `syscall`).
/// A wait with a timeout keeps its `EINTR`, as after `SIGSTOP` and `SIGCONT`: waiting again
/// for the whole timeout would wake it late.
fn restart_endless_wait(tid: u32, mut r: libc::user_regs_struct) {
    if r.rax as i64 != -(libc::EINTR as i64) {
        return;
    }
    let endless = match r.orig_rax as i64 {
        // The timeout: milliseconds (-1: none), or a pointer (null: none).
        libc::SYS_epoll_wait | libc::SYS_epoll_pwait => r.r10 as i32 == -1,
        libc::SYS_epoll_pwait2 => r.r10 == 0,
        libc::SYS_rt_sigtimedwait => r.rdx == 0,
        libc::SYS_semop => true,
        _ => false,
    };
    if endless {
        r.rax = r.orig_rax;
        r.rip -= 2;
        ptrace(libc::PTRACE_SETREGS, tid, 0, &r as *const _ as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    #[test]
    fn task_names_and_numbers() {
        let mut out = [0u8; 12];
        let n = write_decimal(&mut out, 4_194_304);
        assert_eq!(&out[..n], b"4194304");
        let n = write_decimal(&mut out, 0);
        assert_eq!(&out[..n], b"0");
        assert_eq!(parse_tid(b"12345\0\0\0"), Some(12345));
        assert_eq!(parse_tid(b".\0"), None);
        assert_eq!(parse_tid(b"\0"), None);
        assert_eq!(parse_tid(b"99999999999\0"), None);
        assert_eq!(parse_tid(b"123"), None);
    }

    static SPINS: AtomicU64 = AtomicU64::new(0);
    static QUIT: AtomicBool = AtomicBool::new(false);
    static SEEN: AtomicBool = AtomicBool::new(false);
    const MAGIC: u64 = 0x5eed_f00d_1234_5678;

    fn look_for_magic(words: &[u8]) {
        if words.chunks_exact(8).any(|w| u64::from_ne_bytes(w.try_into().unwrap()) == MAGIC) {
            SEEN.store(true, Ordering::Relaxed);
        }
    }

    /// A thread that counts, holding MAGIC in r12 only, while QUIT is not set.
    fn spinner() {
        // SAFETY: r12 is declared clobbered; the loop reads two statics through pointers.
        unsafe {
            core::arch::asm!(
                "mov r12, {m}",
                "2:",
                "lock add qword ptr [{spins}], 1",
                "pause",
                "cmp byte ptr [{quit}], 0",
                "je 2b",
                "xor r12d, r12d",
                m = in(reg) MAGIC,
                spins = in(reg) SPINS.as_ptr(),
                quit = in(reg) QUIT.as_ptr(),
                out("r12") _,
            );
        }
    }

    /// Every other thread of this test process stands still while held (a counting thread's
    /// count does not move), its registers reach the scan, and it goes on once let go.
    #[test]
    fn holds_other_threads_and_reads_their_registers() {
        let _serial = crate::TEST_POOL_LOCK.lock().unwrap();
        let t = std::thread::spawn(spinner);
        while SPINS.load(Ordering::Relaxed) < 1000 {
            std::thread::yield_now();
        }
        let held = match others(Scan { words: look_for_magic, ..NO_SCAN }) {
            Ok(h) => h,
            Err(_) => panic!("could not hold the other threads"),
        };
        assert!(held.threads >= 1);
        let a = SPINS.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(SPINS.load(Ordering::Relaxed), a, "a held thread ran");
        held.start_scan();
        assert!(held.finish_scan());
        assert!(SEEN.load(Ordering::Relaxed), "the held thread's r12 did not reach the scan");
        drop(held);
        std::thread::sleep(Duration::from_millis(30));
        assert!(SPINS.load(Ordering::Relaxed) > a, "the thread did not go on");
        QUIT.store(true, Ordering::Relaxed);
        t.join().unwrap();
    }

    /// A thread waiting in `epoll_wait` without a timeout goes on waiting after a hold (a stop
    /// breaks that call with EINTR); one with a timeout gets EINTR, as after SIGSTOP/SIGCONT.
    #[test]
    fn endless_waits_outlive_a_hold() {
        let _serial = crate::TEST_POOL_LOCK.lock().unwrap();
        // SAFETY: plain system calls on descriptors made here.
        let (ep, ev) = unsafe { (libc::epoll_create1(0), libc::eventfd(0, 0)) };
        assert!(ep >= 0 && ev >= 0);
        let mut e = libc::epoll_event { events: libc::EPOLLIN as u32, u64: 7 };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, ev, &mut e) }, 0);
        let wait = move |timeout: i32| {
            move || {
                let mut out = libc::epoll_event { events: 0, u64: 0 };
                // SAFETY: one event into a local.
                let n = unsafe { libc::epoll_wait(ep, &mut out, 1, timeout) };
                (n, std::io::Error::last_os_error().raw_os_error())
            }
        };
        let endless = std::thread::spawn(wait(-1));
        let timed = std::thread::spawn(wait(10_000));
        std::thread::sleep(Duration::from_millis(50));
        drop(others(NO_SCAN).unwrap_or_else(|_| panic!("could not hold the other threads")));
        std::thread::sleep(Duration::from_millis(50));
        let one: u64 = 1;
        // SAFETY: writes 8 bytes to the eventfd.
        assert_eq!(unsafe { libc::write(ev, &one as *const u64 as *const libc::c_void, 8) }, 8);
        assert_eq!(endless.join().unwrap().0, 1, "the endless wait was broken");
        let (n, err) = timed.join().unwrap();
        assert!(n == 1 || (n == -1 && err == Some(libc::EINTR)), "{n} {err:?}");
        // SAFETY: closes descriptors made here.
        unsafe {
            libc::close(ep);
            libc::close(ev);
        }
    }
}
