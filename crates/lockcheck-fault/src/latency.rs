//! `kind = "latency"`: the links between the clients and the nodes slowed, in the
//! proxy every client reaches every node through (`fault::proxy`): each chunk
//! delayed by `delay` ± `jitter`, each way. Recorded as nemesis `latency` / `heal`.

use super::duration::Dur;
use super::link_fault::{LinkFault, Links};
use super::proxy::Mode;
use super::spec::{Entry, Kind, Needs, Refusal, Setting, Spec};
use super::Fault;
use anyhow::Result;
use lockcheck_history::fault_ops;
use std::sync::Arc;
use std::time::Duration;

pub const KIND: Kind = Kind {
    name: "latency",
    keys: &["target", "nodes", "delay", "jitter"],
    instead: &[],
    ops: &fault_ops::LATENCY,
    read: LatencySpec::read,
    undo: None,
    undo_journaled: None,
    requires: None,
};

/// `kind = "latency"`: which links, and how slow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencySpec {
    pub links: Links,
    pub slowness: Slowness,
}

/// How slow a slowed link is: each chunk delayed by `delay` ± `jitter`, each way.
/// Shared by `latency` (client links) and `latency-nodes` (links between nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slowness {
    pub delay: Duration,
    pub jitter: Duration,
}

impl LatencySpec {
    fn read(entry: &mut Entry<'_>, setting: &Setting) -> Result<Arc<dyn Spec>> {
        let links = Links::read(entry, setting)?;
        let slowness = Slowness::read(entry)?;
        Ok(Arc::new(LatencySpec { links, slowness }))
    }
}

impl Slowness {
    /// A latency entry's `delay` (which it needs) and `jitter` (0 unless given).
    pub(super) fn read(entry: &mut Entry<'_>) -> Result<Slowness> {
        let Some(Dur(delay)) = entry.take("delay")? else {
            return Err(entry.bad("delay", "a latency fault needs its delay, like \"50ms\""));
        };
        let jitter = entry.take::<Dur>("jitter")?.map_or(Duration::ZERO, |j| j.0);
        Ok(Slowness { delay, jitter })
    }

    /// What the proxy does to a link slowed this much.
    pub(super) fn mode(self) -> Mode {
        Mode::Latency {
            delay: self.delay,
            jitter: self.jitter,
        }
    }
}

impl Spec for LatencySpec {
    fn kind(&self) -> &'static Kind {
        &KIND
    }

    /// The clients' links go through lockcheck's proxies on this machine.
    fn refused_unmanaged(&self) -> Option<Refusal> {
        None
    }

    fn fault(&self, _: Duration) -> Box<dyn Fault> {
        Box::new(LinkFault::new(self.links.clone(), self.slowness.mode()))
    }

    fn needs(&self) -> Needs {
        Needs {
            client_links: true,
            ..Needs::default()
        }
    }
}
