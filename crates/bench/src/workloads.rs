//! The workloads: small C programs (embedded, compiled at run time with `cc`) and real
//! programs (started on 127.0.0.1 and stopped after each run).

use std::ffi::OsString;
use std::fs::{self, File};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::allocs::{Allocator, ENV_CLEARED};
use crate::runner::{self, Finished};

/// What a workload reports as its main result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metric {
    /// Name in the CSV.
    pub key: &'static str,
    /// Name in tables and charts.
    pub label: &'static str,
    pub higher_is_better: bool,
}

pub const SECONDS: Metric = Metric { key: "time_s", label: "time (s)", higher_is_better: false };
pub const NS_PER_OP: Metric = Metric { key: "ns_per_op", label: "ns/op", higher_is_better: false };
pub const MOPS: Metric = Metric { key: "mops_per_s", label: "Mops/s", higher_is_better: true };
pub const REQ_PER_S: Metric = Metric { key: "req_per_s", label: "req/s", higher_is_better: true };
pub const TPS: Metric = Metric { key: "tps", label: "tps", higher_is_better: true };

/// One measured run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// The value of the case's [`Metric`].
    pub primary: f64,
    pub wall_s: f64,
    pub rss_kib: u64,
    /// Peak physical memory (see [`crate::procmem`]).
    pub phys_kib: u64,
    /// nevermore's alias engine when the program ended, where its statistics were read.
    pub engine: Option<Engine>,
}

/// The state of nevermore's alias engine at the exit of a program, from its `stats=1` report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Engine {
    pub mirrors_live: u64,
    pub mirrors_peak: u64,
    /// Mappings of the whole process.
    pub vmas: u64,
    /// Epochs that reused retired addresses (degrade mode).
    pub degraded: u64,
}

/// The `stats=1` report in a program's standard error: the one of the process that made the
/// most allocations, when several processes wrote one (a compiler driver and its passes).
pub fn parse_engine(stderr: &str) -> Option<Engine> {
    // Per process: (pid, allocations, engine, bits of the lines found).
    let mut procs: Vec<(String, u64, Engine, u32)> = vec![];
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix("==") else { continue };
        let Some((pid, body)) = rest.split_once("==") else { continue };
        let body = body.trim_start();
        let first_num = |s: &str| s.split_whitespace().next().and_then(|w| w.parse::<u64>().ok());
        let i = match procs.iter().position(|p| p.0 == pid) {
            Some(i) => i,
            None => {
                procs.push((pid.to_string(), 0, Engine::default(), 0));
                procs.len() - 1
            }
        };
        let p = &mut procs[i];
        if let Some(v) = body.strip_prefix("allocations").and_then(first_num) {
            p.1 = v;
        } else if let Some(v) = body.strip_prefix("mirrors") {
            // "5 live, 9 peak, 819 made, ..."
            let words: Vec<&str> = v.split(|c: char| c.is_whitespace() || c == ',').filter(|w| !w.is_empty()).collect();
            let before = |label: &str| words.windows(2).find(|w| w[1] == label).and_then(|w| w[0].parse().ok());
            if let (Some(live), Some(peak)) = (before("live"), before("peak")) {
                (p.2.mirrors_live, p.2.mirrors_peak) = (live, peak);
                p.3 |= 1;
            }
        } else if let Some(v) = body.strip_prefix("VMAs").and_then(first_num) {
            p.2.vmas = v;
            p.3 |= 2;
        } else if let Some(v) = body.strip_prefix("degrade mode").and_then(first_num) {
            p.2.degraded = v;
            p.3 |= 4;
        }
    }
    procs.into_iter().filter(|p| p.3 == 7).max_by_key(|p| p.1).map(|p| p.2)
}

/// How big and where.
#[derive(Clone, Debug)]
pub struct Settings {
    pub full: bool,
    /// Multiplies the sizes and durations of every workload (for tiny test runs).
    pub scale: f64,
    /// Sources, binaries and data.
    pub work: PathBuf,
    /// Output of the last run of each case and allocator.
    pub logs: PathBuf,
}

impl Settings {
    /// A count, quick or full, scaled.
    fn n(&self, quick: u64, full: u64) -> u64 {
        (((if self.full { full } else { quick }) as f64) * self.scale).round().max(1.0) as u64
    }

    /// A duration in seconds, quick or full, scaled, at least 1.
    fn secs(&self, quick: u64, full: u64) -> u64 {
        self.n(quick, full).max(1)
    }

    /// Bound of one run of a program that takes a second or two under glibc.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(if self.full { 600 } else { 30 })
    }
}

/// One row group of the results: a workload (or one thread count of larson).
pub trait Case {
    fn name(&self) -> String;
    /// The workload it belongs to (`larson` for `larson-4t`).
    fn group(&self) -> &'static str;
    fn threads(&self) -> Option<u32> {
        None
    }
    fn metric(&self) -> Metric;
    /// The share of the work that the warm-up run does, when it is a smaller run of the same
    /// kind (not a shorter fixed-duration load).
    fn warm_fraction(&self) -> Option<f64> {
        None
    }
    /// One run under `alloc`; `warm` marks the (shorter, discarded) warm-up run.
    fn run(&self, alloc: &Allocator, warm: bool) -> Result<Sample, String>;
}

/// Every workload, in run order.
pub const WORKLOADS: &[&str] =
    &["loop", "aim9", "sparse", "soak", "larson", "sqlite", "python", "gcc", "redis", "nginx", "postgres"];

/// Warm-up runs of the small programs do 1/WARM of the work.
const WARM: u64 = 8;

/// Larson's thread counts.
pub const LARSON_THREADS: &[u32] = &[1, 2, 4, 8];

const SOURCES: &[(&str, &str)] = &[
    ("common.h", include_str!("c/common.h")),
    ("loop.c", include_str!("c/loop.c")),
    ("aim9.c", include_str!("c/aim9.c")),
    ("sparse.c", include_str!("c/sparse.c")),
    ("soak.c", include_str!("c/soak.c")),
    ("larson.c", include_str!("c/larson.c")),
    ("sqlite.c", include_str!("c/sqlite.c")),
    ("glibc_shim.c", include_str!("c/glibc_shim.c")),
    ("workload.py", include_str!("c/workload.py")),
];

/// Prepares a workload: compiles, generates data, initializes databases. `Err` is the reason
/// to skip it.
pub fn prepare(name: &str, s: &Settings) -> Result<Vec<Box<dyn Case>>, String> {
    fs::create_dir_all(s.work.join("src")).map_err(|e| e.to_string())?;
    fs::create_dir_all(s.work.join("bin")).map_err(|e| e.to_string())?;
    fs::create_dir_all(&s.logs).map_err(|e| e.to_string())?;
    for (file, text) in SOURCES {
        fs::write(s.work.join("src").join(file), text).map_err(|e| format!("writing sources: {e}"))?;
    }
    let batch = |name: &str, metric: Metric, argv: Vec<OsString>, key: Option<&'static str>| Batch {
        name: name.to_string(),
        warm_argv: argv.clone(),
        group: WORKLOADS.iter().copied().find(|w| name.starts_with(w)).unwrap_or("?"),
        threads: None,
        metric,
        argv,
        env: vec![],
        result_key: key,
        factor: 1.0,
        tree: false,
        timeout: s.timeout(),
        cwd: s.work.clone(),
        logs: s.logs.clone(),
    };
    let cases: Vec<Box<dyn Case>> = match name {
        "loop" => {
            let bin = compile(s, "loop", &[])?;
            let ops = s.n(1 << 22, 1 << 22);
            let mut b = batch("loop", NS_PER_OP, args(&bin, &[ops, 1024]), Some("ns_per_op"));
            b.warm_argv = args(&bin, &[ops / WARM, 1024]);
            vec![Box::new(b)]
        }
        "aim9" => {
            let bin = compile(s, "aim9", &[])?;
            let iters = s.n(1000, 6000);
            let mut b = batch("aim9", SECONDS, args(&bin, &[iters]), None);
            b.warm_argv = args(&bin, &[iters / WARM]);
            vec![Box::new(b)]
        }
        "sparse" => {
            let bin = compile(s, "sparse", &[])?;
            let (per_round, rounds) = (s.n(1_000_000, 2_000_000), if s.full { 8 } else { 4 });
            let mut b = batch("sparse", SECONDS, args(&bin, &[per_round, rounds]), None);
            b.warm_argv = args(&bin, &[per_round / WARM, rounds]);
            vec![Box::new(b)]
        }
        "soak" => {
            let bin = compile(s, "soak", &[])?;
            let n = s.n(10_000_000, 100_000_000);
            let mut b = batch("soak", NS_PER_OP, args(&bin, &[n]), Some("ns_per_op"));
            b.warm_argv = args(&bin, &[n / WARM]);
            vec![Box::new(b)]
        }
        "larson" => {
            let bin = compile(s, "larson", &["-pthread"])?;
            let total = s.n(4_000_000, 20_000_000);
            LARSON_THREADS
                .iter()
                .map(|&t| {
                    let mut b =
                        batch(&format!("larson-{t}t"), MOPS, args(&bin, &[t as u64, total, 1000]), Some("ops_per_sec"));
                    b.threads = Some(t);
                    b.warm_argv = args(&bin, &[t as u64, total / WARM, 1000]);
                    b.factor = 1e-6;
                    Box::new(b) as Box<dyn Case>
                })
                .collect()
        }
        "sqlite" => {
            let bin =
                compile(s, "sqlite", &["-lsqlite3"]).map_err(|e| format!("{e} (apt-get install libsqlite3-dev)"))?;
            let rows = s.n(60_000, 300_000);
            let mut b = batch("sqlite", SECONDS, args(&bin, &[rows]), None);
            b.warm_argv = args(&bin, &[rows / WARM]);
            vec![Box::new(b)]
        }
        "python" => {
            let py = ["/usr/bin/python3"].iter().map(PathBuf::from).find(|p| p.is_file()).or_else(|| which("python3"));
            let py = py.ok_or("python3 not found")?;
            let scale = if s.full { 1.0 } else { 0.25 } * s.scale;
            let script: OsString = s.work.join("src/workload.py").into();
            let argv = vec![py.clone().into(), script.clone(), format!("{scale}").into()];
            let mut b = batch("python", SECONDS, argv, None);
            b.warm_argv = vec![py.into(), script, format!("{}", scale / WARM as f64).into()];
            b.env.push(("PYTHONMALLOC".into(), "malloc".into()));
            vec![Box::new(b)]
        }
        "gcc" => {
            let gcc = which("gcc").ok_or("gcc not found")?;
            let dir = s.work.join("gcc");
            fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let funcs = s.n(80, 300) as usize;
            fs::write(dir.join("big.c"), generate_c(funcs)).map_err(|e| e.to_string())?;
            fs::write(dir.join("warm.c"), generate_c((funcs / WARM as usize).max(1))).map_err(|e| e.to_string())?;
            let argv = |file: &str| -> Vec<OsString> {
                [gcc.as_os_str(), "-O2".as_ref(), "-c".as_ref(), file.as_ref(), "-o".as_ref(), "out.o".as_ref()]
                    .iter()
                    .map(|a| a.to_os_string())
                    .collect()
            };
            let mut b = batch("gcc", SECONDS, argv("big.c"), None);
            b.warm_argv = argv("warm.c");
            b.tree = true;
            b.cwd = dir;
            vec![Box::new(b)]
        }
        "redis" => {
            let server = which("redis-server").ok_or("redis-server not found (apt-get install redis-server)")?;
            let client = which("redis-benchmark").ok_or("redis-benchmark not found (apt-get install redis-tools)")?;
            let shim = compile_shared(s, "glibc_shim", &["-ldl"])?;
            let dir = s.work.join("redis");
            fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            vec![Box::new(Redis { server, client, shim, dir, requests: s.n(100_000, 1_000_000), s: s.clone() })]
        }
        "nginx" => {
            let nginx = which("nginx").ok_or("nginx not found (apt-get install nginx)")?;
            let wrk = which("wrk").ok_or("wrk not found (apt-get install wrk)")?;
            let prefix = s.work.join("nginx");
            for d in ["html", "tmp", "logs"] {
                fs::create_dir_all(prefix.join(d)).map_err(|e| e.to_string())?;
            }
            let page: String =
                (0..100).map(|i| format!("<p>nevermore-bench line {i:03} of a static page</p>\n")).collect();
            fs::write(prefix.join("html/index.html"), format!("<html><body>\n{page}</body></html>\n"))
                .map_err(|e| e.to_string())?;
            vec![Box::new(Nginx { nginx, wrk, prefix, secs: s.secs(5, 15), s: s.clone() })]
        }
        "postgres" => vec![Box::new(Postgres::prepare(s)?)],
        other => return Err(format!("unknown workload {other:?} (known: {})", WORKLOADS.join(", "))),
    };
    Ok(cases)
}

fn args(bin: &Path, nums: &[u64]) -> Vec<OsString> {
    std::iter::once(bin.as_os_str().to_owned()).chain(nums.iter().map(|n| n.to_string().into())).collect()
}

/// `name` in `PATH`, or in the sbin directories that a non-login root `PATH` may lack.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn cc(s: &Settings, out: &Path, src: &str, extra: &[&str], shared: bool) -> Result<PathBuf, String> {
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.arg("-O2").arg("-w");
    if shared {
        cmd.args(["-shared", "-fPIC"]);
    }
    cmd.arg("-o").arg(out).arg(s.work.join("src").join(src)).args(extra);
    for var in ENV_CLEARED {
        cmd.env_remove(var);
    }
    let o = cmd.stdin(Stdio::null()).output().map_err(|e| format!("cannot run {}: {e}", cc.to_string_lossy()))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        return Err(format!("compiling {src} failed: {}", err.lines().find(|l| l.contains("error")).unwrap_or("")));
    }
    Ok(out.to_path_buf())
}

fn compile(s: &Settings, name: &str, extra: &[&str]) -> Result<PathBuf, String> {
    cc(s, &s.work.join("bin").join(name), &format!("{name}.c"), extra, false)
}

fn compile_shared(s: &Settings, name: &str, extra: &[&str]) -> Result<PathBuf, String> {
    cc(s, &s.work.join("bin").join(format!("{name}.so")), &format!("{name}.c"), extra, true)
}

/// A large C file for gcc: many small structs and functions with loops and switches, which
/// make the optimizer allocate a lot.
pub fn generate_c(functions: usize) -> String {
    let mut c = String::from("/* generated by nevermore-bench */\n#include <stddef.h>\n");
    for i in 0..functions {
        c += &format!(
            "struct s{i} {{ int a; long b; double c; char name[16]; struct s{i} *next; }};\n\
             static int helper{i}(struct s{i} *p, int n) {{\n  int acc = {i};\n  for (int k = 0; k < n; k++) {{\n    switch ((k + {i}) % 7) {{\n\
             \x20     case 0: acc += p->a * k; break;\n      case 1: acc ^= (int)(p->b >> (k & 7)); break;\n\
             \x20     case 2: acc += (int)(p->c * k); break;\n      case 3: acc -= p->name[k & 15]; break;\n\
             \x20     case 4: if (p->next) acc += p->next->a; break;\n      case 5: acc = acc * 31 + k; break;\n\
             \x20     default: acc += k * {i}; }}\n  }}\n  return acc;\n}}\n\
             int f{i}(int x) {{\n  struct s{i} v = {{ x, x * 2L, x / 3.0, \"n{i}\", 0 }};\n  struct s{i} w = v;\n  w.next = &v;\n\
             \x20 int r = helper{i}(&w, x & 63) + helper{i}(&v, (x >> 3) & 31);\n{}  return r;\n}}\n",
            if i % 8 != 0 { format!("  if (r & 1) r += f{}(x >> 1);\n", i - 1) } else { String::new() }
        );
    }
    c
}

/// The last line of a log file that looks like an error (else the last non-empty line),
/// shortened.
fn tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines = || text.lines().rev().map(str::trim).filter(|l| !l.is_empty());
    let marks = ["FATAL", "ERROR", "PANIC", "error", "failed", "nevermore:", "Segmentation", "Aborted"];
    let line = lines().find(|l| marks.iter().any(|m| l.contains(m))).or_else(|| lines().next()).unwrap_or("");
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 160 {
        line.chars().take(160).collect::<String>() + "…"
    } else {
        line
    }
}

fn log_files(logs: &Path, stem: &str) -> Result<(PathBuf, PathBuf, File, File), String> {
    let out = logs.join(format!("{stem}.out"));
    let err = logs.join(format!("{stem}.err"));
    let fo = File::create(&out).map_err(|e| e.to_string())?;
    let fe = File::create(&err).map_err(|e| e.to_string())?;
    Ok((out, err, fo, fe))
}

/// Fails a run whose program the dynamic loader started without the preloaded library (a
/// path it cannot open, a library of the wrong architecture): it ran on glibc, and its
/// numbers must not stand under the library's name.
fn preloaded(err_log: &Path) -> Result<(), String> {
    let text = fs::read_to_string(err_log).unwrap_or_default();
    match text.lines().find(|l| l.contains("from LD_PRELOAD cannot be preloaded")) {
        Some(l) => Err(format!("the library was not loaded: {}", l.trim())),
        None => Ok(()),
    }
}

fn failure(f: &Finished, err_log: &Path) -> String {
    let t = tail(err_log);
    if t.is_empty() {
        f.describe()
    } else {
        format!("{}: {t}", f.describe())
    }
}

/// `key=value` from the `RESULT` lines of a workload's output.
pub fn parse_result(stdout: &str, key: &str) -> Option<f64> {
    stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("RESULT "))
        .flat_map(str::split_whitespace)
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

/// A program that does its work and exits.
struct Batch {
    name: String,
    group: &'static str,
    threads: Option<u32>,
    metric: Metric,
    argv: Vec<OsString>,
    /// A smaller run for the warm-up.
    warm_argv: Vec<OsString>,
    env: Vec<(String, String)>,
    /// The `RESULT` key of the metric; `None`: the wall time is the metric.
    result_key: Option<&'static str>,
    factor: f64,
    /// Sum the memory of child processes too.
    tree: bool,
    timeout: Duration,
    cwd: PathBuf,
    logs: PathBuf,
}

impl Case for Batch {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn group(&self) -> &'static str {
        self.group
    }
    fn threads(&self) -> Option<u32> {
        self.threads
    }
    fn metric(&self) -> Metric {
        self.metric
    }
    fn warm_fraction(&self) -> Option<f64> {
        Some(1.0 / WARM as f64)
    }
    fn run(&self, alloc: &Allocator, warm: bool) -> Result<Sample, String> {
        let (out, err, fo, fe) = log_files(&self.logs, &format!("{}.{}", self.name, alloc.name))?;
        let argv = if warm { &self.warm_argv } else { &self.argv };
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).current_dir(&self.cwd).stdin(Stdio::null()).stdout(fo).stderr(fe);
        alloc.apply(&mut cmd, None);
        ask_for_statistics(&mut cmd, alloc);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        let f = runner::spawn(&mut cmd, self.timeout, true, self.tree).map_err(|e| e.to_string())?.wait();
        if !f.success() {
            return Err(failure(&f, &err));
        }
        preloaded(&err)?;
        let wall_s = f.wall.as_secs_f64();
        let primary = match self.result_key {
            None => wall_s,
            Some(k) => {
                let text = fs::read_to_string(&out).unwrap_or_default();
                parse_result(&text, k).ok_or_else(|| format!("no `RESULT {k}=` in the output"))? * self.factor
            }
        };
        let engine = parse_engine(&fs::read_to_string(&err).unwrap_or_default());
        Ok(Sample { primary, wall_s, rss_kib: f.peak_rss_kib, phys_kib: f.peak_phys_kib, engine })
    }
}

/// Under nevermore, asks for the exit statistics, which give the alias engine's end state
/// (`parse_engine`); printing them costs nothing before the exit.
fn ask_for_statistics(cmd: &mut Command, alloc: &Allocator) {
    if let Some((_, opts)) = alloc.env.iter().find(|(k, _)| k == "NEVERMORE_OPTIONS") {
        cmd.env("NEVERMORE_OPTIONS", format!("{opts}:stats=1"));
    }
}

/// A free TCP port on 127.0.0.1.
fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

fn tcp_ready(port: u16) -> bool {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// A server under the allocator, loaded by a client that runs under glibc.
struct Serve<'a> {
    stem: String,
    logs: &'a Path,
    server: Command,
    ready: &'a dyn Fn() -> bool,
    stop_signal: i32,
    client: Command,
    client_timeout: Duration,
    parse: &'a dyn Fn(&str) -> Option<f64>,
}

impl Serve<'_> {
    fn run(mut self) -> Result<Sample, String> {
        let (_, serr, so, se) = log_files(self.logs, &format!("{}.server", self.stem))?;
        self.server.stdin(Stdio::null()).stdout(so).stderr(se);
        let bound = self.client_timeout + Duration::from_secs(90);
        let server = runner::spawn(&mut self.server, bound, true, true).map_err(|e| format!("server: {e}"))?;
        let t = Instant::now();
        while !(self.ready)() {
            if !server.running() {
                let f = server.wait();
                return Err(format!("server ended at start-up: {}", failure(&f, &serr)));
            }
            if t.elapsed() > Duration::from_secs(30) {
                let f = server.stop(libc::SIGKILL, Duration::from_secs(5));
                return Err(format!("server not ready after 30 s: {}", failure(&f, &serr)));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let (cout, cerr, co, ce) = log_files(self.logs, &format!("{}.client", self.stem))?;
        self.client.stdin(Stdio::null()).stdout(co).stderr(ce);
        for var in ENV_CLEARED {
            self.client.env_remove(var);
        }
        let client = runner::spawn(&mut self.client, self.client_timeout, false, false);
        let client = client.map(|c| c.wait());
        let srv = server.stop(self.stop_signal, Duration::from_secs(20));
        let client = client.map_err(|e| format!("client: {e}"))?;
        if !client.success() {
            let server_note =
                if srv.ended_by(self.stop_signal) { String::new() } else { format!("; server {}", srv.describe()) };
            return Err(format!("client: {}{server_note}", failure(&client, &cerr)));
        }
        let text = fs::read_to_string(&cout).unwrap_or_default();
        let primary = (self.parse)(&text).ok_or("no result in the client's output")?;
        if !srv.ended_by(self.stop_signal) {
            return Err(format!("server: {}", failure(&srv, &serr)));
        }
        preloaded(&serr).map_err(|e| format!("server: {e}"))?;
        Ok(Sample {
            primary,
            wall_s: client.wall.as_secs_f64(),
            rss_kib: srv.peak_rss_kib,
            phys_kib: srv.peak_phys_kib,
            // Where the server's exit statistics reached its standard error.
            engine: parse_engine(&fs::read_to_string(&serr).unwrap_or_default()),
        })
    }
}

/// Overall requests per second of `redis-benchmark -q` (the harmonic mean of its tests,
/// i.e. total requests over total time).
pub fn parse_redis(text: &str) -> Option<f64> {
    let rates: Vec<f64> = text
        .split(['\r', '\n'])
        .filter_map(|l| {
            let (_, rest) = l.split_once(": ")?;
            let num =
                rest.strip_suffix(" requests per second").or_else(|| rest.split(" requests per second").next())?;
            if !rest.contains("requests per second") {
                return None;
            }
            num.trim().parse::<f64>().ok().filter(|r| *r > 0.0)
        })
        .collect();
    if rates.is_empty() {
        return None;
    }
    Some(rates.len() as f64 / rates.iter().map(|r| 1.0 / r).sum::<f64>())
}

/// The warm-up run of redis makes 1/REDIS_WARM of the requests.
const REDIS_WARM: u64 = 5;

struct Redis {
    server: PathBuf,
    client: PathBuf,
    shim: PathBuf,
    dir: PathBuf,
    requests: u64,
    s: Settings,
}

impl Case for Redis {
    fn name(&self) -> String {
        "redis".into()
    }
    fn group(&self) -> &'static str {
        "redis"
    }
    fn metric(&self) -> Metric {
        REQ_PER_S
    }
    fn warm_fraction(&self) -> Option<f64> {
        Some(1.0 / REDIS_WARM as f64)
    }
    fn run(&self, alloc: &Allocator, warm: bool) -> Result<Sample, String> {
        let port = free_port()?;
        let mut server = Command::new(&self.server);
        server.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]);
        server.args(["--daemonize", "no", "--protected-mode", "no"]).arg("--dir").arg(&self.dir).current_dir(&self.dir);
        // Debian's redis-server links jemalloc: its glibc baseline needs the forwarding shim.
        alloc.apply(&mut server, (alloc.name == "glibc").then_some(self.shim.as_path()));
        ask_for_statistics(&mut server, alloc);
        let n = if warm { (self.requests / REDIS_WARM).max(1) } else { self.requests };
        let mut client = Command::new(&self.client);
        client.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-n", &n.to_string(), "-r", "100000", "-d", "256"]);
        client.args(["-P", "16", "-t", "set,get,lpush,lpop,hset", "-q"]);
        Serve {
            stem: format!("redis.{}", alloc.name),
            logs: &self.s.logs,
            server,
            ready: &|| tcp_ready(port),
            stop_signal: libc::SIGTERM,
            client,
            client_timeout: self.s.timeout(),
            parse: &parse_redis,
        }
        .run()
    }
}

/// `Requests/sec:` of wrk.
pub fn parse_wrk(text: &str) -> Option<f64> {
    text.lines().find_map(|l| l.trim().strip_prefix("Requests/sec:")?.trim().parse().ok())
}

struct Nginx {
    nginx: PathBuf,
    wrk: PathBuf,
    prefix: PathBuf,
    secs: u64,
    s: Settings,
}

impl Case for Nginx {
    fn name(&self) -> String {
        "nginx".into()
    }
    fn group(&self) -> &'static str {
        "nginx"
    }
    fn metric(&self) -> Metric {
        REQ_PER_S
    }
    fn run(&self, alloc: &Allocator, warm: bool) -> Result<Sample, String> {
        let port = free_port()?;
        let p = self.prefix.display();
        // SAFETY: geteuid has no preconditions.
        let user = if unsafe { libc::geteuid() } == 0 { "user root;\n" } else { "" };
        let conf = format!(
            "daemon off;\nmaster_process on;\nworker_processes 1;\n{user}pid {p}/nginx.pid;\nerror_log {p}/logs/error.log warn;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  default_type text/html;\n  client_body_temp_path {p}/tmp/body;\n\
             \x20 proxy_temp_path {p}/tmp/proxy;\n  fastcgi_temp_path {p}/tmp/fastcgi;\n  uwsgi_temp_path {p}/tmp/uwsgi;\n\
             \x20 scgi_temp_path {p}/tmp/scgi;\n\
             \x20 server {{\n    listen 127.0.0.1:{port};\n    root {p}/html;\n    location / {{ index index.html; }}\n  }}\n}}\n"
        );
        let conf_path = self.prefix.join("nginx.conf");
        fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
        let mut server = Command::new(&self.nginx);
        server.arg("-p").arg(&self.prefix).arg("-c").arg(&conf_path).arg("-e").arg(self.prefix.join("logs/error.log"));
        server.current_dir(&self.prefix);
        alloc.apply(&mut server, None);
        ask_for_statistics(&mut server, alloc);
        let secs = if warm { 1 } else { self.secs };
        let mut client = Command::new(&self.wrk);
        client.args(["-t1", "-c32", &format!("-d{secs}s"), &format!("http://127.0.0.1:{port}/")]);
        Serve {
            stem: format!("nginx.{}", alloc.name),
            logs: &self.s.logs,
            server,
            ready: &|| tcp_ready(port),
            stop_signal: libc::SIGTERM,
            client,
            client_timeout: Duration::from_secs(secs + 60),
            parse: &parse_wrk,
        }
        .run()
    }
}

/// `tps = N (without initial connection time)` of pgbench.
pub fn parse_pgbench(text: &str) -> Option<f64> {
    text.lines().find_map(|l| l.trim().strip_prefix("tps = ")?.split_whitespace().next()?.parse().ok())
}

/// A PostgreSQL cluster in a temporary directory, removed when the last case is dropped.
struct PgCluster {
    base: PathBuf,
    data: PathBuf,
    /// Run the server as this user and group (when the harness runs as root).
    ids: Option<(u32, u32)>,
    bin: PathBuf,
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.base);
    }
}

struct Postgres {
    cluster: Arc<PgCluster>,
    pgbench: PathBuf,
    pg_isready: Option<PathBuf>,
    secs: u64,
    s: Settings,
}

/// A PostgreSQL program: in `PATH` or the newest `/usr/lib/postgresql/*/bin`.
fn pg_program(name: &str) -> Option<PathBuf> {
    which(name).or_else(|| {
        let mut dirs: Vec<PathBuf> =
            fs::read_dir("/usr/lib/postgresql").ok()?.flatten().map(|e| e.path().join("bin").join(name)).collect();
        dirs.sort_by_key(|p| p.to_string_lossy().split('/').filter_map(|t| t.parse::<u32>().ok()).next());
        dirs.into_iter().rev().find(|p| p.is_file())
    })
}

impl Postgres {
    fn prepare(s: &Settings) -> Result<Postgres, String> {
        let missing = |n: &str| format!("{n} not found (apt-get install postgresql)");
        let postgres = pg_program("postgres").ok_or_else(|| missing("postgres"))?;
        let initdb = pg_program("initdb").ok_or_else(|| missing("initdb"))?;
        let pgbench = pg_program("pgbench").ok_or_else(|| missing("pgbench"))?;
        // SAFETY: geteuid has no preconditions; getpwnam returns a pointer to static data
        // (or null), read at once on this thread.
        let ids = unsafe {
            if libc::geteuid() == 0 {
                let pw = libc::getpwnam(c"postgres".as_ptr());
                if pw.is_null() {
                    return Err("running as root and there is no user `postgres` to run the server as".into());
                }
                Some(((*pw).pw_uid, (*pw).pw_gid))
            } else {
                None
            }
        };
        remove_stale_clusters();
        let base = std::env::temp_dir().join(format!("nevermore-bench-pg-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        fs::create_dir_all(&base).map_err(|e| e.to_string())?;
        if let Some((u, g)) = ids {
            std::os::unix::fs::chown(&base, Some(u), Some(g)).map_err(|e| format!("chown {}: {e}", base.display()))?;
        }
        let cluster = Arc::new(PgCluster { data: base.join("data"), base, ids, bin: postgres });
        let (_, err, fo, fe) = log_files(&s.logs, "postgres.initdb")?;
        let mut init = cluster.command(&initdb);
        init.arg("-D").arg(&cluster.data).args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        ]);
        let f = runner::spawn(init.stdout(fo).stderr(fe), Duration::from_secs(120), false, false)
            .map_err(|e| e.to_string())?
            .wait();
        if !f.success() {
            return Err(format!("initdb: {}", failure(&f, &err)));
        }
        let pg = Postgres { cluster, pgbench, pg_isready: pg_program("pg_isready"), secs: s.secs(5, 15), s: s.clone() };
        // Fill the database once, under glibc.
        let scale = s.n(5, 10).to_string();
        let init_args = ["-i", "-q", "-s", &scale];
        pg.serve(&Allocator::glibc(), "postgres.init", &init_args, Duration::from_secs(600))
            .map_err(|e| format!("pgbench -i: {e}"))?;
        Ok(pg)
    }

    /// Runs the server under `alloc` with pgbench `args` as the client.
    fn serve(&self, alloc: &Allocator, stem: &str, args: &[&str], timeout: Duration) -> Result<Sample, String> {
        let port = free_port()?;
        let c = &self.cluster;
        let mut server = c.command(&c.bin);
        server.arg("-D").arg(&c.data).args([
            "-p",
            &port.to_string(),
            "-c",
            "fsync=off",
            "-c",
            "listen_addresses=127.0.0.1",
        ]);
        server.arg("-c").arg(format!("unix_socket_directories={}", c.base.display()));
        alloc.apply(&mut server, None);
        ask_for_statistics(&mut server, alloc);
        let mut client = Command::new(&self.pgbench);
        client.args(args).args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres", "postgres"]);
        let ready = || match &self.pg_isready {
            Some(p) => Command::new(p)
                .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
                .stdin(Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
            None => tcp_ready(port),
        };
        let init = args.first() == Some(&"-i");
        let parse = |t: &str| if init { Some(0.0) } else { parse_pgbench(t) };
        Serve {
            stem: stem.to_string(),
            logs: &self.s.logs,
            server,
            ready: &ready,
            stop_signal: libc::SIGINT,
            client,
            client_timeout: timeout,
            parse: &parse,
        }
        .run()
    }
}

/// Removes the clusters of earlier runs that were killed before they could clean up.
fn remove_stale_clusters() {
    let Ok(dir) = fs::read_dir(std::env::temp_dir()) else { return };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("nevermore-bench-pg-").and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

impl PgCluster {
    fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(&self.base);
        if let Some((u, g)) = self.ids {
            use std::os::unix::process::CommandExt;
            cmd.uid(u).gid(g);
        }
        cmd
    }
}

impl Case for Postgres {
    fn name(&self) -> String {
        "postgres".into()
    }
    fn group(&self) -> &'static str {
        "postgres"
    }
    fn metric(&self) -> Metric {
        TPS
    }
    fn run(&self, alloc: &Allocator, warm: bool) -> Result<Sample, String> {
        let secs = if warm { 1 } else { self.secs };
        let t = secs.to_string();
        self.serve(
            alloc,
            &format!("postgres.{}", alloc.name),
            &["-c4", "-j2", "-T", &t],
            Duration::from_secs(secs + 120),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_results() {
        assert_eq!(parse_result("noise\nRESULT ns_per_op=41.5 other=2\n", "ns_per_op"), Some(41.5));
        assert_eq!(parse_result("RESULT a=1 ops_per_sec=3e6\n", "ops_per_sec"), Some(3e6));
        assert_eq!(parse_result("RESULT ns_per_opx=1\n", "ns_per_op"), None);
        assert_eq!(parse_wrk("  Latency 1ms\nRequests/sec:  56012.34\nTransfer/sec: 1MB\n"), Some(56012.34));
        assert_eq!(
            parse_pgbench("latency average = 1 ms\ntps = 3807.5 (without initial connection time)\n"),
            Some(3807.5)
        );
        let redis = "SET: rps=0.0 (overall: nan) avg_msec=nan\rSET: 400000.00 requests per second, p50=0.8 msec\n\
                     GET: 400000.00 requests per second, p50=0.5 msec\nLPUSH: 200000.00 requests per second\n";
        // 3 tests: 3 / (1/400k + 1/400k + 1/200k) = 300k.
        let r = parse_redis(redis).unwrap();
        assert!((r - 300000.0).abs() < 1e-6, "{r}");
        assert_eq!(parse_redis("nothing"), None);
    }

    #[test]
    fn a_run_without_its_library_fails() {
        let log = std::env::temp_dir().join(format!("nevermore-bench-preload-{}.err", std::process::id()));
        fs::write(&log, "warming up\n").unwrap();
        assert_eq!(preloaded(&log), Ok(()));
        fs::write(
            &log,
            "ERROR: ld.so: object 'target/release/libnevermore.so' from LD_PRELOAD cannot be preloaded \
             (cannot open shared object file): ignored.\n",
        )
        .unwrap();
        assert!(preloaded(&log).unwrap_err().contains("the library was not loaded: ERROR: ld.so: object"));
        fs::remove_file(&log).unwrap();
    }

    #[test]
    fn engine_state_comes_from_the_busiest_process() {
        let block = |pid: u32, allocs: u64, live: u64, vmas: u64| {
            format!(
                "=={pid}== nevermore stats\n=={pid}==   allocations        {allocs}\n\
                 =={pid}==   mirrors            {live} live, 9 peak, 819 made, 814 retired (epoch 819)\n\
                 =={pid}==   degrade mode       2 epochs reused retired addresses (one-time address space: 1 of 2 MiB used)\n\
                 =={pid}==   VMAs               {vmas} (page tables 132 KiB)\n"
            )
        };
        let text = format!("noise\n{}RESULT x=1\n{}", block(10, 500, 3, 40), block(11, 90_000, 5, 41));
        assert_eq!(parse_engine(&text), Some(Engine { mirrors_live: 5, mirrors_peak: 9, vmas: 41, degraded: 2 }));
        // A block without every line (cut short) does not count.
        assert_eq!(parse_engine("==3==   allocations  5\n==3==   VMAs  40 (page tables 1 KiB)\n"), None);
        assert_eq!(parse_engine("no statistics here\n"), None);
    }

    #[test]
    fn generated_c_has_functions() {
        let c = generate_c(3);
        assert!(c.contains("int f2(int x)") && c.contains("f1(x >> 1)"));
    }
}
