//! The scorecard: each scenario's runs added up (`card`), what did not apply or
//! was cut short, and the verdict with its evidence and what it lacks.

use super::battery::{Battery, Facts, NotApplicable, Question, Recipe, ScenarioWorkload};
use super::card::{ScenarioCard, Stopped};
use super::decide::{decide, Asked, AuditVerdict, Failure};
use super::execute::Executed;
use super::pace::Level;
use serde::Serialize;
use std::path::PathBuf;

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
    /// What failed, for `unsafe-even-with-fencing`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<Failure>,
    pub evidence: Vec<String>,
    /// What a complete verdict lacks, each with why: empty only when complete.
    pub missing: Vec<String>,
    /// Fence claims below their floor that the verdict does not rest on: an
    /// `unsafe-even-with-fencing` verdict stands on its counterexample, and
    /// these twins could only have added a "holds" claim. Each with why.
    pub unsettled: Vec<String>,
    /// Runs of a "can it break?" scenario at most (it stops at its first break).
    pub runs_per_scenario: u32,
    /// Provoked runs each fenced twin the verdict rests on needs.
    pub provoked_floor: u32,
    /// Runs of a fenced twin at most (`--twin-runs`): one that stops here, or
    /// sooner because its provoked share could not reach the floor within it,
    /// is below its floor.
    pub twin_runs: u32,
    /// Runs at once to begin with.
    pub jobs: usize,
    /// Runs at once, level by level, each with the timer lateness seen while it
    /// held (an audit left to choose goes above one run a core only while that
    /// stays within its limit: `pace`).
    pub levels: Vec<Level>,
    pub budget_s: f64,
    pub elapsed_s: f64,
    /// The whole battery ran to a verdict: no `--scenarios` subset, no budget
    /// cut or signal, nothing missing. Only then does the audit exit 0.
    pub complete: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    pub scenarios: Vec<ScenarioCard>,
    pub not_applicable: Vec<NotApplicable>,
    pub stale_writes: Vec<StaleWrites>,
    /// The audit's directory: scenarios/, runs/, audit.json, audit.xml, audit.html.
    pub dir: PathBuf,
}

/// What the scorecard is made of besides the runs.
pub struct Setting<'a> {
    pub facts: &'a Facts,
    pub battery: &'a Battery,
    pub workloads: &'a [ScenarioWorkload],
    pub questions: &'a [Question],
    /// `--scenarios` narrowed the battery.
    pub subset: bool,
    pub runs: u32,
    pub floor: u32,
    /// Runs of a fenced twin at most.
    pub twin_runs: u32,
    pub jobs: usize,
    pub budget_s: f64,
    pub dir: PathBuf,
}

impl Scorecard {
    pub fn of(setting: Setting<'_>, executed: Executed) -> Scorecard {
        let Executed {
            records,
            endings,
            elapsed,
            interrupted,
            levels,
        } = executed;
        let facts = setting.facts;
        let scenarios: Vec<ScenarioCard> = setting
            .workloads
            .iter()
            .zip(records)
            .enumerate()
            .map(|(i, (s, runs))| {
                ScenarioCard::of(
                    s,
                    setting.questions[i],
                    s.scenario.recipe.describe_for(facts),
                    setting.floor as usize,
                    endings[i],
                    runs,
                )
            })
            .collect();
        let cut_short = scenarios.iter().any(|c| c.stopped == Stopped::CutShort);
        let cut = match interrupted {
            Some(what) => Some(format!("interrupted: {what}")),
            None if cut_short => Some(format!(
                "the budget ({}) ran out",
                super::stats::minutes(setting.budget_s)
            )),
            None => None,
        };
        let backend = facts.kind.name().to_string();
        let decision = decide(
            &Asked {
                backend: &backend,
                token: facts.token,
                subset: setting.subset,
                cut: cut.clone(),
                floor: setting.floor as usize,
                runs: setting.runs as usize,
                unavailable: setting
                    .battery
                    .not_applicable
                    .iter()
                    .filter(|n| n.environment)
                    .map(|n| format!("{}: not run here: {}", n.scenario, n.why))
                    .collect(),
            },
            &scenarios,
        );
        Scorecard {
            complete: decision.missing.is_empty() && cut.is_none() && !setting.subset,
            stale_writes: stale_writes(&scenarios),
            backend,
            client: facts.client.clone(),
            verdict: decision.verdict,
            verdict_sentence: decision.sentence,
            failures: decision.failures,
            evidence: decision.evidence,
            missing: decision.missing,
            unsettled: decision.unsettled,
            runs_per_scenario: setting.runs,
            provoked_floor: setting.floor,
            twin_runs: setting.twin_runs,
            jobs: setting.jobs,
            levels,
            budget_s: setting.budget_s,
            elapsed_s: elapsed.as_secs_f64(),
            interrupted: interrupted.map(str::to_string),
            scenarios,
            not_applicable: setting.battery.not_applicable.clone(),
            dir: setting.dir,
        }
    }
}

/// Each recipe's stale writes accepted, by fencing mode, over its counted runs.
fn stale_writes(scenarios: &[ScenarioCard]) -> Vec<StaleWrites> {
    let mut out: Vec<StaleWrites> = Vec::new();
    for c in scenarios.iter().filter(|c| c.counted > 0) {
        let entry = match out.iter_mut().position(|s| s.recipe == c.recipe) {
            Some(i) => &mut out[i],
            None => {
                out.push(StaleWrites {
                    recipe: c.recipe,
                    accepted: Vec::new(),
                    rejected_by_fence: 0,
                });
                out.last_mut().expect("just pushed")
            }
        };
        entry
            .accepted
            .push((c.fencing.name().to_string(), c.stale_writes_accepted));
        entry.rejected_by_fence += c.writes_rejected_by_fence;
    }
    out
}
