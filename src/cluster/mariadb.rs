//! A private MariaDB server per node: `mariadb-install-db` once, then `mariadbd` on
//! its own loopback port, its socket in its data directory. Grant tables are
//! skipped: the lock clients log in without a password, as the trust setup of the
//! PostgreSQL nodes does. As root, the server runs with `--user=root` (mariadbd
//! refuses root otherwise).

use super::ClusterPlan;
use anyhow::Result;
use std::process::Command;

/// The program that creates node `i`'s system tables (`mariadb-install-db`), if
/// its data directory has none yet: on the first start and after a wipe. Nothing
/// is run here: the local runtime runs it on this machine, the docker runtime in
/// the node's container.
pub(super) fn init(plan: &ClusterPlan, i: usize) -> Result<Option<Command>> {
    let node = &plan.nodes[i];
    if node.data_dir.join("mysql").exists() {
        return Ok(None);
    }
    std::fs::create_dir_all(&node.data_dir)?;
    let mut install = Command::new("mariadb-install-db");
    install
        .arg("--no-defaults")
        .arg(format!("--datadir={}", node.data_dir.display()))
        .args(["--auth-root-authentication-method=normal", "--skip-test-db"]);
    if nix::unistd::geteuid().is_root() {
        install.arg("--user=root");
    }
    Ok(Some(install))
}

/// The command that runs node `i` (after [`init`]).
pub(super) fn command(plan: &ClusterPlan, i: usize) -> Result<Command> {
    let node = &plan.nodes[i];
    let mut cmd = Command::new(&plan.binary);
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", node.data_dir.display()))
        .arg(format!("--port={}", node.client_listen.port()))
        .arg(format!("--bind-address={}", node.client_listen.ip()))
        .arg(format!(
            "--socket={}",
            node.data_dir.join("mysqld.sock").display()
        ))
        .args(["--skip-grant-tables", "--skip-name-resolve"])
        .args(["--innodb-flush-log-at-trx-commit=0", "--log-error="]);
    if nix::unistd::geteuid().is_root() {
        cmd.arg("--user=root");
    }
    Ok(cmd)
}
