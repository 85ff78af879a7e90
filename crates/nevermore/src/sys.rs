//! Raw system calls used by the allocator. Nothing here allocates, and everything here is
//! async-signal-safe: these are thin wrappers over `libc::syscall` and friends, and over the
//! `syscall` instruction itself (`raw_syscall`).

use core::ffi::c_void;
use core::ptr;
use core::sync::atomic::{AtomicI32, AtomicU64, Ordering};

pub const PAGE: usize = 4096;
pub const PAGE_SHIFT: usize = 12;

#[inline]
pub const fn round_up(x: usize, a: usize) -> usize {
    (x + a - 1) & !(a - 1)
}

/// The soft limit on `resource`, if one is set.
fn limit(resource: libc::__rlimit_resource_t) -> Option<usize> {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    let out = &mut rl as *mut libc::rlimit as usize;
    // SAFETY: prlimit64 of this process, reading only, writes one `rlimit`. A raw call: a
    // seccomp filter the program installs later lets it through (`seccomp`).
    if unsafe { own_syscall(libc::SYS_prlimit64, [0, resource as usize, 0, out, 0, 0]) } != 0
        || rl.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    Some(rl.rlim_cur as usize)
}

/// `RLIMIT_DATA` (private writable memory: the allocator's metadata, sized by the pool and
/// the alias arena; the heap itself is shared memory and does not count), if set.
pub fn data_limit() -> Option<usize> {
    limit(libc::RLIMIT_DATA)
}

/// The file-size limit (`RLIMIT_FSIZE`), if one is set.
pub fn file_size_limit() -> Option<usize> {
    limit(libc::RLIMIT_FSIZE)
}

/// The address-space limit (`RLIMIT_AS`), if one is set.
pub fn as_limit() -> Option<usize> {
    limit(libc::RLIMIT_AS)
}

/// The largest power of two not above `x` (1 for 0).
pub const fn pow2_floor(x: usize) -> usize {
    if x == 0 {
        1
    } else {
        1 << (usize::BITS - 1 - x.leading_zeros())
    }
}

/// An anonymous private mapping of `len` bytes with `prot`, lazily committed, at `fixed`
/// (replacing what was there) or wherever the kernel likes. Null on failure.
fn map_anon(fixed: *mut u8, len: usize, prot: i32) -> *mut u8 {
    let flags = libc::MAP_PRIVATE
        | libc::MAP_ANONYMOUS
        | libc::MAP_NORESERVE
        | if fixed.is_null() { 0 } else { libc::MAP_FIXED };
    // SAFETY: with a null hint the kernel picks free space; with `fixed` the caller passes a
    // range inside a region this allocator reserved for itself.
    let p = unsafe { libc::mmap(fixed as *mut c_void, len, prot, flags, -1, 0) };
    if p == libc::MAP_FAILED {
        ptr::null_mut()
    } else {
        p as *mut u8
    }
}

/// Reserves `len` bytes of address space with no access (`PROT_NONE`, not committed).
/// Returns null on failure.
pub fn reserve(len: usize) -> *mut u8 {
    map_anon(ptr::null_mut(), len, libc::PROT_NONE)
}

/// Turns `[addr, addr+len)` back into a no-access reservation, dropping whatever was mapped.
/// Adjacent reservations merge into one VMA. Returns false on failure.
pub fn rereserve(addr: *mut u8, len: usize) -> bool {
    !map_anon(addr, len, libc::PROT_NONE).is_null()
}

/// A stack of `len` bytes (a multiple of the page size) with a guard page below, so that an
/// overflow faults instead of writing on: its top, or 0 when it cannot be mapped.
pub fn new_stack(len: usize) -> usize {
    let p = map_meta(len + PAGE);
    if p.is_null() {
        return 0;
    }
    // SAFETY: the first page of the mapping just made.
    unsafe { libc::mprotect(p as *mut c_void, PAGE, libc::PROT_NONE) };
    p as usize + PAGE + len
}

/// Calls `f(arg)` with the stack pointer at `top` (16-byte aligned: the top of a stack from
/// `new_stack`, or a point of the program's own below what is still needed there); `f` does
/// not return, and nothing returns to the caller's frames. The frame is the new stack's
/// outermost: its unwind rules say that it has no return address (and the frame-pointer
/// chain ends), so a walk of the stack (the library's own, a debugger's) ends there instead
/// of reading past the stack's top with the rules of a frame that is not there.
///
/// # Safety
/// `top` lies in a mapped stack that nothing else uses, above nothing still needed.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
pub unsafe extern "C" fn run_on_stack(top: usize, f: extern "C" fn(*mut c_void) -> !, arg: *mut c_void) -> ! {
    core::arch::naked_asm!(
        ".cfi_startproc",
        ".cfi_undefined rip",
        "mov rsp, rdi",
        "xor ebp, ebp",
        "mov rdi, rdx",
        "call rsi",
        "ud2",
        ".cfi_endproc",
    )
}

/// How many processors the calling thread may run on (its affinity mask; 1 if that cannot
/// be read).
pub fn cpus_allowed() -> usize {
    let mut mask = [0u64; 16];
    // SAFETY: the kernel writes at most the buffer's 128 bytes.
    let n = unsafe {
        raw_syscall(
            libc::SYS_sched_getaffinity,
            [0, core::mem::size_of_val(&mask), mask.as_mut_ptr() as usize, 0, 0, 0],
        )
    };
    if n <= 0 {
        return 1;
    }
    mask.iter().take((n as usize).div_ceil(8)).map(|w| w.count_ones() as usize).sum::<usize>().max(1)
}

/// Returns from a signal handler installed by `set_action`: the kernel's handler frame ends
/// with a return here, and `rt_sigreturn` restores the interrupted context. The bytes are the C
/// library's own restorer's (`mov rax, 15; syscall`), which unwinders (libgcc's, gdb's)
/// recognise as the end of a signal frame. It lies in the library's own code, so a seccomp
/// filter the program installs lets it through (`seccomp`'s exemptions).
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
pub extern "C" fn restore_rt() -> ! {
    core::arch::naked_asm!(
        ".byte 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00",
        "syscall",
        ".globl nevermore_sigreturn_resume",
        ".hidden nevermore_sigreturn_resume",
        "nevermore_sigreturn_resume:",
        "ud2"
    )
}

unsafe extern "C" {
    /// The instruction after `restore_rt`'s `syscall` (where the kernel sees its
    /// `rt_sigreturn` come from).
    static nevermore_sigreturn_resume: u8;
}

/// Where `restore_rt`'s `rt_sigreturn` comes from, for `seccomp`'s exemptions.
pub fn sigreturn_resume() -> usize {
    (&raw const nevermore_sigreturn_resume) as usize
}

/// What `probe_word` found: the word, and whether it could be read (`PROBE_*`).
#[repr(C)]
pub struct Probe {
    pub value: usize,
    pub status: usize,
}

/// `probe_word`: the read faulted on memory that cannot be read.
pub const PROBE_FAILED: usize = 0;
/// `probe_word`: the word was read.
pub const PROBE_READ: usize = 1;
/// `probe_word`: the word was read once the fault handler had mapped its page again (a live
/// object's page that had lost its page-table entry).
pub const PROBE_MAPPED_AGAIN: usize = 2;

// `probe_word`'s code: a function of its own, always there (the fault handler names its
// labels).
#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".pushsection .text.nevermore_probe_word,\"ax\",@progbits",
    ".globl nevermore_probe_word",
    ".hidden nevermore_probe_word",
    ".type nevermore_probe_word,@function",
    "nevermore_probe_word:",
    "mov edx, {read}",
    ".globl nevermore_probe_load",
    ".hidden nevermore_probe_load",
    "nevermore_probe_load:",
    "mov rax, [rdi]",
    "ret",
    ".globl nevermore_probe_fail",
    ".hidden nevermore_probe_fail",
    "nevermore_probe_fail:",
    "xor eax, eax",
    "xor edx, edx",
    "ret",
    ".size nevermore_probe_word, . - nevermore_probe_word",
    ".popsection",
    read = const PROBE_READ,
);

unsafe extern "C" {
    fn nevermore_probe_word(addr: usize) -> Probe;
    /// `probe_word`'s load.
    static nevermore_probe_load: u8;
    /// `probe_word`'s exit for a load that faulted.
    static nevermore_probe_fail: u8;
}

/// Reads the word at `addr`, which may not be readable: the program's memory that a system
/// call has named, which only the kernel has looked at. A fault of its one load is turned by
/// the fault handler (`fault::handler`) into a return through `nevermore_probe_fail`, or, on a
/// live alias that lost its page-table entry, into a mapping of the page and `status`
/// `PROBE_MAPPED_AGAIN` (the handler sets `rdx`), and the load is made again.
pub fn probe_word(addr: usize) -> Probe {
    // SAFETY: the load cannot crash the process: every fault it takes is handled as above
    // (the handler is installed before the allocator is ready, and `io` probes only then).
    unsafe { nevermore_probe_word(addr) }
}

/// Where `probe_word`'s load is, and where it leaves when the load faults.
pub fn probe_points() -> (usize, usize) {
    ((&raw const nevermore_probe_load) as usize, (&raw const nevermore_probe_fail) as usize)
}

/// The kernel's `struct sigaction` (x86-64).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelSigaction {
    pub handler: usize,
    pub flags: u64,
    pub restorer: usize,
    pub mask: u64,
}

const SA_RESTORER: u64 = 0x0400_0000;

/// Sets `handler` (an `SA_SIGINFO` handler) for `sig` with the raw `rt_sigaction`, returning
/// through `restore_rt`; `flags` are added to `SA_SIGINFO`, `mask` is blocked while it runs.
/// Returns whether the kernel took it.
pub fn set_action(
    sig: i32,
    handler: extern "C" fn(i32, *mut libc::siginfo_t, *mut c_void),
    flags: i32,
    mask: u64,
) -> bool {
    let act = KernelSigaction {
        handler: handler as *const () as usize,
        flags: ((libc::SA_SIGINFO | flags) as u32 as u64) | SA_RESTORER,
        restorer: restore_rt as *const () as usize,
        mask,
    };
    // SAFETY: rt_sigaction with a valid record and 8-byte signal sets; no old action asked.
    unsafe { raw_syscall(libc::SYS_rt_sigaction, [sig as usize, &act as *const _ as usize, 0, 8, 0, 0]) == 0 }
}

/// Maps `len` bytes of zeroed, private read-write memory for allocator metadata (lazily
/// committed). Returns null on failure.
pub fn map_meta(len: usize) -> *mut u8 {
    map_anon(ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE)
}

/// Maps `len` bytes of private memory that reads as zeroes but cannot be written until
/// `make_writable` says so: room for a table that is used from its start. It is not charged
/// to the process (strict overcommit accounting, `RLIMIT_DATA`) until made writable. Null on
/// failure.
pub fn map_readable(len: usize) -> *mut u8 {
    map_anon(ptr::null_mut(), len, libc::PROT_READ)
}

/// Replaces `[addr, addr+len)` of a mapping of this allocator's own by memory that reads as
/// zeroes, as `map_readable` maps it: no longer charged to the process. Readers of the old
/// contents see zeroes from then on. False on failure (the old mapping stays).
pub fn replace_readable(addr: *mut u8, len: usize) -> bool {
    !map_anon(addr, len, libc::PROT_READ).is_null()
}

/// Makes `[addr, addr+len)` of a `map_readable` mapping writable (its contents stay); false
/// when the system refuses (out of commit charge or over `RLIMIT_DATA`).
pub fn make_writable(addr: *mut u8, len: usize) -> bool {
    // SAFETY: the range lies in a mapping of this allocator's own; its contents are kept.
    unsafe { libc::mprotect(addr as *mut c_void, len, libc::PROT_READ | libc::PROT_WRITE) == 0 }
}

/// Set while the program has every future mapping locked (`mlockall(MCL_FUTURE)`, see
/// `api::mlockall`): the pool's views are then unlocked as they are made.
pub static FUTURE_LOCKED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Unlocks a view of the pool just made, if the program locks its future mappings.
fn unlock_if_future_locked(p: *mut u8, len: usize) {
    if FUTURE_LOCKED.load(Ordering::Relaxed) {
        unlock(p, len);
    }
}

/// Maps `len` bytes of file `fd` at `off`, shared, read-write; at `fixed` if non-null.
///
/// The mapping is left out of core dumps. The kernel dumps shared mappings of a memfd whole,
/// faulting in every page: for the pool's canonical view (64 GiB, mostly never used) a crash
/// with core dumps enabled would fill the memfd with zeroed pages, all of memory, and write
/// a core as big. The heap's contents are still in the dump, at the addresses the program
/// knows: through the mirrors and large objects' views (`duplicate_view`), where only
/// installed pages are read (the others fail without allocating: userfaultfd's SIGBUS mode).
pub fn map_shared(fixed: *mut u8, len: usize, fd: i32, off: usize) -> *mut u8 {
    let flags = libc::MAP_SHARED | libc::MAP_NORESERVE | if fixed.is_null() { 0 } else { libc::MAP_FIXED };
    let prot = (libc::PROT_READ | libc::PROT_WRITE) as usize;
    // SAFETY: with a null hint the kernel picks free space; with `fixed` the caller owns the
    // range (it is part of one of the allocator's own reservations). A raw call: a seccomp
    // filter the program installs later lets it through (`seccomp`).
    let p = unsafe { own_syscall(libc::SYS_mmap, [fixed as usize, len, prot, flags as usize, fd as usize, off]) };
    if p < 0 {
        return ptr::null_mut();
    }
    let p = p as *mut u8;
    advise(p, len, libc::MADV_DONTDUMP);
    unlock_if_future_locked(p, len);
    p
}

/// Creates a second view of the shared mapping at `src` (`len` bytes) at address `dst`,
/// replacing what was there (`mremap` with an old size of 0 duplicates shared mappings).
/// Unlike the canonical view it copies, the new view goes into core dumps (see `map_shared`).
///
/// Under an address-space limit (`RLIMIT_AS`) the kernel checks the new view's whole length
/// against the limit before it drops the reservation the view replaces, so a view that changes
/// nothing in the address space used failed once the room left was below its length (a mirror
/// of 20 MiB with 20 MiB left of 256). Refused so, the view is made in pieces, each no longer
/// than the room left; pieces of one file next to each other make one mapping again. On
/// failure `dst` is a reservation again and `errno` is the kernel's.
pub fn duplicate_view(src: *mut u8, dst: *mut u8, len: usize) -> bool {
    let (mut done, mut piece) = (0, len);
    while done < len {
        let n = piece.min(len - done);
        let flags = (libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED) as usize;
        let (from, to) = (src as usize + done, dst as usize + done);
        // SAFETY: `src..src+len` lies in one of the allocator's shared views of the pool,
        // `dst..dst+len` in its own reservation.
        if unsafe { own_syscall(libc::SYS_mremap, [from, 0, n, flags, to, 0]) } >= 0 {
            done += n;
            continue;
        }
        if errno() != libc::ENOMEM || piece == PAGE {
            break;
        }
        piece = (piece / 2).max(PAGE) & !(PAGE - 1);
    }
    if done < len {
        let e = errno();
        if done > 0 {
            rereserve(dst, done);
        }
        set_errno(e);
        return false;
    }
    advise(dst, len, libc::MADV_DODUMP);
    unlock_if_future_locked(dst, len);
    true
}

/// `munlock` of the allocator's own range; true on success.
pub fn unlock(addr: *mut u8, len: usize) -> bool {
    // SAFETY: munlock changes no contents; a raw call, which a program's seccomp filter lets
    // through (`seccomp`).
    unsafe { own_syscall(libc::SYS_munlock, [addr as usize, len, 0, 0, 0, 0]) == 0 }
}

pub fn unmap(addr: *mut u8, len: usize) {
    // SAFETY: callers only unmap ranges they mapped themselves.
    unsafe { libc::munmap(addr as *mut c_void, len) };
}

/// `madvise`; returns true on success.
pub fn advise(addr: *mut u8, len: usize, advice: i32) -> bool {
    // SAFETY: madvise only changes paging state of the allocator's own ranges.
    unsafe { own_syscall(libc::SYS_madvise, [addr as usize, len, advice as usize, 0, 0, 0]) == 0 }
}

/// An anonymous memory file (the physical pool), close-on-exec. Returns -1 on failure.
pub fn memfd(name: &core::ffi::CStr) -> i32 {
    let fd = beyond_fd_limit(|| {
        // SAFETY: `name` is a valid NUL-terminated string.
        unsafe { libc::syscall(libc::SYS_memfd_create, name.as_ptr(), libc::MFD_CLOEXEC) as i32 }
    });
    if fd < 0 {
        return -1;
    }
    move_fd_high(fd)
}

/// `open()` (a call making a descriptor), and when it fails for want of a free number below
/// the process's soft `RLIMIT_NOFILE`, once more with the soft limit a little higher (up to
/// the hard one, unless the process may raise that too) for that call only. The program's
/// descriptors may fill its table (a server at its limit): the library's own descriptors
/// must not make `fork` fail in its place. A descriptor above the soft limit stays valid;
/// the program sees its limit unchanged. The numbers just above the limit may be the
/// library's already (a forked child's copy of the heap), hence the margin. Not under a
/// seccomp filter the program installed: it may kill the process for setting a limit.
pub fn beyond_fd_limit(open: impl Fn() -> i32) -> i32 {
    let fd = open();
    if fd >= 0 || errno() != libc::EMFILE || crate::seccomp::filtered() {
        return fd;
    }
    use crate::rlimit::{raw, Rlimit};
    let nofile = libc::RLIMIT_NOFILE;
    let mut lim = Rlimit { cur: 0, max: 0 };
    if raw(ptr::null(), &mut lim, nofile) != 0 || lim.cur == libc::RLIM_INFINITY {
        set_errno(libc::EMFILE);
        return -1;
    }
    // Up to the hard limit; past it only for a process allowed to raise that (CAP_SYS_RESOURCE).
    let cur = if lim.cur < lim.max { (lim.cur + 16).min(lim.max) } else { lim.cur + 16 };
    let raised = Rlimit { cur, max: lim.max.max(cur) };
    if raw(&raised, ptr::null_mut(), nofile) != 0 {
        set_errno(libc::EMFILE);
        return -1;
    }
    let fd = open();
    let e = errno();
    // Put back, unless another thread changed the limit meanwhile.
    let mut now = Rlimit { cur: 0, max: 0 };
    if raw(ptr::null(), &mut now, nofile) == 0 && (now.cur, now.max) == (raised.cur, raised.max) {
        raw(&lim, ptr::null_mut(), nofile);
    }
    set_errno(e);
    fd
}

/// The C library's function `name` (the next definition after this library's, which exports
/// the same name), looked up once and kept in `slot`; None if there is none.
pub fn next_symbol(slot: &core::sync::atomic::AtomicUsize, name: &core::ffi::CStr) -> Option<usize> {
    let mut f = slot.load(core::sync::atomic::Ordering::Relaxed);
    if f == 0 {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds the next definition after
        // this library's.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
        slot.store(f, core::sync::atomic::Ordering::Relaxed);
    }
    (f != 0).then_some(f)
}

/// `fcntl(fd, F_DUPFD_CLOEXEC, min)` as a system call (not through the exported `fcntl`,
/// which hides the library's own descriptors from the program).
pub fn dup_high(fd: i32, min: i32) -> i32 {
    // SAFETY: fcntl duplicating a descriptor; touches no memory.
    let r = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_DUPFD_CLOEXEC, min) };
    if r < 0 {
        -1
    } else {
        r as i32
    }
}

/// Moves a descriptor to a high number (above the ones programs usually juggle), close-on-exec.
pub fn move_fd_high(fd: i32) -> i32 {
    let hi = dup_high(fd, 800);
    if hi < 0 {
        return fd;
    }
    close(fd);
    hi
}

/// Opens a file for reading (close-on-exec); None on failure.
pub fn open_read(path: &core::ffi::CStr) -> Option<i32> {
    let fd = beyond_fd_limit(|| open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC, 0));
    (fd >= 0).then_some(fd)
}

/// `open(2)` as a system call; `errno` is set on failure. Like `read` below, not through the
/// C library's `open`, which is the library's own export (`io`). A path under `/proc/` is
/// opened in the kept `/proc` directory where there is one (`proc_path`).
pub fn open(path: *const core::ffi::c_char, flags: i32, mode: u32) -> i32 {
    let (dir, path) = proc_path(path);
    // SAFETY: the kernel reads a NUL-terminated path at `path` (the callers pass one).
    unsafe { own_syscall(libc::SYS_openat, [dir as usize, path as usize, flags as usize, mode as usize, 0, 0]) as i32 }
}

/// `readlink(2)` as a system call, into `buf`: the length read, or -1 (`errno` set). A path
/// under `/proc/` is read in the kept `/proc` directory where there is one (`proc_path`).
pub fn readlink(path: &core::ffi::CStr, buf: &mut [u8]) -> isize {
    let (dir, path) = proc_path(path.as_ptr());
    let a = [dir as usize, path as usize, buf.as_mut_ptr() as usize, buf.len(), 0, 0];
    // SAFETY: a NUL-terminated path, and a buffer of `buf.len()` bytes for the kernel to fill.
    unsafe { own_syscall(libc::SYS_readlinkat, a) }
}

/// The `/proc` directory as a descriptor, kept from before the program first changes its root
/// directory (`keep_proc`, which the `chroot` wrapper calls), or -1. Daemons confine
/// themselves to an empty directory (vsftpd's sessions, OpenSSH's pre-authentication child,
/// haproxy as Debian configures it), where `/proc/self/...` is no longer found by its path:
/// sweeps read the process's mappings and memory there, the leak check and the statistics its
/// status. `PROC_ID` is the directory's identity, so that a number the program closed or
/// reused is not taken for it.
static PROC_DIR: AtomicI32 = AtomicI32::new(-1);
static PROC_ID: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// Keeps a descriptor of `/proc` (see `PROC_DIR`) unless one is kept already; nothing when
/// `/proc` cannot be opened.
pub fn keep_proc() {
    let seen = PROC_DIR.load(Ordering::Acquire);
    if proc_dir() >= 0 {
        return;
    }
    let flags = (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as usize;
    let path = c"/proc".as_ptr() as usize;
    let fd = beyond_fd_limit(|| {
        // SAFETY: a NUL-terminated path; opening makes nothing but a descriptor.
        (unsafe { own_syscall(libc::SYS_openat, [libc::AT_FDCWD as usize, path, flags, 0, 0, 0]) }) as i32
    });
    if fd < 0 {
        return;
    }
    let fd = move_fd_high(fd);
    let Some((dev, ino)) = file_id(fd) else {
        close(fd);
        return;
    };
    // A number kept before (`seen`) that is no longer the directory is the program's now,
    // and stays open. Another thread that kept one meanwhile wins.
    if PROC_DIR.compare_exchange(seen, -1, Ordering::AcqRel, Ordering::Acquire).is_err() {
        close(fd);
        return;
    }
    PROC_ID[0].store(dev, Ordering::Relaxed);
    PROC_ID[1].store(ino, Ordering::Relaxed);
    PROC_DIR.store(fd, Ordering::Release);
}

/// The kept `/proc` directory, if it is still open at its number: -1 otherwise. Raw system
/// calls only (`errno` untouched): the task that holds threads still calls it.
fn proc_dir() -> i32 {
    let fd = PROC_DIR.load(Ordering::Acquire);
    if fd < 0 {
        return -1;
    }
    // SAFETY: `st` is a plain-old-data buffer the kernel fills.
    let id = unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        (raw_syscall(libc::SYS_fstat, [fd as usize, &mut st as *mut libc::stat as usize, 0, 0, 0, 0]) == 0)
            .then_some((st.st_dev, st.st_ino))
    };
    let ours = (PROC_ID[0].load(Ordering::Relaxed), PROC_ID[1].load(Ordering::Relaxed));
    if id == Some(ours) {
        fd
    } else {
        -1
    }
}

/// Whether `/proc` numbers this process as the kernel numbers it for the process itself
/// (`getpid`): not so when `/proc` belongs to another PID namespace (a process started by
/// `unshare --pid --fork` without a `/proc` of its own), whose thread ids ptrace would take
/// for other tasks or none.
pub fn proc_numbers_us() -> bool {
    let mut buf = [0u8; 24];
    let n = readlink(c"/proc/self", &mut buf);
    if n <= 0 {
        return false;
    }
    let mut pid = 0u64;
    for &b in &buf[..n as usize] {
        if !b.is_ascii_digit() {
            return false;
        }
        pid = pid * 10 + (b - b'0') as u64;
    }
    pid == getpid() as u64
}

/// Where to open `path`: for `/proc/REST` the kept `/proc` directory and `REST` while there
/// is one, else the current directory and `path` as it is. `path` is NUL-terminated.
pub fn proc_path(path: *const core::ffi::c_char) -> (i32, *const core::ffi::c_char) {
    const PREFIX: &[u8] = b"/proc/";
    if PROC_DIR.load(Ordering::Relaxed) < 0 {
        return (libc::AT_FDCWD, path);
    }
    for (i, b) in PREFIX.iter().enumerate() {
        // SAFETY: the bytes up to the first mismatch lie within the NUL-terminated string
        // (a NUL is a mismatch).
        if unsafe { *path.add(i) } as u8 != *b {
            return (libc::AT_FDCWD, path);
        }
    }
    match proc_dir() {
        // SAFETY: past the prefix, within the same string.
        fd if fd >= 0 => (fd, unsafe { path.add(PREFIX.len()) }),
        _ => (libc::AT_FDCWD, path),
    }
}

/// `read(2)` into `buf` as a system call; `errno` is set on failure. The library's own reads
/// and writes do not go through the C library's `read` and `write`: those names are the
/// library's own exports (`io`).
pub fn read(fd: i32, buf: &mut [u8]) -> isize {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    unsafe { own_syscall(libc::SYS_read, [fd as usize, buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0]) }
}

/// `write(2)` of `buf` as a system call; `errno` is set on failure (see `read`).
pub fn write(fd: i32, buf: &[u8]) -> isize {
    // SAFETY: the kernel reads at most `buf.len()` bytes of `buf`.
    unsafe { own_syscall(libc::SYS_write, [fd as usize, buf.as_ptr() as usize, buf.len(), 0, 0, 0]) }
}

/// Reads up to `buf.len()` bytes at offset `off` of `fd`, retrying on EINTR; the count read,
/// or None on error.
pub fn pread(fd: i32, buf: &mut [u8], off: usize) -> Option<usize> {
    loop {
        // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
        let n =
            unsafe { own_syscall(libc::SYS_pread64, [fd as usize, buf.as_mut_ptr() as usize, buf.len(), off, 0, 0]) };
        if n >= 0 {
            return Some(n as usize);
        }
        if errno() != libc::EINTR {
            return None;
        }
    }
}

/// Reads the file at `path` whole into `buf` (retrying on EINTR); the count read, or None if
/// it cannot be opened or read, or does not fit.
pub fn read_file(path: &core::ffi::CStr, buf: &mut [u8]) -> Option<usize> {
    let fd = open_read(path)?;
    let mut n = 0;
    let done = loop {
        if n == buf.len() {
            break None;
        }
        let r = read(fd, &mut buf[n..]);
        match r {
            0 => break Some(n),
            r if r > 0 => n += r as usize,
            _ if errno() == libc::EINTR => {}
            _ => break None,
        }
    };
    close(fd);
    done
}

/// Reads the file at `path` through `buf`, a chunk at a time, handing each chunk to `f` until
/// it returns true (found what it wanted) or the file ends (retrying on EINTR). False if the
/// file cannot be opened or read. A small `buf` keeps the caller's stack small: the callers
/// may run in a signal handler on a small alternate stack.
pub fn read_chunks(path: &core::ffi::CStr, buf: &mut [u8], mut f: impl FnMut(&[u8]) -> bool) -> bool {
    let Some(fd) = open_read(path) else { return false };
    let ok = loop {
        match read(fd, buf) {
            0 => break true,
            r if r > 0 => {
                if f(&buf[..r as usize]) {
                    break true;
                }
            }
            _ if errno() == libc::EINTR => {}
            _ => break false,
        }
    };
    close(fd);
    ok
}

pub fn close(fd: i32) {
    // SAFETY: closing a descriptor we own.
    unsafe { libc::close(fd) };
}

/// Sets the size of a memory file we own. A size beyond `RLIMIT_FSIZE` (`ulimit -f`) fails
/// with EFBIG without being tried: the kernel would also send SIGXFSZ, which kills the
/// process (the pool is a file, the heap is not one to the program).
pub fn ftruncate(fd: i32, len: usize) -> bool {
    if file_size_limit().is_some_and(|l| len > l) {
        set_errno(libc::EFBIG);
        return false;
    }
    // SAFETY: plain syscall on a descriptor we own.
    unsafe { libc::ftruncate(fd, len as libc::off_t) == 0 }
}

/// `fstat` of `fd` (a raw call: a seccomp filter the program installs later lets it through for the
/// allocator's descriptors and standard error, `seccomp`). Leaves `errno` alone: no caller
/// wants it, and the sweep's helper task, which shares a thread's thread pointer, must not
/// write it (`pool::Pool::fill_pages`).
pub fn stat(fd: i32) -> Option<libc::stat> {
    // SAFETY: `st` is a plain-old-data buffer the kernel fills.
    unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        (raw_syscall(libc::SYS_fstat, [fd as usize, &mut st as *mut libc::stat as usize, 0, 0, 0, 0]) == 0)
            .then_some(st)
    }
}

/// (device, inode) of an open descriptor, or None.
pub fn file_id(fd: i32) -> Option<(u64, u64)> {
    stat(fd).map(|st| (st.st_dev, st.st_ino))
}

/// Whether `fd` is the descriptor `own` of one of the library's files and still on that file
/// (`id`, as `file_id` gave it): the program may have closed the number or put a file of its
/// own there.
pub fn is_own(fd: i32, own: i32, id: (u64, u64)) -> bool {
    fd >= 0 && fd == own && file_id(fd) == Some(id)
}

/// Bytes of memory the file `fd` holds (for a memfd: its resident and swapped-out pages).
pub fn file_allocated(fd: i32) -> Option<u64> {
    stat(fd).map(|st| st.st_blocks as u64 * 512)
}

/// Copies `len` bytes at offset `off` of file `from` to the same offset of file `to` inside
/// the kernel (`copy_file_range`), with no mapping of either. Returns how many bytes it copied:
/// fewer than `len` when the kernel refused (the caller copies the rest another way).
pub fn copy_range(from: i32, to: i32, off: usize, len: usize) -> usize {
    transfer(len, |done| {
        let (mut a, mut b) = ((off + done) as libc::loff_t, (off + done) as libc::loff_t);
        // SAFETY: plain syscall on the caller's descriptors; the offsets are ours.
        unsafe { libc::copy_file_range(from, &mut a, to, &mut b, len - done, 0) }
    })
}

/// Writes the `len` bytes at `src` to offset `off` of file `fd` (`pwrite`), retrying on EINTR
/// and short writes. Returns how many bytes it wrote.
///
/// # Safety
/// `src..src+len` is readable memory.
pub unsafe fn write_at(fd: i32, src: *const u8, len: usize, off: usize) -> usize {
    transfer(len, |done| {
        let a = [fd as usize, src as usize + done, len - done, off + done, 0, 0];
        // SAFETY: the caller's contract: the source is readable.
        unsafe { own_syscall(libc::SYS_pwrite64, a) }
    })
}

/// Moves `len` bytes by `step(done)` (a call that moves some of the rest and returns how
/// many, or -1 with `errno`), again after EINTR and short counts. Returns how many it moved.
fn transfer(len: usize, mut step: impl FnMut(usize) -> isize) -> usize {
    let mut done = 0;
    while done < len {
        let r = step(done);
        if r <= 0 {
            if r < 0 && errno() == libc::EINTR {
                continue;
            }
            break;
        }
        done += r as usize;
    }
    done
}

/// `lseek` with SEEK_DATA / SEEK_HOLE; None past the end or on error.
pub fn seek(fd: i32, off: usize, whence: i32) -> Option<usize> {
    // SAFETY: plain syscall.
    let r = unsafe { libc::lseek(fd, off as libc::off_t, whence) };
    if r < 0 {
        None
    } else {
        Some(r as usize)
    }
}

/// Fills `buf` from the kernel's random source. Returns false if it could not.
pub fn getrandom(buf: &mut [u8]) -> bool {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: writes at most `buf.len() - done` bytes into `buf`.
        let r = unsafe { libc::syscall(libc::SYS_getrandom, buf.as_mut_ptr().add(done), buf.len() - done, 0) };
        if r <= 0 {
            // SAFETY: reading errno of this thread.
            if r < 0 && unsafe { *libc::__errno_location() } == libc::EINTR {
                continue;
            }
            return false;
        }
        done += r as usize;
    }
    true
}

/// A coarse monotonic clock in nanoseconds (vDSO, no system call; async-signal-safe).
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_COARSE)
}

/// The monotonic clock at full resolution, for measuring short spans (sweeps).
pub fn precise_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime fills `ts`.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn gettid() -> u32 {
    // SAFETY: gettid cannot fail.
    unsafe { raw_syscall(libc::SYS_gettid, [0; 6]) as u32 }
}

pub fn getpid() -> u32 {
    // SAFETY: getpid cannot fail. (Raw, from the allocator's own code: a seccomp filter of
    // the program's lets it through there, see `seccomp`.)
    unsafe { raw_syscall(libc::SYS_getpid, [0; 6]) as u32 }
}

/// Writes all of `buf` to `fd`, retrying on EINTR and short writes.
pub fn write_all(fd: i32, mut buf: &[u8]) {
    while !buf.is_empty() {
        let r = write(fd, buf);
        if r < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return;
        }
        if r == 0 {
            return;
        }
        buf = &buf[r as usize..];
    }
}

pub fn set_errno(e: i32) {
    // SAFETY: errno is thread-local and always writable.
    unsafe { *libc::__errno_location() = e };
}

pub fn errno() -> i32 {
    // SAFETY: errno is thread-local and always readable.
    unsafe { *libc::__errno_location() }
}

/// A raw system call: its result, or minus the error number. Unlike `libc::syscall` it
/// leaves `errno` alone, which a task sharing another thread's thread pointer must (`stop`).
///
/// # Safety
/// The arguments must be valid for the call `nr`.
#[inline(always)]
pub unsafe fn raw_syscall(nr: i64, a: [usize; 6]) -> isize {
    let r: isize;
    // SAFETY: the `syscall` instruction clobbers only rax, rcx and r11; the caller vouches for
    // the arguments.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => r,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack)
        );
    }
    r
}

/// `raw_syscall` for the calls a seccomp filter installed later lets through when they come
/// from the allocator's own code (`seccomp`): `errno` is set on failure, as by the C library's
/// wrappers.
///
/// # Safety
/// As `raw_syscall`.
pub unsafe fn own_syscall(nr: i64, a: [usize; 6]) -> isize {
    // SAFETY: the caller's contract.
    let r = unsafe { raw_syscall(nr, a) };
    if r < 0 {
        set_errno(-r as i32);
    }
    r
}

/// Sleeps while `*word == val` (futex wait, private).
pub fn futex_wait(word: &core::sync::atomic::AtomicU32, val: u32) {
    futex_wait_for(word, val, None, true);
}

/// Sleeps while `*word == val`, at most `ns` nanoseconds when given; `private`: a private
/// futex (the kernel's wake when a `CLONE_CHILD_CLEARTID` task exits is a shared one's).
pub fn futex_wait_for(word: &core::sync::atomic::AtomicU32, val: u32, ns: Option<u64>, private: bool) {
    let op = libc::FUTEX_WAIT | if private { libc::FUTEX_PRIVATE_FLAG } else { 0 };
    let ts = ns.map(|ns| libc::timespec { tv_sec: (ns / 1_000_000_000) as i64, tv_nsec: (ns % 1_000_000_000) as i64 });
    let tsp = ts.as_ref().map_or(ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid aligned u32 for the duration of the call; the timeout, if
    // any, is on the stack.
    unsafe { raw_syscall(libc::SYS_futex, [word.as_ptr() as usize, op as usize, val as usize, tsp as usize, 0, 0]) };
}

/// Wakes one waiter on `word` (private).
pub fn futex_wake(word: &core::sync::atomic::AtomicU32) {
    futex_wake_n(word, 1);
}

/// Wakes every waiter on `word` (private).
pub fn futex_wake_all(word: &core::sync::atomic::AtomicU32) {
    futex_wake_n(word, i32::MAX as usize);
}

fn futex_wake_n(word: &core::sync::atomic::AtomicU32, n: usize) {
    let op = libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG;
    // SAFETY: `word` is a valid aligned u32.
    unsafe { raw_syscall(libc::SYS_futex, [word.as_ptr() as usize, op as usize, n, 0, 0, 0]) };
}

/// Dies of SIGABRT, whatever handler or mask the program set.
pub fn die() -> ! {
    die_of(libc::SIGABRT)
}

/// Dies of signal `sig` (SIGABRT, SIGSEGV or SIGBUS), whatever handler or mask the program
/// set: its action reset to the default, unblocked, and sent to this thread. Raw calls from
/// the allocator's own code, which a seccomp filter the program installed later lets through
/// for these signals (`seccomp`): the process dies of `sig` there too, not of the filter's
/// action.
pub fn die_of(sig: i32) -> ! {
    let dfl = KernelSigaction { handler: 0 /* SIG_DFL */, flags: 0, restorer: 0, mask: 0 };
    let set: u64 = 1 << (sig - 1);
    // SAFETY: resetting `sig` to its default action and unblocking it (valid records, 8-byte
    // signal sets), then sending it to this thread; if that somehow returns, `_exit` ends the
    // process.
    unsafe {
        raw_syscall(libc::SYS_rt_sigaction, [sig as usize, &dfl as *const _ as usize, 0, 8, 0, 0]);
        raw_syscall(libc::SYS_rt_sigprocmask, [libc::SIG_UNBLOCK as usize, &set as *const u64 as usize, 0, 8, 0, 0]);
        raw_syscall(libc::SYS_tgkill, [getpid() as usize, gettid() as usize, sig as usize, 0, 0, 0]);
        libc::_exit(128 + sig)
    }
}
