//! Seccomp filters that the program installs while it runs.
//!
//! A program may confine itself once it has started: OpenSSH's pre-authentication child
//! installs a filter that lets through `read`, `write`, `mmap` and a few more, and kills the
//! process for any other system call. The allocator's own calls are not on such lists: every
//! new alias is installed with an `ioctl` on the allocator's userfaultfd, revocation batches
//! go through `process_madvise`, pool pages are filled and punched with `fallocate`. Under such
//! a filter the next `malloc` would kill the process (the program's own code never made those
//! calls, so its filter never needed them).
//!
//! So the filter is changed on its way to the kernel (`prctl(PR_SET_SECCOMP)` and
//! `syscall(SYS_seccomp)`, as libseccomp loads filters, are interposed): a short program in
//! front of it lets through exactly the calls the allocator makes on its own objects from its
//! own code, and hands every other call to the program's filter, unchanged. "Its own code" is
//! the library's executable segment, compared with the address the call returns to, less the
//! one `syscall` instruction through which the program's `syscall()` calls pass
//! (`api::syscall`): so the calls are made with `sys::raw_syscall`, not through the C
//! library's wrappers. After an `exec` (the filter stays) the library, if loaded again, lies
//! elsewhere, and the new program meets its filter alone. The calls let through
//! (`exemptions`):
//!
//! - `ioctl` on the allocator's userfaultfd, with `UFFDIO_CONTINUE` or `UFFDIO_REGISTER`
//!   (installing aliases, registering new mirrors);
//! - `fallocate` on the pool's memfd (filling and punching pool pages);
//! - `process_madvise` naming the allocator's target (`PIDFD_SELF_THREAD` or its own pidfd)
//!   with `MADV_DONTNEED` or `MADV_GUARD_INSTALL` (revocation batches);
//! - `mmap` of the pool's memfd, readable and writable at most (mirrors, large objects' views);
//! - `mremap` with an old size of 0 (a second view of a shared mapping: new mirrors);
//! - `madvise` with the advice values the allocator uses (dropping, punching, filling and
//!   guarding its own pages, keeping them out of core dumps);
//! - `gettid` (reports, per-thread records);
//! - `fstat` of the userfaultfd or the memfd (has the program closed or replaced them?) and
//!   of standard error (may a message go there?);
//! - `prlimit64` reading the process's own limits (sizing metadata and views);
//! - `rt_sigreturn` from the allocator's own signal-return trampoline (`sys::restore_rt`):
//!   the return from its SIGSEGV/SIGBUS handler, which maps again a live alias that lost its
//!   page-table entry (the program's `madvise`, the kernel's pageout) and calls the program's
//!   own handlers;
//! - `getpid` (reports), and what ends the process (`sys::die_of`: SIGABRT after a report,
//!   SIGSEGV or SIGBUS sent by `kill` to a program that left their action at the default):
//!   `rt_sigaction` of those three signals, `rt_sigprocmask` unblocking, `tgkill` sending one
//!   of them to this process (its id when the filter was installed), so that it dies of that
//!   signal, not of the filter's action.
//!
//! What that leaves a program that was taken over (the reason such filters exist): the same
//! calls, on the same objects. Installing pool pages into the allocator's own mirrors and
//! dropping pages reaches nothing outside the process; the userfaultfd is opened in user mode
//! only and delivers `SIGBUS` rather than waiting, so it cannot hold up the kernel; no new
//! descriptor can be opened, no executable memory mapped. The trampoline's `rt_sigreturn` loads
//! registers from the stack, as any sigreturn does, but every call made after it meets the
//! same rules. Everything else the program's filter refused it still refuses.
//! `seccomp_exempt=0` passes filters unchanged (and the allocator's first refused call then
//! ends the process as the filter says). Filters in force before the library started
//! (Docker's, systemd's `SystemCallFilter=`) are not touched: the library finds them at
//! start-up and uses what they allow (docs/usage.md, "userfaultfd").
//!
//! A filter that would grow past the kernel's 4096 instructions is passed unchanged, with a
//! message; so is a strict-mode request (`SECCOMP_MODE_STRICT` allows no `mmap` at all).
//! Either way the process is noted as confined (`filtered`): no more sweeps (they open
//! `/proc` files), no statistics at exit, and messages only where they cannot meet a
//! file-size limit (`report::say`).

use core::sync::atomic::{AtomicBool, Ordering};

use crate::pool::POOL;
use crate::{alias, report, sys};

/// One classic BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

/// `struct sock_fprog`.
#[repr(C)]
struct Prog {
    len: u16,
    filter: *const Insn,
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_LD_IMM: u16 = 0x00;
const BPF_LDX_IMM: u16 = 0x01;
const BPF_AND_K: u16 = 0x54;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;
/// The kernel's limit on a filter's length (`BPF_MAXINSNS`).
const MAX_INSNS: usize = 4096;
const RET_ALLOW: u32 = 0x7fff_0000;
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const SECCOMP_MODE_FILTER: usize = 2;
const SECCOMP_SET_MODE_STRICT: usize = 0;
const SECCOMP_SET_MODE_FILTER: usize = 1;

// Offsets in `struct seccomp_data`.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const OFF_IP: u32 = 8;
fn arg_lo(i: u8) -> u32 {
    16 + 8 * i as u32
}

/// What one argument must be for a call to pass.
#[derive(Clone, Copy)]
enum Cond {
    /// Its low 32 bits are one of these (descriptors, commands, advice values: the kernel
    /// reads 32 bits of them).
    In { arg: u8, vals: [u32; 6], n: u8 },
    /// All 64 bits are within this mask (protection bits).
    Within { arg: u8, mask: u32 },
    /// The call returns to the address with this low half (the high half is the allocator's
    /// code's, checked first): made by one particular `syscall` instruction.
    From { ip_lo: u32 },
}

/// A system call let through when all its conditions hold.
#[derive(Clone, Copy)]
struct Rule {
    nr: u32,
    conds: [Option<Cond>; 2],
}

const MADV_DONTNEED: u32 = 4;
const MADV_REMOVE: u32 = 9;
const MADV_DONTDUMP: u32 = 16;
const MADV_DODUMP: u32 = 17;
const MADV_POPULATE_WRITE: u32 = 23;
const MADV_GUARD_INSTALL: u32 = 102;

fn one(arg: u8, v: u32) -> Option<Cond> {
    Some(Cond::In { arg, vals: [v, 0, 0, 0, 0, 0], n: 1 })
}

/// The allocator's calls on its own objects (see the module's comment), for its descriptors
/// as they are now.
fn exemptions(out: &mut [Rule; MAX_RULES]) -> usize {
    let mut n = 0;
    let mut add = |r: Rule| {
        out[n] = r;
        n += 1;
    };
    let uffd = alias::uffd();
    if uffd >= 0 {
        add(Rule {
            nr: libc::SYS_ioctl as u32,
            conds: [
                one(0, uffd as u32),
                Some(Cond::In {
                    arg: 1,
                    vals: [alias::UFFDIO_CONTINUE as u32, alias::UFFDIO_REGISTER as u32, 0, 0, 0, 0],
                    n: 2,
                }),
            ],
        });
    }
    let pool = POOL.layout().fd;
    add(Rule { nr: libc::SYS_fallocate as u32, conds: [one(0, pool as u32), None] });
    if let Some(target) = alias::advice_target() {
        add(Rule {
            nr: libc::SYS_process_madvise as u32,
            conds: [
                one(0, target as u32),
                Some(Cond::In { arg: 3, vals: [MADV_DONTNEED, MADV_GUARD_INSTALL, 0, 0, 0, 0], n: 2 }),
            ],
        });
    }
    add(Rule {
        nr: libc::SYS_mmap as u32,
        conds: [one(4, pool as u32), Some(Cond::Within { arg: 2, mask: (libc::PROT_READ | libc::PROT_WRITE) as u32 })],
    });
    add(Rule { nr: libc::SYS_mremap as u32, conds: [Some(Cond::Within { arg: 1, mask: 0 }), None] });
    add(Rule {
        nr: libc::SYS_madvise as u32,
        conds: [
            Some(Cond::In {
                arg: 2,
                vals: [MADV_DONTNEED, MADV_REMOVE, MADV_DONTDUMP, MADV_DODUMP, MADV_POPULATE_WRITE, MADV_GUARD_INSTALL],
                n: 6,
            }),
            None,
        ],
    });
    add(Rule { nr: libc::SYS_gettid as u32, conds: [None, None] });
    // Reading the process's own limits (`sys::as_limit`, `sys::data_limit`).
    add(Rule { nr: libc::SYS_prlimit64 as u32, conds: [one(0, 0), Some(Cond::Within { arg: 2, mask: 0 })] });
    // Whether the program closed or replaced the descriptors (`sys::file_id`), and where
    // messages would go (`report::say`).
    add(Rule {
        nr: libc::SYS_fstat as u32,
        conds: [Some(Cond::In { arg: 0, vals: [pool as u32, uffd as u32, 2, 0, 0, 0], n: 3 }), None],
    });
    // The return from the allocator's SIGSEGV/SIGBUS handler (a live alias mapped again, a
    // program's handler chained to), through its own restorer only.
    add(Rule {
        nr: libc::SYS_rt_sigreturn as u32,
        conds: [Some(Cond::From { ip_lo: sys::sigreturn_resume() as u32 }), None],
    });
    // The process id, for reports (`sys::getpid`).
    add(Rule { nr: libc::SYS_getpid as u32, conds: [None, None] });
    // Ending the process (`sys::die_of`): SIGABRT after a report, or SIGSEGV/SIGBUS sent by
    // `kill` with the program's action at its default, back to its default action and
    // unblocked, then sent to this process only (its id now: a child forked later does not
    // match and meets the program's filter).
    for (nr, conds) in abort_rules(sys::getpid()) {
        add(Rule { nr, conds });
    }
    n
}

/// The rules that let `sys::die_of` end process `pid` with SIGABRT (after a report), or with
/// SIGSEGV or SIGBUS (sent by `kill` while the program's action for them is the default).
fn abort_rules(pid: u32) -> [(u32, [Option<Cond>; 2]); 3] {
    let sigs = |arg| {
        let v = [libc::SIGABRT as u32, libc::SIGSEGV as u32, libc::SIGBUS as u32, 0, 0, 0];
        Some(Cond::In { arg, vals: v, n: 3 })
    };
    [
        (libc::SYS_rt_sigaction as u32, [sigs(0), None]),
        (libc::SYS_rt_sigprocmask as u32, [one(0, libc::SIG_UNBLOCK as u32), None]),
        (libc::SYS_tgkill as u32, [one(0, pid), sigs(2)]),
    ]
}

/// Most rules `exemptions` writes.
const MAX_RULES: usize = 14;

/// Where a conditional jump goes, before offsets are known.
#[derive(Clone, Copy)]
enum To {
    /// The next instruction.
    Next,
    /// The start of the program's own filter.
    Theirs,
    /// Instruction `i` of the prefix.
    At(usize),
}

/// Most instructions a prefix takes: 10 for the architecture and the caller's address (code
/// across a 4 GiB boundary), then `MAX_RULES` rules of at most 16, and 2 (jumps over all of
/// them stay below 256).
const PREFIX_MAX: usize = 10 + MAX_RULES * 16 + 2;

/// The prefix being written: instructions with their jumps' targets.
struct Asm {
    code: [(Insn, To, To); PREFIX_MAX],
    n: usize,
}

impl Asm {
    fn emit(&mut self, code: u16, k: u32, jt: To, jf: To) -> Option<usize> {
        *self.code.get_mut(self.n)? = (Insn { code, jt: 0, jf: 0, k }, jt, jf);
        self.n += 1;
        Some(self.n - 1)
    }

    fn stmt(&mut self, code: u16, k: u32) -> Option<usize> {
        self.emit(code, k, To::Next, To::Next)
    }
}

/// Writes the prefix for `rules`, made from the code at `text` (start, end) but for calls that
/// return to `passed` (the program's calls through our `syscall`; 0: none), into `out`;
/// returns its length, or None if it does not fit (or `text` is not known).
fn prefix(rules: &[Rule], text: (usize, usize), passed: usize, out: &mut [Insn]) -> Option<usize> {
    let mut a = Asm { code: [(Insn { code: 0, jt: 0, jf: 0, k: 0 }, To::Next, To::Next); PREFIX_MAX], n: 0 };
    // Only x86-64 calls (an x32 or i386 call has other numbers).
    a.stmt(BPF_LD_W_ABS, OFF_ARCH)?;
    a.emit(BPF_JEQ_K, AUDIT_ARCH_X86_64, To::Next, To::Theirs)?;
    // Only calls made by the allocator's own code: the program's calls, and those of any
    // program the process becomes by `exec` (the filter stays; the library, if loaded again,
    // is elsewhere), meet the program's filter alone.
    // The caller's address is compared in halves (classic BPF loads 32 bits): its high half
    // names the 4 GiB the code lies in, or one of the two where the code crosses a boundary.
    let (lo, hi) = text;
    if lo >= hi || (hi - 1) >> 32 > (lo >> 32) + 1 {
        return None;
    }
    let (first, last) = ((lo >> 32) as u32, ((hi - 1) >> 32) as u32);
    let not_passed = |a: &mut Asm, within: u32| {
        if passed >= lo && passed < hi && (passed >> 32) as u32 == within {
            a.emit(BPF_JEQ_K, passed as u32, To::Theirs, To::Next)?;
        }
        Some(())
    };
    a.stmt(BPF_LD_W_ABS, OFF_IP + 4)?;
    if first == last {
        a.emit(BPF_JEQ_K, first, To::Next, To::Theirs)?;
        a.stmt(BPF_LD_W_ABS, OFF_IP)?;
        not_passed(&mut a, first)?;
        a.emit(BPF_JGE_K, lo as u32, To::Next, To::Theirs)?;
        // An end at a 4 GiB boundary has a low half of 0: every low half is below it.
        if hi as u32 != 0 {
            a.emit(BPF_JGE_K, hi as u32, To::Theirs, To::Next)?;
        }
    } else {
        // Below the boundary, from `lo` up; above it, below `hi` (whose low half is not 0).
        let upper = a.emit(BPF_JEQ_K, last, To::Next, To::Next)?;
        a.emit(BPF_JEQ_K, first, To::Next, To::Theirs)?;
        a.stmt(BPF_LD_W_ABS, OFF_IP)?;
        not_passed(&mut a, first)?;
        let lower_ok = a.emit(BPF_JGE_K, lo as u32, To::Next, To::Theirs)?;
        a.code[upper].1 = To::At(a.n);
        a.stmt(BPF_LD_W_ABS, OFF_IP)?;
        not_passed(&mut a, last)?;
        a.emit(BPF_JGE_K, hi as u32, To::Theirs, To::Next)?;
        a.code[lower_ok].1 = To::At(a.n);
    }
    for r in rules {
        a.stmt(BPF_LD_W_ABS, OFF_NR)?;
        // Its mismatch goes to the next rule, resolved below.
        let head = a.stmt(BPF_JEQ_K, r.nr)?;
        for c in r.conds.iter().flatten() {
            match *c {
                Cond::In { arg, vals, n } => {
                    a.stmt(BPF_LD_W_ABS, arg_lo(arg))?;
                    let n = n as usize;
                    let past = a.n + n;
                    // A match skips the remaining comparisons; the last mismatch fails.
                    for (i, v) in vals[..n].iter().enumerate() {
                        a.emit(BPF_JEQ_K, *v, To::At(past), if i + 1 == n { To::Theirs } else { To::Next })?;
                    }
                }
                Cond::From { ip_lo } => {
                    a.stmt(BPF_LD_W_ABS, OFF_IP)?;
                    a.emit(BPF_JEQ_K, ip_lo, To::Next, To::Theirs)?;
                }
                Cond::Within { arg, mask } => {
                    for k in [arg_lo(arg), arg_lo(arg) + 4] {
                        a.stmt(BPF_LD_W_ABS, k)?;
                        a.stmt(BPF_AND_K, if k == arg_lo(arg) { !mask } else { !0 })?;
                        a.emit(BPF_JEQ_K, 0, To::Next, To::Theirs)?;
                    }
                }
            }
        }
        a.stmt(BPF_RET_K, RET_ALLOW)?;
        a.code[head].2 = To::At(a.n);
    }
    // Every call not let through: the program's filter, started as the kernel starts one,
    // with both registers zero.
    let theirs = a.stmt(BPF_LD_IMM, 0)?;
    a.stmt(BPF_LDX_IMM, 0)?;
    if a.n > out.len() {
        return None;
    }
    let off = |from: usize, to: To| -> Option<u8> {
        let target = match to {
            To::Next => from + 1,
            To::Theirs => theirs,
            To::At(i) => i,
        };
        u8::try_from(target.checked_sub(from + 1)?).ok()
    };
    for (i, (insn, jt, jf)) in a.code[..a.n].iter().enumerate() {
        let mut insn = *insn;
        if insn.code == BPF_JEQ_K || insn.code == BPF_JGE_K {
            insn.jt = off(i, *jt)?;
            insn.jf = off(i, *jf)?;
        }
        out[i] = insn;
    }
    Some(a.n)
}

/// The program's filter with the prefix in front, handed to the kernel (which copies it).
struct Buffer(core::cell::UnsafeCell<[Insn; MAX_INSNS]>);

// SAFETY: used only while `BUSY` is held.
unsafe impl Sync for Buffer {}

static BUFFER: Buffer = Buffer(core::cell::UnsafeCell::new([Insn { code: 0, jt: 0, jf: 0, k: 0 }; MAX_INSNS]));
static BUSY: AtomicBool = AtomicBool::new(false);
/// Whether the "installed as it is" message was said.
static SAID: AtomicBool = AtomicBool::new(false);
/// Set once the program installed a filter (or strict mode) through `prctl` or `syscall`.
static FILTERED: AtomicBool = AtomicBool::new(false);

/// Whether the program confined itself with seccomp while it ran (through the C library:
/// filters installed with a raw system call are not seen). Such a filter may refuse, or kill
/// the process for, the files that sweeps open and the calls the report's extras make.
pub fn filtered() -> bool {
    FILTERED.load(Ordering::Relaxed)
}

/// Makes `call(prog)` with the program's filter `theirs`, or with it wrapped behind the prefix
/// when the allocator is running and `seccomp_exempt` allows; returns what the system call
/// returned.
fn with_filter(theirs: usize, call: impl Fn(usize) -> isize) -> isize {
    if theirs == 0 || !crate::is_ready() || !crate::options().seccomp_exempt {
        return confine(|| call(theirs));
    }
    // SAFETY: the call's contract: `theirs` points at a `struct sock_fprog` (a program that
    // passes a bad pointer faults here instead of getting EFAULT).
    let header = unsafe { core::ptr::read_unaligned(theirs as *const Prog) };
    if header.len == 0 || header.filter.is_null() {
        return call(theirs);
    }
    // The descriptors' numbers go into the prefix: they must be the ones the allocator will
    // use (a daemon may have closed the userfaultfd since the last install).
    alias::ensure_uffd();
    while BUSY.swap(true, Ordering::Acquire) {
        core::hint::spin_loop();
    }
    // SAFETY: `BUSY` is ours.
    let buf = unsafe { &mut *BUFFER.0.get() };
    let mut rules = [Rule { nr: 0, conds: [None, None] }; MAX_RULES];
    let n = exemptions(&mut rules);
    let len = header.len as usize;
    let text = crate::stack::own_text().unwrap_or((0, 0));
    #[cfg(not(test))]
    let passed = crate::api::syscall_resume();
    #[cfg(test)]
    let passed = 0;
    let made = prefix(&rules[..n], text, passed, buf);
    let fits = made.filter(|p| p + len <= MAX_INSNS);
    let r = match fits {
        Some(p) => {
            // SAFETY: the call's contract: the filter is `len` instructions at `header.filter`;
            // `buf` has room for them after the prefix.
            unsafe { core::ptr::copy_nonoverlapping(header.filter, buf[p..].as_mut_ptr(), len) };
            let ours = Prog { len: (p + len) as u16, filter: buf.as_ptr() };
            // Said first: under the filter, a message's own calls might not pass.
            if crate::options().verbose {
                report::say(format_args!(
                    "the program installs a seccomp filter; the allocator's own calls on its own descriptors pass it"
                ));
            }
            confine(|| call(&ours as *const Prog as usize))
        }
        None => {
            if !SAID.swap(true, Ordering::Relaxed) {
                // Why, for the one who reads it: the code's place unknown, or no room left.
                let room = made.unwrap_or(0);
                report::say(format_args!(
                    "the program's seccomp filter is installed as it is ({len} instructions; the allocator's own calls could \
                     not be let through: code at {:#x}..{:#x}, prefix {room} instructions): a call it refuses ends the \
                     process as the filter says",
                    text.0, text.1
                ));
            }
            confine(|| call(theirs))
        }
    };
    BUSY.store(false, Ordering::Release);
    r
}

/// Makes a call that confines the process, noted before it is made (once a filter is in
/// force, calls made to note it might not pass) and forgotten if it failed.
fn confine(call: impl FnOnce() -> isize) -> isize {
    let before = FILTERED.swap(true, Ordering::Relaxed);
    let r = call();
    if r < 0 && !before {
        FILTERED.store(false, Ordering::Relaxed);
    }
    r
}

/// `prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog)` and every other `prctl`; returns the
/// system call's result (minus the error number on failure).
pub fn prctl(option: usize, a2: usize, a3: usize, a4: usize, a5: usize) -> isize {
    let raw = |a3: usize| {
        // SAFETY: the program's own prctl, with its argument replaced by an equivalent filter.
        unsafe { sys::raw_syscall(libc::SYS_prctl, [option, a2, a3, a4, a5, 0]) }
    };
    if option != libc::PR_SET_SECCOMP as usize {
        raw(a3)
    } else if a2 == SECCOMP_MODE_FILTER {
        with_filter(a3, raw)
    } else {
        confine(|| raw(a3))
    }
}

/// The `seccomp` system call (made through `syscall`, as libseccomp does).
pub fn seccomp(op: usize, flags: usize, args: usize) -> isize {
    let raw = |args: usize| {
        // SAFETY: as `prctl` above.
        unsafe { sys::raw_syscall(libc::SYS_seccomp, [op, flags, args, 0, 0, 0]) }
    };
    match op {
        SECCOMP_SET_MODE_FILTER => with_filter(args, raw),
        SECCOMP_SET_MODE_STRICT => confine(|| raw(args)),
        _ => raw(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a classic BPF program over a `seccomp_data` (the instructions the prefix uses, and
    /// returns of constants), as the kernel would.
    fn run(prog: &[Insn], nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        run_at(prog, nr, arch, IP, args)
    }

    fn run_at(prog: &[Insn], nr: u32, arch: u32, ip: u64, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        data[8..16].copy_from_slice(&ip.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let i = prog[pc];
            pc += 1;
            match i.code {
                BPF_LD_W_ABS => acc = u32::from_ne_bytes(data[i.k as usize..i.k as usize + 4].try_into().unwrap()),
                BPF_LD_IMM => acc = i.k,
                BPF_LDX_IMM => {}
                BPF_AND_K => acc &= i.k,
                BPF_JEQ_K => pc += if acc == i.k { i.jt } else { i.jf } as usize,
                BPF_JGE_K => pc += if acc >= i.k { i.jt } else { i.jf } as usize,
                BPF_RET_K => return i.k,
                // `ret A`, used below to see the accumulator the program's filter starts with.
                0x16 => return acc,
                c => panic!("instruction {c:#x}"),
            }
        }
    }

    const KILL: u32 = 0;
    const UFFD: u64 = 800;
    const POOL_FD: u64 = 801;
    /// The allocator's code, and an address inside it.
    const TEXT: (usize, usize) = (0x7f12_3400_0000, 0x7f12_3410_0000);
    const IP: u64 = 0x7f12_3404_5678;
    /// Where the program's calls through `syscall` return to.
    const PASSED: usize = 0x7f12_3400_9abc;
    /// The process the abort rules are for.
    const PID: u32 = 4242;
    /// Where the allocator's signal-return trampoline's call returns to.
    const SIGRETURN: u64 = 0x7f12_3400_7777;

    fn rules() -> ([Rule; MAX_RULES], usize) {
        let mut r = [Rule { nr: 0, conds: [None, None] }; MAX_RULES];
        let mut n = 0;
        let mut add = |x: Rule| {
            r[n] = x;
            n += 1;
        };
        add(Rule {
            nr: libc::SYS_ioctl as u32,
            conds: [one(0, UFFD as u32), Some(Cond::In { arg: 1, vals: [0xc020aa07, 0xc020aa00, 0, 0, 0, 0], n: 2 })],
        });
        add(Rule {
            nr: libc::SYS_mmap as u32,
            conds: [one(4, POOL_FD as u32), Some(Cond::Within { arg: 2, mask: 3 })],
        });
        add(Rule { nr: libc::SYS_mremap as u32, conds: [Some(Cond::Within { arg: 1, mask: 0 }), None] });
        add(Rule { nr: libc::SYS_gettid as u32, conds: [None, None] });
        add(Rule { nr: libc::SYS_rt_sigreturn as u32, conds: [Some(Cond::From { ip_lo: SIGRETURN as u32 }), None] });
        for (nr, conds) in abort_rules(PID) {
            add(Rule { nr, conds });
        }
        (r, n)
    }

    /// The prefix in front of the program's filter `theirs`.
    fn wrapped(theirs: &[Insn]) -> Vec<Insn> {
        let (r, n) = rules();
        let mut out = vec![Insn { code: 0, jt: 0, jf: 0, k: 0 }; MAX_INSNS];
        let p = prefix(&r[..n], TEXT, PASSED, &mut out).unwrap();
        out.truncate(p);
        out.extend_from_slice(theirs);
        out
    }

    /// A filter that allows `read` (0) and kills every other call.
    fn read_only() -> Vec<Insn> {
        let stmt = |code, k| Insn { code, jt: 0, jf: 0, k };
        vec![
            stmt(BPF_LD_W_ABS, OFF_NR),
            Insn { code: BPF_JEQ_K, jt: 0, jf: 1, k: 0 },
            stmt(BPF_RET_K, RET_ALLOW),
            stmt(BPF_RET_K, KILL),
        ]
    }

    #[test]
    fn the_allocator_s_own_calls_pass_and_every_other_call_meets_the_program_s_filter() {
        let p = wrapped(&read_only());
        let x86 = AUDIT_ARCH_X86_64;
        let ioctl = libc::SYS_ioctl as u32;
        // Installing and registering on our userfaultfd; the high half of an int is ignored.
        assert_eq!(run(&p, ioctl, x86, [UFFD, 0xc020aa07, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(run(&p, ioctl, x86, [UFFD | 0xffff_ffff << 32, 0xc020aa00, 0, 0, 0, 0]), RET_ALLOW);
        // Another command, another descriptor, another architecture: the program's filter.
        assert_eq!(run(&p, ioctl, x86, [UFFD, 0x5401, 0, 0, 0, 0]), KILL);
        assert_eq!(run(&p, ioctl, x86, [3, 0xc020aa07, 0, 0, 0, 0]), KILL);
        assert_eq!(run(&p, ioctl, 0x4000_0003, [UFFD, 0xc020aa07, 0, 0, 0, 0]), KILL);
        // mmap of the pool, at most readable and writable; not executable, not another file.
        let mmap = libc::SYS_mmap as u32;
        assert_eq!(run(&p, mmap, x86, [0, 4096, 3, 1, POOL_FD, 0]), RET_ALLOW);
        assert_eq!(run(&p, mmap, x86, [0, 4096, 0, 1, POOL_FD, 0]), RET_ALLOW);
        assert_eq!(run(&p, mmap, x86, [0, 4096, 7, 1, POOL_FD, 0]), KILL);
        assert_eq!(run(&p, mmap, x86, [0, 4096, 3 | 1 << 32, 1, POOL_FD, 0]), KILL);
        assert_eq!(run(&p, mmap, x86, [0, 4096, 3, 1, 5, 0]), KILL);
        // mremap duplicating a view only; gettid always.
        let mremap = libc::SYS_mremap as u32;
        assert_eq!(run(&p, mremap, x86, [1 << 30, 0, 4096, 3, 1 << 31, 0]), RET_ALLOW);
        assert_eq!(run(&p, mremap, x86, [1 << 30, 4096, 8192, 1, 0, 0]), KILL);
        assert_eq!(run(&p, libc::SYS_gettid as u32, x86, [0; 6]), RET_ALLOW);
        // The same calls made by any other code: the program's filter.
        let continue_call = [UFFD, 0xc020aa07, 0, 0, 0, 0];
        assert_eq!(run_at(&p, ioctl, x86, TEXT.0 as u64, continue_call), RET_ALLOW);
        assert_eq!(run_at(&p, ioctl, x86, TEXT.1 as u64 - 1, continue_call), RET_ALLOW);
        assert_eq!(run_at(&p, ioctl, x86, TEXT.0 as u64 - 1, continue_call), KILL);
        assert_eq!(run_at(&p, ioctl, x86, TEXT.1 as u64, continue_call), KILL);
        assert_eq!(run_at(&p, ioctl, x86, IP + (1 << 32), continue_call), KILL);
        assert_eq!(run_at(&p, libc::SYS_gettid as u32, x86, 0x5555_0000_1000, [0; 6]), KILL);
        // The program's calls through our `syscall`: the program's filter.
        assert_eq!(run_at(&p, ioctl, x86, PASSED as u64, continue_call), KILL);
        assert_eq!(run_at(&p, libc::SYS_gettid as u32, x86, PASSED as u64, [0; 6]), KILL);
        assert_eq!(run_at(&p, libc::SYS_gettid as u32, x86, PASSED as u64 + 2, [0; 6]), RET_ALLOW);
        // rt_sigreturn from the trampoline only: not from elsewhere in the allocator's code,
        // nor from the same low half in another 4 GiB.
        let sigreturn = libc::SYS_rt_sigreturn as u32;
        assert_eq!(run_at(&p, sigreturn, x86, SIGRETURN, [0; 6]), RET_ALLOW);
        assert_eq!(run_at(&p, sigreturn, x86, SIGRETURN + 2, [0; 6]), KILL);
        assert_eq!(run_at(&p, sigreturn, x86, IP, [0; 6]), KILL);
        assert_eq!(run_at(&p, sigreturn, x86, SIGRETURN + (1 << 32), [0; 6]), KILL);
        assert_eq!(run_at(&p, sigreturn, x86, PASSED as u64, [0; 6]), KILL);
        // Ending the process: SIGABRT's, SIGSEGV's or SIGBUS's action reset and unblocked, the
        // signal sent to this process; no other signal, process, or way of changing the mask.
        let (abrt, pid) = (libc::SIGABRT as u64, PID as u64);
        let tgkill = libc::SYS_tgkill as u32;
        assert_eq!(run(&p, tgkill, x86, [pid, 77, abrt, 0, 0, 0]), RET_ALLOW);
        assert_eq!(run(&p, tgkill, x86, [pid + 1, 77, abrt, 0, 0, 0]), KILL);
        assert_eq!(run(&p, tgkill, x86, [pid, 77, libc::SIGKILL as u64, 0, 0, 0]), KILL);
        assert_eq!(run_at(&p, tgkill, x86, PASSED as u64, [pid, 77, abrt, 0, 0, 0]), KILL);
        assert_eq!(run(&p, tgkill, x86, [pid, 77, libc::SIGSEGV as u64, 0, 0, 0]), RET_ALLOW);
        assert_eq!(run(&p, tgkill, x86, [pid, 77, libc::SIGBUS as u64, 0, 0, 0]), RET_ALLOW);
        let sigaction = libc::SYS_rt_sigaction as u32;
        assert_eq!(run(&p, sigaction, x86, [abrt, 0x1000, 0, 8, 0, 0]), RET_ALLOW);
        assert_eq!(run(&p, sigaction, x86, [libc::SIGSEGV as u64, 0x1000, 0, 8, 0, 0]), RET_ALLOW);
        assert_eq!(run(&p, sigaction, x86, [libc::SIGUSR1 as u64, 0x1000, 0, 8, 0, 0]), KILL);
        let sigmask = libc::SYS_rt_sigprocmask as u32;
        assert_eq!(run(&p, sigmask, x86, [libc::SIG_UNBLOCK as u64, 0x1000, 0, 8, 0, 0]), RET_ALLOW);
        assert_eq!(run(&p, sigmask, x86, [libc::SIG_BLOCK as u64, 0x1000, 0, 8, 0, 0]), KILL);
        assert_eq!(run(&p, sigmask, x86, [libc::SIG_SETMASK as u64, 0x1000, 0, 8, 0, 0]), KILL);
        // The program's own rules hold.
        assert_eq!(run(&p, 0, x86, [0; 6]), RET_ALLOW);
        assert_eq!(run(&p, 1, x86, [0; 6]), KILL);
        assert_eq!(run(&p, libc::SYS_openat as u32, x86, [0; 6]), KILL);
    }

    #[test]
    fn the_program_s_filter_starts_with_the_accumulator_the_kernel_gives_it() {
        // `ret A` first: a call the prefix looked at (the mmap's protection bits) and one it
        // did not (open) both find zero.
        let p = wrapped(&[Insn { code: 0x16, jt: 0, jf: 0, k: 0 }]);
        assert_eq!(run(&p, libc::SYS_mmap as u32, AUDIT_ARCH_X86_64, [0, 4096, 7, 1, POOL_FD, 0]), 0);
        assert_eq!(run(&p, libc::SYS_openat as u32, AUDIT_ARCH_X86_64, [0; 6]), 0);
    }

    #[test]
    fn a_prefix_that_would_not_fit_is_refused() {
        let (r, n) = rules();
        let mut out = vec![Insn { code: 0, jt: 0, jf: 0, k: 0 }; 10];
        assert!(prefix(&r[..n], TEXT, PASSED, &mut out).is_none());
        let mut out = vec![Insn { code: 0, jt: 0, jf: 0, k: 0 }; MAX_INSNS];
        assert!(prefix(&r[..n], TEXT, PASSED, &mut out).unwrap() < PREFIX_MAX);
        // Code not known, or over 4 GiB of it.
        assert!(prefix(&r[..n], (0, 0), 0, &mut out).is_none());
        assert!(prefix(&r[..n], (0x1_ffff_0000, 0x3_0000_1000), 0, &mut out).is_none());
        // Code that ends at one is fine.
        let p = prefix(&r[..n], (0x1_fff0_0000, 0x2_0000_0000), 0, &mut out).unwrap();
        let stmt = |code, k| Insn { code, jt: 0, jf: 0, k };
        out.truncate(p);
        out.push(stmt(BPF_RET_K, KILL));
        assert_eq!(run_at(&out, libc::SYS_gettid as u32, AUDIT_ARCH_X86_64, 0x1_ffff_fff0, [0; 6]), RET_ALLOW);
        assert_eq!(run_at(&out, libc::SYS_gettid as u32, AUDIT_ARCH_X86_64, 0x1_ffef_fff0, [0; 6]), KILL);
    }

    /// Code loaded across a 4 GiB boundary (ASLR places it so now and then): its calls on both
    /// sides pass, no other's, and the program's calls through `syscall` on either side do
    /// not. Before, no prefix was made there: the program's filter went in as it was, and one
    /// that refuses the allocator's calls then ended the process at its next refill.
    #[test]
    fn code_across_a_4_gib_boundary_is_the_allocator_s() {
        let (r, n) = rules();
        let text = (0x1_ffff_0000, 0x2_0001_0000);
        let stmt = |code, k| Insn { code, jt: 0, jf: 0, k };
        for passed in [0x1_ffff_8000usize, 0x2_0000_8000] {
            let mut out = vec![Insn { code: 0, jt: 0, jf: 0, k: 0 }; MAX_INSNS];
            let p = prefix(&r[..n], text, passed, &mut out).unwrap();
            out.truncate(p);
            out.push(stmt(BPF_RET_K, KILL));
            let gettid = |ip: u64| run_at(&out, libc::SYS_gettid as u32, AUDIT_ARCH_X86_64, ip, [0; 6]);
            for ip in [0x1_ffff_0000, 0x1_ffff_fff0, 0x2_0000_0000, 0x2_0000_fff0] {
                assert_eq!(gettid(ip), if ip == passed as u64 { KILL } else { RET_ALLOW }, "{ip:#x}");
            }
            for ip in [0x1_fffe_fff0, 0x2_0001_0000, 0x3_0000_0000, 0x0_ffff_fff0, 0x2_ffff_fff0, passed as u64] {
                assert_eq!(gettid(ip), KILL, "{ip:#x}");
            }
        }
    }

    #[test]
    fn the_largest_prefix_fits() {
        let rule = Rule {
            nr: 1,
            conds: [Some(Cond::In { arg: 0, vals: [1, 2, 3, 4, 5, 6], n: 6 }), Some(Cond::Within { arg: 1, mask: 3 })],
        };
        let mut out = vec![Insn { code: 0, jt: 0, jf: 0, k: 0 }; MAX_INSNS];
        assert!(prefix(&[rule; MAX_RULES], TEXT, PASSED, &mut out).is_some());
        let across = (0x1_ffff_0000, 0x2_0001_0000);
        assert!(prefix(&[rule; MAX_RULES], across, 0x2_0000_8000, &mut out).unwrap() <= PREFIX_MAX);
    }
}
