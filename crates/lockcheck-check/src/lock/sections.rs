//! Critical sections, read off the history one process at a time.
//!
//! A critical section of process p runs from its `acquire` ok to the invoke of its
//! next `release`, or to the end of the history if it never releases (history.md
//! v1.1): a holder that stops acting, or is retired after an `info`, still holds — a
//! process we stopped hearing from is exactly the one that may still be acting.
//! Everything the lock checks rest on this: who believed they held which lock, from
//! when to when.
//!
//! How each op shapes a section (the semantics the fast sweep, the full search and
//! the brute force in `tests/lock_props.rs` all share):
//! - `acquire` ok opens a section; `fail` did not happen; `info` may or may not have
//!   happened. Had it, its retired process would hold to the end of the history; had
//!   it not, it holds nothing — and a mutex order in which it did not happen is legal
//!   whenever one in which it did is, so it constrains nobody and is left out.
//! - only a `release` (ok, fail or info) ends a section, at its invoke: from then on
//!   the client no longer acts as holder. A failed release ("not held") means the
//!   service had already let go (a lease expired); the client still held it in its own
//!   mind until it asked, which is exactly what makes a paused holder a double holder.
//! - an `acquire` of the same lock invoked by its holder (a retry, a re-entrant call)
//!   does not end the section (spec v1.1): if it fails ("already held") the holder
//!   still holds; if it is ok the section goes on under the new grant, whose token
//!   replaces the old one for the fencing checks (a `Regrant`). A `renew` ok that
//!   carries a token is a regrant too; one that fails changes nothing (the client
//!   holds in its own mind until it releases).
//! - a `release` invoked with `"lease_lost": true` (a leader that resigns because it
//!   learned its lease was gone, docs/election.md) ends its section at its last act:
//!   the completion of its last write that was not refused (`fail`), or its grant if
//!   it wrote nothing. It stopped acting as holder there, whenever it noticed; so two
//!   such sections overlap only if both leaders acted at once.
//! - a process retired by an `info` completion (or an invoke never answered) while
//!   holding holds to the end of the history: the lease may have expired in the
//!   service, but nothing tells the retired client so. The last op at which it was
//!   *seen* holding is that op's invoke — or, where the resource's order shows its
//!   unanswered write applied after another process's write, that other write's
//!   invoke (`End::Landed`, set by `resource::landed_writes`): the explanations and the
//!   report's zombie windows use it.
//! - a process that simply stops without releasing holds to the end of the history
//!   too; it was last seen holding at the completion of its last op.
//! - a `release` ok from a process with no open section is a foreign release.
//!
//! Positions (into the client ops, in history order) serve as the timeline: lines
//! are in observation order, so position order refines time order and has no ties.

use super::ops::{LockOp, Ops, F};
use lockcheck_history::OpType;
use rustc_hash::FxHashMap;

/// A section's end, as far as the lock is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The client invoked a release at `invoke`, answered at `completion` (`None` when
    /// it was never answered or answered `info`: the release may land any time after).
    Released {
        invoke: usize,
        completion: Option<usize>,
        kind: OpType,
    },
    /// The process was retired by an `info` (or unanswered) op invoked at `at`.
    Retired { at: usize },
    /// Retired at `at`, but the resource applied its write invoked at `write` after
    /// another's write invoked at `after`: it acted as holder at least until `after`
    /// (found by `resource::landed_writes`).
    Landed {
        at: usize,
        write: usize,
        after: usize,
    },
    /// The history ends with the process holding; its last op completed at `last`.
    Stopped { last: usize },
    /// The holder resigned on learning its lease was gone (a release invoked at
    /// `noticed` with `lease_lost`); it last acted as holder at `last`.
    Lost {
        last: usize,
        noticed: usize,
        completion: Option<usize>,
        kind: OpType,
    },
}

/// A grant the holder got again while holding: a re-acquire ok, or a renew ok with a
/// token. It does not end the section; its token replaces the section's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regrant {
    pub invoke: usize,
    pub ok: usize,
    pub token: Option<u64>,
    /// A `renew` rather than an `acquire`.
    pub renew: bool,
}

#[derive(Debug, Clone)]
pub struct Section {
    pub lock: u32,
    pub process: u64,
    pub acquire_invoke: usize,
    /// Position of the acquire's ok: the section begins here.
    pub begin: usize,
    /// The token of the acquire that began it.
    pub token: Option<u64>,
    /// Grants while holding, in order.
    pub regrants: Vec<Regrant>,
    pub end: End,
}

impl Section {
    /// Where the section's core ends: the invoke of its release, or `None` when the
    /// holder never released and so holds to the end of the history.
    pub fn held_until(&self) -> Option<usize> {
        match self.end {
            End::Released { invoke, .. } => Some(invoke),
            // A leader that resigned on a lost lease held until its last act.
            End::Lost { last, .. } => Some(last),
            End::Retired { .. } | End::Landed { .. } | End::Stopped { .. } => None,
        }
    }

    /// The last position at which the client was seen holding the lock: the invoke
    /// of its release, or its last act as holder. A hold that never ended goes on
    /// past it (`held_until`); this is where the evidence of it stops.
    pub fn last_seen(&self) -> usize {
        match self.end {
            End::Released { invoke, .. } => invoke,
            End::Retired { at } => at,
            End::Landed { after, .. } => after,
            End::Stopped { last } | End::Lost { last, .. } => last,
        }
    }

    /// The window in which the hold ended: `(from, to)`, `to` = `None` when it may
    /// end at any later time; `None` when it never ended within the history.
    pub fn end_window(&self) -> Option<(usize, Option<usize>)> {
        match self.end {
            End::Released {
                invoke,
                completion,
                kind,
            } => Some((
                invoke,
                completion.filter(|_| matches!(kind, OpType::Ok | OpType::Fail)),
            )),
            End::Lost {
                last,
                completion,
                kind,
                ..
            } => Some((
                last,
                completion.filter(|_| matches!(kind, OpType::Ok | OpType::Fail)),
            )),
            End::Retired { .. } | End::Landed { .. } | End::Stopped { .. } => None,
        }
    }

    /// The section's grants, in order: `(position of the ok, token)`, the acquire's
    /// first.
    pub fn grants(&self) -> impl Iterator<Item = (usize, Option<u64>)> + '_ {
        std::iter::once((self.begin, self.token))
            .chain(self.regrants.iter().map(|g| (g.ok, g.token)))
    }

    /// The greatest token any grant of the section carried.
    pub fn max_token(&self) -> Option<u64> {
        self.grants().filter_map(|(_, t)| t).max()
    }
}

/// A `write` op, with the section it was invoked in (if any).
#[derive(Debug, Clone)]
pub struct WriteOp {
    pub invoke: usize,
    pub completion: Option<usize>,
    pub section: Option<u32>,
}

impl WriteOp {
    pub fn completed(&self, h: &Ops, kind: OpType) -> bool {
        self.completion.is_some_and(|c| h.ops[c].kind == kind)
    }
}

/// A `read` op: positions of its invoke and completion.
#[derive(Debug, Clone, Copy)]
pub struct ReadOp {
    pub invoke: usize,
    pub completion: Option<usize>,
}

/// Everything the lock checks need, read off the history in one pass.
#[derive(Debug, Default)]
pub struct Sections {
    /// Lock names; `Section::lock` indexes this. The default lock (an acquire with no
    /// `lock`) is named "".
    pub locks: Vec<String>,
    /// In order of `begin`.
    pub sections: Vec<Section>,
    /// For each lock, its sections (indexes into `sections`), in order of `begin`.
    pub by_lock: Vec<Vec<u32>>,
    /// Positions of `release` oks from processes with no open section.
    pub foreign_releases: Vec<usize>,
    pub writes: Vec<WriteOp>,
    pub reads: Vec<ReadOp>,
    /// Acquires that completed `info` or were never answered (for the notes).
    pub uncertain_acquires: usize,
}

#[derive(Default)]
struct ProcState {
    /// Invoke position of the op in flight.
    inflight: Option<usize>,
    /// The section a release in flight ends, or the write or read in flight (index
    /// into `writes` or `reads`).
    inflight_target: Option<usize>,
    /// Sections held, oldest first (several only when holding several locks).
    open: Vec<u32>,
    last: usize,
}

pub fn build(h: &Ops) -> Sections {
    let mut b = Builder::default();
    let mut procs: FxHashMap<u64, ProcState> = FxHashMap::default();
    for (pos, op) in h.ops.iter().enumerate() {
        let st = procs.entry(op.process).or_default();
        st.last = pos;
        if op.kind == OpType::Invoke {
            st.inflight = Some(pos);
            st.inflight_target = None;
            b.invoked(h, pos, st);
            continue;
        }
        let Some(invoke) = st.inflight.take() else {
            continue; // the reader rejects this; imported histories may not
        };
        b.completed(h, pos, invoke, st);
        if op.kind == OpType::Info {
            retire(&mut b.out, st, invoke);
        }
    }
    let mut out = b.out;
    // An invoke never answered counts as info: its process is retired there.
    for st in procs.values_mut() {
        if let Some(invoke) = st.inflight.take() {
            if h.ops[invoke].f == F::Acquire {
                out.uncertain_acquires += 1;
            }
            retire(&mut out, st, invoke);
        }
        for &s in &st.open {
            out.sections[s as usize].end = End::Stopped { last: st.last };
        }
    }
    out.by_lock = vec![Vec::new(); out.locks.len()];
    for (i, s) in out.sections.iter().enumerate() {
        out.by_lock[s.lock as usize].push(i as u32);
    }
    out
}

/// The sections as they are read off the ops, one op at a time.
#[derive(Default)]
struct Builder {
    out: Sections,
    /// Each section's last act as holder: the completion of a write not refused.
    last_act: Vec<Option<usize>>,
    lock_ids: FxHashMap<Option<u32>, u32>,
}

impl Builder {
    /// The invoke at `pos` of the process whose state is `st`: what it will act on.
    fn invoked(&mut self, h: &Ops, pos: usize, st: &mut ProcState) {
        let op = &h.ops[pos];
        match op.f {
            F::Acquire => {
                // A holder acquiring its lock again: the section goes on (a regrant
                // at the ok); anyone else's acquire opens a section at its ok.
                let lock = lock_id(h, &mut self.out.locks, &mut self.lock_ids, op.lock);
                st.inflight_target = st
                    .open
                    .iter()
                    .find(|&&s| self.out.sections[s as usize].lock == lock)
                    .map(|&s| s as usize);
            }
            F::Renew => {
                st.inflight_target =
                    target(&self.out, &self.lock_ids, &st.open, op).map(|k| st.open[k] as usize);
            }
            F::Release => {
                if let Some(k) = target(&self.out, &self.lock_ids, &st.open, op) {
                    let s = st.open.remove(k);
                    let sec = &mut self.out.sections[s as usize];
                    sec.end = match op.lease_lost {
                        true => End::Lost {
                            last: self.last_act[s as usize].unwrap_or(sec.begin),
                            noticed: pos,
                            completion: None,
                            kind: OpType::Info,
                        },
                        false => End::Released {
                            invoke: pos,
                            completion: None,
                            kind: OpType::Info,
                        },
                    };
                    st.inflight_target = Some(s as usize);
                }
            }
            F::Write => {
                st.inflight_target = Some(self.out.writes.len());
                self.out.writes.push(WriteOp {
                    invoke: pos,
                    completion: None,
                    section: st.open.last().copied(),
                });
            }
            F::Read => {
                st.inflight_target = Some(self.out.reads.len());
                self.out.reads.push(ReadOp {
                    invoke: pos,
                    completion: None,
                });
            }
            _ => {}
        }
    }

    /// The completion at `pos` of the op invoked at `invoke`.
    fn completed(&mut self, h: &Ops, pos: usize, invoke: usize, st: &mut ProcState) {
        let op = &h.ops[pos];
        let p = op.process;
        let target = st.inflight_target.take();
        match op.f {
            F::Acquire => match (op.kind, target) {
                (OpType::Ok, Some(s)) => self.out.sections[s].regrants.push(Regrant {
                    invoke,
                    ok: pos,
                    token: op.token,
                    renew: false,
                }),
                (OpType::Ok, None) => {
                    let lock = lock_id(
                        h,
                        &mut self.out.locks,
                        &mut self.lock_ids,
                        h.ops[invoke].lock,
                    );
                    st.open.push(self.out.sections.len() as u32);
                    self.last_act.push(None);
                    self.out.sections.push(Section {
                        lock,
                        process: p,
                        acquire_invoke: invoke,
                        begin: pos,
                        token: op.token,
                        regrants: Vec::new(),
                        end: End::Stopped { last: pos },
                    });
                }
                (OpType::Info, _) => self.out.uncertain_acquires += 1,
                _ => {}
            },
            F::Renew => {
                if let (OpType::Ok, Some(s), Some(t)) = (op.kind, target, op.token) {
                    self.out.sections[s].regrants.push(Regrant {
                        invoke,
                        ok: pos,
                        token: Some(t),
                        renew: true,
                    });
                }
            }
            F::Release => match target {
                Some(s) => match &mut self.out.sections[s].end {
                    End::Lost {
                        completion, kind, ..
                    } => {
                        *completion = Some(pos);
                        *kind = op.kind;
                    }
                    end => {
                        *end = End::Released {
                            invoke,
                            completion: Some(pos),
                            kind: op.kind,
                        }
                    }
                },
                None if op.kind == OpType::Ok => self.out.foreign_releases.push(pos),
                None => {}
            },
            F::Write => {
                if let Some(w) = target {
                    self.out.writes[w].completion = Some(pos);
                    if let (Some(sec), false) =
                        (self.out.writes[w].section, op.kind == OpType::Fail)
                    {
                        self.last_act[sec as usize] = Some(pos);
                    }
                }
            }
            F::Read => {
                if let Some(r) = target {
                    self.out.reads[r].completion = Some(pos);
                }
            }
            _ => {}
        }
    }
}

fn retire(out: &mut Sections, st: &mut ProcState, at: usize) {
    for s in st.open.drain(..) {
        out.sections[s as usize].end = End::Retired { at };
    }
}

/// The dense id of a lock (`None`: the default lock, named "").
fn lock_id(
    h: &Ops,
    locks: &mut Vec<String>,
    ids: &mut FxHashMap<Option<u32>, u32>,
    name: Option<u32>,
) -> u32 {
    *ids.entry(name).or_insert_with(|| {
        locks.push(name.map_or("", |n| h.name(n)).to_string());
        locks.len() as u32 - 1
    })
}

/// Which open section a release ends (or a renew extends): the lock it names, else
/// the section whose token it carries, else the most recent one.
fn target(
    out: &Sections,
    ids: &FxHashMap<Option<u32>, u32>,
    open: &[u32],
    release: &LockOp,
) -> Option<usize> {
    if release.lock.is_some() {
        let id = ids.get(&release.lock)?;
        return open
            .iter()
            .position(|&s| out.sections[s as usize].lock == *id);
    }
    if let Some(t) = release.token {
        if let Some(k) = open
            .iter()
            .position(|&s| out.sections[s as usize].grants().any(|(_, g)| g == Some(t)))
        {
            return Some(k);
        }
    }
    open.len().checked_sub(1)
}
