//! `nevermore`: run unmodified programs under the nevermore allocator (`libnevermore.so`,
//! embedded in this binary and extracted to a cache directory on first use).

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

mod audit;

/// The allocator library, built by `build.rs`.
static LIB: &[u8] = include_bytes!(env!("NEVERMORE_LIB_PATH"));
/// Hex hash of `LIB`, computed by `build.rs`.
const LIB_HASH: &str = env!("NEVERMORE_LIB_HASH");
const LIB_NAME: &str = "libnevermore.so";

/// Signals passed on to the child while `run` waits for it.
const FORWARDED: [libc::c_int; 6] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2];

#[derive(Parser)]
#[command(name = "nevermore", version, about = "Run programs under the nevermore hardened allocator")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run PROGRAM with libnevermore.so preloaded; exits as PROGRAM does
    #[command(after_help = "\
Examples:
  nevermore run -- ./server --port 8080
  nevermore run --stats --report nm-report.txt -- make -j8
  NEVERMORE_OPTIONS=mode=detect nevermore run --option stats=1 -- python3 script.py

Options reach the allocator as the colon-separated list NEVERMORE_OPTIONS; those already in
the environment are kept, the ones given here come after them.")]
    Run(RunArgs),
    /// Extract libnevermore.so and print its absolute path
    #[command(after_help = "\
Examples:
  LD_PRELOAD=$(nevermore lib) ./myprog
  cp \"$(nevermore lib)\" /opt/lib/")]
    Lib,
    /// Run the exploit corpus under glibc, its debug mode, peer allocators and nevermore; print the table
    Audit(audit::AuditArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// Print allocator statistics when the program exits (adds stats=1)
    #[arg(long)]
    stats: bool,
    /// Write error reports and statistics to FILE (adds report_path=<absolute FILE>)
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Pass an allocator option (repeatable)
    #[arg(long = "option", short = 'o', value_name = "KEY=VALUE", value_parser = parse_option)]
    options: Vec<String>,
    /// The program to run and its arguments
    #[arg(value_name = "PROGRAM", required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    program: Vec<OsString>,
}

fn parse_option(s: &str) -> Result<String, String> {
    match s.split_once('=') {
        Some((key, value)) if !key.is_empty() && !key.contains(':') && !value.contains(':') => Ok(s.to_string()),
        _ => Err("expected KEY=VALUE with a non-empty KEY and no ':'".into()),
    }
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Lib => extract().and_then(|p| {
            let mut out = io::stdout().lock();
            out.write_all(p.as_os_str().as_bytes())?;
            out.write_all(b"\n")?;
            Ok(())
        }),
        Cmd::Run(args) => run(args),
        Cmd::Audit(args) => extract().and_then(|lib| audit::run(args, &lib)),
    };
    if let Err(e) = result {
        eprintln!("nevermore: {e:#}");
        std::process::exit(1);
    }
}

/// The directory that holds extracted libraries: `$XDG_CACHE_HOME/nevermore`, else
/// `$HOME/.cache/nevermore`, else `/tmp/nevermore-<uid>`. A path with ':' or ' ' is skipped,
/// since `LD_PRELOAD` splits on both.
fn cache_root() -> Result<PathBuf> {
    let usable = |p: &Path| p.is_absolute() && !p.as_os_str().as_bytes().iter().any(|b| *b == b':' || *b == b' ');
    let candidates = [
        std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("nevermore")),
        std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/nevermore")),
    ];
    if let Some(dir) = candidates.into_iter().flatten().find(|p| usable(p)) {
        return Ok(dir);
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let dir = PathBuf::from(format!("/tmp/nevermore-{uid}"));
    match fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("create {}", dir.display())),
    }
    // /tmp is shared: only trust a directory that is ours and writable by us alone.
    let meta = fs::symlink_metadata(&dir).with_context(|| format!("stat {}", dir.display()))?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        bail!("{} is not a private directory of this user", dir.display());
    }
    Ok(dir)
}

/// Writes the embedded library to the cache (once) and returns its absolute path.
fn extract() -> Result<PathBuf> {
    let dir = cache_root()?.join(LIB_HASH);
    let path = dir.join(LIB_NAME);
    if fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() == LIB.len() as u64) {
        return Ok(path);
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(&dir)
        .with_context(|| format!("create {}", dir.display()))?;
    // Several processes may extract at once: each writes its own temporary file, and the
    // rename makes one complete copy appear atomically.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".{LIB_NAME}.{}.{nanos}.tmp", std::process::id()));
    let write = || -> io::Result<()> {
        let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(0o755).open(&tmp)?;
        f.write_all(LIB)?;
        f.set_permissions(fs::Permissions::from_mode(0o755))?;
        f.sync_all()?;
        fs::rename(&tmp, &path)
    };
    if let Err(e) = write() {
        let _ = fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("extract the library to {}", path.display()));
    }
    Ok(path)
}

/// The non-empty ones of `first` and `rest`, joined by ':'.
fn colon_list(first: Option<OsString>, rest: &[OsString]) -> OsString {
    let mut out = first.unwrap_or_default();
    for item in rest.iter().filter(|i| !i.is_empty()) {
        if !out.is_empty() {
            out.push(":");
        }
        out.push(item);
    }
    out
}

fn run(args: RunArgs) -> Result<()> {
    let lib = extract()?;

    let mut options: Vec<OsString> = Vec::new();
    if args.stats {
        options.push("stats=1".into());
    }
    if let Some(file) = &args.report {
        let abs = std::path::absolute(file).with_context(|| format!("resolve {}", file.display()))?;
        if abs.as_os_str().as_bytes().contains(&b':') {
            bail!("report path {} contains ':', which NEVERMORE_OPTIONS cannot carry", abs.display());
        }
        let mut opt = OsString::from("report_path=");
        opt.push(abs);
        options.push(opt);
    }
    options.extend(args.options.iter().map(OsString::from));

    let (program, program_args) = args.program.split_first().expect("clap requires PROGRAM");
    let mut cmd = Command::new(program);
    cmd.args(program_args);
    // The library goes first, so it wins over any other preloaded allocator.
    let existing_preload: Vec<OsString> = std::env::var_os("LD_PRELOAD").into_iter().collect();
    cmd.env("LD_PRELOAD", colon_list(Some(lib.into_os_string()), &existing_preload));
    if !options.is_empty() {
        cmd.env("NEVERMORE_OPTIONS", colon_list(std::env::var_os("NEVERMORE_OPTIONS"), &options));
    }

    let status = spawn_and_wait(&mut cmd, program)?;
    if let Some(code) = status.code() {
        std::process::exit(code);
    }
    let sig = status.signal().expect("a child that did not exit was killed by a signal");
    die_by_signal(sig)
}

/// Spawns `cmd` and waits for it, forwarding `FORWARDED` signals to it. Exits 127/126 like a
/// shell when the program cannot be found or run.
fn spawn_and_wait(cmd: &mut Command, program: &OsStr) -> Result<ExitStatus> {
    // The forwarded signals and SIGCHLD are blocked and taken synchronously with sigwaitinfo:
    // no handlers, and no window in which a signal could arrive before the child's pid is known.
    // SAFETY: sigemptyset/sigaddset only write into the local set.
    let waited = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in FORWARDED.into_iter().chain([libc::SIGCHLD]) {
            libc::sigaddset(&mut set, sig);
        }
        set
    };
    // SAFETY: an all-zero sigset_t is valid storage, filled in by pthread_sigmask below.
    let mut old_mask: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sets are valid; this process has a single thread at this point. SIGCHLD's
    // action is reset to the default so that an inherited SIG_IGN cannot auto-reap the child.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        libc::pthread_sigmask(libc::SIG_BLOCK, &waited, &mut old_mask);
    }
    // SAFETY: the closure runs in the forked child before exec and only calls pthread_sigmask,
    // which is async-signal-safe; it gives the program the signal mask we were started with.
    unsafe {
        cmd.pre_exec(move || {
            libc::pthread_sigmask(libc::SIG_SETMASK, &old_mask, std::ptr::null_mut());
            Ok(())
        });
    }

    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            let name = Path::new(program).display();
            let code = if e.kind() == io::ErrorKind::NotFound {
                eprintln!("nevermore: {name}: command not found");
                127
            } else {
                eprintln!("nevermore: {name}: cannot run: {e}");
                126
            };
            std::process::exit(code);
        }
    };
    let pid = child.id() as libc::pid_t;

    loop {
        if let Some(status) = child.try_wait().context("wait for the program")? {
            return Ok(status);
        }
        // SAFETY: an all-zero siginfo_t is valid storage, filled in by sigwaitinfo.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `waited` is a valid set and `info` valid storage; the signals are blocked.
        let sig = unsafe { libc::sigwaitinfo(&waited, &mut info) };
        // SI_KERNEL marks a signal from the terminal (Ctrl-C, Ctrl-\), which the kernel sends
        // to the whole foreground process group, child included: forwarding it would double it.
        if sig > 0 && sig != libc::SIGCHLD && info.si_code != libc::SI_KERNEL {
            // SAFETY: `pid` is our child, not yet reaped (try_wait saw it running), so the pid
            // cannot have been reused.
            unsafe { libc::kill(pid, sig) };
        }
    }
}

/// Dies of `sig` as the child did, so the parent shell sees the same signal death.
fn die_by_signal(sig: libc::c_int) -> ! {
    let _ = io::stdout().flush();
    // SAFETY: plain libc calls on local, valid arguments. The core limit is set to 0 first:
    // the child's crash must not leave a core file of this command behind.
    unsafe {
        let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    // A signal whose default action is not to terminate (e.g. SIGCHLD, SIGCONT) lands here.
    std::process::exit(128 + sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colon_lists() {
        let v = |s: &str| OsString::from(s);
        assert_eq!(colon_list(None, &[v("a=1"), v("b=2")]), v("a=1:b=2"));
        assert_eq!(colon_list(Some(v("x=0")), &[v("a=1")]), v("x=0:a=1"));
        assert_eq!(colon_list(Some(v("")), &[v("a=1")]), v("a=1"));
        assert_eq!(colon_list(Some(v("/l.so")), &[v("")]), v("/l.so"));
    }

    #[test]
    fn option_syntax() {
        assert!(parse_option("mode=detect").is_ok());
        assert!(parse_option("k=").is_ok());
        for bad in ["novalue", "=v", "a:b=c", "k=a:b"] {
            assert!(parse_option(bad).is_err(), "{bad}");
        }
    }
}
