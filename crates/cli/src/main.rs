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
mod demo;
mod symbolize;

/// Exit status of `nevermore run` (and `demo`) when the allocator detected an error: the
/// library's `exitcode=23`, added unless the user chose an `exitcode` of their own.
pub const DETECTED_STATUS: u8 = 23;

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
  nevermore run --mode detect -- ./test-suite            # every use-after-free traps at once
  nevermore run --mode detect -o guard_all=1 -- ./tests  # overflows trap at the access too
  nevermore run --leaks -- ./tests                       # detect mode, and leaks at exit
  nevermore run --mode detect --json --report r.json -- ./prog
  nevermore run --stats --report nm-report.txt -- make -j8
  nevermore run --stats-interval 60 -- redis-server         # the counters every minute too
  NEVERMORE_OPTIONS=mode=detect nevermore run --option stats=1 -- python3 script.py

Exit status: PROGRAM's own (a death by signal is passed on as the same signal); 23 when
nevermore detected an error (it adds exitcode=23 unless an exitcode option is given; under plain
LD_PRELOAD a detection ends the program with SIGABRT instead); 127/126 when PROGRAM cannot be
found/run; 1 for an error of nevermore itself.

Reports (also those of forked and exec'd children, which inherit LD_PRELOAD and
NEVERMORE_OPTIONS) are written by the library as raw frames (module+offset) to a private file,
and printed here symbolized (function file:line) on stderr, or to --report FILE.

Options reach the allocator as the colon-separated list NEVERMORE_OPTIONS; those already in
the environment are kept, the ones given here come after them.")]
    Run(RunArgs),
    /// Extract libnevermore.so and print its absolute path
    #[command(after_help = "\
Examples:
  LD_PRELOAD=$(nevermore lib) ./myprog
  cp \"$(nevermore lib)\" /opt/lib/")]
    Lib,
    /// Print reports written without `nevermore run` (LD_PRELOAD, report_path, syslog) symbolized
    #[command(after_help = "\
Examples:
  nevermore symbolize /var/log/nginx-nevermore.txt
  journalctl -t nevermore | nevermore symbolize
  LD_PRELOAD=$(nevermore lib) ./prog 2>&1 | nevermore symbolize

Frames name modules by the paths the program saw and by their build ids: symbolize on the
machine that ran it (a program run under another root directory: give --root). A module
replaced since the report is another build: its frames are read from a debug file of the
reported build when one is installed, and are left raw otherwise. A stripped module's debug
file is found by its build id, or by the name in its .gnu_debuglink section.")]
    Symbolize(SymbolizeArgs),
    /// Run the exploit corpus under glibc, its debug mode, peer allocators and nevermore; print the table
    Audit(audit::AuditArgs),
    /// Compile and run a use-after-free exploit under glibc and under nevermore; show the reports
    #[command(after_help = "\
Needs a C compiler (cc, or $CC). Example:
  nevermore demo")]
    Demo,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ModeArg {
    Detect,
    Prevent,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Allocator mode: detect (every use-after-free traps at once; records allocation and free
    /// stacks) or prevent (the default: dangling pointers never reach newer objects)
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// Print allocator statistics when the program exits (adds stats=1)
    #[arg(long)]
    stats: bool,
    /// Also print allocator statistics every SECS seconds while the program runs (adds
    /// stats_interval=SECS)
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u32).range(1..=86_400))]
    stats_interval: Option<u32>,
    /// At exit, report the live objects no pointer leads to (adds detect_leaks=1; implies
    /// --mode detect)
    #[arg(long)]
    leaks: bool,
    /// Write the (symbolized) reports and statistics to FILE instead of stderr
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Reports as JSON, one object per line (adds report_format=json; schema in docs/report-schema.json)
    #[arg(long)]
    json: bool,
    /// Pass an allocator option (repeatable)
    #[arg(long = "option", short = 'o', value_name = "KEY=VALUE", value_parser = parse_option)]
    options: Vec<String>,
    /// The program to run and its arguments
    #[arg(value_name = "PROGRAM", required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    program: Vec<OsString>,
}

#[derive(clap::Args)]
struct SymbolizeArgs {
    /// The root directory the program ran under (a container's, a chroot): module paths are
    /// taken below it
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Where debug files are looked for by build id (DIR/.build-id/ab/cdef....debug, as
    /// distributions' debug symbol packages install them); repeatable [default: /usr/lib/debug,
    /// below --root when given]
    #[arg(long = "debug-dir", value_name = "DIR")]
    debug_dirs: Vec<PathBuf>,
    /// Report files (text or JSON lines, as written by the library); standard input if none
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Copies report lines from `args.files` (or standard input) to standard output, symbolized.
fn symbolize_reports(args: SymbolizeArgs) -> Result<()> {
    let mut sym = symbolize::Symbolizer::with_dirs(args.root, args.debug_dirs);
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut copy = |input: &mut dyn io::BufRead| -> Result<()> {
        let mut buf = Vec::new();
        while input.read_until(b'\n', &mut buf)? > 0 {
            let line = String::from_utf8_lossy(&buf);
            let text = line.strip_suffix('\n').unwrap_or(&line);
            writeln!(out, "{}", sym.line(text))?;
            buf.clear();
        }
        Ok(())
    };
    if args.files.is_empty() {
        copy(&mut io::stdin().lock())?;
    }
    for f in &args.files {
        let file = fs::File::open(f).with_context(|| format!("cannot open {}", f.display()))?;
        copy(&mut io::BufReader::new(file))?;
    }
    out.flush()?;
    Ok(())
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
        Cmd::Symbolize(args) => symbolize_reports(args),
        Cmd::Audit(args) => extract().and_then(|lib| audit::run(args, &lib)),
        Cmd::Demo => extract().and_then(|lib| demo::run(&lib)),
    };
    if let Err(e) = result {
        eprintln!("nevermore: {e:#}");
        std::process::exit(1);
    }
}

/// The directories that may hold extracted libraries, in order: `$XDG_CACHE_HOME/nevermore`,
/// `$HOME/.cache/nevermore`, then `/tmp/nevermore-<uid>` (made private on first use). A
/// path with ':' or ' ' is skipped, since `LD_PRELOAD` splits on both.
fn cache_roots() -> Vec<PathBuf> {
    let usable = |p: &Path| p.is_absolute() && !p.as_os_str().as_bytes().iter().any(|b| *b == b':' || *b == b' ');
    let candidates = [
        std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("nevermore")),
        std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/nevermore")),
    ];
    candidates.into_iter().flatten().filter(|p| usable(p)).collect()
}

/// `/tmp/nevermore-<uid>`, made if missing, and only if it is this user's alone.
fn private_tmp_root() -> Result<PathBuf> {
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

/// Writes the embedded library to the first cache directory that takes it (once) and returns
/// its absolute path. A directory that cannot be written (a `HOME` of another user, kept by
/// `su` or `setpriv`; a read-only home) passes the turn to the next one.
fn extract() -> Result<PathBuf> {
    let mut first_error = None;
    for root in cache_roots() {
        match extract_into(&root.join(LIB_HASH)) {
            Ok(path) => return Ok(path),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match private_tmp_root().and_then(|root| extract_into(&root.join(LIB_HASH))) {
        Ok(path) => Ok(path),
        // The first failure says most: it is where the library was expected.
        Err(e) => Err(first_error.unwrap_or(e)),
    }
}

/// Writes the embedded library into `dir` (once) and returns its path there.
fn extract_into(dir: &Path) -> Result<PathBuf> {
    let path = dir.join(LIB_NAME);
    if fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() == LIB.len() as u64) {
        return Ok(path);
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
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

/// Whether a colon-separated option list sets `key`.
fn sets(list: &OsStr, key: &str) -> bool {
    list.as_bytes().split(|&b| b == b':' || b == b',').any(|item| item.starts_with(format!("{key}=").as_bytes()))
}

/// A private directory for the raw report file of one run.
fn private_dir() -> Result<PathBuf> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut base = std::env::temp_dir();
    if base.as_os_str().as_bytes().iter().any(|&b| b == b':' || b == b',') {
        base = PathBuf::from("/tmp");
    }
    let dir = base.join(format!("nevermore-run-{}-{nanos}", std::process::id()));
    fs::DirBuilder::new().mode(0o700).create(&dir).with_context(|| format!("create {}", dir.display()))?;
    Ok(dir)
}

/// A file created on the first write (so `--report FILE` appears only when there is a report).
struct LazyFile {
    path: PathBuf,
    file: Option<fs::File>,
}

impl Write for LazyFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.file.is_none() {
            match fs::OpenOptions::new().create(true).append(true).open(&self.path) {
                Ok(f) => self.file = Some(f),
                Err(e) => {
                    eprintln!("nevermore: cannot open {}: {e}", self.path.display());
                    return Err(e);
                }
            }
        }
        self.file.as_mut().expect("opened above").write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().map_or(Ok(()), |f| f.flush())
    }
}

/// Follows the raw report file while the program runs and prints what it gets, symbolized.
struct Follower {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Follower {
    fn start(raw: PathBuf, mut out: Box<dyn Write + Send>) -> Follower {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut sym = symbolize::Symbolizer::new();
            let mut pos = 0usize;
            let mut pending = Vec::new();
            loop {
                let last = flag.load(Ordering::Acquire);
                if let Ok(bytes) = fs::read(&raw) {
                    if bytes.len() > pos {
                        pending.extend_from_slice(&bytes[pos..]);
                        pos = bytes.len();
                    }
                }
                while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=nl).collect();
                    let text = String::from_utf8_lossy(&line[..line.len() - 1]);
                    let _ = writeln!(out, "{}", sym.line(&text));
                }
                let _ = out.flush();
                if last {
                    if !pending.is_empty() {
                        let _ = out.write_all(&pending);
                        let _ = out.flush();
                    }
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        });
        Follower { stop, thread }
    }

    fn finish(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        let _ = self.thread.join();
    }
}

fn run(args: RunArgs) -> Result<()> {
    let lib = extract()?;
    let env_options = std::env::var_os("NEVERMORE_OPTIONS").unwrap_or_default();

    let mut options: Vec<OsString> = Vec::new();
    if let Some(m) = args.mode {
        options.push(match m {
            ModeArg::Detect => "mode=detect".into(),
            ModeArg::Prevent => "mode=prevent".into(),
        });
    }
    if args.stats {
        options.push("stats=1".into());
    }
    if let Some(secs) = args.stats_interval {
        options.push(format!("stats_interval={secs}").into());
    }
    if args.leaks {
        match args.mode {
            Some(ModeArg::Prevent) => bail!("--leaks needs detect mode (the leak check is a detect mode feature)"),
            Some(ModeArg::Detect) => {}
            None => options.push("mode=detect".into()),
        }
        options.push("detect_leaks=1".into());
    }
    if args.json {
        options.push("report_format=json".into());
    }
    options.extend(args.options.iter().map(OsString::from));
    let user = colon_list(Some(env_options.clone()), &options);

    // Reports go to a private raw file, followed and symbolized here, unless the user routed
    // them somewhere themselves with report_path.
    let mut follow = None;
    let mut raw_dir = None;
    if !sets(&user, "report_path") {
        let out: Box<dyn Write + Send> = match &args.report {
            Some(file) => Box::new(LazyFile { path: file.clone(), file: None }),
            None => Box::new(io::stderr()),
        };
        let dir = private_dir()?;
        let raw = dir.join("report.raw");
        fs::File::create(&raw).with_context(|| format!("create {}", raw.display()))?;
        let mut opt = OsString::from("report_path=");
        opt.push(&raw);
        options.push(opt);
        follow = Some((raw, out));
        raw_dir = Some(dir);
    } else if args.report.is_some() {
        bail!("--report cannot be combined with a report_path option");
    }
    if !sets(&user, "exitcode") {
        options.push(format!("exitcode={DETECTED_STATUS}").into());
    }

    let (program, program_args) = args.program.split_first().expect("clap requires PROGRAM");
    let Some(path) = find_program(program, std::env::var_os("PATH")) else {
        eprintln!("nevermore: {}: command not found", Path::new(program).display());
        std::process::exit(127);
    };
    if let Some(why) = not_preloaded(&path) {
        eprintln!(
            "nevermore: {} is {why}: the loader preloads no library given by its path into it and removes \
             LD_PRELOAD for the programs it starts, so they run without nevermore",
            path.display()
        );
    }
    let mut cmd = Command::new(path);
    cmd.arg0(program).args(program_args);
    // The library goes first, so it wins over any other preloaded allocator.
    let existing_preload: Vec<OsString> = std::env::var_os("LD_PRELOAD").into_iter().collect();
    cmd.env("LD_PRELOAD", colon_list(Some(lib.into_os_string()), &existing_preload));
    cmd.env("NEVERMORE_OPTIONS", colon_list(Some(env_options), &options));

    // Block the forwarded signals before any thread starts (threads inherit the mask): a
    // signal delivered to the report follower would kill this command instead of reaching
    // the program.
    let signals = block_forwarded();
    let follower = follow.map(|(raw, out)| Follower::start(raw, out));
    let status = spawn_and_wait(&mut cmd, program, signals);
    if let Some(f) = follower {
        f.finish();
    }
    if let Some(dir) = raw_dir {
        let _ = fs::remove_dir_all(dir);
    }
    let status = status?;
    if let Some(code) = status.code() {
        std::process::exit(code);
    }
    let sig = status.signal().expect("a child that did not exit was killed by a signal");
    die_by_signal(sig)
}

/// Why the dynamic loader will not preload the library into `path` for this user: a
/// set-user-ID program of another user, a set-group-ID one of a group the user is not in, or
/// one given file capabilities (secure execution), else None.
fn not_preloaded(path: &Path) -> Option<&'static str> {
    let meta = fs::metadata(path).ok()?;
    // SAFETY: getuid and getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // Root gains nothing from file capabilities.
    if let (true, Ok(c)) = (uid != 0, std::ffi::CString::new(path.as_os_str().as_bytes())) {
        // SAFETY: a size query of an extended attribute, with no buffer.
        let caps = unsafe { libc::getxattr(c.as_ptr(), c"security.capability".as_ptr(), std::ptr::null_mut(), 0) };
        if caps > 0 {
            return Some("given file capabilities");
        }
    }
    if meta.mode() & libc::S_ISUID != 0 && meta.uid() != uid {
        return Some("set-user-ID");
    }
    if meta.mode() & libc::S_ISGID != 0 && meta.gid() != gid {
        // SAFETY: a query of the number of supplementary groups, then a buffer of that size.
        let groups = unsafe {
            let n = libc::getgroups(0, std::ptr::null_mut()).max(0) as usize;
            let mut g = vec![0; n];
            let n = libc::getgroups(n as i32, g.as_mut_ptr()).max(0) as usize;
            g.truncate(n);
            g
        };
        if !groups.contains(&meta.gid()) {
            return Some("set-group-ID");
        }
    }
    None
}

/// Where a shell finds `program`: the name itself when it holds a `/`, else the first
/// executable regular file of that name in the directories of `path` (`$PATH`; unset, the
/// C library's default `/bin:/usr/bin`). A directory that cannot be searched is skipped, as
/// shells skip it: `execvp` instead fails with EACCES when no later directory has the program,
/// so a misspelt name looked like a program that may not be run (status 126) for a user whose
/// `PATH` names another user's directory (`su` keeps `PATH`). A file of that name that is
/// not executable is the answer when nothing else is found (running it fails: status 126);
/// `None`: not found (status 127).
fn find_program(program: &OsStr, path: Option<OsString>) -> Option<PathBuf> {
    if program.is_empty() {
        return None;
    }
    if program.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    let path = path.unwrap_or_else(|| OsString::from("/bin:/usr/bin"));
    let mut not_executable = None;
    for dir in std::env::split_paths(&path) {
        // An empty entry means the working directory.
        let candidate = if dir.as_os_str().is_empty() { Path::new(".").join(program) } else { dir.join(program) };
        if !fs::metadata(&candidate).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let Ok(c) = std::ffi::CString::new(candidate.as_os_str().as_bytes()) else { continue };
        // SAFETY: access(2) with a valid NUL-terminated path.
        if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 {
            return Some(candidate);
        }
        not_executable.get_or_insert(candidate);
    }
    not_executable
}

/// The forwarded signals and SIGCHLD, blocked in the calling thread (and so in every thread it
/// starts afterwards), and the mask it had before.
struct Blocked {
    waited: libc::sigset_t,
    old_mask: libc::sigset_t,
}

/// Blocks the forwarded signals and SIGCHLD; `spawn_and_wait` takes them synchronously with
/// sigwaitinfo: no handlers, and no window in which a signal could arrive before the child's
/// pid is known. Must run while this process has a single thread.
fn block_forwarded() -> Blocked {
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
    Blocked { waited, old_mask }
}

/// Spawns `cmd` and waits for it, forwarding `FORWARDED` signals to it (`signals` must be
/// blocked). Returns status 127/126 like a shell when the program cannot be found or run.
fn spawn_and_wait(cmd: &mut Command, program: &OsStr, signals: Blocked) -> Result<ExitStatus> {
    let Blocked { waited, old_mask } = signals;
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
            // As if the program had exited with `code` (a wait status), so the caller cleans up.
            return Ok(ExitStatus::from_raw(code << 8));
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
    fn programs_are_found_like_a_shell_finds_them() {
        let root = std::env::temp_dir().join(format!("nevermore-find-{}", std::process::id()));
        let (a, b) = (root.join("a"), root.join("b"));
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        let file = |p: &Path, mode: u32| {
            fs::write(p, "#!/bin/sh\n").unwrap();
            fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
        };
        file(&a.join("tool"), 0o644);
        file(&b.join("tool"), 0o755);
        file(&a.join("data"), 0o644);
        fs::create_dir_all(b.join("dir")).unwrap();
        let path = |dirs: &[&Path]| Some(std::env::join_paths(dirs).unwrap());
        let find = |name: &str, p| find_program(OsStr::new(name), p);
        // A file that is not executable is passed over for a later one that is.
        assert_eq!(find("tool", path(&[&a, &b])), Some(b.join("tool")));
        // Alone, it is the answer (running it then fails with status 126).
        assert_eq!(find("data", path(&[&a, &b])), Some(a.join("data")));
        // Directories are not programs; missing names are not found.
        assert_eq!(find("dir", path(&[&b])), None);
        assert_eq!(find("nope", path(&[&a, &b])), None);
        assert_eq!(find("", path(&[&a, &b])), None);
        // A name with a slash is taken as it is.
        assert_eq!(find("./x/y", path(&[&a])), Some(PathBuf::from("./x/y")));
        // An empty entry is the working directory; an unset PATH is /bin:/usr/bin.
        assert_eq!(find("tool", Some(OsString::from(format!(":{}", b.display())))), Some(b.join("tool")));
        assert_eq!(find("sh", None).map(|p| p.parent().unwrap().to_path_buf()), Some(PathBuf::from("/bin")));
        fs::remove_dir_all(&root).unwrap();
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
