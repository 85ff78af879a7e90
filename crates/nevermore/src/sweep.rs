//! Prevent mode: the dead slots of pinned groups, reused once a conservative scan proves that
//! no pointer to them is left.
//!
//! A group (a lane: slots of one pool page issued together under one alias page) is revoked,
//! and its slots reused, only when every object in it is dead. One long-lived object therefore
//! holds its whole page, and the dead slots beside it stay unusable for as long as it lives: a
//! program that keeps one object of every hundred ends up with most of a page per survivor.
//!
//! A *sweep* gives such slots back. It looks at every word the program can reach — the
//! registers, every readable mapping (stacks, globals, thread-local storage, other allocators'
//! memory, the re-entrant arena) and every live object of the heap — and notes each dead slot
//! of a pinned lane that some word points into (its start, its inside or its canary). What
//! such a dead slot still holds is read as well (`chase`): a dangling pointer can read it, its
//! lane being mapped; so is what freed page objects hold until their batch is revoked. Every other dead slot of a pinned lane is handed out again, under the
//! same alias page, which stays mapped for the survivor. A dangling pointer still never
//! reaches a newer object: the only pointers that could are those the scan proved absent,
//! directly or behind other dangling pointers, and a program cannot make a new
//! pointer to a freed slot other than by copying one of them (or by arithmetic out of another
//! object, outside what C allows). This is the sweeping of MarkUs and MineSweeper, applied only
//! to dead slots that one-time aliases cannot recover.
//!
//! What makes the proof hold:
//! - nothing else runs: another thread could move a pointer from memory not yet scanned to
//!   memory already scanned, or keep it in a register. In a process with threads (counted in
//!   `/proc/self/status`) the others are held still outside the allocator for the sweep, and
//!   their registers are scanned too (`stop`); where that is refused (ptrace not allowed) or
//!   turned off (`sweep_threads=0`), the process is not swept while it has threads;
//! - signals are blocked for the sweep (but for the synchronous faults, which the fault handler
//!   needs), so no handler moves pointers meanwhile;
//! - the program's mappings are read through `/proc/self/mem`, pages chosen from
//!   `/proc/self/pagemap` (present or swapped out) and, for shared mappings, `mincore` (in the
//!   page cache), so nothing faults and no hole is filled; live small and page objects are read
//!   through their aliases (installed, or mapped again by the fault handler), large objects
//!   through the pool's descriptor (their pages may be holes). A process that may not open
//!   `/proc/self/mem` (not dumpable, unprivileged) is read with `process_vm_readv`, pages
//!   chosen by `mincore`, on systems without swap only (`Reader::Vm`);
//! - anything that cannot be read or parsed ends the sweep without reclaiming a slot.
//!
//! Two read at once where the process may run on two processors (`sweep_helper`): the task
//! that holds the other threads (`stop`), or in a process with one thread a task started just
//! for this (`stop::helper`), takes pool descriptors in turns with the sweeping thread
//! (`scan_share`) while that one reads the program's mappings and then joins in; large objects
//! are the sweeping thread's alone (they are read with `pread`, which sets `errno`, and the
//! helper shares the sweeping thread's thread pointer). Marks only ever go from clear to set,
//! so the two need no lock; the helper is done (or gone) before `finish` reads them.
//!
//! What it cannot see is documented in docs/usage.md ("Sweeps"): pointers only the kernel
//! holds (epoll data, io_uring and aio requests, timers' values), pointers stored hidden
//! (xored, compressed, tagged in their high bits, unaligned), and pointers only in shared
//! memory whose pages were swapped out.
//!
//! When: every refill considers a sweep once the heap has `FIRST` slabs in use, at most
//! `sweep_max_live` MiB of live objects (the program waits while the scan reads them, about
//! 0.5 ms per MiB here) and no seccomp filter (which might kill the process for opening procfs
//! files). Only lanes `MIN_AGE` to `MAX_AGE` epochs old, or older in a mirror that has lost
//! no live unit for `SETTLED` epochs, count as pinned and are refilled. A
//! sweep runs when the census finds enough dead slots in them: at least `MIN_PINNED` bytes, an
//! eighth of all issued slab memory, and as many bytes as the scan will read: the live
//! objects and the program's own memory, as much as the last sweep read (with half the live
//! bytes, Python's allocation-heavy benchmark script swept 7 times for nothing, ~7 % of its
//! time; without the program's memory, gcc, whose own heap is ~40 MB, swept 19 times). After
//! a sweep that took `t`, the next waits `2 t`: the slots it gives back need no install and no
//! revocation, and save memory, so sweeps may take up to a third of the time (on `bench/soak.c` they took about that, and the time per allocation did
//! not grow: 580 vs 612 ns/op with sweeps off, medians of 3). A census that found too little
//! waits `9 t`, and until enough was freed since for another census to find more
//! (`census_futile`); a sweep that gave up waits a second; never less than `MIN_GAP_NS`. Reclaimed slots
//! that nobody took by the next sweep are made dead again first (`drain`).
//!
//! State: a dead slot's size-table entry has `FREED` set; during a sweep, `REACHED` marks the
//! dead slots some word points into (and the unallocated slots of threads' cursors, which are
//! not dead), and the last pass clears every mark. Reclaimed slots become `FREE_SLOT` (dead,
//! no object) and go on their class's reclaimed stack (`slab::Central`), out of band.

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::pool::{self, POOL};
use crate::slab::{self, CLASSES, FREED, FREE_SLOT};
use crate::sys::{self, PAGE, PAGE_SHIFT};
use crate::{alias, cache, maps, meta, stats, stop};

/// Set in the size-table entry of a dead slot that some word points into, during a sweep.
pub const REACHED: u16 = 0x4000;
/// Set beside `REACHED` once the dead slot's own contents were scanned (`chase`).
const CHASED: u16 = 0x2000;

/// Slabs in use before the first sweep is considered.
const FIRST: u64 = 64;
/// Dead bytes in pinned lanes below which a sweep is not worth its scan.
const MIN_PINNED: u64 = 256 << 10;
/// Most address space a sweep examines in the page map (8 bytes read per page); in a process
/// with more readable mappings every sweep gives up.
const MAX_EXAMINED: usize = 64 << 30;
/// Lanes issued fewer epochs ago than this are not pinned but young: most of their objects
/// die soon, and the lane with them (an alloc/free loop's lanes die within an epoch or two).
const MIN_AGE: u32 = 2;
/// Only lanes issued in the last this many epochs are refilled: a new object in a lane keeps
/// its epoch's mirror (a mapping) alive, and refilling old lanes for ever would keep every old
/// mirror with a survivor, so that mappings grew without bound (the soak test's grew from 395
/// to 460 after its first 3 M allocations). Measured on `bench/soak.c` 10^8 with epochs of
/// half the pool: 16 epochs, physical memory 105 MiB, 133 mappings at the end; 48 epochs,
/// 95 MiB and 135 mappings. With epochs of a quarter of the pool (2·10^7): 48 epochs,
/// 72–73 MiB and 268 mappings; 96, 67 MiB and 282; 192, 65 MiB and 335; any age, 64–65 MiB
/// and 468. Older lanes are refilled when their mirror is `SETTLED`.
const MAX_AGE: u32 = 96;
/// ... unless no live unit of their mirror died for this many epochs after `MAX_AGE`: what
/// pins it then is most likely kept for good, and its mirror stays whatever a sweep does,
/// so refilling its lanes costs no mapping. A program that keeps objects for ever among
/// short-lived ones of their size (a cache that only grows) has a survivor in nearly every
/// lane of their class, and past `MAX_AGE` their dead slots were lost: `tests/c/sweep.c kept
/// 20000000`, one object of 32 bytes kept in 1 000, ended with 16.5 MiB of pool and 22.6 MiB
/// of page tables (1 669 mirrors live, 3 retired), now 8.0 and 8.5 MiB (853 live, 922
/// retired), for 18 % more time: sweeps now take their share of it (307 sweeps, 1.8 s).
/// Where survivors die in time, their mirrors lose units and are left to retire as before:
/// the soak of `nevermore-bench` at 10^8, 273 MiB of physical memory and 226 mirrors live at
/// the end before, 273 and 236 now (in a harness run, medians 282 and 289 MiB, ranges
/// overlapping); `tests/c/soak.c`'s mappings level off as before (BENCHMARKS.md, "Groups
/// pinned for good are refilled at any age").
const SETTLED: u32 = 2 * MAX_AGE;
/// Room for `/proc/self/maps`.
const MAPS_BYTES: usize = maps::MAPS_BYTES;
/// Shortest time between two sweeps (or censuses that found nothing worth a sweep).
const MIN_GAP_NS: u64 = 5_000_000;
/// Heaps with more live bytes than `sweep_max_live` (64 MiB) are not swept: the scan reads
/// them all while the program waits, about 0.5–0.6 ms per MiB here (the soak of
/// `nevermore-bench`, 51 MiB live: 25 ms per sweep on average, 100 ms at the longest).
fn max_live() -> u64 {
    (crate::options().sweep_max_live_mib as u64) << 20
}
/// How much bigger than `sweep_max_live` a heap may be for a sweep that proves retired
/// address ranges unreferenced (`alias::proof_wanted`): such a sweep comes once per window of
/// the arena taken, hours apart in a busy server, so a longer pause is worth it.
const PROOF_LIVE_FACTOR: u64 = 16;
/// While the heap is too big, how often a refill looks again whether it shrank: a program's
/// live heap often swells for a phase and shrinks again (a big temporary structure built and
/// dropped), leaving its survivors' groups pinned; waiting for the heap to double or for a
/// second missed the whole next phase. A look sums the thread caches' counters (with signals
/// held back: two `rt_sigprocmask` calls) and reads no file.
const TOO_BIG_RECHECK_NS: u64 = 10_000_000;
/// While other threads run, how often a refill looks again whether they are gone (a read of
/// `/proc/self/status`, some 20 µs).
const THREADS_RECHECK_NS: u64 = 100_000_000;
const SECOND_NS: u64 = 1_000_000_000;
/// Bytes copied per read.
const CHUNK: usize = 64 << 10;
/// Pages looked up per page-map read.
const PM_PAGES: usize = 512;

/// Slabs in use below which no sweep is considered.
static NEXT_AT: AtomicU64 = AtomicU64::new(FIRST);
/// No sweep before this time (`sys::now_ns`; see "When" above).
static NOT_BEFORE: AtomicU64 = AtomicU64::new(0);
static BUSY: AtomicBool = AtomicBool::new(false);
/// The last look found the heap too big (so `NOT_SWEPT` counts each such stretch once).
static TOO_BIG: AtomicBool = AtomicBool::new(false);
/// ptrace was refused once: other threads are not held again (as with `sweep_threads=0`).
static NO_HOLDS: AtomicBool = AtomicBool::new(false);
/// The last look found other threads (so `NOT_SINGLE` counts each such stretch once).
static MANY_THREADS: AtomicBool = AtomicBool::new(false);

pub static SWEEPS: AtomicU64 = AtomicU64::new(0);
pub static RECLAIMED_SLOTS: AtomicU64 = AtomicU64::new(0);
pub static RECLAIMED_BYTES: AtomicU64 = AtomicU64::new(0);
pub static SCANNED_BYTES: AtomicU64 = AtomicU64::new(0);
/// Bytes of the program's own memory (outside the pool) the last complete sweep read.
static PROGRAM_BYTES: AtomicU64 = AtomicU64::new(0);
pub static SWEEP_NS: AtomicU64 = AtomicU64::new(0);
/// Stretches of time sweeps did not run because the process had other threads.
pub static NOT_SINGLE: AtomicU64 = AtomicU64::new(0);
/// Sweeps not run for another reason: stretches of time the heap's live objects exceeded
/// `sweep_max_live`, and a seccomp filter found in force.
pub static NOT_SWEPT: AtomicU64 = AtomicU64::new(0);
/// Sweeps that gave up (something could not be read); nothing was reclaimed by them.
pub static GAVE_UP: AtomicU64 = AtomicU64::new(0);
/// The longest sweep (the program stands still meanwhile).
pub static LONGEST_NS: AtomicU64 = AtomicU64::new(0);
/// Checks of the heap that found too few dead slots pinned to sweep, and their time.
pub static IDLE_CENSUSES: AtomicU64 = AtomicU64::new(0);
pub static IDLE_CENSUS_NS: AtomicU64 = AtomicU64::new(0);
/// Checks put off because too little was freed since the last one (`census_futile`).
pub static PUT_OFF: AtomicU64 = AtomicU64::new(0);

/// What the last census that found too little left to wait for (`census_futile`): when it
/// ran (0: nothing to wait for), the thread caches' counters of slot bytes freed in live
/// lanes and of bytes freed then, and how many more of each it takes before a census can find
/// enough.
static CENSUS_AT: AtomicU64 = AtomicU64::new(0);
static CENSUS_PINNED: AtomicU64 = AtomicU64::new(0);
static CENSUS_FREED: AtomicU64 = AtomicU64::new(0);
static NEED_PINNED: AtomicU64 = AtomicU64::new(0);
static NEED_BOTH: AtomicU64 = AtomicU64::new(0);
/// Longest a census is put off for want of frees: the counters miss a few ways slots die
/// (cursors of an exiting thread dropped unused, frees by a thread without a cache).
const PUT_OFF_MAX_NS: u64 = SECOND_NS;

/// Called by every refill (a thread's cache of a class ran empty): runs a sweep if one is
/// due. Cheap when none is (a few loads, then a clock read once the heap has `FIRST` slabs
/// in use or a proof of retired address ranges is wanted).
#[inline]
pub fn maybe() {
    let live = stats::get(&stats::SLABS_CREATED).wrapping_sub(stats::get(&stats::SLABS_RELEASED));
    let next = NEXT_AT.load(Ordering::Relaxed);
    // A proof of retired address ranges is wanted whatever the heap's size (not when sweeps
    // are off for good: `NEXT_AT` is then the maximum).
    let due = live >= next || (next != u64::MAX && alias::proof_wanted());
    if due && (sys::now_ns() >= NOT_BEFORE.load(Ordering::Relaxed) || urgent()) {
        consider();
    }
}

/// Mirrors retired when a sweep last ran ahead of its pace for an urgent proof.
static URGENT_AT: AtomicU64 = AtomicU64::new(0);

/// Whether a sweep should run now, ahead of its pace: the addresses left for new epochs are
/// running out (`alias::proof_urgent`), and a mirror retired since the last such sweep (only
/// then can another proof find more; so a sweep that proves nothing is not repeated at every
/// refill). With the pace alone, a program whose sweeps took long (the machine busy, a big
/// heap) made epochs faster than proofs came: `uaf recycle 2000000` with
/// `alias_space=512:sweep_share=1` put 88 epochs in degrade mode, and new objects landed on 31
/// of the 64 dangling pointers it keeps.
fn urgent() -> bool {
    let retired = alias::MIRRORS_RETIRED.load(Ordering::Relaxed);
    alias::proof_urgent()
        && URGENT_AT.load(Ordering::Relaxed) != retired
        && URGENT_AT.swap(retired, Ordering::Relaxed) != retired
}

#[cold]
#[inline(never)]
fn consider() {
    if !crate::options().sweep || crate::detect() {
        NEXT_AT.store(u64::MAX, Ordering::Relaxed);
        return;
    }
    if crate::seccomp::filtered() {
        // The program installed a filter while it ran, which might kill the process for the
        // files a sweep opens (or refuse them and have every sweep give up): never again.
        stats::add(&NOT_SWEPT, 1);
        NEXT_AT.store(u64::MAX, Ordering::Relaxed);
        return;
    }
    if BUSY.swap(true, Ordering::Acquire) {
        return;
    }
    let old = block_signals();
    let totals = cache::totals();
    let live_bytes = totals.live_bytes();
    // A sweep that proves retired address ranges unreferenced (`alias::proof_wanted`) comes
    // once per window of the arena taken (hours apart in a busy server): it runs even when
    // few dead slots are pinned, and with a heap up to `PROOF_LIVE_FACTOR` times bigger.
    let proof = alias::proof_wanted();
    if live_bytes > max_live().saturating_mul(if proof { PROOF_LIVE_FACTOR } else { 1 }) {
        // Look again soon, without reading any file: the heap may shrink back within this
        // phase of the program.
        if !TOO_BIG.swap(true, Ordering::Relaxed) {
            stats::add(&NOT_SWEPT, 1);
        }
        NEXT_AT.store(FIRST, Ordering::Relaxed);
        NOT_BEFORE.store(sys::now_ns() + TOO_BIG_RECHECK_NS, Ordering::Relaxed);
        restore_signals(old);
        BUSY.store(false, Ordering::Release);
        return;
    }
    TOO_BIG.store(false, Ordering::Relaxed);
    if !proof && census_futile(&totals) {
        // The last census found too little, and not enough was freed since for another to
        // find more: not even `/proc/self/status` is read.
        stats::add(&PUT_OFF, 1);
        NOT_BEFORE.store(sys::now_ns() + MIN_GAP_NS, Ordering::Relaxed);
        restore_signals(old);
        BUSY.store(false, Ordering::Release);
        return;
    }
    let t0 = sys::precise_ns();
    // Not on the stack, which may be a small signal stack.
    let mut b = buffers();
    let status = b.as_mut().and_then(|b| sys::read_file(c"/proc/self/status", b.maps).map(|n| &b.maps[..n]));
    let threads = status.and_then(|t| stats::status_field(t, b"Threads"));
    let seccomp = status.and_then(|t| stats::status_field(t, b"Seccomp"));
    let filtered = !matches!(seccomp, Some(0) | None);
    let single = threads == Some(1);
    // Counts each stretch of time in which other threads kept sweeps away once.
    let threads_in_the_way = |yes: bool| {
        if !yes {
            MANY_THREADS.store(false, Ordering::Relaxed);
        } else if !MANY_THREADS.swap(true, Ordering::Relaxed) {
            stats::add(&NOT_SINGLE, 1);
        }
    };
    let wait = if filtered {
        // A seccomp filter might kill the process for the files a sweep opens: never again.
        stats::add(&NOT_SWEPT, 1);
        NEXT_AT.store(u64::MAX, Ordering::Relaxed);
        threads_in_the_way(false);
        SECOND_NS
    } else if !single && (!crate::options().sweep_threads || NO_HOLDS.load(Ordering::Relaxed)) {
        // Threads come and go (a pool joined, a helper done): look again in a while.
        threads_in_the_way(true);
        THREADS_RECHECK_NS
    } else {
        NEXT_AT.store(FIRST, Ordering::Relaxed);
        let outcome = match b.as_mut() {
            None => Outcome::GaveUp,
            Some(b) if single => sweep_alone(b, &totals, proof),
            // A first census while the threads run (an estimate): holding them costs each a
            // pause, which a sweep not worth its scan would waste.
            Some(_) if !proof && !worth(&totals) => Outcome::NotWorth,
            Some(b) => match stop::others(HOLDER_SCAN) {
                Ok(held) => {
                    // The census ran just before the threads were held, and what `drain`
                    // makes dead again only adds to what it found: counting again would
                    // lengthen their pause for nothing.
                    drain();
                    let outcome = sweep(b, Some(&held));
                    // The threads go on before the time is taken: their pause counts.
                    drop(held);
                    outcome
                }
                Err(stop::Fail::Refused) => {
                    // Not allowed (a policy, or a debugger): not tried again, so that a
                    // security module's log does not fill with the refusals.
                    NO_HOLDS.store(true, Ordering::Relaxed);
                    Outcome::Refused
                }
                Err(stop::Fail::Busy) => Outcome::Busy,
                Err(stop::Fail::Failed) => Outcome::GaveUp,
            },
        };
        threads_in_the_way(matches!(outcome, Outcome::Refused));
        paced(outcome, sys::precise_ns().wrapping_sub(t0))
    };
    NOT_BEFORE.store(sys::now_ns() + wait.max(MIN_GAP_NS), Ordering::Relaxed);
    restore_signals(old);
    BUSY.store(false, Ordering::Release);
}

/// The lowest address of this thread's stack that the leak check reads: what lies below was
/// left by calls that returned (the check's own among them) and would keep objects
/// reachable that the program no longer holds.
static LEAK_STACK_FLOOR: AtomicUsize = AtomicUsize::new(0);

/// The library's own writable memory (`stack::own_writable`), which the leak check skips.
struct OwnRange(AtomicUsize, AtomicUsize);

impl OwnRange {
    fn load(&self) -> (usize, usize) {
        (self.0.load(Ordering::Relaxed), self.1.load(Ordering::Relaxed))
    }
}

static LEAK_OWN: OwnRange = OwnRange(AtomicUsize::new(0), AtomicUsize::new(0));

/// For the leak check at exit: every word of the program's own memory (its mappings but the
/// heap's and the allocator's, and this thread's stack below `floor`) and of the registers
/// goes to `leak::reach`; the held threads' registers first, through the holder (`held`).
/// Signals must be blocked. False if something could not be read.
pub(crate) fn leak_roots(held: Option<&stop::Held>, floor: usize) -> bool {
    let Some(mut b) = buffers() else { return false };
    LEAK_STACK_FLOOR.store(floor & !7, Ordering::Relaxed);
    let Some((own_lo, own_hi)) = crate::stack::own_writable() else { return false };
    LEAK_OWN.0.store(own_lo, Ordering::Relaxed);
    LEAK_OWN.1.store(own_hi, Ordering::Relaxed);
    LEAK_CHECK.store(true, Ordering::Relaxed);
    // The holder reads the held threads' registers, and is done before this thread reads:
    // `leak::reach` is not meant for two at once.
    let mut ok = held.is_none_or(|h| {
        h.start_scan();
        h.finish_scan()
    });
    let mut scanned = 0;
    ok = ok && scan_registers() && scan_mappings(&mut b, &mut scanned);
    LEAK_CHECK.store(false, Ordering::Relaxed);
    ok
}

/// For the leak check: `leak::reach` for every word of `len` bytes at `off` in the pool's
/// file (a live large object, whose pages may be holes). False if the file cannot be read.
pub(crate) fn leak_file(off: usize, len: usize) -> bool {
    let Some(mut b) = buffers() else { return false };
    let l = POOL.layout();
    if sys::file_id(l.fd) != Some(l.file) {
        return false;
    }
    LEAK_CHECK.store(true, Ordering::Relaxed);
    let mut scanned = 0;
    let ok = scan_file(&mut b, l.fd, off, len, &mut scanned);
    LEAK_CHECK.store(false, Ordering::Relaxed);
    ok
}

/// What the holder does for the leak check: reads the held threads' registers.
pub(crate) const LEAK_HOLDER_SCAN: stop::Scan =
    stop::Scan { words: scan_words, share: || {}, fault: alias::reinstall_raw };

/// How long to wait after a sweep (or a census) that took `spent`, and its counts.
fn paced(outcome: Outcome, spent: u64) -> u64 {
    match outcome {
        Outcome::Done => {
            stats::add(&SWEEPS, 1);
            stats::add(&SWEEP_NS, spent);
            LONGEST_NS.fetch_max(spent, Ordering::Relaxed);
            // Dead slots given back save fresh lanes (installs and revocations) and memory:
            // sweep again soon, at most `sweep_share` percent of the time (a third by default).
            let share = crate::options().sweep_share.clamp(1, 90) as u64;
            spent * (100 - share) / share
        }
        // Few dead slots pinned: the census alone takes at most a tenth of the time.
        Outcome::NotWorth => {
            stats::add(&IDLE_CENSUSES, 1);
            stats::add(&IDLE_CENSUS_NS, spent);
            spent * 9
        }
        Outcome::GaveUp => {
            stats::add(&GAVE_UP, 1);
            SECOND_NS
        }
        // Not allowed to hold the threads (a debugger holds one, Yama): look again in a while.
        Outcome::Refused => THREADS_RECHECK_NS,
        // Some thread stayed inside the allocator: try again soon.
        Outcome::Busy => MIN_GAP_NS,
    }
}

/// In a fork child: the parent's sweep, if one was running in another thread, is not the
/// child's.
pub fn fork_child() {
    BUSY.store(false, Ordering::Relaxed);
    alias::proof_end(false);
}

/// Blocks every signal but the synchronous faults; returns the old mask.
pub(crate) fn block_signals() -> u64 {
    let keep = (1u64 << (libc::SIGSEGV - 1)) | (1u64 << (libc::SIGBUS - 1));
    let set: u64 = !keep;
    let mut old: u64 = 0;
    // SAFETY: rt_sigprocmask with 8-byte kernel sigsets on the stack.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, &set, &mut old, 8usize) };
    old
}

pub(crate) fn restore_signals(old: u64) {
    // SAFETY: as in `block_signals`.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, &old, core::ptr::null_mut::<u64>(), 8usize) };
}

/// Buffers, taken from metadata memory once (never from the program's heap, and not on the
/// stack, which may be a small signal stack).
struct Buffers {
    maps: &'static mut [u8],
    data: &'static mut [u8],
    pagemap: &'static mut [u8],
    resident: &'static mut [u8],
}

static BUFFERS: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());

fn buffers() -> Option<Buffers> {
    let total = MAPS_BYTES + CHUNK + PM_PAGES * 8 + PM_PAGES;
    let mut p = BUFFERS.load(Ordering::Relaxed);
    if p.is_null() {
        p = meta::alloc(total);
        if p.is_null() {
            return None;
        }
        BUFFERS.store(p, Ordering::Relaxed);
    }
    // SAFETY: `p` holds `total` bytes of metadata used only here, by one sweep at a time
    // (`BUSY`); the four slices do not overlap.
    unsafe {
        Some(Buffers {
            maps: core::slice::from_raw_parts_mut(p, MAPS_BYTES),
            data: core::slice::from_raw_parts_mut(p.add(MAPS_BYTES), CHUNK),
            pagemap: core::slice::from_raw_parts_mut(p.add(MAPS_BYTES + CHUNK), PM_PAGES * 8),
            resident: core::slice::from_raw_parts_mut(p.add(MAPS_BYTES + CHUNK + PM_PAGES * 8), PM_PAGES),
        })
    }
}

enum Outcome {
    /// The census found too few dead slots pinned.
    NotWorth,
    Done,
    /// Something could not be read: nothing was reclaimed.
    GaveUp,
    /// The other threads may not be held (`stop::Fail::Refused`).
    Refused,
    /// Some other thread stayed inside the allocator (`stop::Fail::Busy`).
    Busy,
}

/// What the holder task does for a sweep: it reads the held threads' registers, then takes
/// its share of the heap (`helper_share`), mapping again live aliases that fault.
const HOLDER_SCAN: stop::Scan = stop::Scan { words: scan_words, share: helper_share, fault: alias::reinstall_raw };

/// The sweep of a process with one thread, `live` bytes of live objects in its heap: the
/// census, then the sweep, with a helper task reading a share of the heap beside this
/// thread where it may run on another processor (`sweep_helper`).
fn sweep_alone(b: &mut Buffers, totals: &cache::Totals, proof: bool) -> Outcome {
    drain();
    if !proof && !worth(totals) {
        return Outcome::NotWorth;
    }
    // Without a helper (it could not be started) the sweep reads everything itself.
    let helper = if helper_wanted() { stop::helper(HOLDER_SCAN).ok() } else { None };
    let outcome = sweep(b, helper.as_ref());
    drop(helper);
    outcome
}

/// Whether a task beside the sweeping thread should read a share of the heap: allowed
/// (`sweep_helper`), and the process may run on two processors at least (else it would only
/// take turns with the sweeping thread).
fn helper_wanted() -> bool {
    crate::options().sweep_helper && sys::cpus_allowed() >= 2
}

/// A sweep; `held`: the holder task, with the process's other threads held still outside the
/// allocator (or none: `stop::helper`), which reads a share of the heap meanwhile.
fn sweep(b: &mut Buffers, held: Option<&stop::Held>) -> Outcome {
    guard_cursors();
    alias::proof_begin();
    let marks = NEWLY_REACHED.load(Ordering::Relaxed);
    // Descriptors are handed out from 1; a holder that holds threads takes a share only if it
    // may help (`stop::helper` was started only if so).
    HOLDER_HELPS.store(held.is_some_and(|h| h.threads == 0) || helper_wanted(), Ordering::Relaxed);
    SHARE_NEXT.store(1, Ordering::Relaxed);
    HELPER_SCANNED.store(0, Ordering::Relaxed);
    if let Some(h) = held {
        h.start_scan();
    }
    let mut scanned = 0u64;
    let mut ok = scan_registers() && scan_mappings(b, &mut scanned);
    if ok {
        PROGRAM_BYTES.store(scanned, Ordering::Relaxed);
        scan_share(&mut scanned);
        ok = scan_through_file(b, &mut scanned);
    }
    if !ok {
        // The holder takes no more.
        SHARE_NEXT.store(NONE_LEFT, Ordering::Relaxed);
    }
    if let Some(h) = held {
        // Whatever happened, the holder marks nothing once this returns (`finish` clears the
        // marks next). It has at most a chunk left to read by now.
        ok &= h.finish_scan();
        let by_helper = HELPER_SCANNED.load(Ordering::Acquire);
        stats::add(&HELPER_BYTES, by_helper);
        scanned += by_helper;
    }
    ok = ok && chase(b, &mut scanned, marks);
    alias::proof_end(ok);
    let (slots, bytes) = finish(ok);
    stats::add(&RECLAIMED_SLOTS, slots);
    stats::add(&RECLAIMED_BYTES, bytes);
    stats::add(&SCANNED_BYTES, scanned);
    if ok {
        Outcome::Done
    } else {
        Outcome::GaveUp
    }
}

/// Whether the census finds enough dead bytes pinned to be worth a scan of the live objects
/// (the thread caches' counters `t` say how many bytes) and the program's memory. When not,
/// notes how much must be freed before another census can say yes (`census_futile`).
fn worth(t: &cache::Totals) -> bool {
    let (pinned, slab_bytes, young) = census();
    // The scan reads the live bytes and the program's own memory (as much as last time, say);
    // what it may give back is at most the dead bytes pinned. Run only when that is worth it:
    // gcc, whose own garbage-collected heap is ~40 MB, swept 19 times in a compile (0.45 s)
    // when only the live bytes counted, and 6 times (0.1 s) with its memory counted too.
    let reads = t.live_bytes() + PROGRAM_BYTES.load(Ordering::Relaxed);
    let yes = pinned >= MIN_PINNED && pinned * 8 >= slab_bytes && pinned >= reads;
    if yes {
        CENSUS_AT.store(0, Ordering::Relaxed);
    } else {
        // Without more frees, a census finds at most what is pinned now, plus the dead slots
        // of lanes too young to count yet and the reclaimed slots nobody took (dead again at
        // the next `drain`). A byte of a slot freed in a live lane adds a byte to the pinned,
        // and a byte freed anywhere takes at most one from what the scan reads.
        let could = pinned + young + slab::reclaimed_bytes();
        NEED_PINNED.store(MIN_PINNED.saturating_sub(could), Ordering::Relaxed);
        NEED_BOTH.store(reads.saturating_sub(could), Ordering::Relaxed);
        CENSUS_PINNED.store(t.pinned_bytes, Ordering::Relaxed);
        CENSUS_FREED.store(t.free_bytes, Ordering::Relaxed);
        CENSUS_AT.store(sys::now_ns().max(1), Ordering::Relaxed);
    }
    yes
}

/// Whether a census now could not find enough to sweep, by what the last one found and what
/// was freed since (`worth`); never for longer than `PUT_OFF_MAX_NS`. `worth`'s test against
/// an eighth of the issued slab memory is not bounded so (lanes dying whole shrink that).
fn census_futile(t: &cache::Totals) -> bool {
    let at = CENSUS_AT.load(Ordering::Relaxed);
    if at == 0 || sys::now_ns().wrapping_sub(at) >= PUT_OFF_MAX_NS {
        return false;
    }
    let pinned = t.pinned_bytes.wrapping_sub(CENSUS_PINNED.load(Ordering::Relaxed));
    let freed = t.free_bytes.wrapping_sub(CENSUS_FREED.load(Ordering::Relaxed));
    pinned < NEED_PINNED.load(Ordering::Relaxed) || pinned.saturating_add(freed) < NEED_BOTH.load(Ordering::Relaxed)
}

/// Makes the reclaimed slots that nobody took since the last sweep dead again: a class that is
/// no longer used must not keep their groups (and pages) for ever. A group whose last slot
/// this was dies and is revoked as usual; the others are reclaimed again by this sweep if
/// they still qualify.
fn drain() {
    let c = match crate::tls::get() {
        crate::tls::EXITED => core::ptr::null_mut(),
        c => c,
    };
    for ci in 0..slab::NCLASS {
        while let Some(r) = slab::pop_one_reclaimed(ci) {
            r.entry.store(FREED, Ordering::Relaxed);
            if r.lane.live.fetch_sub(1, Ordering::AcqRel) == 1 {
                cache::lane_died(c, r.addr, r.lane);
            }
        }
    }
}

/// Calls `f(class, slab, lane, page, positions)` for every issued lane of every slab.
fn for_each_issued_lane(mut f: impl FnMut(usize, u32, &'static slab::Lane, u32, core::ops::Range<u32>)) {
    // SAFETY: every other thread is held still outside the allocator (or there is none), and
    // this sweep holds no lock: the descriptor count does not change meanwhile. (`worth`'s
    // first census while threads run reads it racily, as `slab::adapt` does: descriptors
    // below it are reserved, and zero until set up.)
    let ndesc = unsafe { POOL.desc_count() };
    for idx in 1..ndesc {
        let s = POOL.span(idx);
        if s.kind != pool::SLAB || !slab::set_up(s) || s.meta.is_null() {
            continue;
        }
        let ci = s.class as usize;
        let c = &CLASSES[ci];
        let per = slab::lane_slots(s, c);
        for j in 0..c.pages {
            for r in 0..c.spp.div_ceil(per) {
                let l = slab::lane(s, c, j, r);
                if l.epoch.load(Ordering::Relaxed) != 0 {
                    f(ci, idx, l, j, r * per..((r + 1) * per).min(c.spp));
                }
            }
        }
    }
}

/// Calls `f(class, slab, lane, entry, slot index)` for every slot of every issued lane of
/// every slab.
fn for_each_issued_slot(mut f: impl FnMut(usize, u32, &'static slab::Lane, &AtomicU16, u32)) {
    for_each_issued_lane(|ci, idx, l, j, positions| {
        let (s, c) = (POOL.span(idx), &CLASSES[ci]);
        for pos in positions {
            let i = slab::slot_index(c, j, pos);
            // SAFETY: `i` < nslots.
            let entry = unsafe { &*slab::sizes(s).add(i as usize) };
            f(ci, idx, l, entry, i);
        }
    });
}

/// Whether an entry is a dead slot that held an object (not one never used or reclaimed).
#[inline]
fn dead(v: u16) -> bool {
    v & FREED != 0 && v != FREE_SLOT
}

/// Whether lane `l` is old enough to count as pinned (its live objects outlived a few
/// epochs: younger lanes mostly die whole soon) and young enough to be refilled (`MAX_AGE`).
#[inline]
fn pinned_age(now: u32, l: &slab::Lane) -> bool {
    let e = l.epoch.load(Ordering::Relaxed);
    now.wrapping_sub(e) >= MIN_AGE && !too_old_to_refill(now, e)
}

/// Whether a lane issued in epoch `e` is, in epoch `now`, too old for sweeps to refill
/// (`MAX_AGE`, `SETTLED`).
pub fn too_old_to_refill(now: u32, e: u32) -> bool {
    now.wrapping_sub(e) > MAX_AGE && !alias::settled(now, e, SETTLED)
}

/// (bytes of dead slots in pinned lanes, bytes of all issued lanes, bytes of dead slots in
/// live lanes too young to count as pinned yet). A lane's slots that are not dead are its
/// live count (live objects, slots still in a cache, reclaimed slots), so this reads one
/// record per lane rather than one entry per slot. (Slots of a fresh slab that an exiting
/// thread's cache dropped unused count as dead here, though `finish` leaves them: a slight
/// overestimate once threads have exited.)
fn census() -> (u64, u64, u64) {
    let (mut pinned, mut issued, mut young) = (0u64, 0u64, 0u64);
    let now = alias::current();
    for_each_issued_lane(|ci, _, l, _, positions| {
        let size = CLASSES[ci].size as u64;
        let slots = positions.len() as u64;
        issued += slots * size;
        let live = l.live.load(Ordering::Relaxed) as u64;
        if live > 0 {
            let e = l.epoch.load(Ordering::Relaxed);
            if now.wrapping_sub(e) > MAX_AGE {
                alias::note_units(now, e);
            }
            let dead = slots.saturating_sub(live) * size;
            if pinned_age(now, l) {
                pinned += dead;
            } else if now.wrapping_sub(l.epoch.load(Ordering::Relaxed)) < MIN_AGE {
                young += dead;
            }
        }
    });
    (pinned, issued, young)
}

/// Marks the unallocated slots of every thread's cursors: they belong to a cache, and their
/// entries may still read dead from the lane's previous issue.
fn guard_cursors() {
    cache::for_each_cursor(|ci, cur| {
        let c = &CLASSES[ci];
        let (mut at, mut entry) = (cur.next, cur.size_at);
        while at < cur.end {
            // SAFETY: a cursor's size pointer walks its lane's entries, one per slot up to `end`.
            let e = unsafe { &*entry };
            let v = e.load(Ordering::Relaxed);
            if dead(v) {
                // Never handed out under this lane's alias: nothing can read what it holds.
                e.store(v | REACHED | CHASED, Ordering::Relaxed);
            }
            at += c.size as usize;
            // SAFETY: as above (one past the lane's last entry is never dereferenced).
            entry = unsafe { entry.add(c.pages as usize) };
        }
    });
}

/// Notes the dead slot `w` points into, if any.
#[inline(always)]
fn mark(w: usize) {
    let Some((e, page)) = alias::decode(w) else { return };
    let Some((_, s)) = POOL.span_at(POOL.page_addr(page)) else { return };
    if s.kind != pool::SLAB || !slab::set_up(s) {
        return;
    }
    let unmarked = |v| dead(v) && v & REACHED == 0;
    let Some((entry, _)) = slab::slot_at_where(s, page, e, w, unmarked) else { return };
    let v = entry.load(Ordering::Relaxed);
    if dead(v) && v & REACHED == 0 {
        entry.store(v | REACHED, Ordering::Relaxed);
        NEWLY_REACHED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Dead slots marked so far (`chase` reads only when marks were added since it last looked).
static NEWLY_REACHED: AtomicU64 = AtomicU64::new(0);

/// While the leak check at exit reads the process (`leak`), words lead to live objects, not to
/// dead slots (detect mode, where no sweep runs).
static LEAK_CHECK: AtomicBool = AtomicBool::new(false);

/// Marks what every aligned word of `bytes` points to. (Also called by `stop`'s holder task
/// with the held threads' registers: it touches no thread-local state.)
fn scan_words(bytes: &[u8]) {
    if LEAK_CHECK.load(Ordering::Relaxed) {
        for w in bytes.chunks_exact(8) {
            crate::leak::reach(usize::from_ne_bytes(w.try_into().unwrap_or([0; 8])));
        }
        return;
    }
    let (arena, len) = alias::arena_range();
    let (proof, window) = alias::proof_scope();
    for w in bytes.chunks_exact(8) {
        let w = usize::from_ne_bytes(w.try_into().unwrap_or([0; 8]));
        if w.wrapping_sub(arena) < len {
            if w.wrapping_sub(proof) < window {
                alias::proof_touch(w - proof);
            }
            mark(w);
        }
    }
}

/// The callee-saved registers (the program's values may still be in them; the caller-saved
/// ones do not survive the call into the allocator).
fn scan_registers() -> bool {
    let mut regs = [0u64; 6];
    // SAFETY: stores six registers into the local array, touching nothing else.
    unsafe {
        core::arch::asm!(
            "mov [{a}], rbx",
            "mov [{a} + 8], rbp",
            "mov [{a} + 16], r12",
            "mov [{a} + 24], r13",
            "mov [{a} + 32], r14",
            "mov [{a} + 40], r15",
            a = in(reg) regs.as_mut_ptr(),
            options(nostack, preserves_flags)
        );
    }
    let mut bytes = [0u8; 48];
    for (k, r) in regs.iter().enumerate() {
        bytes[k * 8..k * 8 + 8].copy_from_slice(&r.to_ne_bytes());
    }
    scan_words(&bytes);
    true
}

/// How the program's memory is read.
#[derive(Clone, Copy)]
enum Reader {
    /// `/proc/self/mem` (which reads no-access pages too), pages chosen by `/proc/self/pagemap`
    /// (present or swapped out) and, for shared mappings, `mincore`.
    Proc { mem: i32, pm: i32 },
    /// For a process that cannot open those (an unprivileged one that is not dumpable: a
    /// daemon that changed its user ids, or `prctl(PR_SET_DUMPABLE, 0)`; the files then belong
    /// to root), on a system without swap: `process_vm_readv` on itself (no permission check
    /// for its own memory), pages chosen by `mincore`, which without swap sees every page
    /// that holds data. It cannot read no-access pages: a sweep that meets one holding data
    /// gives up.
    Vm,
}

/// Scans every readable mapping but the pool's own views and the alias arena.
fn scan_mappings(b: &mut Buffers, scanned: &mut u64) -> bool {
    let Some(n) = sys::read_file(c"/proc/self/maps", b.maps) else { return false };
    let (mem, pm) = (sys::open_read(c"/proc/self/mem"), sys::open_read(c"/proc/self/pagemap"));
    let ok = match (mem, pm) {
        (Some(mem), Some(pm)) => scan_listed(b, n, Reader::Proc { mem, pm }, scanned),
        _ => {
            // SAFETY: only the sweeping thread uses GAPS, one sweep at a time.
            unsafe { GAPS.get_mut() }.n = GAPS_UNREAD;
            no_swap(b) && scan_listed(b, n, Reader::Vm, scanned)
        }
    };
    mem.into_iter().chain(pm).for_each(sys::close);
    ok
}

/// Whether the system has no swap (`SwapTotal: 0 kB`), read into the data buffer.
fn no_swap(b: &mut Buffers) -> bool {
    let n = sys::read_file(c"/proc/meminfo", b.data).unwrap_or(0);
    stats::status_field(&b.data[..n], b"SwapTotal") == Some(0)
}

fn scan_listed(b: &mut Buffers, n: usize, how: Reader, scanned: &mut u64) -> bool {
    let mut examined = 0usize;
    // The listing is taken out of the buffers while the scan uses the others.
    let maps = core::mem::take(&mut b.maps);
    let leak = LEAK_CHECK.load(Ordering::Relaxed);
    let floor = LEAK_STACK_FLOOR.load(Ordering::Relaxed);
    let (own_lo, own_hi) = LEAK_OWN.load();
    let ok = maps::program_ranges(&maps[..n], |lo, hi, access| {
        // The leak check reads this thread's stack from `floor` up only, and not the
        // library's own statics.
        let lo = if leak && floor.wrapping_sub(lo) < hi - lo { floor } else { lo };
        let (below, above) =
            if leak { ((lo, hi.min(own_lo).max(lo)), (lo.max(own_hi).min(hi), hi)) } else { ((lo, hi), (hi, hi)) };
        [below, above].into_iter().filter(|&(a, z)| a < z).all(|(a, z)| {
            examined += z - a;
            examined <= MAX_EXAMINED && scan_range(b, a, z, access, how, scanned)
        })
    });
    b.maps = maps;
    ok
}

/// Scans the pages of `[lo, hi)` that hold data: present or swapped out (page map), or in the
/// page cache (shared mappings); with `Reader::Vm`, the resident ones (`mincore`).
fn scan_range(b: &mut Buffers, lo: usize, hi: usize, access: maps::Access, how: Reader, scanned: &mut u64) -> bool {
    let maps::Access { readable, shared, file } = access;
    if matches!(how, Reader::Vm) && !readable && !shared && file && private_pages_kib(b, lo) == Some(0) {
        // `process_vm_readv` cannot read a no-access mapping, and `mincore` calls the pages of
        // a file mapping resident whenever the file is in the page cache (a library's gap
        // between its segments): with no private page, it holds the file's bytes only, none
        // the program wrote.
        return true;
    }
    let (mut at, hi) = (lo & !(PAGE - 1), sys::round_up(hi, PAGE));
    // Whether residency (`mincore`) tells which pages hold data, besides the page map.
    let residency = shared || matches!(how, Reader::Vm);
    while at < hi {
        let n = ((hi - at) >> PAGE_SHIFT).min(PM_PAGES);
        let want = n * 8;
        match how {
            Reader::Proc { pm, .. } => {
                if sys::pread(pm, &mut b.pagemap[..want], (at >> PAGE_SHIFT) * 8) != Some(want) {
                    return false;
                }
            }
            Reader::Vm => b.pagemap[..want].fill(0),
        }
        if residency {
            // SAFETY: `resident` has a byte per page of the range.
            if unsafe { libc::mincore(at as *mut libc::c_void, n << PAGE_SHIFT, b.resident.as_mut_ptr()) } != 0 {
                return false;
            }
        }
        let mut k = 0;
        while k < n {
            if !has_data(b, k, residency) {
                k += 1;
                continue;
            }
            let mut run = 1;
            while k + run < n && run < CHUNK >> PAGE_SHIFT && has_data(b, k + run, residency) {
                run += 1;
            }
            let (addr, len) = (at + (k << PAGE_SHIFT), run << PAGE_SHIFT);
            let read = match how {
                Reader::Proc { mem, .. } => sys::pread(mem, &mut b.data[..len], addr),
                Reader::Vm if readable => read_own(&mut b.data[..len], addr),
                Reader::Vm => None,
            };
            if read != Some(len) {
                return false;
            }
            // Pages are read whole; words below `lo` (the leak check's floor, within this
            // thread's stack) are not the range's.
            let skip = lo.saturating_sub(addr).min(len) & !7;
            scan_words(&b.data[skip..len]);
            *scanned += len as u64;
            k += run;
        }
        at += n << PAGE_SHIFT;
    }
    true
}

/// The program's no-access private file mappings, each with the KiB of private (anonymous,
/// copied-on-write) pages it holds, from one pass over `/proc/self/smaps` (readable where
/// `/proc/self/pagemap` is not: a process that is not dumpable) per sweep that needs it
/// (`Reader::Vm`, see `scan_range`). Used by one sweep at a time (`BUSY`).
struct Gaps {
    /// Entries in `list`, or `GAPS_UNREAD` until this sweep reads them, or `GAPS_UNKNOWN`
    /// when they cannot be had.
    n: usize,
    list: [(usize, u64); MAX_GAPS],
}

const MAX_GAPS: usize = 256;
const GAPS_UNREAD: usize = usize::MAX;
const GAPS_UNKNOWN: usize = usize::MAX - 1;

static GAPS: crate::GlobalCell<Gaps> = crate::GlobalCell::new(Gaps { n: GAPS_UNREAD, list: [(0, 0); MAX_GAPS] });

/// KiB of private pages in the no-access private file mapping that starts at `lo`; None when
/// that cannot be told.
fn private_pages_kib(b: &mut Buffers, lo: usize) -> Option<u64> {
    // SAFETY: only the sweeping thread uses GAPS, one sweep at a time.
    let gaps = unsafe { GAPS.get_mut() };
    if gaps.n == GAPS_UNREAD {
        gaps.n = read_gaps(b.data, &mut gaps.list).unwrap_or(GAPS_UNKNOWN);
    }
    gaps.list.get(..gaps.n)?.iter().find(|g| g.0 == lo).map(|g| g.1)
}

/// Streams `/proc/self/smaps` through `buf` (it is as long as the process has mappings) and
/// notes the private pages of each no-access private file mapping; how many were noted, or
/// None when the file cannot be read whole or there are more than `list` holds.
fn read_gaps(buf: &mut [u8], list: &mut [(usize, u64)]) -> Option<usize> {
    let fd = sys::open_read(c"/proc/self/smaps")?;
    let (mut have, mut n, mut current, mut ok) = (0usize, 0usize, None, true);
    loop {
        let r = sys::read(fd, &mut buf[have..]);
        if r < 0 && sys::errno() == libc::EINTR {
            continue;
        }
        if r <= 0 {
            ok &= r == 0;
            break;
        }
        have += r as usize;
        let mut start = 0;
        while let Some(nl) = buf[start..have].iter().position(|&c| c == b'\n') {
            let line = &buf[start..start + nl];
            start += nl + 1;
            if line.split(|&c| c == b' ').next().is_some_and(|w| w.contains(&b'-')) {
                // A mapping's first line.
                current = maps::parse_line(line)
                    .filter(|&(_, _, prot, shared, path)| {
                        prot == 0 && !shared && path.first().is_some_and(|&c| c != b'[')
                    })
                    .map(|(lo, ..)| lo);
            } else if let (Some(lo), true) = (current, line.starts_with(b"Anonymous:")) {
                let kib = stats::status_field(line, b"Anonymous");
                if n == list.len() || kib.is_none() {
                    ok = false;
                    break;
                }
                list[n] = (lo, kib.unwrap_or(0));
                n += 1;
                current = None;
            }
        }
        buf.copy_within(start..have, 0);
        have -= start;
        // A line longer than the buffer.
        ok &= have < buf.len();
        if !ok {
            break;
        }
    }
    sys::close(fd);
    ok.then_some(n)
}

/// Reads this process's memory at `addr` into `buf` with `process_vm_readv`; the count read.
fn read_own(buf: &mut [u8], addr: usize) -> Option<usize> {
    let local = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: buf.len() };
    loop {
        // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, and only reads at
        // `addr` (a fault there ends the read short).
        let n = unsafe { libc::process_vm_readv(sys::getpid() as libc::pid_t, &local, 1, &remote, 1, 0) };
        if n >= 0 {
            return Some(n as usize);
        }
        if sys::errno() != libc::EINTR {
            return None;
        }
    }
}

#[inline]
fn has_data(b: &Buffers, k: usize, residency: bool) -> bool {
    let e = u64::from_ne_bytes(b.pagemap[k * 8..k * 8 + 8].try_into().unwrap_or([0; 8]));
    e & (3 << 62) != 0 || (residency && b.resident[k] & 1 != 0)
}

/// The next pool descriptor to be scanned (`scan_share`): the sweeping thread and the holder
/// take them in turns, `SHARE_CHUNK` at a time.
static SHARE_NEXT: AtomicU32 = AtomicU32::new(NONE_LEFT);
/// Descriptors taken at a time: slabs of 4–16 pages, so a few hundred KiB at most.
const SHARE_CHUNK: u32 = 16;
/// `SHARE_NEXT` once nothing more is to be taken: past every descriptor, and far enough from
/// the top that the takes which follow cannot wrap it round.
const NONE_LEFT: u32 = u32::MAX / 2;
/// Whether the holder takes a share of this sweep.
static HOLDER_HELPS: AtomicBool = AtomicBool::new(false);
/// Bytes the holder read in its share of this sweep.
static HELPER_SCANNED: AtomicU64 = AtomicU64::new(0);
/// Bytes holders read in all sweeps.
pub static HELPER_BYTES: AtomicU64 = AtomicU64::new(0);

/// The holder's share of a sweep (see `stop::Scan`).
fn helper_share() {
    let mut scanned = 0u64;
    if HOLDER_HELPS.load(Ordering::Relaxed) {
        scan_share(&mut scanned);
    }
    HELPER_SCANNED.store(scanned, Ordering::Release);
}

/// Scans the live small and page objects of the pool descriptors taken from `SHARE_NEXT`,
/// through their aliases (live, hence mapped, or mapped again by the fault handler: the
/// allocator's in the sweeping thread, `stop`'s in the holder). Touches no thread-local state.
fn scan_share(scanned: &mut u64) {
    // SAFETY: as in `for_each_issued_slot`.
    let ndesc = unsafe { POOL.desc_count() };
    loop {
        let from = SHARE_NEXT.fetch_add(SHARE_CHUNK, Ordering::Relaxed);
        if from >= ndesc {
            return;
        }
        for idx in from..(from.saturating_add(SHARE_CHUNK)).min(ndesc) {
            let s = POOL.span(idx);
            match s.kind {
                pool::SLAB if slab::set_up(s) && !s.meta.is_null() => scan_slab(s, scanned),
                pool::PAGES => {
                    let size = s.size.load(Ordering::Relaxed);
                    if size & pool::DEAD_BIT != 0 || s.addr == 0 {
                        continue;
                    }
                    // SAFETY: a live page object: `size` bytes at its address, installed.
                    scan_words(unsafe { core::slice::from_raw_parts(s.addr as *const u8, size & !7) });
                    *scanned += size as u64;
                }
                _ => {}
            }
        }
    }
}

/// Scans, through the pool's descriptor, the live large objects (their pages may be holes,
/// which a read through a view would fill) and the page objects that were freed but whose
/// aliases are not revoked yet (their batch has not been revoked): a dangling pointer still
/// reads those, so what they hold counts as what the program holds (without this,
/// `tests/c/sweep.c chained-page` got new objects where pointers read through such a page
/// object led); whole runs. False if the program closed or replaced the descriptor.
fn scan_through_file(b: &mut Buffers, scanned: &mut u64) -> bool {
    let l = POOL.layout();
    let fd_ok = sys::file_id(l.fd) == Some(l.file);
    // SAFETY: as in `for_each_issued_slot`.
    let ndesc = unsafe { POOL.desc_count() };
    for idx in 1..ndesc {
        let s = POOL.span(idx);
        let size = s.size.load(Ordering::Relaxed);
        let dead = size & pool::DEAD_BIT != 0;
        if s.addr == 0 {
            continue;
        }
        let (off, len) = match s.kind {
            pool::LARGE if !dead => (((s.start as usize) << PAGE_SHIFT) + (s.addr - s.view), size),
            pool::PAGES if dead => ((s.start as usize) << PAGE_SHIFT, (s.npages as usize) << PAGE_SHIFT),
            _ => continue,
        };
        if !fd_ok || !scan_file(b, l.fd, off, len, scanned) {
            return false;
        }
    }
    true
}

/// Scans `len` bytes at `off` in the pool file.
fn scan_file(b: &mut Buffers, fd: i32, mut off: usize, len: usize, scanned: &mut u64) -> bool {
    // Whole words only: objects start 16-byte aligned; the end is rounded up.
    let end = (off + len).next_multiple_of(8);
    while off < end {
        let n = (end - off).min(CHUNK);
        if sys::pread(fd, &mut b.data[..n], off) != Some(n) {
            return false;
        }
        scan_words(&b.data[..n]);
        *scanned += n as u64;
        off += n;
    }
    true
}

/// Scans the live objects of a slab through their aliases, a page at a time (slot indices
/// are striped across the pages).
fn scan_slab(s: &pool::Span, scanned: &mut u64) {
    let c = &CLASSES[s.class as usize];
    for j in 0..c.pages {
        if j + 1 < c.pages {
            // Start the next page's translation and first line while this one is read.
            let e = slab::lane_of(s, c, j + 1, 0).epoch.load(Ordering::Relaxed);
            if e != 0 {
                prefetch(alias::alias(e, s.start + j + 1));
            }
        }
        for pos in 0..c.spp {
            let i = slab::slot_index(c, j, pos);
            // SAFETY: `i` < nslots.
            let v = unsafe { (*slab::sizes(s).add(i as usize)).load(Ordering::Relaxed) };
            if v & FREED != 0 {
                continue;
            }
            let e = slab::lane_of(s, c, j, pos).epoch.load(Ordering::Relaxed);
            if e == 0 {
                continue;
            }
            let at = alias::alias(e, s.start + j) + (pos * c.size) as usize;
            let n = (v as usize).next_multiple_of(8).min(c.size as usize);
            // SAFETY: a live slot of an issued lane: its alias page is installed (or mapped
            // again by the fault handler); `n` bytes stay inside the slot.
            scan_words(unsafe { core::slice::from_raw_parts(at as *const u8, n) });
            *scanned += n as u64;
        }
    }
}

/// A hint to load the line at `addr` (no fault, whatever the address).
#[inline]
fn prefetch(addr: usize) {
    // SAFETY: a prefetch never faults and changes no state the program can see.
    unsafe { core::arch::x86_64::_mm_prefetch(addr as *const i8, core::arch::x86_64::_MM_HINT_T0) };
}

/// Scans what the reached dead slots hold, and then what the dead slots reached from those
/// hold, until no new one is reached (`since`: the count of `NEWLY_REACHED` before the scan;
/// nothing to do if it has not moved). A dangling pointer to a dead slot of a lane that is
/// still mapped (pinned by a survivor, or waiting for its revocation) can read the slot's old
/// contents: a pointer found there is as good as one in the program's memory, and the slot it
/// points to must stay unused too (without this, `tests/c/sweep.c chained` got a new object at
/// an address read through a dangling pointer). Slots are read from the pool's file, a page at
/// a time, never through their aliases (a lane waiting for revocation has no live alias for
/// the fault handler to map again). False if the file cannot be read: then nothing may be
/// reclaimed.
fn chase(b: &mut Buffers, scanned: &mut u64, mut since: u64) -> bool {
    let l = POOL.layout();
    loop {
        let now = NEWLY_REACHED.load(Ordering::Relaxed);
        if now == since {
            return true;
        }
        since = now;
        if sys::file_id(l.fd) != Some(l.file) {
            return false;
        }
        let mut ok = true;
        // The pool page whose contents `b.data` holds.
        let mut cached = usize::MAX;
        for_each_issued_slot(|ci, idx, _, entry, i| {
            let v = entry.load(Ordering::Relaxed);
            if !ok || !dead(v) || v & REACHED == 0 || v & CHASED != 0 {
                return;
            }
            entry.store(v | CHASED, Ordering::Relaxed);
            let c = &CLASSES[ci];
            let (j, pos) = (i % c.pages, i / c.pages);
            let page = POOL.span(idx).start as usize + j as usize;
            if page != cached {
                if sys::pread(l.fd, &mut b.data[..PAGE], page << PAGE_SHIFT) != Some(PAGE) {
                    ok = false;
                    return;
                }
                cached = page;
            }
            let at = (pos * c.size) as usize;
            scan_words(&b.data[at..at + c.size as usize]);
            *scanned += c.size as u64;
        });
        if !ok {
            return false;
        }
    }
}

/// Clears every mark; when the scan completed (`reclaim`), hands every unmarked dead slot of a
/// pinned lane back to its class. Returns (slots, bytes) reclaimed.
fn finish(reclaim: bool) -> (u64, u64) {
    let (mut slots, mut bytes) = (0u64, 0u64);
    let now = alias::current();
    // Whether the lane of the slots met last is pinned: asked once per lane (an old lane's
    // answer reads its mirror), not once per dead slot.
    let mut last: (*const slab::Lane, bool) = (core::ptr::null(), false);
    for_each_issued_slot(|ci, idx, l, entry, i| {
        let v = entry.load(Ordering::Relaxed);
        if !dead(v) {
            return;
        }
        if !core::ptr::eq(last.0, l) {
            last = (l, pinned_age(now, l));
        }
        if v & REACHED != 0 {
            entry.store(v & !(REACHED | CHASED), Ordering::Relaxed);
        } else if reclaim
            && l.live.load(Ordering::Relaxed) > 0
            && last.1
            && slab::CENTRAL[ci].lock().push_reclaimed(idx, i)
        {
            entry.store(FREE_SLOT, Ordering::Relaxed);
            l.live.fetch_add(1, Ordering::AcqRel);
            slots += 1;
            bytes += CLASSES[ci].size as u64;
        }
    });
    (slots, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_fit_beside_sizes() {
        assert!(slab::MAX_SLOT < REACHED as usize && REACHED & FREED == 0);
        assert!(!dead(FREE_SLOT) && dead(FREED | 100) && dead(FREED | REACHED | 100) && !dead(100));
    }
}
