//! The history: every operation clients and the fault injector performed, in the
//! order the controller observed them, on one clock. It is the one currency between
//! the runner, the checker and the report (docs/history.md is the contract).
//!
//! This crate depends on nothing else of ours (lockcheck names it `lockcheck::history`).

mod builder;
mod json;
mod malformed;
mod op;
mod read;
mod write;

pub mod import;
pub mod input;
pub mod synth;

pub use builder::HistoryBuilder;
pub use input::Input;
pub use malformed::HistoryError;
pub use op::{
    error, f, fault_ops, AppliedWrite, Call, FaultOps, History, Op, OpRef, OpType, Process,
};
pub use read::{
    parse_jsonl, read_jsonl, read_jsonl_each, read_jsonl_from, read_jsonl_refs,
    read_jsonl_refs_from, read_resource, read_resource_from,
};
pub use write::HistoryWriter;
