//! What a fault hands the `ssh` runtime to run once the hosts are reached, before
//! any node starts ([`OnHosts`]), and what that asks of the hosts.

use crate::cluster::node::NodeSpec;
use anyhow::Result;
use std::net::IpAddr;
use std::sync::Arc;

/// What runs once the hosts are reached, before any node starts: given the
/// nodes and, for each, this machine's address its host reaches it at, what to
/// put in place.
#[derive(Clone)]
pub struct OnHosts(pub Arc<OnHostsFn>);

/// What an [`OnHosts`] runs.
pub type OnHostsFn = dyn Fn(&[NodeSpec], &[IpAddr]) -> Result<HostsSetup> + Send + Sync;

impl std::fmt::Debug for OnHosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnHosts(..)")
    }
}

/// What an [`OnHosts`] asks of the hosts.
pub struct HostsSetup {
    /// For each node, in node order, the `nat` rules (matches and target,
    /// without a chain) for what its host sends.
    pub redirects: Vec<Vec<String>>,
    /// What the rules lead to (proxies), kept until the servers have stopped.
    pub hold: Box<dyn std::any::Any + Send + Sync>,
}
