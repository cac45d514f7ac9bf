//! A private MariaDB server per node: `mariadb-install-db` once, then `mariadbd` on
//! its own loopback port, its socket in its data directory. Grant tables are
//! skipped: the lock clients log in without a password, as the trust setup of the
//! PostgreSQL nodes does. As root, the server runs with `--user=root` (mariadbd
//! refuses root otherwise).

use crate::cluster::plan::ClusterPlan;
use crate::cluster::recipe::{Init, Ports, ServerBinary, ServerRecipe};
use anyhow::{Context, Result};
use async_trait::async_trait;
use std::net::SocketAddr;
use std::process::Command;

pub(crate) struct Mariadb;

#[async_trait]
impl ServerRecipe for Mariadb {
    fn binary(&self) -> ServerBinary {
        ServerBinary {
            name: "mariadbd",
            package: "mariadb-server",
            env: "LOCKCHECK_MARIADBD",
        }
    }

    /// The locks live in one server.
    fn default_nodes(&self) -> usize {
        1
    }

    fn ports(&self, _nodes: usize) -> Ports {
        Ports::client(3306)
    }

    /// As lockcheck sets it up, it admits loopback clients only.
    fn namespaces(&self) -> bool {
        false
    }

    fn init(&self, plan: &ClusterPlan, i: usize) -> Result<Option<Init>> {
        Ok(init(plan, i)?.map(|command| Init {
            command,
            what: "mariadb-install-db",
        }))
    }

    fn command(&self, plan: &ClusterPlan, i: usize, _rejoin: bool) -> Result<Command> {
        command(plan, i)
    }

    /// The server's greeting packet carries its version, MariaDB's included.
    async fn ready(&self, addr: SocketAddr) -> bool {
        crate::backend::probe::answers(addr, b"", "MariaDB").await
    }
}

/// The program that creates node `i`'s system tables (`mariadb-install-db`), if
/// its data directory has none yet: on the first start and after a wipe. Nothing
/// is run here: the local runtime runs it on this machine, the docker runtime in
/// the node's container.
fn init(plan: &ClusterPlan, i: usize) -> Result<Option<Command>> {
    let node = &plan.nodes[i];
    if node.data_dir.join("mysql").exists() {
        return Ok(None);
    }
    std::fs::create_dir_all(&node.data_dir)?;
    let tmp = tmp_dir(plan, i)?;
    let mut install = Command::new("mariadb-install-db");
    install
        .arg("--no-defaults")
        .arg(format!("--datadir={}", node.data_dir.display()))
        .arg(format!("--tmpdir={}", tmp.display()))
        .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
        .arg(REDO_LOG);
    if nix::unistd::geteuid().is_root() {
        install.arg("--user=root");
    }
    Ok(Some(install))
}

/// Node `i`'s directory for temporary tables, beside its data directory (a wipe
/// leaves it) and inside the run's directory (mounted in its container). Not
/// the machine's /tmp: there the bootstrap's temporary tables, named by process
/// id, vanished under concurrent installs ("Could not remove temporary table
/// ... error: 2", then "Unknown table 'mysql.tmp_user_sys'") and the node never
/// started.
fn tmp_dir(plan: &ClusterPlan, i: usize) -> Result<std::path::PathBuf> {
    let data = &plan.nodes[i].data_dir;
    let mut name = data.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = data.with_file_name(name);
    std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    Ok(tmp)
}

/// InnoDB's redo log, for installation and server alike: the default 96 MiB file
/// is written, copied and removed in every run, for a lock workload that writes
/// next to nothing (measured: the data directory 114 MiB with it, 22 MiB without).
const REDO_LOG: &str = "--innodb-log-file-size=8M";

/// The Unix socket a node's server insists on making (its clients use TCP),
/// relative: the server moves into its data directory before it binds, so the
/// socket lands there however deep the data directory is (a socket's path may
/// hold 107 bytes, which a deep `--results` passes), and goes with the run's
/// directory: nothing is left outside it when a node is killed with -9.
const SOCKET: &str = "mysqld.sock";

/// The command that runs node `i` (after [`init`]).
fn command(plan: &ClusterPlan, i: usize) -> Result<Command> {
    let node = &plan.nodes[i];
    let mut cmd = Command::new(&plan.binary);
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", node.data_dir.display()))
        .arg(format!("--port={}", node.client_listen.port()))
        .arg(format!("--bind-address={}", node.client_listen.ip()))
        .arg(format!("--socket={SOCKET}"))
        .arg(format!("--tmpdir={}", tmp_dir(plan, i)?.display()))
        .args(["--skip-grant-tables", "--skip-name-resolve"])
        .args(["--innodb-flush-log-at-trx-commit=0", "--log-error="])
        .arg(REDO_LOG);
    if nix::unistd::geteuid().is_root() {
        cmd.arg("--user=root");
    }
    Ok(cmd)
}
