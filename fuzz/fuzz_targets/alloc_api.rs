//! Coverage-guided differential fuzzing of the allocator API (docs/robustness.md).
//!
//! nevermore is linked into this program statically (crate feature `embed`), with coverage
//! instrumentation, and its exported `malloc`/`free`/... are the process allocator (checked at
//! start-up). An input is a sequence of operations — malloc, calloc, realloc, free,
//! posix_memalign, aligned_alloc, memalign, malloc_usable_size, verify/rewrite of a live object
//! — on 256 slots, with sizes at the allocator's boundaries (size classes ±2 and minus the
//! canary, page multiples, the page-object limit, large and impossible sizes) and alignments
//! from 1 B to 4 MiB, valid or not. After each operation the result is checked against a model
//! of the live objects (the same checks as `tests/c/fuzz.c`):
//!
//! - no two live objects overlap; the alignment asked for is honoured (16 bytes otherwise);
//! - contents (a pattern with a prime period, at a per-object phase) are intact at free,
//!   realloc and verify, and kept by realloc up to the smaller size; calloc memory is zero;
//! - `malloc_usable_size` is the request (nevermore's canary follows right after it);
//! - impossible requests fail with `ENOMEM` (`EINVAL` for a bad alignment) and a failed realloc
//!   keeps the object; a successful call leaves `errno` alone;
//! - within one input no address is returned twice (one-time addresses).
//!
//! An input whose last operation is a misuse (double free after some churn, free of an interior
//! pointer, one byte written past the end then free or realloc) performs it in a forked child
//! with stderr captured: the child must die of SIGABRT with exactly one report of the matching
//! kind and nothing else. Any report in the fuzzing process itself kills it (set
//! `ALLOC_API_SAVE_INPUT=<file>` to keep the input being run, since such a death bypasses
//! libFuzzer's crash handler). At exit the program prints how many inputs and misuse checks it
//! ran.

#![no_main]

use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Once;
use std::time::Instant;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nevermore::limits::{CANARY, MAX_PAGE_OBJECT, MAX_REQUEST, SIZES};

const SLOTS: usize = 256;
const PAGE: usize = 4096;
/// Written to `errno` before each call: a successful call must leave it there.
const ERRNO_MARK: i32 = 0x5eed;

/// A request size, resolved against the allocator's own boundaries.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Size {
    Zero,
    /// 0..300.
    Small(u16),
    /// A slot size, optionally minus the canary, ±2.
    Class {
        class: u8,
        minus_canary: bool,
        delta: u8,
    },
    /// 1..=33 pages, optionally minus the canary, ±2.
    Pages {
        pages: u8,
        minus_canary: bool,
        delta: u8,
    },
    /// Around the largest page object.
    PageLimit {
        minus_canary: bool,
        delta: u8,
    },
    /// 2 KiB .. 142 KiB; one in 16 (by `large`) is 256 KiB .. 4 MiB instead (they cost time).
    Big {
        large: u8,
        bytes: u32,
    },
    /// Above the largest possible request.
    Impossible(u8),
}

const IMPOSSIBLE: [usize; 6] = [usize::MAX, usize::MAX - PAGE, usize::MAX - 15, 1 << 62, 1 << 47, MAX_REQUEST + 1];

fn near(base: usize, minus_canary: bool, delta: u8) -> usize {
    let d = (delta % 5) as isize - 2;
    (base as isize - if minus_canary { CANARY as isize } else { 0 } + d).max(0) as usize
}

impl Size {
    fn bytes(self) -> usize {
        match self {
            Size::Zero => 0,
            Size::Small(x) => x as usize % 300,
            Size::Class { class, minus_canary, delta } => {
                near(SIZES[class as usize % SIZES.len()] as usize, minus_canary, delta)
            }
            Size::Pages { pages, minus_canary, delta } => near((1 + pages as usize % 33) * PAGE, minus_canary, delta),
            Size::PageLimit { minus_canary, delta } => near(MAX_PAGE_OBJECT, minus_canary, delta),
            Size::Big { large, bytes } if large % 16 == 0 => {
                (256 << 10) + bytes as usize % ((4 << 20) - (256 << 10) + 1)
            }
            Size::Big { bytes, .. } => 2048 + bytes as usize % (140 << 10),
            Size::Impossible(x) => IMPOSSIBLE[x as usize % IMPOSSIBLE.len()],
        }
    }
}

/// An alignment argument, valid or not.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Align {
    /// 1 B .. 4 MiB.
    Pow2(u8),
    Zero,
    NotPow2(u16),
    /// 1, 2 or 4: below `sizeof(void *)`.
    Tiny(u8),
}

impl Align {
    fn bytes(self) -> usize {
        match self {
            Align::Pow2(x) => 1 << (x % 23),
            Align::Zero => 0,
            Align::NotPow2(x) => {
                let v = x as usize % 4096 + 3;
                if v.is_power_of_two() {
                    v + 1
                } else {
                    v
                }
            }
            Align::Tiny(x) => 1 << (x % 3),
        }
    }
}

/// A misuse, performed (in a forked child) only by the last operation of an input.
#[derive(Debug, Clone, Copy)]
enum Misuse {
    /// Free the object, allocate and free some objects of its size, free it again.
    DoubleFree { slot: u8, churn: u8 },
    /// Free a pointer into the object (not its start).
    InteriorFree { slot: u8, offset: u32 },
    /// Change the byte just past the object, then free it or grow it with realloc.
    Overflow { slot: u8, realloc: bool, grow: u16 },
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Op {
    Malloc {
        slot: u8,
        size: Size,
    },
    /// `calloc(n, size / n)`; with an impossible size, a product that is too big or overflows.
    Calloc {
        slot: u8,
        n: u8,
        size: Size,
    },
    /// On an empty slot `realloc(NULL, n)`; size 0 frees.
    Realloc {
        slot: u8,
        size: Size,
    },
    Free {
        slot: u8,
    },
    PosixMemalign {
        slot: u8,
        align: Align,
        size: Size,
    },
    AlignedAlloc {
        slot: u8,
        align: Align,
        size: Size,
    },
    Memalign {
        slot: u8,
        align: Align,
        size: Size,
    },
    UsableSize {
        slot: u8,
    },
    /// Check the contents; optionally write a new pattern over the whole object.
    Verify {
        slot: u8,
        rewrite: bool,
    },
    /// `reallocarray(p, n, size / n)`; with an impossible size, an overflowing product.
    ReallocArray {
        slot: u8,
        n: u8,
        size: Size,
    },
    Valloc {
        slot: u8,
        size: Size,
    },
    /// Allocates the size rounded up to whole pages.
    Pvalloc {
        slot: u8,
        size: Size,
    },
    /// The nothrow C++ `operator new`, with an alignment (a power of two) or without.
    NewNothrow {
        slot: u8,
        align: Option<u8>,
        size: Size,
    },
    /// `malloc_trim(0)`, then a check of the live objects in 8 slots from `slot` on.
    Trim {
        slot: u8,
    },
    /// A misuse (`kind` plus the number of operations, modulo 3, picks one of `Misuse`, so that
    /// a truncated last operation does not always pick the same; `arg` is its parameter);
    /// before the last operation only a check of the object.
    Misuse {
        kind: u8,
        slot: u8,
        arg: u32,
        realloc: bool,
    },
}

impl Op {
    fn misuse(self, nops: usize) -> Option<Misuse> {
        match self {
            Op::Misuse { kind, slot, arg, realloc } => Some(match (kind as usize + nops) % 3 {
                0 => Misuse::DoubleFree { slot, churn: arg as u8 },
                1 => Misuse::InteriorFree { slot, offset: arg },
                _ => Misuse::Overflow { slot, realloc, grow: arg as u16 },
            }),
            _ => None,
        }
    }
}

// ---- contents: byte i of an object with phase f is PATTERN[(f + i) % PERIOD] ----

const PERIOD: usize = 4093;

static PATTERN: [u8; 2 * PERIOD] = {
    let mut t = [0u8; 2 * PERIOD];
    let mut i = 0;
    while i < 2 * PERIOD {
        let k = (i % PERIOD) as u64;
        let h = (k + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        t[i] = (h >> 56) as u8 ^ (h >> 29) as u8;
        i += 1;
    }
    t
};

static ZEROS: [u8; PAGE] = [0; PAGE];

/// Writes the pattern of phase `phase` into bytes `from..to` of `p`.
///
/// # Safety
/// `p + from .. p + to` must be writable.
unsafe fn fill(p: *mut u8, from: usize, to: usize, phase: usize) {
    let mut i = from;
    while i < to {
        let k = (phase + i) % PERIOD;
        let n = (PERIOD - k).min(to - i);
        // SAFETY: `PATTERN[k..k + n]` is in bounds (k < PERIOD, n <= PERIOD); the destination is
        // writable per the caller.
        unsafe { std::ptr::copy_nonoverlapping(PATTERN.as_ptr().add(k), p.add(i), n) };
        i += n;
    }
}

/// The first byte of `from..to` that differs from the pattern, if any.
///
/// # Safety
/// `p + from .. p + to` must be readable.
unsafe fn first_difference(p: *const u8, from: usize, to: usize, phase: usize) -> Option<(usize, u8, u8)> {
    let mut i = from;
    while i < to {
        let k = (phase + i) % PERIOD;
        let n = (PERIOD - k).min(to - i);
        // SAFETY: readable per the caller.
        let got = unsafe { std::slice::from_raw_parts(p.add(i), n) };
        let want = &PATTERN[k..k + n];
        if got != want {
            let j = got.iter().zip(want).position(|(a, b)| a != b).unwrap();
            return Some((i + j, got[j], want[j]));
        }
        i += n;
    }
    None
}

/// Whether `n` bytes at `p` are all zero.
///
/// # Safety
/// `p .. p + n` must be readable.
unsafe fn all_zero(p: *const u8, n: usize) -> bool {
    let mut i = 0;
    while i < n {
        let k = (n - i).min(PAGE);
        // SAFETY: readable per the caller.
        if unsafe { std::slice::from_raw_parts(p.add(i), k) } != &ZEROS[..k] {
            return false;
        }
        i += k;
    }
    true
}

// ---- libc ----

fn errno() -> i32 {
    // SAFETY: `__errno_location` returns this thread's errno.
    unsafe { *libc::__errno_location() }
}

fn set_errno(v: i32) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = v }
}

extern "C" {
    fn memalign(align: usize, size: usize) -> *mut c_void;
    fn aligned_alloc(align: usize, size: usize) -> *mut c_void;
    fn valloc(size: usize) -> *mut c_void;
    fn pvalloc(size: usize) -> *mut c_void;
    fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void;
    /// `operator new(size_t, const std::nothrow_t&)`.
    fn _ZnwmRKSt9nothrow_t(size: usize, nt: *const c_void) -> *mut c_void;
    /// `operator new(size_t, std::align_val_t, const std::nothrow_t&)`.
    fn _ZnwmSt11align_val_tRKSt9nothrow_t(size: usize, align: usize, nt: *const c_void) -> *mut c_void;
    /// `operator delete(void*, size_t)`.
    fn _ZdlPvm(p: *mut c_void, size: usize);
}

// ---- counters and start-up checks ----

static INPUTS: AtomicU64 = AtomicU64::new(0);
static OPS: AtomicU64 = AtomicU64::new(0);
/// Misuse checks done: double-free, invalid-free, heap-buffer-overflow.
static MISUSE: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
/// Misuse operations not run because forks had taken their share of the time.
static MISUSE_SKIPPED: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds spent in misuse checks (each forks, and the fork copies the heap).
static MISUSE_NANOS: AtomicU64 = AtomicU64::new(0);
/// At most this share of the running time goes to misuse checks (`ALLOC_API_MISUSE_SHARE`,
/// default 0.25; 1 runs every one); the first one always runs (so that replaying a single input
/// performs its misuse). Stored as the bits of an f64.
static MISUSE_SHARE: AtomicU64 = AtomicU64::new(0);
static STARTED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
/// Descriptor of `ALLOC_API_SAVE_INPUT`, or -1.
static SAVE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn print_counts() {
    let m: Vec<u64> = MISUSE.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    eprintln!(
        "alloc_api: inputs {} operations {} misuse checks: double-free {} invalid-free {} heap-buffer-overflow {} \
         (skipped {})",
        INPUTS.load(Ordering::Relaxed),
        OPS.load(Ordering::Relaxed),
        m[0],
        m[1],
        m[2],
        MISUSE_SKIPPED.load(Ordering::Relaxed)
    );
}

/// Checks that nevermore really is this process' allocator, for the program's own calls, for
/// libc's internal ones and for Rust's global allocator.
fn start_up() {
    STARTED.get_or_init(Instant::now);
    let share = std::env::var("ALLOC_API_MISUSE_SHARE").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.25);
    MISUSE_SHARE.store(share.to_bits(), Ordering::Relaxed);
    // SAFETY: plain libc calls with valid arguments; every pointer is checked before use.
    unsafe {
        let exported = libc::dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr());
        assert_eq!(
            exported as usize,
            libc::malloc as *const () as usize,
            "the process' `malloc` is not the statically linked nevermore (link with -rdynamic)"
        );
        let s = libc::strdup(c"abcd".as_ptr());
        assert!(!s.is_null());
        assert_eq!(libc::malloc_usable_size(s as *mut c_void), 5, "libc's own malloc calls do not reach nevermore");
        libc::free(s as *mut c_void);
        let b = Box::new([7u8; 5]);
        assert_eq!(libc::malloc_usable_size(&*b as *const u8 as *mut c_void), 5, "Rust's allocator is not nevermore");
        libc::atexit(print_counts);
        if let Some(path) = std::env::var_os("ALLOC_API_SAVE_INPUT") {
            let path = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str())).unwrap();
            let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC, 0o644);
            assert!(fd >= 0, "cannot open ALLOC_API_SAVE_INPUT");
            SAVE_FD.store(fd, Ordering::Relaxed);
        }
    }
}

fn save_input(data: &[u8]) {
    let fd = SAVE_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: `fd` is open for writing; `data` is a valid buffer.
        unsafe {
            libc::ftruncate(fd, 0);
            libc::pwrite(fd, data.as_ptr() as *const c_void, data.len(), 0);
        }
    }
}

// ---- the model ----

#[derive(Clone, Copy, Debug)]
struct Obj {
    p: *mut u8,
    size: usize,
    phase: usize,
    /// From a C++ `operator new`: released with the sized `operator delete`.
    cxx: bool,
}

struct Model {
    slots: [Option<Obj>; SLOTS],
    /// Every address returned during this input.
    seen: HashSet<usize>,
    /// The operation being run (for messages and phases); `None` at the final clean-up.
    op: usize,
    current: Option<Op>,
}

impl Model {
    fn fail(&self, msg: std::fmt::Arguments) -> ! {
        match self.current {
            Some(op) => panic!("model violation at operation {} ({op:?}): {msg}", self.op),
            None => panic!("model violation while freeing everything at the end: {msg}"),
        }
    }

    fn phase(&self, slot: usize) -> usize {
        (self.op.wrapping_mul(7919) ^ slot.wrapping_mul(104_729)) % PERIOD
    }

    fn check(&self, o: &Obj, upto: usize, when: &str) {
        // SAFETY: the object is live and at least `upto` bytes long.
        if let Some((i, got, want)) = unsafe { first_difference(o.p, 0, upto, o.phase) } {
            self.fail(format_args!(
                "contents changed {when}: object {:p} of {} bytes, byte {i} is {got:#04x}, expected {want:#04x}",
                o.p, o.size
            ));
        }
    }

    /// Checks a new (or moved) object: alignment, no overlap, usable size, a fresh address.
    fn check_new(&mut self, slot: usize, p: *mut u8, size: usize, align: usize, fresh: bool) {
        let a = p as usize;
        let need = align.max(if size >= 16 { 16 } else { 1 });
        if a % need != 0 {
            self.fail(format_args!("{p:p} ({size} bytes) is not aligned to {need}"));
        }
        let end = a + size.max(1);
        for (i, o) in self.slots.iter().enumerate() {
            if let Some(o) = o {
                let (s, e) = (o.p as usize, o.p as usize + o.size.max(1));
                if i != slot && a < e && s < end {
                    self.fail(format_args!("{p:p} ({size} bytes) overlaps {:p} ({} bytes, slot {i})", o.p, o.size));
                }
            }
        }
        // SAFETY: `p` is a live allocation.
        let us = unsafe { libc::malloc_usable_size(p as *mut c_void) };
        if us != size {
            self.fail(format_args!("malloc_usable_size({p:p}) is {us}, the request was {size}"));
        }
        if fresh && !self.seen.insert(a) {
            self.fail(format_args!("address {p:p} returned twice"));
        }
    }

    /// Records a new object in `slot` (which is empty) and fills it.
    fn put(&mut self, slot: usize, p: *mut u8, size: usize, align: usize) {
        self.check_new(slot, p, size, align, true);
        let phase = self.phase(slot);
        // SAFETY: `p` is a fresh allocation of `size` bytes.
        unsafe { fill(p, 0, size, phase) };
        self.slots[slot] = Some(Obj { p, size, phase, cxx: false });
    }

    fn drop_slot(&mut self, slot: usize) {
        if let Some(o) = self.slots[slot].take() {
            self.check(&o, o.size, "before free");
            set_errno(ERRNO_MARK);
            // SAFETY: a live object of this model, released the way it was allocated.
            unsafe {
                if o.cxx {
                    _ZdlPvm(o.p as *mut c_void, o.size)
                } else {
                    libc::free(o.p as *mut c_void)
                }
            };
            self.errno_kept("free");
        }
    }

    fn errno_kept(&self, call: &str) {
        let e = errno();
        if e != ERRNO_MARK {
            self.fail(format_args!("successful {call} changed errno to {e}"));
        }
    }

    /// The outcome of an allocation call: `ok` (a possible request) must succeed with errno
    /// kept, otherwise fail with `err`.
    fn outcome(&mut self, call: &str, p: *mut u8, ok: bool, err: i32) -> bool {
        let e = errno();
        if ok {
            if p.is_null() {
                self.fail(format_args!("{call} failed (errno {e})"));
            }
            self.errno_kept(call);
            true
        } else {
            if !p.is_null() {
                self.fail(format_args!("{call} succeeded, expected errno {err}"));
            }
            if e != err {
                self.fail(format_args!("{call} failed with errno {e}, expected {err}"));
            }
            false
        }
    }

    fn run(&mut self, op: Op) {
        match op {
            Op::Malloc { slot, size } => {
                let (s, n) = (slot as usize, size.bytes());
                self.drop_slot(s);
                set_errno(ERRNO_MARK);
                // SAFETY: malloc with any size.
                let p = unsafe { libc::malloc(n) } as *mut u8;
                if self.outcome("malloc", p, n <= MAX_REQUEST, libc::ENOMEM) {
                    self.put(s, p, n, 1);
                }
            }
            Op::Calloc { slot, n, size } => {
                let s = slot as usize;
                self.drop_slot(s);
                let h = size.bytes();
                let (count, each) = if h > MAX_REQUEST {
                    match n % 3 {
                        0 => (h, 1),
                        1 => (h / 2 + 1, 2 + n as usize % 3),
                        _ => (usize::MAX / (2 + n as usize % 7) + 1, 2 + n as usize % 7),
                    }
                } else {
                    let count = 1 + n as usize % 8;
                    (count, h / count)
                };
                set_errno(ERRNO_MARK);
                // SAFETY: calloc with any arguments.
                let p = unsafe { libc::calloc(count, each) } as *mut u8;
                if self.outcome("calloc", p, h <= MAX_REQUEST, libc::ENOMEM) {
                    let total = count * each;
                    // SAFETY: a fresh allocation of `total` bytes.
                    if !unsafe { all_zero(p, total) } {
                        self.fail(format_args!("calloc({count}, {each}) memory is not zero"));
                    }
                    self.put(s, p, total, 1);
                }
            }
            Op::Realloc { slot, size } => self.realloc(slot as usize, size.bytes()),
            Op::Free { slot } => {
                let s = slot as usize;
                if self.slots[s].is_some() {
                    self.drop_slot(s);
                } else {
                    set_errno(ERRNO_MARK);
                    // SAFETY: free(NULL) does nothing.
                    unsafe { libc::free(std::ptr::null_mut()) };
                    self.errno_kept("free(NULL)");
                }
            }
            Op::PosixMemalign { slot, align, size } => {
                let (s, a, n) = (slot as usize, align.bytes(), size.bytes());
                self.drop_slot(s);
                let mut out = 0x1234usize as *mut c_void;
                set_errno(ERRNO_MARK);
                // SAFETY: `out` is a valid place for the result.
                let rc = unsafe { libc::posix_memalign(&mut out, a, n) };
                self.errno_kept("posix_memalign (any outcome)");
                let want = if !a.is_power_of_two() || a % std::mem::size_of::<usize>() != 0 {
                    libc::EINVAL
                } else if n > MAX_REQUEST {
                    libc::ENOMEM
                } else {
                    0
                };
                if rc != want {
                    self.fail(format_args!("posix_memalign(align {a}, {n}) returned {rc}, expected {want}"));
                }
                if rc == 0 {
                    self.put(s, out as *mut u8, n, a);
                } else if out as usize != 0x1234 {
                    self.fail(format_args!("failed posix_memalign wrote its result"));
                }
            }
            Op::AlignedAlloc { slot, align, size } => {
                let (s, a, n) = (slot as usize, align.bytes(), size.bytes());
                self.drop_slot(s);
                set_errno(ERRNO_MARK);
                // SAFETY: aligned_alloc with any arguments.
                let p = unsafe { aligned_alloc(a, n) } as *mut u8;
                let (ok, err) =
                    if !a.is_power_of_two() { (false, libc::EINVAL) } else { (n <= MAX_REQUEST, libc::ENOMEM) };
                if self.outcome("aligned_alloc", p, ok, err) {
                    self.put(s, p, n, a);
                }
            }
            Op::Memalign { slot, align, size } => {
                let (s, a, n) = (slot as usize, align.bytes(), size.bytes());
                self.drop_slot(s);
                set_errno(ERRNO_MARK);
                // SAFETY: memalign with any arguments.
                let p = unsafe { memalign(a, n) } as *mut u8;
                // glibc rounds the alignment up to a power of two.
                if self.outcome("memalign", p, n <= MAX_REQUEST, libc::ENOMEM) {
                    self.put(s, p, n, a.max(1).next_power_of_two());
                }
            }
            Op::ReallocArray { slot, n, size } => {
                let h = size.bytes();
                let (count, each) = if h > MAX_REQUEST {
                    (usize::MAX / (2 + n as usize % 7) + 1, 2 + n as usize % 7)
                } else {
                    let count = 1 + n as usize % 8;
                    (count, h / count)
                };
                let ok = h <= MAX_REQUEST;
                let total = if ok { count * each } else { usize::MAX };
                // SAFETY: reallocarray with a live pointer of this model or NULL.
                self.resize(slot as usize, total, ok, |p| unsafe { reallocarray(p, count, each) });
            }
            Op::Valloc { slot, size } => {
                let (s, n) = (slot as usize, size.bytes());
                self.drop_slot(s);
                set_errno(ERRNO_MARK);
                // SAFETY: valloc with any size.
                let p = unsafe { valloc(n) } as *mut u8;
                if self.outcome("valloc", p, n <= MAX_REQUEST, libc::ENOMEM) {
                    self.put(s, p, n, PAGE);
                }
            }
            Op::Pvalloc { slot, size } => {
                let (s, n) = (slot as usize, size.bytes());
                self.drop_slot(s);
                set_errno(ERRNO_MARK);
                // SAFETY: pvalloc with any size.
                let p = unsafe { pvalloc(n) } as *mut u8;
                if self.outcome("pvalloc", p, n <= MAX_REQUEST, libc::ENOMEM) {
                    self.put(s, p, n.max(1).next_multiple_of(PAGE), PAGE);
                }
            }
            Op::NewNothrow { slot, align, size } => {
                let (s, n) = (slot as usize, size.bytes());
                self.drop_slot(s);
                let a = align.map_or(1, |x| 1usize << (x % 23));
                set_errno(ERRNO_MARK);
                // SAFETY: the nothrow operator new with a power-of-two alignment; the nothrow
                // tag is not read.
                let p = unsafe {
                    match align {
                        None => _ZnwmRKSt9nothrow_t(n, std::ptr::null()),
                        Some(_) => _ZnwmSt11align_val_tRKSt9nothrow_t(n, a, std::ptr::null()),
                    }
                } as *mut u8;
                let ok = n <= MAX_REQUEST;
                if ok != !p.is_null() {
                    self.fail(format_args!("operator new (nothrow, {n} bytes, align {a}) returned {p:p}"));
                }
                if ok {
                    self.errno_kept("operator new");
                    self.put(s, p, n, a);
                    self.slots[s].as_mut().unwrap().cxx = true;
                }
            }
            Op::Trim { slot } => {
                // SAFETY: malloc_trim has no preconditions.
                unsafe { libc::malloc_trim(0) };
                for o in self.slots.iter().cycle().skip(slot as usize).take(8).flatten() {
                    self.check(o, o.size, "by malloc_trim");
                }
            }
            Op::UsableSize { slot } => match self.slots[slot as usize] {
                Some(o) => {
                    // SAFETY: a live object.
                    let us = unsafe { libc::malloc_usable_size(o.p as *mut c_void) };
                    if us != o.size {
                        self.fail(format_args!("malloc_usable_size({:p}) is {us}, the request was {}", o.p, o.size));
                    }
                    self.check(&o, o.size, "(usable-size query)");
                }
                None => {
                    // SAFETY: a null pointer is allowed.
                    let us = unsafe { libc::malloc_usable_size(std::ptr::null_mut()) };
                    if us != 0 {
                        self.fail(format_args!("malloc_usable_size(NULL) is {us}"));
                    }
                }
            },
            Op::Verify { slot, rewrite } => {
                let s = slot as usize;
                if let Some(mut o) = self.slots[s] {
                    self.check(&o, o.size, "(verify)");
                    if rewrite {
                        o.phase = self.phase(s);
                        // SAFETY: a live object of `o.size` bytes.
                        unsafe { fill(o.p, 0, o.size, o.phase) };
                        self.slots[s] = Some(o);
                    }
                }
            }
            // Not the last operation: only a check of the object.
            Op::Misuse { slot, .. } => {
                if let Some(o) = self.slots[slot as usize] {
                    self.check(&o, o.size, "(verify)");
                }
            }
        }
    }

    fn realloc(&mut self, s: usize, n: usize) {
        // SAFETY: realloc with a live pointer of this model or NULL.
        self.resize(s, n, n <= MAX_REQUEST, |p| unsafe { libc::realloc(p, n) })
    }

    /// realloc or reallocarray to `n` bytes (`ok`: a possible request).
    fn resize(&mut self, s: usize, n: usize, ok: bool, call: impl Fn(*mut c_void) -> *mut c_void) {
        let Some(o) = self.slots[s] else {
            set_errno(ERRNO_MARK);
            let p = call(std::ptr::null_mut()) as *mut u8;
            if self.outcome("realloc(NULL)", p, ok, libc::ENOMEM) {
                self.put(s, p, n, 1);
            }
            return;
        };
        self.check(&o, o.size, "before realloc");
        set_errno(ERRNO_MARK);
        // After a successful call only the result is used.
        let p = call(o.p as *mut c_void) as *mut u8;
        if n == 0 && ok {
            // glibc: the object is freed and the result is NULL.
            if !p.is_null() {
                self.fail(format_args!("realloc(p, 0) returned {p:p}, not NULL"));
            }
            self.errno_kept("realloc(p, 0)");
            self.slots[s] = None;
            return;
        }
        if !self.outcome("realloc", p, ok, libc::ENOMEM) {
            self.check(&o, o.size, "after a failed realloc");
            return;
        }
        let keep = o.size.min(n);
        let moved = Obj { p, size: n, phase: o.phase, cxx: false };
        self.check(&moved, keep, "by realloc");
        self.slots[s] = None;
        self.check_new(s, p, n, 1, p != o.p);
        // SAFETY: the object now has `n` bytes.
        unsafe { fill(p, keep, n, o.phase) };
        self.slots[s] = Some(moved);
    }

    /// Performs `m` in a forked child and checks how the child died, unless misuse checks
    /// have had their share of the time (then it only checks the object).
    fn misuse(&mut self, m: Misuse) {
        let started = STARTED.get_or_init(Instant::now);
        let spent = MISUSE_NANOS.load(Ordering::Relaxed);
        let share = f64::from_bits(MISUSE_SHARE.load(Ordering::Relaxed));
        if spent > 0 && share < 1.0 && spent as f64 > started.elapsed().as_nanos() as f64 * share {
            MISUSE_SKIPPED.fetch_add(1, Ordering::Relaxed);
            let (Misuse::DoubleFree { slot, .. } | Misuse::InteriorFree { slot, .. } | Misuse::Overflow { slot, .. }) =
                m;
            return self.run(Op::Verify { slot, rewrite: false });
        }
        let t = Instant::now();
        self.fork_misuse(m);
        MISUSE_NANOS.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn fork_misuse(&mut self, m: Misuse) {
        let nth = MISUSE.iter().map(|c| c.load(Ordering::Relaxed)).sum::<u64>() + 1;
        let (slot, kind, idx) = match m {
            Misuse::DoubleFree { slot, .. } => (slot, "double-free", 0),
            Misuse::InteriorFree { slot, .. } => (slot, "invalid-free", 1),
            Misuse::Overflow { slot, .. } => (slot, "heap-buffer-overflow", 2),
        };
        let s = slot as usize;
        let small = self.slots[s].is_none_or(|o| o.size <= 1);
        if small {
            self.drop_slot(s);
            set_errno(ERRNO_MARK);
            // SAFETY: malloc of a small size.
            let p = unsafe { libc::malloc(48) } as *mut u8;
            if !self.outcome("malloc", p, true, 0) {
                unreachable!();
            }
            self.put(s, p, 48, 1);
        }
        let o = self.slots[s].unwrap();
        self.check(&o, o.size, "before the misuse");
        // The fork copies the pool's populated pages: release the free ones first.
        // SAFETY: malloc_trim has no preconditions.
        unsafe { libc::malloc_trim(0) };
        let mut fds = [0; 2];
        // SAFETY: pipe2 and fork with valid arguments. The child only calls the allocator and
        // async-signal-safe functions, and leaves with `_exit` or by the allocator's report.
        let pid = unsafe {
            assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0, "pipe2");
            libc::fork()
        };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: in the child: redirect stderr, restore the default actions (libFuzzer's
            // handlers would take the abort for a crash of the fuzzer), then the misuse.
            unsafe {
                libc::dup2(fds[1], 2);
                for sig in [libc::SIGABRT, libc::SIGSEGV, libc::SIGBUS] {
                    libc::signal(sig, libc::SIG_DFL);
                }
                child_misuse(m, o);
                libc::_exit(99);
            }
        }
        // SAFETY: closing our copy of the write end, then reading the child's stderr until it
        // closes, then reaping it.
        let (text, status) = unsafe {
            libc::close(fds[1]);
            let mut out = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = libc::read(fds[0], buf.as_mut_ptr() as *mut c_void, buf.len());
                if n > 0 {
                    out.extend_from_slice(&buf[..n as usize]);
                } else if n == 0 || errno() != libc::EINTR {
                    break;
                }
            }
            libc::close(fds[0]);
            let mut status = 0;
            while libc::waitpid(pid, &mut status, 0) < 0 && errno() == libc::EINTR {}
            (String::from_utf8_lossy(&out).into_owned(), status)
        };
        let what = format!("misuse check {nth}: {m:?} on {:p} ({} bytes)", o.p, o.size);
        if !(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGABRT) {
            self.fail(format_args!("{what}: the child did not die of SIGABRT (status {status:#x}); stderr:\n{text}"));
        }
        let reports = text.matches("nevermore: ERROR:").count();
        if reports != 1 || !text.contains(&format!("nevermore: ERROR: {kind} on address ")) {
            self.fail(format_args!("{what}: expected exactly one `{kind}` report; stderr:\n{text}"));
        }
        if let Some(l) = text.lines().find(|l| !l.starts_with("==")) {
            self.fail(format_args!("{what}: unexpected output `{l}`; stderr:\n{text}"));
        }
        MISUSE[idx].fetch_add(1, Ordering::Relaxed);
    }
}

/// The misuse itself, in the child.
///
/// # Safety
/// `o` is a live object; the process is the forked child.
unsafe fn child_misuse(m: Misuse, o: Obj) {
    // SAFETY: per the caller; every misuse below is on purpose.
    unsafe {
        match m {
            Misuse::DoubleFree { churn, .. } => {
                libc::free(o.p as *mut c_void);
                // Objects of the same size meanwhile, so that the slot may be reused.
                let mut held = [std::ptr::null_mut::<c_void>(); 64];
                let k = churn as usize % 64;
                for h in held.iter_mut().take(k) {
                    *h = libc::malloc(o.size);
                }
                for h in held.iter().take(k).step_by(2) {
                    libc::free(*h);
                }
                libc::free(o.p as *mut c_void);
            }
            Misuse::InteriorFree { offset, .. } => {
                let off = 1 + offset as usize % (o.size - 1);
                libc::free(o.p.add(off) as *mut c_void);
            }
            Misuse::Overflow { realloc, grow, .. } => {
                let b = o.p.add(o.size);
                b.write_volatile(b.read_volatile() ^ 0x5a);
                if realloc {
                    libc::realloc(o.p as *mut c_void, o.size + 1 + grow as usize % 5000);
                } else {
                    libc::free(o.p as *mut c_void);
                }
            }
        }
    }
}

static START: Once = Once::new();

fuzz_target!(|data: &[u8]| {
    START.call_once(start_up);
    save_input(data);
    // Operations until the input runs out (not `Vec::arbitrary`, which spends a byte per
    // element on whether to go on, so that random inputs would hold two operations on average).
    let mut u = arbitrary::Unstructured::new(data);
    let mut ops = Vec::with_capacity(data.len() / 4);
    while !u.is_empty() {
        match Op::arbitrary(&mut u) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    INPUTS.fetch_add(1, Ordering::Relaxed);
    let mut m = Model { slots: [None; SLOTS], seen: HashSet::new(), op: 0, current: None };
    for (i, &op) in ops.iter().enumerate() {
        m.op = i;
        m.current = Some(op);
        match op.misuse(ops.len()) {
            Some(mu) if i + 1 == ops.len() => m.misuse(mu),
            _ => m.run(op),
        }
    }
    OPS.fetch_add(ops.len() as u64, Ordering::Relaxed);
    m.current = None;
    for s in 0..SLOTS {
        m.drop_slot(s);
    }
});
