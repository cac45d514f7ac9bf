//! Delta debugging (Zeller and Hildebrandt, "Simplifying and Isolating
//! Failure-Inducing Input", 2002): the smallest subset of a run's fault events that
//! still breaks the lock, found by trying halves, then complements, then finer
//! pieces. The result is 1-minimal: dropping any one event it keeps loses the
//! break. Pure over an oracle, so it is tested against a fake whose minimum is known.

use anyhow::Result;
use std::collections::HashMap;

/// The smallest subset of `items` (kept in their order) for which `breaks` still
/// says yes, given that it says yes for all of them. Each subset is asked at most
/// once: a trial is a handful of real runs, far dearer than the bookkeeping.
pub fn ddmin<T: Clone>(
    items: &[T],
    mut breaks: impl FnMut(&[T]) -> Result<bool>,
) -> Result<Vec<T>> {
    let mut asked: HashMap<Vec<usize>, bool> = HashMap::new();
    let mut ask = |keep: &[usize], breaks: &mut dyn FnMut(&[T]) -> Result<bool>| -> Result<bool> {
        if let Some(&known) = asked.get(keep) {
            return Ok(known);
        }
        let subset: Vec<T> = keep.iter().map(|&i| items[i].clone()).collect();
        let answer = breaks(&subset)?;
        asked.insert(keep.to_vec(), answer);
        Ok(answer)
    };
    let mut current: Vec<usize> = (0..items.len()).collect();
    // A break that needs no fault at all is the smallest there is.
    if !current.is_empty() && ask(&[], &mut breaks)? {
        return Ok(Vec::new());
    }
    let mut pieces = 2;
    while current.len() >= 2 {
        let chunks = split(&current, pieces);
        let mut reduced = false;
        // A piece alone that still breaks: keep just it, and start coarse again.
        for chunk in &chunks {
            if ask(chunk, &mut breaks)? {
                current = chunk.clone();
                pieces = 2;
                reduced = true;
                break;
            }
        }
        // Else a piece that the break does not need: drop it, at this granularity.
        if !reduced && pieces > 2 {
            for i in 0..chunks.len() {
                let rest: Vec<usize> = chunks
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != i)
                    .flat_map(|(_, c)| c.iter().copied())
                    .collect();
                if ask(&rest, &mut breaks)? {
                    current = rest;
                    pieces = (pieces - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if pieces >= current.len() {
                break;
            }
            pieces = (pieces * 2).min(current.len());
        }
    }
    Ok(current.into_iter().map(|i| items[i].clone()).collect())
}

/// `items` in `n` contiguous pieces, as even as they divide.
fn split(items: &[usize], n: usize) -> Vec<Vec<usize>> {
    let n = n.min(items.len()).max(1);
    let (size, extra) = (items.len() / n, items.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for i in 0..n {
        let len = size + usize::from(i < extra);
        out.push(items[at..at + len].to_vec());
        at += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A fake lock that breaks exactly when every event of `needed` is in the run.
    fn needs(needed: &[u32]) -> impl FnMut(&[u32]) -> Result<bool> + '_ {
        move |run: &[u32]| Ok(needed.iter().all(|n| run.contains(n)))
    }

    #[test]
    fn finds_the_one_event_that_breaks_it() {
        let events: Vec<u32> = (0..12).collect();
        assert_eq!(ddmin(&events, needs(&[7])).unwrap(), vec![7]);
    }

    #[test]
    fn finds_two_events_far_apart() {
        let events: Vec<u32> = (0..16).collect();
        assert_eq!(ddmin(&events, needs(&[1, 14])).unwrap(), vec![1, 14]);
    }

    #[test]
    fn a_break_without_faults_keeps_none() {
        let events: Vec<u32> = (0..5).collect();
        assert!(ddmin(&events, needs(&[])).unwrap().is_empty());
    }

    #[test]
    fn asks_each_subset_once_and_never_more_than_quadratic() {
        let events: Vec<u32> = (0..20).collect();
        let mut seen = std::collections::HashSet::new();
        let mut asked = 0;
        let kept = ddmin(&events, |run: &[u32]| {
            asked += 1;
            assert!(seen.insert(run.to_vec()), "asked twice: {run:?}");
            Ok(run.contains(&3) && run.contains(&11) && run.contains(&12))
        })
        .unwrap();
        assert_eq!(kept, vec![3, 11, 12]);
        assert!(asked <= 20 * 20, "{asked} trials");
    }

    #[test]
    fn an_oracle_error_stops_the_search() {
        let events: Vec<u32> = (0..4).collect();
        let e = ddmin(&events, |_: &[u32]| {
            Err(anyhow::anyhow!("the server would not start"))
        });
        assert!(format!("{:#}", e.unwrap_err()).contains("would not start"));
    }

    proptest! {
        /// Against a monotone fake (it breaks when a known set is present), ddmin
        /// finds exactly that set: the known minimum.
        #[test]
        fn finds_exactly_the_needed_set(n in 1usize..24, picks in proptest::collection::vec(0usize..24, 0..5)) {
            let events: Vec<u32> = (0..n as u32).collect();
            let mut needed: Vec<u32> = picks.into_iter().filter(|&p| p < n).map(|p| p as u32).collect();
            needed.sort();
            needed.dedup();
            prop_assert_eq!(ddmin(&events, needs(&needed)).unwrap(), needed);
        }

        /// Against any oracle at all, the result is 1-minimal: it breaks, and
        /// dropping any one of its events does not.
        #[test]
        fn the_result_is_one_minimal(n in 1usize..12, table in proptest::collection::vec(any::<bool>(), 4096)) {
            let events: Vec<u32> = (0..n as u32).collect();
            let all: u32 = (1u32 << n) - 1;
            let breaks = |run: &[u32]| {
                let mask: u32 = run.iter().map(|&e| 1u32 << e).sum();
                mask == all || table[(mask as usize) % table.len()]
            };
            let kept = ddmin(&events, |r: &[u32]| Ok(breaks(r))).unwrap();
            prop_assert!(breaks(&kept));
            for i in 0..kept.len() {
                let mut less = kept.clone();
                less.remove(i);
                prop_assert!(!breaks(&less), "dropping {} of {:?} still breaks", kept[i], kept);
            }
        }
    }
}
