//! Histories written by hand, for tests: a lock's acquire, write and release, or
//! any op, each op given the next index, times in milliseconds. It is how the
//! checker's own tests build their histories, and how a user builds one in theirs.

use crate::op::{History, Op, OpType, Process};
use serde_json::{json, Value};

/// Builds a history op by op: `ms` is the op's time in milliseconds, `p` the
/// client process (a negative `p` is the nemesis).
///
/// ```
/// use lockcheck_history::{HistoryBuilder, OpType};
///
/// let h = HistoryBuilder::default()
///     .acquire(0, 0, Some(1)) // process 0 asks at 0 ms, holds from 1 ms with token 1
///     .release(10, 0, Some(1))
///     .history();
/// assert_eq!(h.ops.len(), 4);
/// assert_eq!(h.ops[1].kind, OpType::Ok);
/// ```
#[derive(Debug, Default)]
pub struct HistoryBuilder(pub Vec<Op>);

impl HistoryBuilder {
    /// Any op: `error` is the completion's `error` field.
    pub fn op(
        mut self,
        ms: u64,
        p: i64,
        kind: OpType,
        f: &str,
        value: Value,
        error: Option<&str>,
    ) -> Self {
        self.0.push(Op {
            index: self.0.len() as u64,
            time: ms * 1_000_000,
            process: if p < 0 {
                Process::Nemesis
            } else {
                Process::Client(p as u64)
            },
            kind,
            f: f.into(),
            value,
            node: None,
            error: error.map(Into::into),
        });
        self
    }
    pub fn inv(self, ms: u64, p: i64, f: &str, v: Value) -> Self {
        self.op(ms, p, OpType::Invoke, f, v, None)
    }
    pub fn ok(self, ms: u64, p: i64, f: &str, v: Value) -> Self {
        self.op(ms, p, OpType::Ok, f, v, None)
    }
    pub fn fail(self, ms: u64, p: i64, f: &str, err: &str) -> Self {
        self.op(ms, p, OpType::Fail, f, Value::Null, Some(err))
    }
    /// A fault on `targets` (the nemesis's `info` op named `f`).
    pub fn nemesis(self, ms: u64, f: &str, targets: &[&str]) -> Self {
        self.op(ms, -1, OpType::Info, f, json!({ "targets": targets }), None)
    }
    /// acquire invoke at `ms`, ok at `ms + 1` with `token` and a 1 s lease.
    pub fn acquire(self, ms: u64, p: i64, token: Option<u64>) -> Self {
        self.inv(ms, p, "acquire", json!({"lock": "l"})).ok(
            ms + 1,
            p,
            "acquire",
            json!({"token": token, "lease_ms": 1000}),
        )
    }
    /// write invoke at `ms`, ok at `ms + 1` with the resource's `seq`.
    pub fn write(self, ms: u64, p: i64, token: Option<u64>, seq: u64) -> Self {
        let d = format!("p{p}-{seq}");
        self.inv(ms, p, "write", json!({"token": token, "data": d}))
            .ok(
                ms + 1,
                p,
                "write",
                json!({"token": token, "data": d, "seq": seq}),
            )
    }
    /// release invoke at `ms`, ok at `ms + 1`.
    pub fn release(self, ms: u64, p: i64, token: Option<u64>) -> Self {
        self.inv(ms, p, "release", json!({ "token": token }))
            .ok(ms + 1, p, "release", Value::Null)
    }
    pub fn history(self) -> History {
        History::new(self.0)
    }
}
