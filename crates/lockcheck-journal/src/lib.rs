//! The journal: what the controller changed outside itself, written down before
//! (or as) it changes it, so that `lockcheck recover` can undo whatever a
//! controller killed with -9 left behind: a server still running, a process
//! still stopped, a clock still skewed.
//!
//! It sits at the bottom of the house: the servers (`cluster`), the faults and
//! the run write to it, and `recover` (above them all) reads it and undoes each
//! effect. So it knows none of them: an effect here is data, what was applied
//! and how to name it; how to undo it is `recover`'s business.
//!
//! `<run_dir>/journal.jsonl`, one JSON object per line, each written with one
//! `write` on an append-only file (so a kill loses at most the line being
//! written): `{"id": 3, "do": {"effect": "stopped", ...}}` when an effect is
//! applied, `{"undo": 3}` when it has been undone.
//!
//! Processes are named by pid *and* start time (field 22 of `/proc/<pid>/stat`):
//! a pid the kernel has since given to another program is never signalled.

use anyhow::{Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

pub const JOURNAL_FILE: &str = "journal.jsonl";

/// A process, named so that it cannot be mistaken for a later one with its pid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proc {
    /// What the run calls it: `n1`, `client-3`, `resource`.
    pub name: String,
    pub pid: i32,
    /// Clock ticks after boot at which it started (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
}

impl Proc {
    /// The live process `pid`, named `name`.
    pub fn of(name: impl Into<String>, pid: i32) -> Result<Proc> {
        let start_time =
            start_time(pid).with_context(|| format!("process {pid} is not running"))?;
        Ok(Proc {
            name: name.into(),
            pid,
            start_time,
        })
    }

    /// Whether this very process still exists (the pid was not reused).
    pub fn alive(&self) -> bool {
        start_time(self.pid) == Some(self.start_time)
    }

    /// Sends `sig` to this process. Ask [`Proc::alive`] first: the pid alone may
    /// by now name another program.
    pub fn signal(&self, sig: Signal) -> Result<()> {
        kill(Pid::from_raw(self.pid), sig)
            .with_context(|| format!("sending {sig} to {} (pid {})", self.name, self.pid))
    }
}

/// The fields of /proc/PID/stat from field 3 (the state) on; None once the
/// process is gone. The command name before them, in parentheses, may hold
/// spaces and parentheses itself: the fields start after its last ") ".
pub fn stat_fields(pid: i32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat.rsplit_once(") ")?.1.to_string())
}

/// The start time of a live process, in clock ticks after boot (field 22).
pub fn start_time(pid: i32) -> Option<u64> {
    stat_fields(pid)?.split_whitespace().nth(19)?.parse().ok()
}

/// Whether a live process is stopped (SIGSTOP): state `T`.
pub fn is_stopped(pid: i32) -> bool {
    stat_fields(pid).is_some_and(|rest| rest.starts_with('T'))
}

/// Whether a process has ended: gone, or a zombie its parent (or an init that
/// reaps late) has yet to wait for.
pub fn ended(pid: i32) -> bool {
    stat_fields(pid).is_none_or(|rest| rest.starts_with('Z'))
}

/// The process group of a live process (field 5 of /proc/PID/stat).
pub fn process_group(pid: i32) -> Option<i32> {
    stat_fields(pid)?.split_whitespace().nth(2)?.parse().ok()
}

/// The processes of group `group` that have not ended, the leader among them.
pub fn group_members(group: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut members: Vec<i32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| process_group(pid) == Some(group) && !ended(pid))
        .collect();
    members.sort_unstable();
    members
}

/// One thing the controller changed outside itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "kebab-case")]
pub enum Effect {
    /// A process the run started (server node, worker, resource): undone by
    /// killing it.
    Process(Proc),
    /// A process stopped with SIGSTOP: undone by SIGCONT.
    Stopped(Proc),
    /// A server process a node's own server started apart from itself, which
    /// outlives it (Patroni's PostgreSQL, detached from its agent), known by the
    /// pid file it keeps: undone by killing the process that file names, if that
    /// process's command line still names `owner` (its data directory), never a
    /// pid reused by another program.
    Detached {
        node: String,
        pid_file: PathBuf,
        owner: String,
    },
    /// A clock file a process reads its skew from: undone by resetting it.
    ClockSkew { target: String, file: PathBuf },
    /// A proxied link cut or slowed. The proxy lives in the controller, so its
    /// links heal when the controller dies; recorded for the account.
    Link { link: String, mode: String },
    /// Docker objects (containers, network, volumes) labelled with this run id:
    /// undone by removing them all.
    Containers { run: String },
    /// The network namespaces, bridge and veths of the run with this id
    /// (`cluster::netns`): undone by removing them all, once its processes are
    /// gone.
    Network { id: String },
    /// iptables rules cutting node-to-node links inside one node's namespace:
    /// undone by deleting them (they also go with the namespace).
    NodeCut {
        namespace: String,
        rules: Vec<String>,
    },
    /// A local node's processes frozen in a cgroup made for the pause: undone by
    /// thawing them and removing it.
    Frozen { node: String, cgroup: PathBuf },
    /// A directory made in the temporary directory for servers' data the run
    /// directory was out of their reach for, and the link to it there: undone by
    /// removing both.
    StandIn { dir: PathBuf, link: PathBuf },
    /// A server the run started on another host over SSH (the `ssh` runtime):
    /// undone by killing it there, if it is still that process.
    RemoteProcess { host: RemoteHost, proc: Proc },
    /// A process on another host stopped with SIGSTOP: undone by SIGCONT there.
    RemoteStopped { host: RemoteHost, proc: Proc },
    /// The directory of the run's server data and logs on another host: undone
    /// by removing it.
    RemoteDir { host: RemoteHost, dir: PathBuf },
    /// An iptables chain of lockcheck's on another host, jumped to from the
    /// OUTPUT chain of its table (`filter`: cutting links between nodes; `nat`:
    /// sending them through the controller's proxies): undone by removing both.
    RemoteChain {
        host: RemoteHost,
        chain: String,
        /// Absent from journals written before the `nat` chains: `filter`.
        #[serde(default = "filter_table")]
        table: String,
    },
    /// A node's clock page on another host (the `ssh` runtime): undone by
    /// resetting it there, with lockcheck's page writer beside it.
    RemoteClockSkew {
        host: RemoteHost,
        target: String,
        file: PathBuf,
    },
    /// An effect one kind of fault makes and alone undoes (a disk filled): its
    /// data, which `recover` hands to that kind's undo through the catalogue.
    Fault(FaultEffect),
}

/// What one kind of fault changed, as it wrote it down: `{"effect": "fault",
/// "kind": "disk-full", "what": "...", ...its own fields}`. The journal keeps it
/// as data, knowing no kind: a new fault journals what it changes without a line
/// here or in `recover`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultEffect {
    /// The kind's name, as workloads write it: whose undo takes it.
    pub kind: String,
    /// How to name it in what `recover` did and in its warnings.
    pub what: String,
    /// The kind's own fields, which its undo reads.
    #[serde(flatten)]
    pub data: serde_json::Map<String, serde_json::Value>,
}

impl FaultEffect {
    /// Its field `key`, a string (a path, a name), if it has one.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.data.get(key).and_then(serde_json::Value::as_str)
    }
}

fn filter_table() -> String {
    "filter".into()
}

/// A host reached over SSH, as the run reached it: its name as the user's SSH
/// configuration knows it, and the configuration file the run was given instead
/// of the user's own, if one was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteHost {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_config: Option<PathBuf>,
}

impl Effect {
    /// How `recover` names it, in what it did and in its warnings.
    pub fn describe(&self) -> String {
        match self {
            Effect::Process(p) => format!("process {} (pid {})", p.name, p.pid),
            Effect::Stopped(p) => format!("stopped {} (pid {})", p.name, p.pid),
            Effect::Detached { node, pid_file, .. } => {
                format!("server detached by {node} ({})", pid_file.display())
            }
            Effect::ClockSkew { target, file } => {
                format!("clock of {target} ({})", file.display())
            }
            Effect::Link { link, mode } => format!("link {link} ({mode})"),
            Effect::Containers { run } => format!("docker objects of run {run}"),
            Effect::Network { id } => format!("network namespaces of run {id}"),
            Effect::NodeCut { namespace, rules } => {
                format!("{} node link rule(s) in {namespace}", rules.len())
            }
            Effect::Frozen { node, cgroup } => format!("frozen {node} ({})", cgroup.display()),
            Effect::StandIn { dir, link } => {
                format!("data directory {} ({})", dir.display(), link.display())
            }
            Effect::RemoteProcess { host, proc } => {
                format!(
                    "process {} (pid {}) on host {}",
                    proc.name, proc.pid, host.name
                )
            }
            Effect::RemoteStopped { host, proc } => {
                format!(
                    "stopped {} (pid {}) on host {}",
                    proc.name, proc.pid, host.name
                )
            }
            Effect::RemoteDir { host, dir } => {
                format!("directory {} on host {}", dir.display(), host.name)
            }
            Effect::RemoteChain { host, chain, table } => {
                format!("iptables chain {chain} ({table}) on host {}", host.name)
            }
            Effect::RemoteClockSkew { host, target, file } => {
                format!(
                    "clock of {target} ({}) on host {}",
                    file.display(),
                    host.name
                )
            }
            Effect::Fault(f) => format!("{} ({} fault)", f.what, f.kind),
        }
    }
}

/// The controller's side of the journal.
pub struct Journal {
    path: PathBuf,
    file: Mutex<File>,
    next: AtomicU64,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Line {
    Do {
        id: u64,
        #[serde(rename = "do")]
        effect: Effect,
    },
    Undo {
        undo: u64,
    },
}

impl Journal {
    /// The journal of `run_dir`, shared by everything in this process that
    /// writes to it (the controller, each fault), so that ids never collide.
    pub fn for_run(run_dir: &Path) -> Result<Arc<Journal>> {
        static OPEN: Mutex<BTreeMap<PathBuf, Weak<Journal>>> = Mutex::new(BTreeMap::new());
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|_, j| j.strong_count() > 0);
        if let Some(j) = open.get(run_dir).and_then(Weak::upgrade) {
            return Ok(j);
        }
        let j = Arc::new(Journal::open(run_dir)?);
        open.insert(run_dir.to_path_buf(), Arc::downgrade(&j));
        Ok(j)
    }

    /// Opens (or continues) the journal of `run_dir`. Within one process, use
    /// [`Journal::for_run`]: two handles on one file would hand out the same ids.
    fn open(run_dir: &Path) -> Result<Journal> {
        let path = run_dir.join(JOURNAL_FILE);
        let next = match read(&path) {
            Ok(j) => j.last_id + 1,
            Err(_) => 1,
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Journal {
            path,
            file: Mutex::new(file),
            next: AtomicU64::new(next),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes down an effect; call it before applying the effect (or right as
    /// it is applied, where its pid only exists afterwards). Returns its id.
    pub fn record(&self, effect: Effect) -> Result<u64> {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        self.write(&Line::Do { id, effect })?;
        Ok(id)
    }

    /// Writes down that effect `id` was undone.
    pub fn undone(&self, id: u64) -> Result<()> {
        self.write(&Line::Undo { undo: id })
    }

    fn write(&self, line: &Line) -> Result<()> {
        let mut text = serde_json::to_string(line)?;
        text.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        // One write per line: a kill between two lines never leaves half of one
        // before the next.
        file.write_all(text.as_bytes())
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

/// What a journal says is still in effect.
pub struct Pending {
    /// Effects applied and not undone, in the order they were applied.
    pub effects: Vec<(u64, Effect)>,
    /// Lines that could not be read (a torn last line, for one).
    pub warnings: Vec<String>,
    last_id: u64,
}

fn read(path: &Path) -> Result<Pending> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut applied = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut last_id = 0;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Line>(line) {
            Ok(Line::Do { id, effect }) => {
                last_id = last_id.max(id);
                applied.insert(id, effect);
            }
            Ok(Line::Undo { undo }) => {
                applied.remove(&undo);
            }
            Err(e) => warnings.push(format!(
                "{}:{}: unreadable line ({e})",
                path.display(),
                n + 1
            )),
        }
    }
    Ok(Pending {
        effects: applied.into_iter().collect(),
        warnings,
        last_id,
    })
}

/// The effects of `run_dir`'s journal still in effect.
pub fn pending(run_dir: &Path) -> Result<Pending> {
    read(&run_dir.join(JOURNAL_FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group's members are its live processes: a zombie (killed, not yet
    /// waited for) has ended and is none of them.
    #[test]
    fn a_killed_group_has_no_members_even_before_it_is_reaped() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert_eq!(process_group(pid), Some(pid));
        assert_eq!(group_members(pid), [pid]);
        assert!(!ended(pid));
        child.kill().unwrap();
        // Not waited for yet: a zombie, or on its way to being one.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !ended(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(ended(pid), "{:?}", stat_fields(pid));
        assert!(group_members(pid).is_empty());
        child.wait().unwrap();
        assert!(ended(pid) && process_group(pid).is_none());
    }

    #[test]
    fn pending_keeps_what_was_not_undone_and_survives_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path()).unwrap();
        let link = |l: &str| Effect::Link {
            link: l.into(),
            mode: "blackhole".into(),
        };
        let a = j.record(link("a")).unwrap();
        let b = j.record(link("b")).unwrap();
        j.undone(a).unwrap();
        drop(j);
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.path().join(JOURNAL_FILE))
            .unwrap();
        f.write_all(b"{\"id\": 9, \"do\": {\"eff").unwrap();
        let p = pending(dir.path()).unwrap();
        assert_eq!(p.effects, vec![(b, link("b"))]);
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        // A continued journal never reuses an id.
        let j = Journal::open(dir.path()).unwrap();
        assert!(j.record(link("c")).unwrap() > b);
    }

    #[test]
    fn a_faults_own_effect_is_its_data_beside_its_kind() {
        let mut data = serde_json::Map::new();
        data.insert("mount".into(), "/r/data/n1".into());
        let e = Effect::Fault(FaultEffect {
            kind: "some-kind".into(),
            what: "a tmpfs".into(),
            data,
        });
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(
            text,
            r#"{"effect":"fault","kind":"some-kind","what":"a tmpfs","mount":"/r/data/n1"}"#
        );
        let back: Effect = serde_json::from_str(&text).unwrap();
        assert_eq!(back, e);
        assert_eq!(e.describe(), "a tmpfs (some-kind fault)");
    }

    #[test]
    fn a_process_is_known_by_pid_and_start_time() {
        let me = Proc::of("me", std::process::id() as i32).unwrap();
        assert!(me.alive());
        let reused = Proc {
            start_time: me.start_time + 1,
            ..me.clone()
        };
        assert!(!reused.alive(), "same pid, other start time: not ours");
    }
}
