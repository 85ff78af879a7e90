mod common;

// Hostile environments (`tests/c/hostile.c`): mappings nearly used up, a small RLIMIT_AS,
// MAP_FIXED_NOREPLACE at the allocator's addresses, all descriptors closed, allocation from a
// constructor that may run before the allocator's, and preload order. Each ends in correct
// operation, clean ENOMEM failures, or a clean abort with a one-line message; never a crash.
// (userfaultfd refused: tests/fallback.rs; the program's own SIGSEGV/SIGBUS handlers:
// tests/alias.rs.)

use common::*;
use std::path::Path;
use std::process::Output;

fn ok_quiet(o: &Output) {
    assert_ok(o);
    assert!(stdout(o).contains("OK"), "no OK:\n{}\nstderr:\n{}", stdout(o), stderr(o));
    assert!(!stderr(o).contains("nevermore: ERROR"), "unexpected report:\n{}", stderr(o));
}

/// `hostile ARGS` passes in both modes, printing `what`.
fn ok_saying_in_both_modes(args: &[&str], what: &str) {
    for mode in ["prevent", "detect"] {
        let o = hostile(args, mode);
        ok_quiet(&o);
        assert!(stdout(&o).contains(what), "{mode}: {}", stdout(&o));
    }
}

fn hostile(args: &[&str], mode: &str) -> Output {
    let bin = compile("hostile.c", &[]);
    let opts = format!("mode={mode}");
    run_preloaded_timeout(&bin, args, &[("NEVERMORE_OPTIONS", &opts)], 60)
}

/// With only a few mappings left under vm.max_map_count (used up by the program itself, so
/// that nothing global changes), allocations either work or fail with ENOMEM, the allocator
/// says why once, and everything works again once the program gives its mappings back.
#[test]
fn few_mappings_left() {
    for mode in ["prevent", "detect"] {
        for left in ["0", "10", "300"] {
            let o = hostile(&["maps", left], mode);
            ok_quiet(&o);
            let failed: u64 = stdout(&o)
                .lines()
                .find_map(|l| l.strip_prefix("under pressure: "))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no count:\n{}", stdout(&o)));
            if left == "0" {
                assert!(failed > 0, "no allocation failed with no mapping left:\n{}", stdout(&o));
            }
            if failed > 0 {
                assert!(stderr(&o).contains("cannot map a new mirror"), "no notice:\n{}", stderr(&o));
                assert!(stderr(&o).lines().filter(|l| l.contains("nevermore:")).count() == 1, "{}", stderr(&o));
            }
        }
    }
}

fn with_as_limit(bytes: u64, mode: &str, mb: &str) -> Output {
    under_limit(&format!("--as={bytes}"), &["work", mb], &format!("mode={mode}"))
}

/// `hostile ARGS` under the library with `options`, run by `prlimit LIMIT` (e.g. `--as=N`).
fn under_limit(limit: &str, args: &[&str], options: &str) -> Output {
    let bin = compile("hostile.c", &[]);
    wait_with_deadline(
        limited(limit, &bin, args, options),
        60,
        &format!("hostile {} under prlimit {limit}", args.join(" ")),
    )
}

/// RLIMIT_DATA counts private writable mappings whole, lazily committed or not: the library's
/// metadata (tables sized by the pool and the arena, chunks of 64 MiB, the stack depot) made
/// the library abort at start ("cannot reserve the alias arena") under any limit up to 1 GiB,
/// or fail every small allocation under 64 MiB. Now they are sized to fit, and a program that
/// works under glibc with 32 or 64 MiB works here too (the heap itself is shared memory, which
/// the limit does not count).
#[test]
fn small_data_limit() {
    for limit in [32u64 << 20, 64 << 20, 1 << 30] {
        for mode in ["prevent", "detect"] {
            ok_quiet(&under_limit(&format!("--data={limit}"), &["work", "64"], &format!("mode={mode}")));
        }
    }
}

/// Strict overcommit accounting (`vm.overcommit_memory=2`, which PostgreSQL's documentation
/// recommends) charges a process for its private writable mappings whole, touched or not
/// (`VmData`), as `RLIMIT_DATA` does. The library's tables, sized for a 64 GiB pool and a
/// 32 TiB arena, were writable from the start: 2.2 GiB charged to every process (2.5 GiB in
/// detect mode), so that a few processes used a machine's commit limit up, and fork and
/// malloc then failed everywhere. They are now made writable as they are used: in prevent
/// mode the same program shows no more `VmData` than under glibc (whose heap counts there;
/// the pool, shared memory, is charged page by page as it is filled), give or take 16 MiB;
/// detect mode also keeps every object's allocation and free stacks there: at most twice.
#[test]
fn private_writable_memory_is_charged_as_used() {
    let bin = compile("hostile.c", &[]);
    let vmdata = |o: &Output| -> u64 {
        ok_quiet(o);
        stdout(o)
            .lines()
            .find_map(|l| l.strip_prefix("VMDATA "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no VMDATA line:\n{}", stdout(o)))
    };
    let glibc = vmdata(&wait_with_deadline(
        {
            let mut c = program(&bin);
            c.args(["vmdata", "32"]);
            c
        },
        60,
        "hostile vmdata under glibc",
    ));
    for mode in ["prevent", "detect"] {
        let kib = vmdata(&hostile(&["vmdata", "32"], mode));
        let bound = if mode == "detect" { 2 * glibc } else { glibc } + (16 << 10);
        assert!(kib <= bound, "{mode}: VmData {kib} KiB against glibc's {glibc} KiB");
    }
}

/// The pool is a memory file, so `RLIMIT_FSIZE` (`ulimit -f`) bounds it: growing it past the
/// limit got the process killed by SIGXFSZ before `main` under any limit below 64 GiB. Now the
/// pool shrinks to fit (100 MiB: a 64 MiB pool, the program works); below its 16 MiB minimum
/// the library says why and aborts.
#[test]
fn file_size_limit() {
    use std::os::unix::process::ExitStatusExt;
    let run =
        |limit: u64, mode: &str| under_limit(&format!("--fsize={limit}"), &["work", "32"], &format!("mode={mode}"));
    for mode in ["prevent", "detect"] {
        ok_quiet(&run(100 << 20, mode));
        let o = run(8 << 20, mode);
        assert_ne!(o.status.signal(), Some(libc::SIGXFSZ), "{mode}: {}", stderr(&o));
        assert!(!o.status.success() && stderr(&o).contains("ulimit -f"), "{mode}: {:?}\n{}", o.status, stderr(&o));
    }
}

/// Large objects under an address-space limit of 1 GiB: 20 000 objects of 256 KiB, 8 alive at
/// a time (5.2 GiB of addresses with their guard pages), with 4 that live throughout. Every
/// large object took fresh addresses and regions were never given back, so malloc failed once
/// they had used the limit up (here at the 2 026th to 2 102nd object, when a new mirror found
/// no address space left; glibc: every one works). Now large objects take at most a quarter
/// of the limit (256 MiB, ~990 objects) before going back to their oldest region's swept
/// blocks: every allocation works, no address comes back before that, and no object,
/// long-lived or not, is overwritten.
/// The limit is set by `prlimit` running without the library (as systemd's `LimitAS=` would
/// be): the library lives within it. Set by a program under the library, it bounds the heap
/// instead (see `an_address_space_limit_from_a_program_under_the_library_bounds_the_heap`),
/// and the same load runs without reusing addresses.
#[test]
fn large_objects_under_an_address_space_limit() {
    let bin = compile("large_churn.c", &[]);
    for mode in ["prevent", "detect"] {
        let o = wait_with_deadline(
            limited(&format!("--as={}", 1u64 << 30), &bin, &["reuse", "20000", "4"], &format!("mode={mode}")),
            120,
            "large_churn reuse under prlimit --as=1GiB",
        );
        assert_ok(&o);
        assert_large_reuse(&o, mode, 256);
        let mut cmd = program(Path::new("prlimit"));
        cmd.arg(format!("--as={}", 1u64 << 30))
            .arg(&bin)
            .args(["reuse", "20000", "4"])
            .env("LD_PRELOAD", lib_path())
            .env("NEVERMORE_OPTIONS", format!("mode={mode}"));
        let o = wait_with_deadline(cmd, 120, "large_churn reuse under prlimit --as=1GiB, both under the library");
        assert_ok(&o);
        let out = stdout(&o);
        assert!(out.contains("PINNED OK") && out.contains("\nOK") && !out.contains("CORRUPT"), "{mode}:\n{out}");
    }
}

/// Under a 1 GiB limit the library lives within, the arena has room for few mirrors, and
/// epochs are made longer: 20 000 small objects with one in 16 kept to the end (each pinning
/// its epoch's mirror) fit in both modes. Before, detect mode started an epoch every 32
/// objects and used the 256 MiB arena up within 5 000 (malloc failed with ENOMEM).
#[test]
fn epochs_grow_longer_where_the_arena_is_scarce() {
    let bin = compile("hostile.c", &[]);
    for mode in ["prevent", "detect"] {
        let o = wait_with_deadline(
            limited(&format!("--as={}", 1u64 << 30), &bin, &["pinned", "20000"], &format!("mode={mode},stats=1")),
            60,
            "hostile pinned under prlimit --as=1GiB",
        );
        ok_quiet(&o);
        assert!(!stderr(&o).contains("is used up"), "{mode}: {}", stderr(&o));
    }
}

/// RLIMIT_AS of 1 GiB: the pool and arenas shrink to fit and the program works (and an 8 GiB
/// request fails with ENOMEM); 256 MiB: a small program works, a bigger one gets ENOMEM with a
/// one-line notice once the alias arena is used up (the program reports the failure itself).
#[test]
fn small_address_space_limit() {
    for mode in ["prevent", "detect"] {
        ok_quiet(&with_as_limit(1 << 30, mode, "64"));
        ok_quiet(&with_as_limit(256 << 20, mode, "8"));
        let o = with_as_limit(256 << 20, mode, "256");
        assert!(o.status.code().is_some(), "died of a signal: {:?}\n{}", o.status, stderr(&o));
        if !o.status.success() {
            assert_eq!(o.status.code(), Some(2));
            assert!(stdout(&o).contains("HOSTILE FAIL: malloc failed (12)"), "{}", stdout(&o));
            assert!(
                stderr(&o).contains("the one-time address space") && stderr(&o).contains("is used up"),
                "{}",
                stderr(&o)
            );
        }
    }
}

/// A new mirror, and a large object's view, replace part of the library's own reservation and
/// leave the address space used as it was; but the kernel checks a view's whole length against
/// RLIMIT_AS before it drops the reservation, so once less room was left than a mirror's
/// length (10-32 MiB here), every allocation that needed a new epoch failed with ENOMEM ("cannot
/// map a new mirror"), long before the alias arena was used up: `small_address_space_limit`
/// failed so now and then, when the program's heap had taken the room. The program here leaves
/// 4 MiB of room under a 1 GiB limit, then churns through many epochs.
#[test]
fn new_mirrors_need_no_room_under_an_address_space_limit() {
    for mode in ["prevent", "detect"] {
        let o = under_limit(&format!("--as={}", 1u64 << 30), &["room", "4096", "32"], &format!("mode={mode}"));
        ok_quiet(&o);
        assert!(stdout(&o).contains("ROOM 4096 KiB"), "{mode}: {}", stdout(&o));
        assert!(!stderr(&o).contains("cannot map a new mirror"), "{mode}: {}", stderr(&o));
    }
}

#[test]
fn map_fixed_noreplace_at_the_allocators_addresses() {
    ok_saying_in_both_modes(&["clash"], "5 clashes refused with EEXIST");
}

/// The descriptors the library keeps open in the program, in a parent and its forked child:
/// its userfaultfd and the pool's memfd, high and close-on-exec, and a pidfd only where the
/// kernel's `process_madvise` does not take `PIDFD_SELF_THREAD` (recent ones do).
#[test]
fn descriptors_the_library_keeps() {
    let bin = compile("hostile.c", &[]);
    let o = run_preloaded_timeout(&bin, &["fds"], &[("NEVERMORE_OPTIONS", "mode=prevent:verbose=1")], 60);
    ok_quiet(&o);
    let out = stdout(&o);
    let self_advice = out.contains("SELF_ADVICE 1");
    assert!(self_advice || out.contains("SELF_ADVICE 0"), "{out}");
    for who in ["parent", "child"] {
        let all: Vec<(u32, &str)> = out
            .lines()
            .filter_map(|l| l.strip_prefix(who)?.strip_prefix(" FD ")?.split_once(' '))
            .map(|(n, t)| (n.parse().unwrap(), t))
            .collect();
        // The library's are numbered from 800 up; below are those the test run passed on.
        let ours =
            |t: &str| t.starts_with("/memfd:nevermore") || t == "anon_inode:[userfaultfd]" || t == "anon_inode:[pidfd]";
        assert!(all.iter().all(|(n, t)| *n >= 800 || !ours(t)), "{who}: {all:?}");
        let fds: Vec<(u32, &str)> = all.into_iter().filter(|(n, _)| *n >= 800).collect();
        let mut kinds: Vec<&str> = fds.iter().map(|(_, t)| *t).collect();
        kinds.sort();
        let pool = kinds.iter().position(|t| t.starts_with("/memfd:"));
        assert!(pool.is_some(), "{who}: no pool memfd in {fds:?}");
        kinds.remove(pool.unwrap());
        let mut want = vec!["anon_inode:[userfaultfd]"];
        if !self_advice {
            want.insert(0, "anon_inode:[pidfd]");
        }
        assert_eq!(kinds, want, "{who}: {fds:?}");
    }
    let batches = if self_advice { "process_madvise on the calling thread" } else { "process_madvise on a pidfd" };
    assert!(stderr(&o).contains(&format!("(batches: {batches})")), "{}", stderr(&o));
}

/// A program whose main thread leaves with `pthread_exit` while another works on: revocation
/// batches still go to the kernel in one call each. `process_madvise` on the process's leader
/// (a pidfd of the process) fails with ESRCH once the leader has exited, and every range then
/// took a `madvise` of its own (measured: 74 k calls for 550 batches).
#[test]
fn revocation_batches_survive_the_main_thread() {
    let bin = compile("hostile.c", &[]);
    let o = run_preloaded_timeout(&bin, &["leader-exits"], &[("NEVERMORE_OPTIONS", "mode=prevent:stats=1")], 60);
    ok_quiet(&o);
    let err = stderr(&o);
    let Ok([pages, batches, ranges, calls]) = <[u64; 4]>::try_from(counters(&err, "revocations")) else {
        panic!("no revocation counters in:\n{err}")
    };
    assert!(batches >= 20 && ranges > 4 * batches, "{pages} pages, {batches} batches, {ranges} ranges:\n{err}");
    let self_advice = stderr(&hostile(&["fds"], "prevent:verbose=1")).contains("on the calling thread");
    if self_advice {
        assert!(calls <= batches + batches / 10, "{calls} calls for {batches} batches:\n{err}");
    }
}

/// glibc's `clone()` without `CLONE_VM` makes a fork in all but name, without fork handlers:
/// the child must still get its own copy of the heap (before, its writes reached the parent's
/// objects), also when its stack was cut from the heap, which the copy replaces under it.
#[test]
fn clone_without_shared_memory_is_a_fork() {
    for mode in ["prevent", "detect"] {
        for stack in ["heap", "mmap"] {
            ok_quiet(&hostile(&["clone", stack], mode));
        }
    }
}

/// Processes made with the C library's `syscall()` rather than `fork()` (`SYS_fork`; `SYS_clone`
/// and `SYS_clone3` without `CLONE_VM`, as vsftpd makes its per-connection processes), or with
/// `_Fork()` (glibc 2.34+: no fork handlers run): each process keeps a heap of its own.
/// Before, no fork handler ran, the two shared the pool's pages, and the child saw the
/// parent's writes (and both handed out the same slots; for `_Fork`, "CHILD FAILED" in both
/// modes until the library wrapped it).
#[test]
fn forks_made_through_syscall_get_their_own_heap() {
    let bin = compile("raw_fork.c", &[]);
    for mode in ["prevent", "detect"] {
        for how in ["fork", "clone", "clone3", "_Fork"] {
            let o = run_preloaded_timeout(&bin, &[how], &[("NEVERMORE_OPTIONS", &format!("mode={mode}"))], 60);
            assert_ok(&o);
            assert!(stdout(&o).contains("RAW FORK OK"), "{mode}, {how}: {}\n{}", stdout(&o), stderr(&o));
        }
    }
}

/// A program that lowers its own address-space limit once it runs (vsftpd: 100-200 MiB), far
/// below the address space the library reserved at start-up: it reads back what it set, its own
/// 32 MiB mapping and its allocations work, and an allocation past the limit fails with ENOMEM,
/// as under glibc (the program runs without the library too). Before, every later mapping
/// failed, the program's and the allocator's.
/// Raising the hard limit again then succeeds or fails as without the library (with privileges
/// or without), and reads back the same; so under a limit set before the program started.
#[test]
fn an_address_space_limit_lowered_while_running() {
    let bin = compile("as_limit.c", &[]);
    for before in [None, Some("--as=8589934592")] {
        let run = |lib: Option<&str>| {
            let mut cmd = match before {
                Some(limit) => {
                    let mut c = program(Path::new("prlimit"));
                    c.arg(limit).arg(&bin);
                    c
                }
                None => program(&bin),
            };
            cmd.env_remove("LD_PRELOAD").env_remove("NEVERMORE_OPTIONS");
            if let Some(mode) = lib {
                cmd.env("LD_PRELOAD", lib_path()).env("NEVERMORE_OPTIONS", format!("mode={mode}"));
            }
            wait_with_deadline(cmd, 60, "as_limit")
        };
        let plain = run(None);
        assert_ok(&plain);
        let plain_out = stdout(&plain);
        assert!(plain_out.contains("AS LIMIT OK"), "{before:?}, without the library: {plain_out}");
        for mode in ["prevent", "detect"] {
            let o = run(Some(mode));
            assert_ok(&o);
            assert_eq!(
                stdout(&o),
                plain_out,
                "{before:?}, {mode}: differs from the run without the library\n{}",
                stderr(&o)
            );
        }
    }
}

/// A 256 MiB limit set by a program under the library for the program it starts (dovecot's
/// `default_vsz_limit` for its services, a shell's `ulimit -v`): the started program's heap is
/// held to it, not its address space, so the one-time address space is not cut to a quarter
/// of it. Before, 256 MiB left it 64 MiB: dovecot's imap processes, openssl and this workload
/// had their allocations fail within a second ("the one-time address space (64 MiB) is used
/// up"); the same program under a limit set by `prlimit` without the library still may
/// (`small_address_space_limit`).
#[test]
fn an_address_space_limit_from_a_program_under_the_library_bounds_the_heap() {
    let bin = compile("hostile.c", &[]);
    let shell = format!("ulimit -v 262144; exec {} work 256", bin.display());
    for mode in ["prevent", "detect"] {
        let mut cmd = program(Path::new("bash"));
        cmd.args(["-c", &shell]).env("LD_PRELOAD", lib_path()).env("NEVERMORE_OPTIONS", format!("mode={mode}"));
        ok_quiet(&wait_with_deadline(cmd, 60, "bash: ulimit -v; hostile work"));
    }
}

/// A limit set by a program under the library for the program it then starts (a shell's
/// `ulimit -v`, `prlimit --as=N PROGRAM`) limits that program as without the library: the
/// started program's library sets the raised limit back before it reserves anything.
#[test]
fn an_address_space_limit_set_for_the_next_program_limits_it() {
    let bin = compile("as_limit.c", &[]);
    let shell = format!("ulimit -v 1048576; exec {} report", bin.display());
    let ways: [Vec<&str>; 2] =
        [vec!["bash", "-c", &shell], vec!["prlimit", "--as=1073741824", bin.to_str().unwrap(), "report"]];
    for way in &ways {
        let run = |lib: bool| {
            let mut cmd = program(Path::new(way[0]));
            cmd.args(&way[1..]).env_remove("LD_PRELOAD").env_remove("NEVERMORE_OPTIONS");
            if lib {
                cmd.env("LD_PRELOAD", lib_path());
            }
            wait_with_deadline(cmd, 60, way[0])
        };
        let (plain, under) = (run(false), run(true));
        assert_ok(&plain);
        assert_ok(&under);
        assert_eq!(stdout(&plain), "limit 1024 MiB, malloc(1500 MiB) failed\n", "{way:?}");
        assert_eq!(stdout(&under), stdout(&plain), "{way:?}: {}", stderr(&under));
    }
}

/// `mlockall(MCL_CURRENT | MCL_FUTURE)`: the program's own memory is filled and locked (an
/// untouched 4 MiB mapping is resident afterwards), while the pool's views stay unlocked, so
/// that revocation works and nothing fills them. Before, revocation failed on locked mirrors
/// (the library aborted), and without an address-space limit every mirror was filled until
/// the OOM killer ended the process (hence the 2 GiB limit here). Unprivileged, the call
/// fails with ENOMEM as it does under glibc (the address space exceeds `RLIMIT_MEMLOCK`).
#[test]
fn mlockall_locks_the_program_but_not_the_pool() {
    for mode in ["prevent", "detect"] {
        let o = under_limit("--as=2147483648", &["mlockall"], &format!("mode={mode}:stats=1"));
        ok_quiet(&o);
        let (out, err) = (stdout(&o), stderr(&o));
        let rss: u64 = out.lines().find_map(|l| l.strip_prefix("VmRSS ")?.parse().ok()).unwrap_or(u64::MAX);
        assert!(rss < 256 << 10, "{mode}: {rss} KiB resident:\n{out}");
        let [_pages, batches, ..] = counters(&err, "revocations")[..] else { panic!("{err}") };
        assert!(batches >= 10, "{mode}: {batches} revocation batches:\n{err}");
        if out.contains("MLOCKALL 0 0") {
            assert!(out.contains("RESIDENT 1024 of 1024"), "{mode}: {out}");
        } else {
            assert!(unprivileged_run() && out.contains("MLOCKALL -1 12"), "{mode}: {out}");
        }
    }
}

/// A heap buffer the program made read-only with `mprotect`: a write to it is the program's
/// fault, delivered to its SIGSEGV handler (also in a forked child, whose views of the heap are
/// mapped afresh), or killing it without one. Before, the fault handler took it for a live
/// page without its entry, mapped nothing (it was mapped) and returned: the write faulted
/// again for ever (both modes), and a forked child could write the buffer.
#[test]
fn the_programs_own_page_protection_holds() {
    use std::os::unix::process::ExitStatusExt;
    for mode in ["prevent", "detect"] {
        let o = hostile(&["mprotect"], mode);
        ok_quiet(&o);
        assert!(stdout(&o).contains("TRAPPED in parent and child"), "{mode}: {}", stdout(&o));
        let o = hostile(&["mprotect", "nohandler"], mode);
        assert_eq!(o.status.signal(), Some(11), "{mode}: {:?}\n{}\n{}", o.status, stdout(&o), stderr(&o));
        assert!(stdout(&o).contains("writing") && !stderr(&o).contains("nevermore: ERROR"), "{mode}: {}", stderr(&o));
    }
}

/// Live pages that lost their entries (the program's own `madvise(MADV_DONTNEED)` here; a fork
/// or a swap-in elsewhere) are mapped again on the first touch, and several threads touching
/// one such page at once all go on: the page one of them maps is there for the others. (A
/// version that took a page found mapped for the program's own protection fault killed the
/// program with SIGBUS here.)
#[test]
fn threads_touching_a_page_that_lost_its_entry_all_go_on() {
    for mode in ["prevent", "detect"] {
        let bin = compile("hostile.c", &[]);
        let opts = format!("mode={mode}:stats=1");
        let o = run_preloaded_timeout(&bin, &["refault-threads"], &[("NEVERMORE_OPTIONS", &opts)], 60);
        ok_quiet(&o);
        let handled = counter(&stderr(&o), "faults handled");
        assert!(handled >= 300, "{mode}: {handled} faults handled:\n{}", stderr(&o));
    }
}

/// A program that handles SIGSEGV on a small alternate signal stack (`SA_ONSTACK`, a guard page
/// below; 8 KiB is glibc's classic `SIGSTKSZ`): the library's handler runs there first, and
/// its report now runs on a stack of its own. Before, walking and printing the stacks ran past
/// 8 KiB into the guard page, and the report never came out (the program's handler got the
/// second fault); with a 4 KiB static buffer as the stack and no guard, the program hung.
#[test]
fn reports_come_out_on_a_small_alternate_signal_stack() {
    for bytes in ["4096", "8192"] {
        let o = hostile(&["altstack", bytes], "detect");
        assert_report(&o, "heap-use-after-free");
        assert!(!stdout(&o).contains("own handler"), "{bytes}: {}", stdout(&o));
    }
}

/// A program that closes every descriptor it did not open (the allocator's among them) keeps
/// allocating, forking and trapping use after free. Closed before the program's first
/// allocation (a daemon's first step), the first refill needed a new epoch, whose mirror the
/// closed userfaultfd could not register, and `malloc` returned NULL.
#[test]
fn all_descriptors_closed() {
    for first in [&[][..], &["first"][..]] {
        let args = |more: &[&'static str]| [&["closefds"][..], first, more].concat();
        for mode in ["prevent", "detect"] {
            ok_quiet(&hostile(&args(&[]), mode));
        }
        // And use after free is still trapped (detect mode traps at once).
        assert_report(&hostile(&args(&["uaf"]), "detect"), "heap-use-after-free");
    }
}

/// The same under a service's seccomp filter (`tests/c/seccomp_run.c --service`: the process
/// is killed for `mincore` and `ptrace`, as systemd's `SystemCallFilter=@system-service`
/// does): with the pool's descriptor closed, `fork` found the pages to copy with `mincore`,
/// and the process died of SIGSYS at its first fork. Under a filter every page of the spans
/// in use is copied instead.
#[test]
fn all_descriptors_closed_under_a_services_seccomp_filter() {
    let wrapper = compile("seccomp_run.c", &[]);
    let bin = compile("hostile.c", &[]);
    for first in [&[][..], &["first"][..]] {
        let args = [&["--service", bin.to_str().unwrap(), "closefds"][..], first].concat();
        for mode in ["prevent", "detect"] {
            let o = run_preloaded_timeout(&wrapper, &args, &[("NEVERMORE_OPTIONS", &format!("mode={mode}"))], 60);
            ok_quiet(&o);
        }
    }
}

/// A program whose descriptor table is full (a server at its limit) can still fork: the copy
/// of the heap that the child gets needs a descriptor of the parent's, which the library
/// takes above the soft limit for that call; before, the child said "could not give the
/// child its own copy of the heap (errno 24)" and exited with 127. The program's limit and
/// its full table are unchanged afterwards.
#[test]
fn fork_with_a_full_descriptor_table() {
    ok_saying_in_both_modes(&["fdfull"], "FDFULL");
}

/// A program that puts descriptors of its own at the numbers the allocator's hold (`dup2`)
/// keeps them, in a forked child too: the child closed the number of the pool's descriptor
/// it inherited, whatever was there by then, and the child's writes to it failed (`EBADF`).
#[test]
fn descriptors_put_over_the_allocators_stay_the_programs() {
    let dir = writable_dir("dup2-over");
    for mode in ["prevent", "detect"] {
        let path = dir.join(format!("out-{mode}"));
        // A pass as another user created it before.
        let _ = std::fs::remove_file(&path);
        let o = hostile(&["dup2-over", path.to_str().unwrap()], mode);
        ok_quiet(&o);
        assert!(stdout(&o).contains("OK 2 descriptors, 12 bytes"), "{mode}: {}", stdout(&o));
    }
}

/// Programs list their open descriptors by probing every number: CPython's `fd_status.py`
/// (its `subprocess` tests) with `fstat`, daemons with `fcntl` before closing what they did
/// not open. The library's descriptors (its memory file, its userfaultfd) look closed to every
/// such probe; `fstat` found them open, and `test_subprocess`'s `test_pass_fds_redirected`
/// failed under the library.
#[test]
fn the_allocators_descriptors_look_closed_to_every_probe() {
    for mode in ["prevent", "detect"] {
        let o = hostile(&["probe"], mode);
        ok_quiet(&o);
        let out = stdout(&o);
        let numbers = |tag: &str| -> Vec<u32> {
            out.lines()
                .filter_map(|l| l.strip_prefix(tag))
                .filter_map(|l| l.split_whitespace().next()?.parse().ok())
                .collect()
        };
        let own = numbers("OWN ");
        assert!(own.len() >= 2, "{mode}: the allocator's descriptors were not found:\n{out}");
        assert!(numbers("DISAGREE ").is_empty(), "{mode}: the probes disagree:\n{out}");
        let seen = numbers("SEEN ");
        assert!(seen.contains(&0) && seen.contains(&2), "{mode}: {out}");
        assert!(own.iter().all(|n| !seen.contains(n)), "{mode}: the allocator's descriptors look open:\n{out}");
    }
}

/// bash takes a close-on-exec descriptor above 9 for one it saved itself and puts it back
/// after a redirection: `exec N>file` at the number of one of the allocator's descriptors
/// left the pool's memory file there, and what the script wrote to N went into the heap
/// (the file stayed empty; detect mode then reported an overflow in bash). The library's
/// descriptors (the report file's too) now look closed to `fcntl`: the number becomes the
/// script's file and gets every byte, in both modes.
#[test]
fn a_shell_redirecting_the_allocators_descriptor_numbers_gets_its_files() {
    let dir = writable_dir("bash-fds");
    let script = r#"
nums=
for f in /proc/$$/fd/*; do
    case "$(readlink "$f")" in *nevermore-pool*|*userfaultfd*|*/nevermore-reports.log) nums="$nums ${f##*/}" ;; esac
done
[ -n "$nums" ] || { echo "no descriptor of the allocator"; exit 3; }
for n in $nums; do
    rm -f "$DIR/out-$n"
    eval "exec $n>"\$DIR/out-$n""
    eval "echo hello-$n >&$n"
done
s=$(head -c 300000 /dev/zero | tr '\0' a)
for n in $nums; do eval "printf %s "\$s" >&$n"; done
for n in $nums; do echo "FILE $n $(wc -c < "$DIR/out-$n")"; done
"#;
    for mode in ["prevent", "detect"] {
        // The report file is one of the allocator's descriptors too: it exists, so it is
        // opened at start-up. It belongs to the user the programs run as.
        let report = dir.join("nevermore-reports.log");
        std::fs::write(&report, "").unwrap();
        if unprivileged_run() {
            std::os::unix::fs::chown(&report, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        let opts = format!("mode={mode}:report_path={}", report.display());
        let o = run_preloaded_timeout(
            std::path::Path::new("/bin/bash"),
            &["-c", script],
            &[("NEVERMORE_OPTIONS", &opts), ("DIR", dir.to_str().unwrap())],
            60,
        );
        assert!(o.status.success(), "{mode}: {:?}\n{}\n{}", o.status, stdout(&o), stderr(&o));
        assert!(!stderr(&o).contains("nevermore"), "{mode}: {}", stderr(&o));
        let files: Vec<(u64, u64)> = stdout(&o)
            .lines()
            .filter_map(|l| l.strip_prefix("FILE "))
            .map(|l| {
                let mut w = l.split_whitespace().map(|x| x.parse::<u64>().unwrap());
                (w.next().unwrap(), w.next().unwrap())
            })
            .collect();
        assert!(files.len() >= 3, "{mode}: {}\n{}", stdout(&o), stderr(&o));
        for (n, bytes) in files {
            let want = format!("hello-{n}\n").len() as u64 + 300_000;
            assert_eq!(bytes, want, "{mode}: descriptor {n}: {}\n{}", stdout(&o), stderr(&o));
        }
    }
}

fn ctor_program() -> (std::path::PathBuf, std::path::PathBuf) {
    let lib = compile("ctor_lib.c", &["-shared", "-fPIC"]);
    let dir = lib.parent().unwrap().to_str().unwrap().to_string();
    let bin = compile("hostile.c", &["-DWITH_CTOR", lib.to_str().unwrap(), &format!("-Wl,-rpath,{dir}")]);
    (bin, lib)
}

/// A library linked into the program allocates from an early constructor (priority 101).
#[test]
fn malloc_from_a_constructor_of_a_linked_library() {
    let (bin, _) = ctor_program();
    for mode in ["prevent", "detect"] {
        let opts = format!("mode={mode}");
        ok_quiet(&run_preloaded_timeout(&bin, &["ctor"], &[("NEVERMORE_OPTIONS", &opts)], 60));
    }
}

/// `LD_PRELOAD=libother.so:libnevermore.so`, the other library's constructor allocating; and
/// the reverse order.
#[test]
fn preload_order_with_another_library() {
    let (bin, lib) = ctor_program();
    let plugin = compile("plugin.c", &["-shared", "-fPIC"]);
    let ours = lib_path();
    for order in [
        format!("{}:{}", plugin.display(), ours.display()),
        format!("{}:{}", ours.display(), plugin.display()),
        format!("{}:{}", lib.display(), ours.display()),
    ] {
        let mut cmd = program(&bin);
        cmd.arg("ctor").env("LD_PRELOAD", &order).env("PLUGIN_SAY", "1").env("NEVERMORE_OPTIONS", "mode=detect");
        let o = wait_with_deadline(cmd, 60, &order);
        ok_quiet(&o);
        if order.contains("plugin") {
            assert!(stdout(&o).contains("plugin constructor ran"), "{}", stdout(&o));
        }
    }
}

/// A library opened with `RTLD_DEEPBIND` frees what the program allocated and the program
/// what it allocated (realloc too), small and large, in both modes: `dlopen` drops the flag,
/// which made the library take `free` from the C library (`free(): invalid pointer`).
#[test]
fn library_opened_with_deepbind_shares_the_allocator() {
    let lib = compile("deepbind_lib.c", &["-shared", "-fPIC"]);
    let bin = compile("deepbind.c", &["-ldl"]);
    let plain = program(&bin).arg(&lib).output().unwrap();
    assert_ok(&plain);
    for mode in ["prevent", "detect"] {
        let opts = format!("mode={mode}");
        let o = run_preloaded_timeout(&bin, &[lib.to_str().unwrap()], &[("NEVERMORE_OPTIONS", &opts)], 60);
        ok_quiet(&o);
        assert_eq!(stdout(&o), stdout(&plain), "{mode}: {}", stderr(&o));
    }
}

/// Large objects each take two mappings of their own (a view, and the reservation it splits):
/// with 3 000 mappings left, 1 700 objects just above the page-object limit used them up, and
/// malloc returned NULL at the 1 498th (glibc's merge into a few). Now the allocator counts the
/// mappings every 512 views and, short of them, makes bigger objects page objects of its
/// mirrors, which take none: every object is allocated, keeps its contents, and grows.
#[test]
fn large_objects_when_mappings_run_short() {
    let bin = compile("mappings.c", &[]);
    for mode in ["prevent", "detect"] {
        let opts = format!("mode={mode}:stats=1");
        let o = run_preloaded_timeout(&bin, &["3000", "1700"], &[("NEVERMORE_OPTIONS", &opts)], 120);
        ok_quiet(&o);
        let err = stderr(&o);
        let line = err.lines().find(|l| l.contains("large objects")).unwrap_or_else(|| panic!("{mode}:\n{err}"));
        let instead: u64 = line
            .split(';')
            .nth(1)
            .and_then(|r| r.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{mode}: {line}"));
        assert!(instead >= 1000, "{mode}: only {instead} page objects instead of large ones:\n{err}");
    }
}

/// A program that changes its root directory to an empty one, as confined daemons do
/// (vsftpd's sessions, OpenSSH's pre-authentication child, haproxy as Debian configures it),
/// leaves `/proc` behind: sweeps read the process's mappings and memory there, the leak check
/// and the statistics its status. Sweeps gave up, the leak check said the other threads
/// could not be held (there were none), and `stats=1` showed 0 KiB of RSS. `chroot` now keeps
/// a descriptor of `/proc` first. A root changed by a raw system call keeps nothing: the leak
/// check says why it did not run and the statistics say what they cannot know. (An ordinary
/// user becomes root of a user namespace of its own to call `chroot`.)
#[test]
fn a_root_directory_without_proc() {
    let bin = compile("hostile.c", &[]);
    let dir = writable_dir("empty-root");
    let dir = dir.to_str().unwrap();
    let run = |how: &str, options: &str| {
        run_preloaded_timeout(&bin, &["chroot", dir, how], &[("NEVERMORE_OPTIONS", options)], 120)
    };
    let o = run("libc", "mode=prevent:stats=1");
    ok_quiet(&o);
    let err = stderr(&o);
    assert!(counter(&err, "sweeps") > 0, "no sweep ran under the new root:\n{err}");
    assert!(counter(&err, "RSS") > 0, "{err}");
    // The object is lost last, after the fork: its report is the end of the run.
    let o = run("libc", "mode=detect:detect_leaks=1");
    assert!(stderr(&o).contains("leaked 100 bytes in 1 objects"), "{}\n{}", stdout(&o), stderr(&o));
    let o = run("raw", "mode=detect:detect_leaks=1:stats=1");
    ok_quiet(&o);
    let err = stderr(&o);
    assert!(err.contains("leak check not done: /proc/self/status cannot be read"), "{err}");
    assert!(err.contains("RSS                unknown"), "{err}");
}

/// Removes a file when dropped (also when the test fails).
struct Removed(std::path::PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Secure execution: where the library is preloaded into every process (/etc/ld.so.preload),
/// an ordinary user who starts a set-user-ID program chooses its environment. With
/// `NEVERMORE_OPTIONS=report_path=FILE:stats=1` the root-owned process created FILE in a
/// directory only root may write, or appended its statistics to an existing root file. Under
/// `AT_SECURE` the options are now ignored. (The loader takes a preloaded library for such a
/// program only from a trusted directory, set-user-ID itself and named without a slash: the
/// test puts a copy beside the C library for its run, which needs root.)
#[test]
fn a_set_user_id_program_ignores_the_options() {
    use std::os::unix::fs::PermissionsExt;
    assert!(is_root(), "this test makes a set-user-ID program and library, which needs root");
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libc = maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find(|p| p.contains("/libc.so")).unwrap();
    let name = format!("libnevermore-secure-test-{}.so", std::process::id());
    let lib = Path::new(libc).parent().unwrap().join(&name);
    let _lib = Removed(lib.clone());
    std::fs::copy(lib_path(), &lib).unwrap();
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let dir = scratch("secure-execution");
    let prog = dir.join("hostile");
    std::fs::copy(compile("hostile.c", &[]), &prog).unwrap();
    std::os::unix::fs::chown(&prog, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let private = dir.join("private");
    std::fs::create_dir_all(&private).unwrap();
    std::os::unix::fs::chown(&private, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let existing = private.join("existing");
    std::fs::write(&existing, "").unwrap();
    // `env` sets the variables for the program alone: `setpriv` would take the library (and
    // its options) itself, as a program of root's started by root.
    let run = |args: &[&str], options: &str| {
        let mut cmd = as_nobody(Path::new("env"));
        cmd.arg(format!("LD_PRELOAD={name}")).arg(format!("NEVERMORE_OPTIONS={options}")).arg(&prog).args(args);
        cmd.env_remove("LD_PRELOAD").env_remove("NEVERMORE_OPTIONS");
        wait_with_deadline(cmd, 60, &format!("set-user-ID hostile {}", args.join(" ")))
    };
    // The program runs as root for nobody (not so on a file system mounted `nosuid`), and the
    // library is loaded into it (its pool is among the descriptors).
    let o = run(&["ids"], "");
    assert!(stdout(&o).contains(&format!("RUID {NOBODY} EUID 0")), "not set-user-ID here: {}", stdout(&o));
    let o = run(&["fds"], "stats=1");
    assert!(stdout(&o).contains("/memfd:nevermore-pool"), "{}\n{}", stdout(&o), stderr(&o));
    for file in [private.join("new"), existing.clone()] {
        let o = run(&["work", "8"], &format!("report_path={}:stats=1:verbose=1", file.display()));
        ok_quiet(&o);
        assert!(!stderr(&o).contains("nevermore"), "an option was taken: {}", stderr(&o));
    }
    assert!(!private.join("new").exists(), "the set-user-ID program created the report file");
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "", "the set-user-ID program wrote to a root file");
}
