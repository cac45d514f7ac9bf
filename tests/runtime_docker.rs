//! The docker runtime on this machine's Docker Engine: the Redis and etcd pause
//! workloads run with each server node in a container (the host image, built once
//! per test binary, runs this machine's servers), the unfenced ones are flagged, the
//! fenced ones safe, and nothing of a run is left afterwards: no container, network
//! or volume labelled with it, no process. A controller killed with -9 leaves its
//! containers to `lockcheck recover`, which removes them. The other services
//! (ZooKeeper, PostgreSQL, MariaDB, NATS) give in containers the verdicts they
//! give as local processes; a wiped etcd member comes back in a container made
//! anew and rejoins as a new member; and `doctor` says which images are here.

mod docker_support;
mod run_support;
use docker_support::*;
use lockcheck::history::read_jsonl;
use run_support::*;
use std::time::Duration;

/// An unfenced pause workload under docker: flagged, each of `nodes` left a log
/// (collected from its container) that says `says`, nothing of the run left.
fn flagged_in_docker(workload_name: &str, nodes: &[&str], says: &str) {
    let r = docker_run(workload_name);
    for n in nodes {
        let log = std::fs::read_to_string(r.run_dir().join(format!("nodes/{n}.log"))).unwrap();
        assert!(log.contains(says), "{n}: {log}");
    }
    r.assert_flagged(&["double-holder", "stale-write-accepted"]);
    assert_nothing_of_the_run(&r);
}

fn assert_safe(r: &Finished) {
    r.assert_valid();
    assert_nothing_of_the_run(r);
}

#[test]
fn redis_pause_in_docker_is_flagged() {
    flagged_in_docker(
        "redis-pause-unfenced.toml",
        &["n1"],
        "Ready to accept connections",
    );
}

#[test]
fn redis_fenced_in_docker_is_safe() {
    let r = docker_run("redis-pause-fenced.toml");
    // The file says nothing of docker: the verdict records where the run ran
    // (--runtime, --image), so that shrink and replay rerun it there.
    assert_eq!(r.json["runtime"], "docker", "{}", r.json);
    assert_eq!(r.json["image"], IMAGE, "{}", r.json);
    assert_safe(&r);
}

#[test]
fn etcd_pause_in_docker_is_flagged() {
    flagged_in_docker("etcd-pause-unfenced.toml", &["n1", "n2", "n3"], "etcd");
}

#[test]
fn etcd_fenced_in_docker_is_safe() {
    assert_safe(&docker_run("etcd-pause-fenced.toml"));
}

#[test]
fn a_redis_container_killed_and_restarted_hands_the_lock_out_again() {
    let r = docker_run("redis-kill-restart.toml");
    r.assert_flagged(&["duplicate-token"]);
    let history = lockcheck::history::read_jsonl(&r.run_dir().join("history.jsonl")).unwrap();
    assert!(history.ops.iter().any(|o| o.f == "kill"));
    assert!(history.ops.iter().any(|o| o.f == "start"), "restarted");
    assert_nothing_of_the_run(&r);
}

#[test]
fn a_clock_jump_reaches_redis_inside_its_containers() {
    // The interposer and the clock files are in the run directory, which every
    // container mounts at its own path.
    let r = docker_run("redlock-clock-jump.toml");
    r.assert_flagged(&["double-holder"]);
    let skew = r.first_op("clock-skew");
    assert!(skew.value.get("unreachable").is_none(), "{}", skew.value);
    assert_nothing_of_the_run(&r);
}

#[test]
fn the_etcd_leader_container_is_paused_and_resumed() {
    image();
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("etcd-pause-leader.toml");
    std::fs::write(
        &w,
        r#"
duration = "5s"
resource = "fenced"
allow = ["double-holder"]
[backend]
kind = "etcd"
lease = "2s"
acquire_timeout = "500ms"
[clients]
count = 2
[critical_section]
hold = "300ms"
writes = 2
[[faults]]
kind = "pause-node"
nodes = "primary"
duration = "1500ms"
after = "1s"
"#,
    )
    .unwrap();
    let r = run(&w, &["--runtime", "docker", "--image", IMAGE]);
    // A mechanics test: see assert_valid_faults_started for the etcd leader.
    r.assert_valid_faults_started();
    let pause = r.first_op("pause");
    assert_eq!(pause.value["method"], "sigstop", "{}", pause.value);
    assert_eq!(pause.value["targets"].as_array().map(Vec::len), Some(1));
    r.first_op("resume"); // fails the test if the leader was never resumed
    assert_nothing_of_the_run(&r);
}

#[test]
fn an_image_that_is_not_here_is_an_environment_problem() {
    let results = tempfile::tempdir().unwrap();
    let out = lockcheck()
        .arg("run")
        .arg(workload("redis-pause-unfenced.toml"))
        .args([
            "--runtime",
            "docker",
            "--image",
            "lockcheck/no-such-image:none",
        ])
        .arg("--results")
        .arg(results.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("lockcheck image build"), "{stderr}");
}

#[test]
fn recover_removes_the_containers_of_a_controller_killed_with_sigkill() {
    image();
    let results = tempfile::tempdir().unwrap();
    // Until the run's container is up.
    let (mut controller, (dir, run)) = run_until(
        &workload("redis-pause-unfenced.toml"),
        results.path(),
        &["--runtime", "docker", "--image", IMAGE, "--json"],
        "the run never started",
        Duration::from_secs(20),
        |dir| {
            std::fs::read_to_string(dir.join("journal.jsonl"))
                .ok()
                .filter(|j| j.contains("\"client-0\""))
                .map(|_| (dir.to_path_buf(), run_id(dir)))
        },
    );
    assert_eq!(labelled("container", &run).len(), 1);
    end(&mut controller, nix::sys::signal::Signal::SIGKILL);
    assert_eq!(
        labelled("container", &run).len(),
        1,
        "the container outlives -9"
    );
    let out = lockcheck().arg("recover").arg(&dir).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("removed 1 containers, 1 networks"), "{said}");
    for what in ["container", "network", "volume"] {
        assert!(labelled(what, &run).is_empty(), "{what}s of {run} left");
    }
    let again = lockcheck().arg("recover").arg(&dir).output().unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing left to undo"));
    assert!(leftovers(results.path()).is_empty());
}

#[test]
fn zookeeper_in_docker_is_flagged() {
    let r = docker_run("zookeeper-pause-unfenced.toml");
    for n in ["n1", "n2", "n3"] {
        let log = std::fs::read_to_string(r.run_dir().join(format!("nodes/{n}.log"))).unwrap();
        assert!(log.contains("QuorumPeer"), "{n}: {log}");
    }
    assert_flagged(&r, "stale-write-accepted");
}

#[test]
fn postgres_lease_in_docker_is_flagged_and_its_server_is_not_root() {
    let r = docker_run("postgres-lease-pause-unfenced.toml");
    // initdb ran in the container, as the account the data directory was given.
    let log = std::fs::read_to_string(r.run_dir().join("nodes/n1.log")).unwrap();
    assert!(log.contains("will be owned by user \"postgres\""), "{log}");
    assert!(log.contains("database system is ready"), "{log}");
    assert_flagged(&r, "stale-write-accepted");
}

#[test]
fn postgres_lease_fenced_in_docker_is_safe() {
    assert_safe(&docker_run("postgres-lease-pause-fenced.toml"));
}

#[test]
fn mariadb_in_docker_is_flagged() {
    let r = docker_run("mariadb-pause.toml");
    assert_flagged(&r, "interleaved-writes");
}

#[test]
fn nats_in_docker_is_flagged() {
    let r = docker_run("nats-pause-unfenced.toml");
    assert_flagged(&r, "stale-write-accepted");
}

#[test]
fn a_wiped_etcd_member_rejoins_from_a_new_container() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("etcd-wipe.toml");
    std::fs::write(
        &w,
        r#"
duration = "5s"
resource = "fenced"
allow = ["double-holder"]
[backend]
kind = "etcd"
lease = "2s"
acquire_timeout = "500ms"
[clients]
count = 2
[critical_section]
hold = "300ms"
writes = 2
[[faults]]
kind = "kill"
nodes = "n2"
wipe = true
duration = "1s"
after = "1s"
"#,
    )
    .unwrap();
    let r = docker_run_file(&w);
    // What this test holds to is the member's second life, not the lock's.
    r.assert_valid_faults_started();
    let history = read_jsonl(&r.run_dir().join("history.jsonl")).unwrap();
    let kill = history.ops.iter().find(|o| o.f == "kill").expect("a kill");
    assert_eq!(kill.value["wipe"], true, "{}", kill.value);
    assert!(history.ops.iter().any(|o| o.f == "start"), "restarted");
    // Both lives in the node's log (its first container's, then the new one's):
    // a member that founded the cluster, then another member, a new id, in the
    // same cluster.
    let log = std::fs::read_to_string(r.run_dir().join("nodes/n2.log")).unwrap();
    let lives: Vec<(&str, &str)> = log
        .lines()
        .filter_map(|l| {
            let rest = l.split("etcdserver: starting member ").nth(1)?;
            let (member, cluster) = rest.split_once(" in cluster ")?;
            Some((member, cluster.trim()))
        })
        .collect();
    assert_eq!(lives.len(), 2, "{log}");
    assert_ne!(lives[0].0, lives[1].0, "a new member id: {lives:?}");
    assert_eq!(lives[0].1, lives[1].1, "the same cluster: {lives:?}");
    assert_nothing_of_the_run(&r);
}

#[test]
fn doctor_says_which_images_are_here_and_whether_local_nodes_can_be_frozen() {
    image();
    let out = lockcheck().args(["doctor", "--json"]).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let item = |name: &str| {
        json["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in {json}"))
            .clone()
    };
    let docker = item("docker");
    let detail = docker["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!(
            "{IMAGE} (redis-sentinel, postgres-advisory, postgres-lease, nats, zookeeper, mariadb): here"
        )),
        "{detail}"
    );
    assert!(!detail.contains("patroni"), "local runtime only: {detail}");
    assert!(detail.contains("redis (redis, redlock)"), "{detail}");
    let freezer = item("freezer");
    assert_eq!(
        freezer["ok"],
        lockcheck::cluster::freezer::unavailable().is_none(),
        "{freezer}"
    );
}

#[test]
fn a_docker_run_is_replayed_in_docker() {
    // The workload file says nothing of docker: --runtime and --image chose it.
    let first = docker_run("redis-pause-unfenced.toml");
    first.assert_flagged(&["double-holder"]);
    let (_, plan) = first.replayed_twice();
    let replay = first.run_dir().join("replay");
    assert_eq!(plan["runtime"].as_str(), Some("docker"), "{plan}");
    assert_eq!(plan["backend"]["image"].as_str(), Some(IMAGE), "{plan}");
    // Every replay ran its servers in containers, and left none behind.
    let mut replays = 0;
    for run in std::fs::read_dir(replay.join("runs")).unwrap() {
        let run = run.unwrap();
        // `latest` is a link to one of them.
        if !run.file_type().unwrap().is_dir() {
            continue;
        }
        let dir = run.path();
        let Ok(verdict) = std::fs::read(dir.join("verdict.json")) else {
            continue;
        };
        let verdict: serde_json::Value = serde_json::from_slice(&verdict).unwrap();
        assert_eq!(verdict["runtime"], "docker", "{}", dir.display());
        let id = run_id(&dir);
        assert_eq!(labelled("container", &id), Vec::<String>::new());
        replays += 1;
    }
    assert_eq!(replays, 2, "two replays' directories");
    assert_nothing_of_the_run(&first);
}
