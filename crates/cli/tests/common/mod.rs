//! Shared helpers of the integration tests: compile small C/C++ programs at test time with the
//! system compiler and run them under `libnevermore.so`.
#![allow(dead_code)]

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The allocator library built by the command's build script (the very file it embeds).
pub fn lib_path() -> PathBuf {
    PathBuf::from(env!("NEVERMORE_LIB_PATH"))
}

/// The `nevermore` command under test.
pub fn nevermore_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nevermore"))
}

/// The JSON reports among the lines of `text` (standard error under `report_format=json`).
pub fn json_reports(text: &str) -> Vec<serde_json::Value> {
    text.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// `nevermore ARGS`, with the environment of the tests' own cleared of the library's
/// variables and a cache directory of the tests' (`cache` under the target's temporary
/// directory).
pub fn nevermore_cmd(args: &[&str], cache: &str) -> Command {
    let mut cmd = program(&nevermore_bin());
    cmd.args(args).env_remove("NEVERMORE_OPTIONS").env_remove("LD_PRELOAD").env("XDG_CACHE_HOME", writable_dir(cache));
    cmd
}

/// Repository root (C sources live in `tests/c`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// A scratch directory for one test, emptied first; the programs under test may write in it
/// (also as `nobody`, see `program`).
pub fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    writable_dir(name)
}

/// The directory `name` under the tests' temporary directory, made if missing (not emptied:
/// tests running side by side may share it), writable by the programs under test.
pub fn writable_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&d).unwrap();
    if unprivileged_run() {
        std::os::unix::fs::chown(&d, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    d
}

/// uid and gid of `nobody`.
pub const NOBODY: u32 = 65534;

/// Compiles `tests/c/<file>` (C, or C++ when it ends in `.cc`) with `-O1 -g -pthread` plus
/// `extra`, and returns the executable's path. Each program is compiled once per test binary
/// (the first test to ask compiles it, tests asking meanwhile wait): most tests run their
/// program many times, and compiling `uaf.c` takes longer than most of its runs.
pub fn compile(file: &str, extra: &[&str]) -> PathBuf {
    type Built = std::sync::Arc<std::sync::OnceLock<PathBuf>>;
    type Key = (String, Vec<String>);
    static BUILT: std::sync::Mutex<Vec<(Key, Built)>> = std::sync::Mutex::new(Vec::new());
    let key = (file.to_string(), extra.iter().map(|e| e.to_string()).collect::<Vec<_>>());
    let once = {
        let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
        match built.iter().find(|(k, _)| *k == key) {
            Some((_, b)) => b.clone(),
            None => {
                let b = Built::default();
                built.push((key, b.clone()));
                b
            }
        }
    };
    once.get_or_init(|| compile_now(file, extra)).clone()
}

/// `compile`'s work: the compiler run.
fn compile_now(file: &str, extra: &[&str]) -> PathBuf {
    let src = repo_root().join("tests/c").join(file);
    let stem = Path::new(file).file_stem().unwrap().to_str().unwrap().to_string();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bin").join(format!(
        "{}{}",
        stem,
        if extra.is_empty() { String::new() } else { format!("-{:x}", hash(extra)) }
    ));
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let cxx = file.ends_with(".cc");
    let compiler = if cxx { "c++" } else { "cc" };
    // Compile to a private name, then rename: tests running in parallel may compile the same
    // program, and writing over an executable another test is running fails (ETXTBSY).
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let tmp = out.with_extension(format!(
        "tmp{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let mut cmd = Command::new(compiler);
    cmd.args(["-O1", "-g", "-pthread", "-fno-builtin", "-Wno-free-nonheap-object", "-Wno-use-after-free"])
        .arg("-o")
        .arg(&tmp)
        .arg(&src)
        .args(extra);
    let o = cmd.output().expect("run the C compiler");
    assert!(o.status.success(), "compiling {file} failed:\n{}", String::from_utf8_lossy(&o.stderr));
    std::fs::rename(&tmp, &out).unwrap();
    out
}

fn hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for p in parts {
        for b in p.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100000001b3);
        }
    }
    h
}

/// A command for `prog`, to be run under the allocator. With `NEVERMORE_TEST_USER=nobody`
/// in the tests' environment (and the tests running as root), it runs as `nobody`
/// (`as_nobody`): the CI runs the whole suite a second time that way, since the library must
/// work for ordinary users (userfaultfd in `UFFD_USER_MODE_ONLY`, `/proc/self/mem` for
/// sweeps, no file it may not write). Every program a test runs, under the library or as its
/// baseline, is started through this function.
pub fn program(prog: &Path) -> Command {
    if unprivileged_run() {
        as_nobody(prog)
    } else {
        Command::new(prog)
    }
}

/// A command running `prog` as the unprivileged user `nobody` (uid and gid 65534, no
/// supplementary groups) through `setpriv`; the caller must be root.
pub fn as_nobody(prog: &Path) -> Command {
    let p = nobody_prefix();
    let mut c = Command::new(&p[0]);
    c.args(&p[1..]).arg(prog);
    c
}

/// The command line before a program's path that runs it as `nobody`.
fn nobody_prefix() -> Vec<String> {
    vec![
        "setpriv".into(),
        format!("--reuid={NOBODY}"),
        format!("--regid={NOBODY}"),
        "--clear-groups".into(),
        "--".into(),
    ]
}

/// The command line before a program's path that runs it as the tests' user (see `program`):
/// empty unless that is `nobody`.
pub fn user_prefix() -> Vec<String> {
    if unprivileged_run() {
        nobody_prefix()
    } else {
        Vec::new()
    }
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Whether `program` runs programs as `nobody` (see there).
pub fn unprivileged_run() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        let asked = std::env::var("NEVERMORE_TEST_USER").is_ok_and(|u| u == "nobody");
        assert!(!asked || is_root(), "NEVERMORE_TEST_USER=nobody needs the tests to run as root");
        asked
    })
}

/// Runs `prog args` with `LD_PRELOAD=libnevermore.so` and the given extra environment.
pub fn run_preloaded(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = program(prog);
    cmd.args(args).env("LD_PRELOAD", lib_path()).env_remove("NEVERMORE_OPTIONS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("spawn program")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts the program exited normally with status 0.
pub fn assert_ok(o: &Output) {
    assert!(o.status.success(), "expected exit 0, got {:?}\nstdout:\n{}\nstderr:\n{}", o.status, stdout(o), stderr(o));
}

/// Asserts a detection: one `nevermore: ERROR: <kind>` report on stderr and death by SIGABRT.
pub fn assert_report(o: &Output, kind: &str) {
    let err = stderr(o);
    assert_eq!(
        o.status.signal(),
        Some(libc_sigabrt()),
        "expected SIGABRT, got {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        stdout(o),
        err
    );
    let needle = format!("nevermore: ERROR: {kind} ");
    assert!(err.contains(&needle), "expected a `{kind}` report, stderr:\n{err}");
    assert_eq!(err.matches("nevermore: ERROR:").count(), 1, "expected exactly one report:\n{err}");
}

fn libc_sigabrt() -> i32 {
    6
}

/// `run_preloaded` with a deadline: a program still running after `secs` seconds is killed and
/// the test fails (a hang must fail the test, not stall the suite).
pub fn run_preloaded_timeout(prog: &Path, args: &[&str], env: &[(&str, &str)], secs: u64) -> Output {
    let mut cmd = program(prog);
    cmd.args(args).env("LD_PRELOAD", lib_path()).env_remove("NEVERMORE_OPTIONS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    wait_with_deadline(cmd, secs, &format!("{} {}", prog.display(), args.join(" ")))
}

/// Runs `cmd` with piped output, killing it (and failing the test) after `secs` seconds. The
/// program runs in a process group of its own, killed whole at the deadline: a hung child it
/// forked would otherwise keep the pipes open, and the test would wait for ever.
pub fn wait_with_deadline(mut cmd: Command, secs: u64, what: &str) -> Output {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let mut child =
        cmd.process_group(0).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    // Drain the pipes on threads so that a chatty program cannot block on a full pipe.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut v).ok();
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut v).ok();
        v
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            // SAFETY: kill(2) of the child's process group, which it leads (`process_group(0)`).
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.kill();
            let _ = child.wait();
            let err = t_err.join().unwrap();
            panic!("`{what}` did not finish within {secs} s (hung?)\nstderr:\n{}", String::from_utf8_lossy(&err));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Output { status, stdout: t_out.join().unwrap(), stderr: t_err.join().unwrap() }
}

/// The numbers (a trailing comma or parenthesis allowed) on the `stats=1` line labelled `what`
/// (the label follows the `==pid==` prefix), else on the first line of `text` that contains
/// `what`. Panics when there is no such line.
pub fn counters(text: &str, what: &str) -> Vec<u64> {
    fn label(l: &str) -> Option<&str> {
        l.strip_prefix("==").and_then(|r| r.split_once("==")).map(|(_, rest)| rest.trim_start())
    }
    let line = text
        .lines()
        .find(|l| label(l).is_some_and(|r| r.starts_with(what)))
        .or_else(|| text.lines().find(|l| l.contains(what)))
        .unwrap_or_else(|| panic!("no `{what}` line in:\n{text}"));
    line.split_whitespace().filter_map(|w| w.trim_end_matches([',', ')']).parse().ok()).collect()
}

/// The first number on the stats line that contains `what`.
pub fn counter(text: &str, what: &str) -> u64 {
    *counters(text, what).first().unwrap_or_else(|| panic!("no number on the `{what}` line in:\n{text}"))
}

/// Checks the output of `tests/c/large_churn.c reuse ...` run with `space_mib` of address space
/// for large objects: the objects that lived throughout kept their contents, no object was
/// overwritten, addresses were handed out again, but none before that space less four blocks
/// of 4 MiB was used (objects of 256 KiB take 264 KiB with their canary and guard page), and
/// the library said so once.
pub fn assert_large_reuse(o: &Output, what: &str, space_mib: i64) {
    let (out, err) = (stdout(o), stderr(o));
    assert!(out.contains("PINNED OK") && out.contains("\nOK"), "{what}:\n{out}\n{err}");
    assert!(!out.contains("CORRUPT"), "{what}:\n{out}");
    let first: i64 = out
        .lines()
        .find_map(|l| l.strip_prefix("FIRST_REUSE "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{what}: no FIRST_REUSE line:\n{out}"));
    assert!(first >= 0, "{what}: no address was handed out again; stderr:\n{err}");
    let before = (space_mib - 16) * 1024 / 264;
    assert!(first >= before, "{what}: an address came back at allocation {first}, before {before}:\n{out}");
    let said = format!("the address space for large objects ({space_mib} MiB) is used up");
    assert_eq!(err.matches(&said).count(), 1, "{what}:\n{err}");
}

/// `bin ARGS` under the library with `options`, run by `prlimit LIMIT` without the library: a
/// limit the library finds at start-up and lives within (as one set by systemd's `LimitAS=`).
pub fn limited(limit: &str, bin: &Path, args: &[&str], options: &str) -> Command {
    let mut cmd = program(Path::new("prlimit"));
    cmd.arg(limit)
        .arg("env")
        .arg(format!("LD_PRELOAD={}", lib_path().display()))
        .arg(format!("NEVERMORE_OPTIONS={options}"))
        .arg(bin)
        .args(args)
        .env_remove("LD_PRELOAD")
        .env_remove("NEVERMORE_OPTIONS");
    cmd
}
