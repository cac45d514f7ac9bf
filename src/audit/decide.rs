//! The verdict of an audit, from a decision tree over its scenarios' figures:
//!
//! 1. a fenced scenario flagged (a stale write got past the token check, a token
//!    went backwards or repeated): **unsafe even with fencing**;
//! 2. else no run counted at all (every run failed, missed its faults, or the budget
//!    allowed none): **inconclusive**, never "no break found": a verdict over zero
//!    runs would read as a clean bill for a lock nothing tested;
//! 3. else no scenario flagged: **no break found** (within the budget);
//! 4. else the backend hands out no token: **an efficiency lock only** (two holders
//!    happen; fine where a duplicate run costs nothing);
//! 5. else every recipe that broke ran fenced, and no fenced run was flagged: **safe
//!    with fencing** (a clock fault on the holder breaks self-fencing only: a fenced
//!    resource never reads the holder's clock, so it needs no fenced run); a recipe that broke but never ran fenced (the budget, errors)
//!    leaves it at an efficiency lock, and says which.
//!
//! Each verdict comes with its evidence: the lines of the scenarios that decided it.

use super::battery::Fencing;
use super::scorecard::ScenarioCard;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum AuditVerdict {
    EfficiencyLockOnly,
    SafeWithFencing,
    UnsafeEvenWithFencing,
    NoBreakFound,
    Inconclusive,
}

impl AuditVerdict {
    pub fn name(self) -> &'static str {
        match self {
            AuditVerdict::EfficiencyLockOnly => "efficiency-lock-only",
            AuditVerdict::SafeWithFencing => "safe-with-fencing",
            AuditVerdict::UnsafeEvenWithFencing => "unsafe-even-with-fencing",
            AuditVerdict::NoBreakFound => "no-break-found",
            AuditVerdict::Inconclusive => "inconclusive",
        }
    }

    pub fn sentence(self) -> &'static str {
        match self {
            AuditVerdict::EfficiencyLockOnly => "an efficiency lock only: two holders happen; use it where a duplicate run costs nothing",
            AuditVerdict::SafeWithFencing => "safe with fencing: two holders happen, and no stale write got past the token check",
            AuditVerdict::UnsafeEvenWithFencing => "unsafe even with fencing: the token check cannot be trusted (a token went backwards or was handed out twice, or a stale write got past it)",
            AuditVerdict::NoBreakFound => "no break found within the budget",
            AuditVerdict::Inconclusive => "inconclusive: no run was checked, so nothing is known about this lock",
        }
    }
}

/// The verdict over `cards` for a backend that hands out a token (`token`) or not,
/// and the evidence behind it.
pub fn decide(backend: &str, token: bool, cards: &[ScenarioCard]) -> (AuditVerdict, Vec<String>) {
    let flagged = |c: &&ScenarioCard| c.flagged > 0;
    let fenced_breaks: Vec<String> = cards
        .iter()
        .filter(|c| c.fencing == Fencing::Fenced)
        .filter(flagged)
        .map(ScenarioCard::evidence)
        .collect();
    if !fenced_breaks.is_empty() {
        return (AuditVerdict::UnsafeEvenWithFencing, fenced_breaks);
    }
    let breaks: Vec<&ScenarioCard> = cards
        .iter()
        .filter(|c| c.fencing != Fencing::Fenced)
        .filter(flagged)
        .collect();
    if breaks.is_empty() {
        let counted: usize = cards.iter().map(|c| c.counted).sum();
        let ran = cards.iter().filter(|c| c.counted > 0).count();
        if counted == 0 {
            return (
                AuditVerdict::Inconclusive,
                vec![format!(
                    "0 runs of {} scenarios checked: every run failed, missed its faults or was left out",
                    cards.len()
                )],
            );
        }
        return (
            AuditVerdict::NoBreakFound,
            vec![format!(
                "{counted} runs of {ran} scenarios (of {}) checked: none flagged",
                cards.len()
            )],
        );
    }
    let mut evidence: Vec<String> = breaks.iter().map(|c| c.evidence()).collect();
    if !token {
        evidence.push(format!(
            "{backend} hands out no fencing token: nothing lets the resource turn a deposed holder away"
        ));
        return (AuditVerdict::EfficiencyLockOnly, evidence);
    }
    let mut recipes: Vec<_> = breaks.iter().map(|c| c.recipe).collect();
    recipes.sort();
    recipes.dedup();
    let mut unshown = Vec::new();
    for recipe in recipes {
        if !recipe.fenceable() {
            evidence.push(format!(
                "{} breaks self-fencing only: a fenced resource never reads the holder's clock",
                recipe.name()
            ));
            continue;
        }
        let fenced = cards
            .iter()
            .find(|c| c.recipe == recipe && c.fencing == Fencing::Fenced);
        match fenced {
            Some(c) if c.counted > 0 => evidence.push(c.evidence()),
            _ => unshown.push(format!("{}-fenced", recipe.name())),
        }
    }
    if unshown.is_empty() {
        (AuditVerdict::SafeWithFencing, evidence)
    } else {
        evidence.push(format!(
            "fencing not shown to hold: {} did not run to a verdict",
            unshown.join(", ")
        ));
        (AuditVerdict::EfficiencyLockOnly, evidence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::battery::Recipe;
    use std::path::PathBuf;

    fn card(recipe: Recipe, fencing: Fencing, flagged: usize, counted: usize) -> ScenarioCard {
        ScenarioCard {
            scenario: format!("{}-{}", recipe.name(), fencing.name()),
            recipe,
            fencing,
            description: String::new(),
            workload: PathBuf::new(),
            runs_planned: 10,
            counted,
            flagged,
            interval_95: None,
            anomalies: if flagged > 0 {
                vec!["double-holder".into()]
            } else {
                vec![]
            },
            median_first_anomaly_s: None,
            zombie_window_ms: None,
            stale_writes_accepted: 0,
            writes_rejected_by_fence: 0,
            not_counted: vec![],
            runs: vec![],
        }
    }

    use Fencing::{Fenced, SelfFencing, Unfenced};
    use Recipe::{HolderPause, KillRestart, SlowLinks};

    #[test]
    fn a_fenced_break_is_unsafe_whatever_else() {
        let cards = [
            card(HolderPause, Unfenced, 10, 10),
            card(HolderPause, Fenced, 1, 10),
            card(SlowLinks, Fenced, 0, 10),
        ];
        let (v, ev) = decide("x", true, &cards);
        assert_eq!(v, AuditVerdict::UnsafeEvenWithFencing);
        assert_eq!(ev, ["holder-pause-fenced: flagged 1/10 (double-holder)"]);
    }

    #[test]
    fn nothing_flagged_is_no_break_found() {
        let cards = [
            card(HolderPause, Unfenced, 0, 10),
            card(HolderPause, Fenced, 0, 4),
            card(SlowLinks, Unfenced, 0, 0),
        ];
        let (v, ev) = decide("x", true, &cards);
        assert_eq!(v, AuditVerdict::NoBreakFound);
        assert_eq!(ev, ["14 runs of 2 scenarios (of 3) checked: none flagged"]);
    }

    #[test]
    fn no_run_checked_is_inconclusive_not_no_break_found() {
        let cards = [
            card(HolderPause, Unfenced, 0, 0),
            card(HolderPause, Fenced, 0, 0),
        ];
        let (v, ev) = decide("x", true, &cards);
        assert_eq!(v, AuditVerdict::Inconclusive);
        assert_eq!(ev, ["0 runs of 2 scenarios checked: every run failed, missed its faults or was left out"]);
    }

    #[test]
    fn a_break_without_a_token_is_an_efficiency_lock() {
        let cards = [
            card(HolderPause, Unfenced, 9, 10),
            card(HolderPause, SelfFencing, 2, 10),
        ];
        let (v, ev) = decide("redlock", false, &cards);
        assert_eq!(v, AuditVerdict::EfficiencyLockOnly);
        assert_eq!(ev.len(), 3);
        assert!(
            ev[2].contains("redlock hands out no fencing token"),
            "{ev:?}"
        );
    }

    #[test]
    fn breaks_whose_fenced_twins_held_are_safe_with_fencing() {
        let cards = [
            card(HolderPause, Unfenced, 10, 10),
            card(HolderPause, Fenced, 0, 10),
            card(KillRestart, SelfFencing, 3, 10),
            card(KillRestart, Fenced, 0, 10),
            card(SlowLinks, Unfenced, 0, 10),
        ];
        let (v, ev) = decide("redis", true, &cards);
        assert_eq!(v, AuditVerdict::SafeWithFencing);
        assert_eq!(
            ev,
            [
                "holder-pause-unfenced: flagged 10/10 (double-holder)",
                "kill-restart-self-fencing: flagged 3/10 (double-holder)",
                "holder-pause-fenced: flagged 0/10",
                "kill-restart-fenced: flagged 0/10",
            ]
        );
    }

    #[test]
    fn a_holder_clock_break_needs_no_fenced_twin() {
        let cards = [
            card(HolderPause, Unfenced, 4, 4),
            card(HolderPause, Fenced, 0, 4),
            card(Recipe::ClockJumpHolder, SelfFencing, 4, 4),
        ];
        let (v, ev) = decide("etcd", true, &cards);
        assert_eq!(v, AuditVerdict::SafeWithFencing, "{ev:?}");
        assert!(ev
            .last()
            .unwrap()
            .contains("clock-jump-holder breaks self-fencing only"));
    }

    #[test]
    fn a_break_whose_fenced_twin_never_ran_is_not_called_safe() {
        let cards = [
            card(HolderPause, Unfenced, 10, 10),
            card(HolderPause, Fenced, 0, 10),
            card(KillRestart, Unfenced, 4, 10),
            card(KillRestart, Fenced, 0, 0),
        ];
        let (v, ev) = decide("redis", true, &cards);
        assert_eq!(v, AuditVerdict::EfficiencyLockOnly);
        assert!(
            ev.last()
                .unwrap()
                .contains("kill-restart-fenced did not run"),
            "{ev:?}"
        );
    }
}
