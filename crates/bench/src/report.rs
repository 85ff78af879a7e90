//! Results: the CSV (every repetition) and the Markdown tables (medians, ranges, ratios).

use std::fmt::Write as _;

use crate::stats::{self, Summary};
use crate::workloads::{Engine, Metric, Sample};

/// The measurements of one allocator on one case.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    pub alloc: String,
    pub samples: Vec<Sample>,
    pub failures: Vec<String>,
    /// Repetitions not run (after a timeout, or a very slow run in quick mode).
    pub skipped: usize,
}

/// All allocators on one case (a workload, or one thread count of larson).
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub name: String,
    pub group: String,
    pub threads: Option<u32>,
    pub metric: Metric,
    pub cells: Vec<Cell>,
}

/// The baseline of every ratio.
pub const BASELINE: &str = "glibc";

/// What is reported per run: the case's metric, then memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantity {
    Primary,
    PeakRss,
    PeakPhys,
}

impl Quantity {
    pub const ALL: [Quantity; 3] = [Quantity::Primary, Quantity::PeakRss, Quantity::PeakPhys];

    pub fn value(self, s: &Sample) -> f64 {
        match self {
            Quantity::Primary => s.primary,
            Quantity::PeakRss => s.rss_kib as f64,
            Quantity::PeakPhys => s.phys_kib as f64,
        }
    }

    fn key(self, m: &Metric) -> &'static str {
        match self {
            Quantity::Primary => m.key,
            Quantity::PeakRss => "peak_rss_kib",
            Quantity::PeakPhys => "peak_phys_kib",
        }
    }

    fn unit(self, m: &Metric) -> &'static str {
        match self {
            Quantity::Primary => m.label,
            _ => "KiB",
        }
    }

    fn higher_is_better(self, m: &Metric) -> bool {
        self == Quantity::Primary && m.higher_is_better
    }
}

impl Cell {
    pub fn values(&self, q: Quantity) -> Vec<f64> {
        self.samples.iter().map(|s| q.value(s)).collect()
    }

    pub fn summary(&self, q: Quantity) -> Option<Summary> {
        stats::summarize(&self.values(q))
    }

    /// The alias engine's state at exit, for the runs that reported it.
    pub fn engines(&self) -> Vec<Engine> {
        self.samples.iter().filter_map(|s| s.engine).collect()
    }
}

impl CaseResult {
    pub fn cell(&self, alloc: &str) -> Option<&Cell> {
        self.cells.iter().find(|c| c.alloc == alloc)
    }

    /// Median of `alloc` over the median of glibc.
    pub fn ratio(&self, alloc: &str, q: Quantity) -> Option<f64> {
        let base = self.cell(BASELINE)?.summary(q)?.median;
        stats::ratio(self.cell(alloc)?.summary(q)?.median, base)
    }

    /// How many times slower than glibc (throughputs inverted), for the time chart.
    pub fn slowdown(&self, alloc: &str) -> Option<f64> {
        let base = self.cell(BASELINE)?.summary(Quantity::Primary)?.median;
        let v = self.cell(alloc)?.summary(Quantity::Primary)?.median;
        stats::slowdown(v, base, self.metric.higher_is_better)
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(v: Option<f64>) -> String {
    v.map(|x| format!("{x}")).unwrap_or_default()
}

/// One row per case × allocator × quantity, with every repetition in `values`.
pub fn csv(results: &[CaseResult]) -> String {
    let mut out = String::from(
        "workload,allocator,metric,unit,higher_is_better,runs,failed_runs,median,min,max,ratio_vs_glibc,values\n",
    );
    for r in results {
        for c in &r.cells {
            for q in Quantity::ALL {
                let (key, unit, higher) = (q.key(&r.metric), q.unit(&r.metric), q.higher_is_better(&r.metric));
                csv_row(&mut out, &r.name, c, (key, unit, higher), &c.values(q), r.ratio(&c.alloc, q));
            }
            let engines = c.engines();
            if engines.is_empty() {
                continue;
            }
            for (key, get) in ENGINE_FIELDS {
                let values: Vec<f64> = engines.iter().map(|e| get(e) as f64).collect();
                csv_row(&mut out, &r.name, c, (key, "count", false), &values, None);
            }
        }
    }
    out
}

/// One CSV row: `what` is (metric key, unit, higher is better); `values` every run's value.
fn csv_row(out: &mut String, case: &str, c: &Cell, what: (&str, &str, bool), values: &[f64], ratio: Option<f64>) {
    let s = stats::summarize(values);
    let shown: Vec<String> = values.iter().map(|v| format!("{v}")).collect();
    let row = [
        csv_field(case),
        csv_field(&c.alloc),
        what.0.to_string(),
        csv_field(what.1),
        what.2.to_string(),
        values.len().to_string(),
        c.failures.len().to_string(),
        num(s.map(|s| s.median)),
        num(s.map(|s| s.min)),
        num(s.map(|s| s.max)),
        num(ratio),
        shown.join(" "),
    ];
    let _ = writeln!(out, "{}", row.join(","));
}

/// The alias engine's numbers at exit, by CSV key.
type EngineField = (&'static str, fn(&Engine) -> u64);
const ENGINE_FIELDS: [EngineField; 4] = [
    ("mirrors_live_at_exit", |e| e.mirrors_live),
    ("mirrors_peak", |e| e.mirrors_peak),
    ("vmas_at_exit", |e| e.vmas),
    ("degraded_epochs", |e| e.degraded),
];

/// A number with about three significant digits.
pub fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn median_range(s: Option<Summary>, scale: f64) -> String {
    match s {
        Some(s) if s.n > 1 => {
            format!("{} ({}–{})", fmt_num(s.median * scale), fmt_num(s.min * scale), fmt_num(s.max * scale))
        }
        Some(s) => fmt_num(s.median * scale),
        None => "–".into(),
    }
}

fn ratio_cell(r: Option<f64>) -> String {
    r.map(|r| format!("{r:.2}")).unwrap_or_else(|| "–".into())
}

/// One Markdown table per case.
pub fn markdown_tables(results: &[CaseResult]) -> String {
    let mut out = String::new();
    for r in results {
        let better = if r.metric.higher_is_better { "higher is better" } else { "lower is better" };
        let _ = writeln!(out, "### {} — {} ({better})\n", r.name, r.metric.label);
        let _ = writeln!(
            out,
            "| allocator | {} median (min–max) | × glibc | peak RSS MiB | × glibc | peak physical MiB | × glibc |",
            r.metric.label
        );
        out += "|---|---:|---:|---:|---:|---:|---:|\n";
        for c in &r.cells {
            if c.samples.is_empty() {
                let why = c.failures.last().map(|f| f.replace('|', "\\|")).unwrap_or_else(|| "no run".into());
                if why.starts_with("warm-up: too slow") {
                    let why = why.trim_start_matches("warm-up: too slow: ");
                    let _ = writeln!(out, "| {} | not measured (too slow): {why} | | | | | |", c.alloc);
                } else {
                    let _ = writeln!(out, "| {} | failed ({} runs): {why} | | | | | |", c.alloc, c.failures.len());
                }
                continue;
            }
            let mut name = c.alloc.clone();
            if !c.failures.is_empty() {
                let runs = c.failures.len() + c.samples.len();
                name += &format!(" ({} of {runs} runs failed)", c.failures.len());
            }
            if c.skipped > 0 {
                name += &format!(" ({} slow runs skipped)", c.skipped);
            }
            let mib = 1.0 / 1024.0;
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} | {} | {} | {} |",
                median_range(c.summary(Quantity::Primary), 1.0),
                ratio_cell(r.ratio(&c.alloc, Quantity::Primary)),
                median_range(c.summary(Quantity::PeakRss), mib),
                ratio_cell(r.ratio(&c.alloc, Quantity::PeakRss)),
                median_range(c.summary(Quantity::PeakPhys), mib),
                ratio_cell(r.ratio(&c.alloc, Quantity::PeakPhys)),
            );
        }
        out += "\n";
        let engines: Vec<(&Cell, Vec<Engine>)> =
            r.cells.iter().map(|c| (c, c.engines())).filter(|(_, e)| !e.is_empty()).collect();
        if !engines.is_empty() {
            out += "nevermore's alias engine when the program ended (medians of the runs, from `stats=1`):\n\n";
            out += "| allocator | mirrors live | mirrors peak | VMAs | epochs in degrade mode |\n|---|---:|---:|---:|---:|\n";
            for (c, e) in engines {
                let med = |get: fn(&Engine) -> u64| {
                    let v: Vec<f64> = e.iter().map(|x| get(x) as f64).collect();
                    stats::median(&v).map(|m| format!("{m}")).unwrap_or_else(|| "–".into())
                };
                let cells: Vec<String> = ENGINE_FIELDS.iter().map(|&(_, get)| med(get)).collect();
                let _ = writeln!(out, "| {} | {} |", c.alloc, cells.join(" | "));
            }
            out += "\n";
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::workloads::{MOPS, NS_PER_OP};

    fn sample(primary: f64, rss_kib: u64, phys_kib: u64) -> Sample {
        Sample { primary, wall_s: 1.0, rss_kib, phys_kib, engine: None }
    }

    pub(crate) fn fixture() -> Vec<CaseResult> {
        let cell = |alloc: &str, samples: Vec<Sample>, failures: Vec<&str>| Cell {
            alloc: alloc.into(),
            samples,
            failures: failures.into_iter().map(String::from).collect(),
            skipped: 0,
        };
        vec![
            CaseResult {
                name: "loop".into(),
                group: "loop".into(),
                threads: None,
                metric: NS_PER_OP,
                cells: vec![
                    cell(
                        "glibc",
                        vec![sample(40.0, 2048, 1024), sample(42.0, 2048, 1024), sample(50.0, 4096, 1024)],
                        vec![],
                    ),
                    cell(
                        "nevermore",
                        vec![sample(100.0, 8192, 2048), sample(84.0, 8192, 2048)],
                        vec!["exit status 1: boom"],
                    ),
                    cell("scudo", vec![], vec!["killed by signal 11 (Segmentation fault)"]),
                ],
            },
            CaseResult {
                name: "larson-2t".into(),
                group: "larson".into(),
                threads: Some(2),
                metric: MOPS,
                cells: vec![
                    cell("glibc", vec![sample(20.0, 1024, 1024)], vec![]),
                    cell("nevermore", vec![sample(10.0, 1024, 512)], vec![]),
                ],
            },
        ]
    }

    #[test]
    fn ratios_against_glibc() {
        let r = &fixture()[0];
        assert_eq!(r.ratio("nevermore", Quantity::Primary), Some(92.0 / 42.0));
        assert_eq!(r.ratio("nevermore", Quantity::PeakRss), Some(4.0));
        assert_eq!(r.ratio("nevermore", Quantity::PeakPhys), Some(2.0));
        assert_eq!(r.ratio("scudo", Quantity::Primary), None);
        assert_eq!(r.ratio("glibc", Quantity::Primary), Some(1.0));
        // Throughput: half the ops per second is twice as slow.
        assert_eq!(fixture()[1].slowdown("nevermore"), Some(2.0));
    }

    #[test]
    fn csv_has_every_repetition() {
        let csv = csv(&fixture());
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0].split(',').count(), 12);
        // 2 + 3 cells × 3 quantities, plus the header.
        assert_eq!(lines.len(), 1 + 5 * 3);
        assert!(lines.contains(&"loop,glibc,ns_per_op,ns/op,false,3,0,42,40,50,1,40 42 50"), "{csv}");
        assert!(lines.contains(&"loop,glibc,peak_rss_kib,KiB,false,3,0,2048,2048,4096,1,2048 2048 4096"), "{csv}");
        assert!(lines.contains(&"loop,scudo,ns_per_op,ns/op,false,0,1,,,,,"), "{csv}");
        assert!(lines.contains(&"larson-2t,nevermore,mops_per_s,Mops/s,true,1,0,10,10,10,0.5,10"), "{csv}");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
    }

    #[test]
    fn markdown_tables_render() {
        let md = markdown_tables(&fixture());
        assert!(md.contains("### loop — ns/op (lower is better)"), "{md}");
        assert!(md.contains("### larson-2t — Mops/s (higher is better)"), "{md}");
        assert!(
            md.contains("| glibc | 42.0 (40.0–50.0) | 1.00 | 2.00 (2.00–4.00) | 1.00 | 1.00 (1.00–1.00) | 1.00 |"),
            "{md}"
        );
        assert!(
            md.contains("| nevermore (1 of 3 runs failed) | 92.0 (84.0–100.0) | 2.19 | 8.00 (8.00–8.00) | 4.00 |"),
            "{md}"
        );
        assert!(md.contains("| scudo | failed (1 runs): killed by signal 11 (Segmentation fault) |"), "{md}");
        assert!(md.contains("| nevermore | 10.0 | 0.50 |"), "{md}");
    }

    #[test]
    fn engine_state_is_tabled_and_in_the_csv() {
        let mut results = fixture();
        let engine = |live| Some(Engine { mirrors_live: live, mirrors_peak: 12, vmas: 40, degraded: 0 });
        let cell = &mut results[0].cells[1];
        cell.samples[0].engine = engine(5);
        cell.samples[1].engine = engine(7);
        let md = markdown_tables(&results);
        assert!(md.contains("nevermore's alias engine when the program ended"), "{md}");
        assert!(md.contains("| nevermore | 6 | 12 | 40 | 0 |"), "{md}");
        // Only the loop has engine numbers.
        assert_eq!(md.matches("alias engine when").count(), 1, "{md}");
        let csv = csv(&results);
        assert!(csv.lines().any(|l| l == "loop,nevermore,mirrors_live_at_exit,count,false,2,1,6,5,7,,5 7"), "{csv}");
        assert!(csv.lines().any(|l| l.starts_with("loop,nevermore,vmas_at_exit,count,false,2,1,40,")), "{csv}");
        assert!(!csv.contains("glibc,mirrors"), "{csv}");
    }

    #[test]
    fn numbers_keep_three_digits() {
        assert_eq!(fmt_num(56012.4), "56012");
        assert_eq!(fmt_num(123.45), "123.5");
        assert_eq!(fmt_num(4.567), "4.57");
        assert_eq!(fmt_num(0.1234), "0.123");
    }
}
