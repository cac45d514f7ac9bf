//! What a kind of fault is ([`Kind`]) and what its `[[faults]]` entry is read into
//! ([`Spec`]); the catalogue that lists the kinds is `catalogue.rs`, above the
//! kinds' files, which import this one.
//!
//! A kind's own file (`fault/pause.rs`, `fault/kill.rs`, ...) holds its [`Kind`]
//! (its name, its keys, its records) and its spec: a struct of its own fields,
//! read and checked from its `[[faults]]` entry with errors that name the file,
//! the line and the key, which builds the [`Fault`] the nemesis starts and stops
//! and says what the run must set up for it and which runtimes cannot apply it.
//! *When* a fault happens (`duration`, `after`, `interval`, a `[schedule]`) is the
//! run's, read by the workload around the kind's own keys.

use super::{Fault, Target};
use anyhow::Result;
use lockcheck_history::FaultOps;
use lockcheck_journal::{Effect, FaultEffect};
use lockcheck_servers::cluster::{ClusterSpec, NetworkKind, Prepare, Runtime};
use serde::de::DeserializeOwned;
use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// One kind of fault, as the catalogue lists it.
pub struct Kind {
    /// As a workload spells it: `kind = "pause-node"`.
    pub name: &'static str,
    /// The keys of its `[[faults]]` entry, besides `kind` and the run's timing.
    pub keys: &'static [&'static str],
    /// What to say of a key it does not take, where that helps more than naming
    /// the kinds that take it: (key, what to say).
    pub instead: &'static [(&'static str, &'static str)],
    /// The history records of its start and end, and the report's band for them.
    pub ops: &'static FaultOps,
    /// Reads and checks its entry's keys.
    pub read: fn(&mut Entry<'_>, &Setting) -> Result<Arc<dyn Spec>>,
    /// Undoes an effect of its own the journal holds ([`Effect::Fault`] with this
    /// kind's name: the data it journaled) after a controller killed with -9;
    /// says what it did. `None` for a kind that journals only the shared effects
    /// (a process stopped, a link), which `recover` knows itself, or the
    /// journal's own variants of its (below).
    pub undo: Option<fn(&FaultEffect) -> Result<String>>,
    /// Undoes an effect the journal has a variant of its own for, written by
    /// this kind since before kinds journaled their own (a clock page skewed,
    /// here or on a host): `None` when `effect` is not one of this kind's.
    /// Kept so that a run directory of any lockcheck recovers the same.
    pub undo_journaled: Option<UndoJournaled>,
    /// What it needs of this machine, one line each, as `lockcheck doctor`
    /// lists it: `None` for a kind that needs nothing but Linux and the run.
    pub requires: Option<fn() -> Vec<Requirement>>,
}

/// A kind's undo of the journal's own effects ([`Kind::undo_journaled`]):
/// `None` for an effect that is not the kind's.
pub type UndoJournaled = fn(&Effect) -> Option<Result<String>>;

/// One thing a kind of fault needs of this machine, and whether it is here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// What doctor lists it as (the kind, or the kind's method).
    pub name: String,
    pub ok: bool,
    /// What it does, when here; why not, when missing.
    pub detail: String,
    /// The Debian package that provides it, when missing.
    pub install: Option<&'static str>,
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// What an entry is checked against: the run's clients and servers.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// Clients `client-0` .. `client-N-1`.
    pub clients: usize,
    /// Server nodes `n1` .. `nN`.
    pub nodes: usize,
    pub network: NetworkKind,
    /// Each node on a host of its own (`backend.hosts`, the ssh runtime): links
    /// between nodes are cut on the hosts, without namespaces of lockcheck's.
    pub hosts: bool,
}

/// What a fault needs of the run's clients, which the run sets up for every
/// kind alike (what a kind puts in place itself is its [`Spec::prepare_run`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// The workers start under the clock interposer (a clock fault on a client):
    /// a client on the ssh runtime's hosts cannot (its `prepare_run` sets it up).
    pub client_clocks: bool,
    /// Each client reaches each node through a proxy of its own (link faults).
    pub client_links: bool,
}

impl Needs {
    /// What every one of `specs` needs.
    pub fn of<'a>(specs: impl IntoIterator<Item = &'a dyn Spec>) -> Needs {
        specs.into_iter().fold(Needs::default(), |a, s| {
            let b = s.needs();
            Needs {
                client_clocks: a.client_clocks || b.client_clocks,
                client_links: a.client_links || b.client_links,
            }
        })
    }
}

/// The environment a worker starts with for a fault, given the worker's name
/// (`client-0`): the clock interposer and its page.
pub type WorkerEnv = Arc<dyn Fn(&str) -> Result<Vec<(OsString, OsString)>> + Send + Sync>;

/// What the run puts in place before the servers and the workers start, as
/// each fault's [`Spec::prepare_run`] fills it in.
pub struct Setup<'a> {
    /// The cluster about to start: a kind sets the hooks that are the
    /// cluster's (on a node's host, once the hosts or the network exist).
    pub cluster: &'a mut ClusterSpec,
    /// What each node needs before it starts (restarts too), chained by the
    /// run into the cluster's [`Prepare`].
    pub nodes: Vec<Prepare>,
    /// What each worker starts with.
    pub workers: Vec<WorkerEnv>,
    pub runtime: Runtime,
    pub run_dir: &'a Path,
    /// The run's seed, for what draws at random (a link's jitter).
    pub seed: u64,
    done: BTreeSet<&'static str>,
}

impl<'a> Setup<'a> {
    pub fn new(
        cluster: &'a mut ClusterSpec,
        runtime: Runtime,
        run_dir: &'a Path,
        seed: u64,
    ) -> Self {
        Setup {
            cluster,
            nodes: Vec::new(),
            workers: Vec::new(),
            runtime,
            run_dir,
            seed,
            done: BTreeSet::new(),
        }
    }

    /// Whether `what` is asked for the first time: two faults that need the
    /// same thing (two clock faults on nodes) get it once.
    pub fn first(&mut self, what: &'static str) -> bool {
        self.done.insert(what)
    }
}

/// Why a runtime cannot apply a fault: the key it is about, and why in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub key: &'static str,
    pub why: String,
}

impl Refusal {
    /// The runtime cannot apply this kind at all.
    pub fn kind(kind: &Kind, runtime: Runtime, why: &str) -> Refusal {
        Refusal {
            key: "kind",
            why: format!(
                "{} is unavailable under the {} runtime: {why}",
                kind.name,
                runtime.name()
            ),
        }
    }
}

impl Refusal {
    /// The runtime could apply this kind, but lockcheck does not do it there yet.
    pub fn not_yet(kind: &Kind, runtime: Runtime, why: &str) -> Refusal {
        Refusal {
            key: "kind",
            why: format!(
                "{} is not available under the {} runtime yet: {why}",
                kind.name,
                runtime.name()
            ),
        }
    }
}

impl Refusal {
    /// This kind cannot act on servers lockcheck did not start.
    pub fn unmanaged(kind: &Kind, why: &str) -> Refusal {
        Refusal {
            key: "kind",
            why: format!(
                "{} is unavailable with backend.manage = false (servers already running): {why}",
                kind.name
            ),
        }
    }
}

/// One `[[faults]]` entry, read and checked: the fields of its kind.
pub trait Spec: Any + fmt::Debug + Send + Sync {
    /// Its kind, in the catalogue.
    fn kind(&self) -> &'static Kind;

    /// The fault the nemesis starts and stops, each occurrence lasting `duration`.
    fn fault(&self, duration: Duration) -> Box<dyn Fault>;

    /// What the run sets up for it before the servers start.
    fn needs(&self) -> Needs {
        Needs::default()
    }

    /// What the run puts in place for it before the servers and the workers
    /// start, by the kind's own code (the clock interposer the nodes or the
    /// workers start under, the proxies between nodes).
    fn prepare_run(&self, setup: &mut Setup<'_>) {
        let _ = setup;
    }

    /// What each server node must have in place before it starts (restarts
    /// too), made by the kind's own code: a hook the run chains into the
    /// cluster's [`Prepare`] (a disk of a fixed size under a node's data), given
    /// the run directory, whose journal it writes to. What it makes goes when
    /// the hook is dropped, with the cluster, once its servers stopped.
    fn prepare_nodes(&self, run_dir: &Path) -> Option<Prepare> {
        let _ = run_dir;
        None
    }

    /// Why it cannot reach a client on the ssh runtime's hosts
    /// (`clients.clients_on = "hosts"`), if it cannot: by default, a client fault
    /// applied on this machine's side (the clock interposer the workers start
    /// under, the proxies on their links).
    fn refused_with_clients_on_hosts(&self) -> Option<&'static str> {
        let needs = self.needs();
        if needs.client_clocks {
            Some(
                "a client's clock is skewed through the interposer the workers start under \
                 on this machine, which is not copied to the hosts",
            )
        } else if needs.client_links {
            Some(
                "the clients' links are cut and slowed in lockcheck's proxies on this machine, \
                 which clients on the hosts do not pass through",
            )
        } else {
            None
        }
    }

    /// Why `runtime` cannot apply it, if it cannot.
    fn refused_by(&self, runtime: Runtime) -> Option<Refusal> {
        let _ = runtime;
        None
    }

    /// Why it cannot act on servers lockcheck did not start, which it must leave
    /// running as it found them (`backend.manage = false`), if it cannot. By
    /// default it cannot: a kind that can says so itself.
    fn refused_unmanaged(&self) -> Option<Refusal> {
        Some(Refusal::unmanaged(
            self.kind(),
            "it acts on the servers as lockcheck starts them",
        ))
    }
}

impl dyn Spec {
    /// The spec as its own type, when it is one.
    pub fn downcast<T: Spec>(&self) -> Option<&T> {
        (self as &dyn Any).downcast_ref()
    }
}

/// The keys of one `[[faults]]` entry, as a kind's `read` takes them: each value
/// read into its type, every error naming the key (the workload adds the file
/// and the line).
pub struct Entry<'a> {
    pub(super) kind: &'static Kind,
    pub(super) values: BTreeMap<String, toml::Value>,
    pub(super) bad: &'a dyn Fn(&str, String) -> anyhow::Error,
}

impl<'a> Entry<'a> {
    pub fn kind(&self) -> &'static Kind {
        self.kind
    }

    /// The value of `key`, if the entry has one, read as a `T`.
    pub fn take<T: DeserializeOwned>(&mut self, key: &str) -> Result<Option<T>> {
        let Some(value) = self.values.remove(key) else {
            return Ok(None);
        };
        T::deserialize(value)
            .map(Some)
            .map_err(|e| (self.bad)(key, e.message().trim_end().to_string()))
    }

    /// Whether the entry has `key` (not taken yet).
    pub fn has(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// The error about `key`: what is wrong with it, or what is missing.
    pub fn bad(&self, key: &str, what: impl Into<String>) -> anyhow::Error {
        (self.bad)(key, what.into())
    }

    /// `target`, a client of the run's: `holder`, `random` or `client-N`.
    pub fn target(&mut self, setting: &Setting) -> Result<Option<Target>> {
        let target = self.take::<Target>("target")?;
        if let Some(Target::Client(c)) = target {
            if c >= setting.clients {
                return Err(self.bad(
                    "target",
                    format!(
                        "there are {} clients (client-0 .. client-{}): found {}",
                        setting.clients,
                        setting.clients.saturating_sub(1),
                        Target::Client(c)
                    ),
                ));
            }
        }
        Ok(target)
    }

    /// Reads the spec of its kind. Every key must have been taken by then but the
    /// run's own (which it takes first).
    pub fn read(mut self, setting: &Setting) -> Result<Arc<dyn Spec>> {
        let spec = (self.kind.read)(&mut self, setting)?;
        match self.values.keys().next() {
            Some(key) => Err(self.bad(key, "unknown key")),
            None => Ok(spec),
        }
    }
}
