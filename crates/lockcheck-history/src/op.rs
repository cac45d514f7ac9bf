//! The operations of a history and what they carry: who performed one, its type,
//! its function and value, and the resource's log of applied writes. The base of
//! `history`: it imports no sibling.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// Who performed an operation: a logical client (a worker), or the fault injector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Process {
    Client(u64),
    Nemesis,
}

impl Process {
    pub fn client(self) -> Option<u64> {
        match self {
            Process::Client(p) => Some(p),
            Process::Nemesis => None,
        }
    }
}

impl fmt::Display for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Process::Client(p) => write!(f, "process {p}"),
            Process::Nemesis => f.write_str("nemesis"),
        }
    }
}

impl Serialize for Process {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Process::Client(p) => s.serialize_u64(*p),
            Process::Nemesis => s.serialize_str("nemesis"),
        }
    }
}

impl<'de> Deserialize<'de> for Process {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) if n.as_u64().is_some() => {
                Ok(Process::Client(n.as_u64().unwrap_or(0)))
            }
            Value::String(s) if s == "nemesis" => Ok(Process::Nemesis),
            other => Err(serde::de::Error::custom(format!(
                "expected a non-negative integer or \"nemesis\", found {other}"
            ))),
        }
    }
}

/// Jepsen's four op types: invoke starts an op; ok = it happened; fail = it
/// definitely did not happen; info = unknown (timed out, crashed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpType {
    Invoke,
    Ok,
    Fail,
    Info,
}

impl OpType {
    pub fn is_completion(self) -> bool {
        self != OpType::Invoke
    }
}

/// Names of `f` used by lockcheck's own runs. Imported histories bring others
/// (`read`, `write`, `cas`, `txn`, `get`, `put`, `append`): `f` stays an open string.
pub mod f {
    pub const ACQUIRE: &str = "acquire";
    pub const RENEW: &str = "renew";
    pub const RELEASE: &str = "release";
    pub const WRITE: &str = "write";
    pub const READ: &str = "read";
    /// A client asking its lock library whether it still holds the lock (an
    /// adapter's `held`): ok value `{"held": bool}`.
    pub const HELD: &str = "held";
    pub const PAUSE: &str = "pause";
    pub const RESUME: &str = "resume";
    pub const KILL: &str = "kill";
    pub const START: &str = "start";
    pub const PARTITION: &str = "partition";
    pub const HEAL: &str = "heal";
    pub const CLOCK_SKEW: &str = "clock-skew";
    pub const CLOCK_RESET: &str = "clock-reset";
    /// Links slowed (delay ± jitter); ends with a `heal`.
    pub const LATENCY: &str = "latency";
    /// Server nodes' data disks filled to the last byte; ends with a `disk-free`.
    pub const DISK_FULL: &str = "disk-full";
    pub const DISK_FREE: &str = "disk-free";

    /// Every `f` a client of lockcheck's own runs records; the fault injector's
    /// are the starts and ends of [`super::fault_ops::ALL`].
    pub const CLIENT: [&str; 6] = [ACQUIRE, RENEW, RELEASE, WRITE, READ, HELD];
}

/// A client call by its `f`, as the checker and the report tell them apart:
/// one enum for both (`Other`: any other `f`, which neither reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Acquire,
    Renew,
    Release,
    Write,
    Read,
    Other,
}

impl Call {
    pub fn of(name: &str) -> Call {
        match name {
            f::ACQUIRE => Call::Acquire,
            f::RENEW => Call::Renew,
            f::RELEASE => Call::Release,
            f::WRITE => Call::Write,
            f::READ => Call::Read,
            _ => Call::Other,
        }
    }

    /// Its `f` (`op` for any other).
    pub fn name(self) -> &'static str {
        match self {
            Call::Acquire => f::ACQUIRE,
            Call::Renew => f::RENEW,
            Call::Release => f::RELEASE,
            Call::Write => f::WRITE,
            Call::Read => f::READ,
            Call::Other => "op",
        }
    }

    /// A small integer for it, in the order above (the report's page knows them).
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// The records of a fault period: the nemesis `f` that opens it, the one that
/// ends it, and the band the report draws for it. Every fault lockcheck injects
/// writes one of these pairs (its kind's line of `fault::catalogue::CATALOGUE` says which); the figures
/// count periods and the report pairs starts with ends by this table alone, so a
/// fault recorded here is one the report draws.
#[derive(Debug, PartialEq, Eq)]
pub struct FaultOps {
    pub start: &'static str,
    pub end: &'static str,
    /// The band's family in the report: several faults share one (a node pause
    /// and a client pause are both `pause`).
    pub band: &'static str,
    /// The colour the report draws the band in, and names in its legend.
    pub colour: &'static str,
}

pub mod fault_ops {
    use super::{f, FaultOps};

    pub const PAUSE: FaultOps = FaultOps {
        start: f::PAUSE,
        end: f::RESUME,
        band: "pause",
        colour: "#f59e0b",
    };
    pub const KILL: FaultOps = FaultOps {
        start: f::KILL,
        end: f::START,
        band: "kill",
        colour: "#ef4444",
    };
    pub const PARTITION: FaultOps = FaultOps {
        start: f::PARTITION,
        end: f::HEAL,
        band: "partition",
        colour: "#8b5cf6",
    };
    pub const CLOCK: FaultOps = FaultOps {
        start: f::CLOCK_SKEW,
        end: f::CLOCK_RESET,
        band: "clock",
        colour: "#06b6d4",
    };
    /// Ends with a `heal` like a partition: the report tells the two apart by the
    /// links each record names.
    pub const LATENCY: FaultOps = FaultOps {
        start: f::LATENCY,
        end: f::HEAL,
        band: "latency",
        colour: "#10b981",
    };

    pub const DISK: FaultOps = FaultOps {
        start: f::DISK_FULL,
        end: f::DISK_FREE,
        band: "disk",
        colour: "#a16207",
    };

    /// Every pair, one line per family.
    pub const ALL: &[FaultOps] = &[PAUSE, KILL, PARTITION, CLOCK, LATENCY, DISK];

    /// The family a nemesis `f` opens, if it opens one.
    pub fn started_by(f: &str) -> Option<&'static FaultOps> {
        ALL.iter().find(|o| o.start == f)
    }
}

/// The `error` strings of lockcheck's own runs that readers tell apart.
pub mod error {
    /// A write the resource's fencing check rejected: its token was lower than one
    /// already applied (the spec's `stale-token`).
    pub const STALE_TOKEN: &str = "stale-token";
    /// A write without a token to a fenced resource.
    pub const MISSING_TOKEN: &str = "missing-token";
    /// A write the client withheld itself: its own lease deadline had passed, so it
    /// gave up the lock instead of sending (a self-fencing client). It never reached
    /// the resource, so it is not a write "after deposition".
    pub const SELF_FENCED: &str = "self-fenced: lease deadline passed";
    /// An act a node's application withheld because the node's agent (Patroni's
    /// REST API) did not name its node the primary: withheld as [`SELF_FENCED`] is.
    pub const NOT_PRIMARY: &str = "self-fenced: the node's agent does not name it the primary";

    /// Every one of them: what the history's documentation must name.
    pub const ALL: [&str; 4] = [STALE_TOKEN, MISSING_TOKEN, SELF_FENCED, NOT_PRIMARY];

    /// Whether a write's error says the client withheld it itself.
    pub fn withheld(error: &str) -> bool {
        error.starts_with("self-fenced")
    }
}

/// One line of `history.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Op {
    pub index: u64,
    /// Nanoseconds since the run started, on the controller's monotonic clock.
    pub time: u64,
    pub process: Process,
    #[serde(rename = "type")]
    pub kind: OpType,
    pub f: String,
    #[serde(default)]
    pub value: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Op {
    /// `value.token` as an integer, where the op carries one.
    pub fn token(&self) -> Option<u64> {
        self.value.get("token").and_then(Value::as_u64)
    }

    /// `value.seq`: the resource's own order of an applied write.
    pub fn seq(&self) -> Option<u64> {
        self.value.get("seq").and_then(Value::as_u64)
    }
}

/// One line of `history.jsonl` as `read_jsonl_refs` hands it over: the fields of an
/// `Op`, borrowed from the reader's buffer where they can be, and the value left as
/// raw JSON for the reader of the line to pick from. Building a `serde_json::Value`
/// map per line costs more than all of a lock check; most checks need two fields.
#[derive(Debug, Clone)]
pub struct OpRef<'a> {
    pub index: u64,
    pub time: u64,
    pub process: Process,
    pub kind: OpType,
    pub f: Cow<'a, str>,
    /// `None` where the line has no value or `null`; else an object or a number.
    pub value: Option<Cow<'a, RawValue>>,
    pub node: Option<Cow<'a, str>>,
    pub error: Option<Cow<'a, str>>,
}

impl OpRef<'_> {
    /// The owned `Op` of this line, its value parsed whole.
    pub fn to_op(&self) -> Result<Op, serde_json::Error> {
        Ok(Op {
            index: self.index,
            time: self.time,
            process: self.process,
            kind: self.kind,
            f: self.f.to_string(),
            value: match &self.value {
                None => Value::Null,
                Some(raw) => serde_json::from_str(raw.get())?,
            },
            node: self.node.as_deref().map(str::to_string),
            error: self.error.as_deref().map(str::to_string),
        })
    }
}

/// A history as read: the ops, plus what the reader noticed but could work around.
#[derive(Debug, Clone, Default)]
pub struct History {
    pub ops: Vec<Op>,
    /// Warnings a person should see (a truncated final line, ...), already in words.
    pub warnings: Vec<String>,
}

impl History {
    pub fn new(ops: Vec<Op>) -> Self {
        History {
            ops,
            warnings: Vec::new(),
        }
    }

    /// Pairs each invoke with its completion: `(invoke position, Some(completion position))`,
    /// in invoke order. An invoke with no completion gets `None` (it counts as `info`).
    /// Nemesis ops are not paired. Positions index `self.ops`.
    pub fn pairs(&self) -> Vec<(usize, Option<usize>)> {
        let mut open: rustc_hash::FxHashMap<u64, usize> = Default::default();
        let mut out = Vec::new();
        for (i, op) in self.ops.iter().enumerate() {
            let Process::Client(p) = op.process else {
                continue;
            };
            if op.kind == OpType::Invoke {
                open.insert(p, out.len());
                out.push((i, None));
            } else if let Some(slot) = open.remove(&p) {
                out[slot].1 = Some(i);
            }
        }
        out
    }
}

/// One line of the optional `resource.jsonl`: the protected resource's own log of
/// applied writes, in its order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedWrite {
    pub seq: u64,
    pub process: u64,
    pub token: Option<u64>,
    pub data: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_round_trips_as_integer_or_nemesis() {
        assert_eq!(serde_json::to_string(&Process::Client(3)).unwrap(), "3");
        assert_eq!(
            serde_json::to_string(&Process::Nemesis).unwrap(),
            "\"nemesis\""
        );
        let p: Process = serde_json::from_str("\"nemesis\"").unwrap();
        assert_eq!(p, Process::Nemesis);
        assert!(serde_json::from_str::<Process>("-1").is_err());
        assert!(serde_json::from_str::<Process>("\"client\"").is_err());
    }
}
