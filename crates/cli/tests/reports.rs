//! Reports as people see them: `nevermore run --mode detect` prints, for every kind of error,
//! the stack of the bad access (or call), the free and the allocation, symbolized as
//! `function file:line`, for code with and without frame pointers and in libraries loaded at run
//! time; JSON reports parse and follow `docs/report-schema.json`; exit statuses; forked-and-exec'd
//! children; `nevermore demo`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::*;
use serde_json::Value;

/// The same program built with frame pointers at -O0, and without them at -O2 (the unwinder
/// must then use `.eh_frame`).
fn bins() -> &'static [PathBuf; 2] {
    static BINS: OnceLock<[PathBuf; 2]> = OnceLock::new();
    BINS.get_or_init(|| {
        [
            compile("reports.c", &["-O0", "-fno-omit-frame-pointer", "-ldl"]),
            compile("reports.c", &["-O2", "-fomit-frame-pointer", "-ldl"]),
        ]
    })
}

/// The line of `tests/c/reports.c` carrying the marker `AT:<tag>`.
fn line_of(tag: &str) -> usize {
    let src = std::fs::read_to_string(repo_root().join("tests/c/reports.c")).unwrap();
    let needle = format!("AT:{tag} ");
    src.lines().position(|l| l.contains(&needle)).unwrap_or_else(|| panic!("no marker {tag}")) + 1
}

fn nevermore(args: &[&str]) -> Command {
    nevermore_cmd(args, "reports-cache")
}

fn run_detect(bin: &Path, args: &[&str], extra: &[&str]) -> Output {
    let mut a = vec!["run", "--mode", "detect"];
    a.extend_from_slice(extra);
    a.push("--");
    a.push(bin.to_str().unwrap());
    a.extend_from_slice(args);
    nevermore(&a).output().unwrap()
}

/// The report's sections: (access stack, free stack, allocation stack).
fn sections(err: &str) -> (String, String, String) {
    let start = err.find("nevermore: ERROR:").expect("a report");
    let rep = &err[start..];
    let freed = rep.find("freed by thread");
    let alloc = rep.find("previously allocated by thread");
    let end_access = freed.or(alloc).unwrap_or(rep.len());
    let access = rep[..end_access].to_string();
    let free = freed.map_or(String::new(), |f| rep[f..alloc.unwrap_or(rep.len())].to_string());
    let allocated = alloc.map_or(String::new(), |a| rep[a..].to_string());
    (access, free, allocated)
}

/// Asserts a symbolized frame `in <func> .../reports.c:<line>` in `section`.
fn assert_frame(section: &str, func: &str, tag: &str, what: &str, err: &str) {
    let line = line_of(tag);
    let ok = section.lines().any(|l| l.contains(&format!(" in {func} ")) && l.contains(&format!("reports.c:{line} ")));
    assert!(ok, "{what}: expected `in {func} ...reports.c:{line}` in:\n{section}\nfull stderr:\n{err}");
}

struct Case {
    arg: &'static str,
    kind: &'static str,
    access: (&'static str, &'static str),
    free: Option<(&'static str, &'static str)>,
    alloc: Option<(&'static str, &'static str)>,
}

const CASES: &[Case] = &[
    Case {
        arg: "uaf",
        kind: "heap-use-after-free",
        access: ("touch_record", "uaf-access"),
        free: Some(("drop_record", "drop")),
        alloc: Some(("make_record", "make")),
    },
    Case {
        arg: "double-free",
        kind: "double-free",
        access: ("drop_again", "double-free"),
        free: Some(("drop_record", "drop")),
        alloc: Some(("make_record", "make")),
    },
    Case {
        arg: "invalid-free",
        kind: "invalid-free",
        access: ("free_inside", "invalid-free"),
        free: None,
        alloc: Some(("make_record", "make")),
    },
    Case {
        arg: "size-mismatch",
        kind: "size-mismatch",
        access: ("drop_half", "size-mismatch"),
        free: None,
        alloc: Some(("make_record", "make")),
    },
    Case {
        arg: "alloc-dealloc-mismatch",
        kind: "alloc-dealloc-mismatch",
        access: ("delete_record", "alloc-dealloc-mismatch"),
        free: None,
        alloc: Some(("new_records", "make-new-array")),
    },
    Case {
        arg: "invalid-pointer",
        kind: "invalid-pointer",
        access: ("ask_size_inside", "invalid-pointer"),
        free: None,
        alloc: Some(("make_record", "make")),
    },
    Case {
        arg: "overflow",
        kind: "heap-buffer-overflow",
        access: ("write_past", "overflow"),
        free: None,
        alloc: Some(("make_big", "make-big")),
    },
    Case {
        arg: "overflow-grown",
        kind: "heap-buffer-overflow",
        access: ("drop_grown", "drop-grown"),
        free: None,
        alloc: Some(("make_grown", "make-grown")),
    },
    Case {
        arg: "overflow-room",
        kind: "heap-buffer-overflow",
        access: ("write_far_past", "overflow-room"),
        free: None,
        alloc: Some(("make_grown", "make-grown")),
    },
    Case {
        arg: "overflow-page",
        kind: "heap-buffer-overflow",
        access: ("write_past", "overflow"),
        free: None,
        alloc: Some(("make_big", "make-big")),
    },
    Case {
        arg: "overflow-page-object",
        kind: "heap-buffer-overflow",
        access: ("write_past", "overflow"),
        free: None,
        alloc: Some(("make_big", "make-big")),
    },
    Case {
        arg: "uaf-big",
        kind: "heap-use-after-free",
        access: ("read_big", "uaf-big"),
        free: Some(("drop_big", "drop-big")),
        alloc: Some(("make_big", "make-big")),
    },
    Case {
        arg: "underflow",
        kind: "heap-buffer-overflow",
        access: ("write_before", "underflow"),
        free: None,
        alloc: Some(("make_record", "make")),
    },
    // Every stack of this one is walked through a frame whose unwind rules point past the top
    // of the stack it runs on: the walk ends there (it read past the top, and died of SIGSEGV
    // in the allocator, before the first report).
    Case {
        arg: "switched-stack",
        kind: "heap-use-after-free",
        access: ("touch_record", "uaf-access"),
        free: Some(("drop_record", "drop")),
        alloc: Some(("make_record", "make")),
    },
    Case {
        arg: "underflow-read",
        kind: "heap-buffer-overflow",
        access: ("read_before", "underflow-read"),
        free: None,
        alloc: Some(("make_record", "make")),
    },
    Case { arg: "wild", kind: "wild-access", access: ("touch_wild", "wild"), free: None, alloc: None },
    Case { arg: "oom", kind: "out-of-memory", access: ("huge_new", "oom"), free: None, alloc: None },
];

fn check_case(bin: &Path, c: &Case) {
    let o = run_detect(bin, &[c.arg], &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(23), "{}: status {:?}\n{err}", c.arg, o.status);
    let first = err.lines().find(|l| l.contains("nevermore:")).unwrap_or_default();
    assert!(first.contains(&format!("nevermore: ERROR: {} on address 0x", c.kind)), "{}: first line {first}", c.arg);
    assert!(!stdout(&o).contains("survived"));
    let (access, free, alloc) = sections(&err);
    assert_frame(&access, c.access.0, c.access.1, "access/call stack", &err);
    match c.free {
        Some((f, t)) => assert_frame(&free, f, t, "free stack", &err),
        None => assert!(free.is_empty(), "{}: unexpected free stack\n{err}", c.arg),
    }
    match c.alloc {
        Some((f, t)) => assert_frame(&alloc, f, t, "allocation stack", &err),
        None => assert!(alloc.is_empty(), "{}: unexpected allocation stack\n{err}", c.arg),
    }
}

#[test]
fn every_kind_names_function_and_line_with_frame_pointers() {
    for c in CASES {
        check_case(&bins()[0], c);
    }
}

#[test]
fn every_kind_names_function_and_line_without_frame_pointers() {
    for c in CASES {
        check_case(&bins()[1], c);
    }
}

/// Runs `reports CASE` under `nevermore run` in both modes; asserts it was stopped with the
/// report's status (23), a first report of `kind`, and the lines `needles` in its report.
fn reported_in_both_modes(case: &str, kind: &str, needles: &[&str]) {
    for mode in ["detect", "prevent"] {
        let o = nevermore(&["run", "--mode", mode, "--", bins()[0].to_str().unwrap(), case]).output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(23), "{case}, {mode}: {err}\n{}", stdout(&o));
        assert!(err.contains(&format!("nevermore: ERROR: {kind} on address 0x")), "{case}, {mode}: {err}");
        for needle in needles {
            assert!(err.contains(needle), "{case}, {mode}: no `{needle}` in:\n{err}");
        }
        assert!(!stdout(&o).contains("survived"), "{case}, {mode}");
    }
}

/// A large object cut down by `realloc` where it is gives back the pages past its new end;
/// once it is freed, an access through a dangling pointer into those pages is a use after
/// free like any other (it was a plain SIGSEGV, without a report), in both modes.
#[test]
fn use_after_free_in_the_pages_a_cut_gave_back_is_reported() {
    reported_in_both_modes(
        "uaf-cut",
        "heap-use-after-free",
        &["READ of 0x", "the large object at this address was freed"],
    );
}

/// A write into the gap that `realloc` left between a grown large object's canary and its
/// guard page is found at `free`, in both modes, and the report names the byte written (the
/// program writes 64 bytes past the object's end) rather than the canary's start.
#[test]
fn overflow_past_a_grown_object_names_the_byte_written() {
    reported_in_both_modes(
        "overflow-grown",
        "heap-buffer-overflow",
        &["object 0x", " of 300000 bytes; the address is at offset 300064 "],
    );
}

/// A write or a read 8 bytes before an object that starts an alias page (here the program's
/// first, at the start of the arena's first mirror, below which the arena's reservation keeps a
/// no-access page) traps, and is reported as the underflow it is, with the object, in both modes
/// (before the first mirror the write was a bare SIGSEGV without a report, and the read, where
/// the kernel had put a table of the library's there, read it unseen; elsewhere in the arena
/// each was a `wild-access` without the object).
#[test]
fn an_access_before_an_object_is_reported_with_the_object() {
    for (case, op) in [("underflow", "WRITE"), ("underflow-read", "READ")] {
        reported_in_both_modes(
            case,
            "heap-buffer-overflow",
            &[
                &format!("{op} of 0x"),
                "the access is before the start of the object",
                " of 48 bytes; the address is at offset -8 ",
            ],
        );
    }
}

#[test]
fn prevent_mode_says_stacks_are_not_recorded() {
    let o = nevermore(&["run", "--", bins()[0].to_str().unwrap(), "double-free"]).output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(23), "{err}");
    assert!(err.contains("nevermore: ERROR: double-free "), "{err}");
    assert!(err.contains("not recorded (prevent mode"), "{err}");
    let (access, _, _) = sections(&err);
    assert_frame(&access, "drop_again", "double-free", "call stack", &err);
}

/// Stacks through libraries loaded at run time name them, however many are loaded and however
/// quickly one follows another: 70 copies of a plugin, built without frame pointers, are loaded
/// back to back (every other one unloaded again at once, so copies land where unloaded ones
/// were), each allocating and freeing at once; the last one's use-after-free is reported with
/// that copy's functions and the program's `main` below them in every stack. Also when the
/// program loads them by a relative path from another directory than `nevermore run`'s.
#[test]
fn libraries_loaded_one_after_another_are_named_in_stacks() {
    let plugin = compile("late_plugin.c", &["-shared", "-fPIC", "-O2", "-fomit-frame-pointer"]);
    // Canonical: a relative path is made absolute with the working directory, which has no
    // symbolic links in it.
    let dir = scratch("late-modules").canonicalize().unwrap();
    const COPIES: usize = 70;
    for i in 0..COPIES {
        std::fs::copy(&plugin, dir.join(format!("plugin{i}.so"))).unwrap();
    }
    let bin = compile("late_module.c", &["-ldl"]);
    for how in ["absolute", "relative"] {
        late_modules_report(&bin, &dir, COPIES, how);
    }
}

fn late_modules_report(bin: &Path, dir: &Path, copies: usize, how: &str) {
    let o = run_detect(bin, &[dir.to_str().unwrap(), &copies.to_string(), how], &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(23), "{err}");
    assert!(err.contains("nevermore: ERROR: heap-use-after-free on address 0x"), "{err}");
    assert!(!stdout(&o).contains("survived"), "{err}");
    let last = format!("{}/plugin{}.so+0x", dir.display(), copies - 1);
    let (access, free, alloc) = sections(&err);
    for (section, func, what) in [
        (&access, "touch_late", "access stack"),
        (&free, "late_bug", "free stack"),
        (&alloc, "make_late", "allocation stack"),
    ] {
        let first = section.lines().find(|l| l.contains("#0 ")).unwrap_or_default();
        assert!(
            first.contains(&format!(" in {func} ")) && first.contains("late_plugin.c:") && first.contains(&last),
            "{how}, {what}: expected `{func}` of plugin{} first:\n{section}\nfull stderr:\n{err}",
            copies - 1
        );
        assert!(
            section.lines().any(|l| l.contains(" in main ") && l.contains("late_module.c:")),
            "{how}, {what}: `main` of late_module.c missing:\n{section}\nfull stderr:\n{err}"
        );
    }
}

/// Checks `v` against the required fields and types of the schema's `properties`.
fn check_schema(v: &Value, schema: &Value, path: &str) {
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if !types.is_empty() {
        let actual = match v {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        assert!(
            types.contains(&actual) || (actual == "integer" && types.contains(&"number")),
            "{path}: {actual} is not one of {types:?}: {v}"
        );
    }
    if let Some(e) = schema["enum"].as_array() {
        assert!(e.contains(v), "{path}: {v} not in {e:?}");
    }
    if let (Value::Object(o), Some(req)) = (v, schema["required"].as_array()) {
        for k in req {
            assert!(o.contains_key(k.as_str().unwrap()), "{path}: missing {k}");
        }
    }
    if let (Value::Object(o), Some(props)) = (v, schema["properties"].as_object()) {
        for (k, s) in props {
            if let Some(x) = o.get(k) {
                check_schema(x, resolve(s), &format!("{path}.{k}"));
            }
        }
    }
    if let (Value::Array(a), Some(items)) = (v, schema.get("items")) {
        for (i, x) in a.iter().enumerate() {
            check_schema(x, resolve(items), &format!("{path}[{i}]"));
        }
    }
}

fn schema() -> &'static Value {
    static S: OnceLock<Value> = OnceLock::new();
    S.get_or_init(|| {
        serde_json::from_str(&std::fs::read_to_string(repo_root().join("docs/report-schema.json")).unwrap()).unwrap()
    })
}

/// Follows a local `$ref` (`#/$defs/NAME`).
fn resolve(s: &Value) -> &Value {
    match s["$ref"].as_str() {
        Some(r) => &schema()["$defs"][r.trim_start_matches("#/$defs/")],
        None => s,
    }
}

/// An overflow of an object the program never frees is found by detect mode's check at exit:
/// the report's operation is `exit`, its object the record (its allocation stack names the
/// function and line that made it), and it follows the JSON schema too. The program itself
/// ends normally (status 0 without the library).
#[test]
fn an_overflow_of_an_object_never_freed_is_reported_at_exit() {
    for bin in bins() {
        let o = run_detect(bin, &["overflow-kept"], &[]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(23), "{err}");
        let first = err.lines().find(|l| l.contains("nevermore:")).unwrap_or_default();
        assert!(first.contains("nevermore: ERROR: heap-buffer-overflow on address 0x"), "{first}");
        assert!(err.contains("exit of 0x") && err.contains("found at exit: the object was never freed"), "{err}");
        assert!(err.contains(" of 48 bytes; the address is at offset 48 from its start"), "{err}");
        let (_, _, alloc) = sections(&err);
        assert_frame(&alloc, "make_record", "make", "allocation stack", &err);
        let o = run_detect(bin, &["overflow-kept"], &["--json"]);
        let reports = json_reports(&stderr(&o));
        assert_eq!(reports.len(), 1, "{}", stderr(&o));
        let r = &reports[0];
        check_schema(r, schema(), "report");
        assert_eq!(r["kind"], "heap-buffer-overflow");
        assert_eq!(r["operation"], "exit", "{r:#}");
        assert_eq!(r["object"]["size"], 48, "{r:#}");
        assert_eq!(r["allocated"]["stack"][0]["function"], "make_record", "{r:#}");
        let o = nevermore(&[
            "run",
            "--mode",
            "detect",
            "--option",
            "check_at_exit=0",
            "--",
            bin.to_str().unwrap(),
            "overflow-kept",
        ])
        .output()
        .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
}

/// The operation's line names the pointer the call was given where the report's address is
/// another: `free of` the object whose canary was overwritten (the address: the first byte
/// written over), `memcpy of` the buffer it was to copy past its object's end (the address:
/// the object's end). JSON reports give it as `pointer`. In both modes.
#[test]
fn the_operation_line_names_the_pointer_the_call_was_given() {
    for (case, op, from_start) in [("overflow-freed", "free", 0), ("overflow-copy", "memcpy", 8)] {
        for mode in ["detect", "prevent"] {
            for json in [false, true] {
                let mut a = vec!["run", "--mode", mode];
                if json {
                    a.push("--json");
                }
                a.extend(["--", bins()[0].to_str().unwrap(), case]);
                let o = nevermore(&a).output().unwrap();
                let (out, err) = (stdout(&o), stderr(&o));
                assert_eq!(o.status.code(), Some(23), "{case}, {mode}: {err}");
                let start = out
                    .lines()
                    .find_map(|l| l.strip_prefix("object 0x"))
                    .and_then(|h| usize::from_str_radix(h.trim(), 16).ok())
                    .unwrap_or_else(|| panic!("{case}, {mode}: no object printed: {out}"));
                // The record is 48 bytes; both overflows begin at its end.
                let (pointer, addr) = (format!("{:#x}", start + from_start), format!("{:#x}", start + 48));
                if json {
                    let reports = json_reports(&err);
                    assert_eq!(reports.len(), 1, "{err}");
                    let r = &reports[0];
                    check_schema(r, schema(), "report");
                    assert_eq!(r["kind"], "heap-buffer-overflow", "{r:#}");
                    assert_eq!(r["operation"], op, "{r:#}");
                    assert_eq!(r["address"], addr.as_str(), "{r:#}");
                    assert_eq!(r["pointer"], pointer.as_str(), "{r:#}");
                    assert_eq!(r["object"]["start"], format!("{start:#x}").as_str(), "{r:#}");
                    assert_eq!(r["object"]["offset"], 48, "{r:#}");
                } else {
                    assert!(
                        err.contains(&format!("ERROR: heap-buffer-overflow on address {addr} ")),
                        "{case}, {mode}: {err}"
                    );
                    assert!(err.contains(&format!("==   {op} of {pointer}: ")), "{case}, {mode}: {err}");
                    let object = format!("object {start:#x} of 48 bytes; the address is at offset 48 from its start");
                    assert!(err.contains(&object), "{case}, {mode}: {err}");
                }
            }
        }
    }
}

#[test]
fn json_reports_parse_and_follow_the_schema() {
    for (case, kind, func) in [
        ("uaf", "heap-use-after-free", "touch_record"),
        ("double-free", "double-free", "drop_again"),
        ("wild", "wild-access", "touch_wild"),
        ("size-mismatch", "size-mismatch", "drop_half"),
        ("alloc-dealloc-mismatch", "alloc-dealloc-mismatch", "delete_record"),
    ] {
        for bin in bins() {
            let o = run_detect(bin, &[case], &["--json"]);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(23), "{err}");
            let reports = json_reports(&err);
            assert_eq!(reports.len(), 1, "{err}");
            let r = &reports[0];
            check_schema(r, schema(), "report");
            assert_eq!(r["kind"], kind);
            assert_eq!(r["action"], "exit");
            assert_eq!(r["exit_status"], 23);
            assert_eq!(r["stack"][0]["function"], func, "{r:#}");
            assert!(r["stack"][0]["file"].as_str().unwrap().ends_with("reports.c"));
            assert_eq!(r["stack"][0]["build_id"].as_str(), Some(build_id(bin).as_str()), "{r:#}");
            assert_eq!(r["claimed_size"], if case == "size-mismatch" { Value::from(24) } else { Value::Null }, "{r:#}");
            // The pointer each call was given is the report's address.
            assert_eq!(r["pointer"], Value::Null, "{r:#}");
            if case == "size-mismatch" {
                assert_eq!(r["object"]["size"], 48, "{r:#}");
                assert_eq!(r["allocated"]["stack"][0]["function"], "make_record", "{r:#}");
                assert!(r["freed"].is_null(), "{r:#}");
            } else if case == "alloc-dealloc-mismatch" {
                assert_eq!(r["object"]["size"], 48, "{r:#}");
                assert_eq!(r["allocated"]["stack"][0]["function"], "new_records", "{r:#}");
                assert_eq!(r["allocated"]["stack"][0]["line"], line_of("make-new-array"));
                assert!(r["freed"].is_null(), "{r:#}");
                assert_eq!(r["operation"], "operator delete", "{r:#}");
                let what = r["description"].as_str().unwrap();
                assert!(what.contains("allocated by operator new[], to be freed by operator delete[]"), "{r:#}");
            } else if case != "wild" {
                assert_eq!(r["allocated"]["stack"][0]["function"], "make_record", "{r:#}");
                assert_eq!(r["allocated"]["stack"][0]["line"], line_of("make"));
                assert_eq!(r["freed"]["stack"][0]["function"], "drop_record", "{r:#}");
            }
        }
    }
}

#[test]
fn exit_statuses() {
    let o = nevermore(&["run", "--", bins()[0].to_str().unwrap(), "exit", "7"]).output().unwrap();
    assert_eq!(o.status.code(), Some(7));
    let o = run_detect(&bins()[0], &["exit", "0"], &[]);
    assert_eq!(o.status.code(), Some(0));
    // A detection: 23 by default, the user's exitcode when given.
    let o = run_detect(&bins()[0], &["uaf"], &[]);
    assert_eq!(o.status.code(), Some(23));
    let o = run_detect(&bins()[0], &["uaf"], &["-o", "exitcode=99"]);
    assert_eq!(o.status.code(), Some(99));
    // Plain LD_PRELOAD: SIGABRT.
    let o = run_preloaded(&bins()[0], &["uaf"], &[("NEVERMORE_OPTIONS", "mode=detect")]);
    assert_report(&o, "heap-use-after-free");
}

#[test]
fn report_of_a_forked_and_execd_child_is_shown() {
    let o = run_detect(&bins()[0], &["forkexec"], &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(stdout(&o).contains("child exited 23"), "{}", stdout(&o));
    let (access, free, alloc) = sections(&err);
    assert!(err.contains("nevermore: ERROR: heap-use-after-free "), "{err}");
    assert_frame(&access, "touch_record", "uaf-access", "child access", &err);
    assert_frame(&free, "drop_record", "drop", "child free", &err);
    assert_frame(&alloc, "make_record", "make", "child allocation", &err);
}

/// The number after `<what> tid ` in the program's output.
fn tid_of(out: &str, what: &str) -> u32 {
    let key = format!("{what} tid ");
    let at = out.find(&key).unwrap_or_else(|| panic!("no `{key}` in:\n{out}")) + key.len();
    out[at..].split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn reports_name_the_threads_that_allocated_freed_and_touched() {
    let o = run_detect(&bins()[1], &["tids"], &[]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(23), "{err}");
    let (alloc_tid, free_tid, access_tid) = (tid_of(&out, "alloc"), tid_of(&out, "free"), tid_of(&out, "access"));
    assert!(alloc_tid != free_tid && free_tid != access_tid && alloc_tid != access_tid, "{out}");
    assert!(err.contains("heap-use-after-free on address 0x"), "{err}");
    assert!(err.contains(&format!("(thread {access_tid})")), "access thread {access_tid}:\n{err}");
    assert!(err.contains(&format!("freed by thread {free_tid} here:")), "free thread {free_tid}:\n{err}");
    assert!(
        err.contains(&format!("previously allocated by thread {alloc_tid} here:")),
        "alloc thread {alloc_tid}:\n{err}"
    );
}

#[test]
fn a_forked_child_reports_its_own_thread_id() {
    // The parent's thread allocated (and so learnt its id) before the fork; the child's report
    // must carry the child's id everywhere, not the parent's.
    let o = run_detect(&bins()[1], &["fork-tids"], &[]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(out.contains("child exited 23"), "{out}");
    let (parent, child) = (tid_of(&out, "parent"), tid_of(&out, "child"));
    assert_ne!(parent, child);
    assert!(err.contains(&format!("(thread {child})")), "child {child}:\n{err}");
    assert!(err.contains(&format!("freed by thread {child} here:")), "child {child}:\n{err}");
    assert!(err.contains(&format!("previously allocated by thread {child} here:")), "child {child}:\n{err}");
    assert!(!err.contains(&format!("thread {parent}")), "parent {parent} named:\n{err}");
}

#[test]
fn report_file_gets_the_symbolized_report() {
    let dir = scratch("report-file");
    let file = dir.join("r.txt");
    let o = run_detect(&bins()[1], &["uaf"], &["--report", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(23));
    assert!(!stderr(&o).contains("nevermore: ERROR"), "{}", stderr(&o));
    let text = std::fs::read_to_string(&file).unwrap();
    let (access, _, _) = sections(&text);
    assert_frame(&access, "touch_record", "uaf-access", "report file", &text);
}

#[test]
fn demo_shows_glibc_exploited_and_nevermore_stopping_it() {
    let o = nevermore(&["demo"]).output().unwrap();
    assert_ok(&o);
    let out = stdout(&o);
    let row = |name: &str| out.lines().rev().find(|l| l.starts_with(name)).unwrap_or_default().to_string();
    assert!(row("glibc malloc").contains("EXPLOITED"), "{out}");
    assert!(row("nevermore detect").contains("stopped: heap-use-after-free reported (exit 23)"), "{out}");
    assert!(row("nevermore prevent").contains("stopped"), "{out}");
    assert!(out.contains("WIN: attacker_wins() ran"), "{out}");
    assert!(out.contains(" in rename_user ") && out.contains(" in logout ") && out.contains(" in login "), "{out}");
}

/// A report that nobody would see (no `report_path`, and standard error `/dev/null` or closed,
/// as daemons leave it) also goes to the system log, a datagram per line tagged
/// `nevermore[pid]`; with standard error visible it does not, unless `syslog=1`; with
/// `syslog=0` never; under a seccomp filter only with `syslog=1`; a full log does not hold
/// the process. The log's socket here is the test's own (`syslog_path`).
#[test]
fn unseen_reports_go_to_the_system_log() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::UnixDatagram;
    use std::process::Stdio;
    let dir = scratch("syslog");
    let path = dir.join("log.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    // The program may run as nobody.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_millis(300))).unwrap();
    let bin = compile("misuse.c", &[]);
    let opts = |extra: &str| format!("syslog_path={}:{extra}", path.display());
    let run = |extra: &str, err: Stdio| {
        let mut c = program(&bin);
        c.arg("double-free-small").env("LD_PRELOAD", lib_path()).env("NEVERMORE_OPTIONS", opts(extra));
        c.stdout(Stdio::null()).stderr(err).output().unwrap()
    };
    let received = || {
        let (mut lines, mut buf) = (Vec::new(), [0u8; 4096]);
        while let Ok(n) = sock.recv(&mut buf) {
            lines.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        lines
    };
    let reported = |lines: &[String]| {
        !lines.is_empty()
            && lines.iter().all(|l| l.starts_with("<11>nevermore[") && !l.contains('\n'))
            && lines.iter().any(|l| l.contains("nevermore: ERROR: double-free"))
    };
    let sigabrt = |o: &Output| {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(o.status.signal(), Some(6), "{:?}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
    };

    let o = run("", Stdio::null());
    sigabrt(&o);
    let lines = received();
    assert!(reported(&lines), "stderr /dev/null: {lines:?}");

    let mut c = program(Path::new("/bin/sh"));
    c.args(["-c", "exec 2>&-; exec \"$0\" double-free-small"]).arg(&bin);
    let o = c.env("LD_PRELOAD", lib_path()).env("NEVERMORE_OPTIONS", opts("")).stdout(Stdio::null()).output().unwrap();
    sigabrt(&o);
    let lines = received();
    assert!(reported(&lines), "stderr closed: {lines:?}");

    let o = run("", Stdio::piped());
    assert_report(&o, "double-free");
    assert_eq!(received(), Vec::<String>::new(), "stderr visible");

    let o = run("syslog=1", Stdio::piped());
    assert_report(&o, "double-free");
    let lines = received();
    assert!(reported(&lines), "syslog=1: {lines:?}");

    let o = run("syslog=0", Stdio::null());
    sigabrt(&o);
    assert_eq!(received(), Vec::<String>::new(), "syslog=0");

    // Under a seccomp filter (which might kill the process for `socket`), only when asked.
    let wrapper = compile("seccomp_run.c", &[]);
    let filtered = |extra: &str| {
        let mut c = program(&wrapper);
        c.arg(&bin).arg("double-free-small").env("LD_PRELOAD", lib_path()).env("NEVERMORE_OPTIONS", opts(extra));
        c.stdout(Stdio::null()).stderr(Stdio::null()).output().unwrap()
    };
    sigabrt(&filtered(""));
    assert_eq!(received(), Vec::<String>::new(), "seccomp filter, auto");
    sigabrt(&filtered("syslog=1"));
    let lines = received();
    assert!(reported(&lines), "seccomp filter, syslog=1: {lines:?}");

    // A log whose reader is stuck (its queue holds about ten datagrams) delays a report a
    // little, never for good.
    for i in 0..3 {
        let mut c = program(&bin);
        c.arg("double-free-small").env("LD_PRELOAD", lib_path()).env("NEVERMORE_OPTIONS", opts("syslog=1"));
        let o = wait_with_deadline(c, 20, &format!("report {i} to a full log"));
        assert_report(&o, "double-free");
    }
    assert!(reported(&received()), "full log");
}

/// A report reaches `report_path` whatever a daemon did since it started: wrote a process
/// title over its environment (the path was read from there at the first report, and the
/// stats of `perl -e '$0 = ...'` went to a file named with spaces), changed directory (a
/// relative path is taken from where it started), dropped root for `nobody` (the file exists
/// and is opened at start-up; its directory is root's), closed every descriptor and put a file
/// of its own at their numbers (the report went into that file; now the file is opened
/// again), or pointed standard error at `/dev/null`.
#[test]
fn reports_reach_report_path_whatever_the_daemon_did() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::ExitStatusExt;
    let bin = compile("daemon.c", &[]);
    let mut cases = vec!["title", "chdir", "closeall", "null"];
    // Dropping root takes root; the unprivileged pass starts as nobody already.
    if is_root() && !unprivileged_run() {
        cases.push("setuid");
    }
    for mode in ["prevent", "detect"] {
        for case in &cases {
            let dir = scratch(&format!("daemon-{case}-{mode}"));
            if *case == "setuid" {
                // Made by its owner beforehand, as docs/usage.md asks for a daemon that drops
                // privileges.
                std::fs::write(dir.join("r.log"), "").unwrap();
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
            }
            let mine = dir.join("mine");
            let mut c = program(&bin);
            c.arg(case);
            if *case == "closeall" {
                c.arg(&mine);
            }
            let o = c
                .current_dir(&dir)
                .env("LD_PRELOAD", lib_path())
                .env("NEVERMORE_OPTIONS", format!("mode={mode}:report_path=r.log"))
                .output()
                .unwrap();
            let (out, err) = (stdout(&o), stderr(&o));
            let what = format!("{mode}, {case}:\n{out}\n{err}");
            assert_eq!(o.status.signal(), Some(6), "{what}");
            assert_eq!(out, "READY\n", "{what}");
            let log = std::fs::read_to_string(dir.join("r.log")).unwrap_or_default();
            assert_eq!(log.matches("nevermore: ERROR: double-free").count(), 1, "{what}\nr.log:\n{log}");
            assert!(!err.contains("double-free") && !err.contains("cannot open"), "{what}");
            if *case == "closeall" {
                assert_eq!(std::fs::read_to_string(&mine).unwrap(), "mine\n", "{what}");
            }
        }
    }
}

/// The GNU build id of the ELF file at `path`, in hexadecimal.
fn build_id(path: &Path) -> String {
    use object::Object;
    let data = std::fs::read(path).unwrap();
    let id = object::File::parse(&*data).unwrap().build_id().unwrap().expect("a build id");
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every raw frame names its module's build id, as the module's file has it: the program's
/// own and the C library's.
#[test]
fn frames_carry_their_module_s_build_id() {
    let prog = &bins()[1];
    let raw = stderr(&run_preloaded(prog, &["uaf"], &[("NEVERMORE_OPTIONS", "mode=detect")]));
    let frames: Vec<_> = raw.lines().filter(|l| l.contains("     #")).collect();
    assert!(frames.len() >= 6, "{raw}");
    let suffix = format!("{}+0x", prog.display());
    let own: Vec<_> = frames.iter().filter(|l| l.contains(&suffix)).collect();
    assert!(own.len() >= 3, "{raw}");
    let id = build_id(prog);
    assert!(own.iter().all(|l| l.ends_with(&format!(" (BuildId: {id})"))), "not {id}:\n{raw}");
    let libc = frames.iter().find(|l| l.contains("/libc.so")).unwrap_or_else(|| panic!("no libc frame:\n{raw}"));
    let path = &libc[libc.find(" /").unwrap() + 1..libc.find("+0x").unwrap()];
    assert!(libc.ends_with(&format!(" (BuildId: {})", build_id(Path::new(path)))), "{libc}");
}

/// A copy of the -O2 program in a scratch directory named `name`, and the raw text report of
/// its `uaf` case under plain `LD_PRELOAD`: (directory, program, report).
fn report_of_a_copy(name: &str) -> (PathBuf, PathBuf, String) {
    let dir = scratch(name);
    let prog = dir.join("reports");
    std::fs::copy(&bins()[1], &prog).unwrap();
    let raw = stderr(&run_copied(&prog, "mode=detect"));
    (dir, prog, raw)
}

/// The `uaf` case of a program just copied, under `options`. Another test's child may hold
/// the copy's file open for writing between its fork and its exec (the descriptor is
/// inherited), and the exec fails with ETXTBSY meanwhile: it is made again.
fn run_copied(prog: &Path, options: &str) -> Output {
    for _ in 0..100 {
        let o = program(prog).arg("uaf").env("LD_PRELOAD", lib_path()).env("NEVERMORE_OPTIONS", options).output();
        match o {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            o => return o.expect("spawn the program"),
        }
    }
    panic!("{} stayed busy (ETXTBSY)", prog.display());
}

/// `nevermore symbolize ARGS` given `input` on standard input.
fn symbolize(args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut a = vec!["symbolize"];
    a.extend_from_slice(args);
    let mut child = nevermore(&a)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Reports written without `nevermore run` (plain `LD_PRELOAD`, a `report_path` file, the
/// system log) hold raw frames (`module+0xOFF`); `nevermore symbolize` names their functions
/// and lines, also after a log's prefix on every line (a journal's date, host and tag), for
/// text and JSON reports, and reads the modules below `--root` for a program that ran under
/// another root directory.
#[test]
fn symbolize_names_the_frames_of_reports_written_without_run() {
    // The program at a path of its own, so that it can be moved below a root afterwards.
    let (dir, prog, raw) = report_of_a_copy("symbolize");
    assert!(raw.contains(&format!("{}+0x", prog.display())), "no raw frame of the program:\n{raw}");
    assert!(!raw.contains(" in touch_record "), "{raw}");
    let tag = "Dec 05 01:00:00 host nevermore[1]: ";
    let journal: String = raw.lines().map(|l| format!("{tag}{l}\n")).collect();
    let o = symbolize(&[], &journal);
    assert_ok(&o);
    let text = stdout(&o);
    assert!(text.lines().all(|l| l.starts_with(tag)), "{text}");
    let (access, free, alloc) = sections(&text);
    assert_frame(&access, "touch_record", "uaf-access", "access stack", &text);
    assert_frame(&free, "drop_record", "drop", "free stack", &text);
    assert_frame(&alloc, "make_record", "make", "allocation stack", &text);

    let json = stderr(&run_copied(&prog, "mode=detect:report_format=json"));
    let file = dir.join("report.json");
    std::fs::write(&file, &json).unwrap();
    let o = nevermore(&["symbolize", file.to_str().unwrap()]).output().unwrap();
    assert_ok(&o);
    let out = stdout(&o);
    let report: Value = out
        .lines()
        .find(|l| l.contains("\"nevermore_report\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap_or_else(|| panic!("no report in:\n{out}"));
    let frames = report["stack"].as_array().unwrap();
    let line = line_of("uaf-access") as u64;
    assert!(
        frames.iter().any(|f| f["function"] == "touch_record" && f["line"] == line),
        "no frame touch_record at line {line}: {report}"
    );

    // Moved below a root, as a container's or a chroot's files are seen from outside.
    let root = dir.join("root");
    let moved = root.join(prog.strip_prefix("/").unwrap());
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(&prog, &moved).unwrap();
    let o = symbolize(&[], &raw);
    assert!(!stdout(&o).contains(" in touch_record "), "{}", stdout(&o));
    let o = symbolize(&["--root", root.to_str().unwrap()], &raw);
    assert_ok(&o);
    let (access, _, _) = sections(&stdout(&o));
    assert_frame(&access, "touch_record", "uaf-access", "access stack, --root", &stdout(&o));
}

/// A program replaced since its report (rebuilt, upgraded) is another build: its frames are
/// not named from the new file, whose code at those offsets is another, but say why, in text
/// and JSON. A debug file of the reported build in a debug directory
/// (`.build-id/ab/cdef....debug`) names them again, also with the program's file stripped, and
/// so does one the stripped program links to (`.gnu_debuglink`).
#[test]
fn symbolize_reads_only_the_build_that_ran() {
    let (dir, prog, raw) = report_of_a_copy("symbolize-build");
    let json = stderr(&run_copied(&prog, "mode=detect:report_format=json"));
    let id = build_id(&prog);
    // Its debug information, as a distribution's debug package installs it.
    let debug_dir = dir.join("debug");
    let debug = debug_dir.join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
    let o = Command::new("objcopy").arg("--only-keep-debug").arg(&prog).arg(&debug).output().unwrap();
    assert_ok(&o);
    // Another build at the same path: the same source at -O0 with frame pointers.
    std::fs::copy(&bins()[0], &prog).unwrap();
    let other = build_id(&prog);
    assert_ne!(id, other);
    let empty = dir.join("no-debug");
    let o = symbolize(&["--debug-dir", empty.to_str().unwrap()], &raw);
    assert_ok(&o);
    let text = stdout(&o);
    let own: Vec<_> = text.lines().filter(|l| l.contains(&format!("{}+0x", prog.display()))).collect();
    assert!(own.len() >= 3, "{text}");
    let why = format!("[not symbolized: {} is another build now (BuildId: {other})]", prog.display());
    assert!(own.iter().all(|l| l.ends_with(&why) && !l.contains(" in ")), "{text}");
    let file = dir.join("report.json");
    std::fs::write(&file, &json).unwrap();
    let o = nevermore(&["symbolize", "--debug-dir", empty.to_str().unwrap(), file.to_str().unwrap()]).output().unwrap();
    assert_ok(&o);
    let report = json_reports(&stdout(&o)).remove(0);
    check_schema(&report, schema(), "report");
    let f = &report["stack"][0];
    assert_eq!((f["build_id"].as_str(), f["function"].as_str()), (Some(id.as_str()), None), "{report:#}");
    assert!(f["not_symbolized"].as_str().unwrap().contains(&format!("BuildId: {other}")), "{report:#}");

    // The debug file of the build that ran names its frames, the file at its path being
    // another build or a stripped copy of the same.
    for stripped in [false, true] {
        if stripped {
            std::fs::copy(&bins()[1], &prog).unwrap();
            let o = Command::new("strip").arg("--strip-all").arg(&prog).output().unwrap();
            assert_ok(&o);
            assert_eq!(build_id(&prog), id);
            let o = symbolize(&["--debug-dir", empty.to_str().unwrap()], &raw);
            assert!(!stdout(&o).contains(" in touch_record "), "{}", stdout(&o));
        }
        let o = symbolize(&["--debug-dir", empty.to_str().unwrap(), "--debug-dir", debug_dir.to_str().unwrap()], &raw);
        assert_ok(&o);
        let text = stdout(&o);
        let (access, free, alloc) = sections(&text);
        assert_frame(&access, "touch_record", "uaf-access", "access stack, debug file", &text);
        assert_frame(&free, "drop_record", "drop", "free stack, debug file", &text);
        assert_frame(&alloc, "make_record", "make", "allocation stack, debug file", &text);
        assert!(!text.contains("not symbolized"), "{text}");
        assert!(access.contains("reports+0x") && access.contains(&format!(" (BuildId: {id})")), "{access}");
    }
    // The stripped program names its debug file in a `.gnu_debuglink` section, the file lying
    // beside it (`objcopy --add-gnu-debuglink`, as deployments keep them): found without a
    // debug directory.
    std::fs::copy(&debug, dir.join("reports.debug")).unwrap();
    let o = Command::new("objcopy")
        .arg("--add-gnu-debuglink=reports.debug")
        .arg("reports")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_ok(&o);
    assert_eq!(build_id(&prog), id);
    let o = symbolize(&["--debug-dir", empty.to_str().unwrap()], &raw);
    assert_ok(&o);
    let (access, _, alloc) = sections(&stdout(&o));
    assert_frame(&access, "touch_record", "uaf-access", "access stack, debug link", &stdout(&o));
    assert_frame(&alloc, "make_record", "make", "allocation stack, debug link", &stdout(&o));
}
