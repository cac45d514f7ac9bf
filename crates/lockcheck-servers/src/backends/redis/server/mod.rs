//! Redis, and Redlock's independent Redis instances: `redis-server` per node on
//! its own port, without persistence, so that a killed instance comes back empty,
//! as the Redis-docs setup the Redlock debate assumes; or, with redis's
//! `persistence = "aof-always"`, with its append-only file fsynced at every write.

pub mod sentinel;

use crate::backend::probe::answers;
use crate::backend::OwnOptions;
use crate::backends::redis::client::{Options, Persistence};
use crate::cluster::node::NodeSpec;
use crate::cluster::plan::ClusterPlan;
use crate::cluster::recipe::{Ports, ServerBinary, ServerRecipe};
use anyhow::Result;
use async_trait::async_trait;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

/// `redis-server` for one node, keeping what `persistence` says (no RDB snapshots
/// either way); the Sentinel recipe adds its replication to it.
pub(crate) fn server_command(program: &Path, node: &NodeSpec, persistence: Persistence) -> Command {
    let mut cmd = Command::new(program);
    cmd.arg("--port")
        .arg(node.client_listen.port().to_string())
        .arg("--bind")
        .arg(node.client_listen.ip().to_string())
        .args(["--save", ""])
        .args(match persistence {
            Persistence::None => &["--appendonly", "no"][..],
            Persistence::AofAlways => &["--appendonly", "yes", "--appendfsync", "always"][..],
        })
        .args(["--daemonize", "no"])
        .arg("--dir")
        .arg(&node.data_dir);
    // Protected mode refuses every client not on loopback; a node in its
    // namespace, or in a container (clients arrive through Docker's port
    // forwarding), is reached from outside its loopback.
    if !node.client_listen.ip().is_loopback() {
        cmd.args(["--protected-mode", "no"]);
    }
    cmd
}

/// What a killed Redis keeps, in the audit's words.
pub(crate) fn kept(persistence: Persistence) -> &'static str {
    match persistence {
        Persistence::None => {
            "Redis with no AOF and no RDB snapshots (--save \"\" --appendonly no): a killed node restarts empty"
        }
        Persistence::AofAlways => {
            "Redis with its AOF fsynced at every write (--appendonly yes --appendfsync always): \
             a killed node replays every write it acknowledged"
        }
    }
}

/// One recipe for both: they differ in how many instances run and whether one
/// of them leads.
pub(crate) struct Redis {
    /// Redlock: five independent instances, none of which leads.
    redlock: bool,
}

/// One Redis: the server every client talks to leads.
pub(crate) const REDIS: Redis = Redis { redlock: false };
/// Five independent Redis, quorum 3.
pub(crate) const REDLOCK: Redis = Redis { redlock: true };

#[async_trait]
impl ServerRecipe for Redis {
    fn binary(&self) -> ServerBinary {
        ServerBinary {
            name: "redis-server",
            package: "redis-server",
            env: "LOCKCHECK_REDIS_SERVER",
        }
    }

    fn default_nodes(&self) -> usize {
        if self.redlock {
            5
        } else {
            1
        }
    }

    fn single_instance(&self) -> Option<&'static str> {
        (!self.redlock).then_some("use kind = \"redlock\" for several")
    }

    fn ports(&self, _nodes: usize) -> Ports {
        Ports::client(6379)
    }

    fn command(&self, plan: &ClusterPlan, i: usize, _rejoin: bool) -> Result<Command> {
        let persistence = Options::of(&plan.spec.options).persistence;
        Ok(server_command(&plan.binary, &plan.nodes[i], persistence))
    }

    fn persistence(&self, options: &crate::backend::Options) -> Option<String> {
        Some(kept(Options::of(options).persistence).into())
    }

    /// One server, or Redlock's independent instances: none leads the others.
    fn elects_leader(&self) -> bool {
        false
    }

    /// `PING` gets `+PONG`.
    async fn ready(&self, addr: SocketAddr) -> bool {
        answers(addr, b"PING\r\n", "+PONG").await
    }

    /// The one Redis; none among Redlock's independent instances.
    async fn leader(
        &self,
        plan: &ClusterPlan,
        _running: &[(String, SocketAddr)],
    ) -> Option<String> {
        if self.redlock {
            return None;
        }
        plan.nodes.first().map(|n| n.name.clone())
    }

    /// No setup of its data, no file of this machine's on its command line.
    fn ssh(&self) -> bool {
        true
    }

    fn official_image(&self) -> Option<&'static str> {
        Some("redis")
    }
}
