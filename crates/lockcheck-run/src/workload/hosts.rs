//! What the ssh runtime's two choices allow: servers already running
//! (`backend.manage = false`) take only the faults that leave them as they
//! were found, and clients on the hosts (`clients.clients_on = "hosts"`) only
//! the faults that reach a client there. Anything else is refused here, by
//! name and with why, never applied to nothing under a green verdict.

use super::Workload;
use anyhow::{bail, Result};
use lockcheck_servers::cluster::Runtime;

impl Workload {
    /// Checks the faults and clients against where its servers and clients are.
    pub(super) fn check_hosts(&self) -> Result<()> {
        let w = self;
        let file = w.path.display();
        let ssh = w.backend.ssh.as_ref().filter(|_| w.runtime == Runtime::Ssh);
        if ssh.is_some_and(|s| !s.manage) {
            for (i, f) in w.faults.iter().enumerate() {
                if let Some(r) = f.spec.refused_unmanaged() {
                    bail!("{file}: faults[{i}].{}: {}", r.key, r.why);
                }
            }
        }
        if !w.clients.on_hosts {
            return Ok(());
        }
        if ssh.is_none() {
            bail!(
            "{file}: clients.clients_on: \"hosts\" runs the clients on the ssh runtime's hosts: only with runtime = \"ssh\" and backend.hosts (the {} runtime has none)",
            w.runtime.name()
        );
        }
        if w.client.is_some() {
            bail!(
            "{file}: clients.clients_on: \"hosts\" runs lockcheck's own clients there; the [client] command is a program of this machine's (with its interpreter and library), which is not copied to the hosts"
        );
        }
        for (i, f) in w.faults.iter().enumerate() {
            let kind = f.spec.kind();
            let Some(why) = f.spec.refused_with_clients_on_hosts() else {
                continue;
            };
            bail!(
            "{file}: faults[{i}].kind: {} is unavailable with clients.clients_on = \"hosts\": {why}",
            kind.name
        );
        }
        Ok(())
    }
}
