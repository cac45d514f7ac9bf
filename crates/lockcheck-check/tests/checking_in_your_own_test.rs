//! Checking from a test of your own, as a user of this crate does: record what
//! your threads did as they did it, and hand the history to the checker. Nothing
//! of lockcheck's runner is needed, no server and no fault: the lock is whatever
//! your test exercises.
//!
//! Here two locks of a user's: one that keeps holders apart (a mutex and a
//! condition variable), and one that grants every request. A barrier makes the
//! second's two holders overlap for certain (no sleep: the order is forced, not
//! hoped for). Last, a model of the user's own, checked by the general engine.

use lockcheck_check::history::{History, Op, OpType, Process};
use lockcheck_check::linear::{check_operations, Outcome};
use lockcheck_check::model::{Model, Operation};
use lockcheck_check::{lock, AnomalyKind, Limits, Validity};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Condvar, Mutex};
use std::time::Instant;

/// The user's lock service, as their test sees it: a grant comes with a token.
trait LockService: Sync {
    fn acquire(&self) -> u64;
    fn release(&self, token: u64);
}

/// A lock that waits for the holder to release: at most one holder.
#[derive(Default)]
struct Exclusive {
    holder: Mutex<Option<u64>>,
    freed: Condvar,
    tokens: AtomicU64,
}

impl LockService for Exclusive {
    fn acquire(&self) -> u64 {
        let mut holder = self.holder.lock().unwrap();
        while holder.is_some() {
            holder = self.freed.wait(holder).unwrap();
        }
        let token = self.tokens.fetch_add(1, Ordering::SeqCst) + 1;
        *holder = Some(token);
        token
    }

    fn release(&self, token: u64) {
        let mut holder = self.holder.lock().unwrap();
        assert_eq!(*holder, Some(token), "released by a non-holder");
        *holder = None;
        self.freed.notify_one();
    }
}

/// A lock that grants whoever asks: a bug to be caught.
#[derive(Default)]
struct GrantsEveryone {
    tokens: AtomicU64,
}

impl LockService for GrantsEveryone {
    fn acquire(&self) -> u64 {
        self.tokens.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn release(&self, _: u64) {}
}

/// The history of a test: every call and its outcome, stamped under one lock so
/// that the order of the list is the order of the times.
struct Recorder {
    start: Instant,
    ops: Mutex<Vec<Op>>,
}

impl Recorder {
    fn new() -> Recorder {
        Recorder {
            start: Instant::now(),
            ops: Mutex::new(Vec::new()),
        }
    }

    fn record(&self, process: u64, kind: OpType, f: &str, value: Value) {
        let mut ops = self.ops.lock().unwrap();
        let index = ops.len() as u64;
        ops.push(Op {
            index,
            time: self.start.elapsed().as_nanos() as u64,
            process: Process::Client(process),
            kind,
            f: f.to_string(),
            value,
            node: None,
            error: None,
        });
    }

    fn history(self) -> History {
        History::new(self.ops.into_inner().unwrap())
    }
}

/// `threads` threads take `service` `rounds` times each, recording every acquire
/// and release; between the grant and the release each waits at `hold` (if any).
fn exercise(
    service: &impl LockService,
    threads: u64,
    rounds: usize,
    hold: Option<&Barrier>,
) -> History {
    let recorder = Recorder::new();
    std::thread::scope(|s| {
        for p in 0..threads {
            let recorder = &recorder;
            s.spawn(move || {
                for _ in 0..rounds {
                    recorder.record(p, OpType::Invoke, "acquire", json!({"lock": "l"}));
                    let token = service.acquire();
                    recorder.record(p, OpType::Ok, "acquire", json!({ "token": token }));
                    if let Some(barrier) = hold {
                        barrier.wait();
                    }
                    recorder.record(p, OpType::Invoke, "release", json!({ "token": token }));
                    service.release(token);
                    recorder.record(p, OpType::Ok, "release", Value::Null);
                }
            });
        }
    });
    recorder.history()
}

#[test]
fn a_lock_that_waits_for_the_holder_is_valid() {
    let history = exercise(&Exclusive::default(), 4, 200, None);
    assert_eq!(history.ops.len(), 4 * 200 * 4);
    let verdict = lock::check(&history, &Default::default(), &Limits::default());
    assert_eq!(verdict.valid, Validity::Valid, "{verdict:#?}");
}

#[test]
fn a_lock_that_grants_everyone_has_two_holders() {
    // Both threads hold the lock when they meet at the barrier.
    let both_granted = Barrier::new(2);
    let history = exercise(&GrantsEveryone::default(), 2, 1, Some(&both_granted));
    let verdict = lock::check(&history, &Default::default(), &Limits::default());
    assert_eq!(verdict.valid, Validity::Invalid);
    let kinds: Vec<AnomalyKind> = verdict.anomalies.iter().map(|a| a.kind).collect();
    assert_eq!(kinds, [AnomalyKind::DoubleHolder], "{verdict:#?}");
    assert_eq!(verdict.anomalies[0].processes, [0, 1]);
}

/// A counter of the user's own: `Add(n)` returns nothing, `Read` returns the sum.
struct Counter;

#[derive(Debug)]
enum CounterCall {
    Add(u64),
    Read,
}

impl Model for Counter {
    type State = u64;
    type Input = CounterCall;
    type Output = u64;

    fn init(&self) -> u64 {
        0
    }

    fn step(&self, sum: &u64, call: &CounterCall, read: Option<&u64>) -> Option<u64> {
        match call {
            CounterCall::Add(n) => Some(sum + n),
            // A read leaves the sum as it is, if it saw that sum (or is unanswered).
            CounterCall::Read => read.is_none_or(|r| r == sum).then_some(*sum),
        }
    }
}

/// An op of `process` called at `call` and answered at `ret` (times in any unit,
/// on one clock).
fn op(
    process: u64,
    input: CounterCall,
    output: u64,
    call: u64,
    ret: u64,
) -> Operation<CounterCall, u64> {
    Operation {
        process,
        input,
        output: Some(output),
        call,
        ret,
        indexes: vec![call, ret],
    }
}

#[test]
fn a_model_of_your_own_is_checked_by_the_same_engine() {
    // A read that overlaps an add may see the sum before or after it.
    let fits = [
        op(0, CounterCall::Add(2), 0, 0, 10),
        op(1, CounterCall::Read, 0, 1, 2),
        op(1, CounterCall::Read, 2, 11, 12),
    ];
    match check_operations(&Counter, &fits, &Limits::default()) {
        Outcome::Linearizable { order } => assert_eq!(order.len(), 3),
        other => panic!("{other:?}"),
    }
    // A read after the add completed cannot see the sum before it.
    let stale = [
        op(0, CounterCall::Add(2), 0, 0, 10),
        op(1, CounterCall::Read, 0, 11, 12),
    ];
    match check_operations(&Counter, &stale, &Limits::default()) {
        Outcome::Illegal { ops, explanation } => {
            assert_eq!(ops, [0, 1], "{explanation}");
        }
        other => panic!("{other:?}"),
    }
}
