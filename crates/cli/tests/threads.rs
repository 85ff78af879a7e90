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

/// A forked child gets a copy of what the heap holds, not of its dead memory: with every other
/// object of a heap of small, page and large objects freed (52.8 MiB live of 105 MiB
/// allocated), the copy leaves out free runs and spans waiting for the next epoch (the
/// forking thread's pending revocations are made first), and the child still sees every
/// live object intact (the kernel too: `write(2)` from and `read(2)` into each of them
/// before the child touches it) and gets zeroed memory from `calloc` in the freed places. Measured,
/// both modes: 57.6–57.9 MiB copied (71.1–75.3 MiB when everything the memfd held was).
#[test]
fn a_fork_copies_live_memory_not_freed_memory() {
    let bin = compile("fork_threads.c", &["-DHOLES_TEST_BINARY"]);
    for mode in ["mode=prevent", "mode=detect"] {
        let opts = format!("{mode}:stats=1");
        let o = run_preloaded(&bin, &["holes"], &[("NEVERMORE_OPTIONS", opts.as_str())]);
        assert_ok(&o);
        let (out, err) = (stdout(&o), stderr(&o));
        assert!(out.contains("OK"), "{mode}:\n{out}\n{err}");
        let live = counter(&out, "LIVE_KIB");
        // `forks 1 (K KiB copied)`
        let line =
            err.lines().find(|l| l.contains("   forks ")).unwrap_or_else(|| panic!("{mode}: no forks line:\n{err}"));
        let copied: u64 = line.split_once('(').and_then(|(_, r)| r.split_whitespace().next()?.parse().ok()).unwrap();
        assert_eq!(counter(line, "forks"), 1, "{mode}:\n{err}");
        assert!(live >= 50 << 10, "{mode}: {live} KiB live:\n{out}");
        assert!(copied * 5 <= live * 6, "{mode}: {copied} KiB copied for {live} KiB live:\n{err}");
    }
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

/// The `revocation stage` stats line of `tests/c/stage.c THREADS` under prevent mode:
/// (revocations of the stage, units they revoked).
fn stage_counters(threads: &str) -> (u64, u64, String) {
    let bin = compile("stage.c", &["-pthread"]);
    let o = run_preloaded(&bin, &[threads], &[("NEVERMORE_OPTIONS", "mode=prevent:stats=1")]);
    assert_ok(&o);
    assert!(stdout(&o).contains("OK"), "{}\n{}", stdout(&o), stderr(&o));
    let v = counters(&stderr(&o), "revocation stage");
    assert_eq!(v.len(), 2, "{}", stderr(&o));
    (v[0], v[1], stderr(&o))
}

/// With several threads allocating side by side, full revocation batches wait on a shared
/// stage and go out together (their dead pages interleave, and merge into fewer ranges, each
/// a TLB-flush interrupt on every other CPU): each revocation of the stage carries more than
/// one thread's batch (512 units) on average. Every object keeps its pattern meanwhile, and the
/// main thread, alone at the end, goes on as before.
#[test]
fn batches_of_threads_allocating_together_are_revoked_together() {
    let (calls, units, err) = stage_counters("4");
    assert!(calls >= 2, "{err}");
    assert!(units >= calls * 512, "{err}");
}

/// A single-threaded program never waits on the stage: its batches go out as they fill.
#[test]
fn a_single_thread_revokes_its_own_batches() {
    let (calls, units, err) = stage_counters("1");
    assert_eq!((calls, units), (0, 0), "{err}");
}

/// `tests/c/held.c ARGS` with `options`, checked to end cleanly. `flag` gives each test an
/// executable of its own (the tests run at the same time).
fn held(flag: &str, args: &[&str], options: &str) -> Output {
    let bin = compile("held.c", &["-pthread", flag]);
    let o = run_preloaded(&bin, args, &[("NEVERMORE_OPTIONS", options)]);
    assert_clean(&o);
    o
}

/// Threads that free and then go idle (a pool's workers between jobs) leave their revocation
/// batches to the others: `tests/c/held.c idle` has 8 threads free 8 MiB of 32 KiB objects
/// each and wait, while the main thread allocates. Their dead pages stay mapped until some
/// thread revokes them; a batch was only checked for its age when its owner added to it, and
/// RSS stayed at 70 MiB. Now another thread revokes batches that waited past the bounded
/// delay: measured 5–6 MiB after the main thread's 400 ms.
#[test]
fn batches_of_idle_threads_are_revoked_by_the_others() {
    let o = held("-DIDLE_BINARY", &["idle"], "mode=prevent:stats=1");
    let (peak, later) = (counter(&stdout(&o), "HWM_IDLE"), counter(&stdout(&o), "RSS_LATER"));
    assert!(peak >= 56 << 10, "the threads' 64 MiB of objects were never resident: {peak} KiB\n{}", stderr(&o));
    assert!(later <= 16 << 10, "idle threads' dead pages still mapped: {later} KiB\n{}", stderr(&o));
    assert!(counter(&stderr(&o), "idle batches") >= 1, "{}", stderr(&o));
}

/// Many threads freeing side by side hold a bounded amount of dead memory between them:
/// each passes a smaller share of its batch to the stage the more threads there are. 256
/// threads with 32 live page objects each (32 MiB live at most) made the heap's memory file
/// grow to 490–620 MiB when every thread kept half a batch; measured 87–166 MiB now.
#[test]
fn many_threads_hold_little_dead_memory() {
    let o = held("-DMANY_BINARY", &["many", "256"], "mode=prevent");
    let pool = counter(&stdout(&o), "POOL_KIB");
    assert!(pool <= 256 << 10, "the heap grew to {pool} KiB for at most 32 MiB of live objects");
}

/// A thread's first refill of a size class takes one group (one page), the next ones twice as
/// many, up to 16: `tests/c/held.c threads 1000` (1 000 threads, one object of each of 8 sizes
/// apiece, all alive at once) had 267 MiB resident when every refill took 16 pages; measured
/// 58.6 MiB now (glibc: 13.2 MiB).
#[test]
fn threads_that_allocate_little_take_little() {
    let o = held("-DFEW_BINARY", &["threads", "1000"], "mode=prevent");
    let rss = counter(&stdout(&o), "RSS_ALL");
    assert!(rss <= 96 << 10, "1000 threads with 8 small objects each: {rss} KiB resident");
}

/// Threads cancelled (`pthread_cancel`) while they wait in calls the library wraps (`read`,
/// `recv`, `accept`, `poll`, `epoll_wait`, `select`, `nanosleep`, `sigwait`, `sigtimedwait`,
/// `msgrcv`, `readv`, `recvmsg`, `pause`, `clock_nanosleep`, `fgets` on a pipe, `waitpid`):
/// the cancellation unwinds through the wrappers, every cleanup handler runs (each frees the
/// thread's buffer), and the heap keeps working in the rounds that follow. A wrapper that
/// held a lock or the allocator's own state across its call would hang or break them.
#[test]
fn threads_cancelled_inside_wrapped_calls() {
    let bin = compile("cancel.c", &["-pthread"]);
    for mode in ["prevent", "detect"] {
        let o = run_preloaded_timeout(&bin, &["10"], &[("NEVERMORE_OPTIONS", &format!("mode={mode}"))], 60);
        assert_clean(&o);
        assert!(stdout(&o).contains("OK 160"), "{mode}: {}", stdout(&o));
    }
}
