//! What `lockcheck run` records in verdict.json besides the verdict: the run's
//! workload, seed and settings, its figures, its faults planned against started,
//! and what the report needs to say about it (an election, an incident replayed,
//! the adapter under test).

use crate::faults::FaultAccount;
use crate::figures::Figures;
use crate::resource::{self, Fence, Mode};
use lockcheck_check::provoked::Provoked;
use lockcheck_check::Verdict;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What `lockcheck run` writes to verdict.json (and prints with `--json`): the
/// checker's verdict and the run's figures. Fields added after the first
/// versions are optional or default, so that older run directories still read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    #[serde(flatten)]
    pub verdict: Verdict,
    pub workload: String,
    pub seed: u64,
    /// The lock service, as the workload's `backend.kind` names it (`redis`,
    /// `postgres-lease`, ...).
    pub backend: String,
    pub resource: Mode,
    /// Which resource the workers wrote to, and its fence. Verdicts written before
    /// the PostgreSQL resource have neither: lockcheck's own resource, and the
    /// fence `resource` implies (see [`crate::VerdictFile::parse`]).
    #[serde(default)]
    pub resource_kind: resource::Kind,
    pub fence: Fence,
    pub figures: Figures,
    pub run_dir: PathBuf,
    /// The folder of the workload file the run read: relative paths in it (an
    /// adapter program, an ssh config) are this folder's (`lockcheck shrink` and
    /// `replay` write the workload elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_dir: Option<PathBuf>,
    /// The workers fenced themselves this long before their own lease deadline (the
    /// report shows the window this leaves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_fencing_margin_ms: Option<u64>,
    /// `"election"` when the clients campaigned (`mode = "election"`): the report
    /// then names leaderships and how long a deposed leader went on acting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// An election's `[clients] on_lease_loss` (`"ignore"` or `"exit"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_lease_loss: Option<OnLeaseLoss>,
    /// The workload's `[incident]`: the failure it replays and the rule that prevents it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<Incident>,
    /// The lock client under test, when it is an adapter program (`[client]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientInfo>,
    /// Whether the run exercised the danger (history.md v1.2, "Deposed holders
    /// and provoked runs"): a valid run that did not provoke is no evidence that
    /// a fence holds. Absent in verdicts written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provoked: Option<Provoked>,
    /// Where the servers ran (`local`, `docker`, `external`, `ssh`): the
    /// workload's `runtime`, or `--runtime` instead. Shrink and replay rerun there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The image a docker run's containers started from (`--image`, the
    /// workload's `backend.image`, or the backend's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The workload's faults, planned against started.
    #[serde(default)]
    pub faults: FaultAccount,
    /// Some planned fault never started, and `--allow-missed-faults` was not given:
    /// whatever `valid` says, the run did not test what its workload claims (exit 3).
    #[serde(default)]
    pub missed_faults: bool,
}

impl RunReport {
    /// Whether the clients campaigned for leadership rather than took a lock.
    pub fn election(&self) -> bool {
        self.mode.as_deref() == Some(ELECTION)
    }
}

/// `mode` of a run whose clients campaigned (`mode = "election"`).
pub const ELECTION: &str = "election";

/// What a leader does once it learns that its lease is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnLeaseLoss {
    /// Goes on acting: the leader that keeps acting after losing its lease.
    #[default]
    Ignore,
    /// Stops acting at once and resigns (then campaigns again, as a restarted
    /// process would), as Kubernetes' scheduler exits on a lost lease.
    Exit,
}

impl OnLeaseLoss {
    /// As a workload (and verdict.json) spells it.
    pub fn name(self) -> &'static str {
        match self {
            OnLeaseLoss::Ignore => "ignore",
            OnLeaseLoss::Exit => "exit",
        }
    }
}

/// A workload's `[incident]`: the published failure it replays (catalogue entries,
/// `workloads/incidents/`) and the design rule that prevents it; the guidance
/// names both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Incident {
    /// Where the failure was published: an issue, a vendor's page.
    pub source: String,
    /// The design rule that prevents it.
    pub rule: String,
}

impl Incident {
    /// How the guidance opens for a run that replays it.
    pub fn sentence(&self) -> String {
        format!(
            "This run replays {}; the design rule that prevents it: {}.",
            self.source.trim_end_matches('.'),
            self.rule.trim_end_matches('.')
        )
    }
}

/// The adapter a run tested, as its `init` reply named it (shown in the report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientInfo {
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// The optional ops it supports (`renew`, `held`).
    pub ops: Vec<String>,
    /// `"library"` when holders stopped writing on the library's own `held`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_fencing: Option<String>,
}
