//! NATS with JetStream: `nats-server -js` on its own loopback port, its JetStream
//! store in the node's data directory. One node: the KV lease lives in one stream.

use super::ClusterPlan;
use std::process::Command;

/// The command that runs node `i`.
pub(super) fn command(plan: &ClusterPlan, i: usize) -> Command {
    let node = &plan.nodes[i];
    let mut cmd = Command::new(&plan.binary);
    cmd.arg("-js")
        .arg("-n")
        .arg(&node.name)
        .arg("-a")
        .arg(node.client_listen.ip().to_string())
        .arg("-p")
        .arg(node.client_listen.port().to_string())
        .arg("-sd")
        .arg(&node.data_dir);
    cmd
}

/// What the server's greeting (`INFO {...}`) says once JetStream is on.
pub(super) const READY: &str = "\"jetstream\":true";
