mod common;

// Threads and fork: `tests/c/threads.c` (cross-thread frees through a shared queue, threads
// created and joined in rounds, a burst of 64 concurrent threads) and `tests/c/fork_threads.c`
// (forks while other threads allocate, from the main thread and from another thread, with
// allocating atfork handlers; the children allocate, check inherited data, and must not share the
// heap with the parent).

use common::*;
use std::process::Output;

fn assert_clean(o: &Output) {
    assert_ok(o);
    assert!(stdout(o).contains("OK"), "no OK on stdout:\n{}\nstderr:\n{}", stdout(o), stderr(o));
    assert!(!stderr(o).contains("nevermore:"), "unexpected report on stderr:\n{}", stderr(o));
}

#[test]
fn cross_thread_frees() {
    let bin = compile("threads.c", &[]);
    assert_clean(&run_preloaded(&bin, &[], &[]));
}

#[test]
fn fork_while_threads_allocate() {
    let bin = compile("fork_threads.c", &[]);
    assert_clean(&run_preloaded(&bin, &[], &[]));
}

/// The program points every descriptor it did not open (the allocator's included) at a file of
/// its own, then closes them all, and forks after each step: the allocator must keep working,
/// leave that file alone, and fork in well under a second.
#[test]
fn fork_after_descriptors_taken_over() {
    // A flag of its own gives this test its own executable: the test above compiles the same
    // source at the same time.
    let bin = compile("fork_threads.c", &["-DFDS_TEST_BINARY"]);
    assert_clean(&run_preloaded(&bin, &["fds"], &[]));
}
