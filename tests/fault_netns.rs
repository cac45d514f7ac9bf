//! Partitions between server nodes (`partition-nodes`), each node in a network
//! namespace of its own: a real 3-member etcd whose leader is cut off from its
//! peers elects another and heals back into one cluster; a run with the fault
//! leaves no namespace, veth, bridge or process behind; and `lockcheck recover`
//! removes them all after the controller is killed with -9 mid-partition.

mod netns_support;
mod run_support;

use lockcheck::backend::BackendKind;
use lockcheck::cluster::{netns, Cluster, ClusterSpec, LocalCluster, NetworkKind};
use lockcheck::fault::netns::{NodePartition, NodeShape};
use lockcheck::fault::node::NodeTarget;
use lockcheck::fault::shape::Cut;
use lockcheck::fault::Fault;
use netns_support::*;
use nix::sys::signal::Signal;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use run_support::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// The leader id each member names, or none for one that does not answer.
async fn leaders_named(endpoints: &[String]) -> Vec<Option<u64>> {
    let mut named = Vec::new();
    for e in endpoints {
        let leader = match member(e).await {
            Some(mut c) => match tokio::time::timeout(Duration::from_secs(2), c.status()).await {
                Ok(Ok(s)) if s.leader() != 0 => Some(s.leader()),
                _ => None,
            },
            None => None,
        };
        named.push(leader);
    }
    named
}

/// The rules of `ns`'s OUTPUT chain, as `iptables -S` prints them.
fn output_rules(ns: &str) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "iptables", "-S", "OUTPUT"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn an_isolated_etcd_leader_is_replaced_and_the_cluster_heals_into_one() {
    let dir = tempfile::tempdir().unwrap();
    let id = netns::run_id(dir.path());
    let spec = ClusterSpec {
        network: NetworkKind::Namespaces,
        ..ClusterSpec::new(BackendKind::Etcd, dir.path())
    };
    let c: Mutex<Box<dyn Cluster>> = Mutex::new(Box::new(LocalCluster::start(spec).await.unwrap()));
    let endpoints = c.lock().await.endpoints();
    assert!(
        endpoints.iter().all(|e| e.starts_with("10.213.")),
        "the members listen in their namespaces: {endpoints:?}"
    );
    assert_eq!(
        netns::namespaces_of(&id).unwrap().len(),
        4,
        "3 members and the switch"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let old = leader_where(&c, Duration::from_secs(10), |_| true)
        .await
        .expect("a leader");
    let old_addr = endpoints[old[1..].parse::<usize>().unwrap() - 1].clone();
    assert!(
        grants_lease(&old_addr).await,
        "the leader grants leases before the cut"
    );

    let mut cut = NodePartition::new(NodeShape::Isolate(NodeTarget::Primary), Cut::Blackhole);
    let value = cut
        .start(&mut scene(&c, &mut rng))
        .await
        .unwrap()
        .expect("the leader is there to isolate");
    let cut_at = Instant::now();
    assert_eq!(value["targets"][0], old.as_str(), "{value}");
    assert_eq!(value["between"], "nodes", "{value}");
    assert_eq!(value["links"].as_array().unwrap().len(), 4, "{value}");
    let ns = netns::namespace(&id, &old);
    assert_eq!(
        output_rules(&ns).matches("-j DROP").count(),
        2,
        "{}",
        output_rules(&ns)
    );

    let new = leader_where(&c, Duration::from_secs(10), |l| l != old)
        .await
        .unwrap_or_else(|| panic!("{old} isolated, and no one replaced it"));
    let elected = cut_at.elapsed();
    // The clients still reach every member; the old leader's side cannot commit.
    assert!(
        !grants_lease(&old_addr).await,
        "the isolated {old} granted a lease without a quorum"
    );
    let new_addr = endpoints[new[1..].parse::<usize>().unwrap() - 1].clone();
    assert!(
        grants_lease(&new_addr).await,
        "the majority side grants leases"
    );

    let value = cut.stop(&mut scene(&c, &mut rng)).await.unwrap();
    let healed_at = Instant::now();
    assert_eq!(value["links"].as_array().unwrap().len(), 4, "{value}");
    assert!(!output_rules(&ns).contains("DROP"), "{}", output_rules(&ns));
    // One cluster again: every member names the same leader, and the old one
    // serves lease grants again.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let named = leaders_named(&endpoints).await;
        if named.iter().all(|l| l.is_some() && *l == named[0]) && grants_lease(&old_addr).await {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not one cluster after the heal: {named:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let healed = healed_at.elapsed();
    eprintln!(
        "isolated leader {old}: {new} elected after {:.2} s; one cluster again {:.2} s after the heal",
        elected.as_secs_f64(),
        healed.as_secs_f64()
    );
    drop(cut);
    // The pid faults signal is the server's own, inside its namespace; a killed
    // member comes back in the same namespace, at the same address.
    let pid = c.lock().await.pid(&old).unwrap();
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim(), "etcd");
    let netns_of = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    assert_ne!(netns_of(&pid.to_string()), netns_of("self"));
    c.lock().await.kill(&old).await.unwrap();
    c.lock().await.restart(&old).await.unwrap();
    let pid = c.lock().await.pid(&old).unwrap();
    let ns_path = Path::new("/run/netns").join(&ns);
    let expected = std::fs::metadata(&ns_path).unwrap();
    let actual = std::fs::metadata(format!("/proc/{pid}/ns/net")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(actual.ino(), expected.ino(), "restarted in its namespace");
    assert!(
        grants_lease(&old_addr).await,
        "{old} serves after its restart"
    );
    c.lock().await.stop().await;
    assert_network_gone(&id);
    drop(c);
}

/// How a TCP connect from inside `node`'s namespace to `to` ends within 500 ms:
/// "ok", "refused" (a reset) or "timeout" (a black hole).
fn connect_from(network: &netns::Network, node: &str, to: &str) -> &'static str {
    use std::os::fd::AsRawFd;
    let ns = network.open(node).unwrap();
    let to: std::net::SocketAddr = to.parse().unwrap();
    // A namespace is per thread: this one enters it, the test's stays out.
    std::thread::scope(|s| {
        s.spawn(|| {
            netns::enter(ns.as_raw_fd()).unwrap();
            match std::net::TcpStream::connect_timeout(&to, Duration::from_millis(500)) {
                Ok(_) => "ok",
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => "refused",
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => "timeout",
                Err(e) => panic!("connecting to {to} from {node}: {e}"),
            }
        })
        .join()
        .unwrap()
    })
}

#[tokio::test]
async fn a_reset_refuses_and_a_black_hole_swallows_only_the_cut_links() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ClusterSpec {
        network: NetworkKind::Namespaces,
        ..ClusterSpec::new(BackendKind::Redlock, dir.path())
    };
    let c: Mutex<Box<dyn Cluster>> = Mutex::new(Box::new(LocalCluster::start(spec).await.unwrap()));
    let (network, e) = {
        let c = c.lock().await;
        (c.network().unwrap(), c.endpoints())
    };
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for (cut, how) in [(Cut::Reset, "refused"), (Cut::Blackhole, "timeout")] {
        let shape = NodeShape::Links(vec![("n1".into(), "n2".into())]);
        let mut fault = NodePartition::new(shape, cut);
        let value = fault
            .start(&mut scene(&c, &mut rng))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(value["links"], serde_json::json!(["n1->n2", "n2->n1"]));
        assert_eq!(
            connect_from(&network, "n1", &e[1]),
            how,
            "n1 -> n2, {cut:?}"
        );
        assert_eq!(
            connect_from(&network, "n2", &e[0]),
            how,
            "n2 -> n1, {cut:?}"
        );
        assert_eq!(
            connect_from(&network, "n1", &e[2]),
            "ok",
            "n1 -> n3 is not cut"
        );
        // The clients' side (the host) still reaches both.
        for addr in &e[..2] {
            assert!(std::net::TcpStream::connect(addr).is_ok(), "host -> {addr}");
        }
        fault.stop(&mut scene(&c, &mut rng)).await.unwrap();
        assert_eq!(connect_from(&network, "n1", &e[1]), "ok", "healed, {cut:?}");
    }
    let id = network.id().to_string();
    drop(network);
    c.lock().await.stop().await;
    assert_network_gone(&id);
}

#[tokio::test]
async fn a_majorities_ring_leaves_each_of_five_nodes_a_different_majority() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ClusterSpec {
        network: NetworkKind::Namespaces,
        ..ClusterSpec::new(BackendKind::Redlock, dir.path())
    };
    let c: Mutex<Box<dyn Cluster>> = Mutex::new(Box::new(LocalCluster::start(spec).await.unwrap()));
    let (network, names, e) = {
        let c = c.lock().await;
        (c.network().unwrap(), c.node_names(), c.endpoints())
    };
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut fault = NodePartition::new(NodeShape::MajoritiesRing, Cut::Reset);
    let value = fault
        .start(&mut scene(&c, &mut rng))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(value["links"].as_array().unwrap().len(), 10, "{value}");
    let mut views = std::collections::BTreeSet::new();
    for a in &names {
        let sees: std::collections::BTreeSet<&String> = names
            .iter()
            .zip(&e)
            .filter(|(b, addr)| *b != a && connect_from(&network, a, addr) == "ok")
            .map(|(b, _)| b)
            .chain([a])
            .collect();
        assert_eq!(sees.len(), 3, "{a} sees a bare majority: {sees:?}");
        assert!(views.insert(sees), "no two nodes see the same majority");
    }
    fault.stop(&mut scene(&c, &mut rng)).await.unwrap();
    assert_eq!(connect_from(&network, &names[0], &e[1]), "ok");
    assert_eq!(connect_from(&network, &names[0], &e[2]), "ok");
    c.lock().await.stop().await;
    assert_network_gone(network.id());
}

/// Runs a leader-isolation workload long enough for one cut (from 1 s, for 4 s)
/// and its heal: the verdict is valid, the history has the cut and its heal,
/// and nothing of the run is left.
fn one_leader_isolation_leaves_nothing_behind(name: &str) {
    let r = run(&workload(name), &["--time-limit", "6"]);
    let dir = r.run_dir();
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let cuts: Vec<&str> = history
        .lines()
        .filter(|l| l.contains("\"partition\"") && l.contains("\"between\":\"nodes\""))
        .collect();
    assert!(
        !cuts.is_empty(),
        "no node partition in the history:\n{history}"
    );
    assert!(
        history.lines().filter(|l| l.contains("\"heal\"")).count() >= cuts.len(),
        "every partition healed:\n{history}"
    );
    // etcd's clients wait on the cut-off leader, and an acquire in doubt there
    // keeps its key while the new leader renews its lease: a 6 s run may see no
    // grant after the cut (exit 3, `faults.unseen`), which is etcd's business, not
    // this test's. ZooKeeper's ensemble must ride it out: exit 0.
    if name.starts_with("etcd") {
        r.assert_valid_faults_started();
    } else {
        assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    }
    assert_network_gone(&netns::run_id(&dir));
    r.assert_nothing_left();
}

#[test]
fn a_run_with_a_node_partition_leaves_nothing_behind() {
    one_leader_isolation_leaves_nothing_behind("etcd-partition-isolate-leader.toml");
}

#[test]
fn a_zookeeper_ensemble_rides_out_its_leader_cut_off() {
    one_leader_isolation_leaves_nothing_behind("zookeeper-partition-isolate-leader.toml");
}

/// A ZooKeeper client moves its session to another server when its own stops
/// serving, so that cutting off the holder's server deposed nobody in 10 of 10
/// audit runs (docs/faults.md). Pinned to one follower (`client_endpoint =
/// "follower"`), it cannot: the session expires while the server is cut off for
/// twice the lease, a successor is granted once it is back, and the holder, told
/// nothing, writes on over it (the audit's holder-node-isolated, unfenced).
#[test]
fn a_zookeeper_holder_pinned_to_its_cut_off_server_loses_its_session_and_writes_on() {
    let dir = tempfile::tempdir().unwrap();
    let w = write_workload(
        dir.path(),
        "zookeeper-holder-node-isolated.toml",
        r#"
duration = "20s"
end = "after-effect"
seed = 1
resource = "unfenced"

[backend]
kind = "zookeeper"
lease = "2s"
fencing_token = true
acquire_timeout = "1s"
network = "namespaces"
client_endpoint = "follower"

[clients]
count = 3

[critical_section]
hold = "10s"
writes = 20
think = "50ms"

[[faults]]
kind = "partition-nodes"
shape = "isolate"
nodes = "holders"
cut = "blackhole"
duration = "4s"
after = "1s"
interval = "6s"
"#,
    );
    let r = run(&w, &[]);
    r.assert_flagged(&["double-holder", "stale-write-accepted"]);
    assert_eq!(r.json["provoked"]["class"], "provoked", "{}", r.json);
    assert_network_gone(&netns::run_id(&r.run_dir()));
    r.assert_nothing_left();
}

/// Starts `lockcheck run` on the etcd leader-isolation workload and returns once
/// its first node partition is in force: the controller, and the run directory.
fn run_until_nodes_are_cut(results: &Path) -> (std::process::Child, PathBuf) {
    // In force once all its rules are: the isolated member's 2, 1 in each peer.
    run_until(
        &workload("etcd-partition-isolate-leader.toml"),
        results,
        &[],
        "no node partition",
        Duration::from_secs(30),
        |dir| (drop_rules(&netns::run_id(dir)) == 4).then(|| dir.to_path_buf()),
    )
}

/// The DROP rules in force in the namespaces of run `id`.
fn drop_rules(id: &str) -> usize {
    netns::namespaces_of(id)
        .unwrap()
        .iter()
        .map(|ns| output_rules(ns).matches("-j DROP").count())
        .sum()
}

#[test]
fn sigterm_in_the_middle_of_a_node_partition_removes_it_all() {
    let results = tempfile::tempdir().unwrap();
    let (mut controller, dir) = run_until_nodes_are_cut(results.path());
    let id = netns::run_id(&dir);
    assert_eq!(netns::namespaces_of(&id).unwrap().len(), 4);
    end(&mut controller, Signal::SIGTERM);
    assert_network_gone(&id);
    assert_processes_gone(results.path());
}

#[test]
fn recover_removes_the_namespaces_a_killed_controller_left() {
    let results = tempfile::tempdir().unwrap();
    let (mut controller, dir) = run_until_nodes_are_cut(results.path());
    end(&mut controller, Signal::SIGKILL); // no Drop runs
    let id = netns::run_id(&dir);
    let left = netns::namespaces_of(&id).unwrap();
    assert_eq!(
        left.len(),
        4,
        "the killed run left its namespaces: {left:?}"
    );
    assert_eq!(drop_rules(&id), 4, "and its cut");
    assert!(!leftovers(results.path()).is_empty(), "and its processes");

    let out = lockcheck()
        .arg("recover")
        .arg(&dir)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let actions = report["undone"].to_string();
    assert!(actions.contains("node link rule"), "{report}");
    assert!(actions.contains("removed 4 namespace(s)"), "{report}");
    assert_network_gone(&id);
    assert_processes_gone(results.path());
}
