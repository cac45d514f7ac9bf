//! Workloads are files: `workloads/*.toml` say which lock service to start, how the
//! clients use the lock, what the resource does with stale tokens, which faults to
//! inject and which anomalies the design tolerates on purpose.
//!
//! Every key is checked: an unknown key or a bad value is an error that names the
//! file, the line, the key and what is expected. Durations carry their unit
//! (`"250ms"`, `"2s"`, `"1m"`). Every fault must fit the run: due before it ends
//! and over by then (a `[schedule]` must start every entry at least once), else
//! the workload is refused with the figures (see `planned_faults`).
//!
//! Every key with its type, default, allowed values and meaning is `keys`'s table
//! (docs/workload-keys.md is made from it); below, a workload that shows them.
//!
//! ```toml
//! name = "redis-pause"          # optional: the file's stem; names the run directory
//! mode = "lock"                 # optional: lock | election (leaders campaign and
//!                               #   act; see election.rs for [leader] and
//!                               #   [clients] on_lease_loss)
//! duration = "6s"
//! end = "duration"              # optional: duration | after-effect. "after-effect":
//!                               #   once every planned fault has started, the run
//!                               #   ends as soon as the first deposition is answered
//!                               #   (the successor's write applied, and a write
//!                               #   of each deposed holder judged after it, or its
//!                               #   section over), else one lease plus 500 ms
//!                               #   after the first fault occurrence is over and a
//!                               #   holder was deposed; at `duration` at the latest
//! seed = 1                      # optional, 0: the fault schedule's random choices
//! resource = "unfenced"         # or "fenced": reject tokens lower than one applied
//!                               #   (or a [resource] table, below)
//! allow = ["double-holder"]     # optional: anomaly kinds the design tolerates
//! runtime = "local"             # optional: local | docker | ssh | external
//!                               #   (docs/runtimes.md); --runtime wins
//!
//! [backend]
//! kind = "redis"                # a backend of docs/backends.md (lockcheck
//!                               #   doctor lists them); one that hands out no
//!                               #   lock takes mode = "election" only
//! nodes = 1                     # optional: the backend's usual number, where it
//!                               #   allows another
//! lease = "1s"                  # or a preset: client-go and consul on any
//!                               #   backend, others on the backend their users
//!                               #   run them on (lockcheck doctor lists them)
//! renew_every = "300ms"         # optional (client-go: 2s): renew during long holds
//! renew = "section"             # optional: section | background. "section": the
//!                               #   holder renews between its writes, and a renewal
//!                               #   refused or unanswered ends its section;
//!                               #   "background": its lock client renews on its own
//!                               #   every renew_every (a third of the lease unless
//!                               #   given), as a library's watchdog does, and the
//!                               #   holder writes on, learning nothing of a failed
//!                               #   renewal (a self-fencing holder's deadline moves
//!                               #   with each renewal that succeeded); lock mode only
//! fencing_token = true          # optional: whether the backend hands out one
//! acquire_timeout = "500ms"     # optional, 1s: how long one acquire waits
//! network = "loopback"          # optional: loopback | namespaces (local runtime:
//!                               #   each node in a network namespace of its own,
//!                               #   so `partition-nodes` can cut node links and
//!                               #   `latency-nodes` slow them)
//! # replica_acks = 2            # optional: a backend's own keys, which the
//!                               #   backend reads and checks itself (its
//!                               #   Options in crates/lockcheck-servers/src/backends/<kind>/;
//!                               #   docs/backends.md): replica_acks,
//!                               #   client_endpoint, primary_check, persistence
//! monotonic_offset = "+600s"    # optional, local runtime: every node starts in a
//!                               #   time namespace whose CLOCK_MONOTONIC and
//!                               #   CLOCK_BOOTTIME are this far off the machine's
//!                               #   (whole run, restarts too); or per node:
//!                               #   { n1 = "+600s", n3 = "-60s" }. The one clock
//!                               #   change that reaches Go servers,
//!                               #   which ignore the clock interposer. Realtime is
//!                               #   untouched; a negative offset may not take the
//!                               #   clock below 0 (the machine's uptime).
//! # hosts = ["db1"]             # runtime = "ssh" only: one node per host, as the
//!                               #   SSH configuration names them (the backends
//!                               #   whose recipe runs there); it also gives the
//!                               #   number of nodes
//! # ssh_config = "ssh_config"   # optional, ssh: instead of ~/.ssh/config (or
//!                               #   $LOCKCHECK_SSH_CONFIG); relative to this file
//! # program = "/usr/bin/redis-server" # optional, ssh: the server on the hosts
//! # remote_dir = "/tmp"         # optional, ssh: where the nodes' data go there
//! # manage = false              # optional, ssh, true: false uses the servers
//!                               #   already running on the hosts (found by the
//!                               #   backend's port), starts and stops none; no
//!                               #   kill, node clock, latency-nodes, freezer
//!
//! [clients]
//! count = 3
//! op_timeout = "10s"            # optional: no reply by then = info, id retired
//! self_fencing_margin = "200ms" # optional: each worker checks its own lease
//!                               #   deadline (less this margin) before each write
//! self_fencing = "library"      # optional, with [client]: each holder asks its
//!                               #   lock library (`held`) before each write and
//!                               #   stops writing when it says no
//! # clients_on = "hosts"        # optional, ssh, "controller": the workers run on
//!                               #   the hosts (client i on host i mod n); no
//!                               #   partition, latency, partition-nodes,
//!                               #   latency-nodes, client clock or [client]
//!
//! [client]                      # optional: a lock library of your own, through an
//! command = ["python3", "lock.py"] #   adapter program (docs/clients.md); relative
//!                               #   paths are the workload file's folder's
//! # dir = "adapters"            # optional: the folder it runs in, its relative
//!                               #   paths' (relative: to the workload file's
//!                               #   folder, the default)
//!
//! [critical_section]             # mode = "lock" (the default); an election
//!                               #   workload has [leader] instead (election.rs)
//! hold = "300ms"                # acquire to release, spread after each write
//! writes = 3
//! think = "50ms"                # optional, 0: between release and next acquire
//!
//! [[faults]]
//! kind = "pause"                # SIGSTOP / SIGCONT
//! target = "holder"             # holder | random | client-N
//! duration = "2500ms"
//! after = "1s"                  # optional, 1s: quiet period at the start
//! interval = "1s"               # optional: gap between occurrences; none = once
//!
//! [incident]                    # optional: the published failure this workload
//! source = "etcd issue 15247"   #   replays, and the design rule that prevents it;
//! rule = "fence by token"       #   the report's guidance names both
//! ```
//!
//! The resource as a table instead, to choose which resource and its fence:
//!
//! ```toml
//! [resource]
//! kind = "postgres"             # optional: lockcheck (its own server, the
//!                               #   default) | postgres (a private server the
//!                               #   workers UPDATE themselves)
//! fence = "<="                  # "<=": WHERE id = $3 AND token <= $2, a holder
//!                               #   writes as often as it likes with its token;
//!                               # "<": token < $2, each token writes once (the
//!                               #   holder's own second write is rejected too);
//!                               # "none": no token condition
//! ```
//!
//! The fault catalogue (each entry also takes `duration`, and `after` /
//! `interval` unless a `[schedule]` lays the faults out):
//!
//! ```toml
//! # Optional: lay all faults out from the seed instead (then no after/interval)
//! [schedule]
//! mix = "random"                # random (seeded) | interval (in turn)
//! gap = "2s"                    # mean gap (random) or gap (interval)
//! quiet = "1s"                  # optional, 1s: nothing before
//! heal = "2s"                   # optional, 0: all healed this long before the end
//!
//! # Server nodes: `nodes` = one | minority | majority | all | primary | nN
//! [[faults]]
//! kind = "pause-node"           # pause server nodes, resume them
//! nodes = "primary"
//! method = "sigstop"            # optional: sigstop (the main process) |
//!                               #   freezer (the cgroup freezer: all of its
//!                               #   processes; docker pause for a container)
//! duration = "3s"
//!
//! [[faults]]
//! kind = "kill"                 # kill -9, restart when it ends
//! nodes = "minority"
//! wipe = true                   # optional, false: restart with empty data
//! duration = "500ms"
//!
//! [[faults]]
//! kind = "clock"                # live, per node (not Go servers: reported),
//! nodes = "majority"            #   or a worker's own: target = "holder"
//! offset = "+20s"               # a jump; or rate = 2.0; or a strobe:
//!                               #   offset2 = "-1s", period = "20ms"
//! duration = "4s"
//!
//! [[faults]]
//! kind = "partition"            # client-to-node links: the holder cut off from
//! target = "holder"             #   every node, or `nodes = "primary"`: those
//!                               #   nodes cut off from every client
//! cut = "blackhole"             # optional: blackhole (hang) | reset (RST)
//! duration = "4s"
//!
//! [[faults]]
//! kind = "partition-nodes"      # links between server nodes (iptables rules in
//! shape = "isolate"             #   the nodes' namespaces: needs network =
//! nodes = "primary"             #   "namespaces", 2+ nodes). shape: isolate (one
//!                               #   node: `nodes` = primary | one | nN), halves,
//!                               #   majorities-ring (4+), bridge (3+), or links
//!                               #   with links = [["n1", "n3"]]
//! cut = "blackhole"             # optional: blackhole (DROP) | reset (TCP RST)
//! duration = "4s"
//!
//! [[faults]]
//! kind = "latency"              # the clients' links to the nodes
//! nodes = "all"
//! delay = "50ms"                # each way
//! jitter = "10ms"               # optional, 0
//! duration = "4s"
//!
//! [[faults]]
//! kind = "latency-nodes"        # links between server nodes, through proxies
//! shape = "all"                 #   their namespaces redirect peer connections
//! delay = "100ms"               #   to from the start (network = "namespaces");
//! jitter = "30ms"               #   shapes as partition-nodes, and all (the
//! duration = "4s"               #   default): every link
//!
//! [[faults]]
//! kind = "disk-full"            # nodes' data disks filled to the last byte
//! nodes = "primary"             #   (each node's data on a tmpfs of size_mb,
//! size_mb = 256                 #   local runtime, as root); a node that exits
//! restart = true                #   meanwhile starts again when the space is
//! duration = "4s"               #   back, unless restart = false
//! ```

mod backend;
mod election;
mod faults;
mod hosts;
pub mod keys;
mod located;
mod plan;
mod preset;
mod raw;
mod section;
#[cfg(test)]
mod tests;

pub use backend::Backend;
pub use election::{ClientMode, Election};
pub use faults::FaultEntry;
pub use faults::PlannedFault;
pub use lockcheck_fault::duration::{Dur, SignedDur};
pub use preset::{lease_presets, Lease, LeasePreset};
pub use raw::{End, OnLeaseLoss, Renew};
pub use section::CriticalSection;

use anyhow::{anyhow, bail, Result};
use lockcheck_check::AnomalyKind;
use lockcheck_fault::schedule::Mix;
use lockcheck_resource::{self as resource, Fence, Mode};
use lockcheck_servers::backend::BackendKind;
use lockcheck_servers::cluster::{NetworkKind, Runtime};
use std::path::{Path, PathBuf};
use std::time::Duration;

use located::{line_of, located};

/// A workload, read and validated.
#[derive(Debug, Clone)]
pub struct Workload {
    /// `name` in the file, else the file's stem: names the run directory.
    pub name: String,
    /// Where it was read from, and its text (copied into the run directory).
    pub path: PathBuf,
    pub text: String,
    pub duration: Duration,
    /// `end`: at `duration`, or earlier once the first fault's effect is over.
    pub end: End,
    pub seed: u64,
    pub allow: Vec<AnomalyKind>,
    pub backend: Backend,
    pub clients: Clients,
    /// Critical sections (`mode = "lock"`), or a leader election.
    pub mode: ClientMode,
    pub resource: resource::Spec,
    pub faults: Vec<FaultEntry>,
    /// Where the servers run: lockcheck's own processes (default), its own
    /// containers, or someone else's servers (`backend.endpoints`).
    pub runtime: Runtime,
    /// `[schedule]`: the faults laid out from the seed, instead of each entry's
    /// own `after` / `interval`.
    pub schedule: Option<Schedule>,
    /// `[client] command`: the adapter program each worker runs instead of the
    /// built-in recipe of `backend.kind`.
    pub client: Option<lockcheck_servers::backend::adapter::Program>,
    /// `[incident]`: the published failure this workload replays and the design
    /// rule that prevents it (recorded in verdict.json; the report's guidance
    /// names both).
    pub incident: Option<lockcheck_rundir::Incident>,
}

/// How the faults follow one another when a `[schedule]` table is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    pub mix: Mix,
    /// Nothing before this (the cluster settles, the history gets a baseline).
    pub quiet: Duration,
    /// Every fault has ended this long before the run ends.
    pub heal: Duration,
}

impl Schedule {
    /// The schedule for a run of `run` (the workload's duration, or `--time-limit`).
    pub fn plan(&self, run: Duration) -> lockcheck_fault::schedule::Plan {
        lockcheck_fault::schedule::Plan {
            run,
            quiet: self.quiet,
            heal: self.heal,
            mix: self.mix,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Clients {
    pub count: usize,
    /// How long the controller waits for a worker's reply (beyond an acquire's own
    /// wait) before it records `info` and retires the process id.
    pub op_timeout: Duration,
    /// Self-fencing: before each write a worker checks, on its own clock, that its
    /// lease (less this margin) has not run out, and refuses to write if it has.
    pub self_fencing_margin: Option<Duration>,
    /// `self_fencing = "library"`: before each write a holder asks its lock library
    /// (the adapter's `held`) and stops writing if it says the lock is gone.
    pub self_fencing_library: bool,
    /// `clients_on = "hosts"`: the workers run on the ssh runtime's hosts, round
    /// robin, instead of on this machine (`run::on_hosts`).
    pub on_hosts: bool,
}

impl Clients {
    /// The margin as the workers and verdict.json carry it.
    pub fn self_fencing_margin_ms(&self) -> Option<u64> {
        self.self_fencing_margin.map(|m| m.as_millis() as u64)
    }
}

/// Refuses what a workload of a backend that hands out no lock cannot be: its
/// clients lead (an election); where each is one node's application, one per node,
/// and their acts are commits on their own nodes, which the resource only records
/// (so it checks no token). The lease is what the backend's servers allow.
fn leadership_fits(
    bad: &dyn Fn(&str, String) -> anyhow::Error,
    kind: BackendKind,
    mode: &Option<toml::Spanned<raw::ModeKind>>,
    resource: &resource::Spec,
    (count, nodes): (usize, usize),
    ttl: Duration,
) -> Result<()> {
    let election = mode.as_ref().map(|m| *m.get_ref()) == Some(raw::ModeKind::Election);
    if let (Some(leads), false) = (kind.leads_instead(), election) {
        bail!(bad(
            "mode",
            format!("{kind} hands out no lock: {leads}; expected mode = \"election\"")
        ));
    }
    if kind.client_per_node() {
        if resource.kind != resource::Kind::Lockcheck || resource.fence != Fence::Off {
            bail!(bad(
                "resource",
                format!("a {kind} leader acts by committing on its own node; the resource only records, in order, what the nodes accepted: expected \"unfenced\"")
            ));
        }
        if count != nodes {
            bail!(bad(
                "clients.count",
                format!("each {kind} client is one node's application: expected {nodes} (backend.nodes), found {count}")
            ));
        }
    }
    lockcheck_servers::cluster::recipe(kind)
        .lease(ttl)
        .map_err(|e| bad("backend.lease", e))
}

/// `resource`: `"unfenced"` (the default), `"fenced"`, or a table of its kind and fence.
fn resource_spec(raw: Option<raw::ResourceSpec>) -> resource::Spec {
    match raw {
        None | Some(raw::ResourceSpec::Mode(Mode::Unfenced)) => resource::Spec {
            kind: resource::Kind::Lockcheck,
            fence: Fence::Off,
        },
        Some(raw::ResourceSpec::Mode(Mode::Fenced)) => resource::Spec {
            kind: resource::Kind::Lockcheck,
            fence: Fence::NotBelow,
        },
        Some(raw::ResourceSpec::Table(t)) => resource::Spec {
            kind: t.kind.unwrap_or_default(),
            fence: t.fence,
        },
    }
}

/// `name`, else the file's stem: it names the run directory.
fn workload_name(
    name: Option<String>,
    path: &Path,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<String> {
    Ok(match name {
        Some(n) => {
            if n.is_empty()
                || !n
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                bail!(bad(
                    "name",
                    format!("expected letters, digits, '-', '_' or '.' (it names the run directory), found {n:?}")
                ));
            }
            n
        }
        None => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "workload".into()),
    })
}

/// `[incident]`: the published failure replayed, and the rule that prevents it.
fn incident(
    i: toml::Spanned<raw::Incident>,
    file: &std::path::Display<'_>,
    text: &str,
) -> Result<lockcheck_rundir::Incident> {
    let i = i.into_inner();
    for (key, value) in [("source", &i.source), ("rule", &i.rule)] {
        if value.get_ref().trim().is_empty() {
            let line = line_of(text, value.span().start);
            bail!("{file}:{line}: incident.{key}: expected some words, found an empty string");
        }
    }
    Ok(lockcheck_rundir::Incident {
        source: i.source.into_inner(),
        rule: i.rule.into_inner(),
    })
}

/// `[client]`: the adapter program, and the folder it runs in (`dir`, relative to
/// the workload file's folder, which it is by default).
fn adapter_program(
    c: raw::Client,
    path: &Path,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<lockcheck_servers::backend::adapter::Program> {
    use lockcheck_servers::backend::adapter::Program;
    let dir = match c.dir {
        Some(d) => {
            let dir = Program::folder_of(path).join(&d);
            if !dir.is_dir() {
                bail!(bad(
                    "client.dir",
                    format!("\"{d}\": no such folder ({})", dir.display())
                ));
            }
            Some(dir)
        }
        None => None,
    };
    Program::of_workload(c.command, dir, path).map_err(|e| bad("client.command", format!("{e:#}")))
}

/// `[clients]`: how many, their timeouts, how they fence themselves, where they run.
fn clients(
    c: &raw::Clients,
    on_hosts: bool,
    lease: &Lease,
    adapter: bool,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<Clients> {
    let count = c.count;
    if count == 0 {
        bail!(bad("clients.count", "expected at least 1 client".into()));
    }
    let self_fencing_margin = c.self_fencing_margin.map(|d| d.0);
    if self_fencing_margin.is_some_and(|m| m >= lease.ttl) {
        bail!(bad(
            "clients.self_fencing_margin",
            format!(
                "expected a margin shorter than the lease ({} ms): no write could pass",
                lease.ttl.as_millis()
            )
        ));
    }
    let self_fencing_library = c.self_fencing.is_some();
    if self_fencing_library && !adapter {
        bail!(bad(
            "clients.self_fencing",
            "\"library\" asks the lock library through its adapter's `held`: \
             the workload needs a [client] command"
                .into()
        ));
    }
    Ok(Clients {
        count,
        op_timeout: c.op_timeout.map_or(Duration::from_secs(10), |d| d.0),
        self_fencing_margin,
        self_fencing_library,
        on_hosts,
    })
}

impl Workload {
    pub fn load(path: &Path) -> Result<Workload> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow!("{}: cannot read the workload: {e}", path.display()))?;
        Self::parse(&text, path)
    }

    /// Parses workload text; `path` names the file in errors and gives the default name.
    pub fn parse(text: &str, path: &Path) -> Result<Workload> {
        let file = path.display();
        let raw: raw::Workload = toml::from_str(text).map_err(|e| located(&file, text, &e))?;
        // Errors found after parsing name the key in the file's own dotted words.
        let bad = |key: &str, what: String| anyhow!("{file}: {key}: {what}");

        // Keys of the ssh runtime's that name what it does not do yet.
        let on_hosts = match raw.clients.clients_on.as_deref() {
            None | Some("controller") => false,
            Some("hosts") => true,
            Some(other) => bail!(bad(
                "clients.clients_on",
                format!("expected \"controller\" (the clients run on this machine) or \"hosts\" (on the ssh runtime's hosts), found \"{other}\"")
            )),
        };
        let backend = backend::read(raw.backend, path, text, &bad)?;
        let (kind, nodes, lease) = (backend.kind, backend.nodes, &backend.lease);
        let resource = resource_spec(raw.resource);
        if resource.fence != Fence::Off && !backend.fencing_token {
            bail!(bad(
                "resource",
                "a fenced resource needs tokens: set backend.fencing_token = true, or leave the resource unfenced".into()
            ));
        }
        let client = match raw.client {
            Some(c) => Some(adapter_program(c, path, &bad)?),
            None => None,
        };
        let clients = clients(&raw.clients, on_hosts, lease, client.is_some(), &bad)?;
        let count = clients.count;
        leadership_fits(&bad, kind, &raw.mode, &resource, (count, nodes), lease.ttl)?;
        let mode = election::mode(
            &file,
            text,
            election::RawMode {
                mode: raw.mode,
                critical_section: raw.critical_section,
                leader: raw.leader,
                on_lease_loss: raw.clients.on_lease_loss,
            },
            kind,
            lease,
        )?;
        if backend.renew == Renew::Background && !matches!(mode, ClientMode::Lock(_)) {
            bail!(bad(
                "backend.renew",
                "a leader renews its own lease (every backend.renew_every): \"background\" is for mode = \"lock\"".into()
            ));
        }
        let setting = lockcheck_fault::spec::Setting {
            clients: count,
            nodes,
            network: backend.network,
            hosts: backend.ssh.is_some(),
        };
        let (faults, raw_timed) = faults::read(raw.faults, &setting, &file, text)?;
        if raw.duration.0.is_zero() {
            bail!(bad("duration", "expected a duration longer than 0".into()));
        }
        let name = workload_name(raw.name, path, &bad)?;
        let schedule = match raw.schedule {
            None => None,
            Some(sch) => {
                if let Some(i) = raw_timed.iter().position(|t| *t) {
                    bail!(bad(
                        &format!("faults[{i}]"),
                        "with a [schedule], the schedule says when faults happen: drop `after` and `interval`".into()
                    ));
                }
                let schedule = Schedule {
                    mix: match sch.mix {
                        raw::MixKind::Interval => Mix::Interval { gap: sch.gap.0 },
                        raw::MixKind::Random => Mix::Random {
                            mean_gap: sch.gap.0,
                        },
                    },
                    quiet: sch.quiet.map_or(Duration::from_secs(1), |d| d.0),
                    heal: sch.heal.map_or(Duration::ZERO, |d| d.0),
                };
                let durations: Vec<Duration> = faults.iter().map(|f| f.duration).collect();
                let plan = schedule.plan(raw.duration.0);
                lockcheck_fault::schedule::timeline(&durations, &plan, 0)
                    .map_err(|e| bad("schedule", format!("{e:#}")))?;
                Some(schedule)
            }
        };
        let incident = raw.incident.map(|i| incident(i, &file, text)).transpose()?;
        let w = Workload {
            incident,
            name,
            path: path.to_path_buf(),
            text: text.to_string(),
            duration: raw.duration.0,
            end: raw.end.unwrap_or_default(),
            seed: raw.seed.unwrap_or(0),
            allow: raw.allow,
            backend,
            clients,
            mode,
            resource,
            faults,
            schedule,
            runtime: raw.runtime.unwrap_or_default(),
            client,
        }
        .checked_for_runtime()?;
        w.planned_faults(None, w.seed)?;
        Ok(w)
    }

    /// The same workload under another runtime (`--runtime`), checked again: a
    /// fault the runtime cannot apply is an error here, never a silent skip.
    pub fn with_runtime(mut self, runtime: Runtime) -> Result<Workload> {
        self.runtime = runtime;
        self.checked_for_runtime()
    }

    /// Checks what depends on the runtime: the endpoints an external cluster needs
    /// (which also give its number of nodes), and the faults it can apply.
    fn checked_for_runtime(mut self) -> Result<Workload> {
        let file = self.path.display();
        let rt = self.runtime.name();
        let endpoints = self.backend.endpoints.len();
        #[cfg(not(feature = "docker"))]
        if self.runtime == Runtime::Docker {
            bail!("{file}: {}", lockcheck_servers::cluster::WITHOUT_DOCKER);
        }
        match self.runtime {
            Runtime::External if endpoints == 0 => bail!(
                "{file}: backend.endpoints: the external runtime needs the servers' addresses, like [\"127.0.0.1:6379\"]"
            ),
            Runtime::External
                if endpoints != 1
                    && lockcheck_servers::cluster::recipe(self.backend.kind)
                        .single_instance()
                        .is_some() =>
            {
                bail!(
                    "{file}: backend.endpoints: {} is a single instance: expected 1 address, found {endpoints}",
                    self.backend.kind
                )
            }
            Runtime::External => {
                let kind = self.backend.kind;
                let fixed = lockcheck_servers::cluster::default_nodes(kind);
                if let Some(what) = lockcheck_servers::cluster::recipe(kind).fixed_nodes() {
                    if endpoints != fixed {
                        bail!("{file}: backend.endpoints: {kind} is {what}: expected {fixed} addresses (the servers, then the Sentinels), found {endpoints}");
                    }
                }
                self.backend.nodes = endpoints
            }

            _ if endpoints > 0 => bail!(
                "{file}: backend.endpoints: only for runtime = \"external\"; under the {rt} runtime lockcheck starts its own servers"
            ),
            _ => {}
        }
        match (&self.backend.ssh, self.runtime) {
            (None, Runtime::Ssh) => bail!(
                "{file}: backend.hosts: the ssh runtime needs the hosts to run the servers on, one per node, like [\"db1\", \"db2\", \"db3\"]"
            ),
            (Some(_), Runtime::Ssh) if !lockcheck_servers::cluster::recipe(self.backend.kind).ssh() => bail!(
                "{file}: backend.kind: {} is not available under the ssh runtime yet (it runs {})",
                self.backend.kind,
                lockcheck_servers::cluster::ssh::backends().iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
            ),
            (Some(ssh), Runtime::Ssh) => {
                if let Some(h) = ssh.hosts.iter().enumerate().find_map(|(i, h)| ssh.hosts[..i].contains(h).then_some(h)) {
                    bail!("{file}: backend.hosts: {h} twice: each node runs on a host of its own (the backend's usual ports)");
                }
            }
            (Some(_), _) => bail!(
                "{file}: backend.hosts: only for runtime = \"ssh\"; under the {rt} runtime the servers run {}",
                if self.runtime == Runtime::External { "where backend.endpoints say" } else { "on this machine" }
            ),
            (None, _) => {}
        }
        if self.runtime != Runtime::Local && !self.backend.monotonic_offsets.is_empty() {
            bail!(
                "{file}: backend.monotonic_offset: only under the local runtime, where lockcheck starts each server itself in a time namespace of its own"
            );
        }
        if self.backend.network == NetworkKind::Namespaces && self.runtime != Runtime::Local {
            bail!(
                "{file}: backend.network: namespaces are the local runtime's; the {rt} runtime places its servers itself"
            );
        }
        // Refused for good where the servers or clients are, before what the
        // runtime does not do yet.
        self.check_hosts()?;
        for (i, f) in self.faults.iter().enumerate() {
            if let Some(r) = f.spec.refused_by(self.runtime) {
                bail!("{file}: faults[{i}].{}: {}", r.key, r.why);
            }
        }
        Ok(self)
    }
}
