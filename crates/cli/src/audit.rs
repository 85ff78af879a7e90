//! `nevermore audit`: the security evaluation. Compiles the exploit corpus of `tests/exploits`
//! (embedded in this binary), runs every exploit under every allocator configuration found on
//! this machine and prints the outcome table (Markdown, or JSON with `--json`).
//!
//! An exploit prints a line `EXPLOITED: <what>` when it reaches its goal; otherwise it exits
//! normally or dies. Each cell of the table is one of `exploited`, `aborted: <report kind or
//! allocator message>`, `crashed: <signal>`, `harmless` (normal exit, no marker) or `timeout`.

use std::fmt::Write as _;
use std::fs;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// What the current library (no `mode=` option) must do with an exploit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Abort with a `nevermore: ERROR: <kind>` report.
    Report(&'static str),
    /// Anything but `exploited`.
    NotExploited,
    /// Use-after-free that today's library (immediate reuse) does not stop; the alias engine
    /// (`mode=detect`: heap-use-after-free trap; `mode=prevent`: no reach into newer objects)
    /// is what defeats it.
    AliasEngine,
    /// A limit SECURITY.md documents: prevent and detect mode are exploited; detect mode with
    /// `guard_all=1` aborts with this report kind.
    GuardAllOnly(&'static str),
}

impl Expect {
    pub fn describe(self) -> String {
        match self {
            Expect::Report(kind) => format!("aborted: {kind}"),
            Expect::NotExploited => "not exploited".into(),
            Expect::AliasEngine => "detect: heap-use-after-free; prevent: not exploited".into(),
            Expect::GuardAllOnly(kind) => {
                format!("guard_all: aborted: {kind}; detect, prevent: exploited (a documented limit)")
            }
        }
    }
}

/// The columns of the library under audit, with their `NEVERMORE_OPTIONS`.
pub const NEVERMORE_CONFIGS: [(&str, &str); 3] = [
    ("nevermore-detect", "mode=detect"),
    ("nevermore-guard_all", "mode=detect:guard_all=1"),
    ("nevermore-prevent", "mode=prevent"),
];

/// One program of the corpus.
pub struct Exploit {
    pub name: &'static str,
    /// The bug class, short.
    pub bug: &'static str,
    pub source: &'static str,
    pub cxx: bool,
    /// The expected outcome under nevermore (the table the tests assert).
    pub expect: Expect,
}

macro_rules! exploit {
    ($name:literal, $ext:literal, $bug:literal, $expect:expr) => {
        Exploit {
            name: $name,
            bug: $bug,
            source: include_str!(concat!("../../../tests/exploits/", $name, ".", $ext)),
            cxx: matches!($ext.as_bytes(), b"cc"),
            expect: $expect,
        }
    };
}

/// The corpus, in table order, with the outcome expected under nevermore.
pub const EXPLOITS: &[Exploit] = &[
    exploit!("uaf_fnptr", "c", "use-after-free (call)", Expect::AliasEngine),
    exploit!("uaf_read_secret", "c", "use-after-free (read)", Expect::AliasEngine),
    exploit!("uaf_write_large", "c", "use-after-free (large)", Expect::AliasEngine),
    exploit!("uaf_after_churn", "c", "use-after-free (late)", Expect::Report("heap-use-after-free")),
    // The second free hits note 2's live object (the slot was reused), so today it is a
    // use-after-free, not a double free; with one-time aliases it becomes a double-free report.
    exploit!("tcache_poison", "c", "double free", Expect::NotExploited),
    exploit!("fastbin_dup", "c", "double free", Expect::Report("double-free")),
    exploit!("house_of_botcake", "c", "double free", Expect::Report("double-free")),
    exploit!("unsafe_unlink", "c", "overflow into metadata", Expect::Report("heap-buffer-overflow")),
    exploit!("overlapping_chunks", "c", "overflow into metadata", Expect::Report("heap-buffer-overflow")),
    exploit!("poison_null_byte", "c", "off-by-one NUL", Expect::Report("heap-buffer-overflow")),
    exploit!("house_of_einherjar", "c", "off-by-one NUL", Expect::Report("heap-buffer-overflow")),
    exploit!("house_of_spirit", "c", "invalid free (global)", Expect::Report("invalid-free")),
    exploit!("invalid_free_stack", "c", "invalid free (stack)", Expect::Report("invalid-free")),
    exploit!("invalid_free_interior", "c", "invalid free (interior)", Expect::Report("invalid-free")),
    exploit!("overflow_neighbor", "c", "overflow into neighbour", Expect::Report("heap-buffer-overflow")),
    exploit!("debug_evasion", "c", "overflow into neighbour", Expect::Report("heap-buffer-overflow")),
    exploit!("overflow_live_neighbor", "c", "overflow used before free", Expect::GuardAllOnly("heap-buffer-overflow")),
    exploit!("overflow_recv", "c", "overflow by recv, used before free", Expect::Report("heap-buffer-overflow")),
    exploit!("overread_reply", "c", "over-read by send (Heartbleed)", Expect::Report("heap-buffer-overflow")),
    exploit!("overflow_memcpy", "c", "overflow by memcpy, used before free", Expect::Report("heap-buffer-overflow")),
    exploit!("overread_memcpy", "c", "over-read by memcpy (Heartbleed)", Expect::Report("heap-buffer-overflow")),
    exploit!("overflow_sprintf", "c", "overflow by sprintf, used before free", Expect::Report("heap-buffer-overflow")),
    exploit!("overflow_sscanf", "c", "overflow by sscanf, used before free", Expect::Report("heap-buffer-overflow")),
    exploit!("mismatched_delete", "cc", "new[] / delete", Expect::Report("invalid-free")),
];

/// The result of one exploit under one configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The marker line was printed; the text after `EXPLOITED: `.
    Exploited(String),
    /// A nevermore report kind, or an allocator's abort message.
    Aborted(String),
    /// Killed by this signal without an allocator message.
    Crashed(String),
    /// Exited normally without the marker, with this status.
    Harmless(i32),
    Timeout,
    /// The library refused `NEVERMORE_OPTIONS` (exit 1 with this message).
    OptionRejected(String),
}

impl Outcome {
    /// The table cell.
    pub fn cell(&self) -> String {
        match self {
            Outcome::Exploited(_) => "exploited".into(),
            Outcome::Aborted(k) => format!("aborted: {k}"),
            Outcome::Crashed(sig) => format!("crashed: {sig}"),
            Outcome::Harmless(0) => "harmless".into(),
            Outcome::Harmless(code) => format!("harmless (exit {code})"),
            Outcome::Timeout => "timeout".into(),
            Outcome::OptionRejected(_) => "option rejected".into(),
        }
    }
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("signal {sig}"),
    };
    name.into()
}

/// An allocator's abort message, shortened for a table cell: a leading `file:line] ` and hex
/// addresses dropped, cut at a word boundary to at most 44 characters, no `|`.
fn shorten(msg: &str) -> String {
    let msg = match msg.split_once("] ") {
        Some((loc, rest)) if loc.contains(':') && !loc.contains(' ') => rest,
        _ => msg,
    };
    let mut out = String::new();
    for word in msg.split_whitespace() {
        if word.starts_with("0x") || word.starts_with("(0x") {
            continue;
        }
        let word = word.replace('|', "/");
        if out.chars().count() + word.chars().count() + 1 > 44 {
            if out.is_empty() {
                out = word.chars().take(44).collect();
            }
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&word);
    }
    while out.ends_with([':', ' ', ',']) {
        out.pop();
    }
    out
}

/// Classifies a finished run from its exit code or signal and its output.
pub fn classify(code: Option<i32>, signal: Option<i32>, stdout: &str, stderr: &str) -> Outcome {
    if let Some(line) = stdout.lines().find(|l| l.starts_with("EXPLOITED:")) {
        return Outcome::Exploited(line["EXPLOITED:".len()..].trim().to_string());
    }
    if let Some(at) = stderr.find("nevermore: ERROR: ") {
        let rest = &stderr[at + "nevermore: ERROR: ".len()..];
        let kind = rest.split_whitespace().next().unwrap_or("unknown");
        return Outcome::Aborted(kind.to_string());
    }
    if code == Some(1) && stderr.contains("NEVERMORE_OPTIONS: unknown option") {
        let line = stderr.lines().find(|l| l.contains("unknown option")).unwrap_or_default();
        return Outcome::OptionRejected(line.trim().to_string());
    }
    if let Some(sig) = signal {
        // An allocator that aborts says why on the last line it writes before dying.
        let message = stderr.lines().rev().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("=="));
        return match message {
            Some(m) if sig == libc::SIGABRT => Outcome::Aborted(shorten(m)),
            _ => Outcome::Crashed(signal_name(sig)),
        };
    }
    Outcome::Harmless(code.unwrap_or(0))
}

/// An allocator configuration: a preloaded library and environment.
#[derive(Clone, Debug)]
pub struct Config {
    pub name: String,
    pub preload: Option<PathBuf>,
    pub env: Vec<(String, String)>,
    /// A command that runs the exploit (its path is appended), e.g. `setpriv` switching to
    /// another user; empty: the exploit is run directly.
    pub runner: Vec<String>,
}

impl Config {
    pub fn glibc() -> Config {
        Config { name: "glibc".into(), preload: None, env: Vec::new(), runner: Vec::new() }
    }

    pub fn preload(name: &str, lib: &Path, env: &[(&str, &str)]) -> Config {
        Config {
            name: name.into(),
            preload: Some(lib.to_path_buf()),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            runner: Vec::new(),
        }
    }
}

pub const GLIBC_DEBUG_LIB: &str = "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0";

/// The peer allocators looked for, by name and path (Scudo is searched among clang versions).
fn peers() -> Vec<(&'static str, Option<PathBuf>, &'static str)> {
    let lib = |p: &str| Some(PathBuf::from(p)).filter(|p| p.is_file());
    vec![
        ("jemalloc", lib("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"), "libjemalloc2"),
        ("tcmalloc", lib("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"), "libgoogle-perftools4"),
        ("mimalloc", lib("/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"), "libmimalloc2.0"),
        ("scudo", find_scudo(), "libclang-rt-NN-dev"),
    ]
}

/// `/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.scudo_standalone-x86_64.so`, newest first.
fn find_scudo() -> Option<PathBuf> {
    let sorted_dirs = |dir: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> =
            fs::read_dir(dir).map(|rd| rd.flatten().map(|e| e.path()).collect()).unwrap_or_default();
        v.sort();
        v.reverse();
        v
    };
    for llvm in sorted_dirs(Path::new("/usr/lib")) {
        if !llvm.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("llvm-")) {
            continue;
        }
        for version in sorted_dirs(&llvm.join("lib/clang")) {
            let so = version.join("lib/linux/libclang_rt.scudo_standalone-x86_64.so");
            if so.is_file() {
                return Some(so);
            }
        }
    }
    None
}

/// Flags for the corpus: no optimisation, so that the programs do exactly what their source
/// says (dangling accesses, the order of stores), and no warnings (the bugs are on purpose).
const CFLAGS: &[&str] = &["-O0", "-g", "-w", "-fno-builtin"];

/// Compiles the exploits accepted by `keep` into `dir`; returns each with its executable.
pub fn compile_all(dir: &Path, keep: impl Fn(&Exploit) -> bool) -> Result<Vec<(&'static Exploit, PathBuf)>> {
    fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let mut out = Vec::new();
    for e in EXPLOITS.iter().filter(|e| keep(e)) {
        let src = dir.join(format!("{}.{}", e.name, if e.cxx { "cc" } else { "c" }));
        fs::write(&src, e.source).with_context(|| format!("write {}", src.display()))?;
        let bin = dir.join(e.name);
        let o = Command::new(if e.cxx { "c++" } else { "cc" })
            .args(CFLAGS)
            .arg("-o")
            .arg(&bin)
            .arg(&src)
            .output()
            .with_context(|| format!("run the C compiler for {}", e.name))?;
        if !o.status.success() {
            bail!("compiling {} failed:\n{}", e.name, String::from_utf8_lossy(&o.stderr));
        }
        out.push((e, bin));
    }
    Ok(out)
}

/// Longest time one exploit may run.
const TIMEOUT: Duration = Duration::from_secs(20);

/// Runs `bin` under `config` (stdout and stderr go to files beside it) and classifies it.
pub fn run_exploit(bin: &Path, config: &Config) -> Result<Outcome> {
    // Unique names: several runs of one program may be under way at once (parallel tests).
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let name: String = config.name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let tag = format!("{name}-{n}");
    let out_path = bin.with_extension(format!("{tag}.out"));
    let err_path = bin.with_extension(format!("{tag}.err"));
    let mut cmd = match config.runner.split_first() {
        Some((runner, args)) => {
            let mut c = Command::new(runner);
            c.args(args).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    cmd.env_remove("LD_PRELOAD")
        .env_remove("MALLOC_CHECK_")
        .env_remove("NEVERMORE_OPTIONS")
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_path)?)
        .stderr(fs::File::create(&err_path)?);
    if let Some(lib) = &config.preload {
        cmd.env("LD_PRELOAD", lib);
    }
    for (k, v) in &config.env {
        cmd.env(k, v);
    }
    // SAFETY: the closure runs in the forked child before exec and only calls setrlimit,
    // which is async-signal-safe: crashing exploits must not leave core files behind.
    unsafe {
        cmd.pre_exec(|| {
            let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            Ok(())
        });
    }
    let mut child = cmd.spawn().with_context(|| format!("run {}", bin.display()))?;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = String::from_utf8_lossy(&fs::read(&out_path)?).into_owned();
    let stderr = String::from_utf8_lossy(&fs::read(&err_path)?).into_owned();
    let _ = fs::remove_file(&out_path);
    let _ = fs::remove_file(&err_path);
    Ok(match status {
        None if !stdout.contains("EXPLOITED:") => Outcome::Timeout,
        None => classify(None, Some(libc::SIGKILL), &stdout, &stderr),
        Some(s) => classify(s.code(), s.signal(), &stdout, &stderr),
    })
}

#[derive(clap::Args)]
pub struct AuditArgs {
    /// Print JSON instead of a Markdown table
    #[arg(long)]
    json: bool,
    /// Run only the exploit NAME (repeatable)
    #[arg(long, value_name = "NAME")]
    only: Vec<String>,
    /// Also audit the allocator library at PATH, preloaded, in a column named NAME (default:
    /// the file name) (repeatable)
    #[arg(long = "lib", value_name = "[NAME=]PATH")]
    libs: Vec<String>,
    /// Run every exploit N times under every allocator; a cell whose runs differ (allocators
    /// that randomise placement) lists each outcome with its count
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    runs: u32,
    /// List the exploits and exit
    #[arg(long)]
    list: bool,
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Probes whether `lib` accepts `NEVERMORE_OPTIONS=mode=<mode>`: `None` if it does, else the
/// library's message.
fn mode_rejected(probe: &Path, lib: &Path, mode: &str) -> Result<Option<String>> {
    let config = Config::preload("probe", lib, &[("NEVERMORE_OPTIONS", &format!("mode={mode}"))]);
    Ok(match run_exploit(probe, &config)? {
        Outcome::OptionRejected(msg) => Some(msg),
        _ => None,
    })
}

/// `nevermore audit`; `lib` is the extracted nevermore library.
pub fn run(args: AuditArgs, lib: &Path) -> Result<()> {
    if args.list {
        for e in EXPLOITS {
            println!("{:<24} {}", e.name, e.bug);
        }
        return Ok(());
    }
    for name in &args.only {
        if !EXPLOITS.iter().any(|e| e.name == name) {
            bail!("no exploit named {name} (see --list)");
        }
    }
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let tmp = TempDir(std::env::temp_dir().join(format!("nevermore-audit-{}-{nanos}", std::process::id())));
    let programs = compile_all(&tmp.0, |e| args.only.is_empty() || args.only.iter().any(|n| n == e.name))?;
    let probe_src = tmp.0.join("probe.c");
    fs::write(&probe_src, "#include <stdlib.h>\nint main(void) { free(malloc(16)); return 0; }\n")?;
    let probe = tmp.0.join("probe");
    let o = Command::new("cc").arg("-o").arg(&probe).arg(&probe_src).output().context("run the C compiler")?;
    if !o.status.success() {
        bail!("compiling the probe failed:\n{}", String::from_utf8_lossy(&o.stderr));
    }

    let mut notes: Vec<String> = Vec::new();
    let mut configs = vec![Config::glibc()];
    if Path::new(GLIBC_DEBUG_LIB).is_file() {
        configs.push(Config::preload("glibc-debug", Path::new(GLIBC_DEBUG_LIB), &[("MALLOC_CHECK_", "3")]));
    } else {
        notes.push(format!("glibc-debug skipped: {GLIBC_DEBUG_LIB} not found"));
    }
    for (name, path, package) in peers() {
        match path {
            Some(p) => configs.push(Config::preload(name, &p, &[])),
            None => notes.push(format!("{name} skipped: not installed (Debian package {package})")),
        }
    }
    for extra in &args.libs {
        let (name, path) = split_lib(extra);
        let abs = std::path::absolute(path).with_context(|| format!("resolve {path}"))?;
        if !abs.is_file() {
            bail!("{} is not a file", abs.display());
        }
        let name = name.map(str::to_string).unwrap_or_else(|| {
            abs.file_name().map_or_else(|| abs.display().to_string(), |n| n.to_string_lossy().into_owned())
        });
        configs.push(Config::preload(&name, &abs, &[]));
    }
    let mut modes_ok = true;
    for mode in ["detect", "prevent"] {
        if let Some(msg) = mode_rejected(&probe, lib, mode)? {
            notes.push(format!(
                "nevermore: the library rejects mode={mode} ({msg}); one `nevermore` column without \
                 the option instead (pending the alias engine)"
            ));
            modes_ok = false;
            break;
        }
    }
    if modes_ok {
        for (name, opt) in NEVERMORE_CONFIGS {
            configs.push(Config::preload(name, lib, &[("NEVERMORE_OPTIONS", opt)]));
        }
    } else {
        configs.push(Config::preload("nevermore", lib, &[]));
    }

    let mut rows: Vec<(&Exploit, Vec<String>)> = Vec::new();
    for (e, bin) in &programs {
        let mut cells = Vec::new();
        for c in &configs {
            let outcomes = (0..args.runs).map(|_| run_exploit(bin, c)).collect::<Result<Vec<_>>>()?;
            cells.push(summary(&outcomes));
        }
        rows.push((e, cells));
    }

    let text = if args.json { json(&configs, &rows, &notes) } else { markdown(&configs, &rows, &notes) };
    print!("{text}");
    Ok(())
}

/// `--lib` takes `NAME=PATH` or `PATH`: a name has no `/`.
fn split_lib(arg: &str) -> (Option<&str>, &str) {
    match arg.split_once('=') {
        Some((name, path)) if !name.is_empty() && !name.contains('/') => (Some(name), path),
        _ => (None, arg),
    }
}

/// The table cell of one exploit's runs under one allocator: the outcome when every run had
/// it, else each outcome with its count, the most frequent first (ties in order of first
/// appearance).
fn summary(outcomes: &[Outcome]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for o in outcomes {
        let cell = o.cell();
        match counts.iter_mut().find(|(c, _)| *c == cell) {
            Some((_, n)) => *n += 1,
            None => counts.push((cell, 1)),
        }
    }
    if counts.len() == 1 {
        return counts.pop().map(|(c, _)| c).unwrap_or_default();
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    let parts: Vec<String> = counts.iter().map(|(c, n)| format!("{c} {n}/{}", outcomes.len())).collect();
    parts.join("; ")
}

fn markdown(configs: &[Config], rows: &[(&Exploit, Vec<String>)], notes: &[String]) -> String {
    let mut s = String::from("| exploit | bug class |");
    for c in configs {
        let _ = write!(s, " {} |", c.name);
    }
    s.push_str(" expected (nevermore) |\n|---|---|");
    for _ in configs {
        s.push_str("---|");
    }
    s.push_str("---|\n");
    for (e, cells) in rows {
        let _ = write!(s, "| {} | {} |", e.name, e.bug);
        for c in cells {
            let _ = write!(s, " {c} |");
        }
        let _ = writeln!(s, " {} |", e.expect.describe());
    }
    for n in notes {
        let _ = write!(s, "\nNote: {n}");
    }
    if !notes.is_empty() {
        s.push('\n');
    }
    s
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json(configs: &[Config], rows: &[(&Exploit, Vec<String>)], notes: &[String]) -> String {
    let list = |items: Vec<String>| items.join(", ");
    let configs_json = list(configs.iter().map(|c| json_str(&c.name)).collect());
    let notes_json = list(notes.iter().map(|n| json_str(n)).collect());
    let results = list(
        rows.iter()
            .map(|(e, cells)| {
                let outcomes = list(
                    configs.iter().zip(cells).map(|(c, o)| format!("{}: {}", json_str(&c.name), json_str(o))).collect(),
                );
                format!(
                    "{{\"exploit\": {}, \"bug\": {}, \"expected\": {}, \"outcomes\": {{{}}}}}",
                    json_str(e.name),
                    json_str(e.bug),
                    json_str(&e.expect.describe()),
                    outcomes
                )
            })
            .collect(),
    );
    format!("{{\"configs\": [{configs_json}], \"notes\": [{notes_json}], \"results\": [{results}]}}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let ex = classify(Some(0), None, "x\nEXPLOITED: did it\n", "");
        assert_eq!(ex, Outcome::Exploited("did it".into()));
        let nm = "==7== nevermore: ERROR: double-free on address 0x10 (thread 7)\n==7== nevermore: aborting\n";
        assert_eq!(classify(None, Some(libc::SIGABRT), "", nm), Outcome::Aborted("double-free".into()));
        let glibc = "free(): double free detected in tcache 2\n";
        let o = classify(None, Some(libc::SIGABRT), "", glibc);
        assert_eq!(o.cell(), "aborted: free(): double free detected in tcache 2");
        assert_eq!(classify(None, Some(libc::SIGSEGV), "", ""), Outcome::Crashed("SIGSEGV".into()));
        assert_eq!(classify(Some(0), None, "hello\n", ""), Outcome::Harmless(0));
        let rejected = "nevermore: NEVERMORE_OPTIONS: unknown option 'mode'\n";
        assert!(matches!(classify(Some(1), None, "", rejected), Outcome::OptionRejected(_)));
    }

    #[test]
    fn summaries_count_differing_runs() {
        let ex = || Outcome::Exploited("x".into());
        let ab = || Outcome::Aborted("double-free".into());
        assert_eq!(summary(&[ab(), ab(), ab()]), "aborted: double-free");
        assert_eq!(summary(&[ab(), ex(), ex()]), "exploited 2/3; aborted: double-free 1/3");
        assert_eq!(summary(&[ex(), Outcome::Harmless(0)]), "exploited 1/2; harmless 1/2");
    }

    #[test]
    fn lib_arguments() {
        assert_eq!(split_lib("ff=/opt/ff/lib.so"), (Some("ff"), "/opt/ff/lib.so"));
        assert_eq!(split_lib("/opt/a=b/lib.so"), (None, "/opt/a=b/lib.so"));
        assert_eq!(split_lib("lib.so"), (None, "lib.so"));
    }

    #[test]
    fn shortening() {
        assert_eq!(shorten("<jemalloc>: bad free of 0x7f00 | x"), "<jemalloc>: bad free of / x");
        assert_eq!(
            shorten("src/tcmalloc.cc:333] Attempt to free invalid pointer 0x5"),
            "Attempt to free invalid pointer"
        );
        assert!(shorten(&"a".repeat(100)).len() <= 44);
    }

    #[test]
    fn names_are_unique() {
        for (i, e) in EXPLOITS.iter().enumerate() {
            assert!(EXPLOITS[..i].iter().all(|o| o.name != e.name), "{}", e.name);
            assert!(e.source.contains("EXPLOITED: "), "{} has no marker", e.name);
        }
    }
}
