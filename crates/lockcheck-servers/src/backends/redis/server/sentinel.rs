//! Redis with Sentinel: n1 .. n3 run `redis-server` without persistence (n1 the
//! first primary, n2 and n3 its replicas), n4 .. n6 run `redis-sentinel`, each
//! watching the primary (quorum 2) and each told from the start of the replicas and
//! of the other Sentinels (their ids are fixed), so that a failover can happen from
//! the run's first second rather than after Sentinel's 10-second discovery. Sentinel
//! finds the primary down after `down-after-milliseconds` (1 s: a run lasts seconds)
//! and promotes a replica. A node is ready once it plays its part: the primary
//! serves, a replica's link to its primary is up, a Sentinel knows both replicas and
//! both other Sentinels.

use super::{kept, server_command};
use crate::backend::probe;
use crate::backends::redis::client::Persistence;
use crate::backends::redis::instance::Instance;
use crate::backends::redis::sentinel::{primary_named_by, MASTER_NAME, SENTINELS, SERVERS};
use crate::cluster::node::NodeSpec;
use crate::cluster::plan::ClusterPlan;
use crate::cluster::recipe::{Package, Ports, ServerBinary, ServerRecipe};
use anyhow::{Context, Result};
use async_trait::async_trait;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

/// How long the Sentinels wait before they find an unanswering primary down.
const DOWN_AFTER_MS: u64 = 1000;
/// How long a failover may take before another Sentinel tries again.
const FAILOVER_TIMEOUT_MS: u64 = 3000;

pub(crate) struct RedisSentinel;

/// Sentinel `i`'s id (`sentinel myid`), known to the others from the start.
fn sentinel_id(i: usize) -> String {
    format!("{:040x}", i + 1)
}

/// The configuration file of Sentinel node `i` (which Sentinel rewrites with what
/// it learns: a restarted Sentinel keeps it).
fn sentinel_config(plan: &ClusterPlan, i: usize) -> String {
    let node = &plan.nodes[i];
    let addr = |n: &NodeSpec| format!("{} {}", n.client_listen.ip(), n.client_listen.port());
    let mut conf = format!(
        "port {}\nbind {}\ndir {}\nsentinel myid {}\n",
        node.client_listen.port(),
        node.client_listen.ip(),
        node.data_dir.display(),
        sentinel_id(i)
    );
    if !node.client_listen.ip().is_loopback() {
        conf += "protected-mode no\n";
    }
    let _ = writeln!(
        conf,
        "sentinel monitor {MASTER_NAME} {} 2",
        addr(&plan.nodes[0])
    );
    let _ = writeln!(
        conf,
        "sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}"
    );
    let _ = writeln!(
        conf,
        "sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}"
    );
    for replica in &plan.nodes[1..SERVERS] {
        let _ = writeln!(
            conf,
            "sentinel known-replica {MASTER_NAME} {}",
            addr(replica)
        );
    }
    for j in (SERVERS..SERVERS + SENTINELS).filter(|&j| j != i) {
        let _ = writeln!(
            conf,
            "sentinel known-sentinel {MASTER_NAME} {} {}",
            addr(&plan.nodes[j]),
            sentinel_id(j)
        );
    }
    conf
}

/// What `INFO` says at `addr`, read to the end of its one reply (a bulk string:
/// `$<length>`, then the text). A Sentinel leaves the connection open after
/// `QUIT`, so a check that read until the server hung up waited out its timeout
/// at every Sentinel: 6 s of every start, measured, where the nodes were all
/// playing their parts after 1.5 s.
async fn info(addr: SocketAddr) -> Option<String> {
    // Done at the bulk string's end, or at once on another reply (an error).
    let reply = |reply: &[u8], _| bulk_string(reply).map_or(Some(None), |text| text.map(Some));
    probe::ask(addr, b"INFO\r\n", Duration::from_secs(1), reply)
        .await
        .flatten()
}

/// The text of a RESP bulk string once `reply` holds all of it (`Some(None)`
/// until then); `None` for any other reply (an error, such as `-LOADING`).
fn bulk_string(reply: &[u8]) -> Option<Option<String>> {
    if reply.first().is_some_and(|&b| b != b'$') {
        return None;
    }
    let Some(eol) = reply.windows(2).position(|w| w == b"\r\n") else {
        return Some(None);
    };
    let len: usize = std::str::from_utf8(&reply[1..eol]).ok()?.parse().ok()?;
    let text = reply.get(eol + 2..eol + 2 + len);
    Some(text.map(|t| String::from_utf8_lossy(t).into_owned()))
}

#[async_trait]
impl ServerRecipe for RedisSentinel {
    fn binary(&self) -> ServerBinary {
        ServerBinary {
            name: "redis-sentinel",
            package: "redis-sentinel",
            env: "LOCKCHECK_REDIS_SENTINEL",
        }
    }

    /// Its servers are Redis's own; the Sentinels come in a package of theirs.
    fn packages(&self) -> Vec<Package> {
        let sentinel = self.binary();
        let mut packages = super::REDIS.packages();
        packages.push(Package {
            check: sentinel.name,
            name: sentinel.package,
        });
        packages
    }

    fn default_nodes(&self) -> usize {
        SERVERS + SENTINELS
    }

    fn persistence(&self, _options: &crate::backend::Options) -> Option<String> {
        Some(kept(Persistence::None).into())
    }

    fn fixed_nodes(&self) -> Option<&'static str> {
        Some("3 Redis servers (a primary and its 2 replicas) and 3 Sentinels")
    }

    fn ports(&self, _nodes: usize) -> Ports {
        // Each node alone in its namespace: the servers and the Sentinels alike.
        Ports::client(6379)
    }

    fn command(&self, plan: &ClusterPlan, i: usize, _rejoin: bool) -> Result<Command> {
        let node = &plan.nodes[i];
        if i < SERVERS {
            let redis = super::REDIS.binary().resolve(None)?;
            let mut cmd = server_command(&redis, node, Persistence::None);
            // A replica's first sync at once, not after diskless sync's 5 s delay.
            cmd.args(["--repl-diskless-sync-delay", "0"]);
            if i > 0 {
                let primary = plan.nodes[0].client_listen;
                cmd.arg("--replicaof")
                    .arg(primary.ip().to_string())
                    .arg(primary.port().to_string());
            }
            return Ok(cmd);
        }
        let conf = node.data_dir.join("sentinel.conf");
        if !conf.exists() {
            std::fs::write(&conf, sentinel_config(plan, i))
                .with_context(|| format!("writing {}", conf.display()))?;
        }
        let mut cmd = Command::new(&plan.binary);
        cmd.arg(&conf);
        Ok(cmd)
    }

    /// The primary serves; a replica's link is up; a Sentinel knows its group.
    async fn ready(&self, addr: SocketAddr) -> bool {
        let sentinel = format!("slaves={},sentinels={}", SERVERS - 1, SENTINELS);
        info(addr).await.is_some_and(|text| {
            text.contains("role:master")
                || text.contains("master_link_status:up")
                || text.contains(&sentinel)
        })
    }

    /// The server the first running Sentinel that answers names as primary.
    async fn leader(&self, plan: &ClusterPlan, running: &[(String, SocketAddr)]) -> Option<String> {
        let sentinels = &plan.nodes[SERVERS..];
        for (name, addr) in running {
            if !sentinels.iter().any(|s| s.name == *name) {
                continue;
            }
            let Ok(sentinel) = Instance::new(&addr.to_string(), Duration::from_millis(500)) else {
                continue;
            };
            if let Ok(Some(named)) = primary_named_by(&sentinel).await {
                let named: Option<SocketAddr> = named.parse().ok();
                return plan.nodes[..SERVERS]
                    .iter()
                    .find(|n| Some(n.client_listen) == named)
                    .map(|n| n.name.clone());
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::bulk_string;

    #[test]
    fn an_info_reply_is_read_to_its_length_and_no_further() {
        let whole = b"$12\r\n# Sentinel\r\n\r\n";
        assert_eq!(bulk_string(whole), Some(Some("# Sentinel\r\n".into())));
        assert_eq!(
            bulk_string(&whole[..8]),
            Some(None),
            "the text is not all in"
        );
        assert_eq!(bulk_string(b"$1"), Some(None), "the length is not all in");
        assert_eq!(bulk_string(b""), Some(None));
        assert_eq!(bulk_string(b"-LOADING Redis is loading\r\n"), None);
        assert_eq!(bulk_string(b"$x\r\n"), None);
    }
}
