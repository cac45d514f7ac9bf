//! An etcd cluster: `etcd` per member, each with its peer URL in every member's
//! `--initial-cluster`, and the plan's cluster token, so that members of two runs
//! never join up. Short heartbeat and election timeouts: a paused leader is
//! replaced in about a second, which keeps runs and tests short.
//!
//! **Wiped members.** A member whose data was wiped cannot restart as itself
//! (etcd refuses: "member has already been bootstrapped"): the running members
//! forget it and take it back as a new member (`readmit`), with a new member
//! id, which then joins the running cluster (`--initial-cluster-state existing`)
//! and catches up from the leader.
//!
//! **Leader**: the member a quorum of the members names as leader, asked over
//! each member's HTTP gateway.

use crate::backend::probe::{answers, http_body, whole_reply};
use crate::cluster::node::NodeSpec;
use crate::cluster::plan::ClusterPlan;
use crate::cluster::recipe::{Ports, ServerBinary, ServerRecipe};
use anyhow::{Context, Result};
use async_trait::async_trait;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

pub(crate) struct Etcd;

#[async_trait]
impl ServerRecipe for Etcd {
    fn persistence(&self, _options: &crate::backend::Options) -> Option<String> {
        Some("etcd fsyncs its log at every commit: a killed member replays it".into())
    }

    fn binary(&self) -> ServerBinary {
        ServerBinary {
            name: "etcd",
            package: "etcd-server",
            env: "LOCKCHECK_ETCD",
        }
    }

    /// The smallest cluster that survives the loss of one member.
    fn default_nodes(&self) -> usize {
        3
    }

    fn ports(&self, _nodes: usize) -> Ports {
        Ports {
            client: 2379,
            peer: Some(2380),
            election: None,
        }
    }

    fn command(&self, plan: &ClusterPlan, i: usize, rejoin: bool) -> Result<Command> {
        let node = &plan.nodes[i];
        let url = |a: SocketAddr| format!("http://{a}");
        let peer_listen = node
            .peer_listen
            .context("etcd members have peer addresses")?;
        let peer_advertise = node
            .peer_advertise
            .context("etcd members have peer addresses")?;
        let initial_cluster = plan
            .nodes
            .iter()
            .filter_map(|n| Some(format!("{}={}", n.name, url(n.peer_advertise?))))
            .collect::<Vec<_>>()
            .join(",");
        let mut cmd = Command::new(&plan.binary);
        cmd.arg("--name")
            .arg(&node.name)
            .arg("--data-dir")
            .arg(&node.data_dir)
            .arg("--listen-client-urls")
            .arg(url(node.client_listen))
            .arg("--advertise-client-urls")
            .arg(url(node.client_advertise))
            .arg("--listen-peer-urls")
            .arg(url(peer_listen))
            .arg("--initial-advertise-peer-urls")
            .arg(url(peer_advertise))
            .arg("--initial-cluster")
            .arg(initial_cluster)
            .arg("--initial-cluster-state")
            .arg(if rejoin { "existing" } else { "new" })
            .arg("--initial-cluster-token")
            .arg(&plan.cluster_token)
            .args(["--heartbeat-interval", "100", "--election-timeout", "1000"])
            // Membership changes are lockcheck's own (re-admitting a wiped
            // member right after a crash): the strict check would refuse them
            // until the leader has seen its peers healthy for 5 s.
            .arg("--strict-reconfig-check=false");
        Ok(cmd)
    }

    /// The member's `/health` says `"health":"true"` once the cluster has a leader.
    async fn ready(&self, addr: SocketAddr) -> bool {
        answers(
            addr,
            b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
            "\"health\":\"true\"",
        )
        .await
    }

    /// Once it serves its peers. A member founding a cluster first asks each
    /// peer whether it was founded already, waiting up to a second for each
    /// that listens but does not yet answer (etcd's bootstrap timeout): members
    /// started together waited 2.0 s of every 3-member start on this machine.
    /// Started in turn, each finds its peers answering or not listening yet.
    async fn founded(&self, node: &NodeSpec) -> bool {
        let Some(peer) = node.peer_listen else {
            return true;
        };
        answers(peer, b"GET /members HTTP/1.0\r\n\r\n", "HTTP/1.").await
    }

    async fn leader(&self, plan: &ClusterPlan, running: &[(String, SocketAddr)]) -> Option<String> {
        leader(running, plan.nodes.len()).await
    }

    /// A member without its log (`member/` gone) is re-admitted as a new member.
    async fn readmit(
        &self,
        plan: &ClusterPlan,
        i: usize,
        running: &[(String, SocketAddr)],
    ) -> Result<bool> {
        let node = &plan.nodes[i];
        if node.data_dir.join("member").exists() {
            return Ok(false);
        }
        let peer = node
            .peer_advertise
            .map(|a| format!("http://{a}"))
            .context("an etcd member without a peer address")?;
        readmit(
            &node.name,
            running,
            plan.nodes.len(),
            peer,
            plan.spec.ready_timeout,
        )
        .await
        .with_context(|| format!("re-admitting wiped member {}", node.name))?;
        Ok(true)
    }

    /// Once a majority has exited, the rest wait out their leadership-transfer
    /// timeout for peers that are gone; their logs are fsynced at every commit,
    /// so a kill loses nothing a restart needs.
    fn stops_with_quorum(&self) -> bool {
        true
    }

    /// No setup of its data, no file of this machine's on its command line.
    fn ssh(&self) -> bool {
        true
    }

    fn official_image(&self) -> Option<&'static str> {
        Some("quay.io/coreos/etcd")
    }
}

/// Removes member `node` from the running etcd cluster (`running`: the members up,
/// by name and client address; `total`: the cluster's size) and adds it again,
/// empty, at `peer`. Membership changes need a leader (a follower without one drops
/// them), so this waits for one and tries again until `timeout`; each try starts
/// from the member list, so a change that took effect unseen is not made twice.
async fn readmit(
    node: &str,
    running: &[(String, SocketAddr)],
    total: usize,
    peer: String,
    timeout: Duration,
) -> Result<()> {
    let others: Vec<String> = running
        .iter()
        .filter(|(name, _)| name != node)
        .map(|(_, addr)| format!("http://{addr}"))
        .collect();
    let request = Duration::from_secs(2);
    let options = etcd_client::ConnectOptions::new()
        .with_timeout(request)
        .with_connect_timeout(request);
    let mut etcd = etcd_client::Client::connect(&others, Some(options))
        .await
        .with_context(|| format!("connecting to {}", others.join(",")))?;
    let deadline = Instant::now() + timeout;
    loop {
        let attempt = async {
            let members = etcd.member_list().await.context("listing members")?;
            let old = members
                .members()
                .iter()
                .find(|m| m.peer_urls().contains(&peer));
            if let Some(old) = old {
                etcd.member_remove(old.id())
                    .await
                    .context("removing the old member")?;
            }
            etcd.member_add([peer.clone()], None)
                .await
                .context("adding it again")?;
            anyhow::Ok(())
        };
        match attempt.await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => {
                while leader(running, total).await.is_none() && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

/// The member that a quorum of the cluster's `total` members names as leader,
/// asking each of `running` (name, client address) for its status (its own member
/// id and its leader's); none while etcd elects.
async fn leader(running: &[(String, SocketAddr)], total: usize) -> Option<String> {
    let mut ids = Vec::new();
    let mut votes: Vec<String> = Vec::new();
    for (name, addr) in running {
        if let Some((id, leader)) = status(*addr).await {
            ids.push((id, name.clone()));
            votes.push(leader);
        }
    }
    let quorum = total / 2 + 1;
    let named = votes
        .iter()
        .find(|v| votes.iter().filter(|w| w == v).count() >= quorum)?;
    ids.into_iter()
        .find(|(id, _)| id == named)
        .map(|(_, name)| name)
}

/// One etcd member's status over its HTTP gateway: (its member id, its leader's id),
/// both as etcd prints them (decimal strings); none if it does not answer in time or
/// has no leader.
async fn status(addr: SocketAddr) -> Option<(String, String)> {
    let body = "{}";
    let request = format!(
        "POST /v3/maintenance/status HTTP/1.0\r\nHost: {addr}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let reply = whole_reply(addr, request.as_bytes(), Duration::from_secs(1)).await?;
    let json: serde_json::Value = serde_json::from_str(http_body(&reply)?).ok()?;
    let id = json["header"]["member_id"].as_str()?.to_string();
    let leader = json["leader"].as_str().filter(|l| *l != "0")?.to_string();
    Some((id, leader))
}
