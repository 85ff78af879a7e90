mod common;

// Stress (`tests/c/stress.c`), each bounded in work and by a deadline, in both modes:
// producer/consumer cross-thread frees with 8, 32 and 64 threads; threads created and exiting
// in a loop; fork in a loop while threads allocate, with exec after fork; signal handlers that
// allocate (the async-signal-safe pattern of docs/usage.md); dlopen/dlclose of a library that
// allocates in its constructor and destructor.

use common::*;
use std::process::Output;

fn clean(o: &Output) {
    assert_ok(o);
    assert!(stdout(o).contains("OK"), "no OK on stdout:\n{}\nstderr:\n{}", stdout(o), stderr(o));
    assert!(!stderr(o).contains("nevermore:"), "unexpected allocator output:\n{}", stderr(o));
}

fn stress(args: &[&str]) {
    let bin = compile("stress.c", &["-ldl"]);
    for mode in ["prevent", "detect"] {
        let opts = format!("mode={mode}");
        clean(&run_preloaded_timeout(&bin, args, &[("NEVERMORE_OPTIONS", &opts)], 60));
    }
}

#[test]
fn producers_and_consumers_free_across_threads() {
    for threads in ["8", "32", "64"] {
        stress(&["prodcons", threads, "20000"]);
    }
}

#[test]
fn threads_created_and_exiting_in_a_loop() {
    stress(&["churn", "20"]);
}

#[test]
fn fork_in_a_loop_while_threads_allocate_and_exec_after_fork() {
    stress(&["forkloop", "40"]);
}

/// The handler allocates while the interrupted code runs outside the allocator (SIGUSR1 is
/// blocked around the main thread's own allocator calls): the documented safe pattern.
#[test]
fn signal_handlers_that_allocate() {
    let bin = compile("stress.c", &["-ldl"]);
    for mode in ["prevent", "detect"] {
        let opts = format!("mode={mode}");
        let o = run_preloaded_timeout(&bin, &["signals", "1000"], &[("NEVERMORE_OPTIONS", &opts)], 60);
        clean(&o);
        let handled: u64 = stdout(&o)
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count in:\n{}", stdout(&o)));
        assert!(handled >= 100, "only {handled} signals handled");
    }
}

#[test]
fn dlopen_and_dlclose_of_a_library_that_allocates() {
    let plugin = compile("plugin.c", &["-shared", "-fPIC"]);
    stress(&["dlopen", plugin.to_str().unwrap(), "100"]);
}
