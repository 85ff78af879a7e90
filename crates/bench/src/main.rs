//! nevermore-bench: runs workloads under glibc, other allocators and nevermore, alternating
//! between allocators inside every repetition, and reports medians, ranges and ratios against
//! glibc for time (or throughput), peak RSS and peak physical memory.
//!
//! `cargo run --release -p nevermore-bench -- [--quick|--full] [--only W,...] [--alloc A,...]
//! [--lib NAME=PATH.so]... [--reps N] [--out DIR]`

mod allocs;
mod plot;
mod procmem;
mod report;
mod runner;
mod stats;
mod workloads;

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

use allocs::{Allocator, NevermoreSource};
use report::{CaseResult, Cell};
use workloads::{Settings, WORKLOADS};

#[derive(Parser, Debug)]
#[command(name = "nevermore-bench", version, about = "Benchmarks nevermore against glibc and other allocators")]
struct Args {
    /// Short loads and 3 repetitions: a few minutes (the default).
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// Longer loads and 7 repetitions.
    #[arg(long)]
    full: bool,
    /// Only these workloads (loop, aim9, sparse, larson, sqlite, python, gcc, redis, nginx, postgres).
    #[arg(long, value_delimiter = ',', value_name = "WORKLOAD,...")]
    only: Option<Vec<String>>,
    /// Only these allocators (glibc, glibc-debug, jemalloc, tcmalloc, mimalloc, scudo,
    /// nevermore-detect, nevermore-prevent, or nevermore for both); glibc always runs.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    alloc: Option<Vec<String>>,
    /// An extra allocator to preload, e.g. --lib ffmalloc=/opt/ff/libffmallocnpmt.so (repeatable).
    #[arg(long, value_name = "NAME=PATH.so", value_parser = allocs::parse_lib)]
    lib: Vec<(String, PathBuf)>,
    /// The nevermore library to use instead of building it (cargo build --release -p nevermore).
    #[arg(long, value_name = "PATH.so")]
    nevermore: Option<PathBuf>,
    /// Measured repetitions per workload and allocator (after one warm-up run).
    #[arg(long)]
    reps: Option<usize>,
    /// Multiplies every workload's size and duration (e.g. 0.01 for a smoke test).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Where results.md, results.csv and the SVG charts go.
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
}

/// In quick mode, an allocator whose measured run of a fixed amount of work took longer is not
/// repeated (fixed-duration server loads always are).
const QUICK_SLOW: std::time::Duration = std::time::Duration::from_secs(10);

/// A short description of this machine for the report.
fn machine() -> Vec<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':').map(|(_, v)| v.trim().to_string()))
        .unwrap_or_else(|| "?".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:")?.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kib| format!("{:.1} GiB", kib as f64 / 1048576.0))
        .unwrap_or_else(|| "?".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let glibc = std::process::Command::new("ldd")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout).lines().next().map(|l| l.rsplit(' ').next().unwrap_or("").to_string())
        })
        .unwrap_or_default();
    vec![format!("CPUs (nproc): {cpus}; model: {model}"), format!("memory: {mem}; kernel: {kernel}; glibc: {glibc}")]
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(args) {
        eprintln!("nevermore-bench: {e}");
        std::process::exit(2);
    }
}

fn notice(msg: &str) {
    eprintln!("notice: {msg}");
}

fn run(args: Args) -> Result<(), String> {
    let full = args.full;
    if !(args.scale > 0.0 && args.scale.is_finite()) {
        return Err("--scale must be a positive number".into());
    }
    runner::install_interrupt_handler();
    let reps = args.reps.unwrap_or(if full { 7 } else { 3 }).max(1);
    let out = args.out.clone();
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let out = out.canonicalize().map_err(|e| e.to_string())?;
    let settings = Settings { full, scale: args.scale, work: out.join("work"), logs: out.join("logs") };
    let started = Instant::now();

    let mut notices = vec![];
    let source = match &args.nevermore {
        Some(p) => NevermoreSource::Path(allocs::absolute_lib(p)?),
        None => NevermoreSource::Build,
    };
    let libs =
        args.lib.iter().map(|(n, p)| Ok((n.clone(), allocs::absolute_lib(p)?))).collect::<Result<Vec<_>, String>>()?;
    let allocators: Vec<Allocator> = allocs::resolve(args.alloc.as_deref(), &libs, source, &mut notices);
    for n in &notices {
        notice(n);
    }

    let selected: Vec<String> = match &args.only {
        Some(list) => list.iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
        None => WORKLOADS.iter().map(|s| s.to_string()).collect(),
    };
    let mut prepared = vec![];
    for w in &selected {
        if !WORKLOADS.contains(&w.as_str()) {
            let msg = format!("skipping workload {w}: unknown (known: {})", WORKLOADS.join(", "));
            notice(&msg);
            notices.push(msg);
            continue;
        }
        eprintln!("preparing {w} …");
        match workloads::prepare(w, &settings) {
            Ok(cases) => prepared.extend(cases),
            Err(e) => {
                let msg = format!("skipping workload {w}: {e}");
                notice(&msg);
                notices.push(msg);
            }
        }
    }
    eprintln!("allocators: {}", allocators.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", "));

    let total = (prepared.len() * allocators.len() * (reps + 1)) as u64;
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut results: Vec<CaseResult> = vec![];
    for case in &prepared {
        let mut cells: Vec<Cell> =
            allocators.iter().map(|a| Cell { alloc: a.name.clone(), ..Cell::default() }).collect();
        let case_start = Instant::now();
        let mut given_up = vec![false; allocators.len()];
        // Round 0 is the warm-up. Inside a round the allocators alternate, starting one
        // further each round so that no allocator always runs right after the same one.
        for round in 0..=reps {
            for k in 0..allocators.len() {
                let i = (k + round) % allocators.len();
                let a = &allocators[i];
                if given_up[i] {
                    if round > 0 {
                        cells[i].skipped += 1;
                    }
                    pb.inc(1);
                    continue;
                }
                let what = if round == 0 { "warm-up".to_string() } else { format!("rep {round}/{reps}") };
                pb.set_message(format!("{} · {} · {what}", case.name(), a.name));
                let t = Instant::now();
                let mut r = case.run(a, round == 0);
                let took = t.elapsed();
                pb.inc(1);
                // A warm-up that does a fraction of the work tells whether the real run
                // would exceed the time limit: then do not start it.
                if let (0, Ok(_), Some(f)) = (round, &r, case.warm_fraction()) {
                    let predicted = took.as_secs_f64() / f;
                    if predicted > settings.timeout().as_secs_f64() {
                        r = Err(format!(
                            "too slow: the warm-up (1/{:.0} of the work) took {:.1} s, a run would take ~{predicted:.0} s (limit {} s)",
                            1.0 / f,
                            took.as_secs_f64(),
                            settings.timeout().as_secs()
                        ));
                    }
                }
                // Quick mode measures a very slow allocator once; a timeout ends its runs.
                let hopeless = r.as_ref().is_err_and(|e| e.contains("timed out") || e.starts_with("too slow"));
                let work_based = case.warm_fraction().is_some();
                if (!full && round > 0 && work_based && took > QUICK_SLOW) || hopeless {
                    given_up[i] = true;
                }
                match r {
                    Ok(s) if round > 0 => cells[i].samples.push(s),
                    Ok(_) => {}
                    Err(e) => {
                        // (println of a hidden bar, off a terminal, would print nothing)
                        pb.suspend(|| eprintln!("{} under {}: {e}", case.name(), a.name));
                        if round > 0 || given_up[i] {
                            cells[i].failures.push(if round == 0 { format!("warm-up: {e}") } else { e });
                        }
                    }
                }
            }
        }
        let failed: usize = cells.iter().map(|c| c.failures.len()).sum();
        let took = case_start.elapsed().as_secs_f64();
        pb.suspend(|| eprintln!("{}: done in {took:.0} s ({failed} failed runs)", case.name()));
        results.push(CaseResult {
            name: case.name(),
            group: case.group().to_string(),
            threads: case.threads(),
            metric: case.metric(),
            cells,
        });
    }
    pb.finish_and_clear();
    drop(prepared); // removes temporary databases

    let alloc_names: Vec<String> = allocators.iter().map(|a| a.name.clone()).collect();
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut md = String::from("# nevermore-bench results\n\n");
    md += &format!("- command: `{command}`\n");
    md += &format!(
        "- mode: {}, {reps} measured repetitions after one warm-up run, allocators alternating; took {:.0} s\n",
        if full { "full" } else { "quick" },
        started.elapsed().as_secs_f64()
    );
    for m in machine() {
        md += &format!("- {m}\n");
    }
    md += "- allocators:\n";
    for a in &allocators {
        let env: Vec<String> = a.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let how = match &a.preload {
            Some(p) => format!(
                "`LD_PRELOAD={}`{}",
                p.display(),
                if env.is_empty() { String::new() } else { format!(" `{}`", env.join(" ")) }
            ),
            None => "the system allocator (redis: through a shim to `__libc_malloc`)".into(),
        };
        md += &format!("  - {}: {how}\n", a.name);
    }
    if !notices.is_empty() {
        md += "- notices:\n";
        for n in &notices {
            md += &format!("  - {n}\n");
        }
    }
    md += "\nRatios are medians over glibc's median. Peak RSS counts a page once per mapping of it \
           (aliases count many times); peak physical memory is Pss (shared pages split between processes) with \
           nevermore's pool counted whole (its resident pages, mapped or not) instead of by its mappings, \
           plus page tables, sampled every 20 ms (or, where a sample takes longer than 4 ms, after four times \
           its length, so that the sampler takes at most a fifth of a processor) and summed over the process \
           tree.\n\n";
    md += &report::markdown_tables(&results);

    std::fs::write(out.join("results.md"), &md).map_err(|e| e.to_string())?;
    std::fs::write(out.join("results.csv"), report::csv(&results)).map_err(|e| e.to_string())?;
    plot::write_charts(&out, &results, &alloc_names).map_err(|e| format!("charts: {e}"))?;
    println!("{md}");
    eprintln!("wrote {}/results.md, results.csv, time_ratio.svg, memory_ratio.svg, scaling.svg", out.display());
    Ok(())
}
