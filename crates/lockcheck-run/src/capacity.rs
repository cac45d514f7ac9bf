//! What a run's clients cost, weighed before anything starts: every client is a
//! worker process of its own, and a workload that asks for more of them than the
//! machine holds would fork until memory or process ids run out, taking the
//! servers under test (and everything else on the machine) with it.
//!
//! Two refusals, both before any server starts:
//! - more clients than any machine sensibly runs against one lock: the workload is
//!   wrong (exit 2, with file, line and key);
//! - more than this machine can hold, from its memory (`MemAvailable`, the memory
//!   cgroup's limit) and its process ids (`pid_max`, the pids cgroup's `pids.max`,
//!   `RLIMIT_NPROC`) and the controller's file descriptors: exit 5, with what is
//!   available against what is needed.

use super::workload::Workload;
use anyhow::Result;
use lockcheck_exit::Exit;
use std::path::{Path, PathBuf};

/// More clients than any machine sensibly runs against one lock: one holds it at a
/// time, the others queue; a thousand already make each wait for a thousand
/// critical sections, and the checker's search grows with the overlap.
pub const MAX_CLIENTS: usize = 1000;

/// What one client costs: a `lockcheck worker` process (current-thread runtime) was
/// measured at 1.7 MiB private memory (RssAnon) and 0.1 MiB page tables, with 2 to
/// 4 threads (its runtime's blocking pool), in a debug build talking to Redis;
/// rounded up for the kernel's share (stacks, pipe buffers) and heavier clients.
pub const WORKER_MEMORY: u64 = 4 << 20;
pub const WORKER_TASKS: u64 = 4;

/// The controller's file descriptors per client, at most: the worker's two pipes
/// and its connection to lockcheck's own resource, and with link faults a proxy per
/// node (listener, client side, server side).
fn fds_per_client(w: &Workload) -> u64 {
    3 + 3 * w.backend.nodes as u64
}

/// Refuses a workload whose clients cannot run: exit 2 for more than any machine
/// sensibly runs, 5 for more than this one can hold.
pub fn check(w: &Workload) -> Result<()> {
    let count = w.clients.count;
    if count > MAX_CLIENTS {
        let line = count_line(&w.text).map_or(String::new(), |l| format!(":{l}"));
        return Err(Exit::usage(format!(
            "{}{line}: clients.count: {count} clients, each a worker process of its own \
             (about {} MiB and {WORKER_TASKS} threads each, {} MiB in all); lockcheck runs \
             at most {MAX_CLIENTS} against one lock, which is already far past where one \
             holder at a time leaves the others anything to do",
            w.path.display(),
            WORKER_MEMORY >> 20,
            (count as u64 * WORKER_MEMORY) >> 20,
        )));
    }
    let need = Need {
        clients: count as u64,
        memory: count as u64 * WORKER_MEMORY,
        tasks: count as u64 * WORKER_TASKS,
        fds: count as u64 * fds_per_client(w),
    };
    match need.short_of(&Machine::here()) {
        Some(why) => Err(Exit::environment(why)),
        None => Ok(()),
    }
}

/// What one run holds besides its clients, for [`parallel_runs`]: its servers (a
/// ZooKeeper or MariaDB node takes 100-250 MiB, three of them a cluster), the
/// controller and the resource: an allowance on the safe side, not a measure.
pub const RUN_MEMORY: u64 = 768 << 20;

/// How many runs this machine holds side by side (`lockcheck audit --jobs`), and
/// why: one per core (a run under faults keeps about one core busy: servers,
/// controller, workers, the check), no more than its available memory holds at
/// [`RUN_MEMORY`] each, and at least one.
pub fn parallel_runs() -> (usize, String) {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    runs_room(cores, Machine::here().memory)
}

/// Runs a core an audit may pace itself up to: a ceiling over the probes, not
/// a measure of what a core holds. A run mostly waits on its faults and leases:
/// nats paced up to 8 at once on 2 cores left the CPU 78 % idle at 7 (timers
/// 0.6 ms late at p99), its fenced twins' provoked shares within the 95 %
/// intervals of 4 at once's the same day, and ended its audit in 8 min 55 s
/// where 4 at once ran out of its 15 min budget (docs/audits/nats.md).
pub const PACED_RUNS_A_CORE: usize = 4;

/// The most runs side by side an audit may pace itself up to (`audit::pace`):
/// [`PACED_RUNS_A_CORE`] a core, within available memory at [`RUN_MEMORY`]
/// each. Whether that many still keep their timing is for the audit's probes
/// to say, not this count.
pub fn paced_runs_most() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    runs_room(cores * PACED_RUNS_A_CORE, Machine::here().memory).0
}

fn runs_room(cores: usize, memory: Option<(u64, String)>) -> (usize, String) {
    let mut why = format!("{cores} cores");
    let mut n = cores;
    if let Some((have, from)) = memory {
        let fit = usize::try_from(have / RUN_MEMORY).unwrap_or(usize::MAX);
        why += &format!(
            ", {} MiB available ({from}) at {} MiB a run",
            have >> 20,
            RUN_MEMORY >> 20
        );
        n = n.min(fit);
    }
    (n.max(1), why)
}

/// What a run's clients need.
#[derive(Debug, Clone, Copy)]
struct Need {
    clients: u64,
    memory: u64,
    tasks: u64,
    fds: u64,
}

/// What this machine has left for them, each with where the figure comes from.
#[derive(Debug, Clone, Default)]
struct Machine {
    /// Bytes.
    memory: Option<(u64, String)>,
    tasks: Option<(u64, String)>,
    fds: Option<(u64, String)>,
}

impl Need {
    /// Why this machine cannot run the clients, or `None` if it can.
    fn short_of(&self, m: &Machine) -> Option<String> {
        let mib = |b: u64| b >> 20;
        let mut short = Vec::new();
        if let Some((have, from)) = &m.memory {
            if self.memory > *have {
                short.push(format!(
                    "memory: they need about {} MiB ({} MiB each), {} MiB available ({from})",
                    mib(self.memory),
                    mib(WORKER_MEMORY),
                    mib(*have)
                ));
            }
        }
        if let Some((have, from)) = &m.tasks {
            if self.tasks > *have {
                short.push(format!(
                    "processes: they need up to {} tasks ({WORKER_TASKS} threads each), {have} available ({from})",
                    self.tasks
                ));
            }
        }
        if let Some((have, from)) = &m.fds {
            if self.fds > *have {
                short.push(format!(
                    "file descriptors: the controller needs about {} for them, {have} available ({from})",
                    self.fds
                ));
            }
        }
        (!short.is_empty()).then(|| {
            format!(
                "this machine cannot run {} clients (one worker process each): {}",
                self.clients,
                short.join("; ")
            )
        })
    }
}

impl Machine {
    /// The tightest of each limit that applies to this process.
    fn here() -> Machine {
        let least = |figures: Vec<Option<(u64, String)>>| {
            figures.into_iter().flatten().min_by_key(|(n, _)| *n)
        };
        Machine {
            memory: least(vec![
                meminfo_available().map(|b| (b, "MemAvailable in /proc/meminfo".into())),
                cgroup_headroom("memory", "memory.limit_in_bytes", "memory.usage_in_bytes"),
                cgroup_headroom("", "memory.max", "memory.current"),
            ]),
            tasks: least(vec![
                pid_headroom(),
                cgroup_headroom("pids", "pids.max", "pids.current"),
                cgroup_headroom("", "pids.max", "pids.current"),
                nproc_headroom(),
            ]),
            fds: fd_headroom(),
        }
    }
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn meminfo_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// `pid_max` less the tasks that exist (`/proc/loadavg`'s running/total).
fn pid_headroom() -> Option<(u64, String)> {
    let max = read_u64(Path::new("/proc/sys/kernel/pid_max"))?;
    let loadavg = std::fs::read_to_string("/proc/loadavg").ok()?;
    let total: u64 = loadavg
        .split_whitespace()
        .nth(3)?
        .split('/')
        .nth(1)?
        .parse()
        .ok()?;
    Some((
        max.saturating_sub(total),
        format!("pid_max {max}, {total} tasks exist"),
    ))
}

/// This process's cgroup directory for `controller` (cgroup v1), or its unified
/// cgroup (v2) for `""`.
fn cgroup_dir(controller: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let matches = if controller.is_empty() {
            controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == controller)
        };
        let root = Path::new("/sys/fs/cgroup");
        let mount = if controller.is_empty() {
            // v2 mounted alone, or beside v1 controllers as `unified`.
            [root.to_path_buf(), root.join("unified")]
                .into_iter()
                .find(|m| m.join("cgroup.controllers").exists())?
        } else {
            root.join(controller)
        };
        matches.then(|| mount.join(path.trim_start_matches('/')))
    })
}

/// A cgroup's limit less its use: `limit` (a number, or `max`/huge for none) and
/// `used` files of this process's cgroup for `controller`.
fn cgroup_headroom(controller: &str, limit: &str, used: &str) -> Option<(u64, String)> {
    let dir = cgroup_dir(controller)?;
    let max = read_u64(&dir.join(limit))?;
    // v1 says "no limit" with a page-rounded i64::MAX.
    if max >= 1 << 60 {
        return None;
    }
    let now = read_u64(&dir.join(used)).unwrap_or(0);
    let shown = if limit.starts_with("memory") {
        format!("{} MiB", max >> 20)
    } else {
        max.to_string()
    };
    Some((
        max.saturating_sub(now),
        format!("{} {limit} {shown}", dir.display()),
    ))
}

fn rlimit(resource: libc::__rlimit_resource_t) -> Option<libc::rlimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we pass.
    (unsafe { libc::getrlimit(resource, &mut r) } == 0).then_some(r)
}

/// `RLIMIT_NPROC` less this user's tasks; root is not held to it.
fn nproc_headroom() -> Option<(u64, String)> {
    let uid = nix::unistd::getuid();
    if uid.is_root() {
        return None;
    }
    let soft = rlimit(libc::RLIMIT_NPROC)?.rlim_cur;
    if soft == libc::RLIM_INFINITY {
        return None;
    }
    use std::os::unix::fs::MetadataExt;
    let mine: u64 = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid.as_raw()))
        .map(|e| std::fs::read_dir(e.path().join("task")).map_or(1, |t| t.count() as u64))
        .sum();
    Some((
        soft.saturating_sub(mine),
        format!("RLIMIT_NPROC {soft}, {mine} tasks of this user exist"),
    ))
}

/// The controller's file descriptors: raises the soft limit to the hard one (a
/// run with many clients needs more than the usual 1024), then what is left.
fn fd_headroom() -> Option<(u64, String)> {
    let mut r = rlimit(libc::RLIMIT_NOFILE)?;
    if r.rlim_cur < r.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: setrlimit reads the struct we pass.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            r = raised;
        }
    }
    let soft = r.rlim_cur;
    let open = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
    Some((
        soft.saturating_sub(open),
        format!("RLIMIT_NOFILE {soft}, {open} open"),
    ))
}

/// The line (from 1) of `clients.count` in the workload's text.
fn count_line(text: &str) -> Option<usize> {
    #[derive(serde::Deserialize)]
    struct Raw {
        clients: Clients,
    }
    #[derive(serde::Deserialize)]
    struct Clients {
        count: toml::Spanned<toml::Value>,
    }
    let raw: Raw = toml::from_str(text).ok()?;
    let at = raw.clients.count.span().start;
    Some(text[..at.min(text.len())].matches('\n').count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_runs_take_the_fewer_of_cores_and_memory() {
        let mib = |m: u64| Some((m << 20, "MemAvailable".to_string()));
        assert_eq!(runs_room(2, mib(23_000)).0, 2, "cores bound");
        assert_eq!(runs_room(8, mib(2_000)).0, 2, "memory bound: 2000 / 768");
        assert_eq!(runs_room(4, mib(100)).0, 1, "never below one");
        assert_eq!(runs_room(3, None), (3, "3 cores".to_string()));
        assert!(runs_room(8, mib(2_000))
            .1
            .contains("2000 MiB available (MemAvailable)"));
    }

    #[test]
    fn the_line_of_clients_count() {
        let text = "duration = \"5s\"\n[backend]\nkind = \"redis\"\n\n[clients]\ncount = 10000\n";
        assert_eq!(count_line(text), Some(6));
        assert_eq!(count_line("clients = { count = 3 }\n"), Some(1));
    }

    #[test]
    fn short_of_names_each_limit_with_both_figures() {
        let need = Need {
            clients: 500,
            memory: 500 * WORKER_MEMORY,
            tasks: 500 * WORKER_TASKS,
            fds: 1500,
        };
        let roomy = Machine {
            memory: Some((1 << 40, "MemAvailable".into())),
            tasks: Some((1 << 20, "pid_max".into())),
            fds: Some((1 << 20, "RLIMIT_NOFILE".into())),
        };
        assert_eq!(need.short_of(&roomy), None);
        assert_eq!(
            need.short_of(&Machine::default()),
            None,
            "unknown limits refuse nothing"
        );
        let tight = Machine {
            memory: Some((1000 << 20, "memory.max".into())),
            tasks: Some((300, "pids.max 400".into())),
            fds: Some((1000, "RLIMIT_NOFILE 1024, 24 open".into())),
        };
        let why = need.short_of(&tight).unwrap();
        assert!(
            why.starts_with("this machine cannot run 500 clients"),
            "{why}"
        );
        assert!(
            why.contains("2000 MiB (4 MiB each), 1000 MiB available (memory.max)"),
            "{why}"
        );
        assert!(
            why.contains("2000 tasks (4 threads each), 300 available (pids.max 400)"),
            "{why}"
        );
        assert!(why.contains("about 1500 for them, 1000 available"), "{why}");
    }
}
