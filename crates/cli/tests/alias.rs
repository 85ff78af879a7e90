mod common;

// The alias engine (DESIGN guarantees 1–5, 9, 10): `tests/c/uaf.c` under both modes.
// Detect mode: every dangling access traps with a `heap-use-after-free` report and kernel
// accesses fail with EFAULT. Prevent mode: a dangling pointer never reaches a newer object (the
// access either traps or leaves every newer object intact).

use common::*;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};

/// A small object, a page object smaller than a page (against a guard page in detect mode only),
/// one of two pages and a large object.
const SIZES: [&str; 4] = ["24", "3000", "5000", "300000"];

fn uaf() -> std::path::PathBuf {
    compile("uaf.c", &[])
}

fn run(mode: &str, args: &[&str]) -> Output {
    let opt = format!("mode={mode}");
    run_preloaded(&uaf(), args, &[("NEVERMORE_OPTIONS", &opt)])
}

#[test]
fn detect_traps_every_dangling_read_and_write() {
    for size in SIZES {
        for (access, word) in [("read", "READ of"), ("write", "WRITE of")] {
            let o = run("detect", &[access, size]);
            assert_report(&o, "heap-use-after-free");
            assert!(stderr(&o).contains(word), "{access} {size}: {}", stderr(&o));
            assert!(!stdout(&o).contains("INTACT"), "{access} {size}: the access did not trap");
        }
    }
}

/// A copy through a dangling pointer into a page or large object that another thread freed,
/// whose bounds this thread had looked up while it lived: it is not taken for an overflow of a
/// live object (bounds kept from the earlier look-up must not outlive the free). Detect mode
/// traps it as a use-after-free; prevent mode leaves it to the dead object's own pages (a
/// 5000-byte object's run of two, not yet revoked) or traps, and never reports an overflow.
#[test]
fn a_dangling_copy_is_not_held_to_the_freed_objects_bounds() {
    for size in ["5000", "300000"] {
        let o = run("detect", &["copy-freed", size]);
        assert_report(&o, "heap-use-after-free");
        let o = run("prevent", &["copy-freed", size]);
        assert!(!stderr(&o).contains("heap-buffer-overflow"), "{size}: {}", stderr(&o));
        assert!(
            stdout(&o).contains("copied") || stderr(&o).contains("nevermore: ERROR: heap-use-after-free"),
            "{size}: {:?}\n{}",
            o.status,
            stderr(&o)
        );
    }
}

/// Regression (found by the coverage-guided fuzzer): a slab released in the current epoch used
/// to hand its slot table to the next new slab of its class at once, while pointers into the
/// released slab still resolved to it. A second free of such a pointer was then accepted, and
/// (detect mode) a read through it was taken for a live alias and mapped again, unreported.
#[test]
fn pointers_into_a_released_slab_stay_dead() {
    for mode in ["detect", "prevent"] {
        for k in ["4", "8", "16"] {
            let o = run(mode, &["released-slab-free", k]);
            assert_report(&o, "double-free");
            if mode == "detect" {
                let o = run(mode, &["released-slab-read", k]);
                assert_report(&o, "heap-use-after-free");
            }
        }
    }
}

/// Runs a `gap-revoke` case of uaf.c under prevent mode; returns the stats line on
/// revocations and its counters: pages, batches, ranges, calls.
fn revocation_counters(case: &str) -> (String, [u64; 4]) {
    let o = run_preloaded(&uaf(), &[case], &[("NEVERMORE_OPTIONS", "mode=prevent:stats=1")]);
    assert_ok(&o);
    assert!(stdout(&o).contains("GAP OK"), "{}", stdout(&o));
    let err = stderr(&o);
    let line = err.lines().find(|l| l.contains("revocations")).unwrap_or_default().to_string();
    let Ok(nums) = <[u64; 4]>::try_from(counters(&err, "revocations")) else {
        panic!("no revocation counters in:\n{err}")
    };
    (line, nums)
}

/// Revocation ranges separated only by revoked (or never issued) pages are revoked as one:
/// every range costs a TLB shootdown on each CPU running the process. 64 page objects on
/// consecutive pages, the odd ones revoked first: then the even ones go in one range
/// (measured: 33 ranges in all; 65 before gaps were bridged).
#[test]
fn revocations_bridge_gaps_of_dead_pages() {
    let (line, [pages, batches, ranges, _calls]) = revocation_counters("gap-revoke");
    assert!(batches >= 2, "{line}");
    assert!(pages >= 64, "{line}");
    assert!(ranges <= 40, "the even objects were not revoked as one range: {line}");
}

/// Gaps of many revoked pages are bridged too (up to 128 pages): object 0 and objects 34..49
/// go out in one range, over the 33 pages of the first batch (measured: 2 ranges in all; 3
/// with gaps of at most 8 pages).
#[test]
fn revocations_bridge_long_gaps() {
    let (line, [pages, batches, ranges, _calls]) = revocation_counters("gap-revoke-long");
    assert_eq!(batches, 2, "{line}");
    assert!(pages >= 50, "{line}");
    assert_eq!(ranges, 2, "the second batch was not revoked as one range: {line}");
}

#[test]
fn detect_report_names_the_object() {
    let o = run("detect", &["write", "5000"]);
    assert_report(&o, "heap-use-after-free");
    assert!(stderr(&o).contains("of 5000 bytes"), "{}", stderr(&o));
}

#[test]
fn prevent_never_lets_a_dangling_pointer_reach_a_newer_object() {
    for size in SIZES {
        for access in ["read", "write"] {
            assert_trapped_or_intact(&run("prevent", &[access, size]), &format!("{access} {size}"));
        }
    }
}

/// A prevent-mode access through a dangling pointer (`uaf.c` `read`, `write`, `locked`): it
/// trapped (`heap-use-after-free`), or every newer object was left intact.
fn assert_trapped_or_intact(o: &Output, case: &str) {
    let (out, err) = (stdout(o), stderr(o));
    assert!(!out.contains("CORRUPTED") && !err.contains("revoking"), "{case}: {out}\n{err}");
    if err.contains("nevermore: ERROR:") {
        assert_report(o, "heap-use-after-free");
    } else {
        assert_ok(o);
        assert!(out.contains("INTACT"), "{case}: {out}");
    }
}

/// A program may lock a heap object's pages (`mlock`, as for a key's buffer) and free it
/// without `munlock`. The kernel zaps no locked page (`MADV_DONTNEED` fails with EINVAL), and
/// the library aborted the program at the revocation ("revoking ... failed (errno 22)") in 5
/// of these 6 runs, a range of 4 MiB in prevent mode among them. It now unlocks the dead
/// pages first: a write through the dangling pointer traps (detect mode) or leaves every
/// newer object intact (prevent mode).
#[test]
fn objects_the_program_locked_and_freed_are_revoked() {
    for size in ["100", "5000", "40000"] {
        let o = run("detect", &["locked", size]);
        assert_report(&o, "heap-use-after-free");
        assert!(!stdout(&o).contains("INTACT"), "{size}: the access did not trap");
        assert_trapped_or_intact(&run("prevent", &["locked", size]), &format!("locked {size}"));
    }
}

/// The kernel's access to a revoked alias fails with EFAULT and writes nothing (the system
/// call made directly, which no library sees); through the C library's `read`, the library's
/// wrapper sees the EFAULT and reports the freed object the buffer is in, with its stacks in
/// detect mode, instead of leaving the program an error number.
#[test]
fn kernel_access_to_a_revoked_alias_fails_with_efault_and_is_reported() {
    // Prevent mode revokes in batches; the test frees enough to flush one. A small object's
    // page is revoked only once its whole group is dead, so only the others must fail.
    let cases = SIZES.iter().map(|s| ("detect", *s)).chain(["3000", "5000", "300000"].map(|s| ("prevent", s)));
    for (mode, size) in cases {
        let o = run(mode, &["kernel-read-raw", size]);
        assert_ok(&o);
        assert!(stdout(&o).contains("read=-1 errno=14"), "{mode} {size}: {}", stdout(&o));
        let o = run(mode, &["kernel-read", size]);
        assert_report(&o, "heap-use-after-free");
        let err = stderr(&o);
        assert!(err.contains("system call of "), "{mode} {size}: {err}");
        assert!(!stdout(&o).contains("read="), "{mode} {size}: the call returned: {}", stdout(&o));
        if mode == "detect" {
            // The object from its records, and the stacks of its allocation and free.
            let object = format!(" of {size} bytes; the address is at offset 0 from its start");
            assert!(err.contains(&object), "{size}: {err}");
            assert!(err.contains("freed by thread") && err.contains("previously allocated by thread"), "{err}");
        }
    }
    // A small object whose group lives on is not revoked yet: the kernel's read would go into
    // its dead slot (`kernel-read-raw` does), and the library's `read` reports it.
    let o = run("prevent", &["kernel-read-raw", "24"]);
    assert_ok(&o);
    assert!(stdout(&o).contains("read=8 errno=0"), "{}", stdout(&o));
    let o = run("prevent", &["kernel-read", "24"]);
    assert_report(&o, "heap-use-after-free");
    assert!(stderr(&o).contains("the call's buffer is in an object that was freed"), "{}", stderr(&o));
}

/// The same before prevent mode's batch has revoked the freed object's alias: the kernel's
/// read would go into the dead object's own pages (`kernel-read-raw-now`: a page object's run
/// is not yet reused; a large object's view went at `free`, so EFAULT). The library's `read`
/// reports the freed object either way: a page object's before the call, as a small one's, and
/// a `write` of the dead object's contents before it is made. (Before, a page object's buffer
/// was taken for no object: the read went through, and the write sent the old contents.)
#[test]
fn a_system_call_into_a_freed_object_is_reported_before_its_revocation() {
    for (size, raw) in [("24", "read=8 errno=0"), ("5000", "read=8 errno=0"), ("300000", "read=-1 errno=14")] {
        let o = run("prevent", &["kernel-read-raw-now", size]);
        assert_ok(&o);
        assert!(stdout(&o).contains(raw), "{size}: {}", stdout(&o));
        let o = run("prevent", &["kernel-read-now", size]);
        assert_report(&o, "heap-use-after-free");
        let err = stderr(&o);
        assert!(err.contains("system call of "), "{size}: {err}");
        assert!(!stdout(&o).contains("read="), "{size}: the call returned: {}", stdout(&o));
        if size != "300000" {
            assert!(err.contains("the call's buffer is in an object that was freed"), "{size}: {err}");
            let object = format!(" of {size} bytes; the address is at offset 0 from its start");
            assert!(err.contains(&object), "{size}: {err}");
            // Nothing of the dead object is sent either.
            let o = run("prevent", &["kernel-write-now", size]);
            assert_report(&o, "heap-use-after-free");
            assert!(stderr(&o).contains("the call's buffer is in an object that was freed"), "{size}: {}", stderr(&o));
            assert!(!stdout(&o).contains("sent="), "{size}: the call returned: {}", stdout(&o));
        }
    }
}

/// A datagram bigger than the live object it is received into: the kernel's copy runs through
/// the object and fails at the guard page after it, and the datagram is dropped. The library's
/// `recv` reports the overflow (it made the call again, and waited for ever for the next
/// datagram, before); the program never sees the call return.
#[test]
fn a_system_call_running_past_the_end_of_an_object_is_reported() {
    for mode in ["detect", "prevent"] {
        let o = run(mode, &["kernel-overflow"]);
        assert_report(&o, "heap-buffer-overflow");
        let err = stderr(&o);
        assert!(err.contains("system call of ") && err.contains("runs past the end of the object"), "{mode}: {err}");
        assert!(err.contains("of 8192 bytes; the address is at offset 8192 from its start"), "{mode}: {err}");
        assert!(!stdout(&o).contains("recv="), "{mode}: {}", stdout(&o));
    }
}

/// A call that moves more bytes through a heap buffer than its object holds: a read wrote over
/// what follows the object (reported when the call returns, before the program uses it); a
/// write or send would read it out (a length the peer chose, as Heartbleed's was, which no
/// canary sees: reported before the call is made, the bytes never sent). The same holds for
/// `fread`, `fgets` (and the wide `fgetws`) and `fwrite`, whose copies the C library makes
/// itself, and `gets`; their
/// reports name them. The same calls within the object are left alone.
#[test]
fn system_calls_moving_bytes_past_the_end_of_an_object_are_reported() {
    let calls = [
        ("read", "wrote"),
        ("recv", "wrote"),
        ("recvfrom", "wrote"),
        ("readv", "wrote"),
        ("recvmsg", "wrote"),
        ("recvmmsg", "wrote"),
        ("pread", "wrote"),
        ("write", "was to read"),
        ("send", "was to read"),
        ("sendto", "was to read"),
        ("writev", "was to read"),
        ("sendmsg", "was to read"),
        ("sendmmsg", "was to read"),
        ("pwrite", "was to read"),
        // The C library's stdio calls, which copy in user mode between the stream's buffer and
        // the program's.
        ("fread", "wrote"),
        ("fgets", "wrote"),
        ("fgetws", "wrote"),
        ("fgetws_unlocked", "wrote"),
        ("__fgetws_chk", "wrote"),
        ("fwrite", "was to read"),
        // The line of `gets`, read from standard input: reported before a byte past the end
        // is written.
        ("gets", "was to write"),
        // Calls that fill a buffer with what the kernel holds.
        ("getrandom", "wrote"),
        ("readlink", "wrote"),
        ("readlinkat", "wrote"),
        ("getxattr", "wrote"),
        ("listxattr", "wrote"),
        ("getdents64", "wrote"),
        ("getcwd", "wrote"),
        ("realpath", "wrote"),
        ("__realpath_chk", "wrote"),
    ];
    let stdio = ["fread", "fgets", "fgetws", "fgetws_unlocked", "__fgetws_chk", "fwrite", "gets"];
    // A link's target, an attribute, a path are at most a few KiB; a directory's entries are
    // whole (the call returns within 32 bytes of the length).
    let small =
        ["readlink", "readlinkat", "getxattr", "listxattr", "getdents64", "getcwd", "realpath", "__realpath_chk"];
    for mode in ["detect", "prevent"] {
        for (call, did) in calls {
            let o = run(mode, &["moved", call, "100", "0"]);
            assert_ok(&o);
            let whole = if call == "getdents64" { "moved=" } else { "moved=100" };
            assert!(stdout(&o).contains(whole), "{mode} {call}: {}", stdout(&o));
            for (size, extra) in [("100", "50"), ("300000", "1")] {
                let on_sockets =
                    ["read", "recv", "recvfrom", "readv", "recvmmsg", "send", "sendto", "sendmsg", "sendmmsg"];
                if size == "300000" && (on_sockets.contains(&call) || small.contains(&call)) {
                    // A socket moves at most what it holds at once: not past 300000 bytes.
                    continue;
                }
                let o = run(mode, &["moved", call, size, extra]);
                assert_report(&o, "heap-buffer-overflow");
                let err = stderr(&o);
                // The C library's calls that copy in user mode are named.
                let op = if stdio.contains(&call) || call.contains("realpath") { call } else { "system call" };
                assert!(err.contains(&format!("{op} of 0x")), "{mode} {call}: {err}");
                assert!(err.contains(&format!("the call {did} past the end of the object")), "{mode} {call}: {err}");
                assert!(err.contains(&format!("of {size} bytes; the address is at offset {size} from")), "{err}");
                assert!(!stdout(&o).contains("moved="), "{mode} {call}: {}", stdout(&o));
            }
        }
        // A page object ends in a guard page, where the kernel's read would stop: the length
        // asked for is reported all the same.
        let o = run(mode, &["moved", "pwrite", "4096", "1"]);
        assert_report(&o, "heap-buffer-overflow");
        assert!(stderr(&o).contains("of 4096 bytes; the address is at offset 4096 from"), "{}", stderr(&o));
    }
}

/// The copies (and wide formatting calls) a program built with `_FORTIFY_SOURCE` calls where
/// the compiler knows the size of the destination (the tests call them with none known, and
/// with a size too small).
const FORTIFIED_COPIES: [&str; 13] = [
    "__memcpy_chk",
    "__memmove_chk",
    "__mempcpy_chk",
    "__memset_chk",
    "__explicit_bzero_chk",
    "__strcpy_chk",
    "__stpcpy_chk",
    "__strcat_chk",
    "__strncpy_chk",
    "__stpncpy_chk",
    "__strncat_chk",
    "__strlcpy_chk",
    "__strlcat_chk",
];

/// The fortified names of the wide-character copies and formatting calls.
const WIDE_FORTIFIED: [&str; 14] = [
    "__wmemcpy_chk",
    "__wmemmove_chk",
    "__wmempcpy_chk",
    "__wmemset_chk",
    "__wcscpy_chk",
    "__wcpcpy_chk",
    "__wcscat_chk",
    "__wcsncpy_chk",
    "__wcpncpy_chk",
    "__wcsncat_chk",
    "__wcslcpy_chk",
    "__wcslcat_chk",
    "__swprintf_chk",
    "__vswprintf_chk",
];

/// The formatting calls, plain and fortified (as a program built with `_FORTIFY_SOURCE` calls
/// them with a buffer whose size the compiler does not know).
const FORMAT_CALLS: [&str; 8] = [
    "sprintf",
    "vsprintf",
    "snprintf",
    "vsnprintf",
    "__sprintf_chk",
    "__vsprintf_chk",
    "__snprintf_chk",
    "__vsnprintf_chk",
];

/// The C library's copies (`memcpy`, `strcpy`, ...) and formatting calls (`sprintf`, ...) into
/// a heap object that would run past its end are reported before a byte past it is written,
/// and so is a `memcpy` out of one past its end (Heartbleed's over-read), or a `strdup` of a
/// string with no NUL before its end, or a sort (`qsort`, `qsort_r`) of more elements than
/// the object holds: the neighbours are never overwritten or read. Copies that fit are left
/// alone; `check_copies=0` leaves the overflow to the canary.
#[test]
fn copies_running_past_the_end_of_an_object_are_reported() {
    let copies = [
        "memcpy",
        "memmove",
        "mempcpy",
        "__mempcpy",
        "memset",
        "explicit_bzero",
        "bzero",
        "__bzero",
        "bcopy",
        "memccpy",
        "memccpy-none",
        "strcpy",
        "stpcpy",
        "strcat",
        "strncpy",
        "stpncpy",
        "__stpncpy",
        "strncat",
        "strlcpy",
        "strlcat",
        "memcpy-out",
        "strdup-out",
        "__strdup-out",
        "strndup-out",
        "strftime",
        "strftime_l",
        "qsort",
        "qsort_r",
    ];
    let calls: Vec<&str> = copies.iter().chain(FORTIFIED_COPIES.iter()).chain(FORMAT_CALLS.iter()).copied().collect();
    assert_copies_past_the_end_reported(&calls, ["memcpy", "sprintf"]);
    for mode in ["detect", "prevent"] {
        // An object the look-up met before and that shrank since (`realloc`) is held to its
        // new end.
        let o = run(mode, &["copy-shrunk"]);
        assert_report(&o, "heap-buffer-overflow");
        assert!(stderr(&o).contains("memcpy of 0x") && stderr(&o).contains("of 100 bytes;"), "{mode}: {}", stderr(&o));
        assert!(!stdout(&o).contains("copied"), "{mode}: {}", stdout(&o));
    }
}

/// The same for the wide-character copies (`wmemcpy`, `wcscpy`, ...) and formatting calls
/// (`swprintf`, ...), whose lengths count characters.
#[test]
fn wide_copies_running_past_the_end_of_an_object_are_reported() {
    let copies = [
        "wmemcpy",
        "wmemmove",
        "wmempcpy",
        "wmemset",
        "wcscpy",
        "wcpcpy",
        "wcscat",
        "wcsncpy",
        "wcpncpy",
        "wcsncat",
        "wcslcpy",
        "wcslcat",
        "wmemcpy-out",
        "wcsdup-out",
        "swprintf",
        "vswprintf",
        "wcsftime",
        "wcsftime_l",
        "__wcsftime_l",
    ];
    let calls: Vec<&str> = copies.iter().chain(WIDE_FORTIFIED.iter()).copied().collect();
    assert_copies_past_the_end_reported(&calls, ["wmemcpy", "swprintf"]);
}

/// Each of `calls` (`uaf copy`) that fits its object is made and returns what it should; each
/// that would run past the end of a small, a page and a large object is reported, naming the
/// call, before it is made. `unchecked` are made with `check_copies=0`, and the canary finds
/// their overflow at `free`.
fn assert_copies_past_the_end_reported(calls: &[&str], unchecked: [&str; 2]) {
    for mode in ["detect", "prevent"] {
        for &call in calls {
            let op = call.trim_end_matches("-out").trim_end_matches("-none");
            let did = if call.ends_with("-out") { "was to read" } else { "was to write" };
            let o = run(mode, &["copy", call, "100", "0"]);
            assert_ok(&o);
            assert!(stdout(&o).contains("copied"), "{mode} {call}: {}", stdout(&o));
            for (size, extra) in [("100", "50"), ("100", "9"), ("4096", "1"), ("300000", "1")] {
                let o = run(mode, &["copy", call, size, extra]);
                assert_report(&o, "heap-buffer-overflow");
                let err = stderr(&o);
                assert!(err.contains(&format!("{op} of 0x")), "{mode} {call} {size}+{extra}: {err}");
                assert!(err.contains(&format!("the call {did} past the end of the object")), "{mode} {call}: {err}");
                assert!(err.contains(&format!("of {size} bytes; the address is at offset {size} from")), "{err}");
                assert!(!stdout(&o).contains("copied"), "{mode} {call}: {}", stdout(&o));
            }
        }
        for call in unchecked {
            let o = run(&format!("{mode}:check_copies=0"), &["copy", call, "100", "9"]);
            assert_report(&o, "heap-buffer-overflow");
            assert!(stdout(&o).contains("copied"), "{mode} {call}: {}", stdout(&o));
            assert!(!stderr(&o).contains(&format!("{call} of 0x")), "{mode} {call}: {}", stderr(&o));
        }
    }
}

/// `inet_ntop` given a length past its heap object's end: a text that fits the object is
/// written, one that does not is reported before it is written, and one that does not fit the
/// length either fails as under glibc.
#[test]
fn addresses_formatted_past_the_end_of_an_object_are_reported() {
    let six = "1111:2222:3333:4444:5555:6666:7777:8888";
    for mode in ["detect", "prevent"] {
        for (args, out) in [
            (&["40", "46"][..], format!("ntop {six}")),
            (&["4096", "46"], format!("ntop {six}")),
            (&["300000", "46"], format!("ntop {six}")),
            (&["16", "46", "4"], "ntop 255.255.255.255".to_string()),
            (&["16", "10"], "ntop NULL No space left on device".to_string()),
        ] {
            let o = run(mode, &[&["ntop"][..], args].concat());
            assert_ok(&o);
            assert_eq!(stdout(&o).trim_end(), out, "{mode} {args:?}");
        }
        for args in [&["39", "46"][..], &["16", "46"], &["15", "46", "4"]] {
            assert_reported_before_writing(mode, "ntop", args, "inet_ntop", args[0]);
        }
    }
}

/// `mbstowcs`, `wcstombs` and `iconv` given a length past their heap object's end: a
/// conversion that fits the object is made (and `iconv` leaves its pointers and lengths as the
/// C library's does), one that would run past it is reported before it is made, whether its
/// NUL fits the length or not (then the characters that fit, never a part of one). The same
/// for the restartable conversions `mbsrtowcs`, `mbsnrtowcs`, `wcsrtombs` and `wcsnrtombs`,
/// each case of `mbstowcs` and `wcstombs` made with them too.
#[test]
fn conversions_past_the_end_of_an_object_are_reported() {
    // Each case of `mbstowcs` or `wcstombs` with each of its kin.
    fn kin(call: &str) -> Vec<&str> {
        match call {
            "mbstowcs" => vec![call, "mbsrtowcs", "mbsnrtowcs"],
            "wcstombs" => vec![call, "wcsrtombs", "wcsnrtombs"],
            _ => vec![call],
        }
    }
    for mode in ["detect", "prevent"] {
        for (args, out) in [
            (&["mbstowcs", "124", "100", "30"][..], "conv 30"),
            (&["mbstowcs", "40", "10", "30"], "conv 10"),
            (&["wcstombs", "31", "100", "30"], "conv 30"),
            (&["wcstombs", "61", "100", "30", "utf8"], "conv 60"),
            (&["wcstombs", "24", "25", "30", "utf8"], "conv 24"),
            // `iconv` told its object holds what it holds, and more than it holds (within the
            // margin and past it), with a text that fits; one whose next character would not
            // fit the length either (E2BIG, as under glibc).
            (&["iconv", "100", "100", "40"], "conv 0 ok wrote=80"),
            (&["iconv", "100", "200", "40"], "conv 0 ok wrote=80"),
            (&["iconv", "100", "100000", "40"], "conv 0 ok wrote=80"),
            (&["iconv", "100", "101", "51"], "conv -1 E2BIG wrote=100"),
        ] {
            for call in kin(args[0]) {
                let args = [&[call][..], &args[1..]].concat();
                let o = run(mode, &[&["conv"][..], &args].concat());
                assert_ok(&o);
                assert_eq!(stdout(&o).trim_end(), out, "{mode} {args:?}");
            }
        }
        for args in [
            &["mbstowcs", "120", "100", "30"][..],
            &["mbstowcs", "4096", "2000", "1024"],
            &["mbstowcs", "300000", "100000", "75000"],
            &["wcstombs", "30", "100", "30"],
            &["wcstombs", "60", "100", "30", "utf8"],
            &["wcstombs", "20", "25", "30", "utf8"],
            &["wcstombs", "300000", "400000", "300000"],
            &["iconv", "100", "200", "60"],
            &["iconv", "100", "100000", "40000"],
            &["iconv", "4096", "8192", "2049"],
            &["iconv", "300000", "400000", "150001"],
        ] {
            for call in kin(args[0]) {
                let args = [&[call][..], &args[1..]].concat();
                assert_reported_before_writing(mode, "conv", &args, call, args[1]);
            }
        }
    }
}

/// `wcrtomb` and `mbrtowc`, and `wctomb` and `mbtowc` (in UTF-8, which keeps no shift state),
/// at the end of a heap object: a character that fits is converted,
/// one whose bytes (or wide character) would run past the end is reported before it is
/// written, and an incomplete sequence, which writes nothing, is left alone.
#[test]
fn one_character_conversions_past_the_end_of_an_object_are_reported() {
    for mode in ["detect", "prevent"] {
        for (args, out) in [
            (&["wcrtomb", "100", "98"][..], "conv 2"),
            (&["wcrtomb", "100", "0"], "conv 2"),
            (&["mbrtowc", "100", "96"], "conv 1"),
            (&["mbrtowc", "100", "98", "part"], "conv -2"),
            (&["wctomb", "100", "98"], "conv 2"),
            (&["mbtowc", "100", "96"], "conv 1"),
            (&["mbtowc", "100", "98", "part"], "conv -1"),
        ] {
            let o = run(mode, &[&["conv1"][..], args].concat());
            assert_ok(&o);
            assert_eq!(stdout(&o).trim_end(), out, "{mode} {args:?}");
        }
        for args in [
            &["wcrtomb", "100", "99"][..],
            &["mbrtowc", "100", "98"],
            &["mbrtowc", "4096", "4093"],
            &["wctomb", "100", "99"],
            &["mbtowc", "100", "98"],
            &["mbtowc", "4096", "4093"],
        ] {
            assert_reported_before_writing(mode, "conv1", args, args[0], args[1]);
        }
    }
}

/// The string and memory reads the program calls (`strlen`, `memcmp`, `strchr`, ...), on a
/// live heap object: one that stays within it returns what glibc's returns; one that runs past
/// its end (a string without a NUL, a length past the end) is reported in detect mode when it
/// returns, naming the call, before the program goes on. Reads that stop in the canary after
/// the object (at a bound, or a difference) are checked on page and large objects too; the
/// others run on into the guard page after those, which traps. Prevent mode checks them only
/// with `check_reads=1`, and `check_reads=0` turns detect mode's check off.
#[test]
fn reads_past_the_end_of_an_object_are_reported() {
    let fits = [
        ("strlen", "99"),
        ("strnlen", "99"),
        ("strchr", "-1"),
        ("strchrnul", "99"),
        ("strrchr", "98"),
        ("strcmp", "0"),
        ("strncmp", "0"),
        ("strcasecmp", "0"),
        ("strncasecmp", "0"),
        ("strstr", "-1"),
        ("strspn", "99"),
        ("strcspn", "99"),
        ("strpbrk", "-1"),
        ("memchr", "-1"),
        ("memrchr", "-1"),
        ("memcmp", "0"),
        ("bcmp", "0"),
        ("memmem", "-1"),
        ("wcslen", "24"),
        ("wcscmp", "0"),
        ("wmemcmp", "0"),
        ("strcasestr", "-1"),
        ("rawmemchr", "99"),
        ("wcsnlen", "24"),
        ("wcschr", "-1"),
        ("wcsrchr", "92"),
        ("wmemchr", "-1"),
        ("wcsncmp", "0"),
    ];
    let bounded = [
        "strnlen",
        "strcmp",
        "strncmp",
        "strcasecmp",
        "strncasecmp",
        "memchr",
        "memrchr",
        "memcmp",
        "bcmp",
        "memmem",
        "wcscmp",
        "wmemcmp",
        "wcsnlen",
        "wmemchr",
        "wcsncmp",
    ];
    let reported = |options: &str, call: &str, size: &str| {
        assert_reported_first(options, "strread", &[call, size, "1"], call, size, "read")
    };
    let unreported = |options: &str, call: &str| {
        let o = run(options, &["strread", call, "100", "1"]);
        assert_ok(&o);
        assert!(stdout(&o).starts_with("read "), "{options} {call}: {}", stdout(&o));
    };
    for mode in ["detect", "prevent"] {
        for (call, r) in fits {
            let o = run(mode, &["strread", call, "100", "0"]);
            assert_ok(&o);
            assert_eq!(stdout(&o).trim_end(), format!("read {r}"), "{mode} {call}");
        }
    }
    for (call, _) in fits {
        reported("detect", call, "100");
        unreported("prevent", call);
    }
    for call in bounded {
        reported("detect", call, "5000");
        reported("detect", call, "300000");
    }
    for call in ["strlen", "strcmp", "memcmp", "strchr", "wcslen"] {
        reported("prevent:check_reads=1", call, "100");
        unreported("detect:check_reads=0", call);
    }
}

/// The user and group database look-ups (`getpwnam_r`, `getpwuid_r`, `getgrnam_r`,
/// `getgrgid_r`) told a length past their buffer's heap object: the C library is told only the
/// room the object has, so an entry that fits it is found (under glibc alone, which reads each
/// line of `/etc/passwd` into the whole length, a buffer of 100 bytes told 1000 was written
/// past, and a 4 KiB one told 100 000 ran into addresses never handed out); one that fits the
/// caller's length but not the object is reported before the program goes on; one too long for
/// the caller's length too gets `ERANGE`, as under glibc.
///
/// The same for the enumerations (`getpwent_r`, `getgrent_r`, `getspent_r`, and `fgetpwent_r`,
/// `fgetgrent_r`, `fgetspent_r` of a file), whose entry too long for the buffer stays the
/// next one, for the shadow database (`getspnam_r`), and for the host, service and protocol
/// databases (under glibc alone, `getservbyname_r` into a 100-byte object told 1 000 ended in
/// SIGSEGV: the look-up reads every line before the entry into the buffer, and the first line
/// of /etc/services here is 104 bytes long), and for `getgrouplist` told more groups than its
/// list's object holds.
#[test]
fn database_entries_past_the_end_of_an_object_are_reported() {
    let calls = [
        ("getpwnam_r", "root"),
        ("getpwuid_r", "root"),
        ("getgrnam_r", "root"),
        ("getgrgid_r", "root"),
        ("gethostbyname_r", "localhost"),
        ("gethostbyname2_r", "localhost"),
        ("gethostbyaddr_r", "localhost"),
        ("getservbyname_r", "http"),
        ("getservbyport_r", "http"),
        ("getprotobyname_r", "tcp"),
        ("getprotobynumber_r", "tcp"),
        ("getpwent_r", "root"),
        ("getgrent_r", "root"),
        ("fgetpwent_r", "root"),
        ("fgetgrent_r", "root"),
        ("fgetspent_r", "root"),
        ("getspnam_r", "root"),
        ("getspent_r", "root"),
    ];
    // The shadow database: a user who cannot read /etc/shadow gets nothing from it, or root's
    // entry from a module that keeps its strings out of the buffer (systemd's: `nobody` here).
    // Then every look-up answers as the C library answers it alone, without a report.
    let plain = |args: &[&str]| {
        let o = program(&uaf()).args(args).output().expect("spawn program");
        assert_ok(&o);
        stdout(&o).trim_end().to_string()
    };
    for mode in ["detect", "prevent"] {
        for (call, name) in calls {
            let found = format!("lookup 0 {name}");
            if call.starts_with("getsp")
                && (plain(&["lookup", call, "1024", "1024"]) != found
                    || plain(&["lookup", call, "8", "8"]) != "lookup 34")
            {
                for args in [["1024", "1024"], ["8", "8"], ["8", "1024"]] {
                    let o = run(mode, &["lookup", call, args[0], args[1]]);
                    assert_ok(&o);
                    let want = plain(&["lookup", call, args[0], args[1]]);
                    assert_eq!(stdout(&o).trim_end(), want, "{mode} {call} {args:?}: {}", stderr(&o));
                }
                continue;
            }
            // A buffer of 100 bytes holds every line of /etc/passwd and /etc/group here; the
            // other files may have longer lines (a comment of 104 bytes opens /etc/services),
            // and a line that does not fit makes the look-up answer ERANGE.
            let short = if call.starts_with("getpw") || call.starts_with("getgr") { "100" } else { "512" };
            for (args, out) in [
                (["1024", "1024"], found.as_str()),
                ([short, "4000"], &found),
                (["4096", "100000"], &found),
                (["300000", "400000"], &found),
                (["8", "8"], "lookup 34"),
            ] {
                let o = run(mode, &["lookup", call, args[0], args[1]]);
                assert_ok(&o);
                assert_eq!(stdout(&o).trim_end(), out, "{mode} {call} {args:?}: {}", stderr(&o));
            }
            assert_reported_first(mode, "lookup", &[call, "8", "1024"], call, "8", "was to write");
            if call.contains("ent_r") {
                // An enumeration's entry too long for the buffer stays the next one: the
                // wrapper's own calls skip none.
                let o = run(mode, &["enumerate", call]);
                assert_ok(&o);
                assert_eq!(stdout(&o).trim_end(), "enumerate 34 0 0 same", "{mode} {call}: {}", stderr(&o));
            }
        }
        // root's groups (one, here), into lists of room for 16, for 2 told 1000, for none told
        // none (-1, and the count needed).
        for (args, out) in
            [(["64", "16"], "groups 1 1 same"), (["8", "1000"], "groups 1 1 same"), (["2", "0"], "groups -1 1 same")]
        {
            let o = run(mode, &["groups", args[0], args[1]]);
            assert_ok(&o);
            assert_eq!(stdout(&o).trim_end(), out, "{mode} groups {args:?}: {}", stderr(&o));
        }
        assert_reported_first(mode, "groups", &["2", "16"], "getgrouplist", "2", "was to write");
    }
}

/// Names and messages the C library writes into a buffer told its length (`gethostname`,
/// `getdomainname`, `ttyname_r`, `ptsname_r`, `confstr`, both `strerror_r`s, `getnameinfo`'s
/// host and service, the collation transforms `strxfrm`, `wcsxfrm` and their `_l` kin):
/// told more than the buffer's heap object holds, a name that fits the object gives what the C
/// library gives (its result and text); one that does not fit the length either gives the C
/// library's answer to a buffer too small; one that fits the length but not the object, which
/// the C library would have written past the object's end, is reported before the program goes
/// on (under glibc alone, `__xpg_strerror_r` into a 1-byte object told 200 ends in "free():
/// invalid size"). The calls that take no length (`if_indextoname`, `asctime_r`, `ctime_r`)
/// are reported when the object is smaller than what they write, and `getentropy` when it is
/// smaller than the length asked for.
#[test]
fn names_and_messages_past_the_end_of_an_object_are_reported() {
    // (case's call, the name of the call reported, result when it fits, result for 1 byte)
    let told = [
        ("gethostname", "gethostname", "0", "-1"),
        // The C library copies what fits and answers 0.
        ("getdomainname", "getdomainname", "0", "0"),
        ("ttyname_r", "ttyname_r", "0", "34"),
        ("ptsname_r", "ptsname_r", "0", "34"),
        ("confstr", "confstr", "14", "14"),
        ("strerror_r", "strerror_r", "1", "1"),
        ("__xpg_strerror_r", "__xpg_strerror_r", "0", "34"),
        ("getnameinfo-host", "getnameinfo", "0", "-12"),
        ("getnameinfo-serv", "getnameinfo", "0", "-12"),
        ("strxfrm", "strxfrm", "21", "21"),
        ("strxfrm_l", "strxfrm_l", "21", "21"),
        ("__strxfrm_l", "__strxfrm_l", "21", "21"),
        ("wcsxfrm", "wcsxfrm", "21", "21"),
        ("wcsxfrm_l", "wcsxfrm_l", "21", "21"),
        ("__wcsxfrm_l", "__wcsxfrm_l", "21", "21"),
    ];
    for mode in ["detect", "prevent"] {
        for (call, op, fits, short) in told {
            for (args, r) in [(["200", "200"], fits), (["200", "4000"], fits), (["1", "1"], short)] {
                let o = run(mode, &["named", call, args[0], args[1]]);
                assert_ok(&o);
                assert_eq!(stdout(&o).trim_end(), format!("named {r} same"), "{mode} {call} {args:?}: {}", stderr(&o));
            }
            assert_reported_first(mode, "named", &[call, "1", "200"], op, "1", "was to write");
        }
        for (call, fits, short) in [("if_indextoname", "16", "15"), ("asctime_r", "26", "25"), ("ctime_r", "26", "25")]
        {
            let o = run(mode, &["named", call, fits, "100"]);
            assert_ok(&o);
            assert_eq!(stdout(&o).trim_end(), "named 1 same", "{mode} {call}: {}", stderr(&o));
            assert_reported_first(mode, "named", &[call, short, "100"], call, short, "was to write");
        }
        // The collation transforms of a 21-character text: its 22 units fit an object of 22
        // (88 bytes for the wide ones told 100 units), not one of 21 (84).
        for (call, unit) in
            [("strxfrm", 1), ("strxfrm_l", 1), ("__strxfrm_l", 1), ("wcsxfrm", 4), ("wcsxfrm_l", 4), ("__wcsxfrm_l", 4)]
        {
            let (fits, short) = ((22 * unit).to_string(), (21 * unit).to_string());
            let o = run(mode, &["named", call, &fits, "400"]);
            assert_ok(&o);
            assert_eq!(stdout(&o).trim_end(), "named 21 same", "{mode} {call}: {}", stderr(&o));
            assert_reported_first(mode, "named", &[call, &short, "400"], call, &short, "was to write");
        }
        let o = run(mode, &["named", "getentropy", "16", "16"]);
        assert_ok(&o);
        assert_eq!(stdout(&o).trim_end(), "named 0 same", "{mode}: {}", stderr(&o));
        assert_reported_first(mode, "named", &["getentropy", "16", "17"], "getentropy", "16", "was to write");
    }
}

/// `getline`, `getdelim` and `__getdelim` given a size past their heap object's end (a size
/// kept from a bigger buffer): a line that fits the object is read into it and the caller's
/// size stays; one longer than the size grows the buffer, as under glibc; one that fits the
/// size but not the object, which the C library would have written past the object's end, is
/// reported when the call returns, for small, page and large objects.
#[test]
fn lines_read_past_the_end_of_an_object_are_reported() {
    for mode in ["detect", "prevent"] {
        for call in ["getline", "getdelim", "__getdelim"] {
            for (args, out) in [
                (["100", "100", "50"], "getline 51 same 100"),
                (["100", "200", "50"], "getline 51 same 200"),
                (["100", "200", "300"], "getline 301 grown"),
                (["100", "101", "100"], "getline 101 grown"),
            ] {
                let o = run(mode, &[&["getline", call][..], &args].concat());
                assert_ok(&o);
                assert_eq!(stdout(&o).trim_end(), out, "{mode} {call} {args:?}");
            }
            for args in [["100", "200", "120"], ["4096", "8192", "5000"], ["300000", "400000", "350000"]] {
                assert_reported_before_writing(mode, "getline", &[&[call][..], &args].concat(), call, args[0]);
            }
        }
    }
}

/// `uaf CASE ARGS...` ends by a report that `call` was to write past the end of the object
/// of `size` bytes its buffer starts in, before the case printed anything.
fn assert_reported_before_writing(mode: &str, case: &str, args: &[&str], call: &str, size: &str) {
    assert_reported_first(mode, case, args, call, size, "was to write");
}

/// `uaf CASE ARGS...` ends by a report that `call` `did` ("was to write", "read") past the end
/// of the object of `size` bytes its buffer starts in, before the case printed anything.
fn assert_reported_first(mode: &str, case: &str, args: &[&str], call: &str, size: &str, did: &str) {
    let o = run(mode, &[&[case][..], args].concat());
    assert_report(&o, "heap-buffer-overflow");
    let err = stderr(&o);
    assert!(err.contains(&format!("{call} of 0x")), "{mode} {case} {args:?}: {err}");
    assert!(err.contains(&format!("the call {did} past the end of the object")), "{mode} {case} {args:?}: {err}");
    assert!(err.contains(&format!("of {size} bytes; the address is at offset {size} from")), "{err}");
    assert!(stdout(&o).is_empty(), "{mode} {case} {args:?}: {}", stdout(&o));
}

/// Asserts that `uaf.c CASE CALL CONV SIZE EXTRA` (a scan of a word SIZE + EXTRA bytes long
/// into an object of SIZE) is reported by the call's name when it returns, the program never
/// going on.
fn assert_scan_reported(mode: &str, case: &str, call: &str, conv: &str, size: &str, extra: &str) {
    let o = run(mode, &[case, call, conv, size, extra]);
    assert_report(&o, "heap-buffer-overflow");
    let err = stderr(&o);
    assert!(err.contains(&format!("{call} of 0x")), "{mode} {call} {conv} {size}+{extra}: {err}");
    assert!(err.contains("the call wrote past the end of the object"), "{mode} {call}: {err}");
    assert!(err.contains(&format!("of {size} bytes; the address is at offset {size} from")), "{err}");
    assert!(!stdout(&o).contains("scanned"), "{mode} {call} {conv}: {}", stdout(&o));
}

/// A scan (`sscanf`, `fscanf`, `scanf` and their `v`, C99 and C23 names) that wrote a string past
/// the end of its heap object is reported when it returns, before the program goes on; one
/// that fits is left alone, and the formats the check follows make the C library's values.
#[test]
fn scans_writing_past_the_end_of_an_object_are_reported() {
    let calls = [
        "sscanf",
        "__isoc99_sscanf",
        "vsscanf",
        "__isoc99_vsscanf",
        "fscanf",
        "__isoc99_fscanf",
        "vfscanf",
        "__isoc99_vfscanf",
        "scanf",
        "__isoc99_scanf",
        "vscanf",
        "__isoc99_vscanf",
        "__isoc23_sscanf",
        "__isoc23_vsscanf",
        "__isoc23_fscanf",
        "__isoc23_vfscanf",
        "__isoc23_scanf",
        "__isoc23_vscanf",
    ];
    for mode in ["detect", "prevent"] {
        for call in calls {
            // Every kind of string for the two calls programs make most, "%s" for the others.
            let convs: &[&str] = if call.ends_with("sscanf") { &["s", "set", "c"] } else { &["s"] };
            for &conv in convs {
                let o = run(mode, &["scan", call, conv, "100", "0"]);
                assert_ok(&o);
                assert!(stdout(&o).contains("scanned 2 x=7"), "{mode} {call} {conv}: {}", stdout(&o));
                for (size, extra) in [("100", "50"), ("100", "1"), ("300000", "1")] {
                    assert_scan_reported(mode, "scan", call, conv, size, extra);
                }
            }
        }
        let o = run(mode, &["scan-formats"]);
        assert_ok(&o);
        assert_eq!(
            stdout(&o).lines().collect::<Vec<_>>(),
            ["numbers 8 12 2.5 12 34 abc def XYZ w 99", "many 6 abcdef", "positional 2 5 xyz", "gnu 1 allocated"],
            "{mode}"
        );
        // With the checks off, the canary finds the overflow at `free`.
        let o = run(&format!("{mode}:check_copies=0"), &["scan", "__isoc99_sscanf", "s", "100", "9"]);
        assert_report(&o, "heap-buffer-overflow");
        assert!(stdout(&o).contains("scanned 2"), "{mode}: {}", stdout(&o));
        assert!(!stderr(&o).contains("sscanf of 0x"), "{mode}: {}", stderr(&o));
    }
}

/// The wide scans (`swscanf`, `fwscanf`, `wscanf`, their `v`, C99 and C23 names) as the narrow
/// ones: a string written past the end of its heap object is reported when the call returns,
/// a narrow (`%s`, `%[`, `%c`) or a wide one (`%ls`). A narrow string that fills its object
/// exactly is left alone, with the checks on or off, although the C library writes a second
/// NUL after it, over the canary (`heap::mend_library_nul`), but not a NUL the program wrote
/// there before the call; the formats the check follows
/// (characters past ASCII among them) make the C library's values.
#[test]
fn wide_scans_writing_past_the_end_of_an_object_are_reported() {
    let calls = [
        "swscanf",
        "__isoc99_swscanf",
        "vswscanf",
        "__isoc99_vswscanf",
        "__isoc23_swscanf",
        "__isoc23_vswscanf",
        "fwscanf",
        "__isoc99_fwscanf",
        "vfwscanf",
        "__isoc99_vfwscanf",
        "wscanf",
        "__isoc99_wscanf",
        "vwscanf",
        "__isoc99_vwscanf",
        "__isoc23_fwscanf",
        "__isoc23_vfwscanf",
        "__isoc23_wscanf",
        "__isoc23_vwscanf",
    ];
    for mode in ["detect", "prevent"] {
        for call in calls {
            // Every kind of string for the calls from a string, "%s" and "%ls" for the others.
            let convs: &[&str] = if call.ends_with("swscanf") { &["s", "set", "c", "ls"] } else { &["s", "ls"] };
            for &conv in convs {
                for size in ["100", "24"] {
                    let o = run(mode, &["wscan", call, conv, size, "0"]);
                    assert_ok(&o);
                    assert!(stdout(&o).contains("scanned 2 x=7"), "{mode} {call} {conv} {size}: {}", stdout(&o));
                }
                // Past the end by one unit, and by many; past a large object (the C library
                // takes 0.2 s to scan its 140 000 characters into a narrow string).
                let unit = if conv == "ls" { 4 } else { 1 };
                for (size, extra) in [("100", 13 * unit), ("100", unit), ("140000", unit)] {
                    assert_scan_reported(mode, "wscan", call, conv, size, &extra.to_string());
                }
            }
        }
        let o = run(mode, &["wscan-formats"]);
        assert_ok(&o);
        assert_eq!(
            stdout(&o).lines().collect::<Vec<_>>(),
            ["numbers 9 12 2.5 13 34 abc def XYZ w 99 xy", "many 6 abcdef", "gnu 1 allocated"],
            "{mode}"
        );
        // A NUL the program wrote past the end before the call is not taken for the C
        // library's, with the checks on or off: reported at the call.
        for opts in [mode.to_string(), format!("{mode}:check_copies=0")] {
            let o = run(&opts, &["wscan", "swscanf", "s", "100", "0", "offbyone"]);
            assert_report(&o, "heap-buffer-overflow");
            let err = stderr(&o);
            assert!(err.contains("swscanf of 0x"), "{opts}: {err}");
            assert!(err.contains("the canary after the object was overwritten"), "{opts}: {err}");
            assert!(!stdout(&o).contains("scanned"), "{opts}: {}", stdout(&o));
        }
        // With the checks off, a string that fits is still left alone, and the canary finds
        // one that does not at `free`.
        let o = run(&format!("{mode}:check_copies=0"), &["wscan", "__isoc99_swscanf", "s", "100", "0"]);
        assert_ok(&o);
        assert!(stdout(&o).contains("scanned 2 x=7"), "{mode}: {}", stdout(&o));
        let o = run(&format!("{mode}:check_copies=0"), &["wscan", "__isoc99_swscanf", "s", "100", "9"]);
        assert_report(&o, "heap-buffer-overflow");
        assert!(stdout(&o).contains("scanned 2"), "{mode}: {}", stdout(&o));
        assert!(stderr(&o).contains("the canary after the object was overwritten"), "{mode}: {}", stderr(&o));
    }
}

/// A fortified copy that fits its heap object but not the size the compiler gave for its
/// destination is still ended by the C library's own check, with its own message.
#[test]
fn fortified_copies_keep_the_c_library_s_check() {
    for mode in ["detect", "prevent"] {
        for call in FORTIFIED_COPIES.iter().chain(WIDE_FORTIFIED.iter()).chain(&["__realpath_chk"]) {
            let o = run(mode, &["fortified", call]);
            assert_eq!(o.status.signal(), Some(libc::SIGABRT), "{mode} {call}: {o:?}");
            assert!(stderr(&o).contains("*** buffer overflow detected ***"), "{mode} {call}: {}", stderr(&o));
            assert!(!stderr(&o).contains("nevermore"), "{mode} {call}: {}", stderr(&o));
            assert!(!stdout(&o).contains("copied"), "{mode} {call}: {}", stdout(&o));
        }
    }
}

/// The formatting calls that the library checks make the C library's text, and return its
/// length, with every kind of argument (past the registers too), into heap objects and other
/// buffers; a length past an object's end is left alone while the text fits in the object, and
/// a length within it cuts the text as the C library does.
#[test]
fn formatting_calls_make_the_c_library_s_text() {
    let text = "66 -7|abc|3.14|123456789012|1.0|2.0|3.0|4.0|5.0|6.0|7.0|8.0|Z|beef|42";
    for mode in ["detect", "prevent"] {
        let o = run(mode, &["format-args"]);
        assert_ok(&o);
        let out = stdout(&o);
        let mut want = Vec::new();
        for call in FORMAT_CALLS {
            want.push(format!("{call} heap {text}"));
            want.push(format!("{call} stack {text}"));
            if call.contains("snprintf") {
                want.push(format!("{call} roomy 4 fits"));
                want.push(format!("{call} cut 16 012345678"));
            }
        }
        assert_eq!(out.lines().collect::<Vec<_>>(), want, "{mode}");
        // The times: a text that fits the object, an empty one, and one longer than the length
        // given (0, as under glibc, unreported); narrow and wide.
        for case in ["strftime-results", "wcsftime-results"] {
            let o = run(mode, &[case]);
            assert_ok(&o);
            assert_eq!(
                stdout(&o).lines().collect::<Vec<_>>(),
                [
                    "fits 7 2026-12",
                    "empty 0 0",
                    "too long 0",
                    "stack 34 Saturday 05 December 2026 11:06:14",
                    "locale 6 05.12."
                ],
                "{mode} {case}"
            );
        }
        // The wide-character calls: a text that does not fit returns -1 (cut as the C library
        // cuts it), and so does one the call cannot make, unreported.
        let o = run(mode, &["wformat-args"]);
        assert_ok(&o);
        let mut want = Vec::new();
        for call in ["swprintf", "vswprintf", "__swprintf_chk", "__vswprintf_chk"] {
            want.push(format!("{call} heap {text}"));
            want.push(format!("{call} stack {text}"));
            want.push(format!("{call} roomy 4 fits"));
            want.push(format!("{call} cut -1 012345678"));
            want.push(format!("{call} not-a-character -1 EILSEQ"));
        }
        assert_eq!(stdout(&o).lines().collect::<Vec<_>>(), want, "{mode}");
    }
}

/// A read or write on a freed object whose alias page stays mapped for its live neighbours
/// (prevent mode revokes a group's page once the whole group is dead): the kernel would send
/// the dead object's old contents, or write into it. The library's wrappers report it, as
/// they report a buffer whose page was revoked (detect mode).
#[test]
fn system_calls_on_a_freed_object_whose_page_is_still_mapped_are_reported() {
    for mode in ["detect", "prevent"] {
        for call in ["read", "write"] {
            let o = run(mode, &["dead-slot", call]);
            assert_report(&o, "heap-use-after-free");
            let err = stderr(&o);
            assert!(err.contains("system call of 0x"), "{mode} {call}: {err}");
            assert!(err.contains("of 100 bytes; the address is at offset 0 from"), "{mode} {call}: {err}");
            assert!(!stdout(&o).contains("moved="), "{mode} {call}: {}", stdout(&o));
        }
    }
}

#[test]
fn double_free_after_the_memory_was_reused_is_caught() {
    for mode in ["detect", "prevent"] {
        for size in SIZES {
            let o = run(mode, &["double-free", size]);
            assert_report(&o, "double-free");
            assert!(!stdout(&o).contains("second free returned"), "{mode} {size}");
        }
    }
}

/// Runs `tests/c/racing_free.c ARGS` in `mode` and asserts what every case shares: thread A
/// was held in its call while the object's memory came back to a new object, and the child
/// died of exactly one report without A's call returning (nor its read reading). Returns the
/// standard error and a description for messages.
fn held_race(mode: &str, args: &[&str]) -> (String, String) {
    let opt = format!("mode={mode}");
    let o = run_preloaded_timeout(&compile("racing_free.c", &[]), args, &[("NEVERMORE_OPTIONS", &opt)], 120);
    let (out, err) = (stdout(&o), stderr(&o));
    let what = format!("{mode} {args:?}:\n{out}\n{err}");
    assert!(o.status.success() && out.contains("HELD") && out.contains("REUSED "), "{what}");
    assert!(out.contains("CHILD SIGNAL 6"), "{what}");
    assert!(!out.contains("A RETURNED") && !out.contains("A READ"), "{what}");
    assert_eq!(err.matches("nevermore: ERROR:").count(), 1, "{what}");
    (err, what)
}

/// Two frees of one object racing each other (`tests/c/racing_free.c`): one thread's `free`
/// is held by a hardware watchpoint between its look-up and its mark, while the other thread
/// frees the object and allocates until a new object of the same size is backed by the same
/// memory. The held free must not kill that new object. Before the check after the mark,
/// it did, and the memory went to a third allocation while still in use (`OVERLAP`, in both
/// cases of prevent mode and for a large object in both modes). The same for a `realloc`
/// held there, which must not resize the new object.
#[test]
fn a_free_or_realloc_racing_a_free_never_touches_the_next_object() {
    // Held after the canary's read: a small object (the slot's lane issued again), a page
    // object (its span); a large object held after the last byte its free reads, the head
    // before it (its span and address). Then a `realloc` held there instead of the free, to a
    // size that stays in place: before, it set the size of the object found, as found, and
    // armed its canary there (a use-after-free reported on that write, or for a large object
    // grown, an overflow of another object whose guard page the write met).
    let cases: [(&str, &[&str]); 10] = [
        ("prevent", &["100"]),
        ("prevent", &["5000"]),
        ("prevent", &["200000", "head"]),
        ("detect", &["200000", "head"]),
        ("detect", &["5000", "head"]),
        ("prevent", &["100", "realloc=96"]),
        ("prevent", &["5000", "realloc=5100"]),
        ("prevent", &["200000", "head", "realloc=210000"]),
        ("detect", &["200000", "head", "realloc=190000"]),
        ("detect", &["5000", "head", "realloc=5000"]),
    ];
    for (mode, args) in cases {
        let (err, what) = held_race(mode, args);
        assert!(err.contains("nevermore: ERROR: double-free "), "{what}");
        assert!(err.contains("the object was freed by another thread at the same time"), "{what}");
        let op = if args.iter().any(|a| a.starts_with("realloc=")) { "realloc of " } else { "free of " };
        assert!(err.contains(op), "{what}");
    }
    // Held after the canary's read where the held free reads more of the object before its
    // mark (detect mode's slack after a small object, the head before a page object; a large
    // object's tail and head): that read meets the revoked alias and traps first.
    let cases: [(&str, &[&str]); 4] =
        [("detect", &["100"]), ("detect", &["5000"]), ("prevent", &["200000"]), ("detect", &["200000"])];
    for (mode, args) in cases {
        let (err, what) = held_race(mode, args);
        assert!(err.contains("nevermore: ERROR: heap-use-after-free "), "{what}");
        assert!(err.contains("READ of "), "{what}");
    }
}

/// A page mapped again for a live object must not stay mapped once the object is freed
/// (`tests/c/racing_free.c fault|syscall`): the object's page lost its entry, and a thread
/// reading it (the fault handler) or a system call writing into it (`read(2)`, which the
/// library makes again after mapping the page) is held at the install, while another thread
/// frees the object, its revocation goes out and its memory comes back to a new object
/// filled with `k`. Before, the install mapped the revoked address again: the read saw the
/// new object (`A READ k`), and the kernel wrote into it (`KEPT OBJECT CHANGED`). Now the
/// object is looked at again after the install, the entry dropped, and the access reported.
#[test]
fn a_page_mapped_again_for_an_object_freed_meanwhile_is_dropped_again() {
    for mode in ["prevent", "detect"] {
        for size in ["100", "5000"] {
            for (how, op) in [("fault", "READ of "), ("syscall", "system call of ")] {
                let (err, what) = held_race(mode, &[size, how]);
                assert!(err.contains("nevermore: ERROR: heap-use-after-free "), "{what}");
                assert!(err.contains(op), "{what}");
            }
        }
    }
}

#[test]
fn addresses_are_never_handed_out_twice() {
    for mode in ["detect", "prevent"] {
        let o = run(mode, &["unique", "150000"]);
        assert_ok(&o);
        assert!(stdout(&o).contains("UNIQUE 150000"), "{mode}: {}", stdout(&o));
    }
}

#[test]
fn the_programs_own_segv_handler_still_runs() {
    for mode in ["detect", "prevent"] {
        for case in ["own-segv", "own-segv-signal", "own-segv-raw"] {
            let o = run(mode, &[case]);
            assert_ok(&o);
            assert!(stdout(&o).contains("HANDLED"), "{mode} {case}: {}", stdout(&o));
        }
    }
}

/// A program that ignores SIGSEGV and SIGBUS: the signals it sends itself stay ignored, and a
/// fault still ends it with SIGSEGV (the kernel's rule for faults), as without the library.
#[test]
fn ignored_signals_stay_ignored_and_faults_still_kill() {
    for mode in ["detect", "prevent"] {
        let o = run(mode, &["ignored-sent"]);
        assert!(stdout(&o).contains("IGNORED"), "{mode}: {:?}\n{}\n{}", o.status, stdout(&o), stderr(&o));
        assert!(!stdout(&o).contains("no fault"), "{mode}: {}", stdout(&o));
        assert_eq!(o.status.signal(), Some(libc::SIGSEGV), "{mode}: {:?}\n{}", o.status, stderr(&o));
    }
}

#[test]
fn use_after_free_is_reported_despite_program_handlers_and_blocked_signals() {
    // Handlers set through the C library, and with `syscall(SYS_rt_sigaction)`.
    for case in ["own-handler-uaf", "own-handler-uaf-raw"] {
        let o = run("detect", &[case, "24"]);
        assert_report(&o, "heap-use-after-free");
        assert!(!stdout(&o).contains("PROGRAM HANDLER"), "{case}: {}", stdout(&o));
    }
    // Signals blocked through the C library, and with `syscall(SYS_rt_sigprocmask)`.
    for case in ["blocked-uaf", "blocked-uaf-raw"] {
        let o = run("detect", &[case, "24"]);
        assert_report(&o, "heap-use-after-free");
    }
}

#[test]
fn threads_and_fork_in_detect_mode() {
    for file in ["threads.c", "fork_threads.c"] {
        let bin = compile(file, &[]);
        let o = run_preloaded(&bin, &[], &[("NEVERMORE_OPTIONS", "mode=detect")]);
        assert_ok(&o);
        assert!(stdout(&o).contains("OK"), "{file}: {}", stdout(&o));
        assert!(!stderr(&o).contains("nevermore:"), "{file}: {}", stderr(&o));
    }
}

#[test]
fn stats_show_the_engine() {
    let o = run("prevent", &["unique", "20000"]);
    assert_ok(&o);
    // Every page of every object written: a page of a large object that the program never
    // wrote may still be a hole of the memfd.
    let o = run_preloaded(&uaf(), &["unique", "20000", "touch"], &[("NEVERMORE_OPTIONS", "stats=1")]);
    let err = stderr(&o);
    for needle in ["aliases issued", "install runs", "revocations", "mirrors", "degrade mode", "VMAs", "RSS"] {
        assert!(err.contains(needle), "missing `{needle}` in stats:\n{err}");
    }
    // Every pool page in use holds memory in the memfd, mapped or not.
    let in_use = counter(&err, "pool pages");
    let pool_kib = counter(&err, "pool memory");
    assert!(in_use > 0 && pool_kib >= in_use * 4, "pool memory {pool_kib} KiB for {in_use} pages in use:\n{err}");
    // How much of the one-time address space the mirrors took: some, and no more than there is.
    let [_, used, total] = counters(&err, "degrade mode")[..] else { panic!("degrade mode line:\n{err}") };
    assert!(used >= 2 && used < total, "one-time address space {used} of {total} MiB:\n{err}");
}

/// Freed pool pages that nobody reuses go back to the system after `dirty_decay`
/// milliseconds, while the program keeps allocating; with a long decay they are kept (up to
/// the peak, for a program whose memory swings).
#[test]
fn freed_pool_pages_decay_back_to_the_system() {
    let pool_kib = |opts: &str| {
        let o = run_preloaded(&uaf(), &["spike", "1500"], &[("NEVERMORE_OPTIONS", opts)]);
        assert_ok(&o);
        counter(&stdout(&o), "POOL_KIB")
    };
    // ~64 MiB were allocated and freed; 1.5 s of light load follows.
    let kept = pool_kib("dirty_decay=3600000");
    let decayed = pool_kib("dirty_decay=200");
    assert!(kept >= 48 << 10, "pages freed within the decay period were given back: {kept} KiB");
    assert!(decayed <= 16 << 10, "freed pages kept past the decay period: {decayed} KiB");
}

/// A phase that leaves one object in 256 alive keeps ~390 slabs of 11 pages each (one lane
/// in use holds its slab); once the program moved on to other sizes, the pages of those slabs
/// that hold nothing go back to the system after `dirty_decay` too, and the survivors stay
/// intact; `malloc_trim` gives them back at once. Measured: 69.6 MiB kept with a long decay;
/// with 200 ms, 9.9 MiB (38.4 MiB before idle slab pages were given back).
#[test]
fn idle_pages_of_slabs_kept_by_survivors_decay_back_to_the_system() {
    let pool_kib = |opts: &str, trim: bool| {
        let args: &[&str] = if trim { &["phase", "1500", "trim"] } else { &["phase", "1500"] };
        let o = run_preloaded(&uaf(), args, &[("NEVERMORE_OPTIONS", opts)]);
        assert_ok(&o);
        assert!(!stdout(&o).contains("CORRUPTED"), "{}", stdout(&o));
        counter(&stdout(&o), "POOL_KIB")
    };
    let kept = pool_kib("dirty_decay=3600000", false);
    let decayed = pool_kib("dirty_decay=200", false);
    let trimmed = pool_kib("dirty_decay=3600000", true);
    assert!(kept >= 48 << 10, "pages freed within the decay period were given back: {kept} KiB");
    assert!(decayed <= 20 << 10, "idle pages kept past the decay period: {decayed} KiB");
    assert!(trimmed <= 20 << 10, "idle pages kept after malloc_trim: {trimmed} KiB");
}

/// The stats say what the slab pages hold: `tests/c/uaf.c phase` keeps 391 objects of 640
/// bytes, one in 256 of ~64 MiB, each on a page of its own; every other page of their slabs
/// is waiting for revocation or ready, and with a short `dirty_decay` the ready pages of the
/// idle slabs have been given back. Their class is the one that holds the most pages.
#[test]
fn stats_count_what_slab_pages_hold() {
    for (decay, punched_expected) in [("200", true), ("3600000", false)] {
        let opts = format!("stats=1:dirty_decay={decay}");
        let o = run_preloaded(&uaf(), &["phase", "1500"], &[("NEVERMORE_OPTIONS", opts.as_str())]);
        assert_ok(&o);
        let err = stderr(&o);
        let [total, held, objects, slots, old, revoking, ready, punched] = counters(&err, "slab pages")[..] else {
            panic!("slab pages line:\n{err}")
        };
        assert_eq!(total, held + revoking + ready, "{opts}:\n{err}");
        assert!(total <= counter(&err, "pool pages"), "{opts}: more slab pages than pool pages:\n{err}");
        assert!(held >= 391 && objects >= 391 && objects <= slots && old <= held, "{opts}:\n{err}");
        // The survivors' slabs (11 pages each) are mostly empty.
        assert!(ready >= 391 * 5, "{opts}: {ready} ready pages:\n{err}");
        // The classes holding the most pages, the most first: the survivors' (640 bytes and
        // their canary: slots of 672, 6 to a page), each alone on its page.
        let classes = counters(&err, "slab classes");
        assert!(!classes.is_empty() && classes.len() <= 16 && classes.len().is_multiple_of(4), "{opts}:\n{err}");
        let shown: Vec<&[u64]> = classes.chunks(4).collect();
        let [size, pages, live, class_slots] = shown[0][..] else { unreachable!() };
        assert!(size == 672 && pages >= 391 && live >= 391 && class_slots == pages * 6, "{opts}:\n{err}");
        assert!(shown.windows(2).all(|w| w[0][1] >= w[1][1]), "{opts}: not the most pages first:\n{err}");
        assert!(shown.iter().all(|c| c[2] <= c[3]), "{opts}:\n{err}");
        assert!(shown.iter().map(|c| c[1]).sum::<u64>() <= held, "{opts}:\n{err}");
        assert!(shown.iter().map(|c| c[2]).sum::<u64>() <= objects, "{opts}:\n{err}");
        let idle_punched = counters(&err, "pool pages")[5];
        if punched_expected {
            assert!(punched > 0 && punched <= ready && punched <= idle_punched, "{opts}:\n{err}");
        } else {
            assert_eq!(punched, 0, "{opts}:\n{err}");
        }
    }
}

/// The programs of these tests run as the user the CI asks for: as `nobody` in its second
/// pass (`NEVERMORE_TEST_USER=nobody`, see `common::program`), else as the tests' own user.
#[test]
fn programs_under_test_run_as_the_requested_user() {
    let o = run_preloaded(std::path::Path::new("/usr/bin/id"), &["-u"], &[("NEVERMORE_OPTIONS", "mode=detect")]);
    assert_ok(&o);
    let own = Command::new("id").arg("-u").output().unwrap();
    let want = if unprivileged_run() { NOBODY.to_string() } else { stdout(&own).trim().to_string() };
    assert_eq!(stdout(&o).trim(), want, "{}", stderr(&o));
}

/// Retired mirrors leave a page-middle directory per GiB of one-time address space; whole
/// GiBs whose mirrors all retired get a fresh reservation, which frees it. Dangling pointers
/// into them still trap.
#[test]
fn page_tables_of_retired_address_space_are_freed_and_it_stays_trapped() {
    let o = run_preloaded(&uaf(), &["ancient", "2000000"], &[("NEVERMORE_OPTIONS", "stats=1")]);
    assert_ok(&o);
    let err = stderr(&o);
    let [_, _, freed] = counters(&err, "windows freed")[..] else { panic!("windows freed line:\n{err}") };
    let [_, used, _] = counters(&err, "degrade mode")[..] else { panic!("degrade mode line:\n{err}") };
    assert!(used >= 2048 && freed >= 1 && freed <= used >> 10, "{freed} GiB freed of {used} MiB used:\n{err}");
    for mode in ["prevent", "detect"] {
        let o = run(mode, &["ancient", "2000000", "read"]);
        assert!(stdout(&o).contains("churned"), "{mode}: {}", stdout(&o));
        assert_report(&o, "heap-use-after-free");
    }
}

/// userfaultfd in user-mode-only is available to ordinary users: the same detections work
/// for `nobody`.
#[test]
fn works_unprivileged() {
    let root = is_root();
    let bin = uaf();
    let lib = lib_path();
    let run_as_nobody = |args: &[&str], opts: &str| {
        let mut cmd = if root { as_nobody(&bin) } else { Command::new(&bin) };
        cmd.args(args).env("LD_PRELOAD", &lib).env("NEVERMORE_OPTIONS", opts).output().unwrap()
    };
    let o = run_as_nobody(&["read", "24"], "mode=detect");
    assert_report(&o, "heap-use-after-free");
    let o = run_as_nobody(&["kernel-read-raw", "5000"], "mode=detect:verbose=1");
    assert_ok(&o);
    assert!(stdout(&o).contains("errno=14"), "{}", stdout(&o));
    assert!(stderr(&o).contains("revocation by userfaultfd"), "{}", stderr(&o));
    let o = run_as_nobody(&["kernel-read", "5000"], "mode=detect");
    assert_report(&o, "heap-use-after-free");
    let o = run_as_nobody(&["unique", "20000"], "mode=prevent");
    assert_ok(&o);
}

/// When the one-time address space is used up (here a tiny `alias_space`) and no sweep has
/// proved retired ranges unreferenced (here sweeps are off), epochs reuse the addresses of
/// retired ones: said once, counted in the stats, and the program stays correct.
#[test]
fn degrade_mode_reuses_retired_addresses_and_says_so() {
    let o = run_preloaded(&uaf(), &["churn", "400000"], &[("NEVERMORE_OPTIONS", "alias_space=256:stats=1:sweep=0")]);
    assert_ok(&o);
    assert!(stdout(&o).contains("CHURN OK"), "{}", stdout(&o));
    let err = stderr(&o);
    assert_eq!(err.matches("is used up: reusing addresses of retired epochs").count(), 1, "{err}");
    let n = counter(&err, "degrade mode");
    assert!(n > 0, "{err}");
    // With the default address space nothing is degraded.
    let o = run_preloaded(&uaf(), &["churn", "100000"], &[("NEVERMORE_OPTIONS", "stats=1")]);
    assert_ok(&o);
    assert!(stderr(&o).contains("degrade mode       0 epochs"), "{}", stderr(&o));
}

/// Before the one-time address space runs out, sweeps prove ranges of retired epochs
/// unreferenced (no scanned word points into them), and new epochs take those instead of
/// degrading: with `alias_space=512`, 2 M allocations go round the arena several times with
/// no epoch in degrade mode, and no new object ever covers the bytes of 64 freed objects the
/// program keeps dangling pointers to. With sweeps off, the same run degrades and new objects
/// do land on kept dangling pointers (what the check above would catch).
#[test]
fn sweeps_recycle_only_retired_addresses_no_pointer_leads_to() {
    recycled_without_degrading("alias_space=512:stats=1");
    let o = run_preloaded(&uaf(), &["recycle", "2000000"], &[("NEVERMORE_OPTIONS", "alias_space=512:stats=1:sweep=0")]);
    assert_ok(&o);
    assert!(stdout(&o).contains("KEPT REUSED"), "{}\n{}", stdout(&o), stderr(&o));
    assert!(counter(&stderr(&o), "degrade mode") > 0, "{}", stderr(&o));
}

/// Sweeps held to a slow pace (`sweep_share=1`: after a sweep that took `t`, the next waits
/// `99 t`; a busy machine stretches `t` alike) still prove retired ranges before the arena runs
/// out: when what is left would hold few more mirrors, a refill sweeps ahead of the pace. (With
/// the pace alone, this run put 88 epochs in degrade mode and new objects landed on kept
/// dangling pointers.)
#[test]
fn proofs_come_in_time_however_slow_the_sweeps_pace() {
    recycled_without_degrading("alias_space=512:stats=1:sweep_share=1");
}

/// `uaf recycle 2000000` under `opts`: no kept dangling pointer reached by a new object, no
/// epoch in degrade mode, and over 100 epochs in proven ranges.
fn recycled_without_degrading(opts: &str) {
    let o = run_preloaded(&uaf(), &["recycle", "2000000"], &[("NEVERMORE_OPTIONS", opts)]);
    assert_ok(&o);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(out.contains("KEPT NEVER REUSED"), "{out}\n{err}");
    assert_eq!(counter(&err, "degrade mode"), 0, "{err}");
    assert!(!err.contains("is used up"), "{err}");
    let [recycled, proofs] = counters(&err, "recycled")[..] else { panic!("recycled line:\n{err}") };
    assert!(recycled > 100 && proofs > 0, "{err}");
}

/// Detect mode records every free in its history (for use-after-free reports) and never
/// searches it on the way: with `stacks=0` each free searched the whole ring of 65 536 entries
/// for stacks that were never recorded (the benchmark's python script at a hundredth of its
/// size took 26.5 s instead of 1.6 s).
#[test]
fn detect_mode_frees_do_not_search_the_history() {
    for options in ["mode=detect:stacks=0:stats=1", "mode=detect:stats=1"] {
        let o = run_preloaded(&uaf(), &["churn", "20000"], &[("NEVERMORE_OPTIONS", options)]);
        assert_ok(&o);
        assert!(stdout(&o).contains("CHURN OK"), "{options}: {}", stdout(&o));
        let err = stderr(&o);
        let frees = counter(&err, "frees");
        assert!(frees >= 10_000, "{options}:\n{err}");
        assert_eq!(counters(&err, "free history"), [frees, 0], "{options}:\n{err}");
    }
}

/// The mirror table is a ring (2^16 entries in prevent mode, 2^22 in detect mode; 128 with
/// `alias_space=256`). An object allocated first keeps its epoch's mirror, and so its entry,
/// for ever: when the epochs came round to that entry no new epoch could start, and
/// allocations failed (after 665 875 allocations here in prevent mode, 16 756 in detect mode).
/// Now the taken entry is skipped; the object stays intact, a forked child still gets its
/// mirror, and freed memory still traps. Also with a 64-entry table and the whole arena (no
/// degrade mode on the way). (A 256 MiB arena has room for few mirrors, which makes epochs
/// longer: the runs are long enough to go round the table all the same.)
#[test]
fn epochs_go_round_the_mirror_table_past_a_mirror_kept_alive() {
    for (mode, n, table) in [
        ("prevent", "2000000", "alias_space=256"),
        ("detect", "250000", "alias_space=256"),
        ("prevent", "2000000", "mirror_table=64"),
        ("detect", "250000", "mirror_table=64"),
    ] {
        let opts = format!("mode={mode}:{table}:stats=1");
        let o = run_preloaded(&uaf(), &["ring", n], &[("NEVERMORE_OPTIONS", opts.as_str())]);
        assert_ok(&o);
        assert!(stdout(&o).contains("RING OK"), "{mode}: {}\n{}", stdout(&o), stderr(&o));
        let m = counters(&stderr(&o), "mirrors");
        assert!(m[4] > 160, "{mode}: the epochs did not go round the table:\n{}", stderr(&o));
    }
}

/// The mirror table keeps 2^16 entries in prevent mode (4 MiB): a fault on memory of an epoch
/// whose entry went to a newer one is still a use-after-free (found from the arena's chunk
/// table), without the object, and freeing it again still a double free. Checked with a
/// 64-entry table, so that the freed object's epoch is long gone; before, the fault was
/// called a wild access and the second free an invalid free of memory never handed out.
#[test]
fn memory_of_an_epoch_whose_table_entry_was_reused_is_still_known_as_freed() {
    for mode in ["prevent", "detect"] {
        let opts = format!("mode={mode}:mirror_table=64:stats=1");
        let o = run_preloaded(&uaf(), &["ancient", "2000000", "read"], &[("NEVERMORE_OPTIONS", opts.as_str())]);
        assert!(stdout(&o).contains("churned"), "{mode}: {}", stdout(&o));
        assert_report(&o, "heap-use-after-free");
        assert!(stderr(&o).contains("freed long ago"), "{mode}: {}", stderr(&o));
        let o = run_preloaded(&uaf(), &["ancient", "2000000", "free"], &[("NEVERMORE_OPTIONS", opts.as_str())]);
        assert!(stdout(&o).contains("churned"), "{mode}: {}", stdout(&o));
        assert_report(&o, "double-free");
        assert!(stderr(&o).contains("freed long ago"), "{mode}: {}", stderr(&o));
        // The same run without the read ends normally: its stats count the epochs made.
        let o = run_preloaded(&uaf(), &["ancient", "2000000"], &[("NEVERMORE_OPTIONS", opts.as_str())]);
        assert_ok(&o);
        assert!(counters(&stderr(&o), "mirrors")[2] > 2 * 64, "{mode}: too few epochs:\n{}", stderr(&o));
    }
}

/// Epoch numbers are 32-bit: after 4294967294 comes 1 again (before, allocations that needed
/// a new epoch failed with ENOMEM from then on: ~100 days of an alloc/free loop in prevent
/// mode, ~28 in detect mode). `first_epoch` starts the numbering near the end so that the
/// wrap comes within the run: the object kept since the start (whose epoch number is still
/// in use) stays intact, a forked child still gets its mirror, and a freed object still
/// traps; also with the default mirror table and arena. Pool pages stay reusable across
/// the wrap (epochs are ordered by `Mirror::serial`, not by number): the pool grows no more
/// than in the same run without a wrap (measured: 1394 pages ever used in both).
#[test]
fn epoch_numbers_wrap_round() {
    let first = u32::MAX as u64 - 96;
    let run = |opts: &str, n: &str| {
        let o = run_preloaded(&uaf(), &["ring", n], &[("NEVERMORE_OPTIONS", opts)]);
        assert_ok(&o);
        assert!(stdout(&o).contains("RING OK"), "{opts}: {}\n{}", stdout(&o), stderr(&o));
        stderr(&o)
    };
    let unwrapped = counters(&run("mode=prevent:stats=1", "1000000"), "pool pages")[2];
    for (mode, n, space) in [
        ("prevent", "1000000", ":alias_space=256"),
        ("detect", "150000", ":alias_space=256"),
        ("prevent", "1000000", ""),
    ] {
        let opts = format!("mode={mode}:first_epoch={first}:stats=1{space}");
        let err = run(&opts, n);
        let m = counters(&err, "mirrors");
        assert!(m[4] < first && m[2] > 96, "{opts}: the epoch numbers did not wrap round:\n{err}");
        if space.is_empty() {
            let used = counters(&err, "pool pages")[2];
            assert!(used * 4 <= unwrapped * 5, "{opts}: {used} pool pages used against {unwrapped} without a wrap");
        }
    }
}

/// Prevent mode groups the objects of an alias page adaptively (DESIGN "Grouping"): whole
/// pages while groups die together (the fewest installs and revocations), smaller groups once
/// long-lived survivors are seen to pin the dead slots of theirs (a fair share of the class's
/// slots, not only of its live groups'). Detect mode never groups.
/// Sweeps (on by default in single-threaded processes) give those dead slots back, so that
/// groups need not shrink: grouping is what multi-threaded processes rely on, checked here
/// with sweeps off. Groups change only while the pool grows (`slab::adapt`); 2 M allocations
/// (the survivors' lifetime) reach the steady state: 2 changes. 1 M allocations showed 2 while
/// epochs lasted half the pool, and none since they last a quarter (the pool grows less).
#[test]
fn grouping_adapts_to_survivors_only() {
    let o = run_preloaded(&uaf(), &["survivors", "2000000"], &[("NEVERMORE_OPTIONS", "mode=prevent:stats=1:sweep=0")]);
    assert_ok(&o);
    assert!(stdout(&o).contains("CHURN OK"), "{}", stdout(&o));
    assert!(counter(&stderr(&o), "grouping changes") >= 1, "survivors did not make groups smaller:\n{}", stderr(&o));
    // With sweeps, the dead slots beside the survivors are reused instead.
    let o = run_preloaded(&uaf(), &["survivors", "1000000"], &[("NEVERMORE_OPTIONS", "mode=prevent:stats=1")]);
    assert_ok(&o);
    assert!(stdout(&o).contains("CHURN OK"), "{}", stdout(&o));
    assert!(counters(&stderr(&o), "sweeps")[4] > 0, "no dead slot was reused:\n{}", stderr(&o));
    // The same churn without survivors keeps whole-page groups; so does a small heap with
    // quick turnover, whose only live groups are the ones still being used up (mostly dead,
    // but a small share of the class's slots): halving those would only double the installs.
    for ring in [&["churn", "1000000"][..], &["churn", "1000000", "16", "32"], &["churn", "1000000", "32", "256"]] {
        let o = run_preloaded(&uaf(), ring, &[("NEVERMORE_OPTIONS", "mode=prevent:stats=1")]);
        assert_ok(&o);
        assert!(stdout(&o).contains("CHURN OK"), "{ring:?}: {}", stdout(&o));
        assert_eq!(counter(&stderr(&o), "grouping changes"), 0, "{ring:?}: {}", stderr(&o));
    }
    let o = run_preloaded(&uaf(), &["survivors", "200000"], &[("NEVERMORE_OPTIONS", "mode=detect:stats=1")]);
    assert_ok(&o);
    assert_eq!(counter(&stderr(&o), "grouping changes"), 0, "{}", stderr(&o));
}

/// A live alias whose page-table entry the program itself dropped faults once and is mapped
/// again by the handler, with its data (counted as a handled fault); also when the program
/// blocked every signal with `syscall(SYS_rt_sigprocmask)` (the kernel killed it with SIGBUS).
/// So is the rest of a live object's alias page (`dropped-page`: its tail after the last slot,
/// a slot of another group), which a read past the object reaches while the entry is there:
/// it was reported as a `heap-use-after-free` in both modes. Detect mode fills a page's free
/// slots through that page at its first issue, and a pageout during the fill aborted a
/// correct program the same way (CPython's test_weakref, once in a CI run and within minutes
/// under a task paging the process out).
#[test]
fn a_live_alias_that_lost_its_entry_is_mapped_again() {
    for (mode, case) in [
        ("prevent", "dropped-pte"),
        ("detect", "dropped-pte"),
        ("prevent", "dropped-pte-blocked"),
        ("detect", "dropped-pte-blocked"),
        ("prevent", "dropped-page"),
        ("detect", "dropped-page"),
    ] {
        let opt = format!("mode={mode}:stats=1");
        let o = run_preloaded(&uaf(), &[case], &[("NEVERMORE_OPTIONS", &opt)]);
        assert_ok(&o);
        assert!(stdout(&o).contains("DATA KEPT"), "{mode} {case}: {}", stdout(&o));
        let err = stderr(&o);
        let n = counter(&err, "faults handled");
        assert!(n >= 1, "{mode}: {err}");
    }
}

/// The kernel's pageout (swap, a DAMON scheme, `MADV_PAGEOUT`) drops the page-table entries of
/// live objects, and a system call's access to them reaches no fault handler: `read(2)` into
/// such a buffer failed with EFAULT, and `pread(2)` of a file stopped short at the page. The
/// library's `read`, `write`, `pread`, `readv`, `send`, `recvmsg`, `epoll_wait` and the rest
/// map those pages again and finish the call (`tests/c/pageout.c`: each case but `bad` failed
/// without; `dir` in detect mode); a bad `iovec` array still gets EFAULT, and a freed
/// object's buffer is reported. stdio's own calls (`stdio`: a flush of a buffer paged out lost its
/// data, `fopen` of a paged-out path failed) are reached by stream buffers in views and by the
/// library's `fopen`, `freopen`, `fread` and `fwrite`; the C library's own directory streams
/// (`walk`: `scandir` failed with EFAULT in detect mode) by views; `posix_spawn`'s child (`spawn`: killed
/// by SIGBUS reading its file actions; the parent, by SIGBUS writing a pid in a heap object
/// with every signal blocked, in detect mode; children of `posix_spawn` and `posix_spawnp`
/// killed by SIGBUS reading the path or `PATH` while a thread paged the process out) and `system`'s and `popen`'s `execve` (EFAULT)
/// by reading what they read first, copies of the file actions and attributes, and a local
/// pid. The library's fault handler stays the one that sees such a
/// fault however the program installs its own, ignores or blocks SIGBUS (`signals`: with
/// `bsd_signal`, `sysv_signal`, `__sysv_signal`, `sigset` the program's handler got the fault;
/// with `sigignore`, `sighold`, `sigblock`, `sigsetmask` and `syscall(SYS_rt_sigprocmask)` the
/// process died of SIGBUS), and a signal is delivered on an alternate stack in a heap object
/// paged out, set with `sigaltstack` or `syscall(SYS_sigaltstack)` (it died of SIGSEGV).
/// `results`: `select`, `pselect`, `ppoll`'s mask, and the calls whose result the kernel
/// writes after what cannot be undone (the wait calls reaped the child and lost its status,
/// `accept` took the connection and lost it: EFAULT in both modes). `process`: the process's
/// groups, processors, limits, usage and the system's figures, `futimens`, `fcntl`'s locks,
/// and `sendfile`, `copy_file_range` and `splice` with offsets in heap objects (each EFAULT in
/// both modes); `initgroups` while a thread pages the process out (the C library aborted the
/// process: its `setgroups` in every thread read a heap list, and their results differed).
/// `waits`: signal waits, sleeps, timers, `eventfd_read`, System V messages and semaphores,
/// POSIX message queues, scheduling and threads' names (each EFAULT in both modes; a signal,
/// an eventfd count, a message lost, also into receive buffers longer than 8 KiB; an
/// interrupted sleep's `EINTR` lost). `restarted`: futex waits on a paged-out heap object that
/// a signal handler interrupts and the kernel makes again (glibc aborted the process), with
/// handlers set through the C library and with `syscall(SYS_rt_sigaction)`: each such wait is
/// made again by the library from user mode (counted, 240 signals). `cancelled`: two of those
/// waits cancelled there end cancelled with their cleanup handlers run; built with
/// `-fexceptions`, the handlers run only if the unwinder finds its way through the library's
/// frame (without its unwind information they did not: the thread ended without them).
/// `churn`: the allocator's own writes under a steady pageout of the heap, slabs coming and
/// going for 5 seconds (detect mode fills a page's free slots at its first issue, and a pageout
/// during the fill was reported as a use-after-free: 6 runs of 6). `listing`: a directory
/// listed with `readdir` and with `getdents64` while a thread pages the heap out without pause
/// (a call that failed with EFAULT could have moved the directory's position past entries the
/// kernel took, and the listings lost them without an error, both modes; calls made again
/// failed with EFAULT until the last tries locked the buffer's pages), and no memory stays
/// locked after.
#[test]
fn system_calls_reach_live_objects_whose_pages_were_paged_out() {
    let bin = compile("pageout.c", &["-fexceptions"]);
    for mode in ["prevent", "detect"] {
        let opt = format!("mode={mode}:stats=1");
        let o = run_preloaded(&bin, &[], &[("NEVERMORE_OPTIONS", &opt)]);
        assert_ok(&o);
        let (out, err) = (stdout(&o), stderr(&o));
        for case in [
            "pipe",
            "file",
            "vector",
            "socket",
            "epoll",
            "path",
            "exec",
            "stdio",
            "userbuf",
            "dir",
            "walk",
            "spawn",
            "signals",
            "results",
            "process",
            "waits",
            "coroutine",
            "restarted",
            "cancelled",
            "churn",
            "listing",
            "bad",
        ] {
            assert!(out.contains(&format!("{case} OK")), "{mode}: {case}:\n{out}\n{err}");
        }
        // The pages the calls met unmapped: more than one per call of the cases.
        let mapped = counters(&err, "faults handled")[1];
        assert!(mapped >= 25, "{mode}: {mapped} pages mapped again:\n{err}");
        // Every restarted wait (4 ways x 20 rounds x 3 waiters) and the two cancelled ones.
        let again = counters(&err, "faults handled")[2];
        assert!(again >= 242, "{mode}: {again} futex waits made again:\n{err}");
    }
    // A freed object's buffer is not mapped again: the call's EFAULT is reported.
    let o = run_preloaded(&bin, &["freed"], &[("NEVERMORE_OPTIONS", "mode=detect")]);
    assert_report(&o, "heap-use-after-free");
    assert!(stderr(&o).contains("system call of "), "{}", stderr(&o));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
}

/// A stream's buffer, which the C library reads into and writes out with system calls of its
/// own, is a view of its own (`streams`), and a closed stream's buffer is kept for the next:
/// 400 streams opened, read and closed (two at a time) made two views (each one made a view
/// before buffers were kept, and fopen/fclose took 21 µs instead of 8). A `free` of a kept
/// buffer that the C library did not make is reported, and a kept buffer is no leak.
#[test]
fn stream_buffers_are_views_kept_for_the_next_stream() {
    let bin = compile("streams.c", &[]);
    for mode in ["prevent", "detect"] {
        let opt = format!("mode={mode}:stats=1");
        let o = run_preloaded(&bin, &["reuse"], &[("NEVERMORE_OPTIONS", &opt)]);
        assert_ok(&o);
        let (out, err) = (stdout(&o), stderr(&o));
        assert!(out.contains("reuse OK"), "{mode}:\n{out}\n{err}");
        // Standard output's buffer and the two streams' (the C library's own objects, the
        // dynamic linker's, add none in this program).
        let views = *counters(&err, "large objects").last().unwrap();
        assert!((2..=4).contains(&views), "{mode}: {views} views for stream buffers:\n{err}");
        let opt = format!("mode={mode}");
        let o = run_preloaded(&bin, &["invalid"], &[("NEVERMORE_OPTIONS", &opt)]);
        assert_report(&o, "invalid-free");
        assert!(stderr(&o).contains("the buffer of an open stream"), "{mode}: {}", stderr(&o));
        assert!(!stdout(&o).contains("freed the buffer"), "{mode}: {}", stdout(&o));
        let o = run_preloaded(&bin, &["double"], &[("NEVERMORE_OPTIONS", &opt)]);
        assert_report(&o, "double-free");
        assert!(stdout(&o).contains("closed") && !stdout(&o).contains("freed the buffer"), "{mode}: {}", stdout(&o));
    }
    let o = run_preloaded(&bin, &["reuse"], &[("NEVERMORE_OPTIONS", "mode=detect:detect_leaks=1")]);
    assert_ok(&o);
    assert!(!stderr(&o).contains("memory-leak"), "{}", stderr(&o));
}

/// A heap buffer the program gives a stream (`setvbuf`, `setbuf`, `setbuffer`) is replaced by a
/// view that the C library frees as its own (the flush and refill of a paged-out one are in
/// `pageout.c userbuf`); the program's buffer stays reached while its stream is open, so the
/// leak check reports only the one dropped after its stream was closed.
#[test]
fn heap_buffers_given_to_streams_are_reached_while_the_stream_is_open() {
    let bin = compile("streams.c", &[]);
    for mode in ["prevent", "detect"] {
        // The leak check is detect mode's.
        let leaks = if mode == "detect" { ":detect_leaks=1" } else { "" };
        let opt = format!("mode={mode}:stats=1{leaks}");
        let o = run_preloaded(&bin, &["given"], &[("NEVERMORE_OPTIONS", &opt)]);
        let (out, err) = (stdout(&o), stderr(&o));
        assert!(out.contains("given OK"), "{mode}:\n{out}\n{err}");
        if mode == "detect" {
            assert_report(&o, "memory-leak");
            assert!(err.contains("12345 bytes in 1 objects, from 1 allocation stacks"), "{mode}: {err}");
        } else {
            assert_ok(&o);
        }
        // The four buffers given, and standard output's.
        let views = *counters(&err, "large objects").last().unwrap();
        assert!((5..=7).contains(&views), "{mode}: {views} views:\n{err}");
    }
}

/// A directory stream that the C library opens for itself (inside `scandir`, `nftw`, `glob`,
/// ...) and reads with its own system calls is a view (`streams`): 20 `scandir`s made 20 views.
/// One the program opens with `opendir` or `fdopendir` stays an ordinary object (a view per
/// directory would cost every `opendir` about 10 µs): 100 of them made none.
#[test]
fn directory_streams_the_c_library_opens_for_itself_are_views() {
    let bin = compile("streams.c", &[]);
    for mode in ["prevent", "detect"] {
        let opt = format!("mode={mode}:stats=1");
        let o = run_preloaded(&bin, &["dirs"], &[("NEVERMORE_OPTIONS", &opt)]);
        assert_ok(&o);
        let (out, err) = (stdout(&o), stderr(&o));
        assert!(out.contains("dirs OK"), "{mode}:\n{out}\n{err}");
        // The 20 scandir streams and standard output's buffer.
        let views = *counters(&err, "large objects").last().unwrap();
        assert!((21..=24).contains(&views), "{mode}: {views} views:\n{err}");
    }
}

/// The C library reads heap memory with every signal blocked, where a SIGBUS reaches no
/// handler and the kernel kills the process: a new thread's first steps read the global
/// locale's `LC_CTYPE` data, and exiting threads trim the cache of thread stacks, reading the
/// DTVs of the stacks cached. With those pages paged out, a threaded Python server under
/// steady pageout died of SIGBUS. Now what `setlocale` allocates and the dynamic linker's own
/// allocations (DTVs among them) get views that userfaultfd does not watch, a `free` on a thread without a cache reads the canary through the pool's
/// canonical view, and SIGSEGV and SIGBUS are taken out of the masks of the program's
/// handlers (a handler installed with a full mask touched a page the same way;
/// `tests/c/blocked.c`: every case died of SIGBUS without).
#[test]
fn heap_memory_the_c_library_reads_with_signals_blocked_survives_pageout() {
    let bin = compile("blocked.c", &[]);
    for mode in ["prevent", "detect"] {
        let opt = format!("mode={mode}:stats=1");
        for case in ["start", "exit", "free", "handler"] {
            let o = run_preloaded(&bin, &[case], &[("NEVERMORE_OPTIONS", &opt)]);
            let (out, err) = (stdout(&o), stderr(&o));
            assert!(
                o.status.success() && out.contains(&format!("{case} OK")),
                "{mode}: {case}: {:?}\n{out}\n{err}",
                o.status
            );
            if case == "exit" || case == "start" {
                // Eight threads' DTVs, or the locale data, at least.
                let loader = *counters(&err, "large objects").last().unwrap();
                assert!(loader >= 8, "{mode}: {loader} objects for the dynamic linker:\n{err}");
            }
        }
    }
}

/// A crash with core dumps enabled made the kernel fault in the pool's whole 64 GiB canonical
/// view, filling the memfd with zeroed pages (memory ran out) and writing a core as big. The
/// canonical view is left out of dumps now, while the views that hold the objects at the
/// addresses the program uses (mirrors, large objects' views) stay in.
#[test]
fn core_dumps_keep_the_objects_and_leave_out_the_canonical_view() {
    for mode in ["prevent", "detect"] {
        let o = run(mode, &["dump-flags"]);
        assert_ok(&o);
        let out = stdout(&o);
        for what in ["object-24", "object-5000", "object-300000"] {
            assert!(out.contains(&format!("DUMP {what} yes")), "{mode}: {what} left out of core dumps:\n{out}");
        }
        assert!(out.contains("DUMP canonical no"), "{mode}: the canonical view is dumped:\n{out}");
    }
}

/// An object of whole pages costs its pages and no more: the guard page after it is issued
/// with it but never installed, nor given memory (2000 objects of 4 KiB took 16 000 KiB of
/// pool when the guard page was filled like the others).
#[test]
fn guard_pages_take_no_memory() {
    for mode in ["prevent", "detect"] {
        let o = run(mode, &["whole-pages", "2000"]);
        assert_ok(&o);
        let out = stdout(&o);
        let kib: u64 = out
            .lines()
            .find_map(|l| l.strip_prefix("POOL_KIB "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{mode}: no POOL_KIB in:\n{out}"));
        assert!((8000..9000).contains(&kib), "{mode}: {kib} KiB of pool for 2000 objects of 4 KiB");
    }
}
