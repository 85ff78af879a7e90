//! Per-thread caches of free small slots. A thread allocates and frees small objects through
//! its own cache without locks; the cache refills from, and flushes to, the central per-class
//! lists in batches. A slot freed by another thread simply joins that thread's cache, so
//! cross-thread frees need no special path. Caches live in out-of-band metadata memory and are
//! recycled when their thread exits.

use core::ptr;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::lock::Locked;
use crate::slab::{self, Bin, CLASSES, NCLASS};
use crate::{meta, stats, tls};

#[repr(C)]
pub struct Cache {
    pub bins: [Bin; NCLASS],
    next: *mut Cache,
    pub mallocs: AtomicU64,
    pub frees: AtomicU64,
    pub alloc_bytes: AtomicU64,
    pub free_bytes: AtomicU64,
}

impl Cache {
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
}

impl Totals {
    const ZERO: Totals = Totals { mallocs: 0, frees: 0, alloc_bytes: 0, free_bytes: 0 };

    fn add(&mut self, c: &Cache) {
        self.mallocs += c.mallocs.load(Ordering::Relaxed);
        self.frees += c.frees.load(Ordering::Relaxed);
        self.alloc_bytes += c.alloc_bytes.load(Ordering::Relaxed);
        self.free_bytes += c.free_bytes.load(Ordering::Relaxed);
    }
}

/// Creates this thread's cache and registers it for thread exit. Returns null when out of
/// metadata memory.
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
    // SAFETY: `c` is unused cache memory; every field is reset (zero is a valid empty cache).
    unsafe {
        ptr::write_bytes(c as *mut u8, 0, core::mem::size_of::<Cache>());
        (*c).next = l.live;
    }
    l.live = c;
    drop(l);
    stats::add(&stats::THREADS, 1);
    c
}

/// Returns every cached slot to the central lists.
///
/// # Safety
/// `c` must be a live cache not used concurrently (its thread is exiting, or it is the
/// caller's own, or the process was just forked).
pub unsafe fn drain(c: *mut Cache) {
    for ci in 0..NCLASS {
        // SAFETY: guaranteed by the caller.
        let bin = unsafe { &mut (*c).bins[ci] };
        if bin.n > 0 {
            slab::release(ci, &bin.slots[..bin.n as usize]);
            bin.n = 0;
        }
    }
}

/// Thread-exit path: drain the cache, recycle it, and mark the thread as exited.
///
/// # Safety
/// `c` must be the exiting thread's own cache.
pub unsafe fn retire(c: *mut Cache) {
    // SAFETY: the caller's own cache.
    unsafe { drain(c) };
    tls::set(tls::EXITED);
    let mut l = LIST.lock();
    // SAFETY: `c` is on the live list, which the lock protects.
    unsafe { unlink_locked(&mut l, c) };
}

/// # Safety
/// `l` locked (or all locks held across fork); `c` on its live list and drained.
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

/// Frees up to half of a full bin back to the central lists.
#[cold]
pub fn flush(ci: usize, bin: &mut Bin) {
    let keep = CLASSES[ci].cache_cap as usize / 2;
    let n = bin.n as usize;
    slab::release(ci, &bin.slots[keep..n]);
    bin.n = keep as u32;
    stats::add(&stats::FLUSHES, 1);
}

/// Refills an empty bin to half its capacity. Returns false when out of memory.
#[cold]
pub fn refill(ci: usize, bin: &mut Bin) -> bool {
    let want = CLASSES[ci].cache_cap as usize / 2;
    let mut tmp = [0usize; 64];
    let got = slab::refill(ci, &mut tmp[..want]);
    // Keep the lowest addresses on top so that they are handed out first.
    for k in 0..got {
        bin.slots[k] = tmp[got - 1 - k];
    }
    bin.n = got as u32;
    got > 0
}

pub fn raw_lock() -> &'static crate::lock::RawMutex {
    LIST.raw()
}

/// In a forked child: every cache but `mine` belonged to a thread that does not exist here;
/// return their slots and recycle them.
///
/// # Safety
/// Only in the fork child handler, with every allocator lock held by this (only) thread.
pub unsafe fn adopt_orphans(mine: *mut Cache) {
    // SAFETY: all locks are held by this thread, which is the only one.
    let l = unsafe { LIST.get_unlocked() };
    let mut c = l.live;
    while !c.is_null() {
        // SAFETY: walking the live list; unlinking the current node after reading `next`.
        unsafe {
            let next = (*c).next;
            if c != mine {
                for ci in 0..NCLASS {
                    let bin = &mut (*c).bins[ci];
                    if bin.n > 0 {
                        let central = slab::CENTRAL[ci].get_unlocked();
                        slab::release_locked(central, ci, &bin.slots[..bin.n as usize]);
                        bin.n = 0;
                    }
                }
                unlink_locked(l, c);
            }
            c = next;
        }
    }
}
