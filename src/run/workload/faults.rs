//! The `[[faults]]` entries' own fields, read after serde has checked their types.

use super::{raw, CutKind, FaultKind};
use crate::cluster::{NetworkKind, Runtime};
use crate::fault::clock::ClockChange;
use crate::fault::netns::NodeShape;
use crate::fault::node::NodeTarget;
use crate::fault::proxy::Mode as LinkMode;
use anyhow::Result;
use std::time::Duration;

/// Why a runtime cannot apply a kind of fault, if it cannot. Under the external
/// runtime lockcheck owns the clients and the links to the servers (its proxy),
/// never the servers' processes or clocks.
pub(super) fn runtime_refuses(runtime: Runtime, kind: FaultKind) -> Option<&'static str> {
    match (runtime, kind) {
        (Runtime::External, FaultKind::PauseNode) => Some("pausing a server needs its process; lockcheck did not start these servers"),
        (Runtime::External, FaultKind::Kill) => Some("killing and restarting a server needs its process; lockcheck did not start these servers"),
        (Runtime::External, FaultKind::Clock) => Some("a server's clock is skewed through the interposer lockcheck loads into the servers it starts; these it did not start"),
        (Runtime::Docker | Runtime::External, FaultKind::PartitionNodes | FaultKind::LatencyNodes) => Some("links between nodes are cut or slowed inside the network namespaces the local runtime puts its nodes in"),
        (Runtime::Local | Runtime::Docker | Runtime::External, _) => None,
    }
}

/// Why a runtime cannot pause nodes with the cgroup freezer, if it cannot.
pub(super) fn freezer_refused(runtime: Runtime) -> Option<String> {
    match runtime {
        Runtime::Docker => None,
        Runtime::Local => crate::cluster::freezer::unavailable(),
        // pause-node itself is refused there.
        Runtime::External => Some("lockcheck did not start these servers".into()),
    }
}

impl FaultKind {
    /// The kind as a workload spells it.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Pause => "pause",
            FaultKind::PauseNode => "pause-node",
            FaultKind::Kill => "kill",
            FaultKind::Clock => "clock",
            FaultKind::Partition => "partition",
            FaultKind::Latency => "latency",
            FaultKind::PartitionNodes => "partition-nodes",
            FaultKind::LatencyNodes => "latency-nodes",
        }
    }
}

/// What a `kind = "clock"` entry does: `rate`, `period` (strobe between
/// `offset` and `offset2`) or `offset` (a jump); other kinds take none of them.
pub(super) fn clock_change(
    f: &raw::Fault,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<Option<ClockChange>> {
    let given = [
        ("offset", f.offset.is_some()),
        ("offset2", f.offset2.is_some()),
        ("period", f.period.is_some()),
        ("rate", f.rate.is_some()),
    ];
    if f.kind != FaultKind::Clock {
        return match given.iter().find(|(_, g)| *g) {
            Some((k, _)) => Err(bad(k, "only a clock fault takes it".into())),
            None => Ok(None),
        };
    }
    let change = match (f.rate, f.period, f.offset, f.offset2) {
        (Some(rate), None, None, None) if rate.is_finite() && rate > 0.0 => {
            ClockChange::Rate { rate }
        }
        (Some(rate), None, None, None) => {
            return Err(bad(
                "rate",
                format!("expected a positive number, found {rate}"),
            ))
        }
        (None, Some(period), a, Some(b)) if !period.0.is_zero() => ClockChange::Strobe {
            offset_ns: a.map_or(0, |a| a.0),
            offset2_ns: b.0,
            period: period.0,
        },
        (None, None, Some(a), None) => ClockChange::Jump { offset_ns: a.0 },
        _ => {
            return Err(bad(
                "kind",
                "a clock fault takes `offset` (a jump), or `rate`, or `period` + `offset2` \
                 (+ `offset`) for a strobe"
                    .into(),
            ))
        }
    };
    Ok(Some(change))
}

/// What a partition or latency entry does to its links; other kinds take none
/// of `cut`, `delay`, `jitter`.
pub(super) fn link_mode(
    f: &raw::Fault,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<Option<LinkMode>> {
    let only = |k: &str, kind: &str| Err(bad(k, format!("only a {kind} fault takes it")));
    match f.kind {
        // Its cut is read with its shape (`node_shape`).
        FaultKind::PartitionNodes => match (f.delay.is_some(), f.jitter.is_some()) {
            (true, _) => only("delay", "latency"),
            (_, true) => only("jitter", "latency"),
            _ => Ok(None),
        },
        FaultKind::Partition => {
            if f.delay.is_some() {
                return only("delay", "latency");
            }
            if f.jitter.is_some() {
                return only("jitter", "latency");
            }
            Ok(Some(match f.cut.unwrap_or(CutKind::Blackhole) {
                CutKind::Blackhole => LinkMode::Blackhole,
                CutKind::Reset => LinkMode::Reset,
            }))
        }
        FaultKind::Latency | FaultKind::LatencyNodes => {
            if f.cut.is_some() {
                return only("cut", "partition");
            }
            let Some(delay) = f.delay else {
                return Err(bad(
                    "delay",
                    "a latency fault needs its delay, like \"50ms\"".into(),
                ));
            };
            Ok(Some(LinkMode::Latency {
                delay: delay.0,
                jitter: f.jitter.map_or(Duration::ZERO, |j| j.0),
            }))
        }
        _ => match [
            ("cut", f.cut.is_some()),
            ("delay", f.delay.is_some()),
            ("jitter", f.jitter.is_some()),
        ]
        .iter()
        .find(|(_, g)| *g)
        {
            Some((k, _)) => only(k, "partition or latency"),
            None => Ok(None),
        },
    }
}

/// Which node-to-node links a `partition-nodes` entry cuts or a `latency-nodes`
/// entry slows; other kinds take neither `shape` nor `links`. The shape is
/// checked against the cluster's `nodes` here, so that a run never starts with
/// a fault it cannot make. A partition isolates one node by default; a latency
/// slows every link.
pub(super) fn node_shape(
    f: &raw::Fault,
    nodes: usize,
    network: NetworkKind,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<Option<NodeShape>> {
    use raw::ShapeKind;
    if !matches!(f.kind, FaultKind::PartitionNodes | FaultKind::LatencyNodes) {
        return match [("shape", f.shape.is_some()), ("links", f.links.is_some())]
            .iter()
            .find(|(_, g)| *g)
        {
            Some((k, _)) => Err(bad(
                k,
                "only a partition-nodes or latency-nodes fault takes it".into(),
            )),
            None => Ok(None),
        };
    }
    if network != NetworkKind::Namespaces {
        return Err(bad(
            "kind",
            "links between nodes are cut or slowed inside their network namespaces: set [backend] network = \"namespaces\"".into(),
        ));
    }
    let default = match f.kind {
        FaultKind::LatencyNodes => ShapeKind::All,
        _ => ShapeKind::Isolate,
    };
    let kind = f.shape.unwrap_or(default);
    if f.links.is_some() != (kind == ShapeKind::Links) {
        return Err(bad(
            "links",
            "shape = \"links\" takes the pairs of nodes, like links = [[\"n1\", \"n3\"]], and no other shape takes them".into(),
        ));
    }
    let nodes_only_for_isolate = || {
        Err(bad(
            "nodes",
            "shape = \"isolate\" takes the node to cut off, like nodes = \"primary\", and no other shape takes it".into(),
        ))
    };
    let shape = match (kind, f.nodes.clone()) {
        (ShapeKind::Isolate, Some(t @ (NodeTarget::One | NodeTarget::Primary | NodeTarget::Node(_)))) => {
            NodeShape::Isolate(t)
        }
        (ShapeKind::Isolate, Some(other)) => {
            return Err(bad(
                "nodes",
                format!("isolate cuts one node off: expected \"primary\", \"one\" or a node like \"n2\", found \"{other}\" (shape = \"halves\" splits the cluster)"),
            ))
        }
        (ShapeKind::Isolate, None) | (_, Some(_)) => return nodes_only_for_isolate(),
        (ShapeKind::Halves, None) => NodeShape::Halves,
        (ShapeKind::MajoritiesRing, None) => NodeShape::MajoritiesRing,
        (ShapeKind::Bridge, None) => NodeShape::Bridge,
        (ShapeKind::All, None) => NodeShape::All,
        (ShapeKind::Links, None) => NodeShape::Links(f.links.clone().unwrap_or_default()),
    };
    shape
        .check(nodes)
        .map_err(|e| bad("shape", format!("{e:#}")))?;
    Ok(Some(shape))
}
