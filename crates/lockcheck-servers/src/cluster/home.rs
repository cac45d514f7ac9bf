//! Where a server that refuses to run as root keeps its data when the run
//! directory is out of its reach.
//!
//! PostgreSQL refuses to run as root: when lockcheck is root, its server runs as
//! the `postgres` account, which must pass through every directory above its data.
//! `--results` is often a directory only its owner may enter (`mktemp -d` makes
//! one 0700 in every CI job), and lockcheck does not open the user's directories to
//! others. The nodes' data then go to a directory of their own in the system's
//! temporary directory, which lockcheck makes (a fresh name, search-only for
//! others), journaled before it is made, and `<cluster>/data` points at it while
//! the cluster runs. Once the servers have stopped, both are removed (the logs are
//! in `<cluster>/nodes/`, written by lockcheck itself): the run directory ends up
//! as it would elsewhere, less the data, and `lockcheck recover` removes them
//! after a controller killed with -9.

use anyhow::{bail, Context, Result};
use lockcheck_journal::{Effect, Journal};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The directory a cluster keeps its nodes' data in.
pub struct Home {
    /// What the nodes are given: `wanted` itself, or the stand-in.
    dir: PathBuf,
    /// With a stand-in: `wanted` (a link to it while the cluster runs), and the
    /// journal entry of the two.
    stand_in: Option<(PathBuf, Arc<Journal>, u64)>,
}

/// The prefix of a stand-in's name: `recover` removes nothing else.
pub const STAND_IN_PREFIX: &str = "lockcheck-data-";

impl Home {
    /// `wanted` itself when the server can reach it (it runs as lockcheck's own
    /// account, or every directory above `wanted` lets others pass), else a
    /// stand-in, journaled in `journal_dir`'s journal.
    pub fn new(wanted: PathBuf, refuses_root: bool, journal_dir: &Path) -> Result<Home> {
        let root = nix::unistd::geteuid().is_root();
        let Some((dir, mode)) = blocked(&wanted).filter(|_| refuses_root && root) else {
            return Ok(Home {
                dir: wanted,
                stand_in: None,
            });
        };
        let bases = [std::env::temp_dir(), "/tmp".into(), "/var/tmp".into()];
        let Some(base) = bases
            .iter()
            .find(|b| b.is_dir() && blocked(&b.join("x")).is_none())
        else {
            bail!(
                "the server runs as an unprivileged account, which cannot pass through {} (mode {mode:o}), \
                 and none of {} lets it in either",
                dir.display(),
                bases.map(|b| b.display().to_string()).join(", ")
            );
        };
        let journal = Journal::for_run(journal_dir)?;
        let (stand_in, id) = fresh_dir(base, &wanted, &journal)?;
        if let Some(parent) = wanted.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        let home = Home {
            dir: stand_in.clone(),
            stand_in: Some((wanted.clone(), journal, id)),
        };
        std::os::unix::fs::symlink(&stand_in, &wanted)
            .with_context(|| format!("pointing {} at {}", wanted.display(), stand_in.display()))?;
        Ok(home)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl std::fmt::Debug for Home {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Home({})", self.dir.display())
    }
}

impl Drop for Home {
    /// Dropped once the servers have stopped (the cluster's last field): the
    /// stand-in and the link to it go.
    fn drop(&mut self) {
        let Some((link, journal, id)) = self.stand_in.take() else {
            return;
        };
        match remove(&self.dir, &link).and_then(|_| journal.undone(id)) {
            Ok(()) => {}
            Err(e) => tracing::warn!("{e:#}"),
        }
    }
}

/// Removes a stand-in and the link to it, what is left of them (the undo of
/// [`Effect::StandIn`]); false if neither was there. Only a directory named as
/// lockcheck names its stand-ins is removed.
pub fn remove(dir: &Path, link: &Path) -> Result<bool> {
    let ours = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(STAND_IN_PREFIX));
    if !ours {
        bail!("{} is not a stand-in lockcheck made", dir.display());
    }
    let mut found = false;
    if link.is_symlink() {
        std::fs::remove_file(link).with_context(|| format!("removing {}", link.display()))?;
        found = true;
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        found = true;
    }
    Ok(found)
}

/// The first existing directory above `path` that others may not pass through
/// (no search bit for others), with its mode.
fn blocked(path: &Path) -> Option<(PathBuf, u32)> {
    path.ancestors().skip(1).find_map(|dir| {
        let mode = std::fs::metadata(dir).ok()?.permissions().mode();
        (mode & 0o001 == 0).then(|| (dir.to_path_buf(), mode & 0o7777))
    })
}

/// A new directory under `base` with a name nobody else had (created, never
/// found: a name someone planted is skipped), search-only for others; journaled
/// (with `link`, which will point at it) before it is made.
fn fresh_dir(base: &Path, link: &Path, journal: &Journal) -> Result<(PathBuf, u64)> {
    for _ in 0..100 {
        let dir = base.join(format!("{STAND_IN_PREFIX}{:016x}", rand::random::<u64>()));
        if dir.exists() {
            continue;
        }
        let id = journal.record(Effect::StandIn {
            dir: dir.clone(),
            link: link.to_path_buf(),
        })?;
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))
                    .with_context(|| format!("opening {} to the server", dir.display()))?;
                return Ok((dir, id));
            }
            Err(e) => {
                journal.undone(id)?;
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    continue;
                }
                return Err(e)
                    .with_context(|| format!("creating a directory in {}", base.display()));
            }
        }
    }
    bail!("no free name for a directory in {}", base.display())
}
