//! Behaviour of the `nevermore` command: exit status pass-through, signals, environment, `lib`.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `nevermore ARGS` with a clean allocator environment and a private cache directory.
fn nevermore(args: &[&str]) -> Command {
    let mut cmd = common::program(&common::nevermore_bin());
    cmd.args(args)
        .env_remove("NEVERMORE_OPTIONS")
        .env_remove("LD_PRELOAD")
        .env("XDG_CACHE_HOME", common::writable_dir("cli-cache"));
    cmd
}

fn output(cmd: &mut Command) -> Output {
    cmd.output().expect("spawn nevermore")
}

/// The child's `$NEVERMORE_OPTIONS` under `nevermore run FLAGS -- sh -c ...`, without the two
/// items `run` adds on its own (its private `report_path=` and `exitcode=23`).
fn child_options(flags: &[&str], env: Option<&str>) -> String {
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", "printf %s \"$NEVERMORE_OPTIONS\""]);
    let mut cmd = nevermore(&args);
    if let Some(v) = env {
        cmd.env("NEVERMORE_OPTIONS", v);
    }
    let o = output(&mut cmd);
    common::assert_ok(&o);
    let all = common::stdout(&o);
    let mut items: Vec<&str> = all.split(':').collect();
    if let Some(i) = items.iter().position(|i| i.starts_with("report_path=") && i.contains("/nevermore-run-")) {
        items.remove(i);
    }
    if items.last() == Some(&"exitcode=23") {
        items.pop();
    }
    items.join(":")
}

#[test]
fn exit_code_is_passed_through() {
    for code in [0, 1, 7, 255] {
        let o = output(&mut nevermore(&["run", "--", "sh", "-c", &format!("exit {code}")]));
        assert_eq!(o.status.code(), Some(code), "{:?} {}", o.status, common::stderr(&o));
    }
}

#[test]
fn signal_death_is_passed_through() {
    for (name, num) in [("TERM", 15), ("KILL", 9), ("USR1", 10), ("SEGV", 11)] {
        let o = output(&mut nevermore(&["run", "--", "sh", "-c", &format!("kill -{name} $$")]));
        assert_eq!(o.status.signal(), Some(num), "{name}: {:?}", o.status);
        assert!(!o.status.core_dumped(), "{name}: the command itself dumped core");
    }
}

#[test]
fn signals_are_forwarded_to_the_child() {
    let script = "trap 'echo got-term; exit 42' TERM; echo ready; while :; do sleep 0.05; done";
    let mut child =
        nevermore(&["run", "--", "sh", "-c", script]).stdout(Stdio::piped()).spawn().expect("spawn nevermore");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    assert_eq!(lines.next().unwrap().unwrap(), "got-term");
    assert_eq!(child.wait().unwrap().code(), Some(42));
}

#[test]
fn ld_preload_points_at_the_library() {
    let o = output(&mut nevermore(&["run", "--", "sh", "-c", "printf %s \"$LD_PRELOAD\""]));
    common::assert_ok(&o);
    let preload = common::stdout(&o);
    assert!(preload.ends_with("/libnevermore.so"), "LD_PRELOAD={preload}");
    assert!(Path::new(&preload).is_absolute() && Path::new(&preload).is_file(), "{preload}");
}

#[test]
fn existing_ld_preload_comes_after_the_library() {
    let o = output(nevermore(&["run", "--", "sh", "-c", "printf %s \"$LD_PRELOAD\""]).env("LD_PRELOAD", "libother.so"));
    common::assert_ok(&o);
    let preload = common::stdout(&o);
    let (first, rest) = preload.split_once(':').expect("two entries");
    assert!(first.ends_with("/libnevermore.so"), "LD_PRELOAD={preload}");
    assert_eq!(rest, "libother.so");
}

#[test]
fn options_reach_the_child() {
    assert_eq!(child_options(&[], None), "");
    assert_eq!(child_options(&["--stats"], None), "stats=1");
    assert_eq!(child_options(&["--option", "mode=detect", "-o", "verbose=0"], None), "mode=detect:verbose=0");
    // --report FILE receives the symbolized reports; the library writes to a private file.
    assert_eq!(child_options(&["--report", "rep.txt"], None), "");
    assert_eq!(child_options(&["--stats", "--option", "exitcode=9"], None), "stats=1:exitcode=9");
    assert_eq!(child_options(&["--mode", "detect", "--json"], None), "mode=detect:report_format=json");
    assert_eq!(child_options(&["-o", "report_path=/tmp/x.txt"], None), "report_path=/tmp/x.txt");
    assert_eq!(child_options(&["--stats", "--stats-interval", "60"], None), "stats=1:stats_interval=60");
}

/// `--stats-interval` takes whole seconds from 1 to a day, as the library's option does (0,
/// which means never there, is simply leaving the flag out).
#[test]
fn stats_interval_out_of_range_is_refused_before_the_program_runs() {
    for bad in ["0", "86401", "1.5", "x"] {
        let o = output(&mut nevermore(&["run", "--stats-interval", bad, "--", "true"]));
        assert_eq!(o.status.code(), Some(2), "--stats-interval {bad}: {}", common::stderr(&o));
        assert!(common::stderr(&o).contains("--stats-interval"), "{}", common::stderr(&o));
    }
}

#[test]
fn existing_options_are_kept_first() {
    assert_eq!(child_options(&[], Some("mode=prevent")), "mode=prevent");
    assert_eq!(child_options(&["--stats"], Some("mode=prevent")), "mode=prevent:stats=1");
}

/// The library rejects an option it does not know with one clear line and exit status 1.
#[test]
fn unknown_library_option_is_one_clear_error() {
    let o = output(&mut nevermore(&["run", "--option", "colour=blue", "--", "true"]));
    assert_eq!(o.status.code(), Some(1), "{:?}", o.status);
    let err = common::stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("unknown option 'colour'") && err.contains("known: mode"), "{err}");
}

#[test]
fn malformed_option_is_rejected() {
    for bad in ["novalue", "=v", "k=a:b"] {
        let o = output(&mut nevermore(&["run", "--option", bad, "--", "true"]));
        assert_eq!(o.status.code(), Some(2), "{bad}: {:?}", o.status);
    }
}

#[test]
fn missing_program_exits_127() {
    let o = output(&mut nevermore(&["run", "--", "nevermore-no-such-program-xyz"]));
    assert_eq!(o.status.code(), Some(127));
    let err = common::stderr(&o);
    assert!(err.contains("nevermore-no-such-program-xyz") && err.contains("not found"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// A directory of `PATH` that the user may not search is skipped, as a shell skips it: the
/// program is found further on, and a missing one is "not found" (127), not "cannot run"
/// (126, what `execvp` answers after an EACCES on the way).
#[test]
fn unsearchable_path_directories_are_skipped() {
    let root = common::is_root();
    let locked = common::scratch("cli-locked-path").join("locked");
    std::fs::create_dir_all(&locked).unwrap();
    // Root may search any directory: the command then runs as `nobody`, for whom a
    // root-owned directory of mode 0700 is closed; other users are shut out by mode 0.
    let mode = if root { 0o700 } else { 0 };
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    let path = format!("{}:/usr/bin:/bin", locked.display());
    let run = |prog: &str| {
        let mut cmd = if root { common::as_nobody(&common::nevermore_bin()) } else { nevermore(&[]) };
        cmd.args(["run", "--", prog]).env_remove("NEVERMORE_OPTIONS").env_remove("LD_PRELOAD").env("PATH", &path);
        output(&mut cmd)
    };
    let o = run("true");
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let o = run("nevermore-no-such-program-xyz");
    assert_eq!(o.status.code(), Some(127), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("command not found"), "{}", common::stderr(&o));
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
}

#[test]
fn non_executable_program_exits_126() {
    let dir = common::scratch("cli-not-executable");
    let file = dir.join("script.sh");
    std::fs::write(&file, "#!/bin/sh\nexit 0\n").unwrap();
    let o = output(&mut nevermore(&["run", "--", file.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(126), "{}", common::stderr(&o));
}

#[test]
fn program_arguments_are_passed_verbatim() {
    let o = output(&mut nevermore(&["run", "--", "sh", "-c", "printf '%s|' \"$@\"", "sh", "--stats", "-o", "a b"]));
    common::assert_ok(&o);
    assert_eq!(common::stdout(&o), "--stats|-o|a b|");
}

#[test]
fn lib_prints_the_embedded_library() {
    let cache = common::scratch("cli-lib-cache");
    let o = output(nevermore(&["lib"]).env("XDG_CACHE_HOME", &cache));
    common::assert_ok(&o);
    let out = common::stdout(&o);
    let path = Path::new(out.trim_end());
    assert!(path.starts_with(cache.join("nevermore")), "{}", path.display());
    assert_eq!(std::fs::read(path).unwrap(), std::fs::read(common::lib_path()).unwrap());

    // A second call reuses the same file.
    let again = output(nevermore(&["lib"]).env("XDG_CACHE_HOME", &cache));
    assert_eq!(common::stdout(&again), out);
}

#[test]
fn lib_falls_back_to_home_cache() {
    let home = common::scratch("cli-home");
    let o = output(nevermore(&["lib"]).env_remove("XDG_CACHE_HOME").env("HOME", &home));
    common::assert_ok(&o);
    let path = common::stdout(&o);
    assert!(Path::new(path.trim_end()).starts_with(home.join(".cache/nevermore")), "{path}");
}

/// A cache directory that cannot be made (here under a file; in practice another user's
/// `HOME`, kept by `su` or `setpriv`) passes the turn to the next, last `/tmp/nevermore-<uid>`.
#[test]
fn lib_falls_back_to_a_private_tmp_directory() {
    let o = output(nevermore(&["lib"]).env("XDG_CACHE_HOME", "/dev/null/cache").env("HOME", "/dev/null"));
    common::assert_ok(&o);
    let out = common::stdout(&o);
    let path = Path::new(out.trim_end());
    let uid = common::stdout(&output(common::program(Path::new("id")).arg("-u")));
    assert!(path.starts_with(format!("/tmp/nevermore-{}", uid.trim())), "{}", path.display());
    assert_eq!(std::fs::read(path).unwrap(), std::fs::read(common::lib_path()).unwrap());
}

#[test]
fn concurrent_extraction_is_safe() {
    let cache = common::scratch("cli-race-cache");
    let children: Vec<_> = (0..8)
        .map(|_| nevermore(&["lib"]).env("XDG_CACHE_HOME", &cache).stdout(Stdio::piped()).spawn().unwrap())
        .collect();
    let lib = std::fs::read(common::lib_path()).unwrap();
    for child in children {
        let o = child.wait_with_output().unwrap();
        common::assert_ok(&o);
        assert_eq!(std::fs::read(common::stdout(&o).trim_end()).unwrap(), lib);
    }
}

/// `nevermore run` of a set-user-ID program of another user: the loader preloads no library
/// given by its path into it (and removes `LD_PRELOAD` for the programs it starts), so it ran
/// without nevermore and nothing said so; the command now says it. Run by its owner, the
/// program gets the library, and nothing is said. (Making a set-user-ID program needs root.)
#[test]
fn a_set_user_id_program_is_said_to_run_without_the_library() {
    use std::os::unix::fs::PermissionsExt;
    assert!(common::is_root(), "this test makes a set-user-ID program, which needs root");
    let dir = common::scratch("cli-setuid");
    let prog = dir.join("hostile");
    std::fs::copy(common::compile("hostile.c", &[]), &prog).unwrap();
    std::os::unix::fs::chown(&prog, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let run = |mut cmd: Command| {
        cmd.args(["run", "--stats", "--"]).arg(&prog).arg("ids");
        cmd.env_remove("NEVERMORE_OPTIONS").env_remove("LD_PRELOAD");
        cmd.env("XDG_CACHE_HOME", common::writable_dir("cli-cache"));
        output(&mut cmd)
    };
    let o = run(common::as_nobody(&common::nevermore_bin()));
    let err = common::stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(common::stdout(&o).contains("EUID 0"), "{}", common::stdout(&o));
    assert!(err.contains("is set-user-ID: the loader preloads no library"), "{err}");
    assert!(!err.contains("nevermore stats"), "the library was loaded after all: {err}");
    let o = run(Command::new(common::nevermore_bin()));
    let err = common::stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("is set-user-ID"), "{err}");
    assert!(err.contains("nevermore stats"), "{err}");
    // A program given file capabilities, the same for an ordinary user.
    let capable = dir.join("capable");
    std::fs::copy(common::compile("hostile.c", &[]), &capable).unwrap();
    let set = Command::new("setcap").arg("cap_net_raw+ep").arg(&capable).status().expect("setcap (libcap2-bin)");
    assert!(set.success());
    let mut cmd = common::as_nobody(&common::nevermore_bin());
    cmd.args(["run", "--stats", "--"]).arg(&capable).arg("ids");
    cmd.env_remove("NEVERMORE_OPTIONS").env_remove("LD_PRELOAD");
    cmd.env("XDG_CACHE_HOME", common::writable_dir("cli-cache"));
    let o = output(&mut cmd);
    let err = common::stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("is given file capabilities: the loader preloads no library"), "{err}");
    assert!(!err.contains("nevermore stats"), "the library was loaded after all: {err}");
}
