mod common;

// Misuse detection: every case of `tests/c/misuse.c` performs one misuse; the allocator must
// report it (one `nevermore: ERROR: <kind>` line) and abort with SIGABRT.

use common::*;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

fn bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| compile("misuse.c", &[]))
}

fn run_case(case: &str) -> Output {
    run_preloaded(bin(), &[case], &[])
}

/// Runs `case` and asserts a report of `kind` (plus SIGABRT); the report comes before anything
/// else the program would print after the misuse.
/// `kinds` is one kind, or alternatives separated by `|` where the contract leaves the choice open.
fn expect(case: &str, kinds: &str) {
    let o = run_case(case);
    let err = stderr(&o);
    let kind = kinds.split('|').find(|k| err.contains(&format!("nevermore: ERROR: {k} "))).unwrap_or(kinds);
    assert_report(&o, kind);
    assert!(!stderr(&o).contains("survived"), "program went on after the misuse:\n{}", stderr(&o));
    let first = stderr(&o).lines().find(|l| l.contains("nevermore:")).unwrap_or_default().to_string();
    assert!(first.contains(&format!("nevermore: ERROR: {kind} ")), "first report line: {first}");
}

/// Correct use up to the last byte of blocks of every size class is not reported.
#[test]
fn correct_use_is_not_reported() {
    let o = run_case("none");
    assert_ok(&o);
    assert!(stdout(&o).contains("OK"));
    // Prevent mode grows a page object in place, after which the copy up to its new end
    // must not be held to the bounds the main thread looked up before.
    assert!(stdout(&o).contains("grown in place"), "{}", stdout(&o));
    assert!(!stderr(&o).contains("nevermore:"), "false report:\n{}", stderr(&o));
}

/// An object of whole pages ends in a guard page rather than a canary: an access past its end
/// traps at the access itself, a read too (which no canary can notice), and the report names
/// the object and the offset.
#[test]
fn access_past_an_object_of_whole_pages_traps_at_once() {
    for (case, what) in [
        ("overflow-read-4096", " of 4096 bytes; the address is at offset 4096 from its start"),
        ("overflow-write-8192", " of 8192 bytes; the address is at offset 8292 from its start"),
    ] {
        assert_trapped_at_access(case, what, &[]);
    }
}

/// Runs `case` and asserts that its access past the end of an object was reported at the
/// access (READ or WRITE, after the case's name, hitting the guard page), naming the object
/// (`what`: its size and the offset).
fn assert_trapped_at_access(case: &str, what: &str, env: &[(&str, &str)]) {
    let o = run_preloaded(bin(), &[case], env);
    let err = stderr(&o);
    assert_report(&o, "heap-buffer-overflow");
    let op = if case.contains("read") { "READ" } else { "WRITE" };
    assert!(
        err.contains(&format!("{op} of 0x")) && err.contains("past the end of the object (guard page)"),
        "{case}: not reported at the access:\n{err}"
    );
    assert!(err.contains(what), "{case}: object not named:\n{err}");
}

/// In detect mode every page object lies against a guard page, its canary in between: correct
/// use up to the last byte of every size is not reported, an access further on traps (see
/// `reports.rs`), and a write of one byte past the end still lands on the canary, found at
/// `free` or `realloc`, not in the few bytes of slack before the guard.
#[test]
fn detect_mode_page_objects_keep_their_canary_before_the_guard() {
    let detect = [("NEVERMORE_OPTIONS", "mode=detect")];
    let o = run_preloaded(bin(), &["none"], &detect);
    assert_ok(&o);
    assert!(stdout(&o).contains("OK"));
    assert!(!stderr(&o).contains("nevermore:"), "false report:\n{}", stderr(&o));
    for case in ["overflow-free-5000", "overflow-free-40000", "overflow-realloc-5000", "overflow-free-13"] {
        let o = run_preloaded(bin(), &[case], &detect);
        let err = stderr(&o);
        assert_report(&o, "heap-buffer-overflow");
        assert!(err.contains("the canary after the object was overwritten"), "{case}:\n{err}");
    }
}

/// Small objects, accessed beyond their canary: only `guard_all` traps these at the access.
const GUARD_ALL_CASES: &[(&str, &str)] = &[
    ("overflow-read-small", " of 40 bytes; the address is at offset 48 from its start"),
    ("overflow-write-small", " of 24 bytes; the address is at offset 64 from its start"),
    ("overflow-write-aligned-small", " of 100 bytes; the address is at offset 128 from its start"),
];

/// With `guard_all=1` (detect mode) small objects get pages of their own and lie against a
/// guard page like page objects: correct use of every size up to its last byte is not
/// reported; an access past the end traps at the access (a read too, which no canary
/// notices), naming the object, also for an object aligned to 64; a one-byte overflow still
/// lands on the canary and is found at `free` or `realloc`. Without the option the same small
/// accesses reach memory the object shares with others, and the program runs on.
#[test]
fn guard_all_puts_small_objects_against_a_guard_page() {
    let guarded = [("NEVERMORE_OPTIONS", "mode=detect:guard_all=1")];
    let o = run_preloaded(bin(), &["none"], &guarded);
    assert_ok(&o);
    assert!(stdout(&o).contains("OK"));
    assert!(!stderr(&o).contains("nevermore:"), "false report:\n{}", stderr(&o));
    for (case, what) in GUARD_ALL_CASES {
        assert_trapped_at_access(case, what, &guarded);
        let o = run_preloaded(bin(), &[case], &[("NEVERMORE_OPTIONS", "mode=detect")]);
        assert!(stderr(&o).contains(&format!("survived: {case}")), "{case} without guard_all:\n{}", stderr(&o));
    }
    for case in ["overflow-free-13", "overflow-free-100", "overflow-realloc-24", "overflow-calloc"] {
        let o = run_preloaded(bin(), &[case], &guarded);
        let err = stderr(&o);
        assert_report(&o, "heap-buffer-overflow");
        assert!(err.contains("the canary after the object was overwritten"), "{case}:\n{err}");
    }
}

/// Writes before an object, in its first page, found at `free` or `realloc`: (case, options,
/// the object and the first byte written over).
const UNDERFLOW_CASES: &[(&str, &str, &str)] = &[
    ("underflow-write-5000", "mode=detect", " of 5000 bytes; the address is at offset -8 from its start"),
    ("underflow-write-5000", "mode=detect:guard_all=1", " of 5000 bytes; the address is at offset -8 from its start"),
    ("underflow-realloc-5000", "mode=detect", " of 5000 bytes; the address is at offset -1 from its start"),
    ("underflow-write-small", "mode=detect:guard_all=1", " of 40 bytes; the address is at offset -100 from its start"),
    ("underflow-write-large", "mode=detect", " of 300000 bytes; the address is at offset -8 from its start"),
    ("underflow-write-large", "mode=prevent", " of 300000 bytes; the address is at offset -8 from its start"),
];

/// Copies into or out of the bytes before an object, 16 bytes before it: (case, options).
const UNDERFLOW_COPY_CASES: &[(&str, &str)] = &[
    ("underflow-copy-into-5000", "mode=detect"),
    ("underflow-copy-into-5000", "mode=detect:guard_all=1"),
    ("underflow-copy-out-of-small", "mode=detect:guard_all=1"),
    ("underflow-copy-into-large", "mode=prevent"),
];

/// The bytes before a page object in its first page (detect mode: the object lies against the
/// guard page after its run), before a large object (against the guard page after its view,
/// in both modes), and before every object with `guard_all=1`, hold canary bytes: a
/// write there is found at `free` or `realloc`, naming the first byte written over, and a copy
/// into or out of them is reported by the copy, before it is made. (Before, none of these was
/// seen: with `guard_all=1` a write before an object was never checked.) `none`, run with both
/// options by the tests above, frees objects of every size with those bytes intact.
#[test]
fn writes_before_an_object_in_its_first_page_are_found() {
    let at_free = "the canary bytes before the object were overwritten (a write before its start)";
    for (case, options, what) in UNDERFLOW_CASES {
        let o = run_preloaded(bin(), &[case], &[("NEVERMORE_OPTIONS", options)]);
        let err = stderr(&o);
        assert_report(&o, "heap-buffer-overflow");
        let op = if case.contains("realloc") { "realloc" } else { "free" };
        assert!(err.contains(&format!("{op} of 0x")) && err.contains(at_free), "{case}, {options}:\n{err}");
        assert!(err.contains(what), "{case}, {options}: object not named:\n{err}");
    }
    for (case, options) in UNDERFLOW_COPY_CASES {
        let o = run_preloaded(bin(), &[case], &[("NEVERMORE_OPTIONS", options)]);
        let err = stderr(&o);
        assert_report(&o, "heap-buffer-overflow");
        let way = if case.contains("into") { "was to write" } else { "was to read" };
        let call = format!("the call {way} before the start of the object, in its first page");
        assert!(err.contains("memcpy of 0x") && err.contains(&call), "{case}, {options}:\n{err}");
        assert!(err.contains("the address is at offset -16 from its start"), "{case}, {options}:\n{err}");
    }
}

/// Writes past a small object that skip its canary: (case, call that finds it, the object and
/// the byte written over).
const PAST_CANARY_CASES: &[(&str, &str, &str)] = &[
    ("overflow-past-canary", "free", " of 1000 bytes; the address is at offset 1015 from its start"),
    ("overflow-past-canary-realloc", "free", " of 120 bytes; the address is at offset 140 from its start"),
    ("overflow-into-page-tail", "free", " of 300 bytes; the address is at offset 500 from its start"),
];

/// In detect mode the bytes of a small object's slot after its canary (and the page's tail
/// after its last slot) hold canary bytes too, so a write that skips the canary into them is
/// found at `free`, naming the byte; also after a `realloc` that shrank the object in place.
/// Before, it was never seen: each small object has an alias page of its own there, but its
/// pool page holds other slots, so nothing traps. (At exit: `AT_EXIT_CASES`.)
#[test]
fn writes_past_a_small_objects_canary_are_found_in_detect_mode() {
    for (case, op, what) in PAST_CANARY_CASES {
        let o = run_preloaded(bin(), &[case], &[("NEVERMORE_OPTIONS", "mode=detect")]);
        let err = stderr(&o);
        assert_report(&o, "heap-buffer-overflow");
        assert!(
            err.contains(&format!("{op} of 0x")) && err.contains("the canary after the object was overwritten"),
            "{case}:\n{err}"
        );
        assert!(err.contains(what), "{case}: object or byte not named:\n{err}");
    }
}

/// In detect mode a small slot holding no object (freed, or never used yet), with its slack,
/// holds canary bytes keyed with the slot until it is allocated, when they are checked: a
/// write past an object, beyond its slot, into such a slot of its pool page is reported then,
/// naming the object before it and the byte at its offset from that object, with that
/// object's allocation stack (and its free stack when it was freed since, at the address it
/// had); or, when the slot is not allocated again, at exit (`check_at_exit`). Before, it was
/// never seen.
#[test]
fn writes_into_a_free_slot_are_found_when_it_is_allocated_or_at_exit() {
    let (taken, exit) = (("malloc", "found when the slot was allocated"), ("exit", "found at exit"));
    let at_130 = " of 100 bytes; the address is at offset 130 from its start";
    let at_800 = " of 600 bytes; the address is at offset 800 from its start";
    // (case, the call that found it and how, the object named, whether it was freed). The
    // unused-slot cases write 200 bytes past a 600-byte object into the next slot of its
    // fresh page, found when the slot is taken (the object live), or at exit after the object
    // was freed (named at its old address, with the stack that freed it).
    for (case, (op, found), object, freed) in [
        ("overflow-into-free-slot", taken, at_130, false),
        ("overflow-into-free-slot-exit", exit, at_130, false),
        ("overflow-into-unused-slot", taken, at_800, false),
        ("overflow-into-unused-slot-freed", exit, at_800, true),
    ] {
        let o = run_preloaded(bin(), &[case], &[("NEVERMORE_OPTIONS", "mode=detect")]);
        let err = stderr(&o);
        assert_report(&o, "heap-buffer-overflow");
        assert!(err.contains(&format!("{op} of 0x")) && err.contains("a free slot's bytes were written over"), "{err}");
        assert!(err.contains(found), "{case}: {err}");
        assert!(err.contains(object), "{case}: {err}");
        assert!(err.contains("previously allocated by thread"), "{case}: {err}");
        assert_eq!(err.contains("freed by thread"), freed, "{case}: {err}");
    }
    let o = run_preloaded(
        bin(),
        &["overflow-into-free-slot-exit"],
        &[("NEVERMORE_OPTIONS", "mode=detect:check_at_exit=0")],
    );
    assert_eq!(o.status.code(), Some(3), "check_at_exit=0:\n{}", stderr(&o));
    assert!(!stderr(&o).contains("nevermore:"), "check_at_exit=0:\n{}", stderr(&o));
    // Prevent mode fills no slot: the program goes on.
    let o = run_preloaded(bin(), &["overflow-into-unused-slot-freed"], &[("NEVERMORE_OPTIONS", "mode=prevent")]);
    assert_eq!(o.status.code(), Some(3), "prevent:\n{}", stderr(&o));
}

/// Overflows of objects the program never frees: (case, the object and the byte written over,
/// whether it lies before the object).
const AT_EXIT_CASES: &[(&str, &str, bool)] = &[
    ("overflow-leaked-24", " of 24 bytes; the address is at offset 24 from its start", false),
    ("overflow-leaked-5000", " of 5000 bytes; the address is at offset 5000 from its start", false),
    ("underflow-leaked-5000", " of 5000 bytes; the address is at offset -8 from its start", true),
    ("overflow-leaked-large", " of 300000 bytes; the address is at offset 300000 from its start", false),
    ("underflow-leaked-large", " of 300000 bytes; the address is at offset -8 from its start", true),
    ("overflow-leaked-threads", " of 24 bytes; the address is at offset 24 from its start", false),
    ("overflow-past-canary-leaked", " of 1000 bytes; the address is at offset 1015 from its start", false),
];

/// Detect mode checks the canaries of the objects still live at exit (`check_at_exit`, on by
/// default there), which no `free` checks: an overflow of an object never freed (of a small,
/// a page or a large object, before or after it, with threads still allocating) is reported
/// then, with the object and the first byte written over. Before, or with `check_at_exit=0`,
/// the program ended as if nothing had happened. Objects of every size live at exit, written
/// up to their last byte, while threads allocate, are not reported.
#[test]
fn overflows_of_objects_never_freed_are_found_at_exit() {
    for (case, what, before) in AT_EXIT_CASES {
        let o = run_preloaded(bin(), &[case], &[("NEVERMORE_OPTIONS", "mode=detect")]);
        let err = stderr(&o);
        assert_report(&o, "heap-buffer-overflow");
        let canary =
            if *before { "the canary bytes before the object were" } else { "the canary after the object was" };
        assert!(
            err.contains("exit of 0x")
                && err.contains(canary)
                && err.contains("found at exit: the object was never freed")
                && err.contains(what),
            "{case}:\n{err}"
        );
        let o = run_preloaded(bin(), &[case], &[("NEVERMORE_OPTIONS", "mode=detect:check_at_exit=0")]);
        assert_eq!(o.status.code(), Some(3), "{case} with check_at_exit=0:\n{}", stderr(&o));
        assert!(!stderr(&o).contains("nevermore:"), "{case} with check_at_exit=0:\n{}", stderr(&o));
    }
    for options in ["mode=detect", "mode=detect:guard_all=1"] {
        let o = run_preloaded(bin(), &["live-at-exit"], &[("NEVERMORE_OPTIONS", options)]);
        assert_ok(&o);
        assert!(stdout(&o).contains("OK"), "{options}");
        assert!(!stderr(&o).contains("nevermore:"), "{options}: false report:\n{}", stderr(&o));
    }
}

/// C23 `free_sized`/`free_aligned_sized` with a size other than the object's: (case, call,
/// object size, size given).
const SIZED_FREE_CASES: &[(&str, &str, usize, usize)] = &[
    ("free-sized-wrong-small", "free_sized", 100, 64),
    ("free-sized-wrong-pages", "free_sized", 8192, 8191),
    ("free-sized-wrong-large", "free_sized", 1 << 20, 1 << 19),
    ("free-sized-wrong-calloc", "free_sized", 120, 12),
    ("free-aligned-sized-wrong", "free_aligned_sized", 256, 64),
];

/// A sized free whose size is not the object's is reported as `size-mismatch`, naming the
/// call, the object's size and the size given, in both modes (the right sizes, and the
/// product for `calloc`, pass: `api::glibc_names_and_sized_frees`).
#[test]
fn sized_free_of_the_wrong_size() {
    for mode in ["prevent", "detect"] {
        let opts = format!("mode={mode}");
        for &(case, call, size, given) in SIZED_FREE_CASES {
            let o = run_preloaded(bin(), &[case], &[("NEVERMORE_OPTIONS", &opts)]);
            let err = stderr(&o);
            assert_report(&o, "size-mismatch");
            assert!(
                err.contains(&format!("{call} of 0x"))
                    && err.contains(&format!(" of {size} bytes; the address is at offset 0 from its start"))
                    && err.contains(&format!("size given: {given} bytes")),
                "{case} ({mode}): report does not name the call and both sizes:\n{err}"
            );
        }
    }
}

/// Every case listed by the program has a test here (and vice versa), so no case goes unchecked.
/// A copy into the object the thread made last is bounded from the thread's cache, without
/// the object's look-up: after a `realloc` that shrank it in place, by its size now (120
/// bytes), not the 200 it was made with. In both modes.
#[test]
fn a_copy_into_the_newest_object_is_held_to_its_size_after_a_shrink() {
    for options in ["mode=prevent", "mode=detect"] {
        let o = run_preloaded(bin(), &["overflow-copy-after-shrink"], &[("NEVERMORE_OPTIONS", options)]);
        let err = stderr(&o);
        assert_report(&o, "heap-buffer-overflow");
        assert!(
            err.contains("memcpy of 0x") && err.contains("the call was to write past the end"),
            "{options}:\n{err}"
        );
        assert!(err.contains(" of 120 bytes; the address is at offset 120 from its start"), "{options}:\n{err}");
    }
}

/// The same for a page object (5000 bytes cut to 4500, prevent mode) and a large one (300 000
/// cut to 250 000), whose bounds the thread looked up before the `realloc` (`filled`'s
/// `memset`): bounds kept from an earlier look-up must not outlive a resize.
#[test]
fn a_copy_into_a_page_or_large_object_is_held_to_its_size_after_a_shrink() {
    // Detect mode moves a page object that changes size (its end sits against a guard page).
    let cases = [
        ("overflow-copy-after-shrink-pages", 4500, &["mode=prevent"][..]),
        ("overflow-copy-after-shrink-large", 250_000, &["mode=prevent", "mode=detect"][..]),
    ];
    for (case, size, modes) in cases {
        for &options in modes {
            let o = run_preloaded(bin(), &[case], &[("NEVERMORE_OPTIONS", options)]);
            let err = stderr(&o);
            assert_report(&o, "heap-buffer-overflow");
            assert!(
                err.contains("memcpy of 0x") && err.contains("the call was to write past the end"),
                "{case} {options}:\n{err}"
            );
            let at = format!(" of {size} bytes; the address is at offset {size} from its start");
            assert!(err.contains(&at), "{case} {options}:\n{err}");
        }
    }
}

#[test]
fn every_case_is_tested() {
    let o = program(bin()).arg("--list").output().unwrap();
    assert_ok(&o);
    let listed: Vec<String> = stdout(&o).lines().map(|l| l.to_string()).collect();
    let mut tested: Vec<&str> = CASES.to_vec();
    tested.push("none");
    tested.extend(GUARD_ALL_CASES.iter().map(|(c, _)| *c));
    tested.extend(SIZED_FREE_CASES.iter().map(|(c, ..)| *c));
    tested.extend(UNDERFLOW_CASES.iter().map(|(c, ..)| *c));
    tested.extend(UNDERFLOW_COPY_CASES.iter().map(|(c, _)| *c));
    tested.extend(AT_EXIT_CASES.iter().map(|(c, ..)| *c));
    tested.extend(PAST_CANARY_CASES.iter().map(|(c, ..)| *c));
    tested.extend(["overflow-into-free-slot", "overflow-into-free-slot-exit"]);
    tested.extend(["overflow-into-unused-slot", "overflow-into-unused-slot-freed"]);
    tested.push("live-at-exit");
    tested.push("overflow-copy-after-shrink");
    tested.extend(["overflow-copy-after-shrink-pages", "overflow-copy-after-shrink-large"]);
    for c in &listed {
        assert!(tested.contains(&c.as_str()), "case {c} has no test");
    }
    for c in &tested {
        assert!(listed.iter().any(|l| l == c), "test of unknown case {c}");
    }
}

macro_rules! misuse_tests {
    ($($name:ident: $case:literal => $kind:literal;)*) => {
        const CASES: &[&str] = &[$($case),*];
        $(
            #[test]
            fn $name() {
                expect($case, $kind);
            }
        )*
    };
}

misuse_tests! {
    double_free_tiny: "double-free-tiny" => "double-free";
    double_free_small: "double-free-small" => "double-free";
    double_free_medium: "double-free-medium" => "double-free";
    double_free_large: "double-free-large" => "double-free";
    double_free_after_churn: "double-free-after-churn" => "double-free";
    double_free_calloc: "double-free-calloc" => "double-free";
    double_free_aligned: "double-free-aligned" => "double-free";
    double_free_old_pointer_after_moving_realloc: "double-free-realloc-moved" => "double-free";
    realloc_of_freed_pointer: "double-free-realloc" => "double-free|invalid-free";

    invalid_free_interior_8: "invalid-free-interior8" => "invalid-free";
    invalid_free_interior_16: "invalid-free-interior16" => "invalid-free";
    invalid_free_interior_medium: "invalid-free-interior-medium" => "invalid-free";
    invalid_free_interior_large: "invalid-free-interior-large" => "invalid-free";
    invalid_free_stack: "invalid-free-stack" => "invalid-free";
    invalid_free_global: "invalid-free-global" => "invalid-free";
    invalid_free_wild: "invalid-free-wild" => "invalid-free";
    invalid_free_mmap: "invalid-free-mmap" => "invalid-free";
    invalid_realloc_interior_8: "invalid-realloc-interior8" => "invalid-free";
    invalid_realloc_interior_16: "invalid-realloc-interior16" => "invalid-free";
    invalid_realloc_stack: "invalid-realloc-stack" => "invalid-free";
    invalid_realloc_global: "invalid-realloc-global" => "invalid-free";
    invalid_realloc_wild: "invalid-realloc-wild" => "invalid-free";
    invalid_realloc_mmap: "invalid-realloc-mmap" => "invalid-free";

    usable_size_interior_8: "invalid-usable-interior8" => "invalid-pointer";
    usable_size_interior_16: "invalid-usable-interior16" => "invalid-pointer";
    usable_size_stack: "invalid-usable-stack" => "invalid-pointer";
    usable_size_global: "invalid-usable-global" => "invalid-pointer";
    usable_size_wild: "invalid-usable-wild" => "invalid-pointer";
    usable_size_mmap: "invalid-usable-mmap" => "invalid-pointer";

    overflow_free_1: "overflow-free-1" => "heap-buffer-overflow";
    overflow_free_13: "overflow-free-13" => "heap-buffer-overflow";
    overflow_free_16: "overflow-free-16" => "heap-buffer-overflow";
    overflow_free_24: "overflow-free-24" => "heap-buffer-overflow";
    overflow_free_100: "overflow-free-100" => "heap-buffer-overflow";
    overflow_free_1000: "overflow-free-1000" => "heap-buffer-overflow";
    overflow_free_4096: "overflow-free-4096" => "heap-buffer-overflow";
    overflow_free_5000: "overflow-free-5000" => "heap-buffer-overflow";
    overflow_free_40000: "overflow-free-40000" => "heap-buffer-overflow";
    overflow_free_300000: "overflow-free-300000" => "heap-buffer-overflow";
    overflow_realloc_1: "overflow-realloc-1" => "heap-buffer-overflow";
    overflow_realloc_13: "overflow-realloc-13" => "heap-buffer-overflow";
    overflow_realloc_16: "overflow-realloc-16" => "heap-buffer-overflow";
    overflow_realloc_24: "overflow-realloc-24" => "heap-buffer-overflow";
    overflow_realloc_100: "overflow-realloc-100" => "heap-buffer-overflow";
    overflow_realloc_1000: "overflow-realloc-1000" => "heap-buffer-overflow";
    overflow_realloc_4096: "overflow-realloc-4096" => "heap-buffer-overflow";
    overflow_realloc_5000: "overflow-realloc-5000" => "heap-buffer-overflow";
    overflow_realloc_40000: "overflow-realloc-40000" => "heap-buffer-overflow";
    overflow_realloc_300000: "overflow-realloc-300000" => "heap-buffer-overflow";
    overflow_realloc_shrink_100: "overflow-realloc-shrink-100" => "heap-buffer-overflow";
    overflow_realloc_shrink_5000: "overflow-realloc-shrink-5000" => "heap-buffer-overflow";
    overflow_free_0: "overflow-free-0" => "heap-buffer-overflow";
    overflow_valloc: "overflow-valloc" => "heap-buffer-overflow";
    overflow_then_realloc_to_zero: "overflow-realloc-zero" => "heap-buffer-overflow";
    overflow_freed_by_another_thread: "overflow-free-cross-thread" => "heap-buffer-overflow";
    usable_size_after_free: "usable-after-free" => "invalid-pointer";
    usable_size_after_free_by_another_thread: "usable-after-free-cross-thread" => "invalid-pointer";
    free_after_realloc_to_zero: "double-free-realloc-zero" => "double-free";
    double_free_after_same_size_churn: "double-free-after-same-size-churn" => "double-free";
    double_free_cross_thread: "double-free-cross-thread" => "double-free";
    double_free_cross_thread_reverse: "double-free-cross-thread-reverse" => "double-free";
    double_free_in_forked_child: "double-free-in-forked-child" => "double-free";
    invalid_free_interior_1: "invalid-free-interior1" => "invalid-free";
    overflow_calloc: "overflow-calloc" => "heap-buffer-overflow";
    overflow_after_growing_realloc: "overflow-realloc-grown" => "heap-buffer-overflow";
    overflow_after_shrinking_realloc: "overflow-realloc-shrunk" => "heap-buffer-overflow";
    overflow_aligned_alloc: "overflow-aligned-alloc" => "heap-buffer-overflow";
    overflow_posix_memalign: "overflow-posix-memalign" => "heap-buffer-overflow";
    overflow_memalign: "overflow-memalign" => "heap-buffer-overflow";
    overflow_read_past_a_page: "overflow-read-4096" => "heap-buffer-overflow";
    overflow_write_past_two_pages: "overflow-write-8192" => "heap-buffer-overflow";
}
