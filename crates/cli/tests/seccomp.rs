mod common;

// Seccomp filters a program installs while it runs (`tests/c/late_seccomp.c`, a filter like
// OpenSSH's pre-authentication sandbox: the program's own calls allowed, open and stat refused,
// every other call killing the process): the allocator's own calls pass, the program's calls
// meet its filter unchanged. (Filters in force before the program starts: tests/fallback.rs.)

use common::*;
use std::os::unix::process::ExitStatusExt;
use std::process::Output;

const SIGSYS: i32 = 31;
const SIGSEGV: i32 = 11;
const SIGABRT: i32 = 6;

fn late(how: &str, what: &str, options: &str) -> Output {
    late_args(&[how, what], options)
}

fn late_args(args: &[&str], options: &str) -> Output {
    let bin = compile("late_seccomp.c", &[]);
    run_preloaded_timeout(&bin, args, &[("NEVERMORE_OPTIONS", options)], 120)
}

fn killed_by_the_filter(o: &Output, what: &str) {
    assert_eq!(
        o.status.signal(),
        Some(SIGSYS),
        "{what}: expected SIGSYS, got {:?}\n{}\n{}",
        o.status,
        stdout(o),
        stderr(o)
    );
}

/// Objects of every tier, through new epochs, revocation batches and large objects' views,
/// after the filter is in force: in both modes, for filters installed with `prctl` and with
/// `syscall(SYS_seccomp)` (libseccomp's way). The program's own `open` is still refused.
#[test]
fn the_allocator_s_calls_pass_a_filter_the_program_installs_later() {
    for mode in ["prevent", "detect"] {
        for how in ["prctl", "syscall"] {
            let o = late(how, "churn", &format!("mode={mode},verbose=1,stats=1"));
            let what = format!("{mode}, {how}");
            assert_ok(&o);
            let out = stdout(&o);
            let made: u64 = out
                .lines()
                .find_map(|l| l.strip_prefix("CHURN OK "))
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{what}: no churn:\n{out}\n{}", stderr(&o)));
            assert!(made > 300_000, "{what}: {made} objects");
            assert!(out.contains("OPEN EACCES"), "{what}: the program's filter no longer refused open:\n{out}");
            let err = stderr(&o);
            assert!(err.contains("installs a seccomp filter; the allocator's own calls"), "{what}: not said:\n{err}");
            // The statistics would read /proc files the filter refuses.
            assert!(err.contains("statistics not printed: the process confined itself with seccomp"), "{what}:\n{err}");
            assert!(!err.contains("nevermore: ERROR"), "{what}: unexpected report:\n{err}");
        }
    }
}

/// Live objects whose page-table entries the program dropped (`madvise(MADV_DONTNEED)`, which
/// its filter allows; the kernel can drop them too) fault on the next access, and the
/// allocator's handler maps them again: its return (`rt_sigreturn`, which the filter does not
/// allow) must pass too. Objects of every tier, their contents kept, in both modes.
#[test]
fn live_objects_mapped_again_under_the_filter() {
    for mode in ["prevent", "detect"] {
        let o = late("prctl", "zap", &format!("mode={mode}"));
        assert_ok(&o);
        assert!(stdout(&o).contains("ZAP OK"), "{mode}: {}\n{}", stdout(&o), stderr(&o));
        assert!(!stderr(&o).contains("nevermore: ERROR"), "{mode}: unexpected report:\n{}", stderr(&o));
    }
}

/// A program that closed every descriptor (the allocator's userfaultfd too) just before it
/// confines itself: the allocator opens a new one before the filter is in force, which would
/// kill the process for opening it at the next install.
#[test]
fn descriptors_closed_just_before_the_filter_are_reopened_first() {
    for mode in ["prevent", "detect"] {
        let o = late_args(&["prctl", "churn", "closed"], &format!("mode={mode},verbose=1"));
        assert_ok(&o);
        assert!(stdout(&o).contains("CHURN OK") && stdout(&o).contains("OPEN EACCES"), "{mode}: {}", stdout(&o));
        let err = stderr(&o);
        let reopened = err.find("reopened it and re-registered");
        let filter = err.find("installs a seccomp filter");
        assert!(reopened.is_some() && reopened < filter, "{mode}: reopened after the filter, or not at all:\n{err}");
    }
}

/// `seccomp_exempt=0` installs the program's filter as it is: the allocator's next call that
/// it does not allow ends the process (which shows that the test above needs the exemption).
#[test]
fn without_the_exemption_the_filter_ends_the_process() {
    for how in ["prctl", "syscall"] {
        let o = late(how, "churn", "seccomp_exempt=0");
        killed_by_the_filter(&o, how);
        assert!(!stdout(&o).contains("CHURN OK"), "{}", stdout(&o));
    }
}

/// The exemption is for the allocator's own code: the program's `ioctl`, even with the
/// allocator's userfaultfd and its commands (made through the C library's `syscall`), meets
/// the program's filter and is killed.
#[test]
fn the_program_s_own_calls_meet_its_filter() {
    for what in ["ioctl", "uffd-ioctl"] {
        let o = late("prctl", what, "");
        killed_by_the_filter(&o, what);
        assert!(!stdout(&o).contains("PASSED"), "{}", stdout(&o));
    }
}

/// The program's own crash under its filter stays what it is: a write near address 0 dies of
/// SIGSEGV, as under the C library's malloc (the fault handler hands it back to the default
/// action without a call the filter would refuse), in both modes and both ways of installing.
#[test]
fn the_program_s_own_fault_under_the_filter_is_still_sigsegv() {
    for mode in ["prevent", "detect"] {
        for how in ["prctl", "syscall"] {
            let o = late(how, "null", &format!("mode={mode}"));
            assert_eq!(
                o.status.signal(),
                Some(SIGSEGV),
                "{mode}, {how}: expected SIGSEGV, got {:?}\n{}\n{}",
                o.status,
                stdout(&o),
                stderr(&o)
            );
            assert!(!stdout(&o).contains("NOT TRAPPED"));
            assert!(!stderr(&o).contains("nevermore: ERROR"), "{}", stderr(&o));
        }
    }
    // A SIGSEGV another process sends with kill() too (the handler sends it again itself).
    for mode in ["prevent", "detect"] {
        let o = late("prctl", "sent", &format!("mode={mode}"));
        assert_eq!(o.status.signal(), Some(SIGSEGV), "{mode}, sent: {:?}\n{}\n{}", o.status, stdout(&o), stderr(&o));
        assert!(!stdout(&o).contains("NOT KILLED"));
    }
}

/// A use-after-free after the filter is in force is still reported, and the process ends the
/// configured way (the report's own calls pass or are left out).
#[test]
fn a_use_after_free_under_the_filter_is_reported() {
    let o = late("syscall", "uaf", "mode=detect,exitcode=23");
    assert_eq!(o.status.code(), Some(23), "{:?}\n{}\n{}", o.status, stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("nevermore: ERROR: heap-use-after-free"), "{err}");
    assert!(!stdout(&o).contains("NOT TRAPPED"));
    // Without `exitcode`, the process dies of SIGABRT as without a filter (not of the
    // filter's SIGSYS at the calls that reset and send it).
    let o = late("prctl", "uaf", "mode=detect");
    assert_eq!(o.status.signal(), Some(SIGABRT), "{:?}\n{}\n{}", o.status, stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("nevermore: ERROR: heap-use-after-free") && err.contains("nevermore: aborting"), "{err}");
    assert!(!stdout(&o).contains("NOT TRAPPED"));
}
