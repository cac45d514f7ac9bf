//! One lock service as its clients see it ([`LockService`]): what is said of it,
//! its options and presets, and how a client of it connects. Each backend's folder
//! implements it beside its lock client (`backends/<backend>/client.rs`), as it
//! implements its server recipe beside (`server.rs`); the registry,
//! `BackendKind::service`, finds it. A base of `backend`: it imports the client's,
//! the options' and the presets' bases, and no registry.

use super::client::{LockClient, LockConfig};
use super::options::Reader;
use super::preset::LeasePreset;
use async_trait::async_trait;

/// What is said of one backend: its name, its fencing token's source, its known
/// break and the shipped workloads that show it, its own options and presets.
#[derive(Clone, Copy)]
pub struct About {
    /// Its name as a workload's `backend.kind` writes it (`postgres-lease`).
    pub name: &'static str,
    /// Where its fencing token comes from; `None`: it has none.
    pub token: Option<&'static str>,
    /// How a holder comes to believe it holds a lock that another client holds.
    pub known_break: &'static str,
    /// The shipped workloads (`workloads/<name>.toml`) that show the known break.
    pub shown_by: &'static [&'static str],
    /// The shipped workload where fencing by its token keeps the resource safe.
    pub fenced_by: Option<&'static str>,
    /// Its own `[backend]` keys, read by its typed options.
    pub options: Reader,
    /// The lease presets its users run.
    pub presets: &'static [LeasePreset],
    /// Its option line that keeps every acknowledged write through a kill.
    pub durable: Option<&'static str>,
}

/// One lock service as its clients see it. Each backend's folder implements it
/// (`backends/<backend>/client.rs`); `BackendKind::service` finds it. What most
/// services share is the default.
#[async_trait]
pub trait LockService: Send + Sync {
    /// What is said of it.
    fn about(&self) -> About;

    /// Opens one client of it. `endpoints` are the servers' client addresses
    /// (`host:port`) in node order, n1 first, never none.
    async fn connect(
        &self,
        endpoints: &[String],
        cfg: &LockConfig,
    ) -> anyhow::Result<Box<dyn LockClient>>;

    /// Opens one candidate of its leader-election recipe, where it has one
    /// (`ELECTION_BACKENDS`): by default its lock client, whose lock is the
    /// leadership.
    async fn connect_election(
        &self,
        endpoints: &[String],
        cfg: &LockConfig,
    ) -> anyhow::Result<Box<dyn LockClient>> {
        self.connect(endpoints, cfg).await
    }

    /// The `[backend]` line of its own options that pins each client to one
    /// node, where its client otherwise talks to several at once.
    fn pinned_option(&self) -> Option<&'static str> {
        None
    }

    /// Whether its lock client keeps the lease alive by itself while the lock is
    /// held (session heartbeats, a lease keep-alive), rather than only by the
    /// holder's own renewals.
    fn keeps_lease_alive(&self) -> bool {
        false
    }

    /// Whether clients take a lock of it; `false`: they only lead.
    fn has_lock(&self) -> bool {
        true
    }

    /// Whether each client is one node's application (client `i` on node `i`).
    fn client_per_node(&self) -> bool {
        false
    }
}

/// The one endpoint of a single-server backend (`name` as workloads write it).
pub fn single<'a>(name: &str, endpoints: &'a [String]) -> anyhow::Result<&'a str> {
    match endpoints {
        [one] => Ok(one),
        _ => anyhow::bail!(
            "the {name} backend is one server; got {} endpoints",
            endpoints.len()
        ),
    }
}
