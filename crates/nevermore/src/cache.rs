//! Per-thread caches. A thread allocates small objects from cursors over lanes issued to it
//! (no lock, no atomic read-modify-write), and collects the alias pages that died into a
//! revocation batch, which it revokes in one sorted, merged call once the batch is full or old
//! (prevent mode); while several threads fill batches, they go to a shared stage and are
//! revoked together (see `STAGE_BATCHES`); in detect mode, and for threads that are exiting,
//! each death is revoked at once. A slot freed by another thread needs no special path: the
//! lane's live count is atomic. Caches live in out-of-band metadata memory and are recycled
//! when their thread exits.

use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::alias::{self, Range};
use crate::lock::Locked;
use crate::pool::{self, POOL};
use crate::slab::{self, Bin, Lane, CLASSES, NCLASS};
use crate::sys::{PAGE, PAGE_SHIFT};
use crate::{meta, stats, tls};

/// Revocations a thread collects before it revokes them together. Bigger batches merge into
/// fewer ranges (each costs a TLB flush on every CPU running the process), and hold as many
/// dead pages per thread a little longer: `BATCH_MIN` units, and up to `BATCH_MAX` in a heap of
/// at least 32 pages in use per unit of batch (where those pages are at most 1/32 of it).
const BATCH_MIN: usize = 512;
const BATCH_MAX: usize = 1024;
/// ... or once the oldest has waited this long.
const MAX_DELAY_NS: u64 = 20_000_000;

/// While two or more threads fill batches (two batches came within `MAX_DELAY_NS`), they pass
/// on half batches to a shared stage, revoked in one call once it holds this many full batches
/// (or its oldest unit waited `MAX_DELAY_NS`): the dead pages of threads that allocate side by
/// side from the same slabs interleave in the address space, and merge into fewer ranges only
/// when revoked together (every range costs a TLB-flush interrupt on each other CPU). About as
/// many dead pages wait in all as when every thread revoked its own batches.
const STAGE_BATCHES: usize = 2;
/// Most units the stage holds.
const STAGE_MAX: usize = STAGE_BATCHES * BATCH_MAX;

/// Units of several threads' batches waiting to be revoked together; its arrays are taken from
/// metadata memory on first use.
struct Stage {
    units: *mut Pending,
    ranges: *mut Range,
    n: usize,
    oldest_ns: u64,
    /// The cache whose batch came last, and when.
    last: usize,
    last_ns: u64,
    /// Batches go on the stage until then: two threads' batches came within `MAX_DELAY_NS`.
    /// (A thread alone, its others idle, revokes its own batches as they fill.)
    together_until: u64,
}

// SAFETY: reached only through its lock.
unsafe impl Send for Stage {}

static STAGE: Locked<Stage> = Locked::new(Stage {
    units: ptr::null_mut(),
    ranges: ptr::null_mut(),
    n: 0,
    oldest_ns: 0,
    last: 0,
    last_ns: 0,
    together_until: 0,
});
/// Units on the stage (a copy of `Stage::n` read without the lock).
static STAGED: AtomicUsize = AtomicUsize::new(0);
/// Set while batches go on the stage: threads then pass on half batches, so that as many dead
/// pages wait in all (in the threads' batches and on the stage) as without the stage.
static TOGETHER: AtomicBool = AtomicBool::new(false);
/// Caches of running threads.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Alias pages in all threads' batches (not counting the stage), as their owners last counted
/// them: at a batch's first unit and every 16th (with the clock), not at every unit, which
/// made this a cache line that every thread's frees wrote. Zero exactly when every batch is
/// empty.
static PENDING_PAGES: AtomicUsize = AtomicUsize::new(0);
/// Most alias pages one thread's batch holds: page objects are up to 32 pages each, and
/// `BATCH_MAX` of them would keep 128 MiB from reuse.
const MAX_BATCH_PAGES: usize = 4 * BATCH_MAX;
/// While threads fill batches together, all of their batches hold about this many units at
/// most: each passes its batch on to the stage at this share of it (at least 16 units, at most
/// `BATCH_MIN / 2`). With half batches whatever the number of threads, 256 threads allocating
/// page objects side by side kept 490–620 MiB of memory for 32 MiB of live objects
/// (`tests/c/held.c many 256`).
const TOGETHER_UNITS: usize = 2 * BATCH_MAX;
/// How often a thread looks for other threads' batches (and the stage) that waited longer
/// than `MAX_DELAY_NS` (`reap_if_due`).
const REAP_EVERY_NS: u64 = MAX_DELAY_NS / 2;
static NEXT_REAP: AtomicU64 = AtomicU64::new(0);
/// `Cache::busy`: free, or held by the cache's owner or by another thread revoking its batch.
const FREE: u32 = 0;
const OWNER: u32 = 1;
const REAPER: u32 = 2;

/// A dead alias unit waiting for revocation.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Pending {
    pub addr: usize,
    pub npages: u32,
    pub epoch: u32,
    pub span: u32,
    /// The lane (small objects) or null (a page object's run).
    pub lane: *const Lane,
}

impl Pending {
    /// The alias range the unit covers.
    fn range(&self) -> Range {
        Range { addr: self.addr, len: (self.npages as usize) << PAGE_SHIFT }
    }
}

#[repr(C)]
pub struct Cache {
    /// The thread's newest small allocation (0: none), its size entry, and the revocation
    /// batches begun before it was handed out (see `heap::usable_size`).
    pub last: AtomicUsize,
    pub last_entry: AtomicPtr<AtomicU16>,
    pub last_stamp: AtomicU64,
    pub bins: [Bin; NCLASS],
    next: *mut Cache,
    pub mallocs: AtomicU64,
    pub frees: AtomicU64,
    pub alloc_bytes: AtomicU64,
    pub free_bytes: AtomicU64,
    /// Slot bytes (class sizes) of small objects freed in lanes that stay live: the most the
    /// dead bytes sweeps count as pinned can have grown by (`sweep::census_futile`).
    pub pinned_bytes: AtomicU64,
    /// The owner's thread id once asked for (0 before): detect mode records it with every
    /// allocation and free, and a `gettid` system call each time cost ~4 % of its time.
    pub tid: u32,
    /// Guards the batch (`npending` and the fields after it): the owner holds it while it adds
    /// to its batch or revokes it, and another thread while it revokes a batch that waited too
    /// long (`reap_if_due`: the owner went idle).
    busy: AtomicU32,
    npending: usize,
    /// Alias pages of the batch, and how many of them `PENDING_PAGES` counts.
    pending_pages: usize,
    counted_pages: usize,
    oldest_ns: u64,
    /// Units at which the current batch is revoked (set when it reaches `BATCH_MIN`).
    batch: usize,
    /// The batch. It and `ranges` come last: a new cache zeroes only the fields before them,
    /// and their pages are touched only once a batch grows that large.
    pending: [Pending; BATCH_MAX],
    /// `flush`'s ranges: here rather than on the stack, which may be a small signal stack.
    ranges: [Range; BATCH_MAX],
}

/// Bytes of a cache that a new or recycled one must have zeroed.
const CACHE_HEAD: usize = core::mem::offset_of!(Cache, pending);

impl Cache {
    /// Takes the batch for its owner (waiting while another thread revokes it); false when
    /// the owner holds it already: a call from inside the allocator on this thread.
    fn hold(&self) -> bool {
        loop {
            match self.busy.compare_exchange(FREE, OWNER, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(OWNER) => return false,
                Err(_) => core::hint::spin_loop(),
            }
        }
    }

    fn release(&self) {
        self.busy.store(FREE, Ordering::Release);
    }

    /// Owner-only counter bump: a relaxed load and store, no locked instruction.
    #[inline]
    pub fn count(c: &AtomicU64, n: u64) {
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }
}

struct List {
    /// Caches of running threads.
    live: *mut Cache,
    /// Recycled caches.
    free: *mut Cache,
    /// Counters of recycled caches.
    retired: Totals,
}

// SAFETY: reached only through its lock.
unsafe impl Send for List {}

static LIST: Locked<List> = Locked::new(List { live: ptr::null_mut(), free: ptr::null_mut(), retired: Totals::ZERO });

#[derive(Clone, Copy, Default)]
pub struct Totals {
    pub mallocs: u64,
    pub frees: u64,
    pub alloc_bytes: u64,
    pub free_bytes: u64,
    pub pinned_bytes: u64,
}

impl Totals {
    const ZERO: Totals = Totals { mallocs: 0, frees: 0, alloc_bytes: 0, free_bytes: 0, pinned_bytes: 0 };

    pub fn live_bytes(&self) -> u64 {
        self.alloc_bytes.saturating_sub(self.free_bytes)
    }

    fn add(&mut self, c: &Cache) {
        self.mallocs += c.mallocs.load(Ordering::Relaxed);
        self.frees += c.frees.load(Ordering::Relaxed);
        self.alloc_bytes += c.alloc_bytes.load(Ordering::Relaxed);
        self.free_bytes += c.free_bytes.load(Ordering::Relaxed);
        self.pinned_bytes += c.pinned_bytes.load(Ordering::Relaxed);
    }
}

/// Creates this thread's cache. Returns null when out of metadata memory.
pub fn create() -> *mut Cache {
    let mut l = LIST.lock();
    let c = if !l.free.is_null() {
        let c = l.free;
        // SAFETY: `c` is a recycled cache owned by the list.
        l.free = unsafe { (*c).next };
        c
    } else {
        let c = meta::alloc(core::mem::size_of::<Cache>()) as *mut Cache;
        if c.is_null() {
            return c;
        }
        c
    };
    // SAFETY: `c` is unused cache memory; all-zero is a valid empty cache (the batch arrays
    // after `CACHE_HEAD` are only read up to `npending`, which is zero).
    unsafe {
        ptr::write_bytes(c as *mut u8, 0, CACHE_HEAD);
        (*c).next = l.live;
    }
    l.live = c;
    LIVE.fetch_add(1, Ordering::Relaxed);
    drop(l);
    stats::add(&stats::THREADS, 1);
    c
}

/// Takes the next slot of class `ci` from the bin, refilling it when empty, and returns it
/// with its size entry, which is set to `size`; (0, null) when out of memory.
#[inline(always)]
pub fn take(bin: &mut Bin, ci: usize, size: usize) -> (usize, *const AtomicU16) {
    if bin.n == 0 && !refill(bin, ci) {
        return (0, ptr::null());
    }
    let c = &mut bin.cur[bin.n as usize - 1];
    let p = c.next;
    let entry = c.size_at;
    // SAFETY: `size_at` points at this slot's entry in its slab's size table.
    unsafe { (*entry).store(size as u16, Ordering::Release) };
    c.next += CLASSES[ci].size as usize;
    // SAFETY: the next slot's entry is `pages` entries further (or one past the lane's end,
    // never dereferenced then).
    c.size_at = unsafe { c.size_at.add(CLASSES[ci].pages as usize) };
    if c.next == c.end {
        bin.n -= 1;
    }
    (p, entry)
}

/// Fills an empty bin with freshly issued lanes (or reclaimed slots); false when out of memory.
#[inline(never)]
fn refill(bin: &mut Bin, ci: usize) -> bool {
    if crate::heap::guard_all() {
        // Every object is a page object (`heap::guard_all`).
        return false;
    }
    crate::sweep::maybe();
    crate::stats::maybe_periodic();
    if LIVE.load(Ordering::Relaxed) > 1 || STAGED.load(Ordering::Relaxed) > 0 {
        // A thread that only allocates meets the stale batches of idle ones here.
        reap_if_due(ptr::null_mut());
    }
    // A thread's first refill of a class takes one lane, and each next one twice as many, up
    // to 16 (one per page of a slab, installed in one call): 1 000 threads that allocated an
    // object of each of 8 sizes took up to 16 pages per size and thread, 267 MiB of RSS against
    // glibc's 13 MiB (`tests/c/held.c threads 1000`; 59 MiB now).
    let want = (bin.fill as usize).clamp(1, bin.cur.len());
    let got = slab::refill(ci, &mut bin.cur[..want]);
    if got == 0 {
        return false;
    }
    // Hand out the lowest addresses first: keep the first cursor on top.
    bin.cur[..got].reverse();
    bin.n = got as u32;
    bin.fill = (want * 2).min(bin.cur.len()) as u32;
    true
}

/// Takes one slot without a cache (exiting threads): the rest of the lane dies at once.
pub fn take_uncached(ci: usize, size: usize) -> usize {
    let mut bin = Bin { n: 0, fill: 0, cur: [slab::Cursor::EMPTY; 16] };
    let (p, _) = take(&mut bin, ci, size);
    kill_bin(ptr::null_mut(), ci, &mut bin);
    p
}

/// A dead alias unit: revoke it now (detect mode, no cache) or batch it.
pub fn retire_unit(c: *mut Cache, u: Pending) {
    if c.is_null() || crate::detect() {
        alias::revoke(&mut [u.range()]);
        complete(&u);
        return;
    }
    // SAFETY: `c` is the calling thread's own cache.
    let cache = unsafe { &mut *c };
    if !cache.hold() {
        alias::revoke(&mut [u.range()]);
        complete(&u);
        return;
    }
    let tick = cache.npending == 0 || cache.npending % 16 == 0;
    let now = if tick { crate::sys::now_ns() } else { 0 };
    if cache.npending == 0 {
        cache.oldest_ns = now;
    }
    cache.pending[cache.npending] = u;
    cache.npending += 1;
    cache.pending_pages += u.npages as usize;
    if tick {
        PENDING_PAGES.fetch_add(cache.pending_pages - cache.counted_pages, Ordering::Relaxed);
        cache.counted_pages = cache.pending_pages;
    }
    if cache.npending == BATCH_MIN {
        // The heap's size without the dead pages that batches hold: counting them, many
        // threads' batches made each other bigger (`held.c many 256`: 274–319 MiB instead of
        // 142–189).
        let in_use = (POOL.stats().0.pages_in_use as usize).saturating_sub(PENDING_PAGES.load(Ordering::Relaxed));
        cache.batch = (in_use / 32).clamp(BATCH_MIN, BATCH_MAX);
    }
    let full = if TOGETHER.load(Ordering::Relaxed) {
        cache.npending >= (TOGETHER_UNITS / LIVE.load(Ordering::Relaxed).max(1)).clamp(16, BATCH_MIN / 2)
    } else {
        cache.npending >= BATCH_MIN && cache.npending >= cache.batch
    };
    let due = full
        || cache.pending_pages >= MAX_BATCH_PAGES
        || (now != 0 && now.wrapping_sub(cache.oldest_ns) > MAX_DELAY_NS);
    if due {
        flush_held(cache);
    }
    cache.release();
    if due {
        reap_if_due(c);
    }
}

/// Revokes every pending unit of `cache` (the calling thread's own) in one batch, then makes
/// their memory reusable; with other threads running, the batch goes to the shared stage
/// instead (see `STAGE_BATCHES`).
pub fn flush(cache: &mut Cache) {
    if !cache.hold() {
        return;
    }
    flush_held(cache);
    cache.release();
}

/// `flush` with the batch held.
fn flush_held(cache: &mut Cache) {
    if cache.npending == 0 {
        return;
    }
    let staged = (LIVE.load(Ordering::Relaxed) > 1 || STAGED.load(Ordering::Relaxed) > 0) && stage(cache);
    if !staged {
        revoke_batch(cache);
    }
    POOL.decay_if_due();
    slab::decay_idle_if_due();
}

/// Revokes the batch of `cache` (held) in one call, then makes its memory reusable.
fn revoke_batch(cache: &mut Cache) {
    let n = cache.npending;
    revoke_units(&cache.pending[..n], &mut cache.ranges);
    // Emptied before the units complete: a fork meanwhile leaves the rest to the parent
    // rather than complete them twice.
    empty_batch(cache);
    for p in &cache.pending[..n] {
        complete(p);
    }
}

/// The units of the batch of `cache` (held) left it (revoked, staged or completed).
fn empty_batch(cache: &mut Cache) {
    PENDING_PAGES.fetch_sub(cache.counted_pages, Ordering::Relaxed);
    cache.npending = 0;
    cache.pending_pages = 0;
    cache.counted_pages = 0;
}

/// Revokes, when due, what waited longer than `MAX_DELAY_NS`: the stage, and the batches of
/// other threads than `me` (null: any thread; those that stopped freeing: idle in a pool, blocked). A batch is
/// checked for its age only when its owner adds to it, so the dead memory of a thread gone
/// idle waited for ever: 8 threads that freed 8 MiB each and went idle kept 64 MiB mapped and
/// out of reach (`tests/c/held.c idle`). Call with no lock held.
fn reap_if_due(me: *mut Cache) {
    let now = crate::sys::now_ns();
    let next = NEXT_REAP.load(Ordering::Relaxed);
    if now < next
        || NEXT_REAP.compare_exchange(next, now + REAP_EVERY_NS, Ordering::Relaxed, Ordering::Relaxed).is_err()
    {
        return;
    }
    if STAGED.load(Ordering::Relaxed) > 0 {
        let mut st = STAGE.lock();
        if st.n > 0 && now.wrapping_sub(st.oldest_ns) > MAX_DELAY_NS {
            revoke_stage(&mut st);
            STAGED.store(0, Ordering::Relaxed);
        }
    }
    if LIVE.load(Ordering::Relaxed) < 2 || PENDING_PAGES.load(Ordering::Relaxed) == 0 {
        return;
    }
    let l = LIST.lock();
    let mut c = l.live;
    while !c.is_null() {
        // SAFETY: caches on the live list stay allocated while the list's lock is held. Their
        // batches are touched only with `busy` taken; `npending` and `oldest_ns` are read
        // before, racing with the owner, and a stale value only skips a batch until next time.
        unsafe {
            if c != me
                && ptr::read_volatile(&(*c).npending) > 0
                && now.wrapping_sub(ptr::read_volatile(&(*c).oldest_ns)) > MAX_DELAY_NS
                && (*c).busy.compare_exchange(FREE, REAPER, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                let cache = &mut *c;
                if cache.npending > 0 {
                    revoke_batch(cache);
                    stats::add(&stats::BATCHES_REAPED, 1);
                }
                cache.busy.store(FREE, Ordering::Release);
            }
            c = (*c).next;
        }
    }
}

/// Before a fork, outside the allocator: revokes what the forking thread has pending, so that
/// the spans it kept alive wait for the next epoch instead, and the child's copy of the pool
/// leaves their dead contents out (`pool::fork_ranges`).
pub fn flush_before_fork() {
    let scope = crate::reentry::Scope::enter();
    let c = tls::get();
    if !scope.nested() && !c.is_null() && c != tls::EXITED {
        // SAFETY: this thread's own cache, and the thread is in no other allocator call (a
        // fork from a signal handler that interrupted one skips this).
        flush(unsafe { &mut *c });
    }
}

/// Revokes `units` in one sorted, merged call (their ranges are built in `ranges`).
fn revoke_units(units: &[Pending], ranges: &mut [Range]) {
    for (r, p) in ranges.iter_mut().zip(units) {
        *r = p.range();
    }
    alias::revoke(&mut ranges[..units.len()]);
}

/// Moves the batch of `cache` to the stage, and revokes the stage when it holds enough (or its
/// oldest unit waited long enough, or this is the only thread left). False when the batch is
/// better revoked by the caller alone: no other thread's batch came lately and none waits, or
/// the stage has no memory.
fn stage(cache: &mut Cache) -> bool {
    let n = cache.npending;
    let now = crate::sys::now_ns();
    let me = cache as *const Cache as usize;
    let mut st = STAGE.lock();
    if st.last != me && now.wrapping_sub(st.last_ns) < MAX_DELAY_NS {
        st.together_until = now + 4 * MAX_DELAY_NS;
    }
    st.last = me;
    st.last_ns = now;
    let together = now < st.together_until && LIVE.load(Ordering::Relaxed) > 1;
    TOGETHER.store(together, Ordering::Relaxed);
    if !together && st.n == 0 {
        return false;
    }
    if st.units.is_null() {
        let units = meta::alloc(STAGE_MAX * core::mem::size_of::<Pending>()) as *mut Pending;
        let ranges = meta::alloc(STAGE_MAX * core::mem::size_of::<Range>()) as *mut Range;
        if units.is_null() || ranges.is_null() {
            return false;
        }
        st.units = units;
        st.ranges = ranges;
    }
    if st.n + n > STAGE_MAX {
        revoke_stage(&mut st);
    }
    if st.n == 0 {
        st.oldest_ns = now;
    }
    // SAFETY: the stage's array holds STAGE_MAX units and st.n + n <= STAGE_MAX.
    unsafe { ptr::copy_nonoverlapping(cache.pending.as_ptr(), st.units.add(st.n), n) };
    st.n += n;
    empty_batch(cache);
    if !together || st.n >= cache.batch.max(BATCH_MIN) * STAGE_BATCHES || now.wrapping_sub(st.oldest_ns) > MAX_DELAY_NS
    {
        revoke_stage(&mut st);
    }
    STAGED.store(st.n, Ordering::Relaxed);
    true
}

/// Revokes every unit on the stage in one call, then makes their memory reusable.
fn revoke_stage(st: &mut Stage) {
    let n = st.n;
    // SAFETY: both arrays hold STAGE_MAX entries, the first `n` units are staged, and the stage
    // lock (held by the caller) keeps everybody else out of them.
    let (units, ranges) =
        unsafe { (core::slice::from_raw_parts(st.units, n), core::slice::from_raw_parts_mut(st.ranges, n)) };
    revoke_units(units, ranges);
    for p in units {
        complete(p);
    }
    st.n = 0;
    stats::add(&stats::STAGE_REVOCATIONS, 1);
    stats::add(&stats::STAGE_UNITS, n as u64);
}

/// After revocation: the lane becomes ready, or the run goes back to the pool.
fn complete(p: &Pending) {
    let page = alias::decode(p.addr).map_or(0, |(_, page)| page);
    if p.lane.is_null() {
        POOL.free_run_deferred(p.span);
    } else {
        // SAFETY: lane records live as long as their slab's slot table, which is only
        // recycled once every lane is ready again.
        slab::lane_revoked(p.span, unsafe { &*p.lane }, page);
    }
    alias::unit_revoked_at(p.epoch, page, p.npages);
}

/// The unit for the lane that `addr` (an alias inside it) belongs to.
fn lane_unit(addr: usize, lane: *const Lane) -> Pending {
    let page_addr = addr & !(PAGE - 1);
    let (e, page) = alias::decode(page_addr).unwrap_or((0, 0));
    let span = POOL.span_at(POOL.page_addr(page)).map_or(pool::NONE, |(i, _)| i);
    Pending { addr: page_addr, npages: 1, epoch: e, span, lane }
}

/// A dead slot's lane lost its last live slot.
pub fn lane_died(c: *mut Cache, addr: usize, lane: *const Lane) {
    retire_unit(c, lane_unit(addr, lane));
}

/// Drops the unallocated rest of every cursor of `bin` (their slots die unused).
fn kill_bin(c: *mut Cache, ci: usize, bin: &mut Bin) {
    let size = CLASSES[ci].size as usize;
    for k in 0..bin.n as usize {
        let cur = bin.cur[k];
        let rest = ((cur.end - cur.next) / size) as u32;
        // SAFETY: the cursor's lane record is valid while the lane is issued.
        let lane = unsafe { &*cur.lane };
        if rest > 0 && lane.live.fetch_sub(rest, Ordering::AcqRel) == rest {
            lane_died(c, cur.next, cur.lane);
        }
    }
    bin.n = 0;
}

/// Thread-exit path: drop the cursors, revoke what is pending, recycle the cache.
///
/// # Safety
/// `c` must be the exiting thread's own cache.
pub unsafe fn retire(c: *mut Cache) {
    for ci in 0..NCLASS {
        // SAFETY: the caller's own cache.
        kill_bin(c, ci, unsafe { &mut (*c).bins[ci] });
    }
    // SAFETY: the caller's own cache.
    flush(unsafe { &mut *c });
    tls::set(tls::EXITED);
    let mut l = LIST.lock();
    // SAFETY: `c` is on the live list, which the lock protects.
    unsafe { unlink_locked(&mut l, c) };
    LIVE.fetch_sub(1, Ordering::Relaxed);
}

/// # Safety
/// `l` locked (or all locks held across fork); `c` on its live list.
unsafe fn unlink_locked(l: &mut List, c: *mut Cache) {
    let mut at: *mut *mut Cache = &mut l.live;
    // SAFETY: walking the list the lock protects.
    unsafe {
        while !(*at).is_null() {
            if *at == c {
                *at = (*c).next;
                break;
            }
            at = &mut (**at).next;
        }
        l.retired.add(&*c);
        (*c).next = l.free;
    }
    l.free = c;
}

/// Calls `f(class, cursor)` for every cursor of every live thread's cache that still has
/// slots to hand out.
pub fn for_each_cursor(mut f: impl FnMut(usize, &slab::Cursor)) {
    let l = LIST.lock();
    let mut c = l.live;
    while !c.is_null() {
        // SAFETY: caches on the live list stay allocated; their owners are not running (the
        // caller makes sure of it: a single-threaded process, in the allocator).
        unsafe {
            for (ci, bin) in (*c).bins.iter().enumerate() {
                for cur in &bin.cur[..bin.n as usize] {
                    f(ci, cur);
                }
            }
            c = (*c).next;
        }
    }
}

/// Sum of every thread's counters.
pub fn totals() -> Totals {
    let l = LIST.lock();
    let mut t = l.retired;
    let mut c = l.live;
    while !c.is_null() {
        // SAFETY: caches on the live list stay allocated; counters are atomics.
        unsafe {
            t.add(&*c);
            c = (*c).next;
        }
    }
    t
}

pub fn raw_lock() -> &'static crate::lock::RawMutex {
    LIST.raw()
}

/// The stage's lock (taken before the others: a revocation of the stage takes them).
pub fn stage_lock() -> &'static crate::lock::RawMutex {
    STAGE.raw()
}

/// In a forked child. Every cache but `mine` belonged to a thread that does not exist here:
/// their unallocated slots die. Nothing pending is installed in the child (its mirrors are
/// fresh mappings), so every pending unit, ours included, completes without a system call.
///
/// # Safety
/// Only in the fork child handler (single-threaded), after the locks were reset.
pub unsafe fn fork_child(mine: *mut Cache) {
    if !mine.is_null() && mine != tls::EXITED {
        // SAFETY: the forking thread's own cache; the child's thread has its own id.
        unsafe { (*mine).tid = 0 };
    }
    let mut orphans: *mut Cache = ptr::null_mut();
    {
        let mut l = LIST.lock();
        let mut c = l.live;
        l.live = ptr::null_mut();
        while !c.is_null() {
            // SAFETY: walking the (detached) live list, which only this thread can see.
            unsafe {
                let next = (*c).next;
                // A thread that was adding to its batch when the fork came would hold it for
                // ever here.
                (*c).busy.store(FREE, Ordering::Relaxed);
                if c == mine {
                    (*c).next = l.live;
                    l.live = c;
                } else {
                    l.retired.add(&*c);
                    (*c).next = orphans;
                    orphans = c;
                }
                c = next;
            }
        }
    }
    if !orphans.is_null() {
        crate::leak::forked_beside_threads();
    }
    let mut o = orphans;
    while !o.is_null() {
        // SAFETY: orphan caches are ours alone now.
        unsafe {
            // First what was pending: the fork may have caught the thread inside `flush`,
            // with a full batch not yet reset, and killing the bins adds more.
            complete_all(&mut *o);
            for ci in 0..NCLASS {
                kill_bin(o, ci, &mut (*o).bins[ci]);
            }
            complete_all(&mut *o);
            o = (*o).next;
        }
    }
    if !mine.is_null() && mine != tls::EXITED {
        // SAFETY: our own cache.
        complete_all(unsafe { &mut *mine });
    }
    {
        // The stage's units too (the fork waited for any revocation of it to end).
        let mut st = STAGE.lock();
        for i in 0..st.n {
            // SAFETY: the first `n` units of the stage's array are staged.
            complete(unsafe { &*st.units.add(i) });
        }
        st.n = 0;
        STAGED.store(0, Ordering::Relaxed);
    }
    LIVE.store(usize::from(!mine.is_null() && mine != tls::EXITED), Ordering::Relaxed);
    let mut l = LIST.lock();
    let mut o = orphans;
    while !o.is_null() {
        // SAFETY: as above.
        unsafe {
            let next = (*o).next;
            (*o).next = l.free;
            l.free = o;
            o = next;
        }
    }
}

fn complete_all(cache: &mut Cache) {
    let n = cache.npending;
    empty_batch(cache);
    for i in 0..n {
        let p = cache.pending[i];
        complete(&p);
    }
}
