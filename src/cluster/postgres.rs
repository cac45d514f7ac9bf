//! A private PostgreSQL cluster per node: `initdb` once (trust authentication, the
//! superuser `postgres`), then `postgres -D <data>` on its own loopback port. Clients
//! connect over TCP only: the Unix socket is off, which spares the 107-byte socket
//! path limit that deep run directories would hit.
//!
//! PostgreSQL refuses to run as root: when lockcheck is root, the server and
//! `initdb` run as the `postgres` account Debian's package creates (else `nobody`),
//! which is given the node's data directory.
//!
//! `fsync` is off: a killed postmaster loses nothing the OS has (its WAL is written
//! at every commit); only a machine crash would, and no fault here crashes the
//! machine. It keeps initdb and commits fast on a shared machine.

use super::setup::{hand_over, run_as, unprivileged_user};
use super::ClusterPlan;
use crate::backend::postgres::{conninfo, SUPERUSER};
use anyhow::Result;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

/// The program that creates node `i`'s cluster (`initdb`, as the server's
/// account, which is given the data directory first), if it has none yet: on the
/// first start and after a wipe. Nothing is run here: the local runtime runs it
/// on this machine, the docker runtime in the node's container.
pub(super) fn init(plan: &ClusterPlan, i: usize) -> Result<Option<Command>> {
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
pub(super) fn command(plan: &ClusterPlan, i: usize) -> Result<Command> {
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
pub(super) async fn ready(addr: SocketAddr) -> bool {
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
