//! nevermore: a hardened `malloc` for unmodified Linux programs, loaded with `LD_PRELOAD`.
//!
//! Layers (each a module):
//! - `sys`: raw system calls (no allocation, async-signal-safe);
//! - `alias`: the alias engine — mirrors (epochs) of the pool in a one-time address arena,
//!   install with userfaultfd, batched revocation, retirement;
//! - `fault`: the SIGSEGV/SIGBUS handler that turns traps into reports;
//! - `lock`: a futex mutex;
//! - `config`: `NEVERMORE_OPTIONS`;
//! - `pool`: the physical pool (a memfd), its canonical view, span descriptors, page map;
//! - `slab`: size classes and striped slabs of small objects;
//! - `cache` / `tls`: per-thread caches reached through an initial-exec TLS slot;
//! - `large`: large objects in guarded one-time views;
//! - `sweep`: reusing the dead slots of pinned groups once a scan proves no pointer to them;
//! - `stop`: holding a process's other threads still (ptrace) while a sweep runs;
//! - `passthrough`: the C library's allocator, for a process where the heap cannot be set up;
//! - `leak`: at exit in detect mode, the live objects no pointer leads to (`detect_leaks`);
//! - `guard`: the per-process secret and the keyed canaries;
//! - `heap`: the front end that ties the tiers together and checks every pointer;
//! - `reentry`: calls made while the thread is already inside the allocator (signal handlers);
//! - `report` / `stats`: error reports and counters;
//! - `stack`: call-stack capture (`.eh_frame` and frame pointers), module table, stack depot;
//! - `fork`: giving a forked child its own heap;
//! - `io`: I/O calls made again when the kernel met a live object's page that lost its
//!   page-table entry;
//! - `copies`, `formats`, `reads`: the C library's copies, formatted output and scans, and
//!   string reads, held to the bounds of heap objects;
//! - `rlimit`: address-space limits the program sets while it runs;
//! - `seccomp`: letting the allocator's own calls through filters the program installs later;
//! - `api`: the exported C and C++ ABI.
//!
//! Every address handed to the program is an alias used once; physical memory is reused behind
//! fresh aliases only after the old alias was revoked. All metadata lives out of band (in
//! private mappings the program never receives pointers into); every object is followed by a
//! keyed canary.

// With the `embed` feature the crate is linked into a Rust program (the coverage-guided fuzzer)
// as its allocator: `std` is there, and so are its panic handler and personality routine.
#![cfg_attr(not(any(test, feature = "embed")), no_std)]
#![cfg_attr(any(test, feature = "embed"), allow(dead_code))]
#![warn(clippy::undocumented_unsafe_blocks)]

mod alias;
mod cache;
mod config;
mod fault;
mod fork;
mod futex;
mod guard;
mod heap;
mod history;
mod large;
mod leak;
mod lock;
mod maps;
mod meta;
mod passthrough;
mod pool;
mod reentry;
mod report;
mod rlimit;
mod seccomp;
mod slab;
mod stack;
mod stats;
mod stop;
mod streams;
mod sweep;
mod sys;
mod tls;

#[cfg(not(test))]
mod api;
#[cfg(not(any(test, feature = "embed")))]
mod copies;
#[cfg(not(any(test, feature = "embed")))]
mod formats;
#[cfg(not(any(test, feature = "embed")))]
mod io;
#[cfg(not(any(test, feature = "embed")))]
mod reads;

/// The boundaries a program linking the allocator statically (the coverage-guided fuzzer in
/// `fuzz/`) aims its request sizes at, so that they follow the allocator's own tables.
#[cfg(feature = "embed")]
pub mod limits {
    /// Bytes of the keyed canary that follows every object.
    pub use crate::guard::CANARY;
    /// Largest page object (request plus canary); larger objects get their own guarded view.
    pub use crate::heap::MAX_PAGE_OBJECT;
    /// Requests above this fail with `ENOMEM`.
    pub use crate::heap::MAX_REQUEST;
    /// Slot sizes of the size classes; a request fits a slot together with its canary.
    pub use crate::slab::SIZES;
}

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};

/// A value written during initialisation (or by the fork child handler, under every lock) and
/// only read afterwards.
pub struct GlobalCell<T>(UnsafeCell<T>);

// SAFETY: writes happen only before `STATE` becomes READY (published with Release) or in the
// single-threaded fork child; all other accesses are reads.
unsafe impl<T> Sync for GlobalCell<T> {}

impl<T> GlobalCell<T> {
    pub const fn new(v: T) -> Self {
        GlobalCell(UnsafeCell::new(v))
    }
    #[inline]
    pub fn get(&self) -> &T {
        // SAFETY: see the type's comment.
        unsafe { &*self.0.get() }
    }
    /// # Safety
    /// Only during initialisation or in the fork child with every lock held.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get_mut(&self) -> &mut T {
        // SAFETY: guaranteed by the caller.
        unsafe { &mut *self.0.get() }
    }
}

const UNINIT: u8 = 0;
const RUNNING: u8 = 1;
const READY: u8 = 2;
const FAILED: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);
static INIT_TID: AtomicU32 = AtomicU32::new(0);
static OPTIONS: GlobalCell<config::Options> = GlobalCell::new(config::Options::DEFAULT);
/// A copy of `NEVERMORE_OPTIONS`, which the parsed options borrow their strings from
/// (`report_path`, `syslog_path`): programs that set a process title (nginx, OpenSSH, perl's
/// `$0`) write it over the memory of their arguments and environment.
static OPTIONS_TEXT: GlobalCell<[u8; config::MAX_TEXT]> = GlobalCell::new([0; config::MAX_TEXT]);
static KEY: AtomicU32 = AtomicU32::new(u32::MAX);

pub fn options() -> &'static config::Options {
    OPTIONS.get()
}

/// Detect mode (one alias page per object, revoked at once)?
#[inline]
pub fn detect() -> bool {
    options().mode == config::Mode::Detect
}

#[inline]
pub fn is_ready() -> bool {
    STATE.load(Ordering::Acquire) == READY
}

/// Initialises the allocator once. Returns false if it cannot work (then allocations fail).
#[inline]
pub fn ensure_init() -> bool {
    is_ready() || init_slow()
}

#[cold]
fn init_slow() -> bool {
    loop {
        match STATE.compare_exchange(UNINIT, RUNNING, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => {
                INIT_TID.store(sys::gettid(), Ordering::Relaxed);
                let ok = init();
                STATE.store(if ok { READY } else { FAILED }, Ordering::Release);
                return ok;
            }
            Err(READY) => return true,
            Err(FAILED) => return false,
            Err(_) => {
                if INIT_TID.load(Ordering::Relaxed) == sys::gettid() {
                    // Something called by `init` allocated: refuse rather than deadlock.
                    return false;
                }
                core::hint::spin_loop();
            }
        }
    }
}

fn init() -> bool {
    // Secure execution (`AT_SECURE`: a set-user-ID or set-group-ID program, or one with file
    // capabilities, started by another user, where the library is preloaded for every process
    // through /etc/ld.so.preload): the environment is the caller's, who must not choose where a
    // privileged process writes (`report_path` created or appended to any file as root) nor
    // how it runs. The options are ignored there, as the C library ignores its own variables.
    // SAFETY: getauxval only reads the auxiliary vector.
    let secure = unsafe { libc::getauxval(libc::AT_SECURE) } != 0;
    // SAFETY: getenv returns null or a NUL-terminated string that lives in the environment.
    let env = if secure { core::ptr::null_mut() } else { unsafe { libc::getenv(c"NEVERMORE_OPTIONS".as_ptr()) } };
    if !env.is_null() {
        // SAFETY: as above; read once, here.
        let env = unsafe { core::ffi::CStr::from_ptr(env) }.to_bytes();
        if env.len() > config::MAX_TEXT {
            report::bad_options(&config::ParseError::TooLong(env.len()));
        }
        // SAFETY: initialisation runs once, before READY is published; nothing else refers to
        // the copy until the options below do, and it is never written again.
        let bytes: &'static [u8] = unsafe {
            let text = OPTIONS_TEXT.get_mut();
            text[..env.len()].copy_from_slice(env);
            &text[..env.len()]
        };
        match config::parse(bytes) {
            // SAFETY: initialisation runs once, before READY is published.
            Ok(o) => unsafe { *OPTIONS.get_mut() = o },
            Err(e) => report::bad_options(&e),
        }
    }
    report::open_destination();
    let keyed = guard::init_secret();
    // Before anything is sized by the address-space limit.
    rlimit::after_exec();
    heap::note_loader();
    // SAFETY: called once, before any other thread can see the pool (STATE is not READY).
    if let Err(e) = unsafe { pool::POOL.init() } {
        let why = match e {
            pool::InitError::Memfd => "memfd_create failed",
            pool::InitError::Map => "no address space for the pool, or a file size limit (ulimit -f) below 16 MiB",
        };
        let errno = sys::errno();
        // A system that refuses memory files (a sandbox's seccomp filter) gets the C library's
        // allocator; a limit the user set (address space, `ulimit -f`) is said and ends it.
        if matches!(e, pool::InitError::Memfd) && passthrough::enable() {
            report::say(format_args!(
                "cannot set up the heap: {why} (errno {errno}); this process runs on the C library's allocator, unprotected"
            ));
            return false;
        }
        report::say(format_args!("cannot set up the heap: {why} (errno {errno}); aborting"));
        sys::die();
    }
    if !large::init() {
        report::say(format_args!("cannot set up the large-object table; aborting"));
        sys::die();
    }
    // SAFETY: once, during initialisation, after the pool.
    if !unsafe { alias::init() } {
        report::say(format_args!("cannot reserve the alias arena (errno {}); aborting", sys::errno()));
        sys::die();
    }
    if detect() && !history::init() {
        report::say(format_args!("cannot map the free history; reports will name fewer objects"));
    }
    fault::install();
    stack::init(detect() && options().stacks);
    // Once the library's address space is reserved: a limit the previous program set for this
    // one.
    rlimit::after_init();
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: plain pthread calls with valid arguments; neither allocates in glibc for the
    // first keys and handlers.
    unsafe {
        if libc::pthread_key_create(&mut key, Some(thread_exit)) == 0 {
            KEY.store(key, Ordering::Relaxed);
        }
        libc::pthread_atfork(Some(fork::prepare), Some(fork::parent), Some(fork::child));
    }
    // Now rather than at a thread's first allocation (`fault::own_stack`), which may come from
    // a signal handler: making the key takes a lock.
    let _ = fault::alt_key();
    if options().verbose {
        let l = pool::POOL.layout();
        report::say(format_args!(
            "ready: mode {}, revocation by {} (batches: {}), pool of {} MiB, canaries {}",
            if detect() { "detect" } else { "prevent" },
            match alias::revoke_kind() {
                alias::Revoke::Uffd => "userfaultfd",
                alias::Revoke::Guard => "guard markers",
                alias::Revoke::Protect => "mprotect",
            },
            alias::batching(),
            (l.pages as usize * sys::PAGE) >> 20,
            if keyed { "keyed with a random secret" } else { "NOT keyed (getrandom failed)" }
        ));
    }
    true
}

/// Ties a new thread cache to thread exit.
pub fn register_thread(c: *mut cache::Cache) {
    let key = KEY.load(Ordering::Relaxed);
    if key != u32::MAX {
        // SAFETY: `key` was created by pthread_key_create.
        unsafe { libc::pthread_setspecific(key, c as *const core::ffi::c_void) };
    }
    fault::own_stack();
}

extern "C" fn thread_exit(c: *mut core::ffi::c_void) {
    let _scope = reentry::Scope::enter();
    if !c.is_null() && tls::get() == c as *mut cache::Cache {
        // SAFETY: `c` is the exiting thread's own cache.
        unsafe { cache::retire(c as *mut cache::Cache) };
    }
}

extern "C" fn at_load() {
    if ensure_init() {
        leak::keep_stderr();
    }
}

extern "C" fn at_exit() {
    if is_ready() && options().stats {
        if seccomp::filtered() {
            // The statistics read `/proc/self` files, which the program's filter may refuse or
            // kill the process for, changing how it ends (OpenSSH's parent process treats its
            // pre-authentication child's death as a failed login).
            report::say(format_args!("statistics not printed: the process confined itself with seccomp"));
        } else {
            stats::print();
        }
    }
    if is_ready() && (options().detect_leaks || options().check_at_exit) && !seccomp::filtered() {
        // Last: a report ends the process.
        leak::check_at_exit();
    }
}

#[used]
#[link_section = ".init_array"]
static INIT_ARRAY: extern "C" fn() = at_load;

#[used]
#[link_section = ".fini_array"]
static FINI_ARRAY: extern "C" fn() = at_exit;

#[cfg(not(any(test, feature = "embed")))]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    match info.location() {
        Some(at) => report::say(format_args!("internal error (panic at {at}); aborting")),
        None => report::say(format_args!("internal error (panic); aborting")),
    }
    sys::die()
}

// `core` is prebuilt with unwinding tables that name a personality routine,
// `rust_eh_personality`, which a `no_std` library must define. It is defined here with hidden
// visibility: exported, it would take the place of the real one in Rust programs that get
// theirs from a shared library (rustc's `librustc_driver.so`, programs built with
// `-C prefer-dynamic`), and their panics, which unwind, would abort instead. With
// `panic = "abort"` no unwind ever starts in this library's code; should a foreign exception
// pass through one of its frames, the routine answers "continue unwinding"
// (`_URC_CONTINUE_UNWIND`): they have nothing to clean up.
#[cfg(not(any(test, feature = "embed")))]
core::arch::global_asm!(
    ".globl rust_eh_personality",
    ".hidden rust_eh_personality",
    ".type rust_eh_personality, @function",
    "rust_eh_personality:",
    "mov eax, 8",
    "ret",
    ".size rust_eh_personality, . - rust_eh_personality",
);

/// Serialises unit tests that use the process-wide pool.
#[cfg(test)]
static TEST_POOL_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
