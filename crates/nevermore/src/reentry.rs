//! Calls that re-enter the allocator on a thread that is already inside it: a signal handler
//! that interrupted `malloc`/`free` (or the fault handler) and itself allocates or frees.
//!
//! The ordinary paths take futex locks and update the thread cache without blocking signals
//! (doing so would cost two system calls per call), so a re-entering call must not touch
//! them: it would wait for a lock its own thread holds, or corrupt a cache half-way through an
//! update. Every entry point counts how deep the thread is in a per-thread word (`Scope`);
//! a call that finds itself nested takes the paths of this module instead, which are
//! lock-free and async-signal-safe (atomics and system calls only):
//!
//! - **allocation** comes from a separate one-time arena, reserved on first use: each object
//!   gets fresh pages, is placed at their end with a canary after it and an unmapped guard page
//!   behind, and its address is never handed out again. Freeing it maps its pages `PROT_NONE`,
//!   so a dangling pointer faults (reported as `heap-use-after-free` by the fault handler).
//! - **freeing an ordinary object** checks the pointer and canary and marks the object dead at
//!   once (a second free is a double free at that call), then queues it; the rest (revocation,
//!   returning the slot) is done when the outermost allocator call of any thread ends.
//!
//! Objects of either kind may be used and freed anywhere afterwards, like any other.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::guard::{self, CANARY};
use crate::heap::Obj;
use crate::report::{self, Kind, Object, Report};
use crate::sys::{self, PAGE};
use crate::tls;

/// Marks the calling thread as inside the allocator for the scope's lifetime; the outermost
/// scope finishes the frees that nested calls queued.
pub struct Scope {
    nested: bool,
}

impl Scope {
    #[inline(always)]
    pub fn enter() -> Scope {
        Scope { nested: tls::enter() != 0 }
    }

    /// Whether the thread was already inside the allocator when this scope began.
    #[inline(always)]
    pub fn nested(&self) -> bool {
        self.nested
    }
}

impl Drop for Scope {
    #[inline(always)]
    fn drop(&mut self) {
        if !self.nested && PENDING.load(Ordering::Relaxed) != 0 {
            drain_and_leave();
            return;
        }
        tls::leave();
    }
}

/// The outermost scope's end when `PENDING` is not zero: the queued frees, then the end of
/// the scope, then a pause while a sweep holds the other threads (`PARK`).
#[cold]
#[inline(never)]
fn drain_and_leave() {
    if PENDING.load(Ordering::Relaxed) & !PARK_BIT != 0 {
        drain();
    }
    tls::leave();
    while PARK.load(Ordering::Acquire) != 0 {
        sys::futex_wait(&PARK, 1);
    }
}

// ---- a pause for threads that a sweep found inside the allocator ----

/// Set in `PENDING` (so that the common path's test stays one load) while `PARK` asks threads
/// that leave the allocator to wait.
const PARK_BIT: usize = 1 << (usize::BITS - 1);
/// 1 while a sweep's holder asks threads that leave the allocator to wait (`stop`): one it
/// found inside is let go on, and waits here once outside, instead of entering again.
static PARK: AtomicU32 = AtomicU32::new(0);

/// Asks threads leaving the allocator to wait until `end_park`.
pub fn begin_park() {
    PARK.store(1, Ordering::Release);
    PENDING.fetch_or(PARK_BIT, Ordering::AcqRel);
}

/// Lets the waiting threads go on.
pub fn end_park() {
    PENDING.fetch_and(!PARK_BIT, Ordering::AcqRel);
    PARK.store(0, Ordering::Release);
    sys::futex_wake_all(&PARK);
}

// ---- frees queued by nested calls ----

const QUEUE: usize = 256;

const EMPTY: u32 = 0;
const WRITING: u32 = 1;
const READY: u32 = 2;
const TAKEN: u32 = 3;

struct Queued {
    state: AtomicU32,
    item: UnsafeCell<(usize, Obj, usize)>,
}

// SAFETY: `item` is written only by the thread that moved `state` from EMPTY to WRITING and
// read only by the thread that moved it from READY to TAKEN; the state's Release/Acquire
// orders the accesses.
unsafe impl Sync for Queued {}

static QUEUED: [Queued; QUEUE] =
    [const { Queued { state: AtomicU32::new(EMPTY), item: UnsafeCell::new((0, Obj::Pages { idx: 0 }, 0)) } }; QUEUE];
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// Queues the rest of the free of `obj` (already marked dead). False if the queue is full;
/// then the object's memory stays unused (counted as leaked).
pub fn defer(p: usize, obj: Obj, size: usize) -> bool {
    for q in QUEUED.iter() {
        if q.state.compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            // SAFETY: this thread owns the entry (see `Queued`).
            unsafe { *q.item.get() = (p, obj, size) };
            q.state.store(READY, Ordering::Release);
            PENDING.fetch_add(1, Ordering::Release);
            DEFERRED.fetch_add(1, Ordering::Relaxed);
            return true;
        }
    }
    LEAKED.fetch_add(1, Ordering::Relaxed);
    false
}

#[cold]
#[inline(never)]
fn drain() {
    for q in QUEUED.iter() {
        if q.state.compare_exchange(READY, TAKEN, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            // SAFETY: this thread took the entry (see `Queued`).
            let (p, obj, size) = unsafe { *q.item.get() };
            q.state.store(EMPTY, Ordering::Release);
            PENDING.fetch_sub(1, Ordering::Relaxed);
            crate::heap::finish_free(p, obj, size);
        }
    }
}

// ---- the re-entrant arena ----

/// Address space for nested allocations (reserved on first use, scaled down under
/// `RLIMIT_AS`). It is used once: when it is gone, nested allocations fail with ENOMEM (said
/// once). 64 GiB is some five million small objects (an object, its page rounding and a guard
/// page); a handler that allocated in every one of ~35 000 signals a second landing inside the
/// allocator used 4 GiB up in about 10 s. Unused address space costs nothing but its share of
/// the table (8 bytes per page, touched as it is used).
const ARENA_MAX: usize = 64 << 30;
const ARENA_MIN: usize = 16 << 20;

static BASE: AtomicUsize = AtomicUsize::new(0);
static SAID_FULL: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
static PAGES: AtomicUsize = AtomicUsize::new(0);
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// One word per arena page, for the page holding an object's start: its size, its offset in
/// the page / 16, and its state.
const LIVE: u64 = 1;
const FREED: u64 = 2;

pub static ALLOCS: AtomicU64 = AtomicU64::new(0);
pub static FREES: AtomicU64 = AtomicU64::new(0);
pub static DEFERRED: AtomicU64 = AtomicU64::new(0);
pub static LEAKED: AtomicU64 = AtomicU64::new(0);

fn encode(size: usize, off: usize, state: u64) -> u64 {
    ((size as u64) << 16) | (((off >> 4) as u64) << 8) | state
}

fn entry_size(e: u64) -> usize {
    (e >> 16) as usize
}

fn entry_off(e: u64) -> usize {
    (((e >> 8) & 0xff) << 4) as usize
}

/// The table of the arena at `base` (its first pages), then the object pages.
fn table_bytes(pages: usize) -> usize {
    sys::round_up(pages * 8, PAGE)
}

fn objects(base: usize, pages: usize) -> usize {
    base + table_bytes(pages)
}

fn table(base: usize) -> *const AtomicU64 {
    base as *const AtomicU64
}

/// The arena (base, pages), reserving it on first use.
fn arena() -> Option<(usize, usize)> {
    let base = BASE.load(Ordering::Acquire);
    if base != 0 {
        return Some((base, PAGES.load(Ordering::Relaxed)));
    }
    let len = match sys::as_limit() {
        Some(l) => sys::pow2_floor(l / 64).clamp(ARENA_MIN, ARENA_MAX),
        None => ARENA_MAX,
    };
    let pages = len / PAGE;
    let total = table_bytes(pages) + len;
    let mine = sys::reserve(total);
    if mine.is_null() {
        return None;
    }
    // SAFETY: the table pages lie at the start of our own fresh reservation.
    if unsafe { libc::mprotect(mine as *mut _, table_bytes(pages), libc::PROT_READ | libc::PROT_WRITE) } != 0 {
        sys::unmap(mine, total);
        return None;
    }
    // PAGES is the same value for every thread that gets here; store it before publishing.
    PAGES.store(pages, Ordering::Relaxed);
    match BASE.compare_exchange(0, mine as usize, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Some((mine as usize, pages)),
        Err(theirs) => {
            sys::unmap(mine, total);
            Some((theirs, PAGES.load(Ordering::Relaxed)))
        }
    }
}

/// Whether `p` lies in the arena's object pages.
#[inline]
pub fn owns(p: usize) -> bool {
    let base = BASE.load(Ordering::Acquire);
    if base == 0 {
        return false;
    }
    let pages = PAGES.load(Ordering::Relaxed);
    let lo = objects(base, pages);
    p >= lo && p < lo + pages * PAGE
}

/// A nested allocation of `size` bytes aligned to `align` (a power of two); always zeroed.
pub fn malloc(size: usize, align: usize) -> *mut u8 {
    let p = alloc(size, align.max(16));
    if p == 0 {
        sys::set_errno(libc::ENOMEM);
    }
    p as *mut u8
}

fn alloc(size: usize, align: usize) -> usize {
    let Some((base, pages)) = arena() else { return 0 };
    let area = pages * PAGE;
    let Some(need) = size.checked_add(CANARY).filter(|&n| n <= area / 4 && align <= area / 4) else {
        return 0;
    };
    // Object pages, slack for the alignment, and one guard page behind.
    let run = sys::round_up(need, PAGE) + if align > PAGE { align } else { 0 };
    let npages = run / PAGE + 1;
    let first = NEXT.fetch_add(npages, Ordering::Relaxed);
    if first + npages > pages {
        if !SAID_FULL.swap(true, Ordering::Relaxed) {
            report::say(format_args!(
                "the arena for allocations inside signal handlers that interrupted the allocator ({} MiB) \
                 is used up: such allocations fail with ENOMEM from now on",
                area >> 20
            ));
        }
        return 0;
    }
    let start = objects(base, pages) + first * PAGE;
    // SAFETY: the run lies in our own reservation and was never handed out (NEXT only grows).
    let mapped = unsafe {
        libc::mmap(
            start as *mut _,
            run,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if mapped == libc::MAP_FAILED {
        return 0;
    }
    // At the end of the run (so that an overflow soon reaches the guard page), aligned.
    let p = (start + run - need) & !(align - 1);
    // SAFETY: `p + size .. p + need` lies in the run just mapped.
    unsafe { guard::arm(p, size) };
    let idx = (p - objects(base, pages)) / PAGE;
    // SAFETY: `idx` < pages: the table has one word per arena page.
    unsafe { &*table(base).add(idx) }.store(encode(size, p & (PAGE - 1), LIVE), Ordering::Release);
    ALLOCS.fetch_add(1, Ordering::Relaxed);
    p
}

/// The table word of the object that starts at `p` (which `owns` accepted), with its index.
fn lookup(p: usize) -> (&'static AtomicU64, u64) {
    let base = BASE.load(Ordering::Acquire);
    let pages = PAGES.load(Ordering::Relaxed);
    let idx = (p - objects(base, pages)) / PAGE;
    // SAFETY: `owns(p)` holds, so `idx` < pages.
    let w = unsafe { &*table(base).add(idx) };
    (w, w.load(Ordering::Acquire))
}

/// Resolves `p` (in the arena) to the size of the live object starting there.
pub fn resolve(p: usize, op: &'static str, bad: Kind) -> Result<usize, Report> {
    let (_, e) = lookup(p);
    let rep = |kind, what, object| Report { kind, addr: p, op, what, object, claimed: None, pointer: None };
    let at_start = e != 0 && entry_off(e) == p & (PAGE - 1);
    match e & 3 {
        LIVE if at_start => Ok(entry_size(e)),
        FREED if at_start => Err(rep(crate::heap::freed_kind(bad), "the object was already freed", None)),
        _ => match object_around(p) {
            Some((start, size, LIVE)) => {
                Err(rep(bad, "the address points inside an object, not at its start", Some(Object { start, size })))
            }
            _ => Err(rep(bad, "the address was never returned by an allocation", None)),
        },
    }
}

/// Frees the arena object at `p`; reports and dies if `p` is not a live object's start or its
/// canary was overwritten.
pub fn free(p: usize, claimed: Option<usize>, op: &'static str) {
    let size = crate::heap::live_size(p, op);
    crate::heap::check_claim(p, size, claimed, op);
    let (w, e) = lookup(p);
    if w.compare_exchange(e, (e & !3) | FREED, Ordering::AcqRel, Ordering::Acquire).is_err() {
        crate::heap::racing_free(p, size, op);
    }
    let lo = p & !(PAGE - 1);
    let hi = sys::round_up(p + size + CANARY, PAGE);
    // Dropping the pages and keeping the range reserved: a dangling pointer faults, and the
    // addresses are never mapped again.
    sys::rereserve(lo as *mut u8, hi - lo);
    FREES.fetch_add(1, Ordering::Relaxed);
}

/// The object whose pages hold `addr`, if any: (start, size, state). Walks the table back from
/// `addr`'s page to the nearest object start (only on report and fault paths).
pub fn object_around(addr: usize) -> Option<(usize, usize, u64)> {
    let base = BASE.load(Ordering::Acquire);
    if base == 0 || !owns(addr) {
        return None;
    }
    let pages = PAGES.load(Ordering::Relaxed);
    let lo = objects(base, pages);
    let mut idx = (addr - lo) / PAGE;
    loop {
        // SAFETY: `idx` < pages.
        let e = unsafe { &*table(base).add(idx) }.load(Ordering::Acquire);
        if e != 0 {
            let start = lo + idx * PAGE + entry_off(e);
            let size = entry_size(e);
            // Its pages run to the guard page after the canary.
            let end = sys::round_up(start + size + CANARY, PAGE) + PAGE;
            return (addr < end).then_some((start, size, e & 3));
        }
        if idx == 0 {
            return None;
        }
        idx -= 1;
    }
}

/// A fault at `addr` in the arena, as a report.
pub fn fault(addr: usize, op: &'static str) -> Report {
    let rep = |kind, what, object| Report { kind, addr, op, what, object, claimed: None, pointer: None };
    match object_around(addr) {
        Some((start, size, FREED)) => rep(Kind::HeapUseAfterFree, "the object was freed", Some(Object { start, size })),
        Some((start, size, _)) if addr >= start + size => rep(
            Kind::HeapBufferOverflow,
            "the access is past the end of the object (a guard page)",
            Some(Object { start, size }),
        ),
        _ => rep(Kind::WildAccess, "the address was never returned by an allocation", None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `addr` lies in a readable and writable mapping.
    fn page_mapped(addr: usize) -> bool {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines().any(|l| {
            let (range, rest) = l.split_once(' ').unwrap();
            let (lo, hi) = range.split_once('-').unwrap();
            let (lo, hi) = (usize::from_str_radix(lo, 16).unwrap(), usize::from_str_radix(hi, 16).unwrap());
            (lo..hi).contains(&addr) && rest.starts_with("rw")
        })
    }

    #[test]
    fn depth_counts_nested_scopes() {
        let a = Scope::enter();
        assert!(!a.nested());
        {
            let b = Scope::enter();
            assert!(b.nested());
            let c = Scope::enter();
            assert!(c.nested());
        }
        drop(a);
        assert!(!Scope::enter().nested());
    }

    #[test]
    fn objects_are_fresh_aligned_and_end_before_a_guard_page() {
        let _secret = crate::guard::TEST_SECRET.lock().unwrap();
        let mut seen = std::collections::HashSet::new();
        for (size, align) in [(0, 16), (1, 16), (24, 16), (4088, 16), (4089, 16), (70000, 16), (100, 8192), (5, 64)] {
            let p = malloc(size, align) as usize;
            assert!(p != 0 && owns(p), "size {size}");
            assert_eq!(p % align.max(16), 0);
            assert!(seen.insert(p), "address handed out twice");
            assert_eq!(resolve(p, "free", Kind::InvalidFree).unwrap(), size);
            // Zeroed, writable, and the page after the canary is not mapped.
            // SAFETY: the object holds `size` bytes.
            let bytes = unsafe { core::slice::from_raw_parts_mut(p as *mut u8, size) };
            assert!(bytes.iter().all(|&b| b == 0));
            bytes.fill(0xa5);
            // SAFETY: the canary follows the object.
            assert!(unsafe { guard::intact_via(p, size, p) });
            assert!(!page_mapped(sys::round_up(p + size + CANARY, PAGE)));
            assert_eq!(object_around(p + size / 2), Some((p, size, LIVE)));
            free(p, None, "free");
            assert!(!page_mapped(p), "freed pages stay accessible");
            assert_eq!(resolve(p, "free", Kind::InvalidFree).unwrap_err().kind, Kind::DoubleFree);
            assert_eq!(fault(p, "READ").kind, Kind::HeapUseAfterFree);
        }
    }

    #[test]
    fn interior_and_foreign_pointers_are_refused() {
        let p = malloc(300, 16) as usize;
        let r = resolve(p + 16, "free", Kind::InvalidFree).unwrap_err();
        assert_eq!(r.kind, Kind::InvalidFree);
        assert_eq!(r.object.map(|o| (o.start, o.size)), Some((p, 300)));
        assert_eq!(fault(sys::round_up(p + 300 + CANARY, PAGE), "WRITE").kind, Kind::HeapBufferOverflow);
        let x = 0u64;
        assert!(!owns(&x as *const u64 as usize));
        free(p, None, "free");
    }

    #[test]
    fn impossible_sizes_fail_with_enomem() {
        for size in [usize::MAX, usize::MAX - 4096, 1 << 47] {
            assert!(malloc(size, 16).is_null());
            assert_eq!(sys::errno(), libc::ENOMEM);
        }
    }
}
