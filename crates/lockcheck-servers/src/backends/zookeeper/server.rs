//! A ZooKeeper ensemble as Debian runs it: `java -cp zookeeper.jar:slf4j-simple.jar
//! org.apache.zookeeper.server.quorum.QuorumPeerMain <cfg>` per node (zookeeper.jar's
//! manifest names its other jars in /usr/share/java; slf4j-simple sends the log to
//! stderr, which is the node's log). Each node's `zoo.cfg` and `myid` are written
//! into its data directory before every start.
//!
//! A short tick (100 ms) keeps elections and tests fast. The session timeout a
//! client asks for is honoured from 2 ticks up to 2 minutes, so the workload's lease
//! (the session timeout) is what the server applies.

use crate::backend::probe::answers;
use crate::backends::zookeeper::client::mode;
use crate::cluster::plan::ClusterPlan;
use crate::cluster::recipe::{ClusterError, Package, Ports, ServerBinary, ServerRecipe};
use anyhow::{Context, Result};
use async_trait::async_trait;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

/// The jars a server needs, and the Debian package of each: the jars' own, not
/// `zookeeper` (its scripts and ZooInspector), which depends on a desktop JRE that
/// a server never uses: in the audit image (scripts/image, 2026-12-06) 73 more
/// packages, 209 MiB installed (GTK, Mesa, a second LLVM).
const JARS: [Package; 2] = [
    Package {
        check: "/usr/share/java/zookeeper.jar",
        name: "libzookeeper-java",
    },
    Package {
        check: "/usr/share/java/slf4j-simple.jar",
        name: "libslf4j-java",
    },
];

const TICK_MS: u64 = 100;

/// What `srvr` answers once the server serves (`Mode: leader`, `follower`,
/// `standalone`); a server without a quorum says it is "not currently serving".
const SERVING: &str = "Mode: ";

pub(crate) struct Zookeeper;

#[async_trait]
impl ServerRecipe for Zookeeper {
    /// The servers are Java; the jars are checked when a node starts.
    fn binary(&self) -> ServerBinary {
        ServerBinary {
            name: "java",
            package: "default-jre-headless",
            env: "LOCKCHECK_JAVA",
        }
    }

    /// Java and its jars.
    fn packages(&self) -> Vec<Package> {
        let java = self.binary();
        let java = Package {
            check: java.name,
            name: java.package,
        };
        [java].into_iter().chain(JARS).collect()
    }

    /// The smallest ensemble that survives the loss of one server.
    fn default_nodes(&self) -> usize {
        3
    }

    /// The quorum's traffic on the peer port, leader election on its own.
    fn ports(&self, _nodes: usize) -> Ports {
        Ports {
            client: 2181,
            peer: Some(2888),
            election: Some(3888),
        }
    }

    fn command(&self, plan: &ClusterPlan, i: usize, _rejoin: bool) -> Result<Command> {
        command(plan, i)
    }

    async fn ready(&self, addr: SocketAddr) -> bool {
        answers(addr, b"srvr", SERVING).await
    }

    /// Debian's JVMs and ZooKeeper keep their configuration there.
    fn host_etc(&self) -> &'static [&'static str] {
        &["java-17-openjdk", "java-21-openjdk", "zookeeper"]
    }

    /// The running server that says it leads (`srvr`: `Mode: leader`, or
    /// `standalone` for a single server).
    async fn leader(
        &self,
        _plan: &ClusterPlan,
        running: &[(String, SocketAddr)],
    ) -> Option<String> {
        for (name, addr) in running {
            if leads(*addr).await {
                return Some(name.clone());
            }
        }
        None
    }
}

/// The command that runs node `i`, after writing its configuration.
fn command(plan: &ClusterPlan, i: usize) -> Result<Command> {
    for Package { check: jar, name } in JARS {
        if !Path::new(jar).exists() {
            return Err(ClusterError::MissingBinary {
                binary: jar.to_string(),
                package: name,
                hint: String::new(),
            }
            .into());
        }
    }
    let node = &plan.nodes[i];
    std::fs::create_dir_all(&node.data_dir)
        .with_context(|| format!("creating {}", node.data_dir.display()))?;
    let mut cfg = format!(
        "tickTime={TICK_MS}\ninitLimit=50\nsyncLimit=10\n\
         minSessionTimeout={}\nmaxSessionTimeout=120000\n\
         dataDir={}\nclientPort={}\nclientPortAddress={}\n\
         admin.enableServer=false\n4lw.commands.whitelist=srvr\n\
         standaloneEnabled=true\n",
        2 * TICK_MS,
        node.data_dir.display(),
        node.client_listen.port(),
        node.client_listen.ip(),
    );
    for (k, n) in plan.nodes.iter().enumerate() {
        let peer = n
            .peer_advertise
            .context("zookeeper nodes have a peer address")?;
        let election = n
            .election
            .context("zookeeper nodes have an election address")?;
        writeln!(
            cfg,
            "server.{}={}:{}:{}",
            k + 1,
            peer.ip(),
            peer.port(),
            election.port()
        )?;
    }
    let cfg_path = node.data_dir.join("zoo.cfg");
    std::fs::write(&cfg_path, cfg).with_context(|| format!("writing {}", cfg_path.display()))?;
    std::fs::write(node.data_dir.join("myid"), format!("{}\n", i + 1))
        .with_context(|| format!("writing the myid of {}", node.name))?;

    let mut cmd = Command::new(&plan.binary);
    cmd.args([
        "-Xms32m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
    ])
    .arg("-Dorg.slf4j.simpleLogger.showDateTime=true")
    .arg("-cp")
    .arg(JARS.map(|p| p.check).join(":"))
    .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
    .arg(&cfg_path);
    Ok(cmd)
}

/// Whether the server at `addr` says it leads the ensemble (or runs alone).
async fn leads(addr: SocketAddr) -> bool {
    matches!(mode(addr).await.as_deref(), Some("leader" | "standalone"))
}
