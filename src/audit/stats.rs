//! The arithmetic of a scorecard: how sure k flagged runs of n make us, and the
//! middle of a handful of figures.

use serde::Serialize;

/// z for a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// A proportion's 95% interval, as fractions of 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

/// The Wilson score interval of `k` successes in `n` trials: unlike the normal
/// approximation it stays within [0, 1] and says something at k = 0 and k = n,
/// which is where an audit's scenarios mostly land (0 of 10: the rate may still be
/// up to 28%). `None` for no trials.
pub fn wilson(k: usize, n: usize) -> Option<Interval> {
    if n == 0 || k > n {
        return None;
    }
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    // At k = 0 and k = n the bound is exactly 0 or 1; rounding must not move it.
    Some(Interval {
        low: if k == 0.0 {
            0.0
        } else {
            (centre - half).max(0.0)
        },
        high: if k == n {
            1.0
        } else {
            (centre + half).min(1.0)
        },
    })
}

/// The median (the mean of the two middle values for an even count); `None` for none.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        n if n % 2 == 1 => Some(values[n / 2]),
        n => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 5e-5
    }

    /// Figures from the closed form worked by hand (and as R's
    /// `prop.test(k, n, correct = FALSE)$conf.int` gives them).
    #[test]
    fn wilson_matches_worked_figures() {
        for (k, n, low, high) in [
            (0, 10, 0.0, 0.27753),
            (10, 10, 0.72247, 1.0),
            (5, 10, 0.23659, 0.76341),
            (9, 10, 0.59585, 0.98212),
            (1, 10, 0.01788, 0.40415),
            (0, 1, 0.0, 0.79345),
            (1, 1, 0.20655, 1.0),
            (50, 100, 0.40383, 0.59617),
        ] {
            let i = wilson(k, n).unwrap();
            assert!(
                close(i.low, low) && close(i.high, high),
                "{k}/{n}: got [{:.5}, {:.5}], expected [{low}, {high}]",
                i.low,
                i.high
            );
        }
    }

    #[test]
    fn wilson_is_symmetric_and_holds_its_point() {
        for n in 1..=30 {
            for k in 0..=n {
                let i = wilson(k, n).unwrap();
                let j = wilson(n - k, n).unwrap();
                let p = k as f64 / n as f64;
                assert!(i.low <= p && p <= i.high, "{k}/{n}");
                assert!(close(i.low, 1.0 - j.high) && close(i.high, 1.0 - j.low));
            }
        }
        assert_eq!(wilson(0, 0), None);
        assert_eq!(wilson(3, 2), None);
    }

    #[test]
    fn median_of_odd_even_and_none() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }
}
