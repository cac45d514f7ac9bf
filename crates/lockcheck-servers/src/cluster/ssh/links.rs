//! The links between the nodes of the `ssh` runtime, put through this machine
//! before the nodes start, for a fault to slow them later (`latency-nodes`;
//! the hook and its proxies are the fault's, `fault::netns`): each node's host
//! redirects what it sends to its peers' peer ports to a proxy here, by a
//! `nat` rule of its OUTPUT chain, in an iptables chain of lockcheck's own
//! (journaled with its host, removed when the cluster stops and by `lockcheck
//! recover`). Nothing on the hosts but those rules: no proxy there, no netem.

use super::hooks::OnHosts;
use super::SshCluster;
use anyhow::{Context, Result};
use std::net::{IpAddr, UdpSocket};

/// This machine's address a host at `to` reaches it at: the source address of
/// its route there (no packet is sent). Behind a NAT the host sees another,
/// which it could not reach back.
fn local_addr_towards(to: IpAddr) -> Result<IpAddr> {
    let any: IpAddr = if to.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    let socket = UdpSocket::bind((any, 0))?;
    socket
        .connect((to, 9))
        .with_context(|| format!("finding this machine's route to {to}"))?;
    Ok(socket.local_addr()?.ip())
}

impl SshCluster {
    /// Runs `hook` and puts its rules on the hosts, each host's in a `nat`
    /// chain of lockcheck's; keeps what it holds.
    pub(super) async fn set_up_links(&mut self, hook: &OnHosts) -> Result<()> {
        let here = self
            .plan
            .nodes
            .iter()
            .map(|n| local_addr_towards(n.client_listen.ip()))
            .collect::<Result<Vec<_>>>()?;
        let setup = (hook.0)(&self.plan.nodes, &here)?;
        self.held.push(setup.hold);
        for (i, rules) in setup.redirects.iter().enumerate() {
            if !rules.is_empty() {
                self.changes
                    .add_chain(&self.hosts[i], i, "nat", rules)
                    .await
                    .with_context(|| {
                        format!(
                            "redirecting the peer links of node {}",
                            self.plan.nodes[i].name
                        )
                    })?;
            }
        }
        Ok(())
    }
}
