//! `kind = "latency-nodes"`: the links between server nodes slowed, through the
//! proxies their namespaces (or, under the ssh runtime, their hosts) redirect
//! peer connections to from the start (`fault::netns`), in the shapes of
//! `partition-nodes` and `all` (the default): every link. Recorded as nemesis
//! `latency` / `heal`.

use super::latency::Slowness;
use super::netns::{self, NodeLatency, NodeShape, ShapeKind};
use super::node;
use super::spec::{Entry, Kind, Refusal, Setting, Setup, Spec};
use super::Fault;
use anyhow::Result;
use lockcheck_history::fault_ops;
use lockcheck_servers::cluster::Runtime;
use std::sync::Arc;
use std::time::Duration;

pub const KIND: Kind = Kind {
    name: "latency-nodes",
    keys: &["shape", "nodes", "links", "delay", "jitter"],
    instead: &[("target", node::NOT_A_CLIENT)],
    ops: &fault_ops::LATENCY,
    read: NodeLatencySpec::read,
    undo: None,
    undo_journaled: None,
    requires: None,
};

/// `kind = "latency-nodes"`: which node-to-node links, and how slow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLatencySpec {
    pub shape: NodeShape,
    pub slowness: Slowness,
}

impl NodeLatencySpec {
    fn read(entry: &mut Entry<'_>, setting: &Setting) -> Result<Arc<dyn Spec>> {
        let shape = NodeShape::read(entry, setting, ShapeKind::All)?;
        let slowness = Slowness::read(entry)?;
        Ok(Arc::new(NodeLatencySpec { shape, slowness }))
    }
}

impl Spec for NodeLatencySpec {
    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn needs(&self) -> super::spec::Needs {
        self.shape.needs()
    }

    fn refused_with_clients_on_hosts(&self) -> Option<&'static str> {
        Some(super::netns::NODE_LINKS_ON_HOSTS)
    }

    fn fault(&self, _: Duration) -> Box<dyn Fault> {
        Box::new(NodeLatency::new(self.shape.clone(), self.slowness.mode()))
    }

    /// The nodes' connections to each other must go through the proxies from
    /// the first: put in place before the nodes start, passing until the fault.
    fn prepare_run(&self, setup: &mut Setup<'_>) {
        if setup.first("the nodes' link proxies") {
            let (dir, seed) = (setup.run_dir.to_path_buf(), setup.seed);
            match setup.runtime {
                Runtime::Ssh => {
                    setup.cluster.on_hosts = Some(netns::proxy_node_links_on_hosts(dir, seed))
                }
                _ => setup.cluster.on_network = Some(netns::proxy_node_links(dir, seed)),
            }
        }
    }

    fn refused_by(&self, runtime: Runtime) -> Option<Refusal> {
        netns::refused_by(&KIND, runtime)
    }
}
