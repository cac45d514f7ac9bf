//! The lock checker's own compact copy of the client ops: just the fields its checks
//! and sentences use. A million-line history read as `Op`s (a JSON value per line)
//! takes about a gigabyte; as `LockOp`s it takes a tenth of that, and it can be
//! filled straight from the file, one line at a time (`lock::check_jsonl`).

use crate::history::{History, Op, OpType, Process};
use rustc_hash::FxHashMap;
use std::hash::{DefaultHasher, Hasher};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum F {
    Acquire,
    Renew,
    Release,
    Write,
    Read,
    Other,
}

impl F {
    fn of(name: &str) -> F {
        use crate::history::f;
        match name {
            f::ACQUIRE => F::Acquire,
            f::RENEW => F::Renew,
            f::RELEASE => F::Release,
            f::WRITE => F::Write,
            f::READ => F::Read,
            _ => F::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            F::Acquire => "acquire",
            F::Renew => "renew",
            F::Release => "release",
            F::Write => "write",
            F::Read => "read",
            F::Other => "op",
        }
    }
}

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
        let Process::Client(process) = op.process else {
            let targets: Vec<&str> = op
                .value
                .get("targets")
                .and_then(|t| t.as_array())
                .map(|t| t.iter().filter_map(|x| x.as_str()).collect())
                .unwrap_or_default();
            let what = match targets.is_empty() {
                true => op.f.clone(),
                false => format!("{} of {}", op.f, targets.join(", ")),
            };
            self.faults.push(Fault {
                index: op.index,
                time: op.time,
                what,
            });
            return;
        };
        let lock = op
            .value
            .get("lock")
            .and_then(|v| v.as_str())
            .map(|n| self.intern(n));
        let error = op.error.as_deref().map(|e| self.intern(e));
        self.ops.push(LockOp {
            index: op.index,
            time: op.time,
            process,
            kind: op.kind,
            f: F::of(&op.f),
            token: op.token(),
            seq: op.seq(),
            number: op.value.as_u64(),
            lock,
            data: op.value.get("data").and_then(|d| d.as_str()).map(data_hash),
            error,
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

/// The hash `LockOp::data` keeps of a write's data.
pub fn data_hash(data: &str) -> u64 {
    // SipHash with fixed keys: deterministic, and collisions among a run's writes
    // are out of reach (unlike a fast multiplicative hash on similar strings).
    let mut h = DefaultHasher::new();
    h.write(data.as_bytes());
    h.finish()
}
