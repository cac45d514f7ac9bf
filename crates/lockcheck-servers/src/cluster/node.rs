//! One node of a cluster, whatever runs it: its name, addresses and files, and the
//! tail of its log for messages. The base of `cluster`: it imports no sibling.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// One node's identity, addresses and files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// n1, n2, ...
    pub name: String,
    /// Where the server accepts clients.
    pub client_listen: SocketAddr,
    /// What clients are told to dial: the listen address, unless a proxy is in between.
    pub client_advertise: SocketAddr,
    /// Where the server accepts its peers (etcd), if it has any.
    pub peer_listen: Option<SocketAddr>,
    /// What peers are told to dial to reach this node.
    pub peer_advertise: Option<SocketAddr>,
    /// Where a ZooKeeper server listens for leader election (its peer address is
    /// for the quorum's traffic).
    pub election: Option<SocketAddr>,
    pub data_dir: PathBuf,
    pub log_path: PathBuf,
}

/// The last lines of a node's log, for error messages.
pub fn log_tail(path: &Path) -> String {
    const TAIL: u64 = 2000;
    let read = || -> std::io::Result<String> {
        let mut f = File::open(path)?;
        let len = f.metadata()?.len();
        f.seek(SeekFrom::Start(len.saturating_sub(TAIL)))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    read().unwrap_or_else(|e| format!("(could not read the log: {e})"))
}

/// Removes what `dir` holds, keeping the directory itself: it may be a mount
/// point (a node's disk of a fault's), which cannot be removed.
pub(super) fn empty(dir: &Path) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        r => r?,
    };
    for entry in entries {
        let path = entry?.path();
        if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}
