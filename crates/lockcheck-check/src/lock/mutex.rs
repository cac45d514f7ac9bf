//! Mutual exclusion: the owner-aware mutex, and the sweep that decides it fast.
//!
//! The model (for the general engine): `acquire` by p needs the lock free and leaves
//! it held by p; `release` by p needs it held by p and frees it; a `regrant` to p (its
//! holder acquiring again, or renewing with a token) needs it held by p and keeps it
//! so. Only the owner's release frees it — a lease that expired in the service does
//! not end the hold a client still believes in, which is the whole point of checking
//! a lease lock.
//!
//! Why a sweep decides it exactly. Each section turns into two ops: its acquire,
//! which takes effect somewhere in [acquire invoke, acquire ok], and its end, which
//! takes effect somewhere in [release invoke, release ack] (or any time after, for a
//! release never acknowledged); a holder that never released has no end within the
//! history (history.md: it holds to the end). An order is legal iff the chosen hold spans of
//! different processes are disjoint. Every span contains its *core* [acquire ok,
//! release invoke], and shrinking a span towards its core never creates an overlap,
//! so a legal order exists iff the cores of different processes are disjoint — and
//! then the order of sections is forced: it is the order of their cores. This is why
//! a late release ack, a blocked waiter, or an ok that arrives after the previous
//! holder's release was invoked are fine, while a holder that paused past its lease
//! and never released is not. A regrant lies inside its section's core (its process
//! has one op in flight), so it never changes the cores; with tokens, the order of all
//! grants is then forced too, which is what `tokens` checks. `tests/lock_props.rs`
//! checks this against the engine's search and against a brute force that tries every
//! order.

use super::explain::{at, how_it_ended, indexes, lock_name, with_token};
use super::findings::Findings;
use super::ops::Ops;
use super::sections::{End, Section, Sections};
use crate::linear::{check_operations, Outcome};
use crate::model::{Model, Operation};
use crate::{secs, secs_apart, Anomaly, AnomalyKind, Limits};
use lockcheck_history::OpType;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One op of the owner-aware mutex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutexOp {
    Acquire {
        lock: u32,
        process: u64,
        token: Option<u64>,
    },
    Release {
        lock: u32,
        process: u64,
    },
    /// The holder granted the lock again (a re-acquire or a renew): its new token.
    Regrant {
        lock: u32,
        process: u64,
        token: Option<u64>,
    },
}

impl MutexOp {
    fn lock(&self) -> u32 {
        match *self {
            MutexOp::Acquire { lock, .. }
            | MutexOp::Release { lock, .. }
            | MutexOp::Regrant { lock, .. } => lock,
        }
    }
}

/// The owner-aware mutex; with `tokens`, also a fencing service: each grant's token
/// must be greater than the last one handed out (equal only for the same process
/// acquiring again).
#[derive(Debug, Clone, Copy, Default)]
pub struct OwnerMutex {
    pub tokens: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MutexState {
    pub holder: Option<u64>,
    /// The last token handed out, and to whom.
    pub last_token: Option<(u64, u64)>,
}

impl Model for OwnerMutex {
    type State = MutexState;
    type Input = MutexOp;
    type Output = ();

    fn init(&self) -> MutexState {
        MutexState {
            holder: None,
            last_token: None,
        }
    }

    fn step(&self, state: &MutexState, input: &MutexOp, _: Option<&()>) -> Option<MutexState> {
        match *input {
            MutexOp::Acquire { process, token, .. } | MutexOp::Regrant { process, token, .. } => {
                let needs = match input {
                    MutexOp::Acquire { .. } => None,
                    _ => Some(process),
                };
                if state.holder != needs {
                    return None;
                }
                let mut last_token = state.last_token;
                if let (true, Some(t)) = (self.tokens, token) {
                    if let Some((m, q)) = last_token {
                        if t < m || (t == m && q != process) {
                            return None;
                        }
                    }
                    last_token = Some((t, process));
                }
                Some(MutexState {
                    holder: Some(process),
                    last_token,
                })
            }
            MutexOp::Release { process, .. } => {
                (state.holder == Some(process)).then_some(MutexState {
                    holder: None,
                    last_token: state.last_token,
                })
            }
        }
    }

    fn describe(&self, input: &MutexOp, _: Option<&()>) -> String {
        match *input {
            MutexOp::Acquire { process, token, .. } => {
                format!("process {process} acquires{}", with_token(token))
            }
            MutexOp::Release { process, .. } => format!("process {process} releases"),
            MutexOp::Regrant { process, token, .. } => {
                format!(
                    "process {process}, holding, is granted it again{}",
                    with_token(token)
                )
            }
        }
    }

    /// Each lock is an object of its own (P-compositionality): keyed by lock id.
    fn partition(&self, ops: &[Operation<MutexOp, ()>]) -> Vec<(String, Vec<usize>)> {
        let mut parts: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
        for (i, o) in ops.iter().enumerate() {
            parts.entry(o.input.lock()).or_default().push(i);
        }
        parts
            .into_iter()
            .map(|(lock, ops)| (lock.to_string(), ops))
            .collect()
    }
}

/// The ops the engine searches, every lock's, `call`/`ret` being positions in the
/// history (so that order has no ties).
pub fn operations(h: &Ops, s: &Sections) -> Vec<Operation<MutexOp, ()>> {
    s.sections
        .iter()
        .flat_map(|sec| section_ops(h, sec))
        .collect()
}

/// A section as the mutex sees it: its acquire, its regrants, and its release (which
/// may land any time after its invoke where it was never acknowledged). A holder that
/// never released has no release: it holds to the end of the history.
fn section_ops<'a>(
    h: &'a Ops,
    sec: &'a Section,
) -> impl Iterator<Item = Operation<MutexOp, ()>> + 'a {
    let regrants = sec.regrants.iter().map(|g| Operation {
        process: sec.process,
        input: MutexOp::Regrant {
            lock: sec.lock,
            process: sec.process,
            token: g.token,
        },
        output: Some(()),
        call: g.invoke as u64,
        ret: g.ok as u64,
        indexes: indexes(h, [g.invoke, g.ok]),
    });
    let acquire = Operation {
        process: sec.process,
        input: MutexOp::Acquire {
            lock: sec.lock,
            process: sec.process,
            token: sec.token,
        },
        output: Some(()),
        call: sec.acquire_invoke as u64,
        ret: sec.begin as u64,
        indexes: indexes(h, [sec.acquire_invoke, sec.begin]),
    };
    let release = sec.end_window().map(|(from, to)| Operation {
        process: sec.process,
        input: MutexOp::Release {
            lock: sec.lock,
            process: sec.process,
        },
        output: to.map(|_| ()),
        call: from as u64,
        ret: to.map_or(u64::MAX, |t| t as u64),
        indexes: indexes(h, [from].into_iter().chain(to)),
    });
    std::iter::once(acquire).chain(regrants).chain(release)
}

/// Walks one lock's sections in order of their begin, keeping those still held (by
/// their cores). `next_section` returns the next section; then `overlapping` = how
/// many held sections it overlaps (all of other processes: a process's own sections
/// never overlap), `active` = the first `ACTIVE_LISTED` of them, and `ended` = the
/// sections whose core ended since the last step. O(n log n) over the lock.
pub struct Sweep<'a> {
    sections: &'a [Section],
    order: std::slice::Iter<'a, u32>,
    held: BinaryHeap<Reverse<(usize, usize)>>,
    pub ended: Vec<usize>,
    pub active: Vec<usize>,
    pub overlapping: usize,
}

/// At most this many overlapped sections are named per step (a holder that never
/// lets go overlaps every later section; they are counted, not all listed).
const ACTIVE_LISTED: usize = 64;

impl<'a> Sweep<'a> {
    pub fn new(s: &'a Sections, lock: u32) -> Self {
        Sweep {
            sections: &s.sections,
            order: s.by_lock[lock as usize].iter(),
            held: BinaryHeap::new(),
            ended: Vec::new(),
            active: Vec::new(),
            overlapping: 0,
        }
    }

    pub fn next_section(&mut self) -> Option<usize> {
        let i = *self.order.next()? as usize;
        let s = &self.sections[i];
        self.ended.clear();
        while let Some(&Reverse((end, j))) = self.held.peek() {
            if end >= s.begin {
                break;
            }
            self.held.pop();
            self.ended.push(j);
        }
        self.overlapping = self.held.len();
        self.active.clear();
        self.active.extend(
            self.held
                .iter()
                .map(|Reverse((_, j))| *j)
                .filter(|&j| self.sections[j].process != s.process)
                .take(ACTIVE_LISTED),
        );
        self.active.sort_unstable();
        self.held
            .push(Reverse((s.held_until().unwrap_or(usize::MAX), i)));
        Some(i)
    }
}

/// Reports every pair of sections of different processes whose cores overlap.
///
/// Each pair listed is also put to the engine, as a second opinion from independent
/// code: its two sections alone must have no legal order. A disagreement would be a
/// bug in one of them, and makes the verdict `unknown` rather than a guess.
pub fn double_holders(h: &Ops, s: &Sections, limits: &Limits, found: &mut Findings) {
    for lock in 0..s.locks.len() as u32 {
        let mut sweep = Sweep::new(s, lock);
        while let Some(i) = sweep.next_section() {
            for &j in &sweep.active {
                let listed = found.report(AnomalyKind::DoubleHolder, || overlap(h, s, j, i));
                if listed {
                    second_opinion(h, s, j, i, limits, found);
                }
            }
            found.count(
                AnomalyKind::DoubleHolder,
                sweep.overlapping - sweep.active.len(),
            );
        }
    }
}

fn second_opinion(
    h: &Ops,
    s: &Sections,
    first: usize,
    second: usize,
    limits: &Limits,
    found: &mut Findings,
) {
    let ops: Vec<_> = [first, second]
        .into_iter()
        .flat_map(|x| section_ops(h, &s.sections[x]))
        .collect();
    let pair = format!(
        "the sections of process {} (acquired {}) and process {} (acquired {})",
        s.sections[first].process,
        at(h, s.sections[first].begin),
        s.sections[second].process,
        at(h, s.sections[second].begin)
    );
    match check_operations(&OwnerMutex::default(), &ops, limits) {
        Outcome::Illegal { .. } => {}
        Outcome::Linearizable { .. } => found.dispute(format!(
            "the sweep found {pair} overlapping, but the search found a legal order for them: \
             a checker bug — please report it with this history"
        )),
        Outcome::Unknown { reason } => found.dispute(format!(
            "the search could not confirm the overlap of {pair}: {reason}"
        )),
    }
}

/// `first` held the lock when `second` acquired it.
fn overlap(h: &Ops, s: &Sections, first_id: usize, second_id: usize) -> Anomaly {
    let (first, second) = (&s.sections[first_id], &s.sections[second_id]);
    // Both held until the first of them released; where neither did, the evidence
    // ends at the last op of the history.
    let last = h.ops.len() - 1;
    let until = [first.held_until(), second.held_until()]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(last);
    // The first holder's writes while the second held: its acts as holder.
    let from = s.writes.partition_point(|w| w.invoke <= second.begin);
    let acts: Vec<usize> = (from..s.writes.len())
        .take_while(|&w| s.writes[w].invoke <= until)
        .filter(|&w| s.writes[w].section == Some(first_id as u32))
        .take(3)
        .collect();
    let (since, till) = secs_apart(h.ops[second.begin].time, h.ops[until].time);
    let both = match (since == till, until == last) {
        // One clock reading: the history still orders them, one line after the other.
        (true, _) => format!("both held it at {since}"),
        (false, false) => format!("both held it from {since} to {till}"),
        // Neither released: a holder never heard from again still holds.
        (false, true) => format!("both held it from {since} to the end of the history"),
    };
    let mut explanation = format!(
        "process {p} acquired {lock} {a}{ta} and had not released; process {q} acquired it {b}{tb} — \
         {both}.",
        p = first.process,
        q = second.process,
        lock = lock_name(s, first.lock),
        a = at(h, first.begin),
        ta = with_token(first.token),
        b = at(h, second.begin),
        tb = with_token(second.token),
    );
    for &w in &acts {
        explanation += &format!(" Meanwhile process {} {}.", first.process, wrote(h, s, w));
    }
    explanation += &format!(
        " Then process {} {}.",
        first.process,
        how_it_ended(h, first)
    );
    explanation += &faults_between(h, h.ops[first.begin].index, h.ops[until].index);
    Anomaly {
        kind: AnomalyKind::DoubleHolder,
        indexes: indexes(
            h,
            [first.begin, second.begin, first.last_seen()]
                .into_iter()
                .chain(acts.iter().map(|&w| s.writes[w].invoke))
                .chain(match first.end {
                    End::Landed { write, .. } => Some(write),
                    _ => None,
                }),
        ),
        processes: vec![first.process, second.process],
        tokens: first.token.into_iter().chain(second.token).collect(),
        time: Some(h.ops[second.begin].time),
        explanation,
        allowed: false,
    }
}

/// ` Faults meanwhile: pause of client-0 at 1.003 s, resume of client-0 at 11.000 s.`
/// (the first few injected between two history indexes), or nothing.
fn faults_between(h: &Ops, from: u64, to: u64) -> String {
    let first = h.faults.partition_point(|f| f.index < from);
    let listed: Vec<String> = h.faults[first..]
        .iter()
        .take_while(|f| f.index <= to)
        .take(4)
        .map(|f| format!("{} at {}", f.what, secs(f.time)))
        .collect();
    match listed.is_empty() {
        true => String::new(),
        false => format!(" Faults meanwhile: {}.", listed.join(", ")),
    }
}

/// `wrote at 11.001 s with token 1 (rejected: "stale-token")`.
fn wrote(h: &Ops, s: &Sections, w: usize) -> String {
    let invoke = s.writes[w].invoke;
    let outcome = match s.writes[w].completion.map(|c| &h.ops[c]) {
        Some(c) if c.kind == OpType::Ok => match c.seq {
            Some(seq) => format!(" (applied as seq {seq})"),
            None => " (acknowledged)".into(),
        },
        Some(c) if c.kind == OpType::Fail => match c.error {
            Some(e) => format!(" (rejected: \"{}\")", h.name(e)),
            None => " (rejected)".into(),
        },
        _ => " (unanswered)".into(),
    };
    format!(
        "wrote {}{}{outcome}",
        at(h, invoke),
        with_token(h.ops[invoke].token)
    )
}
