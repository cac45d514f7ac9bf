//! The scorecard: each scenario's runs added up (flagged k of N with its interval,
//! time to the first anomaly, zombie windows, stale writes), what did not apply or
//! did not fit the budget, and the verdict with its evidence.

use super::battery::{Battery, Fencing, NotApplicable, Recipe, ScenarioWorkload};
use super::decide::{decide, AuditVerdict};
use super::execute::{Executed, Outcome, RunRecord};
use super::stats::{median, wilson, Interval};
use crate::run::figures::Percentiles;
use serde::Serialize;
use std::path::PathBuf;

/// One scenario's runs, added up.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioCard {
    pub scenario: String,
    pub recipe: Recipe,
    pub fencing: Fencing,
    pub description: String,
    /// Its workload file, as every run ran it.
    pub workload: PathBuf,
    pub runs_planned: u32,
    /// Runs checked that tested what the scenario claims (valid or flagged): N.
    pub counted: usize,
    /// Of those, runs with anomalies: k.
    pub flagged: usize,
    /// The Wilson 95% interval of k/N (none before a run counted).
    pub interval_95: Option<Interval>,
    /// Kinds of anomaly found, over all its runs.
    pub anomalies: Vec<String>,
    pub median_first_anomaly_s: Option<f64>,
    /// Every zombie window of every run, pooled, in ms.
    pub zombie_window_ms: Option<Percentiles>,
    pub stale_writes_accepted: usize,
    pub writes_rejected_by_fence: u64,
    /// Runs that did not count, each with why.
    pub not_counted: Vec<String>,
    pub runs: Vec<RunRecord>,
}

impl ScenarioCard {
    fn of(s: &ScenarioWorkload, runs_planned: u32, runs: Vec<RunRecord>) -> ScenarioCard {
        let counted: Vec<&RunRecord> = runs.iter().filter(|r| r.outcome.counts()).collect();
        let flagged = counted
            .iter()
            .filter(|r| r.outcome == Outcome::Flagged)
            .count();
        let mut anomalies: Vec<String> = counted
            .iter()
            .flat_map(|r| r.anomalies.iter().cloned())
            .collect();
        anomalies.sort();
        anomalies.dedup();
        let not_counted = runs
            .iter()
            .filter(|r| !r.outcome.counts())
            .map(|r| {
                let why = match r.outcome {
                    Outcome::Unknown => "the checker gave up within its limits".to_string(),
                    Outcome::MissedFaults => {
                        "a planned fault never started: it did not test the scenario".to_string()
                    }
                    Outcome::Unobserved => format!(
                        "valid, not counted: {}",
                        r.error.as_deref().unwrap_or("it saw nothing of the fault")
                    ),
                    _ => r.error.clone().unwrap_or_else(|| "no verdict".into()),
                };
                format!("run {} (seed {}): {why}", r.run, r.seed)
            })
            .collect();
        ScenarioCard {
            scenario: s.scenario.name(),
            recipe: s.scenario.recipe,
            fencing: s.scenario.fencing,
            description: s.scenario.recipe.describe().to_string(),
            workload: s.workload.path.clone(),
            runs_planned,
            counted: counted.len(),
            flagged,
            interval_95: wilson(flagged, counted.len()),
            anomalies,
            median_first_anomaly_s: median(
                counted.iter().filter_map(|r| r.first_anomaly_s).collect(),
            ),
            zombie_window_ms: Percentiles::of(
                counted
                    .iter()
                    .flat_map(|r| r.zombie_windows_ms.iter().copied())
                    .collect(),
            ),
            stale_writes_accepted: counted.iter().map(|r| r.stale_writes_accepted).sum(),
            writes_rejected_by_fence: counted.iter().map(|r| r.writes_rejected_by_fence).sum(),
            not_counted,
            runs,
        }
    }

    /// `holder-pause-unfenced: flagged 10/10 (double-holder)`: one line of evidence.
    pub fn evidence(&self) -> String {
        let mut s = format!(
            "{}: flagged {}/{}",
            self.scenario, self.flagged, self.counted
        );
        if !self.anomalies.is_empty() {
            s += &format!(" ({})", self.anomalies.join(", "));
        }
        if self.stale_writes_accepted > 0 {
            s += &format!(", {} stale writes accepted", self.stale_writes_accepted);
        }
        if self.writes_rejected_by_fence > 0 {
            s += &format!(
                ", {} stale writes rejected by the fence",
                self.writes_rejected_by_fence
            );
        }
        s
    }
}

/// Runs of a scenario the budget (or a signal) left out.
#[derive(Debug, Clone, Serialize)]
pub struct LeftOut {
    pub scenario: String,
    pub runs: Vec<u32>,
}

/// One recipe's stale writes accepted under each fencing mode it ran in.
#[derive(Debug, Clone, Serialize)]
pub struct StaleWrites {
    pub recipe: Recipe,
    /// Fencing mode name -> stale writes accepted over its counted runs.
    pub accepted: Vec<(String, usize)>,
    pub rejected_by_fence: u64,
}

/// What `lockcheck audit` found: audit.json, and what the terminal, JUnit and
/// audit.html show.
#[derive(Debug, Clone, Serialize)]
pub struct Scorecard {
    pub backend: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<Vec<String>>,
    pub verdict: AuditVerdict,
    pub verdict_sentence: String,
    pub evidence: Vec<String>,
    pub runs_per_scenario: u32,
    pub jobs: usize,
    pub budget_s: f64,
    pub elapsed_s: f64,
    /// Every scenario has at least one run that counts.
    pub complete: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    pub scenarios: Vec<ScenarioCard>,
    pub not_applicable: Vec<NotApplicable>,
    pub left_out: Vec<LeftOut>,
    pub stale_writes: Vec<StaleWrites>,
    /// The audit's directory: scenarios/, runs/, audit.json, audit.xml, audit.html.
    pub dir: PathBuf,
}

/// What the scorecard is made of besides the runs.
pub struct Setting<'a> {
    pub backend: String,
    pub token: bool,
    pub client: Option<Vec<String>>,
    pub battery: &'a Battery,
    pub workloads: &'a [ScenarioWorkload],
    pub runs: u32,
    pub jobs: usize,
    pub budget_s: f64,
    pub dir: PathBuf,
}

impl Scorecard {
    pub fn of(setting: Setting<'_>, executed: Executed) -> Scorecard {
        let Executed {
            records,
            left_out: slots,
            elapsed,
            interrupted,
        } = executed;
        let scenarios: Vec<ScenarioCard> = setting
            .workloads
            .iter()
            .zip(records)
            .map(|(s, runs)| ScenarioCard::of(s, setting.runs, runs))
            .collect();
        let mut left_out: Vec<LeftOut> = Vec::new();
        for slot in slots {
            let name = &scenarios[slot.scenario].scenario;
            match left_out.iter_mut().find(|l| &l.scenario == name) {
                Some(l) => l.runs.push(slot.run),
                None => left_out.push(LeftOut {
                    scenario: name.clone(),
                    runs: vec![slot.run],
                }),
            }
        }
        let mut stale_writes: Vec<StaleWrites> = Vec::new();
        for c in scenarios.iter().filter(|c| c.counted > 0) {
            let entry = match stale_writes.iter_mut().position(|s| s.recipe == c.recipe) {
                Some(i) => &mut stale_writes[i],
                None => {
                    stale_writes.push(StaleWrites {
                        recipe: c.recipe,
                        accepted: Vec::new(),
                        rejected_by_fence: 0,
                    });
                    stale_writes.last_mut().expect("just pushed")
                }
            };
            entry
                .accepted
                .push((c.fencing.name().to_string(), c.stale_writes_accepted));
            entry.rejected_by_fence += c.writes_rejected_by_fence;
        }
        let (verdict, evidence) = decide(&setting.backend, setting.token, &scenarios);
        Scorecard {
            complete: scenarios.iter().all(|c| c.counted > 0),
            backend: setting.backend,
            client: setting.client,
            verdict,
            verdict_sentence: verdict.sentence().to_string(),
            evidence,
            runs_per_scenario: setting.runs,
            jobs: setting.jobs,
            budget_s: setting.budget_s,
            elapsed_s: elapsed.as_secs_f64(),
            interrupted: interrupted.map(str::to_string),
            scenarios,
            not_applicable: setting.battery.not_applicable.clone(),
            left_out,
            stale_writes,
            dir: setting.dir,
        }
    }

    /// The scenarios with no run that counts, each with why.
    pub fn untested(&self) -> Vec<String> {
        self.scenarios
            .iter()
            .filter(|c| c.counted == 0)
            .map(|c| {
                let why = if c.runs.is_empty() {
                    match &self.interrupted {
                        Some(signal) => format!("left out: {signal} stopped the audit first"),
                        None => "left out: the budget ran out first".to_string(),
                    }
                } else {
                    c.not_counted.join("; ")
                };
                format!("{}: {why}", c.scenario)
            })
            .collect()
    }
}
