//! The arithmetic of a scorecard: how sure k flagged runs of n make us (the
//! Wilson interval of a rate; the exact one-sided Clopper–Pearson bound a "holds"
//! claim carries), and the middle of a handful of figures.

use serde::{Deserialize, Serialize};

/// z for a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// A proportion's 95% interval, as fractions of 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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

/// The exact (Clopper–Pearson) one-sided 95% upper bound on a failure rate after
/// `k` failures in `n` trials: the rate p at which seeing k or fewer failures has
/// probability 5%, i.e. the 0.95 quantile of Beta(k + 1, n - k). At k = 0 it is
/// 1 - 0.05^(1/n) (0 of 20: 13.9%, 0 of 30: 9.5%); at k = n, 1. `None` for no
/// trials. Exact rather than Wilson's: a claim that a fence holds is quoted as
/// "at most x%", and an approximation may not undershoot it.
pub fn upper_95(k: usize, n: usize) -> Option<f64> {
    if n == 0 || k > n {
        return None;
    }
    if k == n {
        return Some(1.0);
    }
    if k == 0 {
        return Some(1.0 - 0.05f64.powf(1.0 / n as f64));
    }
    let (a, b) = (k as f64 + 1.0, (n - k) as f64);
    // I_x(a, b) rises from 0 to 1 in x: bisect for 0.95 (60 halvings: below 1e-18).
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if incomplete_beta(a, b, mid) < 0.95 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(hi)
}

/// The regularized incomplete beta function I_x(a, b), by its continued fraction
/// (modified Lentz), on the side where it converges fast.
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * beta_fraction(a, b, x) / a
    } else {
        1.0 - ln_front.exp() * beta_fraction(b, a, 1.0 - x) / b
    }
}

fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    d = 1.0 / if d.abs() < TINY { TINY } else { d };
    let mut h = d;
    for m in 1..=300 {
        let m = f64::from(m);
        for num in [
            m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + num * d;
            d = 1.0 / if d.abs() < TINY { TINY } else { d };
            c = 1.0 + num / c;
            if c.abs() < TINY {
                c = TINY;
            }
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms: 15 digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let t = x + 7.5;
    let sum = G[1..]
        .iter()
        .enumerate()
        .fold(G[0], |s, (i, g)| s + g / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// `14m05s`.
pub fn minutes(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    format!("{}m{:02}s", s / 60, s % 60)
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

    /// Reference figures: the p at which P(X <= k | n, p) = 0.05, found by
    /// bisecting the binomial sum itself (not the beta function under test).
    #[test]
    fn the_exact_upper_bound_matches_the_binomial_sum() {
        for (k, n, want) in [
            (0, 1, 0.95),
            (0, 20, 0.139108),
            (0, 30, 0.095034),
            (0, 100, 0.029513),
            (1, 10, 0.394163),
            (1, 20, 0.216106),
            (2, 20, 0.282619),
            (5, 10, 0.777559),
            (3, 50, 0.147837),
            (9, 10, 0.994884),
            (10, 200, 0.083335),
        ] {
            let got = upper_95(k, n).unwrap();
            assert!((got - want).abs() < 2e-6, "{k}/{n}: {got} vs {want}");
        }
        assert_eq!(upper_95(4, 4), Some(1.0));
        assert_eq!(upper_95(0, 0), None);
        assert_eq!(upper_95(3, 2), None);
        // The bound falls as failure-free runs pile up, and rises with failures.
        for n in 1..60 {
            assert!(upper_95(0, n + 1).unwrap() < upper_95(0, n).unwrap());
            assert!(upper_95(1, n + 1).unwrap() > upper_95(0, n + 1).unwrap());
        }
    }

    #[test]
    fn median_of_odd_even_and_none() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }
}
