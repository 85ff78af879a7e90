mod common;

// Bad configuration input under plain LD_PRELOAD: every malformed NEVERMORE_OPTIONS is one
// line on stderr naming the culprit and exit status 1 (before the program runs); an
// unwritable report_path falls back to stderr with a one-line note. Documented in
// docs/usage.md ("Options").

use common::*;

fn run_with(opts: &str) -> std::process::Output {
    let bin = compile("uaf.c", &[]);
    run_preloaded_timeout(&bin, &["read", "24"], &[("NEVERMORE_OPTIONS", opts)], 30)
}

#[test]
fn malformed_options_are_one_clear_line_and_exit_1() {
    for (opts, needle) in [
        ("bogus=1", "unknown option 'bogus'"),
        ("mode=detect:Mode=prevent", "unknown option 'Mode'"),
        ("mode=fast", "bad value 'fast' for 'mode'"),
        ("mode=", "bad value '' for 'mode'"),
        ("stats=2", "bad value '2' for 'stats'"),
        ("stats=on", "bad value 'on' for 'stats'"),
        ("exitcode=0", "bad value '0' for 'exitcode'"),
        ("exitcode=256", "bad value '256' for 'exitcode'"),
        ("exitcode=-3", "bad value '-3' for 'exitcode'"),
        ("exitcode=99999999999999999999999", "for 'exitcode'"),
        ("exitcode=0x10", "bad value '0x10' for 'exitcode'"),
        ("report_format=xml", "bad value 'xml' for 'report_format'"),
        ("report_path=", "for 'report_path'"),
        ("guard_all=1", "bad value '1' for 'guard_all' (expected 0 unless mode=detect)"),
        ("mode=prevent:guard_all=yes", "bad value 'yes' for 'guard_all'"),
        ("sweep_max_live=0", "bad value '0' for 'sweep_max_live' (expected MiB from 1 to 1048576)"),
        ("stats", "stats"),
        ("mode detect", "mode detect"),
        ("=1", "unknown option ''"),
    ] {
        let o = run_with(opts);
        assert_eq!(o.status.code(), Some(1), "{opts}: {:?}\n{}", o.status, stderr(&o));
        let err = stderr(&o);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{opts}: expected one line:\n{err}");
        assert!(lines[0].starts_with("nevermore: NEVERMORE_OPTIONS: "), "{opts}: {err}");
        assert!(lines[0].contains(needle), "{opts}: expected `{needle}` in:\n{err}");
        assert!(stdout(&o).is_empty(), "{opts}: the program ran:\n{}", stdout(&o));
    }
}

/// The library keeps its own copy of the option string (programs write process titles over
/// their environment), so one longer than that copy is refused like any malformed string.
#[test]
fn an_option_string_too_long_is_refused() {
    let long = "stats=0:".repeat(1100);
    let o = run_with(&long);
    assert_eq!(o.status.code(), Some(1), "{:?}\n{}", o.status, stderr(&o));
    assert_eq!(stderr(&o), "nevermore: NEVERMORE_OPTIONS: 8800 bytes, longer than the 8192 taken\n");
    assert!(stdout(&o).is_empty());
    // Just below the bound it is taken.
    let o = run_with(&format!("{}mode=detect", "stats=0:".repeat(1020)));
    assert_report(&o, "heap-use-after-free");
}

#[test]
fn empty_items_and_both_separators_are_accepted() {
    for opts in ["", ":", ",,", "mode=detect,,stats=0:", "mode=detect:mode=detect"] {
        let o = run_with(&format!("{opts}:mode=detect"));
        assert_report(&o, "heap-use-after-free");
    }
}

#[test]
fn unwritable_report_path_falls_back_to_stderr() {
    let dir = scratch("options-unwritable");
    for path in ["/proc/version/x.log".to_string(), format!("{}/no/such/dir/r.log", dir.display())] {
        let o = run_with(&format!("mode=detect:report_path={path}"));
        assert_report(&o, "heap-use-after-free");
        let err = stderr(&o);
        assert_eq!(err.matches("cannot open report_path").count(), 1, "{err}");
        assert!(err.contains("reporting to stderr"), "{err}");
    }
}

/// `stats_interval=1` prints the counters while the program runs, about once a second, from
/// the refill of a thread cache; never on an alternate signal stack (`periodic.c` refills on
/// one of two pages above a no-access page for its first 1.5 s: a print there ran into it,
/// SIGSEGV); each print whole; with `stats=1` the print at exit as before. Without the option
/// nothing is printed while the program runs.
#[test]
fn stats_interval_prints_the_counters_while_the_program_runs() {
    let bin = compile("periodic.c", &["-pthread"]);
    for mode in ["prevent", "detect"] {
        let opts = format!("mode={mode}:stats=1:stats_interval=1");
        let o = run_preloaded_timeout(&bin, &["1500", "1200"], &[("NEVERMORE_OPTIONS", &opts)], 60);
        assert_ok(&o);
        assert!(stdout(&o).contains("PERIODIC OK"), "{}", stdout(&o));
        let err = stderr(&o);
        let running: Vec<u64> = err
            .lines()
            .filter_map(|l| l.split_once("nevermore stats (running, "))
            .map(|(_, rest)| rest.split(' ').next().and_then(|n| n.parse().ok()).expect("seconds"))
            .collect();
        assert!(!running.is_empty() && running.iter().all(|&s| s >= 1), "{mode}:\n{err}");
        // Every print whole (its first and last lines), the one at exit too.
        let headers = err.matches("nevermore stats").count();
        assert_eq!(headers, running.len() + 1, "{mode}:\n{err}");
        assert_eq!(err.matches("   allocations ").count(), headers, "{mode}:\n{err}");
        assert_eq!(err.matches("   pool memory ").count(), headers, "{mode}:\n{err}");
    }
    let o = run_preloaded_timeout(&bin, &["300", "1200"], &[("NEVERMORE_OPTIONS", "stats=1")], 60);
    assert_ok(&o);
    assert_eq!(stderr(&o).matches("nevermore stats").count(), 1, "{}", stderr(&o));
}

/// Without `report_path`, statistics go to standard error while it is the file it was at
/// start-up, else to the copy of it kept then: a program that closed it and opened a file of
/// its own, which took its number, finds nothing of the library's written into that file, and
/// the periodic and exit prints still reach the original standard error.
#[test]
fn statistics_are_never_written_into_a_file_the_program_put_at_standard_error() {
    let bin = compile("periodic.c", &["-pthread"]);
    let opts = "stats_interval=1:stats=1";
    // The program's file is kept: what went into it (a report of the library's, when the
    // program died) is shown when the test fails.
    let file = writable_dir("periodic-reopen").join(format!("stderr-{}", std::process::id()));
    let path = file.to_str().unwrap();
    let o = run_preloaded_timeout(&bin, &["300", "1500", "reopen", path], &[("NEVERMORE_OPTIONS", opts)], 60);
    let kept = std::fs::read_to_string(&file).unwrap_or_default();
    let _ = std::fs::remove_file(&file);
    assert!(o.status.success(), "{:?}\n{}\n{}\nthe program's file:\n{kept}", o.status, stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("STDERR FILE 0\n"), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains("nevermore stats (running, "), "{err}");
    assert_eq!(err.matches("   pool memory ").count(), err.matches("nevermore stats").count(), "{err}");
    assert!(err.lines().any(|l| l.ends_with("== nevermore stats")), "no print at exit:\n{err}");
}

/// With `report_format=json` the statistics are JSON too, one object per print on one line
/// (the report file holds nothing else): each text line's label and its numbers in order;
/// `running_s` is the seconds of a periodic print, null at exit.
#[test]
fn stats_are_one_json_object_per_print_with_report_format_json() {
    let bin = compile("periodic.c", &["-pthread"]);
    let opts = "stats=1:stats_interval=1:report_format=json";
    let o = run_preloaded_timeout(&bin, &["300", "1500"], &[("NEVERMORE_OPTIONS", opts)], 60);
    assert_ok(&o);
    let err = stderr(&o);
    assert!(!err.contains("nevermore stats"), "text statistics in JSON mode:\n{err}");
    let prints: Vec<serde_json::Value> =
        err.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{err}"))).collect();
    assert!(prints.len() >= 2, "{err}");
    let (last, periodic) = prints.split_last().unwrap();
    assert!(last["running_s"].is_null(), "{last}");
    for p in periodic {
        assert!(p["running_s"].as_u64().is_some_and(|s| s >= 1), "{p}");
    }
    for p in &prints {
        assert_eq!(p["nevermore_stats"], 1, "{p}");
        assert_eq!(p["pid"].as_u64(), Some(o_pid(&o)), "{p}");
        let c = &p["counters"];
        let n = |label: &str| c[label].as_array().unwrap_or_else(|| panic!("no {label}: {p}")).len();
        assert_eq!(n("sweeps"), 16, "{p}");
        assert_eq!(n("allocations"), 1, "{p}");
        assert!(c["allocations"][0].as_u64().is_some_and(|a| a > 1000), "{p}");
        assert_eq!(n("mirrors"), 5, "{p}");
        assert_eq!(n("RSS"), 2, "{p}");
    }
}

/// The pid `periodic.c` printed (`PERIODIC OK <n> signals, pid <pid>`).
fn o_pid(o: &std::process::Output) -> u64 {
    let out = stdout(o);
    out.split_once(", pid ").and_then(|(_, p)| p.trim().parse().ok()).unwrap_or_else(|| panic!("no pid: {out}"))
}
