//! `lockcheck recover` after a controller killed with -9 in the middle of each
//! fault kind: nothing stopped, no clock skewed, no link cut, no process of the
//! run left, nothing listening where the run's clients dialled.

mod fault_support;
mod run_support;

use fault_support::tear;
use lockcheck::fault::clock;
use lockcheck::journal::{self, Effect, Proc};
use run_support::{leftovers, start_run, wait_for, write_workload, Helper, ANSWER_WITHIN};
use serde_json::Value;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

/// Gone, or a zombie waiting for init: either way no longer running.
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

fn wait_gone(pid: i32) {
    wait_for(&format!("process {pid} still running"), SETTLE, || {
        gone(pid).then_some(())
    });
}

/// How long a signal may take to end a process, on a loaded machine.
const SETTLE: Duration = Duration::from_secs(5);

/// `lockcheck recover RUN_DIR --json`, which must succeed.
fn recover(dir: &Path) -> Value {
    let out = run_support::lockcheck_ok(["recover".as_ref(), dir.as_os_str(), "--json".as_ref()]);
    serde_json::from_slice(&out).unwrap()
}

/// Should an assertion fail, the test still leaves nothing behind.
struct Cleanup<'a>(&'a Path);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let _ = lockcheck::recover::undo_pending(self.0);
    }
}

#[test]
fn recover_undoes_what_a_killed_controller_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(dir.path());
    // The "controller" that gets killed: it starts a server and a worker as a
    // run would, journals them, stops the worker, skews the server's clock,
    // says "ready" and waits for its end.
    let mut cmd = Helper::command("killed-controller");
    cmd.arg(dir.path());
    let mut controller = Helper::spawn(cmd);
    let ready = controller.expect("ready ", ANSWER_WITHIN);
    let mut f = ready.split_whitespace();
    let redis: i32 = f.next().unwrap().parse().unwrap();
    let worker: i32 = f.next().unwrap().parse().unwrap();
    let clock_file = PathBuf::from(f.next().unwrap());

    controller.kill(); // SIGKILL: no Drop runs
                       // What it left behind.
    assert!(journal::is_stopped(worker), "the worker is left stopped");
    assert!(
        !clock::read_file(&clock_file).unwrap().is_none(),
        "the clock is left skewed"
    );
    assert!(!gone(redis), "the server is left running");
    // And the kill landed in the middle of a clock change: the page is torn, and
    // the reset must not wait on its dead writer.
    tear(&clock_file, -20_000_000_000);

    let report = recover(dir.path());
    let undone = report["undone"].as_array().unwrap();
    assert_eq!(undone.len(), 4, "{report}");
    assert!(
        report["warnings"].as_array().unwrap().is_empty(),
        "{report}"
    );
    assert!(
        clock::read_file(&clock_file).unwrap().is_none(),
        "clock reset"
    );
    wait_gone(redis);
    wait_gone(worker);
    // The stopped worker was resumed before it was killed.
    let actions: Vec<&str> = undone
        .iter()
        .map(|u| u["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["resumed", "reset", "killed", "killed"],
        "{report}"
    );

    // A second recover has nothing to do.
    assert!(recover(dir.path())["undone"].as_array().unwrap().is_empty());
}

// --- A real `lockcheck run` killed with -9 in the middle of each fault kind ---

/// One fault kind: the run to kill, when to kill it, and what the kill leaves.
/// lockcheck's own resource, no fence: it lives in the controller and dies with it.
const OWN_UNFENCED: &str = "[resource]\nfence = \"none\"";

struct Case {
    /// Names the workload, and the row for its test.
    name: &'static str,
    /// The backend's kind (a 2 s lease, 2 clients).
    backend: &'static str,
    /// The `[[faults]]` entry's keys; it starts 300 ms in and lasts a minute
    /// (far longer than the test) unless it says `after` / `duration` itself.
    fault: &'static str,
    /// The `[resource]` table.
    resource: &'static str,
    /// The fault is in effect: kill the controller now.
    in_effect: fn(&Live) -> bool,
    /// What the kill left behind, checked before `recover`: evidence that the
    /// case tests something.
    left: fn(&Killed),
}

/// A run being watched, before the kill.
struct Live {
    results: PathBuf,
}

impl Live {
    fn run_dir(&self) -> Option<PathBuf> {
        std::fs::canonicalize(self.results.join("latest")).ok()
    }

    fn history(&self) -> String {
        self.run_dir()
            .and_then(|d| std::fs::read_to_string(d.join("history.jsonl")).ok())
            .unwrap_or_default()
    }

    fn has_op(&self, f: &str) -> bool {
        self.history().contains(&format!("\"f\":\"{f}\""))
    }

    /// The run's server processes now, by node: `--data-dir`/`--dir` under the
    /// run's `data/<node>` on their command line, or one of its logs open.
    fn servers(&self) -> Vec<(String, u32)> {
        let Some(dir) = self.run_dir() else {
            return Vec::new();
        };
        let data = format!("{}/data/", dir.display());
        let logs = format!("{}/nodes/", dir.display());
        leftovers(&self.results)
            .into_iter()
            // Not a worker, nor the controller (`lockcheck run ... --results`).
            .filter(|p| !p.cmdline.contains(" worker ") && !p.cmdline.contains("--results"))
            .filter_map(|p| {
                let by_cmdline = p.cmdline.split_once(&data).map(|(_, rest)| rest);
                let by_log = || {
                    std::fs::read_dir(format!("/proc/{}/fd", p.pid))
                        .ok()?
                        .flatten()
                        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                        .find_map(|l| {
                            l.to_string_lossy()
                                .strip_prefix(&logs)
                                .map(|s| s.trim_end_matches(".log").to_string())
                        })
                };
                let node = match by_cmdline {
                    Some(rest) => rest.split(['/', ' ']).next()?.to_string(),
                    None => by_log()?,
                };
                Some((node, p.pid))
            })
            .collect()
    }

    /// Every address a worker was told to dial (its nodes, or their proxies, and
    /// the resource), from the config on the workers' command lines.
    fn dialled(&self) -> Vec<SocketAddr> {
        let mut addrs = Vec::new();
        for p in leftovers(&self.results) {
            let Some((_, config)) = p.cmdline.split_once(" --config ") else {
                continue;
            };
            let config: Value = serde_json::Deserializer::from_str(config)
                .into_iter()
                .next()
                .expect("a worker's --config")
                .expect("a worker's config is JSON");
            let endpoints = config["endpoints"].as_array().expect("endpoints");
            // The resource is `{"kind": ..., "addr": ...}` whatever its kind.
            for a in endpoints.iter().chain([&config["resource"]["addr"]]) {
                addrs.push(a.as_str().unwrap().parse().unwrap());
            }
        }
        addrs.sort();
        addrs.dedup();
        addrs
    }
}

/// What a kill -9 left: the state just after it, before `recover`.
struct Killed {
    run_dir: PathBuf,
    history: String,
    /// The journal's effects not undone.
    pending: Vec<(u64, Effect)>,
    /// Server processes still running, by node.
    servers: Vec<(String, u32)>,
}

impl Killed {
    fn skewed_clocks(&self) -> usize {
        skewed_clocks(&self.run_dir)
    }

    /// The journal's process entries for `node` (first the original, then each
    /// restart).
    fn journaled(&self, node: &str) -> Vec<&Proc> {
        self.pending
            .iter()
            .filter_map(|(_, e)| match e {
                Effect::Process(p) if p.name == node => Some(p),
                _ => None,
            })
            .collect()
    }
}

fn skewed_clocks(run_dir: &Path) -> usize {
    let Ok(files) = std::fs::read_dir(run_dir.join("clocks")) else {
        return 0;
    };
    files
        .filter(|f| {
            !clock::read_file(&f.as_ref().unwrap().path())
                .unwrap()
                .is_none()
        })
        .count()
}

/// Ends the controller and recovers the run should an assertion fail midway.
struct Guard {
    controller: Child,
    results: PathBuf,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.controller.kill();
        let _ = self.controller.wait();
        if let Ok(dir) = std::fs::canonicalize(self.results.join("latest")) {
            let _ = lockcheck::recover::undo_pending(&dir);
        }
    }
}

/// Runs `case`'s workload, kills the controller with SIGKILL while the fault is
/// in effect, checks what the kill left, runs `lockcheck recover`, and checks that
/// nothing of the run is left: no process (server or worker, stopped or not), no
/// clock skewed, no journal entry open, nothing accepting connections where the
/// workers dialled (the nodes, the proxies on the links, the resource).
fn killed_mid_fault(name: &str) {
    let case = CASES
        .iter()
        .find(|c| c.name == name)
        .expect("a row of CASES");
    let dir = tempfile::tempdir().unwrap();
    let timing = ["after = \"300ms\"", "duration = \"60s\""]
        .into_iter()
        .filter(|t| !case.fault.contains(t.split(' ').next().unwrap()));
    // Longer than its fault: a workload whose fault would be cut short is refused.
    let text = format!(
        "duration = \"90s\"\n\
         [backend]\nkind = \"{}\"\nlease = \"2s\"\n[clients]\ncount = 2\n\
         [critical_section]\nhold = \"100ms\"\nwrites = 1\n\
         [[faults]]\n{}\n{}\n{}\n",
        case.backend,
        case.fault,
        timing.collect::<Vec<_>>().join("\n"),
        case.resource
    );
    let path = write_workload(dir.path(), &format!("{name}.toml"), &text);
    let results = dir.path().join("results");
    let mut guard = Guard {
        controller: start_run(&path, &results, &[]),
        results: results.clone(),
    };
    let live = Live {
        results: results.clone(),
    };
    wait_for(
        &format!("{name}: the fault never took effect"),
        Duration::from_secs(30),
        || (case.in_effect)(&live).then_some(()),
    );
    let dialled = live.dialled();
    assert!(!dialled.is_empty(), "{name}: no worker found");
    let run_dir = live.run_dir().unwrap();

    guard.controller.kill().unwrap(); // SIGKILL: nothing of the controller runs
    guard.controller.wait().unwrap();
    let killed = Killed {
        history: live.history(),
        pending: journal::pending(&run_dir).unwrap().effects,
        servers: live.servers(),
        run_dir: run_dir.clone(),
    };
    assert!(
        !killed.servers.is_empty(),
        "{name}: the servers outlive a killed controller (why recover exists)"
    );
    (case.left)(&killed);

    let report = recover(&run_dir);
    assert!(
        report["warnings"].as_array().unwrap().is_empty(),
        "{name}: {report}"
    );
    let left = wait_for(
        &format!("{name}: processes of the run left after recover: {report}"),
        SETTLE,
        || {
            let left = leftovers(&results);
            left.is_empty().then_some(left)
        },
    );
    assert!(left.is_empty());
    assert_eq!(skewed_clocks(&run_dir), 0, "{name}: a clock left skewed");
    assert_eq!(mounts_under(&results), 0, "{name}: a mount of the run left");
    let open = journal::pending(&run_dir).unwrap().effects;
    assert!(
        open.is_empty(),
        "{name}: journal entries not undone: {open:?}"
    );
    for addr in dialled {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
            // Tests run in parallel: another test's server may have taken the freed
            // port since (and a connect to a free ephemeral port can even meet
            // itself). Only a listener of this run is a leftover.
            let owner = listener(addr);
            assert!(
                !owner
                    .as_ref()
                    .is_some_and(|(_, cmd)| cmd.contains(&*results.to_string_lossy())),
                "{name}: something of the run still accepts connections at {addr}, where the workers dialled: {owner:?}"
            );
        }
    }
    let again = recover(&run_dir);
    assert!(
        again["undone"].as_array().unwrap().is_empty(),
        "{name}: a second recover found more to do: {again}"
    );
}

/// How many file systems are mounted under `dir` (a node's disk of disk-full).
fn mounts_under(dir: &Path) -> usize {
    let dir = std::fs::canonicalize(dir).unwrap();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&*dir.to_string_lossy()))
        .count()
}

/// The nodes whose server was started again: a process for the node other than
/// the one the journal names first.
fn restarted(servers: &[(String, u32)], first: impl Fn(&str) -> Option<u32>) -> Vec<String> {
    servers
        .iter()
        .filter(|(n, pid)| first(n).is_some_and(|f| f != *pid))
        .map(|(n, _)| n.clone())
        .collect()
}

/// One row per fault kind.
const CASES: &[Case] = &[
    Case {
        name: "clock",
        backend: "redlock",
        resource: OWN_UNFENCED,
        fault: r#"kind = "clock"
nodes = "majority"
offset = "+20s""#,
        in_effect: |r| r.has_op("clock-skew"),
        left: |k| assert_eq!(k.skewed_clocks(), 3, "a majority of clocks left skewed"),
    },
    Case {
        name: "pause-node",
        backend: "redlock",
        resource: OWN_UNFENCED,
        fault: r#"kind = "pause-node"
nodes = "n4""#,
        in_effect: |r| r.has_op("pause"),
        // The paused node is not left stopped: each server is a process group
        // of its own, orphaned when the controller dies, and the kernel sends
        // a stopped member of an orphaned group SIGHUP + SIGCONT (Redis ignores
        // the SIGHUP). The journal still lists the pause; recover's SIGCONT is
        // then harmless.
        left: |k| {
            assert!(
                k.pending
                    .iter()
                    .any(|(_, e)| matches!(e, Effect::Stopped(p) if p.name == "n4")),
                "{:?}",
                k.pending
            );
            assert_eq!(k.servers.len(), 5, "{:?}", k.servers);
        },
    },
    Case {
        name: "pause",
        backend: "redis",
        resource: OWN_UNFENCED,
        fault: r#"kind = "pause"
target = "client-0""#,
        in_effect: |r| r.has_op("pause") && leftovers(&r.results).iter().any(|p| p.state == 'T'),
        // The stopped worker does not outlive its controller: the kernel's
        // parent-death SIGKILL ends a stopped process too.
        left: |k| run_support::wait_no_workers(k.run_dir.parent().unwrap()),
    },
    Case {
        name: "kill",
        backend: "redlock",
        resource: OWN_UNFENCED,
        fault: r#"kind = "kill"
nodes = "n2""#,
        in_effect: |r| r.has_op("kill"),
        // The killed node stays down, the other four run on.
        left: |k| {
            let nodes: Vec<&str> = k.servers.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(nodes.len(), 4, "{:?}", k.servers);
            assert!(!nodes.contains(&"n2"), "{:?}", k.servers);
            assert!(!k.journaled("n2")[0].alive());
        },
    },
    // A majority of etcd down: the first restarted member is not ready (healthy)
    // before a new leader is elected, a second or more (election timeout 1 s).
    // The controller is killed in that window, with the restart half done.
    Case {
        name: "kill-restart",
        backend: "etcd",
        resource: OWN_UNFENCED,
        fault: r#"kind = "kill"
nodes = "majority"
after = "500ms"
duration = "300ms""#,
        in_effect: |r| {
            let Some(dir) = r.run_dir() else {
                return false;
            };
            let Ok(pending) = journal::pending(&dir) else {
                return false;
            };
            let first = |node: &str| {
                pending.effects.iter().find_map(|(_, e)| match e {
                    Effect::Process(p) if p.name == node => Some(p.pid as u32),
                    _ => None,
                })
            };
            r.has_op("kill") && !restarted(&r.servers(), first).is_empty()
        },
        left: |k| {
            assert!(
                !k.history.contains("\"f\":\"start\""),
                "the restart was over before the kill: the window was missed"
            );
            let first = |node: &str| k.journaled(node).first().map(|p| p.pid as u32);
            let again = restarted(&k.servers, first);
            assert!(!again.is_empty(), "{:?}", k.servers);
            // Journaled as it was spawned, before it served: recover knows it.
            for n in &again {
                assert!(
                    k.journaled(n).iter().any(|p| p.alive()),
                    "the restarted {n} is not in the journal: {:?}",
                    k.pending
                );
            }
        },
    },
    Case {
        name: "partition",
        backend: "redis",
        resource: OWN_UNFENCED,
        fault: r#"kind = "partition"
nodes = "n1""#,
        in_effect: |r| r.has_op("partition"),
        // The cut links were the controller's proxies: they ended with it.
        left: |k| {
            let links = k
                .pending
                .iter()
                .filter(|(_, e)| matches!(e, Effect::Link { .. }))
                .count();
            assert_eq!(links, 2, "both clients' links to n1: {:?}", k.pending);
        },
    },
    Case {
        // The resource's own PostgreSQL outlives the controller: recover ends it.
        name: "postgres-resource",
        backend: "redis",
        resource: "[resource]\nkind = \"postgres\"\nfence = \"<=\"",
        fault: r#"kind = "pause"
target = "client-0""#,
        in_effect: |r| r.has_op("pause") && leftovers(&r.results).iter().any(|p| p.state == 'T'),
        left: |k| {
            let postgres = k.pending.iter().any(|(_, e)| {
                matches!(e, Effect::Process(p)
                    if std::fs::read_to_string(format!("/proc/{}/comm", p.pid))
                        .is_ok_and(|c| c.trim() == "postgres"))
            });
            assert!(
                postgres,
                "the resource's running server is in the run's journal: {:?}",
                k.pending
            );
        },
    },
    Case {
        // The node's disk is a tmpfs mounted under its data, full of a filler:
        // both journaled as the kind's own effects, undone through its undo.
        name: "disk-full",
        backend: "redis",
        resource: OWN_UNFENCED,
        fault: r#"kind = "disk-full"
nodes = "n1"
size_mb = 16"#,
        in_effect: |r| r.has_op("disk-full"),
        left: |k| {
            let own: Vec<&str> = k
                .pending
                .iter()
                .filter_map(|(_, e)| match e {
                    Effect::Fault(f) if f.kind == "disk-full" => {
                        f.data.keys().next().map(String::as_str)
                    }
                    _ => None,
                })
                .collect();
            assert_eq!(own, ["mount", "filler"], "{:?}", k.pending);
            assert_eq!(
                mounts_under(&k.run_dir),
                1,
                "the node's tmpfs is left mounted"
            );
        },
    },
    Case {
        name: "latency",
        backend: "redis",
        resource: OWN_UNFENCED,
        fault: r#"kind = "latency"
nodes = "all"
delay = "50ms""#,
        in_effect: |r| r.has_op("latency"),
        left: |k| {
            assert!(
                k.pending.iter().any(
                    |(_, e)| matches!(e, Effect::Link { mode, .. } if mode.contains("Latency"))
                ),
                "{:?}",
                k.pending
            );
        },
    },
];

#[test]
fn recover_after_a_kill_mid_clock_fault() {
    killed_mid_fault("clock");
}

#[test]
fn recover_after_a_kill_mid_node_pause() {
    killed_mid_fault("pause-node");
}

#[test]
fn recover_after_a_kill_mid_client_pause() {
    killed_mid_fault("pause");
}

#[test]
fn recover_after_a_kill_while_a_node_is_down() {
    killed_mid_fault("kill");
}

#[test]
fn recover_after_a_kill_while_a_node_restarts() {
    killed_mid_fault("kill-restart");
}

#[test]
fn recover_after_a_kill_mid_partition() {
    killed_mid_fault("partition");
}

#[test]
fn recover_after_a_kill_mid_disk_full() {
    killed_mid_fault("disk-full");
}

#[test]
fn recover_after_a_kill_mid_latency() {
    killed_mid_fault("latency");
}

#[test]
fn recover_after_a_kill_with_a_postgres_resource() {
    killed_mid_fault("postgres-resource");
}

/// The process listening on `addr` (pid, command line), from `ss`.
fn listener(addr: SocketAddr) -> Option<(u32, String)> {
    let out = Command::new("ss")
        .args(["-ltnpH", &format!("sport = :{}", addr.port())])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let pid: u32 = text.split("pid=").nth(1)?.split(',').next()?.parse().ok()?;
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")))
}
