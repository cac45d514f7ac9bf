//! The battery: the scenarios an audit runs against one backend. A scenario is a
//! fault recipe (what breaks) crossed with a fencing mode (what the resource and
//! the holders do about it), written out as an ordinary workload file and read back
//! by [`Workload::parse`], so that every scenario is checked by the same rules as a
//! hand-written workload and runs through `lockcheck run` unchanged.
//!
//! Which scenarios apply comes from what the registries say of the backend (its
//! token, its nodes, whether they elect a leader, whether they run in network
//! namespaces) and from what lockcheck's clock fault can reach on this machine (the
//! server binary itself is read): a new backend gets its battery without an edit
//! here. What does not apply is listed with why.

use anyhow::{Context, Result};
use lockcheck_fault::clock::{reach, Reach};
use lockcheck_run::workload::Workload;
use lockcheck_servers::backend::BackendKind;
use lockcheck_servers::cluster;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// The lease every scenario runs with: long enough for the slowest servers here to
/// answer within a quarter of it, short enough that a run breaks it several times.
const LEASE: &str = "2s";

/// What breaks, and how: one fault recipe of the battery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recipe {
    HolderPause,
    ClockJumpMajority,
    ClockRateMajority,
    ClockJumpHolder,
    ClockRateHolder,
    KillRestart,
    KillRestartDurable,
    KillRestartWiped,
    HolderCutOff,
    LeaderIsolated,
    HolderNodeIsolated,
    HolderNodeKilled,
    SlowLinks,
    DiskFull,
}

impl Recipe {
    pub const ALL: [Recipe; 14] = [
        Recipe::HolderPause,
        Recipe::ClockJumpMajority,
        Recipe::ClockRateMajority,
        Recipe::ClockJumpHolder,
        Recipe::ClockRateHolder,
        Recipe::KillRestart,
        Recipe::KillRestartDurable,
        Recipe::KillRestartWiped,
        Recipe::HolderCutOff,
        Recipe::LeaderIsolated,
        Recipe::HolderNodeIsolated,
        Recipe::HolderNodeKilled,
        Recipe::SlowLinks,
        Recipe::DiskFull,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Recipe::HolderPause => "holder-pause",
            Recipe::ClockJumpMajority => "clock-jump-majority",
            Recipe::ClockRateMajority => "clock-rate-majority",
            Recipe::ClockJumpHolder => "clock-jump-holder",
            Recipe::ClockRateHolder => "clock-rate-holder",
            Recipe::KillRestart => "kill-restart",
            Recipe::KillRestartDurable => "kill-restart-durable",
            Recipe::KillRestartWiped => "kill-restart-wiped",
            Recipe::HolderCutOff => "holder-cut-off",
            Recipe::LeaderIsolated => "leader-isolated",
            Recipe::HolderNodeIsolated => "holder-node-isolated",
            Recipe::HolderNodeKilled => "holder-node-killed",
            Recipe::SlowLinks => "slow-links",
            Recipe::DiskFull => "disk-full",
        }
    }

    /// The recipe named as `--scenarios` names it.
    pub fn named(name: &str) -> Option<Recipe> {
        Recipe::ALL.into_iter().find(|r| r.name() == name)
    }

    /// What the recipe does, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Recipe::HolderPause => "the holder paused (SIGSTOP) for 3.5 s, past its 2 s lease",
            Recipe::ClockJumpMajority => {
                "the clocks of a majority of server nodes jump 20 s forward, three times (1.5 s each)"
            }
            Recipe::ClockRateMajority => {
                "the clocks of a majority of server nodes run 10 times fast"
            }
            Recipe::ClockJumpHolder => {
                "the holder's own clock jumps 20 s back while it holds past its lease"
            }
            Recipe::ClockRateHolder => {
                "the holder's own clock runs at half speed while it holds past its lease"
            }
            Recipe::KillRestart => {
                "a server node killed (-9) and restarted with its data directory"
            }
            Recipe::KillRestartDurable => {
                "a server node killed (-9) and restarted with its data directory, \
                 the servers set to keep every acknowledged write"
            }
            Recipe::KillRestartWiped => "a server node killed (-9) and restarted empty",
            Recipe::HolderCutOff => {
                "the holder cut off from every server node for 3.5 s while its lock client \
                 renews the lease in the background every 1 s (a watchdog): the renewals go \
                 unanswered, and the holder, told nothing, writes on to the resource, which \
                 is not behind the cut"
            }
            Recipe::LeaderIsolated => "the leader cut off from its peers for 4 s",
            Recipe::HolderNodeIsolated => {
                "the node the holder's client is connected to cut off from its peers for 4 s, \
                 twice the 2 s lease: the client, which talks to that node alone, cannot renew \
                 through it, and the holder writes on to the resource, which is not behind the cut"
            }
            Recipe::HolderNodeKilled => {
                "the node the holder's client is connected to killed (-9) for 4 s, twice the 2 s \
                 lease, and restarted on its data: the client, which talks to that node alone, \
                 cannot renew through it, and the holder writes on to the resource"
            }
            Recipe::SlowLinks => "every client-to-node link delayed 100 ms ± 30 ms each way",
            Recipe::DiskFull => {
                "a server node's data disk full for 8 s, the servers set to keep every \
                 acknowledged write where they can be; a node that exits meanwhile starts \
                 again on its data when the space is back"
            }
        }
    }

    /// What the recipe does, and to whom on this backend: one node of three is
    /// not the same fault as the only server.
    pub fn describe_for(self, facts: &Facts) -> String {
        let n = facts.nodes;
        let whom = match self {
            Recipe::KillRestartDurable if n == 1 => "the only server".to_string(),
            Recipe::KillRestart | Recipe::KillRestartWiped if n == 1 => {
                "the only server: every grant it made is gone with it".to_string()
            }
            Recipe::DiskFull if n == 1 => "the only server".to_string(),
            r if r.on_one_node() && facts.elects_leader => format!("the leader, one node of {n}"),
            r if r.on_one_node() => format!("one node of {n}"),
            Recipe::ClockJumpMajority | Recipe::ClockRateMajority if n == 1 => {
                "the only server".to_string()
            }
            Recipe::ClockJumpMajority | Recipe::ClockRateMajority if facts.elects_leader => {
                format!("{} nodes of {n}, the leader among them", n / 2 + 1)
            }
            Recipe::ClockJumpMajority | Recipe::ClockRateMajority => {
                format!("{} nodes of {n}", n / 2 + 1)
            }
            Recipe::HolderCutOff if n == 1 => {
                "one client, the holder, from the only server".to_string()
            }
            Recipe::HolderCutOff => format!("one client, the holder, from all {n} nodes"),
            Recipe::LeaderIsolated => format!("the leader, from the other {}", n - 1),
            Recipe::HolderNodeIsolated | Recipe::HolderNodeKilled => {
                let node = match self {
                    Recipe::HolderNodeIsolated => {
                        format!("the holder's node, from the other {}", n - 1)
                    }
                    _ => format!("the holder's node, one of {n}"),
                };
                match facts.pinned {
                    Some(pin) => format!("{node}; each client pinned to one node ({pin})"),
                    None => node,
                }
            }
            Recipe::SlowLinks if n == 1 => "the link to the only server".to_string(),
            Recipe::SlowLinks => format!("the links to all {n} nodes"),
            _ => return self.describe().to_string(),
        };
        let kept = match self {
            Recipe::KillRestart
            | Recipe::KillRestartDurable
            | Recipe::DiskFull
            | Recipe::HolderNodeKilled => {
                cluster::recipe(facts.kind).persistence(&self.options(facts))
            }
            _ => None,
        };
        let kept = kept.map(|p| format!("; {p}")).unwrap_or_default();
        format!(
            "{} ({} on {}: {whom}{}{kept})",
            self.describe(),
            facts.kind,
            count_nodes(n),
            self.again(facts)
        )
    }

    /// A kill recurs through the run, each time on the node its target picks
    /// then: on a cluster, more than one node over a run. Wiped, that can take a
    /// second node's data before the first has caught up (nats reissued a
    /// revision as a token so, docs/audits/nats.md): the scenario says so.
    fn again(self, facts: &Facts) -> String {
        if !self.kills() {
            return String::new();
        }
        if facts.nodes == 1 {
            return ", again after each restart".to_string();
        }
        let on = if facts.elects_leader {
            "the node leading then"
        } else {
            "a node picked afresh"
        };
        let lost = match self {
            Recipe::KillRestartWiped => {
                ": a second node's data can be gone before the first has caught up"
            }
            _ => "",
        };
        format!(", again after each restart on {on}{lost}")
    }

    /// A server node killed and restarted.
    fn kills(self) -> bool {
        matches!(
            self,
            Recipe::KillRestart | Recipe::KillRestartDurable | Recipe::KillRestartWiped
        )
    }

    /// A fault on one server node: the leader where one leads.
    fn on_one_node(self) -> bool {
        self.kills() || self == Recipe::DiskFull
    }

    /// The backend's own `[backend]` lines the recipe runs with: the durable one
    /// for `kill-restart-durable` and `disk-full` (a server that writes nothing
    /// to its disk has nothing for a full one to refuse), the one that pins a
    /// client to one node for `holder-node-isolated` (a client balanced over
    /// every node has no node of its own to cut off, and one that moves its
    /// session to another node when its own goes quiet keeps it), none for the
    /// others.
    fn option_lines(self, facts: &Facts) -> Option<&'static str> {
        match self {
            Recipe::KillRestartDurable | Recipe::DiskFull => facts.durable,
            Recipe::HolderNodeIsolated | Recipe::HolderNodeKilled => facts.pinned,
            _ => None,
        }
    }

    /// A fault on the links between nodes: the nodes run in namespaces.
    fn cuts_node_links(self) -> bool {
        matches!(self, Recipe::LeaderIsolated | Recipe::HolderNodeIsolated)
    }

    /// [`Recipe::option_lines`] as the server recipe reads them.
    fn options(self, facts: &Facts) -> lockcheck_servers::backend::Options {
        self.option_lines(facts)
            .and_then(|l| toml::from_str(l).ok())
            .unwrap_or_default()
    }

    /// A clock fault on the servers: it takes the clock interposer reaching them.
    fn skews_servers(self) -> bool {
        matches!(self, Recipe::ClockJumpMajority | Recipe::ClockRateMajority)
    }

    /// Whether a token fence can answer the recipe: not a clock fault on the
    /// holder, which only a self-fencing holder reads (it has no fenced scenario).
    pub fn fenceable(self) -> bool {
        !self.skews_holder()
    }

    /// A clock fault on the holder: only a holder that reads its own clock to
    /// decide whether it may write (self-fencing) is affected by it.
    fn skews_holder(self) -> bool {
        matches!(self, Recipe::ClockJumpHolder | Recipe::ClockRateHolder)
    }

    /// The run's length, and its fault entries as a workload writes them.
    fn faults(self, facts: &Facts) -> (&'static str, String) {
        // A node that leads where one does, else any one.
        let node = if facts.elects_leader {
            "primary"
        } else {
            "one"
        };
        // Where a leader keeps the time that expires sessions or leases
        // (ZooKeeper, etcd), a majority picked at random missed it in a third
        // of the runs and those runs could not break: the fenced twins of a
        // ZooKeeper audit were provoked in 12 of 23 and 3 of 22 runs
        // (docs/audits/zookeeper.md). The majority names the leader.
        let majority = if facts.elects_leader {
            "majority-with-primary"
        } else {
            "majority"
        };
        let entry = |lines: &str| format!("[[faults]]\n{lines}\n");
        match self {
            Recipe::HolderPause => ("8s", entry("kind = \"pause\"\ntarget = \"holder\"\nduration = \"3500ms\"\nafter = \"1s\"\ninterval = \"1s\"")),
            // A jump breaks the lock only if it lands while a client holds it and
            // another asks before the holder releases: one jump a run fell between a
            // release and the next acquire, or just before a release, in 3 of 20
            // redlock runs (docs/audits/redlock.md). Three jumps.
            Recipe::ClockJumpMajority => ("8s", entry(&format!("kind = \"clock\"\nnodes = \"{majority}\"\noffset = \"+20s\"\nafter = \"1s\"\nduration = \"1500ms\"\ninterval = \"1s\""))),
            Recipe::ClockRateMajority => ("8s", entry(&format!("kind = \"clock\"\nnodes = \"{majority}\"\nrate = 10.0\nafter = \"2s\"\nduration = \"4s\""))),
            Recipe::ClockJumpHolder => ("8s", entry("kind = \"clock\"\ntarget = \"holder\"\noffset = \"-20s\"\nafter = \"1s\"\nduration = \"5s\"")),
            Recipe::ClockRateHolder => ("8s", entry("kind = \"clock\"\ntarget = \"holder\"\nrate = 0.5\nafter = \"1s\"\nduration = \"5s\"")),
            // Kills 4 s apart: a lock txn in doubt at a kill leaves its key behind
            // with its lease, and etcd's new leader renews every lease, so a
            // leader killed every 2 s kept such a key alive to the end (23 of 30
            // 8 s runs saw no grant after the first kill, docs/audits/etcd.md).
            // A wiped node restarts through its server's first-start setup
            // (PostgreSQL's initdb took 3.4 to 7.8 s on a loaded 2-core machine):
            // 8 s left no grant after the restart to see (docs/audits/postgres-lease.md).
            Recipe::KillRestart | Recipe::KillRestartDurable | Recipe::KillRestartWiped => (
                if self == Recipe::KillRestartWiped { "16s" } else { "12s" },
                entry(&format!(
                    "kind = \"kill\"\nnodes = \"{node}\"\nwipe = {}\nduration = \"200ms\"\nafter = \"2s\"\ninterval = \"4s\"",
                    self == Recipe::KillRestartWiped
                )),
            ),
            Recipe::HolderCutOff => ("8s", entry("kind = \"partition\"\ntarget = \"holder\"\ncut = \"blackhole\"\nduration = \"3500ms\"\nafter = \"1s\"\ninterval = \"1s\"")),
            Recipe::LeaderIsolated => ("12s", entry("kind = \"partition-nodes\"\nshape = \"isolate\"\nnodes = \"primary\"\ncut = \"blackhole\"\nduration = \"4s\"\nafter = \"1s\"\ninterval = \"1s\"")),
            // Aimed at the lease: an etcd leader isolated renewed rather than
            // expired a holder's lease (a new leader extends every lease), so
            // no leader-isolated run deposed anyone (docs/audits/etcd.md). What
            // keeps a lease alive is the node the holder's client talks to; cut
            // off for twice the lease, it cannot pass a keep-alive on. An etcd
            // follower healed had no leader for up to 3 s more (its clients,
            // pinned to it, were granted nothing until then): 6 s between cuts.
            Recipe::HolderNodeIsolated => ("20s", entry("kind = \"partition-nodes\"\nshape = \"isolate\"\nnodes = \"holders\"\ncut = \"blackhole\"\nduration = \"4s\"\nafter = \"1s\"\ninterval = \"6s\"")),
            // The same aim by a kill: the holder's node gone rather than cut
            // off, so its client sees the connection refused at once instead
            // of silence; restarted on its data, as kill-restart's node is.
            Recipe::HolderNodeKilled => ("20s", entry("kind = \"kill\"\nnodes = \"holders\"\nduration = \"4s\"\nafter = \"1s\"\ninterval = \"6s\"")),
            Recipe::SlowLinks => ("10s", entry("kind = \"latency\"\nnodes = \"all\"\ndelay = \"100ms\"\njitter = \"30ms\"\nduration = \"4s\"\nafter = \"1s\"\ninterval = \"1s\"")),
            // Redis with its AOF fsynced always wrote on for 4.4 s into the page
            // its file held before exiting (docs/faults.md): 8 s of a full disk.
            Recipe::DiskFull => ("14s", entry(&format!("kind = \"disk-full\"\nnodes = \"{node}\"\nduration = \"8s\"\nafter = \"2s\""))),
        }
    }

    /// How the clients use the lock: (clients, acquire timeout, hold, writes, renewed
    /// in the background every). A holder that is to outlive its lease on its own
    /// holds twice the lease. One cut off holds as long and has its lock client
    /// renew the lease in the background, as a long-running holder does: a holder
    /// that renewed between its writes would stop at its first unanswered renewal,
    /// before its lease ran out, and no successor would ever see it write.
    ///
    /// Under the servers' clocks, a holder holds as long, kept alive the way its
    /// lock client keeps it (renewed in the background where nothing else does):
    /// a deposition must land inside a section and find the holder still writing.
    /// A ZooKeeper leader's clock running fast provoked (deposed a holder that then
    /// wrote) 3 of 10 fenced runs with 300 ms sections, 10 of 10 with 4 s ones,
    /// but 5 of 10 with 4 s ones also renewed in the background (why renewing
    /// lowers it was not looked into); its clock jumping: 10 of 16 (the last
    /// audit), 10 of 10, and 8 of 10 renewed. Redis renewed: 10 of 10 under
    /// either (seeds 1-10, 2 runs at once).
    fn section(
        self,
        facts: &Facts,
    ) -> (usize, &'static str, &'static str, u32, Option<&'static str>) {
        match self {
            Recipe::ClockJumpHolder | Recipe::ClockRateHolder => (2, "100ms", "4s", 8, None),
            Recipe::HolderCutOff => (3, "1s", "4s", 8, Some("1s")),
            Recipe::ClockJumpMajority | Recipe::ClockRateMajority => {
                (3, "1s", "4s", 8, (!facts.keeps_lease_alive).then_some("1s"))
            }
            Recipe::LeaderIsolated => (3, "1s", "1500ms", 4, None),
            // Past the cut and a successor's grant after it: with every client
            // pinned to the same node, nobody was granted before the heal and
            // the node's return to a leader, 3 s after it; with 6 s sections,
            // no holder of 6 etcd runs was still writing then.
            Recipe::HolderNodeIsolated | Recipe::HolderNodeKilled => (3, "1s", "10s", 20, None),
            _ => (3, "1s", "300ms", 3, None),
        }
    }
}

fn count_nodes(n: usize) -> String {
    match n {
        1 => "1 server".to_string(),
        n => format!("{n} nodes"),
    }
}

/// What the resource and the holders do about a deposed holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fencing {
    /// The resource takes every write.
    Unfenced,
    /// The resource rejects a token lower than one it applied (two holders at
    /// once are then allowed: what counts is whether a stale write got through).
    Fenced,
    /// Each holder checks its own lease deadline (less 200 ms) before each write
    /// (two holders at once allowed: what counts is whether a deposed holder's
    /// write got in).
    SelfFencing,
    /// Each holder asks its lock library (`held`) before each write: with
    /// `--client` (two holders at once allowed, as for self-fencing).
    LibraryFencing,
}

impl Fencing {
    pub fn name(self) -> &'static str {
        match self {
            Fencing::Unfenced => "unfenced",
            Fencing::Fenced => "fenced",
            Fencing::SelfFencing => "self-fencing",
            Fencing::LibraryFencing => "library-fencing",
        }
    }

    /// Whether the holder itself decides to stop writing.
    pub fn by_holder(self) -> bool {
        matches!(self, Fencing::SelfFencing | Fencing::LibraryFencing)
    }
}

/// One scenario: a recipe under a fencing mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Scenario {
    pub recipe: Recipe,
    pub fencing: Fencing,
}

impl Scenario {
    /// `holder-pause-fenced`: names the workload and its run directories.
    pub fn name(&self) -> String {
        format!("{}-{}", self.recipe.name(), self.fencing.name())
    }
}

/// What a scenario's runs are asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Question {
    /// Can the recipe break the lock? One flagged run answers it (the run is the
    /// counterexample): its runs stop at the first provoked one (at the first of
    /// any class when no twin waits on it).
    CanItBreak,
    /// Does the fence (or a self-fencing holder) hold against a recipe that broke
    /// the lock unfenced? Asked only once a provoked break is seen; only provoked
    /// runs answer it, up to the floor, and one flagged run answers it no.
    DoesItHold {
        /// The battery index of the recipe's unfenced scenario.
        unfenced: usize,
    },
}

/// The question each scenario of `scenarios` asks: a fencing mode of a recipe
/// that also runs unfenced asks whether it holds; every other scenario (the
/// unfenced ones, and a holder's clock fault, which has no unfenced scenario:
/// only a self-fencing holder reads that clock) asks whether it breaks.
pub fn questions(scenarios: &[Scenario]) -> Vec<Question> {
    scenarios
        .iter()
        .map(|s| {
            let unfenced = scenarios
                .iter()
                .position(|u| u.recipe == s.recipe && u.fencing == Fencing::Unfenced);
            match unfenced {
                Some(u) if s.fencing != Fencing::Unfenced => Question::DoesItHold { unfenced: u },
                _ => Question::CanItBreak,
            }
        })
        .collect()
}

/// A scenario the battery leaves out for this backend, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotApplicable {
    /// A scenario's name, or a recipe's (every mode of it), or `*-fenced`.
    pub scenario: String,
    pub why: String,
    /// This machine, not the backend, stood in the way (the audit not run as
    /// root, say): the backend has the scenario, so the audit is not complete.
    pub environment: bool,
}

/// What the battery needs to know of a backend, from the registries and this machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    pub kind: BackendKind,
    /// It hands out a fencing token.
    pub token: bool,
    pub nodes: usize,
    pub elects_leader: bool,
    /// Its nodes may run in network namespaces of their own.
    pub namespaces: bool,
    /// Why a live clock fault cannot reach its servers, if it cannot.
    pub clock_unreachable: Option<String>,
    /// The lock client adapter under test (`--client`), instead of the built-in one.
    pub client: Option<Vec<String>>,
    /// Its `[backend]` line that keeps every acknowledged write through a kill
    /// (`kill-restart-durable` runs with it), if it has one.
    pub durable: Option<&'static str>,
    /// Its `[backend]` line that pins each client to one node
    /// (`holder-node-isolated` runs with it), where its client talks to several.
    pub pinned: Option<&'static str>,
    /// lockcheck may mount file systems here (root): a node's disk for `disk-full`.
    pub mounts: bool,
    /// Its lock client keeps the lease alive by itself while the lock is held
    /// ([`BackendKind::keeps_lease_alive`]).
    pub keeps_lease_alive: bool,
}

impl Facts {
    /// The facts of `kind` on this machine: its server program must be here (else
    /// an environment error naming the package).
    pub fn of(kind: BackendKind, client: Option<Vec<String>>) -> Result<Facts> {
        let binary = cluster::server_binary(kind)
            .resolve(None)
            .map_err(|e| lockcheck_exit::Exit::environment(format!("{e:#}")))?;
        let clock_unreachable = match reach(&binary)? {
            Reach::Live => None,
            Reach::Unreachable(u) => Some(format!(
                "its server {u}: lockcheck's clock interposer cannot skew it live \
                 (a time namespace shifts a Go server's monotonic clock once, at start: \
                 backend.monotonic_offset, not a fault)"
            )),
        };
        Ok(Facts::registered(kind, clock_unreachable, client))
    }

    /// What the registries say of `kind`, with what is known of its clock.
    pub fn registered(
        kind: BackendKind,
        clock_unreachable: Option<String>,
        client: Option<Vec<String>>,
    ) -> Facts {
        let recipe = cluster::recipe(kind);
        Facts {
            kind,
            token: kind.token().is_some(),
            nodes: recipe.default_nodes(),
            elects_leader: recipe.elects_leader(),
            namespaces: recipe.namespaces(),
            clock_unreachable,
            client,
            durable: kind.durable_option(),
            pinned: kind.pinned_option(),
            mounts: nix::unistd::geteuid().is_root(),
            keeps_lease_alive: kind.keeps_lease_alive(),
        }
    }

    fn modes(&self) -> Vec<Fencing> {
        let mut modes = vec![Fencing::Unfenced];
        if self.token {
            modes.push(Fencing::Fenced);
        }
        modes.push(Fencing::SelfFencing);
        if self.client.is_some() {
            modes.push(Fencing::LibraryFencing);
        }
        modes
    }

    /// Why `recipe` cannot run here, if it cannot: this machine stands in the
    /// way, or else the backend has no such thing.
    fn refuses(&self, recipe: Recipe) -> Option<NotApplicable> {
        let environment = recipe == Recipe::DiskFull && !self.mounts;
        self.lacks(recipe).map(|why| NotApplicable {
            scenario: recipe.name().into(),
            why,
            environment,
        })
    }

    /// Why `recipe` does not apply to this backend here, if it does not.
    fn lacks(&self, recipe: Recipe) -> Option<String> {
        let kind = self.kind;
        if recipe.skews_servers() {
            return self.clock_unreachable.clone();
        }
        if recipe == Recipe::KillRestartDurable && self.durable.is_none() {
            return Some(format!(
                "{kind} has no option of lockcheck's that keeps more through a kill than \
                 kill-restart's servers keep"
            ));
        }
        if recipe == Recipe::DiskFull && !self.mounts {
            return Some(
                "a node's disk is a tmpfs lockcheck mounts under its data: the audit runs as root"
                    .into(),
            );
        }
        if recipe == Recipe::HolderNodeKilled {
            if self.nodes < 2 {
                return Some(format!(
                    "{kind} is one server: the holder's node is the only one, which \
                     kill-restart kills"
                ));
            }
            if !self.elects_leader {
                return Some(format!(
                    "{kind}'s {} nodes are independent instances: a holder is connected to \
                     all of them, none of its own",
                    self.nodes
                ));
            }
        }
        if recipe.cuts_node_links() {
            if self.nodes < 2 {
                return Some(format!("{kind} is one server: no peers to cut it off from"));
            }
            if !self.elects_leader {
                return Some(format!(
                    "{kind}'s {} nodes are independent instances: none leads",
                    self.nodes
                ));
            }
            if !self.namespaces {
                return Some(format!(
                    "{kind} runs on loopback only (its server admits loopback clients): \
                     node links are cut in network namespaces"
                ));
            }
        }
        None
    }
}

/// The scenarios that apply, in the order they run, and those that do not.
#[derive(Debug, Clone, PartialEq)]
pub struct Battery {
    pub scenarios: Vec<Scenario>,
    pub not_applicable: Vec<NotApplicable>,
}

/// The battery for a backend; `only`: these recipes, not all of them.
pub fn battery(facts: &Facts, only: Option<&[Recipe]>) -> Battery {
    let mut scenarios = Vec::new();
    let mut not_applicable = Vec::new();
    if !facts.token {
        not_applicable.push(NotApplicable {
            scenario: "*-fenced".into(),
            why: format!(
                "{} hands out no fencing token: there is nothing for a resource to check",
                facts.kind
            ),
            environment: false,
        });
    }
    let recipes = Recipe::ALL
        .into_iter()
        .filter(|r| only.is_none_or(|o| o.contains(r)));
    for recipe in recipes {
        if let Some(refused) = facts.refuses(recipe) {
            not_applicable.push(refused);
            continue;
        }
        for fencing in facts.modes() {
            let scenario = Scenario { recipe, fencing };
            if recipe.skews_holder() && !fencing.by_holder() {
                not_applicable.push(NotApplicable {
                    scenario: scenario.name(),
                    why: "the holder's own clock decides nothing unless the holder fences \
                          itself: the controller times every op, the lock service keeps its own time"
                        .into(),
                    environment: false,
                });
                continue;
            }
            scenarios.push(scenario);
        }
    }
    Battery {
        scenarios,
        not_applicable,
    }
}

/// A scenario written out as a workload: its text, read back and checked.
#[derive(Debug, Clone)]
pub struct ScenarioWorkload {
    pub scenario: Scenario,
    pub workload: Workload,
}

impl ScenarioWorkload {
    pub fn duration(&self) -> Duration {
        self.workload.duration
    }
}

/// The workload text of `scenario` for the backend of `facts`.
pub fn workload_text(scenario: Scenario, facts: &Facts) -> String {
    let Scenario { recipe, fencing } = scenario;
    let kind = facts.kind;
    let (duration, faults) = recipe.faults(facts);
    let (clients, acquire_timeout, hold, writes, renew_every) = recipe.section(facts);
    let quoted = |s: &str| toml::Value::String(s.into()).to_string();
    let mut t = format!(
        "# lockcheck audit: {} against {kind}: {}, {}.\n",
        scenario.name(),
        recipe.describe_for(facts),
        fencing.name()
    );
    t += &format!(
        "name = {}\n",
        quoted(&format!("{kind}-{}", scenario.name()))
    );
    // A run has shown what it can one lease after its fault's effect: it ends
    // there rather than at its full length, which stays its longest.
    t += &format!("duration = \"{duration}\"\nend = \"after-effect\"\nseed = 1\n");
    // Two holders at once are the lease's hole, which a fence or a holder that
    // stops itself is there to make harmless: with either, what fails the run
    // is a deposed holder's write getting in, not the overlap itself.
    match fencing {
        Fencing::Fenced => t += "resource = \"fenced\"\nallow = [\"double-holder\"]\n",
        Fencing::SelfFencing | Fencing::LibraryFencing => {
            t += "resource = \"unfenced\"\nallow = [\"double-holder\"]\n"
        }
        Fencing::Unfenced => t += "resource = \"unfenced\"\n",
    }
    t += &format!(
        "\n[backend]\nkind = {}\nlease = \"{LEASE}\"\nfencing_token = {}\nacquire_timeout = \"{acquire_timeout}\"\n",
        quoted(kind.name()),
        facts.token
    );
    if let Some(r) = renew_every {
        t += &format!("renew = \"background\"\nrenew_every = \"{r}\"\n");
    }
    if recipe.cuts_node_links() {
        t += "network = \"namespaces\"\n";
    }
    if let Some(line) = recipe.option_lines(facts) {
        t += &format!("{line}\n");
    }
    t += &format!("\n[clients]\ncount = {clients}\n");
    match fencing {
        Fencing::SelfFencing => t += "self_fencing_margin = \"200ms\"\n",
        Fencing::LibraryFencing => t += "self_fencing = \"library\"\n",
        Fencing::Unfenced | Fencing::Fenced => {}
    }
    if let Some(command) = &facts.client {
        let args: Vec<String> = command.iter().map(|a| quoted(a)).collect();
        t += &format!("\n[client]\ncommand = [{}]\n", args.join(", "));
    }
    t += &format!(
        "\n[critical_section]\nhold = \"{hold}\"\nwrites = {writes}\nthink = \"50ms\"\n\n{faults}"
    );
    t
}

/// The shortest workload of `scenarios`: no audit can run one in less.
pub fn shortest(scenarios: &[Scenario], facts: &Facts) -> Option<Duration> {
    scenarios
        .iter()
        .filter_map(|&s| {
            let path = Path::new("scenario.toml");
            Workload::parse(&workload_text(s, facts), path).ok()
        })
        .map(|w| w.duration)
        .min()
}

/// Writes each scenario's workload into `dir` and reads it back as `lockcheck run`
/// will: a scenario the workload rules refuse is a bug of the battery, said with
/// the file.
pub fn write_workloads(
    scenarios: &[Scenario],
    facts: &Facts,
    dir: &Path,
) -> Result<Vec<ScenarioWorkload>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    scenarios
        .iter()
        .map(|&scenario| {
            let text = workload_text(scenario, facts);
            let path = dir.join(format!("{}.toml", scenario.name()));
            std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
            let workload = Workload::parse(&text, &path)
                .with_context(|| format!("the audit's scenario {}", scenario.name()))?;
            Ok(ScenarioWorkload { scenario, workload })
        })
        .collect()
}

#[cfg(test)]
mod tests;
