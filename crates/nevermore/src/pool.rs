//! The physical pool: one `memfd` holding every byte handed to the program, seen by the
//! allocator through one *canonical* shared mapping. Pool pages are handed out in runs
//! (*spans*): slabs of small objects, page-run objects, and the backing of large objects.
//! Every span has an out-of-band descriptor in a direct-indexed table, and a page map gives,
//! for each pool page, the descriptor of the span that holds it; so a pointer is resolved with
//! two loads and no hashing.
//!
//! Free runs are kept in length-segregated lists (exact lists for 1–64 pages, one list above)
//! and coalesced with their neighbours. Freed pages that stay cached are *dirty* (they hold old
//! data); big runs, and everything beyond a bound on dirty pages, are punched out of the memfd
//! with `MADV_REMOVE`, which returns their memory to the system and makes them read as zero.
//!
//! Pool memory is kept in 4 KiB pages: the allocator's accounting (holes, guard pages never
//! given memory, single pages punched) is in pages. Where the system gives shared memory huge
//! pages (`/sys/kernel/mm/transparent_hugepage/shmem_enabled` set to `always`,
//! `within_size` or `force`), a page given memory with `fallocate` or written
//! with `pwrite` comes in a folio of up to 2 MiB: a guard page would take memory, and a small
//! process's few pages 2 MiB. `init` finds out with one page, and where it is so, marks the
//! canonical view `MADV_NOHUGEPAGE` (the mirrors and large views, copies of it, inherit it)
//! and gives pages memory by touching them through it (`fill_pages`).

use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::lock::Locked;
use crate::sys::{self, PAGE, PAGE_SHIFT};

/// Descriptor index 0 means "no span".
pub const NONE: u32 = 0;

/// Span kinds.
pub const UNUSED: u8 = 0;
pub const FREE_RUN: u8 = 1;
pub const SLAB: u8 = 2;
pub const PAGES: u8 = 3;
pub const LARGE: u8 = 4;

/// `Span::size` of a span that never held a live object.
pub const DEAD: usize = usize::MAX;
/// Set in `Span::size` once the object is freed (the rest keeps its size, for reports).
pub const DEAD_BIT: usize = 1 << 63;
/// `Span::class` bits of a PAGES span (see `heap::page_layout`): the run's last page is a
/// guard, issued with the object but never installed; the object has no canary.
pub const GUARD_AT_END: u8 = 1;
pub const NO_CANARY: u8 = 2;

/// When `Pool::decay` next looks at the free runs (`sys::now_ns` time).
static NEXT_DECAY: AtomicU64 = AtomicU64::new(0);

/// How often the dirty decay looks for pages to give back: four times per `decay_ms` period,
/// at most every 50 ms (free runs here, idle slab pages in `slab::decay_idle_if_due`).
pub fn decay_period_ns(decay_ms: u32) -> u64 {
    (decay_ms as u64 * 250_000).max(50_000_000)
}

/// Whether the free run `s` was freed at least `decay_ms` milliseconds before `now`.
fn unused_for(s: &Span, now: u64, decay_ms: u32) -> bool {
    s.since.saturating_add(decay_ms as u64 * 1_000_000) <= now
}

/// The age of the dirty pages of runs that merge: that of the oldest, so that an old run
/// does not look freed just now because a run freed next to it joined it (a program churning
/// slabs at the edge of a big free run would otherwise keep all of it for ever). The price:
/// the pages freed last are punched with it, at most once per decay period. (Their mean age
/// instead keeps runs that are reused over and over young, but left more pages dirty and
/// unused: `tests/c/uaf.c spike 1500` with `dirty_decay=200` kept 3.3-7.3 MiB, not 2.9-4.6.)
#[derive(Default)]
struct DirtyAge {
    pages: u32,
    since: u64,
}

impl DirtyAge {
    fn add(&mut self, pages: u32, since: u64) {
        if pages != 0 {
            self.since = if self.pages == 0 { since } else { self.since.min(since) };
            self.pages += pages;
        }
    }
}

/// The two sets of free-run lists (`State::bins`).
const DIRTY: usize = 0;
const CLEAN: usize = 1;

/// Spans of at least this many pages are punched out as soon as they are freed.
const PUNCH_PAGES: u32 = 32;
/// Dirty free pages kept for reuse: at least this many (32 MiB), and up to the peak of pages
/// in use, so that a program whose memory swings (builds and drops a large structure
/// again and again) reuses its pages instead of returning them to the system and getting
/// fresh zeroed ones each time (glibc keeps all of it).
const DIRTY_MIN: u32 = 8192;

/// Out-of-band descriptor of a run of pool pages.
#[repr(C)]
pub struct Span {
    pub start: u32,
    pub npages: u32,
    pub kind: u8,
    /// SLAB: the size class. PAGES: `GUARD_AT_END` and `NO_CANARY` bits.
    pub class: u8,
    /// Slabs: free slots in the slab's bitmap (slots in thread caches count as taken).
    pub nfree: u32,
    pub next: u32,
    pub prev: u32,
    /// PAGES/LARGE: requested size of the live object, or `DEAD`.
    pub size: AtomicUsize,
    /// Object start (PAGES/LARGE) or slab base address in the canonical view (SLAB).
    pub addr: usize,
    /// LARGE: the object's own view and its length.
    pub view: usize,
    pub view_len: usize,
    /// FREE_RUN: when its newest pages were freed (`sys::now_ns`), for the dirty decay.
    /// SLAB: the idle clock's tick when it last issued a lane (`slab::decay_idle_if_due`).
    pub since: u64,
    /// SLAB: slot table (per-slot sizes, then lanes).
    pub meta: *mut u8,
    /// SLAB: lanes per page in use; lanes ready to issue.
    pub lanes: u32,
    pub ready: u32,
    /// PAGES: the epoch whose alias the object was handed out under.
    pub epoch: AtomicU32,
    /// SLAB: pages whose memory went back to the system while all their lanes were ready
    /// (bit j: page j); the next install of one fills it again.
    pub holes: u16,
    /// SLAB in detect mode: pages whose slots hold canary bytes since the first issue of one
    /// of them (`heap::poison_page`; bit j: page j). A page whose memory went back is filled
    /// again at its next issue.
    pub filled: u16,
    /// SLAB: a number no earlier slab had (`slab::new_slab`), with which detect mode keys the
    /// canary bytes its free slots hold (`heap::poison_slot`): a new slab's pages may still
    /// hold those of a slab before it.
    pub gen: u32,
    /// PAGES/LARGE in detect mode: allocation and free stacks (depot ids) and threads.
    pub trace: crate::stack::Trace,
    /// FREE_RUN: how many of its pages may hold old data (0: all of them read as zero). A
    /// split does not know where they lie, so each part keeps up to its length of them.
    pub dirty: u32,
    /// Freed, waiting for the next epoch on the deferred list (its contents are dead).
    pub deferred: bool,
}

struct State {
    /// Pages below `bump` have been handed out at least once.
    bump: u32,
    /// Free-run lists, one set for runs that may hold old data (`dirty`) and one for runs of
    /// holes: `[n]` holds runs of exactly n pages (1..=64), `[0]` longer ones.
    bins: [[u32; 65]; 2],
    /// Bit n-1 of `bin_mask[d]` set when `bins[d][n]` is non-empty.
    bin_mask: [u64; 2],
    dirty_pages: u32,
    free_desc: u32,
    desc_bump: u32,
    /// Live LARGE spans (the fork handler remaps their views).
    large: u32,
    /// Spans freed during the current epoch; returned to the free runs when the next epoch
    /// starts, so that free runs only ever hold pages the issuing epoch has not issued.
    deferred: u32,
    deferred_pages: u32,
    pub stats: PoolStats,
}

#[derive(Clone, Copy, Default)]
pub struct PoolStats {
    pub runs_allocated: u64,
    pub pages_in_use: u64,
    pub peak_pages_in_use: u64,
    pub punched_pages: u64,
}

/// Pages are given memory through the canonical view (marked `MADV_NOHUGEPAGE`) rather
/// than with `fallocate`, which would make huge folios here (see the module's documentation).
static THROUGH_VIEW: AtomicBool = AtomicBool::new(false);

/// The largest folio the kernel makes for shared memory on x86-64 (a PMD).
const HUGE: usize = 2 << 20;

/// Whether giving the first page of `fd` memory made more than that page resident; the range
/// is punched again after. `view`: through the mapping at `base` instead of with `fallocate`.
fn grows_huge(fd: i32, base: usize, view: bool) -> bool {
    let filled = if view {
        touch_through(base, PAGE) == 0
    } else {
        // SAFETY: fallocate of the first page of the pool's own file, before any page is used.
        unsafe { sys::raw_syscall(libc::SYS_fallocate, [fd as usize, 0, 0, PAGE, 0, 0]) == 0 }
    };
    let huge = filled && sys::file_allocated(fd).is_some_and(|b| b > PAGE as u64);
    let punch = (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE) as usize;
    // SAFETY: as above; the page goes back to being a hole.
    unsafe { sys::raw_syscall(libc::SYS_fallocate, [fd as usize, punch, 0, HUGE, 0, 0]) };
    huge
}

/// Gives the pages at `addr..addr+len` of the canonical view memory by touching them
/// (`MADV_POPULATE_WRITE`), then drops the view's page-table entries again (read through it,
/// a page would count twice in RSS). Raw calls: `errno` stays. 0, or minus the error number.
fn touch_through(addr: usize, len: usize) -> isize {
    // SAFETY: madvise of pool pages in the canonical view, which only the allocator uses.
    let r = unsafe { sys::raw_syscall(libc::SYS_madvise, [addr, len, libc::MADV_POPULATE_WRITE as usize, 0, 0, 0]) };
    if r == 0 {
        // SAFETY: as above.
        unsafe { sys::raw_syscall(libc::SYS_madvise, [addr, len, libc::MADV_DONTNEED as usize, 0, 0, 0]) };
    }
    r
}

/// At `init`: where `fallocate` gives the pool huge folios and a `MADV_NOHUGEPAGE` view
/// does not, pages get memory through the view.
fn keep_pages_small(fd: i32, base: usize, len: usize) {
    if grows_huge(fd, base, false) && sys::advise(base as *mut u8, len, libc::MADV_NOHUGEPAGE) {
        THROUGH_VIEW.store(!grows_huge(fd, base, true), Ordering::Relaxed);
    }
}

/// Marks a new view of a whole pool file at `base` (a forked child's copy) as `init` marked
/// the canonical view (not under a filter the program installed, as `prefill_small`).
pub fn keep_view_small(base: usize, len: usize) {
    if THROUGH_VIEW.load(Ordering::Relaxed) && !crate::seccomp::filtered() {
        sys::advise(base as *mut u8, len, libc::MADV_NOHUGEPAGE);
    }
}

/// Gives memory to pages `off..off+len` (bytes) of the file `fd` in 4 KiB pages where
/// `fallocate` would make huge folios: through a `MADV_NOHUGEPAGE` mapping of 2 MiB at a time
/// (the copy of the pool a `fork` makes, whose pages the kernel would otherwise allocate as it
/// writes them). Best effort: where a window cannot be mapped, the writes allocate as they may;
/// nothing under a filter the program installed (`seccomp`), which need not allow these calls.
pub fn prefill_small(fd: i32, off: usize, len: usize) {
    if !THROUGH_VIEW.load(Ordering::Relaxed) || crate::seccomp::filtered() {
        return;
    }
    let mut at = off;
    while at < off + len {
        let n = (off + len - at).min(HUGE);
        let w = sys::map_shared(ptr::null_mut(), n, fd, at);
        if w.is_null() {
            return;
        }
        if sys::advise(w, n, libc::MADV_NOHUGEPAGE) {
            sys::advise(w, n, libc::MADV_POPULATE_WRITE);
        }
        sys::unmap(w, n);
        at += n;
    }
}

/// Set once during initialisation (and, in a forked child, by the fork handler while every
/// lock is held); read-only otherwise.
pub struct Layout {
    pub base: usize,
    pub pages: u32,
    pub fd: i32,
    pub file: (u64, u64),
    spans: *mut Span,
    pagemap: *mut AtomicU32,
}

pub struct Pool {
    layout: crate::GlobalCell<Layout>,
    state: Locked<State>,
}

pub static POOL: Pool = Pool {
    layout: crate::GlobalCell::new(Layout {
        base: 0,
        pages: 0,
        fd: -1,
        file: (0, 0),
        spans: ptr::null_mut(),
        pagemap: ptr::null_mut(),
    }),
    state: Locked::new(State {
        bump: 0,
        bins: [[NONE; 65]; 2],
        bin_mask: [0; 2],
        dirty_pages: 0,
        free_desc: NONE,
        desc_bump: 1,
        large: NONE,
        deferred: NONE,
        deferred_pages: 0,
        stats: PoolStats { runs_allocated: 0, pages_in_use: 0, peak_pages_in_use: 0, punched_pages: 0 },
    }),
};

/// The smallest pool tried (address space permitting, the first try is 64 GiB).
const MIN_POOL: usize = 16 << 20;

/// Why the pool could not be set up.
pub enum InitError {
    Memfd,
    Map,
}

/// The descriptor table and the page map, reserved for every pool page and made writable as
/// descriptors and pages come into use (`meta::Table`): `new_desc`, `take_run`, `extend_run`.
static SPANS: crate::meta::Table = crate::meta::Table::new();
static PAGEMAP: crate::meta::Table = crate::meta::Table::new();

/// Most pages in use at once (`Pool::set_cap`).
static CAP_PAGES: AtomicU64 = AtomicU64::new(u64::MAX);

/// The pool memfd's name (also a forked child's copy); /proc/self/maps shows its mappings
/// as `/memfd:` followed by it, which is how a sweep leaves them out.
pub const MEMFD_NAME: &core::ffi::CStr = c"nevermore-pool";

impl Pool {
    /// Creates the memfd and the canonical view. Tries a 64 GiB pool (an eighth of
    /// `RLIMIT_AS` when that is set, less under `RLIMIT_DATA`), halving down to 16 MiB when the
    /// address space or the file size (`RLIMIT_FSIZE`: the pool is a file) is limited.
    ///
    /// # Safety
    /// Called once, before any other thread can use the pool.
    pub unsafe fn init(&self) -> Result<(), InitError> {
        let fd = sys::memfd(MEMFD_NAME);
        if fd < 0 {
            return Err(InitError::Memfd);
        }
        // Under an address-space limit, start from an eighth of it (the alias arena takes a
        // quarter); the halving below copes with the rest.
        let mut bytes: usize = match sys::as_limit() {
            Some(l) => sys::pow2_floor(l / 8).clamp(MIN_POOL, 64 << 30),
            None => 64 << 30,
        };
        // Under a data limit, the tables kept per pool page (descriptors, page map, the alias
        // engine's epochs: ~128 bytes) take at most a quarter of it.
        if let Some(l) = sys::data_limit() {
            bytes = bytes.min(sys::pow2_floor((l / 4 / 128) << PAGE_SHIFT).max(MIN_POOL));
        }
        loop {
            let pages = bytes >> PAGE_SHIFT;
            if sys::ftruncate(fd, bytes) {
                let base = sys::map_shared(ptr::null_mut(), bytes, fd, 0);
                let spans = SPANS.map(pages * core::mem::size_of::<Span>());
                let pagemap = PAGEMAP.map(pages * 4);
                if !base.is_null() && !spans.is_null() && !pagemap.is_null() {
                    // SAFETY: single-threaded initialisation (caller's contract).
                    let l = unsafe { self.layout.get_mut() };
                    l.base = base as usize;
                    l.pages = pages as u32;
                    l.fd = fd;
                    l.file = sys::file_id(fd).unwrap_or((0, 0));
                    l.spans = spans as *mut Span;
                    l.pagemap = pagemap as *mut AtomicU32;
                    keep_pages_small(fd, base as usize, bytes);
                    return Ok(());
                }
                if !base.is_null() {
                    sys::unmap(base, bytes);
                }
                for (p, len) in [(spans, pages * core::mem::size_of::<Span>()), (pagemap, pages * 4)] {
                    if !p.is_null() {
                        crate::meta::unmap(p, len);
                    }
                }
            }
            if bytes <= MIN_POOL {
                sys::close(fd);
                return Err(InitError::Map);
            }
            bytes /= 2;
        }
    }

    /// Whether `fd` is the pool's memory file (its number, and still its file).
    pub fn is_own_fd(&self, fd: i32) -> bool {
        let l = self.layout();
        sys::is_own(fd, l.fd, l.file)
    }

    #[inline]
    pub fn layout(&self) -> &Layout {
        self.layout.get()
    }

    /// # Safety
    /// Only for the fork handlers, with every allocator lock held.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn layout_mut(&self) -> &mut Layout {
        // SAFETY: guaranteed by the caller.
        unsafe { self.layout.get_mut() }
    }

    #[inline]
    pub fn span(&self, idx: u32) -> &Span {
        // SAFETY: descriptors live in a table reserved for every possible index (one per pool
        // page at most); entries that were never used read as zeroes.
        unsafe { &*self.layout().spans.add(idx as usize) }
    }

    #[allow(clippy::mut_from_ref)]
    #[inline]
    fn span_mut(&self, idx: u32) -> &mut Span {
        // SAFETY: as in `span`; mutation happens only under the state lock or by the owner of
        // a span (fields the owner alone touches).
        unsafe { &mut *self.layout().spans.add(idx as usize) }
    }

    /// The span holding the canonical address `addr`, if any span covers it.
    #[inline]
    pub fn span_at(&self, addr: usize) -> Option<(u32, &Span)> {
        let l = self.layout();
        let off = addr.wrapping_sub(l.base);
        let page = off >> PAGE_SHIFT;
        if page >= l.pages as usize {
            return None;
        }
        // SAFETY: `page` is inside the page map.
        let idx = unsafe { (*l.pagemap.add(page)).load(Ordering::Acquire) };
        if idx == NONE {
            return None;
        }
        let s = self.span(idx);
        let page = page as u32;
        if s.kind == FREE_RUN || s.kind == UNUSED || page < s.start || page - s.start >= s.npages {
            return None;
        }
        Some((idx, s))
    }

    #[inline]
    pub fn page_addr(&self, page: u32) -> usize {
        self.layout().base + ((page as usize) << PAGE_SHIFT)
    }

    fn set_map(&self, page: u32, idx: u32) {
        // SAFETY: `page` < number of pool pages (callers pass pages of real spans).
        unsafe { (*self.layout().pagemap.add(page as usize)).store(idx, Ordering::Release) }
    }

    /// Hands out a run of `n` pages as a span of `kind`. Returns the descriptor index and
    /// whether the pages may hold old data (else they read as zero).
    pub fn alloc_run(&self, n: u32, kind: u8) -> Option<(u32, bool)> {
        let mut st = self.state.lock();
        let idx = self.take_run(&mut st, n)?;
        let s = self.span_mut(idx);
        s.kind = kind;
        s.class = 0;
        s.nfree = 0;
        s.next = NONE;
        s.prev = NONE;
        s.size.store(DEAD, Ordering::Relaxed);
        s.addr = 0;
        s.view = 0;
        s.view_len = 0;
        s.meta = ptr::null_mut();
        s.lanes = 0;
        s.ready = 0;
        s.epoch.store(0, Ordering::Relaxed);
        s.holes = 0;
        s.filled = 0;
        s.trace.set_alloc(0, 0, 0);
        let dirty = s.dirty != 0;
        s.dirty = 0;
        for p in s.start..s.start + n {
            self.set_map(p, idx);
        }
        if kind == LARGE {
            self.push_list(&mut st.large, idx);
        }
        st.stats.runs_allocated += 1;
        st.stats.pages_in_use += n as u64;
        st.stats.peak_pages_in_use = st.stats.peak_pages_in_use.max(st.stats.pages_in_use);
        Some((idx, dirty))
    }

    /// Lengthens live run `idx` by `more` pages taken from right after it: from the free run
    /// that follows it, or fresh pages when it ends the part of the pool used so far; only if
    /// `also` agrees, which runs under the pool's lock (so that it may take locks that come
    /// after it, and the pages cannot go elsewhere meanwhile). Returns whether it did. The pages
    /// may hold old data, as any reused run.
    pub fn extend_run(&self, idx: u32, more: u32, also: impl FnOnce() -> bool) -> bool {
        let mut st = self.state.lock();
        if !Self::within_cap(&st, more) {
            return false;
        }
        let end = self.span(idx).start + self.span(idx).npages;
        let next = if end == st.bump {
            if more > self.layout().pages - st.bump || !PAGEMAP.ensure((st.bump + more) as usize * 4) {
                return false;
            }
            None
        } else {
            match self.free_run_at(end) {
                Some(r) if self.span(r).npages >= more => Some(r),
                _ => return false,
            }
        };
        if !also() {
            return false;
        }
        match next {
            None => st.bump += more,
            Some(r) => {
                self.unbin(&mut st, r);
                let taken = self.split(&mut st, r, more);
                self.release_desc(&mut st, taken);
            }
        }
        self.span_mut(idx).npages += more;
        for p in end..end + more {
            self.set_map(p, idx);
        }
        st.stats.pages_in_use += more as u64;
        st.stats.peak_pages_in_use = st.stats.peak_pages_in_use.max(st.stats.pages_in_use);
        true
    }

    /// `alloc_run` for spans whose aliases userfaultfd will map (slabs, page objects), which it
    /// can only do for pages that exist: a run of holes (fresh or punched pages) has its first
    /// `filled` pages filled at once, with one call, rather than by every install that meets a
    /// hole. (A page object's guard page is never installed: it stays a hole.)
    pub fn alloc_run_filled(&self, n: u32, filled: u32, kind: u8) -> Option<(u32, bool)> {
        let (idx, dirty) = self.alloc_run(n, kind)?;
        if !dirty {
            // Failure is left to `alias::install`, which fills holes itself and says why not.
            let _ = self.fill_pages(self.span(idx).start, filled.min(n));
        }
        Some((idx, dirty))
    }

    /// Caps the pages in use at `bytes` (an address-space limit the program set: `rlimit`);
    /// `u64::MAX` lifts the cap.
    pub fn set_cap(&self, bytes: u64) {
        CAP_PAGES.store(if bytes == u64::MAX { u64::MAX } else { bytes >> PAGE_SHIFT }, Ordering::Relaxed);
    }

    /// Whether `n` more pages in use stay within the cap.
    fn within_cap(st: &State, n: u32) -> bool {
        st.stats.pages_in_use + n as u64 <= CAP_PAGES.load(Ordering::Relaxed)
    }

    fn take_run(&self, st: &mut State, n: u32) -> Option<u32> {
        if !Self::within_cap(st, n) {
            return None;
        }
        // Runs that hold old data first, of any length (they cost no fresh zeroed pages, and
        // the others can wait as holes); in each set, the smallest run of an exact or larger
        // list, then the first long run that is long enough.
        for d in [DIRTY, CLEAN] {
            if n <= 64 {
                let mask = st.bin_mask[d] >> (n - 1);
                if mask != 0 {
                    let idx = st.bins[d][n as usize + mask.trailing_zeros() as usize];
                    self.unbin(st, idx);
                    return Some(self.split(st, idx, n));
                }
            }
            let mut idx = st.bins[d][0];
            while idx != NONE {
                if self.span(idx).npages >= n {
                    self.unbin(st, idx);
                    return Some(self.split(st, idx, n));
                }
                idx = self.span(idx).next;
            }
        }
        // Fresh pages.
        if n > self.layout().pages - st.bump || !PAGEMAP.ensure((st.bump + n) as usize * 4) {
            return None;
        }
        let idx = self.new_desc(st)?;
        let s = self.span_mut(idx);
        s.start = st.bump;
        s.npages = n;
        s.dirty = 0;
        st.bump += n;
        Some(idx)
    }

    /// Keeps the first `n` pages of free run `idx` (already unbinned), re-bins the rest.
    fn split(&self, st: &mut State, idx: u32, n: u32) -> u32 {
        let (start, total, dirty) = {
            let s = self.span(idx);
            (s.start, s.npages, s.dirty)
        };
        if total > n {
            if let Some(rest) = self.new_desc(st) {
                let r = self.span_mut(rest);
                r.start = start + n;
                r.npages = total - n;
                r.dirty = dirty.min(total - n);
                r.since = self.span(idx).since;
                r.kind = FREE_RUN;
                let s = self.span_mut(idx);
                s.npages = n;
                s.dirty = dirty.min(n);
                // Its end pages name it, so that a neighbour freed later finds it and merges.
                self.set_map(start + n, rest);
                self.set_map(start + total - 1, rest);
                self.bin(st, rest);
            }
        }
        idx
    }

    /// Returns span `idx` to the free runs, coalescing with free neighbours.
    pub fn free_run(&self, idx: u32) {
        let mut st = self.state.lock();
        let (mut start, mut n, kind) = {
            let s = self.span(idx);
            (s.start, s.npages, s.kind)
        };
        let freed = n;
        st.stats.pages_in_use -= n as u64;
        if kind == LARGE {
            self.unlink_list(&mut st.large, idx);
        }
        // A neighbour that sat unused past the decay period is punched before it merges into
        // this run, which counts as freed now and would otherwise hide its age.
        let now = sys::now_ns();
        let decay = crate::options().dirty_decay_ms;
        let expired = |s: &Span| s.dirty != 0 && unused_for(s, now, decay);
        // Runs merge only with neighbours as clean as they will be: a run of old data beside
        // punched pages stays apart, where the next request of its size takes it again; merged
        // into them, it would hide among pages that cost a fresh zeroed page each, and requests
        // would go to those while it waits for the decay (a program churning slabs at the edge
        // of a big punched run kept several times the memory it reused).
        let punch_now = freed >= PUNCH_PAGES || decay == 0;
        let mut age = DirtyAge::default();
        age.add(n, now);
        let mut join = |st: &mut State, nb: u32| -> bool {
            self.unbin(st, nb);
            if expired(self.span(nb)) {
                self.punch(st, nb);
            }
            if (self.span(nb).dirty == 0) != punch_now {
                self.bin(st, nb);
                return false;
            }
            age.add(self.span(nb).dirty, self.span(nb).since);
            true
        };
        if start > 0 {
            if let Some(l) = self.free_run_at(start - 1) {
                if join(&mut st, l) {
                    start = self.span(l).start;
                    n += self.span(l).npages;
                    self.release_desc(&mut st, l);
                }
            }
        }
        if start + n < st.bump {
            if let Some(r) = self.free_run_at(start + n) {
                if join(&mut st, r) {
                    n += self.span(r).npages;
                    self.release_desc(&mut st, r);
                }
            }
        }
        let s = self.span_mut(idx);
        s.kind = FREE_RUN;
        s.start = start;
        s.npages = n;
        let dirty = age.pages;
        s.dirty = dirty;
        s.since = age.since;
        s.size.store(DEAD, Ordering::Relaxed);
        self.set_map(start, idx);
        self.set_map(start + n - 1, idx);
        let dirty_max = st.stats.peak_pages_in_use.max(DIRTY_MIN as u64);
        if punch_now || (st.dirty_pages + dirty) as u64 > dirty_max {
            self.punch(&mut st, idx);
        }
        self.bin(&mut st, idx);
        self.decay(&mut st, now, decay);
    }

    /// Punches the dirty free runs that nobody reused for `decay_ms` (the `dirty_decay`
    /// option): a program whose memory swings keeps the pages it keeps coming back for,
    /// and a server past its peak gives the rest back. Looks at most four times per decay
    /// period (and at most every 50 ms), when pool pages are freed.
    fn decay(&self, st: &mut State, now: u64, decay_ms: u32) {
        if now < NEXT_DECAY.load(Ordering::Relaxed) {
            return;
        }
        NEXT_DECAY.store(now + decay_period_ns(decay_ms), Ordering::Relaxed);
        self.punch_runs(st, |s| unused_for(s, now, decay_ms));
    }

    /// `decay`, when it is due, for callers that free no pool pages themselves (a thread's
    /// revocation batch): a program that stopped freeing spans still gives back old ones.
    pub fn decay_if_due(&self) {
        let now = sys::now_ns();
        if now >= NEXT_DECAY.load(Ordering::Relaxed) {
            let mut st = self.state.lock();
            self.decay(&mut st, now, crate::options().dirty_decay_ms);
        }
    }

    /// Punches every dirty free run for which `old` holds; returns whether any was.
    fn punch_runs(&self, st: &mut State, old: impl Fn(&Span) -> bool) -> bool {
        let mut released = false;
        for b in 0..65 {
            let mut idx = st.bins[DIRTY][b];
            while idx != NONE {
                let next = self.span(idx).next;
                if old(self.span(idx)) {
                    // To the list of runs of holes (back to this one if the punch failed).
                    self.unbin(st, idx);
                    self.punch(st, idx);
                    released |= self.span(idx).dirty == 0;
                    self.bin(st, idx);
                }
                idx = next;
            }
        }
        released
    }

    /// Frees span `idx` once the next epoch begins (see `State::deferred`).
    pub fn free_run_deferred(&self, idx: u32) {
        let mut st = self.state.lock();
        st.deferred_pages += self.span(idx).npages;
        self.span_mut(idx).deferred = true;
        let mut head = st.deferred;
        self.push_list(&mut head, idx);
        st.deferred = head;
    }

    pub fn deferred_pages(&self) -> u32 {
        self.state.lock().deferred_pages
    }

    /// Releases every deferred span (a new epoch has begun).
    pub fn release_deferred(&self) {
        loop {
            let idx = {
                let mut st = self.state.lock();
                let idx = st.deferred;
                if idx == NONE {
                    st.deferred_pages = 0;
                    return;
                }
                let mut head = idx;
                self.unlink_list(&mut head, idx);
                st.deferred = head;
                self.span_mut(idx).deferred = false;
                idx
            };
            crate::slab::recycle_table(idx);
            self.free_run(idx);
        }
    }

    /// Makes sure pool pages `start..start+n` exist in the memfd (userfaultfd can only map
    /// pages that exist). Called by `alias::install` when it meets a hole, so pages that
    /// already hold data cost nothing. Raw system calls only, `errno` left alone (the sweep's
    /// helper task, which shares a thread's thread pointer, calls it too). Err: the error
    /// number (ENOMEM or ENOSPC when the system is out of memory).
    pub fn fill_pages(&self, start: u32, n: u32) -> Result<(), i32> {
        let (start, n) = (start as usize, n as usize);
        let l = self.layout();
        let (off, len) = (start << PAGE_SHIFT, n << PAGE_SHIFT);
        if !THROUGH_VIEW.load(Ordering::Relaxed) && sys::file_id(l.fd) == Some(l.file) {
            // SAFETY: plain syscall on our pool descriptor.
            match unsafe { sys::raw_syscall(libc::SYS_fallocate, [l.fd as usize, 0, off, len, 0, 0]) } {
                0 => return Ok(()),
                r if -r as i32 == libc::ENOSPC || -r as i32 == libc::ENOMEM => return Err(-r as i32),
                _ => {}
            }
        }
        // Through the canonical view (no descriptor: the program closed it; or huge folios
        // otherwise).
        match touch_through(l.base + off, len) {
            0 => Ok(()),
            r => Err(-r as i32),
        }
    }

    fn free_run_at(&self, page: u32) -> Option<u32> {
        // SAFETY: `page` < bump <= number of pool pages.
        let idx = unsafe { (*self.layout().pagemap.add(page as usize)).load(Ordering::Relaxed) };
        if idx == NONE {
            return None;
        }
        let s = self.span(idx);
        (s.kind == FREE_RUN && page >= s.start && page - s.start < s.npages).then_some(idx)
    }

    /// Returns the memory of pool pages `start..start+n` to the system: pages of a live span
    /// that hold nothing (slab pages whose lanes are all ready). They read as zero afterwards,
    /// and the next install fills them again (`alias::install`).
    pub fn punch_pages(&self, start: u32, n: u32) -> bool {
        sys::advise(self.page_addr(start) as *mut u8, (n as usize) << PAGE_SHIFT, libc::MADV_REMOVE)
    }

    fn punch(&self, st: &mut State, idx: u32) {
        let s = self.span_mut(idx);
        if s.dirty == 0 {
            return;
        }
        let addr = self.page_addr(s.start) as *mut u8;
        if sys::advise(addr, (s.npages as usize) << PAGE_SHIFT, libc::MADV_REMOVE) {
            s.dirty = 0;
            st.stats.punched_pages += s.npages as u64;
        }
    }

    /// Punches every dirty free run (malloc_trim). Returns whether anything was released.
    pub fn trim(&self) -> bool {
        let mut st = self.state.lock();
        self.punch_runs(&mut st, |_| true)
    }

    fn bin_of(n: u32) -> usize {
        if n <= 64 {
            n as usize
        } else {
            0
        }
    }

    /// Which set of lists a free run belongs in (see `State::bins`).
    fn set_of(dirty: u32) -> usize {
        if dirty != 0 {
            DIRTY
        } else {
            CLEAN
        }
    }

    fn bin(&self, st: &mut State, idx: u32) {
        let (n, dirty) = (self.span(idx).npages, self.span(idx).dirty);
        let (d, b) = (Self::set_of(dirty), Self::bin_of(n));
        let mut head = st.bins[d][b];
        self.push_list(&mut head, idx);
        st.bins[d][b] = head;
        if b != 0 {
            st.bin_mask[d] |= 1 << (b - 1);
        }
        st.dirty_pages += dirty;
    }

    /// Takes free run `idx` off its list; its `dirty` must be what it was when it was binned.
    fn unbin(&self, st: &mut State, idx: u32) {
        let (n, dirty) = (self.span(idx).npages, self.span(idx).dirty);
        let (d, b) = (Self::set_of(dirty), Self::bin_of(n));
        let mut head = st.bins[d][b];
        self.unlink_list(&mut head, idx);
        st.bins[d][b] = head;
        if b != 0 && head == NONE {
            st.bin_mask[d] &= !(1 << (b - 1));
        }
        st.dirty_pages -= dirty;
    }

    /// Doubly-linked lists threaded through `next`/`prev` of the descriptors.
    pub fn push_list(&self, head: &mut u32, idx: u32) {
        let s = self.span_mut(idx);
        s.prev = NONE;
        s.next = *head;
        if *head != NONE {
            self.span_mut(*head).prev = idx;
        }
        *head = idx;
    }

    pub fn unlink_list(&self, head: &mut u32, idx: u32) {
        let (next, prev) = (self.span(idx).next, self.span(idx).prev);
        if prev != NONE {
            self.span_mut(prev).next = next;
        } else {
            *head = next;
        }
        if next != NONE {
            self.span_mut(next).prev = prev;
        }
        let s = self.span_mut(idx);
        s.next = NONE;
        s.prev = NONE;
    }

    fn new_desc(&self, st: &mut State) -> Option<u32> {
        if st.free_desc != NONE {
            let idx = st.free_desc;
            st.free_desc = self.span(idx).next;
            return Some(idx);
        }
        if st.desc_bump >= self.layout().pages
            || !SPANS.ensure((st.desc_bump as usize + 1) * core::mem::size_of::<Span>())
        {
            return None;
        }
        let idx = st.desc_bump;
        st.desc_bump += 1;
        Some(idx)
    }

    fn release_desc(&self, st: &mut State, idx: u32) {
        let s = self.span_mut(idx);
        s.kind = UNUSED;
        s.next = st.free_desc;
        st.free_desc = idx;
    }

    /// Mutable access to a span's owner fields (slab bookkeeping under the class lock, object
    /// fields set right after `alloc_run`).
    #[allow(clippy::mut_from_ref)]
    pub fn span_owned(&self, idx: u32) -> &mut Span {
        self.span_mut(idx)
    }

    pub fn stats(&self) -> (PoolStats, u32, u32) {
        let st = self.state.lock();
        (st.stats, st.bump, st.dirty_pages)
    }

    pub fn raw_lock(&self) -> &crate::lock::RawMutex {
        self.state.raw()
    }

    /// Descriptors ever used (fork handling walks them).
    ///
    /// # Safety
    /// The state lock must be held.
    pub unsafe fn desc_count(&self) -> u32 {
        // SAFETY: guaranteed by the caller.
        unsafe { self.state.get_unlocked() }.desc_bump
    }

    /// Pages handed out so far and the live LARGE list head.
    ///
    /// # Safety
    /// The state lock must be held (fork handlers).
    pub unsafe fn fork_view(&self) -> (u32, u32) {
        // SAFETY: guaranteed by the caller.
        let st = unsafe { self.state.get_unlocked() };
        (st.bump, st.large)
    }

    /// The pages of `[from, to)` that hold data a forked child needs, as ranges in order: all
    /// but those of free runs and of spans freed and waiting for the next epoch (their
    /// contents are dead; the child gets holes, which read as zero). Walks span by span: a
    /// live span names all its pages in the map, a free run its first and last; the inner
    /// pages of a free run that starts before `from` are kept, which only costs a copy.
    ///
    /// # Safety
    /// The state lock must be held (fork handlers), and `to` <= bump.
    pub unsafe fn fork_ranges(&self, from: u32, to: u32, mut f: impl FnMut(u32, u32)) {
        let mut p = from;
        let mut keep = from;
        while p < to {
            // SAFETY: `p` < bump <= number of pool pages.
            let idx = unsafe { (*self.layout().pagemap.add(p as usize)).load(Ordering::Relaxed) };
            let s = (idx != NONE).then(|| self.span(idx)).filter(|s| p >= s.start && p - s.start < s.npages);
            let Some(s) = s else {
                p += 1;
                continue;
            };
            let end = (s.start + s.npages).min(to);
            if s.kind == FREE_RUN || s.deferred {
                if keep < p {
                    f(keep, p);
                }
                keep = end;
            }
            p = end;
        }
        if keep < to {
            f(keep, to);
        }
    }
}

#[cfg(test)]
pub(crate) fn test_init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: `Once` makes this the only initialisation.
    ONCE.call_once(|| assert!(unsafe { POOL.init() }.is_ok()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_reused_coalesced_and_resolved() {
        test_init();
        let _serial = crate::TEST_POOL_LOCK.lock().unwrap();
        let (a, fresh_a) = POOL.alloc_run(3, PAGES).unwrap();
        let (b, _) = POOL.alloc_run(5, PAGES).unwrap();
        let (c, _) = POOL.alloc_run(2, PAGES).unwrap();
        assert!(!fresh_a, "new pages read as zero");
        let (sa, sb) = (POOL.span(a).start, POOL.span(b).start);
        assert_eq!(sb, sa + 3);
        // every page of a span resolves to it; the next page to the next span
        for p in 0..5 {
            let addr = POOL.page_addr(sb + p) + 123;
            assert_eq!(POOL.span_at(addr).map(|(i, _)| i), Some(b));
        }
        assert_eq!(POOL.span_at(POOL.page_addr(sb + 5)).map(|(i, _)| i), Some(c));
        // write, free a and b: they coalesce into one dirty 8-page run that is reused
        // SAFETY: the run belongs to span a.
        unsafe { *(POOL.page_addr(sa) as *mut u8) = 7 };
        POOL.free_run(a);
        POOL.free_run(b);
        assert!(POOL.span_at(POOL.page_addr(sa)).is_none());
        assert!(POOL.span_at(POOL.page_addr(sb + 4)).is_none());
        let (d, dirty) = POOL.alloc_run(8, PAGES).unwrap();
        assert_eq!(POOL.span(d).start, sa);
        assert!(dirty);
        // splitting: a 2-page request from a freed 8-page run leaves a 6-page free run
        POOL.free_run(d);
        let (e, _) = POOL.alloc_run(2, PAGES).unwrap();
        let (f, _) = POOL.alloc_run(6, PAGES).unwrap();
        assert_eq!(POOL.span(e).start, sa);
        assert_eq!(POOL.span(f).start, sa + 2);
        for i in [c, e, f] {
            POOL.free_run(i);
        }
        // a big freed span is punched: its memory reads as zero again (and it stays apart
        // from the 10 free pages of old data before it, which the next small run takes)
        let (g, _) = POOL.alloc_run(64, PAGES).unwrap();
        assert_eq!(POOL.span(g).start, sa + 10);
        let ga = POOL.page_addr(POOL.span(g).start) as *mut u8;
        // SAFETY: the run belongs to span g.
        unsafe { *ga = 9 };
        POOL.free_run(g);
        let (h, dirty) = POOL.alloc_run(64, PAGES).unwrap();
        assert_eq!(POOL.span(h).start, sa + 10);
        assert!(!dirty);
        let (small, dirty) = POOL.alloc_run(4, PAGES).unwrap();
        assert_eq!(POOL.span(small).start, sa);
        assert!(dirty);
        POOL.free_run(small);
        // SAFETY: the run belongs to span h.
        assert_eq!(unsafe { *ga }, 0);
        POOL.free_run(h);
        // (In the same test: the checks above assume a pool that only this test has used.)
        freed_pages_are_kept_up_to_the_peak_in_use();
    }

    /// Freed pages are kept (dirty, reusable without new zeroed memory) up to the peak of
    /// pages in use, not punched as soon as a fixed budget is exceeded.
    fn freed_pages_are_kept_up_to_the_peak_in_use() {
        // From no dirty page at all: the pages freed below all count against the peak.
        POOL.trim();
        let runs: std::vec::Vec<u32> = (0..1100).map(|_| POOL.alloc_run(16, PAGES).unwrap().0).collect();
        let (stats, _, dirty_before) = POOL.stats();
        assert!(stats.peak_pages_in_use >= 1100 * 16);
        for &r in &runs {
            // SAFETY: the run belongs to span r.
            unsafe { *(POOL.page_addr(POOL.span(r).start) as *mut u8) = 5 };
        }
        let punched_before = POOL.stats().0.punched_pages;
        for &r in &runs {
            POOL.free_run(r);
        }
        let (stats, _, dirty) = POOL.stats();
        assert_eq!(stats.punched_pages, punched_before, "freed pages were punched below the peak");
        assert!(dirty >= dirty_before + 1100 * 16 - 16, "{dirty} dirty pages kept");
        // Reused runs still hold the old data (they were not returned to the system).
        let (again, was_dirty) = POOL.alloc_run(16, PAGES).unwrap();
        assert!(was_dirty);
        POOL.free_run(again);
        what_a_split_leaves_merges_again();
        a_run_grows_into_what_follows_it();
        a_fork_copies_all_but_free_runs();
    }

    /// `fork_ranges` leaves out the pages of free runs and of runs waiting for the next epoch,
    /// and nothing else.
    fn a_fork_copies_all_but_free_runs() {
        let n = POOL.stats().1 + 64;
        let runs: std::vec::Vec<u32> = (0..6).map(|_| POOL.alloc_run(n, PAGES).unwrap().0).collect();
        let first = POOL.span(runs[0]).start;
        POOL.free_run(runs[1]);
        POOL.free_run(runs[3]);
        POOL.free_run_deferred(runs[4]);
        let end = first + 6 * n;
        let ranges = || {
            let mut got = std::vec::Vec::new();
            // SAFETY: the test holds the pool to itself (TEST_POOL_LOCK), so the descriptors
            // it reads do not change meanwhile.
            unsafe { POOL.fork_ranges(first, end, |a, b| got.push((a, b))) };
            got
        };
        assert_eq!(ranges(), [(first, first + n), (first + 2 * n, first + 3 * n), (first + 5 * n, end)]);
        // Released to the free runs, the deferred run merges with its free neighbour.
        POOL.release_deferred();
        assert_eq!(ranges(), [(first, first + n), (first + 2 * n, first + 3 * n), (first + 5 * n, end)]);
        POOL.free_run(runs[2]);
        assert_eq!(ranges(), [(first, first + n), (first + 5 * n, end)]);
        for i in [0, 5] {
            POOL.free_run(runs[i]);
        }
    }

    /// `extend_run` takes the pages after a run: from the free run that follows (its rest stays
    /// free and whole), from the pool's fresh pages when the run ends the used part, and
    /// nothing when its neighbour is in use, is too short, or the caller's check says no.
    fn a_run_grows_into_what_follows_it() {
        // Longer than every free run together: a and b come from the end of the pool.
        let n = POOL.stats().1 + 64;
        let (a, _) = POOL.alloc_run(n, LARGE).unwrap();
        let (b, _) = POOL.alloc_run(n, LARGE).unwrap();
        let (start_a, start_b) = (POOL.span(a).start, POOL.span(b).start);
        assert_eq!(start_b, start_a + n);
        assert!(!POOL.extend_run(a, 1, || true), "grew over a live run");
        POOL.free_run(b);
        assert!(!POOL.extend_run(a, 16, || false), "grew although the check said no");
        assert_eq!(POOL.span(a).npages, n);
        assert!(!POOL.extend_run(a, n + 1, || true), "grew past the free run");
        assert!(POOL.extend_run(a, 16, || true));
        assert_eq!((POOL.span(a).start, POOL.span(a).npages), (start_a, n + 16));
        assert_eq!(POOL.span_at(POOL.page_addr(start_b + 15)).map(|(i, _)| i), Some(a));
        // The rest of the free run is one run that the next request of its length takes.
        let (d, _) = POOL.alloc_run(n - 16, LARGE).unwrap();
        assert_eq!(POOL.span(d).start, start_b + 16);
        // At the end of the used part, fresh pages.
        let bump = POOL.stats().1;
        assert_eq!(POOL.span(d).start + n - 16, bump);
        assert!(POOL.extend_run(d, 10, || true));
        assert_eq!((POOL.span(d).npages, POOL.stats().1), (n - 6, bump + 10));
        POOL.free_run(d);
        POOL.free_run(a);
    }

    /// The free rest of a split run merges with its neighbour when that is freed, so that a
    /// run growing page by page (realloc) keeps reusing the same pages instead of new ones.
    fn what_a_split_leaves_merges_again() {
        // Bigger than every free run together: these pages come from the end of the pool.
        let n = POOL.stats().1 + 64;
        let (big, _) = POOL.alloc_run(n, LARGE).unwrap();
        POOL.free_run(big);
        // Only that freed run (with any free run before it) is long enough.
        let (a, _) = POOL.alloc_run(n - 32, LARGE).unwrap();
        let start = POOL.span(a).start;
        let end = POOL.stats().1;
        POOL.free_run(a);
        let (b, _) = POOL.alloc_run(n - 16, LARGE).unwrap();
        assert_eq!(POOL.span(b).start, start, "the split's rest did not merge back");
        assert_eq!(POOL.stats().1, end, "fresh pages taken although freed ones were enough");
        POOL.free_run(b);
    }
}
