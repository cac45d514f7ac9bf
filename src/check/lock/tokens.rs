//! Fencing tokens, judged in the order the sections really had: a section that began
//! after another ended (core after core — the only legal order when the mutex holds,
//! see `mutex`) must get a greater token, whatever order the acquires were invoked in.
//! Two sections of different processes must never share a token; the same process
//! getting its own token again (a re-grant of its lease) is fine.

use super::explain::{at, indexes, lock_name, with_token};
use super::mutex::Sweep;
use super::ops::Ops;
use super::sections::Sections;
use super::Findings;
use crate::check::{Anomaly, AnomalyKind};
use rustc_hash::FxHashMap;

/// `fenced`: every acquire must hand out a token (the `fenced-mutex` model).
pub fn check(h: &Ops, s: &Sections, fenced: bool, found: &mut Findings) {
    for lock in 0..s.locks.len() as u32 {
        let mut first_with: FxHashMap<u64, usize> = FxHashMap::default();
        // The greatest token among sections that have ended, and whose it was.
        let mut max_ended: Option<(u64, usize)> = None;
        let mut sweep = Sweep::new(s, lock);
        while let Some(i) = sweep.next_section() {
            for &j in &sweep.ended {
                if let Some(t) = s.sections[j].token {
                    if max_ended.is_none_or(|(m, _)| t > m) {
                        max_ended = Some((t, j));
                    }
                }
            }
            let sec = &s.sections[i];
            let Some(t) = sec.token else {
                if fenced {
                    found.report(AnomalyKind::TokenNotMonotonic, || missing(h, s, i));
                }
                continue;
            };
            match first_with.get(&t) {
                Some(&j) if s.sections[j].process != sec.process => {
                    found.report(AnomalyKind::DuplicateToken, || duplicate(h, s, j, i));
                }
                Some(_) => {}
                None => {
                    first_with.insert(t, i);
                }
            }
            if let Some((m, j)) = max_ended {
                if t < m {
                    found.report(AnomalyKind::TokenNotMonotonic, || not_greater(h, s, j, i));
                }
            }
        }
    }
}

fn not_greater(h: &Ops, s: &Sections, earlier: usize, later: usize) -> Anomaly {
    let (e, l) = (&s.sections[earlier], &s.sections[later]);
    Anomaly {
        kind: AnomalyKind::TokenNotMonotonic,
        indexes: indexes(h, [e.begin, e.core_end(), l.begin]),
        processes: vec![e.process, l.process],
        tokens: vec![e.token.unwrap_or(0), l.token.unwrap_or(0)],
        time: Some(h.ops[l.begin].time),
        explanation: format!(
            "process {} acquired {} {}{}, after process {}'s section{} (acquired {}) had ended {}: \
             a later holder must get a greater token, or the resource cannot fence the earlier one",
            l.process,
            lock_name(s, l.lock),
            at(h, l.begin),
            with_token(l.token),
            e.process,
            with_token(e.token),
            at(h, e.begin),
            at(h, e.core_end()),
        ),
        allowed: false,
    }
}

fn duplicate(h: &Ops, s: &Sections, first: usize, second: usize) -> Anomaly {
    let (a, b) = (&s.sections[first], &s.sections[second]);
    let t = a.token.unwrap_or(0);
    Anomaly {
        kind: AnomalyKind::DuplicateToken,
        indexes: indexes(h, [a.begin, b.begin]),
        processes: vec![a.process, b.process],
        tokens: vec![t],
        time: Some(h.ops[b.begin].time),
        explanation: format!(
            "process {} (acquired {} {}) and process {} (acquired {}) both got token {t}: \
             the resource cannot tell their writes apart",
            a.process,
            lock_name(s, a.lock),
            at(h, a.begin),
            b.process,
            at(h, b.begin),
        ),
        allowed: false,
    }
}

fn missing(h: &Ops, s: &Sections, i: usize) -> Anomaly {
    let sec = &s.sections[i];
    Anomaly {
        kind: AnomalyKind::TokenNotMonotonic,
        indexes: indexes(h, [sec.begin]),
        processes: vec![sec.process],
        tokens: vec![],
        time: Some(h.ops[sec.begin].time),
        explanation: format!(
            "process {} acquired {} {} without a token: a fenced mutex must hand one out \
             with every grant, or the resource has nothing to fence with",
            sec.process,
            lock_name(s, sec.lock),
            at(h, sec.begin),
        ),
        allowed: false,
    }
}
