//! The cgroup freezer for local server nodes, what `docker pause` is for a
//! container: every process of a node stops at once (a PostgreSQL's backends with
//! its postmaster, which SIGSTOP to the postmaster alone would leave serving), and
//! none of them can tell: no signal is delivered, nothing is in state `T`.
//!
//! A node's processes are its server's process and its descendants. Freezing
//! moves them into a cgroup made for the pause, `lockcheck-<pid>-<node>-<random>`,
//! under the v1 freezer hierarchy where the machine has one, else the v2
//! (unified) one, and freezes it; thawing thaws it, moves them back where they
//! were, and removes it.
//! The cgroup's path is journaled before anything moves, so that `lockcheck
//! recover` thaws a node whose controller was killed with -9 ([`thaw_dir`]).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A freezer hierarchy: where it is mounted, and which interface it speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hierarchy {
    root: PathBuf,
    v2: bool,
}

impl Hierarchy {
    /// The v1 hierarchy with the freezer controller, else the v2 one, as
    /// /proc/mounts lists them.
    fn find() -> Result<Hierarchy> {
        let mounts = std::fs::read_to_string("/proc/mounts").context("reading /proc/mounts")?;
        let mut v2 = None;
        for line in mounts.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [_, point, fstype, options, ..] = fields[..] else {
                continue;
            };
            if fstype == "cgroup" && options.split(',').any(|o| o == "freezer") {
                return Ok(Hierarchy {
                    root: PathBuf::from(point),
                    v2: false,
                });
            }
            if fstype == "cgroup2" {
                v2.get_or_insert(Hierarchy {
                    root: PathBuf::from(point),
                    v2: true,
                });
            }
        }
        v2.context("no cgroup freezer: neither a v1 freezer hierarchy nor cgroup v2 is mounted")
    }

    /// The file that freezes and thaws a cgroup, and what it says frozen / thawed.
    fn state(&self) -> (&'static str, &'static str, &'static str) {
        if self.v2 {
            ("cgroup.freeze", "1", "0")
        } else {
            ("freezer.state", "FROZEN", "THAWED")
        }
    }

    /// Whether cgroup `dir` has frozen (not still freezing).
    fn is_frozen(&self, dir: &Path) -> bool {
        if self.v2 {
            std::fs::read_to_string(dir.join("cgroup.events"))
                .is_ok_and(|e| e.lines().any(|l| l.trim() == "frozen 1"))
        } else {
            std::fs::read_to_string(dir.join("freezer.state")).is_ok_and(|s| s.trim() == "FROZEN")
        }
    }

    /// The cgroup of this hierarchy `pid` is in now (from /proc/<pid>/cgroup).
    fn cgroup_of(&self, pid: i32) -> Option<PathBuf> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        let rel = text.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let ours = if self.v2 {
                id == "0" && controllers.is_empty()
            } else {
                controllers.split(',').any(|c| c == "freezer")
            };
            ours.then(|| path.to_string())
        })?;
        Some(self.root.join(rel.trim_start_matches('/')))
    }
}

/// Why this machine cannot freeze local nodes, if it cannot: no hierarchy, or
/// one this user may not make cgroups in.
pub fn unavailable() -> Option<String> {
    let h = match Hierarchy::find() {
        Ok(h) => h,
        Err(e) => return Some(format!("{e:#}")),
    };
    let probe = h
        .root
        .join(format!("lockcheck-probe-{}", std::process::id()));
    match std::fs::create_dir(&probe) {
        Ok(()) => {
            let _ = std::fs::remove_dir(&probe);
            None
        }
        Err(e) => Some(format!(
            "cannot make a cgroup in {} ({e}): lockcheck needs to be root, or to own a \
             delegated cgroup there",
            h.root.display()
        )),
    }
}

/// Process `root` and all its descendants: a local node's server and whatever
/// it forked (PostgreSQL's backends each make a session of their own, so its
/// process group would not do).
fn tree(root: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: Vec<(i32, i32)> = dir
        .filter_map(|e| {
            let pid = e.ok()?.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // After the command name: state, ppid.
            let (_, rest) = stat.rsplit_once(") ")?;
            Some((pid, rest.split_whitespace().nth(1)?.parse().ok()?))
        })
        .collect();
    let mut found = vec![root];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        next += 1;
    }
    found
}

/// A node frozen in a cgroup of its own; thawed by [`Frozen::thaw`] or on drop.
#[derive(Debug)]
pub struct Frozen {
    hierarchy: Hierarchy,
    dir: PathBuf,
    /// Where the processes were: they go back there.
    home: PathBuf,
    thawed: bool,
}

/// The cgroup a freeze of node `name` would use, fresh: journal it, then
/// [`freeze`] into it.
pub fn cgroup_for(name: &str) -> Result<PathBuf> {
    let h = Hierarchy::find()?;
    Ok(h.root.join(format!(
        "lockcheck-{}-{name}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )))
}

/// Freezes process `root` and its descendants in cgroup `dir` (from
/// [`cgroup_for`]), and waits until the kernel says it is frozen.
pub fn freeze(dir: &Path, root: i32) -> Result<Frozen> {
    let hierarchy = Hierarchy::find()?;
    let home = hierarchy
        .cgroup_of(root)
        .with_context(|| format!("finding the cgroup of process {root}"))?;
    std::fs::create_dir(dir).with_context(|| format!("making cgroup {}", dir.display()))?;
    let frozen = Frozen {
        hierarchy,
        dir: dir.to_path_buf(),
        home,
        thawed: false,
    };
    let procs = dir.join("cgroup.procs");
    let (file, on, _) = frozen.hierarchy.state();
    let mut moved = 0;
    // Twice: a process forked while the first pass moved its parent was born
    // where the parent was, and joins the (by then frozen) cgroup now.
    for pass in 0..2 {
        for pid in tree(root) {
            if frozen.hierarchy.cgroup_of(pid).as_deref() != Some(dir) {
                // A process that ended meanwhile cannot be moved; one that is
                // still there must be.
                if let Err(e) = std::fs::write(&procs, pid.to_string()) {
                    if Path::new(&format!("/proc/{pid}")).exists() {
                        return Err(e)
                            .with_context(|| format!("moving {pid} into {}", dir.display()));
                    }
                }
                moved += 1;
            }
        }
        if pass == 0 {
            std::fs::write(dir.join(file), on)
                .with_context(|| format!("freezing {}", dir.display()))?;
        }
    }
    if moved == 0 {
        bail!("process {root} is gone: nothing to freeze");
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while !frozen.hierarchy.is_frozen(dir) {
        if Instant::now() > deadline {
            bail!("{} did not freeze within 2 s", dir.display());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(frozen)
}

impl Frozen {
    /// Thaws the processes, moves them back where they were, removes the cgroup.
    pub fn thaw(mut self) -> Result<()> {
        self.thawed = true;
        release(&self.hierarchy, &self.dir, &self.home)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        if !self.thawed {
            let _ = release(&self.hierarchy, &self.dir, &self.home);
        }
    }
}

/// Thaws cgroup `dir`, moves what is in it to `home`, and removes it.
fn release(h: &Hierarchy, dir: &Path, home: &Path) -> Result<()> {
    let (file, _, off) = h.state();
    // Thawed first, all at once; then moved out, until none is left: a thawed
    // server may fork again (a PostgreSQL backend) before it is moved.
    std::fs::write(dir.join(file), off).with_context(|| format!("thawing {}", dir.display()))?;
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let pids = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in pids.lines() {
            // One that ended meanwhile has nothing to move.
            let _ = std::fs::write(home.join("cgroup.procs"), pid);
        }
        // An exiting process leaves its cgroup a moment after it is reaped.
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => {
                return Err(e).with_context(|| format!("removing {}", dir.display()))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// `lockcheck recover`'s undo of a freeze: thaws cgroup `dir` if it is still
/// there, moving its processes to the hierarchy's root, and removes it. Returns
/// whether it was there.
pub fn thaw_dir(dir: &Path) -> Result<bool> {
    if !dir.is_dir() {
        return Ok(false);
    }
    let h = Hierarchy::find()?;
    let home = dir.parent().unwrap_or(&h.root).to_path_buf();
    release(&h, dir, &home)?;
    Ok(true)
}
