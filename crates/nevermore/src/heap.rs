//! The allocator's front end: picks the tier for a request (small slot, page object, large
//! object), resolves pointers given back to it, and checks every pointer and canary before
//! changing anything — a rejected call leaves the heap exactly as it was.
//!
//! Every address handed out is an alias (see `alias`): small slots and page objects live in
//! the mirrors of the current epoch, large objects in guarded views of their own. A pointer is
//! resolved from its alias: (epoch, pool page) from the arena's chunk table, then the pool
//! page's span; it is live only if the span's record for that epoch says so.

use core::ptr;
use core::sync::atomic::{compiler_fence, AtomicU16, AtomicUsize, Ordering};

use crate::cache::{self, Cache, Pending};
use crate::guard::{self, CANARY};
use crate::pool::{self, POOL};
use crate::reentry::{self, Scope};
use crate::report::{self, Kind, Object, Report};
use crate::slab::{self, Slot, CLASSES, FREED};
use crate::sys::{self, PAGE, PAGE_SHIFT};
use crate::{alias, large, stack, stats, streams, tls};

/// Objects whose size plus canary fit in this many bytes are page objects; bigger ones are
/// large objects with their own guarded view.
pub const MAX_PAGE_OBJECT: usize = 128 << 10;

/// Requests above this can never be satisfied (and would overflow size arithmetic).
pub const MAX_REQUEST: usize = 1 << 46;

/// The calling thread's cache, created on first use; null for a thread that is exiting or
/// when the allocator could not initialise.
#[inline]
fn my_cache() -> *mut Cache {
    let c = tls::get();
    if !c.is_null() {
        return if c == tls::EXITED { ptr::null_mut() } else { c };
    }
    new_thread_cache()
}

/// The calling thread's id, from its cache when it has one (reset in a forked child).
pub fn my_tid() -> u32 {
    let c = tls::get();
    if c.is_null() || c == tls::EXITED {
        return sys::gettid();
    }
    // SAFETY: this thread's own cache; `tid` is only read and written by its owner.
    unsafe {
        if (*c).tid == 0 {
            (*c).tid = sys::gettid();
        }
        (*c).tid
    }
}

#[cold]
fn new_thread_cache() -> *mut Cache {
    if !crate::ensure_init() {
        return ptr::null_mut();
    }
    let c = cache::create();
    if !c.is_null() {
        tls::set(c);
        crate::register_thread(c);
    }
    c
}

/// `malloc`.
#[inline]
pub fn malloc(size: usize) -> *mut u8 {
    let scope = Scope::enter();
    if scope.nested() {
        return reentry::malloc(size, 16);
    }
    malloc_in(size)
}

#[inline]
fn malloc_in(size: usize) -> *mut u8 {
    match slab::class_for(size) {
        Some(ci) => alloc_small(ci, size, false),
        None => alloc_big(size, 16, false, false),
    }
}

/// `guard_all=1` (detect mode only): small objects are page objects too, each against a guard
/// page of its own (`page_layout`), instead of sharing pool pages with other objects. Slabs
/// then never refill a thread's bins (`cache::refill`), so the check is off the common path:
/// `alloc_small` turns to `alloc_big` when it gets no slot.
#[inline(always)]
pub fn guard_all() -> bool {
    crate::options().guard_all
}

/// `calloc`-style: zeroed memory.
pub fn malloc_zeroed(size: usize) -> *mut u8 {
    let scope = Scope::enter();
    if scope.nested() {
        return reentry::malloc(size, 16);
    }
    zeroed_in(size)
}

#[inline]
fn zeroed_in(size: usize) -> *mut u8 {
    match slab::class_for(size) {
        Some(ci) => alloc_small(ci, size, true),
        None => alloc_big(size, 16, true, false),
    }
}

// ---- what the C library reads where a fault cannot be mended ----

/// The dynamic linker's code, start and length (`stack::loader_text`), set at initialisation.
static LOADER: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// Finds the dynamic linker's code (initialisation).
pub fn note_loader() {
    if let Some((lo, hi)) = stack::loader_text() {
        LOADER[0].store(lo, Ordering::Relaxed);
        LOADER[1].store(hi - lo, Ordering::Relaxed);
    }
}

/// Whether `caller` is in the code `range` (start, length) names.
#[inline(always)]
pub fn within(range: &[AtomicUsize; 2], caller: usize) -> bool {
    caller.wrapping_sub(range[0].load(Ordering::Relaxed)) < range[1].load(Ordering::Relaxed)
}

/// Whether an allocation of `size` bytes whose call returns to `caller` is one the C library
/// reads where a fault on a page that lost its entry cannot be mended, which gets a view of
/// its own (`view_malloc`):
///
/// - with every signal blocked: the dynamic linker's own (a thread's DTV, the TLS blocks of
///   modules loaded later, its records of them), and the locale data tables made inside
///   `setlocale` and `newlocale` (`io`);
/// - inside its own system calls: a stream's buffer (`streams`).
#[inline(always)]
pub fn needs_view(caller: usize, size: usize) -> bool {
    within(&LOADER, caller)
        || streams::called_from(caller)
        || streams::opens_directory(caller)
        || (size >= LOCALE_TABLE_MIN && tls::in_views())
}

/// The smallest allocation inside `setlocale` and `newlocale` that gets a view. A category's
/// data table is a header and 8 bytes per item: `LC_CTYPE`'s, the one a new thread reads, has
/// some 90 items (792 bytes for C.UTF-8). The rest are the names, paths and lists the lookup
/// makes, below 256 bytes: `setlocale(LC_ALL, "")` for C.UTF-8 allocated 198 objects, 5 of
/// them of 256 bytes or more (424, 472, 792, 1328, 4096). A view costs a page at least.
const LOCALE_TABLE_MIN: usize = 256;

/// `malloc`/`calloc` for what `needs_view`: a large object, in a view of its own that
/// userfaultfd does not watch, instead of a slot behind an alias.
///
/// Why: a live alias page can lose its page-table entry (pageout, swap), and the next access
/// raises SIGBUS, which the fault handler mends; but a SIGBUS raised while it is blocked
/// reaches no handler, and the kernel kills the process. The C library blocks every signal
/// in a thread's first and last steps and reads heap memory there: a new thread reads the
/// global locale's `LC_CTYPE` data (`__ctype_init`), and an exiting thread trims the cache of
/// thread stacks, reading the DTVs of the stacks it drops (`__nptl_free_stacks`,
/// `_dl_deallocate_tls`). A threaded Python server under steady pageout died of both. And an
/// access by the kernel, inside a system call, reaches no handler either: stdio's own `read`
/// and `write` on a stream's buffer fail with `EFAULT`. A missing entry in a view is an
/// ordinary page fault, which the kernel mends for itself too. The object is a large object:
/// an address as fresh as any large object's (`large`), a guard page, a view that becomes
/// no-access when it is freed, a canary checked as any other's; it costs a page at least. A
/// kept stream buffer is the exception: handed to one stream after another (`streams`).
///
/// A stream's buffer is taken from those that closed streams left (`streams`) when one of
/// its size is there, and a new one is kept for that.
#[cold]
#[inline(never)]
pub fn view_malloc(size: usize, zero: bool, caller: usize) -> *mut u8 {
    let scope = Scope::enter();
    if scope.nested() {
        return reentry::malloc(size, 16);
    }
    if streams::learn(caller, size) {
        return ptr::null_mut();
    }
    if zero || !streams::called_from(caller) {
        return view_alloc(size, zero);
    }
    if let Some(p) = streams::take(size) {
        restamp_stream_buffer(p, true);
        return p as *mut u8;
    }
    let p = view_alloc(size, false);
    // Only a view: `view_alloc` falls back to an ordinary object, whose `free` never looks
    // for kept buffers.
    if !p.is_null() && !alias::in_arena(p as usize) && !reentrant_object(p as usize) {
        streams::keep(p as usize, size);
    }
    p
}

/// A view of `size` bytes for a stream to use instead of a buffer of the program's
/// (`streams::lend`), or 0 when none can be made (no userfaultfd, views scarce).
#[cold]
#[inline(never)]
pub fn view_buffer(size: usize) -> usize {
    let scope = Scope::enter();
    if scope.nested() {
        return 0;
    }
    let p = view_alloc(size, false);
    if p.is_null() {
        return 0;
    }
    // `view_alloc` falls back to an ordinary object, which would be no better than the
    // program's own buffer.
    if alias::in_arena(p as usize) || reentrant_object(p as usize) {
        free_in(p as usize, "free");
        return 0;
    }
    p as usize
}

/// `realloc` for what `needs_view` (`view_malloc`): a growing DTV moves to a view too.
#[cold]
#[inline(never)]
pub fn view_realloc(p: *mut u8, size: usize) -> *mut u8 {
    let scope = Scope::enter();
    if scope.nested() {
        return realloc_nested(p as usize, size);
    }
    if p.is_null() {
        return view_alloc(size, false);
    }
    if size == 0 || size > MAX_REQUEST || !crate::ensure_init() {
        return realloc_in(p, size);
    }
    let old = live_size(p as usize, "realloc");
    moved(p as usize, old, size, |n| view_alloc(n, false), free_in)
}

fn view_alloc(size: usize, zero: bool) -> *mut u8 {
    if size <= MAX_REQUEST
        && crate::ensure_init()
        && alias::revoke_kind() == alias::Revoke::Uffd
        && !large::views_scarce()
    {
        let p = large::alloc(size, 16, zero, false);
        if !p.is_null() {
            stats::add(&stats::VIEW_OBJECTS, 1);
            return p;
        }
    }
    if zero {
        zeroed_in(size)
    } else {
        malloc_in(size)
    }
}

/// Allocation with an alignment (a power of two).
pub fn malloc_aligned(size: usize, align: usize) -> *mut u8 {
    let scope = Scope::enter();
    if scope.nested() {
        return reentry::malloc(size, align);
    }
    if align <= 16 {
        return malloc_in(size);
    }
    if align <= slab::MAX_SLOT && !guard_all() {
        if let Some(ci) = slab::class_for_aligned(size, align) {
            return alloc_small(ci, size, false);
        }
    }
    alloc_big(size, align, false, false)
}

#[inline]
fn alloc_small(ci: usize, size: usize, zero: bool) -> *mut u8 {
    let c = my_cache();
    let p = if !c.is_null() {
        // SAFETY: `c` is this thread's own cache; no other thread touches its bins.
        let cache = unsafe { &mut *c };
        let (p, entry) = cache::take(&mut cache.bins[ci], ci, size);
        if p == 0 {
            return no_slot(size, zero);
        }
        Cache::count(&cache.mallocs, 1);
        Cache::count(&cache.alloc_bytes, size as u64);
        note_last(cache, p, entry);
        p
    } else if crate::ensure_init() {
        cache::take_uncached(ci, size)
    } else {
        0
    };
    if p == 0 {
        return no_slot(size, zero);
    }
    if crate::detect() {
        check_free_slot(p);
    }
    if zero {
        // SAFETY: the slot is ours and holds at least size + CANARY bytes.
        unsafe { ptr::write_bytes(p as *mut u8, 0, size) };
    }
    // SAFETY: the slot holds size + CANARY bytes.
    unsafe { guard::arm(p, size) };
    if crate::detect() {
        arm_slack(p, size, CLASSES[ci].size);
    }
    if stack::enabled() {
        note_alloc(p);
    }
    p as *mut u8
}

/// Detect mode: the end of the bytes after the slot at `p` (of a class of `slot` bytes) that
/// no object of its page can hold: the slot's end, or its page's for the page's last slot,
/// whose page tail (`PAGE % slot` bytes) belongs to no slot.
#[inline]
fn slack_end(p: usize, slot: u32) -> usize {
    let slot = slot as usize;
    if (p & (PAGE - 1)) + 2 * slot > PAGE {
        (p | (PAGE - 1)) + 1
    } else {
        p + slot
    }
}

/// Detect mode: fills the slack of the small object `p` of `size` bytes (the bytes after its
/// canary up to `slack_end`) with canary bytes keyed with `p`, checked with the canary
/// (`slack_damage`). In detect mode each small object has an alias page of its own but shares
/// its pool page, through which a write past its canary reaches its slot's slack or the slots
/// after it: 0–15 bytes of slack up to the 160-byte class, up to 687 in the 2 048-byte one,
/// plus a page tail of up to 256 bytes (the 320-byte class) after a page's last slot. So a
/// write that skips the canary (`p[size + 8 + k]`), or one just before the next slot's object
/// (`q[-1]` where the slack lies there), is found at this object's `free` instead of going
/// unseen. Prevent mode, whose cost is the point, keeps the canary alone.
#[inline(never)]
fn arm_slack(p: usize, size: usize, slot: u32) {
    // SAFETY: the slot (and, for a page's last slot, the page tail after it) is ours up to
    // `slack_end`; nothing of any object lies after the canary.
    unsafe { guard::arm_tail(p, p + size + CANARY, slack_end(p, slot)) };
}

/// Detect mode: the key of the canary bytes a free slot holds (`poison_slot`): the slot's own,
/// its slab's number (`Span::gen`, which no other slab had, so that bytes a slab before it left
/// in the same pages are not taken for its own) and its index, the same under every alias it is
/// issued under.
fn free_slot_key(idx: u32, slot: u32) -> usize {
    ((POOL.span(idx).gen as usize) << 32) | slot as usize
}

/// Detect mode: fills the slot of the small object `p`, freed (dead, its alias not yet
/// revoked), up to `slack_end`, with canary bytes keyed with the slot (`free_slot_key`). A
/// free slot belongs to no object, but the other objects of its pool page reach it through
/// their own alias pages: a write past one of them that lands in a free slot, beyond its own
/// slot's slack, is found when the slot is next allocated (`check_free_slot`).
#[inline(never)]
fn poison_slot(p: usize, idx: u32, slot: u32) {
    // SAFETY: the dead object's slot and slack, mapped at its canary view (the slot's alias is
    // revoked only after this), hold no object.
    unsafe { fill_free_slot(idx, slot, canary_view(p), CLASSES[POOL.span(idx).class as usize].size) };
}

/// Fills the free slot `slot` of the slab `idx` (`size` bytes, the class's), seen at `view`,
/// and its slack (`slack_end`, which depends only on the offset in the page, the same in every
/// view), with the canary bytes `free_slot_damage` checks.
///
/// # Safety
/// The slot and its slack must be writable at `view` and hold no object.
unsafe fn fill_free_slot(idx: u32, slot: u32, view: usize, size: u32) {
    // SAFETY: the caller's promise.
    unsafe { guard::arm_tail(free_slot_key(idx, slot), view, slack_end(view, size)) };
}

/// Detect mode: fills every slot of the pages of the slab `idx` in `pages` (bit j: page j),
/// with their slack, as `poison_slot` fills a freed one, through their aliases of epoch `e`,
/// installed for the lanes just issued on them, at their first issue in the slab (class lock
/// held): a write that lands in a slot never allocated yet is found as one in a freed slot
/// is. A page never issued holds no object, and no write through the slab reaches it. (The
/// pool's own view would do without the aliases, but its page-table entries would then have
/// to be dropped again: a page mapped twice is one `MADV_PAGEOUT` and DAMON pass over, and a
/// system call and TLB flush per slab took a quarter more time in a detect-mode python run.)
pub fn poison_pages(idx: u32, e: u32, pages: u16) {
    let s = POOL.span(idx);
    let c = &CLASSES[s.class as usize];
    let mut todo = pages;
    while todo != 0 {
        let j = todo.trailing_zeros();
        todo &= todo - 1;
        let page = alias::alias(e, s.start + j);
        for pos in 0..c.spp {
            // SAFETY: the alias page of a lane just issued and installed on page `j`, none of
            // whose slots is in use or in any thread's cache (the caller's promise).
            unsafe { fill_free_slot(idx, slab::slot_index(c, j, pos), page + (pos * c.size) as usize, c.size) };
        }
    }
}

/// Detect mode: checks the slot of the small object `p` just taken (not yet written) for bytes
/// written over since `poison_slot` (or, for a slot never used, `poison_pages`) filled it;
/// reports them.
#[inline(never)]
fn check_free_slot(p: usize) {
    let Some((Obj::Small { idx, slot, .. }, _)) = lookup(p) else { return };
    let c = &CLASSES[POOL.span(idx).class as usize];
    if let Some(off) = free_slot_damage(idx, slot, canary_view(p), slack_end(p, c.size) - p) {
        let what = "a free slot's bytes were written over (by a write past the end of an object before it in its page, or before the start of one after it), found when the slot was allocated";
        report::fatal(free_slot_report(idx, slot, p + off, "malloc", what));
    }
}

/// Detect mode: the offset of the first byte written over in the free slot `slot` of the slab
/// `idx` since `poison_slot` or `poison_pages` filled it, reading its `len` bytes (up to
/// `slack_end`) at `view`. A slot whose first and last words both lack the fill (its page's
/// memory released since, which reads as zero) is not looked at.
fn free_slot_damage(idx: u32, slot: u32, view: usize, len: usize) -> Option<usize> {
    let key = free_slot_key(idx, slot);
    let fill = guard::canary_for(key);
    // SAFETY: the caller's slot and slack, mapped at `view` (16-aligned, a multiple of 16
    // bytes long).
    let (first, last) = unsafe { (*(view as *const u64), *((view + len - 8) as *const u64)) };
    if first != fill && last != fill {
        return None;
    }
    // SAFETY: as above.
    unsafe { guard::tail_damage(key, view, view + len) }.map(|at| at - view)
}

/// The report of the byte at `at` (an address of the free slot `slot` of the slab `idx`, or of
/// its slack, in any view of its page) written over while the slot was free, found by `op`:
/// it names the nearest object before the slot in its pool page, live or freed (at the alias it
/// had, from the free history), and the byte at the address it has in that object's alias page
/// (where a write past its end reached it).
#[cold]
#[inline(never)]
fn free_slot_report(idx: u32, slot: u32, at: usize, op: &'static str, what: &'static str) -> Report {
    let s = POOL.span(idx);
    let c = &CLASSES[s.class as usize];
    // Slot `slot` is position `pos` of page `j` of its slab (`slab::slot_index`); the nearest
    // slot before it that ever held an object names it: a live one at its alias, a freed one
    // at the alias it had (gone now, but the address the program knew), from the history.
    let (pos, j) = (slot / c.pages, slot % c.pages);
    let entry = |prev: u32| {
        // SAFETY: a slot index of the slab (< nslots).
        unsafe { (*slab::sizes(s).add(slab::slot_index(c, j, prev) as usize)).load(Ordering::Acquire) }
    };
    let before = (0..pos).rev().find(|&prev| entry(prev) != slab::FREE_SLOT).and_then(|prev| {
        let v = entry(prev);
        let (base, object) = if v & FREED != 0 {
            let h = crate::history::find_slot(s.start + j, (prev * c.size) as usize)?;
            (h.start & !(PAGE - 1), Object { start: h.start, size: h.size })
        } else {
            let e = slab::lane_of(s, c, j, prev).epoch.load(Ordering::Acquire);
            if e == 0 {
                return None;
            }
            let base = alias::alias(e, s.start + j);
            (base, Object { start: base + (prev * c.size) as usize, size: v as usize })
        };
        Some((base + (at & (PAGE - 1)), object))
    });
    let (addr, object) = match before {
        Some((addr, o)) => (addr, Some(o)),
        None => (at, None),
    };
    Report { kind: Kind::HeapBufferOverflow, addr, op, what, object, claimed: None, pointer: None }
}

/// Detect mode, at exit (`leak::check_at_exit`, every other thread held still): the report of
/// the first free slot of any slab whose bytes were written over since it was freed
/// (`poison_slot`) or, never used, its page was first issued (`poison_pages`), read through the
/// pool's own view; the slot will not be allocated again.
pub fn free_slots_damaged() -> Option<Report> {
    // SAFETY: every other thread is held still outside the allocator, or there is none, and
    // this thread is in no allocator call: the descriptor count does not change meanwhile.
    let ndesc = unsafe { POOL.desc_count() };
    for idx in 1..ndesc {
        let s = POOL.span(idx);
        if s.kind != pool::SLAB || !slab::set_up(s) || s.meta.is_null() {
            continue;
        }
        let c = &CLASSES[s.class as usize];
        for slot in 0..c.nslots {
            // SAFETY: `slot` < nslots.
            let v = unsafe { (*slab::sizes(s).add(slot as usize)).load(Ordering::Relaxed) };
            if v & FREED == 0 {
                continue;
            }
            let (pos, j) = (slot / c.pages, slot % c.pages);
            if s.filled & (1 << j) == 0 {
                // The page was never issued in this slab, or its memory went back to the
                // system since (`slab::punch_idle` clears the bit): nothing to check, and a
                // read would fill it again.
                continue;
            }
            let view = POOL.page_addr(s.start + j) + (pos * c.size) as usize;
            if let Some(off) = free_slot_damage(idx, slot, view, slack_end(view, c.size) - view) {
                let what = "a free slot's bytes were written over (by a write past the end of an object before it in its page, or before the start of one after it), found at exit";
                return Some(free_slot_report(idx, slot, view + off, "exit", what));
            }
        }
    }
    None
}

/// Detect mode: the first byte of the slack of the live small object `p` of `size` bytes (see
/// `arm_slack`) that was written over, reading it where `canary_view` maps it.
fn slack_damage(p: usize, size: usize, slot: u32) -> Option<usize> {
    let view = canary_view(p);
    let (from, to) = (p + size + CANARY, slack_end(p, slot));
    // SAFETY: the slack lies in the object's own page (slots never cross pages), which `view`
    // maps at the same offset; `arm_slack` keyed each byte with `p`.
    unsafe { guard::tail_damage(p, view + (from - p), view + (to - p)) }.map(|at| at - view + p)
}

/// `alloc_small` got no slot: a page object instead under `guard_all`, else out of memory.
#[cold]
#[inline(never)]
fn no_slot(size: usize, zero: bool) -> *mut u8 {
    if guard_all() {
        return alloc_big(size, 16, zero, false);
    }
    sys::set_errno(libc::ENOMEM);
    ptr::null_mut()
}

/// Detect mode: records the allocation stack of the small object at `p`.
#[inline(never)]
fn note_alloc(p: usize) {
    if let Some((t, e)) = trace_slot(p) {
        t.set_alloc(stack::record(), my_tid(), e);
    }
}

/// Detect mode: the trace record of the heap object holding `addr` (live or not), with the
/// epoch of `addr`'s alias (0 for large objects).
fn trace_slot(addr: usize) -> Option<(&'static stack::Trace, u32)> {
    if !crate::detect() {
        return None;
    }
    if alias::in_arena(addr) {
        let (e, page) = alias::decode(addr)?;
        let (_, s) = POOL.span_at(POOL.page_addr(page))?;
        match s.kind {
            pool::SLAB if slab::set_up(s) => {
                let c = &CLASSES[s.class as usize];
                let pos = match slab::locate(c, addr & (PAGE - 1)) {
                    Slot::Start(p) | Slot::Interior(p, _) => p,
                    Slot::Tail => return None,
                };
                Some((slab::trace(s, c, slab::slot_index(c, slab::page_index(s, c, page)?, pos)), e))
            }
            pool::PAGES => Some((&s.trace, e)),
            _ => None,
        }
    } else {
        match large::lookup(addr) {
            0 => None,
            v if v & large::TOMB_BIT != 0 => None,
            idx => Some((&POOL.span(idx).trace, 0)),
        }
    }
}

/// For reports: (allocation stack, its thread, free stack, its thread) of the object at
/// `addr`, if it was recorded under the alias `addr` belongs to. Thread 0: not freed.
pub fn trace_of(addr: usize) -> Option<(u32, u32, u32, u32)> {
    // The record was reused by a newer object (or a large object's descriptor was freed): the
    // free history still has what the object's free recorded.
    recorded_trace(addr).or_else(|| crate::history::find(addr).and_then(|h| h.trace))
}

/// The stacks recorded for the heap object holding `addr`, if its trace record still describes
/// it (the record's epoch is `addr`'s) and stacks were recorded.
fn recorded_trace(addr: usize) -> Option<(u32, u32, u32, u32)> {
    let t = current_trace(addr)?;
    Some((
        t.alloc.load(Ordering::Relaxed),
        t.alloc_tid.load(Ordering::Relaxed) & TID_MASK,
        t.free.load(Ordering::Relaxed),
        t.free_tid.load(Ordering::Acquire),
    ))
}

/// The trace record of the heap object holding `addr`, if it still describes it (its epoch is
/// `addr`'s) and an allocation was recorded in it.
fn current_trace(addr: usize) -> Option<&'static stack::Trace> {
    trace_slot(addr)
        .filter(|(t, e)| t.epoch.load(Ordering::Acquire) == *e && t.alloc_tid.load(Ordering::Relaxed) != 0)
        .map(|(t, _)| t)
}

/// The allocation stack and thread recorded in `t` (the thread without the family bits).
pub fn allocation_of(t: &stack::Trace) -> (u32, u32) {
    (t.alloc.load(Ordering::Relaxed), t.alloc_tid.load(Ordering::Relaxed) & TID_MASK)
}

/// Which allocation functions an object came from, for `alloc-dealloc-mismatch`: the C ones
/// (`malloc`, `calloc`, `realloc`, `aligned_alloc`, ...), `operator new` or `operator new[]`.
/// Each has its own deallocation functions; freeing an object with another family's is
/// undefined (a `new[]` array deleted with `delete` skips destructors, one freed with `free`
/// never runs them, and allocators that prefix arrays with their length free the wrong
/// address). Detect mode keeps the family in the two high bits of the trace record's
/// allocating thread (thread numbers stay below 2^22).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Malloc = 0,
    New = 1,
    NewArray = 2,
}

const FAMILY_SHIFT: u32 = 30;
const TID_MASK: u32 = (1 << FAMILY_SHIFT) - 1;

impl Family {
    /// The family numbered `bits` (as stored, and as the C++ entry points pass it).
    pub fn of_bits(bits: u32) -> Family {
        match bits {
            1 => Family::New,
            2 => Family::NewArray,
            _ => Family::Malloc,
        }
    }

    fn allocated_by(self) -> &'static str {
        match self {
            Family::Malloc => "the object was allocated by malloc (or calloc, realloc, ...), to be freed by free",
            Family::New => "the object was allocated by operator new, to be freed by operator delete",
            Family::NewArray => "the object was allocated by operator new[], to be freed by operator delete[]",
        }
    }
}

/// Detect mode with stacks: notes that the object `p`, just allocated, came from the
/// allocation functions of family `f` (the C functions' family is what a record starts with).
pub fn note_family(p: *mut u8, f: Family) {
    if p.is_null() || f == Family::Malloc || !crate::detect() || !stack::enabled() {
        return;
    }
    if let Some(t) = current_trace(p as usize) {
        t.alloc_tid.fetch_or((f as u32) << FAMILY_SHIFT, Ordering::Relaxed);
    }
}

/// Before `op`, a deallocation function of family `f`, frees `p`: in detect mode with stacks,
/// reports a live object at `p` that another family allocated, as far as
/// `alloc_dealloc_mismatch` asks: at level 1, only `operator new` against `operator new[]`.
/// The C functions against the C++ operators (level 2) are left out by default because a
/// module with the C++ runtime linked in statically (the LLVM library of Rust's toolchain)
/// has its own `operator new`, which reaches this allocator as `malloc`, and its objects are
/// deleted by the program's `operator delete` (here): every such deletion would look
/// mismatched. Its `operator new[]` reaches it as `malloc` too, never as `operator new`, so
/// level 1 cannot be misled by it. Anything else at `p` (nothing, a freed object, an interior
/// pointer) is left to the free itself, which reports it.
#[inline]
pub fn check_family(p: *mut u8, f: Family, op: &'static str) {
    if !p.is_null() && crate::detect() {
        check_family_detect(p as usize, f, op);
    }
}

#[inline(never)]
fn check_family_detect(p: usize, f: Family, op: &'static str) {
    let level = crate::options().alloc_dealloc_mismatch;
    if level == 0 || !stack::enabled() {
        return;
    }
    let Ok((_, size)) = resolve(p, op, Kind::InvalidFree) else { return };
    let Some(t) = current_trace(p) else { return };
    let tid = t.alloc_tid.load(Ordering::Relaxed);
    if t.free_tid.load(Ordering::Acquire) != 0 {
        return;
    }
    let had = Family::of_bits(tid >> FAMILY_SHIFT);
    if had != f && (level >= 2 || (had != Family::Malloc && f != Family::Malloc)) {
        report::fatal(Report {
            kind: Kind::AllocDeallocMismatch,
            addr: p,
            op,
            what: had.allocated_by(),
            object: Some(Object { start: p, size }),
            claimed: None,
            pointer: None,
        });
    }
}

/// Page and large objects; `room` asks for room to grow in place (`large::alloc`).
fn alloc_big(size: usize, align: usize, zero: bool, room: bool) -> *mut u8 {
    if size > MAX_REQUEST || align > MAX_REQUEST || !crate::ensure_init() {
        sys::set_errno(libc::ENOMEM);
        return ptr::null_mut();
    }
    let p = if size + CANARY <= MAX_PAGE_OBJECT && align <= PAGE {
        alloc_pages(size, align, zero)
    } else {
        // Short of mappings (before trying, or the view just failed for want of one): a page
        // object instead (`large::views_scarce`).
        let scarce = || align <= PAGE && large::views_scarce();
        let p = if scarce() { ptr::null_mut() } else { large::alloc(size, align, zero, room) };
        if p.is_null() && scarce() {
            stats::add(&stats::LARGE_AS_PAGES, 1);
            alloc_pages(size, align, zero)
        } else {
            p
        }
    };
    if p.is_null() {
        sys::set_errno(libc::ENOMEM);
    } else {
        let c = my_cache();
        if !c.is_null() {
            // SAFETY: this thread's own cache.
            let cache = unsafe { &*c };
            Cache::count(&cache.mallocs, 1);
            Cache::count(&cache.alloc_bytes, size as u64);
        }
    }
    p
}

/// Where a page object lies in its run of pool pages.
struct PageLayout {
    /// Pool pages of the run, a guard page included.
    run: u32,
    /// The object's offset from the start of the run (below one page).
    offset: usize,
    /// `Span::class` of the run: `pool::GUARD_AT_END`, `pool::NO_CANARY`.
    class: u8,
}

/// The layout of a page object of `size` bytes aligned to `align`. With userfaultfd, a run may
/// end in a *guard page*: issued with the object, so that nobody else gets its alias in this
/// epoch, but never installed, so that an access past the end traps at once, at the faulting
/// instruction, instead of being found at `free` (and a read past the end, which no canary
/// notices, too):
///
/// - a size of whole pages (4 and 8 KiB buffers are common) ends on the guard, without a
///   canary: the canary alone would have taken, and installed, one more page;
/// - in detect mode, every other page object is placed against the guard, followed by its
///   canary (which catches the last few bytes before the guard): one more pool page per
///   object, the price of finding overflows where they happen. Not for alignments above 16,
///   which keep the object at the start of its pages, unless `guard_all` is set: then every
///   object is a page object, and those aligned up to a page lie against the guard as well
///   (the slack before it grows to less than the alignment).
///
/// Otherwise the object starts its run, followed by its canary.
fn page_layout(size: usize, align: usize) -> PageLayout {
    let uffd = alias::revoke_kind() == alias::Revoke::Uffd;
    let pages = (size + CANARY).div_ceil(PAGE);
    if uffd && size.is_multiple_of(PAGE) {
        PageLayout { run: pages as u32, offset: 0, class: pool::GUARD_AT_END | pool::NO_CANARY }
    } else if uffd && crate::detect() && (align <= 16 || guard_all() && align <= PAGE) {
        let used = (size + CANARY).next_multiple_of(align.max(16));
        PageLayout { run: pages as u32 + 1, offset: pages * PAGE - used, class: pool::GUARD_AT_END }
    } else {
        PageLayout { run: pages as u32, offset: 0, class: 0 }
    }
}

/// Whether the object has a canary after it (all but page objects of whole pages ending on
/// their guard).
#[inline(always)]
fn has_canary(obj: Obj) -> bool {
    match obj {
        Obj::Pages { idx } => POOL.span(idx).class & pool::NO_CANARY == 0,
        _ => true,
    }
}

/// A page object: a run of pool pages issued as one alias unit of the current epoch.
fn alloc_pages(size: usize, align: usize, zero: bool) -> *mut u8 {
    let layout = page_layout(size, align);
    let npages = layout.run;
    let guard = layout.class & pool::GUARD_AT_END != 0;
    // Memory freed during this epoch is reused from the next one: start it when enough waits.
    let waiting = POOL.deferred_pages();
    if waiting >= 64 && waiting as u64 * 8 >= POOL.stats().0.pages_in_use {
        advance_epoch();
    }
    let Some((idx, dirty)) = POOL.alloc_run_filled(npages, npages - guard as u32, pool::PAGES) else {
        return ptr::null_mut();
    };
    let start_page = POOL.span(idx).start;
    let mut e = alias::pin_current();
    if e != 0 && !(start_page..start_page + npages).all(|p| alias::issuable(e, p)) {
        alias::unpin(e);
        advance_epoch();
        e = alias::pin_current();
        if e != 0 && !(start_page..start_page + npages).all(|p| alias::issuable(e, p)) {
            alias::unpin(e);
            e = 0;
        }
    }
    if e == 0 {
        POOL.free_run(idx);
        return ptr::null_mut();
    }
    let base = alias::alias(e, start_page);
    let a = base + layout.offset;
    // Live before it is issued: from `note_issue` on, revocations on other threads look at the
    // object's pages, and a page issued but not live would count as dead (a gap they may zap).
    let s = POOL.span_owned(idx);
    s.addr = a;
    s.class = layout.class;
    s.epoch.store(e, Ordering::Relaxed);
    s.size.store(size, Ordering::Release);
    alias::note_issue(e, start_page, npages);
    if let Err(err) = alias::install(base, npages as usize - guard as usize) {
        report::say(format_args!("installing aliases failed (errno {err}); aborting"));
        sys::die();
    }
    alias::unpin(e);
    if zero && dirty {
        // SAFETY: the run is ours, installed, and holds size bytes from `a`.
        unsafe { ptr::write_bytes(a as *mut u8, 0, size) };
    }
    if stack::enabled() {
        s.trace.set_alloc(stack::record(), my_tid(), e);
    }
    if guard {
        stats::add(&stats::GUARDED_PAGE_OBJECTS, 1);
    }
    if layout.class & pool::NO_CANARY == 0 {
        // SAFETY: the run holds size + CANARY bytes from `a`.
        unsafe { guard::arm(a, size) };
    }
    if layout.offset != 0 {
        // SAFETY: the run's first page is installed, and its bytes before the object belong
        // to no object (`head_damage`).
        unsafe { guard::arm_tail(a, base, a) };
    }
    stats::add(&stats::PAGE_OBJECTS, 1);
    a as *mut u8
}

/// Starts the next epoch (covering the whole pool handed out so far) and releases the pages
/// deferred during the last one. Returns the new epoch, or 0.
fn advance_epoch() -> u32 {
    match alias::advance(POOL.stats().1.max(1)) {
        Some(e) => {
            POOL.release_deferred();
            e
        }
        None => 0,
    }
}

/// A live heap object, resolved from a pointer to its start.
#[derive(Clone, Copy)]
pub enum Obj {
    /// A slab slot: span, slot index, the lane record it was issued in and the epoch of the
    /// alias it was found under.
    Small {
        idx: u32,
        slot: u32,
        lane: *const slab::Lane,
        epoch: u32,
    },
    Pages {
        idx: u32,
    },
    Large {
        idx: u32,
    },
}

/// The kind reported for a pointer to an object already freed: a free of it is a double free.
pub fn freed_kind(bad: Kind) -> Kind {
    if bad == Kind::InvalidFree {
        Kind::DoubleFree
    } else {
        bad
    }
}

/// The live object that starts at `p`, with its size, in the common case: a slab slot. None
/// for everything else (page and large objects, and pointers to report), which `resolve`
/// handles. Kept small so that `free` inlines it.
#[inline(always)]
fn lookup(p: usize) -> Option<(Obj, usize)> {
    let (e, page) = alias::decode(p)?;
    let (idx, s) = POOL.span_at(POOL.page_addr(page))?;
    if s.kind != pool::SLAB || !slab::set_up(s) {
        return None;
    }
    let c = &CLASSES[s.class as usize];
    match slab::locate(c, p & (PAGE - 1)) {
        Slot::Start(pos) => small_live(idx, s, e, slab::page_index(s, c, page)?, pos),
        _ => None,
    }
}

/// The object in position `pos` of page `j` of the slab `idx` (set up), if it is live under
/// an alias of epoch `e`.
#[inline(always)]
fn small_live(idx: u32, s: &pool::Span, e: u32, j: u32, pos: u32) -> Option<(Obj, usize)> {
    let c = &CLASSES[s.class as usize];
    let l = slab::lane_of(s, c, j, pos);
    let i = slab::slot_index(c, j, pos);
    // SAFETY: `i` < nslots.
    let size = unsafe { (*slab::sizes(s).add(i as usize)).load(Ordering::Acquire) };
    if l.epoch.load(Ordering::Acquire) != e || size & FREED != 0 {
        return None;
    }
    Some((Obj::Small { idx, slot: i, lane: l, epoch: e }, size as usize))
}

/// Resolves `p`, which must be the start of a live object; returns it with its size, or the
/// report describing why `p` is not acceptable. `bad` is the kind used for pointers that are
/// not (or no longer) objects: `invalid-free` for free/realloc, `invalid-pointer` for queries.
pub fn resolve(p: usize, op: &'static str, bad: Kind) -> Result<(Obj, usize), Report> {
    let rep = |kind, what, object| Report { kind, addr: p, op, what, object, claimed: None, pointer: None };
    // A stale alias: freed if its page was issued in that epoch, else never handed out.
    let stale = |e, page, freed_what| match alias::was_issued(e, page) {
        Some(false) => rep(bad, "the address was never returned by an allocation", None),
        _ => rep(freed_kind(bad), freed_what, None),
    };
    if alias::in_arena(p) {
        let Some((e, page)) = alias::decode(p) else {
            if alias::once_mirrored(p) {
                return Err(rep(freed_kind(bad), alias::FORGOTTEN, None));
            }
            return Err(rep(bad, "the address was never returned by an allocation", None));
        };
        let Some((idx, s)) = POOL.span_at(POOL.page_addr(page)) else {
            return Err(stale(e, page, "the memory at this address was already freed"));
        };
        match s.kind {
            pool::SLAB if slab::set_up(s) => {
                let c = &CLASSES[s.class as usize];
                let Some(j) = slab::page_index(s, c, page) else {
                    return Err(stale(e, page, "the memory at this address was already freed"));
                };
                match slab::locate(c, p & (PAGE - 1)) {
                    Slot::Start(pos) => match small_live(idx, s, e, j, pos) {
                        Some(found) => Ok(found),
                        None => Err(stale(e, page, "the object was already freed")),
                    },
                    Slot::Interior(pos, off) => {
                        let object = small_live(idx, s, e, j, pos).map(|(_, size)| Object { start: p - off, size });
                        Err(rep(bad, "the address points inside an object, not at its start", object))
                    }
                    Slot::Tail => Err(rep(bad, "the address was never returned by an allocation", None)),
                }
            }
            pool::PAGES => match live_pages(s, e) {
                Some(size) if p == s.addr => Ok((Obj::Pages { idx }, size)),
                Some(size) => {
                    let object = Some(Object { start: s.addr, size });
                    Err(rep(bad, "the address points inside an object, not at its start", object))
                }
                None => Err(stale(e, page, "the memory at this address was already freed")),
            },
            _ => Err(rep(bad, "the address was never returned by an allocation", None)),
        }
    } else {
        match large::lookup(p) {
            0 => Err(rep(bad, "the address is not in the heap (stack, global, or foreign memory)", None)),
            v if v & large::TOMB_BIT != 0 => Err(rep(freed_kind(bad), "the object was already freed", None)),
            idx => {
                let s = POOL.span(idx);
                let live = live_large(s);
                if s.kind != pool::LARGE || s.addr != p {
                    let object = live.map(|size| Object { start: s.addr, size });
                    return Err(rep(bad, "the address points inside an object, not at its start", object));
                }
                match live {
                    Some(size) => Ok((Obj::Large { idx }, size)),
                    None => Err(rep(freed_kind(bad), "the object was already freed", None)),
                }
            }
        }
    }
}

/// The page object of span `s` handed out under the alias of epoch `e`, live or freed: its
/// size and whether it is live. A freed one keeps its size (beside `DEAD_BIT`) and its epoch
/// until its span is used again, which a new alias then names.
#[inline(always)]
fn pages_at(s: &pool::Span, e: u32) -> Option<(usize, bool)> {
    let size = s.size.load(Ordering::Acquire);
    (size != pool::DEAD && s.epoch.load(Ordering::Acquire) == e)
        .then_some((size & !pool::DEAD_BIT, size & pool::DEAD_BIT == 0))
}

/// The size of the page object of span `s` if it is live under the alias of epoch `e`.
#[inline(always)]
fn live_pages(s: &pool::Span, e: u32) -> Option<usize> {
    pages_at(s, e).and_then(|(size, live)| live.then_some(size))
}

/// The size of the large object of span `s` if `s` holds a live one.
#[inline(always)]
fn live_large(s: &pool::Span) -> Option<usize> {
    let size = s.size.load(Ordering::Acquire);
    (s.kind == pool::LARGE && size & pool::DEAD_BIT == 0).then_some(size)
}

/// Resolves `p` and checks its canary; reports and dies on any problem.
#[inline(always)]
fn checked(p: usize, op: &'static str) -> (Obj, usize) {
    match lookup(p) {
        Some((obj, size)) => {
            check_slot(p, size, obj, op);
            (obj, size)
        }
        None => checked_other(p, op),
    }
}

/// `checked` for a pointer that is not a live slab slot (`lookup` found none).
fn checked_other(p: usize, op: &'static str) -> (Obj, usize) {
    let (obj, size) = resolve_or_die(p, op);
    let span = match obj {
        Obj::Pages { idx } | Obj::Large { idx } => Some(idx),
        Obj::Small { .. } => None,
    };
    match damage(p, size, span) {
        Some((at, true)) => underflowed_at(p, size, at, op),
        Some((at, false)) => overflowed_at(p, size, at, op),
        None => (obj, size),
    }
}

/// The first byte written over before the page or large object `p`, if any. In detect mode a
/// page object lies against the guard page after its run (`page_layout`), and a large object
/// against the one after its view in both modes (`large::alloc`), so the bytes before it in its
/// first page belong to no object: they hold canary bytes keyed with the object's address from
/// its allocation on (`guard::arm_tail`), and a write before the object's start, into them, is
/// found here at `free`, as a write past its end is by the canary after it. (An access further
/// back, in the page before, traps: `fault::before_object`.)
fn head_damage(p: usize) -> Option<usize> {
    let from = p & !(PAGE - 1);
    if from == p {
        return None;
    }
    let view = canary_view(p);
    // SAFETY: the object's first page holds `[from, p)` and is mapped at `view`'s page too,
    // with the same offset in the page, where `arm_tail` keyed each byte with its address.
    unsafe { guard::tail_damage(p, view - (p - from), view) }.map(|at| at - view + p)
}

/// The first canary byte written over of the live object `p` of `size` bytes, and whether it
/// lies before the object (`head_damage`) rather than after it: the canary after it, a large
/// object's tail (`large::tail_damage`), the bytes before a page or large object, a slab slot's
/// slack in detect mode (`arm_slack`). For `free` and `realloc` of all but slab slots
/// (`checked_other`), and for a check made without a `free` (`leak::check_at_exit`, which holds
/// every other thread still). `span`: the descriptor of a page or large object; None for a
/// slab slot.
pub fn damage(p: usize, size: usize, span: Option<u32>) -> Option<(usize, bool)> {
    let s = span.map(|idx| POOL.span(idx));
    let canary = s.is_none_or(|s| s.kind != pool::PAGES || s.class & pool::NO_CANARY == 0);
    // SAFETY: a live object of `size` bytes at `p` followed by its canary (where `canary`), which
    // `canary_view` maps too.
    if canary && !unsafe { guard::intact_via(p, size, canary_view(p)) } {
        return Some((p + size, false));
    }
    let Some(s) = s else {
        let slot = crate::detect().then(|| lookup(p)).flatten().map(|(obj, _)| obj);
        return match slot {
            Some(Obj::Small { idx, .. }) => {
                slack_damage(p, size, CLASSES[POOL.span(idx).class as usize].size).map(|at| (at, false))
            }
            _ => None,
        };
    };
    if s.kind == pool::LARGE {
        if let Some(at) = large::tail_damage(s, p, size) {
            return Some((at, false));
        }
    }
    head_damage(p).map(|at| (at, true))
}

/// The canary after the live object `p` lies in, where `canary_view` maps it, if it has one
/// (slab and large objects, and page objects that do not end against a guard page).
fn canary_of(p: usize) -> Option<(Object, usize)> {
    let Some((o, true)) = object_at(p) else { return None };
    if alias::in_arena(o.start) {
        let (_, page) = alias::decode(o.start)?;
        let (_, s) = POOL.span_at(POOL.page_addr(page))?;
        if s.kind == pool::PAGES && s.class & pool::NO_CANARY != 0 {
            return None;
        }
    }
    Some((o, canary_view(o.start) + o.size))
}

/// Reports a heap-buffer-overflow and dies if the canary after the live object `p` lies in was
/// overwritten: before a call that may write its canary's first byte (`mend_library_nul`), so
/// that what the program wrote there before is not mended with it.
pub fn check_canary_of(p: usize, op: &'static str) {
    if let Some((o, _)) = canary_of(p) {
        check_canary(o.start, o.size, op);
    }
}

/// The C library's wide scanning calls end a narrow string (`%s`, `%[`) with two NUL bytes
/// (the initial-state sequence `wcrtomb` makes of L'\0', which is a NUL, and then their own
/// NUL), one more than the string takes. When the string filled its live object `p`
/// exactly (`end`), the second NUL lands on the first byte of the object's canary: not the
/// program's write, and not one that reaches the program's data. The canary, checked before
/// the call (`check_canary_of`), is armed again when that byte is all that changed (a NUL
/// where the first byte was, which is never 0; the other seven intact). A page object
/// without a canary ends against a guard page, where the C library's write trapped already.
pub fn mend_library_nul(p: usize, end: usize) {
    let Some((o, view)) = canary_of(p) else { return };
    if o.start + o.size != end {
        return;
    }
    let want = guard::canary_for(end);
    // SAFETY: the canary after a live object that has one, where `canary_view` maps it; it may
    // be unaligned.
    unsafe {
        if (view as *const u64).read_unaligned() == want & !0xff {
            (view as *mut u64).write_unaligned(want);
        }
    }
}

/// The live page or large object whose first page holds `addr` before the object's start, if
/// any: the bytes that `head_damage` checks, which no pointer of the program's may reach.
pub fn object_after(addr: usize) -> Option<Object> {
    let (s, size) = if alias::in_arena(addr) {
        let (e, page) = alias::decode(addr)?;
        let (_, s) = POOL.span_at(POOL.page_addr(page))?;
        if s.kind != pool::PAGES {
            return None;
        }
        (s, live_pages(s, e)?)
    } else {
        match large::lookup(addr) {
            0 => return None,
            v if v & large::TOMB_BIT != 0 => return None,
            idx => {
                let s = POOL.span(idx);
                (s, live_large(s)?)
            }
        }
    };
    (addr < s.addr && (s.addr ^ addr) < PAGE).then_some(Object { start: s.addr, size })
}

/// `checked` for everything but live slab slots: page and large objects, or a report.
#[inline(never)]
fn resolve_or_die(p: usize, op: &'static str) -> (Obj, usize) {
    resolve(p, op, Kind::InvalidFree).unwrap_or_else(|r| report::fatal(r))
}

/// Reports a heap-buffer-overflow and dies if the canary after the live object `p` of `size`
/// bytes was overwritten.
#[inline(always)]
pub fn check_canary(p: usize, size: usize, op: &'static str) {
    // SAFETY: callers pass a live object of `size` bytes followed by its canary, which
    // `canary_view` maps too.
    if !unsafe { guard::intact_via(p, size, canary_view(p)) } {
        overflowed(p, size, op);
    }
}

/// `check_canary` for the live slab slot `obj` at `p`, and in detect mode its slack too
/// (`arm_slack`).
#[inline(always)]
fn check_slot(p: usize, size: usize, obj: Obj, op: &'static str) {
    check_canary(p, size, op);
    if crate::detect() {
        if let Obj::Small { idx, .. } = obj {
            check_slack(p, size, idx, op);
        }
    }
}

#[inline(never)]
fn check_slack(p: usize, size: usize, idx: u32, op: &'static str) {
    if let Some(at) = slack_damage(p, size, CLASSES[POOL.span(idx).class as usize].size) {
        overflowed_at(p, size, at, op);
    }
}

/// Where the canary bytes of the live object `p` are read. A thread without a cache is exiting
/// (or has not allocated yet): the C library frees memory in an exiting thread's last steps,
/// with every signal blocked, where a fault on an alias page that lost its entry would kill
/// the process; so it reads them where no fault can need the handler (`alias::backing`, the
/// same offset in the page). Every other thread reads them at `p`.
#[inline(always)]
fn canary_view(p: usize) -> usize {
    let c = tls::get();
    if c.is_null() || c == tls::EXITED {
        alias::backing(p)
    } else {
        p
    }
}

/// Reports a `size-mismatch` and dies if the caller claimed a size (`claimed`) other than the
/// object's own (`size`, what it was allocated with), unless `size_mismatch=0`: the claim is
/// never used to free, so ignoring it is safe.
#[inline(always)]
pub fn check_claim(p: usize, size: usize, claimed: Option<usize>, op: &'static str) {
    if let Some(c) = claimed {
        if c != size && crate::options().size_mismatch {
            size_mismatch(p, size, c, op);
        }
    }
}

#[cold]
#[inline(never)]
fn size_mismatch(p: usize, size: usize, claimed: usize, op: &'static str) -> ! {
    report::fatal(Report {
        kind: Kind::SizeMismatch,
        addr: p,
        op,
        what: "the size given is not the size the object was allocated with",
        object: Some(Object { start: p, size }),
        claimed: Some(claimed),
        pointer: None,
    })
}

#[cold]
#[inline(never)]
fn overflowed(p: usize, size: usize, op: &'static str) -> ! {
    overflowed_at(p, size, p + size, op)
}

/// `overflowed`, naming the first overwritten byte at `at`.
#[cold]
#[inline(never)]
fn overflowed_at(p: usize, size: usize, at: usize, op: &'static str) -> ! {
    report::fatal(Report {
        kind: Kind::HeapBufferOverflow,
        addr: at,
        op,
        what: "the canary after the object was overwritten (a write past its end)",
        object: Some(Object { start: p, size }),
        claimed: None,
        pointer: Some(p),
    })
}

/// Reports a write before the start of the page object `p` of `size` bytes, found at `op`,
/// naming the first byte written over, at `at`.
#[cold]
#[inline(never)]
fn underflowed_at(p: usize, size: usize, at: usize, op: &'static str) -> ! {
    report::fatal(Report {
        kind: Kind::HeapBufferOverflow,
        addr: at,
        op,
        what: "the canary bytes before the object were overwritten (a write before its start)",
        object: Some(Object { start: p, size }),
        claimed: None,
        pointer: Some(p),
    })
}

/// Flips the live object `obj`, found at `p` with `size` bytes, to dead; false if another
/// thread freed it first (see `swap_size`).
#[inline(always)]
fn kill(obj: Obj, p: usize, size: usize) -> bool {
    let dead = match obj {
        Obj::Small { .. } => (size as u16 | FREED) as usize,
        Obj::Pages { .. } | Obj::Large { .. } => size | pool::DEAD_BIT,
    };
    swap_size(obj, p, size, dead)
}

/// Sets the size of the live object `obj`, found at `p` with `from` bytes, to `to` (a new
/// size, or `from` marked dead); false if another thread freed it first.
///
/// The swap is a compare-and-swap of the size, which cannot tell the object from a newer one
/// of the same size in the same slot or span: of two frees of `p` racing each other (or a
/// free and a `realloc`), the first can revoke the object, and its slot or span be handed out
/// again, between the second's look-up and its swap, which would then kill or resize the new
/// object (and its memory go to a third while still in use). So a successful swap is checked
/// to have met the object found: the same lane issue (a lane is issued once per epoch), the
/// same page object's alias, the large object still at `p`. The swap's acquire makes a newer
/// issue visible to the check.
#[inline(always)]
fn swap_size(obj: Obj, p: usize, from: usize, to: usize) -> bool {
    match obj {
        Obj::Small { idx, slot, lane, epoch } => {
            let s = POOL.span(idx);
            // SAFETY: `slot` < nslots.
            let e = unsafe { &*slab::sizes(s).add(slot as usize) };
            e.compare_exchange(from as u16, to as u16, Ordering::AcqRel, Ordering::Acquire).is_ok()
                // SAFETY: the lane record of a slot stays valid while any of its slots is live
                // or in a cache, as the slot just swapped was.
                && unsafe { &*lane }.epoch.load(Ordering::Acquire) == epoch
        }
        Obj::Pages { idx } => {
            let s = POOL.span(idx);
            s.size.compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire).is_ok()
                && alias::decode(p).is_some_and(|(e, _)| s.epoch.load(Ordering::Acquire) == e)
        }
        Obj::Large { idx } => {
            POOL.span(idx).size.compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire).is_ok()
                && large::lookup(p) == idx
        }
    }
}

/// Detect mode: records the free stack of `obj` (before its alias is revoked).
#[inline(never)]
fn note_free(obj: Obj) {
    let t = match obj {
        Obj::Small { idx, slot, .. } => {
            let s = POOL.span(idx);
            slab::trace(s, &CLASSES[s.class as usize], slot)
        }
        Obj::Pages { idx } | Obj::Large { idx } => &POOL.span(idx).trace,
    };
    t.set_free(stack::record(), my_tid());
}

/// `free` (and every `operator delete`); `op` names the call in reports.
pub fn free(p: *mut u8, op: &'static str) {
    free_claiming(p, None, op)
}

/// `free` told the object's size by the caller (sized `operator delete`, C23 `free_sized`):
/// a size other than the one the object was allocated with is reported (`size-mismatch`).
pub fn free_sized(p: *mut u8, size: usize, op: &'static str) {
    free_claiming(p, Some(size), op)
}

#[inline(always)]
fn free_claiming(p: *mut u8, claimed: Option<usize>, op: &'static str) {
    if p.is_null() {
        return;
    }
    let scope = Scope::enter();
    if scope.nested() {
        free_nested_claiming(p as usize, claimed, op)
    } else {
        free_in_claiming(p as usize, claimed, op)
    }
}

/// Whether `p` is an object of the re-entrant arena (see `reentry`).
#[inline]
fn reentrant_object(p: usize) -> bool {
    !alias::in_arena(p) && reentry::owns(p)
}

#[inline(always)]
fn free_in(p: usize, op: &'static str) {
    free_in_claiming(p, None, op)
}

#[inline(always)]
fn free_in_claiming(p: usize, claimed: Option<usize>, op: &'static str) {
    if !crate::ensure_init() {
        if crate::passthrough::on() {
            crate::passthrough::free(p as *mut core::ffi::c_void);
        }
        return;
    }
    // The common case, a live slab slot, on a path of its own: merged with the other cases'
    // result (returned through memory) it was reloaded with a wider load than the narrower
    // stores just made, which stalls (about a fifth of `free` in an alloc/free loop).
    match lookup(p) {
        Some((obj, size)) => {
            check_slot(p, size, obj, op);
            check_claim(p, size, claimed, op);
            kill_checked(obj, p, size, op);
            finish_free(p, obj, size);
        }
        None => free_other(p, claimed, op),
    }
}

/// `free` of anything but a live slab slot: page and large objects, re-entrant arena
/// objects, or a report.
#[inline(never)]
fn free_other(p: usize, claimed: Option<usize>, op: &'static str) {
    if let Some((obj, size)) = begin_other(p, claimed, op) {
        finish_free(p, obj, size);
    }
}

/// `free` called while this thread is already inside the allocator (a signal handler): checks
/// and kills the object now, and leaves the rest to the outermost call (see `reentry`).
fn free_nested(p: usize, op: &'static str) {
    free_nested_claiming(p, None, op)
}

fn free_nested_claiming(p: usize, claimed: Option<usize>, op: &'static str) {
    if let Some((obj, size)) = free_begin(p, claimed, op) {
        reentry::defer(p, obj, size);
    }
}

/// The first half of a free, which takes no lock: checks `p` and marks its object dead (or
/// frees a re-entrant arena object entirely, returning None).
#[inline(always)]
fn free_begin(p: usize, claimed: Option<usize>, op: &'static str) -> Option<(Obj, usize)> {
    if !crate::ensure_init() {
        return None;
    }
    match lookup(p) {
        Some((obj, size)) => {
            check_slot(p, size, obj, op);
            check_claim(p, size, claimed, op);
            kill_checked(obj, p, size, op);
            Some((obj, size))
        }
        None => begin_other(p, claimed, op),
    }
}

/// `free_begin` for a pointer that is not a live slab slot (`lookup` found none).
fn begin_other(p: usize, claimed: Option<usize>, op: &'static str) -> Option<(Obj, usize)> {
    if reentrant_object(p) {
        reentry::free(p, claimed, op);
        return None;
    }
    let (obj, size) = checked_other(p, op);
    check_claim(p, size, claimed, op);
    if let Some(parked) = streams::kept(p) {
        stream_buffer_misfreed(p, size, parked, op);
    }
    kill_checked(obj, p, size, op);
    Some((obj, size))
}

/// `free` of a stream's buffer by the C library (`streams`): a kept buffer waits for the next
/// stream, after the same checks as any object's.
pub fn free_stream_buffer(p: *mut u8) {
    if !p.is_null() && crate::is_ready() {
        streams::repay(p as usize);
        match streams::park(p as usize) {
            streams::Park::No => {}
            streams::Park::Kept(size) => {
                check_canary(p as usize, size, "free");
                return restamp_stream_buffer(p as usize, false);
            }
            streams::Park::Again(size) => stream_buffer_misfreed(p as usize, size, true, "free"),
        }
    }
    free(p, "free")
}

/// Detect mode: records the stack of the C library's `free` (`alloc`: `malloc`) of the kept
/// stream buffer `p`, which stays live, so that a report about it names the latest.
fn restamp_stream_buffer(p: usize, alloc: bool) {
    if !stack::enabled() {
        return;
    }
    if let Ok((obj @ (Obj::Large { idx } | Obj::Pages { idx }), _)) = resolve(p, "free", Kind::InvalidFree) {
        if alloc {
            POOL.span(idx).trace.set_alloc(stack::record(), my_tid(), 0);
        } else {
            note_free(obj);
        }
    }
}

/// Reports a `free` of the kept stream buffer `p` that the C library did not make, or made
/// twice (`parked`: it was already freed).
#[cold]
fn stream_buffer_misfreed(p: usize, size: usize, parked: bool, op: &'static str) -> ! {
    let (kind, what) = if parked {
        (Kind::DoubleFree, "the memory is a stream's buffer, already freed")
    } else {
        (Kind::InvalidFree, "the memory is the buffer of an open stream, which the C library frees")
    };
    report::fatal(Report {
        kind,
        addr: p,
        op,
        what,
        object: Some(Object { start: p, size }),
        claimed: None,
        pointer: None,
    })
}

/// Marks the object `obj` at `p`, which passed its checks, dead (or reports a racing free)
/// and notes the free stack where stacks are recorded.
#[inline(always)]
fn kill_checked(obj: Obj, p: usize, size: usize, op: &'static str) {
    kill_or_report(obj, p, size, op);
    if stack::enabled() {
        note_free(obj);
    }
}

fn kill_or_report(obj: Obj, p: usize, size: usize, op: &'static str) {
    if !kill(obj, p, size) {
        racing_free(p, size, op);
    }
}

/// Reports the loser of two frees of the object `p` racing each other.
pub fn racing_free(p: usize, size: usize, op: &'static str) -> ! {
    report::fatal(Report {
        kind: Kind::DoubleFree,
        addr: p,
        op,
        what: "the object was freed by another thread at the same time",
        object: Some(Object { start: p, size }),
        claimed: None,
        pointer: None,
    })
}

/// The rest of a free once the object at `p` is marked dead: history, counters, and giving
/// its memory back (revocation first).
#[inline(always)]
pub fn finish_free(p: usize, obj: Obj, size: usize) {
    if crate::detect() {
        // The object is live: its own record has its stacks, if any were recorded. (Not
        // `trace_of`, whose fallback searches the whole history: with `stacks=0` it would on
        // every free.)
        let trace = if stack::enabled() { recorded_trace(p) } else { None };
        let page = match obj {
            Obj::Small { idx, slot, .. } => {
                let s = POOL.span(idx);
                Some(s.start + slot % CLASSES[s.class as usize].pages)
            }
            _ => None,
        };
        crate::history::record(p, size, page, trace);
    }
    let c = tls::get();
    let c = if c == tls::EXITED { ptr::null_mut() } else { c };
    if !c.is_null() {
        // SAFETY: this thread's own cache.
        let cache = unsafe { &*c };
        Cache::count(&cache.frees, 1);
        Cache::count(&cache.free_bytes, size as u64);
    }
    match obj {
        Obj::Small { idx, slot, lane, .. } => {
            if crate::detect() {
                poison_slot(p, idx, slot);
            }
            // SAFETY: the lane record of a live slot is valid.
            if unsafe { &*lane }.live.fetch_sub(1, Ordering::AcqRel) == 1 {
                cache::lane_died(c, p, lane);
            } else if !c.is_null() {
                // SAFETY: this thread's own cache.
                let cache = unsafe { &*c };
                Cache::count(&cache.pinned_bytes, CLASSES[POOL.span(idx).class as usize].size as u64);
            }
        }
        Obj::Pages { idx } => {
            let s = POOL.span(idx);
            let unit = Pending {
                // The run's first page: the object may lie further in (`page_layout`).
                addr: p & !(PAGE - 1),
                npages: s.npages,
                epoch: s.epoch.load(Ordering::Relaxed),
                span: idx,
                lane: ptr::null(),
            };
            cache::retire_unit(c, unit);
        }
        Obj::Large { idx } => large::release(idx, p),
    }
}

/// Records the thread's newest small allocation for `usable_size`. The address is stored
/// last and cleared first, so that a signal handler's `malloc_usable_size` on this thread never
/// pairs it with another slot's entry.
#[inline(always)]
fn note_last(cache: &Cache, p: usize, entry: *const AtomicU16) {
    cache.last.store(0, Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    cache.last_entry.store(entry as *mut AtomicU16, Ordering::Relaxed);
    cache.last_stamp.store(alias::REVOKE_BATCHES.0.load(Ordering::Relaxed), Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    cache.last.store(p, Ordering::Relaxed);
}

/// The calling thread's newest small allocation, its start and size, when `near` accepts its
/// start and it is still live.
///
/// Its size entry says whether it is live, and its size (also after an in-place `realloc`);
/// read first, with acquire ordering, so that if the slot was since freed, revoked, issued
/// again and handed out (under a new address: the start recorded no longer names it), the
/// revocation batch counted before is seen too.
///
/// The start is read again last: a signal handler that allocated on this thread between the
/// two readings (one that interrupted a copy's check, which runs outside the allocator's own
/// calls, so that the handler's `malloc` is not a nested one) recorded its own object, and
/// the entry read may be that object's. Paired with the first start, it gave the size of the
/// handler's object for the caller's (a false heap-buffer-overflow report of `memset` right
/// after `malloc`, `stress signals-anywhere`, in 7 runs of 20 on a loaded machine).
#[inline(always)]
fn newest(near: impl FnOnce(usize) -> bool) -> Option<(usize, usize)> {
    let c = tls::get();
    if c.is_null() || c == tls::EXITED {
        return None;
    }
    // SAFETY: this thread's own cache.
    let cache = unsafe { &*c };
    let p = cache.last.load(Ordering::Relaxed);
    if p == 0 || !near(p) {
        return None;
    }
    compiler_fence(Ordering::SeqCst);
    let entry = cache.last_entry.load(Ordering::Relaxed);
    // SAFETY: the size entry of a slot of a slab; slot tables are never unmapped.
    let v = unsafe { &*entry }.load(Ordering::Acquire);
    let stamp = alias::REVOKE_BATCHES.0.load(Ordering::Relaxed);
    let live = v & FREED == 0 && stamp == cache.last_stamp.load(Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    (live && cache.last.load(Ordering::Relaxed) == p).then_some((p, v as usize))
}

/// The size of `p` if it is the calling thread's newest small allocation and still live.
#[inline(always)]
fn last_size(p: usize) -> Option<usize> {
    newest(|q| q == p).map(|(_, size)| size)
}

/// The size of the live object that starts at `p`, or None for anything else; reports
/// nothing (`io` maps again the pages of a C library structure the program holds).
pub fn live_object_size(p: usize) -> Option<usize> {
    if !crate::is_ready() || reentrant_object(p) {
        return None;
    }
    resolve(p, "malloc_usable_size", Kind::InvalidPointer).ok().map(|(_, size)| size)
}

/// The heap object that `addr` lies in (at its start or inside it), and whether it is live:
/// a live object, a freed slab object while the alias it was handed out through is still
/// mapped (prevent mode revokes a group's page when the whole group is dead, and in batches),
/// or a freed page object until its span is used again (its alias is revoked with the next
/// batch, in detect mode before `free` returns); None otherwise. Reports nothing. The look-up
/// is `resolve`'s without the reasons a pointer is not an object's start, which `resolve`
/// builds and the bounds checks of the I/O calls and copies (which ask for every heap buffer)
/// never use: a slab object by its slot alone, a page or large object by its span (through
/// `resolve`, twice the time). An address in the calling thread's newest small allocation,
/// live, is answered from its cache (`newest`) without the look-up and its cache misses: the
/// buffer a program most often copies into is the object it has just made (a string built, a
/// copy duplicated, a buffer cleared).
#[inline(always)]
pub fn object_at(addr: usize) -> Option<(Object, bool)> {
    if !crate::is_ready() || reentrant_object(addr) {
        return None;
    }
    if let Some((start, size)) = newest(|p| addr.wrapping_sub(p) < slab::MAX_SMALL).filter(|&(p, n)| addr < p + n) {
        return Some((Object { start, size }, true));
    }
    if alias::in_arena(addr) {
        let (e, page) = alias::decode(addr)?;
        let (_, s) = POOL.span_at(POOL.page_addr(page))?;
        return match s.kind {
            pool::SLAB if slab::set_up(s) => {
                let (size, off) = slab::slot_at(s, page, e, addr)?;
                let v = size.load(Ordering::Acquire);
                (v != slab::FREE_SLOT)
                    .then(|| (Object { start: addr - off, size: (v & !FREED) as usize }, v & FREED == 0))
            }
            pool::PAGES if addr >= s.addr => pages_at(s, e).map(|(size, live)| (Object { start: s.addr, size }, live)),
            _ => None,
        };
    }
    // A large object: its table entry, unless it is a tombstone.
    match large::lookup(addr) {
        0 => None,
        v if v & large::TOMB_BIT != 0 => None,
        idx => {
            let s = POOL.span(idx);
            live_large(s).filter(|_| addr >= s.addr).map(|size| (Object { start: s.addr, size }, true))
        }
    }
}

/// `malloc_usable_size`: the requested size (the canary follows right after it).
///
/// Programs that account for their memory ask it of every object right after allocating it
/// (Redis's `zmalloc` does): the thread's newest small allocation is answered from its cache,
/// without the metadata look-up and its dependent cache misses (`resolve` took 13 % of
/// Redis's time).
pub fn usable_size(p: *mut u8) -> usize {
    if p.is_null() || !crate::ensure_init() {
        return 0;
    }
    if let Some(size) = last_size(p as usize) {
        return size;
    }
    if reentrant_object(p as usize) {
        return reentry::resolve(p as usize, "malloc_usable_size", Kind::InvalidPointer)
            .unwrap_or_else(|r| report::fatal(r));
    }
    match resolve(p as usize, "malloc_usable_size", Kind::InvalidPointer) {
        Ok((_, size)) => size,
        Err(r) => report::fatal(r),
    }
}

/// `realloc` with glibc's semantics (size 0 frees and returns null).
pub fn realloc(p: *mut u8, size: usize) -> *mut u8 {
    let scope = Scope::enter();
    if scope.nested() {
        return realloc_nested(p as usize, size);
    }
    realloc_in(p, size)
}

/// `realloc` inside a signal handler that interrupted the allocator: always moves the object
/// to the re-entrant arena.
fn realloc_nested(p: usize, size: usize) -> *mut u8 {
    if p == 0 {
        return reentry::malloc(size, 16);
    }
    if size == 0 {
        free_nested(p, "realloc");
        return ptr::null_mut();
    }
    if !crate::ensure_init() {
        return ptr::null_mut();
    }
    let old = live_size(p, "realloc");
    moved(p, old, size, |n| reentry::malloc(n, 16), free_nested)
}

/// The size of the live object at `p`, of either heap; reports and dies on a bad pointer or an
/// overwritten canary.
pub fn live_size(p: usize, op: &'static str) -> usize {
    if !reentrant_object(p) {
        return checked(p, op).1;
    }
    let size = reentry::resolve(p, op, Kind::InvalidFree).unwrap_or_else(|r| report::fatal(r));
    check_canary(p, size, op);
    size
}

/// `realloc` by moving: the object at `p` (`old` bytes) is copied into a new one of `size`
/// bytes from `alloc`, then freed with `free`. Null (and `p` untouched) if `alloc` fails.
fn moved(
    p: usize,
    old: usize,
    size: usize,
    alloc: impl FnOnce(usize) -> *mut u8,
    free: fn(usize, &'static str),
) -> *mut u8 {
    let q = alloc(size);
    if q.is_null() {
        return q;
    }
    // SAFETY: both objects are live and at least min(old, size) bytes long.
    unsafe { ptr::copy_nonoverlapping(p as *const u8, q, old.min(size)) };
    free(p, "realloc");
    q
}

fn realloc_in(p: *mut u8, size: usize) -> *mut u8 {
    if p.is_null() {
        return malloc_in(size);
    }
    if size == 0 {
        free_in(p as usize, "realloc");
        return ptr::null_mut();
    }
    if !crate::ensure_init() {
        return ptr::null_mut();
    }
    let a = p as usize;
    if size > MAX_REQUEST {
        // Still check the pointer: a bad one is reported even when the size is hopeless.
        live_size(a, "realloc");
        sys::set_errno(libc::ENOMEM);
        return ptr::null_mut();
    }
    if reentrant_object(a) {
        // An object a signal handler allocated: it moves to the ordinary heap.
        let old = live_size(a, "realloc");
        return moved(a, old, size, malloc_in, free_in);
    }
    let (obj, old) = checked(a, "realloc");
    // In place when the new size still fits the same slot / run / view. The new size is set
    // as a free marks the object dead (`swap_size`): a free of `a` racing this call may have
    // revoked it since `checked`, and its slot or span may hold a newer object of that size.
    let in_place = match obj {
        Obj::Small { idx, .. } => {
            let ci = POOL.span(idx).class as usize;
            slab::class_for(size).is_some_and(|n| n == ci)
                || (size + CANARY <= CLASSES[ci].size as usize && size * 2 >= CLASSES[ci].size as usize)
        }
        Obj::Pages { idx } => {
            let s = POOL.span(idx);
            if s.class & pool::GUARD_AT_END != 0 {
                // The object ends where the guard begins: only the same size stays.
                size == old
            } else {
                (size + CANARY).div_ceil(PAGE) == s.npages as usize
            }
        }
        Obj::Large { idx } => {
            // Its view is changed before the size is set: it must still be this object's.
            if large::lookup(a) != idx || POOL.span(idx).size.load(Ordering::Acquire) != old {
                racing_free(a, old, "realloc");
            }
            if size > old {
                large::grow(idx, a, size)
            } else {
                size + CANARY > MAX_PAGE_OBJECT && large::shrink(idx, a, size)
            }
        }
    };
    if in_place && !swap_size(obj, a, old, size) {
        racing_free(a, old, "realloc");
    }
    if in_place {
        match obj {
            Obj::Large { idx } => large::arm(POOL.span(idx), a, size),
            Obj::Small { idx, .. } => {
                // SAFETY: the slot holds size + CANARY bytes from `a`.
                unsafe { guard::arm(a, size) };
                if crate::detect() {
                    arm_slack(a, size, CLASSES[POOL.span(idx).class as usize].size);
                }
            }
            // SAFETY: the run holds size + CANARY bytes from `a`.
            _ if has_canary(obj) => unsafe { guard::arm(a, size) },
            _ => {}
        }
        return p;
    }
    if size > old && slab::class_for(size).is_none() {
        // A growing object: a large one gets room to grow again without a copy.
        return moved(a, old, size, |n| alloc_big(n, 16, false, true), free_in);
    }
    moved(a, old, size, malloc_in, free_in)
}

/// Whether `PAGE_SHIFT` matches the page size the tables assume.
const _: () = assert!(1 << PAGE_SHIFT == PAGE);
