mod common;

// C++: every operator new/delete variant (plain, array, nothrow, sized, aligned), bad_alloc,
// over-aligned types and standard containers (`tests/c/cxx_new.cc`), and misuse through delete.

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
/// sizes pass: `operators_and_containers`.
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
            assert!(
                err.contains("operator delete of 0x")
                    && err.contains(&format!(" of {size} bytes; the address is at offset 0"))
                    && err.contains(&format!("size given: {given} bytes")),
                "{case} ({mode}):\n{err}"
            );
        }
    }
}

#[test]
fn delete_of_interior_pointer() {
    assert_report(&run_preloaded(bin(), &["delete-interior"], &[]), "invalid-free");
}
