//! SVG charts (plotters, SVG backend only: no fonts needed).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::{CaseResult, Quantity, BASELINE};

const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Colors stay the same per allocator across charts.
fn color_of(allocs: &[String], name: &str) -> RGBColor {
    PALETTE[allocs.iter().position(|a| a == name).unwrap_or(0) % PALETTE.len()]
}

/// Writes `time_ratio.svg`, `memory_ratio.svg` and `scaling.svg` into `dir`.
pub fn write_charts(dir: &Path, results: &[CaseResult], allocs: &[String]) -> Result<(), String> {
    let groups: Vec<String> = results.iter().map(|r| r.name.clone()).collect();
    let others: Vec<&String> = allocs.iter().filter(|a| a.as_str() != BASELINE).collect();
    let width = (260 + 70 * groups.len() as u32).max(900);

    let series = |f: &dyn Fn(&CaseResult, &str) -> Option<f64>| -> Vec<(String, Vec<Option<f64>>)> {
        others.iter().map(|a| (a.to_string(), results.iter().map(|r| f(r, a)).collect())).collect()
    };

    let path = dir.join("time_ratio.svg");
    let root = SVGBackend::new(&path, (width, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    grouped_bars(
        &root,
        &root,
        "Time vs glibc (time or ns/op ratio; for throughputs glibc/value) — lower is better",
        "× glibc (log scale)",
        &groups,
        &series(&|r, a| r.slowdown(a)),
        allocs,
    )?;
    root.present().map_err(err)?;
    drop(root);

    let path = dir.join("memory_ratio.svg");
    let root = SVGBackend::new(&path, (width, 960)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (top, bottom) = root.split_vertically(480);
    grouped_bars(
        &root,
        &top,
        "Peak RSS vs glibc (counts every mapping of a page) — lower is better",
        "× glibc (log scale)",
        &groups,
        &series(&|r, a| r.ratio(a, Quantity::PeakRss)),
        allocs,
    )?;
    grouped_bars(
        &root,
        &bottom,
        "Peak physical memory vs glibc (Pss, plus the whole allocator pool and page tables) — lower is better",
        "× glibc (log scale)",
        &groups,
        &series(&|r, a| r.ratio(a, Quantity::PeakPhys)),
        allocs,
    )?;
    root.present().map_err(err)?;
    drop(root);

    scaling(&dir.join("scaling.svg"), results, allocs)
}

/// Bars per group and allocator on a log scale, with a line at 1 (glibc). Group names are
/// drawn on `root` (absolute pixel positions) under the plot of `area`.
fn grouped_bars(
    root: &DrawingArea<SVGBackend, Shift>,
    area: &DrawingArea<SVGBackend, Shift>,
    title: &str,
    y_desc: &str,
    groups: &[String],
    series: &[(String, Vec<Option<f64>>)],
    allocs: &[String],
) -> Result<(), String> {
    let values = series.iter().flat_map(|(_, v)| v.iter().flatten().copied()).filter(|v| *v > 0.0 && v.is_finite());
    let (mut lo, mut hi) = (0.5f64, 2.0f64);
    for v in values {
        lo = lo.min(v / 1.5);
        hi = hi.max(v * 3.0); // head room for the legend
    }
    let n = groups.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..n, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(2)
        .x_label_formatter(&|_| String::new())
        .y_desc(y_desc)
        .y_label_formatter(&|v| crate::report::fmt_num(*v))
        .draw()
        .map_err(err)?;
    let k = series.len().max(1) as f64;
    let w = 0.8 / k;
    for (j, (name, vals)) in series.iter().enumerate() {
        let color = color_of(allocs, name);
        let bars = vals.iter().enumerate().filter_map(|(i, v)| {
            let v = v.filter(|v| v.is_finite() && *v > 0.0)?.clamp(lo, hi);
            let x0 = i as f64 + 0.1 + j as f64 * w;
            Some(Rectangle::new([(x0, lo), (x0 + w * 0.9, v)], color.filled()))
        });
        chart
            .draw_series(bars)
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart.draw_series(LineSeries::new([(0.0, 1.0), (n, 1.0)], BLACK.stroke_width(1))).map_err(err)?;
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }
    let style = ("sans-serif", 13).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, g) in groups.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, lo));
        root.draw(&Text::new(g.as_str(), (px, py + 6), style.clone())).map_err(err)?;
    }
    Ok(())
}

/// Larson throughput against the thread count, one line per allocator.
fn scaling(path: &Path, results: &[CaseResult], allocs: &[String]) -> Result<(), String> {
    let larson: Vec<&CaseResult> = results.iter().filter(|r| r.group == "larson" && r.threads.is_some()).collect();
    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let lines: Vec<(String, Vec<(f64, f64)>)> = allocs
        .iter()
        .map(|a| {
            let pts = larson
                .iter()
                .filter_map(|r| {
                    let m = r.cell(a)?.summary(Quantity::Primary)?.median;
                    Some((r.threads? as f64, m))
                })
                .collect();
            (a.clone(), pts)
        })
        .collect();
    let ymax = lines.iter().flat_map(|(_, p)| p.iter().map(|(_, y)| *y)).fold(0.0f64, f64::max).max(1e-9) * 1.15;
    let xmax = larson.iter().filter_map(|r| r.threads).max().unwrap_or(8) as f64 + 0.5;
    let label = larson.first().map(|r| r.metric.label).unwrap_or("Mops/s");
    let mut chart = ChartBuilder::on(&root)
        .caption("larson: throughput vs threads — higher is better", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0.5f64..xmax, 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("threads")
        .y_desc(label)
        .x_label_formatter(&|v| if (v - v.round()).abs() < 1e-9 { format!("{v:.0}") } else { String::new() })
        .draw()
        .map_err(err)?;
    if larson.is_empty() {
        let style = ("sans-serif", 16).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Center));
        root.draw(&Text::new("no larson results in this run", (450, 260), style)).map_err(err)?;
    }
    for (name, pts) in lines.iter().filter(|(_, p)| !p.is_empty()) {
        let color = color_of(allocs, name);
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled()))).map_err(err)?;
    }
    if lines.iter().any(|(_, p)| !p.is_empty()) {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_svgs_with_names() {
        let dir = std::env::temp_dir().join(format!("nevermore-bench-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let results = crate::report::tests::fixture();
        let allocs: Vec<String> = ["glibc", "nevermore", "scudo"].iter().map(|s| s.to_string()).collect();
        write_charts(&dir, &results, &allocs).unwrap();
        for f in ["time_ratio.svg", "memory_ratio.svg", "scaling.svg"] {
            let svg = std::fs::read_to_string(dir.join(f)).unwrap();
            assert!(svg.contains("<svg"), "{f}");
            assert!(svg.contains("nevermore"), "{f}: legend");
            if f != "scaling.svg" {
                assert!(svg.contains(">loop<") || svg.contains("loop"), "{f}: workload name");
                assert!(svg.contains("larson-2t"), "{f}: workload name");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
