//! The battery's rules, held on every backend's registered facts.

use super::*;

fn names(b: &Battery) -> Vec<String> {
    b.scenarios.iter().map(Scenario::name).collect()
}

fn refused(b: &Battery) -> Vec<&str> {
    b.not_applicable
        .iter()
        .map(|n| n.scenario.as_str())
        .collect()
}

const GO: &str = "a Go binary";

/// Every backend's whole battery is a workload `lockcheck run` accepts.
#[test]
fn every_scenario_of_every_backend_is_a_valid_workload() {
    for kind in BackendKind::ALL.into_iter().filter(|k| k.has_lock()) {
        for client in [None, Some(vec!["/bin/true".to_string()])] {
            let facts = Facts::registered(kind, None, client.clone());
            let b = battery(&facts, None);
            assert!(!b.scenarios.is_empty(), "{kind}");
            for s in &b.scenarios {
                let text = workload_text(*s, &facts);
                let path = std::path::PathBuf::from(format!("/audit/{}.toml", s.name()));
                let w = Workload::parse(&text, &path)
                    .unwrap_or_else(|e| panic!("{kind} {}: {e:#}\n{text}", s.name()));
                assert_eq!(w.name, format!("{kind}-{}", s.name()));
                assert_eq!(
                    w.resource.fence != lockcheck_resource::Fence::Off,
                    s.fencing == Fencing::Fenced,
                    "{kind} {}",
                    s.name()
                );
                assert_eq!(
                    w.clients.self_fencing_margin.is_some(),
                    s.fencing == Fencing::SelfFencing
                );
                assert_eq!(
                    w.clients.self_fencing_library,
                    s.fencing == Fencing::LibraryFencing
                );
                assert_eq!(w.client.is_some(), client.is_some());
                // Only an unfenced run that trusts its holders fails on the overlap.
                assert_eq!(
                    w.allow
                        .contains(&lockcheck_check::AnomalyKind::DoubleHolder),
                    s.fencing != Fencing::Unfenced,
                    "{kind} {}",
                    s.name()
                );
            }
        }
    }
}

/// One jump can fall between a release and the next acquire: three land in the run.
#[test]
fn a_server_clock_jump_lands_three_times_within_the_run() {
    let facts = Facts::registered(BackendKind::Redlock, None, None);
    let s = Scenario {
        recipe: Recipe::ClockJumpMajority,
        fencing: Fencing::Unfenced,
    };
    let w = Workload::parse(&workload_text(s, &facts), Path::new("/audit/j.toml")).unwrap();
    let at: Vec<u64> = w
        .planned_faults(None, 1)
        .unwrap()
        .iter()
        .map(|p| p.at.as_millis() as u64)
        .collect();
    assert_eq!(at, [1000, 3500, 6000]);
}

/// A holder that renewed between its writes would stop at its first unanswered
/// renewal, before its lease ran out: no successor would see it write again.
#[test]
fn the_cut_off_holder_has_its_lock_client_renew_in_the_background() {
    use lockcheck_run::workload::Renew;
    for kind in [BackendKind::Redis, BackendKind::Zookeeper] {
        let facts = Facts::registered(kind, None, None);
        let s = Scenario {
            recipe: Recipe::HolderCutOff,
            fencing: Fencing::Fenced,
        };
        let text = workload_text(s, &facts);
        let w = Workload::parse(&text, Path::new("/audit/c.toml")).unwrap();
        assert_eq!(w.backend.renew, Renew::Background, "{kind}");
        assert_eq!(w.backend.lease.renew_every, Some(Duration::from_secs(1)));
        let whom = if facts.nodes == 1 {
            "one client, the holder, from the only server".to_string()
        } else {
            format!("one client, the holder, from all {} nodes", facts.nodes)
        };
        assert!(text.contains(&whom), "{kind}: {text}");
        assert!(text.contains("writes on to the resource"), "{text}");
    }
}

#[test]
fn redis_runs_every_recipe_but_the_leader_one_fenced_and_unfenced() {
    let facts = Facts {
        mounts: true,
        ..Facts::registered(BackendKind::Redis, None, None)
    };
    let b = battery(&facts, None);
    assert_eq!(b.scenarios.len(), 29, "{:?}", names(&b));
    for n in [
        "holder-pause-unfenced",
        "holder-pause-fenced",
        "holder-pause-self-fencing",
        "clock-jump-majority-fenced",
        "clock-rate-holder-self-fencing",
        "kill-restart-wiped-unfenced",
        "kill-restart-durable-fenced",
        "holder-cut-off-fenced",
        "slow-links-self-fencing",
        "disk-full-fenced",
    ] {
        assert!(names(&b).iter().any(|s| s == n), "{n}: {:?}", names(&b));
    }
    assert_eq!(
        refused(&b),
        [
            "clock-jump-holder-unfenced",
            "clock-jump-holder-fenced",
            "clock-rate-holder-unfenced",
            "clock-rate-holder-fenced",
            "leader-isolated",
            "holder-node-isolated",
            "holder-node-killed"
        ]
    );
    assert!(
        b.not_applicable[4].why.contains("one server"),
        "{:?}",
        b.not_applicable[4]
    );
}

/// Redis's durable option is the one line kill-restart-durable adds, and the
/// scenario says what a killed server keeps with it and without it.
#[test]
fn kill_restart_durable_runs_redis_with_aof_always_and_says_what_it_keeps() {
    let facts = Facts::registered(BackendKind::Redis, None, None);
    let durable = Scenario {
        recipe: Recipe::KillRestartDurable,
        fencing: Fencing::Fenced,
    };
    let text = workload_text(durable, &facts);
    assert!(text.contains("\npersistence = \"aof-always\"\n"), "{text}");
    assert!(text.contains("--appendfsync always"), "{text}");
    let w = Workload::parse(&text, Path::new("/audit/d.toml")).unwrap();
    assert_eq!(
        w.backend
            .options
            .get("persistence")
            .and_then(|v| v.as_str()),
        Some("aof-always")
    );
    let plain = workload_text(
        Scenario {
            recipe: Recipe::KillRestart,
            ..durable
        },
        &facts,
    );
    assert!(!plain.contains("persistence ="), "{plain}");
    assert!(plain.contains("--appendonly no"), "{plain}");
    // A backend with no such option lists the recipe as not applicable.
    let b = battery(&Facts::registered(BackendKind::Etcd, None, None), None);
    assert!(
        refused(&b).contains(&"kill-restart-durable"),
        "{:?}",
        refused(&b)
    );
}

/// A kill recurs through a run, each time on the node its target picks
/// then: a wiped restart on a cluster says a second node's data can go.
#[test]
fn a_kill_says_it_recurs_and_on_whom() {
    let wiped = |kind| {
        let facts = Facts::registered(kind, None, None);
        Recipe::KillRestartWiped.describe_for(&facts)
    };
    let nats = wiped(BackendKind::Nats);
    assert!(nats.contains("the leader, one node of 3"), "{nats}");
    assert!(
        nats.contains("on the node leading then: a second node's data"),
        "{nats}"
    );
    let redlock = wiped(BackendKind::Redlock);
    assert!(
        redlock.contains("on a node picked afresh: a second node's data"),
        "{redlock}"
    );
    let redis = wiped(BackendKind::Redis);
    assert!(redis.contains("the only server"), "{redis}");
    assert!(redis.contains(", again after each restart"), "{redis}");
    assert!(!redis.contains("second node"), "{redis}");
    let etcd = Facts::registered(BackendKind::Etcd, None, None);
    let kept = Recipe::KillRestart.describe_for(&etcd);
    assert!(
        kept.contains("again after each restart on the node leading then"),
        "{kept}"
    );
    assert!(!Recipe::SlowLinks.describe_for(&etcd).contains("again"));
}

/// A server clock fault deposes a holder only inside its section: the holder
/// holds twice the lease, kept alive as its client keeps it.
#[test]
fn under_the_servers_clocks_a_holder_holds_long_and_renews_only_where_its_client_does_not() {
    for recipe in [Recipe::ClockJumpMajority, Recipe::ClockRateMajority] {
        let s = Scenario {
            recipe,
            fencing: Fencing::Fenced,
        };
        let zookeeper = Facts::registered(BackendKind::Zookeeper, None, None);
        let text = workload_text(s, &zookeeper);
        assert!(text.contains("\nhold = \"4s\"\nwrites = 8\n"), "{text}");
        assert!(!text.contains("renew"), "{text}");
        Workload::parse(&text, Path::new("/audit/z.toml")).unwrap();
        let redis = Facts::registered(BackendKind::Redis, None, None);
        let text = workload_text(s, &redis);
        assert!(text.contains("\nhold = \"4s\"\n"), "{text}");
        assert!(
            text.contains("renew = \"background\"\nrenew_every = \"1s\"\n"),
            "{text}"
        );
        let w = Workload::parse(&text, Path::new("/audit/r.toml")).unwrap();
        assert!(w.duration >= Duration::from_secs(8), "{text}");
    }
}

/// The disk is a tmpfs: root mounts it, and redis keeps its AOF on it.
#[test]
fn disk_full_fills_the_leaders_disk_of_a_durable_server_and_needs_root() {
    let facts = Facts {
        mounts: true,
        ..Facts::registered(BackendKind::Redis, None, None)
    };
    let s = Scenario {
        recipe: Recipe::DiskFull,
        fencing: Fencing::Fenced,
    };
    let text = workload_text(s, &facts);
    assert!(text.contains("\npersistence = \"aof-always\"\n"), "{text}");
    assert!(text.contains("the only server"), "{text}");
    Workload::parse(&text, Path::new("/audit/f.toml")).unwrap();
    let etcd = Facts {
        mounts: true,
        ..Facts::registered(BackendKind::Etcd, None, None)
    };
    let text = workload_text(s, &etcd);
    assert!(text.contains("nodes = \"primary\""), "{text}");
    assert!(text.contains("the leader, one node of 3"), "{text}");
    assert!(!text.contains("again after each restart"), "{text}");
    let unprivileged = Facts {
        mounts: false,
        ..etcd
    };
    let b = battery(&unprivileged, Some(&[Recipe::DiskFull]));
    assert!(b.scenarios.is_empty());
    assert!(b.not_applicable[0].why.contains("root"), "{:?}", b);
    // This machine stood in the way, not the backend: the audit is not complete.
    assert!(b.not_applicable[0].environment, "{:?}", b);
    let mariadb = battery(
        &Facts::registered(BackendKind::Mariadb, None, None),
        Some(&[Recipe::LeaderIsolated]),
    );
    assert!(
        !mariadb.not_applicable.is_empty() && mariadb.not_applicable.iter().all(|n| !n.environment),
        "{mariadb:?}"
    );
}

/// An etcd client balances over every member: only pinned to one does the
/// holder have a node of its own to cut off or kill, for longer than its lease.
#[test]
fn the_holders_node_is_lost_past_its_lease_with_every_client_pinned_to_it() {
    // An etcd client balances over every member; a ZooKeeper client moves its
    // session to another server: either way the fault would miss the lease.
    let lost = [
        (Recipe::HolderNodeIsolated, "kind = \"partition-nodes\""),
        (Recipe::HolderNodeKilled, "kind = \"kill\""),
    ];
    for kind in [BackendKind::Etcd, BackendKind::Zookeeper] {
        for (recipe, fault) in lost {
            let pin = "client_endpoint = \"follower\"";
            let facts = Facts::registered(kind, None, None);
            let b = battery(&facts, Some(&[recipe]));
            assert_eq!(names(&b).len(), 3, "{kind}: {:?}", names(&b));
            let s = Scenario {
                recipe,
                fencing: Fencing::Fenced,
            };
            let text = workload_text(s, &facts);
            let w = Workload::parse(&text, Path::new("/audit/h.toml")).unwrap();
            assert!(
                text.contains("nodes = \"holders\"") && text.contains(fault),
                "{text}"
            );
            assert_eq!(
                text.contains("network = \"namespaces\""),
                recipe == Recipe::HolderNodeIsolated,
                "only a cut needs the nodes in namespaces: {text}"
            );
            assert!(text.contains(pin), "{text}");
            let out = w.faults[0].duration;
            let lease = w.backend.lease.ttl;
            assert!(out >= lease * 2, "{kind}: {out:?} out, lease {lease:?}");
            // The holder still writes once the node is back, when a successor is granted.
            let lockcheck_run::workload::ClientMode::Lock(section) = &w.mode else {
                panic!("{kind}: a lock workload");
            };
            assert!(section.hold > out, "{kind}");
        }
    }
    for (recipe, _) in lost {
        let redis = battery(
            &Facts::registered(BackendKind::Redis, None, None),
            Some(&[recipe]),
        );
        assert!(redis.scenarios.is_empty() && redis.not_applicable[0].why.contains("one server"));
        let redlock = battery(
            &Facts::registered(BackendKind::Redlock, None, None),
            Some(&[recipe]),
        );
        let why = &redlock.not_applicable.last().unwrap().why;
        assert!(why.contains("independent instances"), "{why}");
    }
}

#[test]
fn redlock_has_no_fenced_scenario_and_no_leader() {
    let b = battery(&Facts::registered(BackendKind::Redlock, None, None), None);
    assert!(b.scenarios.iter().all(|s| s.fencing != Fencing::Fenced));
    assert!(names(&b).contains(&"clock-jump-majority-unfenced".to_string()));
    assert_eq!(b.not_applicable[0].scenario, "*-fenced");
    assert!(b.not_applicable[0]
        .why
        .contains("redlock hands out no fencing token"));
    let leader = b
        .not_applicable
        .iter()
        .find(|n| n.scenario == "leader-isolated")
        .unwrap();
    assert!(
        leader.why.contains("independent instances"),
        "{}",
        leader.why
    );
}

#[test]
fn a_go_server_loses_the_server_clock_recipes_and_a_cluster_gains_the_leader_one() {
    for kind in [BackendKind::Etcd, BackendKind::Nats] {
        let facts = Facts::registered(kind, Some(GO.into()), None);
        let b = battery(&facts, None);
        let na = refused(&b);
        assert!(
            na.contains(&"clock-jump-majority") && na.contains(&"clock-rate-majority"),
            "{kind}: {na:?}"
        );
        assert!(b.not_applicable.iter().any(|n| n.why == GO));
        assert!(
            names(&b).contains(&"leader-isolated-fenced".to_string()),
            "{kind}"
        );
        // The holder's clock is the worker's own: it still applies.
        assert!(names(&b).contains(&"clock-rate-holder-self-fencing".to_string()));
    }
}

#[test]
fn loopback_only_servers_lose_the_leader_recipe() {
    for kind in [BackendKind::PostgresLease, BackendKind::Mariadb] {
        let b = battery(&Facts::registered(kind, None, None), None);
        assert!(refused(&b).contains(&"leader-isolated"), "{kind}");
    }
    let b = battery(&Facts::registered(BackendKind::Zookeeper, None, None), None);
    assert!(!refused(&b).contains(&"leader-isolated"));
}

#[test]
fn fencing_modes_of_a_recipe_that_runs_unfenced_ask_whether_they_hold() {
    let b = battery(&Facts::registered(BackendKind::Redis, None, None), None);
    let q = questions(&b.scenarios);
    for (s, q) in b.scenarios.iter().zip(&q) {
        match q {
            Question::CanItBreak => assert!(
                s.fencing == Fencing::Unfenced || s.recipe.skews_holder(),
                "{}",
                s.name()
            ),
            Question::DoesItHold { unfenced } => {
                assert_ne!(s.fencing, Fencing::Unfenced);
                assert_eq!(b.scenarios[*unfenced].recipe, s.recipe);
                assert_eq!(b.scenarios[*unfenced].fencing, Fencing::Unfenced);
            }
        }
    }
    let clock = b
        .scenarios
        .iter()
        .position(|s| s.name() == "clock-jump-holder-self-fencing")
        .unwrap();
    assert_eq!(q[clock], Question::CanItBreak);
}

#[test]
fn an_adapter_adds_library_fencing_and_only_narrows() {
    let facts = Facts::registered(BackendKind::Redis, None, Some(vec!["lock.py".into()]));
    let b = battery(&facts, Some(&[Recipe::HolderPause]));
    assert_eq!(
        names(&b),
        [
            "holder-pause-unfenced",
            "holder-pause-fenced",
            "holder-pause-self-fencing",
            "holder-pause-library-fencing"
        ]
    );
    assert!(b.not_applicable.is_empty());
}
