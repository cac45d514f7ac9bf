//! Patroni (Debian's `patroni` 3.0): PostgreSQL nodes whose roles Patroni decides.
//! The cluster's coordinator, one etcd member, starts first (`coordinator`); then
//! each node is one `patroni` process with a configuration of its own
//! (`<data>/<node>/patroni.yml`): its REST API on the node's peer address, its
//! PostgreSQL on the client address (data in `<data>/<node>/pgdata`), the leader key
//! in etcd through its v3 API (`etcd3:`). The first node to take the key runs
//! `initdb`; the others copy it with `pg_basebackup` and stream from it.
//!
//! **The node's process is its agent.** Patroni starts PostgreSQL detached (the
//! postmaster's parent is init, in a session of its own), so that the database
//! outlives an agent that dies: a node's pid, which `pause-node` stops with
//! SIGSTOP, is Patroni alone, and its PostgreSQL goes on serving. The postmaster
//! is stopped by Patroni at the node's stop, and killed after it by lockcheck if
//! Patroni could not ([`ServerRecipe::detached`]); journaled as each node starts, so
//! that `lockcheck recover` ends it after a kill -9 of the controller.
//!
//! **Timings.** The leader key's TTL is the workload's lease (whole seconds);
//! `loop_wait` is 1 s and `retry_timeout` the most Patroni's rule allows
//! (`loop_wait + 2 × retry_timeout ≤ ttl`), at most its default of 10 s.
//!
//! As root, Patroni and its PostgreSQL run as the `postgres` account, which is
//! given the node's directory.

use crate::backend::probe::answers;
use crate::backend::BackendKind;
use crate::backends::postgres::client::SUPERUSER;
use crate::cluster::node::NodeSpec;
use crate::cluster::plan::ClusterPlan;
use crate::cluster::recipe::{Detached, Init, Package, Ports, ServerBinary, ServerRecipe};
use crate::cluster::setup::{hand_over, run_as, unprivileged_user};
use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub(crate) struct Patroni;

/// Patroni's loop: how often each agent looks at the leader key (and the leader
/// renews it).
const LOOP_WAIT_S: u64 = 1;

/// Patroni's timings for a leader key TTL of `lease`: (ttl, loop_wait,
/// retry_timeout) in seconds, or why the lease cannot be one.
pub fn timings(lease: Duration) -> Result<(u64, u64, u64), String> {
    let ttl = lease.as_secs();
    if lease.subsec_nanos() != 0 || ttl < 3 {
        return Err(format!(
            "Patroni's leader key TTL is whole seconds, at least 3: found {} ms",
            lease.as_millis()
        ));
    }
    let retry = ((ttl - LOOP_WAIT_S) / 2).clamp(1, 10);
    Ok((ttl, LOOP_WAIT_S, retry))
}

#[async_trait]
impl ServerRecipe for Patroni {
    fn binary(&self) -> ServerBinary {
        ServerBinary {
            name: "patroni",
            package: "patroni",
            env: "LOCKCHECK_PATRONI",
        }
    }

    /// Patroni, and the etcd module its etcd3 DCS imports (one of the DCS
    /// clients its package accepts); its PostgreSQL and etcd come with their
    /// own backends'.
    fn packages(&self) -> Vec<Package> {
        vec![
            Package {
                check: "patroni",
                name: "patroni",
            },
            Package {
                check: "/usr/lib/python3/dist-packages/etcd/__init__.py",
                name: "python3-etcd",
            },
        ]
    }

    /// A primary and two replicas.
    fn default_nodes(&self) -> usize {
        3
    }

    /// The leader key's TTL: whole seconds, at least 3.
    fn lease(&self, ttl: Duration) -> Result<(), String> {
        timings(ttl).map(drop)
    }

    /// PostgreSQL for clients; Patroni's REST API, which the agents ask of each
    /// other during a failover, as the peer address.
    fn ports(&self, _nodes: usize) -> Ports {
        Ports {
            client: 5432,
            peer: Some(8008),
            election: None,
        }
    }

    fn refuses_root(&self) -> bool {
        true
    }

    /// Its trust rules admit loopback clients only.
    fn namespaces(&self) -> bool {
        false
    }

    fn coordinator(&self) -> Option<BackendKind> {
        Some(BackendKind::Etcd)
    }

    /// initdb and the first copies of the replicas take a while.
    fn ready_timeout(&self) -> Duration {
        Duration::from_secs(60)
    }

    fn endpoint(&self, node: &NodeSpec) -> String {
        let api = node.peer_advertise.unwrap_or(node.client_advertise);
        crate::backends::patroni::client::endpoint(&node.name, node.client_advertise, api)
    }

    /// The node's directory goes to the account Patroni runs as, before its first
    /// start and after a wipe; Patroni itself runs initdb or pg_basebackup.
    fn init(&self, plan: &ClusterPlan, i: usize) -> Result<Option<Init>> {
        let node = &plan.nodes[i];
        if !pgdata(&node.data_dir).exists() {
            if let Some(u) = unprivileged_user(&[SUPERUSER])? {
                hand_over(&node.data_dir, &plan.spec.dir, &u)?;
            }
        }
        Ok(None)
    }

    fn command(&self, plan: &ClusterPlan, i: usize, _rejoin: bool) -> Result<Command> {
        let node = &plan.nodes[i];
        let Some(dcs) = plan.coordinator.first() else {
            bail!(
                "patroni node {} has no etcd to keep its leader key in",
                node.name
            );
        };
        let lease = plan
            .spec
            .lease
            .context("a patroni cluster needs the workload's lease (its leader key's TTL)")?;
        let (ttl, loop_wait, retry) = timings(lease).map_err(anyhow::Error::msg)?;
        let api = node.peer_listen.context("a patroni node has a REST API")?;
        let api_advertise = node.peer_advertise.unwrap_or(api);
        // PostgreSQL's programs, beside its server (`$LOCKCHECK_POSTGRES` too).
        let postgres = crate::backends::postgres::server::Postgres
            .binary()
            .resolve(None)?;
        let bin = postgres.parent().context("PostgreSQL's programs")?;
        let config = format!(
            "scope: {scope}
name: {name}
restapi:
  listen: {api}
  connect_address: {api_advertise}
etcd3:
  hosts: {dcs}
bootstrap:
  dcs:
    ttl: {ttl}
    loop_wait: {loop_wait}
    retry_timeout: {retry}
    postgresql:
      use_pg_rewind: false
      parameters:
        fsync: 'off'
        max_connections: 200
  initdb:
  - encoding: UTF8
  - locale: C
  - auth: trust
postgresql:
  listen: {listen}
  connect_address: {advertise}
  data_dir: {pgdata}
  bin_dir: {bin}
  pgpass: {pgpass}
  authentication:
    replication:
      username: {user}
    superuser:
      username: {user}
  parameters:
    unix_socket_directories: ''
  pg_hba:
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
",
            scope = plan.cluster_token,
            name = node.name,
            listen = node.client_listen,
            advertise = node.client_advertise,
            pgdata = pgdata(&node.data_dir).display(),
            bin = bin.display(),
            pgpass = node.data_dir.join("pgpass").display(),
            user = SUPERUSER,
        );
        let file = node.data_dir.join("patroni.yml");
        std::fs::write(&file, config).with_context(|| format!("writing {}", file.display()))?;
        let mut cmd = Command::new(&plan.binary);
        cmd.arg(&file);
        run_as(&mut cmd, unprivileged_user(&[SUPERUSER])?.as_ref());
        Ok(cmd)
    }

    /// Its PostgreSQL accepts a login and answers a query (a replica too, once it
    /// has its copy).
    async fn ready(&self, addr: SocketAddr) -> bool {
        crate::backends::postgres::server::ready(addr).await
    }

    /// The node whose Patroni answers `GET /primary` with 200 (it holds the
    /// leader key and runs a read-write PostgreSQL), as a load balancer asks.
    async fn leader(&self, plan: &ClusterPlan, running: &[(String, SocketAddr)]) -> Option<String> {
        for (name, _) in running {
            let Some(api) = plan
                .nodes
                .iter()
                .find(|n| &n.name == name)
                .and_then(|n| n.peer_listen)
            else {
                continue;
            };
            if answers(api, b"GET /primary HTTP/1.0\r\n\r\n", " 200 ").await {
                return Some(name.clone());
            }
        }
        None
    }

    /// The postmaster Patroni starts: its pid in `postmaster.pid`, its data
    /// directory on its command line.
    fn detached(&self, plan: &ClusterPlan, i: usize) -> Option<Detached> {
        let data = pgdata(&plan.nodes[i].data_dir);
        Some(Detached {
            pid_file: data.join("postmaster.pid"),
            owner: data.to_string_lossy().into_owned(),
        })
    }
}

/// A node's PostgreSQL data directory, inside the node's own.
fn pgdata(node_dir: &Path) -> PathBuf {
    node_dir.join("pgdata")
}

#[cfg(test)]
mod tests {
    use super::timings;
    use std::time::Duration;

    #[test]
    fn the_lease_is_the_leader_keys_ttl_within_patronis_rule() {
        for ttl in [3, 10, 20, 30, 60] {
            let (t, loop_wait, retry) = timings(Duration::from_secs(ttl)).unwrap();
            assert_eq!(t, ttl);
            assert!(loop_wait + 2 * retry <= ttl, "{ttl}: {loop_wait} {retry}");
            assert!((1..=10).contains(&retry));
        }
        assert_eq!(timings(Duration::from_secs(30)).unwrap(), (30, 1, 10));
        let e = timings(Duration::from_millis(1500)).unwrap_err();
        assert!(
            e.contains("whole seconds, at least 3: found 1500 ms"),
            "{e}"
        );
    }
}
