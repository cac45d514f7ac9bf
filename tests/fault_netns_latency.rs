//! Latency between server nodes (`latency-nodes`): every raft link of a real
//! 3-member etcd, each member in a namespace of its own, goes through a proxy
//! from the start (a DNAT rule in the sender's namespace); slowing the proxies
//! by 200 ms each way makes every linearizable put and get pay raft's round
//! trips, back to normal after the heal, and a new leader is still elected under
//! it; a node partition still cuts the links through the proxies. A run with
//! the fault ends valid and leaves nothing behind, and so does one ended by
//! SIGTERM, or killed with -9 and recovered, under the latency.

mod netns_support;
mod run_support;

use lockcheck::backend::BackendKind;
use lockcheck::cluster::{netns, Cluster, ClusterSpec, LocalCluster, NetworkKind};
use lockcheck::fault::netns::{proxy_node_links, NodeLatency, NodePartition, NodeShape};
use lockcheck::fault::node::NodeTarget;
use lockcheck::fault::proxy::Mode;
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

const DELAY: Duration = Duration::from_millis(200);

/// The DNAT rules in `ns`'s nat table.
fn redirects(ns: &str) -> usize {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "iptables", "-t", "nat", "-S", "OUTPUT"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .matches("-j DNAT")
        .count()
}

#[tokio::test]
async fn slow_raft_links_slow_every_write_and_read_and_heal_back() {
    let dir = tempfile::tempdir().unwrap();
    let id = netns::run_id(dir.path());
    let spec = ClusterSpec {
        network: NetworkKind::Namespaces,
        on_network: Some(proxy_node_links(dir.path().to_path_buf(), 1)),
        ..ClusterSpec::new(BackendKind::Etcd, dir.path())
    };
    let c: Mutex<Box<dyn Cluster>> = Mutex::new(Box::new(LocalCluster::start(spec).await.unwrap()));
    let endpoints = c.lock().await.endpoints();
    for n in ["n1", "n2", "n3"] {
        // One per peer: etcd has one peer port.
        assert_eq!(redirects(&netns::namespace(&id, n)), 2, "{n}");
    }
    let addr_of = |n: &str| endpoints[n[1..].parse::<usize>().unwrap() - 1].clone();
    let leader = leader_where(&c, Duration::from_secs(10), |_| true)
        .await
        .expect("a leader");
    let before = put_get(&addr_of(&leader)).await;

    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut slow = NodeLatency::new(
        NodeShape::All,
        Mode::Latency {
            delay: DELAY,
            jitter: Duration::from_millis(20),
        },
    );
    let value = slow
        .start(&mut scene(&c, &mut rng))
        .await
        .unwrap()
        .expect("links to slow");
    assert_eq!(value["between"], "nodes", "{value}");
    assert_eq!(value["delay_ms"], 200, "{value}");
    assert_eq!(value["jitter_ms"], 20, "{value}");
    assert_eq!(value["links"].as_array().unwrap().len(), 6, "{value}");
    let old = leader_where(&c, Duration::from_secs(10), |_| true)
        .await
        .expect("a leader under latency");
    let during = put_get(&addr_of(&old)).await;

    // Leader election under the latency: the leader killed, the two others
    // elect one of themselves over the slow links.
    c.lock().await.kill(&old).await.unwrap();
    let killed_at = Instant::now();
    let new = leader_where(&c, Duration::from_secs(15), |l| l != old)
        .await
        .unwrap_or_else(|| panic!("no leader after {old} was killed under latency"));
    let elected = killed_at.elapsed();
    c.lock().await.restart(&old).await.unwrap();

    let value = slow.stop(&mut scene(&c, &mut rng)).await.unwrap();
    assert_eq!(value["links"].as_array().unwrap().len(), 6, "{value}");
    let leader = leader_where(&c, Duration::from_secs(10), |_| true)
        .await
        .expect("a leader after the heal");
    let after = put_get(&addr_of(&leader)).await;
    eprintln!(
        "put + linearizable get on the leader: {} ms before, {} ms with {} ms each way on every raft link, {} ms after the heal; {new} elected {:.2} s after {old} was killed under the latency",
        before.as_millis(),
        during.as_millis(),
        DELAY.as_millis(),
        after.as_millis(),
        elected.as_secs_f64()
    );
    assert_slowed_then_healed(before, during, after);
    drop(slow);
    c.lock().await.stop().await;
    assert_network_gone(&id);
    drop(c);
}

#[tokio::test]
async fn a_partition_still_cuts_the_links_that_go_through_the_proxies() {
    let dir = tempfile::tempdir().unwrap();
    let id = netns::run_id(dir.path());
    let spec = ClusterSpec {
        network: NetworkKind::Namespaces,
        on_network: Some(proxy_node_links(dir.path().to_path_buf(), 1)),
        ..ClusterSpec::new(BackendKind::Etcd, dir.path())
    };
    let c: Mutex<Box<dyn Cluster>> = Mutex::new(Box::new(LocalCluster::start(spec).await.unwrap()));
    let endpoints = c.lock().await.endpoints();
    let addr_of = |n: &str| endpoints[n[1..].parse::<usize>().unwrap() - 1].clone();
    let old = leader_where(&c, Duration::from_secs(10), |_| true)
        .await
        .expect("a leader");
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    // Slowed and cut at once: the two faults of a workload may overlap.
    let mut slow = NodeLatency::new(
        NodeShape::All,
        Mode::Latency {
            delay: Duration::from_millis(50),
            jitter: Duration::ZERO,
        },
    );
    slow.start(&mut scene(&c, &mut rng)).await.unwrap();
    let mut cut = NodePartition::new(NodeShape::Isolate(NodeTarget::Primary), Cut::Blackhole);
    let value = cut
        .start(&mut scene(&c, &mut rng))
        .await
        .unwrap()
        .expect("the leader to isolate");
    assert_eq!(value["targets"][0], old.as_str(), "{value}");
    // Were the proxied connections not cut, the leader would keep its followers.
    let new = leader_where(&c, Duration::from_secs(10), |l| l != old)
        .await
        .unwrap_or_else(|| panic!("{old} isolated through the proxies, and no one replaced it"));
    assert!(
        !grants_lease(&addr_of(&old)).await,
        "the isolated {old} granted a lease without a quorum"
    );
    assert!(grants_lease(&addr_of(&new)).await, "the majority serves");
    cut.stop(&mut scene(&c, &mut rng)).await.unwrap();
    slow.stop(&mut scene(&c, &mut rng)).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !grants_lease(&addr_of(&old)).await {
        assert!(
            Instant::now() < deadline,
            "{old} never rejoined after the heal"
        );
    }
    drop((cut, slow));
    c.lock().await.stop().await;
    assert_network_gone(&id);
    drop(c);
}

/// Runs `workload` (with a latency-nodes fault from 1 s, for 4 s) for 5 s: the
/// history has the latency between nodes and its heal, the verdict is valid,
/// and nothing of the run is left.
fn slow_peers_run_is_valid_and_leaves_nothing_behind(workload: &Path) {
    let r = run(workload, &["--time-limit", "5"]);
    let dir = r.run_dir();
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let slowed: Vec<&str> = history
        .lines()
        .filter(|l| l.contains("\"latency\"") && l.contains("\"between\":\"nodes\""))
        .collect();
    assert!(
        !slowed.is_empty(),
        "no latency between nodes in the history:\n{history}"
    );
    assert!(
        slowed.iter().all(|l| l.contains("\"delay_ms\":")),
        "{slowed:?}"
    );
    assert!(
        history.lines().filter(|l| l.contains("\"heal\"")).count() >= slowed.len(),
        "every latency healed:\n{history}"
    );
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    assert_network_gone(&netns::run_id(&dir));
    r.assert_nothing_left();
}

#[test]
fn a_run_with_slow_raft_links_is_valid_and_leaves_nothing_behind() {
    slow_peers_run_is_valid_and_leaves_nothing_behind(&workload("etcd-slow-peers.toml"));
}

/// ZooKeeper's quorum (2888) and election (3888) connections both go through
/// the proxies from the start: the ensemble forms, serves and stays safe.
#[test]
fn a_zookeeper_ensemble_forms_and_serves_through_slow_peer_links() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(workload("etcd-slow-peers.toml"))
        .unwrap()
        .replace("kind = \"etcd\"", "kind = \"zookeeper\"");
    let zk = write_workload(dir.path(), "zookeeper-slow-peers.toml", &text);
    slow_peers_run_is_valid_and_leaves_nothing_behind(&zk);
}

/// Starts `lockcheck run` on etcd-slow-peers and returns once its first latency
/// between nodes is in force (every proxied raft link journaled as slowed): the
/// controller, and the run directory.
fn run_until_links_are_slow(results: &Path) -> (std::process::Child, PathBuf) {
    run_until(
        &workload("etcd-slow-peers.toml"),
        results,
        &[],
        "no latency between nodes",
        Duration::from_secs(30),
        |dir| {
            let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap_or_default();
            (journal.matches("\"effect\":\"link\"").count() == 6).then(|| dir.to_path_buf())
        },
    )
}

#[test]
fn sigterm_under_latency_between_nodes_removes_it_all() {
    let results = tempfile::tempdir().unwrap();
    let (mut controller, dir) = run_until_links_are_slow(results.path());
    let id = netns::run_id(&dir);
    end(&mut controller, Signal::SIGTERM);
    assert_network_gone(&id);
    assert_processes_gone(results.path());
}

#[test]
fn recover_removes_the_redirected_namespaces_a_killed_controller_left() {
    let results = tempfile::tempdir().unwrap();
    let (mut controller, dir) = run_until_links_are_slow(results.path());
    end(&mut controller, Signal::SIGKILL); // no Drop runs
    let id = netns::run_id(&dir);
    let redirected: usize = ["n1", "n2", "n3"]
        .iter()
        .map(|n| redirects(&netns::namespace(&id, n)))
        .sum();
    assert_eq!(redirected, 6, "the killed run left its redirects");
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
    assert!(
        report["undone"]
            .to_string()
            .contains("removed 4 namespace(s)"),
        "{report}"
    );
    assert_network_gone(&id);
    assert_processes_gone(results.path());
}
