//! The node faults of the ssh runtime that need more than a signal, against
//! hosts the test makes (`ssh_support`): the Redlock clock-jump workload
//! flagged as under the local runtime, its nodes' clocks skewed through the
//! interposer copied to their hosts; etcd's raft links between hosts slowed
//! through this machine's proxies (every write and read paying for it, back to
//! normal after the heal), and a clock fault on etcd reported out of reach with
//! the local runtime's reason; a killed etcd member wiped on its host and
//! re-admitted empty. After each, nothing on any host: no server, directory,
//! rule, or page.

mod netns_support;
mod run_support;
mod ssh_support;

use lockcheck::backend::BackendKind;
use lockcheck::cluster::{Cluster, ClusterSpec, SshCluster, SshSpec};
use lockcheck::fault::clock::{self, ClockChange, ClockFault, Clocks};
use lockcheck::fault::kill::KillNodes;
use lockcheck::fault::netns::{proxy_node_links_on_hosts, NodeLatency, NodeShape};
use lockcheck::fault::node::NodeTarget;
use lockcheck::fault::proxy::Mode;
use lockcheck::fault::Fault;
use lockcheck::journal::{self, Effect};
use netns_support::{assert_slowed_then_healed, leader_where, member, put_get, scene};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use ssh_support::{run_on, shipped_on, Hosts};
use std::path::Path;
use std::time::Duration;
use tokio::sync::Mutex;

/// An etcd cluster of one member per host, `adjust`ed.
async fn etcd_on(
    hosts: &Hosts,
    dir: &Path,
    adjust: impl FnOnce(ClusterSpec) -> ClusterSpec,
) -> Mutex<Box<dyn Cluster>> {
    let spec = adjust(ClusterSpec {
        nodes: hosts.names.len(),
        ..ClusterSpec::new(BackendKind::Etcd, dir)
    });
    let ssh = SshSpec {
        hosts: hosts.names.clone(),
        ssh_config: Some(hosts.ssh_config.clone()),
        program: None,
        remote_dir: hosts.remote_dir.clone(),
        manage: true,
    };
    Mutex::new(Box::new(SshCluster::start(spec, ssh).await.unwrap()))
}

/// Node `node`'s directory on its host (under the hosts' `remote_dir`).
fn home_of(hosts: &Hosts, node: &str) -> std::path::PathBuf {
    std::fs::read_dir(&hosts.remote_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(&format!("-{node}")))
        .unwrap_or_else(|| panic!("no directory of {node} on its host"))
}

/// The id of the member at `addr`, as it says itself.
async fn member_id(addr: &str) -> u64 {
    let mut c = member(addr).await.expect("a client of the member");
    c.status().await.unwrap().header().unwrap().member_id()
}

#[tokio::test]
async fn a_killed_etcd_member_is_wiped_on_its_host_and_readmitted_empty() {
    let hosts = Hosts::new(3);
    let dir = tempfile::tempdir().unwrap();
    let c = etcd_on(&hosts, dir.path(), |s| s).await;
    let n3 = c.lock().await.endpoints()[2].clone();
    let data = home_of(&hosts, "n3").join("data");
    let planted = data.join("planted");
    hosts.ssh("h3", &format!("touch {}", planted.display()));
    let before = member_id(&n3).await;
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut kill = KillNodes::new(NodeTarget::Node("n3".into()), true);
    let value = kill.start(&mut scene(&c, &mut rng)).await.unwrap().unwrap();
    assert_eq!(value["wipe"], true, "{value}");
    let there = |p: &Path| {
        hosts.ssh(
            "h3",
            &format!("[ -e {} ] && echo yes || echo no", p.display()),
        )
    };
    assert_eq!(there(&data).trim(), "no", "wiped on its host");
    kill.stop(&mut scene(&c, &mut rng)).await.unwrap();
    assert_eq!(there(&planted).trim(), "no");
    assert_eq!(
        there(&data.join("member")).trim(),
        "yes",
        "a member made anew"
    );
    let after = member_id(&n3).await;
    assert_ne!(before, after, "re-admitted as a new member");
    // It serves as one of the cluster: what it writes, the others read.
    let mut client = member(&n3).await.unwrap();
    client.put("after-wipe", "yes", None).await.unwrap();
    let n1 = c.lock().await.endpoints()[0].clone();
    let got = member(&n1)
        .await
        .unwrap()
        .get("after-wipe", None)
        .await
        .unwrap();
    assert_eq!(got.kvs()[0].value_str().unwrap(), "yes");
    c.lock().await.stop().await;
    hosts.assert_clean();
    assert!(journal::pending(dir.path()).unwrap().effects.is_empty());
}

/// The DNAT rules in the nat table of host `name`.
fn redirects(hosts: &Hosts, name: &str) -> usize {
    hosts
        .ssh(name, "iptables -w -t nat -S")
        .matches("-j DNAT")
        .count()
}

#[tokio::test]
async fn slow_raft_links_between_hosts_slow_every_write_and_read_and_heal_back() {
    const DELAY: Duration = Duration::from_millis(200);
    let hosts = Hosts::new(3);
    let dir = tempfile::tempdir().unwrap();
    let c = etcd_on(&hosts, dir.path(), |s| ClusterSpec {
        on_hosts: Some(proxy_node_links_on_hosts(dir.path().to_path_buf(), 1)),
        prepare_on_host: Some(clock::host_hook()),
        ..s
    })
    .await;
    for name in &hosts.names {
        // One per peer: etcd has one peer port.
        assert_eq!(redirects(&hosts, name), 2, "{name}");
    }
    let endpoints = c.lock().await.endpoints();
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
    assert_eq!(value["links"].as_array().unwrap().len(), 6, "{value}");
    let leader = leader_where(&c, Duration::from_secs(10), |_| true)
        .await
        .expect("a leader under latency");
    let during = put_get(&addr_of(&leader)).await;
    slow.stop(&mut scene(&c, &mut rng)).await.unwrap();
    let leader = leader_where(&c, Duration::from_secs(10), |_| true)
        .await
        .expect("a leader after the heal");
    let after = put_get(&addr_of(&leader)).await;
    eprintln!(
        "put + linearizable get on the leader over ssh: {} ms before, {} ms with {} ms each way on every raft link, {} ms after the heal",
        before.as_millis(),
        during.as_millis(),
        DELAY.as_millis(),
        after.as_millis()
    );
    assert_slowed_then_healed(before, during, after);

    // etcd reads the vDSO: a clock fault says it did not reach it, in the
    // local runtime's words, and skews nothing.
    let mut skew = ClockFault::new(
        Clocks::Nodes(NodeTarget::All),
        ClockChange::Jump {
            offset_ns: 5_000_000_000,
        },
    );
    let value = skew.start(&mut scene(&c, &mut rng)).await.unwrap().unwrap();
    assert!(value["targets"].as_array().unwrap().is_empty(), "{value}");
    let why = value["unreachable"][0]["why"].as_str().unwrap();
    assert_eq!(
        why,
        "unreachable: etcd is a Go binary reading the vDSO (it never calls libc's clock functions)",
        "{value}"
    );
    skew.stop(&mut scene(&c, &mut rng)).await.unwrap();
    let pending = journal::pending(dir.path()).unwrap().effects;
    assert!(
        pending
            .iter()
            .filter(|(_, e)| matches!(e, Effect::RemoteChain { table, .. } if table == "nat"))
            .count()
            == 3,
        "the redirects are journaled with their hosts: {pending:?}"
    );
    c.lock().await.stop().await;
    hosts.assert_no_chains();
    hosts.assert_clean();
    assert!(journal::pending(dir.path()).unwrap().effects.is_empty());
}

#[test]
fn the_redlock_clock_jump_is_flagged_over_ssh_as_locally() {
    let hosts = Hosts::new(5);
    let w = shipped_on(&hosts, "redlock-clock-jump.toml", 5);
    let f = run_on(&hosts, &w, &[]);
    f.assert_flagged(&["double-holder"]);
    let skew = f.first_op("clock-skew");
    assert_eq!(skew.value["offset_ms"], 20_000, "{}", skew.value);
    assert_eq!(
        skew.value["targets"].as_array().unwrap().len(),
        3,
        "a majority skewed, none out of reach: {}",
        skew.value
    );
    assert!(skew.value.get("unreachable").is_none(), "{}", skew.value);
    let journal = std::fs::read_to_string(f.run_dir().join("journal.jsonl")).unwrap();
    assert!(journal.contains("\"remote-clock-skew\""), "{journal}");
    let left: Vec<_> = journal::pending(&f.run_dir())
        .unwrap()
        .effects
        .into_iter()
        .filter(|(_, e)| !matches!(e, Effect::Process(_)))
        .collect();
    assert!(
        left.is_empty(),
        "a clean end leaves nothing on the hosts: {left:?}"
    );
    hosts.assert_clean();
}
