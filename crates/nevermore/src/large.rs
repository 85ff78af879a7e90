//! Large objects (and objects with alignment above a page): each gets its own view of its pool
//! pages at a fresh address in the *large arena*, a reserved no-access region from which
//! addresses are taken in increasing order and never handed out again. At least one no-access
//! guard page separates any two views, so a linear overflow or underflow faults at once. The
//! object is placed at the end of its view (16-byte aligned), so that an overflow of more than
//! a few bytes past the canary hits the guard page immediately. An object that `realloc` grew
//! gets room to grow further where it is: its run and its address space are longer than its
//! view (see `alloc`). A freed view becomes no-access
//! reservation again: the address range stays reserved, and adjacent reservations merge into
//! one VMA.
//!
//! A two-level, direct-indexed table maps the page of each object's start address to its span
//! descriptor; a freed object leaves a tombstone there, so a second free is named correctly.
//!
//! The arena only grows, so what it leaves behind must not grow with it. Each 4 MiB *block*
//! counts the live views that overlap it; once the arena's cursor has passed a block and its
//! last view is freed, the block is *swept*: one `MADV_DONTNEED` over it frees the page tables
//! that its (now no-access) views left behind (unmapping a view cannot free a page table that a
//! neighbouring reservation still covers), and the table page holding its entries is dropped.
//! A swept block answers every lookup with a tombstone. Once every block of a leaf (a gigabyte
//! of addresses) is swept, the leaf is *retired*: its top-level entry is tagged and the leaf is
//! replaced by memory that reads as zeroes and is not charged to the process, so that the
//! table's private writable memory (`VmData`, what strict overcommit accounting charges) does
//! not grow with the addresses used (it did by 1 MiB per GiB).
//!
//! Fresh addresses come from regions of at most 1 TiB, up to `large_space` (32 TiB, at most a
//! quarter of an address-space limit) in all. Past it, the cursor goes back to the oldest
//! region and takes only swept blocks there, skipping those where a view still lives: the
//! addresses of objects freed a `large_space` of allocations ago are handed out again, so a
//! dangling pointer that old could reach a new object (said once, counted in the stats).
//! Without it, a program that allocates large objects for long enough used the address space
//! up (under a 4 GiB `ulimit -v`, after 8 364 objects of 300 000 bytes: malloc failed).

use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use crate::lock::Locked;
use crate::pool::{self, POOL};
use crate::sys::{self, PAGE, PAGE_SHIFT};
use crate::{guard, stats};

/// Table values with this bit are left by freed objects; the rest holds their page count.
pub const TOMB_BIT: u32 = 1 << 31;

const LEAF_SHIFT: usize = 30;
const LEAF_ENTRIES: usize = 1 << (LEAF_SHIFT - PAGE_SHIFT);
const TOP_ENTRIES: usize = 1 << (47 - LEAF_SHIFT);
/// A block: the address range whose entries fill one page of a leaf table.
const BLOCK_SHIFT: usize = PAGE_SHIFT + PAGE_SHIFT - 2;
const BLOCK: usize = 1 << BLOCK_SHIFT;
const BLOCKS_PER_LEAF: usize = 1 << (LEAF_SHIFT - BLOCK_SHIFT);
/// Bytes of a leaf: its entries, then one state word per block and the count of its swept
/// blocks.
const LEAF_BYTES: usize = LEAF_ENTRIES * 4 + (BLOCKS_PER_LEAF + 1) * 4;
/// Low bit of a top-level entry whose leaf was retired.
const RETIRED: usize = 1;
/// Block state: the arena's cursor has passed it (no new view will overlap it).
const PASSED: u32 = 1 << 30;
/// Block state: swept (every view in it freed, its page tables and table page dropped).
const SWEPT: u32 = 1 << 31;
const VIEWS: u32 = PASSED - 1;

static TOP: AtomicPtr<AtomicPtr<AtomicU32>> = AtomicPtr::new(ptr::null_mut());

/// Most regions kept (for reuse); past them, only regions kept are reused.
const MAX_REGIONS: usize = 64;
/// Largest region reserved at once (a bigger request gets a region of its size).
const MAX_REGION: usize = 1 << 40;

struct Arena {
    /// The cursor: views are placed from here on, up to `end`, the end of its region.
    next: usize,
    end: usize,
    /// The regions reserved, block-aligned, as (start, end); the first `nregions` are used.
    regions: [(usize, usize); MAX_REGIONS],
    nregions: usize,
    /// Bytes reserved for regions.
    reserved: usize,
    /// The region to go back to when `large_space` is used up (the oldest not gone back to).
    wrap: usize,
    /// The cursor is in a region used before: it takes only swept blocks (`fit`).
    reusing: bool,
}

static ARENA: Locked<Arena> = Locked::new(Arena {
    next: 0,
    end: 0,
    regions: [(0, 0); MAX_REGIONS],
    nregions: 0,
    reserved: 0,
    wrap: 0,
    reusing: false,
});

/// Live views. Each is a mapping, and splits the arena's reservation in two: two of the
/// process's mappings (`vm.max_map_count`, 65 530 by default), which the mirrors and the
/// program need too.
static LIVE_VIEWS: AtomicUsize = AtomicUsize::new(0);
/// Live views beyond which bigger objects are page objects instead (`views_scarce`): a
/// quarter of `vm.max_map_count`, so that views take at most half of the mappings; lowered to
/// the views there are when fewer than `HEADROOM` mappings are left (`count_mappings`), or
/// when a view could not be mapped for want of them.
static VIEW_BUDGET: AtomicUsize = AtomicUsize::new(65_530 / 4);
static MAX_MAPPINGS: AtomicUsize = AtomicUsize::new(65_530);
/// Every this many new views, the process's mappings are counted (a read of /proc/self/maps):
/// when the live views reach `NEXT_COUNT`, which then moves this many above them, and back
/// down when as many views again were freed, so that a program whose live views swing about
/// one level does not read the file at every swing.
const COUNT_EVERY: usize = 512;
static NEXT_COUNT: AtomicUsize = AtomicUsize::new(COUNT_EVERY);
/// Mappings kept for the alias arena's new mirrors and the program: the views of `COUNT_EVERY`
/// objects and as many again.
const HEADROOM: usize = 4 * COUNT_EVERY + 2048;

/// Sets up the table's top level. Returns false when out of memory.
pub fn init() -> bool {
    let t = crate::meta::map(TOP_ENTRIES * 8);
    TOP.store(t as *mut AtomicPtr<AtomicU32>, Ordering::Release);
    let mut buf = [0u8; 24];
    let max = sys::read_file(c"/proc/sys/vm/max_map_count", &mut buf)
        .and_then(|n| crate::config::parse_uint(buf[..n].trim_ascii_end()));
    if let Some(v) = max.filter(|&v| v > 0) {
        VIEW_BUDGET.store(v as usize / 4, Ordering::Relaxed);
        MAX_MAPPINGS.store(v as usize, Ordering::Relaxed);
    }
    !t.is_null()
}

/// Whether live views took their share of the process's mappings: then objects that would be
/// large are page objects of the alias arena's mirrors (`heap::alloc_big`), which take no
/// mapping of their own, but have all their pages filled at once, cannot grow in place, and
/// reject alignments above a page. Without it, views used the mappings up and every
/// allocation that needed one failed (`tests/c/mappings.c`; glibc's merge into a few).
pub fn views_scarce() -> bool {
    LIVE_VIEWS.load(Ordering::Relaxed) >= VIEW_BUDGET.load(Ordering::Relaxed)
}

/// A leaf of the table.
enum Leaf {
    Absent,
    /// Every block of its gigabyte was swept: it reads as zeroes (`retire`).
    Retired,
    Live(*mut AtomicU32),
}

/// The top-level entry for `addr`.
fn top_entry(addr: usize) -> Option<&'static AtomicPtr<AtomicU32>> {
    let top = TOP.load(Ordering::Acquire);
    let hi = addr >> LEAF_SHIFT;
    if top.is_null() || hi >= TOP_ENTRIES {
        return None;
    }
    // SAFETY: `hi` < TOP_ENTRIES, the size of the top level.
    Some(unsafe { &*top.add(hi) })
}

/// The leaf for `addr`, made if `create` and absent (never for a retired one).
fn leaf(addr: usize, create: bool) -> Leaf {
    let Some(entry) = top_entry(addr) else { return Leaf::Absent };
    let leaf = entry.load(Ordering::Acquire);
    if leaf as usize & RETIRED != 0 {
        return Leaf::Retired;
    }
    if !leaf.is_null() {
        return Leaf::Live(leaf);
    }
    if !create {
        return Leaf::Absent;
    }
    let fresh = crate::meta::map(LEAF_BYTES) as *mut AtomicU32;
    if fresh.is_null() {
        return Leaf::Absent;
    }
    match entry.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Leaf::Live(fresh),
        Err(other) => {
            crate::meta::unmap(fresh as *mut u8, LEAF_BYTES);
            if other as usize & RETIRED != 0 {
                Leaf::Retired
            } else {
                Leaf::Live(other)
            }
        }
    }
}

fn slot(addr: usize, create: bool) -> Option<&'static AtomicU32> {
    match leaf(addr, create) {
        // SAFETY: the index is below LEAF_ENTRIES.
        Leaf::Live(l) => Some(unsafe { &*l.add((addr >> PAGE_SHIFT) & (LEAF_ENTRIES - 1)) }),
        Leaf::Absent | Leaf::Retired => None,
    }
}

/// The state word of the block holding `addr` (its leaf created if `create`).
fn block(addr: usize, create: bool) -> Option<&'static AtomicU32> {
    let first = slot(addr & !(LEAF_ENTRIES * PAGE - 1), create)? as *const AtomicU32;
    let b = (addr >> BLOCK_SHIFT) & (BLOCKS_PER_LEAF - 1);
    // SAFETY: the state words follow the leaf's entries (see LEAF_BYTES).
    Some(unsafe { &*first.add(LEAF_ENTRIES + b) })
}

/// The count of swept blocks of the leaf holding `addr`.
fn swept_blocks(addr: usize) -> Option<&'static AtomicU32> {
    let first = slot(addr & !(LEAF_ENTRIES * PAGE - 1), false)? as *const AtomicU32;
    // SAFETY: the count follows the state words (see LEAF_BYTES).
    Some(unsafe { &*first.add(LEAF_ENTRIES + BLOCKS_PER_LEAF) })
}

/// Whether the block holding `addr` was swept (or its whole leaf retired).
fn swept(addr: usize) -> bool {
    // The tag is read again after the state word: a reader that found the leaf before it was
    // retired may read its state as zero (the leaf reads as zeroes once retired), but then
    // finds the tag, which was set before.
    block(addr, false).is_some_and(|b| b.load(Ordering::Acquire) & SWEPT != 0)
        || matches!(leaf(addr, false), Leaf::Retired)
}

/// Every block of the leaf holding `addr` was swept: the leaf's entries are all dropped, and its
/// state words say only that. The leaf is given back, replaced by a mapping that reads as zeroes
/// and is not charged to the process; lookups find the tag instead (arena lock held).
#[cold]
fn retire(addr: usize) {
    let Some(entry) = top_entry(addr) else { return };
    let leaf = entry.load(Ordering::Acquire);
    if leaf.is_null() || leaf as usize & RETIRED != 0 {
        return;
    }
    entry.store((leaf as usize | RETIRED) as *mut AtomicU32, Ordering::Release);
    // Should this fail, the leaf stays as it is, writable, and the tag answers for it all the
    // same.
    sys::replace_readable(leaf as *mut u8, LEAF_BYTES);
    stats::add(&stats::LARGE_LEAVES_RETIRED, 1);
}

/// Makes the retired leaf holding `addr` writable again, every block of it swept, for the
/// cursor that comes back to its addresses (arena lock held). False when the system refuses.
#[cold]
fn revive(addr: usize) -> bool {
    let Some(entry) = top_entry(addr) else { return false };
    let leaf = (entry.load(Ordering::Acquire) as usize & !RETIRED) as *mut AtomicU32;
    if leaf.is_null() || !sys::make_writable(leaf as *mut u8, sys::round_up(LEAF_BYTES, PAGE)) {
        return false;
    }
    for b in 0..=BLOCKS_PER_LEAF {
        let v = if b < BLOCKS_PER_LEAF { PASSED | SWEPT } else { BLOCKS_PER_LEAF as u32 };
        // SAFETY: the state words and the count follow the leaf's entries (see LEAF_BYTES).
        unsafe { (*leaf.add(LEAF_ENTRIES + b)).store(v, Ordering::Relaxed) };
    }
    entry.store(leaf, Ordering::Release);
    true
}

/// Every block start in `[from, to)`.
fn blocks(from: usize, to: usize) -> impl Iterator<Item = usize> {
    ((from & !(BLOCK - 1))..to).step_by(BLOCK)
}

/// Drops what the dead, passed block at `b` still holds (arena lock held).
fn sweep(b: usize, state: &AtomicU32) {
    state.fetch_or(SWEPT, Ordering::AcqRel);
    // The block lies inside the arena's reservation and every view in it is a no-access
    // reservation again: dropping its pages only frees the page tables left behind.
    sys::advise(b as *mut u8, BLOCK, libc::MADV_DONTNEED);
    if let Some(first) = slot(b, false) {
        // The block's entries fill exactly this page of the leaf; swept blocks are not read.
        sys::advise(first as *const AtomicU32 as *mut u8, PAGE, libc::MADV_DONTNEED);
    }
    stats::add(&stats::LARGE_BLOCKS_SWEPT, 1);
    if swept_blocks(b).is_some_and(|n| n.fetch_add(1, Ordering::AcqRel) + 1 == BLOCKS_PER_LEAF as u32) {
        retire(b);
    }
}

/// Whether `addr` lies in a gigabyte that holds large objects (its leaf of the table is
/// there): two loads, for callers that look an object up only where there may be one.
#[inline]
pub fn may_hold(addr: usize) -> bool {
    matches!(leaf(addr, false), Leaf::Live(_))
}

/// The table entry for an object starting at `addr`: a descriptor, a tombstone, or 0.
#[inline]
pub fn lookup(addr: usize) -> u32 {
    match slot(addr, false).map_or(0, |s| s.load(Ordering::Acquire)) {
        0 if swept(addr) => TOMB_BIT,
        v => v,
    }
}

/// Takes `len` bytes of address space aligned to `align`, preceded and followed by a guard
/// page: fresh, or once `large_space` is used up, given back long ago (see the module's doc).
fn take_va(len: usize, align: usize) -> Option<usize> {
    let mut a = ARENA.lock();
    // Regions gone back to in this call: each is tried once.
    let mut tries = 0;
    loop {
        if a.next != 0 {
            if let Some(start) = fit(&mut a, len, align) {
                // The view overlaps these blocks: count it before they can be passed.
                for b in blocks(start, start + len) {
                    block(b, true)?.fetch_add(1, Ordering::AcqRel);
                }
                pass(a.next, start + len);
                a.next = start + len;
                return Some(start);
            }
            // The rest of this region is not used this time round.
            let (next, end) = (a.next, a.end);
            pass(next, end);
        }
        // A new region: 1 TiB at most, and half of `large_space` (an eighth of an address-space
        // limit: taking all that is left would starve the alias arena's mirrors and the
        // program), more for huge requests.
        let need = len.checked_add(align)?.checked_add(2 * PAGE + 2 * BLOCK)?;
        let space = space();
        let size = (space / 2).min(MAX_REGION).max(sys::round_up(need, 1 << 21));
        let within = a.reserved.saturating_add(size) <= space;
        if (within && fresh_region(&mut a, size, need))
            || (tries < a.nregions && go_back(&mut a, &mut tries))
            || (!within && fresh_region(&mut a, size, need))
        {
            continue;
        }
        return None;
    }
}

/// The address space large objects take fresh addresses from: `large_space`, and at most a
/// quarter of an address-space limit.
fn space() -> usize {
    let want = crate::options().large_space_mib.saturating_mul(1 << 20);
    sys::as_limit().map_or(want, |l| want.min(sys::pow2_floor(l / 4)))
}

/// Reserves a region of `size` bytes (less, down to `need`, while the kernel refuses) and puts
/// the cursor at its start (arena lock held).
fn fresh_region(a: &mut Arena, mut size: usize, need: usize) -> bool {
    if a.nregions == MAX_REGIONS {
        return false;
    }
    loop {
        let p = sys::reserve(size);
        if !p.is_null() {
            // Whole blocks only, so that sweeping a block never touches anything else.
            a.next = sys::round_up(p as usize, BLOCK);
            a.end = (p as usize + size) & !(BLOCK - 1);
            a.reusing = false;
            let n = a.nregions;
            a.regions[n] = (a.next, a.end);
            a.nregions += 1;
            a.reserved += size;
            return true;
        }
        if size / 2 < need {
            return false;
        }
        size /= 2;
    }
}

/// Puts the cursor back at the start of the oldest region not gone back to since the others
/// were, to take its swept blocks again (arena lock held).
#[cold]
fn go_back(a: &mut Arena, tries: &mut usize) -> bool {
    let k = a.wrap % a.nregions;
    a.wrap = k + 1;
    *tries += 1;
    (a.next, a.end) = a.regions[k];
    a.reusing = true;
    if stats::LARGE_VA_REUSED.fetch_add(1, Ordering::Relaxed) == 0 {
        crate::report::say(format_args!(
            "the address space for large objects ({} MiB) is used up: reusing the addresses of large objects freed \
             long ago (use-after-free protection of large objects is weaker from now on; see large_space)",
            space() >> 20
        ));
    }
    true
}

/// Where a view of `len` bytes aligned to `align` goes from the cursor on, with a guard page
/// before and after it, if the region holds it. In a region gone back to, the view and its
/// guards take only blocks swept since the last time round (or taken this time round): the
/// cursor skips any block where a view still lives (arena lock held).
fn fit(a: &mut Arena, len: usize, align: usize) -> Option<usize> {
    loop {
        let start = sys::round_up(a.next.checked_add(PAGE)?, align);
        let end = start.checked_add(len)?.checked_add(PAGE)?;
        if end > a.end {
            return None;
        }
        if !a.reusing {
            return Some(start);
        }
        if let Some(live) = blocks(a.next, end).find(|&b| !reusable(b)) {
            let from = a.next;
            a.next = live + BLOCK;
            pass(from, a.next);
            continue;
        }
        for b in blocks(a.next, end) {
            if !claim(b) {
                return None;
            }
        }
        return Some(start);
    }
}

/// Whether the block at `b`, in a region gone back to, holds no view from before: swept, or
/// not passed since the cursor came back (arena lock held).
fn reusable(b: usize) -> bool {
    block(b, false).is_none_or(|s| {
        let v = s.load(Ordering::Acquire);
        v & SWEPT != 0 || v & PASSED == 0
    })
}

/// Makes the reusable block at `b` take views again: a swept block starts over (its entries
/// were dropped when it was swept, its leaf is revived if it was retired). False when its
/// leaf cannot be made or revived (arena lock held).
fn claim(b: usize) -> bool {
    if matches!(leaf(b, false), Leaf::Retired) && !revive(b) {
        return false;
    }
    let Some(state) = block(b, true) else { return false };
    if state.load(Ordering::Acquire) & SWEPT != 0 {
        state.store(0, Ordering::Release);
        if let Some(n) = swept_blocks(b) {
            n.fetch_sub(1, Ordering::AcqRel);
        }
    }
    true
}

/// The cursor moved from `from` to `to`: blocks wholly below `to` are passed, and swept at once
/// when no view overlaps them (arena lock held).
fn pass(from: usize, to: usize) {
    for b in blocks(from, to & !(BLOCK - 1)) {
        if let Some(state) = block(b, false) {
            let v = state.fetch_or(PASSED, Ordering::AcqRel);
            if v & (VIEWS | PASSED | SWEPT) == 0 {
                sweep(b, state);
            }
        }
    }
}

/// A view `[view, view + len)` is gone: blocks it leaves without views are swept if passed.
fn view_gone(view: usize, len: usize) {
    let _a = ARENA.lock();
    for b in blocks(view, view + len) {
        if let Some(state) = block(b, false) {
            let v = state.fetch_sub(1, Ordering::AcqRel) - 1;
            if v & VIEWS == 0 && v & PASSED != 0 && v & SWEPT == 0 {
                sweep(b, state);
            }
        }
    }
}

/// Most room a growing object gets beyond its size (see `alloc`).
const MAX_ROOM: usize = 1 << 30;

/// The room a growing object of `len` bytes (its view) gets beyond it: half as much again.
fn room_for(len: usize) -> usize {
    sys::round_up((len / 2).min(MAX_ROOM), PAGE)
}

/// Lengthens the reservation of a view that ends at `end` by `extra` bytes, if it is the
/// last view taken and the arena's region holds them (with the guard page after).
fn extend_va(end: usize, extra: usize) -> bool {
    let mut a = ARENA.lock();
    // In a region gone back to, the blocks after the cursor may hold live views.
    if a.reusing || a.next != end || end.checked_add(extra + PAGE).is_none_or(|e| e > a.end) {
        return false;
    }
    // Count the view in the blocks it reaches now (those it overlapped already counted it),
    // once every one of them has its state word.
    let new_blocks = || blocks(sys::round_up(end, BLOCK), end + extra);
    if new_blocks().any(|b| block(b, true).is_none()) {
        return false;
    }
    for b in new_blocks() {
        if let Some(state) = block(b, false) {
            state.fetch_add(1, Ordering::AcqRel);
        }
    }
    pass(a.next, end + extra);
    a.next = end + extra;
    stats::add(&stats::LARGE_VA_BYTES, extra as u64);
    true
}

/// Allocates a large object of `size` bytes aligned to `align` (>= 16). Zeroes it if asked.
///
/// With `room` (for `realloc` growing an object), the object gets half its length again, up
/// to `MAX_ROOM`, of pool pages and address space beyond its view, so that growing it further
/// maps more of its run where it is (`grow`) instead of copying it each time: a buffer grown a
/// page at a time is copied a logarithmic number of times, not once per step. The room's pool
/// pages stay holes until used; its addresses stay no-access.
pub fn alloc(size: usize, align: usize, zero: bool, room: bool) -> *mut u8 {
    let Some(total) = size.checked_add(guard::CANARY) else { return ptr::null_mut() };
    let len = sys::round_up(total, PAGE);
    let pool_pages = POOL.layout().pages as usize;
    if len >> PAGE_SHIFT >= pool_pages {
        return ptr::null_mut();
    }
    let extra = if room { room_for(len) } else { 0 };
    let mut npages = ((len + extra) >> PAGE_SHIFT).min(pool_pages - 1);
    let (idx, dirty) = match POOL.alloc_run(npages as u32, pool::LARGE) {
        Some(r) => r,
        None if npages > len >> PAGE_SHIFT => {
            npages = len >> PAGE_SHIFT;
            match POOL.alloc_run(npages as u32, pool::LARGE) {
                Some(r) => r,
                None => return ptr::null_mut(),
            }
        }
        None => return ptr::null_mut(),
    };
    let reserved = npages << PAGE_SHIFT;
    let Some(view) = take_va(reserved, align.max(PAGE)) else {
        POOL.free_run(idx);
        return ptr::null_mut();
    };
    stats::add(&stats::LARGE_VA_BYTES, (reserved + PAGE) as u64);
    let start = if align <= 16 { (view + len - total) & !15 } else { view };
    let s = POOL.span_owned(idx);
    let canon = POOL.page_addr(s.start) as *mut u8;
    let entry = slot(start, true);
    if entry.is_none() || !sys::duplicate_view(canon, view as *mut u8, len) {
        if entry.is_some() && sys::errno() == libc::ENOMEM {
            // Out of mappings (the program's own take them too): no more views than now.
            VIEW_BUDGET.store(LIVE_VIEWS.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        sys::rereserve(view as *mut u8, len);
        view_gone(view, reserved);
        POOL.free_run(idx);
        return ptr::null_mut();
    }
    s.addr = start;
    s.view = view;
    s.view_len = len;
    if zero && dirty {
        // SAFETY: `start .. start+size` lies inside the freshly mapped view.
        unsafe { ptr::write_bytes(start as *mut u8, 0, size) };
    }
    s.size.store(size, Ordering::Release);
    if crate::stack::enabled() {
        s.trace.set_alloc(crate::stack::record(), crate::heap::my_tid(), 0);
    }
    arm(s, start, size);
    if start != view {
        // SAFETY: `[view, start)` lies in the view just mapped, before the object, and belongs
        // to no object (`heap::head_damage` checks it; the object never moves in its view).
        unsafe { guard::arm_tail(start, view, start) };
    }
    if let Some(e) = entry {
        e.store(idx, Ordering::Release);
    }
    stats::add(&stats::LARGE_OBJECTS, 1);
    let live = LIVE_VIEWS.fetch_add(1, Ordering::Relaxed) + 1;
    let next = NEXT_COUNT.load(Ordering::Relaxed);
    if live >= next
        && NEXT_COUNT.compare_exchange(next, live + COUNT_EVERY, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    {
        count_mappings(live);
    }
    start as *mut u8
}

/// With `live` views, stops making more when the process's mappings (its own count too) leave
/// fewer than `HEADROOM`: a process that maps much of its own would otherwise run out with
/// views, and then the mirrors that page objects need could not be made either.
#[cold]
fn count_mappings(live: usize) {
    let Some(used) = stats::vma_count() else { return };
    if MAX_MAPPINGS.load(Ordering::Relaxed).saturating_sub(used as usize) < HEADROOM {
        VIEW_BUDGET.fetch_min(live, Ordering::Relaxed);
    }
}

/// Grows the live large object `idx` at `start` to `size` bytes where it is, when the room
/// its run and its address space have beyond its view holds it (see `alloc`): maps more of
/// the run behind the view. Returns false when it does not fit, and the caller moves it. The
/// object then no longer ends against the guard but up to a page short of it, as after a
/// shrinking `realloc`; `arm` fills that gap with canary bytes, checked at `free`.
pub fn grow(idx: u32, start: usize, size: usize) -> bool {
    let s = POOL.span_owned(idx);
    let Some(end) = (start - s.view).checked_add(size).and_then(|e| e.checked_add(guard::CANARY)) else {
        return false;
    };
    let len = sys::round_up(end, PAGE);
    let reserved = (s.npages as usize) << PAGE_SHIFT;
    if len > reserved {
        // Past its room: the run and the address space may still be lengthened where they
        // end (the run ends the pool's used part or a free run follows it; no view was placed
        // after this one), with room again.
        let want = sys::round_up(len + room_for(len), PAGE);
        let Some(more) = u32::try_from((want - reserved) >> PAGE_SHIFT).ok() else { return false };
        if !POOL.extend_run(idx, more, || extend_va(s.view + reserved, want - reserved)) {
            return false;
        }
    }
    if len > s.view_len {
        // A fork copies the views while it holds this lock: it sees the view before or after.
        let _a = ARENA.lock();
        let more = POOL.page_addr(s.start) + s.view_len;
        if !sys::duplicate_view(more as *mut u8, (s.view + s.view_len) as *mut u8, len - s.view_len) {
            return false;
        }
        s.view_len = len;
    }
    true
}

/// Shrinks the live large object `idx` at `start` to `size` bytes where it is (`size` still
/// above page objects), unless it would keep less than half of its view: then it returns false
/// and the caller moves it (a copy of the smaller size), so that a big buffer cut down to a
/// small one does not keep its run. In place, the pages of the view past the object's new end
/// (and its canary) go back: unmapped, and their pool pages punched, so that the memory returns
/// to the system and the view ends at most a page after the object; they stay the object's
/// room to grow again.
pub fn shrink(idx: u32, start: usize, size: usize) -> bool {
    let s = POOL.span_owned(idx);
    let len = sys::round_up(start - s.view + size + guard::CANARY, PAGE);
    if len < s.view_len / 2 {
        return false;
    }
    if len < s.view_len {
        // A fork copies the views while it holds this lock: it sees the view before or after.
        let _a = ARENA.lock();
        if !sys::rereserve((s.view + len) as *mut u8, s.view_len - len) {
            // Still mapped: keep the view as it was (its tail is armed with canary bytes).
            return true;
        }
        let pages = POOL.page_addr(s.start) + len;
        sys::advise(pages as *mut u8, s.view_len - len, libc::MADV_REMOVE);
        s.view_len = len;
    }
    true
}

/// Writes the canary after the live large object at `start`, of `size` bytes, and fills the
/// rest of its view with canary bytes too: that gap (alignment; up to a page after `realloc`
/// resized the object where it is) is mapped, so an overflow into it faults nowhere, and
/// `tail_damage` finds it at `free`. (The bytes before the object, from its view's start, are
/// filled once, by `alloc`.)
pub fn arm(s: &pool::Span, start: usize, size: usize) {
    // SAFETY: the object lies in its view with room for the canary before the view's end; the
    // tail after the canary belongs to no object.
    unsafe {
        guard::arm(start, size);
        guard::arm_tail(s.view, start + size + guard::CANARY, s.view + s.view_len);
    }
}

/// The first overwritten byte among those `arm` filled between the object's canary and its
/// view's end, if any (the canary itself is checked by the caller).
pub fn tail_damage(s: &pool::Span, start: usize, size: usize) -> Option<usize> {
    // SAFETY: the range lies in the live object's view, mapped.
    unsafe { guard::tail_damage(s.view, start + size + guard::CANARY, s.view + s.view_len) }
}

/// Releases a large object whose size was already flipped to dead by the caller.
pub fn release(idx: u32, start: usize) {
    let s = POOL.span(idx);
    let (view, len, reserved) = (s.view, s.view_len, (s.npages as usize) << PAGE_SHIFT);
    if let Some(e) = slot(start, false) {
        // The tombstone covers the object's whole reservation: a dangling pointer into the
        // pages a cut gave back or into the room it kept to grow is a use after free too.
        let pages = ((view + reserved - (start & !(PAGE - 1))) >> PAGE_SHIFT) as u32;
        e.store(TOMB_BIT | pages.min(TOMB_BIT - 1), Ordering::Release);
    }
    sys::rereserve(view as *mut u8, len);
    view_gone(view, reserved);
    POOL.free_run(idx);
    let live = LIVE_VIEWS.fetch_sub(1, Ordering::Relaxed) - 1;
    let next = NEXT_COUNT.load(Ordering::Relaxed);
    if live + 2 * COUNT_EVERY <= next {
        let _ = NEXT_COUNT.compare_exchange(next, live + COUNT_EVERY, Ordering::Relaxed, Ordering::Relaxed);
    }
}

pub fn raw_lock() -> &'static crate::lock::RawMutex {
    ARENA.raw()
}

/// What the large-object table says about an address near a fault.
pub enum Owner {
    Live { idx: u32 },
    Freed { pages: usize },
}

/// The object whose start page is nearest below `addr` (or just above it, for an access in
/// the guard page before a view), within 1 GiB. For fault reports only: a cold path.
pub fn owner_near(addr: usize) -> Option<(usize, Owner)> {
    const SCAN: usize = 1 << 18;
    let page = addr & !(PAGE - 1);
    let decode = |a: usize, v: u32| {
        if v & TOMB_BIT != 0 {
            Some((a, Owner::Freed { pages: (v & !TOMB_BIT) as usize }))
        } else {
            Some((a, Owner::Live { idx: v }))
        }
    };
    if swept(page) {
        // Every object of this block was freed long ago; the entries are gone.
        return Some((page, Owner::Freed { pages: 1 }));
    }
    for k in 0..SCAN {
        let Some(a) = page.checked_sub(k * PAGE) else { break };
        match slot(a, false) {
            Some(e) => {
                let v = e.load(Ordering::Acquire);
                if v != 0 {
                    return decode(a, v);
                }
            }
            // No table for this gigabyte: skip to the one below.
            None => {
                if a < (1 << LEAF_SHIFT) {
                    break;
                }
            }
        }
    }
    let a = page + PAGE;
    if let Some(e) = slot(a, false) {
        let v = e.load(Ordering::Acquire);
        if v != 0 && v & TOMB_BIT == 0 {
            return decode(a, v);
        }
    }
    // The object may start further into its view: look a little further up.
    for k in 2..64 {
        let a = page + k * PAGE;
        if let Some(e) = slot(a, false) {
            let v = e.load(Ordering::Acquire);
            if v != 0 && v & TOMB_BIT == 0 {
                return decode(a, v);
            }
        }
    }
    None
}
