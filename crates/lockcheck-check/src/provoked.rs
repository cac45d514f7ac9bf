//! Whether a run *exercised* the danger it was built for (history.md v1.2,
//! "Deposed holders and provoked runs"): a holder deposed — another process's
//! acquire completed `ok` while its critical section was still open — and at
//! least one of its late writes reaching the resource, so that the resource (and
//! its fence, if any) had to decide. Only such a run is evidence that a fence
//! holds; a clean run where no deposed holder wrote is not.
//!
//! A pure function of what a run recorded (its history and the resource's log
//! of applied writes), read by one function, [`of_run`]: `lockcheck run`,
//! `analyze`, `report` and the audit give one run one class.

use super::calls::{Call, Calls, Outcome};
use lockcheck_history::{error, fault_ops, AppliedWrite, History, Process};
use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};

/// What a run exercised, most to least.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Provocation {
    /// A holder was deposed and one of its late writes reached the resource.
    Provoked,
    /// A holder was deposed, but none of its late writes reached the resource
    /// (it wrote nothing more, or withheld its writes itself).
    DeposedNotProvoked,
    /// Holders were deposed only before the run's fault took effect, and a late
    /// write of one reached the resource: the lock granted twice on its own (a
    /// server's race, say), which the fault cannot have caused. The resource had
    /// to decide, but not on the danger the run was built for.
    ProvokedBeforeFault,
    /// A fault took effect, but no holder was deposed.
    FiredNobodyDeposed,
    /// No fault took effect: the history records none started.
    FaultNotSeen,
}

impl Provocation {
    pub fn name(self) -> &'static str {
        match self {
            Provocation::Provoked => "provoked",
            Provocation::DeposedNotProvoked => "deposed-not-provoked",
            Provocation::ProvokedBeforeFault => "provoked-before-fault",
            Provocation::FiredNobodyDeposed => "fired-nobody-deposed",
            Provocation::FaultNotSeen => "fault-not-seen",
        }
    }

    /// In words, for a run's report.
    pub fn sentence(self) -> &'static str {
        match self {
            Provocation::Provoked => {
                "provoked: a deposed holder's late write reached the resource, which had to decide"
            }
            Provocation::DeposedNotProvoked => {
                "deposed, not provoked: a holder was deposed, but none of its later writes reached the resource"
            }
            Provocation::ProvokedBeforeFault => {
                "provoked before its fault: a holder was deposed before any fault took effect (the lock granted twice on its own) and its late write reached the resource"
            }
            Provocation::FiredNobodyDeposed => {
                "fired, nobody deposed: the fault took effect, but no holder lost the lock while it held it"
            }
            Provocation::FaultNotSeen => {
                "fault not seen: the history records no fault taking effect"
            }
        }
    }

    /// Whether the fault took effect at all.
    pub fn fired(self) -> bool {
        self != Provocation::FaultNotSeen
    }
}

/// The run's provocation, with the figures behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provoked {
    pub class: Provocation,
    /// Critical sections deposed while still open.
    pub deposed: usize,
    /// Writes deposed holders invoked after their deposition.
    pub late_writes: usize,
    /// Of those, the ones that reached the resource (`ok`, `stale-token`, `missing-token`).
    pub late_writes_reached: usize,
    /// Fault starts the history records (nemesis ops that open a fault).
    pub faults_started: usize,
    /// Of the deposed, those deposed before the first fault took effect: not
    /// the fault's doing, so they provoke nothing the run was built for.
    #[serde(default)]
    pub deposed_before_fault: usize,
}

/// The writes the resource's log shows applied, by (process, data): where a
/// write answered `info` (its fate unknown to the history) landed.
type Landed<'a> = FxHashSet<(u64, &'a str)>;

/// Whether the resource's log shows `call`, a write, applied.
fn applied(history: &History, landed: &Landed, call: &Call) -> bool {
    let data = history.ops[call.invoke].value.get("data");
    data.and_then(serde_json::Value::as_str)
        .is_some_and(|d| landed.contains(&(call.process, d)))
}

/// Whether a late write reached the resource: applied, or refused by the
/// resource's own fence. A write the client withheld (`self-fenced…`), or one
/// that failed otherwise, did not; one whose fate is unknown (`info`) did when
/// the resource's log shows it applied.
fn reached(history: &History, calls: &Calls, landed: &Landed, c: usize) -> bool {
    let call = &calls.calls[c];
    match call.outcome {
        Outcome::Ok | Outcome::StaleRejected => true,
        Outcome::Fail => call
            .completion
            .and_then(|p| history.ops[p].error.as_deref())
            .is_some_and(|e| e == error::MISSING_TOKEN),
        Outcome::Info => applied(history, landed, call),
        Outcome::Withheld => false,
    }
}

/// The provocation of a run from what it recorded: its history and, where the
/// run kept one, the resource's log of applied writes (`resource.jsonl`), which
/// shows where a write answered `info` landed: a deposed holder's write sent
/// before its successor's grant, unanswered, and applied after the successor's
/// own write reached the resource late. `lockcheck run`, `analyze`, `report`
/// and the audit all classify a run through this one function.
pub fn of_run(history: &History, resource: Option<&[AppliedWrite]>) -> Provoked {
    let landed: Landed = resource
        .unwrap_or_default()
        .iter()
        .map(|a| (a.process, a.data.as_str()))
        .collect();
    provoked(history, &Calls::of_run(history, resource), &landed)
}

/// The provocation of a run from its history and its calls.
///
/// A fault counts as taken effect when the history records its start with at
/// least one target: every fault records its start only once its act is done (a
/// client's process group sent SIGSTOP, a killed server's process reaped,
/// blackhole rules or proxies in place, a clock shifted through the interposer);
/// a fault that found nothing to hit records nothing, and a clock fault that
/// reached none of its targets records them under `unreachable`, none under
/// `targets`. The README's audit section lists each kind's evidence.
///
/// A deposition before the first fault took effect is not the fault's doing (a
/// nats cluster's create race granted twice in the first second of runs whose
/// node was killed only at 2 s, and those runs were counted as the kill's
/// breaks): it makes a run provoked *before its fault*, never provoked.
fn provoked(history: &History, calls: &Calls, landed: &Landed) -> Provoked {
    let starts: Vec<u64> = history
        .ops
        .iter()
        .filter(|o| o.process == Process::Nemesis && fault_ops::started_by(&o.f).is_some())
        // A start that reached none of its targets (a clock fault every one of
        // whose targets was out of the interposer's reach) changed nothing.
        .filter(|o| {
            o.value
                .get("targets")
                .and_then(serde_json::Value::as_array)
                .is_some_and(|t| !t.is_empty())
        })
        .map(|o| o.time)
        .collect();
    let first_fault = starts.iter().copied().min().unwrap_or(u64::MAX);
    let mut p = Provoked {
        class: Provocation::FaultNotSeen,
        deposed: 0,
        late_writes: 0,
        late_writes_reached: 0,
        faults_started: starts.len(),
        deposed_before_fault: 0,
    };
    let (mut reached_after_fault, mut reached_before_fault) = (0, 0);
    for (i, s) in calls.sections.iter().enumerate() {
        let Some(by) = calls.deposer(i) else {
            continue;
        };
        p.deposed += 1;
        let before_fault = by.start < first_fault;
        p.deposed_before_fault += usize::from(before_fault);
        // Late: invoked after the successor's acquire completed, or, unanswered,
        // applied after a write invoked after it (the section, read with the
        // resource's log, was last seen holding past the successor's grant).
        let landed_late = |call: &Call| {
            call.outcome == Outcome::Info
                && s.release.is_none()
                && s.end > by.start
                && applied(history, landed, call)
        };
        let late = s.inside.iter().copied().filter(|&c| {
            let call = &calls.calls[c];
            call.is_write() && (call.t0 > by.start || landed_late(call))
        });
        for c in late {
            let got_in = reached(history, calls, landed, c);
            p.late_writes += 1;
            p.late_writes_reached += usize::from(got_in);
            reached_after_fault += usize::from(got_in && !before_fault);
            reached_before_fault += usize::from(got_in && before_fault);
        }
    }
    p.class = if p.faults_started == 0 {
        Provocation::FaultNotSeen
    } else if reached_after_fault > 0 {
        Provocation::Provoked
    } else if reached_before_fault > 0 && p.deposed == p.deposed_before_fault {
        Provocation::ProvokedBeforeFault
    } else if p.deposed > 0 {
        Provocation::DeposedNotProvoked
    } else {
        Provocation::FiredNobodyDeposed
    };
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockcheck_history::HistoryBuilder as H;
    use serde_json::json;

    fn class(h: H) -> Provoked {
        let h = h.history();
        of_run(&h, None)
    }

    /// Process 0 acquires (token 1) and is paused; process 1 acquires (token 2)
    /// at 1201 ms while 0 never released.
    fn deposed() -> H {
        H::default()
            .acquire(0, 0, Some(1))
            .write(10, 0, Some(1), 1)
            .nemesis(20, "pause", &["client-0"])
            .inv(1100, 1, "acquire", json!({"lock": "l"}))
            .ok(1201, 1, "acquire", json!({"token": 2, "lease_ms": 1000}))
            .write(1300, 1, Some(2), 2)
            .nemesis(3520, "resume", &["client-0"])
    }

    #[test]
    fn a_late_write_the_fence_rejected_provokes_the_run() {
        let p = class(
            deposed()
                .inv(3521, 0, "write", json!({"token": 1, "data": "x"}))
                .fail(3522, 0, "write", "stale-token"),
        );
        assert_eq!(p.class, Provocation::Provoked);
        assert_eq!((p.deposed, p.late_writes, p.late_writes_reached), (1, 1, 1));
    }

    #[test]
    fn a_late_write_applied_or_refused_for_no_token_provokes_the_run() {
        let p = class(deposed().write(3521, 0, Some(1), 3));
        assert_eq!(p.class, Provocation::Provoked);
        let p = class(
            deposed()
                .inv(3521, 0, "write", json!({"token": null, "data": "x"}))
                .fail(3522, 0, "write", "missing-token"),
        );
        assert_eq!(p.class, Provocation::Provoked);
    }

    /// The case the audit must never count for a fence: the deposed holder never
    /// wrote after the successor's grant, so the fence decided nothing.
    #[test]
    fn a_fenced_run_where_the_deposed_holder_never_wrote_after_the_grant_is_not_provoked() {
        let p = class(deposed().release(3521, 0, Some(1)));
        assert_eq!(p.class, Provocation::DeposedNotProvoked);
        assert_eq!((p.deposed, p.late_writes), (1, 0));
    }

    #[test]
    fn a_self_fenced_or_failed_late_write_did_not_reach_the_resource() {
        for err in [error::SELF_FENCED, "connection refused"] {
            let p = class(
                deposed()
                    .inv(3521, 0, "write", json!({"token": 1, "data": "x"}))
                    .fail(3522, 0, "write", err),
            );
            assert_eq!(p.class, Provocation::DeposedNotProvoked, "{err}");
            assert_eq!((p.late_writes, p.late_writes_reached), (1, 0), "{err}");
        }
        // Unknown fate: not known to have reached it.
        let p = class(deposed().inv(3521, 0, "write", json!({"token": 1, "data": "x"})));
        assert_eq!(p.class, Provocation::DeposedNotProvoked);
    }

    /// A write invoked before the successor's grant is not late, whenever it lands.
    #[test]
    fn a_write_invoked_before_the_grant_is_not_late() {
        let p = class(
            H::default()
                .acquire(0, 0, Some(1))
                .nemesis(20, "pause", &["client-0"])
                .inv(1100, 0, "write", json!({"token": 1, "data": "x"}))
                .inv(1100, 1, "acquire", json!({"lock": "l"}))
                .ok(1201, 1, "acquire", json!({"token": 2, "lease_ms": 1000}))
                .ok(3500, 0, "write", json!({"token": 1, "data": "x", "seq": 1})),
        );
        assert_eq!(p.class, Provocation::DeposedNotProvoked);
        assert_eq!(p.late_writes, 0);
    }

    /// The nats case: two creates in flight at once both won (nats-server#4320)
    /// 0.3 s into a run whose node was killed at 2 s. The kill did not depose
    /// anyone; counted as its break, it asked for fenced twins whose runs the
    /// race, not the kill, provoked.
    #[test]
    fn a_deposition_before_the_fault_took_effect_is_not_the_faults() {
        let race = || {
            H::default()
                .acquire(0, 0, Some(3))
                .acquire(1, 1, Some(4))
                .write(10, 0, Some(3), 1)
        };
        let p = class(race().nemesis(2000, "kill", &["n1"]));
        assert_eq!(p.class, Provocation::ProvokedBeforeFault);
        assert_eq!((p.deposed, p.deposed_before_fault), (1, 1));
        assert_eq!(p.late_writes_reached, 1);
        // Deposed before the fault and nothing got in: deposed, not provoked.
        let quiet = H::default()
            .acquire(0, 0, Some(3))
            .acquire(1, 1, Some(4))
            .nemesis(2000, "kill", &["n1"]);
        assert_eq!(class(quiet).class, Provocation::DeposedNotProvoked);
        // A deposition after the fault's effect as well: the run is provoked.
        let both = race()
            .release(20, 0, Some(3))
            .release(30, 1, Some(4))
            .nemesis(2000, "kill", &["n1"])
            .acquire(2100, 0, Some(5))
            .acquire(2200, 1, Some(6))
            .write(2300, 0, Some(5), 2);
        let p = class(both);
        assert_eq!(p.class, Provocation::Provoked);
        assert_eq!((p.deposed, p.deposed_before_fault), (2, 1));
    }

    #[test]
    fn a_fault_with_nobody_deposed_fired_and_no_fault_is_not_seen() {
        let quiet = || {
            H::default()
                .acquire(0, 0, Some(1))
                .write(10, 0, Some(1), 1)
                .release(20, 0, Some(1))
                .acquire(30, 1, Some(2))
                .write(40, 1, Some(2), 2)
                .release(50, 1, Some(2))
        };
        let p = class(quiet().nemesis(60, "kill", &["n1"]));
        assert_eq!(p.class, Provocation::FiredNobodyDeposed);
        assert_eq!(p.faults_started, 1);
        // Only the end of a fault (no start): nothing took effect.
        let p = class(quiet().nemesis(60, "resume", &["client-0"]));
        assert_eq!(p.class, Provocation::FaultNotSeen);
        // A clock fault that reached none of its targets.
        let p = class(quiet().nemesis(60, "clock-skew", &[]));
        assert_eq!(p.class, Provocation::FaultNotSeen);
        let p = class(quiet().nemesis(60, "clock-skew", &["n1"]));
        assert_eq!(p.class, Provocation::FiredNobodyDeposed);
        // Deposed without any fault recorded: still not seen, whatever happened.
        let ops = deposed().write(3521, 0, Some(1), 3).0;
        let p = class(H(ops
            .into_iter()
            .filter(|o| o.process != Process::Nemesis)
            .collect()));
        assert_eq!(p.class, Provocation::FaultNotSeen);
    }
}
