//! Sentences for the evidence: who did what, when, with which token.

use super::ops::Ops;
use super::sections::{End, Section, Sections};
use crate::secs;
use lockcheck_history::OpType;

/// `at 1.011 s`.
pub fn at(h: &Ops, pos: usize) -> String {
    format!("at {}", secs(h.ops[pos].time))
}

/// ` with token 5` / ` without a token`.
pub fn with_token(token: Option<u64>) -> String {
    match token {
        Some(t) => format!(" with token {t}"),
        None => " without a token".into(),
    }
}

/// `the lock` or `lock "orders"`.
pub fn lock_name(s: &Sections, lock: u32) -> String {
    match s.locks[lock as usize].as_str() {
        "" => "the lock".into(),
        name => format!("lock \"{name}\""),
    }
}

/// How a section's hold ended, from the client's side: `invoked its release at 11.002 s,
/// which failed (not held)`.
pub fn how_it_ended(h: &Ops, s: &Section) -> String {
    match s.end {
        End::Released {
            invoke,
            completion,
            kind,
        } => {
            let outcome = match (kind, completion) {
                (OpType::Ok, Some(c)) => format!("acknowledged {}", at(h, c)),
                (OpType::Fail, Some(c)) => format!(
                    "which failed {}{} — the service no longer counted it as the holder",
                    at(h, c),
                    reason(h, c)
                ),
                _ => "never answered".into(),
            };
            format!("invoked its release {}, {outcome}", at(h, invoke))
        }
        End::Retired { at: p } => format!(
            "was retired after its {} invoked {} went unanswered (info), without releasing: \
             a retired holder may still be acting, so it holds to the end of the history",
            h.ops[p].f.name(),
            at(h, p)
        ),
        End::Landed {
            at: p,
            write,
            after,
        } => {
            let landed = match write == p {
                true => "that write".to_string(),
                false => format!("its write invoked {}", at(h, write)),
            };
            format!(
                "was retired after its {} invoked {} went unanswered (info), yet the resource \
                 applied {landed} after process {}'s write invoked {}",
                h.ops[p].f.name(),
                at(h, p),
                h.ops[after].process,
                at(h, after)
            )
        }
        End::Stopped { last } => format!(
            "never released (its last op as holder ended {}), so it holds to the end of the history",
            at(h, last)
        ),
        End::Lost { last, noticed, .. } => format!(
            "learned its lease was gone and resigned {}; it last acted as holder {}",
            at(h, noticed),
            at(h, last)
        ),
    }
}

fn reason(h: &Ops, pos: usize) -> String {
    match h.ops[pos].error {
        Some(e) => format!(" (\"{}\")", h.name(e)),
        None => String::new(),
    }
}

/// History `index`es of positions, sorted and without repeats.
pub fn indexes(h: &Ops, positions: impl IntoIterator<Item = usize>) -> Vec<u64> {
    let mut v: Vec<u64> = positions.into_iter().map(|p| h.ops[p].index).collect();
    v.sort_unstable();
    v.dedup();
    v
}
