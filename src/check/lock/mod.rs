//! The lock model: mutual exclusion judged by linearizability against an owner-aware
//! mutex, fencing tokens judged in a legal linearization order, and the resource's
//! own order of writes.
//!
//! - `sections`: who believed they held which lock, from when to when;
//! - `mutex`: the owner-aware mutex (a `Model` for the engine) and the sweep that
//!   decides it in O(n log n) — exactly, see the argument there;
//! - `tokens`: token-not-monotonic, duplicate-token;
//! - `resource`: stale-write-accepted, interleaved-writes, lost-update;
//! - here: foreign-release, and the verdict.
//!
//! Two model names use this checker: `lock`, and `fenced-mutex` — the same checks
//! where the lock must also hand out a fencing token with every grant (an acquire ok
//! without one is a `token-not-monotonic`: nothing is greater than a missing token).

mod explain;
mod mutex;
mod resource;
mod sections;
mod tokens;

pub use mutex::{MutexOp, MutexState, OwnerMutex};
pub use resource::INCR;

use super::linear::{check_operations, Outcome};
use super::model::Operation;
use super::{Anomaly, AnomalyKind, Limits, Validity, Verdict};
use crate::history::{AppliedWrite, History};
use explain::{at, indexes};

/// What the lock checker reads besides the history.
#[derive(Debug, Clone, Default)]
pub struct LockInput<'a> {
    /// The resource's own log of applied writes (`resource.jsonl`), where there is one.
    pub resource: Option<&'a [AppliedWrite]>,
}

/// Checks a lock history against the `lock` model. Pure: no I/O, no clock.
pub fn check(history: &History, input: &LockInput<'_>, limits: &Limits) -> Verdict {
    run(history, input, limits, false)
}

/// Checks a lock history against the `fenced-mutex` model: `check`, plus a token on
/// every grant.
pub fn check_fenced(history: &History, input: &LockInput<'_>, limits: &Limits) -> Verdict {
    run(history, input, limits, true)
}

fn run(h: &History, input: &LockInput<'_>, _limits: &Limits, fenced: bool) -> Verdict {
    let s = sections::build(h);
    let mut found = Findings::default();
    mutex::double_holders(h, &s, &mut found);
    tokens::check(h, &s, fenced, &mut found);
    foreign_releases(h, &s, &mut found);
    resource::check(h, &s, input.resource, &mut found);

    let mut notes: Vec<String> = h.warnings.clone();
    if s.uncertain_acquires > 0 {
        notes.push(format!(
            "{} acquire(s) ended info or unanswered: each may or may not have taken effect; \
             a hold it took belongs to a retired process and may end any time (lease expiry), \
             so it was left out of mutual exclusion",
            s.uncertain_acquires
        ));
    }
    found.into_verdict(if fenced { "fenced-mutex" } else { "lock" }, notes)
}

/// The ops the full search sees, per lock name: each critical section as an acquire
/// and a release of the owner-aware mutex, `call`/`ret` being history positions.
pub fn mutex_operations(history: &History) -> Vec<(String, Vec<Operation<MutexOp, ()>>)> {
    let s = sections::build(history);
    (0..s.locks.len() as u32)
        .map(|l| {
            (
                s.locks[l as usize].clone(),
                mutex::operations(history, &s, l),
            )
        })
        .collect()
}

/// The full search: every lock checked by the engine against the owner-aware mutex
/// (with `tokens`, also against monotonic tokens), the locks in parallel — they are
/// independent objects (P-compositionality).
pub fn search(history: &History, limits: &Limits, tokens: bool) -> Vec<(String, Outcome)> {
    let model = OwnerMutex { tokens };
    let parts = mutex_operations(history);
    std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .iter()
            .map(|(name, ops)| {
                let name = name.clone();
                scope.spawn(move || (name, check_operations(&model, ops, limits)))
            })
            .collect();
        handles
            .into_iter()
            .map(|t| {
                t.join().unwrap_or_else(|_| {
                    (
                        String::new(),
                        Outcome::Unknown {
                            reason: "the search panicked".into(),
                        },
                    )
                })
            })
            .collect()
    })
}

fn foreign_releases(h: &History, s: &sections::Sections, found: &mut Findings) {
    for &pos in &s.foreign_releases {
        found.report(AnomalyKind::ForeignRelease, || {
            let op = &h.ops[pos];
            Anomaly {
                kind: AnomalyKind::ForeignRelease,
                indexes: indexes(h, [pos]),
                processes: op.process.client().into_iter().collect(),
                tokens: op.token().into_iter().collect(),
                time: Some(op.time),
                explanation: format!(
                    "{}'s release succeeded {}, but it held no lock then (no acquire of its own \
                     had succeeded since its last release): the service let a non-holder release it",
                    op.process,
                    at(h, pos)
                ),
                allowed: false,
            }
        });
    }
}

/// At most this many anomalies of one kind are listed; the rest are counted.
const LISTED_PER_KIND: usize = 50;

/// The anomalies found so far, capped per kind so that a badly broken history of a
/// million lines still gives a verdict of readable size.
#[derive(Default)]
pub(crate) struct Findings {
    anomalies: Vec<Anomaly>,
    counts: rustc_hash::FxHashMap<AnomalyKind, usize>,
}

impl Findings {
    /// Counts one anomaly; builds and lists it only while its kind is under the cap.
    pub fn report(&mut self, kind: AnomalyKind, make: impl FnOnce() -> Anomaly) {
        let n = self.counts.entry(kind).or_default();
        *n += 1;
        if *n <= LISTED_PER_KIND {
            self.anomalies.push(make());
        }
    }

    fn into_verdict(mut self, model: &str, mut notes: Vec<String>) -> Verdict {
        let mut counts: Vec<_> = self.counts.into_iter().collect();
        counts.sort();
        for (kind, n) in counts {
            if n > LISTED_PER_KIND {
                notes.push(format!(
                    "{n} {} anomalies found; the first {LISTED_PER_KIND} are listed",
                    kind.name()
                ));
            }
        }
        self.anomalies
            .sort_by_key(|a| (a.time.unwrap_or(0), a.kind, a.indexes.first().copied()));
        let valid = if self.anomalies.is_empty() {
            Validity::Valid
        } else {
            Validity::Invalid
        };
        Verdict {
            valid,
            model: model.into(),
            anomalies: self.anomalies,
            notes,
        }
    }
}
