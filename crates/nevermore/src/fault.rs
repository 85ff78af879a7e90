//! The SIGSEGV/SIGBUS handler. A fault at an address the allocator owns is one of:
//!
//! - a live alias that lost its page-table entry (swapped out; paged out by the kernel, as a
//!   DAMON `pageout` scheme does to pool pages that sat unmapped for a while, even with no
//!   swap, racing with their next install; or the program dropped it with `madvise`): it is
//!   installed again and the access retried. That holds for the whole alias page of a live
//!   group, also where the access falls outside the group's slots: in a slot of the page
//!   issued in another epoch or never, or in the page's tail after its last slot. The
//!   allocator writes there itself (detect mode fills every slot of a page at its first issue,
//!   and the tail after a page's last object), and an access the page's entry would have let
//!   through may not become a report because the entry was taken;
//! - a revoked alias: **heap-use-after-free**, reported with the object's address, size and
//!   the offset into it, READ or WRITE;
//! - a guard page next to a large object, or after a page object whose size is a whole number
//!   of pages: **heap-buffer-overflow**;
//! - an alias never issued: **wild-access**.
//!
//! Anything else belongs to the program: the fault goes to the handler the program installed
//! (before or after us: `sigaction`, `signal` and the other ways of setting a handler, System
//! V's and BSD's, are interposed so that the program's handler for these two signals is
//! recorded instead of replacing ours), or to the default action.
//! `sigprocmask`/`pthread_sigmask` never block these two signals: a synchronous fault in a
//! thread that blocked them would otherwise kill the process without a report.
//!
//! The handlers the program sets for the other signals are called through `relay`, which has a
//! futex wait the handler interrupted made again from user mode (`futex`), where a word paged
//! out meanwhile is mapped again (see there).
//!
//! The handlers read allocator metadata without locks and allocate nothing.

use core::ffi::{c_int, c_void};
use core::mem::MaybeUninit;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use crate::pool::{self, POOL};
use crate::report::{self, Kind, Object, Report};
use crate::slab::{self, Slot, CLASSES, FREED};
use crate::stack::Regs;
use crate::sys::{self, PAGE};
use crate::{alias, futex, large};

extern "C" {
    /// glibc's own `sigaction` (we export `sigaction` ourselves).
    fn __sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int;
}

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The program's actions for SIGSEGV (0) and SIGBUS (1).
static PROGRAM: crate::GlobalCell<[MaybeUninit<libc::sigaction>; 2]> =
    crate::GlobalCell::new([MaybeUninit::zeroed(), MaybeUninit::zeroed()]);
/// The thread that holds the lock of the program's actions (0: none); see `program_locked`.
static PROGRAM_OWNER: AtomicU32 = AtomicU32::new(0);

fn slot_of(sig: c_int) -> Option<usize> {
    match sig {
        libc::SIGSEGV => Some(0),
        libc::SIGBUS => Some(1),
        _ => None,
    }
}

/// Installs the handler for SIGSEGV and SIGBUS, keeping what was there for chaining. It is
/// set with the raw system call so that it returns through the library's own restorer: a
/// seccomp filter the program installs later may not allow `rt_sigreturn` (it sets no
/// handlers of its own), and the exemption for the allocator's calls covers that one.
pub fn install() {
    // SAFETY: start-up, before INSTALLED is set: nobody else reads or writes the record yet.
    let prog = unsafe { PROGRAM.get_mut() };
    for (i, sig) in [libc::SIGSEGV, libc::SIGBUS].into_iter().enumerate() {
        // SAFETY: reading the current action into our record (written before INSTALLED is set).
        unsafe { __sigaction(sig, ptr::null(), prog[i].as_mut_ptr()) };
        sys::set_action(sig, handler, libc::SA_ONSTACK | libc::SA_NODEFER, 0);
    }
    INSTALLED.store(true, Ordering::Release);
}

extern "C" fn handler(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo.
    let (addr, code) = unsafe { ((*info).si_addr() as usize, (*info).si_code) };
    // Only faults raised by the hardware/kernel (positive si_code) can be ours.
    if code > 0 && probing(sig, addr, ctx) {
        return;
    }
    if code > 0 && crate::is_ready() {
        // Inside the allocator while handling: a signal handler that interrupts this one and
        // allocates takes the re-entrant paths instead of the locks held here.
        let scope = crate::reentry::Scope::enter();
        let write = is_write(ctx);
        let regs = regs_of(ctx);
        if alias::in_arena(addr) {
            if on_alias_fault(sig, addr, write, regs) {
                return;
            }
        } else {
            if sig == libc::SIGSEGV && alias::below_arena(addr) {
                if let Some(r) = before_object(addr, access(write)) {
                    report::fatal_at(regs, r);
                }
            }
            if let Some(r) = large_fault(addr, access(write)) {
                report::fatal_at(regs, r);
            }
            if crate::reentry::owns(addr) {
                report::fatal_at(regs, crate::reentry::fault(addr, access(write)));
            }
        }
        drop(scope);
    }
    chain(sig, info, ctx);
}

/// A fault of `sys::probe_word`'s load: the page is mapped again if it is a live object's
/// that lost its page-table entry (the load is then made again, with `rdx` telling so), else
/// the probe leaves through its failure exit. Nothing is reported: the memory was named by the
/// program to a system call, and the probe only asks whether it can be read.
fn probing(sig: c_int, addr: usize, ctx: *mut c_void) -> bool {
    let (load, fail) = sys::probe_points();
    if ctx.is_null() {
        return false;
    }
    // SAFETY: for SA_SIGINFO handlers the third argument is a ucontext_t, ours to change.
    let g = unsafe { &mut (*(ctx as *mut libc::ucontext_t)).uc_mcontext.gregs };
    if g[libc::REG_RIP as usize] as usize != load {
        return false;
    }
    // Only a SIGBUS says the page lacked its entry: a SIGSEGV on a live page that is mapped
    // is the program's protection, and loading again would fault for ever.
    if sig == libc::SIGBUS && crate::is_ready() && alias::in_arena(addr) && alias::map_again(addr, 1) > 0 {
        g[libc::REG_RDX as usize] = sys::PROBE_MAPPED_AGAIN as i64;
    } else {
        g[libc::REG_RIP as usize] = fail as i64;
    }
    true
}

/// The interrupted registers, where the reported stack starts.
fn regs_of(ctx: *mut c_void) -> Option<Regs> {
    if ctx.is_null() {
        return None;
    }
    // SAFETY: for SA_SIGINFO handlers the third argument is a ucontext_t.
    let g = unsafe { &(*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs };
    Some(Regs {
        pc: g[libc::REG_RIP as usize] as usize,
        sp: g[libc::REG_RSP as usize] as usize,
        bp: g[libc::REG_RBP as usize] as usize,
    })
}

/// x86-64: bit 1 of the page-fault error code says the access was a write.
fn is_write(ctx: *mut c_void) -> Option<bool> {
    if ctx.is_null() {
        return None;
    }
    // SAFETY: for SA_SIGINFO handlers the third argument is a ucontext_t.
    let err = unsafe { (*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs[libc::REG_ERR as usize] };
    Some(err & 2 != 0)
}

fn access(write: Option<bool>) -> &'static str {
    match write {
        Some(true) => "WRITE",
        Some(false) => "READ",
        None => "access",
    }
}

/// A fault in the alias arena: a live alias that lost its page-table entry is mapped again
/// (true: the access is retried); a freed or never-issued one is reported. False for a live
/// object otherwise: a missing entry in a mirror raises SIGBUS (userfaultfd's SIGBUS mode),
/// so a SIGSEGV on a live object broke the page's protection, which the program set itself
/// (`mprotect` of a heap buffer), and the fault is the program's (`chain`). (Mapping the page
/// "again" there would find it mapped and retry the access for ever.)
fn on_alias_fault(sig: c_int, addr: usize, write: Option<bool>, regs: Option<Regs>) -> bool {
    match seen_in_arena(addr, access(write)) {
        Seen::Live => sig == libc::SIGBUS && reinstall(addr),
        Seen::Bad(r) => report::fatal_at(regs, r),
    }
}

/// What an address in the alias arena is, for an access `op` of it.
enum Seen {
    /// The alias page of a live group, wherever the address falls in it (the object there may
    /// be dead while its group lives, or the address in a slot of another group, or in the
    /// page's tail: see the module's comment).
    Live,
    /// A freed object, a guard page, an alias never issued: the report.
    Bad(Report),
}

/// Looks up `addr`, in the alias arena, for `on_alias_fault` and `syscall_buffer`.
fn seen_in_arena(addr: usize, op: &'static str) -> Seen {
    let rep = |kind, what, object| Report { kind, addr, op, what, object, claimed: None, pointer: None };
    let Some((e, page)) = alias::decode(addr) else {
        if alias::once_mirrored(addr) {
            return Seen::Bad(rep(Kind::HeapUseAfterFree, alias::FORGOTTEN, None));
        }
        return Seen::Bad(rep(
            Kind::WildAccess,
            "the address is in the allocator's alias arena but in no mirror",
            None,
        ));
    };
    let retired = alias::mirror(e).retired.load(Ordering::Acquire) != 0;
    if !retired && alias::alias_live(e, page) {
        return Seen::Live;
    }
    if let Some((_, s)) = POOL.span_at(POOL.page_addr(page)) {
        match s.kind {
            pool::SLAB if slab::set_up(s) => {
                let c = &CLASSES[s.class as usize];
                let j = slab::page_index(s, c, page);
                let in_page = addr & (PAGE - 1);
                let pos = match slab::locate(c, in_page) {
                    Slot::Start(p) | Slot::Interior(p, _) => Some(p),
                    Slot::Tail => None,
                };
                if let (Some(pos), Some(j)) = (pos, j) {
                    let l = slab::lane_of(s, c, j, pos);
                    let start = (addr & !(PAGE - 1)) + (pos * c.size) as usize;
                    if !retired && l.epoch.load(Ordering::Acquire) == e {
                        // SAFETY: slot index < nslots.
                        let v = unsafe {
                            (*slab::sizes(s).add(slab::slot_index(c, j, pos) as usize)).load(Ordering::Acquire)
                        };
                        if v & FREED != 0 && v != slab::FREE_SLOT {
                            let object = Some(Object { start, size: (v & !FREED) as usize });
                            return Seen::Bad(rep(
                                Kind::HeapUseAfterFree,
                                "the object at this address was freed",
                                object,
                            ));
                        }
                    }
                    if let Some(h) = crate::history::find(addr) {
                        let object = Some(Object { start: h.start, size: h.size });
                        return Seen::Bad(rep(Kind::HeapUseAfterFree, "the object at this address was freed", object));
                    }
                    if retired || alias::was_issued(e, page) == Some(true) {
                        let object = Some(Object { start, size: c.size as usize - crate::guard::CANARY });
                        return Seen::Bad(rep(
                            Kind::HeapUseAfterFree,
                            "the object at this address was freed (its size is at most the size shown)",
                            object,
                        ));
                    }
                }
            }
            pool::PAGES => {
                let size = s.size.load(Ordering::Acquire);
                if !retired && s.epoch.load(Ordering::Acquire) == e {
                    if size & pool::DEAD_BIT == 0 && alias::is_guard(s, page) {
                        let object = Some(Object { start: s.addr, size });
                        return Seen::Bad(rep(
                            Kind::HeapBufferOverflow,
                            "the access is past the end of the object (guard page)",
                            object,
                        ));
                    }
                    if size != pool::DEAD && size & pool::DEAD_BIT != 0 {
                        let object = Some(Object { start: s.addr, size: size & !pool::DEAD_BIT });
                        return Seen::Bad(rep(Kind::HeapUseAfterFree, "the object at this address was freed", object));
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(h) = crate::history::find(addr) {
        let object = Some(Object { start: h.start, size: h.size });
        return Seen::Bad(rep(Kind::HeapUseAfterFree, "the object at this address was freed", object));
    }
    if retired || alias::was_issued(e, page) == Some(true) {
        return Seen::Bad(rep(Kind::HeapUseAfterFree, "the memory at this address was freed", None));
    }
    if let Some(r) = before_object(addr, op) {
        return Seen::Bad(r);
    }
    Seen::Bad(rep(Kind::WildAccess, "the address was never handed out by the allocator", None))
}

/// A fault in a page never handed out, right before a live object that starts the next page:
/// an access before the object's start (an index below 0, a pointer stepped back too far), the
/// underflow it is, reported with its object (at a negative offset).
fn before_object(addr: usize, op: &'static str) -> Option<Report> {
    let next = (addr | (PAGE - 1)) + 1;
    let (o, _) = crate::heap::object_at(next).filter(|&(o, live)| live && o.start == next)?;
    let what = "the access is before the start of the object";
    Some(Report { kind: Kind::HeapBufferOverflow, addr, op, what, object: Some(o), claimed: None, pointer: None })
}

/// The operation of reports on the buffers of system calls.
pub const SYSCALL: &str = "system call";

/// What a system call that failed with `EFAULT` met in the `n` bytes at `a`, one of the
/// buffers it was given: the report for a freed object, a guard page or an alias never
/// handed out, where the buffer starts or where it runs on to from the live object it starts
/// in. None when the range holds only live objects' pages (or nothing of the heap): the
/// fault came from elsewhere (another argument, memory that is not the heap's).
pub fn syscall_buffer(a: usize, n: usize) -> Option<Report> {
    if n == 0 {
        return None;
    }
    let end = a.saturating_add(n.min(alias::MAP_AGAIN_PAGES * PAGE));
    if !alias::in_arena(a) {
        if let Some(r) = large_fault(a, SYSCALL) {
            return Some(r);
        }
        let (_, large::Owner::Live { idx }) = large::owner_near(a)? else { return None };
        let s = POOL.span(idx);
        let view_end = s.view + s.view_len;
        return (a >= s.view && a < view_end && end > view_end).then(|| large_fault(view_end, SYSCALL)).flatten();
    }
    let mut page = a & !(PAGE - 1);
    while page < end && alias::in_arena(page) {
        if !alias::live_page(page) {
            let at = page.max(a);
            if at > a {
                // The buffer starts in a live object and runs on into this page.
                if let Some((o, _)) = crate::heap::object_at(a).filter(|&(o, live)| live && at >= o.start + o.size) {
                    return Some(past_end(o, a, "the buffer runs past the end of the object it starts in", SYSCALL));
                }
            }
            return match seen_in_arena(at, SYSCALL) {
                Seen::Bad(r) => Some(r),
                Seen::Live => None,
            };
        }
        page += PAGE;
    }
    None
}

/// The report on a call's buffer at `buf` that runs past the end of the live object `o` it
/// starts in: at the object's end.
pub fn past_end(o: Object, buf: usize, what: &'static str, op: &'static str) -> Report {
    let addr = o.start + o.size;
    Report { kind: Kind::HeapBufferOverflow, addr, op, what, object: Some(o), claimed: None, pointer: Some(buf) }
}

/// The report on the buffer at `addr`, in the freed object `o`, of a call (`op`: a system
/// call, or the stdio function that was given it).
pub fn in_freed(addr: usize, o: Object, op: &'static str) -> Report {
    let what = "the call's buffer is in an object that was freed";
    Report { kind: Kind::HeapUseAfterFree, addr, op, what, object: Some(o), claimed: None, pointer: None }
}

/// The thread whose `heal` runs to examine the buffers of a call that failed (0: none).
static EXAMINER: AtomicU32 = AtomicU32::new(0);

/// A call failed with `EFAULT` for good, its buffers' live pages mapped: the kernel met a page
/// of a buffer that belongs to no live object. `heal` runs once more, while `alias::map_again`
/// looks at each buffer it is given (`examining`) and reports the first that is in a freed
/// object, or runs past the end of its object into a freed one, a guard page or an alias never
/// handed out (`syscall_buffer`): a use-after-free or an overflow by the kernel, which
/// the program would otherwise see only as `EFAULT` (the kernel touched nothing). One thread at
/// a time; another that meets such a failure meanwhile returns `EFAULT` unexamined.
#[cold]
#[inline(never)]
pub fn examine(heal: &impl Fn() -> usize) {
    if !crate::is_ready() {
        return;
    }
    let me = crate::heap::my_tid();
    if EXAMINER.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed).is_err() {
        return;
    }
    heal();
    EXAMINER.store(0, Ordering::Release);
}

/// Whether this thread examines the buffers it maps again (`examine`).
pub fn examining() -> bool {
    let t = EXAMINER.load(Ordering::Relaxed);
    t != 0 && t == crate::heap::my_tid()
}

/// Reports what `examine` found in a buffer, with the configured action.
#[cold]
pub fn buffer_misused(r: Report) -> ! {
    EXAMINER.store(0, Ordering::Release);
    report::fatal(r)
}

/// Maps the faulting page of a live alias again: it lost its page-table entry (after a fork,
/// a swap-in, a pageout, the program's own `madvise`). Another thread may have mapped it meanwhile, which
/// is as good.
fn reinstall(addr: usize) -> bool {
    if alias::revoke_kind() != alias::Revoke::Uffd {
        return false;
    }
    match alias::reinstall(addr) {
        Ok(true) => {
            alias::FAULTS_HANDLED.fetch_add(1, Ordering::Relaxed);
            true
        }
        // Freed by another thread since the look-up: the access, made again, faults on the
        // revoked page and is reported.
        Ok(false) => true,
        Err(e) => {
            // The fault then goes to the program's handler or kills the process: say why.
            report::say(format_args!(
                "could not map again the page of a live object at {addr:#x} after a fault (errno {e})"
            ));
            false
        }
    }
}

fn large_fault(addr: usize, op: &'static str) -> Option<Report> {
    let (start, entry) = large::owner_near(addr)?;
    match entry {
        large::Owner::Freed { pages } => (addr < start + pages * PAGE + PAGE).then(|| Report {
            kind: Kind::HeapUseAfterFree,
            addr,
            op,
            what: "the large object at this address was freed",
            object: crate::history::find(addr).map(|h| Object { start: h.start, size: h.size }),
            claimed: None,
            pointer: None,
        }),
        large::Owner::Live { idx } => {
            let s = POOL.span(idx);
            let size = s.size.load(Ordering::Acquire) & !pool::DEAD_BIT;
            let view_end = s.view + s.view_len;
            let (what, near) = if addr >= view_end {
                // The no-access room a growing object keeps past its view counts as its guard.
                let room_end = s.view + ((s.npages as usize) << crate::sys::PAGE_SHIFT);
                ("the access is past the end of a large object (guard page)", addr < room_end.max(view_end + PAGE))
            } else if addr < s.view {
                ("the access is before the start of a large object (guard page)", addr + PAGE >= s.view)
            } else {
                return None;
            };
            near.then_some(Report {
                kind: Kind::HeapBufferOverflow,
                addr,
                op,
                what,
                object: Some(Object { start: s.addr, size }),
                claimed: None,
                pointer: None,
            })
        }
    }
}

fn chain(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let Some(i) = slot_of(sig) else { return };
    // SAFETY: the stored action was written under the lock of the program's actions; a torn
    // read cannot happen for a signal raised synchronously by this very thread's fault while
    // nobody changes it.
    let act = unsafe { PROGRAM.get()[i].assume_init_read() };
    let h = act.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // SAFETY: reading si_code of a valid siginfo.
        if unsafe { (*info).si_code } > 0 {
            // A fault: return with its signal blocked in the interrupted context. The
            // instruction faults again, and the kernel, finding the signal of a synchronous
            // fault blocked, resets it to the default action and unblocks it: the program dies
            // of it as it would without us. No system call but the return (through the
            // library's own restorer), so a seccomp filter of the program's that refuses
            // `rt_sigaction` or `tgkill` does not turn the program's own crash into a SIGSYS.
            // SAFETY: `ctx` is the ucontext the kernel passed to this handler.
            add_signal(unsafe { &mut (*(ctx as *mut libc::ucontext_t)).uc_sigmask }, sig);
            return;
        }
        // A signal sent by kill() would not repeat: ignored if the program ignores it, else
        // die of it now.
        if h == libc::SIG_IGN {
            return;
        }
        sys::die_of(sig);
    }
    // SAFETY: calling the program's handler the way the kernel would have.
    unsafe {
        if act.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) = core::mem::transmute(h);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(c_int) = core::mem::transmute(h);
            f(sig);
        }
    }
}

/// `sigaction` for SIGSEGV/SIGBUS once our handler is in: record, don't replace. The
/// program's handlers of other signals are set to be called through `relay`.
///
/// # Safety
/// The C contract of `sigaction`.
pub unsafe fn sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    match slot_of(sig) {
        Some(i) if INSTALLED.load(Ordering::Acquire) => program_locked(|| {
            // SAFETY: writes under the lock (or by a handler that interrupted its holder, on
            // the same thread); pointers per the C contract.
            unsafe {
                let prog = PROGRAM.get_mut();
                if !old.is_null() {
                    *old = prog[i].assume_init_read();
                }
                if !act.is_null() {
                    prog[i].write(*act);
                }
            }
            0
        }),
        _ if INSTALLED.load(Ordering::Acquire) && (1..RELAYED.len() as c_int).contains(&sig) => {
            // SAFETY: pointers per the C contract.
            program_locked(|| unsafe { relayed_action(sig as usize, act, old) })
        }
        // SAFETY: forwarding to glibc.
        _ => unsafe { __sigaction(sig, act, old) },
    }
}

/// `f` under the lock of the program's actions, a lock that knows its holder: `sigaction` is
/// async-signal-safe, and a handler that sets itself again (`signal` in a System V handler)
/// while it interrupted its own thread inside `sigaction` runs `f` at once instead of waiting
/// for ever for its thread's lock (with no system call: a seccomp filter of the program's may
/// refuse `rt_sigprocmask`, which blocking signals meanwhile would need).
fn program_locked<R>(f: impl FnOnce() -> R) -> R {
    let me = crate::heap::my_tid();
    loop {
        match PROGRAM_OWNER.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => break,
            Err(holder) if holder == me => return f(),
            Err(holder) => sys::futex_wait(&PROGRAM_OWNER, holder),
        }
    }
    let r = f();
    PROGRAM_OWNER.store(0, Ordering::Release);
    sys::futex_wake_all(&PROGRAM_OWNER);
    r
}

/// In a fork child: a thread of the parent that held the lock of the program's actions is
/// not the child's.
pub fn fork_child() {
    PROGRAM_OWNER.store(0, Ordering::Relaxed);
}

// Restarted futex waits. A handler that interrupts a futex wait returns to the kernel, which
// makes the wait again (`SA_RESTART`, as `signal` sets) and reads its word itself: a word whose
// page was paged out while the thread waited makes the wait fail with `EFAULT`, and glibc
// aborts the process (see `futex`). So the program's handlers of signals other than SIGSEGV and
// SIGBUS are called through `relay`, which, after the handler returns, sends such a wait on a
// word in the arena to be made again from user mode (`futex::send`), or, where that cannot be,
// maps again the memory it reads: the kernel has already set the interrupted registers to make
// the call again (its number back in `rax`, the instruction pointer back on the `syscall`).

/// The program's handler of each signal that the kernel calls through `relay` (0: none).
static RELAYED: [AtomicUsize; 65] = [const { AtomicUsize::new(0) }; 65];
/// Whether that handler was set with `SA_SIGINFO` (for the action read back).
static RELAYED_INFO: [AtomicBool; 65] = [const { AtomicBool::new(false) }; 65];

/// `sigaction` of signal `sig` (not SIGSEGV or SIGBUS), under `program_locked`: a handler is set
/// to be called through `relay`, and the action read back names the program's handler.
///
/// # Safety
/// The C contract of `sigaction`.
unsafe fn relayed_action(sig: usize, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    let before = (RELAYED[sig].load(Ordering::Relaxed), RELAYED_INFO[sig].load(Ordering::Relaxed));
    let r = if act.is_null() {
        // SAFETY: forwarding to glibc.
        unsafe { __sigaction(sig as c_int, act, old) }
    } else {
        // A handler runs with its mask blocked: SIGSEGV and SIGBUS are taken out of it, as out
        // of `sigprocmask`'s sets (`unblockable`), or a fault on a live page that lost its
        // entry, inside the handler, would kill the process.
        // SAFETY: `act` is valid per the C contract; the copy is ours.
        let mut copy = unsafe { *act };
        clear_signal(&mut copy.sa_mask, libc::SIGSEGV);
        clear_signal(&mut copy.sa_mask, libc::SIGBUS);
        let h = copy.sa_sigaction;
        if h != libc::SIG_DFL && h != libc::SIG_IGN {
            // Recorded before the kernel can call `relay` for it.
            RELAYED[sig].store(h, Ordering::Release);
            RELAYED_INFO[sig].store(copy.sa_flags & libc::SA_SIGINFO != 0, Ordering::Release);
            copy.sa_sigaction = relay as *const () as usize;
            copy.sa_flags |= libc::SA_SIGINFO;
        }
        // SAFETY: forwarding to glibc with our copy.
        let r = unsafe { __sigaction(sig as c_int, &copy, old) };
        if r != 0 {
            RELAYED[sig].store(before.0, Ordering::Release);
            RELAYED_INFO[sig].store(before.1, Ordering::Release);
        }
        r
    };
    if r == 0 && !old.is_null() {
        // SAFETY: glibc filled `*old`.
        let old = unsafe { &mut *old };
        if old.sa_sigaction == relay as *const () as usize {
            old.sa_sigaction = before.0;
            if !before.1 {
                old.sa_flags &= !libc::SA_SIGINFO;
            }
        }
    }
    r
}

/// Calls the program's handler of `sig` as the kernel would have, then maps again the memory a
/// futex wait it interrupted reads when the kernel makes it again (see above).
extern "C" fn relay(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let i = sig as usize;
    let Some(h) =
        RELAYED.get(i).map(|h| h.load(Ordering::Acquire)).filter(|&h| h != libc::SIG_DFL && h != libc::SIG_IGN)
    else {
        return;
    };
    // The three arguments whatever the handler takes, as the kernel passes them (a handler of
    // one ignores the other two registers): read with the handler, `RELAYED_INFO` could be of
    // the handler set before or after it.
    // SAFETY: calling the program's handler the way the kernel would have.
    unsafe {
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) = core::mem::transmute(h);
        f(sig, info, ctx);
    }
    mend_restarted_futex(ctx);
}

/// When the interrupted registers in `ctx` make a futex call again (the call's number in `rax`,
/// the instruction pointer on a `syscall`), sends it to be made from user mode, or maps again
/// the memory in the alias arena it reads.
fn mend_restarted_futex(ctx: *mut c_void) {
    if ctx.is_null() || !crate::is_ready() {
        return;
    }
    // SAFETY: for SA_SIGINFO handlers the third argument is a ucontext_t, the registers the
    // thread goes on with when the handler returns.
    let g = unsafe { &mut (*(ctx as *mut libc::ucontext_t)).uc_mcontext.gregs };
    let reg = |g: &[i64; 23], r: c_int| g[r as usize] as usize;
    if reg(g, libc::REG_RAX) != libc::SYS_futex as usize {
        return;
    }
    // The instruction's two bytes, read so that memory which cannot be read is no fault.
    let byte = |a: usize| {
        let p = sys::probe_word(a & !7);
        (p.status != sys::PROBE_FAILED).then_some((p.value >> ((a & 7) * 8)) as u8)
    };
    let rip = reg(g, libc::REG_RIP);
    if byte(rip) != Some(0x0f) || byte(rip.wrapping_add(1)) != Some(0x05) {
        return;
    }
    let (uaddr, op, arg4, uaddr2) =
        (reg(g, libc::REG_RDI), reg(g, libc::REG_RSI), reg(g, libc::REG_R10), reg(g, libc::REG_R8));
    let names = [libc::REG_RIP, libc::REG_RSP, libc::REG_RAX, libc::REG_RCX, libc::REG_R11];
    let [mut rip, mut rsp, mut rax, mut rcx, mut r11] = names.map(|r| g[r as usize] as u64);
    // The call goes on just past its `syscall`.
    let back = (rip as usize).wrapping_add(2);
    let regs = futex::Regs { rip: &mut rip, rsp: &mut rsp, rax: &mut rax, rcx: &mut rcx, r11: &mut r11 };
    // SAFETY: the registers the thread goes on with; the slot is built at the entry, once this
    // handler's frame is gone (`Slot::AtEntry`).
    if unsafe { futex::send(back, uaddr, op, arg4, futex::Slot::AtEntry, regs) } {
        for (r, v) in names.into_iter().zip([rip, rsp, rax, rcx, r11]) {
            g[r as usize] = v as i64;
        }
        return;
    }
    futex::memory(uaddr, op, arg4, uaddr2, |a| {
        if alias::in_arena(a) {
            sys::probe_word(a & !7);
        }
    });
}

/// Removes SIGSEGV and SIGBUS from a set the program wants to block.
pub fn unblockable(how: c_int, set: *const libc::sigset_t, copy: &mut libc::sigset_t) -> *const libc::sigset_t {
    if set.is_null() || how == libc::SIG_UNBLOCK || !INSTALLED.load(Ordering::Acquire) {
        return set;
    }
    // SAFETY: `set` is a valid sigset per the C contract.
    unsafe { *copy = *set };
    // SAFETY: glibc's sigset_t is an array of unsigned longs; the first holds signals 1..=64.
    let first = unsafe { &mut *(copy as *mut libc::sigset_t as *mut u64) };
    *first = unblockable_mask(how, *first);
    copy
}

/// `mask` (signals 1..=64, bit `sig - 1`) without SIGSEGV and SIGBUS when it is to be blocked:
/// the rule of `unblockable`, also for a kernel set of 8 bytes
/// (`syscall(SYS_rt_sigprocmask, ...)`).
pub fn unblockable_mask(how: c_int, mask: u64) -> u64 {
    if how == libc::SIG_UNBLOCK || !INSTALLED.load(Ordering::Acquire) {
        return mask;
    }
    let faults = (1u64 << (libc::SIGSEGV - 1)) | (1u64 << (libc::SIGBUS - 1));
    mask & !faults
}

/// Sets signal `sig` (1..=64) in `set` directly (no library call).
pub fn add_signal(set: &mut libc::sigset_t, sig: c_int) {
    let words = set as *mut libc::sigset_t as *mut u64;
    // SAFETY: glibc's sigset_t is an array of unsigned longs, bit (sig - 1) for signal `sig`.
    unsafe { *words |= 1u64 << (sig - 1) };
}

/// Whether signal `sig` (1..=64) is in `set`.
pub fn has_signal(set: &libc::sigset_t, sig: c_int) -> bool {
    let words = set as *const libc::sigset_t as *const u64;
    // SAFETY: glibc's sigset_t is an array of unsigned longs, bit (sig - 1) for signal `sig`.
    unsafe { *words & (1u64 << (sig - 1)) != 0 }
}

/// Clears signal `sig` (1..=64) in `set` directly (no library call, so `errno` is untouched).
pub fn clear_signal(set: &mut libc::sigset_t, sig: c_int) {
    let words = set as *mut libc::sigset_t as *mut u64;
    // SAFETY: glibc's sigset_t is an array of unsigned longs, bit (sig - 1) for signal `sig`.
    unsafe { *words &= !(1u64 << (sig - 1)) };
}

// ---- alternate signal stacks ----
//
// A handler installed with `SA_ONSTACK` (ours is) runs on the thread's alternate signal stack,
// and the kernel writes the signal's frame there itself. A program that gives `sigaltstack`
// a heap object (Ruby does for each thread, vim for its own) puts that stack behind an alias:
// once the kernel paged its page out, the frame cannot be written, no handler runs, and the
// kernel kills the process with SIGSEGV (Ruby and vim under steady pageout, every run). So
// such a stack is replaced, for the kernel, by one of the library's own (anonymous memory,
// below it a guard page), as big as the one asked for; the program is told of its own stack
// when it asks (`oss`). A thread keeps its replacement for its next `sigaltstack` and unmaps
// it when it exits (a pthread key's destructor, which first turns the stack off).
//
// A thread with no alternate stack runs our handler on the stack it is on, and that can be a
// heap object too: a coroutine's stack (`makecontext`, Boost.Context's default allocator,
// `pthread_attr_setstack`) that sat idle until the kernel paged it out. Resumed, its first
// access faults, and the kernel, which must write the handler's frame on that very stack,
// cannot: the process died of SIGSEGV (`tests/c/pageout.c coroutine`, both modes). So a thread
// that has none gets an alternate stack of the library's own when its allocator cache is made
// (`own_stack`), in the same kind of mapping. The program is told it has none, as it has not
// set one; a stack it sets is the kernel's (or replaced, if in the heap), and when it turns
// its own off, the library's takes its place again.

/// The head of a replacement stack's mapping: a page holding what the program asked for, then
/// a guard page, then the stack.
#[repr(C)]
struct AltHead {
    /// Bytes of the whole mapping.
    len: usize,
    /// The program's stack, as it gave it; 0 for the library's own (`own_stack`).
    sp: usize,
    size: usize,
}

/// Bytes of the library's own alternate stack. The program's SIGSEGV and SIGBUS handlers,
/// which ours calls for faults that are not the library's, run on it too, so it is roomy;
/// untouched pages cost nothing.
const OWN_STACK: usize = 64 * 1024;

/// An alternate stack turned off, as the kernel reports it.
const NO_STACK: libc::stack_t = libc::stack_t { ss_sp: ptr::null_mut(), ss_flags: libc::SS_DISABLE, ss_size: 0 };

/// The pthread key holding the thread's replacement (its `AltHead`); `u32::MAX` until made.
static ALT_KEY: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(u32::MAX);

/// The key of `ALT_KEY`, made on first use (under the lock of the program's actions).
pub fn alt_key() -> Option<libc::pthread_key_t> {
    let k = ALT_KEY.load(Ordering::Acquire);
    if k != u32::MAX {
        return Some(k);
    }
    let k = program_locked(|| {
        let mut k = ALT_KEY.load(Ordering::Acquire);
        if k == u32::MAX {
            let mut key: libc::pthread_key_t = 0;
            // SAFETY: pthread_key_create with a valid destructor; it does not allocate in glibc
            // for the first keys.
            if unsafe { libc::pthread_key_create(&mut key, Some(alt_exit)) } == 0 {
                ALT_KEY.store(key, Ordering::Release);
                k = key;
            }
        }
        k
    });
    (k != u32::MAX).then_some(k)
}

/// The thread's replacement stack, if it has one.
fn alt_head() -> *mut AltHead {
    match ALT_KEY.load(Ordering::Acquire) {
        u32::MAX => ptr::null_mut(),
        // SAFETY: a key made by pthread_key_create; reading a thread's own value.
        k => unsafe { libc::pthread_getspecific(k) as *mut AltHead },
    }
}

/// The stack of a replacement mapping: after the head and the guard page.
fn alt_stack(h: *mut AltHead) -> usize {
    h as usize + 2 * PAGE
}

/// Mappings of exited threads' stacks of the smallest size, kept for the next threads: a
/// program that starts and ends threads all the time would otherwise map and unmap one per
/// thread (an unmapping in a process with threads flushes the other processors' TLBs).
static SPARE_STACKS: [AtomicUsize; 16] = [const { AtomicUsize::new(0) }; 16];

/// A kept mapping of the smallest size, or null.
fn spare_head() -> *mut AltHead {
    for s in &SPARE_STACKS {
        if s.load(Ordering::Relaxed) != 0 {
            let h = s.swap(0, Ordering::Acquire);
            if h != 0 {
                return h as *mut AltHead;
            }
        }
    }
    ptr::null_mut()
}

extern "C" fn alt_exit(h: *mut c_void) {
    if h.is_null() {
        return;
    }
    // SAFETY: turning the thread's alternate stack off, whichever it is (it is not on it: it
    // is exiting normally, and nothing of its own runs on it any more), then giving back the
    // mapping this thread made or took; nobody else uses it.
    unsafe {
        kernel_altstack(&NO_STACK, ptr::null_mut::<libc::stack_t>());
        let len = (*(h as *mut AltHead)).len;
        if len == OWN_STACK + 2 * PAGE
            && SPARE_STACKS
                .iter()
                .any(|s| s.compare_exchange(0, h as usize, Ordering::Release, Ordering::Relaxed).is_ok())
        {
            return;
        }
        libc::munmap(h, len);
    }
}

/// The kernel's `sigaltstack`, made directly: the program's `syscall(SYS_sigaltstack, ...)`
/// comes to `sigaltstack` below through the library's `syscall`. 0, or -1 with `errno` set.
fn kernel_altstack(ss: *const libc::stack_t, oss: *mut libc::stack_t) -> c_int {
    // SAFETY: the kernel reads and writes the records, which the callers pass valid or null.
    let r = unsafe { sys::raw_syscall(libc::SYS_sigaltstack, [ss as usize, oss as usize, 0, 0, 0, 0]) };
    if r < 0 {
        sys::set_errno(-r as c_int);
        -1
    } else {
        0
    }
}

/// `sigaltstack`: see above. A stack outside the alias arena is the kernel's as given.
///
/// # Safety
/// The C contract of `sigaltstack`.
pub unsafe fn sigaltstack(ss: *const libc::stack_t, oss: *mut libc::stack_t) -> c_int {
    // SAFETY: an all-zero stack_t is valid; the kernel's current stack goes there.
    let mut cur: libc::stack_t = unsafe { core::mem::zeroed() };
    if kernel_altstack(ptr::null::<libc::stack_t>(), &mut cur) != 0 {
        return -1;
    }
    let h = alt_head();
    let mut told = cur;
    if !h.is_null() && cur.ss_sp as usize == alt_stack(h) {
        // SAFETY: the thread's own head page.
        unsafe {
            told.ss_sp = (*h).sp as *mut c_void;
            told.ss_size = (*h).size;
            if (*h).sp == 0 {
                told = NO_STACK;
            }
        }
    }
    if !ss.is_null() {
        // SAFETY: the program's stack_t, per the C contract.
        let new = unsafe { *ss };
        let off = new.ss_flags & libc::SS_DISABLE != 0;
        let r = if !off && crate::is_ready() && alias::in_arena(new.ss_sp as usize) {
            replace_stack(new, cur, h)
        } else if off && !h.is_null() && wants_own_stack() {
            give_own(h, cur)
        } else {
            // The program's own request, as it made it.
            kernel_altstack(ss, ptr::null_mut::<libc::stack_t>())
        };
        if r != 0 {
            return r;
        }
    }
    if !oss.is_null() {
        // SAFETY: the program's buffer, per the C contract.
        unsafe { *oss = told };
    }
    0
}

/// Gives the kernel a replacement for the program's stack `new` (in the alias arena): the
/// thread's own if it is big enough, else a new one.
fn replace_stack(new: libc::stack_t, cur: libc::stack_t, mut h: *mut AltHead) -> c_int {
    if cur.ss_flags & libc::SS_ONSTACK != 0 {
        sys::set_errno(libc::EPERM);
        return -1;
    }
    if new.ss_size < libc::MINSIGSTKSZ {
        sys::set_errno(libc::ENOMEM);
        return -1;
    }
    let Some(key) = alt_key() else {
        sys::set_errno(libc::ENOMEM);
        return -1;
    };
    let size = sys::round_up(new.ss_size, PAGE);
    // SAFETY: reading the thread's own head page.
    if !h.is_null() && unsafe { (*h).len } < size + 2 * PAGE {
        if cur.ss_sp as usize == alt_stack(h) {
            // Turning off the kernel's use of the mapping about to go.
            kernel_altstack(&NO_STACK, ptr::null_mut::<libc::stack_t>());
        }
        // SAFETY: the thread's own mapping, which the kernel no longer uses.
        unsafe {
            libc::munmap(h as *mut c_void, (*h).len);
            libc::pthread_setspecific(key, ptr::null());
        }
        h = ptr::null_mut();
    }
    if h.is_null() {
        h = new_head(key, size);
        if h.is_null() {
            return -1;
        }
    }
    // SAFETY: the thread's own head page; then the kernel is given its stack.
    unsafe {
        (*h).sp = new.ss_sp as usize;
        (*h).size = new.ss_size;
        let given =
            libc::stack_t { ss_sp: alt_stack(h) as *mut c_void, ss_flags: new.ss_flags, ss_size: (*h).len - 2 * PAGE };
        kernel_altstack(&given, ptr::null_mut::<libc::stack_t>())
    }
}

/// A new mapping for a stack of `size` bytes (a multiple of the page; `OWN_STACK` at least, so
/// that it can serve as the library's own later), its head and guard page first, made the
/// thread's (`key`); null when it cannot be mapped.
fn new_head(key: libc::pthread_key_t, size: usize) -> *mut AltHead {
    let len = size.max(OWN_STACK) + 2 * PAGE;
    if len == OWN_STACK + 2 * PAGE {
        let h = spare_head();
        if !h.is_null() {
            // SAFETY: a kept mapping, now this thread's alone.
            unsafe { libc::pthread_setspecific(key, h as *const c_void) };
            return h;
        }
    }
    // SAFETY: a fresh anonymous mapping, then its second page made a guard; the head is
    // written in its first page, and the thread's key value set to it.
    unsafe {
        let m = libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if m == libc::MAP_FAILED {
            return ptr::null_mut();
        }
        libc::mprotect((m as usize + PAGE) as *mut c_void, PAGE, libc::PROT_NONE);
        libc::pthread_setspecific(key, m);
        (*(m as *mut AltHead)).len = len;
        m as *mut AltHead
    }
}

/// Whether threads get the library's own alternate stack: only where userfaultfd traps (the
/// fallbacks leave paged-out pages to the kernel), and not once the program confined itself
/// with seccomp (its filter may refuse the calls, or kill the process for them).
fn wants_own_stack() -> bool {
    alias::revoke_kind() == alias::Revoke::Uffd && !crate::seccomp::filtered()
}

/// Gives the kernel the library's own stack in the thread's mapping `h`, in place of `cur`.
fn give_own(h: *mut AltHead, cur: libc::stack_t) -> c_int {
    if cur.ss_flags & libc::SS_ONSTACK != 0 {
        sys::set_errno(libc::EPERM);
        return -1;
    }
    // SAFETY: the thread's own head page; then the kernel is given its stack.
    unsafe {
        (*h).sp = 0;
        (*h).size = 0;
        let given = libc::stack_t { ss_sp: alt_stack(h) as *mut c_void, ss_flags: 0, ss_size: (*h).len - 2 * PAGE };
        kernel_altstack(&given, ptr::null_mut::<libc::stack_t>())
    }
}

/// Gives the calling thread the library's own alternate stack if it has none (see above).
/// Called when the thread's allocator cache is made.
pub fn own_stack() {
    if !wants_own_stack() {
        return;
    }
    // SAFETY: an all-zero stack_t is valid; the kernel's current stack goes there.
    let mut cur: libc::stack_t = unsafe { core::mem::zeroed() };
    if kernel_altstack(ptr::null::<libc::stack_t>(), &mut cur) != 0 || cur.ss_flags & libc::SS_DISABLE == 0 {
        return;
    }
    let Some(key) = alt_key() else { return };
    let mut h = alt_head();
    if h.is_null() {
        h = new_head(key, 0);
        if h.is_null() {
            return;
        }
    }
    give_own(h, cur);
}
