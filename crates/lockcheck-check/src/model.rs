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

    /// A state in words, for the evidence of an invalid verdict.
    fn describe_state(&self, state: &Self::State) -> String {
        format!("{state:?}")
    }

    /// True when this op, wherever it leaves the state unchanged, may be taken the
    /// moment it can be, with no need to try it later: a read (it changes nothing, so
    /// an earlier point only frees the ops after it), or a write nobody can observe
    /// any more. The search then takes it without branching, which is what keeps many
    /// concurrent reads from multiplying the states. Default: false (always branch).
    fn eager(&self, _input: &Self::Input, _output: Option<&Self::Output>) -> bool {
        false
    }

    /// Splits the ops into independent parts (P-compositionality: a history is
    /// linearizable iff each part is), each named by its key, as positions into
    /// `ops`. Default: one part holding every op.
    fn partition(&self, ops: &[Operation<Self::Input, Self::Output>]) -> Vec<(String, Vec<usize>)> {
        vec![(String::new(), (0..ops.len()).collect())]
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
