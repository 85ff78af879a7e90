//! Memory of a process tree: `/proc/PID/smaps_rollup` (Rss and Pss) and the descendants of a
//! process (found through the parent pid in `/proc/PID/stat`, which works without
//! `CONFIG_PROC_CHILDREN`).

use std::collections::HashMap;
use std::fs;

/// Resident and proportional set size of one process, in KiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub rss_kib: u64,
    pub pss_kib: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.rss_kib += o.rss_kib;
        self.pss_kib += o.pss_kib;
    }
}

/// Parses the text of `/proc/PID/smaps_rollup`. Missing fields count as zero (a zombie or a
/// kernel thread has an empty rollup).
pub fn parse_smaps_rollup(text: &str) -> Usage {
    let mut u = Usage::default();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else { continue };
        let kib = || rest.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        match key.trim() {
            "Rss" => u.rss_kib = kib(),
            "Pss" => u.pss_kib = kib(),
            _ => {}
        }
    }
    u
}

/// The usage of one process, if it still exists and may be read.
pub fn usage_of(pid: i32) -> Option<Usage> {
    fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok().map(|t| parse_smaps_rollup(&t))
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

/// `root` and all its descendants that are alive now.
pub fn process_tree(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            if let Some(ppid) = fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|s| parse_ppid(&s)) {
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
    if tree {
        for pid in process_tree(root) {
            total += usage_of(pid).unwrap_or_default();
        }
    } else {
        total = usage_of(root).unwrap_or_default();
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
        assert_eq!(parse_smaps_rollup(SAMPLE), Usage { rss_kib: 12345, pss_kib: 9876 });
        assert_eq!(parse_smaps_rollup(""), Usage::default());
    }

    #[test]
    fn parses_vm_hwm() {
        assert_eq!(parse_vm_hwm("Name:\tcat\nVmPeak:\t  9000 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 1000 kB\n"), Some(1234));
        assert_eq!(parse_vm_hwm("Name:\tkthreadd\n"), None);
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
        assert!(u.rss_kib > 0 && u.pss_kib > 0, "{u:?}");
        assert!(process_tree(me).contains(&me));
    }
}
