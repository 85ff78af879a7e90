//! Counters. The hot paths count in their thread cache (plain relaxed stores by the owning
//! thread); the slow paths count here with relaxed atomics. `stats=1` prints them at exit.

use core::fmt::Write;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::report::Buf;
use crate::{cache, pool, slab, sys};

pub static REFILLS: AtomicU64 = AtomicU64::new(0);
pub static FLUSHES: AtomicU64 = AtomicU64::new(0);
pub static SLABS_CREATED: AtomicU64 = AtomicU64::new(0);
pub static SLABS_RELEASED: AtomicU64 = AtomicU64::new(0);
pub static PAGE_OBJECTS: AtomicU64 = AtomicU64::new(0);
/// Page objects that end in a guard page (all of a whole number of pages; in detect mode, all).
pub static GUARDED_PAGE_OBJECTS: AtomicU64 = AtomicU64::new(0);
/// Revocations of the shared stage (several threads' batches at once), and their units.
pub static STAGE_REVOCATIONS: AtomicU64 = AtomicU64::new(0);
pub static STAGE_UNITS: AtomicU64 = AtomicU64::new(0);
/// Batches of threads that had stopped freeing, revoked by another thread (`cache::reap_if_due`).
pub static BATCHES_REAPED: AtomicU64 = AtomicU64::new(0);
pub static LARGE_OBJECTS: AtomicU64 = AtomicU64::new(0);
/// Objects over `MAX_PAGE_OBJECT` made page objects because live large views took their share
/// of the process's mappings (`large::views_scarce`).
pub static LARGE_AS_PAGES: AtomicU64 = AtomicU64::new(0);
/// Objects given views of their own because the C library reads them where a fault on them
/// cannot be mended: with every signal blocked, or inside its own system calls
/// (`heap::needs_view`).
pub static VIEW_OBJECTS: AtomicU64 = AtomicU64::new(0);
pub static LARGE_VA_BYTES: AtomicU64 = AtomicU64::new(0);
pub static LARGE_BLOCKS_SWEPT: AtomicU64 = AtomicU64::new(0);
/// Tables of a gigabyte of large-object addresses given back once every block in it was swept.
pub static LARGE_LEAVES_RETIRED: AtomicU64 = AtomicU64::new(0);
/// Times the large-object cursor went back to a region used before (`large_space` used up).
pub static LARGE_VA_REUSED: AtomicU64 = AtomicU64::new(0);
pub static FORKS: AtomicU64 = AtomicU64::new(0);
pub static FORK_COPIED_BYTES: AtomicU64 = AtomicU64::new(0);
pub static THREADS: AtomicU64 = AtomicU64::new(0);
pub static REGROUPS: AtomicU64 = AtomicU64::new(0);
/// Pages of live slabs given back to the system while idle (`slab::punch_idle`).
pub static IDLE_PAGES_PUNCHED: AtomicU64 = AtomicU64::new(0);

#[inline]
pub fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

pub fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// Reads a `Field:   N kB` line of /proc/self/status (in kB), without allocating, through a
/// buffer of 256 bytes (see `sys::read_chunks`).
pub fn proc_status_kb(field: &[u8]) -> Option<u64> {
    let mut buf = [0u8; 256];
    let mut scan = FieldScan::new(field);
    sys::read_chunks(c"/proc/self/status", &mut buf, |chunk| chunk.iter().any(|&c| scan.feed(c)));
    scan.number()
}

/// Finds the number on the `Field:` line of a text fed to it a byte at a time.
struct FieldScan<'a> {
    field: &'a [u8],
    /// Bytes of `field` matched at the start of this line; None once the line cannot match.
    at: Option<usize>,
    /// The number being read, once the line is the field's.
    value: Option<u64>,
    digits: bool,
}

impl<'a> FieldScan<'a> {
    fn new(field: &'a [u8]) -> Self {
        FieldScan { field, at: Some(0), value: None, digits: false }
    }

    /// The number found: the first run of digits after `Field:` on its line.
    fn number(&self) -> Option<u64> {
        self.value.filter(|_| self.digits)
    }

    /// Takes the next byte; true once the number is read whole (or its line ended).
    fn feed(&mut self, c: u8) -> bool {
        if let Some(v) = self.value {
            if c.is_ascii_digit() {
                self.value = Some(v.wrapping_mul(10).wrapping_add((c - b'0') as u64));
                self.digits = true;
                return false;
            }
            return self.digits || c == b'\n';
        }
        if c == b'\n' {
            self.at = Some(0);
            return false;
        }
        self.at = match self.at {
            Some(i) if i < self.field.len() && self.field[i] == c => Some(i + 1),
            Some(i) if i == self.field.len() && c == b':' => {
                self.value = Some(0);
                None
            }
            _ => None,
        };
        false
    }
}

/// The number on the `Field:` line of a /proc/self/status text.
pub fn status_field(text: &[u8], field: &[u8]) -> Option<u64> {
    let mut scan = FieldScan::new(field);
    let _ = text.iter().any(|&c| scan.feed(c));
    scan.number()
}

/// Number of mappings (VMAs) of this process: lines of /proc/self/maps, read without
/// allocating.
pub fn vma_count() -> Option<u64> {
    let mut buf = [0u8; 512];
    let mut lines = 0u64;
    sys::read_chunks(c"/proc/self/maps", &mut buf, |chunk| {
        lines += chunk.iter().filter(|&&c| c == b'\n').count() as u64;
        false
    })
    .then_some(lines)
}

/// When the next periodic print is due (`sys::now_ns` time; 0: not scheduled yet), and when
/// the first was scheduled (the running time the header gives).
static NEXT_PERIODIC_NS: AtomicU64 = AtomicU64::new(0);
static PERIODIC_FROM_NS: AtomicU64 = AtomicU64::new(0);

/// With `stats_interval=N`, prints every counter every N seconds while the process runs.
/// Called by every refill of a thread cache (no allocator lock held; see `sweep::maybe`), so a
/// process that stopped allocating prints nothing more until it allocates again. A refill that
/// runs on an alternate signal stack (maybe small: the print's buffers take 8 KiB and more of
/// stack) leaves the print to the next one, and so does a process under a seccomp filter (the counters read
/// `/proc/self` files, which the filter may refuse or kill the process for). Where they go:
/// `destination`.
#[inline]
pub fn maybe_periodic() {
    let every = crate::options().stats_interval_s as u64 * 1_000_000_000;
    if every == 0 {
        return;
    }
    let next = NEXT_PERIODIC_NS.load(Ordering::Relaxed);
    let now = sys::now_ns();
    if next == 0 {
        if NEXT_PERIODIC_NS.compare_exchange(0, now + every, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            PERIODIC_FROM_NS.store(now, Ordering::Relaxed);
        }
        return;
    }
    if now < next || on_alt_stack() || crate::seccomp::filtered() {
        return;
    }
    // One thread prints; the others go on.
    if NEXT_PERIODIC_NS.compare_exchange(next, now + every, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
        let secs = now.saturating_sub(PERIODIC_FROM_NS.load(Ordering::Relaxed)) / 1_000_000_000;
        print_headed(format_args!("nevermore stats (running, {secs} s since the first allocations)"), Some(secs));
    }
}

/// Whether this thread runs on its alternate signal stack.
fn on_alt_stack() -> bool {
    // SAFETY: an all-zero stack_t is valid; the kernel writes the current one there.
    let mut cur: libc::stack_t = unsafe { core::mem::zeroed() };
    // SAFETY: a query (no new stack) into a local record.
    let r =
        unsafe { sys::raw_syscall(libc::SYS_sigaltstack, [0, &mut cur as *mut libc::stack_t as usize, 0, 0, 0, 0]) };
    r != 0 || cur.ss_flags & libc::SS_ONSTACK != 0
}

/// Prints every counter to the report destination.
pub fn print() {
    print_headed(format_args!("nevermore stats"), None);
}

/// `print` under the header `what`; `running`: the seconds a periodic print gives.
fn print_headed(what: core::fmt::Arguments, running: Option<u64>) {
    let Some(fd) = crate::leak::own_output_fd() else { return };
    let t = cache::totals();
    let (ps, bump, dirty) = pool::POOL.stats();
    let mut b = Buf::<4096>::new();
    let pid = sys::getpid();
    let _ = writeln!(b, "=={pid}== {what}");
    let _ = writeln!(b, "=={pid}==   allocations        {}", t.mallocs);
    let _ = writeln!(b, "=={pid}==   frees              {}", t.frees);
    let _ = writeln!(b, "=={pid}==   bytes requested    {}", t.alloc_bytes);
    let _ = writeln!(b, "=={pid}==   bytes live         {}", t.live_bytes());
    let _ = writeln!(b, "=={pid}==   threads            {}", get(&THREADS));
    let _ = writeln!(b, "=={pid}==   cache refills      {}   flushes {}", get(&REFILLS), get(&FLUSHES));
    let _ = writeln!(
        b,
        "=={pid}==   slabs              {} live, {} created, {} released",
        slab::slab_count(),
        get(&SLABS_CREATED),
        get(&SLABS_RELEASED)
    );
    let _ = writeln!(b, "=={pid}==   grouping changes   {}", get(&REGROUPS));
    let _ = writeln!(
        b,
        "=={pid}==   page objects       {} ({} ending in a guard page)",
        get(&PAGE_OBJECTS),
        get(&GUARDED_PAGE_OBJECTS)
    );
    let _ = writeln!(
        b,
        "=={pid}==   large objects      {} (address space used {} KiB, {} blocks of 4 MiB swept, {} tables of 1 GiB retired, {} regions reused); {} page objects instead, for want of mappings; {} for the dynamic linker, locales, stdio buffers and directory streams",
        get(&LARGE_OBJECTS),
        get(&LARGE_VA_BYTES) / 1024,
        get(&LARGE_BLOCKS_SWEPT),
        get(&LARGE_LEAVES_RETIRED),
        get(&LARGE_VA_REUSED),
        get(&LARGE_AS_PAGES),
        get(&VIEW_OBJECTS)
    );
    let _ = writeln!(
        b,
        "=={pid}==   pool pages         {} in use, {} peak, {} ever used, {} dirty free, {} punched, {} punched in idle slabs",
        ps.pages_in_use,
        ps.peak_pages_in_use,
        bump,
        dirty,
        ps.punched_pages,
        get(&IDLE_PAGES_PUNCHED)
    );
    let sweeping = crate::options().sweep && !crate::detect();
    let now = crate::alias::current();
    let n = slab::page_census(bump, |e| sweeping && crate::sweep::too_old_to_refill(now, e));
    let _ = write!(
        b,
        "=={pid}==   slab pages         {} = {} holding objects, with {} live objects in {} slots",
        n.held + n.revoking + n.ready,
        n.held,
        n.objects,
        n.slots
    );
    if sweeping {
        let _ = write!(b, ", {} of these pages too old to be refilled", n.old);
    }
    let _ = writeln!(
        b,
        "; + {} awaiting revocation + {} ready for the next epoch, {} of them given back to the system",
        n.revoking, n.ready, n.punched
    );
    // The classes that hold the most pages, and how full their pages are: where the memory of
    // dead slots beside live objects goes.
    let _ = write!(b, "=={pid}==   slab classes       the most pages holding objects:");
    let mut shown = [false; slab::NCLASS];
    for _ in 0..4 {
        let top = (0..slab::NCLASS).filter(|&ci| !shown[ci]).max_by_key(|&ci| n.class_held[ci]);
        let Some(ci) = top.filter(|&ci| n.class_held[ci] > 0) else { break };
        shown[ci] = true;
        let size = slab::CLASSES[ci].size;
        let slots = n.class_held[ci] as u64 * slab::CLASSES[ci].spp as u64;
        let _ = write!(b, " {size} B {} pages, {} live of {slots} slots;", n.class_held[ci], n.class_objects[ci]);
    }
    let _ = writeln!(b);
    let _ =
        writeln!(b, "=={pid}==   forks              {} ({} KiB copied)", get(&FORKS), get(&FORK_COPIED_BYTES) / 1024);
    {
        use crate::reentry::{ALLOCS, DEFERRED, FREES, LEAKED};
        let _ = writeln!(
            b,
            "=={pid}==   re-entrant calls   {} allocations, {} freed, {} frees deferred, {} dropped",
            get(&ALLOCS),
            get(&FREES),
            get(&DEFERRED),
            get(&LEAKED)
        );
    }
    {
        use crate::sweep::*;
        let _ = writeln!(
            b,
            "=={pid}==   sweeps             {} run, {} not run (other threads), {} not run (heap too big or seccomp), {} gave up; reused {} dead slots, {} KiB; scanned {} KiB in {} ms, longest {} ms; {} checks found too little to sweep, {} ms; other threads held still {} times, {} threads in all; {} times not held (a thread stayed inside the allocator); {} KiB of the scans read by a helper task; {} checks put off (too little freed since the last)",
            get(&SWEEPS),
            get(&NOT_SINGLE),
            get(&NOT_SWEPT),
            get(&GAVE_UP),
            get(&RECLAIMED_SLOTS),
            get(&RECLAIMED_BYTES) / 1024,
            get(&SCANNED_BYTES) / 1024,
            get(&SWEEP_NS) / 1_000_000,
            get(&LONGEST_NS) / 1_000_000,
            get(&IDLE_CENSUSES),
            get(&IDLE_CENSUS_NS) / 1_000_000,
            get(&crate::stop::HOLDS),
            get(&crate::stop::HELD_THREADS),
            get(&crate::stop::BUSY_MISSES),
            get(&HELPER_BYTES) / 1024,
            get(&PUT_OFF)
        );
    }
    crate::alias::print_stats(&mut b, pid);
    if crate::detect() {
        let _ = writeln!(
            b,
            "=={pid}==   free history       {} frees recorded, {} searches (by reports)",
            crate::history::recorded(),
            get(&crate::history::SEARCHES)
        );
    }
    if crate::stack::enabled() {
        let (n, bytes, dropped) = crate::stack::DEPOT.usage();
        let _ = writeln!(
            b,
            "=={pid}==   stack depot        {n} stacks, {} KiB, {dropped} not recorded (depot full)",
            bytes / 1024
        );
    }
    // Unknown where /proc cannot be read (a root directory without it, not made by `chroot`).
    const UNKNOWN: &str = "unknown (/proc/self cannot be read)";
    match (vma_count(), proc_status_kb(b"VmPTE")) {
        (Some(n), Some(pte)) => {
            let _ = writeln!(b, "=={pid}==   VMAs               {n} (page tables {pte} KiB)");
        }
        _ => {
            let _ = writeln!(b, "=={pid}==   VMAs               {UNKNOWN}");
        }
    }
    match (proc_status_kb(b"VmRSS"), proc_status_kb(b"VmHWM")) {
        (Some(rss), Some(hwm)) => {
            let _ = writeln!(b, "=={pid}==   RSS                {rss} KiB (peak {hwm} KiB)");
        }
        _ => {
            let _ = writeln!(b, "=={pid}==   RSS                {UNKNOWN}");
        }
    }
    // RSS and Pss see only the pool pages some alias maps now; the pool holds more (free pages
    // kept for reuse, lanes waiting for their next epoch), all of it physical memory.
    let _ = writeln!(
        b,
        "=={pid}==   pool memory        {} KiB in the memfd (physical, mapped or not)",
        sys::file_allocated(pool::POOL.layout().fd).unwrap_or(0) / 1024
    );
    if crate::options().json {
        write_json(fd, b.as_bytes(), pid, running);
    } else {
        sys::write_all(fd, b.as_bytes());
    }
}

/// The statistics as one JSON object on one line (`report_format=json`), so that a report file
/// holds nothing but JSON: every line of the text but its header, as its label and the numbers
/// it holds, in their order (those of its wording too, as the 2 of `dead 2 MiB windows`).
fn write_json(fd: i32, text: &[u8], pid: u32, running: Option<u64>) {
    let mut j = Buf::<4096>::new();
    let _ = write!(j, "{{\"nevermore_stats\":1,\"pid\":{pid},\"running_s\":");
    match running {
        Some(s) => {
            let _ = write!(j, "{s}");
        }
        None => j.push_bytes(b"null"),
    }
    j.push_bytes(b",\"counters\":{");
    let mut first = true;
    for line in text.split(|&c| c == b'\n').skip(1) {
        // `==PID==   label   what the label counts`; the label ends at the first two spaces.
        let Some(rest) = line.strip_prefix(b"==") else { continue };
        let Some(at) = rest.iter().position(|&c| c == b'=') else { continue };
        let rest = &rest[at..];
        let start = rest.iter().position(|&c| c != b'=' && c != b' ').unwrap_or(rest.len());
        let rest = &rest[start..];
        let cut = rest.windows(2).position(|w| w == b"  ").unwrap_or(rest.len());
        let (label, values) = rest.split_at(cut);
        if label.is_empty() || label.iter().any(|&c| c == b'"' || c == b'\\') {
            continue;
        }
        if !first {
            j.push_bytes(b",");
        }
        first = false;
        j.push_bytes(b"\"");
        j.push_bytes(label);
        j.push_bytes(b"\":[");
        let mut i = 0;
        let mut any = false;
        while i < values.len() {
            if !values[i].is_ascii_digit() {
                i += 1;
                continue;
            }
            let from = i;
            while i < values.len() && values[i].is_ascii_digit() {
                i += 1;
            }
            if any {
                j.push_bytes(b",");
            }
            any = true;
            j.push_bytes(&values[from..i]);
        }
        j.push_bytes(b"]");
    }
    j.push_bytes(b"}}\n");
    sys::write_all(fd, j.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &[u8] = b"Name:\tcat\nVmPeak:\t    8 kB\nVmSizeX:\t 1 kB\nVmSize:\t   5436 kB\nSeccomp:\t0\n\
        Groups:\t\nThreads:\t12\nVmPTE:\t  60 kB";

    #[test]
    fn fields_are_found_at_line_starts_only_and_read_whole() {
        assert_eq!(status_field(STATUS, b"VmSize"), Some(5436));
        assert_eq!(status_field(STATUS, b"Seccomp"), Some(0));
        assert_eq!(status_field(STATUS, b"Threads"), Some(12));
        // The last line, without its newline.
        assert_eq!(status_field(STATUS, b"VmPTE"), Some(60));
        // No digits on the line; a name only inside another; no such line.
        assert_eq!(status_field(STATUS, b"Groups"), None);
        assert_eq!(status_field(STATUS, b"Size"), None);
        assert_eq!(status_field(STATUS, b"VmRSS"), None);
    }

    #[test]
    fn a_field_split_across_chunks_is_read_as_one() {
        for chunk in 1..STATUS.len() {
            for field in [&b"VmSize"[..], b"Threads", b"VmPTE", b"Groups"] {
                let mut scan = FieldScan::new(field);
                let _ = STATUS.chunks(chunk).any(|c| c.iter().any(|&b| scan.feed(b)));
                assert_eq!(scan.number(), status_field(STATUS, field), "chunks of {chunk}");
            }
        }
    }

    #[test]
    fn the_process_s_own_status_and_maps_are_read() {
        assert!(proc_status_kb(b"VmSize").is_some_and(|kb| kb > 0));
        assert!(proc_status_kb(b"Seccomp").is_some());
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap().lines().count() as u64;
        let counted = vma_count().unwrap();
        // The test harness's threads may map or unmap meanwhile.
        assert!(counted.abs_diff(maps) < 20, "{counted} against {maps}");
    }
}
