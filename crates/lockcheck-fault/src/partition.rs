//! `kind = "partition"`: the links between the clients and the nodes cut, in the
//! proxy every client reaches every node through (`fault::proxy`): the holder cut
//! off from every node (`target`), or nodes cut off from every client (`nodes`).
//! Recorded as nemesis `partition` / `heal`.

use super::link_fault::{LinkFault, Links};
use super::shape::Cut;
use super::spec::{Entry, Kind, Needs, Refusal, Setting, Spec};
use super::Fault;
use anyhow::Result;
use lockcheck_history::fault_ops;
use std::sync::Arc;
use std::time::Duration;

pub const KIND: Kind = Kind {
    name: "partition",
    keys: &["target", "nodes", "cut"],
    instead: &[],
    ops: &fault_ops::PARTITION,
    read: PartitionSpec::read,
    undo: None,
    undo_journaled: None,
    requires: None,
};

/// `kind = "partition"`: which links, and how they are cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSpec {
    pub links: Links,
    pub cut: Cut,
}

impl PartitionSpec {
    fn read(entry: &mut Entry<'_>, setting: &Setting) -> Result<Arc<dyn Spec>> {
        Ok(Arc::new(PartitionSpec {
            links: Links::read(entry, setting)?,
            cut: entry.take("cut")?.unwrap_or_default(),
        }))
    }
}

impl Spec for PartitionSpec {
    fn kind(&self) -> &'static Kind {
        &KIND
    }

    /// The clients' links go through lockcheck's proxies on this machine.
    fn refused_unmanaged(&self) -> Option<Refusal> {
        None
    }

    fn fault(&self, _: Duration) -> Box<dyn Fault> {
        Box::new(LinkFault::new(self.links.clone(), self.cut.into()))
    }

    fn needs(&self) -> Needs {
        Needs {
            client_links: true,
            ..Needs::default()
        }
    }
}
