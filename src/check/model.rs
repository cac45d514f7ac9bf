//! The model API of the general linearizability engine: one screen, as in Porcupine.
//!
//! A model is a sequential specification: from a state, an input with its observed
//! output either is possible (and gives the next state) or is not.

use std::fmt::Debug;
use std::hash::Hash;

pub trait Model: Sync {
    type State: Clone + Eq + Hash + Debug + Send + Sync;
    type Input: Debug + Sync;
    type Output: Debug + Sync;

    fn init(&self) -> Self::State;

    /// The state after `input` took effect returning `output`, or `None` if that
    /// output is impossible from `state`. `output` is `None` when it is unknown
    /// (an `info` op, or a read Jepsen logged as `nil`): any output is accepted.
    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: Option<&Self::Output>,
    ) -> Option<Self::State>;

    /// One op in words, for the evidence of an invalid verdict.
    fn describe(&self, input: &Self::Input, output: Option<&Self::Output>) -> String {
        match output {
            Some(o) => format!("{input:?} -> {o:?}"),
            None => format!("{input:?} -> ?"),
        }
    }
}

/// One operation as the engine sees it: a call at `call`, a return at `ret`
/// (`u64::MAX` for an op that may take effect at any time after its call, or never:
/// an `info` or unanswered invoke).
#[derive(Debug, Clone)]
pub struct Operation<I, O> {
    pub process: u64,
    pub input: I,
    pub output: Option<O>,
    pub call: u64,
    pub ret: u64,
    /// History indexes of the invoke and of the completion, for evidence.
    pub indexes: Vec<u64>,
}
