//! The general linearizability engine: Wing & Gong's search with Lowe's memoization
//! of (linearized set, state), as in Porcupine, and a P-compositional driver that
//! checks independent parts (keys) in parallel.
//!
//! The search walks a doubly linked list of call and return events in time order.
//! At a call it tries to let that op take effect now ("lift" it out of the list);
//! at the first return it meets, the op of that return should already have taken
//! effect, so the search backtracks. A (linearized set, state) pair seen before is
//! never explored twice: that is what makes the search practical.

use super::model::{Model, Operation};
use super::Limits;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// The engine's answer for one independent part of a history.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A legal order: positions into the ops slice, in linearization order
    /// (ops that never take effect are left out).
    Linearizable { order: Vec<usize> },
    /// No legal order. `ops` is the smallest failing part found (positions into the
    /// ops slice); `explanation` says in words where every order got stuck.
    Illegal {
        ops: Vec<usize>,
        explanation: String,
    },
    /// Gave up within the limits.
    Unknown { reason: String },
}

/// Checks one history of `ops` against `model`, as one part.
pub fn check_operations<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    limits: &Limits,
) -> Outcome {
    let budget = Budget::new(limits);
    let all: Vec<usize> = (0..ops.len()).collect();
    search(model, ops, &all, &budget)
}

/// One independent part of a history and its outcome. Positions (in `ops` and in
/// the outcome) index the whole ops slice given to `check_partitioned`.
#[derive(Debug, Clone)]
pub struct Part {
    /// The partition key ("" for a history checked as one part).
    pub key: String,
    pub ops: Vec<usize>,
    pub outcome: Outcome,
}

/// Checks each part of `model.partition(ops)` on its own, in parallel
/// (`limits.threads`, 0 = one per core), every part to a decision or to the shared
/// limits. A history is linearizable iff every part is (Herlihy & Wing's locality).
pub fn check_partitioned<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    limits: &Limits,
) -> Vec<Part> {
    let mut parts = model.partition(ops);
    // Largest first, so that a big key does not start last and finish alone.
    parts.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
    let budget = Budget::new(limits);
    let threads = match limits.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .clamp(1, parts.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; parts.len()]);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some((_, positions)) = parts.get(i) else {
            break;
        };
        let outcome = search(model, ops, positions, &budget);
        if let Ok(mut r) = results.lock() {
            r[i] = Some(outcome);
        }
    };
    if threads == 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(work);
            }
        });
    }
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut out: Vec<Part> = parts
        .into_iter()
        .zip(results)
        .map(|((key, ops), outcome)| Part {
            key,
            ops,
            outcome: outcome.unwrap_or(Outcome::Unknown {
                reason: "this part was not checked (a worker thread failed)".into(),
            }),
        })
        .collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// The limits shared by every part of one check: a deadline and a count of
/// memoized states, so that neither time nor memory runs away.
struct Budget {
    start: Instant,
    limits: Limits,
    states: AtomicUsize,
    exhausted: AtomicBool,
}

impl Budget {
    fn new(limits: &Limits) -> Self {
        Budget {
            start: Instant::now(),
            limits: *limits,
            states: AtomicUsize::new(0),
            exhausted: AtomicBool::new(false),
        }
    }

    /// Adds `n` memoized states; why the search must stop, if it must.
    fn charge(&self, n: usize) -> Option<String> {
        let total = self.states.fetch_add(n, Ordering::Relaxed) + n;
        if total > self.limits.max_states {
            self.exhausted.store(true, Ordering::Relaxed);
            return Some(format!(
                "the search kept more than {} states (the memory limit) without a decision",
                self.limits.max_states
            ));
        }
        if self.start.elapsed() > self.limits.time {
            self.exhausted.store(true, Ordering::Relaxed);
            return Some(format!(
                "the search ran past its time limit of {:.1} s without a decision",
                self.limits.time.as_secs_f64()
            ));
        }
        if self.exhausted.load(Ordering::Relaxed) {
            return Some("another part of the history used up the shared limits".into());
        }
        None
    }
}

const NIL: u32 = u32::MAX;
const HEAD: u32 = 0;

/// The event lists. Node 0 heads the list of finite ops' calls and returns, in
/// time order; node `open_head` heads the list of open-ended ops' calls (those with
/// no return: `info`, unanswered). Nodes are numbered in time order across both
/// lists, so "called before that return" is a comparison of node numbers. Lifting
/// an op unlinks its nodes; unlifting (in reverse order) relinks them, as in
/// Knuth's dancing links.
struct Events {
    next: Vec<u32>,
    prev: Vec<u32>,
    /// For each node: the op (a position into the part) and whether it is the call.
    op: Vec<u32>,
    is_call: Vec<bool>,
    call_node: Vec<u32>,
    /// NIL for an op that never returns.
    ret_node: Vec<u32>,
    open_head: u32,
}

impl Events {
    fn new<I, O>(ops: &[Operation<I, O>], part: &[usize]) -> Self {
        // (time, return after call at the same time, op): ops that touch in time
        // count as concurrent, as in Porcupine.
        let mut ev: Vec<(u64, bool, u32)> = Vec::with_capacity(part.len() * 2);
        for (i, &p) in part.iter().enumerate() {
            let o = &ops[p];
            ev.push((o.call, false, i as u32));
            if o.ret != u64::MAX {
                ev.push((o.ret.max(o.call), true, i as u32));
            }
        }
        ev.sort_unstable();
        let n = ev.len() + 2;
        let open_head = (n - 1) as u32;
        let mut e = Events {
            next: vec![NIL; n],
            prev: vec![NIL; n],
            op: vec![NIL; n],
            is_call: vec![false; n],
            call_node: vec![NIL; part.len()],
            ret_node: vec![NIL; part.len()],
            open_head,
        };
        let (mut last, mut last_open) = (HEAD, open_head);
        for (k, &(_, is_ret, op)) in ev.iter().enumerate() {
            let node = (k + 1) as u32;
            e.op[node as usize] = op;
            e.is_call[node as usize] = !is_ret;
            if is_ret {
                e.ret_node[op as usize] = node;
            } else {
                e.call_node[op as usize] = node;
            }
            let tail = if ops[part[op as usize]].ret == u64::MAX {
                &mut last_open
            } else {
                &mut last
            };
            e.prev[node as usize] = *tail;
            e.next[*tail as usize] = node;
            *tail = node;
        }
        e
    }

    fn unlink(&mut self, n: u32) {
        let (p, nx) = (self.prev[n as usize], self.next[n as usize]);
        self.next[p as usize] = nx;
        if nx != NIL {
            self.prev[nx as usize] = p;
        }
    }

    fn relink(&mut self, n: u32) {
        let (p, nx) = (self.prev[n as usize], self.next[n as usize]);
        self.next[p as usize] = n;
        if nx != NIL {
            self.prev[nx as usize] = n;
        }
    }

    fn lift(&mut self, op: usize) {
        self.unlink(self.call_node[op]);
        if self.ret_node[op] != NIL {
            self.unlink(self.ret_node[op]);
        }
    }

    fn unlift(&mut self, op: usize) {
        if self.ret_node[op] != NIL {
            self.relink(self.ret_node[op]);
        }
        self.relink(self.call_node[op]);
    }
}

/// A 128-bit key per op, XORed into the key of the linearized set (Zobrist
/// hashing): the set's key updates in O(1) per step and the memo stores 16 bytes per
/// set instead of a bitset of the whole part. Two different sets collide with
/// probability 2^-128 per pair, far below any hardware error rate.
fn op_keys(n: usize) -> Vec<u128> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        // splitmix64
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (0..n)
        .map(|_| ((next() as u128) << 64) | next() as u128)
        .collect()
}

/// The memo: for each (key of the finite ops taken, state), the sets of open-ended
/// ops (`info`, unanswered) taken with them, as bit masks. An open-ended op may
/// also never take effect, so a configuration that took the same finite ops to the
/// same state with *more* open-ended ops has no order the one with fewer lacks:
/// it is dominated, and skipped. Only the first 128 open-ended ops of a part get a
/// bit; any further ones are keyed like finite ops (exact match).
struct Memo<S> {
    seen: FxHashMap<(u128, S), Masks>,
}

enum Masks {
    One(u128),
    Many(Vec<u128>),
}

impl<S: Eq + std::hash::Hash> Memo<S> {
    /// Records the configuration; false if it (or one that dominates it) was seen.
    fn insert(&mut self, key: u128, state: S, open: u128) -> bool {
        use std::collections::hash_map::Entry;
        match self.seen.entry((key, state)) {
            Entry::Vacant(e) => {
                e.insert(Masks::One(open));
                true
            }
            Entry::Occupied(mut e) => {
                let subset = |m: &u128| m & !open == 0;
                let masks = e.get_mut();
                match masks {
                    Masks::One(m) if subset(m) => false,
                    Masks::Many(ms) if ms.iter().any(subset) => false,
                    Masks::One(m) => {
                        *masks = Masks::Many(vec![*m, open]);
                        true
                    }
                    Masks::Many(ms) => {
                        // Those that took more than this one are now dominated.
                        ms.retain(|m| open & !m != 0);
                        ms.push(open);
                        true
                    }
                }
            }
        }
    }
}

struct Frame<S> {
    op: usize,
    /// The state before the op took effect.
    state: S,
    /// Taken eagerly: there is no alternative to try in its place.
    forced: bool,
    /// Where the scan was when it took the op: the first return it had met (NIL
    /// while still among the finite ops' calls).
    limit: u32,
}

/// The deepest point any order reached, kept as the evidence of an illegal verdict.
struct Stuck<S> {
    order: Vec<usize>,
    op: usize,
    state: S,
}

/// How each op of a part marks the set it joins: by a Zobrist key, or for the
/// first 128 open-ended ops by a bit (see `Memo`).
fn op_marks<I, O>(ops: &[Operation<I, O>], part: &[usize]) -> (Vec<u128>, Vec<u128>) {
    let mut keys = op_keys(part.len());
    let mut bits = vec![0u128; part.len()];
    let mut open = 0;
    for (i, &p) in part.iter().enumerate() {
        if ops[p].ret == u64::MAX && open < 128 {
            bits[i] = 1 << open;
            keys[i] = 0;
            open += 1;
        }
    }
    (keys, bits)
}

/// The search over one part (`part` = positions into `ops`). Positions in the
/// outcome index `ops`.
fn search<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    part: &[usize],
    budget: &Budget,
) -> Outcome {
    let mut ev = Events::new(ops, part);
    let op = |i: usize| &ops[part[i]];
    let (keys, bits) = op_marks(ops, part);
    let mut remaining = part.iter().filter(|&&p| ops[p].ret != u64::MAX).count();
    let mut memo: Memo<M::State> = Memo {
        seen: FxHashMap::default(),
    };
    let mut uncharged = 0usize;
    let mut frames: Vec<Frame<M::State>> = Vec::new();
    let mut state = model.init();
    let (mut set, mut taken): (u128, u128) = (0, 0);
    memo.insert(set, state.clone(), taken);
    let mut stuck: Option<Stuck<M::State>> = None;
    // The scan: first the finite ops' calls up to the first return (`limit`), then
    // the open-ended ops called before it. Open-ended ops come last because they
    // may also never take effect: an order that needs fewer of them dominates.
    let mut node = ev.next[HEAD as usize];
    let mut limit = NIL;
    let mut steps: u64 = 0;
    loop {
        if remaining == 0 {
            return Outcome::Linearizable {
                order: frames.iter().map(|f| part[f.op]).collect(),
            };
        }
        steps += 1;
        if steps & 0x3ff == 0 {
            if let Some(reason) = budget.charge(std::mem::take(&mut uncharged)) {
                return Outcome::Unknown { reason };
            }
        }
        if limit == NIL && (node == NIL || !ev.is_call[node as usize]) {
            // `remaining > 0`, so a return is left and the scan met it.
            limit = node;
            node = ev.next[ev.open_head as usize];
        }
        let mut backtrack = limit != NIL && (node == NIL || node > limit);
        if !backtrack {
            let i = ev.op[node as usize] as usize;
            let o = op(i);
            match model.step(&state, &o.input, o.output.as_ref()) {
                None => node = ev.next[node as usize],
                Some(next) => {
                    // (An open-ended op that changes nothing is dominated anyway.)
                    let forced = next == state
                        && o.ret != u64::MAX
                        && model.eager(&o.input, o.output.as_ref());
                    let linearized = set ^ keys[i];
                    if memo.insert(linearized, next.clone(), taken | bits[i]) {
                        uncharged += 1;
                        frames.push(Frame {
                            op: i,
                            state: std::mem::replace(&mut state, next),
                            forced,
                            limit,
                        });
                        set = linearized;
                        taken |= bits[i];
                        ev.lift(i);
                        if o.ret != u64::MAX {
                            remaining -= 1;
                        }
                        node = ev.next[HEAD as usize];
                        limit = NIL;
                    } else if forced {
                        // Taking it now is never worse than later, and "now" (it is
                        // finite, so no ancestor took it) was explored and failed:
                        // so does everything from here.
                        backtrack = true;
                    } else {
                        node = ev.next[node as usize];
                    }
                }
            }
        }
        if backtrack {
            if limit != NIL {
                let deeper = stuck.as_ref().is_none_or(|s| frames.len() > s.order.len());
                if deeper {
                    stuck = Some(Stuck {
                        order: frames.iter().map(|f| f.op).collect(),
                        op: ev.op[limit as usize] as usize,
                        state: state.clone(),
                    });
                }
            }
            loop {
                let Some(f) = frames.pop() else {
                    return illegal(model, ops, part, stuck);
                };
                ev.unlift(f.op);
                set ^= keys[f.op];
                taken &= !bits[f.op];
                state = f.state;
                if op(f.op).ret != u64::MAX {
                    remaining += 1;
                }
                if !f.forced {
                    node = ev.next[ev.call_node[f.op] as usize];
                    limit = f.limit;
                    break;
                }
            }
        }
    }
}

/// The evidence of an illegal part: the longest legal order any branch reached and
/// the op that had returned by then but could not take effect.
fn illegal<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    part: &[usize],
    stuck: Option<Stuck<M::State>>,
) -> Outcome {
    let Some(s) = stuck else {
        return Outcome::Illegal {
            ops: Vec::new(),
            explanation: "no order of the ops is legal".into(),
        };
    };
    let words = |i: usize| {
        let o = &ops[part[i]];
        format!(
            "{} by process {}",
            model.describe(&o.input, o.output.as_ref()),
            o.process
        )
    };
    let tail: Vec<String> = s
        .order
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(|&i| words(i))
        .collect();
    let prefix = if s.order.is_empty() {
        "no op can take effect first".to_string()
    } else {
        format!(
            "the longest legal order found takes {} of the {} ops (ending with: {}) and leaves the state {}",
            s.order.len(),
            part.len(),
            tail.join("; "),
            model.describe_state(&s.state)
        )
    };
    let explanation = format!(
        "{prefix}; then {} had already returned but cannot take effect, and no other pending op can go first in a way that lets it",
        words(s.op)
    );
    let mut failing: Vec<usize> = s.order.iter().map(|&i| part[i]).collect();
    failing.push(part[s.op]);
    Outcome::Illegal {
        ops: failing,
        explanation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A register of integers, initially 0: the smallest model worth testing on.
    struct Reg;

    #[derive(Debug)]
    enum In {
        Read,
        Write(i64),
    }

    impl Model for Reg {
        type State = i64;
        type Input = In;
        type Output = i64;
        fn init(&self) -> i64 {
            0
        }
        fn step(&self, s: &i64, i: &In, o: Option<&i64>) -> Option<i64> {
            match i {
                In::Read => (o.is_none() || o == Some(s)).then_some(*s),
                In::Write(v) => Some(*v),
            }
        }
        fn eager(&self, i: &In, _: Option<&i64>) -> bool {
            matches!(i, In::Read)
        }
        fn partition(&self, ops: &[Operation<In, i64>]) -> Vec<(String, Vec<usize>)> {
            // Each process its own "key", to exercise the driver.
            let mut keys: std::collections::BTreeMap<u64, Vec<usize>> = Default::default();
            for (i, o) in ops.iter().enumerate() {
                keys.entry(o.process).or_default().push(i);
            }
            keys.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
        }
    }

    fn op(process: u64, input: In, output: Option<i64>, call: u64, ret: u64) -> Operation<In, i64> {
        Operation {
            process,
            input,
            output,
            call,
            ret,
            indexes: vec![],
        }
    }

    fn limits() -> Limits {
        Limits {
            time: Duration::from_secs(10),
            max_states: 1_000_000,
            threads: 2,
        }
    }

    #[test]
    fn concurrent_write_and_read_are_linearizable_either_way() {
        // |--- write 1 ---|
        //     |-- read 1 --|      the read may follow the write
        let ops = vec![
            op(0, In::Write(1), None, 0, 10),
            op(1, In::Read, Some(1), 2, 12),
        ];
        match check_operations(&Reg, &ops, &limits()) {
            Outcome::Linearizable { order } => assert_eq!(order, vec![0, 1]),
            o => panic!("{o:?}"),
        }
        // ...or precede it.
        let ops = vec![
            op(0, In::Write(1), None, 0, 10),
            op(1, In::Read, Some(0), 2, 12),
        ];
        assert!(matches!(
            check_operations(&Reg, &ops, &limits()),
            Outcome::Linearizable { .. }
        ));
    }

    #[test]
    fn a_stale_read_after_the_write_returned_is_illegal_and_named() {
        let ops = vec![
            op(0, In::Write(1), None, 0, 10),
            op(1, In::Read, Some(0), 11, 12),
        ];
        match check_operations(&Reg, &ops, &limits()) {
            Outcome::Illegal { ops, explanation } => {
                assert_eq!(ops, vec![0, 1]);
                assert!(
                    explanation.contains("Read -> 0 by process 1"),
                    "{explanation}"
                );
            }
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn an_unanswered_write_may_take_effect_late_or_never() {
        // write 1 never returns: reads may see 0 and later 1, but not 1 then 0.
        let pending = || op(0, In::Write(1), None, 0, u64::MAX);
        let ops = vec![
            pending(),
            op(1, In::Read, Some(0), 5, 6),
            op(1, In::Read, Some(1), 7, 8),
        ];
        assert!(matches!(
            check_operations(&Reg, &ops, &limits()),
            Outcome::Linearizable { .. }
        ));
        let ops = vec![pending(), op(1, In::Read, Some(0), 5, 6)];
        match check_operations(&Reg, &ops, &limits()) {
            Outcome::Linearizable { order } => assert_eq!(order, vec![1]),
            o => panic!("{o:?}"),
        }
        let ops = vec![
            pending(),
            op(1, In::Read, Some(1), 5, 6),
            op(1, In::Read, Some(0), 7, 8),
        ];
        assert!(matches!(
            check_operations(&Reg, &ops, &limits()),
            Outcome::Illegal { .. }
        ));
    }

    #[test]
    fn reads_of_two_concurrent_writes_must_agree_on_their_order() {
        // Two writes overlap; one reader sees 1 then 2, another 2 then 1.
        let ops = vec![
            op(0, In::Write(1), None, 0, 100),
            op(1, In::Write(2), None, 0, 100),
            op(2, In::Read, Some(1), 10, 20),
            op(2, In::Read, Some(2), 30, 40),
            op(3, In::Read, Some(2), 10, 20),
            op(3, In::Read, Some(1), 30, 40),
        ];
        assert!(matches!(
            check_operations(&Reg, &ops, &limits()),
            Outcome::Illegal { .. }
        ));
    }

    #[test]
    fn limits_end_in_unknown() {
        // Many concurrent writes and a final impossible read: the search must try
        // every subset before it can say illegal; a tiny state budget stops it.
        let mut ops: Vec<_> = (0..20)
            .map(|v| op(v, In::Write(v as i64 + 1), None, 0, 100))
            .collect();
        ops.push(op(99, In::Read, Some(-1), 101, 102));
        let tight = Limits {
            max_states: 500,
            ..limits()
        };
        assert!(matches!(
            check_operations(&Reg, &ops, &tight),
            Outcome::Unknown { .. }
        ));
    }

    #[test]
    fn unneeded_open_ended_ops_do_not_multiply_the_states() {
        // 14 writes that never return, then a read no write explains: refuting it
        // with the plain memo takes ~14 * 2^13 = 115k states (each subset, with
        // each last write); since taking more of them is never better, fewer do.
        let mut ops: Vec<_> = (0..14)
            .map(|v| op(v, In::Write(v as i64 + 1), None, 0, u64::MAX))
            .collect();
        ops.push(op(99, In::Read, Some(-1), 1, 2));
        let tight = Limits {
            max_states: 50_000,
            ..limits()
        };
        assert!(matches!(
            check_operations(&Reg, &ops, &tight),
            Outcome::Illegal { .. }
        ));
        // Reading 0 (none took effect) and then 7 (one did) is fine.
        ops.pop();
        ops.push(op(99, In::Read, Some(0), 1, 2));
        ops.push(op(99, In::Read, Some(7), 3, 4));
        match check_operations(&Reg, &ops, &tight) {
            Outcome::Linearizable { order } => {
                assert_eq!(order.first(), Some(&14));
                assert_eq!(order[order.len() - 2..], [6, 15]);
            }
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn partitions_are_checked_apart_and_named() {
        // Per-process "keys": process 1's part is illegal, process 0's is fine.
        let ops = vec![
            op(0, In::Write(5), None, 0, 1),
            op(0, In::Read, Some(5), 2, 3),
            op(1, In::Write(7), None, 0, 1),
            op(1, In::Read, Some(0), 2, 3),
        ];
        let parts = check_partitioned(&Reg, &ops, &limits());
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].key, "0");
        assert!(matches!(parts[0].outcome, Outcome::Linearizable { .. }));
        assert_eq!(parts[1].key, "1");
        match &parts[1].outcome {
            Outcome::Illegal { ops, .. } => assert_eq!(ops, &vec![2, 3]),
            o => panic!("{o:?}"),
        }
    }
}
