//! Lease presets: the TTLs and renewal periods the industry actually runs, by name
//! (`lease = "client-go"`). Each backend's file holds those its own users run,
//! and its registry entry lists them; the ones here are tied to no service. A base
//! of `backend`: it imports no sibling.

use std::time::Duration;

/// A lease as a recipe's users run it: `lease = "client-go"`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeasePreset {
    pub name: &'static str,
    pub ttl: Duration,
    /// The holder's renewal period (client-go's retry period); `None`: the recipe
    /// relies on the backend's own keep-alive, or on finishing within the TTL.
    pub renew_every: Option<Duration>,
    /// Where the numbers come from and what else the recipe sets.
    pub source: &'static str,
}

/// The lease recipes not tied to one service (client-go's Lease objects, Consul
/// sessions): usable on any backend.
pub const ANY: &[LeasePreset] = &[CLIENT_GO, CONSUL];

pub const CLIENT_GO: LeasePreset = LeasePreset {
    name: "client-go",
    ttl: Duration::from_secs(15),
    renew_every: Some(Duration::from_secs(2)),
    source:
        "Kubernetes client-go leader election: lease 15 s, renew deadline 10 s, retry period 2 s",
};

pub const CONSUL: LeasePreset = LeasePreset {
    name: "consul",
    ttl: Duration::from_secs(15),
    renew_every: None,
    source: "Consul lock: session TTL 15 s, lock-delay 15 s",
};
