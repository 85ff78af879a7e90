mod common;

// Without userfaultfd (refused by a seccomp filter, as in Docker's default profile) revoked
// aliases trap through guard markers; without guard markers either (kernels before 6.13)
// through mprotect. Each says so once on stderr and keeps the guarantees of its mode on freed
// memory; alias pages never handed out trap with guard markers once their epoch stopped
// issuing, and not at all with mprotect (docs/usage.md, Limits).

use common::*;
use std::process::Output;

const GUARD_NOTICE: &str = "revoked addresses trap through guard markers instead";
const PROTECT_NOTICE: &str = "revoked addresses trap through mprotect instead";

fn run(no_guard: bool, mode: &str, args: &[&str]) -> Output {
    let wrapper = compile("seccomp_run.c", &[]);
    let prog = compile("uaf.c", &[]);
    let mut a: Vec<String> = Vec::new();
    if no_guard {
        a.push("--no-guard".into());
    }
    a.push(prog.to_string_lossy().into_owned());
    a.extend(args.iter().map(|s| s.to_string()));
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let opt = format!("mode={mode}");
    run_preloaded(&wrapper, &a, &[("NEVERMORE_OPTIONS", &opt)])
}

fn notice(no_guard: bool) -> &'static str {
    if no_guard {
        PROTECT_NOTICE
    } else {
        GUARD_NOTICE
    }
}

fn check_said_once(o: &Output, no_guard: bool) {
    let err = stderr(o);
    assert_eq!(err.matches(notice(no_guard)).count(), 1, "the fallback must be said exactly once:\n{err}");
    // The notice names the kernel's answer: the seccomp filter refuses with EPERM.
    assert!(err.contains("userfaultfd is not available (errno 1)"), "{err}");
}

#[test]
fn fallbacks_trap_use_after_free() {
    for no_guard in [false, true] {
        // `locked`: freed objects whose pages the program locked (guard markers are refused
        // on locked pages as zaps are: the library aborted there).
        for (access, size) in [("read", "24"), ("write", "5000"), ("read", "300000"), ("locked", "5000")] {
            let o = run(no_guard, "detect", &[access, size]);
            check_said_once(&o, no_guard);
            assert_report(&o, "heap-use-after-free");
        }
    }
}

/// Guard markers are trusted only once a marked page refuses the kernel's writes: where
/// `madvise(MADV_GUARD_INSTALL)` answers 0 without doing anything (qemu-user does so for advice
/// it does not know; here a filter), revoked addresses would have stayed readable with the
/// guard notice said. The library falls back to mprotect, and a use after free still traps.
#[test]
fn guard_markers_that_do_nothing_are_not_trusted() {
    let wrapper = compile("seccomp_run.c", &[]);
    let prog = compile("uaf.c", &[]);
    for (access, size) in [("read", "24"), ("write", "5000")] {
        let o = run_preloaded(
            &wrapper,
            &["--fake-guard", prog.to_str().unwrap(), access, size],
            &[("NEVERMORE_OPTIONS", "mode=detect")],
        );
        check_said_once(&o, true);
        assert_report(&o, "heap-use-after-free");
    }
}

#[test]
fn fallbacks_keep_prevent_mode_safe() {
    for no_guard in [false, true] {
        for size in ["24", "5000"] {
            let o = run(no_guard, "prevent", &["write", size]);
            check_said_once(&o, no_guard);
            assert!(!stdout(&o).contains("CORRUPTED"), "{}", stdout(&o));
            if !stderr(&o).contains("nevermore: ERROR:") {
                assert_ok(&o);
                assert!(stdout(&o).contains("INTACT"));
            }
        }
    }
}

#[test]
fn fallbacks_make_kernel_access_fail_and_catch_double_free() {
    for no_guard in [false, true] {
        let o = run(no_guard, "detect", &["kernel-read-raw", "5000"]);
        assert_ok(&o);
        assert!(stdout(&o).contains("errno=14"), "{}", stdout(&o));
        // Through the C library's `read`, the library's wrapper reports the freed buffer.
        let o = run(no_guard, "detect", &["kernel-read", "5000"]);
        assert_report(&o, "heap-use-after-free");
        assert!(stderr(&o).contains("system call of "), "{}", stderr(&o));
        let o = run(no_guard, "prevent", &["double-free", "24"]);
        assert_report(&o, "double-free");
        let o = run(no_guard, "prevent", &["unique", "30000"]);
        assert_ok(&o);
        assert!(stdout(&o).contains("UNIQUE"));
    }
}

/// A forked child maps its own copy of the heap; the traps on memory freed before the fork
/// must hold there too, and live data must be intact.
#[test]
fn a_forked_child_keeps_the_traps() {
    for no_guard in [None, Some(false), Some(true)] {
        let o = match no_guard {
            None => run_preloaded(&compile("uaf.c", &[]), &["fork-uaf", "24"], &[("NEVERMORE_OPTIONS", "mode=detect")]),
            Some(ng) => run(ng, "detect", &["fork-uaf", "24"]),
        };
        assert_ok(&o);
        assert!(stdout(&o).contains("CHILD SIGNAL 6"), "{no_guard:?}: {}\n{}", stdout(&o), stderr(&o));
        assert!(stderr(&o).contains("nevermore: ERROR: heap-use-after-free "), "{}", stderr(&o));
    }
}

/// A read of an alias page that the object's epoch never handed out, after that epoch stopped
/// issuing: a wild access with userfaultfd, and with guard markers too (the epoch's unissued
/// pages get markers when it is sealed; before, the kernel mapped the pool page behind it and
/// the read returned whatever that page held).
#[test]
fn guard_markers_trap_pages_a_sealed_epoch_never_issued() {
    let prog = compile("wild.c", &[]);
    let prevent = [("NEVERMORE_OPTIONS", "mode=prevent")];
    // Which page was never handed out depends on the pool's layout: found with userfaultfd.
    let k = [1024, 1536, 2048, 768, 512, 3072]
        .iter()
        .map(|k| k.to_string())
        .find(|k| stderr(&run_preloaded(&prog, &[k.as_str()], &prevent)).contains("nevermore: ERROR: wild-access "))
        .expect("no page far from the object was reported as never handed out");
    let wrapper = compile("seccomp_run.c", &[]);
    let o = run_preloaded(&wrapper, &[prog.to_str().unwrap(), k.as_str()], &prevent);
    check_said_once(&o, false);
    assert!(!stdout(&o).contains("NO TRAP"), "{}", stdout(&o));
    assert_report(&o, "wild-access");
}

/// Where the heap cannot be set up at all (a seccomp filter refuses `memfd_create` with
/// `ENOSYS`, as man-db's sandbox for `col` does), the process runs on the C library's
/// allocator instead of being aborted at its first allocation, and says so once: the C API
/// conformance program (every allocation function, `realloc` and `free` across them, sized
/// frees, `malloc_usable_size`) and the C++ operators all work, in both modes.
#[test]
fn without_memfd_the_process_runs_on_the_c_librarys_allocator() {
    let wrapper = compile("seccomp_run.c", &[]);
    let api = compile("api_conformance.c", &[]);
    let cxx = compile("cxx_new.cc", &[]);
    for mode in ["prevent", "detect"] {
        let opt = format!("mode={mode}");
        // Every section of the C program but `syscall`, which checks that no seccomp filter is
        // in force.
        let sections = [
            "malloc",
            "calloc",
            "realloc",
            "align",
            "usable",
            "usable-write",
            "misc",
            "random",
            "errno",
            "big",
            "grow",
            "shrink",
            "names",
        ];
        let runs: [(&std::path::Path, &[&str]); 2] = [(&api, &sections), (&cxx, &[])];
        for (prog, args) in runs {
            let mut a = vec!["--no-memfd", prog.to_str().unwrap()];
            a.extend_from_slice(args);
            let o = run_preloaded(&wrapper, &a, &[("NEVERMORE_OPTIONS", &opt)]);
            let err = stderr(&o);
            assert_ok(&o);
            assert!(stdout(&o).contains("OK"), "{mode}: {}\n{err}", stdout(&o));
            assert_eq!(
                err.matches("cannot set up the heap: memfd_create failed (errno 38); this process runs on the C library's allocator, unprotected").count(),
                1,
                "{mode}: {err}"
            );
            assert!(!err.contains("ERROR"), "{mode}: {err}");
        }
    }
}
