//! An election run (`mode = "election"` in verdict.json or the workload) in its own
//! words: a critical section is a *leadership* (became leader → resigned, or the run
//! ended), a deposed holder is a leader another client was elected over, and what
//! matters is how long the deposed leader went on *acting* (writing to the resource)
//! after the new leader was elected: from the new leader's election (its acquire ok)
//! to the deposed leader's last act. The design rule it checks is catalogue entry 2:
//! a leader stops acting as soon as its lease may be gone.

use super::answer::{Answer, Guidance};
use super::text::{count, times};
use super::zombies::{Zombie, ZombieWindows};
use lockcheck_check::calls::Calls;
use lockcheck_check::secs;
use serde::{Deserialize, Serialize};

/// The leaderships of a run and the acting of deposed leaders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Leaderships {
    pub leaderships: usize,
    /// Leaders another client was elected over while they believed they led.
    pub deposed: usize,
    /// Of those, the ones that acted after the new leader was elected.
    pub acted_after: usize,
    /// Acts (writes sent, accepted or not) of deposed leaders after that.
    pub acts_after: usize,
    /// From a new leader's election to the deposed leader's last act: the worst,
    /// and the median over the deposed leaders that acted.
    pub acting_p50_ns: u64,
    pub acting_max_ns: u64,
    /// `[clients] on_lease_loss` as the run recorded it (`ignore`, `exit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_lease_loss: Option<String>,
    pub sentence: String,
}

/// The design rule of catalogue entry 2, as the guidance names it.
pub const RULE: &str = "a leader stops acting as soon as its lease may be gone: it exits (or resigns) on lease loss and checks its own lease deadline before every act, and where a pause between that check and the act is possible, its acts carry the leadership's token and the resource rejects a lower one";

/// How long the deposed leader `z` went on acting after the new leader's election.
pub fn acting_ns(z: &Zombie) -> Option<u64> {
    z.last_act.map(|t| t.saturating_sub(z.deposed_at))
}

/// The leaderships of an election run, from its zombie windows: the figures and
/// the sentence ([`guidance`] names the design rule).
pub fn leaderships(z: &ZombieWindows, calls: &Calls, on_lease_loss: Option<String>) -> Leaderships {
    let mut acting: Vec<u64> = z.all.iter().filter_map(acting_ns).collect();
    acting.sort_unstable();
    let acting_max_ns = acting.last().copied().unwrap_or(0);
    let acting_p50_ns = acting
        .get(acting.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or(0);
    let acts_after = z.writes_after;
    let sentence = match (z.deposed, acting.len()) {
        (0, _) => format!(
            "{} and no leader was deposed: no fault here took a lease from its leader.",
            count(calls.sections.len(), "leadership", "leaderships")
        ),
        (d, 0) => format!(
            "{} deposed, and none acted after the new leader was elected.",
            count(d, "leader was", "leaders were")
        ),
        (d, n) => format!(
            "{} deposed; {n} went on acting after the new leader was elected, {} in all, for up to {} (median {}): two leaders acting at once.",
            count(d, "leader was", "leaders were"),
            times(acts_after),
            secs(acting_max_ns),
            secs(acting_p50_ns)
        ),
    };
    Leaderships {
        leaderships: calls.sections.len(),
        deposed: z.deposed,
        acted_after: acting.len(),
        acts_after,
        acting_p50_ns,
        acting_max_ns,
        on_lease_loss,
        sentence,
    }
}

/// The guidance of an election: the design rule, and what this run showed of it.
pub fn guidance(l: &Leaderships, lock: &Guidance) -> Guidance {
    let mut figures = vec![
        format!(
            "{}, {} deposed",
            count(l.leaderships, "leadership", "leaderships"),
            l.deposed
        ),
        format!(
            "deposed leaders acted {} after a new leader was elected, for up to {}",
            times(l.acts_after),
            secs(l.acting_max_ns)
        ),
    ];
    if let Some(o) = &l.on_lease_loss {
        figures.push(format!("on_lease_loss = \"{o}\""));
    }
    let (answer, sentence) = if l.acted_after == 0 {
        (
            Answer::ExitOnLoss,
            format!(
                "No deposed leader acted after a new leader was elected: the design rule held here — {RULE}."
            ),
        )
    } else {
        let answer = match lock.answer {
            Answer::FencingTokens => Answer::FencingTokens,
            _ => Answer::ExitOnLoss,
        };
        (
            answer,
            format!(
                "A leader kept acting after losing its lease ({} after the new leader was elected, for up to {}). The design rule: {RULE}.",
                times(l.acts_after),
                secs(l.acting_max_ns)
            ),
        )
    };
    Guidance {
        answer,
        title: "A deposed leader must stop acting".into(),
        sentence,
        figures,
    }
}
