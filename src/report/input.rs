//! What a report is made of ([`Input`]): the history, the verdict and what the run
//! recorded besides, and what is read off them (missed faults, the incident
//! replayed, the analyses).

use super::analysis;
use super::election;
use crate::check::calls::Calls;
use crate::check::Verdict;
use crate::history::{AppliedWrite, History};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What a report is made of. `run` holds verdict.json's keys besides the verdict's
/// own (the runner's figures), `workload` the workload file's text; both optional (a
/// bare history has neither).
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub title: &'a str,
    pub history: &'a History,
    pub resource: Option<&'a [AppliedWrite]>,
    pub verdict: &'a Verdict,
    pub run: Option<&'a Map<String, Value>>,
    pub workload: Option<&'a str>,
}

impl Input<'_> {
    /// The runner's note that workers fenced themselves: `self_fencing_margin_ms` in
    /// verdict.json, else a `self_fencing_margin_ms` key anywhere in the workload.
    pub fn self_fencing_margin_ms(&self) -> Option<u64> {
        self.run
            .and_then(|r| r.get("self_fencing_margin_ms"))
            .and_then(Value::as_u64)
            .or_else(|| {
                let w: toml::Table = self.workload?.parse().ok()?;
                find_key(&toml::Value::Table(w), "self_fencing_margin_ms")?
                    .as_integer()
                    .and_then(|i| u64::try_from(i).ok())
            })
    }

    /// The planned faults the run missed, from verdict.json's `faults` (written by
    /// `lockcheck run`); `None` where nothing was missed or the verdict has no run.
    pub fn missed_faults(&self) -> Option<MissedFaults> {
        MissedFaults::of(self.run?)
    }

    /// Whether the run was a leader election: `mode` in verdict.json, else the
    /// workload's own top-level `mode`.
    pub fn election(&self) -> bool {
        let recorded = self.run.and_then(|r| r.get("mode")).and_then(Value::as_str);
        let mode = match recorded {
            Some(m) => Some(m.to_string()),
            None => self
                .workload
                .and_then(|w| w.parse::<toml::Table>().ok())
                .and_then(|w| w.get("mode")?.as_str().map(String::from)),
        };
        mode.as_deref() == Some("election")
    }

    /// The incident the run replays: `incident` in verdict.json, else the
    /// workload's own `[incident]` table.
    pub fn incident(&self) -> Option<Incident> {
        if let Some(i) = self.run.and_then(|r| r.get("incident")) {
            return serde_json::from_value(i.clone()).ok();
        }
        let w: toml::Table = self.workload?.parse().ok()?;
        w.get("incident")?.clone().try_into().ok()
    }

    /// An election's `on_lease_loss`, as verdict.json records it.
    fn on_lease_loss(&self) -> Option<String> {
        self.run?.get("on_lease_loss")?.as_str().map(String::from)
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
    pub fn of(run: &Map<String, Value>) -> Option<MissedFaults> {
        let faults = run.get("faults")?;
        let missed = faults.get("missed")?.as_array()?;
        let unseen = faults
            .get("unseen")
            .and_then(Value::as_str)
            .map(String::from);
        if missed.is_empty() && unseen.is_none() {
            return None;
        }
        let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        Some(MissedFaults {
            planned: n(faults, "planned"),
            never: missed
                .iter()
                .map(|m| n(m, "planned").saturating_sub(n(m, "started")))
                .sum(),
            lines: missed
                .iter()
                .map(|m| {
                    format!(
                        "faults[{}] ({}): {} of {} started; {}",
                        n(m, "fault"),
                        m.get("kind").and_then(Value::as_str).unwrap_or("?"),
                        n(m, "started"),
                        n(m, "planned"),
                        m.get("why").and_then(Value::as_str).unwrap_or("")
                    )
                })
                .chain(unseen.clone())
                .collect(),
            allowed: faults.get("allowed").and_then(Value::as_bool) == Some(true),
            unseen,
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

/// The first value under `key`, at the top of a TOML document or in any table below.
pub(super) fn find_key<'a>(v: &'a toml::Value, key: &str) -> Option<&'a toml::Value> {
    let t = v.as_table()?;
    t.get(key)
        .or_else(|| t.values().find_map(|child| find_key(child, key)))
}
