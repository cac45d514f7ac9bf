//! What a report is made of ([`Input`]): the history, the verdict and what the run
//! recorded besides, and what is read off them (missed faults, the incident
//! replayed, the analyses).

use super::analysis;
use super::election;
use lockcheck_check::calls::Calls;
use lockcheck_check::{AnomalyKind, Verdict};
use lockcheck_history::{AppliedWrite, History};
use lockcheck_rundir::{FaultAccount, Incident, RunReport};
use serde::Deserialize;

/// What a report is made of. `run` is the runner's record (verdict.json as
/// `lockcheck run` wrote it), `workload` the workload file's text; both optional
/// (a bare history has neither).
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub title: &'a str,
    pub history: &'a History,
    pub resource: Option<&'a [AppliedWrite]>,
    pub verdict: &'a Verdict,
    pub run: Option<&'a RunReport>,
    pub workload: Option<&'a str>,
}

impl Input<'_> {
    /// The runner's note that workers fenced themselves: `self_fencing_margin_ms` in
    /// verdict.json (recorded since self-fencing exists, so no run needs its
    /// workload read for it).
    pub fn self_fencing_margin_ms(&self) -> Option<u64> {
        self.run?.self_fencing_margin_ms
    }

    /// The planned faults the run missed, from verdict.json's `faults` (written by
    /// `lockcheck run`); `None` where nothing was missed or the verdict has no run.
    pub fn missed_faults(&self) -> Option<MissedFaults> {
        MissedFaults::of(&self.run?.faults)
    }

    /// Whether the run was a leader election: `mode` in verdict.json (recorded
    /// since elections exist).
    pub fn election(&self) -> bool {
        self.run.is_some_and(RunReport::election)
    }

    /// The incident the run replays: `incident` in verdict.json. A run directory
    /// whose verdict.json holds no run's record (a history checked beside its
    /// workload, or an old lockcheck's file with the run nested under `run`) has
    /// only the workload's own `[incident]` table to say it.
    pub fn incident(&self) -> Option<Incident> {
        if let Some(run) = self.run {
            return run.incident.clone();
        }
        WorkloadNotes::parse(self.workload?).ok()?.incident
    }

    /// An election's `on_lease_loss`, as verdict.json records it.
    fn on_lease_loss(&self) -> Option<String> {
        Some(self.run?.on_lease_loss?.name().to_string())
    }

    /// Runs the analyses (zombie windows, fencing replay, guidance).
    pub fn analyze(&self) -> analysis::Analysis {
        self.analyze_calls(&Calls::of_run(self.history, self.resource))
    }

    /// The analyses over calls already read off the history; an election's in its
    /// own words (leaderships, deposed leaders acting).
    pub fn analyze_calls(&self, calls: &Calls) -> analysis::Analysis {
        let mut a = analysis::analyze(
            self.history,
            calls,
            self.resource,
            self.self_fencing_margin_ms(),
        );
        if self.election() {
            let l = election::leaderships(&a.zombies, calls, self.on_lease_loss());
            a.guidance = election::guidance(&l, &a.guidance);
            a.election = Some(l);
        }
        if let Some(i) = self.incident() {
            a.guidance.sentence = format!("{} {}", i.sentence(), a.guidance.sentence);
        }
        a
    }
}

/// verdict.json's `faults` as the report reads it: planned faults that never
/// started, each in words (`faults[0] (pause): 0 of 1 started; due at 5.0 s; ...`).
#[derive(Debug, Clone, PartialEq)]
pub struct MissedFaults {
    pub planned: u64,
    /// Occurrences planned that never started.
    pub never: u64,
    pub lines: Vec<String>,
    /// `--allow-missed-faults` was given: listed, not failing.
    pub allowed: bool,
    /// The faults started, but the run saw nothing of them (why).
    pub unseen: Option<String>,
}

impl MissedFaults {
    pub fn of(faults: &FaultAccount) -> Option<MissedFaults> {
        if faults.missed.is_empty() && faults.unseen.is_none() {
            return None;
        }
        Some(MissedFaults {
            planned: faults.planned,
            never: faults
                .missed
                .iter()
                .map(|m| m.planned.saturating_sub(m.started))
                .sum(),
            lines: faults
                .missed
                .iter()
                .map(|m| {
                    format!(
                        "faults[{}] ({}): {} of {} started; {}",
                        m.fault, m.kind, m.started, m.planned, m.why
                    )
                })
                .chain(faults.unseen.clone())
                .collect(),
            allowed: faults.allowed,
            unseen: faults.unseen.clone(),
        })
    }

    /// One line: how many planned faults never started.
    pub fn headline(&self) -> String {
        if self.never == 0 && self.unseen.is_some() {
            return format!(
                "the planned faults started, but the run saw nothing of them{}",
                if self.allowed {
                    " (allowed by --allow-missed-faults)"
                } else {
                    ": the run did not test what its workload claims"
                }
            );
        }
        format!(
            "{} of {} planned faults never started{}",
            self.never,
            self.planned,
            if self.allowed {
                " (allowed by --allow-missed-faults)"
            } else {
                ": the run did not test what its workload claims"
            }
        )
    }
}

/// What the report reads of a run's workload file: its top-level `allow` and its
/// `[incident]`, with the types the runner reads them with (`run::workload`);
/// every other key is the runner's. A key of the same name in another table is
/// not these (the report once took the first `allow` anywhere in the file).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct WorkloadNotes {
    #[serde(default)]
    pub allow: Vec<AnomalyKind>,
    #[serde(default)]
    pub incident: Option<Incident>,
}

impl WorkloadNotes {
    /// A workload file's text, read for these keys; the error names the key and
    /// the line.
    pub fn parse(text: &str) -> Result<WorkloadNotes, toml::de::Error> {
        toml::from_str(text)
    }
}
