//! Stream buffers: where the C library's stdio keeps a stream's data.
//!
//! stdio reads a file into a stream's buffer, and writes the buffer out, with system calls of
//! its own, which the wrappers of `io` never see. A live alias page that lost its page-table
//! entry (pageout, swap) is mended by the fault handler on the program's next access, but an
//! access by the kernel reaches no handler: behind an alias, the flush of a buffer paged out
//! failed with `EFAULT` and its data was lost, and a read into one set the stream's error
//! indicator (GNU sed reading a slow pipe under pageout stopped at once: `read error on
//! stdin: Bad address`). So the buffer, which the C library allocates in one function
//! (`_IO_file_doallocate`, told apart by the return address of its `malloc`), gets a view of
//! its own that userfaultfd does not watch (`heap::view_malloc`), as the dynamic linker's
//! objects do; there a missing entry is an ordinary page fault, which the kernel mends for
//! itself too.
//!
//! A new view costs system calls and address space that is never used again: a loop of
//! `fopen`, `fgets`, `fclose` took 21 µs per round against 8 µs with the buffer behind an
//! alias (glibc: 5). So the buffer a closed stream frees is *kept*: it stays a live object,
//! and the next stream's buffer of the same size is that one (at most `KEPT` buffers, all of
//! at most `BUFSIZ` bytes, which is all the C library asks for). Only the C library's own
//! `free` of it parks it (told apart by the return address: `_IO_setb`, `_IO_default_finish`).
//! Nothing of the program's points into a stream's buffer: its pointers are to the `FILE`, an
//! ordinary object whose `fclose` revokes its alias, so a stream used after `fclose` is still
//! caught there. The program's own `free` of a kept buffer is reported: `invalid-free` while a
//! stream holds it (the C library would free it again), `double-free` once it waits for the
//! next. A kept buffer counts as reached in the leak check.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

/// The code, start and length, of the C library's functions that allocate a stream's buffer
/// (`_IO_file_doallocate`) and free one (`_IO_setb`, `_IO_default_finish`); zero until the
/// library's constructor.
static DOALLOCATE: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
static SETB: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
static FINISH: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// The most bytes of code taken for one of them (glibc 2.36's are 262, 89 and 105).
const MAX_CODE: usize = 4096;

/// `dladdr1`'s request for the symbol table entry (`<dlfcn.h>`).
const RTLD_DL_SYMENT: core::ffi::c_int = 1;

/// Finds the functions from their dynamic symbols (address and size). Run from the library's
/// constructors, where `dlsym` is safe to call: a buffer allocated earlier (by a constructor
/// of a library initialised before this one) stays an ordinary object. Either all three are
/// found or none is used: a buffer kept must be freed by the C library through them.
fn note() {
    let functions = [(c"_IO_file_doallocate", &DOALLOCATE), (c"_IO_setb", &SETB), (c"_IO_default_finish", &FINISH)];
    let found = functions.map(|(name, _)| code_of(name));
    if found.iter().all(Option::is_some) {
        for ((_, range), (start, len)) in functions.iter().zip(found.into_iter().flatten()) {
            range[0].store(start, Ordering::Relaxed);
            range[1].store(len, Ordering::Relaxed);
        }
    }
}

/// The code of the C library's function `name`: its address and size.
fn code_of(name: &core::ffi::CStr) -> Option<(usize, usize)> {
    // SAFETY: dlsym and dladdr1 with a NUL-terminated name and a pointer to where the symbol
    // table entry's address is stored; both only read the loaded modules' tables.
    unsafe {
        let f = libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr());
        if f.is_null() {
            return None;
        }
        let mut info: libc::Dl_info = core::mem::zeroed();
        let mut sym: *const libc::Elf64_Sym = core::ptr::null();
        let found = libc::dladdr1(
            f,
            &mut info,
            &mut sym as *mut *const libc::Elf64_Sym as *mut *mut core::ffi::c_void,
            RTLD_DL_SYMENT,
        );
        // A function of a few hundred bytes; anything else is not the one meant.
        let len = if found != 0 && !sym.is_null() { (*sym).st_size as usize } else { 0 };
        (1..=MAX_CODE).contains(&len).then_some((f as usize, len))
    }
}

#[used]
#[link_section = ".init_array"]
static NOTE: extern "C" fn() = {
    extern "C" fn run() {
        note();
        learn_directory_call();
    }
    run
};

/// Whether a `malloc` whose call returns to `caller` allocates a stream's buffer.
#[inline(always)]
pub fn called_from(caller: usize) -> bool {
    crate::heap::within(&DOALLOCATE, caller)
}

/// Whether a `free` whose call returns to `caller` is the C library's of a stream's buffer.
#[inline(always)]
pub fn frees_from(caller: usize) -> bool {
    crate::heap::within(&SETB, caller) || crate::heap::within(&FINISH, caller)
}

// ---- directory streams ----
//
// The C library reads a directory stream (`DIR`) with `getdents64` into the buffer that ends
// the `DIR`, a heap object. The program's own `readdir` is mended by its wrapper (`io`), but
// the C library calls its own inside `scandir`, `glob`, `nftw`, `ftw` and `fts_read`: behind
// an alias, a paged-out `DIR` made them fail with `EFAULT`. So a `DIR` that the C library
// opens for itself is a view; one the program opens (`opendir`, `fdopendir`, whose wrappers
// say so: `tls::PLAIN_DIR`) stays an ordinary object, as a view would cost every `opendir`
// about 10 µs more (Python's `os.walk` over /usr took 45 % longer). A view's address is as
// fresh as any large object's: the `DIR` is the program's handle, and none is kept.

/// Where the C library's `malloc` of a directory stream returns to; 0 until found.
static DIR_CALL: AtomicUsize = AtomicUsize::new(0);

/// Set while the constructor opens a directory to find `DIR_CALL`.
static LEARNING: AtomicBool = AtomicBool::new(false);

/// The smallest `DIR` glibc allocates: its header and a buffer of 32 KiB at least (more when
/// the file system's block size is bigger, up to 1 MiB).
const DIR_MIN: usize = 32 * 1024;

/// Finds where the C library allocates a directory stream, by opening one: all its ways of
/// opening one allocate it in one function, which is not among its dynamic symbols. While the
/// constructor opens `/`, the thread's allocations ask for views (`tls::add_views`), and
/// `view_malloc` tells `learn` where each was called from; the one of a `DIR`'s size fails,
/// so that `opendir` closes what it opened and returns null (costing three system calls, and
/// no allocator's start in a program that never allocates). Nothing is learnt when `/`
/// cannot be opened: then every `DIR` is an ordinary object.
fn learn_directory_call() {
    let saved = crate::sys::errno();
    crate::tls::add_views(1);
    LEARNING.store(true, Ordering::Relaxed);
    // SAFETY: opendir with a NUL-terminated path, and closedir of what it returned (nothing,
    // unless the allocation was not the one `learn` waits for).
    unsafe {
        let d = libc::opendir(c"/".as_ptr());
        if !d.is_null() {
            libc::closedir(d);
        }
    }
    LEARNING.store(false, Ordering::Relaxed);
    crate::tls::add_views(-1);
    crate::sys::set_errno(saved);
}

/// Told by `view_malloc` of every view asked for: while the constructor opens its directory,
/// the allocation of a `DIR`'s size made by this thread is that directory's. True for that
/// one, which must fail.
pub fn learn(caller: usize, size: usize) -> bool {
    let learnt = LEARNING.load(Ordering::Relaxed) && size >= DIR_MIN && crate::tls::in_views();
    if learnt {
        DIR_CALL.store(caller, Ordering::Relaxed);
    }
    learnt
}

/// Whether a `malloc` whose call returns to `caller` allocates a directory stream that the C
/// library opens for itself.
#[inline(always)]
pub fn opens_directory(caller: usize) -> bool {
    caller == DIR_CALL.load(Ordering::Relaxed) && !crate::tls::in_plain_dir()
}

// ---- buffers kept ----

/// Buffers kept at most.
const KEPT: usize = 16;

const EMPTY: u32 = 0;
/// Being filled in by `keep`.
const CLAIMED: u32 = 1;
/// A stream's buffer now.
const IN_USE: u32 = 2;
/// Freed by its stream, waiting for the next.
const PARKED: u32 = 3;

/// A kept buffer. Once past `CLAIMED` an entry never changes its address or size again, so
/// they can be read by whoever saw the state.
struct Entry {
    state: AtomicU32,
    addr: AtomicUsize,
    size: AtomicUsize,
}

static ENTRIES: [Entry; KEPT] =
    [const { Entry { state: AtomicU32::new(EMPTY), addr: AtomicUsize::new(0), size: AtomicUsize::new(0) } }; KEPT];

/// Entries filled in (`keep`): `park`, on every `free` of a page or large object, looks no
/// further when there are none.
static FILLED: AtomicUsize = AtomicUsize::new(0);

/// A kept buffer of `size` bytes that a closed stream freed, now in use again; None when
/// there is none.
pub fn take(size: usize) -> Option<usize> {
    for e in &ENTRIES {
        if e.state.load(Ordering::Acquire) == PARKED
            && e.size.load(Ordering::Relaxed) == size
            && e.state.compare_exchange(PARKED, IN_USE, Ordering::Acquire, Ordering::Relaxed).is_ok()
        {
            return Some(e.addr.load(Ordering::Relaxed));
        }
    }
    None
}

/// Keeps the new buffer `addr` of `size` bytes, in use, if there is room.
pub fn keep(addr: usize, size: usize) {
    if FILLED.load(Ordering::Relaxed) >= KEPT {
        return;
    }
    for e in &ENTRIES {
        if e.state.compare_exchange(EMPTY, CLAIMED, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            e.addr.store(addr, Ordering::Relaxed);
            e.size.store(size, Ordering::Relaxed);
            e.state.store(IN_USE, Ordering::Release);
            FILLED.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
}

/// What `park` did with a stream's buffer that the C library freed.
pub enum Park {
    /// Not a kept buffer: freed as any object.
    No,
    /// A kept buffer of this size, now waiting for the next stream.
    Kept(usize),
    /// A kept buffer that was already freed: a double free.
    Again(usize),
}

/// The entry of the kept buffer `addr`, with its state (`IN_USE` or `PARKED`).
fn entry_of(addr: usize) -> Option<(&'static Entry, u32)> {
    if FILLED.load(Ordering::Relaxed) == 0 {
        return None;
    }
    ENTRIES.iter().find_map(|e| {
        let state = e.state.load(Ordering::Acquire);
        (state >= IN_USE && e.addr.load(Ordering::Relaxed) == addr).then_some((e, state))
    })
}

/// The C library's `free` of the stream buffer `addr`: a kept buffer stays live and waits for
/// the next stream.
pub fn park(addr: usize) -> Park {
    let Some((e, state)) = entry_of(addr) else { return Park::No };
    let size = e.size.load(Ordering::Relaxed);
    if state == IN_USE && e.state.compare_exchange(IN_USE, PARKED, Ordering::Release, Ordering::Relaxed).is_ok() {
        return Park::Kept(size);
    }
    Park::Again(size)
}

/// Whether `addr`, freed by the program, is a kept buffer: Some(true) if it waits for a
/// stream (a double free), Some(false) if a stream holds it (the C library frees it).
pub fn kept(addr: usize) -> Option<bool> {
    entry_of(addr).map(|(_, state)| state == PARKED)
}

/// Calls `f` with every kept buffer waiting for a stream (the leak check reaches them).
pub fn for_each_parked(mut f: impl FnMut(usize)) {
    for e in &ENTRIES {
        if e.state.load(Ordering::Acquire) == PARKED {
            f(e.addr.load(Ordering::Relaxed));
        }
    }
}

// ---- buffers the program gives a stream ----
//
// `setvbuf`, `setbuf` and `setbuffer` give a stream a buffer of the program's, which the C
// library then reads into and writes out with its own system calls, as it does its own
// buffers. A heap buffer is behind an alias, so the stream gets a view of the same size
// instead (`lend`), which the C library frees as its own when the stream is closed or given
// another buffer (the wrappers in `io` clear the stream's `_IO_USER_BUF`). The program's
// buffer is left unused, which the C standard allows (its contents are indeterminate while the
// stream holds it); it counts as reached in the leak check while the stream holds the view,
// since the program may keep its only pointer to it in the stream, as glibc lets it.

/// Buffers lent at most at once; past that a stream keeps the program's buffer.
const LOANS: usize = 64;

/// An entry being filled in by `lend`.
const LENDING: usize = 1;

/// A view lent to a stream in place of the program's buffer `theirs`. `view` is 0 when the
/// entry is free, `LENDING` while `lend` fills it in.
struct Loan {
    view: AtomicUsize,
    theirs: AtomicUsize,
}

static LOANED: [Loan; LOANS] = [const { Loan { view: AtomicUsize::new(0), theirs: AtomicUsize::new(0) } }; LOANS];

/// Loans made since the start: `repay`, on every `free` of a stream's buffer by the C library,
/// looks no further when there were none.
static LOANS_MADE: AtomicUsize = AtomicUsize::new(0);

/// A view of `size` bytes for a stream to use in place of the program's buffer `theirs`; None
/// when every entry is taken or no view can be made.
pub fn lend(theirs: usize, size: usize) -> Option<usize> {
    let loan =
        LOANED.iter().find(|l| l.view.compare_exchange(0, LENDING, Ordering::Acquire, Ordering::Relaxed).is_ok())?;
    let view = crate::heap::view_buffer(size);
    if view == 0 {
        loan.view.store(0, Ordering::Release);
        return None;
    }
    loan.theirs.store(theirs, Ordering::Relaxed);
    loan.view.store(view, Ordering::Release);
    LOANS_MADE.fetch_add(1, Ordering::Relaxed);
    Some(view)
}

/// The C library frees `view`, a stream's buffer: if it was lent, the program's buffer is no
/// longer held.
pub fn repay(view: usize) {
    if LOANS_MADE.load(Ordering::Relaxed) == 0 || view <= LENDING {
        return;
    }
    if let Some(l) = LOANED.iter().find(|l| l.view.load(Ordering::Acquire) == view) {
        let _ = l.view.compare_exchange(view, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// Calls `f` with every buffer of the program's whose stream holds a view in its place (the
/// leak check reaches them).
pub fn for_each_lent(mut f: impl FnMut(usize)) {
    for l in &LOANED {
        if l.view.load(Ordering::Acquire) > LENDING {
            f(l.theirs.load(Ordering::Relaxed));
        }
    }
}
