//! The alias engine: one-time virtual addresses over reused physical memory, on a stock kernel.
//!
//! The pool's pages are seen by the program only through *aliases*. Aliases live in *mirrors*:
//! shared mappings of the pool's first `npages` pages, placed one after another in a reserved
//! *alias arena* and registered with userfaultfd in MISSING|MINOR mode. Mirror `e` is *epoch*
//! `e`: in it, pool page `p` has exactly one alias, `base(e) + p * 4096`, so a pool page can be
//! issued at most once per epoch (`LAST[p]` records the newest epoch that issued it). Only the
//! newest epoch issues; when what it may still issue runs short, the next mirror is made.
//!
//! - **Install**: an issued alias page gets its page-table entry from `UFFDIO_CONTINUE` (one
//!   ioctl per run of contiguous alias pages) before any pointer into it is returned.
//! - **Revoke**: `MADV_DONTNEED` drops the entry. The mirror being MINOR-registered, the next
//!   user access raises SIGBUS (the `fault` module reports it) and a kernel access fails with
//!   EFAULT: a dangling pointer can never reach the page's newer contents. Revocations are
//!   sorted and merged (also across gaps of up to 128 pages that are dead, or that an epoch
//!   which can issue no more never issued: each range costs a TLB shootdown on every CPU the
//!   process runs on) and issued in batches (`process_madvise`), or one by one in detect mode.
//! - **Retire**: once an old mirror has no live alias left it is overlaid with one no-access
//!   reservation; the range stays reserved and is never handed out again.
//!
//! When userfaultfd is refused (seccomp, old kernel), revocation installs guard markers
//! (`MADV_GUARD_INSTALL`) on the mirror instead: dangling accesses still trap; a live alias
//! simply faults in on first touch. The choice is said once on stderr.

use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::lock::Locked;
use crate::pool::POOL;
use crate::report;
use crate::sys::{self, PAGE, PAGE_SHIFT};

/// Mirrors are multiples of this, and the epoch of an address is looked up per chunk.
const CHUNK_SHIFT: usize = 21;
const CHUNK: usize = 1 << CHUNK_SHIFT;
/// Entries of the mirror table (a ring of 64-byte entries, touched as epochs are made), unless
/// the `mirror_table` option says otherwise. An epoch whose entry went to a newer one can no
/// longer tell which object a stale pointer into it meant (a fault there is still reported as
/// a use-after-free, without the object): detect mode, whose reports name objects and their
/// stacks, keeps 2^22 (256 MiB once that many epochs were made: ~40 minutes of an alloc/free
/// loop); prevent mode keeps 2^16 (4 MiB). Live mirrors take entries for as long as they live
/// (`next_epoch` skips them); there cannot be more than mappings (vm.max_map_count, 65530).
const DETECT_EPOCHS: usize = 1 << 22;
const PREVENT_EPOCHS: usize = 1 << 16;
/// The smallest alias arena tried (under a tight `RLIMIT_AS`).
const MIN_ARENA: usize = 32 << 20;

// userfaultfd ABI (linux/userfaultfd.h).
const UFFD_API: u64 = 0xAA;
const UFFD_USER_MODE_ONLY: i32 = 1;
const UFFD_FEATURE_MISSING_SHMEM: u64 = 1 << 5;
const UFFD_FEATURE_SIGBUS: u64 = 1 << 7;
const UFFD_FEATURE_MINOR_SHMEM: u64 = 1 << 10;
const UFFDIO_API: u64 = 0xC018_AA3F;
pub const UFFDIO_REGISTER: u64 = 0xC020_AA00;
pub const UFFDIO_CONTINUE: u64 = 0xC020_AA07;
const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;
const UFFDIO_REGISTER_MODE_MINOR: u64 = 4;
const MADV_GUARD_INSTALL: i32 = 102;
/// linux/pidfd.h: the calling thread, without a descriptor (recent kernels). Any thread's
/// memory is the process's; unlike the thread group's leader (`PIDFD_SELF_THREAD_GROUP`, or a
/// pidfd of the process), the calling thread is alive: once the main thread has left with
/// `pthread_exit`, `process_madvise` on the leader fails with ESRCH.
const PIDFD_SELF_THREAD: i32 = -10000;
/// No way to `process_madvise` ourselves.
const NO_PIDFD: i32 = -1;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioRegister {
    start: u64,
    len: u64,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioContinue {
    start: u64,
    len: u64,
    mode: u64,
    mapped: i64,
}

/// How revoked aliases are made to trap.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Revoke {
    /// userfaultfd MINOR mode: `MADV_DONTNEED` drops the entry; access raises SIGBUS.
    Uffd,
    /// `MADV_GUARD_INSTALL` markers: access raises SIGSEGV.
    Guard,
    /// `mprotect(PROT_NONE)`: access raises SIGSEGV; each revoked range costs a mapping until
    /// its mirror retires (kernels without guard markers, userfaultfd refused).
    Protect,
}

/// One epoch's mirror.
#[repr(C)]
pub struct Mirror {
    pub base: AtomicUsize,
    pub npages: AtomicU32,
    /// Alias units (lanes, page objects) issued in this epoch and not yet revoked, plus pins
    /// held by threads about to issue; `RETIRED_BIT` once retired.
    pub live: AtomicU32,
    /// 1 once retired.
    pub retired: AtomicU32,
    /// Threads that may be issuing in this epoch right now (see `pin_current`).
    pub pins: AtomicU32,
    /// One bit per pool page: issued in this epoch (for reports). Null once retired.
    pub issued: AtomicPtr<AtomicU64>,
    /// The epoch this entry describes (the table is a ring).
    pub epoch: AtomicU32,
    /// The fewest live units sweeps' censuses saw in this mirror (`note_units`), `u32::MAX`
    /// before the first look.
    pub units_low: AtomicU32,
    /// Live alias units per 2 MiB window of the mirror; a window of a sealed epoch whose count
    /// drops to zero is zapped whole, which frees its page table. Null once retired.
    pub windows: AtomicPtr<AtomicU32>,
    /// 1 once the windows that died before the epoch was sealed were zapped (`sweep_sealed`).
    pub swept: AtomicU32,
    /// The epoch in which a census last saw `units_low` fall.
    pub units_low_since: AtomicU32,
    /// How many epochs were made up to this one: unlike epoch numbers, which wrap round
    /// (`next_epoch`), it orders epochs for ever (`issuable`).
    pub serial: AtomicU64,
}

// The table's entries are a cache line each (docs/usage.md, "Mirror table").
const _: () = assert!(core::mem::size_of::<Mirror>() == 64);

/// The mirror table, the arena's chunk table and each pool page's last epoch (`Fixed`), made
/// writable as epochs use them (`advance`): sized for the whole arena and pool, they would
/// otherwise be charged to the process whole (`meta::Table`).
static MIRRORS: crate::meta::Table = crate::meta::Table::new();
static CHUNKS: crate::meta::Table = crate::meta::Table::new();
static LAST: crate::meta::Table = crate::meta::Table::new();

/// Pool pages per 2 MiB window.
const WINDOW_PAGES: u32 = (CHUNK >> PAGE_SHIFT) as u32;

struct Fixed {
    arena: usize,
    arena_len: usize,
    /// Where the arena's reservation starts: at least a page and at most a chunk below `arena`
    /// (the page kept below the first mirror, and the alignment).
    reserved: usize,
    uffd: i32,
    /// (device, inode) of our userfaultfd, to notice when the program closed or replaced it.
    uffd_id: (u64, u64),
    revoke: Revoke,
    /// Whom `process_madvise` names: `PIDFD_SELF_THREAD` where the kernel takes it, else a
    /// pidfd of our own (`>= 0`), else `NO_PIDFD` (one `madvise` per range).
    pidfd: i32,
    mirrors: *mut Mirror,
    /// Entries of `mirrors`.
    max_epochs: usize,
    /// Per 2 MiB chunk of the arena: epoch + 1, or 0.
    chunks: *mut AtomicU32,
    /// Per pool page: the serial (`Mirror::serial`) of the newest epoch that issued it.
    last: *mut AtomicU64,
}

static FIXED: crate::GlobalCell<Fixed> = crate::GlobalCell::new(Fixed {
    arena: 0,
    arena_len: 0,
    reserved: 0,
    uffd: -1,
    uffd_id: (0, 0),
    revoke: Revoke::Uffd,
    pidfd: NO_PIDFD,
    mirrors: ptr::null_mut(),
    max_epochs: 0,
    chunks: ptr::null_mut(),
    last: ptr::null_mut(),
});

/// The issuing epoch (0 until the first mirror exists).
static CURRENT: AtomicU32 = AtomicU32::new(0);

struct State {
    /// Next free address in the arena.
    cursor: usize,
    /// One bit per GiB of the arena: laid over again with a fresh reservation once every
    /// mirror in it had retired, which freed the page tables they left (`reclaim_tables`).
    reclaimed: *mut u64,
    /// Degrade mode: where the search for reusable (retired) arena ranges continues.
    wrap: usize,
    /// Recycled `issued` bitmaps, by power-of-two size (64 bytes << index).
    bitmaps: [*mut u8; 32],
    live_mirrors: u32,
    /// Epochs made so far (`Mirror::serial`).
    serial: u64,
}

static STATE: Locked<State> = Locked::new(State {
    cursor: 0,
    reclaimed: ptr::null_mut(),
    wrap: 0,
    bitmaps: [ptr::null_mut(); 32],
    live_mirrors: 0,
    serial: 0,
});

// SAFETY: the raw pointers in State are only reached under its lock.
unsafe impl Send for State {}

/// Bytes of the alias arena handed to mirrors so far (fresh addresses; degrade mode reuses).
static ARENA_USED: AtomicUsize = AtomicUsize::new(0);
pub static MIRRORS_MADE: AtomicU64 = AtomicU64::new(0);
pub static MIRRORS_RETIRED: AtomicU64 = AtomicU64::new(0);
pub static PEAK_MIRRORS: AtomicU64 = AtomicU64::new(0);
pub static INSTALL_RUNS: AtomicU64 = AtomicU64::new(0);
pub static INSTALL_PAGES: AtomicU64 = AtomicU64::new(0);
pub static REVOKE_CALLS: AtomicU64 = AtomicU64::new(0);
pub static REVOKE_PAGES: AtomicU64 = AtomicU64::new(0);
pub static REVOKE_RANGES: AtomicU64 = AtomicU64::new(0);

/// A counter alone in its cache line: every small allocation reads it.
#[repr(align(64))]
pub struct Lone(pub AtomicU64);

/// Revocation batches begun (the stats' batches), counted before their system call: a slot
/// freed and then handed out again under a new alias was revoked in between, so a reader that
/// saw this count unchanged across its look at the slot's entry saw no such reuse
/// (`heap::last_size`).
pub static REVOKE_BATCHES: Lone = Lone(AtomicU64::new(0));
pub static ALIASES: AtomicU64 = AtomicU64::new(0);
/// Pool pages issued in the current epoch (reset when the next one starts).
static ISSUED_NOW: AtomicU32 = AtomicU32::new(0);
pub static DEGRADED: AtomicU64 = AtomicU64::new(0);
/// Faults on live aliases that had lost their page-table entry, mapped again by the handler.
pub static FAULTS_HANDLED: AtomicU64 = AtomicU64::new(0);
static EXHAUSTED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

fn fixed() -> &'static Fixed {
    FIXED.get()
}

pub fn revoke_kind() -> Revoke {
    fixed().revoke
}

/// The allocator's userfaultfd (-1 without one).
pub fn uffd() -> i32 {
    fixed().uffd
}

/// Whether `fd` is the allocator's userfaultfd (its number, and still its file).
pub fn is_own_uffd(fd: i32) -> bool {
    let f = fixed();
    sys::is_own(fd, f.uffd, f.uffd_id)
}

/// Whom revocation batches name in `process_madvise` (None: one `madvise` per range).
pub fn advice_target() -> Option<i32> {
    Some(fixed().pidfd).filter(|&p| p != NO_PIDFD)
}

/// Opens userfaultfd (or picks the fallback), reserves the arena and its tables.
///
/// # Safety
/// Once, during initialisation, after the pool exists.
pub unsafe fn init() -> bool {
    // SAFETY: single-threaded initialisation.
    let f = unsafe { FIXED.get_mut() };
    f.uffd = open_uffd();
    // Before anything else can overwrite it (`file_id` of -1 fails with EBADF).
    let uffd_errno = sys::errno();
    f.uffd_id = sys::file_id(f.uffd).unwrap_or((0, 0));
    f.revoke = if f.uffd >= 0 {
        Revoke::Uffd
    } else if guard_markers_work() {
        Revoke::Guard
    } else {
        Revoke::Protect
    };
    f.pidfd = if self_advice_works() { PIDFD_SELF_THREAD } else { open_pidfd() };
    // `alias_space` (32 TiB by default), at most a quarter of the address-space limit;
    // halved while the kernel refuses.
    let wanted = crate::options().alias_space_mib.saturating_mul(1 << 20).max(MIN_ARENA);
    let mut len: usize = match sys::as_limit() {
        Some(l) => sys::pow2_floor(l / 4).clamp(MIN_ARENA, wanted),
        None => wanted,
    };
    // Under a data limit, the table of chunks (4 bytes per 2 MiB) takes at most a sixteenth.
    let data = sys::data_limit();
    if let Some(l) = data {
        len = len.min(sys::pow2_floor((l / 16 / 4) << CHUNK_SHIFT).max(MIN_ARENA));
    }
    // A page more than the chunk-aligned arena needs, so that at least one page of the
    // reservation, never mapped, lies below its first mirror: an access just before the first
    // object there traps on memory of the library's own (`below_arena`), never on whatever
    // else the kernel would have placed against the arena.
    let arena = loop {
        let p = sys::reserve(len + CHUNK + PAGE);
        if !p.is_null() {
            break p as usize;
        }
        if len <= MIN_ARENA {
            return false;
        }
        len /= 2;
    };
    f.arena = sys::round_up(arena + PAGE, CHUNK);
    f.reserved = arena;
    f.arena_len = len;
    // Every mirror takes at least one chunk of the arena: no more epochs than chunks.
    // The mirror table is a ring indexed by epoch modulo its size: a live mirror spans at least
    // one chunk, so no more mirrors than chunks can be live at once.
    let table = crate::options()
        .mirror_table
        .map_or(if crate::detect() { DETECT_EPOCHS } else { PREVENT_EPOCHS }, |n| n as usize);
    // ... and so does the mirror table.
    let table = data.map_or(table, |l| table.min(l / 16 / core::mem::size_of::<Mirror>()).max(64));
    f.max_epochs = sys::pow2_floor(table.min((len >> CHUNK_SHIFT) + 2));
    f.mirrors = MIRRORS.map(f.max_epochs * core::mem::size_of::<Mirror>()) as *mut Mirror;
    f.chunks = CHUNKS.map((len >> CHUNK_SHIFT) * 4) as *mut AtomicU32;
    f.last = LAST.map(POOL.layout().pages as usize * 8) as *mut AtomicU64;
    if f.mirrors.is_null() || f.chunks.is_null() || f.last.is_null() {
        return false;
    }
    {
        let mut st = STATE.lock();
        st.cursor = f.arena;
        // One bit per GiB; without it (no metadata memory) tables are simply not reclaimed.
        st.reclaimed = crate::meta::map((len >> 30).div_ceil(64).max(1) * 8) as *mut u64;
    }
    match f.revoke {
        Revoke::Uffd => {}
        Revoke::Guard => report::say(format_args!(
            "userfaultfd is not available (errno {uffd_errno}); revoked addresses trap through guard markers instead"
        )),
        Revoke::Protect => report::say(format_args!(
            "userfaultfd is not available (errno {uffd_errno}) nor are guard markers; revoked addresses trap \
             through mprotect instead (one mapping per revoked range until its epoch retires)"
        )),
    }
    true
}

/// Whether `MADV_GUARD_INSTALL` works here (Linux 6.13+, and not filtered): the call succeeds
/// and the page then refuses the kernel's writes. An emulator (qemu-user) or a filter may
/// answer 0 to advice it does not carry out, and revoked addresses would then stay readable.
fn guard_markers_work() -> bool {
    let p = crate::meta::map(PAGE);
    if p.is_null() {
        return false;
    }
    let ok = sys::advise(p, PAGE, MADV_GUARD_INSTALL) && {
        // SAFETY: `uname` writes a `struct utsname` (390 bytes) at `p`, a page of ours: into
        // the page if the marker is not there, or it fails with EFAULT.
        let r = unsafe { sys::raw_syscall(libc::SYS_uname, [p as usize, 0, 0, 0, 0, 0]) };
        r == -(libc::EFAULT as isize)
    };
    crate::meta::unmap(p, PAGE);
    ok
}

/// How revocation batches reach the kernel (for the `verbose` line).
pub fn batching() -> &'static str {
    match fixed().pidfd {
        PIDFD_SELF_THREAD => "process_madvise on the calling thread",
        NO_PIDFD => "one madvise per range",
        _ => "process_madvise on a pidfd",
    }
}

/// Whether `process_madvise` takes `PIDFD_SELF_THREAD`, so that no pidfd is needed: one
/// descriptor fewer in the program's table, none to reopen after `fork`.
fn self_advice_works() -> bool {
    let p = crate::meta::map(PAGE);
    if p.is_null() {
        return false;
    }
    let r = Range { addr: p as usize, len: PAGE };
    // SAFETY: `Range` is laid out as an `iovec`; the page is a private mapping of our own.
    let n = unsafe { libc::syscall(libc::SYS_process_madvise, PIDFD_SELF_THREAD, &r, 1, libc::MADV_DONTNEED, 0) };
    crate::meta::unmap(p, PAGE);
    n == PAGE as libc::c_long
}

/// A pidfd of this process, high and close-on-exec, or `NO_PIDFD`.
fn open_pidfd() -> i32 {
    let pidfd = sys::beyond_fd_limit(|| {
        // SAFETY: plain syscall.
        unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) as i32 }
    });
    if pidfd >= 0 {
        sys::move_fd_high(pidfd)
    } else {
        NO_PIDFD
    }
}

fn open_uffd() -> i32 {
    let fd = sys::beyond_fd_limit(|| {
        // SAFETY: plain syscall.
        unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY) as i32 }
    });
    if fd < 0 {
        return -1;
    }
    let mut api = UffdioApi {
        api: UFFD_API,
        features: UFFD_FEATURE_SIGBUS | UFFD_FEATURE_MINOR_SHMEM | UFFD_FEATURE_MISSING_SHMEM,
        ioctls: 0,
    };
    // SAFETY: UFFDIO_API with a valid struct.
    if unsafe { libc::ioctl(fd, UFFDIO_API as _, &mut api) } != 0 {
        sys::close(fd);
        return -1;
    }
    sys::move_fd_high(fd)
}

/// Re-opens userfaultfd in a forked child (the parent's registrations do not carry over).
///
/// # Safety
/// Only in the fork child handler.
pub unsafe fn reopen_uffd_in_child() -> bool {
    // SAFETY: the child is single-threaded here.
    let f = unsafe { FIXED.get_mut() };
    if f.revoke != Revoke::Uffd {
        return true;
    }
    if sys::file_id(f.uffd) == Some(f.uffd_id) {
        sys::close(f.uffd);
    }
    f.uffd = open_uffd();
    f.uffd_id = sys::file_id(f.uffd).unwrap_or((0, 0));
    // A pidfd names the parent; `PIDFD_SELF_THREAD` names whoever calls.
    if f.pidfd >= 0 {
        sys::close(f.pidfd);
        f.pidfd = open_pidfd();
    }
    f.uffd >= 0
}

#[inline]
pub fn current() -> u32 {
    CURRENT.load(Ordering::Acquire)
}

/// The table entry of epoch `e` (a ring: it holds the newest epoch with that index; see
/// `Mirror::epoch`).
#[inline]
pub fn mirror(e: u32) -> &'static Mirror {
    let f = fixed();
    // SAFETY: the index is reduced modulo the table's (power-of-two) size.
    unsafe { &*f.mirrors.add(e as usize & (f.max_epochs - 1)) }
}

#[inline]
pub fn last(page: u32) -> &'static AtomicU64 {
    // SAFETY: one entry per pool page.
    unsafe { &*fixed().last.add(page as usize) }
}

/// The alias of pool page `page` in epoch `e`.
#[inline]
pub fn alias(e: u32, page: u32) -> usize {
    mirror(e).base.load(Ordering::Relaxed) + ((page as usize) << PAGE_SHIFT)
}

/// Whether `addr` lies in the alias arena.
#[inline]
pub fn in_arena(addr: usize) -> bool {
    let f = fixed();
    addr.wrapping_sub(f.arena) < f.arena_len
}

/// Whether `addr` lies in the page just below the alias arena: the no-access page of the
/// arena's reservation kept below its first mirror (an access just before the first object
/// there).
pub fn below_arena(addr: usize) -> bool {
    let f = fixed();
    addr < f.arena && f.arena - addr <= PAGE && addr >= f.reserved
}

/// The alias arena: (start, length).
pub fn arena_range() -> (usize, usize) {
    let f = fixed();
    (f.arena, f.arena_len)
}

/// The chunk table's entry for `addr` (epoch + 1 of the mirror that took its 2 MiB chunk, or
/// 0), if it lies in the arena.
#[inline]
fn chunk_entry(addr: usize) -> Option<u32> {
    let f = fixed();
    let off = addr.wrapping_sub(f.arena);
    // SAFETY: one entry per chunk of the arena, and `off` is inside it.
    (off < f.arena_len).then(|| unsafe { (*f.chunks.add(off >> CHUNK_SHIFT)).load(Ordering::Acquire) })
}

/// (epoch, pool page) of an alias address, if it lies in a mirror.
#[inline]
pub fn decode(addr: usize) -> Option<(u32, u32)> {
    let e = chunk_entry(addr)?;
    if e == 0 {
        return None;
    }
    let e = e - 1;
    let m = mirror(e);
    if m.epoch.load(Ordering::Acquire) != e {
        return None; // a retired epoch whose table entry was reused
    }
    let page = addr.wrapping_sub(m.base.load(Ordering::Relaxed)) >> PAGE_SHIFT;
    if page >= m.npages.load(Ordering::Relaxed) as usize {
        return None;
    }
    Some((e, page as u32))
}

/// Where the allocator itself can touch the byte at `addr` of a live object without a
/// fault that needs the handler: the same byte in the pool's canonical view for an alias of a
/// mirror, `addr` itself elsewhere (large views and the fallback modes' aliases refault like
/// any shared mapping).
///
/// An alias page can lose its page-table entry at any time (pageout, swap, the program's own
/// `madvise`), and the next access through it raises SIGBUS, which the fault handler mends.
/// A SIGBUS raised while the signal is blocked cannot reach any handler: the kernel kills the
/// process. The C library blocks every signal for a thread's last steps and frees memory in
/// them (the TLS of the thread stacks it drops from its cache: those are views of their own
/// now, `heap::view_malloc`, but whatever else is freed there need not be). The canonical
/// view is not registered with userfaultfd, so a missing entry there is an ordinary page
/// fault; but each page read through it also counts in RSS again, so it is used only where
/// signals may be blocked (see `heap::check_canary`).
#[inline]
pub fn backing(addr: usize) -> usize {
    if fixed().revoke != Revoke::Uffd {
        return addr;
    }
    match decode(addr) {
        Some((_, page)) => POOL.page_addr(page) + (addr & (PAGE - 1)),
        None => addr,
    }
}

/// Whether `addr` lies in a 2 MiB chunk of the arena that a mirror took: its aliases were
/// handed out, even when `decode` no longer knows the epoch (its table entry went to a newer
/// one). Reports then say `FORGOTTEN`.
pub fn once_mirrored(addr: usize) -> bool {
    chunk_entry(addr).is_some_and(|e| e != 0)
}

/// What a report says of memory `once_mirrored` but no longer decoded.
pub const FORGOTTEN: &str = "the memory at this address was freed long ago (its epoch's records went to a newer one)";

/// Set in `Mirror::live` when the mirror is retired: no pin can be taken any more.
const RETIRED_BIT: u32 = 1 << 31;

/// Pins the current epoch for issuing (so that it cannot be retired meanwhile), making the
/// first mirror if there is none. Returns the pinned epoch, or 0 when none can be had.
pub fn pin_current() -> u32 {
    loop {
        let e = current();
        if e == 0 {
            if advance(POOL.layout().pages.min(1024)).is_none() && current() == 0 {
                return 0;
            }
            continue;
        }
        let m = mirror(e);
        // Announce the pin, then check the epoch is still the issuing one: whoever sees no pin
        // on an older epoch knows nobody can issue in it any more (SeqCst pairs with `sealed`).
        m.pins.fetch_add(1, Ordering::SeqCst);
        if current() != e {
            m.pins.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        if m.live.fetch_add(1, Ordering::AcqRel) & RETIRED_BIT == 0 {
            return e;
        }
        m.live.fetch_sub(1, Ordering::AcqRel);
        m.pins.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Notes, for a sweep's census in epoch `now`, how many live units old epoch `e`'s mirror has
/// (`settled`). An old epoch issues nothing more, so its count only falls (but for a moment
/// while `sweep_sealed` holds it, which at worst makes it look unsettled a little longer).
/// Should the mirror retire between the check and the stores (a census while other threads
/// run) and a new epoch take its entry, the new one starts from this count: its lanes may then
/// be refilled before it is settled, which keeps a mapping longer, and changes nothing else
/// (a refilled slot still needs a sweep's proof).
pub fn note_units(now: u32, e: u32) {
    let m = mirror(e);
    if m.epoch.load(Ordering::Acquire) != e {
        return;
    }
    let live = m.live.load(Ordering::Relaxed) & !RETIRED_BIT;
    if live < m.units_low.load(Ordering::Relaxed) {
        m.units_low.store(live, Ordering::Relaxed);
        m.units_low_since.store(now, Ordering::Relaxed);
    }
}

/// Whether old epoch `e`'s mirror lost no live unit in the `epochs` epochs before `now`, as
/// far as censuses saw (`note_units`): what keeps it is kept for good, so far as one can tell.
pub fn settled(now: u32, e: u32, epochs: u32) -> bool {
    let m = mirror(e);
    m.epoch.load(Ordering::Acquire) == e
        && m.units_low.load(Ordering::Relaxed) != u32::MAX
        && now.wrapping_sub(m.units_low_since.load(Ordering::Relaxed)) >= epochs
}

/// Drops a pin taken by `pin_current`.
pub fn unpin(e: u32) {
    let pins = mirror(e).pins.fetch_sub(1, Ordering::SeqCst) - 1;
    if pins == 0 && CURRENT.load(Ordering::SeqCst) != e {
        // The last thread that could issue in this old epoch is done: it is sealed now.
        sweep_sealed(e);
    }
    unit_revoked(e);
}

/// Once epoch `e` is sealed, zaps its windows whose units were all revoked while it was still
/// issuing: `unit_revoked_at` leaves those alone (new aliases could still appear there), and
/// nothing else would free their page tables while the mirror lives on (pinned by a few
/// long-lived objects elsewhere). Adjacent dead windows go in one call. Runs once per epoch.
///
/// With guard markers instead of userfaultfd (`Revoke::Guard`), the pages the epoch never
/// issued get markers instead: with userfaultfd they stay unmapped and trap, but a plain
/// mapping would map the pool page behind them on first touch, so that a wild pointer (an
/// overflow running off its page) reached whatever that page holds by then. The issuing
/// epoch's own unissued pages stay open (it may still issue them).
fn sweep_sealed(e: u32) {
    let m = mirror(e);
    let kind = revoke_kind();
    if kind == Revoke::Protect || !sealed(e) || m.swept.swap(1, Ordering::AcqRel) != 0 {
        return;
    }
    // Hold the mirror like a pin, so that it cannot be retired (and its tables recycled) under us.
    if m.live.fetch_add(1, Ordering::AcqRel) & RETIRED_BIT != 0 {
        m.live.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    if kind == Revoke::Guard {
        // Every page but the live aliases: pages revoked already (or dead and about to be)
        // take a marker again at no harm, and joining them to the unissued ones makes few
        // ranges. A small batch: this may run on a signal handler's stack.
        let base = m.base.load(Ordering::Relaxed);
        let n = m.npages.load(Ordering::Relaxed) as usize;
        let mut batch = [Range { addr: 0, len: 0 }; 32];
        let mut k = 0;
        for_each_run(
            n,
            |q| was_issued(e, q as u32) == Some(false) || !alias_live(e, q as u32),
            |from, to| {
                batch[k] = Range { addr: base + (from << PAGE_SHIFT), len: (to - from) << PAGE_SHIFT };
                k += 1;
                if k == batch.len() {
                    advise_ranges(&batch, MADV_GUARD_INSTALL);
                    k = 0;
                }
            },
        );
        advise_ranges(&batch[..k], MADV_GUARD_INSTALL);
        unit_revoked(e);
        return;
    }
    let windows = m.windows.load(Ordering::Acquire);
    let npages = m.npages.load(Ordering::Relaxed) as usize;
    if !windows.is_null() {
        let nw = npages.div_ceil(WINDOW_PAGES as usize);
        let base = m.base.load(Ordering::Relaxed);
        // SAFETY: the mirror has `nw` window counters and cannot be retired while held.
        let dead = |w: usize| unsafe { (*windows.add(w)).load(Ordering::Acquire) } == 0;
        for_each_run(nw, dead, |from, to| {
            let start = base + (from << CHUNK_SHIFT);
            let end = (base + (to << CHUNK_SHIFT)).min(base + (npages << PAGE_SHIFT));
            if sys::advise(start as *mut u8, end - start, libc::MADV_DONTNEED) {
                WINDOWS_FREED.fetch_add((to - from) as u64, Ordering::Relaxed);
            }
        });
    }
    unit_revoked(e);
}

/// Calls `f(from, to)` for every maximal run `from..to` of indices below `n` where `pred`
/// holds, in order.
fn for_each_run(n: usize, pred: impl Fn(usize) -> bool, mut f: impl FnMut(usize, usize)) {
    let mut i = 0;
    while i < n {
        if !pred(i) {
            i += 1;
            continue;
        }
        let from = i;
        while i < n && pred(i) {
            i += 1;
        }
        f(from, i);
    }
}

/// No thread can issue in epoch `e` any more: it is not the issuing epoch and nobody holds a
/// pin on it.
fn sealed(e: u32) -> bool {
    e != 0 && CURRENT.load(Ordering::SeqCst) != e && mirror(e).pins.load(Ordering::SeqCst) == 0
}

/// Whether pool page `page` may be issued in the pinned epoch `e`.
#[inline]
pub fn issuable(e: u32, page: u32) -> bool {
    let m = mirror(e);
    e != 0
        && page < m.npages.load(Ordering::Relaxed)
        && last(page).load(Ordering::Relaxed) < m.serial.load(Ordering::Relaxed)
}

/// Records the issue of one alias unit covering pool pages `page..page+n` in the pinned
/// epoch `e`.
pub fn note_issue(e: u32, page: u32, n: u32) {
    let m = mirror(e);
    let bits = m.issued.load(Ordering::Relaxed);
    let serial = m.serial.load(Ordering::Relaxed);
    for p in page..page + n {
        last(p).store(serial, Ordering::Relaxed);
        if !bits.is_null() {
            // SAFETY: p < npages, and the bitmap has npages bits.
            unsafe { (*bits.add(p as usize / 64)).fetch_or(1 << (p % 64), Ordering::Relaxed) };
        }
    }
    let windows = m.windows.load(Ordering::Relaxed);
    if !windows.is_null() {
        for w in page / WINDOW_PAGES..=(page + n - 1) / WINDOW_PAGES {
            // SAFETY: page + n <= npages, so w < the window count.
            unsafe { (*windows.add(w as usize)).fetch_add(1, Ordering::Relaxed) };
        }
    }
    m.live.fetch_add(1, Ordering::AcqRel);
    ALIASES.fetch_add(1, Ordering::Relaxed);
    if e == current() {
        ISSUED_NOW.fetch_add(n, Ordering::Relaxed);
    }
}

/// Was pool page `page` ever issued in epoch `e`? (None: the epoch was retired.)
pub fn was_issued(e: u32, page: u32) -> Option<bool> {
    let bits = mirror(e).issued.load(Ordering::Acquire);
    if bits.is_null() {
        return None;
    }
    // SAFETY: page < npages (callers decode first).
    Some(unsafe { (*bits.add(page as usize / 64)).load(Ordering::Relaxed) } & (1 << (page % 64)) != 0)
}

/// Live mirrors (one VMA each) beyond which epochs are made longer: the next epoch starts only
/// once the current one has issued as many pages as the pool holds, so that pool memory
/// rather than mappings grows.
const MIRROR_BUDGET: u32 = 4096;

/// Whether an issuing thread that found only blocked lanes should start the next epoch (else
/// it takes fresh pool pages). Epochs last at least 32 pages and a quarter of the pool; past
/// the mirror budget, a whole pool's worth. A page is issued at most once per epoch, so the
/// pages an epoch issues must all be ready at its start: the longer the epoch, the more
/// of the pool waits (with half the pool, the pool held twice the pages that long-lived
/// objects keep: `bench/soak.c` 2·10^7, 87.7 MiB physical against 67.4 MiB with a quarter).
/// Shorter epochs make more mirrors (mappings): 145 at that soak's end, 275 with a quarter.
///
/// An epoch also spends one-time address space: its mirror, the pool and some slack, whatever
/// it issues. Where the arena has room for fewer than `SCARCE_EPOCHS` more mirrors of the
/// current one's size (an address-space limit sized it, or it is nearly used up; with the
/// default 32 TiB, a heap of over ~25 GiB), an epoch issues at least half its mirror first,
/// which grows the pool instead. Under a 1 GiB limit, detect mode's 32-page epochs put 4 MiB
/// of addresses behind every 32 objects, and openssl's start-up used up the 256 MiB arena
/// (every mirror pinned by a long-lived object): its allocations failed. Now it uses 58 MiB
/// of it (and 6.9 MiB of pool).
pub fn may_advance() -> bool {
    let in_use = POOL.stats().0.pages_in_use as u32;
    let st = STATE.lock();
    let mut min = if st.live_mirrors >= MIRROR_BUDGET { in_use } else { (in_use / 4).max(32) };
    let f = fixed();
    let npages = mirror(current()).npages.load(Ordering::Relaxed);
    let left = (f.arena + f.arena_len).saturating_sub(st.cursor);
    if npages > 0 && left / ((npages as usize) << PAGE_SHIFT) < SCARCE_EPOCHS {
        min = min.max(npages / 2);
    }
    ISSUED_NOW.load(Ordering::Relaxed) >= min
}

/// Room for fewer epochs than this in the arena's fresh part makes epochs longer (`may_advance`).
const SCARCE_EPOCHS: usize = 1024;

/// A size in MiB, or "none".
struct Mib(Option<usize>);

impl core::fmt::Display for Mib {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            Some(b) => write!(f, "{} MiB", b >> 20),
            None => f.write_str("none"),
        }
    }
}

/// Makes a new mirror covering at least `min_pages` pool pages and makes it the issuing
/// epoch. Returns it, or None when out of address space or mappings.
pub fn advance(min_pages: u32) -> Option<u32> {
    // The new mirror is registered with the userfaultfd, which the program may have closed or
    // replaced since the last install (daemons close every descriptor): a refill that needs a
    // new epoch before any install would otherwise fail with ENOMEM.
    ensure_uffd();
    let f = fixed();
    let mut st = STATE.lock();
    let e = next_epoch()?;
    // Slack: room for the pool to grow by a quarter (at least 2 MiB) within this epoch.
    // Cover at least the pool as it is now: another thread may have grown it since the caller
    // measured it, and every epoch made after a run was allocated must be able to issue it.
    let want = (min_pages as usize).max(POOL.stats().1 as usize).max(1);
    let want = want + (want / 4).max(CHUNK >> PAGE_SHIFT);
    let npages = (sys::round_up(want << PAGE_SHIFT, CHUNK) >> PAGE_SHIFT).min(POOL.layout().pages as usize);
    let len = npages << PAGE_SHIFT;
    let fresh = st.cursor + len <= f.arena + f.arena_len;
    let recycled = if fresh { None } else { proven_range(&mut st, len) };
    let base = if fresh {
        st.cursor
    } else if let Some(b) = recycled {
        unreclaim(&mut st, b, len);
        RECYCLED.fetch_add(1, Ordering::Relaxed);
        b
    } else {
        // Degrade mode: the arena is used up. Reuse the range of mirrors that were retired
        // (every alias in them revoked): a dangling pointer into such a range could reach
        // a new object, so this weakens use-after-free protection; it is counted and said.
        let Some(b) = reusable_range(&mut st, len) else {
            if !EXHAUSTED.swap(true, Ordering::Relaxed) {
                report::say(format_args!(
                    "the one-time address space ({} MiB) is used up and no retired range is free: \
                     allocations that need a new epoch fail (see alias_space)",
                    f.arena_len >> 20
                ));
            }
            return None;
        };
        unprove(b, len);
        if DEGRADED.fetch_add(1, Ordering::Relaxed) == 0 {
            report::say(format_args!(
                "the one-time address space ({} MiB) is used up: reusing addresses of retired epochs \
                 (use-after-free protection is weaker from now on; see alias_space)",
                f.arena_len >> 20
            ));
        }
        b
    };
    // The tables this epoch writes: its mirror's entry, its chunks, and the last epoch of
    // each page it may issue.
    let tables = MIRRORS.ensure(((e as usize & (f.max_epochs - 1)) + 1) * core::mem::size_of::<Mirror>())
        && CHUNKS.ensure(((base + len - f.arena) >> CHUNK_SHIFT) * 4)
        && LAST.ensure(npages * 8);
    if !tables {
        if !SAID_NO_MIRROR.swap(true, Ordering::Relaxed) {
            report::say(format_args!(
                "cannot make the alias engine's tables writable (errno {}: out of commit charge under \
                 vm.overcommit_memory=2, RLIMIT_DATA, or vm.max_map_count?); allocations that need a new epoch \
                 fail with ENOMEM",
                sys::errno()
            ));
        }
        return None;
    }
    if !sys::duplicate_view(POOL.layout().base as *mut u8, base as *mut u8, len) {
        if !SAID_NO_MIRROR.swap(true, Ordering::Relaxed) {
            let errno = sys::errno();
            report::say(format_args!(
                "cannot map a new mirror of {} MiB (errno {}: out of mappings (vm.max_map_count) or address space \
                 (RLIMIT_AS)?; {} mappings, address space in use {} MiB, limit {}, {}); allocations that need one \
                 fail with ENOMEM",
                len >> 20,
                errno,
                crate::stats::vma_count().unwrap_or(0),
                crate::stats::proc_status_kb(b"VmSize").unwrap_or(0) >> 10,
                Mib(sys::as_limit()),
                if fresh { "a fresh range" } else { "a recycled range" },
            ));
        }
        return None;
    }
    if f.revoke == Revoke::Uffd && !register(base, len) {
        sys::rereserve(base as *mut u8, len);
        return None;
    }
    let bits = bitmap_alloc(&mut st, npages.div_ceil(64) * 8) as *mut AtomicU64;
    let m = mirror(e);
    m.base.store(base, Ordering::Relaxed);
    m.npages.store(npages as u32, Ordering::Relaxed);
    m.live.store(0, Ordering::Relaxed);
    m.pins.store(0, Ordering::Relaxed);
    m.retired.store(0, Ordering::Relaxed);
    m.swept.store(0, Ordering::Relaxed);
    m.units_low.store(u32::MAX, Ordering::Relaxed);
    m.units_low_since.store(e, Ordering::Relaxed);
    m.issued.store(bits, Ordering::Relaxed);
    st.serial += 1;
    m.serial.store(st.serial, Ordering::Relaxed);
    let windows = bitmap_alloc(&mut st, npages.div_ceil(WINDOW_PAGES as usize) * 4) as *mut AtomicU32;
    m.windows.store(windows, Ordering::Relaxed);
    m.epoch.store(e, Ordering::Release);
    for c in 0..len >> CHUNK_SHIFT {
        // SAFETY: the chunk index is inside the arena.
        unsafe { (*f.chunks.add(((base - f.arena) >> CHUNK_SHIFT) + c)).store(e + 1, Ordering::Release) };
    }
    if fresh {
        unprove(base, len);
        st.cursor += len;
        ARENA_USED.store(st.cursor - f.arena, Ordering::Relaxed);
    }
    ISSUED_NOW.store(0, Ordering::Relaxed);
    st.live_mirrors += 1;
    PEAK_MIRRORS.fetch_max(st.live_mirrors as u64, Ordering::Relaxed);
    MIRRORS_MADE.fetch_add(1, Ordering::Relaxed);
    let prev = current();
    CURRENT.store(e, Ordering::SeqCst);
    drop(st);
    if prev != 0 {
        maybe_retire(prev);
        sweep_sealed(prev);
    }
    Some(e)
}

/// The number of the next epoch: the next one whose entry in the mirror table (a ring) is
/// free. An entry stays taken while its mirror lives, and a long-lived object (one allocated
/// at start-up) keeps its mirror for ever: that epoch's entry is skipped each time the ring
/// comes round to it, instead of stopping every new epoch there (which made allocations fail
/// once the ring had come round).
/// Numbers wrap round from `LAST_EPOCH` to 1: a number still in use belongs to a live mirror,
/// whose entry is taken, so it is never given twice (`Mirror::serial` orders epochs). The
/// first epoch is the `first_epoch` option (1 unless a test starts near the wrap). None when
/// every entry is taken. STATE's lock held.
fn next_epoch() -> Option<u32> {
    let f = fixed();
    let mut e = match current() {
        0 => crate::options().first_epoch,
        c => following(c),
    };
    for _ in 0..f.max_epochs {
        let slot = mirror(e);
        if slot.npages.load(Ordering::Relaxed) == 0 || slot.retired.load(Ordering::Acquire) != 0 {
            if e < current() {
                WRAPPED.store(true, Ordering::Relaxed);
            }
            return Some(e);
        }
        e = following(e);
    }
    None
}

/// The highest epoch number (the chunk table stores epoch + 1, and 0 means none).
pub const LAST_EPOCH: u32 = u32::MAX - 1;

/// The epoch number after `e`.
fn following(e: u32) -> u32 {
    if e >= LAST_EPOCH {
        1
    } else {
        e + 1
    }
}

/// Whether epoch numbers have wrapped round.
static WRAPPED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

fn register(base: usize, len: usize) -> bool {
    let mut r = UffdioRegister {
        start: base as u64,
        len: len as u64,
        mode: UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_MINOR,
        ioctls: 0,
    };
    // SAFETY: UFFDIO_REGISTER over our own mirror.
    unsafe {
        sys::own_syscall(
            libc::SYS_ioctl,
            [fixed().uffd as usize, UFFDIO_REGISTER as usize, &mut r as *mut _ as usize, 0, 0, 0],
        ) == 0
    }
}

/// Maps `n` issued alias pages at `addr`. Pool pages must hold data (see `pool::populate`).
/// Err: the error number that stopped it (`errno` is left as it was either way).
pub fn install(addr: usize, n: usize) -> Result<(), i32> {
    install_counted(addr, n).map(|_| ())
}

/// `install`, giving the number of pages it mapped (pages already mapped are left as they are).
fn install_counted(addr: usize, n: usize) -> Result<usize, i32> {
    let f = fixed();
    if f.revoke != Revoke::Uffd || n == 0 {
        return Ok(0);
    }
    INSTALL_RUNS.fetch_add(1, Ordering::Relaxed);
    INSTALL_PAGES.fetch_add(n as u64, Ordering::Relaxed);
    // A hole met on the way is filled (leaving errno alone) and the install retried.
    let fill = |page, left| POOL.fill_pages(page, left).is_ok();
    let e = match continue_pages(f.uffd, addr, n, fill) {
        Ok(mapped) => return Ok(mapped),
        Err(e) => e,
    };
    // The program may have closed or replaced the descriptor.
    let saved = sys::errno();
    let replaced = sys::file_id(f.uffd) != Some(f.uffd_id);
    let r = if !replaced {
        Err(e)
    } else if recover() {
        install_counted(addr, n)
    } else {
        Err(libc::EBADF)
    };
    sys::set_errno(saved);
    r
}

/// `UFFDIO_CONTINUE` over the `n` alias pages at `addr` with raw system calls (no `errno`):
/// pages already mapped (a racing fault handler) are skipped; a run of holes in the pool (fresh
/// or punched pages, or pages allocated but never written, which a forked child's copy leaves
/// out) is given memory once by `fill(first pool page, pages left)` and the call retried.
/// Ok: the number of pages it mapped; Err: the error number that stopped it.
fn continue_pages(uffd: i32, addr: usize, n: usize, mut fill: impl FnMut(u32, u32) -> bool) -> Result<usize, i32> {
    let len = n << PAGE_SHIFT;
    let mut done = 0usize;
    let mut mapped = 0usize;
    let mut filled = false;
    while done < len {
        let mut c = UffdioContinue { start: (addr + done) as u64, len: (len - done) as u64, mode: 0, mapped: 0 };
        // SAFETY: UFFDIO_CONTINUE over issued pages of our own registered mirror.
        let r = unsafe {
            sys::raw_syscall(
                libc::SYS_ioctl,
                [uffd as usize, UFFDIO_CONTINUE as usize, &mut c as *mut _ as usize, 0, 0, 0],
            )
        };
        if r == 0 {
            return Ok((mapped + len - done) >> PAGE_SHIFT);
        }
        if c.mapped > 0 {
            done += c.mapped as usize;
            mapped += c.mapped as usize;
            continue;
        }
        match -r as i32 {
            libc::EAGAIN | libc::EINTR => {}
            libc::EEXIST => done += PAGE,
            libc::EFAULT if !filled => {
                filled = true;
                let Some((_, page)) = decode(addr + done) else { return Err(libc::EFAULT) };
                if !fill(page, ((len - done) >> PAGE_SHIFT) as u32) {
                    return Err(libc::ENOMEM);
                }
            }
            e => return Err(e),
        }
    }
    Ok(mapped >> PAGE_SHIFT)
}

/// The program closed or replaced our userfaultfd (daemons close every descriptor): its
/// registrations are gone, so revoked aliases would no longer trap. Open a new one, map every
/// live mirror afresh (dropping stale entries and any old registration), register it, and
/// install the live aliases again. Returns false if userfaultfd cannot be had any more.
#[cold]
fn recover() -> bool {
    let _st = STATE.lock();
    // SAFETY: FIXED's uffd fields change only here, under the state lock, or in a forked
    // child; readers tolerate either value (a stale one fails and comes here).
    let f = unsafe { FIXED.get_mut() };
    if sys::file_id(f.uffd) == Some(f.uffd_id) {
        return true; // another thread recovered first
    }
    let fd = open_uffd();
    if fd < 0 {
        return false;
    }
    f.uffd = fd;
    f.uffd_id = sys::file_id(fd).unwrap_or((0, 0));
    let canon = POOL.layout().base;
    let mut ok = true;
    for_each_live_mirror(|_, m| {
        let base = m.base.load(Ordering::Relaxed);
        let len = (m.npages.load(Ordering::Relaxed) as usize) << PAGE_SHIFT;
        ok &= sys::duplicate_view(canon as *mut u8, base as *mut u8, len) && register(base, len);
    });
    RECOVERIES.fetch_add(1, Ordering::Relaxed);
    if crate::options().verbose {
        report::say(format_args!("the program closed the allocator's userfaultfd; reopened it and re-registered"));
    }
    ok && {
        reinstall_live();
        true
    }
}

pub static RECOVERIES: AtomicU64 = AtomicU64::new(0);

/// Reopens the userfaultfd now if the program closed or replaced it, rather than at the next
/// install: before a seccomp filter that would refuse opening one is in force (`seccomp`).
pub fn ensure_uffd() {
    let f = fixed();
    if f.revoke == Revoke::Uffd && sys::file_id(f.uffd) != Some(f.uffd_id) {
        let _ = recover();
    }
}

/// Set once the failure to make a mirror was said.
static SAID_NO_MIRROR: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Installs every live alias of the small and page objects again (a forked child, or after
/// the mirrors had to be mapped afresh).
pub fn reinstall_live() {
    if revoke_kind() != Revoke::Uffd {
        return;
    }
    // Neighbouring live aliases are installed by one call: a forked child has thousands of
    // them. Sorted by address first, where room for the list can be had: a page with several
    // lanes gives an alias in each lane's epoch, so in the pool's order they alternate.
    let mut count = 0usize;
    for_each_live_alias(|_, _, _| count += 1);
    if count == 0 {
        return;
    }
    let bytes = sys::round_up(count * core::mem::size_of::<(usize, usize, u32)>(), PAGE);
    let list = sys::map_meta(bytes) as *mut (usize, usize, u32);
    let mut run = Run::default();
    if list.is_null() {
        for_each_live_alias(|e, addr, n| run.add(e, addr, n));
        run.finish();
        return;
    }
    // SAFETY: a fresh private mapping of room for `count` entries, ours until unmapped below.
    let entries = unsafe { core::slice::from_raw_parts_mut(list, count) };
    let mut k = 0;
    // Other threads (after `recover`) may have made more units live since they were counted:
    // those install their own aliases.
    for_each_live_alias(|e, addr, n| {
        if k < count {
            entries[k] = (addr, n, e);
            k += 1;
        }
    });
    sort_in_place(&mut entries[..k], |&e| e);
    for &(addr, n, e) in &entries[..k] {
        run.add(e, addr, n);
    }
    run.finish();
    sys::unmap(list as *mut u8, bytes);
}

/// Calls `f(epoch, alias, pages)` for the alias of every live unit: each live lane of a slab
/// page, and each live page object (without its guard page).
fn for_each_live_alias(mut f: impl FnMut(u32, usize, usize)) {
    // SAFETY: a racy read of a counter that only grows is enough here.
    let n = unsafe { POOL.desc_count() };
    for idx in 1..n {
        let s = POOL.span(idx);
        match s.kind {
            crate::pool::SLAB if crate::slab::set_up(s) => {
                let c = &crate::slab::CLASSES[s.class as usize];
                let per = crate::slab::lane_slots(s, c);
                for j in 0..c.pages {
                    for r in 0..c.spp.div_ceil(per) {
                        let l = crate::slab::lane(s, c, j, r);
                        let e = l.epoch.load(Ordering::Relaxed);
                        if e != 0 && l.live.load(Ordering::Relaxed) > 0 {
                            f(e, alias(e, s.start + j), 1);
                        }
                    }
                }
            }
            crate::pool::PAGES => {
                let size = s.size.load(Ordering::Relaxed);
                let e = s.epoch.load(Ordering::Relaxed);
                if size & crate::pool::DEAD_BIT == 0 && e != 0 {
                    let guard = s.class & crate::pool::GUARD_AT_END != 0;
                    f(e, s.addr & !(PAGE - 1), s.npages as usize - guard as usize);
                }
            }
            _ => {}
        }
    }
}

/// Alias pages gathered into one install while they follow each other in one epoch's mirror
/// (an install may not cross from one mirror to the next, even where they lie side by side).
/// A run that fails is tried again page by page; `failed` counts the pages that still could
/// not be mapped, `error` is the last error number.
#[derive(Default)]
struct Run {
    epoch: u32,
    start: usize,
    pages: usize,
    failed: usize,
    error: i32,
}

impl Run {
    /// Adds the `n` pages at `addr`: extends the run when they follow it, skips them when the
    /// run holds them already (several lanes of one page), else installs the run and starts
    /// another.
    fn add(&mut self, epoch: u32, addr: usize, n: usize) {
        let end = self.start + (self.pages << PAGE_SHIFT);
        let ours = self.pages > 0 && epoch == self.epoch;
        if ours && addr == end {
            self.pages += n;
        } else if !(ours && addr >= self.start && addr + (n << PAGE_SHIFT) <= end) {
            self.flush();
            (self.epoch, self.start, self.pages) = (epoch, addr, n);
        }
    }

    fn flush(&mut self) {
        if self.pages > 0 && install(self.start, self.pages).is_err() {
            for p in 0..self.pages {
                if let Err(e) = install(self.start + (p << PAGE_SHIFT), 1) {
                    self.failed += 1;
                    self.error = e;
                }
            }
        }
        self.pages = 0;
    }

    /// Ends the runs; says what could not be mapped.
    fn finish(mut self) {
        self.flush();
        if self.failed > 0 {
            report::say(format_args!(
                "{} pages of live objects could not be mapped again (errno {}): until they are, the \
                 kernel cannot read or write them (read(2) into them fails with EFAULT)",
                self.failed, self.error
            ));
        }
    }
}

/// Whether the unit of the alias page at `page` (epoch `e`, pool page `p`), found live and
/// mapped again by this thread, still lives now that the install is made. Another thread's
/// free may have killed the unit, and its revocation dropped the entry, between the look-up
/// and the install, which then mapped a revoked alias again: once its memory is handed out
/// under a fresh alias, this one would reach the new object. So the unit is looked at again:
/// if it died, the entry is dropped again (a raw call: `errno` is left alone) and false
/// returned; if it lives, its revocation comes after this look (a unit dies before it is
/// revoked) and drops what the install mapped.
fn still_live_after_install(e: u32, p: u32, page: usize) -> bool {
    // The install (a system call) is made before the look.
    core::sync::atomic::fence(Ordering::SeqCst);
    if alias_live(e, p) {
        return true;
    }
    // SAFETY: drops the entry of one alias page of the allocator's own mirror, whose unit is
    // dead; nothing of the program's is there.
    unsafe { sys::raw_syscall(libc::SYS_madvise, [page, PAGE, libc::MADV_DONTNEED as usize, 0, 0, 0]) };
    false
}

/// The fault handler's mapping again of the page of `addr`, the alias of a live unit that lost
/// its page-table entry: Ok(true) when it is mapped, Ok(false) when the unit died meanwhile
/// (`still_live_after_install`; the access, made again, faults and is reported), Err with the
/// error number when the install failed.
pub fn reinstall(addr: usize) -> Result<bool, i32> {
    let page = addr & !(PAGE - 1);
    let Some((e, p)) = decode(page) else { return Ok(false) };
    install(page, 1)?;
    Ok(still_live_after_install(e, p, page))
}

/// Maps the page of `addr` again if it is the alias of a live unit that lost its page-table
/// entry (dropped by the program's `madvise`, a swap-in), as the fault handler does, but with
/// raw system calls only: for the sweep's helper task, which shares the sweeping thread's
/// thread pointer and so must not touch `errno` (a hole is filled by `Pool::fill_pages`).
/// False when that cannot be done.
pub fn reinstall_raw(addr: usize) -> bool {
    let Some((e, p)) = decode(addr) else { return false };
    if revoke_kind() != Revoke::Uffd || !alias_live(e, p) {
        return false;
    }
    let page = addr & !(PAGE - 1);
    let fill = |page: u32, _| POOL.fill_pages(page, 1).is_ok();
    let ok = continue_pages(fixed().uffd, page, 1, fill).is_ok() && still_live_after_install(e, p, page);
    if ok {
        FAULTS_HANDLED.fetch_add(1, Ordering::Relaxed);
    }
    ok
}

/// Maps again the pages of live units in the `len` bytes at `addr` that lost their
/// page-table entries, for a system call that failed on them (`io`); returns how many pages
/// of live units the range holds that are mapped now, by this call or before it: another
/// thread's fault may have mapped a page between the failed call and this one, and the call
/// is still worth making again (a threaded Python server's `recv` gave up with EFAULT so).
/// Pages of freed objects, guard pages and addresses outside the arena are left as they are,
/// and so is what lies past `MAP_AGAIN_PAGES` pages of the arena (a program may name a length
/// far beyond its buffer: the kernel copies only what there is). Lock-free and `errno` is
/// left alone, as in the fault handler. While this thread examines a call that failed for
/// good (`io::examine`), a buffer that meets such a page is reported (`fault::syscall_buffer`).
pub fn map_again(addr: usize, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    if crate::fault::examining() {
        if let Some(r) = crate::fault::syscall_buffer(addr, len) {
            crate::fault::buffer_misused(r);
        }
    }
    if revoke_kind() != Revoke::Uffd {
        return 0;
    }
    let f = fixed();
    let from = addr.max(f.arena);
    let to =
        addr.saturating_add(len).min(f.arena + f.arena_len).min(from.saturating_add(MAP_AGAIN_PAGES << PAGE_SHIFT));
    let (mut live, mut mapped) = (0, 0);
    let mut page = from & !(PAGE - 1);
    while page < to {
        if let Some((e, p)) = decode(page) {
            if alias_live(e, p) {
                if let Ok(n) = install_counted(page, 1) {
                    if still_live_after_install(e, p, page) {
                        live += 1;
                        mapped += n;
                    }
                }
            }
        }
        page += PAGE;
    }
    if mapped > 0 {
        SYSCALL_PAGES_MAPPED.fetch_add(mapped as u64, Ordering::Relaxed);
    }
    live
}

/// Most pages of one buffer that `map_again` looks at: 16 MiB, far more than any object in
/// the arena (page objects are at most 128 KiB).
pub const MAP_AGAIN_PAGES: usize = 4096;

/// Pages of live objects mapped again because a system call failed on them (`map_again`).
pub static SYSCALL_PAGES_MAPPED: AtomicU64 = AtomicU64::new(0);

/// Whether the alias page of `addr` (in the arena) belongs to a live unit (`alias_live`).
pub fn live_page(addr: usize) -> bool {
    decode(addr).is_some_and(|(e, p)| alias_live(e, p))
}

/// Whether the alias of pool page `p` in epoch `e` belongs to a live unit (a lane or page
/// object issued in `e` and not dead).
pub fn alias_live(e: u32, p: u32) -> bool {
    let Some((_, s)) = POOL.span_at(POOL.page_addr(p)) else { return false };
    match s.kind {
        // Lock-free, on pages that may be changing hands (see `page_has_live_lane`).
        crate::pool::SLAB if crate::slab::set_up(s) => crate::slab::page_has_live_lane(s, p, e),
        crate::pool::PAGES => {
            s.epoch.load(Ordering::Relaxed) == e
                && s.size.load(Ordering::Relaxed) & crate::pool::DEAD_BIT == 0
                && !is_guard(s, p)
        }
        _ => false,
    }
}

/// Whether pool page `p` is the guard page at the end of the page object `s`.
pub fn is_guard(s: &crate::pool::Span, p: u32) -> bool {
    s.kind == crate::pool::PAGES && s.class & crate::pool::GUARD_AT_END != 0 && p == s.start + s.npages - 1
}

/// In a forked child without userfaultfd: the mirrors were mapped afresh, so the traps on
/// revoked aliases are gone; set them again on every dead page of every live mirror (pages an
/// epoch may still issue stay accessible).
///
/// # Safety
/// Fork child handler only (single-threaded), after `remap_in_child`.
pub unsafe fn retrap_in_child() {
    if revoke_kind() == Revoke::Uffd {
        return;
    }
    let cur = current();
    for_each_live_mirror(|e, m| {
        let n = m.npages.load(Ordering::Relaxed) as usize;
        let base = m.base.load(Ordering::Relaxed);
        let dead = |q: usize| {
            let issued = was_issued(e, q as u32) == Some(true);
            (issued || e != cur) && !alias_live(e, q as u32)
        };
        for_each_run(n, dead, |from, to| {
            let mut r = [Range { addr: base + (from << PAGE_SHIFT), len: (to - from) << PAGE_SHIFT }];
            revoke(&mut r);
        });
    });
}

/// Sorts `v` by `key` in place with little stack: a quicksort that keeps the larger part of
/// each split for later (at most 32 of them: each is at least twice the size of the next) and
/// goes on with the smaller, insertion sort for parts of 16 or fewer, and heapsort when
/// splits keep coming out uneven. Revocations run inside `free`, and `free` may run in a
/// signal handler on a small alternate stack, below the kernel's signal frame: the library's
/// sort (recursion and a scratch buffer) took more than 2 KiB there. About as fast as that
/// sort on the batches revocations sort (1 024 ranges at random addresses: 15.9-16.1 us
/// against 15.6-15.8; heapsort alone took 52-57 us, and 2 % of the loop benchmark's time).
fn sort_in_place<T: Copy, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    const SMALL: usize = 16;
    if v.len() > u32::MAX as usize {
        return heap_sort(v, &key);
    }
    let mut later = [(0u32, 0u32); 32];
    let mut n_later = 0;
    let mut uneven_left = 2 * (usize::BITS - v.len().leading_zeros()) as usize;
    let (mut lo, mut hi) = (0, v.len());
    loop {
        if hi - lo <= SMALL || uneven_left == 0 {
            if hi - lo <= SMALL {
                insertion_sort(&mut v[lo..hi], &key);
            } else {
                heap_sort(&mut v[lo..hi], &key);
            }
            if n_later == 0 {
                return;
            }
            n_later -= 1;
            (lo, hi) = (later[n_later].0 as usize, later[n_later].1 as usize);
            continue;
        }
        // The median of the first, middle and last keys is the pivot, put last.
        let mid = lo + (hi - lo) / 2;
        if key(&v[mid]) < key(&v[lo]) {
            v.swap(lo, mid);
        }
        if key(&v[hi - 1]) < key(&v[lo]) {
            v.swap(lo, hi - 1);
        }
        if key(&v[hi - 1]) < key(&v[mid]) {
            v.swap(mid, hi - 1);
        }
        v.swap(mid, hi - 1);
        let pivot = key(&v[hi - 1]);
        // Every element moves; only the smaller ones advance the boundary (no branch to
        // mispredict on random keys).
        let mut store = lo;
        for i in lo..hi - 1 {
            let x = v[i];
            let less = key(&x) < pivot;
            v[i] = v[store];
            v[store] = x;
            store += less as usize;
        }
        v.swap(store, hi - 1);
        let (left, right) = ((lo, store), (store + 1, hi));
        if (store - lo).min(hi - store - 1) < (hi - lo) / 8 {
            uneven_left -= 1;
        }
        let (smaller, larger) = if store - lo < hi - store - 1 { (left, right) } else { (right, left) };
        if n_later == later.len() {
            heap_sort(&mut v[larger.0..larger.1], &key);
        } else {
            later[n_later] = (larger.0 as u32, larger.1 as u32);
            n_later += 1;
        }
        (lo, hi) = smaller;
    }
}

fn insertion_sort<T: Copy, K: Ord>(v: &mut [T], key: &impl Fn(&T) -> K) {
    for i in 1..v.len() {
        let x = v[i];
        let k = key(&x);
        let mut j = i;
        while j > 0 && key(&v[j - 1]) > k {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

fn heap_sort<T: Copy, K: Ord>(v: &mut [T], key: &impl Fn(&T) -> K) {
    let sift = |v: &mut [T], mut root: usize, end: usize| loop {
        let mut child = 2 * root + 1;
        if child >= end {
            return;
        }
        if child + 1 < end && key(&v[child]) < key(&v[child + 1]) {
            child += 1;
        }
        if key(&v[root]) >= key(&v[child]) {
            return;
        }
        v.swap(root, child);
        root = child;
    };
    let n = v.len();
    for root in (0..n / 2).rev() {
        sift(v, root, n);
    }
    for end in (1..n).rev() {
        v.swap(0, end);
        sift(v, 0, end);
    }
}

/// A range of alias pages to revoke; laid out as an `iovec` (`process_madvise` reads arrays
/// of them).
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub struct Range {
    pub addr: usize,
    pub len: usize,
}

/// Revokes `ranges` (sorted and merged by the caller or not; adjacent ones are merged here).
/// Returns when every range is revoked.
pub fn revoke(ranges: &mut [Range]) {
    if ranges.is_empty() {
        return;
    }
    sort_in_place(ranges, |r| r.addr);
    let f = fixed();
    let bridge = f.revoke == Revoke::Uffd;
    // Gap pages this batch may look at: long gaps pay off, but one that ends on a live page
    // was looked at for nothing.
    let mut budget = ranges.len() * GAP_CHECKS_PER_RANGE;
    let mut n = 0;
    for i in 0..ranges.len() {
        if n > 0
            && (ranges[n - 1].addr + ranges[n - 1].len == ranges[i].addr
                || bridge && gap_dead(&ranges[n - 1], &ranges[i], &mut budget))
        {
            ranges[n - 1].len = ranges[i].addr + ranges[i].len - ranges[n - 1].addr;
        } else {
            ranges[n] = ranges[i];
            n += 1;
        }
    }
    REVOKE_BATCHES.0.fetch_add(1, Ordering::Release);
    REVOKE_RANGES.fetch_add(n as u64, Ordering::Relaxed);
    let pages: usize = ranges[..n].iter().map(|r| r.len >> PAGE_SHIFT).sum();
    REVOKE_PAGES.fetch_add(pages as u64, Ordering::Relaxed);
    if f.revoke == Revoke::Protect {
        for rg in &ranges[..n] {
            REVOKE_CALLS.fetch_add(1, Ordering::Relaxed);
            protect_one(rg);
        }
        return;
    }
    let advice = if f.revoke == Revoke::Uffd { libc::MADV_DONTNEED } else { MADV_GUARD_INSTALL };
    let calls = advise_ranges(&ranges[..n], advice);
    REVOKE_CALLS.fetch_add(calls, Ordering::Relaxed);
}

/// Applies `advice` to `ranges` of our own aliases: one `process_madvise` per 1024 ranges
/// where it works, else one `madvise` each. Returns the number of calls.
fn advise_ranges(ranges: &[Range], advice: i32) -> u64 {
    let f = fixed();
    let n = ranges.len();
    let mut calls = 0;
    if n > 1 && f.pidfd != NO_PIDFD {
        // One call for the whole batch. iovec and Range have the same layout.
        let mut i = 0;
        while i < n {
            let cnt = (n - i).min(1024);
            let total: usize = ranges[i..i + cnt].iter().map(|r| r.len).sum();
            calls += 1;
            // SAFETY: `Range` is two usizes like `iovec`; the ranges are our own aliases.
            let r = unsafe {
                sys::own_syscall(
                    libc::SYS_process_madvise,
                    [f.pidfd as usize, ranges[i..].as_ptr() as usize, cnt, advice as usize, 0, 0],
                )
            };
            if r as usize != total {
                // Partial or refused: finish one by one.
                for rg in &ranges[i..i + cnt] {
                    calls += 1;
                    revoke_one(rg, advice);
                }
            }
            i += cnt;
        }
    } else {
        for rg in ranges {
            calls += 1;
            revoke_one(rg, advice);
        }
    }
    calls
}

/// Most pages a gap between two ranges may have to be zapped with them.
const MAX_GAP: usize = 128;
/// Gap pages a batch may check, per range it starts with.
const GAP_CHECKS_PER_RANGE: usize = 16;

/// Whether the pages between `a` and `b` (sorted) may be zapped together with them: same
/// mirror, a gap of at most `MAX_GAP` pages within the batch's `budget` of page checks, and
/// nothing on any gap page that may be live: pages issued in the epoch whose unit is dead now
/// (a page is issued at most once per epoch, so they stay dead), and, once the epoch can issue
/// no more, pages it never issued. A page the epoch has not
/// issued *yet* is not a gap: another thread may issue and install it between this check and
/// the zap, and a live alias that lost its entry makes a kernel access to it (`read(2)` into
/// a fresh buffer) fail with EFAULT. A revocation flushes the TLB of every CPU running the
/// process once per range, so fewer, longer ranges matter with threads. userfaultfd mode only.
fn gap_dead(a: &Range, b: &Range, budget: &mut usize) -> bool {
    let end = a.addr + a.len;
    if b.addr <= end || b.addr - end > MAX_GAP * PAGE || (b.addr - end) >> PAGE_SHIFT > *budget {
        return false;
    }
    *budget -= (b.addr - end) >> PAGE_SHIFT;
    let (Some((ea, _)), Some((eb, _))) = (decode(a.addr), decode(b.addr)) else { return false };
    if ea != eb {
        return false;
    }
    let closed = sealed(ea);
    (end..b.addr).step_by(PAGE).all(|g| {
        decode(g).is_some_and(|(e, p)| e == ea && (closed || was_issued(e, p) == Some(true)) && !alias_live(e, p))
    })
}

fn protect_one(r: &Range) {
    // SAFETY: mprotect of our own alias range.
    while unsafe { libc::mprotect(r.addr as *mut libc::c_void, r.len, libc::PROT_NONE) } != 0 {
        if sys::errno() != libc::EINTR && sys::errno() != libc::EAGAIN {
            report::say(format_args!(
                "revoking {:#x}+{} with mprotect failed (errno {}: out of mappings?); aborting",
                r.addr,
                r.len,
                sys::errno()
            ));
            sys::die();
        }
    }
}

fn revoke_one(r: &Range, advice: i32) {
    let mut unlocked = false;
    while !sys::advise(r.addr as *mut u8, r.len, advice) {
        match sys::errno() {
            libc::EINTR | libc::EAGAIN => {}
            // The kernel neither zaps nor guards locked pages: the program locked a heap
            // object (`mlock` of a key's buffer) and freed it without `munlock`, which is
            // allowed. Every object on these pages is dead: unlock them, and revoke.
            libc::EINVAL if !unlocked && sys::unlock(r.addr as *mut u8, r.len) => unlocked = true,
            e => {
                report::say(format_args!("revoking {:#x}+{} failed (errno {e}); aborting", r.addr, r.len));
                sys::die();
            }
        }
    }
}

/// The alias unit of epoch `e` covering pool pages `page..page+n` was revoked: windows it
/// leaves empty in a sealed epoch are zapped whole (freeing their page tables), and the mirror
/// is retired when it was its last unit.
pub fn unit_revoked_at(e: u32, page: u32, n: u32) {
    let m = mirror(e);
    let windows = m.windows.load(Ordering::Acquire);
    if !windows.is_null() && n > 0 {
        for w in page / WINDOW_PAGES..=(page + n - 1) / WINDOW_PAGES {
            // SAFETY: the unit lies inside the mirror, so w < the window count.
            let left = unsafe { (*windows.add(w as usize)).fetch_sub(1, Ordering::AcqRel) } - 1;
            if left == 0 && revoke_kind() == Revoke::Uffd && sealed(e) {
                let base = m.base.load(Ordering::Relaxed) + ((w as usize) << CHUNK_SHIFT);
                let len = CHUNK.min(((m.npages.load(Ordering::Relaxed) - w * WINDOW_PAGES) as usize) << PAGE_SHIFT);
                if sys::advise(base as *mut u8, len, libc::MADV_DONTNEED) {
                    WINDOWS_FREED.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
    unit_revoked(e);
}

pub static WINDOWS_FREED: AtomicU64 = AtomicU64::new(0);

/// One alias unit (or pin) of epoch `e` is gone: retire the mirror when it was the last.
pub fn unit_revoked(e: u32) {
    if mirror(e).live.fetch_sub(1, Ordering::AcqRel) == 1 && e != current() {
        maybe_retire(e);
    }
}

fn maybe_retire(e: u32) {
    let m = mirror(e);
    if e == current() || m.live.compare_exchange(0, RETIRED_BIT, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return;
    }
    m.retired.store(1, Ordering::Release);
    let base = m.base.load(Ordering::Relaxed);
    let npages = m.npages.load(Ordering::Relaxed) as usize;
    sys::rereserve(base as *mut u8, npages << PAGE_SHIFT);
    let bits = m.issued.swap(ptr::null_mut(), Ordering::AcqRel);
    let windows = m.windows.swap(ptr::null_mut(), Ordering::AcqRel);
    MIRRORS_RETIRED.fetch_add(1, Ordering::Relaxed);
    let mut st = STATE.lock();
    st.live_mirrors -= 1;
    bitmap_free(&mut st, bits as *mut u8, npages.div_ceil(64) * 8);
    bitmap_free(&mut st, windows as *mut u8, npages.div_ceil(WINDOW_PAGES as usize) * 4);
    reclaim_tables(&mut st, base, npages << PAGE_SHIFT);
}

/// Page tables of retired mirrors: retiring a mirror lays a reservation over its range,
/// which frees the page tables that lie wholly inside it, but not the page-middle directory
/// that maps each GiB of the arena: the neighbouring mirrors share it, and once they retire
/// too nothing frees it. 4 KiB per GiB of one-time address space ever used would stay (up to
/// 128 MiB for the default 32 TiB; a busy redis uses ~0.9 GiB/s). So when a mirror retires,
/// every whole GiB it touched whose mirrors have all retired (the chunk table says which
/// epochs map each 2 MiB) and that no new mirror will use (it lies below the arena cursor)
/// gets one fresh reservation laid over it, which frees its tables. Not in degrade mode,
/// where epochs reuse retired ranges.
fn reclaim_tables(st: &mut State, base: usize, len: usize) {
    const GIB: usize = 1 << 30;
    let f = fixed();
    if st.reclaimed.is_null() || DEGRADED.load(Ordering::Relaxed) != 0 {
        return;
    }
    // Whole GiBs only: the first starts at or after the arena's start (which is only 2 MiB
    // aligned), and the bits count from there.
    let lo = sys::round_up(f.arena, GIB);
    let mut b = (base.saturating_sub(GIB) & !(GIB - 1)).max(lo);
    while b < base + len + GIB && b + GIB <= st.cursor {
        let k = (b - lo) / GIB;
        // SAFETY: one bit per GiB of the arena; `b` is a whole GiB inside it.
        let word = unsafe { &mut *st.reclaimed.add(k / 64) };
        if *word & (1 << (k % 64)) == 0 {
            let first = (b - f.arena) >> CHUNK_SHIFT;
            if (first..first + (GIB >> CHUNK_SHIFT)).all(chunk_retired) && sys::rereserve(b as *mut u8, GIB) {
                *word |= 1 << (k % 64);
                TABLES_RECLAIMED.fetch_add(1, Ordering::Relaxed);
            }
        }
        b += GIB;
    }
}

/// Whether 2 MiB chunk `c` of the arena (an index below its chunk count) belongs to no mirror
/// or only to a retired one.
fn chunk_retired(c: usize) -> bool {
    // SAFETY: one entry per chunk of the arena; the caller's index is inside it.
    let e = unsafe { (*fixed().chunks.add(c)).load(Ordering::Acquire) };
    e == 0 || {
        // An entry reused by a newer epoch means the old mirror was retired.
        let m = mirror(e - 1);
        m.epoch.load(Ordering::Acquire) != e - 1 || m.retired.load(Ordering::Acquire) != 0
    }
}

/// GiB of the arena whose page tables `reclaim_tables` freed.
pub static TABLES_RECLAIMED: AtomicU64 = AtomicU64::new(0);

/// An `issued` bitmap of `bytes` (zeroed), from the recycled ones when possible.
fn bitmap_alloc(st: &mut State, bytes: usize) -> *mut u8 {
    let k = bucket(bytes);
    let p = st.bitmaps[k];
    if !p.is_null() {
        // SAFETY: a recycled bitmap starts with the link to the next one; it is 64 << k bytes.
        unsafe {
            st.bitmaps[k] = *(p as *mut *mut u8);
            ptr::write_bytes(p, 0, 64 << k);
        }
        return p;
    }
    crate::meta::alloc(64 << k)
}

fn bitmap_free(st: &mut State, p: *mut u8, bytes: usize) {
    if p.is_null() {
        return;
    }
    let k = bucket(bytes);
    // SAFETY: `p` is a retired mirror's bitmap of 64 << k bytes, no longer read (reports see
    // the null pointer first; a racing reader sees stale but valid memory).
    unsafe { *(p as *mut *mut u8) = st.bitmaps[k] };
    st.bitmaps[k] = p;
}

fn bucket(bytes: usize) -> usize {
    let mut k = 0;
    while (64usize << k) < bytes && k < 31 {
        k += 1;
    }
    k
}

// ---- Recycling retired ranges a sweep proved unreferenced ----------------------------------
//
// Once the arena's fresh addresses run low, a sweep (prevent mode, `sweep` module) also notes
// which 2 MiB chunks of a window of the arena some scanned word points into. A chunk that was
// retired at the time (every alias in it revoked, or never used) and that no word points into
// holds no address the program still has: it cannot make one except by copying one it has,
// and the scan proved there is none (with the limits documented for sweeps). New epochs then
// take such *proven* chunks before falling back to degrade mode, which reuses retired chunks
// without a proof. A chunk's proof is dropped when any mirror takes it.

/// Chunks in a proof window (1 TiB of arena).
const PROOF_CHUNKS: usize = 1 << 19;
const PROOF_WORDS: usize = PROOF_CHUNKS / 64;
/// The window of the proof being gathered by a sweep (0: none).
static PROOF_BASE: AtomicUsize = AtomicUsize::new(0);
/// Chunks of that window some scanned word points into.
static TOUCHED: [AtomicU64; PROOF_WORDS] = [const { AtomicU64::new(0) }; PROOF_WORDS];
/// Chunks of the window at `PROVEN_BASE` that a complete sweep proved unreferenced.
static PROVEN: [AtomicU64; PROOF_WORDS] = [const { AtomicU64::new(0) }; PROOF_WORDS];
static PROVEN_BASE: AtomicUsize = AtomicUsize::new(0);
/// Bytes of proven chunks not taken yet (an estimate: it only decides when to prove again).
static PROVEN_LEFT: AtomicUsize = AtomicUsize::new(0);
/// Mirrors of the size current at the proof that its proven chunks hold side by side (a
/// mirror needs contiguous chunks: scattered ones, however many, may hold none), less those
/// taken since.
static PROVEN_MIRRORS: AtomicUsize = AtomicUsize::new(0);
/// Epochs placed in proven chunks, and sweeps that completed a proof.
pub static RECYCLED: AtomicU64 = AtomicU64::new(0);
pub static PROOFS: AtomicU64 = AtomicU64::new(0);

/// Bytes of arena a proof window covers.
fn proof_window() -> usize {
    (PROOF_CHUNKS << CHUNK_SHIFT).min(fixed().arena_len)
}

/// Whether the next sweep should gather a proof: fresh addresses are down to an eighth of the
/// arena and less than half a window is proven and not taken. Cheap: two loads.
pub fn proof_wanted() -> bool {
    let f = fixed();
    f.arena_len != 0
        && f.arena_len - ARENA_USED.load(Ordering::Relaxed) < f.arena_len / 8
        && PROVEN_LEFT.load(Ordering::Relaxed) < proof_window() / 2
}

/// Mirrors of the current size below which the fresh and proven addresses left make a proof
/// urgent (`proof_urgent`).
const URGENT_MIRRORS: usize = 8;

/// Whether a proof is wanted and the addresses left for new epochs (fresh, and proven not
/// taken) would hold fewer than `URGENT_MIRRORS` more mirrors: then the next refill sweeps at
/// once, whatever the pace of sweeps (`sweep_share`) says, since the epoch after those falls
/// back to degrade mode. Cheap: a few loads.
pub fn proof_urgent() -> bool {
    if !proof_wanted() {
        return false;
    }
    let f = fixed();
    let fresh = f.arena_len - ARENA_USED.load(Ordering::Relaxed);
    fresh / current_mirror_len() + PROVEN_MIRRORS.load(Ordering::Relaxed) < URGENT_MIRRORS
}

/// The current epoch's mirror length (at least a chunk).
fn current_mirror_len() -> usize {
    ((mirror(current()).npages.load(Ordering::Relaxed) as usize) << PAGE_SHIFT).max(CHUNK)
}

/// A sweep begins (every other thread held still, or none): if a proof is wanted, starts one
/// over the window from where degrade mode's search goes on (`State::wrap`).
pub fn proof_begin() {
    if !proof_wanted() {
        return;
    }
    let f = fixed();
    let wrap = STATE.lock().wrap;
    // A whole window: one that would run past the arena's end starts earlier instead (the
    // search goes round it).
    let base = (f.arena + ((wrap.saturating_sub(f.arena) >> CHUNK_SHIFT) << CHUNK_SHIFT))
        .min(f.arena + f.arena_len - proof_window());
    TOUCHED.iter().for_each(|w| w.store(0, Ordering::Relaxed));
    PROOF_BASE.store(base, Ordering::Release);
}

/// The proof's window, for the scan: (base, bytes), base 0 when none is being gathered.
#[inline]
pub fn proof_scope() -> (usize, usize) {
    let base = PROOF_BASE.load(Ordering::Acquire);
    if base == 0 {
        return (0, 0);
    }
    let f = fixed();
    (base, proof_window().min(f.arena + f.arena_len - base))
}

/// Notes that a scanned word points `off` bytes into the proof's window.
#[inline]
pub fn proof_touch(off: usize) {
    let c = off >> CHUNK_SHIFT;
    TOUCHED[c / 64].fetch_or(1 << (c % 64), Ordering::Relaxed);
}

/// The sweep is over; `complete`: it read everything, so its proof holds.
pub fn proof_end(complete: bool) {
    let base = PROOF_BASE.swap(0, Ordering::AcqRel);
    if base == 0 || !complete {
        return;
    }
    let f = fixed();
    let st = STATE.lock();
    let first = (base - f.arena) >> CHUNK_SHIFT;
    let n = (proof_window().min(f.arena + f.arena_len - base)) >> CHUNK_SHIFT;
    let need = current_mirror_len() >> CHUNK_SHIFT;
    let (mut proven, mut run, mut mirrors) = (0, 0, 0);
    for k in 0..PROOF_WORDS {
        let mut bits = 0u64;
        for b in 0..64 {
            let i = k * 64 + b;
            if i < n && chunk_retired(first + i) && TOUCHED[k].load(Ordering::Relaxed) & (1 << b) == 0 {
                bits |= 1 << b;
                proven += 1;
                run += 1;
            } else {
                mirrors += run / need;
                run = 0;
            }
        }
        PROVEN[k].store(bits, Ordering::Relaxed);
    }
    mirrors += run / need;
    PROVEN_BASE.store(base, Ordering::Relaxed);
    PROVEN_LEFT.store(proven << CHUNK_SHIFT, Ordering::Relaxed);
    PROVEN_MIRRORS.store(mirrors, Ordering::Relaxed);
    PROOFS.fetch_add(1, Ordering::Relaxed);
    drop(st);
}

/// Drops the proofs of the chunks of `[base, base + len)`: a mirror takes them.
fn unprove(base: usize, len: usize) {
    let pb = PROVEN_BASE.load(Ordering::Relaxed);
    if pb == 0 {
        return;
    }
    let window = proof_window();
    let mut a = base.max(pb);
    while a < (base + len).min(pb + window) {
        let c = (a - pb) >> CHUNK_SHIFT;
        PROVEN[c / 64].fetch_and(!(1 << (c % 64)), Ordering::Relaxed);
        a += CHUNK;
    }
}

/// A range of `len` bytes of proven chunks, still retired, searched from where the last search
/// stopped round the proven window; takes it (its proofs dropped, the search goes on after
/// it). None: the window has no such run left (a new proof is then wanted).
fn proven_range(st: &mut State, len: usize) -> Option<usize> {
    let f = fixed();
    let pb = PROVEN_BASE.load(Ordering::Relaxed);
    let need = len >> CHUNK_SHIFT;
    if pb == 0 || need == 0 {
        return None;
    }
    let n = proof_window().min(f.arena + f.arena_len - pb) >> CHUNK_SHIFT;
    let from = if st.wrap >= pb { (st.wrap - pb).div_ceil(CHUNK) } else { 0 };
    let first = (pb - f.arena) >> CHUNK_SHIFT;
    let mut run = 0;
    // From where the last search stopped to the window's end, then from its start.
    for i in (from.min(n)..n).chain(0..from.min(n)) {
        if i == 0 {
            run = 0;
        }
        let proven = PROVEN[i / 64].load(Ordering::Relaxed) & (1 << (i % 64)) != 0;
        if proven && chunk_retired(first + i) {
            run += 1;
            if run == need {
                let base = pb + ((i + 1 - need) << CHUNK_SHIFT);
                st.wrap = base + len;
                unprove(base, len);
                let _ = PROVEN_LEFT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| Some(v.saturating_sub(len)));
                let _ =
                    PROVEN_MIRRORS.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| Some(v.saturating_sub(1)));
                return Some(base);
            }
        } else {
            run = 0;
        }
    }
    PROVEN_LEFT.store(0, Ordering::Relaxed);
    PROVEN_MIRRORS.store(0, Ordering::Relaxed);
    if pb + (n << CHUNK_SHIFT) >= f.arena + f.arena_len {
        // The window reached the arena's end: the next proof starts over at its start.
        st.wrap = f.arena;
    }
    None
}

/// A recycled range's GiBs may have had their tables freed (`reclaim_tables`): forget that,
/// so that they are freed again once this mirror retires too.
fn unreclaim(st: &mut State, base: usize, len: usize) {
    const GIB: usize = 1 << 30;
    if st.reclaimed.is_null() {
        return;
    }
    let f = fixed();
    let lo = sys::round_up(f.arena, GIB);
    let mut b = (base & !(GIB - 1)).max(lo);
    // Whole GiBs of the arena only, as `reclaim_tables` counts them.
    while b < base + len && b + GIB <= f.arena + f.arena_len {
        let k = (b - lo) / GIB;
        // SAFETY: one bit per whole GiB of the arena; `b` starts one.
        unsafe { *st.reclaimed.add(k / 64) &= !(1 << (k % 64)) };
        b += GIB;
    }
}

/// Degrade mode: a range of `len` bytes of the arena whose chunks belong to no mirror or only
/// to retired ones, searched round-robin from where the last search stopped.
fn reusable_range(st: &mut State, len: usize) -> Option<usize> {
    let f = fixed();
    let chunks = f.arena_len >> CHUNK_SHIFT;
    let need = len >> CHUNK_SHIFT;
    if need == 0 || need > chunks {
        return None;
    }
    let start = ((st.wrap.saturating_sub(f.arena)) >> CHUNK_SHIFT) % chunks;
    let mut run = 0;
    let mut c = start;
    for _ in 0..chunks + need {
        if c + 1 > chunks {
            c = 0;
            run = 0;
        }
        if chunk_retired(c) {
            run += 1;
            if run == need {
                let first = c + 1 - need;
                let base = f.arena + (first << CHUNK_SHIFT);
                st.wrap = base + len;
                return Some(base);
            }
        } else {
            run = 0;
        }
        c += 1;
    }
    None
}

pub fn live_mirrors() -> u32 {
    STATE.lock().live_mirrors
}

pub fn raw_lock() -> &'static crate::lock::RawMutex {
    STATE.raw()
}

/// Every mirror not yet retired, with its epoch (fork handling). Callers hold every lock.
/// Each entry of the mirror table is looked at once; a mirror older than the ring's length
/// (`next_epoch` skipped its entry) is met at its entry like the others.
pub fn for_each_live_mirror(mut f: impl FnMut(u32, &Mirror)) {
    let mut visit = |m: &Mirror| {
        if m.retired.load(Ordering::Relaxed) == 0 && m.npages.load(Ordering::Relaxed) != 0 {
            f(m.epoch.load(Ordering::Relaxed), m);
        }
    };
    let ring = fixed().max_epochs as u32;
    if WRAPPED.load(Ordering::Relaxed) {
        (0..ring).for_each(|i| visit(mirror(i)));
    } else {
        // Only the entries of the last `ring` numbers can be in use (few in a young process).
        let cur = current();
        (cur.saturating_sub(ring - 1).max(1)..=cur).for_each(|e| visit(mirror(e)));
    }
}

/// In a forked child: map every live mirror onto the child's pool copy and register it.
///
/// # Safety
/// Fork child handler only, after the canonical view was replaced.
pub unsafe fn remap_in_child() -> bool {
    let mut ok = true;
    let canon = POOL.layout().base;
    for_each_live_mirror(|_, m| {
        let base = m.base.load(Ordering::Relaxed);
        let len = (m.npages.load(Ordering::Relaxed) as usize) << PAGE_SHIFT;
        let mapped = sys::duplicate_view(canon as *mut u8, base as *mut u8, len);
        if !mapped || (revoke_kind() == Revoke::Uffd && !register(base, len)) {
            ok = false;
        }
    });
    ok
}

pub fn print_stats(b: &mut impl core::fmt::Write, pid: u32) {
    let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let _ = writeln!(
        b,
        "=={pid}==   aliases issued     {}   install runs {} ({} pages)",
        g(&ALIASES),
        g(&INSTALL_RUNS),
        g(&INSTALL_PAGES)
    );
    let _ = writeln!(
        b,
        "=={pid}==   revocations        {} pages in {} batches, {} ranges, {} calls",
        g(&REVOKE_PAGES),
        g(&REVOKE_BATCHES.0),
        g(&REVOKE_RANGES),
        g(&REVOKE_CALLS)
    );
    let _ = writeln!(
        b,
        "=={pid}==   revocation stage   {} of the above for several threads' batches together, {} units",
        g(&crate::stats::STAGE_REVOCATIONS),
        g(&crate::stats::STAGE_UNITS)
    );
    let _ = writeln!(
        b,
        "=={pid}==   idle batches       {} (of threads that had stopped freeing, revoked by another thread)",
        g(&crate::stats::BATCHES_REAPED)
    );
    let _ = writeln!(
        b,
        "=={pid}==   mirrors            {} live, {} peak, {} made, {} retired (epoch {})",
        live_mirrors(),
        g(&PEAK_MIRRORS),
        g(&MIRRORS_MADE),
        g(&MIRRORS_RETIRED),
        current()
    );
    let _ = writeln!(
        b,
        "=={pid}==   faults handled     {} (live aliases mapped again); {} pages mapped again for system calls that failed on them; {} futex waits made again from user mode",
        g(&FAULTS_HANDLED),
        g(&SYSCALL_PAGES_MAPPED),
        g(&crate::futex::SENT)
    );
    let _ = writeln!(
        b,
        "=={pid}==   windows freed      {} (dead 2 MiB windows zapped with their page tables); {} GiB of retired mirrors' tables freed",
        g(&WINDOWS_FREED),
        g(&TABLES_RECLAIMED)
    );
    let _ = writeln!(
        b,
        "=={pid}==   degrade mode       {} epochs reused retired addresses (one-time address space: {} of {} MiB used)",
        g(&DEGRADED),
        ARENA_USED.load(Ordering::Relaxed) >> 20,
        fixed().arena_len >> 20
    );
    let _ = writeln!(
        b,
        "=={pid}==   recycled           {} epochs placed in retired addresses a sweep proved unreferenced, {} proofs",
        g(&RECYCLED),
        g(&PROOFS)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_maximal_and_in_order() {
        let dead = [false, true, true, false, true, false, false, true];
        let mut runs = std::vec::Vec::new();
        for_each_run(dead.len(), |i| dead[i], |a, b| runs.push((a, b)));
        assert_eq!(runs, [(1, 3), (4, 5), (7, 8)]);
        runs.clear();
        for_each_run(0, |_| true, |a, b| runs.push((a, b)));
        assert!(runs.is_empty());
    }

    #[test]
    fn the_in_place_sort_orders_every_length_and_keeps_every_element() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for n in (0..40).chain([255, 1024, 5000]) {
            for distinct in [1u64, 3, 1 << 40] {
                let mut v: std::vec::Vec<(u64, usize)> = (0..n)
                    .map(|i| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        (x % distinct, i)
                    })
                    .collect();
                let mut want = v.clone();
                want.sort();
                // Random, already sorted, reversed, and sawtooth orders.
                let mut sorted = want.clone();
                let mut reversed = want.clone();
                reversed.reverse();
                let mut saw: std::vec::Vec<_> = want.iter().enumerate().map(|(i, e)| ((i % 7) as u64, e.1)).collect();
                let mut saw_want = saw.clone();
                saw_want.sort();
                for (case, got, all) in [
                    ("random", &mut v, &want),
                    ("sorted", &mut sorted, &want),
                    ("reversed", &mut reversed, &want),
                    ("sawtooth", &mut saw, &saw_want),
                ] {
                    sort_in_place(got, |e| e.0);
                    assert!(got.windows(2).all(|w| w[0].0 <= w[1].0), "{n} {case}: {got:?}");
                    got.sort();
                    assert_eq!(got, all, "{n} {case}");
                }
            }
        }
    }

    #[test]
    fn the_in_place_sort_orders_keys_that_split_unevenly() {
        // Keys that make every median-of-three pivot the second smallest: the heapsort
        // fallback bounds the time.
        let n = 1 << 16;
        let mut v: std::vec::Vec<u64> = (0..n).map(|i| if i % 2 == 0 { i } else { n + i }).collect();
        sort_in_place(&mut v, |&k| k);
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
    }
}
