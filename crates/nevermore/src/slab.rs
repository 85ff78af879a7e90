//! Small objects: size classes, striped slabs, the central per-class free lists and the
//! per-thread caches.
//!
//! A slab of class c is `k` consecutive pool pages; each page holds `spp` slots of the class
//! size. Slot i lives on page `i % k` at position `i / k`, so slots with consecutive indices
//! lie on *different* pages: a refill that takes the lowest free indices takes one slot from
//! each of k consecutive pages (a *striped* refill), which is the layout the alias engine
//! installs with one `UFFDIO_CONTINUE` per refill.
//!
//! Slots are handed out through aliases (see `alias`), a *lane* at a time: the positions of a
//! page are split into `lanes` equal lanes, and a lane is issued whole, under one alias page of
//! the current epoch. Its slots are then allocated one after another from a thread's cache;
//! a freed slot is not reused until every slot of its lane is dead and the lane's alias page
//! has been revoked — after that the lane is ready again, to be issued under a newer alias.
//! One lane per page (prevent mode) costs one install and one revocation per page of objects;
//! one slot per lane (detect mode) gives every object its own alias page.
//!
//! All slot state is out of band: a table of requested sizes (`FREE_SLOT` for a slot never
//! used, the `FREED` bit set once its object is freed) and the lane records (issuing epoch,
//! slots not yet dead). `free` sets `FREED` with a compare-and-swap before anything else
//! changes, which detects double frees (also concurrent ones); a pointer into a lane that was since revoked or
//! reissued is recognised by the lane's epoch.

use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};

use crate::guard::CANARY;
use crate::lock::Locked;
use crate::pool::{self, POOL};
use crate::sys::PAGE;
use crate::{alias, meta, stats};

/// Slot sizes. Multiples of 16 (the malloc alignment); above 256 they are chosen to fill a
/// 4 KiB page with little waste.
pub const SIZES: [u32; 25] = [
    16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 192, 224, 256, 288, 320, 368, 400, 448, 512, 576, 672, 816, 1024, 1360,
    2048,
];
pub const NCLASS: usize = SIZES.len();
/// Largest slot; bigger requests (object + canary) are page objects.
pub const MAX_SLOT: usize = 2048;
/// Requested sizes up to this fit a slot together with their canary.
pub const MAX_SMALL: usize = MAX_SLOT - CANARY;

/// Size table entry of a slot never allocated since its slab was made.
pub const FREE_SLOT: u16 = u16::MAX;
/// Set in a size table entry once the slot's object is freed (the rest keeps its size, for
/// reports); a slot is live exactly when this bit is clear.
pub const FREED: u16 = 0x8000;

#[derive(Clone, Copy)]
pub struct Class {
    pub size: u32,
    /// Slots per page.
    pub spp: u32,
    /// Pages per slab.
    pub pages: u32,
    pub nslots: u32,
    /// ceil(2^32 / size): position in page = (offset * inv) >> 32 for offsets < 4096.
    pub inv: u64,
    /// Offset of the lane records in the slot table (after one u16 size per slot).
    pub lanes_at: u32,
}

const fn make_class(size: u32) -> Class {
    let spp = PAGE as u32 / size;
    let mut pages = 64u32.div_ceil(spp);
    if pages < 4 {
        pages = 4;
    }
    if pages > 16 {
        pages = 16;
    }
    let nslots = spp * pages;
    Class { size, spp, pages, nslots, inv: (1u64 << 32).div_ceil(size as u64), lanes_at: (nslots * 2).div_ceil(8) * 8 }
}

pub static CLASSES: [Class; NCLASS] = {
    let mut out = [make_class(16); NCLASS];
    let mut i = 0;
    while i < NCLASS {
        out[i] = make_class(SIZES[i]);
        i += 1;
    }
    out
};

/// Class for a slot of at least `need` bytes (index by need/16, rounded up).
static LOOKUP: [u8; MAX_SLOT / 16 + 1] = {
    let mut t = [0u8; MAX_SLOT / 16 + 1];
    let mut q = 0;
    let mut c = 0;
    while q <= MAX_SLOT / 16 {
        while (SIZES[c] as usize) < q * 16 {
            c += 1;
        }
        t[q] = c as u8;
        q += 1;
    }
    t
};

/// The class serving a request of `size` bytes (default alignment), if it is small.
#[inline]
pub fn class_for(size: usize) -> Option<usize> {
    if size > MAX_SMALL {
        return None;
    }
    Some(LOOKUP[(size + CANARY).div_ceil(16)] as usize)
}

/// The smallest class whose slots are all aligned to `align` (a power of two <= 4096) and
/// hold `size` bytes plus the canary.
pub fn class_for_aligned(size: usize, align: usize) -> Option<usize> {
    let first = class_for(size)?;
    (first..NCLASS).find(|&c| (SIZES[c] as usize).is_multiple_of(align))
}

/// Most lanes a page of any slab may be split into in prevent mode (detect mode uses one lane
/// per slot).
pub const MAX_PREVENT_LANES: u32 = 8;

/// The lane record of one page lane.
#[repr(C)]
pub struct Lane {
    /// The epoch the lane is issued in; 0 while it is ready.
    pub epoch: AtomicU32,
    /// Slots of the issued lane not yet dead (allocated-and-live or still in a cache).
    pub live: AtomicU32,
}

/// A run of issued slots of one lane, allocated one after another by a thread cache.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Cursor {
    pub next: usize,
    pub end: usize,
    /// Size-table entry of the slot at `next`; the next slot's entry is `pages` further.
    pub size_at: *const AtomicU16,
    pub lane: *const Lane,
}

impl Cursor {
    pub const EMPTY: Cursor = Cursor { next: 0, end: 0, size_at: core::ptr::null(), lane: core::ptr::null() };
}

/// The thread cache of one class: cursors over issued lanes.
#[repr(C)]
pub struct Bin {
    pub n: u32,
    /// Lanes the next refill asks for (0: none yet; see `cache::refill`).
    pub fill: u32,
    pub cur: [Cursor; 16],
}

/// Per-class central state.
pub struct Central {
    /// Slabs with ready lanes (head and tail of a doubly-linked list through the spans).
    partial: u32,
    tail: u32,
    pub slabs: u64,
    /// Dead slots of pinned lanes that a sweep proved unreachable (`sweep`): a stack of
    /// `span << 32 | slot`, out of band, in metadata memory taken on first use.
    reclaimed: *mut u64,
    nreclaimed: u32,
}

/// Room in each class's stack of reclaimed slots; a sweep leaves the rest dead.
const RECLAIM_CAP: u32 = 1 << 16;

// SAFETY: only reached through its lock.
unsafe impl Send for Central {}

pub static CENTRAL: [Locked<Central>; NCLASS] = [const {
    Locked::new(Central {
        partial: pool::NONE,
        tail: pool::NONE,
        slabs: 0,
        reclaimed: core::ptr::null_mut(),
        nreclaimed: 0,
    })
}; NCLASS];

/// Recycled slot tables, per class (a list linked through their first word).
///
/// A released slab keeps its table until its pages are really freed, at the start of the next
/// epoch (`recycle_table`): until then a stale pointer into the slab still resolves to it, and
/// must find the slab's own (dead) state there. Had the table gone to a new slab at once, the
/// stale pointer would read the new slab's lanes: a double free would be accepted, and a fault
/// on a revoked alias would be taken for a live alias and mapped again.
pub struct FreeTables(*mut u8);

// SAFETY: only reached through its lock.
unsafe impl Send for FreeTables {}

pub static FREE_TABLES: [Locked<FreeTables>; NCLASS] =
    [const { Locked::new(FreeTables(core::ptr::null_mut())) }; NCLASS];

impl FreeTables {
    fn push(&mut self, m: *mut u8) {
        // SAFETY: `m` is an unused slot table; its first word becomes the link.
        unsafe { *(m as *mut *mut u8) = self.0 };
        self.0 = m;
    }

    fn pop(&mut self) -> *mut u8 {
        let m = self.0;
        if !m.is_null() {
            // SAFETY: a recycled slot table starts with the link to the next one.
            self.0 = unsafe { *(m as *mut *mut u8) };
        }
        m
    }
}

/// The slab `idx` is leaving the pool's deferred list for good (its pages are being freed):
/// its slot table may now serve a new slab.
pub fn recycle_table(idx: u32) {
    let s = POOL.span(idx);
    if s.kind == pool::SLAB && !s.meta.is_null() {
        FREE_TABLES[s.class as usize].lock().push(s.meta);
    }
}

/// Prevent mode: lanes per page for each class's new (and idle) slabs. 1 (a whole page is
/// one group: the fewest installs and revocations) unless long-lived survivors were seen to
/// pin the dead slots of their groups, in which case groups get smaller (`adapt`).
static LANES: [AtomicU32; NCLASS] = [const { AtomicU32::new(1) }; NCLASS];

/// Least share of the sampled slabs' slots that must be pinned for groups to get smaller
/// (`adapt`): finer groups could give back at most those slots.
const PINNED_SHARE: (u64, u64) = (1, 4);

/// Calls of `adapt` per class: it samples on every eighth (a sample reads hundreds of
/// descriptors).
static CALLS: [AtomicU32; NCLASS] = [const { AtomicU32::new(0) }; NCLASS];

/// Where the next fragmentation sample of each class starts in the descriptor table.
static SAMPLE_AT: [AtomicU32; NCLASS] = [const { AtomicU32::new(1) }; NCLASS];

/// Consecutive samples asking for a change (positive: finer, negative: coarser); a change
/// needs four in a row, so that the policy does not flap.
static VOTES: [core::sync::atomic::AtomicI32; NCLASS] = [const { core::sync::atomic::AtomicI32::new(0) }; NCLASS];

/// Lanes per page for new slabs: one slot per lane in detect mode, `LANES` in prevent mode.
#[inline]
fn lanes_for(c: &Class, ci: usize) -> u32 {
    if crate::detect() {
        c.spp
    } else {
        LANES[ci].load(Ordering::Relaxed).min(c.spp)
    }
}

/// Called (class lock held) when class `ci` needs a new slab: memory is growing. On every
/// eighth call, samples up to 16 slabs of the class and measures how many slots of issued
/// groups are dead but pinned by a live neighbour. Mostly pinned: halve the group size (more
/// lanes per page, at most 8); hardly pinned: double it again (down to one lane per page).
///
/// "Mostly pinned" also asks that the pinned slots be a fair share (`PINNED_SHARE`) of all the
/// sampled slabs' slots, not only of the live groups': in a small heap with quick turnover the
/// only live groups are the last ones handed out, still being used up, and nearly all their
/// slots are dead (a ring of 16 objects of up to 48 bytes: 0–3 % of the slabs' slots pinned,
/// against 76–98 % where one object in 100 lives long). Halving groups there doubled installs
/// and revocations to save a few KiB: 92 against 53 ns per allocation (`bench/small.c`).
fn adapt(ci: usize) {
    if crate::detect() || !CALLS[ci].fetch_add(1, Ordering::Relaxed).is_multiple_of(8) {
        return;
    }
    let c = &CLASSES[ci];
    // SAFETY: a racy read of a counter that only grows is enough for sampling.
    let ndesc = unsafe { POOL.desc_count() }.max(2);
    let mut at = SAMPLE_AT[ci].load(Ordering::Relaxed);
    let (mut pinned, mut issued, mut found) = (0u64, 0u64, 0);
    let mut slots_sampled = 0u64;
    for _ in 0..512 {
        if found == 16 {
            break;
        }
        at = if at + 1 >= ndesc { 1 } else { at + 1 };
        let s = POOL.span(at);
        if s.kind != pool::SLAB || s.class as usize != ci || s.meta.is_null() {
            continue;
        }
        found += 1;
        slots_sampled += c.nslots as u64;
        let per = lane_slots(s, c);
        for j in 0..c.pages {
            for r in 0..c.spp.div_ceil(per) {
                let l = lane(s, c, j, r);
                let live = l.live.load(Ordering::Relaxed);
                if l.epoch.load(Ordering::Relaxed) != 0 && live > 0 {
                    let slots = per.min(c.spp - r * per);
                    issued += slots as u64;
                    pinned += slots.saturating_sub(live) as u64;
                }
            }
        }
    }
    SAMPLE_AT[ci].store(at, Ordering::Relaxed);
    if issued < 64 {
        return;
    }
    let r = LANES[ci].load(Ordering::Relaxed);
    let vote = if pinned * 10 > issued * 9 && pinned * PINNED_SHARE.1 >= slots_sampled * PINNED_SHARE.0 {
        1
    } else if pinned * 4 < issued {
        -1
    } else {
        0
    };
    let votes = VOTES[ci].load(Ordering::Relaxed);
    let votes = if vote == 0 || votes.signum() == -vote { vote } else { votes + vote };
    VOTES[ci].store(votes, Ordering::Relaxed);
    let next = match votes {
        4.. => (r * 2).min(MAX_PREVENT_LANES).min(c.spp),
        ..=-4 => (r / 2).max(1),
        _ => r,
    };
    if next != r {
        VOTES[ci].store(0, Ordering::Relaxed);
        LANES[ci].store(next, Ordering::Relaxed);
        stats::add(&stats::REGROUPS, 1);
    }
}

/// Lane records each slab of class `c` has room for.
#[inline]
fn lane_capacity(c: &Class) -> u32 {
    c.pages * if crate::detect() { c.spp } else { MAX_PREVENT_LANES.min(c.spp) }
}

#[inline]
fn meta_bytes(c: &Class) -> usize {
    traces_at(c) + if crate::detect() { c.nslots as usize * core::mem::size_of::<crate::stack::Trace>() } else { 0 }
}

/// Offset of the per-slot allocation/free traces (detect mode only), after the lane records.
#[inline]
fn traces_at(c: &Class) -> usize {
    c.lanes_at as usize + lane_capacity(c) as usize * core::mem::size_of::<Lane>()
}

/// Detect mode: the trace of slot `i` of slab `s` (class `c`); `i` < nslots.
#[inline]
pub fn trace(s: &pool::Span, c: &Class, i: u32) -> &'static crate::stack::Trace {
    // SAFETY: in detect mode the slot table has nslots traces at `traces_at` (see meta_bytes).
    unsafe { &*(s.meta.add(traces_at(c)) as *const crate::stack::Trace).add(i as usize) }
}

#[inline]
pub fn sizes(s: &pool::Span) -> *const AtomicU16 {
    s.meta as *const AtomicU16
}

/// Whether the slab `s` is set up: lock-free readers (pointer resolution, the fault handler,
/// revocation) can meet a span the page map already calls a slab while `new_slab` is still
/// filling in its table; until then it holds no object and its table must not be read.
#[inline]
pub fn set_up(s: &pool::Span) -> bool {
    // SAFETY: a racy read of a field that `new_slab` stores last, after a release fence.
    let lanes = unsafe { core::ptr::read_volatile(&s.lanes) };
    core::sync::atomic::fence(Ordering::Acquire);
    lanes != 0
}

/// Slots per lane of slab `s`.
#[inline]
pub fn lane_slots(s: &pool::Span, c: &Class) -> u32 {
    c.spp.div_ceil(s.lanes)
}

/// The lane record of the slot at position `pos` of page `j` (no division in the common
/// cases: one lane per page, or one lane per slot).
#[inline]
pub fn lane_of(s: &pool::Span, c: &Class, j: u32, pos: u32) -> &'static Lane {
    let r = if s.lanes == 1 {
        0
    } else if s.lanes == c.spp {
        pos
    } else {
        pos / lane_slots(s, c)
    };
    lane(s, c, j, r)
}

/// The lane record of page `j` (of the slab), lane `r`.
#[inline]
pub fn lane(s: &pool::Span, c: &Class, j: u32, r: u32) -> &'static Lane {
    lane_in(s.meta, c, j, r)
}

/// Lanes per page a slot table of class `c` has room for.
#[inline]
fn lanes_max(c: &Class) -> u32 {
    if crate::detect() {
        c.spp
    } else {
        MAX_PREVENT_LANES.min(c.spp)
    }
}

#[inline]
fn lane_in(meta: *mut u8, c: &Class, j: u32, r: u32) -> &'static Lane {
    // SAFETY: j < pages and r < lanes <= lanes_max, so the record is inside the slot table.
    unsafe { &*(meta.add(c.lanes_at as usize) as *const Lane).add((j * lanes_max(c) + r) as usize) }
}

/// The index in the slab `s` of class `c` of its pool page `page`, for readers that hold no
/// lock: the span's start is read once (not again after `span_at` checked it, since a span
/// reused meanwhile may have another), and the index is checked against the class, so that
/// lane and size records are looked up inside a slot table (see `page_has_live_lane`). None
/// when the page is not in such a slab any more.
#[inline]
pub fn page_index(s: &pool::Span, c: &Class, page: u32) -> Option<u32> {
    // SAFETY: a plain field of a descriptor in the always-mapped span table.
    let j = page.wrapping_sub(unsafe { core::ptr::read_volatile(&s.start) });
    (j < c.pages).then_some(j)
}

/// For scans (sweeps, the leak check): the size entry of the slot of the slab `s` (set up)
/// that the word `w` points at or into, found at pool page `page` under an alias of epoch
/// `e`, with `w`'s offset into the slot; None when `w` points at no slot issued under that
/// alias (the lane was issued in another epoch, or the slab changed meanwhile).
#[inline(always)]
pub fn slot_at(s: &pool::Span, page: u32, e: u32, w: usize) -> Option<(&'static AtomicU16, usize)> {
    slot_at_where(s, page, e, w, |_| true)
}

/// `slot_at` for a slot whose size entry `want`s: the entry is read first, and the lane's
/// record only when it does. (A sweep's look-up of the words it reads, most of which point at
/// live objects it has nothing to do with: in a heap bigger than the cache, the lane record is
/// a miss of its own.)
#[inline(always)]
pub fn slot_at_where(
    s: &pool::Span,
    page: u32,
    e: u32,
    w: usize,
    want: impl FnOnce(u16) -> bool,
) -> Option<(&'static AtomicU16, usize)> {
    let c = &CLASSES[s.class as usize];
    let (pos, off) = match locate(c, w & (PAGE - 1)) {
        Slot::Start(p) => (p, 0),
        Slot::Interior(p, off) => (p, off),
        Slot::Tail => return None,
    };
    let j = page_index(s, c, page)?;
    // SAFETY: the slot index is below nslots.
    let entry = unsafe { &*sizes(s).add(slot_index(c, j, pos) as usize) };
    if !want(entry.load(Ordering::Relaxed)) || lane_of(s, c, j, pos).epoch.load(Ordering::Relaxed) != e {
        return None;
    }
    Some((entry, off))
}

/// A slab page's records as a reader that holds no lock sees them: the class, the page's
/// index in its slab, its lanes per page and the slot table. Such a reader may meet the span
/// `s` while it is released and reused, and reading its fields at different moments (its
/// start, then its class, then its table) must not lead outside memory: each field is read
/// once (`lanes` first, which `new_slab` publishes last: see `set_up`) and checked against
/// the others; a table and a class that do not belong together still read inside metadata
/// memory, which keeps room past every table (`meta::READ_SLACK`). None when the fields do
/// not fit a slab holding `page`.
#[derive(Clone, Copy)]
struct PageView {
    c: &'static Class,
    j: u32,
    lanes: u32,
    meta: *mut u8,
}

fn page_view(s: &pool::Span, page: u32) -> Option<PageView> {
    // SAFETY: plain fields of a descriptor in the always-mapped span table, read once each.
    let (lanes, class, meta) = unsafe {
        let lanes = core::ptr::read_volatile(&s.lanes);
        core::sync::atomic::fence(Ordering::Acquire);
        (lanes, core::ptr::read_volatile(&s.class) as usize, core::ptr::read_volatile(&s.meta))
    };
    let c = CLASSES.get(class)?;
    let j = page_index(s, c, page)?;
    if lanes == 0 || lanes > lanes_max(c) || meta.is_null() {
        return None;
    }
    Some(PageView { c, j, lanes, meta })
}

impl PageView {
    fn lanes(self) -> impl Iterator<Item = &'static Lane> {
        (0..lanes_in_page(self.lanes, self.c)).map(move |r| lane_in(self.meta, self.c, self.j, r))
    }
}

/// Whether any lane of pool page `page` is issued in epoch `e` and not dead, for readers that
/// hold no lock (the revocation's gap check; see `page_view`). A page changing hands is no
/// live alias, and any answer for it is harmless; a live lane's slab does not change
/// meanwhile, so for it the answer is exact. When the fields do not fit, says "live" (the
/// cautious answer).
pub fn page_has_live_lane(s: &pool::Span, page: u32, e: u32) -> bool {
    let Some(v) = page_view(s, page) else { return true };
    v.lanes().any(|l| l.epoch.load(Ordering::Relaxed) == e && l.live.load(Ordering::Relaxed) > 0)
}

/// What the pool pages of slabs hold, for the statistics (`stats::print`).
#[derive(Default)]
pub struct PageCensus {
    /// Pages with a lane that is not dead: live objects, or slots in a cache or waiting for
    /// reuse after a sweep.
    pub held: u64,
    /// Live objects on those pages, and their slots.
    pub objects: u64,
    pub slots: u64,
    /// Those of the held pages whose every held lane was issued in an epoch `old` calls old.
    pub old: u64,
    /// Pages whose issued lanes are all dead: their aliases wait for a revocation batch.
    pub revoking: u64,
    /// Pages with no lane issued: they wait for an epoch that has not issued them yet.
    pub ready: u64,
    /// Those of the ready pages that were punched (idle slabs: they hold no memory).
    pub punched: u64,
    /// Per class: held pages and the live objects on them (which classes hold the memory).
    pub class_held: [u32; NCLASS],
    pub class_objects: [u32; NCLASS],
}

/// Counts the slab pages among the first `pages` pool pages by what they hold. Safe while
/// other threads allocate: pages are read through `page_view` (a page skipped when its
/// fields do not fit), so the counts are a snapshot of racy reads.
pub fn page_census(pages: u32, old: impl Fn(u32) -> bool) -> PageCensus {
    let mut n = PageCensus::default();
    for page in 0..pages {
        let Some((_, s)) = POOL.span_at(POOL.page_addr(page)) else { continue };
        // SAFETY: a plain field of a descriptor in the always-mapped span table.
        if unsafe { core::ptr::read_volatile(&s.kind) } != pool::SLAB {
            continue;
        }
        let Some(v) = page_view(s, page) else { continue };
        let (c, j, meta) = (v.c, v.j, v.meta);
        let (mut issued, mut held, mut young) = (false, false, false);
        for l in v.lanes() {
            let e = l.epoch.load(Ordering::Relaxed);
            issued |= e != 0;
            if e != 0 && l.live.load(Ordering::Relaxed) > 0 {
                held = true;
                young |= !old(e);
            }
        }
        if !held {
            if issued {
                n.revoking += 1;
            } else {
                n.ready += 1;
                // SAFETY: as above.
                n.punched += (unsafe { core::ptr::read_volatile(&s.holes) } >> j & 1) as u64;
            }
            continue;
        }
        n.held += 1;
        n.old += !young as u64;
        n.slots += c.spp as u64;
        let live = (0..c.spp)
            .filter(|&pos| {
                // SAFETY: the size table starts the slot table, which has room for `nslots`
                // entries (slot_index < nslots), and metadata memory keeps `READ_SLACK` past it.
                let v = unsafe {
                    (*(meta as *const AtomicU16).add(slot_index(c, j, pos) as usize)).load(Ordering::Relaxed)
                };
                v & FREED == 0
            })
            .count() as u32;
        n.objects += live as u64;
        let ci = s.class as usize % NCLASS;
        n.class_held[ci] = n.class_held[ci].saturating_add(1);
        n.class_objects[ci] = n.class_objects[ci].saturating_add(live);
    }
    n
}

/// Where a pointer sits inside a page of a slab.
pub enum Slot {
    /// Exactly the start of position `pos`.
    Start(u32),
    /// Inside position `pos`, `off` bytes past its start.
    Interior(u32, usize),
    /// In the unused tail of a page.
    Tail,
}

/// Position of the byte at `in_page` (offset inside a page) for class `c`.
#[inline]
pub fn locate(c: &Class, in_page: usize) -> Slot {
    let pos = ((in_page as u64 * c.inv) >> 32) as u32;
    let pos = if pos * c.size > in_page as u32 { pos - 1 } else { pos };
    if pos >= c.spp {
        return Slot::Tail;
    }
    let delta = in_page - (pos * c.size) as usize;
    if delta == 0 {
        Slot::Start(pos)
    } else {
        Slot::Interior(pos, delta)
    }
}

/// Slot index (into the size table) of position `pos` on page `j` of a slab.
#[inline]
pub fn slot_index(c: &Class, j: u32, pos: u32) -> u32 {
    pos * c.pages + j
}

/// Issues up to one lane from each page of one slab of class `ci` into `out`, installs their
/// aliases, and returns how many cursors were filled (0: out of memory).
pub fn refill(ci: usize, out: &mut [Cursor]) -> usize {
    let c = &CLASSES[ci];
    let mut central = CENTRAL[ci].lock();
    if central.nreclaimed > 0 {
        let got = refill_reclaimed(&mut central, ci, out);
        if got > 0 {
            stats::add(&stats::REFILLS, 1);
            return got;
        }
    }
    let mut advanced = false;
    let mut created = false;
    let mut fresh = pool::NONE;
    loop {
        let e = alias::pin_current();
        if e == 0 {
            return 0;
        }
        // Look for a slab with a lane issuable in this epoch; move blocked ones to the back.
        let mut tries = 0;
        let mut blocked = false;
        let mut idx = central.partial;
        while idx != pool::NONE && tries < 8 {
            let mut fresh = 0;
            let got = issue_from(idx, c, e, out, &mut fresh);
            if got > 0 {
                let s = POOL.span_owned(idx);
                if s.ready == 0 {
                    central.unlink(idx);
                }
                if fresh != 0 {
                    // Detect mode, pages issued for the first time in this slab: their slots
                    // are filled through the aliases just installed, before any other lane of
                    // theirs can be issued (a later epoch's, to another thread).
                    install_cursors(c, &out[..got]);
                    crate::heap::poison_pages(idx, e, fresh);
                    drop(central);
                } else {
                    drop(central);
                    install_cursors(c, &out[..got]);
                }
                alias::unpin(e);
                stats::add(&stats::REFILLS, 1);
                return got;
            }
            blocked = true;
            let next = POOL.span(idx).next;
            central.move_back(idx);
            idx = next;
            tries += 1;
        }
        alias::unpin(e);
        // Ready lanes exist but every one sits on a page this epoch already issued (or beyond
        // its mirror): start the next epoch when this one has issued enough, or when even a
        // fresh slab could not be issued; else take fresh pool pages. At most one fresh slab
        // and one new epoch per refill: if both fail the request fails with ENOMEM.
        if blocked && !advanced && (created || alias::may_advance()) {
            advanced = true;
            if alias::advance(POOL.stats().1.max(1)).is_some() {
                POOL.release_deferred();
                continue;
            }
        }
        if !created {
            adapt(ci);
            if let Some(idx) = new_slab(&mut central, ci) {
                created = true;
                fresh = idx;
                let start = POOL.span(idx).start;
                if !advanced || alias::issuable(alias::current(), start + c.pages - 1) {
                    continue;
                }
                // No new epoch could be had and the fresh pages lie beyond the current mirror:
                // give them back rather than grow the pool with pages nobody can issue.
                discard_new_slab(&mut central, idx);
                fresh = pool::NONE;
            }
        }
        if !advanced {
            advanced = true;
            if alias::advance(POOL.stats().1.max(1)).is_some() {
                POOL.release_deferred();
                continue;
            }
        }
        // Giving up (ENOMEM): a fresh slab that nothing could issue goes back to the pool, so
        // that failing requests never grow it.
        if fresh != pool::NONE && POOL.span(fresh).ready == lanes_total(POOL.span(fresh).lanes, c) {
            discard_new_slab(&mut central, fresh);
        }
        return 0;
    }
}

/// A slot taken off its class's reclaimed stack: its size entry, its lane, and its address
/// under the lane's alias (live: the slot counts in the lane's live slots).
pub struct ReclaimedSlot {
    pub entry: &'static AtomicU16,
    pub lane: &'static Lane,
    pub addr: usize,
}

impl Central {
    /// Puts slot `i` of slab `idx` on the reclaimed stack; false when the stack is full (or
    /// cannot be had), and the slot stays dead.
    pub fn push_reclaimed(&mut self, idx: u32, i: u32) -> bool {
        if self.reclaimed.is_null() {
            self.reclaimed = meta::alloc(RECLAIM_CAP as usize * 8) as *mut u64;
            if self.reclaimed.is_null() {
                return false;
            }
        }
        if self.nreclaimed == RECLAIM_CAP {
            return false;
        }
        // SAFETY: below the stack's capacity.
        unsafe { *self.reclaimed.add(self.nreclaimed as usize) = (idx as u64) << 32 | i as u64 };
        self.nreclaimed += 1;
        true
    }

    /// The next slot of class `ci`'s reclaimed stack, taken off. A reclaimed slot keeps its
    /// lane issued, so its slab, lane and alias stay as the sweep found them; checked all the
    /// same, and entries that fail are dropped.
    fn pop_reclaimed(&mut self, ci: usize) -> Option<ReclaimedSlot> {
        let c = &CLASSES[ci];
        while self.nreclaimed > 0 {
            self.nreclaimed -= 1;
            // SAFETY: below the stack's top.
            let v = unsafe { *self.reclaimed.add(self.nreclaimed as usize) };
            let (idx, i) = ((v >> 32) as u32, v as u32);
            let s = POOL.span(idx);
            if s.kind != pool::SLAB || s.class as usize != ci || i >= c.nslots {
                continue;
            }
            // SAFETY: `i` < nslots.
            let entry = unsafe { &*sizes(s).add(i as usize) };
            let (j, pos) = (i % c.pages, i / c.pages);
            let lane = lane_of(s, c, j, pos);
            let e = lane.epoch.load(Ordering::Acquire);
            if entry.load(Ordering::Relaxed) != FREE_SLOT || e == 0 {
                continue;
            }
            return Some(ReclaimedSlot { entry, lane, addr: alias::alias(e, s.start + j) + (pos * c.size) as usize });
        }
        None
    }
}

/// Bytes of the slots on every class's reclaimed stack: reclaimed by the last sweep and not
/// taken since (they die again at the next sweep's `drain`).
pub fn reclaimed_bytes() -> u64 {
    (0..NCLASS).map(|ci| CENTRAL[ci].lock().nreclaimed as u64 * CLASSES[ci].size as u64).sum()
}

/// Takes one slot off class `ci`'s reclaimed stack.
pub fn pop_one_reclaimed(ci: usize) -> Option<ReclaimedSlot> {
    CENTRAL[ci].lock().pop_reclaimed(ci)
}

/// Hands out up to `out.len()` reclaimed slots as one-slot cursors under their lanes' (live)
/// aliases.
fn refill_reclaimed(central: &mut Central, ci: usize, out: &mut [Cursor]) -> usize {
    let size = CLASSES[ci].size as usize;
    let mut got = 0;
    while got < out.len() {
        let Some(r) = central.pop_reclaimed(ci) else { break };
        out[got] = Cursor { next: r.addr, end: r.addr + size, size_at: r.entry, lane: r.lane };
        got += 1;
    }
    got
}

/// Lanes in a slab of class `c` whose pages are split into `lanes` lanes each.
#[inline]
fn lanes_total(lanes: u32, c: &Class) -> u32 {
    lanes_in_page(lanes, c) * c.pages
}

/// Lanes a page of class `c` split into `lanes` lanes really has (the last may be short, and
/// rounding the slots per lane up may leave fewer lanes than asked for).
#[inline]
fn lanes_in_page(lanes: u32, c: &Class) -> u32 {
    c.spp.div_ceil(c.spp.div_ceil(lanes))
}

/// Undoes `new_slab` for a slab that was never issued.
fn discard_new_slab(central: &mut Central, idx: u32) {
    central.unlink(idx);
    central.slabs -= 1;
    // The slab was never issued: no pointer into it exists, its table is free at once.
    FREE_TABLES[POOL.span(idx).class as usize].lock().push(POOL.span(idx).meta);
    POOL.free_run(idx);
}

impl Central {
    fn push_front(&mut self, idx: u32) {
        POOL.push_list(&mut self.partial, idx);
        if self.tail == pool::NONE {
            self.tail = idx;
        }
    }

    fn push_back(&mut self, idx: u32) {
        let s = POOL.span_owned(idx);
        s.next = pool::NONE;
        s.prev = self.tail;
        if self.tail != pool::NONE {
            POOL.span_owned(self.tail).next = idx;
        } else {
            self.partial = idx;
        }
        self.tail = idx;
    }

    fn unlink(&mut self, idx: u32) {
        if self.tail == idx {
            self.tail = POOL.span(idx).prev;
        }
        POOL.unlink_list(&mut self.partial, idx);
    }

    /// Moves `idx` (on the list) to its end.
    fn move_back(&mut self, idx: u32) {
        if self.tail == idx {
            return;
        }
        self.unlink(idx);
        self.push_back(idx);
    }
}

/// Issues one ready lane per issuable page of slab `idx` in epoch `e` (class lock held). In
/// detect mode, `fresh` gets the pages issued for the first time in the slab (bit j: page j),
/// whose slots the caller fills (`heap::poison_pages`) before it lets the lock go.
fn issue_from(idx: u32, c: &Class, e: u32, out: &mut [Cursor], fresh: &mut u16) -> usize {
    let s = POOL.span_owned(idx);
    let per_lane = lane_slots(s, c);
    let nlanes = c.spp.div_ceil(per_lane);
    let mut got = 0;
    for j in 0..c.pages {
        if s.ready == 0 || got == out.len() {
            break;
        }
        let page = s.start + j;
        if !alias::issuable(e, page) {
            continue;
        }
        for r in 0..nlanes {
            let l = lane(s, c, j, r);
            if l.epoch.load(Ordering::Relaxed) != 0 {
                continue;
            }
            let first = r * per_lane;
            let last = (first + per_lane).min(c.spp);
            l.live.store(last - first, Ordering::Relaxed);
            l.epoch.store(e, Ordering::Release);
            s.ready -= 1;
            if crate::detect() && s.filled & (1 << j) == 0 {
                // The page's first issue in this slab: no slot of it is in use, nor in any
                // thread's cache.
                s.filled |= 1 << j;
                *fresh |= 1 << j;
            }
            s.holes &= !(1 << j);
            s.since = IDLE_TICK.load(Ordering::Relaxed);
            alias::note_issue(e, page, 1);
            let base = alias::alias(e, page);
            out[got] = Cursor {
                next: base + (first * c.size) as usize,
                end: base + (last * c.size) as usize,
                // SAFETY: the slot index is below nslots.
                size_at: unsafe { sizes(s).add(slot_index(c, j, first) as usize) },
                lane: l,
            };
            got += 1;
            break;
        }
    }
    got
}

/// The clock of idle pages: it ticks at most four times per `dirty_decay` period (and at most
/// every 50 ms), when a revocation batch completes; a slab records the tick of its last issue.
static IDLE_TICK: AtomicU64 = AtomicU64::new(1);
/// When `decay_idle_if_due` next runs (`sys::now_ns` time).
static NEXT_IDLE: AtomicU64 = AtomicU64::new(0);
/// Ticks a slab must go without issuing a lane before the memory of its idle pages goes back.
const IDLE_TICKS: u64 = 4;

/// Gives back to the system, when due, the memory of idle slab pages: pages whose lanes are
/// all ready, in slabs that issued no lane for about `dirty_decay` milliseconds. A slab is
/// kept while any of its lanes is issued, so one long-lived object on one page would keep all
/// of its slab's pages (up to 16) for as long as it lives, although its class may not need
/// them again (a program past a phase that left a few survivors of a size it no longer
/// uses). The pool's free runs decay the same way (`pool::Pool::decay`). Call with no lock
/// held.
pub fn decay_idle_if_due() {
    let now = crate::sys::now_ns();
    let next = NEXT_IDLE.load(Ordering::Relaxed);
    if now < next {
        return;
    }
    let period = pool::decay_period_ns(crate::options().dirty_decay_ms);
    if NEXT_IDLE.compare_exchange(next, now + period, Ordering::Relaxed, Ordering::Relaxed).is_err() {
        return; // another thread runs it
    }
    let tick = IDLE_TICK.fetch_add(1, Ordering::Relaxed) + 1;
    for (ci, central) in CENTRAL.iter().enumerate() {
        punch_idle(&central.lock(), &CLASSES[ci], tick);
    }
}

/// Gives back the memory of every slab page whose lanes are all ready, idle or not
/// (`malloc_trim`). Returns whether any was.
pub fn trim_idle() -> bool {
    let mut any = false;
    for (ci, central) in CENTRAL.iter().enumerate() {
        any |= punch_idle(&central.lock(), &CLASSES[ci], u64::MAX);
    }
    any
}

/// `decay_idle_if_due` for class `c` (its lock held), at idle clock tick `tick`. Returns
/// whether any page was punched.
fn punch_idle(central: &Central, c: &Class, tick: u64) -> bool {
    let mut any = false;
    let mut idx = central.partial;
    while idx != pool::NONE {
        let s = POOL.span_owned(idx);
        idx = s.next;
        if tick.saturating_sub(s.since) < IDLE_TICKS {
            continue;
        }
        let mut todo = (ready_pages(s, c) & !s.holes) as u32;
        while todo != 0 {
            let j = todo.trailing_zeros();
            let n = (todo >> j).trailing_ones();
            let run = ((1u32 << n) - 1) << j;
            todo &= !run;
            if POOL.punch_pages(s.start + j, n) {
                s.holes |= run as u16;
                s.filled &= !(run as u16);
                stats::add(&stats::IDLE_PAGES_PUNCHED, n as u64);
                any = true;
            }
        }
    }
    any
}

/// The pages of slab `s` (bit j: page j) whose lanes are all ready.
fn ready_pages(s: &pool::Span, c: &Class) -> u16 {
    let nlanes = c.spp.div_ceil(lane_slots(s, c));
    let mut m = 0u16;
    for j in 0..c.pages {
        if (0..nlanes).all(|r| lane(s, c, j, r).epoch.load(Ordering::Relaxed) == 0) {
            m |= 1 << j;
        }
    }
    m
}

/// Installs the alias pages of freshly issued cursors, one ioctl per contiguous run.
fn install_cursors(_c: &Class, cur: &[Cursor]) {
    let mut i = 0;
    while i < cur.len() {
        let start = cur[i].next & !(PAGE - 1);
        let mut n = 1;
        while i + n < cur.len() && (cur[i + n].next & !(PAGE - 1)) == start + n * PAGE {
            n += 1;
        }
        if let Err(err) = alias::install(start, n) {
            crate::report::say(format_args!(
                "installing aliases at {start:#x} ({n} pages) failed (errno {err}); aborting"
            ));
            crate::sys::die();
        }
        i += n;
    }
}

/// Slabs made so far: the next one's `Span::gen`.
static SLABS_MADE: AtomicU32 = AtomicU32::new(0);

fn new_slab(central: &mut Central, ci: usize) -> Option<u32> {
    let c = &CLASSES[ci];
    let recycled = FREE_TABLES[ci].lock().pop();
    let meta = if !recycled.is_null() {
        recycled
    } else {
        let m = meta::alloc(meta_bytes(c));
        if m.is_null() {
            return None;
        }
        m
    };
    let Some((idx, _)) = POOL.alloc_run_filled(c.pages, c.pages, pool::SLAB) else {
        FREE_TABLES[ci].lock().push(meta);
        return None;
    };
    // SAFETY: `meta` has meta_bytes(c) bytes: the sizes, then lane_capacity(c) lanes.
    unsafe {
        let sz = meta as *mut u16;
        for i in 0..c.nslots as usize {
            *sz.add(i) = FREE_SLOT;
        }
        core::ptr::write_bytes(
            meta.add(c.lanes_at as usize),
            0,
            lane_capacity(c) as usize * core::mem::size_of::<Lane>(),
        );
    }
    let s = POOL.span_owned(idx);
    s.gen = SLABS_MADE.fetch_add(1, Ordering::Relaxed);
    s.class = ci as u8;
    s.addr = POOL.page_addr(s.start);
    s.meta = meta;
    s.since = IDLE_TICK.load(Ordering::Relaxed);
    let lanes = lanes_for(c, ci);
    s.ready = lanes_total(lanes, c);
    // Published last (see `set_up`): lock-free readers of the page map may meet this span
    // from the moment `alloc_run_filled` marked it a slab.
    core::sync::atomic::fence(Ordering::Release);
    // SAFETY: a plain store to the span this thread owns; readers use a volatile load.
    unsafe { core::ptr::write_volatile(&mut s.lanes, lanes) };
    central.push_front(idx);
    central.slabs += 1;
    stats::add(&stats::SLABS_CREATED, 1);
    Some(idx)
}

/// A lane's alias page was revoked: its slots may be issued again (class lock taken here).
pub fn lane_revoked(idx: u32, lane: &Lane, page: u32) {
    let s = POOL.span_owned(idx);
    let ci = s.class as usize;
    let c = &CLASSES[ci];
    let mut central = CENTRAL[ci].lock();
    lane.epoch.store(0, Ordering::Release);
    s.ready += 1;
    if s.ready == 1 {
        // A page the issuing epoch already used waits for the next one: such slabs go to the
        // back, so that refills meet the slabs they can issue from first instead of giving up
        // on a front full of blocked ones and growing the pool.
        if alias::issuable(alias::current(), page) {
            central.push_front(idx);
        } else {
            central.push_back(idx);
        }
    }
    let total = lanes_total(s.lanes, c);
    if s.ready == total && central.slabs > 1 && !is_head_only(&central, idx) {
        // Entirely ready and not the only slab: give its pages back (after this epoch); its
        // slot table goes with them (`recycle_table`).
        central.unlink(idx);
        central.slabs -= 1;
        POOL.free_run_deferred(idx);
        stats::add(&stats::SLABS_RELEASED, 1);
    } else if s.ready == total && s.lanes != lanes_for(c, ci) {
        // Re-lane an idle slab when the policy changed.
        s.lanes = lanes_for(c, ci);
        s.ready = lanes_total(s.lanes, c);
    }
}

fn is_head_only(central: &Central, idx: u32) -> bool {
    central.partial == idx && POOL.span(idx).next == pool::NONE
}

/// Slabs live, summed over classes.
pub fn slab_count() -> u64 {
    CENTRAL.iter().map(|c| c.lock().slabs).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The biggest slot table of any class, in either mode.
    fn max_table_bytes() -> usize {
        CLASSES
            .iter()
            .map(|c| {
                c.lanes_at as usize
                    + (c.pages * c.spp) as usize
                        * (core::mem::size_of::<Lane>() + core::mem::size_of::<crate::stack::Trace>())
            })
            .max()
            .unwrap_or(0)
    }

    /// A lock-free reader pairing a table with the wrong class reads at most the biggest
    /// table's size past its start: metadata memory keeps that much mapped past every block.
    #[test]
    fn a_table_read_with_any_class_stays_in_mapped_metadata() {
        assert!(max_table_bytes() <= crate::meta::READ_SLACK, "{} bytes", max_table_bytes());
        for c in CLASSES.iter() {
            // Both modes' tables (detect mode has one lane per slot and a trace per slot).
            let detect = c.lanes_at as usize
                + (c.pages * c.spp) as usize * core::mem::size_of::<Lane>()
                + c.nslots as usize * core::mem::size_of::<crate::stack::Trace>();
            assert!(detect <= max_table_bytes());
        }
    }

    #[test]
    fn classes_are_sane() {
        for (i, c) in CLASSES.iter().enumerate() {
            assert_eq!(c.size % 16, 0);
            assert!(c.spp >= 2, "class {i}");
            assert!(c.spp * c.size <= PAGE as u32);
            assert!((4..=16).contains(&c.pages));
            if i > 0 {
                assert!(c.size > CLASSES[i - 1].size);
            }
            // page waste stays below 1/8
            assert!((PAGE as u32 - c.spp * c.size) * 8 <= PAGE as u32, "class {}", c.size);
        }
    }

    #[test]
    fn every_small_size_gets_room_for_its_canary() {
        for size in 0..=MAX_SMALL {
            let c = class_for(size).unwrap();
            assert!(SIZES[c] as usize >= size + CANARY);
            if c > 0 {
                assert!((SIZES[c - 1] as usize) < size + CANARY, "size {size} not in the smallest class");
            }
        }
        assert!(class_for(MAX_SMALL + 1).is_none());
    }

    #[test]
    fn aligned_classes() {
        for align in [16usize, 32, 64, 128, 256, 512, 1024, 2048] {
            for size in [0usize, 1, 100, 1000, 2000] {
                if let Some(c) = class_for_aligned(size, align) {
                    assert_eq!(SIZES[c] as usize % align, 0);
                    assert!(SIZES[c] as usize >= size + CANARY);
                }
            }
        }
        assert!(class_for_aligned(8, 64).is_some());
        assert!(class_for_aligned(2000, 4096).is_none());
    }

    #[test]
    fn locate_finds_positions_and_indices_stripe() {
        for c in CLASSES.iter() {
            for pos in 0..c.spp {
                let a = (pos * c.size) as usize;
                assert!(matches!(locate(c, a), Slot::Start(p) if p == pos));
                assert!(matches!(locate(c, a + 8), Slot::Interior(p, 8) if p == pos));
                assert!(matches!(locate(c, a + c.size as usize - 1), Slot::Interior(p, _) if p == pos));
            }
            if c.spp * c.size < PAGE as u32 {
                assert!(matches!(locate(c, PAGE - 1), Slot::Tail));
            }
            // consecutive slot indices are on consecutive pages (striping), all distinct
            assert_eq!(slot_index(c, 1, 0), slot_index(c, 0, 0) + 1);
            assert_eq!(slot_index(c, c.pages - 1, c.spp - 1), c.nslots - 1);
            // the lane records fit after the size table, 8-byte aligned
            assert!(c.lanes_at >= c.nslots * 2 && c.lanes_at % 8 == 0);
        }
    }
}
