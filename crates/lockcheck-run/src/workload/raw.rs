//! The file's shape, as serde reads it: every table denies unknown keys.

use super::preset::{lease_presets, LeasePreset};
use lockcheck_check::AnomalyKind;
use lockcheck_fault::duration::DURATION_EXPECTED;
use lockcheck_fault::duration::{Dur, SignedDur};
use lockcheck_resource::{self as resource, Fence, Mode};
use lockcheck_servers::backend::BackendKind;
use lockcheck_servers::cluster::{NetworkKind, Runtime};
use serde::{Deserialize, Deserializer};
use std::fmt;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub name: Option<String>,
    pub duration: Dur,
    pub end: Option<End>,
    pub seed: Option<u64>,
    #[serde(default)]
    pub allow: Vec<AnomalyKind>,
    pub mode: Option<toml::Spanned<ModeKind>>,
    pub backend: Backend,
    pub clients: Clients,
    pub critical_section: Option<toml::Spanned<CriticalSection>>,
    pub leader: Option<toml::Spanned<LeaderTable>>,
    pub resource: Option<ResourceSpec>,
    #[serde(default)]
    pub faults: Vec<toml::Spanned<FaultTable>>,
    pub runtime: Option<Runtime>,
    pub schedule: Option<Schedule>,
    pub client: Option<Client>,
    pub incident: Option<toml::Spanned<Incident>>,
}

/// `[incident]`: the published failure the workload replays.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Incident {
    pub source: toml::Spanned<String>,
    pub rule: toml::Spanned<String>,
}

/// `[client]`: the adapter program.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Client {
    pub command: Vec<String>,
    /// The folder the adapter runs in, which its relative paths are taken from
    /// (default: the workload file's; relative: to it).
    pub dir: Option<String>,
}

/// `self_fencing = "library"`, the one way so far.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SelfFencing {
    Library,
}

/// `resource = "fenced"` / `"unfenced"` (lockcheck's own resource), or a
/// `[resource]` table with its kind and fence.
pub enum ResourceSpec {
    Mode(Mode),
    Table(ResourceTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceTable {
    pub kind: Option<resource::Kind>,
    pub fence: Fence,
}

impl<'de> Deserialize<'de> for ResourceSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ResourceSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("\"fenced\", \"unfenced\" or a [resource] table")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ResourceSpec, E> {
                match s {
                    "fenced" => Ok(ResourceSpec::Mode(Mode::Fenced)),
                    "unfenced" => Ok(ResourceSpec::Mode(Mode::Unfenced)),
                    _ => Err(E::custom(format!(
                        "expected \"fenced\" or \"unfenced\" (or a [resource] table with kind and fence), found \"{s}\""
                    ))),
                }
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                map: M,
            ) -> Result<ResourceSpec, M::Error> {
                ResourceTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(ResourceSpec::Table)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    pub mix: MixKind,
    pub gap: Dur,
    pub quiet: Option<Dur>,
    pub heal: Option<Dur>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MixKind {
    Interval,
    Random,
}

/// `[backend]`: the keys every backend has; the rest are the backend's own
/// (`options`), which it reads itself (`BackendKind::read_options`).
#[derive(Deserialize)]
pub struct Backend {
    pub kind: BackendKind,
    pub nodes: Option<usize>,
    pub lease: toml::Spanned<LeaseSpec>,
    pub renew_every: Option<Dur>,
    pub renew: Option<Renew>,
    pub fencing_token: Option<bool>,
    pub acquire_timeout: Option<Dur>,
    pub endpoints: Option<Vec<String>>,
    pub image: Option<String>,
    pub network: Option<NetworkKind>,
    pub monotonic_offset: Option<MonotonicOffset>,
    pub hosts: Option<Vec<String>>,
    pub ssh_config: Option<std::path::PathBuf>,
    pub program: Option<std::path::PathBuf>,
    pub remote_dir: Option<std::path::PathBuf>,
    pub manage: Option<bool>,
    #[serde(flatten)]
    pub options: lockcheck_servers::backend::Options,
}

/// The keys of [`Backend`] every backend has, as an unknown key's error lists them.
pub const BACKEND_KEYS: &[&str] = &[
    "kind",
    "nodes",
    "lease",
    "renew_every",
    "renew",
    "fencing_token",
    "acquire_timeout",
    "endpoints",
    "image",
    "network",
    "monotonic_offset",
    "hosts",
    "ssh_config",
    "program",
    "remote_dir",
    "manage",
];

/// `monotonic_offset = "+600s"` (every node) or `{ n1 = "+600s" }`.
#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "a signed duration like \"+600s\", or a table of them by node like { n1 = \"+600s\" }"
)]
pub enum MonotonicOffset {
    All(SignedDur),
    PerNode(std::collections::BTreeMap<String, SignedDur>),
}

/// `lease = "2s"` or `lease = "client-go"`.
#[derive(Clone, Copy)]
pub enum LeaseSpec {
    Ttl(Dur),
    Preset(&'static LeasePreset),
}

impl<'de> Deserialize<'de> for LeaseSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if let Some(p) = lease_presets().into_iter().find(|p| p.name == s) {
            return Ok(LeaseSpec::Preset(p));
        }
        s.parse().map(LeaseSpec::Ttl).map_err(|_| {
            let names: Vec<_> = lease_presets().iter().map(|p| p.name).collect();
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
    pub self_fencing_margin: Option<Dur>,
    pub self_fencing: Option<SelfFencing>,
    pub on_lease_loss: Option<toml::Spanned<OnLeaseLoss>>,
    pub clients_on: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CriticalSection {
    pub hold: Dur,
    pub writes: u32,
    pub think: Option<Dur>,
}

/// A `[[faults]]` entry: its keys (with where they are) and their values, which
/// its kind's spec reads (`fault::spec`).
pub type FaultTable = std::collections::BTreeMap<toml::Spanned<String>, toml::Value>;

/// `mode`: how the clients use the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModeKind {
    /// Critical sections: acquire, read, writes, release, think, again.
    #[default]
    Lock,
    /// Campaign, then lead (renew and act) until deposed or the run ends.
    Election,
}

/// `[leader]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaderTable {
    pub act_every: Option<toml::Spanned<Dur>>,
}

/// What a leader does once it learns that its lease is gone (recorded in
/// verdict.json, hence the run directory's type).
pub use lockcheck_rundir::OnLeaseLoss;

/// `end`: when a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum End {
    /// After `duration`.
    #[default]
    Duration,
    /// One lease (plus a margin) after the first fault's effect is over, once a
    /// holder was deposed: by then the successor's grant and the deposed holder's
    /// late writes are in the history. `duration` stays the longest a run lasts.
    AfterEffect,
}

/// `backend.renew`: who renews the lease during a long hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Renew {
    /// The holder, between its writes (`renew` ops): a renewal refused or
    /// unanswered ends its critical section.
    #[default]
    Section,
    /// The holder's lock client, on its own, every `renew_every`, as a lock
    /// library's watchdog does (Redisson's): the holder writes on whatever the
    /// renewals say, and learns nothing of one that failed.
    Background,
}
