//! The lock checker's own compact copy of the client ops: just the fields its checks
//! and sentences use. A million-line history read as `Op`s (a JSON value per line)
//! takes about a gigabyte; as `LockOp`s it takes a tenth of that, and it can be
//! filled straight from the file, one line at a time (`lock::check_jsonl`).

use lockcheck_history::{History, Op, OpRef, OpType, Process};
use rustc_hash::FxHashMap;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::hash::{DefaultHasher, Hasher};

/// A client call, as the lock checks tell them apart.
pub use lockcheck_history::Call as F;

/// One client op, as the lock checks see it.
#[derive(Debug, Clone)]
pub struct LockOp {
    pub index: u64,
    pub time: u64,
    pub process: u64,
    pub kind: OpType,
    pub f: F,
    pub token: Option<u64>,
    pub seq: Option<u64>,
    /// The value itself, when it is a number (a counter read).
    pub number: Option<u64>,
    /// `value.lock`, as a name id.
    pub lock: Option<u32>,
    /// A hash of `value.data`: enough to match a write to the resource's log and to
    /// spot a counter increment.
    pub data: Option<u64>,
    /// `error`, as a name id.
    pub error: Option<u32>,
    /// A `release` whose value has `"lease_lost": true`: the holder resigns because
    /// it learned that its lease was gone (an election's `on_lease_loss = "exit"`).
    pub lease_lost: bool,
}

/// A fault the injector started or ended, for the sentences: `pause of client-0`.
#[derive(Debug, Clone)]
pub struct Fault {
    pub index: u64,
    pub time: u64,
    pub what: String,
}

/// The client ops of a history, in history order, and the faults apart (the lock
/// checks judge clients and the resource; faults only explain).
#[derive(Debug, Default)]
pub struct Ops {
    pub ops: Vec<LockOp>,
    pub faults: Vec<Fault>,
    names: Vec<String>,
    ids: FxHashMap<String, u32>,
}

impl Ops {
    pub fn from_history(h: &History) -> Ops {
        let mut ops = Ops::default();
        ops.ops.reserve(h.ops.len());
        for op in &h.ops {
            ops.push(op);
        }
        ops
    }

    pub fn push(&mut self, op: &Op) {
        match op.process {
            Process::Nemesis => self.push_fault(op.index, op.time, &op.f, &op.value),
            Process::Client(process) => self.push_client(
                Client {
                    index: op.index,
                    time: op.time,
                    process,
                    kind: op.kind,
                    f: &op.f,
                    error: op.error.as_deref(),
                },
                Picked::of_value(&op.value),
            ),
        }
    }

    /// As `push`, from a line as read (`read_jsonl_refs`): of a client op's value
    /// only the fields the checks use are read.
    pub fn push_ref(&mut self, op: &OpRef<'_>) {
        let raw = op.value.as_deref();
        match op.process {
            Process::Nemesis => {
                let value = raw.map_or(Value::Null, parse_again);
                self.push_fault(op.index, op.time, &op.f, &value)
            }
            Process::Client(process) => self.push_client(
                Client {
                    index: op.index,
                    time: op.time,
                    process,
                    kind: op.kind,
                    f: &op.f,
                    error: op.error.as_deref(),
                },
                raw.map_or_else(Picked::default, Picked::of_raw),
            ),
        }
    }

    fn push_fault(&mut self, index: u64, time: u64, f: &str, value: &Value) {
        let targets: Vec<&str> = value
            .get("targets")
            .and_then(|t| t.as_array())
            .map(|t| t.iter().filter_map(|x| x.as_str()).collect())
            .unwrap_or_default();
        let what = match targets.is_empty() {
            true => f.to_string(),
            false => format!("{f} of {}", targets.join(", ")),
        };
        self.faults.push(Fault { index, time, what });
    }

    fn push_client(&mut self, op: Client<'_>, value: Picked<'_>) {
        let lock = value.lock.map(|n| self.intern(&n));
        let error = op.error.map(|e| self.intern(e));
        self.ops.push(LockOp {
            index: op.index,
            time: op.time,
            process: op.process,
            kind: op.kind,
            f: F::of(op.f),
            token: value.token,
            seq: value.seq,
            number: value.number,
            lock,
            data: value.data,
            error,
            lease_lost: value.lease_lost,
        });
    }

    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }
}

/// A client op's fields other than its value.
struct Client<'a> {
    index: u64,
    time: u64,
    process: u64,
    kind: OpType,
    f: &'a str,
    error: Option<&'a str>,
}

/// What the checks read of an op's value: `token`, `seq`, `lock`, the hash of
/// `data`, or the value itself where it is a number. A field of another type than
/// expected reads as absent, as `Value::get(..).and_then(Value::as_u64)` has it.
#[derive(Default)]
struct Picked<'a> {
    token: Option<u64>,
    seq: Option<u64>,
    number: Option<u64>,
    lock: Option<Cow<'a, str>>,
    data: Option<u64>,
    lease_lost: bool,
}

impl<'a> Picked<'a> {
    fn of_value(v: &'a Value) -> Self {
        let u = |k| v.get(k).and_then(Value::as_u64);
        Picked {
            token: u("token"),
            seq: u("seq"),
            number: v.as_u64(),
            lock: v.get("lock").and_then(Value::as_str).map(Cow::Borrowed),
            data: v.get("data").and_then(Value::as_str).map(data_hash),
            lease_lost: v.get("lease_lost").and_then(Value::as_bool) == Some(true),
        }
    }

    /// From the raw JSON of a value (an object or a number; the reader checked).
    fn of_raw(raw: &'a RawValue) -> Self {
        #[derive(Deserialize)]
        struct Fields<'a> {
            #[serde(borrow)]
            token: Option<&'a RawValue>,
            #[serde(borrow)]
            seq: Option<&'a RawValue>,
            #[serde(borrow)]
            lock: Option<&'a RawValue>,
            #[serde(borrow)]
            data: Option<&'a RawValue>,
            #[serde(borrow)]
            lease_lost: Option<&'a RawValue>,
        }
        if !raw.get().starts_with('{') {
            return Picked {
                number: raw_u64(raw),
                ..Picked::default()
            };
        }
        match serde_json::from_str::<Fields>(raw.get()) {
            Ok(f) => Picked {
                token: f.token.and_then(raw_u64),
                seq: f.seq.and_then(raw_u64),
                number: None,
                lock: f.lock.and_then(raw_str),
                data: f.data.and_then(raw_str).map(|d| data_hash(&d)),
                lease_lost: f.lease_lost.is_some_and(|v| v.get() == "true"),
            },
            // A key given twice: the whole parse keeps the last, as an `Op` has it.
            Err(_) => {
                let whole = parse_again(raw);
                let v = Picked::of_value(&whole);
                Picked {
                    lock: v.lock.map(|l| Cow::Owned(l.into_owned())),
                    ..v
                }
            }
        }
    }
}

/// A JSON number of digits only is a non-negative integer: what `as_u64` takes.
fn raw_u64(raw: &RawValue) -> Option<u64> {
    raw.get().parse().ok()
}

/// A JSON string's text, borrowed unless it has escapes to decode.
fn raw_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    let s = raw.get();
    match s.strip_prefix('"')?.strip_suffix('"') {
        Some(inner) if !inner.contains('\\') => Some(Cow::Borrowed(inner)),
        _ => serde_json::from_str::<String>(s).ok().map(Cow::Owned),
    }
}

/// A value the reader has already parsed as JSON once, parsed whole.
fn parse_again(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap_or_default()
}

/// The hash `LockOp::data` keeps of a write's data.
pub fn data_hash(data: &str) -> u64 {
    // SipHash with fixed keys: deterministic, and collisions among a run's writes
    // are out of reach (unlike a fast multiplicative hash on similar strings).
    let mut h = DefaultHasher::new();
    h.write(data.as_bytes());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value read raw gives the checks the same fields as the value parsed whole,
    /// whatever type each field has and even with a key given twice.
    #[test]
    fn raw_and_parsed_values_read_alike() {
        for text in [
            r#"{"token":7,"seq":2,"lock":"l","data":"d","other":[1,{"a":null}]}"#,
            r#"{"token":"7","seq":-1,"lock":5,"data":"a\"b\u00e9"}"#,
            r#"{"token":1,"token":2,"lock":"a","lock":"b"}"#,
            r#"{"token":1.0,"seq":null,"data":null}"#,
            r#"{"token":18446744073709551616,"seq":1e2}"#,
            "12",
            "-3",
            "2.5",
            "{}",
        ] {
            let raw = RawValue::from_string(text.to_string()).unwrap();
            let value: Value = serde_json::from_str(text).unwrap();
            let (a, b) = (Picked::of_raw(&raw), Picked::of_value(&value));
            assert_eq!(
                (a.token, a.seq, a.number, a.lock, a.data),
                (b.token, b.seq, b.number, b.lock, b.data),
                "{text}"
            );
        }
    }
}
