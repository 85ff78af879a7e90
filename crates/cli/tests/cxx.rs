mod common;

// C++: every operator new/delete variant (plain, array, nothrow, sized, aligned), bad_alloc,
// over-aligned types and standard containers (`tests/c/cxx_new.cc`), misuse through delete, and
// exceptions thrown from signal handlers.

use common::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| compile("cxx_new.cc", &[]))
}

#[test]
fn operators_and_containers() {
    let o = run_preloaded(bin(), &[], &[]);
    assert_ok(&o);
    assert!(stdout(&o).contains("OK"), "no OK on stdout:\n{}\nstderr:\n{}", stdout(&o), stderr(&o));
    assert!(!stderr(&o).contains("nevermore:"), "unexpected report on stderr:\n{}", stderr(&o));
}

/// The library's aligned operators do not wrap around for sizes just below SIZE_MAX (libstdc++'s
/// own do, which is why this mode is not part of the run above).
#[test]
fn aligned_new_near_size_max() {
    let o = run_preloaded(bin(), &["aligned-near-max"], &[]);
    assert_ok(&o);
    assert!(stdout(&o).contains("OK"));
    assert!(!stderr(&o).contains("nevermore:"), "unexpected report on stderr:\n{}", stderr(&o));
}

/// Exceptions thrown from signal handlers (`-fnon-call-exceptions`: a division by zero's SIGFPE,
/// whose handler the library calls through its relay, and a null read's SIGSEGV, which its fault
/// handler passes on) unwind through the library's frames to the program's `catch`, as under
/// glibc.
#[test]
fn exceptions_thrown_from_signal_handlers_reach_the_program() {
    let bin = compile("cxx_new.cc", &["-fnon-call-exceptions"]);
    for mode in ["prevent", "detect"] {
        let opts = format!("mode={mode}");
        let o = run_preloaded(&bin, &["handler-throw"], &[("NEVERMORE_OPTIONS", &opts)]);
        assert_ok(&o);
        assert_eq!(stdout(&o).trim_end(), "HANDLER THROW OK 6", "{mode}: {}", stderr(&o));
    }
}

#[test]
fn double_delete() {
    assert_report(&run_preloaded(bin(), &["double-delete"], &[]), "double-free");
}

#[test]
fn double_delete_array() {
    assert_report(&run_preloaded(bin(), &["double-delete-array"], &[]), "double-free");
}

#[test]
fn double_delete_aligned() {
    assert_report(&run_preloaded(bin(), &["double-delete-aligned"], &[]), "double-free");
}

#[test]
fn delete_after_overflow() {
    assert_report(&run_preloaded(bin(), &["delete-overflow"], &[]), "heap-buffer-overflow");
}

/// A sized `operator delete` given another size than the object's is a `size-mismatch` naming
/// both sizes, in both modes: deletion through a base class without a virtual destructor
/// (8 bytes given for an object of 40), and explicit sized array and aligned deletes. Correct
/// sizes pass: `operators_and_containers`. With `size_mismatch=0` the objects are freed as if
/// no size were given (squid 5.7 deletes a `sockaddr_in6` through a `sockaddr *` at start-up).
#[test]
fn sized_delete_of_the_wrong_size() {
    for mode in ["prevent", "detect"] {
        let opts = format!("mode={mode}");
        for (case, size, given) in [
            ("delete-through-base", 40, 8),
            ("delete-array-wrong-size", 300000, 200000),
            ("delete-aligned-wrong-size", 100, 96),
        ] {
            let o = run_preloaded(bin(), &[case], &[("NEVERMORE_OPTIONS", &opts)]);
            let err = stderr(&o);
            assert_report(&o, "size-mismatch");
            let op = if case.contains("array") { "operator delete[]" } else { "operator delete" };
            assert!(
                err.contains(&format!("{op} of 0x"))
                    && err.contains(&format!(" of {size} bytes; the address is at offset 0"))
                    && err.contains(&format!("size given: {given} bytes")),
                "{case} ({mode}):\n{err}"
            );
            let opts = format!("mode={mode}:size_mismatch=0:stats=1");
            let o = run_preloaded(bin(), &[case], &[("NEVERMORE_OPTIONS", &opts)]);
            let err = stderr(&o);
            // The program's own word for a misuse that was let through.
            assert_eq!(o.status.code(), Some(3), "{case} ({mode}), size_mismatch=0:\n{err}");
            assert!(err.contains(&format!("survived: {case}")) && !err.contains("ERROR"), "{case} ({mode}):\n{err}");
            // The object was freed: all that stays live is the C++ runtime's emergency pool
            // for exceptions, allocated at start-up.
            assert_eq!(counter(&err, "frees"), counter(&err, "allocations") - 1, "{case} ({mode}):\n{err}");
        }
    }
}

/// An object freed by another family's function than the one that allocated it is an
/// `alloc-dealloc-mismatch` in detect mode, naming the call, the allocating function and the
/// object, and reported before the sized delete's size is checked: by default `new[]` against
/// `delete` and `new` against `delete[]` (small and over-aligned); with
/// `alloc_dealloc_mismatch=2` also `new` against `free` and `realloc`, `malloc` against
/// `delete`, small and large. Prevent mode does not check the family (the free goes ahead, or a
/// sized delete reports the size it was given), nor does detect mode with
/// `alloc_dealloc_mismatch=0` or without stacks, which keep the family. Matching pairs pass:
/// `operators_and_containers`; the C functions against the C++ operators pass at the default
/// level (a module with its own static C++ runtime mixes them: `rust_panics_unwind`).
#[test]
fn mismatched_allocation_and_deallocation() {
    // (case, the call, what allocated the object, its size, the level that reports it,
    // whether the call is a sized delete given another size)
    for (case, call, allocated_by, size, level, wrong_size) in [
        ("new-array-delete", "operator delete", "operator new[], to be freed by operator delete[]", 64, 1, true),
        ("new-delete-array", "operator delete[]", "operator new, to be freed by operator delete", 8, 1, false),
        (
            "aligned-new-array-delete",
            "operator delete",
            "operator new[], to be freed by operator delete[]",
            8192,
            1,
            false,
        ),
        ("new-free", "free", "operator new, to be freed by operator delete", 4, 2, false),
        ("malloc-delete", "operator delete", "malloc (or calloc, realloc, ...), to be freed by free", 40, 2, true),
        ("new-realloc", "realloc", "operator new, to be freed by operator delete", 8, 2, false),
        ("big-new-array-free", "free", "operator new[], to be freed by operator delete[]", 300000, 2, false),
    ] {
        let reporting = if level == 1 {
            vec!["mode=detect", "mode=detect:alloc_dealloc_mismatch=2"]
        } else {
            vec!["mode=detect:alloc_dealloc_mismatch=2"]
        };
        for opts in reporting {
            let o = run_preloaded(bin(), &[case], &[("NEVERMORE_OPTIONS", opts)]);
            let err = stderr(&o);
            assert_report(&o, "alloc-dealloc-mismatch");
            assert!(
                err.contains(&format!("{call} of 0x"))
                    && err.contains(&format!("the object was allocated by {allocated_by}"))
                    && err.contains(&format!(" of {size} bytes; the address is at offset 0"))
                    && err.contains("previously allocated by thread"),
                "{case}, {opts}:\n{err}"
            );
        }
        let mut quiet = vec![
            "mode=prevent",
            "mode=detect:alloc_dealloc_mismatch=0",
            "mode=detect:stacks=0:alloc_dealloc_mismatch=2",
        ];
        if level == 2 {
            quiet.push("mode=detect");
        }
        for opts in quiet {
            let o = run_preloaded(bin(), &[case], &[("NEVERMORE_OPTIONS", opts)]);
            let err = stderr(&o);
            if wrong_size {
                assert_report(&o, "size-mismatch");
            } else {
                assert_eq!(o.status.code(), Some(3), "{case}, {opts}: {err}");
                assert!(err.contains(&format!("survived: {case}")), "{case}, {opts}: {err}");
                assert!(!err.contains("nevermore:"), "{case}, {opts}: {err}");
            }
        }
    }
}

#[test]
fn delete_of_interior_pointer() {
    assert_report(&run_preloaded(bin(), &["delete-interior"], &[]), "invalid-free");
}
