//! The protected resource's side: what it applied, in its own order (`seq`).
//!
//! The applied writes come from `resource.jsonl` when there is one (it also knows
//! which `info` writes landed), else from the `seq` in write oks. Each applied write
//! is matched to the history's write by process and data, which ties it to the
//! critical section it was invoked in.
//!
//! A counter history (for `lost-update`): a `write` whose data is `"incr"` adds one
//! to a counter the resource keeps; a `read` whose ok value is an integer reads that
//! counter. A read that returns less than the number of increments acknowledged
//! before it was invoked lost updates (two holders read-modify-wrote it at once), and
//! so does one that returns less than an earlier read did (one that completed before
//! it was invoked): a counter only grows, so what a read saw cannot be undone.

use super::explain::{at, indexes};
use super::findings::Findings;
use super::ops::{data_hash, Ops};
use super::sections::{End, Sections};
use crate::{secs, secs_apart, Anomaly, AnomalyKind};
use lockcheck_history::{AppliedWrite, OpType};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// The data of a counter increment.
pub const INCR: &str = "incr";

pub struct Applied {
    seq: u64,
    process: u64,
    token: Option<u64>,
    /// Index into `Sections::writes`, when matched.
    write: Option<usize>,
    section: Option<usize>,
}

pub fn check(h: &Ops, s: &Sections, applied: &[Applied], found: &mut Findings) {
    stale_writes(h, s, applied, found);
    interleaved(h, s, applied, found);
    lost_updates(h, s, found);
}

/// A retired holder's write (answered `info`, or never) that the resource applied
/// after another process's write shows the holder still acting as holder after that
/// write was invoked: the lock changed hands under it (a late packet, a paused
/// process). Its section is extended to that invoke, so that mutual exclusion sees
/// the overlap: with no tokens to compare, nothing else would.
pub fn landed_writes(h: &Ops, s: &mut Sections, applied: &[Applied]) {
    // The latest invoke among the writes applied so far.
    let mut latest: Option<usize> = None;
    for a in applied {
        let Some(w) = a.write else { continue };
        let (invoke, answered) = (s.writes[w].invoke, s.writes[w].completion);
        if let (Some(sec), Some(after)) = (s.writes[w].section, latest) {
            let sec = &mut s.sections[sec as usize];
            let unknown = answered.is_none_or(|c| h.ops[c].kind == OpType::Info);
            if let (true, End::Retired { at } | End::Landed { at, .. }) = (unknown, sec.end) {
                if after > sec.last_seen() {
                    sec.end = End::Landed {
                        at,
                        write: invoke,
                        after,
                    };
                }
            }
        }
        latest = latest.max(Some(invoke));
    }
}

/// The writes the resource applied, in its order (`seq`).
pub fn applied(h: &Ops, s: &Sections, log: Option<&[AppliedWrite]>) -> Vec<Applied> {
    let data = |w: usize| h.ops[s.writes[w].invoke].data;
    let client = |w: usize| h.ops[s.writes[w].invoke].process;
    let section_of = |w: Option<usize>| w.and_then(|w| s.writes[w].section.map(|x| x as usize));
    let mut out: Vec<Applied> = match log {
        Some(log) => {
            let mut by_key: FxHashMap<(u64, Option<u64>), VecDeque<usize>> = FxHashMap::default();
            for w in 0..s.writes.len() {
                by_key.entry((client(w), data(w))).or_default().push_back(w);
            }
            // Unmatched entries still count for the resource's own order; their
            // section is found by (process, token) where the data did not match.
            let mut by_token: FxHashMap<(u64, u64), usize> = FxHashMap::default();
            for (i, sec) in s.sections.iter().enumerate() {
                for t in sec.grants().filter_map(|(_, t)| t) {
                    by_token.entry((sec.process, t)).or_insert(i);
                }
            }
            log.iter()
                .map(|a| {
                    let write = by_key
                        .get_mut(&(a.process, Some(data_hash(&a.data))))
                        .and_then(|q| q.pop_front());
                    let section = section_of(write)
                        .or_else(|| a.token.and_then(|t| by_token.get(&(a.process, t)).copied()));
                    Applied {
                        seq: a.seq,
                        process: a.process,
                        token: a.token,
                        write,
                        section,
                    }
                })
                .collect()
        }
        None => (0..s.writes.len())
            .filter(|&w| s.writes[w].completed(h, OpType::Ok))
            .filter_map(|w| {
                let ok = &h.ops[s.writes[w].completion?];
                Some(Applied {
                    seq: ok.seq?,
                    process: client(w),
                    token: ok.token.or(h.ops[s.writes[w].invoke].token),
                    write: Some(w),
                    section: section_of(Some(w)),
                })
            })
            .collect(),
    };
    out.sort_by_key(|a| a.seq);
    out
}

/// History positions of an applied write (invoke and completion), where matched.
fn positions(s: &Sections, a: &Applied) -> Vec<usize> {
    a.write
        .map(|w| {
            [Some(s.writes[w].invoke), s.writes[w].completion]
                .into_iter()
                .flatten()
                .collect()
        })
        .unwrap_or_default()
}

fn describe(h: &Ops, s: &Sections, a: &Applied) -> String {
    let token = a.token.map_or("no token".into(), |t| format!("token {t}"));
    let when = a
        .write
        .map(|w| format!(", invoked {}", at(h, s.writes[w].invoke)))
        .unwrap_or_default();
    format!(
        "process {}'s write (seq {}, {token}{when})",
        a.process, a.seq
    )
}

fn stale_writes(h: &Ops, s: &Sections, applied: &[Applied], found: &mut Findings) {
    let mut max: Option<usize> = None;
    for (i, a) in applied.iter().enumerate() {
        let Some(t) = a.token else { continue };
        match max.map(|m| (m, applied[m].token.unwrap_or(0))) {
            Some((m, mt)) if t < mt => {
                found.report(AnomalyKind::StaleWriteAccepted, || {
                    let (earlier, stale) = (&applied[m], a);
                    Anomaly {
                        kind: AnomalyKind::StaleWriteAccepted,
                        indexes: indexes(
                            h,
                            positions(s, earlier).into_iter().chain(positions(s, stale)),
                        ),
                        processes: vec![earlier.process, stale.process],
                        tokens: vec![mt, t],
                        // It was applied after both were seen: the latest op involved.
                        time: positions(s, earlier)
                            .into_iter()
                            .chain(positions(s, stale))
                            .map(|p| h.ops[p].time)
                            .max(),
                        explanation: format!(
                            "the resource applied {} after it had applied {}: a fenced resource \
                         rejects a token lower than one it has seen",
                            describe(h, s, stale),
                            describe(h, s, earlier)
                        ),
                        allowed: false,
                    }
                });
            }
            Some((_, mt)) if t <= mt => {}
            _ => max = Some(i),
        }
    }
}

fn interleaved(h: &Ops, s: &Sections, applied: &[Applied], found: &mut Findings) {
    // The last applied write of each section seen so far, and the last applied write
    // whose section is known.
    let mut last_of: FxHashMap<usize, usize> = FxHashMap::default();
    let mut prev: Option<usize> = None;
    for (i, a) in applied.iter().enumerate() {
        let Some(sec) = a.section else { continue };
        if let (Some(&earlier), Some(b)) = (last_of.get(&sec), prev) {
            if applied[b].section != Some(sec) {
                // The section resumes after another section's write `b`.
                let b = &applied[b];
                found.report(AnomalyKind::InterleavedWrites, || Anomaly {
                    kind: AnomalyKind::InterleavedWrites,
                    indexes: indexes(
                        h,
                        positions(s, &applied[earlier])
                            .into_iter()
                            .chain(positions(s, b))
                            .chain(positions(s, a)),
                    ),
                    processes: vec![a.process, b.process],
                    tokens: a.token.into_iter().chain(b.token).collect(),
                    time: a.write.map(|w| h.ops[s.writes[w].invoke].time),
                    explanation: format!(
                        "in the resource's order, {} and {} of one critical section are split by {} \
                         of another: two holders wrote at once",
                        describe(h, s, &applied[earlier]),
                        describe(h, s, a),
                        describe(h, s, b)
                    ),
                    allowed: false,
                });
            }
        }
        last_of.insert(sec, i);
        prev = Some(i);
    }
}

fn lost_updates(h: &Ops, s: &Sections, found: &mut Findings) {
    let incr = data_hash(INCR);
    let is_incr = |pos: usize| h.ops[pos].data == Some(incr);
    let mut acked: Vec<usize> = s
        .writes
        .iter()
        .filter(|w| is_incr(w.invoke) && w.completed(h, OpType::Ok))
        .filter_map(|w| w.completion)
        .collect();
    acked.sort_unstable();
    // Counter reads that returned, by completion: `(completion, value, invoke)`, and
    // the greatest value read by each prefix of them (with the read that returned it).
    let mut done: Vec<(usize, u64, usize)> = s
        .reads
        .iter()
        .filter_map(|r| {
            let c = r.completion.filter(|&c| h.ops[c].kind == OpType::Ok)?;
            Some((c, h.ops[c].number?, r.invoke))
        })
        .collect();
    done.sort_unstable();
    let mut best: Vec<usize> = Vec::with_capacity(done.len());
    for k in 0..done.len() {
        let prev = k.checked_sub(1).map(|p| best[p]);
        best.push(match prev {
            Some(b) if done[b].1 >= done[k].1 => b,
            _ => k,
        });
    }
    for &(c, value, invoke) in done.iter() {
        let before = acked.partition_point(|&p| p < invoke);
        if (value as usize) < before {
            found.report(AnomalyKind::LostUpdate, || {
                let last = acked[before - 1];
                Anomaly {
                    kind: AnomalyKind::LostUpdate,
                    indexes: indexes(h, [last, invoke, c]),
                    processes: vec![h.ops[c].process],
                    tokens: vec![],
                    time: Some(h.ops[c].time),
                    explanation: format!(
                        "process {} read the counter as {value} {}, but {before} increments had been \
                         acknowledged before it asked (the last at {} by process {}): {} update(s) lost",
                        h.ops[c].process,
                        at(h, c),
                        secs(h.ops[last].time),
                        h.ops[last].process,
                        before - value as usize
                    ),
                    allowed: false,
                }
            });
            continue;
        }
        // The greatest value among reads that completed before this one was invoked.
        let Some(k) = done.partition_point(|d| d.0 < invoke).checked_sub(1) else {
            continue;
        };
        let (ec, evalue, einvoke) = done[best[k]];
        if value < evalue {
            found.report(AnomalyKind::LostUpdate, || {
                let (p, q) = (h.ops[ec].process, h.ops[c].process);
                let (done_at, asked_at) = secs_apart(h.ops[ec].time, h.ops[invoke].time);
                Anomaly {
                    kind: AnomalyKind::LostUpdate,
                    indexes: indexes(h, [einvoke, ec, invoke, c]),
                    processes: if p == q {
                        vec![p]
                    } else {
                        vec![p.min(q), p.max(q)]
                    },
                    tokens: vec![],
                    time: Some(h.ops[c].time),
                    explanation: format!(
                        "process {q} read the counter as {value} {}, but process {p}'s read had \
                         returned {evalue} at {done_at}, before process {q} asked at {asked_at}: \
                         the counter went backwards, {} update(s) lost",
                        at(h, c),
                        evalue - value
                    ),
                    allowed: false,
                }
            });
        }
    }
}
