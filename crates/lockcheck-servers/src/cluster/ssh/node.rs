//! A node's host as a hook or a fault sees it (the `ssh` runtime): the node's own
//! directory there, files put into it (removed with it at the end of the run,
//! and by `lockcheck recover`), scripts run there through the run's connection,
//! and the first bytes of the program the node runs. What the files are for (a
//! clock interposer, say) is the caller's business: the cluster knows no fault.

use super::host::{quote, Host};
use crate::cluster::node::NodeSpec;
use anyhow::{bail, Context, Result};
use base64::Engine;
use lockcheck_journal::RemoteHost;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

/// One node's host, its directory there and its program.
#[derive(Debug, Clone)]
pub struct NodeHost {
    pub(super) host: Host,
    pub(super) node: String,
    /// `<remote_dir>/lockcheck-<run>-<node>`: journaled, removed at the end.
    pub(super) home: PathBuf,
    /// The server program as the node's command names it (a path on the host,
    /// or a name the host looks up).
    pub(super) program: PathBuf,
}

/// A change to a node's command made on its host before each of its starts,
/// restarts included: files put into its directory there, its environment
/// pointed at them. The ssh runtime's counterpart of [`crate::cluster::Prepare`],
/// whose paths would be this machine's.
#[derive(Clone)]
pub struct HostPrepare(pub Arc<HostPrepareFn>);

/// What a [`HostPrepare`] runs: the node about to start, its command, its host.
pub type HostPrepareFn = dyn Fn(&NodeSpec, &mut Command, &NodeHost) -> Result<()> + Send + Sync;

impl std::fmt::Debug for HostPrepare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostPrepare(..)")
    }
}

impl NodeHost {
    /// The host, as the journal records it.
    pub fn remote(&self) -> &RemoteHost {
        &self.host.remote
    }

    /// The host itself, reached through the run's connection.
    pub fn host(&self) -> &Host {
        &self.host
    }

    pub fn host_name(&self) -> &str {
        self.host.name()
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// The node's own directory on its host.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The server program's name, as a verdict names it.
    pub fn program_name(&self) -> String {
        self.program
            .file_name()
            .unwrap_or(self.program.as_os_str())
            .to_string_lossy()
            .into_owned()
    }

    /// Runs `script` on the host (see [`Host::run`]).
    pub fn run(&self, script: &str) -> Result<String> {
        self.host.run(script)
    }

    /// Writes `files` (name, content) into the node's directory, executable, in
    /// one round trip. Each is written aside and renamed: a process loading one
    /// never sees half of it. Returns their paths on the host.
    pub fn put(&self, files: &[(&str, &[u8])]) -> Result<Vec<PathBuf>> {
        let home = quote(&self.home.to_string_lossy());
        let mut script = format!("mkdir -p {home} || exit 1\n");
        let mut paths = Vec::new();
        for (name, bytes) in files {
            if name.contains('/') || name.starts_with('.') {
                bail!("{name} is no file name of the node's directory");
            }
            let path = self.home.join(name);
            let (to, aside) = (
                quote(&path.to_string_lossy()),
                quote(&self.home.join(format!(".{name}.tmp")).to_string_lossy()),
            );
            let text = base64::engine::general_purpose::STANDARD.encode(bytes);
            script.push_str(&format!(
                "base64 -d >{aside} <<'LOCKCHECK_FILE' || exit 1\n{text}\nLOCKCHECK_FILE\n\
                 chmod 755 {aside} && mv -f {aside} {to} || exit 1\n"
            ));
            paths.push(path);
        }
        self.host
            .run(&script)
            .with_context(|| format!("copying {} to host {}", names(files), self.host_name()))?;
        Ok(paths)
    }

    /// The first `len` bytes of the program the node runs, as its host finds
    /// it (on its `PATH` or in `/usr/sbin`); none if the host has no such
    /// program.
    pub fn program_head(&self, len: usize) -> Result<Option<Vec<u8>>> {
        let out = self.host.run(&format!(
            "p=$(lc_which {}) || {{ echo missing; exit 0; }}\necho head; head -c {len} \"$p\" | base64",
            quote(&self.program.to_string_lossy())
        ))?;
        let Some(text) = out.strip_prefix("head\n") else {
            return Ok(None);
        };
        let text: String = text.split_whitespace().collect();
        let head = base64::engine::general_purpose::STANDARD
            .decode(text)
            .with_context(|| {
                format!(
                    "reading {} on host {}",
                    self.program.display(),
                    self.host_name()
                )
            })?;
        Ok(Some(head))
    }
}

fn names(files: &[(&str, &[u8])]) -> String {
    files.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}
