//! Knossos's `(mutex)`: a lock with no owner. acquire needs it free, release needs
//! it held, whoever holds it. (lockcheck's own lock model, owner-aware and with
//! fencing tokens, lives in `check::lock`.)

use super::{operations, unsupported, verdict, ModelError};
use crate::linear::check_partitioned;
use crate::model::Model;
use crate::{Limits, Verdict};
use lockcheck_history::History;

#[derive(Debug, Clone, Copy)]
pub struct Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutexIn {
    Acquire,
    Release,
}

impl Model for Mutex {
    /// Whether the lock is held.
    type State = bool;
    type Input = MutexIn;
    type Output = ();

    fn init(&self) -> bool {
        false
    }

    fn step(&self, held: &bool, input: &MutexIn, _: Option<&()>) -> Option<bool> {
        match input {
            MutexIn::Acquire => (!held).then_some(true),
            MutexIn::Release => held.then_some(false),
        }
    }

    fn describe(&self, input: &MutexIn, output: Option<&()>) -> String {
        let what = match input {
            MutexIn::Acquire => "acquire",
            MutexIn::Release => "release",
        };
        match output {
            Some(()) => format!("{what} (ok)"),
            None => format!("{what} (outcome unknown)"),
        }
    }
}

impl Mutex {
    pub fn check(&self, history: &History, limits: &Limits) -> Result<Verdict, ModelError> {
        let ops = operations(history, |inv, ok| {
            let input = match inv.f.as_str() {
                "acquire" => MutexIn::Acquire,
                "release" => MutexIn::Release,
                f => return Err(unsupported("mutex", f, "acquire, release")),
            };
            Ok((input, ok.map(|_| ())))
        })?;
        let parts = check_partitioned(self, &ops, limits);
        Ok(verdict::<Self>("mutex", history, &ops, &parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Validity;
    use lockcheck_history::import::{parse, Format};

    fn check(edn: &str) -> Verdict {
        let h = parse(edn, "t", Format::JepsenEdn).unwrap();
        Mutex.check(&h, &Limits::default()).unwrap()
    }

    #[test]
    fn two_acquires_without_a_release_are_illegal_unless_one_failed() {
        let two = "{:process 0 :type :invoke :f :acquire}\n{:process 0 :type :ok :f :acquire}\n{:process 1 :type :invoke :f :acquire}\n{:process 1 :type :ok :f :acquire}\n";
        let v = check(two);
        assert_eq!(v.valid, Validity::Invalid);
        assert_eq!(v.anomalies[0].indexes, vec![0, 1, 2, 3]);
        assert_eq!(v.anomalies[0].processes, vec![0, 1]);
        let failed = two.replace("{:process 1 :type :ok", "{:process 1 :type :fail");
        assert_eq!(check(&failed).valid, Validity::Valid);
        // A release that overlaps the second acquire may come first.
        let overlap = "{:process 0 :type :invoke :f :acquire}\n{:process 0 :type :ok :f :acquire}\n{:process 1 :type :invoke :f :acquire}\n{:process 0 :type :invoke :f :release}\n{:process 1 :type :ok :f :acquire}\n{:process 0 :type :ok :f :release}\n";
        assert_eq!(check(overlap).valid, Validity::Valid);
    }
}
