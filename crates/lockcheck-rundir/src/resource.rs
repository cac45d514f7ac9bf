//! The protected resource as verdict.json records it: which resource the workers
//! wrote to, and the fence a write's token had to pass. Value types: the resources
//! themselves (servers, conditional writes) are the runner's.

use serde::{Deserialize, Serialize};

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

/// Which resource the workers write to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// lockcheck's own TCP server in the controller.
    #[default]
    Lockcheck,
    /// A private PostgreSQL server, written with a conditional `UPDATE`.
    Postgres,
}
