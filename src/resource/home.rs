//! Where the resource's PostgreSQL keeps its files when the run directory is out
//! of its reach.
//!
//! PostgreSQL refuses to run as root: when lockcheck is root, its server runs as
//! the `postgres` account, which must pass through every directory above its data.
//! `--results` is often a directory only its owner may enter (`mktemp -d` makes
//! one 0700 in every CI job), and lockcheck does not open the user's directories to
//! others. The server's files then go to a directory of their own in the system's
//! temporary directory, which lockcheck makes (a fresh name, search-only for
//! others), and `<run>/resource` points at it while the run goes. When the server
//! has stopped, its logs are copied into `<run>/resource/nodes/` and the rest (the
//! data directory) is removed: the run directory ends up as it would elsewhere.

use anyhow::{bail, Context, Result};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The directory the resource's cluster keeps its files in.
pub struct Home {
    /// What the cluster is given: `wanted` itself, or the stand-in.
    dir: PathBuf,
    /// With a stand-in: `wanted` (a link to it while the run goes).
    wanted: Option<PathBuf>,
}

impl Home {
    /// `wanted` itself when the server can reach it (lockcheck is not root, or
    /// every directory above it lets others pass), else a stand-in.
    pub fn new(wanted: PathBuf) -> Result<Home> {
        if !nix::unistd::geteuid().is_root() || blocked(&wanted).is_none() {
            return Ok(Home {
                dir: wanted,
                wanted: None,
            });
        }
        let bases = [std::env::temp_dir(), "/tmp".into(), "/var/tmp".into()];
        let Some(base) = bases
            .iter()
            .find(|b| b.is_dir() && blocked(&b.join("x")).is_none())
        else {
            let (dir, mode) = blocked(&wanted).expect("blocked, checked above");
            bail!(
                "the resource's PostgreSQL runs as an unprivileged account, which cannot pass through {} (mode {mode:o}), \
                 and none of {} lets it in either",
                dir.display(),
                bases.map(|b| b.display().to_string()).join(", ")
            );
        };
        let dir = fresh_dir(base)?;
        std::os::unix::fs::symlink(&dir, &wanted)
            .with_context(|| format!("pointing {} at {}", wanted.display(), dir.display()))?;
        Ok(Home {
            dir,
            wanted: Some(wanted),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Once the server has stopped: with a stand-in, its logs go to where the run
    /// directory expects them and the rest is removed.
    pub fn close(mut self) -> Result<()> {
        self.settle()
    }

    fn settle(&mut self) -> Result<()> {
        let Some(wanted) = self.wanted.take() else {
            return Ok(());
        };
        std::fs::remove_file(&wanted).with_context(|| format!("removing {}", wanted.display()))?;
        let logs = wanted.join("nodes");
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        let copied = std::fs::read_dir(self.dir.join("nodes"))
            .into_iter()
            .flatten()
            .flatten()
            .try_for_each(|e| {
                std::fs::copy(e.path(), logs.join(e.file_name()))
                    .map(|_| ())
                    .with_context(|| format!("copying {}", e.path().display()))
            });
        let removed = std::fs::remove_dir_all(&self.dir)
            .with_context(|| format!("removing {}", self.dir.display()));
        copied.and(removed)
    }
}

impl Drop for Home {
    /// An interrupted run cleans up as a finished one does (the cluster, dropped
    /// before its home, has stopped the server).
    fn drop(&mut self) {
        if let Err(e) = self.settle() {
            tracing::warn!("{e:#}");
        }
    }
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
/// found: a name someone planted is skipped), search-only for others.
fn fresh_dir(base: &Path) -> Result<PathBuf> {
    for _ in 0..100 {
        let dir = base.join(format!("lockcheck-resource-{:016x}", rand::random::<u64>()));
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))
                    .with_context(|| format!("opening {} to the server", dir.display()))?;
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("creating a directory in {}", base.display()))
            }
        }
    }
    bail!("no free name for a directory in {}", base.display())
}
