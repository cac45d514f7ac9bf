//! The shapes of a partition, as a pure function of the parties' names: which
//! directed links an isolation, two halves, a majorities ring, a bridge or an
//! explicit list cuts. Shared by the client-link proxy (`fault::proxy`) and the
//! node-to-node partitions in network namespaces (`fault::netns`).

use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;

/// How a partition cuts a link: `cut = "blackhole"` (the default) or `"reset"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cut {
    #[default]
    Blackhole,
    Reset,
}

/// The shapes of a partition, over the names of the parties (nodes, and
/// clients where their links are proxied too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// One party alone, cut from all the others.
    Isolate(String),
    /// The first half (rounded down) against the rest. Shuffle the names with
    /// the run's seed first to vary who ends up where.
    Halves,
    /// Jepsen's majorities ring: each node sees a majority (its neighbours on a
    /// ring), and no two see the same one. Needs at least 4 parties.
    MajoritiesRing,
    /// Two halves joined by one node (the middle one) that sees both sides.
    Bridge,
    /// These pairs, cut both ways.
    Links(Vec<(String, String)>),
}

/// The directed pairs (a, b) that a partition of `parties` into `shape` cuts;
/// always symmetric.
pub fn cuts(shape: &Shape, parties: &[String]) -> Result<BTreeSet<(String, String)>> {
    let n = parties.len();
    let index = |name: &str| {
        parties
            .iter()
            .position(|p| p == name)
            .with_context(|| format!("{name} is not one of {}", parties.join(", ")))
    };
    // Whether parties i and j still see each other.
    let sees: Box<dyn Fn(usize, usize) -> bool> = match shape {
        Shape::Isolate(name) => {
            let x = index(name)?;
            Box::new(move |i, j| (i == x) == (j == x))
        }
        Shape::Halves => {
            let half = n / 2;
            Box::new(move |i, j| (i < half) == (j < half))
        }
        Shape::Bridge => {
            if n < 3 {
                bail!("a bridge needs at least 3 nodes, not {n}");
            }
            let mid = n / 2;
            Box::new(move |i, j| i == mid || j == mid || (i < mid) == (j < mid))
        }
        Shape::MajoritiesRing => {
            if n < 4 {
                bail!("a majorities ring needs at least 4 nodes, not {n}");
            }
            let majority = n / 2 + 1;
            // Each node sees itself and `reach` neighbours on each side.
            let reach = majority / 2;
            Box::new(move |i, j| {
                let d = i.abs_diff(j);
                d.min(n - d) <= reach
            })
        }
        Shape::Links(pairs) => {
            let mut cut = BTreeSet::new();
            for (a, b) in pairs {
                let (i, j) = (index(a)?, index(b)?);
                cut.insert((i.min(j), i.max(j)));
            }
            Box::new(move |i, j| !cut.contains(&(i.min(j), i.max(j))))
        }
    };
    let mut out = BTreeSet::new();
    for i in 0..n {
        for j in 0..n {
            if i != j && !sees(i, j) {
                out.insert((parties[i].clone(), parties[j].clone()));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("n{i}")).collect()
    }

    fn pairs(v: &[(&str, &str)]) -> BTreeSet<(String, String)> {
        v.iter()
            .flat_map(|(a, b)| {
                [
                    (a.to_string(), b.to_string()),
                    (b.to_string(), a.to_string()),
                ]
            })
            .collect()
    }

    #[test]
    fn isolate_cuts_one_node_from_all_others() {
        let c = cuts(&Shape::Isolate("n2".into()), &names(3)).unwrap();
        assert_eq!(c, pairs(&[("n2", "n1"), ("n2", "n3")]));
        assert!(cuts(&Shape::Isolate("n9".into()), &names(3)).is_err());
    }

    #[test]
    fn halves_split_first_half_from_the_rest() {
        let c = cuts(&Shape::Halves, &names(5)).unwrap();
        assert_eq!(
            c,
            pairs(&[
                ("n1", "n3"),
                ("n1", "n4"),
                ("n1", "n5"),
                ("n2", "n3"),
                ("n2", "n4"),
                ("n2", "n5")
            ])
        );
    }

    #[test]
    fn bridge_keeps_the_middle_node_in_touch_with_both_sides() {
        let c = cuts(&Shape::Bridge, &names(5)).unwrap();
        assert_eq!(
            c,
            pairs(&[("n1", "n4"), ("n1", "n5"), ("n2", "n4"), ("n2", "n5")])
        );
    }

    #[test]
    fn majorities_ring_gives_each_node_a_different_majority() {
        let nodes = names(5);
        let c = cuts(&Shape::MajoritiesRing, &nodes).unwrap();
        let mut seen = BTreeSet::new();
        for a in &nodes {
            let view: BTreeSet<&String> = nodes
                .iter()
                .filter(|b| !c.contains(&(a.clone(), (*b).clone())))
                .collect();
            assert_eq!(view.len(), 3, "{a} sees a bare majority: {view:?}");
            assert!(seen.insert(view), "no two nodes see the same majority");
        }
        assert!(cuts(&Shape::MajoritiesRing, &names(3)).is_err());
    }

    #[test]
    fn explicit_links_are_cut_both_ways() {
        let shape = Shape::Links(vec![("n1".into(), "n3".into())]);
        assert_eq!(cuts(&shape, &names(3)).unwrap(), pairs(&[("n1", "n3")]));
    }
}
