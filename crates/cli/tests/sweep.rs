mod common;

// Sweeps (prevent mode): the dead slots of groups pinned by a live neighbour are reused in
// place once a scan proves that no pointer to them is left (`tests/c/sweep.c`).

use common::*;
use std::process::Output;
use std::sync::{Mutex, MutexGuard};

/// The tests of this file run one at a time: whether and when sweeps run depends on time (a
/// check that found too little waits nine times as long as it took; groups count as pinned
/// after two epochs, and revocation batches wait up to 20 ms), and the churns on several
/// threads took both processors from the others (a `reuse` run as `nobody` ended with no
/// sweep once, while the four-thread churn and the queued signals ran beside it).
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn run(case: &str, options: &str) -> Output {
    run_args(&[case], options)
}

/// `sweep ARGS` under the library with `options`.
fn run_args(args: &[&str], options: &str) -> Output {
    let prog = compile("sweep.c", &["-pthread"]);
    run_preloaded_timeout(&prog, args, &[("NEVERMORE_OPTIONS", options)], 120)
}

/// `run` for a case that is to sweep: its new objects' phase goes on past its 200000
/// allocations (up to 20 s) until 2000 of them landed on freed slots. Sweeps are paced by
/// time, and on a machine busy with other work the 200000 may be over before the first sweep
/// (a census of the heap that took 4 ms found it not worth sweeping yet and waited 36 ms).
fn run_swept(case: &str, options: &str) -> Output {
    let prog = compile("sweep.c", &["-pthread"]);
    run_preloaded_timeout(&prog, &[case], &[("NEVERMORE_OPTIONS", options), ("SWEEP_WAIT_MS", "20000")], 120)
}

fn in_place(o: &Output) -> u64 {
    let out = stdout(o);
    let line = out.lines().find(|l| l.starts_with("IN PLACE")).unwrap_or_else(|| panic!("{out}\n{}", stderr(o)));
    line["IN PLACE ".len()..].trim().parse().expect("a count")
}

/// The `sweeps` stats line: [run, not run (other threads), not run (heap too big or seccomp), gave up,
/// slots reused, KiB reused, KiB scanned, ms, longest ms, checks that found too little, their ms,
/// times other threads were held still, threads held in all, times not held (a thread stayed
/// inside the allocator), KiB of the scans read by a helper task, checks put off for want of
/// frees].
fn sweeps(o: &Output) -> Vec<u64> {
    let v = counters(&stderr(o), "sweeps");
    assert_eq!(v.len(), 16, "{}", stderr(o));
    v
}

/// A `reuse` run (or one of its variants) that swept: no kept pointer's slot came back, every
/// live new object is intact, and new objects were placed in freed slots at the very
/// addresses they had. Returns the sweeps line.
fn assert_swept(o: &Output) -> Vec<u64> {
    assert_ok(o);
    let out = stdout(o);
    assert!(out.contains("KEPT NEVER REUSED"), "{out}");
    assert!(out.contains("INTACT"), "{out}");
    let s = sweeps(o);
    assert!(s[0] >= 1 && s[3] == 0, "{}", stderr(o));
    assert!(s[4] > 1000, "{}", stderr(o));
    assert!(in_place(o) > 1000, "{out}\n{}", stderr(o));
    s
}

/// A `heap-held` run (or `heap-held-dropped`): no slot a live heap object points to came back,
/// the other freed slots did, the kept objects are intact, no sweep gave up. Returns the
/// sweeps line.
fn assert_held_never_reused(o: &Output) -> Vec<u64> {
    assert_ok(o);
    let out = stdout(o);
    assert!(out.contains("HELD NEVER REUSED"), "{out}\n{}", stderr(o));
    assert!(in_place(o) > 10_000, "{out}\n{}", stderr(o));
    let s = sweeps(o);
    assert!(s[0] >= 1 && s[3] == 0, "{}", stderr(o));
    s
}

/// Whether this machine lets a process run on two processors at least (a sweep's helper task
/// reads a share of the heap only then).
fn two_processors() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
}

/// 100 000 dangling pointers held only in live heap objects all over a 25 MiB heap: a helper
/// task reads part of it beside the sweeping thread (where two processors may run them), and
/// none of the slots they point to comes back. With `sweep_helper=0` the sweeping thread reads
/// it all, with the same outcome.
#[test]
fn pointers_in_heap_objects_keep_their_slots_whoever_reads_them() {
    let _serial = one_at_a_time();
    let s = assert_held_never_reused(&run("heap-held", "mode=prevent:stats=1"));
    if two_processors() {
        assert!(s[14] > 0, "the helper task read nothing: {s:?}");
    } else {
        assert_eq!(s[14], 0, "{s:?}");
    }
    let s = assert_held_never_reused(&run("heap-held", "mode=prevent:stats=1:sweep_helper=0"));
    assert_eq!(s[14], 0, "a helper task read the heap with sweep_helper=0: {s:?}");
}

/// The same while a second thread sleeps: every sweep holds it, and the holder reads a share
/// of the heap, or none with `sweep_helper=0` (then the sweeping thread must still read it
/// all: every descriptor, from the first).
#[test]
fn with_threads_held_the_heap_is_read_whole_with_or_without_the_holder_s_share() {
    let _serial = one_at_a_time();
    let s = assert_held_never_reused(&run("heap-held-sleeping", "mode=prevent:stats=1"));
    assert!(s[11] >= 1 && s[12] >= 1, "the sleeping thread was never held: {s:?}");
    assert_eq!(s[14] > 0, two_processors(), "{s:?}");
    let s = assert_held_never_reused(&run("heap-held-sleeping", "mode=prevent:stats=1:sweep_helper=0"));
    assert!(s[11] >= 1, "{s:?}");
    assert_eq!(s[14], 0, "the holder read the heap with sweep_helper=0: {s:?}");
}

/// A thread waiting on a futex word in a heap object is stopped by the holder and let go, and
/// the kernel starts its wait again by reading the word: when the word's page was paged out
/// meanwhile, that failed with `EFAULT`, and glibc aborted the process ("The futex facility
/// returned an unexpected error code"; CPython's tests under steady pageout, nearly every
/// module; `sweep.c futex-waits`, whose pager task takes the page every 100 µs, 3 runs of 3).
/// The holder sends such a thread to make its wait again from user mode, where the read of
/// the word mends its page. The timed wait's timeout lies in the heap object too, on another
/// page, which the kernel reads when the wait is made again (8 runs of 8 aborted before the
/// timeout was read too). Three runs, each holding the waiting threads at least once.
#[test]
fn futex_waits_held_by_a_sweep_go_on_when_their_word_was_paged_out() {
    let _serial = one_at_a_time();
    for _ in 0..3 {
        let o = run("futex-waits", "mode=prevent:stats=1");
        assert_ok(&o);
        assert!(stdout(&o).contains("FUTEX WAITS OK"), "{}\n{}", stdout(&o), stderr(&o));
        let s = sweeps(&o);
        assert!(s[11] >= 1 && s[12] >= 3, "the waiting threads were never held: {s:?}\n{}", stderr(&o));
    }
}

/// A thread that a sweep let go on in its futex wait waits in the library's code
/// (`nevermore_futex_again`): cancelled there (`pthread_cancel`), it must end cancelled with
/// its cleanup handlers run, the condition variable's mutex unlocked (`sweep.c futex-cancel`,
/// built with `-fexceptions`: the handlers run only if the unwinder finds its way through the
/// library's frame; before that frame had unwind information, none ran).
#[test]
fn futex_waits_a_sweep_let_go_on_can_be_cancelled() {
    let _serial = one_at_a_time();
    let prog = compile("sweep.c", &["-pthread", "-fexceptions"]);
    let o = run_preloaded_timeout(&prog, &["futex-cancel"], &[("NEVERMORE_OPTIONS", "mode=prevent:stats=1")], 120);
    assert_ok(&o);
    assert!(stdout(&o).contains("FUTEX CANCEL OK"), "{}\n{}", stdout(&o), stderr(&o));
    let s = sweeps(&o);
    assert!(s[11] >= 1 && s[12] >= 3, "the waiting threads were never held: {s:?}\n{}", stderr(&o));
    assert!(counters(&stderr(&o), "faults handled")[2] >= 3, "{}", stderr(&o));
}

/// The same after the kept objects' pages lost their page-table entries (the program dropped
/// them with `madvise`): whichever task meets them maps them again, the helper through a fault
/// handler of its own (without it, the helper ended and every sweep gave up).
#[test]
fn pages_a_helper_task_finds_unmapped_are_mapped_again() {
    let _serial = one_at_a_time();
    let o = run("heap-held-dropped", "mode=prevent:stats=1");
    let s = assert_held_never_reused(&o);
    assert_eq!(s[14] > 0, two_processors(), "{s:?}");
    // One per page of kept objects (about 7 800).
    assert!(counters(&stderr(&o), "faults handled")[0] >= 5_000, "{}", stderr(&o));
}

/// A dangling pointer can read the old contents of the dead slot it points to (its group stays
/// mapped for a live neighbour): 100 000 such pointers in a global, each to a freed object
/// whose contents hold the only pointer to another freed object. Neither slot comes back,
/// with or without a helper task; other freed slots do. The same when the freed objects that
/// hold the pointers are page objects not yet revoked (`chained-page`). (Before sweeps read
/// what reached dead slots and unrevoked page objects hold, the second ones came back:
/// `CHAINED REUSED`.)
#[test]
fn pointers_left_in_freed_objects_keep_their_slots_too() {
    let _serial = one_at_a_time();
    for (case, options) in [
        ("chained", "mode=prevent:stats=1"),
        ("chained", "mode=prevent:stats=1:sweep_helper=0"),
        ("chained-page", "mode=prevent:stats=1"),
    ] {
        let o = run(case, options);
        assert_ok(&o);
        let out = stdout(&o);
        assert!(out.contains("CHAINED NEVER REUSED"), "{case} {options}: {out}\n{}", stderr(&o));
        assert!(in_place(&o) > 10_000, "{case} {options}: {out}\n{}", stderr(&o));
        let s = sweeps(&o);
        assert!(s[0] >= 1 && s[3] == 0, "{case} {options}: {}", stderr(&o));
    }
}

/// Pointers held in a global, a local, a live heap object, a read-only and a no-access
/// mapping, and an interior pointer: none of their slots comes back; the other freed slots do.
#[test]
fn dead_slots_of_pinned_groups_are_reused_unless_a_pointer_is_left() {
    let _serial = one_at_a_time();
    assert_swept(&run_swept("reuse", "mode=prevent:stats=1"));
}

/// A heap too big to sweep for a while (48 MiB live, above `sweep_max_live=32`) does not stop
/// sweeps once it shrank again: the same checks as above after such a phase. Under the default
/// limit (64 MiB) the same phase is not too big.
#[test]
fn sweeps_resume_once_a_heap_too_big_to_sweep_shrank() {
    let _serial = one_at_a_time();
    let o = run_swept("shrunk", "mode=prevent:stats=1:sweep_max_live=32");
    // The big phase was seen as too big (once: one stretch of it), and sweeps ran after it.
    assert_eq!(assert_swept(&o)[2], 1, "{}", stderr(&o));
    let o = run_swept("shrunk", "mode=prevent:stats=1");
    assert_eq!(assert_swept(&o)[2], 0, "{}", stderr(&o));
}

/// While a heap only grows, the checks after the first that found too little are put off
/// (nothing freed since could have made another find more), and once objects are freed they
/// come back and sweep: the same checks as above after such a phase.
#[test]
fn checks_are_put_off_while_nothing_is_freed_and_come_back_with_frees() {
    let _serial = one_at_a_time();
    let o = run_swept("grown", "mode=prevent:stats=1");
    let s = assert_swept(&o);
    assert!(s[9] >= 1 && s[15] >= 1, "no check found too little, or none was put off: {s:?}");
}

/// With `sweep_threads=0`, a process that had a second thread for a while is swept again once
/// it is alone.
#[test]
fn sweeps_resume_once_other_threads_are_gone() {
    let _serial = one_at_a_time();
    let o = run_swept("joined", "mode=prevent:stats=1:sweep_threads=0");
    assert_eq!(assert_swept(&o)[1], 1, "the thread was never seen: {}", stderr(&o));
}

/// `sweep_share` bounds the time sweeps take: the same churn sweeps far less often when they
/// may take 5 % of the time than when they may take half of it (sweeps are at least 5 ms
/// apart either way; here they take a few ms each, so about 5 and 40 % of the time).
#[test]
fn sweep_share_sets_how_often_sweeps_run() {
    let _serial = one_at_a_time();
    let prog = compile("sweep.c", &["-pthread"]);
    let sweeps_with = |share: u32| {
        let opts = format!("mode=prevent:stats=1:sweep_share={share}");
        let o = run_preloaded_timeout(&prog, &["churn", "400000", "nosignals"], &[("NEVERMORE_OPTIONS", &opts)], 120);
        assert_ok(&o);
        assert!(stdout(&o).contains("CHURN OK"), "{}", stdout(&o));
        sweeps(&o)[0]
    };
    let (few, many) = (sweeps_with(5), sweeps_with(50));
    assert!(few >= 1 && few * 2 < many, "sweeps with 5 %: {few}, with 50 %: {many}");
}

/// A heap of whole live groups and churn whose groups die whole: the checks find too few
/// dead slots pinned, and no sweep runs (each check is counted, with its time).
#[test]
fn checks_that_find_nothing_pinned_do_not_sweep() {
    let _serial = one_at_a_time();
    let o = run("unpinned", "mode=prevent:stats=1");
    assert_ok(&o);
    assert!(stdout(&o).contains("UNPINNED OK"), "{}", stdout(&o));
    let s = sweeps(&o);
    assert!(s[0] == 0 && s[4] == 0, "{}", stderr(&o));
    assert!(s[9] >= 1, "no check was made: {}", stderr(&o));
}

/// A program that keeps one object in 1 000 for ever among short-lived objects of its size (a
/// cache that only grows) has one in nearly every group of that size class, which it pins for
/// good. Sweeps refilled only groups up to 96 epochs old (so that the mirrors of survivors
/// that die in time can retire), so the dead slots beside those objects were lost: the pool
/// and the page tables grew by 16.6–17.6 MiB over the second 10 M allocations (for 10 000
/// objects of 32 bytes kept in them, ~0.5 MiB). Groups of an epoch that lost no live group
/// for 192 epochs are refilled at any age: 3.5–4.1 MiB. Bound: 8 MiB.
#[test]
fn groups_pinned_for_good_are_refilled_at_any_age() {
    let _serial = one_at_a_time();
    let o = run_args(&["kept", "20000000"], "mode=prevent:stats=1");
    assert_ok(&o);
    let out = stdout(&o);
    assert!(out.contains("KEPT OK"), "{out}");
    // KEPT <allocations> <pool KiB> <VmPTE KiB>, at half-way and at the end.
    let kib: Vec<u64> = out
        .lines()
        .filter_map(|l| l.strip_prefix("KEPT "))
        .filter_map(|l| {
            let v: Vec<u64> = l.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            (v.len() == 3).then(|| v[1] + v[2])
        })
        .collect();
    assert_eq!(kib.len(), 2, "{out}");
    let grew = kib[1].saturating_sub(kib[0]);
    assert!(grew <= 8 << 10, "the pool and page tables grew by {grew} KiB in the second half: {out}\n{}", stderr(&o));
    let s = sweeps(&o);
    assert!(s[0] >= 1 && s[3] == 0, "{}", stderr(&o));
}

#[test]
fn without_sweeps_no_address_comes_back() {
    let _serial = one_at_a_time();
    let o = run("reuse", "mode=prevent:stats=1:sweep=0");
    assert_ok(&o);
    assert!(stdout(&o).contains("KEPT NEVER REUSED") && stdout(&o).contains("INTACT"), "{}", stdout(&o));
    assert_eq!(in_place(&o), 0, "{}", stdout(&o));
    assert_eq!(sweeps(&o)[0], 0, "{}", stderr(&o));
}

/// Sweeps hold the other threads still (ptrace) and read their registers, vector registers,
/// stacks and thread-local storage: no slot a dangling pointer there points into comes back,
/// while one thread allocates all the time and others wait in system calls, which go on
/// without EINTR.
#[test]
fn other_threads_are_held_still_and_what_they_hold_is_read() {
    let _serial = one_at_a_time();
    let o = run_swept("threads", "mode=prevent:stats=1");
    assert!(!stdout(&o).contains("EINTR"), "{}", stdout(&o));
    let s = assert_swept(&o);
    // Six threads besides the main one, held at least once.
    assert!(s[11] >= 1 && s[12] >= 6, "{}", stderr(&o));
    assert_eq!(s[1], 0, "{}", stderr(&o));
}

/// No stop reaches a thread waiting in vfork(2) for its child: the sweep that tries to hold it
/// gives up after a second (the helper that holds threads is ended, and the threads it held
/// go on), and the program goes on unharmed.
#[test]
fn a_thread_that_cannot_be_stopped_makes_the_sweep_give_up() {
    let _serial = one_at_a_time();
    let o = run("vfork", "mode=prevent:stats=1");
    assert_not_swept(&o, 3, "the sweep did not give up");
    assert_eq!(sweeps(&o)[11], 0, "{}", stderr(&o));
}

#[test]
fn with_sweep_threads_off_processes_with_other_threads_are_not_swept() {
    let _serial = one_at_a_time();
    let o = run("sleeping", "mode=prevent:stats=1:sweep_threads=0");
    assert_not_swept(&o, 1, "the thread check never ran");
    assert_eq!(sweeps(&o)[11], 0, "{}", stderr(&o));
}

/// A `reuse` run that swept nothing: no address came back, and the sweeps line counts the
/// reason (`why`: its index on the line) at least once.
fn assert_not_swept(o: &Output, why: usize, what: &str) {
    assert_ok(o);
    assert!(stdout(o).contains("KEPT NEVER REUSED") && stdout(o).contains("INTACT"), "{}", stdout(o));
    assert_eq!(in_place(o), 0, "{}", stdout(o));
    let s = sweeps(o);
    assert_eq!((s[0], s[4]), (0, 0), "{}", stderr(o));
    assert!(s[why] >= 1, "{what}: {}", stderr(o));
}

/// `sweep.c CASE` under a seccomp filter (`seccomp_run.c`), which refuses userfaultfd (as
/// Docker's default profile does): the allocator runs in its fallback.
fn run_filtered(case: &str) -> Output {
    let wrapper = compile("seccomp_run.c", &[]);
    let prog = compile("sweep.c", &["-pthread"]);
    run_preloaded_timeout(
        &wrapper,
        &[prog.to_str().unwrap(), case],
        &[("NEVERMORE_OPTIONS", "mode=prevent:stats=1")],
        120,
    )
}

/// A seccomp filter might kill the process for the files a sweep opens (procfs): processes
/// under one are never swept.
#[test]
fn processes_under_a_seccomp_filter_are_not_swept() {
    let _serial = one_at_a_time();
    assert_not_swept(&run_filtered("reuse"), 2, "the seccomp check never ran");
}

/// Under a seccomp filter a process with threads is not looked at again and again (each look
/// reads `/proc/self/status`): the filter is noted once, before the threads.
#[test]
fn a_process_with_threads_under_a_seccomp_filter_is_checked_once() {
    let _serial = one_at_a_time();
    let o = run_filtered("threads");
    assert_not_swept(&o, 2, "the seccomp check never ran");
    let s = sweeps(&o);
    assert_eq!((s[1], s[2]), (0, 1), "{}", stderr(&o));
}

/// Sweeps under a long churn (1 % long-lived objects), with a timer signal whose handler
/// allocates and with forks on the way: every live object keeps its contents, and no
/// allocation returns one of the dangling pointers the program keeps (in a global array that
/// it replaces now and then). The same program under glibc (without the timer: glibc's malloc
/// is not async-signal-safe, and the handler made it abort in 1 run of 3) reports a kept
/// pointer reused at once, which shows the check bites.
#[test]
fn churn_with_signals_and_forks_keeps_objects_intact_and_kept_pointers_unused() {
    let _serial = one_at_a_time();
    let prog = compile("sweep.c", &["-pthread"]);
    let o = run_preloaded_timeout(&prog, &["churn", "1000000"], &[("NEVERMORE_OPTIONS", "mode=prevent:stats=1")], 120);
    assert_ok(&o);
    assert!(stdout(&o).contains("CHURN OK"), "{}\n{}", stdout(&o), stderr(&o));
    let s = sweeps(&o);
    assert!(s[0] >= 10 && s[4] > 10_000, "too few sweeps to mean anything: {}", stderr(&o));
    let glibc = wait_with_deadline(
        {
            let mut c = program(&prog);
            c.args(["churn", "1000000", "nosignals"]);
            c
        },
        60,
        "sweep churn under glibc",
    );
    assert!(stdout(&glibc).contains("REUSED a kept dangling pointer"), "{}", stdout(&glibc));
}

/// The same churn on four threads at once, each with objects and kept dangling pointers of its
/// own, the timer's handler allocating on whichever thread it lands, and the main thread
/// forking on the way: sweeps hold the other threads again and again (a signal that stops a
/// held thread is handed back to it), and every object stays intact and no kept pointer comes
/// back.
#[test]
fn churn_on_four_threads_with_signals_and_forks_keeps_objects_intact() {
    let _serial = one_at_a_time();
    let prog = compile("sweep.c", &["-pthread"]);
    let o = run_preloaded_timeout(
        &prog,
        &["churn", "500000", "signals", "4"],
        &[("NEVERMORE_OPTIONS", "mode=prevent:stats=1")],
        120,
    );
    assert_ok(&o);
    assert!(stdout(&o).contains("CHURN OK"), "{}\n{}", stdout(&o), stderr(&o));
    let s = sweeps(&o);
    assert!(s[11] >= 10 && s[12] >= 3 * s[11] / 2, "too few holds to mean anything: {}", stderr(&o));
    // A thread is found inside the allocator only while another forks (which holds every
    // lock while the pool is copied): a handler's entry, where a signal that came while the
    // thread was inside left it, once made 34-61 % of the tries miss (41 and 102 misses
    // against 81 and 64 holds).
    assert!(s[13] * 8 <= s[11], "{}", stderr(&o));
}

/// Real-time signals queued to threads that sweeps hold again and again are each handled
/// once: a signal that stops a held thread is handed back to it when it goes on.
#[test]
fn signals_queued_to_held_threads_are_handled_once_each() {
    let _serial = one_at_a_time();
    let o = run("queued", "mode=prevent:stats=1");
    assert_ok(&o);
    assert!(stdout(&o).contains("SIGNALS OK"), "{}\n{}", stdout(&o), stderr(&o));
    assert!(sweeps(&o)[11] >= 5, "too few holds to mean anything: {}", stderr(&o));
}

/// A non-dumpable process (here `prctl(PR_SET_DUMPABLE, 0)`; also a daemon that changed its
/// user ids) running unprivileged cannot open its own `/proc/self/mem` and `pagemap` (they
/// belong to root then). Without swap, sweeps read its memory with `process_vm_readv` and
/// pick pages with `mincore` instead: the kept pointers still keep their slots and the others
/// are reused. A no-access page holding data cannot be read that way: such a sweep gives up
/// and reuses nothing. A no-access private mapping of a file (a library's gap between its
/// segments) looks resident to `mincore` whenever the file is in the page cache: it is passed
/// over when `/proc/self/smaps` shows no private page in it (sweeps of dnsmasq and mosquitto,
/// which load such a library and drop root, all gave up), and gives up the sweep when it holds
/// one. With swap, a page out on swap would be missed: every sweep gives up.
/// Run as `nobody` when the tests run as root (root opens the files of any process).
#[test]
fn non_dumpable_processes_are_swept_without_swap_through_process_vm_readv() {
    let _serial = one_at_a_time();
    let prog = compile("sweep.c", &["-pthread"]);
    let run_unprivileged = |case: &str| {
        let mut cmd = if is_root() { as_nobody(&prog) } else { std::process::Command::new(&prog) };
        cmd.arg(case).env("LD_PRELOAD", lib_path()).env("NEVERMORE_OPTIONS", "mode=prevent:stats=1");
        wait_with_deadline(cmd, 120, case)
    };
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let swap = counter(&meminfo, "SwapTotal:");
    for case in ["undumpable", "undumpable-filegap"] {
        let o = run_unprivileged(case);
        if swap == 0 {
            assert_ok(&o);
            assert!(
                stdout(&o).contains("KEPT NEVER REUSED") && stdout(&o).contains("INTACT"),
                "{case}: {}",
                stdout(&o)
            );
            let s = sweeps(&o);
            assert!(s[0] >= 1 && s[3] == 0 && s[4] > 1000, "{case}: {}", stderr(&o));
            assert!(in_place(&o) > 1000, "{case}: {}\n{}", stdout(&o), stderr(&o));
        } else {
            assert_not_swept(&o, 3, "the sweep did not give up with swap on");
        }
    }
    for case in ["undumpable-noaccess", "undumpable-filenoaccess"] {
        assert_not_swept(&run_unprivileged(case), 3, "the no-access page was not seen");
    }
    // Unprivileged, a non-dumpable process may not ptrace its own threads: with a second
    // thread it is not swept, and that is counted as other threads in the way.
    let o = run_unprivileged("undumpable-sleeping");
    assert_not_swept(&o, 1, "the refusal was not counted");
    assert_eq!(sweeps(&o)[3], 0, "{}", stderr(&o));
}

/// Sweeps find the other threads in `/proc`. In a process of a new PID namespace whose `/proc`
/// is still the outer one's (`unshare --pid --fork` without `--mount-proc`), the ids there are
/// not the ones ptrace takes: sweeps held nobody and ran while the other thread went on
/// ("other threads held still 58 times, 0 threads in all"). Holding is now refused there, as
/// where ptrace is refused, and the process is not swept while it has threads; with a `/proc`
/// of its own, sweeps hold the thread and run. (An ordinary user enters a user namespace of its
/// own to make the PID namespace.)
#[test]
fn a_proc_of_another_pid_namespace_holds_no_threads() {
    let _serial = one_at_a_time();
    let prog = compile("sweep.c", &["-pthread"]);
    // The library in the program only, not in `unshare` (whose statistics would come too).
    let preload = format!("LD_PRELOAD={}", lib_path().display());
    // `wait`: SWEEP_WAIT_MS, for the run that is to sweep (see `run_swept`).
    let unshare = |extra: &[&str], wait: &str| {
        let mut cmd = program(std::path::Path::new("unshare"));
        cmd.args(["--pid", "--fork"]);
        if unprivileged_run() {
            cmd.arg("--map-root-user");
        }
        let wait = format!("SWEEP_WAIT_MS={wait}");
        cmd.args(extra)
            .args(["env", &preload, "NEVERMORE_OPTIONS=mode=prevent:stats=1", &wait])
            .arg(&prog)
            .arg("sleeping");
        cmd.env_remove("LD_PRELOAD").env_remove("NEVERMORE_OPTIONS");
        wait_with_deadline(cmd, 120, &format!("unshare {extra:?} sweep sleeping"))
    };
    let o = unshare(&[], "0");
    assert_not_swept(&o, 1, "holding was not refused");
    assert_eq!(sweeps(&o)[11], 0, "{}", stderr(&o));
    let o = unshare(&["--mount-proc"], "20000");
    let s = assert_swept(&o);
    assert!(s[11] >= 1 && s[12] >= s[11], "the sleeping thread was not held: {s:?}");
}
