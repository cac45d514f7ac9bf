//! One scenario's runs, added up: what the scorecard shows of it and what the
//! verdict (`decide`) reads. Below both, so that neither names the other.

use super::battery::{Fencing, Question, Recipe, ScenarioWorkload};
use super::execute::{Ending, Outcome, RunRecord};
use super::plan::Why;
use super::stats::{median, upper_95, wilson, Interval};
use lockcheck_check::provoked::Provocation;
use lockcheck_run::figures::Percentiles;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Runs of each class (history.md v1.2), over the runs that were read back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classes {
    pub provoked: usize,
    pub deposed_not_provoked: usize,
    pub provoked_before_fault: usize,
    pub fired_nobody_deposed: usize,
    pub fault_not_seen: usize,
}

impl Classes {
    fn of(runs: &[RunRecord]) -> Classes {
        let n = |c| runs.iter().filter(|r| r.provoked == Some(c)).count();
        Classes {
            provoked: n(Provocation::Provoked),
            deposed_not_provoked: n(Provocation::DeposedNotProvoked),
            provoked_before_fault: n(Provocation::ProvokedBeforeFault),
            fired_nobody_deposed: n(Provocation::FiredNobodyDeposed),
            fault_not_seen: n(Provocation::FaultNotSeen),
        }
    }
}

/// How a scenario's runs ended, as the scorecard says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stopped {
    /// At its first flagged run: the counterexample.
    Broke,
    /// Its `--runs` ran without a break.
    RanOut,
    /// Its floor of provoked runs reached.
    Floor,
    /// Its cap of runs reached below its floor.
    Cap,
    /// Its `--runs` ran and it broke, but no flagged run was provoked: no deposed
    /// holder's late write reached the resource.
    BrokeUnprovoked,
    /// Not asked: its recipe never broke unfenced.
    NotAsked,
    /// Not asked: its recipe broke unfenced only unprovoked, so no fence was asked.
    NoLateWrite,
    /// Not applicable, measured: a run showed its fault never reaches what the
    /// holder asks whether it holds.
    OutOfReach,
    /// The budget ran out (or a signal stopped the audit) while it wanted more runs.
    CutShort,
    /// A part of a sharded audit whose phase does not ask it: `audit merge`
    /// adds it up from the other phase's parts.
    OtherPhase,
}

impl From<Ending> for Stopped {
    fn from(e: Ending) -> Stopped {
        match e {
            Ending::Done(Why::Broke) => Stopped::Broke,
            Ending::Done(Why::RanOut) => Stopped::RanOut,
            Ending::Done(Why::Floor) => Stopped::Floor,
            Ending::Done(Why::Cap) => Stopped::Cap,
            Ending::Done(Why::BrokeUnprovoked) => Stopped::BrokeUnprovoked,
            Ending::Done(Why::NotAsked) => Stopped::NotAsked,
            Ending::Done(Why::NoLateWrite) => Stopped::NoLateWrite,
            Ending::Done(Why::OutOfReach) => Stopped::OutOfReach,
            Ending::Done(Why::OtherPhase) => Stopped::OtherPhase,
            Ending::CutShort => Stopped::CutShort,
        }
    }
}

/// One scenario's runs, added up.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioCard {
    pub scenario: String,
    pub recipe: Recipe,
    pub fencing: Fencing,
    pub question: Question,
    /// What it does, to whom on this backend.
    pub description: String,
    /// Its workload file, as every run ran it.
    pub workload: PathBuf,
    pub stopped: Stopped,
    /// Runs that ended (read back or not).
    pub ran: usize,
    /// Runs whose fault took effect (every class but fault-not-seen).
    pub fired: usize,
    /// Runs checked, flagged or not, that provoked the danger.
    pub provoked: usize,
    pub classes: Classes,
    /// Runs checked that tested what the scenario claims (valid or flagged): N.
    pub counted: usize,
    /// Of those, runs with anomalies: k.
    pub flagged: usize,
    /// Of the flagged, those provoked: breaks a fence would have had a late
    /// write to turn away in. A break with none still breaks the lock, but asks
    /// no fence.
    pub flagged_provoked: usize,
    /// The Wilson 95% interval of k/N (none before a run counted).
    pub interval_95: Option<Interval>,
    /// A "does it hold?" scenario: provoked runs it needs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<usize>,
    /// A "does it hold?" scenario: the exact one-sided 95% upper bound on its
    /// failure rate, flagged runs of its provoked and flagged runs (a flagged
    /// run counts against it provoked or not; only a provoked one for it). A
    /// holder that fences itself has none unflagged below the audit's floor of
    /// provoked runs: a holder deposed that wrote nothing late is no trial.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upper_95: Option<f64>,
    /// The first flagged run's directory: the counterexample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counterexample: Option<PathBuf>,
    /// Kinds of anomaly found, over all its runs.
    pub anomalies: Vec<String>,
    pub median_first_anomaly_s: Option<f64>,
    /// Every zombie window of every run, pooled, in ms.
    pub zombie_window_ms: Option<Percentiles>,
    pub stale_writes_accepted: usize,
    pub writes_rejected_by_fence: u64,
    /// Runs that did not count, each with why.
    pub not_counted: Vec<String>,
    /// Runs nobody checked (the checker gave up, or the run ended with no
    /// verdict): not passes, and no claim passes over them.
    pub gaps: Vec<Gap>,
    /// Runs checked valid in which no client acquired the lock once the fault
    /// had begun: an availability failure, never a safety pass.
    pub unobserved: usize,
    pub runs: Vec<RunRecord>,
    /// `audit --shrink`: the counterexample cut down by `lockcheck shrink`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shrunk: Option<ShrunkBreak>,
}

/// A run nobody checked, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    pub run: u32,
    pub seed: u64,
    pub why: String,
}

impl Gap {
    fn of(r: &RunRecord) -> Option<Gap> {
        let why = match r.outcome {
            Outcome::Unknown => "the checker gave up within its limits".to_string(),
            Outcome::Error => r.error.clone().unwrap_or_else(|| "no verdict".into()),
            _ => return None,
        };
        Some(Gap {
            run: r.run,
            seed: r.seed,
            why,
        })
    }
}

/// A counterexample as `lockcheck shrink` left it: what a team attaches to the
/// bug report instead of the noisy run that found the break.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShrunkBreak {
    /// The anomaly kept.
    pub kind: String,
    /// The run as it happened and the result: clients, fault events, length.
    pub before: String,
    pub after: Option<String>,
    /// Reruns of the result that gave the anomaly, of those run.
    pub reproduced: Option<(u32, u32)>,
    /// `shrunk.toml` in the counterexample's directory: written only when the
    /// result broke again.
    pub workload: Option<PathBuf>,
    pub seconds: f64,
    /// Why nothing was handed over (the break never came back, or shrink failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_shrunk: Option<String>,
}

impl ShrunkBreak {
    /// `shrunk to 1 client…: path (10/10 reruns, 95 s)`, or why not.
    pub fn line(&self) -> String {
        match (&self.workload, &self.after, self.reproduced) {
            (Some(w), Some(after), Some((k, n))) => format!(
                "{} shrunk from {} to {after}: {} ({k}/{n} reruns flagged, {:.0} s)",
                self.kind,
                self.before,
                w.display(),
                self.seconds
            ),
            _ => format!(
                "{} not shrunk: {}",
                self.kind,
                self.not_shrunk.as_deref().unwrap_or("no result")
            ),
        }
    }
}

impl ScenarioCard {
    pub fn of(
        s: &ScenarioWorkload,
        question: Question,
        description: String,
        floor: usize,
        ending: Ending,
        runs: Vec<RunRecord>,
    ) -> ScenarioCard {
        let counted: Vec<&RunRecord> = runs.iter().filter(|r| r.outcome.counts()).collect();
        let flagged = counted
            .iter()
            .filter(|r| r.outcome == Outcome::Flagged)
            .count();
        let provoked = counted
            .iter()
            .filter(|r| r.provoked == Some(Provocation::Provoked))
            .count();
        let flagged_provoked = counted
            .iter()
            .filter(|r| r.outcome == Outcome::Flagged && r.provoked == Some(Provocation::Provoked))
            .count();
        let flagged_unprovoked = flagged - flagged_provoked;
        let holds = matches!(question, Question::DoesItHold { .. });
        // No verdict rests on a holder that fences itself, so it has no floor
        // of its own; its bound still needs the audit's floor of provoked runs.
        let by_holder = s.scenario.fencing.by_holder();
        let mut anomalies: Vec<String> = counted
            .iter()
            .flat_map(|r| r.anomalies.iter().cloned())
            .collect();
        anomalies.sort();
        anomalies.dedup();
        let classes = Classes::of(&runs);
        ScenarioCard {
            scenario: s.scenario.name(),
            recipe: s.scenario.recipe,
            fencing: s.scenario.fencing,
            question,
            description,
            workload: s.workload.path.clone(),
            stopped: ending.into(),
            ran: runs.len(),
            fired: runs
                .iter()
                .filter(|r| r.provoked.is_some_and(Provocation::fired))
                .count(),
            provoked,
            classes,
            counted: counted.len(),
            flagged,
            flagged_provoked,
            interval_95: wilson(flagged, counted.len()),
            floor: (holds && !by_holder).then_some(floor),
            upper_95: match (holds, by_holder) {
                (false, _) => None,
                // A holder that fences itself is on trial only where a late
                // write of its reached the resource: a deposed holder that
                // wrote nothing late shows nothing of its fence.
                (true, true) if flagged == 0 && provoked < floor => None,
                (true, _) => upper_95(flagged, provoked + flagged_unprovoked),
            },
            counterexample: counted
                .iter()
                .find(|r| r.outcome == Outcome::Flagged)
                .and_then(|r| r.run_dir.clone()),
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
            not_counted: runs.iter().filter_map(not_counted).collect(),
            gaps: runs.iter().filter_map(Gap::of).collect(),
            unobserved: runs
                .iter()
                .filter(|r| r.outcome == Outcome::Unobserved)
                .count(),
            runs,
            shrunk: None,
        }
    }

    /// Whether it is a "does it hold?" twin that reached its floor with no flagged run.
    pub fn held(&self) -> bool {
        self.flagged == 0 && self.floor.is_some_and(|f| self.provoked >= f)
    }

    /// `run 1 (seed 1): the holder's clock fault never reached …`: why a run
    /// showed the scenario not applicable, if one did.
    pub fn out_of_reach(&self) -> Option<String> {
        if self.stopped != Stopped::OutOfReach {
            return None;
        }
        let r = self
            .runs
            .iter()
            .find(|r| r.outcome == Outcome::OutOfReach)?;
        Some(format!(
            "measured in run {} (seed {}): {}",
            r.run,
            r.seed,
            r.error
                .as_deref()
                .unwrap_or("the fault never reached the holder")
        ))
    }

    /// Its flagged runs provoked before their fault: the lock granted twice
    /// before the fault took effect, and a late write got in.
    pub fn broke_before_fault(&self) -> usize {
        self.runs
            .iter()
            .filter(|r| {
                r.outcome == Outcome::Flagged
                    && r.provoked == Some(Provocation::ProvokedBeforeFault)
            })
            .count()
    }

    /// Whether it broke only unprovoked: flagged, but in no flagged run did a
    /// deposed holder's late write reach the resource after its fault took effect.
    pub fn broke_unprovoked(&self) -> bool {
        self.flagged > 0 && self.flagged_provoked == 0
    }

    /// `holder-pause-unfenced: flagged 10/10 (double-holder)`: one line of evidence,
    /// with the provoked runs and, for a twin, its bound.
    pub fn evidence(&self) -> String {
        let mut s = format!(
            "{}: flagged {}/{} ({} provoked, {} fired, {} ran",
            self.scenario, self.flagged, self.counted, self.provoked, self.fired, self.ran
        );
        if let Some(floor) = self.floor {
            s += &format!("; floor {floor}");
        }
        s += ")";
        if !self.anomalies.is_empty() {
            s += &format!(" ({})", self.anomalies.join(", "));
        }
        if self.question == Question::CanItBreak && self.broke_unprovoked() {
            s += &match self.broke_before_fault() {
                0 => ", none of them provoked (no deposed holder's late write reached the resource)".to_string(),
                n => format!(", none of them provoked by its fault ({n} broke before the fault took effect: the lock granted twice on its own)"),
            };
        }
        match (self.upper_95, self.flagged) {
            (Some(u), 0) => {
                s += &format!(
                    ", failure rate ≤ {:.1}% (95%, exact, {} provoked runs)",
                    u * 100.0,
                    self.provoked
                )
            }
            (None, 0) if self.untested() => s += &format!(", {}", self.untested_line()),
            _ => {}
        }
        if let Some(line) = self.deposed_nobody() {
            s += &format!(", {line}");
        }
        if self.stale_writes_accepted > 0 {
            s += &format!(", {} stale writes accepted", self.stale_writes_accepted);
        }
        if self.writes_rejected_by_fence > 0 {
            s += &format!(", {}", self.refused_line());
        }
        if !self.gaps.is_empty() {
            s += &format!(", unchecked: {}", self.gap_lines().join("; "));
        }
        if self.unobserved > 0 {
            s += &format!(
                ", no client acquired after the fault in {} of {} runs",
                self.unobserved, self.ran
            );
        }
        if let Some(dir) = &self.counterexample {
            s += &format!("; counterexample {}", dir.display());
        }
        s
    }
}

impl ScenarioCard {
    /// A "can it break?" scenario with no break whose fault, though it took
    /// effect, deposed no holder in any run: its "no break" says the service
    /// rode the fault out, and nothing of what a deposed holder would have done
    /// (no fence was asked by it). Measured, not assumed: `nobody deposed in 10
    /// of 10 runs the fault took effect in`.
    pub fn deposed_nobody(&self) -> Option<String> {
        let c = &self.classes;
        let deposed = c.provoked + c.deposed_not_provoked + c.provoked_before_fault;
        (self.question == Question::CanItBreak && self.flagged == 0 && self.fired > 0 && deposed == 0)
            .then(|| {
                format!(
                    "nobody deposed in {} of {} runs the fault took effect in: it never cost a holder its lease, so it asked no fence",
                    c.fired_nobody_deposed, self.fired
                )
            })
    }

    /// Whether it is a "does it hold?" twin that ran but has no bound: too
    /// few of its runs were provoked for any claim that its fence holds.
    pub fn untested(&self) -> bool {
        matches!(self.question, Question::DoesItHold { .. })
            && self.ran > 0
            && self.flagged == 0
            && self.upper_95.is_none()
    }

    /// `not tested: 0 of 10 runs provoked`.
    pub fn untested_line(&self) -> String {
        format!(
            "not tested: {} of {} runs provoked",
            self.provoked, self.ran
        )
    }

    /// The fence's refusals, said as what they were: where the token source
    /// reissued tokens, the new holders' own writes were among them (a run's
    /// figures count refusals, not whose they were).
    pub fn refused_line(&self) -> String {
        let reissued = self.anomalies.iter().any(|a| {
            a.parse::<lockcheck_check::AnomalyKind>()
                .is_ok_and(lockcheck_check::AnomalyKind::breaks_the_token)
        });
        match reissued {
            true => format!(
                "{} writes refused by the fence, among them the new holders' writes under reissued tokens (not told apart from deposed holders' stale writes)",
                self.writes_rejected_by_fence
            ),
            false => format!(
                "{} stale writes rejected by the fence",
                self.writes_rejected_by_fence
            ),
        }
    }

    /// `run 3 (seed 3): the checker gave up within its limits`, a line a gap.
    pub fn gap_lines(&self) -> Vec<String> {
        self.gaps
            .iter()
            .map(|g| format!("run {} (seed {}): {}", g.run, g.seed, g.why))
            .collect()
    }

    /// Why some of its runs were not checked, if any were not: no client
    /// acquired after the fault, the checker gave up, a run failed, a fault
    /// never started.
    pub fn unchecked_why(&self) -> Option<String> {
        let missed = self
            .runs
            .iter()
            .filter(|r| r.outcome == Outcome::MissedFaults)
            .count();
        let mut why = Vec::new();
        if self.unobserved > 0 {
            why.push(format!(
                "no client acquired after the fault in {}",
                self.unobserved
            ));
        }
        why.extend(self.gap_lines());
        if missed > 0 {
            why.push(format!("a planned fault never started in {missed}"));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// `kill-restart-wiped-unfenced: availability: …`: runs in which no client
    /// acquired the lock once the fault had begun, an availability failure
    /// the verdict reports beside whatever it says of safety.
    pub fn availability(&self) -> Option<String> {
        (self.unobserved > 0).then(|| {
            format!(
                "{}: availability: no client acquired the lock after the fault in {} of {} runs (not a safety pass: nothing was checked in them)",
                self.scenario, self.unobserved, self.ran
            )
        })
    }
}

/// Why a run did not count, if it did not.
fn not_counted(r: &RunRecord) -> Option<String> {
    if r.outcome.counts() {
        return None;
    }
    let why = match r.outcome {
        Outcome::Unknown => "the checker gave up within its limits".to_string(),
        Outcome::MissedFaults => {
            "a planned fault never started: it did not test the scenario".to_string()
        }
        Outcome::Unobserved | Outcome::OutOfReach => format!(
            "valid, not counted: {}",
            r.error.as_deref().unwrap_or("it saw nothing of the fault")
        ),
        _ => r.error.clone().unwrap_or_else(|| "no verdict".into()),
    };
    Some(format!("run {} (seed {}): {why}", r.run, r.seed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::{workload_text, Facts, Scenario};
    use lockcheck_run::workload::Workload;
    use lockcheck_servers::backend::BackendKind;

    fn run(provoked: Provocation) -> RunRecord {
        RunRecord {
            outcome: Outcome::Valid,
            provoked: Some(provoked),
            error: None,
            ..RunRecord::failed(1, 1, 1.0, String::new())
        }
    }

    fn workload(recipe: Recipe, fencing: Fencing) -> ScenarioWorkload {
        let facts = Facts::registered(BackendKind::Redis, None, None);
        let scenario = Scenario { recipe, fencing };
        let text = workload_text(scenario, &facts);
        let workload = Workload::parse(&text, std::path::Path::new("/audit/x.toml")).unwrap();
        ScenarioWorkload { scenario, workload }
    }

    #[test]
    fn a_break_asks_a_fence_only_where_a_late_write_got_in() {
        let s = workload(Recipe::HolderCutOff, Fencing::Unfenced);
        let flagged = |p| RunRecord {
            outcome: Outcome::Flagged,
            anomalies: vec!["double-holder".into()],
            ..run(p)
        };
        // A retired holder: two holders, its late writes never reached the resource.
        let mut runs = vec![
            flagged(Provocation::DeposedNotProvoked),
            run(Provocation::Provoked),
        ];
        let ending = Ending::Done(Why::BrokeUnprovoked);
        let c = ScenarioCard::of(
            &s,
            Question::CanItBreak,
            String::new(),
            20,
            ending,
            runs.clone(),
        );
        assert_eq!((c.flagged, c.flagged_provoked, c.provoked), (1, 0, 1));
        assert!(c.broke_unprovoked());
        assert_eq!(c.stopped, Stopped::BrokeUnprovoked);
        let e = c.evidence();
        assert!(e.ends_with("(double-holder), none of them provoked (no deposed holder's late write reached the resource)"), "{e}");
        runs.push(flagged(Provocation::Provoked));
        let c = ScenarioCard::of(&s, Question::CanItBreak, String::new(), 20, ending, runs);
        assert_eq!(c.flagged_provoked, 1);
        assert!(!c.broke_unprovoked());
        assert!(!c.evidence().contains("none of them provoked"));
        // The lock granted twice before the fault took effect: not its break.
        let runs = vec![flagged(Provocation::ProvokedBeforeFault)];
        let c = ScenarioCard::of(&s, Question::CanItBreak, String::new(), 20, ending, runs);
        assert_eq!(
            (c.flagged, c.flagged_provoked, c.broke_before_fault()),
            (1, 0, 1)
        );
        assert!(c.broke_unprovoked());
        let e = c.evidence();
        assert!(
            e.contains("none of them provoked by its fault (1 broke before the fault took effect"),
            "{e}"
        );
    }

    /// docs/audits/etcd-provoked.json printed "holder-pause-self-fencing:
    /// flagged 0/10 (0 provoked, …) failure rate ≤ 25.9%": a bound from runs
    /// none of which a late write of the holder's reached. A holder deposed
    /// that wrote nothing late shows nothing of its fence: no bound, untested.
    #[test]
    fn a_self_fencing_twin_with_no_provoked_run_is_untested_not_bounded() {
        let s = workload(Recipe::HolderPause, Fencing::SelfFencing);
        let mut runs = vec![run(Provocation::DeposedNotProvoked); 9];
        runs.push(run(Provocation::FiredNobodyDeposed));
        let question = Question::DoesItHold { unfenced: 0 };
        let ending = Ending::Done(Why::Cap);
        let c = ScenarioCard::of(&s, question, String::new(), 20, ending, runs.clone());
        assert_eq!(c.floor, None, "no verdict rests on it");
        assert_eq!(c.upper_95, None);
        assert!(c.untested());
        let e = c.evidence();
        assert!(e.ends_with(", not tested: 0 of 10 runs provoked"), "{e}");
        assert!(!e.contains("failure rate"), "{e}");
        // A library-fencing twin is read the same way.
        let mut l = s.clone();
        l.scenario.fencing = Fencing::LibraryFencing;
        let c = ScenarioCard::of(&l, question, String::new(), 20, ending, runs);
        assert_eq!((c.upper_95, c.untested()), (None, true));
        // Flagged, it failed: no "not tested".
        let flagged = vec![RunRecord {
            outcome: Outcome::Flagged,
            anomalies: vec!["double-holder".into()],
            ..run(Provocation::Provoked)
        }];
        let c = ScenarioCard::of(&s, question, String::new(), 20, ending, flagged);
        assert!(!c.untested());
        assert!(!c.evidence().contains("not tested"));
    }

    /// As ZooKeeper's holder-node-isolated (docs/faults.md): the holder's server
    /// cut off in 10 of 10 runs, every session kept. Its "no break" is the
    /// service riding the fault out, and the card says nobody was deposed.
    #[test]
    fn a_fault_that_deposed_nobody_says_so_beside_its_no_break() {
        let s = workload(Recipe::SlowLinks, Fencing::Unfenced);
        let ending = Ending::Done(Why::RanOut);
        let mut runs = vec![run(Provocation::FiredNobodyDeposed); 9];
        runs.push(run(Provocation::FaultNotSeen));
        let c = ScenarioCard::of(
            &s,
            Question::CanItBreak,
            String::new(),
            20,
            ending,
            runs.clone(),
        );
        assert_eq!((c.fired, c.flagged), (9, 0));
        let e = c.evidence();
        assert!(e.contains(", nobody deposed in 9 of 9 runs the fault took effect in: it never cost a holder its lease, so it asked no fence"), "{e}");
        // One holder deposed is a trial of what follows: no such line.
        runs.push(run(Provocation::DeposedNotProvoked));
        let c = ScenarioCard::of(&s, Question::CanItBreak, String::new(), 20, ending, runs);
        assert_eq!(c.deposed_nobody(), None);
        // A twin is read by its provoked runs, never by this line.
        let t = workload(Recipe::SlowLinks, Fencing::Fenced);
        let question = Question::DoesItHold { unfenced: 1 };
        let runs = vec![run(Provocation::FiredNobodyDeposed); 3];
        let c = ScenarioCard::of(&t, question, String::new(), 20, ending, runs);
        assert_eq!(c.deposed_nobody(), None);
    }

    /// Runs the checker gave up on or that failed are gaps the card lists;
    /// runs in which no client acquired after the fault are counted apart.
    #[test]
    fn unchecked_runs_are_gaps_and_an_outage_is_counted() {
        let s = workload(Recipe::KillRestartWiped, Fencing::Unfenced);
        let mut runs = vec![run(Provocation::FiredNobodyDeposed); 4];
        runs.push(RunRecord {
            outcome: Outcome::Unknown,
            run: 5,
            seed: 5,
            ..run(Provocation::FiredNobodyDeposed)
        });
        runs.push(RunRecord::failed(
            6,
            6,
            1.0,
            "the server never started".into(),
        ));
        runs.extend((7..=10).map(|n| RunRecord {
            outcome: Outcome::Unobserved,
            run: n,
            seed: n as u64,
            ..run(Provocation::FiredNobodyDeposed)
        }));
        let ending = Ending::Done(Why::RanOut);
        let c = ScenarioCard::of(&s, Question::CanItBreak, String::new(), 20, ending, runs);
        assert_eq!((c.counted, c.ran, c.unobserved), (4, 10, 4));
        assert_eq!(
            c.gap_lines(),
            [
                "run 5 (seed 5): the checker gave up within its limits",
                "run 6 (seed 6): the server never started"
            ]
        );
        assert_eq!(
            c.unchecked_why().unwrap(),
            "no client acquired after the fault in 4; run 5 (seed 5): the checker gave up within its limits; run 6 (seed 6): the server never started"
        );
        let e = c.evidence();
        assert!(e.contains(", unchecked: run 5 (seed 5)"), "{e}");
        assert!(
            e.ends_with(", no client acquired after the fault in 4 of 10 runs"),
            "{e}"
        );
        assert!(c.availability().unwrap().contains("in 4 of 10 runs"));
    }

    /// nats' wiped restart, fenced: the resource refused 72 writes, among them
    /// the new holders' writes under tokens reissued lower; they are not all
    /// stale writes, and the card does not say they were.
    #[test]
    fn refusals_under_reissued_tokens_are_not_called_stale_writes() {
        let s = workload(Recipe::KillRestartWiped, Fencing::Fenced);
        let refused = |anomaly: &str| RunRecord {
            outcome: Outcome::Flagged,
            anomalies: vec![anomaly.into()],
            writes_rejected_by_fence: 72,
            ..run(Provocation::DeposedNotProvoked)
        };
        let question = Question::DoesItHold { unfenced: 0 };
        let ending = Ending::Done(Why::Broke);
        let c = ScenarioCard::of(
            &s,
            question,
            String::new(),
            20,
            ending,
            vec![refused("duplicate-token")],
        );
        let e = c.evidence();
        assert!(e.contains(", 72 writes refused by the fence, among them the new holders' writes under reissued tokens"), "{e}");
        assert!(!e.contains("stale writes rejected"), "{e}");
        let c = ScenarioCard::of(
            &s,
            question,
            String::new(),
            20,
            ending,
            vec![refused("stale-write-accepted")],
        );
        assert!(c
            .evidence()
            .contains(", 72 stale writes rejected by the fence"));
    }
}
