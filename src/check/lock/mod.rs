//! The lock model: mutual exclusion judged by linearizability against an owner-aware
//! mutex, fencing tokens judged in a legal linearization order, and the resource's
//! own order of writes. (Owned by the lock-checker work.)

use super::{Limits, Verdict};
use crate::history::{AppliedWrite, History};

/// What the lock checker reads besides the history.
#[derive(Debug, Clone, Default)]
pub struct LockInput<'a> {
    /// The resource's own log of applied writes (`resource.jsonl`), where there is one.
    pub resource: Option<&'a [AppliedWrite]>,
}

/// Checks a lock history. Pure: no I/O, no clock.
pub fn check(_history: &History, _input: &LockInput<'_>, _limits: &Limits) -> Verdict {
    unimplemented!("the lock checker is being built")
}
