//! `kind = "disk-full"`: a server node's data disk runs out of space for the
//! fault's duration, then gets it back, as a disk filled by logs or a neighbour
//! does. Recorded as nemesis `disk-full` / `disk-free`.
//!
//! Every node's data directory is a tmpfs of `size_mb` MiB, mounted by this
//! kind's hook ([`Spec::prepare_nodes`]) before the node's first start, so that
//! the server writes its data there from its first instruction (what the recipe
//! wrote before, ZooKeeper's `myid`, is moved onto it). The fault fills a
//! targeted node's tmpfs with a filler file until the kernel answers ENOSPC, and
//! removes the filler when it ends. The tmpfs goes (a lazy unmount, with the
//! node's data) once the cluster's servers have stopped.
//!
//! Both the mount and the filler are journaled before they are made, as this
//! kind's own effect ([`FaultEffect`]): `lockcheck recover` hands them back to
//! `undo` through the catalogue. Local runtime only, as root (a mount).

use super::node::{self, pick, targets, NodeTarget, TIMED};
use super::spec::{Entry, Kind, Refusal, Requirement, Setting, Spec};
use super::{Fault, Scene, Target};
use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use lockcheck_history::fault_ops;
use lockcheck_journal::{ended, Effect, FaultEffect, Journal};
use lockcheck_servers::cluster::{NodeSpec, Prepare, Runtime, DATA_DIR};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use serde_json::{json, Value};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const KIND: Kind = Kind {
    name: "disk-full",
    keys: &["nodes", "size_mb", "restart"],
    instead: &[("target", node::NOT_A_CLIENT)],
    ops: &fault_ops::DISK,
    read: DiskFullSpec::read,
    undo: Some(undo),
    undo_journaled: None,
    requires: Some(requires),
};

/// A node's disk is a tmpfs this machine mounts: root, and nodes run here.
fn requires() -> Vec<Requirement> {
    let root = nix::unistd::geteuid().is_root();
    vec![Requirement {
        name: KIND.name.into(),
        ok: root,
        detail: if root {
            "a node's data disk full (a tmpfs under its data directory): needs root and the \
             local runtime"
                .into()
        } else {
            "needs root and the local runtime: it mounts a tmpfs under each node's data \
             directory, and lockcheck is not running as root"
                .into()
        },
        install: None,
    }]
}

/// The tmpfs's size when the entry says none: room for etcd's and ZooKeeper's
/// 64 MiB preallocated logs; memory is only taken as it fills.
const DEFAULT_SIZE_MB: u64 = 256;

/// The filler's name in a node's data directory.
const FILLER: &str = "lockcheck-disk-full.filler";

/// `kind = "disk-full"`: which nodes, the size of every node's disk, and
/// whether a node that exited while its disk was full is started again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskFullSpec {
    pub nodes: NodeTarget,
    pub size_mb: u64,
    /// Started again on its data once the space is back, as its supervisor
    /// would (Redis with `appendfsync always` exits on a failed write).
    pub restart: bool,
}

impl DiskFullSpec {
    fn read(entry: &mut Entry<'_>, _: &Setting) -> Result<Arc<dyn Spec>> {
        let size_mb = entry.take("size_mb")?.unwrap_or(DEFAULT_SIZE_MB);
        if !(16..=65_536).contains(&size_mb) {
            return Err(entry.bad(
                "size_mb",
                format!("a node's disk of 16 to 65536 MiB, found {size_mb}"),
            ));
        }
        Ok(Arc::new(DiskFullSpec {
            nodes: entry.take("nodes")?.unwrap_or(NodeTarget::One),
            size_mb,
            restart: entry.take("restart")?.unwrap_or(true),
        }))
    }
}

impl Spec for DiskFullSpec {
    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn needs(&self) -> super::spec::Needs {
        node::needs(&self.nodes)
    }

    fn fault(&self, duration: Duration) -> Box<dyn Fault> {
        Box::new(DiskFull {
            nodes: self.nodes.clone(),
            duration,
            size_mb: self.size_mb,
            restart: self.restart,
            fillers: Vec::new(),
        })
    }

    fn prepare_nodes(&self, run_dir: &Path) -> Option<Prepare> {
        let disks = Arc::new(Disks {
            run_dir: run_dir.to_path_buf(),
            size_mb: self.size_mb,
            mounted: Mutex::new(Vec::new()),
        });
        Some(Prepare(Arc::new(move |node: &NodeSpec, _| {
            disks
                .mount(&node.data_dir)
                .with_context(|| format!("mounting {}'s disk (a tmpfs)", node.name))
        })))
    }

    fn refused_by(&self, runtime: Runtime) -> Option<Refusal> {
        if runtime != Runtime::Local {
            return Some(Refusal::not_yet(
                &KIND,
                runtime,
                "a node's disk is a tmpfs lockcheck mounts on this machine under its data directory",
            ));
        }
        (!nix::unistd::geteuid().is_root()).then(|| Refusal {
            key: "kind",
            why: "disk-full mounts a tmpfs under each node's data directory: run lockcheck as root"
                .into(),
        })
    }
}

/// The tmpfs under each node's data directory, journaled; unmounted when the
/// hook holding them is dropped with the cluster, after its servers stopped.
struct Disks {
    run_dir: PathBuf,
    size_mb: u64,
    /// Each mount point and its journal entry.
    mounted: Mutex<Vec<(PathBuf, u64)>>,
}

impl Disks {
    /// Mounts the node's disk at `data` unless it is there (a restart).
    fn mount(&self, data: &Path) -> Result<()> {
        let data = fs::canonicalize(data).with_context(|| format!("finding {}", data.display()))?;
        if is_tmpfs(&data)? {
            return Ok(());
        }
        // What the recipe wrote before the start (ZooKeeper's myid) goes onto the
        // tmpfs, which would hide it.
        let meta = fs::metadata(&data)?;
        let aside = data.with_extension("before-disk");
        let moved = fs::read_dir(&data)?.next().is_some();
        if moved {
            fs::rename(&data, &aside)?;
            fs::create_dir(&data)?;
        }
        let journal = Journal::for_run(&self.run_dir)?;
        let id = journal.record(effect(
            format!("a {} MiB tmpfs at {}", self.size_mb, data.display()),
            "mount",
            &data,
        ))?;
        let options = format!(
            "size={}m,mode={:o},uid={},gid={}",
            self.size_mb,
            meta.permissions().mode() & 0o7777,
            meta.uid(),
            meta.gid()
        );
        let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
        if let Err(e) = mount(Some("tmpfs"), &data, Some("tmpfs"), flags, Some(&*options)) {
            journal.undone(id)?;
            bail!("mount -t tmpfs -o {options} on {}: {e}", data.display());
        }
        self.mounted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((data.clone(), id));
        if moved {
            let copied = std::process::Command::new("cp")
                .arg("-a")
                .arg(aside.join("."))
                .arg(&data)
                .status()?;
            if !copied.success() {
                bail!("cp -a {}/. {}: {copied}", aside.display(), data.display());
            }
            fs::remove_dir_all(&aside)?;
        }
        Ok(())
    }
}

impl Drop for Disks {
    fn drop(&mut self) {
        let mounted = std::mem::take(self.mounted.get_mut().unwrap_or_else(|e| e.into_inner()));
        let Ok(journal) = Journal::for_run(&self.run_dir) else {
            return;
        };
        for (data, id) in mounted {
            match unmount(&data).and_then(|_| journal.undone(id)) {
                Ok(()) => {}
                Err(e) => tracing::warn!("{e:#}"),
            }
        }
    }
}

/// Fills the disks of the nodes it picks; frees them when it ends.
struct DiskFull {
    nodes: NodeTarget,
    duration: Duration,
    size_mb: u64,
    restart: bool,
    fillers: Vec<Filler>,
}

#[async_trait]
impl Fault for DiskFull {
    fn target(&self) -> &Target {
        &TIMED
    }

    async fn start(&mut self, scene: &mut Scene<'_>) -> Result<Option<Value>> {
        let Some((names, dir)) = pick(&self.nodes, scene).await? else {
            return Ok(None);
        };
        let up: Vec<String> = {
            let cluster = scene.cluster.expect("pick checked").lock().await;
            names.into_iter().filter(|n| cluster.is_up(n)).collect()
        };
        if up.is_empty() {
            return Ok(None); // all down: try later
        }
        let journal = Journal::for_run(&dir)?;
        let data = dir.join(DATA_DIR);
        let fillers = tokio::task::spawn_blocking(move || {
            up.iter()
                .map(|n| Filler::fill(journal.clone(), n, &data.join(n)))
                .collect::<Result<Vec<_>>>()
        })
        .await??;
        let mut value = targets(&fillers.iter().map(|f| f.node.clone()).collect::<Vec<_>>());
        value["duration_ms"] = json!(self.duration.as_millis() as u64);
        value["size_mb"] = json!(self.size_mb);
        value["filled_bytes"] = fillers
            .iter()
            .map(|f| (f.node.clone(), json!(f.bytes)))
            .collect();
        self.fillers = fillers;
        Ok(Some(value))
    }

    async fn stop(&mut self, scene: &mut Scene<'_>) -> Result<Value> {
        let fillers = std::mem::take(&mut self.fillers);
        let names: Vec<String> = fillers.iter().map(|f| f.node.clone()).collect();
        // Every one is removed; the first failure is reported after.
        tokio::task::spawn_blocking(move || {
            fillers
                .into_iter()
                .map(Filler::remove)
                .fold(Ok(()), Result::and)
        })
        .await??;
        let mut value = targets(&names);
        let Some(cluster) = scene.cluster else {
            return Ok(value);
        };
        let mut cluster = cluster.lock().await;
        // Which servers the full disk ended: said in the history, whatever follows.
        let exited: Vec<String> = names
            .into_iter()
            .filter(|n| cluster.pid(n).is_none_or(|pid| ended(pid as i32)))
            .collect();
        value["exited"] = json!(exited);
        if self.restart && !exited.is_empty() {
            cluster.restart_together(&exited).await?;
            value["restarted"] = json!(exited);
        }
        Ok(value)
    }
}

/// A file filling a node's disk to the last byte; removed by
/// [`Filler::remove`] or on drop.
struct Filler {
    node: String,
    path: Option<PathBuf>,
    bytes: u64,
    journal: Arc<Journal>,
    id: u64,
}

impl Filler {
    /// Writes a filler in `data` (node `node`'s data directory, which must be
    /// this kind's tmpfs) until ENOSPC.
    fn fill(journal: Arc<Journal>, node: &str, data: &Path) -> Result<Filler> {
        let data = fs::canonicalize(data)?;
        if !is_tmpfs(&data)? {
            bail!(
                "{node}'s data directory {} is not the tmpfs disk-full mounts: the disk cannot be filled",
                data.display()
            );
        }
        let path = data.join(FILLER);
        let id = journal.record(effect(
            format!("the filler {}", path.display()),
            "filler",
            &path,
        ))?;
        let mut filler = Filler {
            node: node.to_string(),
            path: Some(path.clone()),
            bytes: 0,
            journal,
            id,
        };
        let mut file = fs::File::create(&path)?;
        let chunk = vec![0u8; 1 << 20];
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(n) => filler.bytes += n as u64,
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => break,
                Err(e) => return Err(e).with_context(|| format!("filling {}", path.display())),
            }
        }
        Ok(filler)
    }

    fn remove(mut self) -> Result<()> {
        self.free()
    }

    fn free(&mut self) -> Result<()> {
        let Some(path) = self.path.take() else {
            return Ok(());
        };
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", path.display()))
            }
            _ => {}
        }
        self.journal.undone(self.id)
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        let _ = self.free();
    }
}

/// This kind's journal effect: `what`, and the path under `key`.
fn effect(what: String, key: &str, path: &Path) -> Effect {
    let mut data = serde_json::Map::new();
    data.insert(key.into(), json!(path));
    Effect::Fault(FaultEffect {
        kind: KIND.name.into(),
        what,
        data,
    })
}

/// Undoes what a killed controller left of this kind ([`Kind::undo`]): a filler
/// removed, a tmpfs unmounted (lazily: a server of the run may still hold it).
fn undo(effect: &FaultEffect) -> Result<String> {
    if let Some(path) = effect.str("filler") {
        return Ok(match fs::remove_file(path) {
            Ok(()) => "removed".into(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "already gone".into(),
            Err(e) => return Err(e).with_context(|| format!("removing {path}")),
        });
    }
    let Some(data) = effect.str("mount") else {
        bail!("neither a filler nor a mount: {effect:?}");
    };
    let data = Path::new(data);
    Ok(match is_tmpfs(data)? {
        true => {
            unmount(data)?;
            "unmounted".into()
        }
        false => "nothing left".into(),
    })
}

fn unmount(data: &Path) -> Result<()> {
    umount2(data, MntFlags::MNT_DETACH).with_context(|| format!("unmounting {}", data.display()))
}

/// Whether a tmpfs is mounted at `path` (as /proc/self/mountinfo names it).
fn is_tmpfs(path: &Path) -> Result<bool> {
    let info = fs::read_to_string("/proc/self/mountinfo")?;
    Ok(mounted_at(&info, path) == Some("tmpfs"))
}

/// The type of the last file system mounted at `path` in a mountinfo text.
fn mounted_at<'a>(info: &'a str, path: &Path) -> Option<&'a str> {
    info.lines().rev().find_map(|line| {
        let (mine, theirs) = line.split_once(" - ")?;
        let point = mine.split(' ').nth(4)?;
        (unescape(point) == path.to_string_lossy()).then(|| theirs.split(' ').next())?
    })
}

/// A mountinfo path: spaces, tabs, newlines and backslashes come as `\ooo`.
fn unescape(s: &str) -> String {
    let (mut out, b) = (Vec::new(), s.as_bytes());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).filter(|_| b[i] == b'\\');
        match octal.and_then(|o| u8::from_str_radix(std::str::from_utf8(o).ok()?, 8).ok()) {
            Some(c) => {
                out.push(c);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_mount_at_a_path_is_found_with_its_escapes() {
        let info = "22 1 8:1 / /r/data/n\\0401 rw - ext4 /dev/sda1 rw\n\
                    23 22 0:5 / /r/data/n\\0401 rw,nosuid - tmpfs tmpfs rw,size=262144k\n\
                    24 1 0:6 / /r/data/n2 rw - ext4 /dev/sda1 rw\n";
        assert_eq!(mounted_at(info, Path::new("/r/data/n 1")), Some("tmpfs"));
        assert_eq!(mounted_at(info, Path::new("/r/data/n2")), Some("ext4"));
        assert_eq!(mounted_at(info, Path::new("/r/data")), None);
    }
}
