//! verdict.json's `faults`: the workload's faults, planned against started, and
//! why any fell short. The nemesis keeps the tally; this is what it comes to.

use serde::{Deserialize, Serialize};

/// The workload's faults, planned against started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultAccount {
    /// Occurrences the workload asks for (its schedule laid out over the run).
    pub planned: u64,
    /// Occurrences that started (repeats beyond the plan included).
    pub started: u64,
    /// The entries that started fewer occurrences than planned, and why.
    pub missed: Vec<MissedFault>,
    /// `--allow-missed-faults`: the missed faults are listed, and the run does not
    /// fail for them.
    pub allowed: bool,
    /// The faults started, but the run saw nothing of them, and why (no grant
    /// after the first fault began): as untested as a fault that never started,
    /// and allowed the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unseen: Option<String>,
    /// `unseen` because the fault can never reach what the holder asks (its
    /// library reads a clock the fault does not move): a property of the lock
    /// under test, not of this run's timing, so another run would see no more.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub out_of_reach: bool,
}

impl FaultAccount {
    /// Planned faults did not all start, or started unseen, and nobody allowed it:
    /// the run did not test what its workload claims.
    pub fn failed(&self) -> bool {
        (!self.missed.is_empty() || self.unseen.is_some()) && !self.allowed
    }
}

/// One `[[faults]]` entry that started fewer occurrences than planned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MissedFault {
    /// Its index in the workload's `[[faults]]` (from 0).
    pub fault: usize,
    /// What the history calls its start (`pause`, `kill`, `partition`, ...).
    pub kind: String,
    pub planned: u64,
    pub started: u64,
    /// In words: due when, and what stopped it.
    pub why: String,
}
