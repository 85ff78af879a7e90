//! Memory of a process tree and the descendants of a process (found through the parent pid in
//! `/proc/PID/stat`, which works without `CONFIG_PROC_CHILDREN`).
//!
//! Physical memory of one process is `Pss` (`/proc/PID/smaps_rollup`) plus its page tables
//! (`VmPTE` in `/proc/PID/status`). For a process running nevermore, whose heap lives in one
//! memfd (the pool, named `nevermore-pool`) that the program sees only through mappings of it,
//! Pss misses the pool pages that are resident in the memfd but mapped nowhere at the moment
//! (free pages kept for reuse, slab pages waiting to be reissued): they count in no process's
//! Pss, yet they are real memory. So for a process that holds the pool's descriptor open, Rss
//! and Pss come from `/proc/PID/smaps` (read only for such processes), and the Pss of the
//! pool's mappings is replaced by the memfd's whole resident size (its `st_blocks`). A program
//! that closes every descriptor it did not open itself loses the pool's descriptor and is
//! measured by Pss and page tables only.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;

/// How `/proc/PID/fd/N` and the pathname of a mapping name nevermore's pool (the kernel
/// appends ` (deleted)`).
pub const POOL_PREFIX: &str = "/memfd:nevermore-pool";

/// Resident set size and physical memory of one process (or a sum of them), in KiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Rss: every mapping of a page counts it once more.
    pub rss_kib: u64,
    /// Pss (shared pages split between the processes that map them), with nevermore's pool
    /// counted whole instead of by its mappings, plus page tables.
    pub phys_kib: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.rss_kib += o.rss_kib;
        self.phys_kib += o.phys_kib;
    }
}

/// `Rss` and `Pss` of `/proc/PID/smaps_rollup`, in KiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rollup {
    pub rss_kib: u64,
    pub pss_kib: u64,
}

/// The number of KiB of a `Key:   123 kB` line's value part; 0 when unreadable.
fn kib(value: &str) -> u64 {
    value.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Parses the text of `/proc/PID/smaps_rollup`. Missing fields count as zero (a zombie or a
/// kernel thread has an empty rollup).
pub fn parse_smaps_rollup(text: &str) -> Rollup {
    let mut r = Rollup::default();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else { continue };
        match key.trim() {
            "Rss" => r.rss_kib = kib(rest),
            "Pss" => r.pss_kib = kib(rest),
            _ => {}
        }
    }
    r
}

/// The pathname of a mapping header line of `/proc/PID/smaps`
/// (`start-end perms offset dev inode [pathname]`), or `None` when `line` is not a header.
/// The pathname may hold spaces (` (deleted)`); a mapping without one gives `Some("")`.
fn vma_pathname(line: &str) -> Option<&str> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    if start.is_empty() || end.is_empty() || !(start.bytes().chain(end.bytes()).all(|b| b.is_ascii_hexdigit())) {
        return None;
    }
    for _ in 0..4 {
        fields.next()?;
    }
    Some(fields.next().unwrap_or("").trim())
}

/// Sums over the mappings of `/proc/PID/smaps`, in KiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Smaps {
    /// `Rss` and `Pss` of every mapping.
    pub all: Rollup,
    /// `Pss` of the mappings of nevermore's pool.
    pub pool_pss_kib: u64,
}

/// Sums the `Rss` and `Pss` of every mapping, and the `Pss` of the mappings of nevermore's
/// pool, in the text of `/proc/PID/smaps`.
pub fn parse_smaps(smaps: &str) -> Smaps {
    let mut in_pool = false;
    let mut sum = Smaps::default();
    for line in smaps.lines() {
        if let Some(path) = vma_pathname(line) {
            in_pool = path.starts_with(POOL_PREFIX);
        } else if let Some(rest) = line.strip_prefix("Rss:") {
            sum.all.rss_kib += kib(rest);
        } else if let Some(rest) = line.strip_prefix("Pss:") {
            sum.all.pss_kib += kib(rest);
            if in_pool {
                sum.pool_pss_kib += kib(rest);
            }
        }
    }
    sum
}

/// `VmPTE` (the size of the process's page tables) from the text of `/proc/PID/status`, in
/// KiB.
pub fn parse_vm_pte(status: &str) -> Option<u64> {
    status.lines().find_map(|l| l.strip_prefix("VmPTE:")?.split_whitespace().next()?.parse().ok())
}

/// Physical memory of a process, in KiB: its Pss, less the Pss of its mappings of the pool,
/// plus the pool's resident size (0 when the process has no pool, or when the pool was counted
/// for another process already), plus its page tables.
pub fn physical_kib(pss_kib: u64, pool_pss_kib: u64, pool_resident_kib: u64, pte_kib: u64) -> u64 {
    pss_kib.saturating_sub(pool_pss_kib) + pool_resident_kib + pte_kib
}

/// The pool memfds that process `pid` holds open, as (device, inode, resident KiB).
fn pool_files(pid: i32) -> Vec<(u64, u64, u64)> {
    let mut out: Vec<(u64, u64, u64)> = Vec::new();
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fd")) else { return out };
    for e in dir.flatten() {
        let path = e.path();
        let Ok(target) = fs::read_link(&path) else { continue };
        if !target.as_os_str().as_bytes().starts_with(POOL_PREFIX.as_bytes()) {
            continue;
        }
        // `metadata` follows the link to the memfd itself; for a memfd `st_blocks` counts the
        // pages it holds, in 512-byte units.
        let Ok(m) = fs::metadata(&path) else { continue };
        if !out.iter().any(|f| (f.0, f.1) == (m.dev(), m.ino())) {
            out.push((m.dev(), m.ino(), m.blocks() * 512 / 1024));
        }
    }
    out
}

/// The usage of one process, if it still exists and may be read. A pool memfd whose
/// (device, inode) is in `pools_seen` was counted for another process of the tree already
/// (between a fork and the child's adoption of its own copy); new ones are added to it.
pub fn usage_of(pid: i32, pools_seen: &mut HashSet<(u64, u64)>) -> Option<Usage> {
    let pools = pool_files(pid);
    let (all, pool_pss, resident) = if pools.is_empty() {
        (parse_smaps_rollup(&fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?), 0, 0)
    } else {
        // Everything from one pass over smaps instead of the rollup: a nevermore heap maps and
        // unmaps pages all the time, and a rollup read a moment before smaps can differ from
        // it by a large fraction of the pool.
        let smaps = parse_smaps(&fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?);
        let resident = pools.iter().filter(|f| pools_seen.insert((f.0, f.1))).map(|f| f.2).sum();
        (smaps.all, smaps.pool_pss_kib, resident)
    };
    let pte = fs::read_to_string(format!("/proc/{pid}/status")).ok().and_then(|s| parse_vm_pte(&s)).unwrap_or(0);
    Some(Usage { rss_kib: all.rss_kib, phys_kib: physical_kib(all.pss_kib, pool_pss, resident, pte) })
}

/// `VmHWM` (the peak RSS of the process's own address space) from the text of
/// `/proc/PID/status`, in KiB.
pub fn parse_vm_hwm(status: &str) -> Option<u64> {
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")?.split_whitespace().next()?.parse().ok())
}

/// `VmHWM` of a live process.
pub fn vm_hwm(pid: i32) -> Option<u64> {
    fs::read_to_string(format!("/proc/{pid}/status")).ok().and_then(|s| parse_vm_hwm(&s))
}

/// Parent pid from the text of `/proc/PID/stat` (the command name may hold spaces and
/// parentheses, so parse after the last `)`).
pub fn parse_ppid(stat: &str) -> Option<i32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    fields.next()?; // state
    fields.next()?.parse().ok()
}

/// The signal a process sends its parent when it ends (`exit_signal`, the 38th field of
/// `/proc/PID/stat`): SIGCHLD for `fork`'s children, 0 for tasks `clone`d without one.
pub fn parse_exit_signal(stat: &str) -> Option<i32> {
    // The fields after the command name start with the third (the state).
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(38 - 3)?.parse().ok()
}

/// The command name from the text of `/proc/PID/stat`.
pub fn parse_comm(stat: &str) -> Option<&str> {
    Some(&stat[stat.find('(')? + 1..stat.rfind(')')?])
}

/// The name of nevermore's helper task that holds a process's threads still for a sweep (and
/// reads part of the heap): it shares its parent's memory, which must not be counted twice.
const HOLDER: &str = "nevermore-hold";

/// Whether `/proc/PID/stat` is that of nevermore's helper task: by its name, or, in the moment
/// before it names itself (it starts with its parent's), by its exit signal: none, where
/// children a program forks send SIGCHLD.
fn is_holder(stat: &str) -> bool {
    parse_comm(stat) == Some(HOLDER) || parse_exit_signal(stat) == Some(0)
}

/// `root` and all its descendants that are alive now (not nevermore's holder tasks, which
/// share their parent's memory).
pub fn process_tree(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            if is_holder(&stat) {
                continue;
            }
            if let Some(ppid) = parse_ppid(&stat) {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend(c.iter().copied().filter(|p| *p != root));
        }
        i += 1;
    }
    out
}

/// Summed usage of a process (and, with `tree`, of all its descendants).
pub fn sample(root: i32, tree: bool) -> Usage {
    let mut total = Usage::default();
    let mut pools_seen = HashSet::new();
    if tree {
        for pid in process_tree(root) {
            total += usage_of(pid, &mut pools_seen).unwrap_or_default();
        }
    } else {
        total = usage_of(root, &mut pools_seen).unwrap_or_default();
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
55d0a6e2c000-7ffd4c1f6000 ---p 00000000 00:00 0                          [rollup]
Rss:               12345 kB
Pss:                9876 kB
Pss_Dirty:          8000 kB
Pss_Anon:           7000 kB
Pss_File:           2876 kB
Pss_Shmem:             0 kB
Shared_Clean:       3000 kB
Shared_Dirty:          0 kB
Private_Clean:      1345 kB
Private_Dirty:      8000 kB
Referenced:        12000 kB
Anonymous:          7000 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
";

    #[test]
    fn parses_rollup() {
        assert_eq!(parse_smaps_rollup(SAMPLE), Rollup { rss_kib: 12345, pss_kib: 9876 });
        assert_eq!(parse_smaps_rollup(""), Rollup::default());
    }

    /// One mapping of `/proc/PID/smaps` as the kernel prints it (every field, in its order).
    fn vma(header: &str, rss: u64, pss: u64) -> String {
        let mut out = format!("{header}\nSize:                {rss} kB\nKernelPageSize:        4 kB\n");
        out += &format!("MMUPageSize:           4 kB\nRss:                 {rss} kB\nPss:                 {pss} kB\n");
        for field in [
            "Pss_Dirty",
            "Shared_Clean",
            "Shared_Dirty",
            "Private_Clean",
            "Private_Dirty",
            "Referenced",
            "Anonymous",
            "KSM",
            "LazyFree",
            "AnonHugePages",
            "ShmemPmdMapped",
            "FilePmdMapped",
            "Shared_Hugetlb",
            "Private_Hugetlb",
            "Swap",
            "SwapPss",
            "Locked",
        ] {
            out += &format!("{field}:{:>16} kB\n", 0);
        }
        out + "THPeligible:           0\nVmFlags: rd wr mr mw me sd\n"
    }

    /// Four mappings as a process under nevermore shows them: a library, the pool (the
    /// canonical view), an anonymous mapping, then the pool again (an alias).
    fn smaps() -> String {
        vma("7f3a1c000000-7f3a1c028000 r--p 00000000 fe:00 1835054    /usr/lib/x86_64-linux-gnu/libc.so.6", 160, 14)
            + &vma("5f6d05c00000-5f6d06200000 rw-s 00000000 00:01 83314    /memfd:nevermore-pool (deleted)", 4096, 2048)
            + &vma("7f3a1c400000-7f3a1c421000 rw-p 00000000 00:00 0 ", 100, 100)
            + &vma("7f6d6a027000-7f7d6a027000 rw-s 00000000 00:01 83314    /memfd:nevermore-pool (deleted)", 12, 6)
    }

    #[test]
    fn parses_smaps() {
        let all = Rollup { rss_kib: 160 + 4096 + 100 + 12, pss_kib: 14 + 2048 + 100 + 6 };
        assert_eq!(parse_smaps(&smaps()), Smaps { all, pool_pss_kib: 2048 + 6 });
        assert_eq!(parse_smaps(""), Smaps::default());
        // The rollup's header has no pathname, and other memfds are not the pool.
        assert_eq!(parse_smaps(SAMPLE), Smaps { all: parse_smaps_rollup(SAMPLE), pool_pss_kib: 0 });
        let other = smaps().replace("/memfd:nevermore-pool", "/memfd:wayland-shm");
        assert_eq!(parse_smaps(&other).pool_pss_kib, 0);
    }

    #[test]
    fn finds_vma_pathnames() {
        assert_eq!(
            vma_pathname("5f6d05c00000-5f6d06200000 rw-s 00000000 00:01 83314      /memfd:nevermore-pool (deleted)"),
            Some("/memfd:nevermore-pool (deleted)")
        );
        assert_eq!(vma_pathname("7f3a1c400000-7f3a1c421000 rw-p 00000000 00:00 0 "), Some(""));
        assert_eq!(vma_pathname("7f3a1c400000-7f3a1c421000 rw-p 00000000 00:00 0"), Some(""));
        assert_eq!(
            vma_pathname("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  [vsyscall]"),
            Some("[vsyscall]")
        );
        assert_eq!(vma_pathname("Pss:                 100 kB"), None);
        assert_eq!(vma_pathname("VmFlags: rd wr mr mw me ac sd"), None);
    }

    #[test]
    fn parses_vm_pte() {
        let status = "Name:\tbsoak\nUmask:\t0022\nState:\tR (running)\nVmPeak:\t68719765000 kB\n\
                      VmSize:\t68719765000 kB\nVmHWM:\t  152000 kB\nVmRSS:\t  150000 kB\nRssAnon:\t    1000 kB\n\
                      RssFile:\t    2000 kB\nRssShmem:\t  147000 kB\nVmData:\t    9000 kB\nVmStk:\t     132 kB\n\
                      VmExe:\t       8 kB\nVmLib:\t    2000 kB\nVmPTE:\t   16384 kB\nVmSwap:\t       0 kB\n\
                      HugetlbPages:\t       0 kB\nThreads:\t1\n";
        assert_eq!(parse_vm_pte(status), Some(16384));
        assert_eq!(parse_vm_pte("Name:\tkthreadd\nState:\tS (sleeping)\n"), None);
    }

    #[test]
    fn physical_replaces_pool_pss_by_resident_size() {
        // The soak under nevermore: 59 MiB of pool Pss, 147 MiB resident in the memfd.
        assert_eq!(physical_kib(70 * 1024, 59 * 1024, 147 * 1024, 16 * 1024), (11 + 147 + 16) * 1024);
        // No pool: Pss plus page tables.
        assert_eq!(physical_kib(9876, 0, 0, 48), 9924);
        // Never negative, whatever the inputs.
        assert_eq!(physical_kib(100, 200, 0, 8), 8);
    }

    #[test]
    fn parses_vm_hwm() {
        assert_eq!(parse_vm_hwm("Name:\tcat\nVmPeak:\t  9000 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 1000 kB\n"), Some(1234));
        assert_eq!(parse_vm_hwm("Name:\tkthreadd\n"), None);
    }

    #[test]
    fn parses_comm_with_odd_names() {
        assert_eq!(parse_comm("12 (nevermore-hold) S 11 12"), Some("nevermore-hold"));
        assert_eq!(parse_comm("7 (a) b)) R 1 7"), Some("a) b)"));
    }

    #[test]
    fn knows_holders_by_name_or_by_their_missing_exit_signal() {
        // 52 fields; the 38th (exit_signal) is 17 (SIGCHLD), as for a forked child.
        let fields = |exit_signal: &str| {
            let mut v: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
            v[38 - 3] = exit_signal.to_string();
            v.join(" ")
        };
        let child = format!("12 (redis-server) {}", fields("17"));
        assert_eq!(parse_exit_signal(&child), Some(17));
        assert!(!is_holder(&child));
        assert!(is_holder(&format!("12 (nevermore-hold) {}", fields("17"))));
        // Not yet renamed: the parent's name, no exit signal.
        assert!(is_holder(&format!("12 (redis-server) {}", fields("0"))));
        assert_eq!(parse_exit_signal("12 (short) S 1"), None);
        // This test's own process was forked (by cargo or a shell): it sends SIGCHLD.
        let me = fs::read_to_string("/proc/self/stat").unwrap();
        assert_eq!(parse_exit_signal(&me), Some(17), "{me}");
        assert!(!is_holder(&me));
    }

    #[test]
    fn parses_ppid_with_odd_names() {
        assert_eq!(parse_ppid("1234 (my (odd) prog) S 42 1234 1234 0 -1"), Some(42));
        assert_eq!(parse_ppid("garbage"), None);
    }

    #[test]
    fn samples_self() {
        let me = std::process::id() as i32;
        let u = sample(me, false);
        assert!(u.rss_kib > 0 && u.phys_kib > 0, "{u:?}");
        assert!(process_tree(me).contains(&me));
    }

    /// A memfd named like nevermore's pool in this process: 4 MiB written through a mapping,
    /// 2 MiB more written with `pwrite` and mapped nowhere. The pool counts with its whole
    /// resident size.
    #[test]
    fn counts_the_whole_pool() {
        const MIB: usize = 1 << 20;
        let me = std::process::id() as i32;
        // SAFETY: plain syscalls on a descriptor and a mapping owned by this test.
        unsafe {
            let fd = libc::memfd_create(c"nevermore-pool".as_ptr(), libc::MFD_CLOEXEC);
            assert!(fd >= 0);
            assert_eq!(libc::ftruncate(fd, (16 * MIB) as libc::off_t), 0);
            let p =
                libc::mmap(std::ptr::null_mut(), 4 * MIB, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
            assert_ne!(p, libc::MAP_FAILED);
            std::ptr::write_bytes(p as *mut u8, 1, 4 * MIB);
            let buf = vec![2u8; 2 * MIB];
            assert_eq!(libc::pwrite(fd, buf.as_ptr().cast(), buf.len(), (8 * MIB) as libc::off_t), buf.len() as isize);

            let pools = pool_files(me);
            assert_eq!(pools.len(), 1, "{pools:?}");
            assert!(pools[0].2 >= 6 * 1024, "resident {pools:?}");
            let smaps = fs::read_to_string(format!("/proc/{me}/smaps")).unwrap();
            let pool_pss = parse_smaps(&smaps).pool_pss_kib;
            assert!((4 * 1024..6 * 1024).contains(&pool_pss), "pool Pss {pool_pss}");
            let u = usage_of(me, &mut HashSet::new()).unwrap();
            assert!(u.phys_kib >= pools[0].2, "{u:?} {pools:?}");
            // Counted once per tree: a second process holding the same memfd adds only its Pss.
            let mut seen = HashSet::from([(pools[0].0, pools[0].1)]);
            let again = usage_of(me, &mut seen).unwrap();
            assert!(again.phys_kib + 4 * 1024 <= u.phys_kib, "{again:?} {u:?}");

            libc::munmap(p, 4 * MIB);
            libc::close(fd);
        }
    }
}
