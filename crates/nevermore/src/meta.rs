//! Out-of-band metadata memory: a bump allocator over private anonymous chunks that are
//! never reachable from program objects. Blocks are never returned here; the owners of
//! fixed-size blocks (slab slot tables, thread caches) keep their own free lists.

use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::lock::Locked;
use crate::sys;

/// Chunks are this big (lazily committed), but for a sixteenth of `RLIMIT_DATA` when that is
/// smaller (at least 4 MiB): the limit counts a private mapping whole.
const CHUNK: usize = 64 << 20;
const MIN_CHUNK: usize = 4 << 20;

fn chunk() -> usize {
    sys::data_limit().map_or(CHUNK, |l| sys::pow2_floor(l / 16).clamp(MIN_CHUNK, CHUNK))
}

/// Mapped bytes kept past every block: a lock-free reader that pairs a slot table with the
/// wrong class (a span reused under it) reads at most this far past the table's start, and
/// stays in mapped memory (`slab::page_has_live_lane`). At least the biggest slot table.
pub const READ_SLACK: usize = 1 << 20;

/// The current chunk: blocks are cut from `cur` on; the chunk is writable up to `writable`
/// (a `Table`'s way: the rest is charged to the process only once used).
struct Arena {
    cur: usize,
    end: usize,
    writable: usize,
}

static ARENA: Locked<Arena> = Locked::new(Arena { cur: 0, end: 0, writable: 0 });

/// Returns `bytes` of zeroed memory aligned to 64, or null when the system is out of memory.
pub fn alloc(bytes: usize) -> *mut u8 {
    let bytes = sys::round_up(bytes.max(1), 64);
    let mut a = ARENA.lock();
    if a.cur + bytes + READ_SLACK > a.end {
        let len = sys::round_up(bytes + READ_SLACK, chunk());
        let p = map_with(len, sys::map_readable);
        if p.is_null() {
            return ptr::null_mut();
        }
        a.cur = p as usize;
        a.end = p as usize + len;
        a.writable = p as usize;
    }
    let p = a.cur;
    if p + bytes > a.writable {
        let to = sys::round_up(p + bytes, STEP).min(a.end);
        if !sys::make_writable(a.writable as *mut u8, to - a.writable) {
            return ptr::null_mut();
        }
        a.writable = to;
    }
    a.cur += bytes;
    p as *mut u8
}

/// A table reserved whole but charged to the process only as far as it is used: mapped
/// readable (entries never written read as zeroes, from no memory) and made writable from its
/// start, a `STEP` at a time, as its owner asks (`ensure`). Under strict overcommit accounting
/// (`vm.overcommit_memory=2`, which PostgreSQL's documentation recommends) and under
/// `RLIMIT_DATA`, a private writable mapping counts whole however little of it is touched:
/// writable tables sized for a 64 GiB pool charged every process 2.2 GiB, and a few such
/// processes used the system's commit limit up (fork and malloc then fail everywhere).
pub struct Table {
    base: AtomicUsize,
    len: AtomicUsize,
    /// Bytes from the start that are writable.
    ready: AtomicUsize,
}

/// Tables are made writable this much at a time (a system call each; the writable part grows
/// as one mapping).
const STEP: usize = 256 << 10;

impl Table {
    pub const fn new() -> Table {
        Table { base: AtomicUsize::new(0), len: AtomicUsize::new(0), ready: AtomicUsize::new(0) }
    }

    /// Maps the table, `len` bytes, none of them writable yet; null on failure.
    pub fn map(&self, len: usize) -> *mut u8 {
        let p = map_with(len, sys::map_readable);
        self.base.store(p as usize, Ordering::Relaxed);
        self.len.store(if p.is_null() { 0 } else { sys::round_up(len, sys::PAGE) }, Ordering::Relaxed);
        self.ready.store(0, Ordering::Release);
        p
    }

    /// Makes the table's first `bytes` bytes writable (at least); false when the system
    /// refuses, or `bytes` is beyond the table. Owners call it before writing past what they
    /// asked for last; two callers at once only make the same range writable twice.
    #[inline]
    pub fn ensure(&self, bytes: usize) -> bool {
        bytes <= self.ready.load(Ordering::Acquire) || self.grow(bytes)
    }

    #[cold]
    #[inline(never)]
    fn grow(&self, bytes: usize) -> bool {
        let (base, len) = (self.base.load(Ordering::Relaxed), self.len.load(Ordering::Relaxed));
        let ready = self.ready.load(Ordering::Acquire);
        if bytes <= ready {
            return true;
        }
        if base == 0 || bytes > len {
            return false;
        }
        let to = sys::round_up(bytes, STEP).min(len);
        if !sys::make_writable((base + ready) as *mut u8, to - ready) {
            return false;
        }
        self.ready.fetch_max(to, Ordering::Release);
        true
    }
}

/// Most metadata mappings remembered for `range_from`; later ones are not (a sweep then reads
/// them, which costs time but is not wrong).
const MAX_RANGES: usize = 256;
static RANGES: [AtomicUsize; 2 * MAX_RANGES] = [const { AtomicUsize::new(0) }; 2 * MAX_RANGES];
static NRANGES: AtomicUsize = AtomicUsize::new(0);

/// Maps `len` bytes of zeroed private memory for metadata (lazily committed), and remembers
/// the range: metadata never holds pointers the program uses, so a sweep skips it (`sweep`).
/// Returns null on failure.
pub fn map(len: usize) -> *mut u8 {
    map_with(len, sys::map_meta)
}

/// `map` with the mapping made by `how`.
fn map_with(len: usize, how: fn(usize) -> *mut u8) -> *mut u8 {
    let p = how(len);
    if !p.is_null() {
        let k = NRANGES.fetch_add(1, Ordering::AcqRel);
        if k < MAX_RANGES {
            RANGES[2 * k + 1].store(p as usize + sys::round_up(len, sys::PAGE), Ordering::Relaxed);
            RANGES[2 * k].store(p as usize, Ordering::Release);
        }
    }
    p
}

/// Unmaps a range `map` returned, and forgets it (the address may serve the program next).
pub fn unmap(p: *mut u8, len: usize) {
    let n = NRANGES.load(Ordering::Acquire).min(MAX_RANGES);
    for k in 0..n {
        if RANGES[2 * k].load(Ordering::Acquire) == p as usize {
            RANGES[2 * k].store(0, Ordering::Release);
        }
    }
    sys::unmap(p, len);
}

/// The remembered metadata range holding `addr`, as (start, end), or else the start of the
/// first one above it (as `(start, start)`); None when no range lies at or above `addr`.
pub fn range_from(addr: usize) -> Option<(usize, usize)> {
    let n = NRANGES.load(Ordering::Acquire).min(MAX_RANGES);
    let mut next: Option<usize> = None;
    for k in 0..n {
        let start = RANGES[2 * k].load(Ordering::Acquire);
        let end = RANGES[2 * k + 1].load(Ordering::Relaxed);
        if start == 0 {
            continue;
        }
        if start <= addr && addr < end {
            return Some((start, end));
        }
        if start > addr && next.is_none_or(|s| start < s) {
            next = Some(start);
        }
    }
    next.map(|s| (s, s))
}

/// The lock, for the fork handlers.
pub fn raw_lock() -> &'static crate::lock::RawMutex {
    ARENA.raw()
}
