//! A private PostgreSQL cluster per node: `initdb` once (trust authentication, the
//! superuser `postgres`), then `postgres -D <data>` on its own loopback port. Clients
//! connect over TCP only: the Unix socket is off, which spares the 107-byte socket
//! path limit that deep run directories would hit.
//!
//! PostgreSQL refuses to run as root: when lockcheck is root, the server and
//! `initdb` run as the `postgres` account Debian's package creates (else `nobody`),
//! which is given the node's data directory (in a stand-in of `cluster::home` when
//! the run directory is out of its reach).
//!
//! `fsync` is off: a killed postmaster loses nothing the OS has (its WAL is written
//! at every commit); only a machine crash would, and no fault here crashes the
//! machine. It keeps initdb and commits fast on a shared machine.

use crate::backends::postgres::client::{conninfo, SUPERUSER};
use crate::cluster::plan::ClusterPlan;
use crate::cluster::recipe::{Init, Ports, ServerBinary, ServerRecipe};
use crate::cluster::setup::{hand_over, run_as, unprivileged_user};
use anyhow::{Context, Result};
use async_trait::async_trait;
use std::io::Write;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

/// Both PostgreSQL backends (advisory lock, lease row) run the same server.
pub(crate) struct Postgres;

#[async_trait]
impl ServerRecipe for Postgres {
    /// Not on PATH in Debian: the versioned directory holds initdb beside it.
    fn persistence(&self, _options: &crate::backend::Options) -> Option<String> {
        Some("PostgreSQL with fsync=off: a killed postmaster keeps what the OS has (its WAL is written at every commit)".into())
    }

    fn binary(&self) -> ServerBinary {
        ServerBinary {
            name: "/usr/lib/postgresql/15/bin/postgres",
            package: "postgresql",
            env: "LOCKCHECK_POSTGRES",
        }
    }

    /// The locks live in one server.
    fn default_nodes(&self) -> usize {
        1
    }

    fn ports(&self, _nodes: usize) -> Ports {
        Ports::client(5432)
    }

    /// When lockcheck is root, it runs as `postgres`.
    fn refuses_root(&self) -> bool {
        true
    }

    /// Its trust rules admit loopback clients only.
    fn namespaces(&self) -> bool {
        false
    }

    fn init(&self, plan: &ClusterPlan, i: usize) -> Result<Option<Init>> {
        Ok(init(plan, i)?.map(|command| Init {
            command,
            what: "initdb",
        }))
    }

    /// A node in a container: clients arrive through Docker's port forwarding,
    /// from the network's gateway, and initdb's trust rules name only loopback.
    /// `samenet` is the run's network, which nothing else is on.
    fn after_init(&self, plan: &ClusterPlan, i: usize) -> Result<()> {
        let node = &plan.nodes[i];
        if node.client_listen.ip().is_loopback() {
            return Ok(());
        }
        let hba = node.data_dir.join("pg_hba.conf");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&hba)
            .with_context(|| format!("opening {}", hba.display()))?;
        writeln!(f, "host all all samenet trust")
            .with_context(|| format!("writing {}", hba.display()))
    }

    fn command(&self, plan: &ClusterPlan, i: usize, _rejoin: bool) -> Result<Command> {
        command(plan, i)
    }

    async fn ready(&self, addr: SocketAddr) -> bool {
        ready(addr).await
    }
}

/// The program that creates node `i`'s cluster (`initdb`, as the server's
/// account, which is given the data directory first), if it has none yet: on the
/// first start and after a wipe. Nothing is run here: the local runtime runs it
/// on this machine, the docker runtime in the node's container.
fn init(plan: &ClusterPlan, i: usize) -> Result<Option<Command>> {
    let node = &plan.nodes[i];
    if node.data_dir.join("PG_VERSION").exists() {
        return Ok(None);
    }
    let user = unprivileged_user(&[SUPERUSER])?;
    std::fs::create_dir_all(&node.data_dir)?;
    if let Some(u) = &user {
        hand_over(&node.data_dir, &plan.spec.dir, u)?;
    }
    let mut initdb = Command::new(plan.binary.with_file_name("initdb"));
    initdb
        .arg("-D")
        .arg(&node.data_dir)
        .args(["-U", SUPERUSER, "-A", "trust", "--no-sync", "-E", "UTF8"])
        .args(["--locale", "C"]);
    run_as(&mut initdb, user.as_ref());
    Ok(Some(initdb))
}

/// The command that runs node `i` (after [`init`]).
fn command(plan: &ClusterPlan, i: usize) -> Result<Command> {
    let node = &plan.nodes[i];
    let user = unprivileged_user(&[SUPERUSER])?;
    let mut cmd = Command::new(&plan.binary);
    cmd.arg("-D")
        .arg(&node.data_dir)
        .arg("-c")
        .arg(format!("listen_addresses={}", node.client_listen.ip()))
        .arg("-c")
        .arg(format!("port={}", node.client_listen.port()))
        .args(["-c", "unix_socket_directories="])
        .args(["-c", "fsync=off", "-c", "max_connections=200"]);
    run_as(&mut cmd, user.as_ref());
    Ok(cmd)
}

/// Whether the node accepts a login and answers a query (not merely the TCP
/// connection, which the postmaster accepts while it still starts up).
pub(crate) async fn ready(addr: SocketAddr) -> bool {
    let Ok(info) = conninfo(&addr.to_string(), Duration::from_secs(1)) else {
        return false;
    };
    let ask = async {
        let (client, conn) = tokio_postgres::connect(&info, tokio_postgres::NoTls)
            .await
            .ok()?;
        let task = tokio::spawn(conn);
        let ok = client.simple_query("SELECT 1").await.is_ok();
        drop(client);
        let _ = task.await;
        Some(ok)
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), ask).await,
        Ok(Some(true))
    )
}
