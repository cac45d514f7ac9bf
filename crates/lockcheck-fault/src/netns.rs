//! Faults on the links between server nodes: the links of etcd's raft,
//! ZooKeeper's quorum and election, NATS's routes. Needs the nodes in network
//! namespaces of their own (`[backend] network = "namespaces"`,
//! `cluster::netns`).
//!
//! **Partitions** ([`NodePartition`]) are cut inside the kernel. A cut link
//! a -> b is an iptables rule in a's namespace on the packets it sends to b's
//! address: `DROP` (a black hole: requests hang, retransmissions go nowhere, and
//! flow again when it heals) or `REJECT --reject-with tcp-reset` (the sender
//! sees its connections reset and new ones refused). [`cuts`] is always
//! symmetric, so b's rule cuts the way back. The clients' links (through the
//! proxy on loopback, from the host's address) are never touched.
//!
//! **Latency** ([`NodeLatency`]) has no kernel to lean on (no netem here), so it
//! goes through the same user-space proxy as the clients' links
//! (`fault::proxy`, `Mode::Latency`). The peers' addresses cannot change (etcd
//! derives its member ids from the peer URLs), so the proxy sits there without
//! the servers knowing: for each node a, peer b and port of b (etcd's and NATS's
//! peer port, ZooKeeper's quorum and election ports), a `nat` rule in a's
//! namespace, `OUTPUT -d B -p tcp --dport P -j DNAT --to-destination
//! 10.213.S.254:Q`, sends a's connections to a proxy listening on the host's
//! address of the nodes' network, which forwards them to b:P. b sees its peer
//! connect from the host's address, which none of these servers checks (etcd and
//! ZooKeeper know a peer by what it says, NATS by its route's server id).
//!
//! A DNAT rule applies to new connections only: conntrack keeps an open one on
//! its first route, and raft's connections are long-lived. Rules added when the
//! fault starts would slow nothing until the servers reconnected, and resetting
//! their connections to force it would be a fault of its own. So when a
//! workload has a `latency-nodes` fault, [`proxy_node_links`] puts every peer
//! link through its proxy *before the nodes start* (`ClusterSpec::on_network`),
//! passing bytes through untouched (one copy in the controller: a put and a
//! linearizable get on etcd take a few ms through it) until a fault slows them, and back to passing on heal. That
//! is the faithful design: the very connections the servers use are the ones
//! slowed, mid-stream, as a slow network would, and a node killed and restarted
//! reconnects through the same rules. The rules live in the nodes' namespaces
//! and go with them; the proxies live as long as the network (`Network::hold`),
//! so a node never loses its peers while it runs. Nothing of it outlives the run
//! that the run's journal does not already remove (the namespaces) or the
//! controller's death does not end (the proxies).
//!
//! The two compose: with the proxies in place, a partition's packets to b leave
//! a for the proxy's address, past a rule on b's; so its rules also match the
//! address conntrack remembers from before DNAT (`--ctorigdst`), on what a
//! sends and on what the proxy hands back to it (see `rules`).
//!
//! Under the ssh runtime each node is a host of its own: the same rules (what
//! a node sends to a peer cut off from it) go into an iptables chain of
//! lockcheck's on the node's host, made and removed by the cluster
//! (`Cluster::filter`, journaled there with its host), which the heal asks to
//! remove; no namespace is involved. Its latency proxies run here, on the
//! address each host reaches this machine at, and the same DNAT rules go into
//! a `nat` chain of lockcheck's on each host before the nodes start
//! ([`proxy_node_links_on_hosts`], through the cluster's `OnHosts`): the hosts
//! need no netem, which this machine's kernel (like many a container's) lacks,
//! and no program of lockcheck's.
//!
//! Which links a fault hits is [`cuts`] of the shape, the same function the
//! client-link proxy uses; `leader` / `primary` isolation asks the cluster who
//! leads at the moment the fault starts. A partition's rules are journaled
//! before they are added, and removed on heal, on drop, and by `lockcheck
//! recover` (which also removes the namespaces themselves); a latency's links
//! are journaled as they are slowed (`Effect::Link`, like the clients' links),
//! and set back to passing on heal and on drop.

use super::node::{self, NodeTarget};
use super::proxy::{mode_value, Between, LinkId, Mode, Proxies};
use super::shape::{cuts, Cut, Shape};
use super::spec::{Entry, Refusal, Setting};
use super::{Fault, Scene, Target};
use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use lockcheck_journal::{Effect, Journal};
use lockcheck_servers::cluster::netns::{self, Network, OnNetwork};
use lockcheck_servers::cluster::ssh::{HostsSetup, OnHosts};
use lockcheck_servers::cluster::{NetworkKind, NodeSpec, Runtime};
use rand::seq::SliceRandom;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

/// Which node-to-node links a partition cuts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeShape {
    /// One node (picked when the fault starts: the leader, a named one, a
    /// seeded random one) cut off from every other node.
    Isolate(NodeTarget),
    /// Half the nodes (rounded down, chosen with the seed) against the rest.
    Halves,
    /// Each node sees a majority, no two the same one (at least 4 nodes).
    MajoritiesRing,
    /// Two halves, and one node that sees both (at least 3 nodes).
    Bridge,
    /// These pairs of nodes, cut both ways.
    Links(Vec<(String, String)>),
    /// Every link between nodes (for a latency: the whole cluster slowed).
    All,
}

impl NodeShape {
    /// The shape's name in workloads and history values.
    pub fn name(&self) -> &'static str {
        match self {
            NodeShape::Isolate(_) => "isolate",
            NodeShape::Halves => "halves",
            NodeShape::MajoritiesRing => "majorities-ring",
            NodeShape::Bridge => "bridge",
            NodeShape::Links(_) => "links",
            NodeShape::All => "all",
        }
    }

    /// What the run sets up for the shape: the clients' proxies, where it
    /// isolates the holder's node ([`node::needs`]).
    pub(super) fn needs(&self) -> super::spec::Needs {
        match self {
            NodeShape::Isolate(target) => node::needs(target),
            _ => super::spec::Needs::default(),
        }
    }

    /// Checks the shape against a cluster of `nodes` (n1..nN) before any run: too
    /// few nodes for it, or a link naming a node that is not there, is an error.
    pub fn check(&self, nodes: usize) -> Result<()> {
        let names: Vec<String> = (1..=nodes).map(|i| format!("n{i}")).collect();
        if nodes < 2 {
            bail!("a partition between nodes needs at least 2 nodes, not {nodes}");
        }
        let probe = match self {
            NodeShape::Isolate(NodeTarget::Node(n)) => Shape::Isolate(n.clone()),
            NodeShape::Isolate(_) => Shape::Isolate(names[0].clone()),
            NodeShape::Halves => Shape::Halves,
            NodeShape::MajoritiesRing => Shape::MajoritiesRing,
            NodeShape::Bridge => Shape::Bridge,
            NodeShape::All => Shape::Links(every_pair(&names)),
            NodeShape::Links(pairs) => {
                if let Some((a, _)) = pairs.iter().find(|(a, b)| a == b) {
                    bail!("a link joins two nodes: found {a} with itself");
                }
                Shape::Links(pairs.clone())
            }
        };
        cuts(&probe, &names).map(|_| ())
    }
}

/// `shape` as an entry writes it.
#[derive(serde::Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(super) enum ShapeKind {
    Isolate,
    Halves,
    MajoritiesRing,
    Bridge,
    Links,
    All,
}

impl NodeShape {
    /// The `shape` (else `default`), with its `nodes` or `links`, of a
    /// `partition-nodes` or `latency-nodes` entry, checked against the cluster's
    /// nodes here, so that a run never starts with a fault it cannot make.
    pub(super) fn read(
        entry: &mut Entry<'_>,
        setting: &Setting,
        default: ShapeKind,
    ) -> Result<NodeShape> {
        if setting.network != NetworkKind::Namespaces && !setting.hosts {
            return Err(entry.bad(
                "kind",
                "links between nodes are cut or slowed inside their network namespaces: set [backend] network = \"namespaces\"",
            ));
        }
        let kind = entry.take("shape")?.unwrap_or(default);
        let links = entry.take::<Vec<(String, String)>>("links")?;
        if links.is_some() != (kind == ShapeKind::Links) {
            return Err(entry.bad(
                "links",
                "shape = \"links\" takes the pairs of nodes, like links = [[\"n1\", \"n3\"]], and no other shape takes them",
            ));
        }
        let only_for_isolate = "shape = \"isolate\" takes the node to cut off, like nodes = \"primary\", and no other shape takes it";
        let shape = match (kind, entry.take::<NodeTarget>("nodes")?) {
            (
                ShapeKind::Isolate,
                Some(
                    t @ (NodeTarget::One
                    | NodeTarget::Primary
                    | NodeTarget::Holders
                    | NodeTarget::Node(_)),
                ),
            ) => NodeShape::Isolate(t),
            (ShapeKind::Isolate, Some(other)) => {
                return Err(entry.bad(
                    "nodes",
                    format!("isolate cuts one node off: expected \"primary\", \"one\", \"holders\" or a node like \"n2\", found \"{other}\" (shape = \"halves\" splits the cluster)"),
                ))
            }
            (ShapeKind::Isolate, None) | (_, Some(_)) => {
                return Err(entry.bad("nodes", only_for_isolate))
            }
            (ShapeKind::Halves, None) => NodeShape::Halves,
            (ShapeKind::MajoritiesRing, None) => NodeShape::MajoritiesRing,
            (ShapeKind::Bridge, None) => NodeShape::Bridge,
            (ShapeKind::All, None) => NodeShape::All,
            (ShapeKind::Links, None) => NodeShape::Links(links.unwrap_or_default()),
        };
        shape
            .check(setting.nodes)
            .map_err(|e| entry.bad("shape", format!("{e:#}")))?;
        Ok(shape)
    }
}

/// Why a fault on the links between nodes cannot run with the clients on the
/// nodes' hosts ([`super::spec::Spec::refused_with_clients_on_hosts`]).
pub(super) const NODE_LINKS_ON_HOSTS: &str =
    "a node's links are cut or slowed on its host, in what \
     the host sends to the other nodes: the requests of the clients there would be too, and the \
     fault would not be the one the history names";

/// Why `runtime` cannot reach the links between nodes, if it cannot: the local
/// runtime's nodes are in namespaces of their own, the ssh runtime's on hosts
/// of their own.
pub(super) fn refused_by(kind: &super::spec::Kind, runtime: Runtime) -> Option<Refusal> {
    let why = "links between nodes are cut or slowed inside the network namespaces the local runtime puts its nodes in, or on the ssh runtime's hosts";
    match runtime {
        Runtime::Local | Runtime::Ssh => None,
        _ => Some(Refusal::kind(kind, runtime, why)),
    }
}

/// Where a node fault on links between nodes lands, at the moment it starts.
struct Aim {
    /// The nodes' namespaces; none where each node is a host of its own (ssh),
    /// whose links are cut on the hosts through the cluster.
    network: Option<Arc<Network>>,
    /// The nodes, shuffled with the seed where the shape splits them.
    nodes: Vec<String>,
    shape: Shape,
    /// The nodes the history names as the fault's targets.
    targets: Vec<String>,
    dir: std::path::PathBuf,
}

/// The cluster's shape for now: the node list and the shape over it (the
/// isolated node picked, the halves shuffled with the run's seed), and the
/// targets the history names; `None` when there is nobody to isolate yet (no
/// leader during an election).
async fn aim(shape: &NodeShape, scene: &mut Scene<'_>) -> Result<Option<Aim>> {
    let Some(cluster) = scene.cluster else {
        bail!("a fault between nodes needs the run's cluster");
    };
    let (network, mut nodes, dir) = {
        let c = cluster.lock().await;
        let network = c.network();
        if network.is_none() && !c.runtime().remote() {
            bail!("a fault between nodes needs the nodes in namespaces: set [backend] network = \"namespaces\"");
        }
        (network, c.node_names(), c.dir().to_path_buf())
    };
    let shape = match shape {
        NodeShape::Isolate(target) => {
            let Some((picked, _)) = node::pick(target, scene).await? else {
                return Ok(None);
            };
            // A holder connected to several nodes (an etcd client balanced over
            // every member) has no one node of its own: the first is cut off.
            Shape::Isolate(picked[0].clone())
        }
        NodeShape::Links(pairs) => Shape::Links(pairs.clone()),
        NodeShape::All => Shape::Links(every_pair(&nodes)),
        NodeShape::Halves | NodeShape::MajoritiesRing | NodeShape::Bridge => {
            // Who ends up on which side is the seed's choice.
            nodes.shuffle(scene.rng);
            match shape {
                NodeShape::Halves => Shape::Halves,
                NodeShape::MajoritiesRing => Shape::MajoritiesRing,
                _ => Shape::Bridge,
            }
        }
    };
    let targets = match &shape {
        Shape::Isolate(n) => vec![n.clone()],
        Shape::Halves => nodes[..nodes.len() / 2].to_vec(),
        Shape::Bridge => vec![nodes[nodes.len() / 2].clone()],
        _ => Vec::new(),
    };
    Ok(Some(Aim {
        network,
        nodes,
        shape,
        targets,
        dir,
    }))
}

/// Every pair of distinct `nodes`, once.
fn every_pair(nodes: &[String]) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for (i, a) in nodes.iter().enumerate() {
        for b in &nodes[i + 1..] {
            pairs.push((a.clone(), b.clone()));
        }
    }
    pairs
}

/// The rules (without their `-A` / `-D`) that cut the packets a namespace
/// sends to `to`. Where its links go through the latency proxies
/// (`proxied`), its packets to `to` leave for the proxy's address instead once
/// DNAT has rewritten them, so further rules match them by the destination
/// conntrack remembers (`--ctorigdst`), both ways: what it sends, and what the
/// proxy hands it back on those connections (or a black hole would still carry
/// the peer's bytes one way).
fn rules(cut: Cut, to: std::net::Ipv4Addr, proxied: bool) -> Vec<String> {
    let by_addr = format!("-d {to}/32");
    let by_origin = format!("-m conntrack --ctorigdst {to}/32");
    let mut matches = vec![by_addr];
    if proxied {
        matches.push(by_origin.clone());
    }
    let mut rules = Vec::new();
    for m in &matches {
        match cut {
            Cut::Blackhole => rules.push(format!("OUTPUT {m} -j DROP")),
            // Anything not TCP (there is none between these servers) is dropped.
            Cut::Reset => rules.extend([
                format!("OUTPUT {m} -p tcp -j REJECT --reject-with tcp-reset"),
                format!("OUTPUT {m} -j DROP"),
            ]),
        }
    }
    if proxied {
        rules.push(format!("INPUT {by_origin} -j DROP"));
    }
    rules
}

/// Adds (`-A`) or deletes (`-D`) `rules` in namespace `ns`, in one
/// `iptables-restore` that leaves every other rule alone.
fn apply(ns: &str, op: &str, rules: &[String]) -> Result<()> {
    netns::run_in(
        ns,
        "iptables-restore",
        RESTORE,
        &restore_input("filter", op, rules),
    )
}

/// `iptables-restore` keeping every other rule; -w: the xtables lock is one
/// file for every namespace on the machine.
const RESTORE: &[&str] = &["-w", "--noflush"];

/// The input of an `iptables-restore` that applies `op` to `rules` in `table`.
fn restore_input(table: &str, op: &str, rules: &[String]) -> String {
    let mut input = format!("*{table}\n");
    for r in rules {
        input.push_str(&format!("{op} {r}\n"));
    }
    input.push_str("COMMIT\n");
    input
}

/// Removes the rules an [`Effect::NodeCut`] added, if their namespace is still
/// there (it takes its rules with it when it goes); says what it did.
pub fn undo(namespace: &str, rules: &[String]) -> Result<String> {
    if !std::path::Path::new("/run/netns").join(namespace).exists() {
        return Ok("namespace gone, and its rules with it".into());
    }
    apply(namespace, "-D", rules)?;
    Ok(format!("removed {} rule(s)", rules.len()))
}

/// One namespace's rules in force, and its journal entry.
struct Applied {
    namespace: String,
    rules: Vec<String>,
    journal_id: u64,
}

/// Cuts links between server nodes, heals them when it ends. Recorded as
/// nemesis `partition` / `heal`, the value naming the cut links.
pub struct NodePartition {
    shape: NodeShape,
    cut: Cut,
    active: Vec<Applied>,
    /// The cluster's filters in force on the nodes' hosts (ssh); the cluster
    /// removes any left when it stops.
    filters: Vec<u64>,
    links: Vec<String>,
    journal: Option<Arc<Journal>>,
}

impl NodePartition {
    pub fn new(shape: NodeShape, cut: Cut) -> NodePartition {
        NodePartition {
            shape,
            cut,
            active: Vec::new(),
            filters: Vec::new(),
            links: Vec::new(),
            journal: None,
        }
    }

    fn heal_all(&mut self) -> Result<()> {
        heal(std::mem::take(&mut self.active), self.journal.as_deref())
    }
}

/// Removes the rules in force, namespace by namespace; the first error is
/// returned after all were tried.
fn heal(active: Vec<Applied>, journal: Option<&Journal>) -> Result<()> {
    let mut first = None;
    for a in active {
        let healed = apply(&a.namespace, "-D", &a.rules);
        let journaled = match journal {
            Some(j) if healed.is_ok() => j.undone(a.journal_id),
            _ => Ok(()),
        };
        if let Err(e) = healed.and(journaled) {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

#[async_trait]
impl Fault for NodePartition {
    fn target(&self) -> &Target {
        &node::TIMED
    }

    async fn start(&mut self, scene: &mut Scene<'_>) -> Result<Option<Value>> {
        let Some(Aim {
            network,
            nodes,
            shape,
            targets,
            dir,
        }) = aim(&self.shape, scene).await?
        else {
            return Ok(None);
        };
        let cut = cuts(&shape, &nodes)?;
        let mode = match self.cut {
            Cut::Blackhole => "blackhole",
            Cut::Reset => "reset",
        };
        self.links = cut.iter().map(|(a, b)| format!("{a}->{b}")).collect();
        let value = json!({
            "targets": targets,
            "between": "nodes",
            "shape": self.shape.name(),
            "links": self.links,
            "mode": mode,
        });
        let proxied = Proxies::registered(&dir, Between::Nodes).is_some();
        let Some(network) = network else {
            self.cut_on_hosts(&cut, proxied, scene).await?;
            return Ok(Some(value));
        };
        let mut per_namespace: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (from, to) in &cut {
            let ns = network
                .namespace_of(from)
                .with_context(|| format!("node {from} has no namespace"))?;
            let addr = network
                .addr_of(to)
                .with_context(|| format!("node {to} has no address"))?;
            per_namespace
                .entry(ns)
                .or_default()
                .extend(rules(self.cut, addr, proxied));
        }
        let journal = Journal::for_run(&dir)?;
        self.journal = Some(journal.clone());
        for (namespace, rules) in per_namespace {
            // Written down first: a controller killed right after still has them
            // removed by `recover`.
            let journal_id = journal.record(Effect::NodeCut {
                namespace: namespace.clone(),
                rules: rules.clone(),
            })?;
            // One iptables-restore commit: all of them or none. A program run to
            // its end: off the runtime, whose clock times the clients' ops.
            let (ns, add) = (namespace.clone(), rules.clone());
            let applied = tokio::task::spawn_blocking(move || apply(&ns, "-A", &add)).await?;
            if let Err(e) = applied {
                journal.undone(journal_id)?;
                return Err(e);
            }
            self.active.push(Applied {
                namespace,
                rules,
                journal_id,
            });
        }
        Ok(Some(value))
    }

    async fn stop(&mut self, scene: &mut Scene<'_>) -> Result<Value> {
        let value = json!({ "between": "nodes", "links": std::mem::take(&mut self.links) });
        if !self.filters.is_empty() {
            let Some(cluster) = scene.cluster else {
                bail!("a fault between nodes needs the run's cluster");
            };
            let mut cluster = cluster.lock().await;
            // Try every host; report the first failure after all were tried.
            let mut first = None;
            for f in std::mem::take(&mut self.filters) {
                if let Err(e) = cluster.unfilter(f).await {
                    first.get_or_insert(e);
                }
            }
            return first.map_or(Ok(value), Err);
        }
        let (active, journal) = (std::mem::take(&mut self.active), self.journal.clone());
        tokio::task::spawn_blocking(move || heal(active, journal.as_deref())).await??;
        Ok(value)
    }
}

impl NodePartition {
    /// Cuts `cut` on the nodes' own hosts (ssh): for each node, a chain of
    /// lockcheck's in its host's packet filter dropping (or resetting) what it
    /// sends to the nodes cut off from it (and, where its links go through the
    /// latency proxies, what comes back on them), through the cluster, which
    /// journals it.
    async fn cut_on_hosts(
        &mut self,
        cut: &std::collections::BTreeSet<(String, String)>,
        proxied: bool,
        scene: &mut Scene<'_>,
    ) -> Result<()> {
        let Some(cluster) = scene.cluster else {
            bail!("a fault between nodes needs the run's cluster");
        };
        let mut cluster = cluster.lock().await;
        let mut per_node: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (from, to) in cut {
            let addr = match cluster.node_addr(to) {
                Some(std::net::IpAddr::V4(a)) => a,
                Some(other) => {
                    bail!("node {to} is at {other}: links between nodes are cut over IPv4 only")
                }
                None => bail!("node {to} has no address"),
            };
            // The host's chain is jumped to from both: what a rule matches
            // says which way it cuts.
            let host_rules = rules(self.cut, addr, proxied)
                .into_iter()
                .map(|r| {
                    r.strip_prefix("OUTPUT ")
                        .or_else(|| r.strip_prefix("INPUT "))
                        .map(str::to_string)
                })
                .collect::<Option<Vec<_>>>()
                .context("a cut on a host is of what it sends or receives")?;
            per_node.entry(from).or_default().extend(host_rules);
        }
        for (node, rules) in per_node {
            self.filters.push(cluster.filter(node, &rules).await?);
        }
        Ok(())
    }
}

impl Drop for NodePartition {
    fn drop(&mut self) {
        if let Err(e) = self.heal_all() {
            tracing::warn!("healing a node partition: {e:#}");
        }
    }
}

/// The rule (without its `-A`) in `from`'s namespace that sends its
/// connections to `target` (a peer's port) to the proxy at `proxy` instead.
fn redirect(target: SocketAddr, proxy: SocketAddr) -> String {
    format!(
        "OUTPUT -d {}/32 -p tcp --dport {} -j DNAT --to-destination {proxy}",
        target.ip(),
        target.port()
    )
}

/// The ports a node's peers connect to: etcd's and NATS's peer port,
/// ZooKeeper's quorum and election ports.
fn peer_ports(node: &NodeSpec) -> Vec<SocketAddr> {
    node.peer_listen.into_iter().chain(node.election).collect()
}

/// The hook (run before any node starts) that puts every link between nodes
/// through a proxy of its own: for each node a, peer b and port of b, a
/// [`Link`](super::proxy::Link) `a -> b:port` on the host's address, and a DNAT
/// rule in a's namespace sending a's connections to b:port there. The proxies
/// pass until a [`NodeLatency`] slows them; they are registered for the run in
/// `run_dir` and live as long as the network (the rules go with the
/// namespaces, which the run's journal already lists).
pub fn proxy_node_links(run_dir: PathBuf, seed: u64) -> OnNetwork {
    OnNetwork(Arc::new(move |network: &Network, nodes: &[NodeSpec]| {
        let host = network.host_addr().into();
        let (proxies, per_node) = proxy_every_link(nodes, seed, |_| host)?;
        for (node, rules) in nodes.iter().zip(&per_node) {
            let input = restore_input("nat", "-A", rules);
            network.run_in(&node.name, "iptables-restore", RESTORE, &input)?;
        }
        proxies.register(&run_dir, Between::Nodes);
        network.hold(Box::new(proxies));
        Ok(())
    }))
}

/// [`proxy_node_links`] for nodes that are hosts of their own (the ssh
/// runtime): the proxies on this machine, each listening on the address the
/// host its link comes from reaches this machine at, and the same rules on the
/// hosts (by the cluster, in a chain of lockcheck's of each host's `nat` table).
/// The hosts need nothing but iptables: no netem (which this machine's kernel,
/// like many a container's, lacks), no program of lockcheck's.
pub fn proxy_node_links_on_hosts(run_dir: PathBuf, seed: u64) -> OnHosts {
    OnHosts(Arc::new(move |nodes: &[NodeSpec], here: &[IpAddr]| {
        let (proxies, per_node) = proxy_every_link(nodes, seed, |i| here[i])?;
        let redirects = per_node
            .into_iter()
            .map(|rules| {
                rules
                    .into_iter()
                    .map(|r| r.strip_prefix("OUTPUT ").map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .context("a redirect on a host is of what it sends")
            })
            .collect::<Result<Vec<_>>>()?;
        proxies.register(&run_dir, Between::Nodes);
        Ok(HostsSetup {
            redirects,
            hold: Box::new(proxies),
        })
    }))
}

/// Every link between `nodes` (a node to each port of each peer) through a
/// proxy of its own, passing until a fault slows it, listening on a free port
/// of `bind(i)` for the links from node `i`; the proxies, and for each node the
/// `nat` rules (without their `-A`) that send its connections to them.
fn proxy_every_link(
    nodes: &[NodeSpec],
    seed: u64,
    bind: impl Fn(usize) -> IpAddr,
) -> Result<(Arc<Proxies>, Vec<Vec<String>>)> {
    let mut proxies = Proxies::new(seed);
    let mut per_node = vec![Vec::new(); nodes.len()];
    for (i, from) in nodes.iter().enumerate() {
        for to in nodes.iter().filter(|n| n.name != from.name) {
            for target in peer_ports(to) {
                let id = LinkId::new(&from.name, format!("{}:{}", to.name, target.port()));
                let proxy = proxies.add_on(id, SocketAddr::new(bind(i), 0), target)?;
                per_node[i].push(redirect(target, proxy));
            }
        }
    }
    Ok((Arc::new(proxies), per_node))
}

/// The node a proxied node link leads to: `n2` of `n1 -> n2:2380`.
fn peer_of(id: &LinkId) -> &str {
    id.to.split(':').next().unwrap_or(&id.to)
}

/// Slows links between server nodes: sets `Latency` on the proxies
/// [`proxy_node_links`] put them through, back to `Pass` when it ends.
/// Recorded as nemesis `latency` / `heal`, the value naming the slowed links.
pub struct NodeLatency {
    shape: NodeShape,
    mode: Mode,
    /// The proxied links slowed, with their journal entries.
    active: Vec<(LinkId, u64)>,
    /// The slowed node pairs, `n1->n2`.
    links: Vec<String>,
    proxies: Option<Arc<Proxies>>,
    journal: Option<Arc<Journal>>,
}

impl NodeLatency {
    /// `mode` is a [`Mode::Latency`].
    pub fn new(shape: NodeShape, mode: Mode) -> NodeLatency {
        NodeLatency {
            shape,
            mode,
            active: Vec::new(),
            links: Vec::new(),
            proxies: None,
            journal: None,
        }
    }

    fn heal_all(&mut self) -> Result<()> {
        let Some(proxies) = &self.proxies else {
            return Ok(());
        };
        let mut first = None;
        for (id, journal_id) in self.active.drain(..) {
            if let Some(link) = proxies.get(&id) {
                link.set(Mode::Pass);
            }
            if let Some(Err(e)) = self.journal.as_ref().map(|j| j.undone(journal_id)) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

#[async_trait]
impl Fault for NodeLatency {
    fn target(&self) -> &Target {
        &node::TIMED
    }

    async fn start(&mut self, scene: &mut Scene<'_>) -> Result<Option<Value>> {
        let Some(Aim {
            nodes,
            shape,
            targets,
            dir,
            ..
        }) = aim(&self.shape, scene).await?
        else {
            return Ok(None);
        };
        let slowed = cuts(&shape, &nodes)?;
        let proxies = Proxies::registered(&dir, Between::Nodes).with_context(|| {
            format!(
                "a latency between nodes needs the proxies of their links, put in place as the nodes start (run {} has none)",
                dir.display()
            )
        })?;
        let journal = Journal::for_run(&dir)?;
        self.links = slowed.iter().map(|(a, b)| format!("{a}->{b}")).collect();
        let ids: Vec<LinkId> = proxies
            .links()
            .map(|l| l.id().clone())
            .filter(|id| slowed.contains(&(id.from.clone(), peer_of(id).to_string())))
            .collect();
        self.proxies = Some(proxies.clone());
        self.journal = Some(journal.clone());
        for id in ids {
            let journal_id = journal.record(Effect::Link {
                link: id.to_string(),
                mode: format!("{:?}", self.mode),
            })?;
            proxies.set(std::slice::from_ref(&id), self.mode)?;
            self.active.push((id, journal_id));
        }
        let mut value = json!({
            "targets": targets,
            "between": "nodes",
            "shape": self.shape.name(),
            "links": self.links,
        });
        mode_value(self.mode, &mut value);
        Ok(Some(value))
    }

    async fn stop(&mut self, _scene: &mut Scene<'_>) -> Result<Value> {
        let value = json!({ "between": "nodes", "links": std::mem::take(&mut self.links) });
        self.heal_all()?;
        Ok(value)
    }
}

impl Drop for NodeLatency {
    fn drop(&mut self) {
        if let Err(e) = self.heal_all() {
            tracing::warn!("healing a latency between nodes: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_checked_against_the_cluster_size() {
        assert!(NodeShape::Isolate(NodeTarget::Primary).check(3).is_ok());
        assert!(NodeShape::Isolate(NodeTarget::Primary).check(1).is_err());
        assert!(NodeShape::Isolate(NodeTarget::Node("n4".into()))
            .check(3)
            .is_err());
        assert!(NodeShape::MajoritiesRing.check(3).is_err());
        assert!(NodeShape::MajoritiesRing.check(5).is_ok());
        assert!(NodeShape::Bridge.check(2).is_err());
        let links = |a: &str, b: &str| NodeShape::Links(vec![(a.into(), b.into())]);
        assert!(links("n1", "n3").check(3).is_ok());
        assert!(links("n1", "n1").check(3).is_err());
        assert!(links("n1", "n9").check(3).is_err());
    }

    #[test]
    fn a_reset_rejects_tcp_and_drops_the_rest() {
        let to = std::net::Ipv4Addr::new(10, 213, 4, 2);
        assert_eq!(
            rules(Cut::Blackhole, to, false),
            vec!["OUTPUT -d 10.213.4.2/32 -j DROP"]
        );
        let reset = rules(Cut::Reset, to, false);
        assert!(reset[0].contains("-p tcp -j REJECT --reject-with tcp-reset"));
        assert!(reset[1].ends_with("-j DROP"));
        // Through the latency proxies: matched by the address before DNAT too.
        let proxied = rules(Cut::Blackhole, to, true);
        assert_eq!(proxied.len(), 3, "{proxied:?}");
        assert!(proxied[1].starts_with("OUTPUT -m conntrack --ctorigdst 10.213.4.2/32"));
        assert!(proxied[2].starts_with("INPUT -m conntrack --ctorigdst 10.213.4.2/32"));
    }
}
