//! A small futex mutex and a `Locked<T>` cell built on it. No allocation, no poisoning; the
//! raw lock can be taken and released separately, which `fork` handling needs.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::sys;

/// 0 = unlocked, 1 = locked, 2 = locked with waiters; and the holder's `tls::thread_word`
/// (0: none), which only `held_here` reads: a fork made in a signal handler that interrupted
/// its own thread inside the allocator must not wait for a lock that thread holds.
pub struct RawMutex(AtomicU32, AtomicUsize);

impl RawMutex {
    pub const fn new() -> Self {
        RawMutex(AtomicU32::new(0), AtomicUsize::new(0))
    }

    #[inline]
    pub fn lock(&self) {
        if self.0.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_slow();
        }
        self.1.store(crate::tls::thread_word(), Ordering::Relaxed);
    }

    /// Whether this thread holds the lock (taken below a signal handler that now asks). A
    /// handler that interrupted the instruction between taking it and recording the holder
    /// gets false.
    pub fn held_here(&self) -> bool {
        self.0.load(Ordering::Relaxed) != 0 && self.1.load(Ordering::Relaxed) == crate::tls::thread_word()
    }

    #[cold]
    fn lock_slow(&self) {
        for _ in 0..100 {
            core::hint::spin_loop();
            if self.0.load(Ordering::Relaxed) == 0
                && self.0.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return;
            }
        }
        while self.0.swap(2, Ordering::Acquire) != 0 {
            sys::futex_wait(&self.0, 2);
        }
    }

    /// Takes the lock if it is free; never waits.
    #[inline]
    pub fn try_lock(&self) -> bool {
        let taken = self.0.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok();
        if taken {
            self.1.store(crate::tls::thread_word(), Ordering::Relaxed);
        }
        taken
    }

    #[inline]
    pub fn unlock(&self) {
        self.1.store(0, Ordering::Relaxed);
        if self.0.swap(0, Ordering::Release) == 2 {
            sys::futex_wake(&self.0);
        }
    }

    /// Resets the lock to unlocked without waking anyone: for a forked child, where the only
    /// thread is the one that took every lock before `fork`.
    pub fn reset(&self) {
        self.1.store(0, Ordering::Relaxed);
        self.0.store(0, Ordering::Release);
    }
}

/// Data guarded by a `RawMutex`.
pub struct Locked<T> {
    raw: RawMutex,
    data: UnsafeCell<T>,
}

// SAFETY: access to `data` only happens through a guard that holds `raw`.
unsafe impl<T: Send> Sync for Locked<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Locked<T> {}

impl<T> Locked<T> {
    pub const fn new(v: T) -> Self {
        Locked { raw: RawMutex::new(), data: UnsafeCell::new(v) }
    }

    #[inline]
    pub fn lock(&self) -> Guard<'_, T> {
        self.raw.lock();
        Guard { l: self }
    }

    pub fn raw(&self) -> &RawMutex {
        &self.raw
    }

    /// Access without locking.
    ///
    /// # Safety
    /// The caller must hold `raw()` (e.g. taken by the fork handlers) or otherwise know that
    /// no other thread can touch the data.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get_unlocked(&self) -> &mut T {
        // SAFETY: guaranteed by the caller.
        unsafe { &mut *self.data.get() }
    }
}

pub struct Guard<'a, T> {
    l: &'a Locked<T>,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.l.data.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock.
        unsafe { &mut *self.l.data.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.l.raw.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_under_contention() {
        static L: Locked<u64> = Locked::new(0);
        let hs: std::vec::Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..20000 {
                        *L.lock() += 1;
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(*L.lock(), 80000);
    }
}
