//! What every resource shares: the fence a write's token must pass, what a write
//! came to, and the figures of what was applied. The base of `resource`: both
//! resources import it.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Whether the resource checks fencing tokens (`verdict.json`'s `resource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Fenced,
    Unfenced,
}

/// The fence: how a write's token must compare with the highest token applied, as
/// the `WHERE` clause of a conditional write says it (`stored <= new`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fence {
    /// No token condition: every write is applied.
    #[serde(rename = "none")]
    Off,
    /// `token <= $2`: a token not lower than the highest applied. The holder's own
    /// later writes (same token) pass; a deposed holder's (lower token) do not.
    #[serde(rename = "<=")]
    NotBelow,
    /// `token < $2`: only a token higher than the highest applied, so each token
    /// writes once: a holder's second write with the same token is rejected too.
    #[serde(rename = "<")]
    Above,
}

impl Fence {
    /// Whether a write with `token` passes, the highest token applied being `highest`
    /// (none before any write).
    pub fn admits(self, token: u64, highest: Option<u64>) -> bool {
        match (self, highest) {
            (Fence::Off, _) | (_, None) => true,
            (Fence::NotBelow, Some(h)) => token >= h,
            (Fence::Above, Some(h)) => token > h,
        }
    }

    pub fn mode(self) -> Mode {
        match self {
            Fence::Off => Mode::Unfenced,
            Fence::NotBelow | Fence::Above => Mode::Fenced,
        }
    }

    /// As a workload spells it.
    pub fn name(self) -> &'static str {
        match self {
            Fence::Off => "none",
            Fence::NotBelow => "<=",
            Fence::Above => "<",
        }
    }
}

/// What the resource has applied so far, for the live status line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub applied: u64,
    /// Applied although a higher token had been applied before.
    pub stale_accepted: u64,
}

/// Reads the stats from elsewhere (the live status line).
#[derive(Clone)]
pub struct StatsHandle(Arc<dyn Fn() -> Stats + Send + Sync>);

impl StatsHandle {
    pub fn new(f: impl Fn() -> Stats + Send + Sync + 'static) -> StatsHandle {
        StatsHandle(Arc::new(f))
    }

    pub fn get(&self) -> Stats {
        (self.0)()
    }
}

/// What a write came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    Applied {
        seq: u64,
    },
    /// The fence said no (`stale-token`, `missing-token`).
    Rejected(String),
}
