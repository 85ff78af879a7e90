mod common;

// Stress (`tests/c/stress.c`), each bounded in work and by a deadline, in both modes:
// producer/consumer cross-thread frees with 8, 32 and 64 threads; threads created and exiting
// in a loop; fork in a loop while threads allocate, with exec after fork; signal handlers that
// allocate, both with the signal blocked around the thread's own allocator calls and landing
// inside malloc/realloc/free (docs/usage.md "Signals"); handlers that set themselves again
// while interrupting `signal`; dlopen/dlclose of a library that
// allocates in its constructor and destructor; and idle slab pages given back (`dirty_decay=0`)
// while threads allocate and fork; buffers resized by realloc in threads and across forks.

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

/// Eight threads grow their buffers by `realloc` (by a few bytes or up to 70 KB a step, to
/// 8 MiB: large objects growing into their room and lengthened in place) and cut them now and
/// then, while the main thread does the same and forks; every step keeps the contents, and a
/// child sees and resizes its copies.
#[test]
fn buffers_resized_by_threads_and_across_forks_keep_their_contents() {
    stress(&["resize", "8", "4000"]);
}

#[test]
fn producers_and_consumers_free_across_threads() {
    for threads in ["8", "32", "64"] {
        stress(&["prodcons", threads, "20000"]);
    }
}

/// With `dirty_decay=0` the idle pages of slabs are given back every 200 ms or so while 8
/// threads allocate and free across threads and fork: pages punched under one thread's feet
/// are filled again when another thread's refill issues them, and every object checks out.
#[test]
fn idle_slab_pages_given_back_while_threads_allocate_and_fork() {
    let bin = compile("stress.c", &["-ldl"]);
    for args in [&["prodcons", "8", "200000"][..], &["forkloop", "50"][..]] {
        let o = run_preloaded_timeout(&bin, args, &[("NEVERMORE_OPTIONS", "mode=prevent:dirty_decay=0:stats=1")], 60);
        clean(&o);
        // Every process prints its stats (forkloop's children too): the pages of all of them.
        let err = stderr(&o);
        let punched: u64 = err.lines().filter(|l| l.contains("pool pages")).map(|l| counters(l, "pool pages")[5]).sum();
        assert!(punched > 0, "{args:?}: no idle slab page was punched:\n{err}");
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

/// Forks while other threads allocate in detect mode, where every allocation records its
/// stack and looks at the loaded objects (`dl_iterate_phdr`): glibc does not reset that
/// function's lock in a forked child, so a fork while another thread was inside it must not
/// happen, or the child hangs at its first allocation (it did in 5 of 12 runs of this loop).
#[test]
fn forks_while_threads_record_stacks() {
    let bin = compile("stress.c", &["-ldl"]);
    for _ in 0..3 {
        clean(&run_preloaded_timeout(&bin, &["forkloop", "200"], &[("NEVERMORE_OPTIONS", "mode=detect")], 60));
    }
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
        let handled = handled_count(&o);
        assert!(handled >= 100, "only {handled} signals handled");
    }
}

fn handled_count(o: &Output) -> u64 {
    stdout(o)
        .lines()
        .find_map(|l| l.strip_prefix("handled ")?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no count in:\n{}", stdout(o)))
}

/// A `stats=1` counter line `re-entrant calls  A allocations, F freed, D frees deferred, L dropped`.
fn reentrant_counts(o: &Output) -> [u64; 4] {
    let err = stderr(o);
    counters(&err, "re-entrant calls").try_into().unwrap_or_else(|_| panic!("malformed counters in:\n{err}"))
}

/// Signals land anywhere, inside malloc, calloc, realloc and free included: handlers that
/// allocate, reallocate and free (their own objects and the main thread's) neither deadlock
/// nor corrupt anything, and objects cross between handler and main thread both ways. The
/// counters show that handlers really ran inside the allocator and took the re-entrant paths.
#[test]
fn signal_handlers_that_allocate_while_malloc_was_interrupted() {
    let bin = compile("stress.c", &["-ldl"]);
    for mode in ["prevent", "detect"] {
        let opts = format!("mode={mode}:stats=1");
        let o = run_preloaded_timeout(&bin, &["signals-anywhere", "1500"], &[("NEVERMORE_OPTIONS", &opts)], 60);
        assert_ok(&o);
        assert!(stdout(&o).contains("OK"), "{}", stdout(&o));
        assert!(!stderr(&o).contains("nevermore: ERROR"), "{}", stderr(&o));
        let handled = handled_count(&o);
        assert!(handled >= 100, "only {handled} signals handled");
        let [allocs, freed, deferred, dropped] = reentrant_counts(&o);
        assert!(allocs > 0 && deferred > 0, "{mode}: no handler ran inside the allocator: {allocs} {deferred}");
        assert_eq!(allocs, freed, "{mode}: every re-entrant object is freed by the end");
        assert_eq!(dropped, 0);
    }
}

/// The allocator's calls take at most 3 KiB of stack in a signal handler, beyond the kernel's
/// signal frame (3 KiB itself on a processor with AVX-512 state), so that a handler on an
/// alternate stack of `SIGSTKSZ` (8 KiB) can call them. `tests/c/sigstack.c`: a handler
/// allocating, reallocating and freeing objects of every kind (also inside the allocator's own
/// calls, and forking when it did not interrupt them) measures the depth on a big alternate
/// stack, then runs again on one of the signal frame plus 3 KiB above a no-access page. A
/// `free` that revoked its thread's batch used to sort it with the library's recursive sort
/// (5.9 KiB deep in all), a big object's allocation read `/proc/self/maps` through 4 KiB of
/// stack, and `fork` had a 4 KiB table in its frame: the second run died of SIGSEGV.
#[test]
fn allocator_calls_in_a_signal_handler_fit_a_small_alternate_stack() {
    let bin = compile("sigstack.c", &["-Wl,-z,now"]);
    for mode in ["prevent", "detect"] {
        let opts = format!("mode={mode}");
        let o = run_preloaded_timeout(&bin, &["1500", "3072"], &[("NEVERMORE_OPTIONS", &opts)], 120);
        assert_ok(&o);
        let out = stdout(&o);
        assert!(out.contains("SIGSTACK OK"), "{out}");
        let field = |name: &str| -> u64 {
            let after = out.split_once(&format!(" {name} ")).unwrap_or_else(|| panic!("no {name}: {out}")).1;
            after.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{name}: {out}"))
        };
        assert!(field("used") <= 3072, "{mode}: the handler's calls went {} bytes deep\n{out}", field("used"));
        assert!(field("handled") >= 100 && field("forks") >= 1, "{mode}: {out}");
        assert!(!stderr(&o).contains("nevermore: ERROR"), "{}", stderr(&o));
    }
}

/// A fork in a signal handler that interrupted the allocator on its own thread while it held
/// one of the allocator's locks cannot copy a consistent heap for the child, nor wait for the
/// lock: the child says so and exits 127, and the parent goes on. Other forks in the same
/// handler work. `stress.c fork-in-handler`: one thread (glibc's malloc then allows this)
/// allocates small, page and large objects and checks their contents while a timer's handler
/// forks 5 ms after the last. Before, the fork waited for ever for the lock (every run timed out).
/// Then the same on 4 threads, each with a timer of its own: their handlers' forks wait for
/// each other's locks. There a lock's release woke one waiter, which a handler could take
/// aside before it woke the next, and the process hung (21 runs of 30).
#[test]
fn a_fork_in_a_handler_that_interrupted_the_allocator_never_waits_for_ever() {
    let bin = compile("stress.c", &["-ldl"]);
    let notice = "fork in a signal handler that interrupted the allocator on the same thread";
    for (mode, threads) in [("prevent", "1"), ("detect", "1"), ("prevent", "4"), ("detect", "4")] {
        let o = run_preloaded_timeout(
            &bin,
            &["fork-in-handler", "2000", threads],
            &[("NEVERMORE_OPTIONS", &format!("mode={mode}"))],
            60,
        );
        assert_ok(&o);
        let out = stdout(&o);
        let counts: Vec<u64> = out
            .split_once("FORKS ")
            .map(|(_, r)| r.split_whitespace().filter_map(|w| w.parse().ok()).take(2).collect())
            .unwrap_or_default();
        let [forks, refused] = counts[..] else { panic!("{mode}, {threads} threads: {out}") };
        // With threads, a handler's fork more often waits for another thread's lock than
        // finds its own: refusals are rarer, and may not come in 2 s.
        assert!(forks >= 20 && refused < forks, "{mode}, {threads} threads: {out}");
        if threads == "1" {
            assert!(refused >= 1, "{mode}: {out}");
        }
        let err = stderr(&o);
        assert_eq!(err.matches(notice).count() as u64, refused, "{mode}, {threads} threads: {err}");
        assert!(!err.contains("nevermore: ERROR"), "{err}");
    }
}

/// Allocations inside such handlers come from an arena of their own, used once. When it is
/// used up (here made small, 16 MiB, by a 1 GiB RLIMIT_AS) they fail with ENOMEM and that is
/// said once; the program sees a null pointer (and reports it itself), nothing crashes. With
/// the default 64 GiB the same stress runs 20 s and more (4 GiB were used up in ~10 s). The
/// limit is set by `prlimit` without the library, so that the library sizes its arenas by it.
/// The arena is used up in well under a second on an idle machine; the stress may run up to
/// 60 s because on a loaded one signals seldom land inside the allocator (57 152 allocations
/// and 400 signals in 5 s once, the arena still unused).
#[test]
fn handler_allocations_beyond_their_arena_fail_cleanly() {
    let bin = compile("stress.c", &["-ldl"]);
    let cmd = limited("--as=1073741824", &bin, &["signals-anywhere", "60000"], "mode=prevent");
    let o = wait_with_deadline(cmd, 120, "signal stress under prlimit");
    assert_eq!(o.status.code(), Some(2), "{:?}\n{}\n{}", o.status, stdout(&o), stderr(&o));
    // Whichever call of the handler meets the used-up arena gets the null pointer: one of its
    // mallocs or its calloc, or its realloc (which must move the object into a new one).
    let out = stdout(&o);
    assert!(
        out.contains("STRESS FAIL: malloc in a signal handler (")
            || out.contains("STRESS FAIL: realloc in a signal handler (0)"),
        "{out}"
    );
    let notice = "the arena for allocations inside signal handlers that interrupted the allocator (16 MiB) is used up";
    assert_eq!(stderr(&o).matches(notice).count(), 1, "{}", stderr(&o));
    assert!(!stderr(&o).contains("nevermore: ERROR"), "{}", stderr(&o));
}

/// Misuse committed inside such a handler is reported like any other. (A read right after free
/// traps in detect mode only: prevent mode batches revocations, so there the read may see the
/// dead object's old contents, never a newer object's.)
#[test]
fn misuse_in_a_signal_handler_is_reported() {
    let bin = compile("stress.c", &["-ldl"]);
    let both = &["prevent", "detect"][..];
    for (misuse, kind, modes) in [
        ("double-free", "double-free", both),
        ("use-after-free", "heap-use-after-free", &["detect"][..]),
        ("overflow", "heap-buffer-overflow", both),
    ] {
        for &mode in modes {
            let opts = format!("mode={mode}");
            let o =
                run_preloaded_timeout(&bin, &["signals-misuse", "3000", misuse], &[("NEVERMORE_OPTIONS", &opts)], 60);
            assert_report(&o, kind);
        }
    }
}

/// A handler that sets itself again with `signal` while the thread it interrupted is inside
/// `signal` too (System V handlers do; `sigaction` is async-signal-safe): the library's
/// `sigaction` holds a lock while it records the program's handler, and such a handler waited
/// for ever for its own thread's lock (3 runs of 3 hung); the lock now knows its holder.
#[test]
fn handlers_that_set_themselves_again_while_interrupting_signal() {
    stress(&["resignal", "200000"]);
}

#[test]
fn dlopen_and_dlclose_of_a_library_that_allocates() {
    let plugin = compile("plugin.c", &["-shared", "-fPIC"]);
    stress(&["dlopen", plugin.to_str().unwrap(), "100"]);
}
