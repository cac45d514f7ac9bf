//! A fault timeline, decided before the run from its seed: which fault starts
//! when and for how long. Pure: the same faults, plan and seed always give the
//! same timeline, so a run that found a bug can be replayed.
//!
//! Three rules hold for every timeline:
//! - nothing starts during the quiet period at the start (the cluster settles,
//!   clients connect, the history gets a clean baseline);
//! - one fault at a time, so that each anomaly points at one cause;
//! - everything has ended `heal` before the run ends, so that the last checks
//!   (final reads, releases) happen on a healed cluster.

use anyhow::{bail, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// How faults follow one another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// In turn (0, 1, 2, 0, ...), `gap` apart.
    Interval { gap: Duration },
    /// Chosen at random, gaps drawn between half and one and a half `mean_gap`.
    Random { mean_gap: Duration },
}

/// The run's shape as the schedule sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub run: Duration,
    pub quiet: Duration,
    pub heal: Duration,
    pub mix: Mix,
}

/// One occurrence of fault `fault` (an index into the run's faults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub at: Duration,
    pub fault: usize,
    pub duration: Duration,
}

/// The timeline for faults lasting `durations` (one per fault).
pub fn timeline(durations: &[Duration], plan: &Plan, seed: u64) -> Result<Vec<Slot>> {
    if durations.is_empty() {
        return Ok(Vec::new());
    }
    let Some(end) = plan.run.checked_sub(plan.heal) else {
        bail!(
            "the final heal ({:?}) is longer than the run ({:?})",
            plan.heal,
            plan.run
        );
    };
    if plan.quiet >= end {
        bail!(
            "no time for faults: quiet period {:?}, run {:?}, final heal {:?}",
            plan.quiet,
            plan.run,
            plan.heal
        );
    }
    if let Some(i) = durations.iter().position(|d| d.is_zero()) {
        bail!("fault {i} lasts no time");
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut slots = Vec::new();
    let mut at = plan.quiet;
    let mut turn = 0usize;
    // Each step either places a fault or stops: a fault that does not fit
    // before the heal is not placed, nor is anything after it.
    loop {
        let (fault, gap) = match plan.mix {
            Mix::Interval { gap } => (turn % durations.len(), gap),
            Mix::Random { mean_gap } => {
                let g = mean_gap.as_nanos() as u64;
                let gap = Duration::from_nanos(rng.gen_range(g / 2..=g + g / 2));
                (rng.gen_range(0..durations.len()), gap)
            }
        };
        let duration = durations[fault];
        if at + duration > end {
            break;
        }
        slots.push(Slot {
            at,
            fault,
            duration,
        });
        at += duration + gap;
        turn += 1;
    }
    Ok(slots)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn plan(mix: Mix) -> Plan {
        Plan {
            run: 60 * S,
            quiet: 5 * S,
            heal: 10 * S,
            mix,
        }
    }

    fn holds_the_rules(slots: &[Slot], p: &Plan) {
        assert!(!slots.is_empty());
        assert!(slots[0].at >= p.quiet, "quiet period kept");
        for w in slots.windows(2) {
            assert!(w[0].at + w[0].duration <= w[1].at, "one at a time: {w:?}");
        }
        let last = slots.last().unwrap();
        assert!(
            last.at + last.duration <= p.run - p.heal,
            "healed before the end"
        );
    }

    #[test]
    fn interval_takes_faults_in_turn() {
        let p = plan(Mix::Interval { gap: 4 * S });
        let slots = timeline(&[2 * S, 3 * S], &p, 1).unwrap();
        holds_the_rules(&slots, &p);
        assert_eq!(
            slots[0],
            Slot {
                at: 5 * S,
                fault: 0,
                duration: 2 * S
            }
        );
        assert_eq!(
            slots[1],
            Slot {
                at: 11 * S,
                fault: 1,
                duration: 3 * S
            }
        );
        assert_eq!(slots[2].fault, 0);
        assert_eq!(slots.len(), 7, "{slots:?}");
    }

    #[test]
    fn random_mix_is_seeded() {
        let p = plan(Mix::Random { mean_gap: 3 * S });
        let d = [S, 2 * S, 3 * S];
        let a = timeline(&d, &p, 7).unwrap();
        holds_the_rules(&a, &p);
        assert_eq!(a, timeline(&d, &p, 7).unwrap(), "same seed, same schedule");
        assert_ne!(a, timeline(&d, &p, 8).unwrap());
        let kinds: std::collections::BTreeSet<usize> = a.iter().map(|s| s.fault).collect();
        assert!(kinds.len() > 1, "a mix: {a:?}");
    }

    #[test]
    fn impossible_plans_are_errors_not_empty_schedules() {
        let p = Plan {
            run: 10 * S,
            quiet: 5 * S,
            heal: 6 * S,
            mix: Mix::Interval { gap: S },
        };
        assert!(timeline(&[S], &p, 0).is_err());
        assert!(timeline(&[Duration::ZERO], &plan(Mix::Interval { gap: S }), 0).is_err());
        assert!(timeline(&[], &p, 0).unwrap().is_empty());
    }
}
