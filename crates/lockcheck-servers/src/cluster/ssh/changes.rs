//! What a run changed on its hosts that its end must undo: servers stopped
//! with SIGSTOP and iptables chains of lockcheck's, each journaled with its
//! host before it is made, so that `lockcheck recover` undoes it after a
//! controller killed with -9. Shared by the servers lockcheck starts
//! ([`super::SshCluster`]) and those it finds running ([`super::attach`]).

use super::host::Host;
use anyhow::{bail, Context, Result};
use lockcheck_journal::{Effect, Journal, Proc};
use std::collections::BTreeMap;
use std::sync::Arc;

pub(super) struct Changes {
    journal: Arc<Journal>,
    /// Each node stopped with SIGSTOP, by its journal entry.
    stopped: Vec<Option<u64>>,
    /// The iptables chains in force, by journal entry: node and chain.
    chains: BTreeMap<u64, (usize, Chain)>,
}

/// An iptables chain of lockcheck's on a host, and its table (`filter`: cuts
/// links; `nat`: redirects them).
#[derive(Debug, Clone)]
pub(super) struct Chain {
    pub table: &'static str,
    pub name: String,
}

/// What is still in force on one node's host, taken out for the stop: its
/// SIGSTOP's journal entry, and its chains with theirs.
pub(super) struct InForce {
    pub stopped: Option<u64>,
    pub chains: Vec<(Chain, u64)>,
}

impl Changes {
    pub fn new(journal: Arc<Journal>, nodes: usize) -> Changes {
        Changes {
            journal,
            stopped: vec![None; nodes],
            chains: BTreeMap::new(),
        }
    }

    /// SIGSTOP to node `i`'s server `proc` on `host`, unless it is stopped
    /// already, and a wait until the host shows it stopped.
    pub async fn sigstop(&mut self, host: &Host, i: usize, proc: &Proc, node: &str) -> Result<()> {
        if self.stopped[i].is_some() {
            return Ok(());
        }
        // Written down first: a controller killed right after still has it resumed.
        let id = self.journal.record(Effect::RemoteStopped {
            host: host.remote.clone(),
            proc: proc.clone(),
        })?;
        self.stopped[i] = Some(id);
        let (h, p) = (host.clone(), proc.clone());
        let stopped = tokio::task::spawn_blocking(move || h.sigstop(&p))
            .await?
            .with_context(|| format!("stopping node {node}"))?;
        if !stopped {
            bail!(
                "node {node} on host {} exited before it could be stopped",
                host.name()
            );
        }
        Ok(())
    }

    /// SIGCONT to node `i`'s server `proc` (if it still has one) if it was
    /// stopped.
    pub async fn sigcont(
        &mut self,
        host: &Host,
        i: usize,
        proc: Option<&Proc>,
        node: &str,
    ) -> Result<()> {
        let Some(id) = self.stopped[i].take() else {
            return Ok(());
        };
        if let Some(p) = proc {
            let (h, p) = (host.clone(), p.clone());
            tokio::task::spawn_blocking(move || h.signal(&p, "CONT"))
                .await?
                .with_context(|| format!("resuming node {node}"))?;
        }
        self.journal.undone(id)
    }

    /// Node `i`'s server is gone: a stop of it is struck from the journal.
    pub fn forget_stopped(&mut self, i: usize) -> Result<()> {
        match self.stopped[i].take() {
            Some(id) => self.journal.undone(id),
            None => Ok(()),
        }
    }

    /// Adds `rules` cutting what node `i`'s host sends (and what comes back
    /// on its connections), in a chain of lockcheck's.
    pub async fn filter(&mut self, host: &Host, i: usize, rules: &[String]) -> Result<u64> {
        self.add_chain(host, i, "filter", rules).await
    }

    /// Adds `rules` for what node `i`'s host sends, in a chain of lockcheck's
    /// own in `table` ([`Host::add_chain`]); returns its journal entry.
    pub async fn add_chain(
        &mut self,
        host: &Host,
        i: usize,
        table: &'static str,
        rules: &[String],
    ) -> Result<u64> {
        let name = format!("lockcheck-{:08x}", rand::random::<u32>());
        // Written down first: a controller killed right after still has it removed.
        let id = self.journal.record(Effect::RemoteChain {
            host: host.remote.clone(),
            chain: name.clone(),
            table: table.to_string(),
        })?;
        self.chains.insert(
            id,
            (
                i,
                Chain {
                    table,
                    name: name.clone(),
                },
            ),
        );
        let (h, rules) = (host.clone(), rules.to_vec());
        tokio::task::spawn_blocking(move || h.add_chain(table, &name, &rules)).await??;
        Ok(id)
    }

    /// Removes the chain [`Changes::filter`] made, on its node's host in `hosts`.
    pub async fn unfilter(&mut self, hosts: &[Host], filter: u64) -> Result<()> {
        let Some((i, chain)) = self.chains.remove(&filter) else {
            return Ok(());
        };
        let host = hosts[i].clone();
        tokio::task::spawn_blocking(move || host.remove_chain(chain.table, &chain.name)).await??;
        self.journal.undone(filter)
    }

    /// Everything still in force, node by node (of `nodes`), taken out: the
    /// stop then undoes it.
    pub fn take(&mut self, nodes: usize) -> Vec<InForce> {
        let mut taken: Vec<InForce> = (0..nodes)
            .map(|i| InForce {
                stopped: self.stopped.get_mut(i).and_then(Option::take),
                chains: Vec::new(),
            })
            .collect();
        for (id, (i, chain)) in std::mem::take(&mut self.chains) {
            if let Some(t) = taken.get_mut(i) {
                t.chains.push((chain, id));
            }
        }
        taken
    }
}
