//! What a database server needs before its first start, shared by the families that
//! need it (PostgreSQL, MariaDB): a one-off initialisation program run with its
//! output in the node's log, and — when lockcheck runs as root — an unprivileged
//! account for a server that refuses to run as root, owning the node's data.

use super::node::{log_tail, NodeSpec};
use anyhow::{bail, Context, Result};
use nix::unistd::{chown, User};
use std::fs::OpenOptions;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs a node's initialisation program (`initdb`, `mariadb-install-db`) to the end,
/// its output appended to the node's log; a failure carries the log's tail. Waits
/// without holding up the runtime: it takes seconds, and a node set up again
/// after a wipe is set up while the run's clients go on.
pub(super) async fn run_to_end(mut cmd: Command, node: &NodeSpec, what: &str) -> Result<()> {
    if let Some(parent) = node.log_path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&node.log_path)
        .with_context(|| format!("opening {}", node.log_path.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0);
    let status = tokio::process::Command::from(cmd)
        .status()
        .await
        .with_context(|| format!("running {what} for node {}", node.name))?;
    if !status.success() {
        bail!(
            "{what} for node {} failed ({status}); last lines of {}:\n{}",
            node.name,
            node.log_path.display(),
            log_tail(&node.log_path)
        );
    }
    Ok(())
}

/// The account a server that refuses root runs as: none when lockcheck is not root
/// (the server runs as lockcheck's own user), else the first of `names` that exists
/// (the account the server's Debian package creates, then `nobody`).
pub fn unprivileged_user(names: &[&str]) -> Result<Option<User>> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    for name in names.iter().chain(&["nobody"]) {
        if let Some(user) = User::from_name(name).with_context(|| format!("looking up {name}"))? {
            return Ok(Some(user));
        }
    }
    bail!(
        "running as root, and none of the accounts {} exists to run the server as",
        names.join(", ")
    )
}

/// Gives `user` the node's data directory (recursively) and the right to pass
/// through (search only, not read) every directory from it up to `run_dir`, which
/// lockcheck made; the directories above `run_dir` are the caller's: they are left
/// alone, and one the server cannot pass through is an error that says so.
pub fn hand_over(data_dir: &Path, run_dir: &Path, user: &User) -> Result<()> {
    chown_tree(data_dir, user)?;
    let mut ours = true;
    for dir in data_dir.ancestors().skip(1) {
        let Ok(meta) = std::fs::metadata(dir) else {
            continue;
        };
        let mode = meta.permissions().mode();
        if mode & 0o001 == 0 {
            if !ours {
                bail!(
                    "the server runs as {} and cannot pass through {} (mode {:o}): \
                     put the results directory somewhere it can reach",
                    user.name,
                    dir.display(),
                    mode & 0o777
                );
            }
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o001))
                .with_context(|| format!("letting {} pass through {}", user.name, dir.display()))?;
        }
        if dir == run_dir {
            ours = false;
        }
    }
    Ok(())
}

fn chown_tree(path: &Path, user: &User) -> Result<()> {
    chown(path, Some(user.uid), Some(user.gid))
        .with_context(|| format!("giving {} to {}", path.display(), user.name))?;
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path)? {
            chown_tree(&entry?.path(), user)?;
        }
    }
    Ok(())
}

/// Makes `cmd` run as `user` (its uid, gid; std drops root's supplementary groups).
pub fn run_as(cmd: &mut Command, user: Option<&User>) {
    if let Some(u) = user {
        cmd.uid(u.uid.as_raw()).gid(u.gid.as_raw());
        if let Some(home) = Some(&u.dir).filter(|d| d.is_dir()) {
            cmd.env("HOME", home);
        }
    }
}
