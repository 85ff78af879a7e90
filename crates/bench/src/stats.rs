//! Medians, ranges and ratios of repeated measurements.

/// Median, minimum and maximum of a set of repetitions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

/// The median (mean of the two middle values for an even count); `None` for no finite value.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 { v[mid] } else { (v[mid - 1] + v[mid]) / 2.0 })
}

/// Summarizes the finite values; `None` if there is none.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    let median = median(values)?;
    let finite = values.iter().copied().filter(|x| x.is_finite());
    let min = finite.clone().fold(f64::INFINITY, f64::min);
    let max = finite.clone().fold(f64::NEG_INFINITY, f64::max);
    Some(Summary { median, min, max, n: finite.count() })
}

/// `value / baseline`, or `None` when the baseline is missing, zero or not finite.
pub fn ratio(value: f64, baseline: f64) -> Option<f64> {
    if !value.is_finite() || !baseline.is_finite() || baseline <= 0.0 || value < 0.0 {
        return None;
    }
    Some(value / baseline)
}

/// How many times slower than the baseline ("normalized time"): `value / baseline` for a
/// lower-is-better metric, `baseline / value` for a throughput.
pub fn slowdown(value: f64, baseline: f64, higher_is_better: bool) -> Option<f64> {
    if higher_is_better {
        ratio(baseline, value)
    } else {
        ratio(value, baseline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.5]), Some(7.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN]), None);
        assert_eq!(median(&[f64::NAN, 5.0, 1.0]), Some(3.0));
    }

    #[test]
    fn summary_min_max() {
        let s = summarize(&[5.0, 1.0, 9.0, 3.0, 4.0]).unwrap();
        assert_eq!(s, Summary { median: 4.0, min: 1.0, max: 9.0, n: 5 });
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn ratios() {
        assert_eq!(ratio(30.0, 10.0), Some(3.0));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(1.0, f64::NAN), None);
        assert_eq!(slowdown(20.0, 10.0, false), Some(2.0));
        // Half the throughput is twice the time.
        assert_eq!(slowdown(50.0, 100.0, true), Some(2.0));
    }
}
