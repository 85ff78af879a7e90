//! Detect mode with `detect_leaks=1`: at exit, the live objects no pointer leads to.
//!
//! When the process exits (the library's `.fini_array` entry, after the program's `atexit`
//! handlers and destructors), the other threads are held still (`stop`, as for sweeps), and
//! every word the program can still reach is read: the registers, and every mapping of its own
//! (stacks, globals, thread-local storage, other allocators' memory), but not the heap and
//! not the allocator's metadata. A word that points at or into a live object marks it
//! (`reach`) and puts it on a work list; the objects on the list are read in turn, so what
//! they point to is marked too. Every live object left unmarked is a leak: nothing the
//! program holds leads to it, so it can never be freed. Leaks are grouped by the stack that
//! allocated them and reported once (`memory-leak`), the groups holding the most bytes
//! first, then the process ends as after any report (SIGABRT, or `exitcode`).
//!
//! As LeakSanitizer's, the scan is conservative: any word that looks like a pointer into an
//! object keeps it (an integer that happens to look like one hides a leak; pointers stored
//! hidden, xored or tagged, make a false report, as do pointers only the kernel holds). A
//! process that leaves by `_exit` or dies of a signal is not checked.
//!
//! Marks: the size entry of a live slab slot gets `sweep::REACHED` (unused in detect mode,
//! where no sweep runs); a page or large object's span gets `MARK` in its size. Both are
//! cleared before the check returns (it returns when nothing leaked).

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU16, AtomicU64, AtomicUsize, Ordering};

use crate::pool::{self, POOL};
use crate::report::{self, LeakGroup};
use crate::slab::{self, CLASSES, FREED};
use crate::sweep::REACHED;
use crate::sys::{self, PAGE, PAGE_SHIFT};
use crate::{alias, large, stack, stop, sweep};

/// Set in a live page or large object's `Span::size` once it was reached.
const MARK: usize = 1 << 62;
/// Groups of leaks kept (distinct allocation stacks); leaks of further stacks are counted
/// together.
const GROUPS: usize = 4096;

/// A live object: where it is, how many bytes to read, and where its mark lives.
#[derive(Clone, Copy)]
struct Item {
    start: usize,
    len: usize,
    /// The size entry of a slab slot, or null for a page or large object (`span`).
    entry: *const AtomicU16,
    span: u32,
}

/// The work list: room for every live object (each is put on it once, when marked).
static LIST: AtomicPtr<Item> = AtomicPtr::new(core::ptr::null_mut());
static LIST_CAP: AtomicUsize = AtomicUsize::new(0);
static LIST_LEN: AtomicUsize = AtomicUsize::new(0);

/// A copy of standard error taken at start-up: many programs close their standard streams at
/// exit (coreutils' `close_stdout` closes standard error too), before the check runs, and
/// its report would be lost; some then open a file of their own, which takes number 2.
static STDERR_COPY: AtomicI32 = AtomicI32::new(-1);

/// At start-up, with `detect_leaks=1` or statistics asked for (`stats`, `stats_interval`):
/// keeps a copy of standard error (close-on-exec, at a high number).
pub fn keep_stderr() {
    let o = crate::options();
    let wanted = (crate::detect() && o.detect_leaks) || o.stats || o.stats_interval_s > 0;
    if wanted && STDERR_COPY.load(Ordering::Relaxed) < 0 {
        let (dev, ino) = sys::file_id(2).unwrap_or((0, 0));
        STDERR_DEV.store(dev, Ordering::Relaxed);
        STDERR_INO.store(ino, Ordering::Relaxed);
        STDERR_COPY.store(sys::dup_high(2, 800), Ordering::Release);
    }
}

/// Where the library's own output goes (statistics, the leak report): the `report_path` file
/// (reopened by `report::out_fd` if need be), else standard error while it is the file it was
/// at start-up, else the copy kept then (the program closed it, or put a file of its own at
/// its number, which nothing may be written into); None when neither is left (the program
/// closed the copy too). Error reports go to `report::out_fd`: descriptor 2 as it is then
/// (where a server that moved its error log there wants them).
pub fn own_output_fd() -> Option<i32> {
    if crate::options().report_path.is_some() {
        return Some(report::out_fd());
    }
    let started = (STDERR_DEV.load(Ordering::Relaxed), STDERR_INO.load(Ordering::Relaxed));
    if started == (0, 0) || sys::file_id(2) == Some(started) {
        // Nothing kept (no statistics asked for at start-up: `malloc_stats`), or unchanged.
        return Some(2);
    }
    let copy = STDERR_COPY.load(Ordering::Acquire);
    is_stderr_copy(copy).then_some(copy)
}

/// The file of `STDERR_COPY` (device, inode).
static STDERR_DEV: AtomicU64 = AtomicU64::new(0);
static STDERR_INO: AtomicU64 = AtomicU64::new(0);

/// Whether `fd` is the copy of standard error kept for the leak report (its number, and still
/// its file).
pub fn is_stderr_copy(fd: i32) -> bool {
    let id = (STDERR_DEV.load(Ordering::Relaxed), STDERR_INO.load(Ordering::Relaxed));
    sys::is_own(fd, STDERR_COPY.load(Ordering::Acquire), id)
}

/// Runs the checks at exit that are asked for (detect mode: `check_at_exit`, `detect_leaks=1`);
/// reports and ends the process on an overwritten canary or on leaks.
pub fn check_at_exit() {
    let o = crate::options();
    if !crate::detect() || !(o.check_at_exit || o.detect_leaks) {
        return;
    }
    let old = sweep::block_signals();
    // This frame's stack pointer: the check's own frames lie below it.
    let floor = stack::regs_here().sp;
    check(floor);
    sweep::restore_signals(old);
}

/// Set in the child of a fork made while other threads of the parent had allocated: one of
/// them may have been making an object when the fork came (its size published, its canaries
/// not yet written), and in the child no thread will ever finish it. Kept by the child's own
/// children, which inherit such objects.
static FORKED_BESIDE_THREADS: AtomicBool = AtomicBool::new(false);

/// The fork child handler found caches of other threads of the parent (`cache::fork_child`).
pub fn forked_beside_threads() {
    FORKED_BESIDE_THREADS.store(true, Ordering::Relaxed);
}

/// Says that a check at exit was not done, and why: always for the leak check, which the user
/// asked for; for the canaries' check alone (on by default) only with `verbose=1`.
fn not_done(why: core::fmt::Arguments) {
    let o = crate::options();
    if o.detect_leaks {
        report::say(format_args!("leak check not done: {why}"));
    } else if o.verbose {
        report::say(format_args!("canary check at exit not done: {why}"));
    }
}

#[inline(never)]
fn check(floor: usize) {
    // Other threads still running at exit are held still (they could move a pointer from
    // memory not yet read to memory already read, or be setting up an object whose canary is
    // not written yet).
    let threads = {
        let mut buf = [0u8; 2048];
        sys::read_file(c"/proc/self/status", &mut buf).and_then(|n| crate::stats::status_field(&buf[..n], b"Threads"))
    };
    let Some(threads) = threads else {
        // A root directory without /proc, changed other than by `chroot` (which keeps it).
        not_done(format_args!(
            "/proc/self/status cannot be read (errno {}; a root directory without /proc?)",
            sys::errno()
        ));
        return;
    };
    let held = if threads == 1 {
        None
    } else {
        match stop::others(sweep::LEAK_HOLDER_SCAN) {
            Ok(h) => Some(h),
            Err(_) => {
                not_done(format_args!(
                    "the process's other threads could not be held still (ptrace refused, /proc of another PID namespace, or a thread stayed inside the allocator)"
                ));
                return;
            }
        }
    };
    if crate::options().check_at_exit && FORKED_BESIDE_THREADS.load(Ordering::Relaxed) {
        if crate::options().verbose {
            report::say(format_args!(
                "canary check at exit not done: this process was forked while other threads allocated, and objects they were making may be half made"
            ));
        }
    } else if crate::options().check_at_exit {
        if let Some(r) = overwritten().or_else(crate::heap::free_slots_damaged) {
            drop(held);
            report::fatal(r);
        }
    }
    if !crate::options().detect_leaks {
        return;
    }
    let mut count = 0usize;
    for_each_live(|_| count += 1);
    let list_bytes = sys::round_up((count + 1) * core::mem::size_of::<Item>(), PAGE);
    let table_bytes = sys::round_up(GROUPS * core::mem::size_of::<LeakGroup>(), PAGE);
    // Metadata (`meta::map`), which the scan skips: the list holds the objects' addresses.
    let (list, table) = (own_map(list_bytes), own_map(table_bytes));
    if list.is_null() || table.is_null() {
        own_unmap(list, list_bytes);
        own_unmap(table, table_bytes);
        report::say(format_args!("leak check not done: no memory for its work list"));
        return;
    }
    LIST.store(list as *mut Item, Ordering::Relaxed);
    LIST_CAP.store(count + 1, Ordering::Relaxed);
    LIST_LEN.store(0, Ordering::Relaxed);
    // Stream buffers kept for the next stream are the allocator's, not leaks.
    crate::streams::for_each_parked(reach);
    // A buffer the program gave a stream is held by the stream (`streams::lend`), as under
    // the C library's allocator, while the stream holds a view in its place.
    crate::streams::for_each_lent(reach);
    let ok = sweep::leak_roots(held.as_ref(), floor) && drain();
    // SAFETY: a fresh zeroed mapping of `GROUPS` groups (all zero is an empty group), used
    // only here and by the report that follows.
    let groups = unsafe { core::slice::from_raw_parts_mut(table as *mut LeakGroup, GROUPS) };
    let leaks = if ok { collect(groups) } else { None };
    // Before the threads go on: a marked entry does not read as the object's size.
    clear_marks();
    drop(held);
    LIST.store(core::ptr::null_mut(), Ordering::Relaxed);
    own_unmap(list, list_bytes);
    if !ok {
        report::say(format_args!("leak check not done: the process's memory could not be read"));
    } else if let Some((n, total)) = leaks {
        report::leaks(&groups[..n], total);
    }
    own_unmap(table, table_bytes);
}

/// The first live object whose canary (after it, or before it in its first page) was written
/// over, as a report: a `free` would have found it, but the object was never freed.
fn overwritten() -> Option<report::Report> {
    let mut found = None;
    for_each_live(|it| {
        if found.is_some() {
            return;
        }
        let pages = it.entry.is_null().then_some(it.span);
        if let Some((at, before)) = crate::heap::damage(it.start, it.len, pages) {
            let what = if before {
                "the canary bytes before the object were overwritten (a write before its start), found at exit: the object was never freed"
            } else {
                "the canary after the object was overwritten (a write past its end), found at exit: the object was never freed"
            };
            found = Some(report::Report {
                kind: report::Kind::HeapBufferOverflow,
                addr: at,
                op: "exit",
                what,
                object: Some(report::Object { start: it.start, size: it.len }),
                claimed: None,
                pointer: None,
            });
        }
    });
    found
}

/// Metadata memory that the scan is sure to skip (remembered by `meta`), or null.
fn own_map(len: usize) -> *mut u8 {
    let p = crate::meta::map(len);
    if !p.is_null() && crate::meta::range_from(p as usize).is_none_or(|(start, _)| start > p as usize) {
        // Not remembered (too many ranges): the scan would read it.
        crate::meta::unmap(p, len);
        return core::ptr::null_mut();
    }
    p
}

fn own_unmap(p: *mut u8, len: usize) {
    if !p.is_null() {
        crate::meta::unmap(p, len);
    }
}

/// Marks the live object `w` points at or into, if any, and puts it on the work list.
/// Touches no thread-local state (`stop`'s holder calls it with the held threads' registers).
#[inline]
pub fn reach(w: usize) {
    if alias::in_arena(w) {
        reach_in_arena(w);
    } else if let Some((idx, s)) = large_live(w) {
        let size = s.size.load(Ordering::Relaxed);
        if size & MARK == 0 && w.wrapping_sub(s.addr) < size.max(1) {
            s.size.store(size | MARK, Ordering::Relaxed);
            push(Item { start: s.addr, len: size, entry: core::ptr::null(), span: idx });
        }
    }
}

fn large_live(w: usize) -> Option<(u32, &'static pool::Span)> {
    match large::lookup(w) {
        0 => None,
        v if v & large::TOMB_BIT != 0 => None,
        idx => {
            let s = POOL.span(idx);
            (s.kind == pool::LARGE && s.size.load(Ordering::Relaxed) & pool::DEAD_BIT == 0).then_some((idx, s))
        }
    }
}

fn reach_in_arena(w: usize) {
    let Some((e, page)) = alias::decode(w) else { return };
    let Some((idx, s)) = POOL.span_at(POOL.page_addr(page)) else { return };
    match s.kind {
        pool::SLAB if slab::set_up(s) && !s.meta.is_null() => {
            let Some((entry, off)) = slab::slot_at(s, page, e, w) else { return };
            let v = entry.load(Ordering::Relaxed);
            if v & (FREED | REACHED) == 0 {
                entry.store(v | REACHED, Ordering::Relaxed);
                push(Item { start: w - off, len: v as usize, entry, span: idx });
            }
        }
        pool::PAGES => {
            let size = s.size.load(Ordering::Relaxed);
            let live = size & (pool::DEAD_BIT | MARK) == 0 && s.epoch.load(Ordering::Relaxed) == e;
            if live && s.addr != 0 && w.wrapping_sub(s.addr) < size.max(1) {
                s.size.store(size | MARK, Ordering::Relaxed);
                push(Item { start: s.addr, len: size, entry: core::ptr::null(), span: idx });
            }
        }
        _ => {}
    }
}

fn push(it: Item) {
    let n = LIST_LEN.load(Ordering::Relaxed);
    let list = LIST.load(Ordering::Relaxed);
    if list.is_null() || n >= LIST_CAP.load(Ordering::Relaxed) {
        // Cannot happen (an object is put on the list once, and there is room for all);
        // should it, the object stays marked unread, and what only it leads to would be
        // reported: end the check instead (`drain` sees the overflow).
        LIST_LEN.store(usize::MAX, Ordering::Relaxed);
        return;
    }
    // SAFETY: `n` < the list's capacity; one task pushes at a time (`sweep::leak_roots`).
    unsafe { list.add(n).write(it) };
    LIST_LEN.store(n + 1, Ordering::Relaxed);
}

/// Reads the objects on the work list until it is empty (reading one may add others).
fn drain() -> bool {
    loop {
        let n = LIST_LEN.load(Ordering::Relaxed);
        if n == usize::MAX {
            return false;
        }
        if n == 0 {
            return true;
        }
        LIST_LEN.store(n - 1, Ordering::Relaxed);
        // SAFETY: `n - 1` < the number of items written.
        let it = unsafe { LIST.load(Ordering::Relaxed).add(n - 1).read() };
        if !read(&it) {
            return false;
        }
    }
}

/// Passes every word of a live object to `reach`.
fn read(it: &Item) -> bool {
    let words = it.len & !7;
    if it.entry.is_null() && POOL.span(it.span).kind == pool::LARGE {
        // Through the pool's file: the object's pages may be holes, which a read through its
        // view would fill.
        let s = POOL.span(it.span);
        return words == 0 || sweep::leak_file(((s.start as usize) << PAGE_SHIFT) + (s.addr - s.view), words);
    }
    // SAFETY: a live small or page object: `len` bytes at `start` through its alias,
    // installed (or mapped again by the fault handler).
    let bytes = unsafe { core::slice::from_raw_parts(it.start as *const u8, words) };
    for w in bytes.chunks_exact(8) {
        reach(usize::from_ne_bytes(w.try_into().unwrap_or([0; 8])));
    }
    true
}

/// Calls `f` for every live object of the heap (marked or not).
fn for_each_live(mut f: impl FnMut(Item)) {
    // SAFETY: every other thread is held still outside the allocator, or there is none, and
    // this thread is in no allocator call: the descriptor count does not change meanwhile.
    let ndesc = unsafe { POOL.desc_count() };
    for idx in 1..ndesc {
        let s = POOL.span(idx);
        match s.kind {
            pool::SLAB if slab::set_up(s) && !s.meta.is_null() => {
                let c = &CLASSES[s.class as usize];
                for j in 0..c.pages {
                    for pos in 0..c.spp {
                        let i = slab::slot_index(c, j, pos);
                        // SAFETY: `i` < nslots.
                        let entry = unsafe { &*slab::sizes(s).add(i as usize) };
                        let v = entry.load(Ordering::Relaxed);
                        let e = slab::lane_of(s, c, j, pos).epoch.load(Ordering::Relaxed);
                        if v & FREED != 0 || e == 0 {
                            continue;
                        }
                        let start = alias::alias(e, s.start + j) + (pos * c.size) as usize;
                        f(Item { start, len: (v & !REACHED) as usize, entry, span: idx });
                    }
                }
            }
            pool::PAGES | pool::LARGE => {
                let size = s.size.load(Ordering::Relaxed);
                if size & pool::DEAD_BIT == 0 && s.addr != 0 {
                    f(Item { start: s.addr, len: size & !MARK, entry: core::ptr::null(), span: idx });
                }
            }
            _ => {}
        }
    }
}

fn marked(it: &Item) -> bool {
    if it.entry.is_null() {
        POOL.span(it.span).size.load(Ordering::Relaxed) & MARK != 0
    } else {
        // SAFETY: the entry of a live slot (`for_each_live`).
        unsafe { &*it.entry }.load(Ordering::Relaxed) & REACHED != 0
    }
}

/// The allocation record (stack, thread) of a live object.
fn allocated_by(it: &Item) -> (u32, u32) {
    let t = if it.entry.is_null() {
        &POOL.span(it.span).trace
    } else {
        let s = POOL.span(it.span);
        let c = &CLASSES[s.class as usize];
        // SAFETY: `entry` points into the slab's size table, one entry per slot.
        let i = unsafe { it.entry.offset_from(slab::sizes(s)) } as u32;
        slab::trace(s, c, i)
    };
    crate::heap::allocation_of(t)
}

/// The unmarked objects, grouped by allocation stack into `groups` (empty): how many groups,
/// and the total (bytes, objects). None if nothing leaked. The groups that hold the most bytes
/// come first.
fn collect(groups: &mut [LeakGroup]) -> Option<(usize, (u64, u64))> {
    let (mut total, mut objects, mut used) = (0u64, 0u64, 0usize);
    for_each_live(|it| {
        if marked(&it) {
            return;
        }
        total += it.len as u64;
        objects += 1;
        let (stack, tid) = if stack::enabled() { allocated_by(&it) } else { (0, 0) };
        // Open addressing on the stack's id; the last group takes the stacks that find no room.
        let mut k = (stack as usize).wrapping_mul(0x9e37_79b9) % (GROUPS - 1);
        let g = loop {
            let g = &groups[k];
            if g.objects == 0 || g.stack == stack {
                break Some(k);
            }
            if used >= GROUPS - 1 {
                break None;
            }
            k = (k + 1) % (GROUPS - 1);
        };
        let g = &mut groups[g.unwrap_or(GROUPS - 1)];
        if g.objects == 0 {
            used += 1;
            *g = LeakGroup { stack, thread: tid, bytes: 0, objects: 0, example: it.start, example_size: it.len };
        }
        g.bytes += it.len as u64;
        g.objects += 1;
    });
    if objects == 0 {
        return None;
    }
    // The groups that hold the most bytes first (selection: only the first few are printed).
    let mut n = 0;
    for k in 0..GROUPS {
        if groups[k].objects != 0 {
            groups.swap(n, k);
            n += 1;
        }
    }
    let shown = n.min(report::LEAK_GROUPS_SHOWN);
    for a in 0..shown {
        let mut best = a;
        for b in a + 1..n {
            if groups[b].bytes > groups[best].bytes {
                best = b;
            }
        }
        groups.swap(a, best);
    }
    Some((n, (total, objects)))
}

/// Clears every mark the check set.
fn clear_marks() {
    for_each_live(|it| {
        if it.entry.is_null() {
            POOL.span(it.span).size.fetch_and(!MARK, Ordering::Relaxed);
        } else {
            // SAFETY: the entry of a live slot.
            unsafe { &*it.entry }.fetch_and(!REACHED, Ordering::Relaxed);
        }
    });
}
