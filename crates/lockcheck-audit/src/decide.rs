//! The verdict of an audit, from a decision tree over its scenarios' figures.
//! A break needs one run (its directory is the counterexample); a claim that a
//! fence holds needs its floor of provoked runs (history.md v1.2) with none
//! flagged, and carries its exact upper bound.
//!
//! 1. a fenced scenario flagged: **unsafe even with fencing**, naming what failed
//!    (tokens reissued or going backwards after the token source lost data, a
//!    stale write accepted past the fence, two holders' writes interleaved);
//! 2. else the backend hands out no token: **efficiency lock only**, whatever was
//!    observed (the evidence says whether a break was seen): nothing lets a
//!    resource turn a deposed holder away, so it can never be a correctness lock;
//! 3. else only some recipes were asked for (`--scenarios`): **partial**;
//! 4. else the audit was cut short (budget, signal), or something the verdict
//!    would rest on is missing, each named: a "can it break?" scenario with
//!    fewer checked runs than `--runs` and no break, or whose fault never took
//!    effect; a fenced twin of a recipe that broke below its floor of provoked
//!    runs, or at it past a run nobody checked; a fenced twin never asked
//!    because its recipe broke the lock unfenced only unprovoked; a scenario
//!    this machine could not run (root); a floor below the default
//!    (exploratory): **inconclusive**;
//! 5. else nothing broke: **no break found**;
//! 6. else every fenceable recipe that broke has a fenced twin at its floor
//!    with none flagged: **safe with fencing** (a clock fault on the holder
//!    breaks self-fencing only: a fenced resource never reads the holder's
//!    clock, so it needs no fenced twin). With no fenceable recipe broken, no
//!    break found.
//!
//! No safe word past an untested fence: a recipe that broke only unprovoked
//! (its deposed holders never got a late write to the resource: a retired
//! adapter, counted as holding to the end) did break the lock, and its twins
//! were not asked (`plan`), so its fence was never tested: it is missing,
//! whatever other fences held. A recipe whose every break came before its fault
//! took effect is the lock's break, not the recipe's: the no-fault claim
//! answers it. Runs that were not checked (unobserved, unknown, errored) are
//! never passes: the card lists them, and an outage after the fault is said
//! as an availability finding under every verdict.
//!
//! Cases 1 and 2 stand however the audit ended: a counterexample and a missing
//! token are facts, not rates. Only a complete audit (no cut, no subset, nothing
//! missing) exits 0. Case 1 rests on its counterexample alone: a fenced twin
//! still below its floor could only add a "holds" claim, never change the word,
//! so it is listed as *unsettled* (each with why), not missing, and a case-1
//! audit that ran its whole battery uncut is complete. What every verdict lacks
//! (a scenario with no checked run, a fault that never took effect, a cut, a
//! subset) stays missing.

use super::battery::{Fencing, Question, Recipe};
use super::card::{ScenarioCard, Stopped};
use super::execute::{Outcome, RunRecord};
use super::plan::DEFAULT_FLOOR;
use lockcheck_check::provoked::Provocation;
use lockcheck_check::AnomalyKind;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuditVerdict {
    EfficiencyLockOnly,
    SafeWithFencing,
    UnsafeEvenWithFencing,
    NoBreakFound,
    Inconclusive,
    Partial,
}

impl AuditVerdict {
    /// Every verdict, in the order `--expect`'s help lists them.
    pub const ALL: [AuditVerdict; 6] = [
        AuditVerdict::EfficiencyLockOnly,
        AuditVerdict::SafeWithFencing,
        AuditVerdict::UnsafeEvenWithFencing,
        AuditVerdict::NoBreakFound,
        AuditVerdict::Inconclusive,
        AuditVerdict::Partial,
    ];

    /// The verdict of this name, as the scorecard and `--expect` spell it.
    pub fn named(name: &str) -> Option<AuditVerdict> {
        AuditVerdict::ALL.into_iter().find(|v| v.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            AuditVerdict::EfficiencyLockOnly => "efficiency-lock-only",
            AuditVerdict::SafeWithFencing => "safe-with-fencing",
            AuditVerdict::UnsafeEvenWithFencing => "unsafe-even-with-fencing",
            AuditVerdict::NoBreakFound => "no-break-found",
            AuditVerdict::Inconclusive => "inconclusive",
            AuditVerdict::Partial => "partial",
        }
    }

    pub fn sentence(self) -> &'static str {
        match self {
            AuditVerdict::EfficiencyLockOnly => "an efficiency lock only: it hands out no fencing token, so nothing turns a deposed holder away; use it where a duplicate run costs nothing",
            AuditVerdict::SafeWithFencing => "safe with fencing: two holders happen, and in every recipe that broke it with a deposed holder's late write the fence held in at least its floor of provoked runs",
            AuditVerdict::UnsafeEvenWithFencing => "unsafe even with fencing: the token check cannot be trusted",
            AuditVerdict::NoBreakFound => "no break found within the runs made",
            AuditVerdict::Inconclusive => "inconclusive: what the verdict would rest on is missing",
            AuditVerdict::Partial => "partial: only some scenarios were asked for; no verdict on the lock",
        }
    }
}

/// What failed when a fenced scenario was flagged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Failure {
    /// Tokens reissued or going backwards after the token source lost data.
    TokenDurability,
    /// The resource applied a write whose token was lower than one it had applied.
    StaleWriteAccepted,
    /// Two holders' writes interleaved at the resource.
    InterleavedWrites,
    /// Another anomaly the fence does not allow (named in the evidence).
    Other,
}

impl Failure {
    fn of(anomaly: &str) -> Failure {
        match anomaly.parse::<AnomalyKind>() {
            Ok(k) if k.breaks_the_token() => Failure::TokenDurability,
            Ok(AnomalyKind::StaleWriteAccepted) => Failure::StaleWriteAccepted,
            Ok(AnomalyKind::InterleavedWrites) => Failure::InterleavedWrites,
            _ => Failure::Other,
        }
    }

    /// As audit.json writes it.
    pub fn name(self) -> &'static str {
        match self {
            Failure::TokenDurability => "token-durability",
            Failure::StaleWriteAccepted => "stale-write-accepted",
            Failure::InterleavedWrites => "interleaved-writes",
            Failure::Other => "other",
        }
    }

    pub fn sentence(self) -> &'static str {
        match self {
            Failure::TokenDurability => "tokens were reissued or went backwards: the token source lost what it had handed out",
            Failure::StaleWriteAccepted => "a stale write was accepted past the fence",
            Failure::InterleavedWrites => "two holders' writes interleaved at the resource",
            Failure::Other => "an anomaly the fence does not excuse",
        }
    }
}

/// What the audit was asked, besides its cards.
#[derive(Debug, Clone)]
pub struct Asked<'a> {
    pub backend: &'a str,
    /// It hands out a fencing token.
    pub token: bool,
    /// `--scenarios` narrowed the battery.
    pub subset: bool,
    /// Why the audit stopped before it was done (the budget, a signal), if it did.
    pub cut: Option<String>,
    /// Provoked runs a claim that the fence holds needs (`--provoked`): below
    /// [`DEFAULT_FLOOR`] the audit is exploratory, never complete.
    pub floor: usize,
    /// Checked runs a "can it break?" scenario that did not break needs (`--runs`).
    pub runs: usize,
    /// Scenarios this machine could not run (`scenario: why`): the backend has
    /// them, the environment (root, say) did not allow them.
    pub unavailable: Vec<String>,
}

/// The verdict and what stands behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub verdict: AuditVerdict,
    pub sentence: String,
    pub failures: Vec<Failure>,
    pub evidence: Vec<String>,
    /// What a complete verdict lacks: empty only for a complete audit.
    pub missing: Vec<String>,
    /// Fence claims below their floor that the verdict does not rest on (it is
    /// `unsafe-even-with-fencing` on a counterexample): each with why.
    pub unsettled: Vec<String>,
}

/// The verdict over `cards`.
pub fn decide(asked: &Asked<'_>, cards: &[ScenarioCard]) -> Decision {
    let gaps = gaps(asked, cards);
    let no_fault = NoFault::of(cards);
    let floors = fence_floors(asked, cards, no_fault.as_ref());
    let missing: Vec<String> = gaps.iter().chain(&floors).cloned().collect();
    let findings: Vec<String> = cards
        .iter()
        .filter_map(ScenarioCard::availability)
        .collect();
    let decision = |verdict: AuditVerdict, mut evidence: Vec<String>| {
        evidence.extend(findings.iter().cloned());
        let mut sentence = verdict.sentence().to_string();
        if asked.floor < DEFAULT_FLOOR as usize {
            sentence += &format!(
                " (exploratory, floor {}: not a verdict to adopt)",
                asked.floor
            );
        }
        Decision {
            verdict,
            sentence,
            failures: Vec::new(),
            evidence,
            missing: missing.clone(),
            unsettled: Vec::new(),
        }
    };
    let fenced_breaks: Vec<&ScenarioCard> = cards
        .iter()
        .filter(|c| c.fencing == Fencing::Fenced && c.flagged > 0)
        .collect();
    if !fenced_breaks.is_empty() {
        let mut failures: Vec<Failure> = fenced_breaks
            .iter()
            .flat_map(|c| c.anomalies.iter().map(|a| Failure::of(a)))
            .collect();
        failures.sort();
        failures.dedup();
        let words: Vec<&str> = failures.iter().map(|f| f.sentence()).collect();
        let mut d = decision(
            AuditVerdict::UnsafeEvenWithFencing,
            fenced_breaks.iter().map(|c| c.evidence()).collect(),
        );
        d.sentence = format!("{}: {}", d.sentence, words.join("; "));
        d.failures = failures;
        // The counterexample settles the word; the floors could only add claims.
        d.missing = gaps;
        d.unsettled = floors;
        return d;
    }
    let breaks: Vec<&ScenarioCard> = cards
        .iter()
        .filter(|c| c.question == Question::CanItBreak && c.flagged > 0)
        .collect();
    let mut evidence: Vec<String> = breaks.iter().map(|c| c.evidence()).collect();
    if !asked.token {
        evidence.extend(no_fault.as_ref().map(NoFault::breaks_line));
        if breaks.is_empty() {
            let (counted, provoked) = cards
                .iter()
                .fold((0, 0), |(n, p), c| (n + c.counted, p + c.provoked));
            evidence.push(format!(
                "no break seen in {counted} checked runs ({provoked} provoked)"
            ));
        }
        evidence.push(format!(
            "{} hands out no fencing token: nothing lets the resource turn a deposed holder away",
            asked.backend
        ));
        return decision(AuditVerdict::EfficiencyLockOnly, evidence);
    }
    let twins = cards
        .iter()
        .filter(|c| matches!(c.question, Question::DoesItHold { .. }));
    evidence.extend(twins.filter(|c| c.ran > 0).map(|c| c.evidence()));
    evidence.extend(no_fault.as_ref().map(|n| n.evidence(asked.floor)));
    evidence.extend(
        no_fence_asked(cards)
            .into_iter()
            .filter(|n| n.before_fault_only)
            .map(|n| n.line),
    );
    if asked.subset {
        return decision(AuditVerdict::Partial, evidence);
    }
    if asked.cut.is_some() || !missing.is_empty() {
        return decision(AuditVerdict::Inconclusive, evidence);
    }
    let mut fenceable: Vec<Recipe> = breaks
        .iter()
        .map(|c| c.recipe)
        .filter(|r| r.fenceable())
        .collect();
    fenceable.dedup();
    for c in breaks.iter().filter(|c| !c.recipe.fenceable()) {
        evidence.push(format!(
            "{} breaks self-fencing only: a fenced resource never reads the holder's clock",
            c.recipe.name()
        ));
    }
    if fenceable.is_empty() {
        evidence.extend(
            cards
                .iter()
                .filter(|c| c.question == Question::CanItBreak && c.flagged == 0)
                .map(no_break),
        );
        return decision(AuditVerdict::NoBreakFound, evidence);
    }
    // Every provoked fenceable break's fenced twin held at its floor, and at
    // least one fence was asked: `missing` is empty.
    decision(AuditVerdict::SafeWithFencing, evidence)
}

/// The lock granting twice before any fault took effect (history.md v1.2,
/// provoked before its fault): a break of the lock with no fault, which no
/// recipe's twin asks about. Every fenced run is a run with no fault until its
/// fault takes effect, so the fenced twins' runs where such a holder's late
/// write reached the resource unflagged are the fence's trials against it.
struct NoFault {
    /// Unfenced runs flagged that broke before their fault took effect.
    breaks: usize,
    /// `kill-restart-unfenced run 6 (…/runs/…)`: the first of them.
    first: String,
    /// Fenced runs, unflagged, whose resource decided on such a late write.
    decided: usize,
}

impl NoFault {
    fn of(cards: &[ScenarioCard]) -> Option<NoFault> {
        let before_fault = |r: &&RunRecord| r.provoked == Some(Provocation::ProvokedBeforeFault);
        let mut breaks = cards
            .iter()
            .filter(|c| c.fencing == Fencing::Unfenced)
            .flat_map(|c| c.runs.iter().map(move |r| (c, r)))
            .filter(|(_, r)| r.outcome == Outcome::Flagged && before_fault(r));
        let (card, run) = breaks.next()?;
        let dir = run
            .run_dir
            .as_ref()
            .map(|d| format!(", counterexample {}", d.display()))
            .unwrap_or_default();
        let decided = cards
            .iter()
            .filter(|c| c.fencing == Fencing::Fenced)
            .flat_map(|c| &c.runs)
            .filter(|r| r.outcome == Outcome::Valid && before_fault(r))
            .count();
        Some(NoFault {
            breaks: 1 + breaks.count(),
            first: format!("first: {} run {}{dir}", card.scenario, run.run),
            decided,
        })
    }

    fn breaks_line(&self) -> String {
        format!(
            "no fault: the lock granted twice before any fault took effect in {} unfenced runs ({}), and a deposed holder's late write got in",
            self.breaks, self.first
        )
    }

    /// The line with what the fence did about it, and its bound.
    fn evidence(&self, floor: usize) -> String {
        let bound = super::stats::upper_95(0, self.decided)
            .filter(|_| self.decided >= floor)
            .map(|u| format!(": failure rate ≤ {:.1}% (95%, exact)", u * 100.0))
            .unwrap_or_default();
        format!(
            "{}; fenced, the resource decided on {} such runs (floor {floor}), none flagged{bound}",
            self.breaks_line(),
            self.decided
        )
    }

    /// What a verdict short of a fenced break lacks, if the fence was not
    /// shown to hold against it.
    fn below_floor(&self, floor: usize) -> Option<String> {
        (self.decided < floor).then(|| {
            format!(
                "no fault: the lock granted twice before any fault took effect ({}); fenced, the resource decided on {} of its floor of {floor} such runs",
                self.first, self.decided
            )
        })
    }
}

/// `slow-links-unfenced: no break in 10 checked runs (4 provoked): break rate ≤ 25.9%`.
fn no_break(c: &ScenarioCard) -> String {
    let bound = super::stats::upper_95(0, c.counted)
        .map(|u| format!(": break rate ≤ {:.1}% (95%, exact)", u * 100.0))
        .unwrap_or_default();
    format!(
        "{}: no break in {} checked runs ({} provoked){bound}",
        c.scenario, c.counted, c.provoked
    )
}

/// The "can it break?" cards of the fenceable recipes that broke the lock, on
/// a backend with a token: each needs its fenced twin.
fn fenceable_breaks<'a>(
    asked: &Asked<'_>,
    cards: &'a [ScenarioCard],
) -> impl Iterator<Item = &'a ScenarioCard> {
    let token = asked.token;
    cards.iter().filter(move |c| {
        token && c.question == Question::CanItBreak && c.flagged > 0 && c.recipe.fenceable()
    })
}

/// A fenced twin not asked because its recipe broke only unprovoked.
struct NoFenceAsked {
    /// `holder-cut-off-fenced: not asked: …`.
    line: String,
    /// Every unfenced break came before the fault took effect: the lock's own
    /// break, which the no-fault claim answers, not this recipe's fence.
    before_fault_only: bool,
}

/// Each fenced twin not asked because its recipe broke only unprovoked. One
/// whose recipe broke after its fault took effect is a fence never tested
/// against that break: what a safe word would rest on is missing.
fn no_fence_asked(cards: &[ScenarioCard]) -> Vec<NoFenceAsked> {
    cards
        .iter()
        .filter(|c| c.fencing == Fencing::Fenced && c.stopped == Stopped::NoLateWrite)
        .map(|c| {
            let recipe = c.recipe.name();
            let unfenced = cards
                .iter()
                .filter(|u| u.recipe == c.recipe && u.question == Question::CanItBreak);
            let (flagged, before_fault) = unfenced.fold((0, 0), |(f, b), u| {
                (f + u.flagged, b + u.broke_before_fault())
            });
            let before_fault_only = before_fault == flagged;
            let line = match before_fault {
                n if before_fault_only => format!(
                    "{}: not asked: {recipe} broke the lock unfenced only unprovoked ({n} flagged, none provoked: each broke before the fault took effect: the lock granted twice on its own), so no fence was asked",
                    c.scenario
                ),
                0 => format!(
                    "{}: not asked: {recipe} broke the lock unfenced {}, none provoked: its fence was never asked (no deposed holder's late write reached the resource)",
                    c.scenario,
                    times(flagged)
                ),
                n => format!(
                    "{}: not asked: {recipe} broke the lock unfenced {}, none provoked: its fence was never asked ({n} broke before the fault took effect, the others with no deposed holder's late write reaching the resource)",
                    c.scenario,
                    times(flagged)
                ),
            };
            NoFenceAsked { line, before_fault_only }
        })
        .collect()
}

/// `once`, `5 times`.
fn times(n: usize) -> String {
    match n {
        1 => "once".into(),
        n => format!("{n} times"),
    }
}

/// What any verdict lacks, each with why: a subset, a scenario cut short, one
/// with no checked run or whose fault never took effect.
fn gaps(asked: &Asked<'_>, cards: &[ScenarioCard]) -> Vec<String> {
    let mut out = Vec::new();
    if asked.subset {
        out.push("--scenarios: only some recipes were asked for".to_string());
    }
    if asked.floor < DEFAULT_FLOOR as usize {
        out.push(format!(
            "--provoked {}: below the default floor of {DEFAULT_FLOOR}: exploratory",
            asked.floor
        ));
    }
    out.extend(asked.unavailable.iter().cloned());
    let cut = asked
        .cut
        .clone()
        .unwrap_or_else(|| "the budget ran out".into());
    // One cut (a budget, a merge missing parts) stops many scenarios at once:
    // its reason once, then each scenario with how far it got.
    let cut_short = cards
        .iter()
        .filter(|c| c.stopped == Stopped::CutShort)
        .count();
    let each_cut = match cut_short {
        0 | 1 => format!("cut short ({cut})"),
        n => {
            out.push(format!("cut short ({cut}): {n} scenarios"));
            "cut short".to_string()
        }
    };
    for c in cards {
        let why = match (c.question, c.stopped) {
            // A scenario a run showed its fault cannot reach asks nothing of
            // the lock: the scorecard lists it as not applicable, with why.
            (_, Stopped::Broke | Stopped::BrokeUnprovoked | Stopped::OutOfReach) => None,
            (_, Stopped::CutShort) => Some(format!(
                "{each_cut} after {} runs, {} provoked",
                c.ran, c.provoked
            )),
            (Question::CanItBreak, _) if c.counted == 0 => {
                Some(format!("no run checked of {} ran", c.ran))
            }
            (Question::CanItBreak, _) if c.fired == 0 => {
                Some(format!("its fault never took effect in {} runs", c.ran))
            }
            // No break in fewer checked runs than asked for: the runs that
            // were not checked are not passes.
            (Question::CanItBreak, _) if c.counted < asked.runs => Some(format!(
                "{} of its {} runs checked ({} ran{})",
                c.counted,
                asked.runs,
                c.ran,
                c.unchecked_why()
                    .map(|w| format!(": {w}"))
                    .unwrap_or_default()
            )),
            _ => None,
        };
        if let Some(why) = why {
            out.push(format!("{}: {why}", c.scenario));
        }
    }
    out
}

/// The fence claims a verdict short of a fenced break rests on and that are
/// not there, each with why.
fn fence_floors(
    asked: &Asked<'_>,
    cards: &[ScenarioCard],
    no_fault: Option<&NoFault>,
) -> Vec<String> {
    let mut out = Vec::new();
    // The fenced twin of each fenceable recipe that broke: at its floor, or
    // flagged, or not asked for an unprovoked break beside a fence tested.
    let mut broken: Vec<Recipe> = fenceable_breaks(asked, cards).map(|c| c.recipe).collect();
    broken.dedup();
    for recipe in broken {
        let twin = cards
            .iter()
            .find(|c| c.recipe == recipe && c.fencing == Fencing::Fenced);
        match twin {
            Some(c) if c.held() && !c.gaps.is_empty() => out.push(format!(
                "{}: at its floor, but {} of its runs unchecked ({}): a fence claim does not pass over runs nobody checked",
                c.scenario,
                c.gaps.len(),
                c.gap_lines().join("; ")
            )),
            Some(c) if c.held() || c.flagged > 0 || c.stopped == Stopped::CutShort => {}
            // `no_fence_asked` says why.
            Some(c) if c.stopped == Stopped::NoLateWrite => {}
            Some(c) => out.push(format!(
                "{}: {} of its floor of {} provoked runs in {} runs",
                c.scenario,
                c.provoked,
                c.floor.unwrap_or(0),
                c.ran
            )),
            None => out.push(format!(
                "{}-fenced: not run, yet {} broke the lock unfenced",
                recipe.name(),
                recipe.name()
            )),
        }
    }
    if asked.token {
        out.extend(
            no_fence_asked(cards)
                .into_iter()
                .filter(|n| !n.before_fault_only)
                .map(|n| n.line),
        );
    }
    if asked.token {
        out.extend(no_fault.and_then(|n| n.below_floor(asked.floor)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::Classes;
    use std::path::PathBuf;
    use Fencing::{Fenced, LibraryFencing, SelfFencing, Unfenced};
    use Recipe::{
        ClockJumpHolder, HolderCutOff, HolderPause, KillRestart, KillRestartWiped, SlowLinks,
    };

    /// `--expect` and the published table read a verdict by the name the
    /// scorecard's JSON gives it: one spelling, every verdict.
    #[test]
    fn a_verdict_is_named_as_the_scorecard_writes_it() {
        for v in AuditVerdict::ALL {
            assert_eq!(serde_json::to_value(v).unwrap(), v.name(), "{v:?}");
            assert_eq!(AuditVerdict::named(v.name()), Some(v));
        }
        assert_eq!(AuditVerdict::named("safe"), None);
    }

    /// A card as the scorecard adds it up: `flagged` of `counted`, `provoked` of them.
    fn card(
        recipe: Recipe,
        fencing: Fencing,
        flagged: usize,
        counted: usize,
        provoked: usize,
    ) -> ScenarioCard {
        let question = match fencing {
            Unfenced => Question::CanItBreak,
            _ if recipe == ClockJumpHolder => Question::CanItBreak,
            _ => Question::DoesItHold { unfenced: 0 },
        };
        let floor = (question != Question::CanItBreak && fencing == Fenced).then_some(20);
        let flagged_provoked = flagged.min(provoked);
        let stopped = match (flagged, question) {
            (1.., Question::CanItBreak) if flagged_provoked == 0 => Stopped::BrokeUnprovoked,
            (1.., _) => Stopped::Broke,
            (_, Question::CanItBreak) => Stopped::RanOut,
            _ if floor.is_some_and(|f| provoked >= f) => Stopped::Floor,
            _ => Stopped::Cap,
        };
        ScenarioCard {
            scenario: format!("{}-{}", recipe.name(), fencing.name()),
            recipe,
            fencing,
            question,
            description: String::new(),
            workload: PathBuf::new(),
            stopped,
            ran: counted,
            fired: counted,
            provoked,
            classes: Classes::default(),
            counted,
            flagged,
            flagged_provoked,
            interval_95: None,
            floor,
            upper_95: floor.and(super::super::stats::upper_95(flagged, provoked)),
            counterexample: (flagged > 0).then(|| PathBuf::from("runs/x")),
            anomalies: if flagged > 0 {
                vec![match fencing {
                    Fenced => "stale-write-accepted".into(),
                    _ => "double-holder".into(),
                }]
            } else {
                vec![]
            },
            median_first_anomaly_s: None,
            zombie_window_ms: None,
            stale_writes_accepted: 0,
            writes_rejected_by_fence: 0,
            not_counted: vec![],
            gaps: vec![],
            unobserved: 0,
            runs: vec![],
            shrunk: None,
        }
    }

    /// A twin not asked: its recipe broke unfenced only unprovoked.
    fn unasked(recipe: Recipe, fencing: Fencing) -> ScenarioCard {
        let mut c = card(recipe, fencing, 0, 0, 0);
        c.stopped = Stopped::NoLateWrite;
        c
    }

    fn asked(token: bool) -> Asked<'static> {
        Asked {
            backend: "x",
            token,
            subset: false,
            cut: None,
            floor: 20,
            runs: 10,
            unavailable: vec![],
        }
    }

    #[test]
    fn a_failure_is_named_as_audit_json_writes_it() {
        for f in [
            Failure::TokenDurability,
            Failure::StaleWriteAccepted,
            Failure::InterleavedWrites,
            Failure::Other,
        ] {
            assert_eq!(serde_json::to_value(f).unwrap(), f.name());
        }
    }

    #[test]
    fn a_fenced_break_is_unsafe_whatever_else_and_names_what_failed() {
        let mut wiped = card(KillRestartWiped, Fenced, 1, 3, 1);
        wiped.anomalies = vec!["token-not-monotonic".into()];
        let cards = [
            card(HolderPause, Unfenced, 1, 1, 1),
            card(HolderPause, Fenced, 1, 4, 2),
            card(KillRestartWiped, Unfenced, 1, 1, 1),
            wiped,
            card(SlowLinks, Unfenced, 0, 10, 0),
        ];
        // Even from a cut-short audit: a counterexample is a fact.
        let mut a = asked(true);
        a.cut = Some("the budget ran out".into());
        let d = decide(&a, &cards);
        assert_eq!(d.verdict, AuditVerdict::UnsafeEvenWithFencing);
        assert_eq!(
            d.failures,
            [Failure::TokenDurability, Failure::StaleWriteAccepted]
        );
        assert!(d.sentence.contains("token source lost"), "{}", d.sentence);
        assert_eq!(d.evidence.len(), 2);
        assert!(d.evidence[0].starts_with("holder-pause-fenced: flagged 1/4 (2 provoked"));
        assert!(
            d.evidence[0].contains("counterexample runs/x"),
            "{:?}",
            d.evidence
        );
    }

    /// The nats case: the wiped restart's fenced twin reissued a token, while
    /// slow links' twin provoked too seldom to reach its floor. The word is
    /// settled by the counterexample; the twin below its floor could only have
    /// added a "holds" claim, so it is unsettled, not missing. A scenario whose
    /// fault never took effect is still missing: no verdict rests on a dud.
    #[test]
    fn a_fenced_break_settles_the_word_and_twins_below_their_floor_are_unsettled() {
        let mut wiped = card(KillRestartWiped, Fenced, 1, 46, 9);
        wiped.anomalies = vec!["duplicate-token".into()];
        let cards = [
            card(KillRestartWiped, Unfenced, 1, 1, 1),
            wiped,
            card(SlowLinks, Unfenced, 1, 3, 1),
            card(SlowLinks, Fenced, 0, 62, 6),
        ];
        let d = decide(&asked(true), &cards);
        assert_eq!(d.verdict, AuditVerdict::UnsafeEvenWithFencing);
        assert_eq!(d.failures, [Failure::TokenDurability]);
        assert!(d.missing.is_empty(), "{:?}", d.missing);
        assert_eq!(
            d.unsettled,
            ["slow-links-fenced: 6 of its floor of 20 provoked runs in 62 runs"]
        );
        let mut dud = cards.to_vec();
        dud.push(card(HolderPause, Unfenced, 0, 10, 0));
        dud[4].fired = 0;
        let d = decide(&asked(true), &dud);
        assert_eq!(d.verdict, AuditVerdict::UnsafeEvenWithFencing);
        assert_eq!(
            d.missing,
            ["holder-pause-unfenced: its fault never took effect in 10 runs"]
        );
        assert_eq!(d.unsettled.len(), 1);
        // Short of a fenced break the same twin is what the verdict lacks.
        let d = decide(&asked(true), &cards[2..]);
        assert_eq!(d.verdict, AuditVerdict::Inconclusive);
        assert!(d.unsettled.is_empty(), "{:?}", d.unsettled);
        assert_eq!(
            d.missing,
            ["slow-links-fenced: 6 of its floor of 20 provoked runs in 62 runs"]
        );
    }

    fn run(outcome: Outcome, class: Provocation) -> RunRecord {
        RunRecord {
            outcome,
            provoked: Some(class),
            run_dir: Some(PathBuf::from("runs/r")),
            error: None,
            ..RunRecord::failed(6, 6, 1.0, String::new())
        }
    }

    /// The nats case after the fix: its cluster's create race granted twice in
    /// the first second of kill-restart runs (the kill came at 2 s). That break
    /// is the lock's, not the kill's: it asks no kill twin, and a safe word
    /// needs the fence shown to hold against it at its floor, counted over the
    /// fenced twins' runs where such a late write reached the resource.
    #[test]
    fn a_break_before_the_fault_is_the_locks_and_needs_its_own_floor() {
        let mut race = card(KillRestart, Unfenced, 1, 10, 0);
        race.runs = vec![run(Outcome::Flagged, Provocation::ProvokedBeforeFault)];
        let mut pause = card(HolderPause, Fenced, 0, 24, 20);
        pause.runs = vec![run(Outcome::Valid, Provocation::ProvokedBeforeFault); 3];
        let cards = [
            card(HolderPause, Unfenced, 1, 1, 1),
            pause,
            race,
            unasked(KillRestart, Fenced),
        ];
        let d = decide(&asked(true), &cards);
        assert_eq!(d.verdict, AuditVerdict::Inconclusive, "{d:?}");
        assert_eq!(
            d.missing,
            ["no fault: the lock granted twice before any fault took effect (first: kill-restart-unfenced run 6, counterexample runs/r); fenced, the resource decided on 3 of its floor of 20 such runs"]
        );
        assert!(
            d.evidence.iter().any(|e| e.starts_with("kill-restart-fenced: not asked: kill-restart broke the lock unfenced only unprovoked (1 flagged, none provoked: each broke before the fault took effect")),
            "{:?}",
            d.evidence
        );
        // At its floor the fence held against it, with its bound.
        let mut held = cards.clone();
        held[1].runs = vec![run(Outcome::Valid, Provocation::ProvokedBeforeFault); 20];
        let d = decide(&asked(true), &held);
        assert_eq!(d.verdict, AuditVerdict::SafeWithFencing, "{d:?}");
        assert!(
            d.evidence.iter().any(|e| e.contains(
                "decided on 20 such runs (floor 20), none flagged: failure rate ≤ 13.9%"
            )),
            "{:?}",
            d.evidence
        );
        // No token: said, and nothing is missing for it.
        let d = decide(&asked(false), &cards);
        assert_eq!(d.verdict, AuditVerdict::EfficiencyLockOnly);
        assert!(d.missing.is_empty(), "{:?}", d.missing);
        assert!(d.evidence.iter().any(|e| e.starts_with(
            "no fault: the lock granted twice before any fault took effect in 1 unfenced runs"
        )));
    }

    #[test]
    fn no_token_is_an_efficiency_lock_whatever_was_observed() {
        let quiet = [card(HolderPause, Unfenced, 0, 10, 6)];
        let d = decide(&asked(false), &quiet);
        assert_eq!(d.verdict, AuditVerdict::EfficiencyLockOnly);
        assert_eq!(
            d.evidence[0],
            "no break seen in 10 checked runs (6 provoked)"
        );
        assert!(d.evidence[1].contains("x hands out no fencing token"));
        let broke = [
            card(HolderPause, Unfenced, 1, 1, 1),
            card(HolderPause, SelfFencing, 1, 3, 1),
        ];
        let d = decide(&asked(false), &broke);
        assert_eq!(d.verdict, AuditVerdict::EfficiencyLockOnly);
        assert!(d.evidence[0].starts_with("holder-pause-unfenced: flagged 1/1"));
    }

    #[test]
    fn breaks_whose_fenced_twins_held_at_their_floor_are_safe_with_fencing() {
        let cards = [
            card(HolderPause, Unfenced, 1, 1, 1),
            card(HolderPause, Fenced, 0, 24, 20),
            card(HolderPause, SelfFencing, 0, 10, 0),
            card(SlowLinks, Unfenced, 0, 10, 0),
            card(ClockJumpHolder, SelfFencing, 1, 2, 1),
        ];
        let d = decide(&asked(true), &cards);
        assert_eq!(d.verdict, AuditVerdict::SafeWithFencing, "{d:?}");
        assert!(d.missing.is_empty(), "{:?}", d.missing);
        assert!(
            d.evidence.iter().any(|e| e
                .starts_with("holder-pause-fenced: flagged 0/24 (20 provoked")
                && e.contains("failure rate ≤ 13.9%")),
            "{:?}",
            d.evidence
        );
        assert!(d
            .evidence
            .iter()
            .any(|e| e.contains("clock-jump-holder breaks self-fencing only")));
    }

    /// The nats case: a fenced twin whose runs never provoked the danger
    /// supports nothing, however many of them were clean.
    #[test]
    fn a_fenced_twin_below_its_floor_of_provoked_runs_is_inconclusive() {
        for provoked in [0, 19] {
            let cards = [
                card(HolderPause, Unfenced, 1, 1, 1),
                card(HolderPause, Fenced, 0, 60, provoked),
            ];
            let d = decide(&asked(true), &cards);
            assert_eq!(d.verdict, AuditVerdict::Inconclusive, "{provoked}");
            assert_eq!(
                d.missing,
                [format!(
                    "holder-pause-fenced: {provoked} of its floor of 20 provoked runs in 60 runs"
                )]
            );
        }
    }

    /// The Go etcd Mutex case with the holder pause's break gone: every break
    /// came through a retired holder that never wrote again, so no fence was
    /// ever tested, and zero asked twins make no safe word.
    #[test]
    fn breaks_all_unprovoked_test_no_fence_and_are_inconclusive() {
        let cards = [
            card(HolderPause, Unfenced, 0, 10, 3),
            card(HolderCutOff, Unfenced, 1, 10, 0),
            unasked(HolderCutOff, Fenced),
            unasked(HolderCutOff, SelfFencing),
            card(KillRestart, Unfenced, 2, 10, 0),
            unasked(KillRestart, Fenced),
        ];
        let d = decide(&asked(true), &cards);
        assert_eq!(d.verdict, AuditVerdict::Inconclusive, "{d:?}");
        assert_eq!(
            d.missing,
            [
                "holder-cut-off-fenced: not asked: holder-cut-off broke the lock unfenced once, none provoked: its fence was never asked (no deposed holder's late write reached the resource)",
                "kill-restart-fenced: not asked: kill-restart broke the lock unfenced 2 times, none provoked: its fence was never asked (no deposed holder's late write reached the resource)",
            ]
        );
        assert!(
            d.evidence[0].starts_with("holder-cut-off-unfenced: flagged 1/10")
                && d.evidence[0].contains("none of them provoked"),
            "{:?}",
            d.evidence
        );
        // The lock still broke: without a token that is all there is to say.
        let d = decide(&asked(false), &cards);
        assert_eq!(d.verdict, AuditVerdict::EfficiencyLockOnly);
        assert!(d.missing.is_empty(), "{:?}", d.missing);
    }

    /// The Go etcd Mutex case (docs/audits/etcd-go-mutex-provoked.json): the
    /// holder pause's break was provoked and its fence held at its floor, but
    /// the holder cut off broke the lock unfenced through retired holders that
    /// never wrote late, so its fence was never asked. No safe word past a
    /// fence nobody tested: it was `safe-with-fencing`, it is inconclusive.
    #[test]
    fn an_unprovoked_break_beside_a_fence_that_held_is_inconclusive() {
        let cards = [
            card(HolderPause, Unfenced, 1, 1, 1),
            card(HolderPause, Fenced, 0, 22, 20),
            card(HolderCutOff, Unfenced, 10, 10, 0),
            unasked(HolderCutOff, Fenced),
            unasked(HolderCutOff, SelfFencing),
        ];
        let d = decide(&asked(true), &cards);
        assert_eq!(d.verdict, AuditVerdict::Inconclusive, "{d:?}");
        assert_eq!(
            d.missing,
            ["holder-cut-off-fenced: not asked: holder-cut-off broke the lock unfenced 10 times, none provoked: its fence was never asked (no deposed holder's late write reached the resource)"]
        );
        // Had the pause's fenced twin stopped below its floor, both are missing.
        let mut short = cards.clone();
        short[1] = card(HolderPause, Fenced, 0, 60, 6);
        let d = decide(&asked(true), &short);
        assert_eq!(d.verdict, AuditVerdict::Inconclusive);
        assert_eq!(
            d.missing[0],
            "holder-pause-fenced: 6 of its floor of 20 provoked runs in 60 runs"
        );
        assert_eq!(d.missing.len(), 2);
        // Beside a counterexample the word stands, and the untested fence is
        // unsettled, not missing.
        let mut broken = cards.clone();
        broken[1] = card(HolderPause, Fenced, 1, 3, 1);
        let d = decide(&asked(true), &broken);
        assert_eq!(d.verdict, AuditVerdict::UnsafeEvenWithFencing);
        assert!(d.missing.is_empty(), "{:?}", d.missing);
        assert_eq!(d.unsettled.len(), 1, "{:?}", d.unsettled);
        assert!(d.unsettled[0].starts_with("holder-cut-off-fenced: not asked"));
    }

    /// `--provoked 3`: three clean provoked runs bound the failure rate at
    /// ≤ 63.2%, nothing to adopt. Below the default floor the audit is
    /// exploratory: never complete, never a safe word.
    #[test]
    fn a_floor_below_the_default_is_exploratory_and_never_complete() {
        let cards = [card(HolderPause, Unfenced, 1, 1, 1), {
            let mut c = card(HolderPause, Fenced, 0, 3, 3);
            c.floor = Some(3);
            c.stopped = Stopped::Floor;
            c
        }];
        let mut a = asked(true);
        a.floor = 3;
        let d = decide(&a, &cards);
        assert_eq!(d.verdict, AuditVerdict::Inconclusive, "{d:?}");
        assert_eq!(
            d.missing,
            ["--provoked 3: below the default floor of 20: exploratory"]
        );
        assert!(
            d.sentence.contains("exploratory, floor 3"),
            "{}",
            d.sentence
        );
        a.subset = true;
        let d = decide(&a, &cards);
        assert_eq!(d.verdict, AuditVerdict::Partial);
        assert_eq!(d.missing.len(), 2, "{:?}", d.missing);
        assert!(d.sentence.contains("exploratory"), "{}", d.sentence);
        // At the default the same runs at their floor are safe with fencing.
        let mut at_default = cards.clone();
        at_default[1] = card(HolderPause, Fenced, 0, 20, 20);
        let d = decide(&asked(true), &at_default);
        assert_eq!(d.verdict, AuditVerdict::SafeWithFencing);
        assert!(!d.sentence.contains("exploratory"));
    }

    /// disk-full wants root: not run as root, the backend still has it, so
    /// the audit lacks it.
    #[test]
    fn a_scenario_this_machine_could_not_run_is_missing() {
        let cards = [
            card(HolderPause, Unfenced, 1, 1, 1),
            card(HolderPause, Fenced, 0, 20, 20),
        ];
        let mut a = asked(true);
        a.unavailable = vec!["disk-full: not run here: the audit runs as root".into()];
        let d = decide(&a, &cards);
        assert_eq!(d.verdict, AuditVerdict::Inconclusive, "{d:?}");
        assert_eq!(
            d.missing,
            ["disk-full: not run here: the audit runs as root"]
        );
    }

    /// The Go Mutex's wiped restart: 4 of 10 runs checked, 6 with no client
    /// acquiring after the fault. Had it not broken, 4 clean runs are not its
    /// 10; broken or not, the 6 are an availability finding, never a pass.
    #[test]
    fn a_scenario_short_of_its_checked_runs_is_missing_and_its_outage_a_finding() {
        let mut wiped = card(KillRestartWiped, Unfenced, 0, 4, 0);
        wiped.ran = 10;
        wiped.unobserved = 6;
        let cards = [
            card(HolderPause, Unfenced, 1, 1, 1),
            card(HolderPause, Fenced, 0, 20, 20),
            wiped,
        ];
        let d = decide(&asked(true), &cards);
        assert_eq!(d.verdict, AuditVerdict::Inconclusive, "{d:?}");
        assert_eq!(
            d.missing,
            ["kill-restart-wiped-unfenced: 4 of its 10 runs checked (10 ran: no client acquired after the fault in 6)"]
        );
        assert!(
            d.evidence.iter().any(|e| e
                == "kill-restart-wiped-unfenced: availability: no client acquired the lock after the fault in 6 of 10 runs (not a safety pass: nothing was checked in them)"),
            "{:?}",
            d.evidence
        );
        // Without a token the finding is still said.
        let d = decide(&asked(false), &cards);
        assert!(d.evidence.iter().any(|e| e.contains("availability")));
    }

    /// A fenced twin at its floor with a run its checker gave up on: the
    /// floor does not pass over a run nobody checked.
    #[test]
    fn a_twin_at_its_floor_past_an_unchecked_run_is_missing() {
        let mut twin = card(HolderPause, Fenced, 0, 20, 20);
        twin.ran = 21;
        twin.gaps = vec![crate::card::Gap {
            run: 7,
            seed: 7,
            why: "the checker gave up within its limits".into(),
        }];
        let cards = [card(HolderPause, Unfenced, 1, 1, 1), twin];
        let d = decide(&asked(true), &cards);
        assert_eq!(d.verdict, AuditVerdict::Inconclusive, "{d:?}");
        assert_eq!(
            d.missing,
            ["holder-pause-fenced: at its floor, but 1 of its runs unchecked (run 7 (seed 7): the checker gave up within its limits): a fence claim does not pass over runs nobody checked"]
        );
    }

    #[test]
    fn a_cut_or_a_subset_never_gets_a_safe_word() {
        let cards = [
            card(HolderPause, Unfenced, 1, 1, 1),
            card(HolderPause, Fenced, 0, 24, 20),
        ];
        let mut a = asked(true);
        a.subset = true;
        let d = decide(&a, &cards);
        assert_eq!(d.verdict, AuditVerdict::Partial);
        assert_eq!(d.missing, ["--scenarios: only some recipes were asked for"]);
        let mut cut = cards.clone();
        cut[1].stopped = Stopped::CutShort;
        let mut a = asked(true);
        a.cut = Some("the budget (2m00s) ran out".into());
        let d = decide(&a, &cut);
        assert_eq!(d.verdict, AuditVerdict::Inconclusive);
        assert_eq!(
            d.missing,
            ["holder-pause-fenced: cut short (the budget (2m00s) ran out) after 24 runs, 20 provoked"]
        );
        // Several cut by it (a merge missing parts: a long reason): it once.
        cut[0].stopped = Stopped::CutShort;
        let d = decide(&a, &cut);
        assert_eq!(
            d.missing,
            [
                "cut short (the budget (2m00s) ran out): 2 scenarios",
                "holder-pause-unfenced: cut short after 1 runs, 1 provoked",
                "holder-pause-fenced: cut short after 24 runs, 20 provoked"
            ]
        );
    }

    #[test]
    fn nothing_flagged_is_no_break_found_with_its_bound() {
        let cards = [card(HolderPause, Unfenced, 0, 10, 7), {
            let mut c = card(HolderPause, Fenced, 0, 0, 0);
            c.stopped = Stopped::NotAsked;
            c.ran = 0;
            c
        }];
        let d = decide(&asked(true), &cards);
        assert_eq!(d.verdict, AuditVerdict::NoBreakFound, "{d:?}");
        assert_eq!(
            d.evidence,
            ["holder-pause-unfenced: no break in 10 checked runs (7 provoked): break rate ≤ 25.9% (95%, exact)"]
        );
    }

    /// The Go Mutex adapter's library-fencing holder-clock rows: the first run
    /// showed the fault never reaches the library, so nothing waits on them.
    #[test]
    fn a_scenario_measured_out_of_reach_is_not_missing() {
        let mut library = card(ClockJumpHolder, LibraryFencing, 0, 0, 0);
        library.ran = 1;
        library.stopped = Stopped::OutOfReach;
        let cards = [card(ClockJumpHolder, SelfFencing, 0, 10, 0), library];
        let d = decide(&asked(true), &cards);
        assert!(d.missing.is_empty(), "{:?}", d.missing);
        assert_eq!(d.verdict, AuditVerdict::NoBreakFound, "{d:?}");
        // Run to its runs untested instead, it is what a verdict lacks.
        let mut untested = cards.clone();
        untested[1].stopped = Stopped::RanOut;
        untested[1].ran = 10;
        let d = decide(&asked(true), &untested);
        assert_eq!(d.verdict, AuditVerdict::Inconclusive);
        assert_eq!(
            d.missing,
            ["clock-jump-holder-library-fencing: no run checked of 10 ran"]
        );
    }

    #[test]
    fn a_scenario_with_no_run_checked_or_no_fault_taking_effect_is_missing() {
        let mut unseen = card(SlowLinks, Unfenced, 0, 10, 0);
        unseen.fired = 0;
        let cards = [card(HolderPause, Unfenced, 0, 0, 0), unseen];
        let d = decide(&asked(true), &cards);
        assert_eq!(d.verdict, AuditVerdict::Inconclusive);
        assert_eq!(
            d.missing,
            [
                "holder-pause-unfenced: no run checked of 0 ran",
                "slow-links-unfenced: its fault never took effect in 10 runs"
            ]
        );
    }
}
