//! Fencing tokens, judged in the order the sections really had: a section that began
//! after another ended (core after core — the only legal order when the mutex holds,
//! see `mutex`) must get a greater token, whatever order the acquires were invoked in.
//! Two sections of different processes must never share a token; the same process
//! getting its own token again (a re-grant of its lease) is fine.

use super::explain::{at, indexes, lock_name, with_token};
use super::findings::Findings;
use super::mutex::Sweep;
use super::ops::Ops;
use super::sections::Sections;
use crate::{secs, Anomaly, AnomalyKind};
use rustc_hash::{FxHashMap, FxHashSet};

/// `fenced`: every acquire must hand out a token (the `fenced-mutex` model).
///
/// A section's grants are its acquire and its regrants (a holder acquiring again, or
/// renewing with a token): each must carry a token not lower than any handed out
/// before it — by the sections that ended before this one began, and by its own
/// earlier grants (a lowered token would let the resource fence the holder itself, and
/// let a later holder's smaller token through).
pub fn check(h: &Ops, s: &Sections, fenced: bool, found: &mut Findings) {
    for lock in 0..s.locks.len() as u32 {
        let mut first_with: FxHashMap<u64, usize> = FxHashMap::default();
        // The greatest token among sections that have ended, and whose it was.
        let mut max_ended: Option<(u64, usize)> = None;
        let mut sweep = Sweep::new(s, lock);
        while let Some(i) = sweep.next_section() {
            for &j in &sweep.ended {
                if let Some(t) = s.sections[j].max_token() {
                    if max_ended.is_none_or(|(m, _)| t > m) {
                        max_ended = Some((t, j));
                    }
                }
            }
            let sec = &s.sections[i];
            // The section's own greatest token so far, and the grant that carried it.
            let mut own_max: Option<(u64, usize)> = None;
            let mut lowered = false;
            // The tokens it was granted so far (kept only where it has regrants: one
            // set per section, never one cleared for every section, which would cost
            // the largest section's size each time).
            let mut own: FxHashSet<u64> = FxHashSet::default();
            for (g, (pos, token)) in sec.grants().enumerate() {
                let Some(t) = token else {
                    let renew = g > 0 && sec.regrants[g - 1].renew;
                    if fenced && !renew {
                        found.report(AnomalyKind::TokenNotMonotonic, || missing(h, s, i, pos));
                    }
                    continue;
                };
                // A token the holder had already been given is no new duplicate.
                let again = !sec.regrants.is_empty() && !own.insert(t);
                match first_with.get(&t) {
                    Some(&j) if !again && s.sections[j].process != sec.process => {
                        found.report(AnomalyKind::DuplicateToken, || duplicate(h, s, j, i, pos));
                    }
                    Some(_) => {}
                    None => {
                        first_with.insert(t, i);
                    }
                }
                if !lowered {
                    if let Some((m, j)) = max_ended.filter(|&(m, _)| t < m) {
                        lowered = true;
                        found.report(AnomalyKind::TokenNotMonotonic, || {
                            not_greater(h, s, j, m, i, pos, t)
                        });
                    } else if let Some((m, at_pos)) = own_max.filter(|&(m, _)| t < m) {
                        lowered = true;
                        found.report(AnomalyKind::TokenNotMonotonic, || {
                            lowered_by_regrant(h, s, i, (at_pos, m), (pos, t))
                        });
                    }
                }
                if own_max.is_none_or(|(m, _)| t > m) {
                    own_max = Some((t, pos));
                }
            }
        }
    }
}

/// `process 1 acquired the lock at 2.000 s with token 3`, or, for a regrant,
/// `process 1, holding the lock since 2.000 s, was granted it again (renew) at 3.000 s
/// with token 3`.
fn granted(h: &Ops, s: &Sections, i: usize, pos: usize, token: Option<u64>) -> String {
    let sec = &s.sections[i];
    let lock = lock_name(s, sec.lock);
    match sec.regrants.iter().find(|g| g.ok == pos) {
        None => format!(
            "process {} acquired {lock} {}{}",
            sec.process,
            at(h, pos),
            with_token(token)
        ),
        Some(g) => format!(
            "process {}, holding {lock} since {}, was granted it again ({} invoked {}) {}{}",
            sec.process,
            secs(h.ops[sec.begin].time),
            if g.renew { "a renew" } else { "an acquire" },
            at(h, g.invoke),
            at(h, pos),
            with_token(token)
        ),
    }
}

fn not_greater(
    h: &Ops,
    s: &Sections,
    earlier: usize,
    max: u64,
    later: usize,
    pos: usize,
    t: u64,
) -> Anomaly {
    let (e, l) = (&s.sections[earlier], &s.sections[later]);
    Anomaly {
        kind: AnomalyKind::TokenNotMonotonic,
        indexes: indexes(h, [e.begin, e.last_seen(), pos]),
        processes: vec![e.process, l.process],
        tokens: vec![max, t],
        time: Some(h.ops[pos].time),
        explanation: format!(
            "{}, after process {}'s section{} (acquired {}) had ended {}: \
             a later holder must get a greater token, or the resource cannot fence the earlier one",
            granted(h, s, later, pos, Some(t)),
            e.process,
            with_token(Some(max)),
            at(h, e.begin),
            at(h, e.last_seen()),
        ),
        allowed: false,
    }
}

/// A regrant lowered the holder's own token.
fn lowered_by_regrant(
    h: &Ops,
    s: &Sections,
    i: usize,
    (before, m): (usize, u64),
    (pos, t): (usize, u64),
) -> Anomaly {
    let sec = &s.sections[i];
    Anomaly {
        kind: AnomalyKind::TokenNotMonotonic,
        indexes: indexes(h, [sec.begin, before, pos]),
        processes: vec![sec.process],
        tokens: vec![m, t],
        time: Some(h.ops[pos].time),
        explanation: format!(
            "{}, lower than token {m} it had been granted {}: a new grant must not lower the \
             token, or the resource fences the holder itself and lets a later holder's smaller \
             token through",
            granted(h, s, i, pos, Some(t)),
            at(h, before),
        ),
        allowed: false,
    }
}

fn duplicate(h: &Ops, s: &Sections, first: usize, second: usize, pos: usize) -> Anomaly {
    let (a, b) = (&s.sections[first], &s.sections[second]);
    let t = h.ops[pos].token.unwrap_or(0);
    // Where the first section got it (its acquire, or a regrant).
    let first_pos = a
        .grants()
        .find(|&(_, u)| u == Some(t))
        .map_or(a.begin, |(p, _)| p);
    let got = |pos: usize, sec: &super::sections::Section| match pos == sec.begin {
        true => format!("acquired {}", at(h, pos)),
        false => format!("granted again {}", at(h, pos)),
    };
    Anomaly {
        kind: AnomalyKind::DuplicateToken,
        indexes: indexes(h, [first_pos, pos]),
        processes: vec![a.process, b.process],
        tokens: vec![t],
        time: Some(h.ops[pos].time),
        explanation: format!(
            "process {} ({} {}) and process {} ({}) both got token {t}: \
             the resource cannot tell their writes apart",
            a.process,
            got(first_pos, a),
            lock_name(s, a.lock),
            b.process,
            got(pos, b),
        ),
        allowed: false,
    }
}

fn missing(h: &Ops, s: &Sections, i: usize, pos: usize) -> Anomaly {
    let sec = &s.sections[i];
    Anomaly {
        kind: AnomalyKind::TokenNotMonotonic,
        indexes: indexes(h, [pos]),
        processes: vec![sec.process],
        tokens: vec![],
        time: Some(h.ops[pos].time),
        explanation: format!(
            "{}: a fenced mutex must hand one out with every grant, or the resource has \
             nothing to fence with",
            granted(h, s, i, pos, None),
        ),
        allowed: false,
    }
}
