//! Detect mode: a ring of the most recently freed objects (alias start, size, freeing thread),
//! so that a use-after-free report can name the object even after its physical memory was
//! reused by a newer one. Aliases are never handed out twice, so an alias address identifies
//! one object for good. Written once per free; searched only when a fault is reported.

use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::sys;

const ENTRIES: usize = 1 << 16;

#[repr(C)]
pub struct Entry {
    pub start: AtomicUsize,
    pub size: AtomicUsize,
    pub tid: AtomicU32,
    pub seq: AtomicU32,
}

static RING: AtomicPtr<Entry> = AtomicPtr::new(core::ptr::null_mut());
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Maps the ring (detect mode only). Returns false when out of memory.
pub fn init() -> bool {
    let p = sys::map_meta(ENTRIES * core::mem::size_of::<Entry>()) as *mut Entry;
    RING.store(p, Ordering::Release);
    !p.is_null()
}

/// Records a freed object.
#[inline]
pub fn record(start: usize, size: usize) {
    let ring = RING.load(Ordering::Relaxed);
    if ring.is_null() {
        return;
    }
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the index is reduced modulo the ring's length.
    let e = unsafe { &*ring.add(n as usize % ENTRIES) };
    e.start.store(0, Ordering::Relaxed);
    e.size.store(size, Ordering::Relaxed);
    e.tid.store(sys::gettid(), Ordering::Relaxed);
    e.seq.store(n as u32, Ordering::Relaxed);
    e.start.store(start, Ordering::Release);
}

/// The most recently freed object whose bytes (or canary) contain `addr`: (start, size, tid).
pub fn find(addr: usize) -> Option<(usize, usize, u32)> {
    let ring = RING.load(Ordering::Acquire);
    if ring.is_null() {
        return None;
    }
    let n = NEXT.load(Ordering::Acquire) as usize;
    for k in 1..=n.min(ENTRIES) {
        // SAFETY: the index is reduced modulo the ring's length.
        let e = unsafe { &*ring.add((n - k) % ENTRIES) };
        let start = e.start.load(Ordering::Acquire);
        let size = e.size.load(Ordering::Relaxed);
        if start != 0 && addr >= start && addr < start + size.max(1) + crate::guard::CANARY {
            return Some((start, size, e.tid.load(Ordering::Relaxed)));
        }
    }
    None
}
