//! Models of the histories lockcheck imports: registers, cas-register,
//! multi-register, kv (Porcupine and Knossos corpora) and Knossos's mutex. Each turns
//! the history's ops into the engine's `Operation`s and the engine's outcome back
//! into a `Verdict`. The encodings of values are those of `history::import`.

pub mod kv;
pub mod multi_register;
pub mod mutex;
pub mod register;

use super::linear::{Outcome, Part};
use super::model::{Model, Operation};
use super::{Anomaly, AnomalyKind, Validity, Verdict};
use lockcheck_history::{History, Op, OpType};
use serde_json::Value;

/// An op that does not fit the chosen model (a string written to an integer
/// register, an acquire in a kv history): the input is malformed for that model.
#[derive(Debug, Clone, thiserror::Error)]
#[error("op index {index}: {reason}")]
pub struct ModelError {
    pub index: u64,
    pub reason: String,
}

/// The engine's operations of a history: each invoke with its completion. A `fail`
/// did not happen and is left out; an `info` or unanswered invoke may take effect
/// any time after its call, or never (return `u64::MAX`, output unknown). Calls and
/// returns are placed by `index`: the order in which they were observed.
/// `convert(invoke, completion)` gives input and output (None = unknown); it sees
/// the completion only when it is `ok`.
pub(crate) fn operations<I, O>(
    history: &History,
    mut convert: impl FnMut(&Op, Option<&Op>) -> Result<(I, Option<O>), String>,
) -> Result<Vec<Operation<I, O>>, ModelError> {
    let mut out = Vec::new();
    for (inv, done) in history.pairs() {
        let inv = &history.ops[inv];
        let done = done.map(|d| &history.ops[d]);
        if done.is_some_and(|d| d.kind == OpType::Fail) {
            continue;
        }
        let ok = done.filter(|d| d.kind == OpType::Ok);
        let (input, output) = convert(inv, ok).map_err(|reason| ModelError {
            index: ok.unwrap_or(inv).index,
            reason,
        })?;
        let mut indexes = vec![inv.index];
        indexes.extend(done.map(|d| d.index));
        out.push(Operation {
            process: inv.process.client().unwrap_or(u64::MAX),
            input,
            output: if ok.is_some() { output } else { None },
            call: inv.index,
            ret: ok.map_or(u64::MAX, |d| d.index),
            indexes,
        });
    }
    Ok(out)
}

/// An integer field of an op's value (`{"value": 3}`), or null.
pub(crate) fn int_field(value: &Value, field: &str) -> Result<Option<i64>, String> {
    match value.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| format!("\"{field}\": expected an integer, found {v}")),
    }
}

/// How many ops of the failing order an anomaly lists besides the op that could
/// not take effect: the ones right before it are where the orders went wrong.
const EVIDENCE_TAIL: usize = 4;

/// The verdict of the parts of one check: not linearizable if any part is illegal
/// (one anomaly per illegal part, naming its key), unknown if any part gave up.
pub(crate) fn verdict<M: Model>(
    name: &str,
    history: &History,
    ops: &[Operation<M::Input, M::Output>],
    parts: &[Part],
) -> Verdict {
    let mut tally = Tally::default();
    tally.add(ops, parts);
    tally.finish(name, history)
}

/// Gathers the outcomes of the parts of one check (possibly run as several
/// searches, as kv does) into one verdict.
#[derive(Default)]
pub(crate) struct Tally {
    pub anomalies: Vec<Anomaly>,
    pub notes: Vec<String>,
    ops: usize,
    parts: usize,
    undecided: bool,
}

impl Tally {
    pub fn add<I, O>(&mut self, ops: &[Operation<I, O>], parts: &[Part]) {
        self.ops += parts.iter().map(|p| p.ops.len()).sum::<usize>();
        self.parts += parts.len();
        for part in parts {
            let key = if part.key.is_empty() {
                String::new()
            } else {
                format!("key {}: ", part.key)
            };
            match &part.outcome {
                Outcome::Linearizable { .. } => {}
                Outcome::Illegal {
                    ops: failing,
                    explanation,
                } => self
                    .anomalies
                    .push(anomaly(ops, failing, format!("{key}{explanation}"))),
                Outcome::Unknown { reason } => {
                    self.undecided = true;
                    self.notes.push(format!("{key}undecided: {reason}"))
                }
            }
        }
    }

    /// A part decided without the search (one more part, `ops` more ops).
    pub fn add_decided(&mut self, ops: usize, anomaly: Option<Anomaly>) {
        self.ops += ops;
        self.parts += 1;
        self.anomalies.extend(anomaly);
    }

    /// The verdict; each anomaly's time is that of its last op in `history`.
    pub fn finish(mut self, name: &str, history: &History) -> Verdict {
        for a in &mut self.anomalies {
            let last = a.indexes.last().and_then(|&i| {
                let at = history.ops.binary_search_by_key(&i, |o| o.index).ok()?;
                Some(&history.ops[at])
            });
            a.time = a.time.or(last.map(|o| o.time));
        }
        let valid = if !self.anomalies.is_empty() {
            Validity::Invalid
        } else if self.undecided {
            Validity::Unknown
        } else {
            Validity::Valid
        };
        let n = self.parts;
        self.notes.push(format!(
            "{} ops checked against {name}{}",
            self.ops,
            if n > 1 {
                format!(", in {n} independent parts")
            } else {
                String::new()
            }
        ));
        Verdict {
            valid,
            model: name.to_string(),
            anomalies: self.anomalies,
            notes: self.notes,
        }
    }
}

/// A not-linearizable anomaly whose evidence is the op that could not take effect
/// (last in `failing`) and the few ops of the longest legal order right before it.
pub(crate) fn anomaly<I, O>(
    ops: &[Operation<I, O>],
    failing: &[usize],
    explanation: String,
) -> Anomaly {
    let evidence = failing
        .iter()
        .rev()
        .take(EVIDENCE_TAIL + 1)
        .map(|&i| &ops[i]);
    let mut indexes: Vec<u64> = evidence
        .clone()
        .flat_map(|o| o.indexes.iter().copied())
        .collect();
    indexes.sort_unstable();
    indexes.dedup();
    let mut processes: Vec<u64> = evidence
        .map(|o| o.process)
        .filter(|&p| p != u64::MAX)
        .collect();
    processes.sort_unstable();
    processes.dedup();
    Anomaly {
        kind: AnomalyKind::NotLinearizable,
        indexes,
        processes,
        tokens: Vec::new(),
        time: None,
        explanation,
        allowed: false,
    }
}

/// The ops a model does not know, in words.
pub(crate) fn unsupported(model: &str, f: &str, known: &str) -> String {
    format!("f \"{f}\" is not an op of the {model} model (it knows {known})")
}
