//! A sharded audit: what a part's scorecard says of its share (`Shards`), and
//! the `--shard I/N` and `--bound P` arguments. Shard I of N runs run numbers
//! I, I+N, I+2N, … of every scenario, each with the seed an unsharded audit
//! gives that run, so that the parts added up (`merge`) are the runs one machine
//! would have made, under the same rules.
//!
//! Two phases, because a fenced twin is asked only where its recipe broke
//! unfenced, and across shards that is known only from every shard's "can it
//! break?" runs: the parts of the first phase (`breaks`) are merged, and if the
//! merge asks twins, each shard runs its share of them (`twins`, given the
//! merged scorecard with `--asked`); the last merge takes both phases' parts.

use super::plan::Share;
use super::provenance::present;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Which part of a sharded audit a scorecard is, or that it is their merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartPhase {
    /// The "can it break?" scenarios' runs of one shard.
    Breaks,
    /// The fenced twins' runs of one shard that the first phase's merge asked.
    Twins,
    /// The parts added up.
    Merged,
}

impl PartPhase {
    pub fn name(self) -> &'static str {
        match self {
            PartPhase::Breaks => "breaks",
            PartPhase::Twins => "twins",
            PartPhase::Merged => "merged",
        }
    }
}

/// audit.json's `shards`: null for an audit run whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shards {
    /// This part's shard, 1-based; null for a merge.
    #[serde(deserialize_with = "present")]
    pub shard: Option<u32>,
    pub of: u32,
    pub phase: PartPhase,
    /// The audit's first seed: run r of every scenario ran with seed + r − 1.
    pub seed: u64,
    /// `--scenarios`, if the audit was narrowed to these recipes.
    #[serde(deserialize_with = "present")]
    pub scenarios: Option<Vec<String>>,
    /// A twins part: [`first_phase_digest`] of the parts whose merge asked it.
    #[serde(deserialize_with = "present")]
    pub asked_from: Option<String>,
    /// A twins part: the twins it was asked to run (scenario names).
    pub twins_asked: Vec<String>,
    /// A merge: the parts it added up.
    pub parts: Vec<Part>,
    /// A merge: twins the first phase asked whose second-phase parts were not
    /// given. Not empty: run the second phase (`--asked` this scorecard).
    pub twins_pending: Vec<String>,
}

/// One part a merge added up: which, its file's digest, and when and where it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    pub shard: u32,
    pub phase: PartPhase,
    /// `sha256:` and the hex digest of the part's audit.json as read.
    pub digest: String,
    /// The part's directory name.
    pub dir: String,
    pub started_utc: Option<String>,
    pub elapsed_s: f64,
    pub runs: usize,
    /// The part's machine: cores, memory, load at start and end, OS.
    pub machine: super::provenance::Machine,
}

impl Shards {
    /// What a part of shard `share` says of itself.
    pub fn part(
        share: Share,
        phase: PartPhase,
        seed: u64,
        scenarios: Option<Vec<String>>,
    ) -> Shards {
        Shards {
            shard: Some(share.index),
            of: share.of,
            phase,
            seed,
            scenarios,
            asked_from: None,
            twins_asked: Vec::new(),
            parts: Vec::new(),
            twins_pending: Vec::new(),
        }
    }

    /// `part 2 of 4 (breaks)`, or `merge of 4 shards`.
    pub fn describe(&self) -> String {
        match self.shard {
            Some(i) => format!("part {i} of {} ({})", self.of, self.phase.name()),
            None => format!("merge of {} shards", self.of),
        }
    }
}

/// What a second-phase shard must share with the merge that asks it: the
/// backend, the plan's figures, the shard count and the seed.
#[derive(Debug, Clone)]
pub struct Flags {
    pub backend: String,
    pub runs: u32,
    pub provoked: u32,
    pub twin_runs: u32,
    pub bound: Option<f64>,
    pub of: u32,
    pub seed: u64,
}

/// `sha256:` and the digest of `bytes`: a part's identity.
pub fn digest(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// The identity of a set of first-phase parts: the digest of their digests,
/// sorted, so the order they were given in does not matter. A twins part
/// carries it, and the last merge refuses it beside other first-phase parts.
pub fn first_phase_digest(parts: &[Part]) -> String {
    let mut ds: Vec<&str> = parts
        .iter()
        .filter(|p| p.phase == PartPhase::Breaks)
        .map(|p| p.digest.as_str())
        .collect();
    ds.sort_unstable();
    digest(ds.join("\n").as_bytes())
}

/// `--shard I/N`: I in 1..=N.
pub fn parse_share(s: &str) -> Result<Share, String> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("expected I/N (shard I of N, 1-based), found {s:?}"))?;
    let number = |w: &str, what: &str| {
        w.trim()
            .parse::<u32>()
            .map_err(|_| format!("{what} {w:?} is not a whole number"))
    };
    let (index, of) = (number(i, "shard")?, number(n, "shard count")?);
    if of == 0 || index == 0 || index > of {
        return Err(format!(
            "shard {index} of {of}: expected 1 <= I <= N (shards are numbered from 1; a Kubernetes Job's JOB_COMPLETION_INDEX + 1)"
        ));
    }
    Ok(Share { index, of })
}

/// `--bound P`: `1%`, `0.5 %` or a fraction `0.01`, above 0 and below 1.
pub fn parse_bound(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (t, 1.0),
    };
    let p = number
        .parse::<f64>()
        .map_err(|_| format!("expected a failure rate such as 1% or 0.01, found {s:?}"))?
        / scale;
    if !(p > 0.0 && p < 1.0) {
        return Err(format!(
            "{s}: a bound is a failure rate above 0 and below 100 %"
        ));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::super::plan::runs_for_bound;
    use super::super::stats::upper_95;
    use super::*;

    /// The runs a bound asks are the fewest whose clean run bounds the rate at
    /// it: one fewer would not (the exact bound, against `upper_95`).
    #[test]
    fn a_bound_asks_the_fewest_clean_runs_that_reach_it() {
        assert_eq!(runs_for_bound(0.01), 299);
        assert_eq!(runs_for_bound(0.02), 149);
        assert_eq!(runs_for_bound(0.05), 59);
        for p in [0.001, 0.01, 0.02, 0.05, 0.1, 0.139, 0.25, 0.5] {
            let n = runs_for_bound(p) as usize;
            assert!(upper_95(0, n).unwrap() <= p, "{p}: {n}");
            assert!(upper_95(0, n - 1).unwrap() > p, "{p}: {n} - 1");
        }
    }

    #[test]
    fn a_bound_reads_as_a_percentage_or_a_fraction() {
        assert_eq!(parse_bound("1%"), Ok(0.01));
        assert_eq!(parse_bound("5 %"), Ok(0.05));
        assert_eq!(parse_bound("0.02"), Ok(0.02));
        for bad in ["0%", "100%", "1.5", "-1%", "one", ""] {
            assert!(parse_bound(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_shard_is_one_based_and_within_its_count() {
        assert_eq!(parse_share("1/4"), Ok(Share { index: 1, of: 4 }));
        assert_eq!(parse_share("4/4"), Ok(Share { index: 4, of: 4 }));
        for bad in ["0/4", "5/4", "1/0", "4", "a/4", "1/b", "-1/4"] {
            let e = parse_share(bad).unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
    }

    /// The shards' run numbers are disjoint and together every run number,
    /// whatever the count: the parts add up to the whole audit's runs.
    #[test]
    fn the_shards_split_every_count_of_runs_without_overlap() {
        for of in 1..=7u32 {
            for n in 0..=40u32 {
                let mut seen = vec![0u32; n as usize + 1];
                let mut total = 0;
                for index in 1..=of {
                    let share = Share { index, of };
                    let k = share.of_count(n);
                    total += k;
                    for local in 1..=k {
                        seen[share.run(local) as usize] += 1;
                        assert_eq!(share.local(share.run(local)), Some(local));
                    }
                    for run in 1..=n {
                        let mine = (1..=k).any(|l| share.run(l) == run);
                        assert_eq!(share.local(run).is_some(), mine, "{run} of {index}/{of}");
                    }
                }
                assert_eq!(total, n, "{n} runs over {of}");
                assert!(seen[1..].iter().all(|&c| c == 1), "{n} over {of}: {seen:?}");
            }
        }
    }
}
