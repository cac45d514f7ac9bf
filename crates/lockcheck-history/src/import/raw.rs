//! What the foreign readers give: ops as their source wrote them, and what went
//! wrong where. The base of `import`: it imports no sibling.

use crate::{OpType, Process};
use serde_json::Value;

/// What went wrong where, before the file name is known.
#[derive(Debug, Clone)]
pub struct Fault {
    pub line: usize,
    pub field: String,
    pub reason: String,
}

/// One op as a foreign source gave it, before indexes, times and process ids are
/// made to follow lockcheck's rules.
#[derive(Debug, Clone)]
pub struct RawOp {
    pub line: usize,
    pub process: Process,
    pub kind: OpType,
    pub f: String,
    pub value: Value,
    pub time: Option<u64>,
    pub error: Option<String>,
}
