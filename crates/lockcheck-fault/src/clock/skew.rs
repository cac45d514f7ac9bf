//! What a clock fault does to a clock ([`ClockChange`], as the fields of a skew:
//! [`SkewUpdate`]), and a clock it can skew ([`SkewClock`]): on this machine's
//! page or on a node's host. The base of `clock`: it imports no sibling.

use anyhow::{bail, Result};
use lockcheck_journal::Effect;
use std::time::Duration;

/// The fields of a skew a change sets (a jump: the offset, and no strobe); the
/// others keep their value, the drift of its rate so far folded into its
/// offset first (`Skew::rebase`; on another host, lockcheck-clockset's).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SkewUpdate {
    pub offset_ns: Option<i64>,
    pub offset2_ns: Option<i64>,
    pub strobe_period_ns: Option<i64>,
    pub rate: Option<f64>,
}

/// What a clock fault does to the clocks it hits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClockChange {
    /// Jump by `offset_ns` (forward if positive).
    Jump { offset_ns: i64 },
    /// Run `rate` times as fast as real time.
    Rate { rate: f64 },
    /// Flip between two offsets every `period`.
    Strobe {
        offset_ns: i64,
        offset2_ns: i64,
        period: Duration,
    },
}

/// A clock a fault skews: a page mapped on this machine (`ClockControl`), or
/// one on a node's host (`RemoteClock`). Dropping it resets the clock.
pub trait SkewClock: Send + Sync {
    /// Applies `change` to the skew in effect, continuously (rebased to now).
    fn change(&self, change: ClockChange) -> Result<()>;
    /// Back to real time, at real speed.
    fn reset(&self) -> Result<()>;
    /// What the journal records of it, skewed, so that `recover` resets it.
    fn effect(&self, target: &str) -> Effect;
}

impl ClockChange {
    /// The fields of a skew it sets; an error for a rate or period no clock
    /// can have.
    pub fn update(&self) -> Result<SkewUpdate> {
        Ok(match *self {
            ClockChange::Jump { offset_ns } => SkewUpdate {
                offset_ns: Some(offset_ns),
                strobe_period_ns: Some(0),
                ..SkewUpdate::default()
            },
            ClockChange::Rate { rate } => {
                if !(rate.is_finite() && rate > 0.0) {
                    bail!("a clock rate must be a positive number, not {rate}");
                }
                SkewUpdate {
                    rate: Some(rate),
                    ..SkewUpdate::default()
                }
            }
            ClockChange::Strobe {
                offset_ns,
                offset2_ns,
                period,
            } => {
                let period_ns = i64::try_from(period.as_nanos()).unwrap_or(i64::MAX);
                if period_ns <= 0 {
                    bail!("a strobe period must be positive");
                }
                SkewUpdate {
                    offset_ns: Some(offset_ns),
                    offset2_ns: Some(offset2_ns),
                    strobe_period_ns: Some(period_ns),
                    rate: None,
                }
            }
        })
    }

    /// The parameters, as the history's nemesis value carries them.
    pub(super) fn describe(&self, value: &mut serde_json::Value) {
        let ms = |ns: i64| ns / 1_000_000;
        match *self {
            ClockChange::Jump { offset_ns } => value["offset_ms"] = ms(offset_ns).into(),
            ClockChange::Rate { rate } => value["rate"] = rate.into(),
            ClockChange::Strobe {
                offset_ns,
                offset2_ns,
                period,
            } => {
                value["offset_ms"] = ms(offset_ns).into();
                value["offset2_ms"] = ms(offset2_ns).into();
                value["period_ms"] = (period.as_millis() as u64).into();
            }
        }
    }
}
