//! `kind = "partition-nodes"`: the links between server nodes cut, by iptables
//! rules in the nodes' network namespaces (`fault::netns`), or under the ssh
//! runtime on the nodes' own hosts, in chains of lockcheck's that the cluster
//! makes (`Cluster::filter`), in a shape: one node
//! isolated (the default), halves, a majorities ring, a bridge, or named links.
//! Recorded as nemesis `partition` / `heal`.

use super::netns::{self, NodePartition, NodeShape, ShapeKind};
use super::node;
use super::shape::Cut;
use super::spec::{Entry, Kind, Refusal, Requirement, Setting, Spec};
use super::Fault;
use anyhow::Result;
use lockcheck_history::fault_ops;
use lockcheck_servers::cluster::Runtime;
use std::sync::Arc;
use std::time::Duration;

pub const KIND: Kind = Kind {
    name: "partition-nodes",
    keys: &["shape", "nodes", "links", "cut"],
    instead: &[("target", node::NOT_A_CLIENT)],
    ops: &fault_ops::PARTITION,
    read: NodePartitionSpec::read,
    undo: None,
    undo_journaled: None,
    requires: Some(requires),
};

/// The nodes' links are cut in their network namespaces, with ip and iptables.
fn requires() -> Vec<Requirement> {
    let (ok, detail, install) = match lockcheck_servers::cluster::netns::available() {
        Ok(()) => (
            true,
            "cuts links between server nodes in their network namespaces (iptables)".into(),
            None,
        ),
        Err((why, package)) => (false, why, package),
    };
    vec![Requirement {
        name: KIND.name.into(),
        ok,
        detail,
        install,
    }]
}

/// `kind = "partition-nodes"`: which node-to-node links, and how they are cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePartitionSpec {
    pub shape: NodeShape,
    pub cut: Cut,
}

impl NodePartitionSpec {
    fn read(entry: &mut Entry<'_>, setting: &Setting) -> Result<Arc<dyn Spec>> {
        Ok(Arc::new(NodePartitionSpec {
            shape: NodeShape::read(entry, setting, ShapeKind::Isolate)?,
            cut: entry.take("cut")?.unwrap_or_default(),
        }))
    }
}

impl Spec for NodePartitionSpec {
    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn needs(&self) -> super::spec::Needs {
        self.shape.needs()
    }

    fn refused_with_clients_on_hosts(&self) -> Option<&'static str> {
        Some(super::netns::NODE_LINKS_ON_HOSTS)
    }

    /// Chains of lockcheck's in the hosts' packet filters, removed at heal.
    fn refused_unmanaged(&self) -> Option<Refusal> {
        None
    }

    fn fault(&self, _: Duration) -> Box<dyn Fault> {
        Box::new(NodePartition::new(self.shape.clone(), self.cut))
    }

    /// Under ssh, the links are cut on the hosts, in iptables chains of its own.
    fn refused_by(&self, runtime: Runtime) -> Option<Refusal> {
        match runtime {
            Runtime::Ssh => None,
            _ => netns::refused_by(&KIND, runtime),
        }
    }
}
