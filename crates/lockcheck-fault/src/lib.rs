//! What lockcheck breaks. Each fault is one small type behind the [`Fault`] trait:
//! it applies itself to a target and undoes itself. Each kind a workload names has
//! a file of its own (`pause.rs`, `kill.rs`, ...) with its spec and its line in the
//! catalogue ([`catalogue::CATALOGUE`]), which also says how the history records it.
//! *When* faults happen is the run's schedule (`run::nemesis`), not theirs.
//!
//! A fault that changes anything outside the run's own processes (a clock, a link)
//! must also undo it in `Drop`, so that a panic leaves nothing behind; the run stops
//! and resumes its processes itself.

pub mod catalogue;
pub mod clock;
pub mod disk_full;
pub mod duration;
pub mod kill;
pub mod latency;
pub mod latency_nodes;
pub mod link_fault;
pub mod netns;
pub mod node;
pub mod partition;
pub mod partition_nodes;
pub mod pause;
pub mod pause_node;
pub mod proxy;
pub mod schedule;
pub mod shape;
pub mod spec;
pub mod sync_stall;

use anyhow::Result;
use async_trait::async_trait;
use lockcheck_servers::cluster::Cluster;
use nix::unistd::Pid;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::fmt;

/// One kind of fault, started and stopped by the run's schedule.
#[async_trait]
pub trait Fault: Send {
    /// Whom it hits. `Target::Holder` makes the schedule start it right after a
    /// client acquires the lock, before that client's next op.
    fn target(&self) -> &Target;

    /// Applies the fault. Returns the history `value` naming the targets and
    /// parameters (`{"targets": ["client-3"], "duration_ms": 3000}`), or `None` when
    /// there is nothing to hit right now (the schedule tries again later).
    async fn start(&mut self, scene: &mut Scene<'_>) -> Result<Option<Value>>;

    /// Undoes what `start` did (resumes, heals, restarts); returns the history
    /// `value` of the end record.
    async fn stop(&mut self, scene: &mut Scene<'_>) -> Result<Value>;

    /// The client slots this fault keeps stopped right now (a pause). No other
    /// fault picks them until it ends: a second, shorter pause of the same
    /// process would resume it with the first one's, and the history would claim
    /// a pause the process never had.
    fn stopped_clients(&self) -> Vec<usize> {
        Vec::new()
    }
}

/// What a fault can aim at, as the controller sees it when the fault starts.
pub struct Scene<'a> {
    /// The client processes, in slot order.
    pub clients: &'a [ClientProc],
    /// The slot that has just acquired the lock, for holder-targeted faults.
    pub holder: Option<usize>,
    /// Slots another fault keeps stopped (`Fault::stopped_clients`): not targets.
    pub stopped: &'a [usize],
    /// The run's seeded generator: the same seed picks the same victims.
    pub rng: &'a mut ChaCha8Rng,
    /// The backend's servers, for faults on nodes (kill and restart, pause a node);
    /// `None` where a fault is exercised without a cluster.
    pub cluster: Option<&'a tokio::sync::Mutex<Box<dyn Cluster>>>,
}

/// A lock client's OS process.
#[derive(Debug, Clone)]
pub struct ClientProc {
    /// `client-N`, the name faults and the status line use.
    pub name: String,
    pub place: Place,
}

/// Where a client's process runs, as a fault signals it.
#[derive(Debug, Clone)]
pub enum Place {
    /// On this machine: the leader of its process group (with its adapter).
    Here(Pid),
    /// On a host of the ssh runtime (`clients_on = "hosts"`): that very
    /// process there, signalled over the run's connection.
    Host {
        host: lockcheck_servers::cluster::ssh::host::Host,
        proc: lockcheck_journal::Proc,
    },
}

/// Whom a fault hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The client that has just acquired the lock: the fault starts right after its
    /// acquire succeeds, before it can write (the adversarial schedule).
    Holder,
    /// A client chosen with the run's seeded random generator.
    Random,
    /// One client by slot, named `client-N` (N from 0).
    Client(usize),
}

impl Target {
    /// The client slot this target picks in `scene`, if any; never one another
    /// fault keeps stopped. (With none stopped, a random pick draws exactly as it
    /// always did: a seed picks the same victims as before.)
    pub fn pick_client(&self, scene: &mut Scene<'_>) -> Option<usize> {
        use rand::Rng;
        let free: Vec<usize> = (0..scene.clients.len())
            .filter(|i| !scene.stopped.contains(i))
            .collect();
        match *self {
            Target::Holder => scene.holder.filter(|h| free.contains(h)),
            Target::Random if free.is_empty() => None,
            Target::Random => Some(free[scene.rng.gen_range(0..free.len())]),
            Target::Client(i) => free.contains(&i).then_some(i),
        }
    }
}

/// The name of client slot `i` in nemesis records, workloads and the status line.
pub fn client_name(i: usize) -> String {
    format!("client-{i}")
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Holder => f.write_str("holder"),
            Target::Random => f.write_str("random"),
            Target::Client(i) => f.write_str(&client_name(*i)),
        }
    }
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "holder" => Ok(Target::Holder),
            "random" => Ok(Target::Random),
            other => other
                .strip_prefix("client-")
                .and_then(|n| n.parse().ok())
                .map(Target::Client)
                .ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "expected \"holder\", \"random\" or a client name like \"client-0\", found \"{s}\""
                    ))
                }),
        }
    }
}

/// The file a command name runs (looked up on PATH unless it is a path).
pub fn which(program: &std::ffi::OsStr) -> Result<std::path::PathBuf> {
    use anyhow::Context;
    let p = std::path::Path::new(program);
    if p.components().count() > 1 {
        return Ok(p.to_path_buf());
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(p))
        .find(|c| c.is_file())
        .with_context(|| format!("{} is not on PATH", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn targets_pick_the_holder_a_named_client_or_a_seeded_random_one() {
        let clients: Vec<ClientProc> = (0..4)
            .map(|i| ClientProc {
                name: client_name(i),
                place: Place::Here(Pid::from_raw(1)),
            })
            .collect();
        let picks = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut scene = Scene {
                clients: &clients,
                holder: Some(2),
                stopped: &[],
                rng: &mut rng,
                cluster: None,
            };
            (0..16)
                .map(|_| Target::Random.pick_client(&mut scene).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(picks(7), picks(7), "the same seed picks the same victims");
        assert!(picks(7).iter().all(|&i| i < 4));
        assert!(
            picks(7).iter().any(|&i| i != picks(7)[0]),
            "not always the same one"
        );
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut scene = Scene {
            clients: &clients,
            holder: Some(2),
            stopped: &[],
            rng: &mut rng,
            cluster: None,
        };
        assert_eq!(Target::Holder.pick_client(&mut scene), Some(2));
        assert_eq!(Target::Client(3).pick_client(&mut scene), Some(3));
        assert_eq!(Target::Client(4).pick_client(&mut scene), None);
        scene.holder = None;
        assert_eq!(Target::Holder.pick_client(&mut scene), None);
        // A client another pause keeps stopped is nobody's target: a random
        // pick takes one of the others, a named or holder target finds nothing.
        scene.stopped = &[0, 1, 3];
        scene.holder = Some(3);
        assert_eq!(Target::Holder.pick_client(&mut scene), None);
        assert_eq!(Target::Client(1).pick_client(&mut scene), None);
        assert!((0..16).all(|_| Target::Random.pick_client(&mut scene) == Some(2)));
        scene.stopped = &[0, 1, 2, 3];
        assert_eq!(Target::Random.pick_client(&mut scene), None);
    }
}
