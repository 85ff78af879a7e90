//! Runs the harness binary on tiny workloads (needs only `cc`): notices for skipped
//! allocators and workloads, every output file written, and the alias engine's state at exit.

use std::path::PathBuf;
use std::process::Command;

/// Runs the harness with `args` and `--out` a fresh directory named after `name`; asserts it
/// succeeded and returns (the directory, stdout, stderr).
fn harness(name: &str, args: &[&str]) -> (PathBuf, String, String) {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(env!("CARGO_BIN_EXE_nevermore-bench"))
        .args(args)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run nevermore-bench");
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", o.status);
    (out, stdout, stderr)
}

#[test]
fn tiny_loop_run_writes_every_output() {
    let args = ["--only", "loop,nosuchworkload", "--scale", "0.01", "--reps", "1", "--alloc", "glibc,nonexistent"];
    let (out, stdout, stderr) = harness("bench-harness", &[&args[..], &["--lib", "fake=/nonexistent.so"]].concat());
    assert!(stderr.contains("notice: skipping allocator nonexistent: unknown allocator"), "{stderr}");
    assert!(stderr.contains("notice: skipping allocator fake: /nonexistent.so not found"), "{stderr}");
    assert!(stderr.contains("notice: skipping workload nosuchworkload: unknown"), "{stderr}");

    let md = std::fs::read_to_string(out.join("results.md")).expect("results.md");
    assert!(md.contains("### loop — ns/op (lower is better)"), "{md}");
    assert!(md.contains("| glibc | "), "{md}");
    assert!(md.contains("skipping allocator fake"), "notices are kept in results.md: {md}");
    assert!(stdout.contains("### loop"), "the Markdown is printed at the end: {stdout}");

    let csv = std::fs::read_to_string(out.join("results.csv")).expect("results.csv");
    for metric in ["ns_per_op", "peak_rss_kib", "peak_phys_kib"] {
        assert!(csv.lines().any(|l| l.starts_with(&format!("loop,glibc,{metric},"))), "{metric}: {csv}");
    }
    for svg in ["time_ratio.svg", "memory_ratio.svg", "scaling.svg"] {
        let text = std::fs::read_to_string(out.join(svg)).unwrap_or_else(|e| panic!("{svg}: {e}"));
        assert!(text.contains("<svg"), "{svg}");
        if svg != "scaling.svg" {
            assert!(text.contains("loop"), "{svg} names the workload");
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// The soak under nevermore (built by the harness itself, as `nevermore-bench` does on a fresh
/// machine): its rows, and the alias engine's state at exit, read from the library's `stats=1`
/// report, in the Markdown and the CSV.
#[test]
fn soak_reports_the_alias_engine_at_exit() {
    let (out, _, _) = harness(
        "bench-soak",
        &["--only", "soak", "--scale", "0.02", "--reps", "1", "--alloc", "glibc,nevermore-prevent"],
    );
    let md = std::fs::read_to_string(out.join("results.md")).expect("results.md");
    assert!(md.contains("### soak — ns/op (lower is better)"), "{md}");
    for alloc in ["glibc", "nevermore-prevent"] {
        assert!(md.contains(&format!("| {alloc} | ")), "{alloc} measured: {md}");
    }
    let table =
        md.split("alias engine when the program ended").nth(1).unwrap_or_else(|| panic!("no engine table: {md}"));
    let row = table.lines().find(|l| l.starts_with("| nevermore-prevent | ")).unwrap_or_else(|| panic!("{md}"));
    let nums: Vec<u64> = row.split('|').filter_map(|c| c.trim().parse().ok()).collect();
    assert_eq!(nums.len(), 4, "{row}");
    let (live, peak, vmas) = (nums[0], nums[1], nums[2]);
    assert!(live >= 1 && peak >= live && vmas > live, "mirrors live {live}, peak {peak}, VMAs {vmas}: {row}");
    assert!(!table.contains("| glibc |"), "glibc has no alias engine: {md}");
    let csv = std::fs::read_to_string(out.join("results.csv")).expect("results.csv");
    for key in ["mirrors_live_at_exit", "mirrors_peak", "vmas_at_exit", "degraded_epochs"] {
        assert!(csv.lines().any(|l| l.starts_with(&format!("soak,nevermore-prevent,{key},count,"))), "{key}: {csv}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
