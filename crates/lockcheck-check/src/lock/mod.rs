//! The lock model: mutual exclusion judged by linearizability against an owner-aware
//! mutex, fencing tokens judged in a legal linearization order, and the resource's
//! own order of writes.
//!
//! - `ops`: the compact copy of the client ops the checks read (filled from a
//!   `History`, or line by line from a file by `check_jsonl`);
//! - `sections`: who believed they held which lock, from when to when;
//! - `mutex`: the owner-aware mutex (a `Model` for the engine) and the sweep that
//!   decides it in O(n log n) — exactly, see the argument there. The engine's search
//!   (`search`) gives each double holder listed a second opinion, and the property
//!   tests hold sweep, search and a brute force to the same verdicts;
//! - `tokens`: token-not-monotonic, duplicate-token;
//! - `resource`: stale-write-accepted, interleaved-writes, lost-update (and what a
//!   counter history looks like);
//! - here: foreign-release, and the verdict.
//!
//! Two model names use this checker: `lock`, and `fenced-mutex` — the same checks
//! where the lock must also hand out a fencing token with every grant (an acquire ok
//! without one is a `token-not-monotonic`: nothing is greater than a missing token).
//! A design that relies on fencing at the resource to make a double holder harmless
//! says so with `--allow double-holder`: the overlap is still listed, and
//! `stale-write-accepted` / `interleaved-writes` then decide.

mod explain;
mod findings;
mod mutex;
mod ops;
mod resource;
mod sections;
mod tokens;

pub use mutex::{MutexOp, MutexState, OwnerMutex};
pub use resource::INCR;

use super::linear::{check_partitioned, Outcome};
use super::{Anomaly, AnomalyKind, Limits, Verdict};
use explain::{at, indexes};
use findings::Findings;
use lockcheck_history::{read_jsonl_refs, AppliedWrite, History, HistoryError};
use ops::Ops;
use std::path::Path;

/// What the lock checker reads besides the history.
#[derive(Debug, Clone, Default)]
pub struct LockInput<'a> {
    /// The resource's own log of applied writes (`resource.jsonl`), where there is one.
    pub resource: Option<&'a [AppliedWrite]>,
}

/// Checks a lock history against the `lock` model. Pure: no I/O, no clock. The
/// history's reading warnings are the caller's to show.
pub fn check(history: &History, input: &LockInput<'_>, limits: &Limits) -> Verdict {
    run(&Ops::from_history(history), input, limits, false)
}

/// Checks a lock history against the `fenced-mutex` model: `check`, plus a token on
/// every grant.
pub fn check_fenced(history: &History, input: &LockInput<'_>, limits: &Limits) -> Verdict {
    run(&Ops::from_history(history), input, limits, true)
}

/// Reads a `history.jsonl` line by line, never holding it whole, and checks it
/// (`fenced`: as `check_fenced`). For the largest histories: a million lines take
/// about a tenth of the memory they take read as a `History`. Reading warnings are
/// among the verdict's notes. Also returns the number of lines read.
pub fn check_jsonl(
    path: &Path,
    input: &LockInput<'_>,
    limits: &Limits,
    fenced: bool,
) -> Result<(Verdict, usize), HistoryError> {
    let mut stream = Stream::default();
    let warnings = read_jsonl_refs(path, |op| stream.push_ref(&op))?;
    Ok(stream.check(warnings, input, limits, fenced))
}

/// A lock history filled one op at a time, kept as the checks' compact copy: what
/// `check_jsonl` builds, for a reader that has its ops from elsewhere (a pipe).
#[derive(Debug, Default)]
pub struct Stream {
    ops: Ops,
    lines: usize,
}

impl Stream {
    pub fn push(&mut self, op: &lockcheck_history::Op) {
        self.lines += 1;
        self.ops.push(op);
    }

    pub fn push_ref(&mut self, op: &lockcheck_history::OpRef<'_>) {
        self.lines += 1;
        self.ops.push_ref(op);
    }

    /// Checks the ops pushed (`fenced`: as `check_fenced`), with the reading's
    /// `warnings` among the notes; also returns the number of ops pushed.
    pub fn check(
        self,
        warnings: Vec<String>,
        input: &LockInput<'_>,
        limits: &Limits,
        fenced: bool,
    ) -> (Verdict, usize) {
        let mut verdict = run(&self.ops, input, limits, fenced);
        verdict
            .notes
            .extend(warnings.into_iter().map(|w| format!("warning: {w}")));
        (verdict, self.lines)
    }
}

/// The critical sections, with the resource's evidence of retired holders' writes
/// that landed late (`resource::landed_writes`), and the writes the resource applied.
fn sections_with(
    h: &Ops,
    resource: Option<&[AppliedWrite]>,
) -> (sections::Sections, Vec<resource::Applied>) {
    let mut s = sections::build(h);
    let applied = resource::applied(h, &s, resource);
    resource::landed_writes(h, &mut s, &applied);
    (s, applied)
}

fn run(h: &Ops, input: &LockInput<'_>, limits: &Limits, fenced: bool) -> Verdict {
    let (s, applied) = sections_with(h, input.resource);
    let mut found = Findings::default();
    mutex::double_holders(h, &s, limits, &mut found);
    tokens::check(h, &s, fenced, &mut found);
    foreign_releases(h, &s, &mut found);
    resource::check(h, &s, &applied, &mut found);

    let mut notes = Vec::new();
    if s.uncertain_acquires > 0 {
        notes.push(format!(
            "{} acquire(s) ended info or unanswered: each may or may not have taken effect, \
             and the order in which it did not is always as legal, so it was left out of \
             mutual exclusion",
            s.uncertain_acquires
        ));
    }
    found.into_verdict(if fenced { "fenced-mutex" } else { "lock" }, notes)
}

/// The full search: every lock checked by the engine against the owner-aware mutex
/// (with `tokens`, also against monotonic tokens), the locks in parallel — they are
/// independent objects (P-compositionality). Returns each lock's name and outcome.
pub fn search(history: &History, limits: &Limits, tokens: bool) -> Vec<(String, Outcome)> {
    let h = Ops::from_history(history);
    let s = sections::build(&h);
    let ops = mutex::operations(&h, &s);
    check_partitioned(&OwnerMutex { tokens }, &ops, limits)
        .into_iter()
        .map(|part| {
            let name = part
                .key
                .parse::<usize>()
                .ok()
                .and_then(|l| s.locks.get(l).cloned())
                .unwrap_or(part.key);
            (name, part.outcome)
        })
        .collect()
}

/// A critical section as the checker reads it (see `sections`: only a release ends
/// one), in the history's terms. The report measures its zombie windows on these, so
/// that they follow the same rule as the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriticalSection {
    pub process: u64,
    /// `value.lock` of the acquire; "" for the default lock.
    pub lock: String,
    /// History `index` of the acquire's invoke, and of its ok (where the section begins).
    pub acquire: u64,
    pub begin: u64,
    /// `index` of the release's invoke, if the holder released.
    pub release: Option<u64>,
    /// `index` of the last op at which the holder was seen holding: its release
    /// invoke, the invoke that retired it, or its last op. Without a `release`, the
    /// checker counts the hold as lasting to the end of the history (history.md v1.1);
    /// `end` is where the evidence of it stops.
    pub end: u64,
    /// Run times (ns) of `begin` and `end`.
    pub begin_time: u64,
    pub end_time: u64,
    /// The acquire's token.
    pub token: Option<u64>,
}

/// The critical sections of a history (with its resource's log, where there is one),
/// in order of their beginning.
pub fn critical_sections(
    history: &History,
    resource: Option<&[AppliedWrite]>,
) -> Vec<CriticalSection> {
    let h = Ops::from_history(history);
    let (s, _) = sections_with(&h, resource);
    s.sections
        .iter()
        .map(|sec| {
            let end = sec.last_seen();
            CriticalSection {
                process: sec.process,
                lock: s.locks[sec.lock as usize].clone(),
                acquire: h.ops[sec.acquire_invoke].index,
                begin: h.ops[sec.begin].index,
                release: match sec.end {
                    sections::End::Released { invoke, .. }
                    | sections::End::Lost {
                        noticed: invoke, ..
                    } => Some(h.ops[invoke].index),
                    _ => None,
                },
                end: h.ops[end].index,
                begin_time: h.ops[sec.begin].time,
                end_time: h.ops[end].time,
                token: sec.token,
            }
        })
        .collect()
}

fn foreign_releases(h: &Ops, s: &sections::Sections, found: &mut Findings) {
    for &pos in &s.foreign_releases {
        found.report(AnomalyKind::ForeignRelease, || {
            let op = &h.ops[pos];
            Anomaly {
                kind: AnomalyKind::ForeignRelease,
                indexes: indexes(h, [pos]),
                processes: vec![op.process],
                tokens: op.token.into_iter().collect(),
                time: Some(op.time),
                explanation: format!(
                    "process {}'s release succeeded {}, but it held no lock then (no acquire of its own \
                     had succeeded since its last release): the service let a non-holder release it",
                    op.process,
                    at(h, pos)
                ),
                allowed: false,
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::findings::LISTED_PER_KIND;
    use super::*;
    use crate::Validity;
    use lockcheck_history::{Op, OpType, Process};
    use serde_json::json;

    fn op(p: u64, kind: OpType, f: &str, value: serde_json::Value) -> Op {
        Op {
            index: 0,
            time: 0,
            process: Process::Client(p),
            kind,
            f: f.into(),
            value,
            node: None,
            error: None,
        }
    }

    /// A holder that never lets go overlaps every later section: all are counted,
    /// a readable number listed, and the sweep stays linear.
    #[test]
    fn a_holder_that_never_lets_go_is_counted_against_every_later_section() {
        let mut ops = vec![
            op(0, OpType::Invoke, "acquire", json!(null)),
            op(0, OpType::Ok, "acquire", json!({"token": 0})),
        ];
        for t in 1..=20_000u64 {
            ops.push(op(1, OpType::Invoke, "acquire", json!(null)));
            ops.push(op(1, OpType::Ok, "acquire", json!({ "token": t })));
            ops.push(op(1, OpType::Invoke, "release", json!({ "token": t })));
            ops.push(op(1, OpType::Ok, "release", json!(null)));
        }
        ops.push(op(
            0,
            OpType::Invoke,
            "write",
            json!({"token": 0, "data": "late"}),
        ));
        ops.push(op(
            0,
            OpType::Ok,
            "write",
            json!({"token": 0, "data": "late"}),
        ));
        for (i, o) in ops.iter_mut().enumerate() {
            o.index = i as u64;
            o.time = i as u64 * 1_000;
        }
        let v = check(
            &History::new(ops),
            &LockInput::default(),
            &Limits::default(),
        );
        assert_eq!(v.valid, Validity::Invalid);
        assert_eq!(v.anomalies.len(), LISTED_PER_KIND);
        assert!(v
            .notes
            .iter()
            .any(|n| n.starts_with("20000 double-holder anomalies found")));
        assert!(v.anomalies[0].explanation.contains("never released"));
    }
}
