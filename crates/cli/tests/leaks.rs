//! The leak check at exit (`mode=detect`, `detect_leaks=1`; `tests/c/leaks.c`): the live
//! objects that nothing the program holds leads to are reported once, grouped by allocation
//! stack, the biggest first; everything reachable (from globals, through other objects,
//! through interior pointers, from a thread's stack while it is blocked) is not.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use common::*;
use serde_json::Value;

fn bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| compile("leaks.c", &[]))
}

/// The line of `tests/c/leaks.c` carrying the marker `AT:<tag>`.
fn line_of(tag: &str) -> usize {
    let src = std::fs::read_to_string(repo_root().join("tests/c/leaks.c")).unwrap();
    let needle = format!("AT:{tag} ");
    src.lines().position(|l| l.contains(&needle)).unwrap_or_else(|| panic!("no marker {tag}")) + 1
}

/// `nevermore run --mode detect -o detect_leaks=1 [extra] -- leaks CASE`.
fn run(case: &str, extra: &[&str]) -> Output {
    let mut args = vec!["run", "--mode", "detect", "-o", "detect_leaks=1"];
    args.extend_from_slice(extra);
    args.push("--");
    args.push(bin().to_str().unwrap());
    args.push(case);
    nevermore_cmd(&args, "leaks-cache").output().unwrap()
}

/// The groups a text report lists: (bytes, objects, first lines of its stack).
fn groups(err: &str) -> Vec<(u64, u64, String)> {
    let mut out: Vec<(u64, u64, String)> = Vec::new();
    for line in err.lines() {
        if let Some(rest) = line.split("leaked ").nth(1).filter(|_| line.contains(" objects (one: ")) {
            let words: Vec<&str> = rest.split_whitespace().collect();
            out.push((words[0].parse().unwrap(), words[3].parse().unwrap(), String::new()));
        } else if let Some(g) = out.last_mut() {
            if line.contains("    #") && g.2.lines().count() < 2 {
                g.2.push_str(line);
                g.2.push('\n');
            }
        }
    }
    out
}

#[test]
fn leaked_objects_are_reported_by_allocation_stack_biggest_first() {
    let o = run("leak", &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(23), "{err}");
    assert!(stdout(&o).contains("leaked"), "{}", stdout(&o));
    assert_eq!(err.matches("nevermore: ERROR:").count(), 1, "{err}");
    assert!(err.contains("nevermore: ERROR: memory-leak on address 0x"), "{err}");
    // 300000 + 8192 + 100 * 32 + 10 * 40 + 24 bytes; the objects the globals keep are not
    // leaks; the one whose pointer was left deep in dead stack frames is.
    assert!(err.contains("311816 bytes in 113 objects, from 5 allocation stacks"), "{err}");
    assert!(err.contains("object 0x") && err.contains(" of 300000 bytes; the address is at offset 0"), "{err}");
    let g = groups(&err);
    let want = [
        (300000, 1, "make_large", "large"),
        (8192, 1, "make_page", "page"),
        (3200, 100, "make_list", "list"),
        (400, 10, "make_small", "small"),
        (24, 1, "make_deep", "deep"),
    ];
    assert_eq!(g.len(), want.len(), "{err}");
    for ((bytes, objects, stack), (wb, wo, func, tag)) in g.iter().zip(want) {
        assert_eq!((*bytes, *objects), (wb, wo), "{err}");
        let at = format!(" in {func} ");
        let line = format!("leaks.c:{} ", line_of(tag));
        assert!(stack.lines().next().is_some_and(|l| l.contains(&at) && l.contains(&line)), "{func}: {stack}\n{err}");
    }
    assert!(err.contains("nevermore: exiting with status 23"), "{err}");
}

#[test]
fn leak_report_in_json_follows_the_schema() {
    let o = run("leak", &["--json"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(23), "{err}");
    let reports = json_reports(&err);
    assert_eq!(reports.len(), 1, "{err}");
    let r = &reports[0];
    assert_eq!(r["kind"], "memory-leak");
    assert_eq!(r["operation"], "exit");
    assert_eq!(r["object"]["size"], 300000);
    assert_eq!(r["leaked"]["bytes"], 311816);
    assert_eq!(r["leaked"]["objects"], 113);
    assert_eq!(r["leaked"]["stacks"], 5);
    let groups = r["leaked"]["groups"].as_array().unwrap();
    let funcs: Vec<&str> =
        groups.iter().map(|g| g["allocated"]["stack"][0]["function"].as_str().unwrap_or("?")).collect();
    assert_eq!(funcs, ["make_large", "make_page", "make_list", "make_small", "make_deep"], "{r:#}");
    assert_eq!(groups[2]["objects"], 100, "{r:#}");
    assert_eq!(groups[2]["bytes"], 3200, "{r:#}");
    assert_eq!(r["allocated"]["stack"][0]["function"], "make_large", "{r:#}");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(repo_root().join("docs/report-schema.json")).unwrap()).unwrap();
    for key in schema["required"].as_array().unwrap() {
        assert!(r.get(key.as_str().unwrap()).is_some(), "no {key} in {r:#}");
    }
    assert!(schema["properties"]["kind"]["enum"].as_array().unwrap().contains(&Value::from("memory-leak")));
    assert!(schema["properties"]["leaked"].is_object(), "the schema describes `leaked`");
}

/// Objects reachable from globals, through a list of 1000 nodes, through an interior pointer,
/// through other heap objects (a page and a large one), and from the stack of a thread still
/// blocked when main returns, are not leaks; nor is anything freed.
#[test]
fn reachable_and_freed_objects_are_not_leaks() {
    for case in ["clean", "freed"] {
        let o = run(case, &[]);
        assert_eq!(o.status.code(), Some(0), "{case}: {}", stderr(&o));
        assert!(stdout(&o).contains(case));
        assert!(!stderr(&o).contains("nevermore"), "{case}: {}", stderr(&o));
    }
}

/// `nevermore run --leaks` is detect mode with the check; with `--mode prevent` it is refused.
#[test]
fn run_leaks_flag() {
    let o = nevermore_cmd(&["run", "--leaks", "--", bin().to_str().unwrap(), "leak"], "leaks-cache").output().unwrap();
    assert_eq!(o.status.code(), Some(23), "{}", stderr(&o));
    assert!(stderr(&o).contains("311816 bytes in 113 objects, from 5 allocation stacks"), "{}", stderr(&o));
    let o =
        nevermore_cmd(&["run", "--leaks", "--mode", "prevent", "--", bin().to_str().unwrap(), "leak"], "leaks-cache")
            .output()
            .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--leaks needs detect mode"), "{}", stderr(&o));
}

/// A program that closes its standard error before it exits (coreutils do) still gets the
/// report there: the library kept a copy of it.
#[test]
fn report_reaches_a_standard_error_the_program_closed() {
    let o = run_preloaded(bin(), &["closed"], &[("NEVERMORE_OPTIONS", "mode=detect:detect_leaks=1")]);
    assert_report(&o, "memory-leak");
    assert!(stderr(&o).contains("24 bytes in 1 objects, from 1 allocation stacks"), "{}", stderr(&o));
}

/// A program that closes its standard error and opens a file of its own, which takes number
/// 2, keeps that file as it wrote it: the report goes to the standard error the program had
/// at start-up.
#[test]
fn report_never_goes_into_a_file_the_program_put_at_standard_error() {
    let file = common::scratch("leaks-reopened").join("data");
    let o = run_preloaded(
        bin(),
        &["reopened", file.to_str().unwrap()],
        &[("NEVERMORE_OPTIONS", "mode=detect:detect_leaks=1")],
    );
    assert_report(&o, "memory-leak");
    assert!(stderr(&o).contains("24 bytes in 1 objects, from 1 allocation stacks"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "data\n");
}

/// The check runs only when asked for, in detect mode; without stacks the report says so;
/// under plain `LD_PRELOAD` a leak ends the process as any report does (SIGABRT).
#[test]
fn leak_check_options() {
    let o = run_preloaded(bin(), &["leak"], &[("NEVERMORE_OPTIONS", "mode=detect")]);
    assert_ok(&o);
    assert!(!stderr(&o).contains("nevermore"), "{}", stderr(&o));
    let o = run_preloaded(bin(), &["leak"], &[("NEVERMORE_OPTIONS", "mode=detect:detect_leaks=1")]);
    assert_report(&o, "memory-leak");
    assert!(stderr(&o).contains("311816 bytes in 113 objects"), "{}", stderr(&o));
    let o = run_preloaded(bin(), &["leak"], &[("NEVERMORE_OPTIONS", "mode=detect:detect_leaks=1:stacks=0")]);
    assert_report(&o, "memory-leak");
    let err = stderr(&o);
    assert!(err.contains("311816 bytes in 113 objects, from 1 allocation stacks"), "{err}");
    assert!(err.contains("(allocation stacks not recorded: stacks=0)"), "{err}");
    let o = run_preloaded(bin(), &["leak"], &[("NEVERMORE_OPTIONS", "detect_leaks=1")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("detect_leaks"), "{}", stderr(&o));
}
