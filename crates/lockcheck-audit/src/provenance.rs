//! Where a scorecard came from: the lockcheck that ran the audit (its version,
//! the commit it was built from and whether its sources differed from it), the
//! battery exactly as it ran (a digest of the scenarios' workloads), the
//! machine (cores, memory, load at start and end, kernel), when it started and
//! the command line. A verdict is only as good as these: the same verdict from
//! another commit, battery or a loaded machine is another measurement.

use super::battery::ScenarioWorkload;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Deserializer, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;

/// audit.json's format. 1 (no `format` field) had no provenance; 2 adds
/// `format` and `provenance`, and writes `client`, `interrupted` and
/// `failures` even when empty, so that a missing one is an error, not a default;
/// 3 adds `bound`, `bound_reached` and `shards` (a format-2 scorecard reads
/// with them null: no bound asked, an audit run whole).
pub const FORMAT: u32 = 3;

/// `recorded` of a provenance the audit itself wrote: every field known.
pub const BY_THE_AUDIT: &str = "by the audit";

/// `recorded` of a provenance written by hand after the run, from what a page
/// kept of it (a scorecard from before format 2): a field nobody recorded is null.
pub const AFTER_THE_RUN: &str = "after the run, from ";

/// The commit the binary was built from (`git rev-parse HEAD`, by build.rs), or
/// "unknown" for a build outside a git checkout.
pub const COMMIT: &str = env!("LOCKCHECK_GIT_COMMIT");

/// Whether the sources the binary was built from differed from [`COMMIT`]:
/// "clean", "dirty" or "unknown".
pub const TREE: &str = env!("LOCKCHECK_GIT_TREE");

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// [`BY_THE_AUDIT`], or [`AFTER_THE_RUN`] and the page it was taken from.
    pub recorded: String,
    #[serde(deserialize_with = "present")]
    pub lockcheck_version: Option<String>,
    /// 40 hex digits, or "unknown" (built outside git).
    #[serde(deserialize_with = "present")]
    pub commit: Option<String>,
    /// "clean", "dirty" or "unknown".
    #[serde(deserialize_with = "present")]
    pub tree: Option<String>,
    /// sha256 over the scenarios' workloads as run, in battery order.
    #[serde(deserialize_with = "present")]
    pub battery_digest: Option<String>,
    /// RFC 3339, UTC, to the second.
    #[serde(deserialize_with = "present")]
    pub started_utc: Option<String>,
    /// The audit's command line, the program named `lockcheck`.
    #[serde(deserialize_with = "present")]
    pub argv: Option<Vec<String>>,
    pub machine: Machine,
}

/// The machine the audit ran on; a figure this machine would not give is null.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    #[serde(deserialize_with = "present")]
    pub cores: Option<usize>,
    #[serde(deserialize_with = "present")]
    pub memory_bytes: Option<u64>,
    /// The load as the audit started.
    #[serde(deserialize_with = "present")]
    pub load_start: Option<Load>,
    /// The load when the scorecard was written (at its end, or after the last
    /// run so far).
    #[serde(deserialize_with = "present")]
    pub load_end: Option<Load>,
    /// The kernel and the distribution: `Linux 6.8.0-49-generic (Ubuntu 24.04.1 LTS)`.
    #[serde(deserialize_with = "present")]
    pub os: Option<String>,
}

/// The load averages of /proc/loadavg. The audit records all three; a page
/// written before scorecards said where they came from kept only the first.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Load {
    pub one_min: f64,
    #[serde(deserialize_with = "present")]
    pub five_min: Option<f64>,
    #[serde(deserialize_with = "present")]
    pub fifteen_min: Option<f64>,
}

impl std::fmt::Display for Load {
    /// `1.93 / 0.80 / 0.51` (1, 5 and 15 minutes), or the first alone.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.2}", self.one_min)?;
        match (self.five_min, self.fifteen_min) {
            (Some(five), Some(fifteen)) => write!(f, " / {five:.2} / {fifteen:.2}"),
            _ => Ok(()),
        }
    }
}

/// An `Option` field that must be present, null or not: serde would read a
/// missing one as `None`, and a field nobody wrote is not one known to be empty.
pub(super) fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    Option::<T>::deserialize(d)
}

impl Provenance {
    /// This audit's, as it starts: `argv` its command line, the program first.
    pub fn now(workloads: &[ScenarioWorkload], scenarios: &Path, argv: &[String]) -> Result<Self> {
        let argv = std::iter::once("lockcheck".to_string())
            .chain(argv.iter().skip(1).cloned())
            .collect();
        Ok(Provenance {
            recorded: BY_THE_AUDIT.to_string(),
            lockcheck_version: Some(env!("CARGO_PKG_VERSION").to_string()),
            commit: Some(COMMIT.to_string()),
            tree: Some(TREE.to_string()),
            battery_digest: Some(battery_digest(workloads, scenarios)?),
            started_utc: Some(
                chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            ),
            argv: Some(argv),
            machine: Machine {
                cores: std::thread::available_parallelism().ok().map(usize::from),
                memory_bytes: memory_bytes(),
                load_start: load(),
                load_end: None,
                os: os(),
            },
        })
    }

    /// The same, with the load as the scorecard is written.
    pub fn as_of_now(&self) -> Provenance {
        let mut p = self.clone();
        p.machine.load_end = load();
        p
    }

    /// Refuses a provenance that claims the audit wrote it yet lacks a field, or
    /// that does not say how it was recorded. `Err` names the field.
    pub fn check(&self) -> Result<()> {
        if self.recorded.starts_with(AFTER_THE_RUN) {
            return Ok(());
        }
        if self.recorded != BY_THE_AUDIT {
            bail!(
                "field provenance.recorded: {:?}, expected {BY_THE_AUDIT:?} or {AFTER_THE_RUN:?} and the page",
                self.recorded
            );
        }
        let known = [
            ("lockcheck_version", self.lockcheck_version.is_some()),
            ("commit", self.commit.is_some()),
            ("tree", self.tree.is_some()),
            ("battery_digest", self.battery_digest.is_some()),
            ("started_utc", self.started_utc.is_some()),
            ("argv", self.argv.is_some()),
        ];
        match known.iter().find(|(_, k)| !k) {
            Some((field, _)) => bail!(
                "field provenance.{field} is null, which only a provenance recorded {AFTER_THE_RUN}a page may leave"
            ),
            None => Ok(()),
        }
    }

    /// The commit, short, with what is known of the tree: `b6e1a01`,
    /// `b6e1a01 (dirty)`, `unknown`.
    pub fn short_commit(&self) -> String {
        let commit = match self.commit.as_deref() {
            None | Some("unknown") => return "unknown".to_string(),
            Some(c) => &c[..c.len().min(7)],
        };
        match self.tree.as_deref() {
            Some("dirty") => format!("{commit} (dirty)"),
            _ => commit.to_string(),
        }
    }

    /// Each field by name, "unknown" where it is null: JUnit's properties, and
    /// what [`Provenance::lines`] says.
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        let m = &self.machine;
        let load = |l: Option<Load>| l.map(|l| l.to_string());
        [
            ("recorded", Some(self.recorded.clone())),
            ("version", self.lockcheck_version.clone()),
            ("commit", self.commit.clone()),
            ("tree", self.tree.clone()),
            ("battery", self.battery_digest.clone()),
            ("started", self.started_utc.clone()),
            ("cores", m.cores.map(|c| c.to_string())),
            (
                "memory",
                m.memory_bytes.map(|b| format!("{:.1} GiB", b as f64 / GIB)),
            ),
            ("load-start", load(m.load_start)),
            ("load-end", load(m.load_end)),
            ("os", m.os.clone()),
            ("command", self.argv.as_ref().map(|a| a.join(" "))),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.unwrap_or_else(|| "unknown".to_string())))
        .collect()
    }

    /// Lines for the terminal and audit.html: what ran, where, when.
    pub fn lines(&self) -> Vec<String> {
        let p: std::collections::HashMap<&str, String> = self.properties().into_iter().collect();
        let mut lines = vec![
            format!(
                "lockcheck {} at {} (tree {}), battery sha256 {}",
                p["version"], p["commit"], p["tree"], p["battery"]
            ),
            format!(
                "started {} on {} cores, {} memory, {}; load {} at start, {} at end",
                p["started"], p["cores"], p["memory"], p["os"], p["load-start"], p["load-end"]
            ),
            format!("command: {}", p["command"]),
        ];
        if self.recorded != BY_THE_AUDIT {
            lines.push(format!("provenance recorded {}", self.recorded));
        }
        lines
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// sha256 over each scenario's workload file as written and run: its name, its
/// length and its text, in battery order, so that two audits with the same
/// digest ran the same scenarios with the same faults, fences and clients.
pub fn battery_digest(workloads: &[ScenarioWorkload], scenarios: &Path) -> Result<String> {
    let mut hash = Sha256::new();
    for w in workloads {
        let name = format!("{}.toml", w.scenario.name());
        let path = scenarios.join(&name);
        let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        hash.update(format!("{name}\n{}\n", text.len()));
        hash.update(&text);
    }
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

fn memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn load() -> Option<Load> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut f = text.split_whitespace().map(str::parse::<f64>);
    Some(Load {
        one_min: f.next()?.ok()?,
        five_min: Some(f.next()?.ok()?),
        fifteen_min: Some(f.next()?.ok()?),
    })
}

/// `Linux 6.8.0-49-generic (Ubuntu 24.04.1 LTS)`: the kernel from /proc, the
/// distribution from os-release when there is one.
fn os() -> Option<String> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let kernel = format!(
        "{} {}",
        read("/proc/sys/kernel/ostype")?,
        read("/proc/sys/kernel/osrelease")?
    );
    let pretty = read("/etc/os-release").and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|v| v.trim_matches('"').to_string())
    });
    Some(match pretty {
        Some(p) => format!("{kernel} ({p})"),
        None => kernel,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The build script runs in this crate's folder and reads the commit of the
    /// workspace's root, two folders up: built in a checkout, the scorecard names
    /// that checkout's HEAD, not "unknown".
    #[test]
    fn the_commit_is_the_checkouts_head_when_built_in_one() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let head = std::process::Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(["rev-parse", "HEAD"])
            .output();
        match head {
            Ok(out) if out.status.success() => {
                assert_eq!(COMMIT, String::from_utf8_lossy(&out.stdout).trim());
                assert!(matches!(TREE, "clean" | "dirty"), "{TREE}");
            }
            // Not a checkout (a crate unpacked elsewhere): nothing to compare.
            _ => assert_eq!(COMMIT, "unknown"),
        }
    }
}
