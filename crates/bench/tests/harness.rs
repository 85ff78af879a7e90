//! Runs the harness binary on a tiny workload (needs only `cc`): notices for skipped
//! allocators and workloads, and every output file written.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn tiny_loop_run_writes_every_output() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("bench-harness-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(env!("CARGO_BIN_EXE_nevermore-bench"))
        .args(["--only", "loop,nosuchworkload", "--scale", "0.01", "--reps", "1"])
        .args(["--alloc", "glibc,nonexistent", "--lib", "fake=/nonexistent.so", "--out"])
        .arg(&out)
        .output()
        .expect("run nevermore-bench");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", o.status);
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
