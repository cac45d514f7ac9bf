//! NATS with JetStream: `nats-server -js` per node, its JetStream store in the node's
//! data directory, named after the node (`-n n1`: JetStream clustering needs server
//! names, and the names are what the stream's leader is reported as).
//!
//! One node runs alone. Several form one JetStream cluster: each listens for routes
//! on its peer address and solicits routes to every other node's advertised peer
//! address; the cluster is named after the plan's cluster token, so nodes of two
//! runs never join up. `--no_advertise`: a server does not tell its clients where
//! the other servers are, so a client dials only the addresses it was given (a
//! proxy's, under link faults) and never goes around a cut link.
//!
//! **Ready** is not the greeting alone: a node in a cluster greets with
//! `"jetstream":true` before the cluster has a metadata leader, and until then it
//! cannot create a stream. A node is ready when a JetStream API request
//! (`$JS.API.INFO`) sent through it gets its reply, which needs a meta leader.
//!
//! **Leader**, for node faults (`nodes = "primary"`): the leader of the lock's
//! stream (`KV_LOCK_<name>`), as `$JS.API.STREAM.INFO` reports it. Every write of the
//! lock (create, renew, release: each a publish with an expected revision) is
//! decided by that stream's Raft leader, so it is the node whose pause or death
//! stops the lock. The metadata leader only manages streams; pausing it leaves the
//! lock serving. Before a client has created the stream there is no such leader.
//!
//! Raft elections in nats-server take 4 to 9 s (its fixed election timeouts): a
//! killed stream leader leaves the lock unavailable that long.

use crate::backend::probe;
use crate::backends::nats::client::STREAM_PREFIX;
use crate::cluster::node::NodeSpec;
use crate::cluster::plan::ClusterPlan;
use crate::cluster::recipe::{Ports, ServerBinary, ServerRecipe};
use anyhow::{Context, Result};
use async_trait::async_trait;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

pub(crate) struct Nats;

#[async_trait]
impl ServerRecipe for Nats {
    fn binary(&self) -> ServerBinary {
        ServerBinary {
            name: "nats-server",
            package: "nats-server",
            env: "LOCKCHECK_NATS_SERVER",
        }
    }

    /// The smallest JetStream cluster that survives the loss of one node.
    fn default_nodes(&self) -> usize {
        3
    }

    /// Routes between the nodes of a cluster; a single server has no peers.
    fn ports(&self, nodes: usize) -> Ports {
        Ports {
            client: 4222,
            peer: (nodes > 1).then_some(6222),
            election: None,
        }
    }

    fn command(&self, plan: &ClusterPlan, i: usize, _rejoin: bool) -> Result<Command> {
        command(plan, i)
    }

    async fn ready(&self, addr: SocketAddr) -> bool {
        ready(addr).await
    }

    /// A JetStream cluster: the leader of the lock's stream. One server: it is
    /// the one every client talks to.
    async fn leader(&self, plan: &ClusterPlan, running: &[(String, SocketAddr)]) -> Option<String> {
        if plan.nodes.len() > 1 {
            stream_leader(running).await
        } else {
            plan.nodes.first().map(|n| n.name.clone())
        }
    }
}

/// The command that runs node `i`: the one place its command line is built, for
/// local processes and containers alike.
fn command(plan: &ClusterPlan, i: usize) -> Result<Command> {
    let node = &plan.nodes[i];
    let mut cmd = Command::new(&plan.binary);
    cmd.arg("-js")
        .arg("-n")
        .arg(&node.name)
        .arg("-a")
        .arg(node.client_listen.ip().to_string())
        .arg("-p")
        .arg(node.client_listen.port().to_string())
        .arg("-sd")
        .arg(&node.data_dir);
    if plan.nodes.len() > 1 {
        let peer = |n: &NodeSpec| {
            Ok::<_, anyhow::Error>((
                n.peer_listen
                    .with_context(|| format!("nats node {} has no cluster address", n.name))?,
                n.peer_advertise
                    .with_context(|| format!("nats node {} has no cluster address", n.name))?,
            ))
        };
        let (listen, advertise) = peer(node)?;
        let routes = plan
            .nodes
            .iter()
            .filter(|n| n.name != node.name)
            .map(|n| Ok(format!("nats://{}", peer(n)?.1)))
            .collect::<Result<Vec<_>>>()?
            .join(",");
        cmd.arg("--cluster_name")
            .arg(&plan.cluster_token)
            .arg("--cluster")
            .arg(format!("nats://{listen}"))
            .arg("--cluster_advertise")
            .arg(advertise.to_string())
            .arg("--routes")
            .arg(routes)
            .arg("--no_advertise");
    }
    Ok(cmd)
}

/// Whether the node at `addr` serves JetStream requests: it greets with JetStream
/// on, and a `$JS.API.INFO` request through it gets its reply (in a cluster, only
/// once there is a metadata leader). Spoken in the plain client protocol: a probe
/// runs every few milliseconds while a cluster starts.
async fn ready(addr: SocketAddr) -> bool {
    const INBOX: &str = "_INBOX.lockcheck-ready";
    // A zero-byte PUB still ends its (empty) payload with CRLF.
    let request = format!(
        "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":true,\"no_responders\":true}}\r\n\
         SUB {INBOX} 1\r\nPUB $JS.API.INFO {INBOX} 0\r\n\r\n"
    );
    let answer = |reply: &[u8], ended: bool| {
        let text = String::from_utf8_lossy(reply);
        if text.contains("account_info_response") {
            // An error reply (no JetStream for this account) is not ready.
            return Some(text.contains("\"jetstream\":true") && !text.contains("\"error\""));
        }
        // Headers only: "no responders" (503), JetStream is not up yet.
        (text.contains("HMSG") || ended).then_some(false)
    };
    probe::ask(addr, request.as_bytes(), Duration::from_secs(1), answer).await == Some(true)
}

/// The node that leads the lock's stream, asking the running nodes (`running`:
/// name and client address) in turn until one answers; none while the stream does
/// not exist yet or elects a leader (its leader paused or killed).
async fn stream_leader(running: &[(String, SocketAddr)]) -> Option<String> {
    for (_, addr) in running {
        if let Ok(Some(leader)) =
            tokio::time::timeout(Duration::from_secs(2), ask_stream_leader(*addr)).await
        {
            return Some(leader);
        }
    }
    None
}

/// One node's answer: the leader of the first lock stream (by name) it knows of.
async fn ask_stream_leader(addr: SocketAddr) -> Option<String> {
    let timeout = Duration::from_secs(1);
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(timeout)
        .request_timeout(Some(timeout))
        .ignore_discovered_servers()
        .max_reconnects(1)
        .connect(format!("nats://{addr}"))
        .await
        .ok()?;
    let js = async_nats::jetstream::new(client);
    let mut names = Vec::new();
    {
        use futures_util::StreamExt;
        let mut listed = js.stream_names();
        while let Some(name) = listed.next().await {
            names.push(name.ok()?);
        }
    }
    names.sort();
    let name = names.into_iter().find(|n| n.starts_with(STREAM_PREFIX))?;
    let stream = js.get_stream(&name).await.ok()?;
    stream.cached_info().cluster.as_ref()?.leader.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::BackendKind;
    use crate::cluster::plan::ClusterSpec;

    fn plan(nodes: usize) -> ClusterPlan {
        let spec = ClusterSpec {
            nodes,
            // Any executable: the plan only needs it to exist.
            binary: Some("/bin/sh".into()),
            ..ClusterSpec::new(BackendKind::Nats, "/tmp/lockcheck-nats-plan")
        };
        ClusterPlan::new(spec).unwrap()
    }

    fn args(cmd: &Command) -> Vec<String> {
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// The value given after `flag`.
    fn value(args: &[String], flag: &str) -> String {
        let i = args.iter().position(|x| x == flag).expect(flag);
        args[i + 1].clone()
    }

    #[test]
    fn one_node_runs_alone() {
        let a = args(&command(&plan(1), 0).unwrap());
        assert!(a.contains(&"-js".to_string()), "{a:?}");
        assert!(!a.iter().any(|x| x.starts_with("--cluster")), "{a:?}");
    }

    #[test]
    fn each_node_of_a_cluster_routes_to_the_others_by_their_advertised_addresses() {
        let mut p = plan(3);
        // As a proxy or a namespace would: peers dial the advertised address.
        let moved: SocketAddr = "127.0.0.9:4999".parse().unwrap();
        p.nodes[2].peer_advertise = Some(moved);
        let a = args(&command(&p, 0).unwrap());
        assert_eq!(value(&a, "-n"), "n1");
        assert_eq!(value(&a, "--cluster_name"), p.cluster_token);
        let listen = p.nodes[0].peer_listen.unwrap();
        assert_eq!(value(&a, "--cluster"), format!("nats://{listen}"));
        let n2 = p.nodes[1].peer_advertise.unwrap();
        assert_eq!(value(&a, "--routes"), format!("nats://{n2},nats://{moved}"));
        assert!(a.contains(&"--no_advertise".to_string()));
        // Each node its own store.
        let b = args(&command(&p, 1).unwrap());
        assert_ne!(value(&a, "-sd"), value(&b, "-sd"));
    }
}
