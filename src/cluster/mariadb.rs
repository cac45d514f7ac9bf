//! A private MariaDB server per node: `mariadb-install-db` once, then `mariadbd` on
//! its own loopback port, its socket in its data directory. Grant tables are
//! skipped: the lock clients log in without a password, as the trust setup of the
//! PostgreSQL nodes does. As root, the server runs with `--user=root` (mariadbd
//! refuses root otherwise).

use super::setup::run_to_end;
use super::ClusterPlan;
use anyhow::Result;
use std::process::Command;

/// The command that runs node `i`, after creating its data directory's system
/// tables on the first start (or after a wipe).
pub(super) fn command(plan: &ClusterPlan, i: usize) -> Result<Command> {
    let node = &plan.nodes[i];
    let as_root = nix::unistd::geteuid().is_root();
    if !node.data_dir.join("mysql").exists() {
        std::fs::create_dir_all(&node.data_dir)?;
        let mut install = Command::new("mariadb-install-db");
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", node.data_dir.display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"]);
        if as_root {
            install.arg("--user=root");
        }
        run_to_end(install, node, "mariadb-install-db")?;
    }
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
    if as_root {
        cmd.arg("--user=root");
    }
    Ok(cmd)
}
