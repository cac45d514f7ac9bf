//! What the faults on server nodes share: which nodes (a pure choice), and
//! stopping them (`pause_node`, `kill`, `clock`, `partition` use it).
//!
//! A SIGSTOPped server is a GC pause or a VM stall: the kernel still accepts
//! connections for it, but nothing answers, its leases are not renewed and its
//! peers may elect someone else; when it resumes it carries on as if no time
//! had passed. Killing (-9) and restarting a node is the cluster's job
//! (`cluster::LocalCluster::kill` / `restart`, which keep the data directory);
//! this module picks whom.

use super::{Scene, Target};
use anyhow::{bail, Result};
use lockcheck_journal::{is_stopped, Effect, Journal, Proc};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rand::seq::SliceRandom;
use rand::Rng;
use serde::{Deserialize, Deserializer};
use serde_json::{json, Value};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// The words a node fault's `nodes` takes, with what each picks, for the
/// workload keys page.
pub const TARGET_WORDS: &[(&str, &str)] = &[
    ("one", "one node, chosen with the run's seed (the default)"),
    ("minority", "(n - 1) / 2 nodes, at least one"),
    ("majority", "n / 2 + 1 nodes"),
    (
        "majority-with-primary",
        "a bare majority, the leader among them",
    ),
    ("all", "every node"),
    (
        "primary",
        "the leader (`leader` too); nobody during an election",
    ),
    (
        "holders",
        "the node(s) the current holder's client talks to: of its links through \
         lockcheck's proxies (put in place for it), those with a connection open whose \
         last byte came within 250 ms of its latest; the node its session or keep-alives \
         go through; nobody while no client holds (the fault tries again)",
    ),
    ("n2", "a node by name"),
];

/// Which server nodes a fault hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeTarget {
    /// One node, chosen with the run's seeded generator.
    One,
    /// A minority: (n - 1) / 2 nodes, at least one.
    Minority,
    /// A bare majority: n / 2 + 1 nodes.
    Majority,
    All,
    /// The leader (etcd) or primary, as the caller knows it.
    Primary,
    /// A bare majority with the leader among them: where only the leader
    /// keeps the time that matters (a ZooKeeper leader expires the sessions,
    /// an etcd leader the leases), a majority without it changes nothing, so
    /// a fault meant to bite names it.
    MajorityWithPrimary,
    /// A node by name (`n2`).
    Node(String),
    /// The node(s) the current holder's client is connected to, as its links
    /// through lockcheck's proxies show: the node its session lives on and its
    /// keep-alives pass through (ZooKeeper's client talks to one server at a
    /// time; etcd's balances over every member unless `client_endpoint =
    /// "follower"` pins it to one). Nobody while no client holds the lock.
    Holders,
}

/// What a node target is picked against, besides the node list: who leads,
/// and whom the holder's client is connected to, where the caller knows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Roles<'a> {
    pub primary: Option<&'a str>,
    pub holders: &'a [String],
}

impl NodeTarget {
    /// The nodes this target picks among `nodes` (in `nodes` order). `roles`
    /// says who leads, where the backend has a leader, and whom the holder's
    /// client is connected to; without them `Primary` and `Holders` pick nobody
    /// (and the schedule tries later).
    pub fn select(&self, nodes: &[String], roles: Roles<'_>, rng: &mut impl Rng) -> Vec<String> {
        let n = nodes.len();
        let primary = roles.primary;
        let count = match self {
            NodeTarget::One => 1.min(n),
            NodeTarget::Minority => ((n.saturating_sub(1)) / 2).max(1).min(n),
            NodeTarget::Majority => (n / 2 + 1).min(n),
            NodeTarget::All => n,
            NodeTarget::Primary => {
                return primary
                    .filter(|p| nodes.iter().any(|x| x == p))
                    .map(|p| vec![p.to_string()])
                    .unwrap_or_default()
            }
            NodeTarget::MajorityWithPrimary => {
                let Some(p) = primary.filter(|p| nodes.iter().any(|x| x == p)) else {
                    return Vec::new();
                };
                let others: Vec<&String> = nodes.iter().filter(|x| *x != p).collect();
                let mut picked: Vec<&String> =
                    others.choose_multiple(rng, n / 2).copied().collect();
                picked.push(nodes.iter().find(|x| *x == p).expect("p is among nodes"));
                picked.sort_by_key(|x| nodes.iter().position(|y| y == *x));
                return picked.into_iter().cloned().collect();
            }
            NodeTarget::Node(name) => {
                return nodes.iter().filter(|x| *x == name).cloned().collect();
            }
            NodeTarget::Holders => {
                return nodes
                    .iter()
                    .filter(|x| roles.holders.contains(x))
                    .cloned()
                    .collect();
            }
        };
        let mut picked: Vec<&String> = nodes.choose_multiple(rng, count).collect();
        picked.sort_by_key(|x| nodes.iter().position(|y| y == *x));
        picked.into_iter().cloned().collect()
    }
}

impl fmt::Display for NodeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeTarget::One => f.write_str("one"),
            NodeTarget::Minority => f.write_str("minority"),
            NodeTarget::Majority => f.write_str("majority"),
            NodeTarget::All => f.write_str("all"),
            NodeTarget::Primary => f.write_str("primary"),
            NodeTarget::MajorityWithPrimary => f.write_str("majority-with-primary"),
            NodeTarget::Node(n) => f.write_str(n),
            NodeTarget::Holders => f.write_str("holders"),
        }
    }
}

impl std::str::FromStr for NodeTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "one" => NodeTarget::One,
            "minority" => NodeTarget::Minority,
            "majority" => NodeTarget::Majority,
            "all" => NodeTarget::All,
            "primary" | "leader" => NodeTarget::Primary,
            "majority-with-primary" | "majority-with-leader" => NodeTarget::MajorityWithPrimary,
            "holders" => NodeTarget::Holders,
            n if n.len() > 1 && n.starts_with('n') && n[1..].bytes().all(|b| b.is_ascii_digit()) => {
                NodeTarget::Node(n.to_string())
            }
            _ => {
                return Err(format!(
                    "expected \"one\", \"minority\", \"majority\", \"majority-with-primary\", \"all\", \"primary\", \"holders\" or a node name like \"n2\", found \"{s}\""
                ))
            }
        })
    }
}

impl<'de> Deserialize<'de> for NodeTarget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// How a node is paused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PauseMethod {
    /// SIGSTOP / SIGCONT to the node's main process, from this machine (a
    /// container's too): what a stalled process looks like. Processes it forked
    /// (PostgreSQL's backends) run on.
    #[default]
    Sigstop,
    /// The cgroup freezer: every process of the node at once (`docker pause` for a
    /// container): what a stalled VM or container looks like.
    Freezer,
    /// Only the node's disk syncs (`fsync`, `fdatasync`) stall, delayed by strace
    /// until the fault ends; the rest of the node runs on (local runtime).
    Fsync,
}

impl PauseMethod {
    /// As workloads and the history spell it.
    pub fn name(self) -> &'static str {
        match self {
            PauseMethod::Sigstop => "sigstop",
            PauseMethod::Freezer => "freezer",
            PauseMethod::Fsync => "fsync",
        }
    }
}

/// Server processes stopped with SIGSTOP, journaled; resumed by `resume` or on
/// drop, whatever happens.
pub struct Stopped {
    journal: Arc<Journal>,
    procs: Vec<(u64, Proc)>,
}

/// Stops `procs` (name, pid). Each is journaled before its signal, so that a
/// controller killed right after still has it resumed by `lockcheck recover`.
pub fn stop(journal: Arc<Journal>, procs: &[(String, i32)]) -> Result<Stopped> {
    let mut stopped = Stopped {
        journal,
        procs: Vec::new(),
    };
    for (name, pid) in procs {
        let proc = Proc::of(name.clone(), *pid)?;
        let id = stopped.journal.record(Effect::Stopped(proc.clone()))?;
        // Held first: should the signal fail, drop still resumes (and unjournals) it.
        stopped.procs.push((id, proc));
        if let Err(e) = kill(Pid::from_raw(*pid), Signal::SIGSTOP) {
            bail!("stopping {name} (pid {pid}): {e}");
        }
    }
    // The signal is delivered asynchronously: the fault has begun only once the
    // kernel shows every target stopped (a few microseconds, normally).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while let Some((_, p)) = stopped.procs.iter().find(|(_, p)| !is_stopped(p.pid)) {
        if std::time::Instant::now() > deadline {
            bail!(
                "{} (pid {}) did not stop within 1 s of SIGSTOP",
                p.name,
                p.pid
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    Ok(stopped)
}

impl Stopped {
    pub fn names(&self) -> Vec<String> {
        self.procs.iter().map(|(_, p)| p.name.clone()).collect()
    }

    /// Resumes every process; the first error is returned after all were tried.
    pub fn resume(mut self) -> Result<()> {
        self.resume_all()
    }

    fn resume_all(&mut self) -> Result<()> {
        let mut first = None;
        for (id, p) in self.procs.drain(..) {
            let resumed = if p.alive() {
                kill(Pid::from_raw(p.pid), Signal::SIGCONT)
                    .map_err(|e| anyhow::anyhow!("resuming {} (pid {}): {e}", p.name, p.pid))
            } else {
                Ok(()) // killed meanwhile (a kill fault): nothing left to resume
            };
            let journaled = self.journal.undone(id);
            if let Err(e) = resumed.and(journaled) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.resume_all();
    }
}

/// A node fault's targets, as history values name them.
pub(super) fn targets(names: &[String]) -> Value {
    json!({ "targets": names })
}

/// The nodes `target` hits in the scene's cluster now, and the run directory;
/// `None` when the scene has no cluster or the target picks nobody (no leader
/// during an election: the schedule tries again).
pub(crate) async fn pick(
    target: &NodeTarget,
    scene: &mut Scene<'_>,
) -> Result<Option<(Vec<String>, PathBuf)>> {
    let Some(cluster) = scene.cluster else {
        bail!("a node fault needs the run's cluster");
    };
    let cluster = cluster.lock().await;
    let names: Vec<String> = cluster.node_names();
    let dir = cluster.dir().to_path_buf();
    let leader = match target {
        NodeTarget::Primary | NodeTarget::MajorityWithPrimary => cluster.leader().await,
        _ => None,
    };
    let holders = match (target, scene.holder) {
        (NodeTarget::Holders, Some(slot)) => holders_nodes(&dir, &scene.clients[slot].name)?,
        _ => Vec::new(),
    };
    let roles = Roles {
        primary: leader.as_deref(),
        holders: &holders,
    };
    let picked = target.select(&names, roles, scene.rng);
    Ok((!picked.is_empty()).then_some((picked, dir)))
}

/// The nodes `client` is connected to now, through the run's client proxies
/// (which a workload naming `nodes = "holders"` puts in place: [`needs`]).
fn holders_nodes(dir: &std::path::Path, client: &str) -> Result<Vec<String>> {
    let Some(proxies) = super::proxy::Proxies::of_run(dir) else {
        bail!(
            "nodes = \"holders\" reads whom the holder is connected to from the clients' \
             proxies, and {} has none",
            dir.display()
        );
    };
    Ok(proxies.connected(client))
}

/// What a fault on `target` needs of the run: the clients' proxies, through
/// which the holder's nodes are seen, for `holders`.
pub(super) fn needs(target: &NodeTarget) -> super::spec::Needs {
    super::spec::Needs {
        client_links: *target == NodeTarget::Holders,
        ..Default::default()
    }
}

/// To the schedule, node faults are timed faults: they pick their nodes
/// themselves ([`NodeTarget`]), not a client.
pub(crate) static TIMED: Target = Target::Random;

/// What to say of `target` in an entry of a fault on nodes.
pub(super) const NOT_A_CLIENT: &str = "a node fault hits server nodes: use `nodes` (\"one\", \"minority\", \"majority\", \"majority-with-primary\", \"all\", \"primary\", \"holders\" or \"n2\")";

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn leader(name: &str) -> Roles<'_> {
        Roles {
            primary: Some(name),
            holders: &[],
        }
    }

    fn nodes(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("n{i}")).collect()
    }

    #[test]
    fn targets_pick_the_right_number_of_distinct_nodes() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let five = nodes(5);
        for (t, k) in [
            (NodeTarget::One, 1),
            (NodeTarget::Minority, 2),
            (NodeTarget::Majority, 3),
            (NodeTarget::All, 5),
        ] {
            let got = t.select(&five, Roles::default(), &mut rng);
            assert_eq!(got.len(), k, "{t}");
            let mut d = got.clone();
            d.dedup();
            assert_eq!(d, got, "{t}: distinct and in node order");
        }
        assert_eq!(
            NodeTarget::Minority
                .select(&nodes(3), Roles::default(), &mut rng)
                .len(),
            1
        );
        assert_eq!(
            NodeTarget::Majority
                .select(&nodes(3), Roles::default(), &mut rng)
                .len(),
            2
        );
    }

    #[test]
    fn the_same_seed_picks_the_same_nodes() {
        let pick = |seed| {
            NodeTarget::Minority.select(
                &nodes(5),
                Roles::default(),
                &mut ChaCha8Rng::seed_from_u64(seed),
            )
        };
        assert_eq!(pick(9), pick(9));
        assert!(
            (0..20)
                .map(pick)
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                > 1
        );
    }

    #[test]
    fn primary_and_named_targets() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert_eq!(
            NodeTarget::Primary.select(&nodes(3), leader("n2"), &mut rng),
            vec!["n2"]
        );
        assert!(NodeTarget::Primary
            .select(&nodes(3), Roles::default(), &mut rng)
            .is_empty());
        assert!(NodeTarget::Primary
            .select(&nodes(3), leader("n7"), &mut rng)
            .is_empty());
        assert_eq!(
            NodeTarget::Node("n3".into()).select(&nodes(3), Roles::default(), &mut rng),
            vec!["n3"]
        );
    }

    #[test]
    fn a_majority_with_the_primary_always_holds_it() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut others = std::collections::BTreeSet::new();
        for _ in 0..40 {
            let got = NodeTarget::MajorityWithPrimary.select(&nodes(5), leader("n4"), &mut rng);
            assert_eq!(got.len(), 3, "{got:?}");
            assert!(got.contains(&"n4".to_string()), "{got:?}");
            let mut sorted = got.clone();
            sorted.sort_by_key(|x| x[1..].parse::<u32>().unwrap());
            sorted.dedup();
            assert_eq!(sorted, got, "distinct and in node order");
            others.extend(got.into_iter().filter(|x| x != "n4"));
        }
        assert_eq!(others.len(), 4, "the rest are picked at random: {others:?}");
        assert_eq!(
            NodeTarget::MajorityWithPrimary.select(&nodes(1), leader("n1"), &mut rng),
            vec!["n1"]
        );
        // No leader known (an election): nobody yet; the schedule tries later.
        assert!(NodeTarget::MajorityWithPrimary
            .select(&nodes(3), Roles::default(), &mut rng)
            .is_empty());
    }

    #[test]
    fn the_holders_nodes_are_those_its_client_is_connected_to() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let connected = |holders: &[String]| {
            NodeTarget::Holders.select(
                &nodes(3),
                Roles {
                    primary: Some("n1"),
                    holders,
                },
                &mut ChaCha8Rng::seed_from_u64(2),
            )
        };
        assert_eq!(connected(&["n2".into()]), vec!["n2"]);
        // A client balanced over several members: all of them, in node order.
        assert_eq!(connected(&["n3".into(), "n1".into()]), vec!["n1", "n3"]);
        // Connected to no node of the cluster (between connections, or no holder).
        assert!(connected(&[]).is_empty());
        assert!(connected(&["n7".into()]).is_empty());
        assert!(NodeTarget::Holders
            .select(&nodes(3), Roles::default(), &mut rng)
            .is_empty());
        assert_eq!("holders".parse::<NodeTarget>(), Ok(NodeTarget::Holders));
        assert_eq!(NodeTarget::Holders.to_string(), "holders");
        assert!(needs(&NodeTarget::Holders).client_links);
        assert!(!needs(&NodeTarget::Primary).client_links);
    }

    #[test]
    fn targets_parse_from_workload_words() {
        assert_eq!("leader".parse::<NodeTarget>().unwrap(), NodeTarget::Primary);
        assert_eq!(
            "n12".parse::<NodeTarget>().unwrap(),
            NodeTarget::Node("n12".into())
        );
        for (word, _) in TARGET_WORDS {
            let target: NodeTarget = word.parse().unwrap();
            assert_eq!(
                target.to_string(),
                *word,
                "the keys page names it as it is written"
            );
        }
        let e = "most".parse::<NodeTarget>().unwrap_err();
        assert!(e.contains("\"minority\"") && e.contains("\"most\""), "{e}");
    }
}
