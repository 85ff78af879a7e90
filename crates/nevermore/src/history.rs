//! Detect mode: a ring of the most recently freed objects (alias start, size, stacks),
//! so that a use-after-free report can name the object even after its physical memory was
//! reused by a newer one. Aliases are never handed out twice, so an alias address identifies
//! one object for good. Written once per free; searched only when a fault is reported.

use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

const ENTRIES: usize = 1 << 16;

#[repr(C)]
pub struct Entry {
    pub start: AtomicUsize,
    pub size: AtomicUsize,
    pub seq: AtomicU32,
    /// The pool page a small object's slot lies in, plus one (0: not a small object).
    pub page: AtomicU32,
    /// Allocation stack and thread, free stack and thread (depot ids), when recorded.
    pub alloc: AtomicU32,
    pub alloc_tid: AtomicU32,
    pub free: AtomicU32,
    pub free_tid: AtomicU32,
}

/// What the history knows about a freed object.
pub struct Freed {
    pub start: usize,
    pub size: usize,
    /// (allocation stack, its thread, free stack, its thread).
    pub trace: Option<(u32, u32, u32, u32)>,
}

static RING: AtomicPtr<Entry> = AtomicPtr::new(core::ptr::null_mut());
static NEXT: AtomicU64 = AtomicU64::new(0);
/// Searches of the ring (`find`): one per report that names a freed object. A search reads up
/// to the whole ring, so the paths of ordinary calls never search (`stats=1` shows the count).
pub static SEARCHES: AtomicU64 = AtomicU64::new(0);

/// Frees recorded so far.
pub fn recorded() -> u64 {
    NEXT.load(Ordering::Relaxed)
}

/// Maps the ring (detect mode only), once. Returns false when out of memory.
pub fn init() -> bool {
    if !RING.load(Ordering::Acquire).is_null() {
        return true;
    }
    let len = ENTRIES * core::mem::size_of::<Entry>();
    let p = crate::meta::map(len) as *mut Entry;
    if p.is_null() {
        return false;
    }
    if RING.compare_exchange(core::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire).is_err() {
        crate::meta::unmap(p as *mut u8, len); // mapped meanwhile by another caller
    }
    true
}

/// Records a freed object (and its stacks, when known); `page`: the pool page of a small
/// object's slot (`None` for others), for `find_slot`.
#[inline]
pub fn record(start: usize, size: usize, page: Option<u32>, trace: Option<(u32, u32, u32, u32)>) {
    let ring = RING.load(Ordering::Relaxed);
    if ring.is_null() {
        return;
    }
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the index is reduced modulo the ring's length.
    let e = unsafe { &*ring.add(n as usize % ENTRIES) };
    e.start.store(0, Ordering::Relaxed);
    e.size.store(size, Ordering::Relaxed);
    e.seq.store(n as u32, Ordering::Relaxed);
    e.page.store(page.map_or(0, |p| p.wrapping_add(1)), Ordering::Relaxed);
    let (a, at, f, ft) = trace.unwrap_or((0, 0, 0, 0));
    e.alloc.store(a, Ordering::Relaxed);
    e.alloc_tid.store(at, Ordering::Relaxed);
    e.free.store(f, Ordering::Relaxed);
    e.free_tid.store(ft, Ordering::Relaxed);
    e.start.store(start, Ordering::Release);
}

/// The most recently freed object whose bytes (or canary) contain `addr`.
pub fn find(addr: usize) -> Option<Freed> {
    newest(|_, start, size| addr >= start && addr < start + size.max(1) + crate::guard::CANARY)
}

/// The most recently freed small object that lay in the slot at byte `off` of the pool page
/// `page` (its alias, gone now, is the address the program knew it by). A slot freed in its
/// current slab was freed after any object of an older slab over the same page, so the newest
/// match is it, unless the ring has wrapped past it since (then there is none).
pub fn find_slot(page: u32, off: usize) -> Option<Freed> {
    newest(|e, start, _| {
        e.page.load(Ordering::Relaxed) == page.wrapping_add(1) && start & (crate::sys::PAGE - 1) == off
    })
}

/// The newest entry of the ring that `hit` (given the entry, its start and size) accepts.
fn newest(hit: impl Fn(&Entry, usize, usize) -> bool) -> Option<Freed> {
    let ring = RING.load(Ordering::Acquire);
    if ring.is_null() {
        return None;
    }
    SEARCHES.fetch_add(1, Ordering::Relaxed);
    let n = NEXT.load(Ordering::Acquire) as usize;
    for k in 1..=n.min(ENTRIES) {
        // SAFETY: the index is reduced modulo the ring's length.
        let e = unsafe { &*ring.add((n - k) % ENTRIES) };
        let start = e.start.load(Ordering::Acquire);
        let size = e.size.load(Ordering::Relaxed);
        if start != 0 && hit(e, start, size) {
            let at = e.alloc_tid.load(Ordering::Relaxed);
            let trace = (at != 0).then(|| {
                (
                    e.alloc.load(Ordering::Relaxed),
                    at,
                    e.free.load(Ordering::Relaxed),
                    e.free_tid.load(Ordering::Relaxed),
                )
            });
            return Some(Freed { start, size, trace });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_newest_freed_object_and_counts_searches() {
        assert!(init());
        let before = SEARCHES.load(Ordering::Relaxed);
        record(0x10_0000, 24, None, None);
        record(0x20_0000, 100, None, Some((1, 2, 3, 4)));
        let found = find(0x20_0000 + 100).expect("inside the canary");
        assert_eq!((found.start, found.size, found.trace), (0x20_0000, 100, Some((1, 2, 3, 4))));
        assert_eq!(find(0x10_0000 + 5).map(|f| (f.start, f.trace)), Some((0x10_0000, None)));
        assert!(find(0x30_0000).is_none());
        assert_eq!(SEARCHES.load(Ordering::Relaxed) - before, 3);
        assert!(recorded() >= 2);
    }

    #[test]
    fn finds_the_newest_object_freed_from_a_slot() {
        assert!(init());
        // Two objects of one slot (page 7, offset 0x40), one of another slot of that page, one
        // at that offset of another page.
        record(0x7000_0040, 48, Some(7), Some((1, 1, 1, 1)));
        record(0x7100_0040, 40, Some(7), Some((2, 2, 2, 2)));
        record(0x7200_0080, 48, Some(7), None);
        record(0x7300_0040, 48, Some(8), None);
        let f = find_slot(7, 0x40).expect("freed from page 7, offset 0x40");
        assert_eq!((f.start, f.size, f.trace), (0x7100_0040, 40, Some((2, 2, 2, 2))));
        assert_eq!(find_slot(7, 0x80).map(|f| f.start), Some(0x7200_0080));
        assert_eq!(find_slot(8, 0x40).map(|f| f.start), Some(0x7300_0040));
        assert!(find_slot(9, 0x40).is_none());
        assert!(find_slot(7, 0xc0).is_none());
    }
}
