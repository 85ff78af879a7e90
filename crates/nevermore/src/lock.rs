//! A small futex mutex and a `Locked<T>` cell built on it. No allocation, no poisoning; the
//! raw lock can be taken and released separately, which `fork` handling needs.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU32, Ordering};

use crate::sys;

/// A lock that knows its holder: 0 when free, else the holder's thread id, with `WAITERS` set
/// once another thread may be waiting. A fork made in a signal handler that interrupted its
/// own thread inside the allocator must not wait for a lock that thread holds (`held_here`),
/// and the holder is in the same word the lock is taken with, so that no instruction lies
/// between taking the lock and the record of who took it.
pub struct RawMutex(AtomicU32);

/// Set in the lock word while a thread may wait for the lock (thread ids stay below 2^22).
const WAITERS: u32 = 1 << 31;

/// This thread's id as the lock word holds it (never 0, never with `WAITERS`).
#[inline]
fn me() -> u32 {
    (crate::heap::my_tid() & !WAITERS).max(1)
}

impl RawMutex {
    pub const fn new() -> Self {
        RawMutex(AtomicU32::new(0))
    }

    #[inline]
    pub fn lock(&self) {
        let me = me();
        if self.0.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_slow(me);
        }
    }

    /// Whether this thread holds the lock (taken below a signal handler that now asks).
    pub fn held_here(&self) -> bool {
        let s = self.0.load(Ordering::Relaxed);
        s != 0 && s & !WAITERS == me()
    }

    #[cold]
    fn lock_slow(&self, me: u32) {
        for _ in 0..100 {
            core::hint::spin_loop();
            if self.0.load(Ordering::Relaxed) == 0
                && self.0.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return;
            }
        }
        loop {
            let s = self.0.load(Ordering::Relaxed);
            if s == 0 {
                // Taken with the mark: another thread may still wait, and the unlock wakes it.
                if self.0.compare_exchange(0, me | WAITERS, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                    return;
                }
                continue;
            }
            if s & WAITERS == 0
                && self.0.compare_exchange(s, s | WAITERS, Ordering::Relaxed, Ordering::Relaxed).is_err()
            {
                continue;
            }
            sys::futex_wait(&self.0, s | WAITERS);
        }
    }

    /// Takes the lock if it is free; never waits.
    #[inline]
    pub fn try_lock(&self) -> bool {
        self.0.compare_exchange(0, me(), Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// Releases the lock and wakes every thread that waits for it, not one: a woken thread
    /// is the one that sets `WAITERS` again for those still asleep, and a signal handler may
    /// take it aside before it does (its `fork` waits in `prepare` for a lock held by a thread
    /// that sleeps here): with one woken, that thread slept for ever, and the process hung
    /// (`stress.c fork-in-handler` with 4 threads: 21 runs of 30).
    #[inline]
    pub fn unlock(&self) {
        if self.0.swap(0, Ordering::Release) & WAITERS != 0 {
            sys::futex_wake_all(&self.0);
        }
    }

    /// Resets the lock to unlocked without waking anyone: for a forked child, where the only
    /// thread is the one that took every lock before `fork`.
    pub fn reset(&self) {
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

    #[test]
    fn the_holder_is_known_to_itself_only() {
        static L: RawMutex = RawMutex::new();
        assert!(!L.held_here());
        L.lock();
        assert!(L.held_here());
        L.unlock();
        assert!(!L.held_here());
        // Held by another thread: not ours, and taken here only after it lets go (through the
        // waiting path, which marks the word).
        let (taken_tx, taken_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            L.lock();
            taken_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(50));
            L.unlock();
        });
        taken_rx.recv().unwrap();
        assert!(!L.held_here());
        assert!(!L.try_lock());
        go_tx.send(()).unwrap();
        L.lock();
        assert!(L.held_here());
        L.unlock();
        other.join().unwrap();
        assert!(!L.held_here() && L.try_lock() && L.held_here());
        L.unlock();
    }
}
