//! Workloads are files: `workloads/*.toml` say which lock service to start, how the
//! clients use the lock, what the resource does with stale tokens, which faults to
//! inject and which anomalies the design tolerates on purpose.
//!
//! Every key is checked: an unknown key or a bad value is an error that names the
//! file, the line, the key and what is expected.

use crate::backend::BackendKind;
use crate::check::AnomalyKind;
use crate::cluster::Runtime;
use crate::fault::clock::ClockChange;
use crate::fault::node::NodeTarget;
use crate::fault::Target;
use crate::resource::Mode;
use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Deserializer};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A workload, read and validated.
#[derive(Debug, Clone)]
pub struct Workload {
    /// `name` in the file, else the file's stem: names the run directory.
    pub name: String,
    /// Where it was read from, and its text (copied into the run directory).
    pub path: PathBuf,
    pub text: String,
    pub duration: Duration,
    pub seed: u64,
    pub allow: Vec<AnomalyKind>,
    pub backend: Backend,
    pub clients: Clients,
    pub section: CriticalSection,
    pub resource: Mode,
    pub faults: Vec<FaultEntry>,
    /// Where the servers run: lockcheck's own processes (default), its own
    /// containers, or someone else's servers (`backend.endpoints`).
    pub runtime: Runtime,
}

#[derive(Debug, Clone)]
pub struct Backend {
    pub kind: BackendKind,
    /// Server nodes: 1 for Redis, 5 independent instances for Redlock, 3 for etcd.
    pub nodes: usize,
    pub lease: Lease,
    /// Whether acquire asks the backend for a fencing token (Redis `INCR`, etcd revision).
    pub fencing_token: bool,
    /// How long one acquire may wait for the lock before it fails.
    pub acquire_timeout: Duration,
    /// The servers' addresses under the external runtime (n1 first).
    pub endpoints: Vec<String>,
    /// The image under the docker runtime, instead of the backend's official one.
    pub image: Option<String>,
}

/// The lease a holder gets, and how often a holder renews it during a long hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    pub ttl: Duration,
    pub renew_every: Option<Duration>,
    /// The preset this came from, with the settings it stands for, for reports.
    pub preset: Option<&'static LeasePreset>,
}

/// The TTLs the industry actually runs, by name: `lease = "client-go"`.
#[derive(Debug, PartialEq)]
pub struct LeasePreset {
    pub name: &'static str,
    pub ttl: Duration,
    /// The holder's renewal period (client-go's retry period); `None`: the recipe
    /// relies on the backend's own keep-alive, or on finishing within the TTL.
    pub renew_every: Option<Duration>,
    /// Where the numbers come from and what else the recipe sets.
    pub source: &'static str,
}

pub const LEASE_PRESETS: &[LeasePreset] = &[
    LeasePreset {
        name: "client-go",
        ttl: Duration::from_secs(15),
        renew_every: Some(Duration::from_secs(2)),
        source: "Kubernetes client-go leader election: lease 15 s, renew deadline 10 s, retry period 2 s",
    },
    LeasePreset {
        name: "etcd-session",
        ttl: Duration::from_secs(60),
        renew_every: None,
        source: "etcd clientv3 concurrency session: TTL 60 s, kept alive by the session",
    },
    LeasePreset {
        name: "consul",
        ttl: Duration::from_secs(15),
        renew_every: None,
        source: "Consul lock: session TTL 15 s, lock-delay 15 s",
    },
    LeasePreset {
        name: "curator",
        ttl: Duration::from_secs(60),
        renew_every: None,
        source: "Apache Curator / ZooKeeper: session timeout 60 s",
    },
    LeasePreset {
        name: "redis-docs",
        ttl: Duration::from_secs(30),
        renew_every: None,
        source: "Redis documentation: SET key value NX PX 30000",
    },
];

#[derive(Debug, Clone)]
pub struct Clients {
    pub count: usize,
    /// How long the controller waits for a worker's reply (beyond an acquire's own
    /// wait) before it records `info` and retires the process id.
    pub op_timeout: Duration,
}

/// What a holder does while it holds the lock.
#[derive(Debug, Clone)]
pub struct CriticalSection {
    /// Time from acquire to release, spread evenly after each write.
    pub hold: Duration,
    /// Writes to the protected resource per critical section, each carrying the token.
    pub writes: u32,
    /// Pause between a release and the next acquire.
    pub think: Duration,
}

/// One `[[faults]]` entry: what to break, whom, and when.
#[derive(Debug, Clone)]
pub struct FaultEntry {
    pub kind: FaultKind,
    /// The client a client fault hits; `Random` (timed) for node faults, which
    /// pick their nodes with `nodes`.
    pub target: Target,
    /// The server nodes a node fault (pause-node, kill, clock) hits.
    pub nodes: NodeTarget,
    /// Kill: restart the node with its data directory wiped.
    pub wipe: bool,
    /// Clock: what happens to the clocks.
    pub clock: Option<ClockChange>,
    /// How long each occurrence lasts.
    pub duration: Duration,
    /// Quiet period from the start of the run to the first occurrence.
    pub after: Duration,
    /// Gap from the end of one occurrence to the start of the next; `None`: once.
    pub interval: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// SIGSTOP / SIGCONT a client process.
    Pause,
    /// SIGSTOP / SIGCONT server nodes.
    PauseNode,
    /// Kill -9 server nodes, restart them when the fault ends.
    Kill,
    /// Skew the clocks of server nodes: jump, rate or strobe.
    Clock,
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

        let kind = raw.backend.kind;
        let nodes = raw.backend.nodes.unwrap_or(match kind {
            BackendKind::Redis => 1,
            BackendKind::Redlock => 5,
            BackendKind::Etcd => 3,
        });
        if nodes == 0 {
            bail!(bad("backend.nodes", "expected at least 1 node".into()));
        }
        if kind == BackendKind::Redis && nodes != 1 {
            bail!(bad(
                "backend.nodes",
                format!("redis is a single instance: expected 1, found {nodes} (use kind = \"redlock\" for several)")
            ));
        }
        let fencing_token = raw
            .backend
            .fencing_token
            .unwrap_or(kind != BackendKind::Redlock);
        if kind == BackendKind::Redlock && fencing_token {
            bail!(bad(
                "backend.fencing_token",
                "Redlock hands out no fencing token: expected false".into()
            ));
        }
        let resource = raw.resource.unwrap_or(Mode::Unfenced);
        if resource == Mode::Fenced && !fencing_token {
            bail!(bad(
                "resource",
                "a fenced resource needs tokens: set backend.fencing_token = true, or resource = \"unfenced\"".into()
            ));
        }
        let lease = match raw.backend.lease {
            raw::LeaseSpec::Preset(p) => Lease {
                ttl: p.ttl,
                renew_every: p.renew_every,
                preset: Some(p),
            },
            raw::LeaseSpec::Ttl(Dur(ttl)) => Lease {
                ttl,
                renew_every: None,
                preset: None,
            },
        };
        let lease = Lease {
            renew_every: raw.backend.renew_every.map(|d| d.0).or(lease.renew_every),
            ..lease
        };
        if lease.ttl.is_zero() {
            bail!(bad(
                "backend.lease",
                "expected a lease longer than 0".into()
            ));
        }
        if matches!(lease.renew_every, Some(r) if r.is_zero()) {
            bail!(bad(
                "backend.renew_every",
                "expected a period longer than 0".into()
            ));
        }
        let count = raw.clients.count;
        if count == 0 {
            bail!(bad("clients.count", "expected at least 1 client".into()));
        }
        if raw.critical_section.writes == 0 {
            bail!(bad(
                "critical_section.writes",
                "expected at least 1 write per critical section".into()
            ));
        }
        let mut faults = Vec::new();
        for (i, f) in raw.faults.into_iter().enumerate() {
            let key = |k: &str| format!("faults[{i}].{k}");
            if f.kind == FaultKind::Pause && f.target.is_none() {
                bail!(bad(
                    &key("target"),
                    "expected \"holder\", \"random\" or a client name like \"client-0\"".into()
                ));
            }
            if let Some(Target::Client(c)) = f.target {
                if c >= count {
                    bail!(bad(
                        &key("target"),
                        format!(
                            "there are {count} clients (client-0 .. client-{}): found {}",
                            count - 1,
                            Target::Client(c)
                        )
                    ));
                }
            }
            if f.duration.0.is_zero() {
                bail!(bad(
                    &key("duration"),
                    "expected a duration longer than 0".into()
                ));
            }
            let client_fault = f.kind == FaultKind::Pause;
            if client_fault && f.nodes.is_some() {
                bail!(bad(
                    &key("nodes"),
                    "a client pause hits a client: use `target`, or kind = \"pause-node\"".into()
                ));
            }
            if !client_fault && f.target.is_some() {
                bail!(bad(&key("target"), "a node fault hits server nodes: use `nodes` (\"one\", \"minority\", \"majority\", \"all\", \"primary\" or \"n2\")".into()));
            }
            if f.kind != FaultKind::Kill && f.wipe.is_some() {
                bail!(bad(
                    &key("wipe"),
                    "only a kill restarts a node, wiped or not".into()
                ));
            }
            let clock = clock_change(&f, &|k, what| bad(&key(k), what))?;
            faults.push(FaultEntry {
                kind: f.kind,
                target: f.target.unwrap_or(Target::Random),
                nodes: f.nodes.unwrap_or(NodeTarget::One),
                wipe: f.wipe.unwrap_or(false),
                clock,
                duration: f.duration.0,
                after: f.after.map_or(Duration::from_secs(1), |d| d.0),
                interval: f.interval.map(|d| d.0),
            });
        }
        if raw.duration.0.is_zero() {
            bail!(bad("duration", "expected a duration longer than 0".into()));
        }
        let name = match raw.name {
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
        };
        Workload {
            name,
            path: path.to_path_buf(),
            text: text.to_string(),
            duration: raw.duration.0,
            seed: raw.seed.unwrap_or(0),
            allow: raw.allow,
            backend: Backend {
                kind,
                nodes,
                lease,
                fencing_token,
                acquire_timeout: raw
                    .backend
                    .acquire_timeout
                    .map_or(Duration::from_secs(1), |d| d.0),
                endpoints: raw.backend.endpoints.unwrap_or_default(),
                image: raw.backend.image,
            },
            clients: Clients {
                count,
                op_timeout: raw
                    .clients
                    .op_timeout
                    .map_or(Duration::from_secs(10), |d| d.0),
            },
            section: CriticalSection {
                hold: raw.critical_section.hold.0,
                writes: raw.critical_section.writes,
                think: raw.critical_section.think.map_or(Duration::ZERO, |d| d.0),
            },
            resource,
            faults,
            runtime: raw.runtime.unwrap_or_default(),
        }
        .checked_for_runtime()
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
        match self.runtime {
            Runtime::External if endpoints == 0 => bail!(
                "{file}: backend.endpoints: the external runtime needs the servers' addresses, like [\"127.0.0.1:6379\"]"
            ),
            Runtime::External if self.backend.kind == BackendKind::Redis && endpoints != 1 => bail!(
                "{file}: backend.endpoints: redis is a single instance: expected 1 address, found {endpoints}"
            ),
            Runtime::External => self.backend.nodes = endpoints,
            _ if endpoints > 0 => bail!(
                "{file}: backend.endpoints: only for runtime = \"external\"; under the {rt} runtime lockcheck starts its own servers"
            ),
            _ => {}
        }
        for (i, f) in self.faults.iter().enumerate() {
            if let Some(why) = runtime_refuses(self.runtime, f.kind) {
                bail!(
                    "{file}: faults[{i}].kind: {} is unavailable under the {rt} runtime: {why}",
                    f.kind.name()
                );
            }
        }
        Ok(self)
    }
}

/// Why a runtime cannot apply a kind of fault, if it cannot. Under the external
/// runtime lockcheck owns the clients and the links to the servers (its proxy),
/// never the servers' processes or clocks.
fn runtime_refuses(runtime: Runtime, kind: FaultKind) -> Option<&'static str> {
    match (runtime, kind) {
        (Runtime::External, FaultKind::PauseNode) => Some("pausing a server needs its process; lockcheck did not start these servers"),
        (Runtime::External, FaultKind::Kill) => Some("killing and restarting a server needs its process; lockcheck did not start these servers"),
        (Runtime::External, FaultKind::Clock) => Some("a server's clock is skewed through the interposer lockcheck loads into the servers it starts; these it did not start"),
        (Runtime::Local | Runtime::Docker | Runtime::External, _) => None,
    }
}

impl FaultKind {
    /// The kind as a workload spells it.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Pause => "pause",
            FaultKind::PauseNode => "pause-node",
            FaultKind::Kill => "kill",
            FaultKind::Clock => "clock",
        }
    }
}

/// Turns toml's error (with its span) into `FILE:LINE: KEY: what is expected`.
fn located(file: &dyn fmt::Display, text: &str, e: &toml::de::Error) -> anyhow::Error {
    let message = e.message().trim_end();
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            let source = text.lines().nth(line - 1).unwrap_or("").trim();
            // The key a value error is about is at the start of its line, inside the
            // table of the nearest header above it.
            let table = text
                .lines()
                .take(line - 1)
                .filter_map(|l| l.trim().strip_prefix('['))
                .last()
                .map(|h| h.trim_matches(|c| c == '[' || c == ']').trim());
            let key = source
                .split_once('=')
                .map(|(k, _)| k.trim())
                .filter(|k| !k.is_empty() && !k.starts_with('['));
            let key = match (table, key) {
                (Some(t), Some(k)) => format!("{t}.{k}"),
                (None, Some(k)) => k.to_string(),
                (Some(t), None) => t.to_string(),
                (None, None) => String::new(),
            };
            if key.is_empty() {
                anyhow!("{file}:{line}: {message}\n    {source}")
            } else {
                anyhow!("{file}:{line}: {key}: {message}\n    {source}")
            }
        }
        None => anyhow!("{file}: {message}"),
    }
}

/// What a `kind = "clock"` entry does: `rate`, `period` (strobe between
/// `offset` and `offset2`) or `offset` (a jump); other kinds take none of them.
fn clock_change(
    f: &raw::Fault,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<Option<ClockChange>> {
    let given = [
        ("offset", f.offset.is_some()),
        ("offset2", f.offset2.is_some()),
        ("period", f.period.is_some()),
        ("rate", f.rate.is_some()),
    ];
    if f.kind != FaultKind::Clock {
        return match given.iter().find(|(_, g)| *g) {
            Some((k, _)) => Err(bad(k, "only a clock fault takes it".into())),
            None => Ok(None),
        };
    }
    let change = match (f.rate, f.period, f.offset, f.offset2) {
        (Some(rate), None, None, None) if rate.is_finite() && rate > 0.0 => {
            ClockChange::Rate { rate }
        }
        (Some(rate), None, None, None) => {
            return Err(bad(
                "rate",
                format!("expected a positive number, found {rate}"),
            ))
        }
        (None, Some(period), a, Some(b)) if !period.0.is_zero() => ClockChange::Strobe {
            offset_ns: a.map_or(0, |a| a.0),
            offset2_ns: b.0,
            period: period.0,
        },
        (None, None, Some(a), None) => ClockChange::Jump { offset_ns: a.0 },
        _ => {
            return Err(bad(
                "kind",
                "a clock fault takes `offset` (a jump), or `rate`, or `period` + `offset2` \
                 (+ `offset`) for a strobe"
                    .into(),
            ))
        }
    };
    Ok(Some(change))
}

/// A signed duration, in nanoseconds: `"+20s"`, `"-500ms"`, `"20s"`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignedDur(pub i64);

impl<'de> Deserialize<'de> for SignedDur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let t = s.trim();
        let (sign, rest) = match t.strip_prefix('-') {
            Some(r) => (-1, r),
            None => (1, t.strip_prefix('+').unwrap_or(t)),
        };
        let Dur(d) = rest.parse().map_err(serde::de::Error::custom)?;
        i64::try_from(d.as_nanos())
            .map(|n| SignedDur(sign * n))
            .map_err(|_| serde::de::Error::custom(format!("{s} is too long")))
    }
}

/// A duration written with its unit: `"250ms"`, `"2s"`, `"1.5s"`, `"1m"`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dur(pub Duration);

const DURATION_EXPECTED: &str =
    "expected a duration with its unit, like \"500ms\", \"2s\" or \"1m\"";

impl std::str::FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, unit) = s.split_at(split);
        let scale = match unit.trim() {
            "ms" => 1e-3,
            "s" => 1.0,
            "m" | "min" => 60.0,
            _ => return Err(format!("{DURATION_EXPECTED}, found \"{s}\"")),
        };
        let n: f64 = number
            .parse()
            .map_err(|_| format!("{DURATION_EXPECTED}, found \"{s}\""))?;
        Duration::try_from_secs_f64(n * scale)
            .map(Dur)
            .map_err(|_| format!("{DURATION_EXPECTED}, found \"{s}\""))
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(DURATION_EXPECTED.trim_start_matches("expected "))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Dur, E> {
                s.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

/// The file's shape, as serde reads it: every table denies unknown keys.
mod raw {
    use super::*;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Workload {
        pub name: Option<String>,
        pub duration: Dur,
        pub seed: Option<u64>,
        #[serde(default)]
        pub allow: Vec<AnomalyKind>,
        pub backend: Backend,
        pub clients: Clients,
        pub critical_section: CriticalSection,
        pub resource: Option<Mode>,
        #[serde(default)]
        pub faults: Vec<Fault>,
        pub runtime: Option<Runtime>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Backend {
        pub kind: BackendKind,
        pub nodes: Option<usize>,
        pub lease: LeaseSpec,
        pub renew_every: Option<Dur>,
        pub fencing_token: Option<bool>,
        pub acquire_timeout: Option<Dur>,
        pub endpoints: Option<Vec<String>>,
        pub image: Option<String>,
    }

    /// `lease = "2s"` or `lease = "client-go"`.
    pub enum LeaseSpec {
        Ttl(Dur),
        Preset(&'static LeasePreset),
    }

    impl<'de> Deserialize<'de> for LeaseSpec {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let s = String::deserialize(d)?;
            if let Some(p) = LEASE_PRESETS.iter().find(|p| p.name == s) {
                return Ok(LeaseSpec::Preset(p));
            }
            s.parse().map(LeaseSpec::Ttl).map_err(|_| {
                let names: Vec<_> = LEASE_PRESETS.iter().map(|p| p.name).collect();
                serde::de::Error::custom(format!(
                    "{DURATION_EXPECTED}, or a preset ({}), found \"{s}\"",
                    names.join(", ")
                ))
            })
        }
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Clients {
        pub count: usize,
        pub op_timeout: Option<Dur>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct CriticalSection {
        pub hold: Dur,
        pub writes: u32,
        pub think: Option<Dur>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Fault {
        pub kind: FaultKind,
        pub target: Option<Target>,
        pub nodes: Option<NodeTarget>,
        pub wipe: Option<bool>,
        /// Clock: a jump (`"+20s"`, `"-5s"`), or strobe's first offset.
        pub offset: Option<SignedDur>,
        /// Clock, strobe: the other offset, and how often it flips.
        pub offset2: Option<SignedDur>,
        pub period: Option<Dur>,
        /// Clock: how fast it runs (2.0 = twice real speed).
        pub rate: Option<f64>,
        pub duration: Dur,
        pub after: Option<Dur>,
        pub interval: Option<Dur>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
duration = "10s"
seed = 7
allow = ["double-holder"]
resource = "fenced"

[backend]
kind = "redis"
lease = "1500ms"

[clients]
count = 3

[critical_section]
hold = "300ms"
writes = 3
think = "50ms"

[[faults]]
kind = "pause"
target = "holder"
duration = "3s"
interval = "2s"
"#;

    fn parse(text: &str) -> Result<Workload> {
        Workload::parse(text, Path::new("w/test.toml"))
    }

    #[test]
    fn a_full_workload_reads_with_defaults_filled_in() {
        let w = parse(GOOD).unwrap();
        assert_eq!(w.name, "test");
        assert_eq!(w.seed, 7);
        assert_eq!(w.backend.nodes, 1);
        assert!(w.backend.fencing_token);
        assert_eq!(w.backend.lease.ttl, Duration::from_millis(1500));
        assert_eq!(w.resource, Mode::Fenced);
        assert_eq!(w.allow, vec![AnomalyKind::DoubleHolder]);
        assert_eq!(w.faults[0].target, Target::Holder);
        assert_eq!(w.faults[0].after, Duration::from_secs(1));
        assert_eq!(w.faults[0].interval, Some(Duration::from_secs(2)));
    }

    #[test]
    fn presets_are_usable_by_name() {
        let w = parse(&GOOD.replace("\"1500ms\"", "\"client-go\"")).unwrap();
        assert_eq!(w.backend.lease.ttl, Duration::from_secs(15));
        assert_eq!(w.backend.lease.renew_every, Some(Duration::from_secs(2)));
        let w = parse(&GOOD.replace("\"1500ms\"", "\"redis-docs\"")).unwrap();
        assert_eq!(w.backend.lease.ttl, Duration::from_millis(30000));
        let e = parse(&GOOD.replace("\"1500ms\"", "\"k8s\"")).unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.contains("w/test.toml:9: backend.lease:") && e.contains("client-go"),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_key_names_file_line_key_and_the_expected_keys() {
        let e = parse(&GOOD.replace("writes = 3", "writes = 3\nhodl = \"1s\"")).unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.contains("w/test.toml:17: critical_section.hodl: unknown field"),
            "{e}"
        );
        assert!(e.contains("hodl") && e.contains("hold"), "{e}");
    }

    #[test]
    fn bad_values_name_the_key_and_what_is_expected() {
        let e = format!(
            "{:#}",
            parse(&GOOD.replace("\"300ms\"", "300")).unwrap_err()
        );
        assert!(
            e.contains(":15: critical_section.hold:") && e.contains("\"500ms\""),
            "{e}"
        );
        assert!(!e.contains("expected expected"), "{e}");
        let e = format!(
            "{:#}",
            parse(&GOOD.replace("\"holder\"", "\"leader\"")).unwrap_err()
        );
        assert!(e.contains("target") && e.contains("client-0"), "{e}");
        let e = format!(
            "{:#}",
            parse(&GOOD.replace("\"holder\"", "\"client-5\"")).unwrap_err()
        );
        assert!(
            e.contains("faults[0].target") && e.contains("3 clients"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            parse(&GOOD.replace("kind = \"redis\"", "kind = \"redlock\"")).unwrap_err()
        );
        assert!(e.contains("backend.fencing_token"), "{e}");
        let e = format!(
            "{:#}",
            parse(&GOOD.replace("\"double-holder\"", "\"two-holders\"")).unwrap_err()
        );
        assert!(
            e.contains("allow") && e.contains("stale-write-accepted"),
            "{e}"
        );
    }

    #[test]
    fn durations_need_their_unit() {
        assert_eq!(
            "250ms".parse::<Dur>().unwrap().0,
            Duration::from_millis(250)
        );
        assert_eq!(
            "1.5s".parse::<Dur>().unwrap().0,
            Duration::from_millis(1500)
        );
        assert_eq!("2m".parse::<Dur>().unwrap().0, Duration::from_secs(120));
        assert!("2".parse::<Dur>().is_err());
        assert!("s".parse::<Dur>().is_err());
        assert!("-1s".parse::<Dur>().is_err());
    }
}
