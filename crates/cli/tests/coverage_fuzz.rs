mod common;

// Coverage-guided differential fuzzing with libFuzzer (`fuzz/fuzz_targets/alloc_api.rs`, built
// by `scripts/fuzz-coverage.sh` on stable Rust with nevermore linked in statically and
// instrumented): a bounded run in each mode, from the committed seeds and a fresh corpus. It
// must end without a finding, after a meaningful number of inputs, with coverage reaching into
// the allocator and with misuse checks (forked children that must die with the matching report)
// actually done. The long run is documented in docs/robustness.md.

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Seconds of fuzzing per mode (the two modes run in parallel).
const SECONDS: u64 = 45;

/// Builds the fuzzer once (into `<target>/fuzz`) and returns its path.
fn fuzzer() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("fuzz");
        let mut cmd = Command::new("bash");
        cmd.arg(repo_root().join("scripts/fuzz-coverage.sh"))
            .arg("--build-only")
            .env("FUZZ_TARGET_DIR", &target)
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("CARGO_BUILD_TARGET");
        let o = wait_with_deadline(cmd, 1800, "scripts/fuzz-coverage.sh --build-only");
        assert_ok(&o);
        let bin = PathBuf::from(stdout(&o).trim());
        assert!(bin.is_file(), "no fuzzer at {}", bin.display());
        bin
    })
}

/// The first number after the last occurrence of `key` in `text`.
fn number_after(text: &str, key: &str) -> Option<u64> {
    let at = text.rfind(key)? + key.len();
    let rest = text[at..].trim_start_matches(|c: char| !c.is_ascii_digit());
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

fn fuzz(mode: &str, seed: u32) {
    let bin = fuzzer();
    let dir = scratch(&format!("coverage-fuzz-{mode}"));
    let corpus = writable_dir(&format!("coverage-fuzz-{mode}/corpus"));
    let artifacts = writable_dir(&format!("coverage-fuzz-{mode}/artifacts"));
    let saved = dir.join("last-input");
    let mut cmd = program(bin);
    cmd.arg(&corpus)
        .arg(repo_root().join("fuzz/seeds/alloc_api"))
        .arg(format!("-max_total_time={SECONDS}"))
        .arg(format!("-seed={seed}"))
        .args(["-rss_limit_mb=0", "-malloc_limit_mb=0", "-timeout=120", "-print_final_stats=1"])
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .env("NEVERMORE_OPTIONS", format!("mode={mode}"))
        .env("ALLOC_API_SAVE_INPUT", &saved)
        .env_remove("LD_PRELOAD");
    let o = wait_with_deadline(cmd, SECONDS + 300, &format!("alloc_api fuzzer, mode {mode}"));
    let err = stderr(&o);
    let tail: String = {
        let lines: Vec<&str> = err.lines().collect();
        lines[lines.len().saturating_sub(80)..].join("\n")
    };
    assert!(
        o.status.success(),
        "mode {mode}: the fuzzer failed ({:?}); the input being run is kept in {}\n{tail}",
        o.status,
        saved.display()
    );
    let found: Vec<_> = std::fs::read_dir(&artifacts).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(found.is_empty(), "mode {mode}: artifacts written: {found:?}\n{tail}");
    // Report lines start with `==PID==` (libFuzzer's dictionary lines may quote the words).
    let reported = err.lines().any(|l| l.starts_with("==") && l.contains("== nevermore: ERROR:"));
    assert!(!reported, "mode {mode}: a report in the fuzzing process\n{tail}");

    // The whole program is instrumented, the allocator included: its counters are most of
    // them (harness and Rust dependencies alone have about 1,400).
    let counters = number_after(&err, "Loaded 1 modules").unwrap_or(0);
    assert!(counters >= 3000, "mode {mode}: only {counters} instrumented edges: is nevermore instrumented?\n{tail}");
    let runs = number_after(&err, "stat::number_of_executed_units:").expect("final stats");
    let cov = number_after(&err, "DONE   cov:").expect("the DONE line");
    let ft = number_after(&err, "ft:").unwrap_or(0);
    assert!(runs >= 100, "mode {mode}: only {runs} inputs executed\n{tail}");
    assert!(cov >= 600, "mode {mode}: coverage {cov} edges is too low\n{tail}");

    let summary = err.lines().rev().find(|l| l.starts_with("alloc_api: inputs")).expect("the harness' counts");
    let kinds = ["double-free", "invalid-free", "heap-buffer-overflow"].map(|k| (k, number_after(summary, k).unwrap()));
    let total: u64 = kinds.iter().map(|(_, n)| n).sum();
    assert!(total >= 3, "mode {mode}: only {total} misuse checks: {summary}");
    for (k, n) in kinds {
        assert!(n >= 1, "mode {mode}: no `{k}` misuse check: {summary}");
    }
    println!(
        "mode {mode}: {runs} inputs, {} exec/s, cov {cov} ft {ft} of {counters} edges; {summary}",
        number_after(&err, "stat::average_exec_per_sec:").unwrap_or(0)
    );
}

#[test]
fn coverage_guided_fuzzing_in_prevent_mode() {
    fuzz("prevent", 1);
}

#[test]
fn coverage_guided_fuzzing_in_detect_mode() {
    fuzz("detect", 2);
}
