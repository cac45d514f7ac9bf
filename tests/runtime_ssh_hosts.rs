//! The ssh runtime's two placements. Servers the team already runs (`manage =
//! false`): the test starts a Redis on its namespace host itself, outside
//! lockcheck, which finds it by its port, pauses it with SIGSTOP there and
//! leaves it running as it found it, at the end of a run and with `lockcheck
//! recover` after a controller killed with -9. Clients on the hosts
//! (`clients_on = "hosts"`): a worker on each host, the holder paused there,
//! flagged; nothing of them left, after a clean end and, with `lockcheck
//! recover`, after a controller killed with -9 while a client was stopped.
//! Both at once under Ctrl-C, the team's server and a client stopped: the
//! server resumed, the clients ended. What neither can do refused by name when
//! the workload is read.

mod run_support;
mod ssh_support;

use lockcheck::journal::{self, Effect};
use run_support::{workload, write_workload};
use ssh_support::{assert_nothing_left_on_hosts, run_on, wait_journaled, Hosts, Server};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A Redis of the test's own on host `i`, as a team runs it, listening on the
/// usual port at the host's address.
fn team_redis(hosts: &Hosts, i: usize) -> Server {
    let addr = hosts.addrs[i].to_string();
    let server = hosts.serve(
        i,
        "redis-server",
        &[
            "--bind",
            &addr,
            "--port",
            "6379",
            "--protected-mode",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
    );
    let at = SocketAddr::from((hosts.addrs[i], 6379));
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect_timeout(&at, Duration::from_millis(200)).is_err() {
        assert!(Instant::now() < deadline, "the team's redis did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}

/// `text` with `manage = false` in its `[backend]`, on the first `n` hosts.
fn unmanaged(hosts: &Hosts, text: &str, n: usize) -> String {
    hosts.workload(
        &text.replacen("[backend]\n", "[backend]\nmanage = false\n", 1),
        n,
    )
}

#[test]
fn a_running_redis_is_paused_on_its_host_and_left_running() {
    let hosts = Hosts::new(1);
    let mut redis = team_redis(&hosts, 0);
    let text = std::fs::read_to_string(workload("redis-pause-unfenced.toml")).unwrap()
        + "\n[[faults]]\nkind = \"pause-node\"\nnodes = \"n1\"\nduration = \"300ms\"\nafter = \"5s\"\n";
    let w = write_workload(
        hosts.dir.path(),
        "team-redis.toml",
        &unmanaged(&hosts, &text, 1),
    );
    let f = run_on(&hosts, &w, &[]);
    // Flagged as under the local runtime, on the team's own server.
    f.assert_flagged(&["double-holder", "stale-write-accepted"]);
    let journal = std::fs::read_to_string(f.run_dir().join("journal.jsonl")).unwrap();
    let stopped = format!("\"pid\":{}", redis.pid());
    assert!(
        journal.contains("\"remote-stopped\"") && journal.contains(&stopped),
        "the team's server was stopped on its host, journaled: {journal}"
    );
    assert!(
        !journal.contains("\"remote-process\""),
        "the team's server is never the run's to end: {journal}"
    );
    assert_nothing_left_on_hosts(&f.run_dir());
    redis.assert_running();
    hosts.assert_clean();
}

#[test]
fn recover_resumes_a_running_redis_it_stopped_and_leaves_it_running() {
    let hosts = Hosts::new(1);
    let mut redis = team_redis(&hosts, 0);
    let text = unmanaged(
        &hosts,
        r#"duration = "60s"
resource = "unfenced"

[backend]
kind = "redis"
lease = "1s"

[clients]
count = 1

[critical_section]
hold = "100ms"
writes = 1

[[faults]]
kind = "pause-node"
nodes = "n1"
duration = "50s"
after = "300ms"
"#,
        1,
    );
    let w = write_workload(hosts.dir.path(), "team-redis-stopped.toml", &text);
    let results = tempfile::tempdir().unwrap();
    let mut controller = hosts.spawn_run(&w, results.path());
    let (run_dir, ()) = wait_journaled(
        "the team's server stopped on h1, journaled",
        Duration::from_secs(20),
        results.path(),
        |pending| {
            let stopped = pending.effects.iter().any(|(_, e)| {
                matches!(e, Effect::RemoteStopped { proc, .. }
                    if proc.pid == redis.pid() && journal::is_stopped(proc.pid))
            });
            stopped.then_some(())
        },
    );
    controller.kill().unwrap(); // SIGKILL: nothing of it runs on
    controller.wait().unwrap();
    assert!(journal::is_stopped(redis.pid()), "left stopped by the kill");
    let (code, said, stderr) = hosts.recover(&run_dir);
    assert_eq!(
        code,
        Some(0),
        "{said}
{stderr}"
    );
    assert!(said.contains("on host h1: resumed"), "{said}");
    assert!(
        !said.contains("on host h1: killed"),
        "nothing of the team's is killed: {said}"
    );
    redis.assert_running();
    hosts.assert_clean();
    assert!(journal::pending(&run_dir).unwrap().effects.is_empty());
}

#[test]
fn what_cannot_be_done_to_running_servers_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let base = "runtime = \"ssh\"\nduration = \"2s\"\n\n[backend]\nkind = \"redis\"\nlease = \"1s\"\nhosts = [\"h1\"]\nmanage = false\n\n[clients]\ncount = 1\n\n[critical_section]\nhold = \"100ms\"\nwrites = 1\n\n";
    for (fault, says) in [
        (
            "kind = \"kill\"",
            "faults[0].kind: kill is unavailable with backend.manage = false (servers already running): lockcheck would have to start the team's server again itself",
        ),
        (
            "kind = \"clock\"\nnodes = \"n1\"\noffset = \"+5s\"",
            "faults[0].kind: clock is unavailable with backend.manage = false",
        ),
    ] {
        let w = write_workload(
            dir.path(),
            "w.toml",
            &format!("{base}[[faults]]\n{fault}\nduration = \"1s\"\n"),
        );
        let (code, stderr) = run_support::run_refused(
                run_support::lockcheck(),
                &w,
                &["--results", dir.path().to_str().unwrap()],
            );
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
    for (key, says) in [
        (
            base.replace("hosts = [\"h1\"]\n", "").replace("runtime = \"ssh\"\n", ""),
            "backend.manage: only with backend.hosts",
        ),
        (
            base.replacen("[clients]\n", "[clients]\nclients_on = \"hosts\"\n", 1)
                + "[[faults]]\nkind = \"partition\"\ntarget = \"holder\"\nduration = \"1s\"\n",
            "faults[0].kind: partition is unavailable with clients.clients_on = \"hosts\": the clients' links are cut and slowed in lockcheck's proxies on this machine",
        ),
        (
            base.replacen("[clients]\n", "[clients]\nclients_on = \"hosts\"\n", 1)
                + "[[faults]]\nkind = \"clock\"\ntarget = \"holder\"\noffset = \"+5s\"\nduration = \"1s\"\n",
            "faults[0].kind: clock is unavailable with clients.clients_on = \"hosts\": a client's clock is skewed through the interposer",
        ),
        (
            base.replace("kind = \"redis\"", "kind = \"redlock\"")
                .replace("hosts = [\"h1\"]", "hosts = [\"h1\", \"h2\"]")
                .replacen("[clients]\n", "[clients]\nclients_on = \"hosts\"\n", 1)
                + "[[faults]]\nkind = \"partition-nodes\"\nshape = \"isolate\"\nnodes = \"n1\"\nduration = \"1s\"\n",
            "faults[0].kind: partition-nodes is unavailable with clients.clients_on = \"hosts\": a node's links are cut or slowed on its host",
        ),
        (
            base.replace("hosts = [\"h1\"]\nmanage = false\n", "")
                .replace("runtime = \"ssh\"\n", "")
                .replacen("[clients]\n", "[clients]\nclients_on = \"hosts\"\n", 1),
            "clients.clients_on: \"hosts\" runs the clients on the ssh runtime's hosts: only with runtime = \"ssh\"",
        ),
    ] {
        let w = write_workload(dir.path(), "w.toml", &key);
        let (code, stderr) = run_support::run_refused(
                run_support::lockcheck(),
                &w,
                &["--results", dir.path().to_str().unwrap()],
            );
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

#[test]
fn a_host_without_the_server_fails_the_run_naming_the_host() {
    let hosts = Hosts::new(1);
    let text = unmanaged(
        &hosts,
        "duration = \"2s\"\n[backend]\nkind = \"redis\"\nlease = \"1s\"\n[clients]\ncount = 1\n[critical_section]\nhold = \"100ms\"\nwrites = 1\n",
        1,
    );
    let w = write_workload(hosts.dir.path(), "no-redis.toml", &text);
    let results = hosts.dir.path().join("results");
    let (code, stderr) = run_support::run_refused(
        hosts.lockcheck(),
        &w,
        &["--results", results.to_str().unwrap()],
    );
    assert_eq!(code, Some(5), "{stderr}");
    for says in [
        "no-redis.toml: backend.manage = false",
        "backend.hosts[0] = \"h1\" (n1)",
        "no server listens on port 6379 on host h1",
    ] {
        assert!(stderr.contains(says), "{says}: {stderr}");
    }
    hosts.assert_clean();
}

#[test]
fn clients_on_the_hosts_are_paused_there_and_leave_nothing() {
    let hosts = Hosts::new(3);
    // The shipped Redlock pause workload, its three nodes and clients on h1..h3.
    let shipped = std::fs::read_to_string(workload("redlock-pause-unfenced.toml")).unwrap();
    let text = hosts.workload(&shipped, 3).replacen(
        "[clients]\n",
        "[clients]\nclients_on = \"hosts\"\n",
        1,
    );
    let w = write_workload(hosts.dir.path(), "redlock-clients-on-hosts.toml", &text);
    let f = run_on(&hosts, &w, &[]);
    // The holder, paused on its host past its lease, wrote on waking.
    f.assert_flagged(&["double-holder"]);
    let paused = f.first_op("pause");
    assert!(
        paused.value["targets"][0]
            .as_str()
            .unwrap()
            .starts_with("client-"),
        "{}",
        paused.value
    );
    // One worker per host, round robin, each journaled with its host and ended.
    let journal = journal_effects(&f.run_dir());
    for (client, host) in [("client-0", "h1"), ("client-1", "h2"), ("client-2", "h3")] {
        assert!(
            journal.iter().any(|e| matches!(e, Effect::RemoteProcess { host: h, proc } if h.name == host && proc.name == client)),
            "{client} on {host}: {journal:?}"
        );
    }
    assert_nothing_left_on_hosts(&f.run_dir());
    // No worker, no copy of the program left on any host.
    hosts.assert_clean();
}

/// Every effect `run_dir`'s journal ever recorded.
fn journal_effects(run_dir: &std::path::Path) -> Vec<Effect> {
    std::fs::read_to_string(run_dir.join("journal.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            serde_json::from_value(v.get("do")?.clone()).ok()
        })
        .collect()
}

#[test]
fn recover_ends_the_clients_a_killed_controller_left_on_the_hosts() {
    let hosts = Hosts::new(2);
    let text = hosts.workload(
        r#"duration = "60s"
resource = "unfenced"

[backend]
kind = "redlock"
lease = "1s"

[clients]
count = 2
clients_on = "hosts"

[critical_section]
hold = "100ms"
writes = 1

[[faults]]
kind = "pause"
target = "holder"
duration = "50s"
after = "300ms"
"#,
        2,
    );
    let w = write_workload(hosts.dir.path(), "clients-left.toml", &text);
    let results = tempfile::tempdir().unwrap();
    let mut controller = hosts.spawn_run(&w, results.path());
    let (run_dir, paused) = wait_journaled(
        "a client paused on its host, journaled",
        Duration::from_secs(30),
        results.path(),
        |pending| {
            pending.effects.iter().find_map(|(_, e)| match e {
                Effect::RemoteProcess { proc, .. }
                    if proc.name.starts_with("client-") && journal::is_stopped(proc.pid) =>
                {
                    Some(proc.pid)
                }
                _ => None,
            })
        },
    );
    controller.kill().unwrap(); // SIGKILL: nothing of it runs on
    controller.wait().unwrap();
    assert!(
        journal::is_stopped(paused),
        "the paused client is left stopped"
    );
    let (code, said, stderr) = hosts.recover(&run_dir);
    assert_eq!(
        code,
        Some(0),
        "{said}
{stderr}"
    );
    assert!(said.contains(&format!("(pid {paused}) on host")), "{said}");
    // No worker, server or copy of the program left on either host.
    hosts.assert_clean();
    assert_nothing_left_on_hosts(&run_dir);
}

#[test]
fn ctrl_c_resumes_the_team_server_and_ends_the_clients_on_the_hosts() {
    let hosts = Hosts::new(1);
    let mut redis = team_redis(&hosts, 0);
    let text = unmanaged(
        &hosts,
        r#"duration = "60s"
resource = "unfenced"

[backend]
kind = "redis"
lease = "1s"

[clients]
count = 2
clients_on = "hosts"

[critical_section]
hold = "100ms"
writes = 1

[[faults]]
kind = "pause"
target = "holder"
duration = "50s"
after = "300ms"

[[faults]]
kind = "pause-node"
nodes = "n1"
duration = "50s"
after = "1s"
"#,
        1,
    );
    let w = write_workload(hosts.dir.path(), "team-redis-ctrl-c.toml", &text);
    let results = tempfile::tempdir().unwrap();
    let mut controller = hosts.spawn_run(&w, results.path());
    let (run_dir, ()) = wait_journaled(
        "the team's server and a client stopped on h1",
        Duration::from_secs(30),
        results.path(),
        |pending| {
            let client = pending.effects.iter().any(|(_, e)| {
                matches!(e, Effect::RemoteProcess { proc, .. } if journal::is_stopped(proc.pid))
            });
            (client && journal::is_stopped(redis.pid())).then_some(())
        },
    );
    let status = run_support::end(&mut controller, nix::sys::signal::Signal::SIGINT);
    assert_eq!(status.code(), Some(130), "interrupted");
    redis.assert_running();
    hosts.assert_clean();
    assert_nothing_left_on_hosts(&run_dir);
}
