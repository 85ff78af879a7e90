//! Futex waits the kernel makes again, on words in heap objects.
//!
//! A thread that waits on a futex word (a semaphore, a mutex, a condition variable) and is
//! interrupted (a signal handler ran, or a sweep's holder stopped it) goes back into the
//! kernel, which makes the wait again and reads the word itself. userfaultfd lets no fault of
//! the kernel's own through: when the word's page lost its page-table entry while the thread
//! waited (pageout, swap), the read fails with `EFAULT`, and glibc aborts the process ("The
//! futex facility returned an unexpected error code"). Mapping the page again before the
//! thread goes on leaves a window: a pageout between that and the kernel's read (a task paging
//! the waiters' object out every 100 µs made 1 run in 5 abort so, `tests/c/sweep.c
//! futex-waits`).
//!
//! So such a thread is sent, instead, to `nevermore_futex_again`, which reads the word (and a
//! timeout in the arena) in user mode, where a fault is mended by the fault handler, and makes
//! the same call; a plain wait that still fails with `EFAULT` (paged out again in between) reads
//! and waits again. Then it goes back to where the thread was. Two words are kept on the
//! thread's stack below its red zone (the 128 bytes below the stack pointer that the code it
//! runs may use), where a signal's frame would go too: the flags of `Again`, then the address
//! to go back to. Its unwind information says where the caller's frame is, so that a thread
//! cancelled there (`pthread_cancel` unwinds from its signal handler, as glibc does for a
//! cancellable wait) runs its cleanup handlers and destructors.
//!
//! glibc 2.41 and later act on a deferred cancellation only when the thread was interrupted
//! inside glibc's own system-call stub (they look at the instruction pointer): a thread
//! waiting in `nevermore_futex_again` would not be cancelled until its wait ended. With those
//! the library only maps the memory again before the thread goes on (`redirectable`).

use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use crate::alias;

/// Calls `touch` with each address of memory a futex call reads (its word `uaddr`, its
/// operation `op`, its fourth argument `arg4` and its second word `uaddr2`): the words, and a
/// timeout's first and last 4-byte words.
pub fn memory(uaddr: usize, op: usize, arg4: usize, uaddr2: usize, touch: impl Fn(usize)) {
    if uaddr & 3 == 0 {
        touch(uaddr);
    }
    let op = plain_op(op);
    // The operations with a second word.
    let second = matches!(
        op,
        libc::FUTEX_REQUEUE
            | libc::FUTEX_CMP_REQUEUE
            | libc::FUTEX_WAKE_OP
            | libc::FUTEX_WAIT_REQUEUE_PI
            | libc::FUTEX_CMP_REQUEUE_PI
    );
    if second && uaddr2 & 3 == 0 {
        touch(uaddr2);
    }
    if let Some(t) = timeout_of(op, arg4) {
        touch(t & !3);
        touch(t.wrapping_add(12) & !3);
    }
}

/// A futex call's operation `op` without its private and clock flags.
fn plain_op(op: usize) -> i32 {
    op as i32 & !(libc::FUTEX_PRIVATE_FLAG | libc::FUTEX_CLOCK_REALTIME)
}

/// The timeout a futex operation `op` (private and clock flags taken off) reads at `arg` (its
/// fourth argument), if it takes one.
fn timeout_of(op: i32, arg: usize) -> Option<usize> {
    const FUTEX_LOCK_PI2: i32 = 13;
    let timed = matches!(
        op,
        libc::FUTEX_WAIT | libc::FUTEX_WAIT_BITSET | libc::FUTEX_LOCK_PI | FUTEX_LOCK_PI2 | libc::FUTEX_WAIT_REQUEUE_PI
    );
    (timed && arg != 0).then_some(arg)
}

/// Bytes below the stack pointer that the interrupted code may use (the red zone).
const RED_ZONE: usize = 128;
/// Bytes `nevermore_futex_again` keeps below the red zone: the flags, the address to go back to.
const SLOT: usize = 16;

// The stack at `nevermore_futex_again`: [rsp] the flags, [rsp + 8] the address to go back to,
// then the red zone; the caller's stack pointer is rsp + 144. Its unwind rules say so (DWARF
// register 16 is the return address, 2 is rcx). `nevermore_futex_again_entry` builds that
// frame from rcx (the address) and r11 (the flags), which the `syscall` instruction the thread
// was about to run clobbers anyway: a signal handler cannot write below the interrupted
// stack's red zone itself, where its own frame lies.
core::arch::global_asm!(
    ".pushsection .text.nevermore_futex_again,\"ax\",@progbits",
    ".globl nevermore_futex_again_entry",
    ".hidden nevermore_futex_again_entry",
    ".type nevermore_futex_again_entry, @function",
    "nevermore_futex_again_entry:",
    ".cfi_startproc",
    ".cfi_def_cfa rsp, 0",
    ".cfi_register 16, 2",
    "lea rsp, [rsp - {frame}]",
    ".cfi_def_cfa_offset {frame}",
    "mov qword ptr [rsp + 8], rcx",
    ".cfi_offset 16, -{back}",
    "mov qword ptr [rsp], r11",
    ".globl nevermore_futex_again",
    ".hidden nevermore_futex_again",
    "nevermore_futex_again:",
    // The timeout's first and last bytes, when the flags say it lies in the arena (rcx and
    // r11 are the system call's to clobber).
    "test qword ptr [rsp], {timeout}",
    "jz 2f",
    "mov r11, qword ptr [r10]",
    "mov r11b, byte ptr [r10 + 15]",
    "2:",
    // The word.
    "mov r11d, dword ptr [rdi]",
    "syscall",
    ".globl nevermore_futex_again_done",
    ".hidden nevermore_futex_again_done",
    "nevermore_futex_again_done:",
    "cmp rax, -14",
    "jne 3f",
    "test qword ptr [rsp], {again}",
    "jz 3f",
    "mov eax, {futex}",
    "jmp nevermore_futex_again",
    "3:",
    "mov rcx, qword ptr [rsp + 8]",
    ".cfi_register 16, 2",
    "lea rsp, [rsp + {frame}]",
    ".cfi_def_cfa_offset 0",
    "jmp rcx",
    ".cfi_endproc",
    ".size nevermore_futex_again_entry, . - nevermore_futex_again_entry",
    ".popsection",
    frame = const RED_ZONE + SLOT,
    back = const RED_ZONE + SLOT - 8,
    timeout = const Again::TIMEOUT,
    again = const Again::AGAIN,
    futex = const libc::SYS_futex,
);

extern "C" {
    fn nevermore_futex_again_entry();
    fn nevermore_futex_again();
    fn nevermore_futex_again_done();
}

/// Futex calls sent to be made again by `nevermore_futex_again` (for `stats=1`).
pub static SENT: AtomicU64 = AtomicU64::new(0);

/// The flags word `nevermore_futex_again` finds on the stack.
struct Again;

impl Again {
    /// The call's timeout (`r10`) lies in the arena: read it before each call.
    const TIMEOUT: u64 = 1;
    /// A plain wait (`FUTEX_WAIT`, `FUTEX_WAIT_BITSET`): the kernel reads only the word and the
    /// timeout, which the code has just read, so an `EFAULT` is a pageout in between: made again.
    const AGAIN: u64 = 2;

    /// The flags for a futex call of operation `op` with fourth argument `arg4`.
    fn of(op: usize, arg4: usize) -> u64 {
        let op = plain_op(op);
        let mut flags = 0;
        if timeout_of(op, arg4).is_some_and(alias::in_arena) {
            flags |= Self::TIMEOUT;
        }
        if op == libc::FUTEX_WAIT || op == libc::FUTEX_WAIT_BITSET {
            flags |= Self::AGAIN;
        }
        flags
    }
}

/// The registers of a thread about to make a futex call again that `send` changes.
pub struct Regs<'a> {
    pub rip: &'a mut u64,
    pub rsp: &'a mut u64,
    pub rax: &'a mut u64,
    pub rcx: &'a mut u64,
    pub r11: &'a mut u64,
}

/// How `send` builds the slot `nevermore_futex_again` needs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Written on the thread's stack now (a thread stopped by ptrace: nothing else is there).
    Write,
    /// Built by `nevermore_futex_again_entry` (a signal handler's own frame lies below the
    /// interrupted thread's red zone until it returns).
    AtEntry,
}

/// Sends a thread about to make the futex call with word `uaddr`, operation `op` and fourth
/// argument `arg4` again to `nevermore_futex_again`, which then goes back to `back` (just past
/// the thread's `syscall`). False, with the registers untouched, when the word is not in the
/// alias arena or the C library forbids (`redirectable`).
///
/// # Safety
/// `regs` are the registers the thread goes on with; with `Slot::Write`, the thread is stopped
/// and its stack below the red zone is free.
pub unsafe fn send(back: usize, uaddr: usize, op: usize, arg4: usize, how: Slot, regs: Regs<'_>) -> bool {
    if !alias::in_arena(uaddr) || !redirectable() {
        return false;
    }
    let done = nevermore_futex_again_done as *const () as usize;
    let flags = Again::of(op, arg4);
    let entry = if back == done {
        // Interrupted in `nevermore_futex_again`'s own call: its slot is there.
        nevermore_futex_again as *const () as usize
    } else if how == Slot::Write {
        let slot = (*regs.rsp as usize).wrapping_sub(RED_ZONE + SLOT);
        // SAFETY: the stopped thread's stack below its red zone (the caller's contract), in the
        // shared address space, free for a signal's frame; a fault on a live alias is mended by
        // the writing task's fault handler (the sweep holder's `on_fault`: any other fault ends
        // the holder, and the kernel lets the thread go as it was).
        unsafe {
            (slot as *mut u64).write_volatile(flags);
            (slot as *mut u64).add(1).write_volatile(back as u64);
        }
        *regs.rsp = slot as u64;
        nevermore_futex_again as *const () as usize
    } else {
        *regs.rcx = back as u64;
        *regs.r11 = flags;
        nevermore_futex_again_entry as *const () as usize
    };
    *regs.rax = libc::SYS_futex as u64;
    *regs.rip = entry as u64;
    SENT.fetch_add(1, Ordering::Relaxed);
    true
}

/// Whether threads may be sent to `nevermore_futex_again`: the C library is not glibc 2.41 or
/// later (see the module's comment). Read once; async-signal-safe.
fn redirectable() -> bool {
    static STATE: AtomicU8 = AtomicU8::new(0);
    match STATE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            // SAFETY: returns a pointer to a constant string of the C library's.
            let v = unsafe { core::ffi::CStr::from_ptr(gnu_get_libc_version()) };
            let ok = !version_at_least(v.to_bytes(), 2, 41);
            STATE.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
            ok
        }
    }
}

extern "C" {
    fn gnu_get_libc_version() -> *const core::ffi::c_char;
}

/// Whether version string `v` ("2.36", "2.41.9000") is `major.minor` or later.
fn version_at_least(v: &[u8], major: u32, minor: u32) -> bool {
    let mut parts = v.split(|&b| b == b'.').map(|p| {
        p.iter()
            .take_while(|b| b.is_ascii_digit())
            .fold(0u32, |n, &b| n.saturating_mul(10).saturating_add((b - b'0') as u32))
    });
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_number() {
        assert!(!version_at_least(b"2.36", 2, 41));
        assert!(!version_at_least(b"2.9", 2, 41));
        assert!(version_at_least(b"2.41", 2, 41));
        assert!(version_at_least(b"2.41.9000", 2, 41));
        assert!(version_at_least(b"2.100", 2, 41));
        assert!(version_at_least(b"3.0", 2, 41));
        assert!(!version_at_least(b"", 2, 41));
    }

    #[test]
    fn only_plain_waits_are_made_again_after_efault() {
        let private = libc::FUTEX_PRIVATE_FLAG as usize;
        assert_eq!(Again::of(libc::FUTEX_WAIT as usize | private, 0), Again::AGAIN);
        assert_eq!(Again::of(libc::FUTEX_WAIT_BITSET as usize | libc::FUTEX_CLOCK_REALTIME as usize, 0), Again::AGAIN);
        assert_eq!(Again::of(libc::FUTEX_LOCK_PI as usize, 0), 0);
        // A timeout outside the arena is the kernel's to bring back.
        assert_eq!(Again::of(libc::FUTEX_WAIT as usize, 0x1000), Again::AGAIN);
    }
}
