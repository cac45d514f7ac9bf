//! The ssh runtime against hosts the test makes (network namespaces, each with
//! its own address and sshd, `ssh_support`): the Redis and etcd pause workloads
//! flagged as under the local runtime, with the servers started on the hosts
//! over SSH and their logs brought back; an etcd leader stopped with SIGSTOP on
//! its host and killed and restarted there; `lockcheck recover` after a
//! controller killed with -9 reaching the hosts, naming one it cannot reach and
//! failing, then undoing it all once it can; and the faults the runtime does
//! not apply yet refused when the workload is read.

mod run_support;
mod ssh_support;

use lockcheck::journal::{self, Effect};
use run_support::{workload, write_workload};
use ssh_support::{assert_nothing_left_on_hosts, run_on, shipped_on, wait_journaled, Hosts};
use std::time::Duration;

#[test]
fn the_redis_and_etcd_pause_workloads_are_flagged_over_ssh() {
    let hosts = Hosts::new(3);
    let redis = shipped_on(&hosts, "redis-pause-unfenced.toml", 1);
    let etcd = shipped_on(&hosts, "etcd-pause-unfenced.toml", 3);
    // Both at once: their ports differ, and the test takes half the time.
    let (r, e) = std::thread::scope(|s| {
        let r = s.spawn(|| run_on(&hosts, &redis, &[]));
        let e = s.spawn(|| run_on(&hosts, &etcd, &[]));
        (r.join().unwrap(), e.join().unwrap())
    });
    for (f, nodes, says) in [
        (&r, &["n1"][..], "Ready to accept connections"),
        (&e, &["n1", "n2", "n3"][..], "etcd"),
    ] {
        f.assert_flagged(&["double-holder", "stale-write-accepted"]);
        // The logs came back from the hosts.
        for n in nodes {
            let log = std::fs::read_to_string(f.run_dir().join(format!("nodes/{n}.log"))).unwrap();
            assert!(log.contains(says), "{n}: {log}");
        }
        // The clients dialled the hosts' addresses.
        let w = std::fs::read_to_string(f.run_dir().join("workload.toml")).unwrap();
        assert!(w.contains("runtime = \"ssh\""), "{w}");
        assert_nothing_left_on_hosts(&f.run_dir());
    }
    // Replayed, it runs on the hosts again.
    let (stdout, plan) = r.replayed_twice_by(hosts.lockcheck());
    assert!(stdout.starts_with("REPRODUCED: "), "{stdout}");
    assert_eq!(plan["runtime"].as_str(), Some("ssh"), "{plan}");
    assert!(plan["backend"].get("hosts").is_some(), "{plan}");
    hosts.assert_clean();
}

/// What an etcd member logs as it starts.
const STARTS: &str = "etcd Version";

#[test]
fn an_etcd_leader_is_paused_and_killed_on_its_host() {
    let hosts = Hosts::new(3);
    let text = hosts.workload(
        r#"duration = "7s"
seed = 3
resource = "fenced"

[backend]
kind = "etcd"
lease = "2s"
acquire_timeout = "1s"

[clients]
count = 2

[critical_section]
hold = "200ms"
writes = 2
think = "50ms"

[[faults]]
kind = "pause-node"
nodes = "primary"
duration = "1500ms"
after = "1s"

[[faults]]
kind = "kill"
nodes = "primary"
duration = "500ms"
after = "4s"
"#,
        3,
    );
    let w = write_workload(hosts.dir.path(), "etcd-leader-ssh.toml", &text);
    let f = run_on(&hosts, &w, &[]);
    f.assert_valid_faults_started();
    let pause = f.first_op("pause");
    let value = &pause.value;
    assert_eq!(value["method"], "sigstop", "{value}");
    let target = value["targets"][0].as_str().unwrap().to_string();
    let resume = f.first_op("resume");
    assert_eq!(resume.value["targets"][0], target.as_str());
    let kill = f.first_op("kill");
    let start = f.first_op("start");
    assert!(kill.time < start.time);
    // The killed member came back on its host and wrote on in its log.
    let killed = kill.value["targets"][0].as_str().unwrap().to_string();
    let log = std::fs::read_to_string(f.run_dir().join(format!("nodes/{killed}.log"))).unwrap();
    assert!(
        log.matches(STARTS).count() >= 2,
        "{killed} started twice: {log}"
    );
    hosts.assert_clean();
}

#[test]
fn etcd_partitions_over_ssh_as_locally() {
    let hosts = Hosts::new(6);
    // The holder cut off from its member (the proxy on this machine), on h1..h3.
    let holder_text = std::fs::read_to_string(workload("etcd-partition-leader.toml")).unwrap();
    let holder = write_workload(
        hosts.dir.path(),
        "holder.toml",
        &hosts.workload_on(&holder_text, &hosts.names[..3]),
    );
    // The leader cut off from its peers, by chains on h4..h6 (no namespaces of
    // lockcheck's: each member is a host of its own).
    let leader_text = std::fs::read_to_string(workload("etcd-partition-isolate-leader.toml"))
        .unwrap()
        .replace("network = \"namespaces\"\n", "");
    let leader = write_workload(
        hosts.dir.path(),
        "leader.toml",
        &hosts.workload_on(&leader_text, &hosts.names[3..]),
    );
    let (h, l) = std::thread::scope(|s| {
        let h = s.spawn(|| run_on(&hosts, &holder, &[]));
        // Clients that talk to the cut-off leader wait on it, and an acquire in
        // doubt keeps the key until its lease runs out: whether a grant comes
        // after the cut is etcd's business, not what this test holds to.
        let l = s.spawn(|| run_on(&hosts, &leader, &["--allow-missed-faults"]));
        (h.join().unwrap(), l.join().unwrap())
    });
    h.assert_flagged(&["double-holder"]);
    l.assert_valid();
    let cut = l.first_op("partition");
    assert_eq!(cut.value["between"], "nodes", "{}", cut.value);
    assert_eq!(
        cut.value["links"].as_array().unwrap().len(),
        4,
        "{}",
        cut.value
    );
    let journal = std::fs::read_to_string(l.run_dir().join("journal.jsonl")).unwrap();
    assert!(journal.contains("\"remote-chain\""), "{journal}");
    // The leader was cut off: acquires failed or went unanswered during the cuts.
    let history = lockcheck::history::read_jsonl(&l.run_dir().join("history.jsonl")).unwrap();
    let unsure = history
        .ops
        .iter()
        .filter(|o| {
            o.f == "acquire"
                && o.kind != lockcheck::history::OpType::Ok
                && o.kind != lockcheck::history::OpType::Invoke
        })
        .count();
    assert!(unsure > 0, "no acquire failed during the cuts");
    hosts.assert_no_chains();
    hosts.assert_clean();
}

#[test]
fn recover_reaches_the_hosts_and_names_one_it_cannot() {
    let mut hosts = Hosts::new(2);
    let text = hosts.workload(
        r#"duration = "60s"
seed = 1
resource = "unfenced"

[backend]
kind = "redlock"
lease = "1s"

[clients]
count = 1

[critical_section]
hold = "100ms"
writes = 1
think = "50ms"

[[faults]]
kind = "pause-node"
nodes = "n1"
duration = "50s"
after = "500ms"

[[faults]]
kind = "partition-nodes"
shape = "isolate"
nodes = "n2"
duration = "50s"
after = "500ms"

[[faults]]
kind = "clock"
nodes = "n2"
offset = "+30s"
duration = "50s"
after = "500ms"
"#,
        2,
    );
    let w = write_workload(hosts.dir.path(), "redlock-stopped-cut-ssh.toml", &text);
    let results = tempfile::tempdir().unwrap();
    let mut controller = hosts.spawn_run(&w, results.path());
    let (run_dir, pid) = wait_journaled(
        "the server stopped on h1, the links of h2 cut and its clock skewed, journaled",
        Duration::from_secs(20),
        results.path(),
        |pending| {
            let cut = pending
                .effects
                .iter()
                .any(|(_, e)| matches!(e, Effect::RemoteChain { host, .. } if host.name == "h2"));
            let skewed = pending.effects.iter().any(
                |(_, e)| matches!(e, Effect::RemoteClockSkew { host, .. } if host.name == "h2"),
            );
            let stopped = pending.effects.iter().find_map(|(_, e)| match e {
                Effect::RemoteStopped { host, proc } if host.name == "h1" => {
                    journal::is_stopped(proc.pid).then_some(proc.pid)
                }
                _ => None,
            });
            stopped.filter(|_| cut && skewed && !hosts.chains("h2").is_empty())
        },
    );
    controller.kill().unwrap(); // SIGKILL: nothing of it runs on
    controller.wait().unwrap();
    assert!(journal::is_stopped(pid), "the server is left stopped");
    assert!(!hosts.chains("h2").is_empty(), "the cut is left in force");
    // The page on h2, as its writer there finds it (changing no field).
    let page = journal::pending(&run_dir)
        .unwrap()
        .effects
        .into_iter()
        .find_map(|(_, e)| match e {
            Effect::RemoteClockSkew { file, .. } => Some(file),
            _ => None,
        })
        .unwrap();
    let writer = page.with_file_name("lockcheck-clockset");
    let held = hosts.ssh(
        "h2",
        &format!("{} {} - - - -", writer.display(), page.display()),
    );
    assert_eq!(held.trim(), "skewed", "the clock is left skewed");

    // Its host unreachable: named, and a failure.
    hosts.stop_sshd(0);
    let (code, said, stderr) = hosts.recover(&run_dir);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("host h1 is unreachable over SSH"),
        "{stderr}"
    );
    assert!(journal::is_stopped(pid), "nothing was done on h1");
    assert!(hosts.chains("h2").is_empty(), "h2, reachable, was healed");
    assert!(
        said.contains("clock of n2") && said.contains("on host h2: reset"),
        "h2's clock was reset: {said}"
    );

    // Reachable again: resumed, killed, removed; a second recover finds nothing.
    hosts.start_sshd(0);
    let (code, said, stderr) = hosts.recover(&run_dir);
    assert_eq!(
        code,
        Some(0),
        "{said}
{stderr}"
    );
    assert!(said.contains("on host h1: resumed"), "{said}");
    assert!(said.contains("on host h1: killed"), "{said}");
    hosts.assert_clean();
    hosts.assert_no_chains();
    assert!(journal::pending(&run_dir).unwrap().effects.is_empty());
}

#[test]
fn faults_the_ssh_runtime_does_not_apply_yet_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let base = "runtime = \"ssh\"\nduration = \"2s\"\n\n[backend]\nkind = \"redlock\"\nlease = \"1s\"\nhosts = [\"h1\", \"h2\"]\n\n[clients]\ncount = 1\n\n[critical_section]\nhold = \"100ms\"\nwrites = 1\n\n";
    let w = write_workload(
        dir.path(),
        "w.toml",
        &format!(
            "{base}[[faults]]\nkind = \"pause-node\"\nmethod = \"freezer\"\nduration = \"1s\"\n"
        ),
    );
    let (code, stderr) = run_support::run_refused(
        run_support::lockcheck(),
        &w,
        &["--results", dir.path().to_str().unwrap()],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("faults[0].method: the freezer is not available under the ssh runtime yet"),
        "{stderr}"
    );
    // Without hosts, the runtime says what it needs.
    let w = write_workload(
        dir.path(),
        "w.toml",
        "duration = \"2s\"\n[backend]\nkind = \"etcd\"\nlease = \"1s\"\n[clients]\ncount = 1\n[critical_section]\nhold = \"100ms\"\nwrites = 1\n",
    );
    let (code, stderr) =
        run_support::run_refused(run_support::lockcheck(), &w, &["--runtime", "ssh"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("backend.hosts: the ssh runtime needs the hosts"),
        "{stderr}"
    );
}
