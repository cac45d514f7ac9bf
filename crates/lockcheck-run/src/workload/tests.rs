use super::*;
use lockcheck_fault::clock::{ClockSpec, Clocks};
use lockcheck_fault::latency::Slowness;
use lockcheck_fault::latency_nodes::NodeLatencySpec;
use lockcheck_fault::netns::NodeShape;
use lockcheck_fault::node::{NodeTarget, PauseMethod};
use lockcheck_fault::partition_nodes::NodePartitionSpec;
use lockcheck_fault::pause::PauseSpec;
use lockcheck_fault::pause_node::PauseNodeSpec;
use lockcheck_fault::shape::Cut;
use lockcheck_fault::spec::Spec;
use lockcheck_fault::Target;

/// The spec of the workload's first fault, as a `T`.
fn first<T: Spec>(w: &Workload) -> &T {
    w.faults[0]
        .spec
        .downcast()
        .unwrap_or_else(|| panic!("{:?}", w.faults[0].spec))
}

const GOOD: &str = r#"
duration = "10s"
seed = 7
allow = ["double-holder"]
resource = "fenced"

[backend]
kind = "redis"
lease = "1500ms"

[clients]
count = 3

[critical_section]
hold = "300ms"
writes = 3
think = "50ms"

[[faults]]
kind = "pause"
target = "holder"
duration = "3s"
interval = "2s"
"#;

fn parse(text: &str) -> Result<Workload> {
    Workload::parse(text, Path::new("w/test.toml"))
}

#[test]
fn a_clock_fault_skews_a_client_or_nodes_not_both() {
    let clock = |whose: &str| {
        parse(&GOOD.replace(
            "kind = \"pause\"\ntarget = \"holder\"",
            &format!("kind = \"clock\"\nrate = 0.5\n{whose}"),
        ))
    };
    let w = clock("target = \"holder\"").unwrap();
    assert_eq!(
        first::<ClockSpec>(&w).clocks,
        Clocks::Client(Target::Holder)
    );
    assert!(first::<ClockSpec>(&w).needs().client_clocks);
    let w = clock("nodes = \"all\"").unwrap();
    assert_eq!(
        first::<ClockSpec>(&w).clocks,
        Clocks::Nodes(NodeTarget::All)
    );
    assert!(!first::<ClockSpec>(&w).needs().client_clocks);
    let e = format!(
        "{:#}",
        clock("target = \"holder\"\nnodes = \"all\"").unwrap_err()
    );
    assert!(e.contains("not both"), "{e}");
}

#[test]
fn a_node_latency_needs_namespaces_a_delay_and_slows_every_link_by_default() {
    let etcd = |network: &str, fault: &str| {
        parse(
            &GOOD
                .replace("kind = \"redis\"", &format!("kind = \"etcd\"\n{network}"))
                .replace("kind = \"pause\"\ntarget = \"holder\"", fault),
        )
    };
    let ns = "network = \"namespaces\"";
    let slow = "kind = \"latency-nodes\"\ndelay = \"100ms\"\njitter = \"30ms\"";
    let w = etcd(ns, slow).unwrap();
    assert_eq!(
        first::<NodeLatencySpec>(&w),
        &NodeLatencySpec {
            shape: NodeShape::All,
            slowness: Slowness {
                delay: Duration::from_millis(100),
                jitter: Duration::from_millis(30)
            }
        }
    );
    let halves = format!("{slow}\nshape = \"halves\"");
    assert_eq!(
        first::<NodeLatencySpec>(&etcd(ns, &halves).unwrap()).shape,
        NodeShape::Halves
    );
    let e = format!("{:#}", etcd("", slow).unwrap_err());
    assert!(
        e.contains("faults[0].kind") && e.contains("namespaces"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        etcd(ns, "kind = \"latency-nodes\"\nshape = \"all\"").unwrap_err()
    );
    assert!(e.contains("faults[0].delay"), "{e}");
    let e = format!(
        "{:#}",
        etcd(ns, &format!("{slow}\ncut = \"reset\"")).unwrap_err()
    );
    assert!(e.contains("faults[0].cut"), "{e}");
    let e = format!(
        "{:#}",
        etcd(ns, &format!("{slow}\nnodes = \"n1\"")).unwrap_err()
    );
    assert!(e.contains("faults[0].nodes"), "{e}");
    let e = format!(
        "{:#}",
        etcd(
            ns,
            "kind = \"latency\"\nnodes = \"all\"\ndelay = \"1ms\"\nshape = \"all\""
        )
        .unwrap_err()
    );
    assert!(e.contains("faults[0].shape: only a partition-nodes"), "{e}");
}

#[test]
fn a_node_partition_needs_namespaces_and_a_shape_that_fits() {
    let etcd = |network: &str, fault: &str| {
        parse(
            &GOOD
                .replace("kind = \"redis\"", &format!("kind = \"etcd\"\n{network}"))
                .replace("kind = \"pause\"\ntarget = \"holder\"", fault),
        )
    };
    let ns = "network = \"namespaces\"";
    let isolate = "kind = \"partition-nodes\"\nnodes = \"leader\"";
    let w = etcd(ns, isolate).unwrap();
    assert_eq!(w.backend.network, NetworkKind::Namespaces);
    assert_eq!(
        first::<NodePartitionSpec>(&w),
        &NodePartitionSpec {
            shape: NodeShape::Isolate(NodeTarget::Primary),
            cut: Cut::Blackhole
        }
    );
    let e = format!("{:#}", etcd("", isolate).unwrap_err());
    assert!(
        e.contains("faults[0].kind") && e.contains("namespaces"),
        "{e}"
    );
    let links = "kind = \"partition-nodes\"\nshape = \"links\"\nlinks = [[\"n1\", \"n3\"]]\ncut = \"reset\"";
    assert_eq!(
        first::<NodePartitionSpec>(&etcd(ns, links).unwrap()),
        &NodePartitionSpec {
            shape: NodeShape::Links(vec![("n1".into(), "n3".into())]),
            cut: Cut::Reset
        }
    );
    let e = format!("{:#}", etcd(ns, &links.replace("n3", "n4")).unwrap_err());
    assert!(e.contains("faults[0].shape") && e.contains("n4"), "{e}");
    let e = format!(
        "{:#}",
        etcd(
            ns,
            "kind = \"partition-nodes\"\nshape = \"majorities-ring\""
        )
        .unwrap_err()
    );
    assert!(e.contains("at least 4 nodes"), "{e}");
    let e = format!(
        "{:#}",
        etcd(
            ns,
            "kind = \"partition-nodes\"\nshape = \"halves\"\nnodes = \"n1\""
        )
        .unwrap_err()
    );
    assert!(e.contains("faults[0].nodes"), "{e}");
    let e = format!(
        "{:#}",
        etcd(ns, "kind = \"partition-nodes\"\nnodes = \"minority\"").unwrap_err()
    );
    assert!(e.contains("halves"), "{e}");
    let e = format!(
        "{:#}",
        etcd(ns, "kind = \"kill\"\nshape = \"halves\"").unwrap_err()
    );
    assert!(e.contains("faults[0].shape: only a partition-nodes"), "{e}");
    // One node has no links to cut.
    let e = format!(
        "{:#}",
        parse(
            &GOOD
                .replace("kind = \"redis\"", &format!("kind = \"redis\"\n{ns}"))
                .replace("kind = \"pause\"\ntarget = \"holder\"", isolate)
        )
        .unwrap_err()
    );
    assert!(e.contains("at least 2 nodes"), "{e}");
    // An unknown key names file, line and key.
    let e = format!(
        "{:#}",
        etcd(ns, &format!("{isolate}\nshapes = \"x\"")).unwrap_err()
    );
    assert!(
        e.contains("w/test.toml:23: faults[0].shapes: unknown key") && e.contains("shape"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        parse(&GOOD.replace(
            "kind = \"redis\"",
            &format!("kind = \"postgres-lease\"\n{ns}")
        ))
        .unwrap_err()
    );
    assert!(
        e.contains("backend.network") && e.contains("loopback only"),
        "{e}"
    );
    // Namespaces are the local runtime's.
    let e = format!(
        "{:#}",
        etcd(ns, isolate)
            .unwrap()
            .with_runtime(Runtime::Docker)
            .unwrap_err()
    );
    assert!(e.contains("backend.network"), "{e}");
}

#[test]
fn a_monotonic_offset_names_every_node_or_some_of_this_backend() {
    let with = |offset: &str| {
        parse(&GOOD.replace(
            "kind = \"redis\"",
            &format!("kind = \"etcd\"\nmonotonic_offset = {offset}"),
        ))
    };
    let all = with("\"+10s\"").unwrap();
    let ten = 10_000_000_000;
    let expected: Vec<(String, i64)> = ["n1", "n2", "n3"].map(|n| (n.to_string(), ten)).into();
    assert_eq!(all.backend.monotonic_offsets, expected);
    let some = with("{ n3 = \"-1s\", n1 = \"+2s\" }").unwrap();
    assert_eq!(
        some.backend.monotonic_offsets,
        [("n1".to_string(), 2 * ten / 10), ("n3".into(), -ten / 10)]
    );
    let e = format!("{:#}", with("{ n4 = \"+1s\" }").unwrap_err());
    assert!(
        e.contains("backend.monotonic_offset.n4") && e.contains("n1 .. n3"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        with("\"+1s\"")
            .unwrap()
            .with_runtime(Runtime::Docker)
            .unwrap_err()
    );
    assert!(e.contains("only under the local runtime"), "{e}");
}

#[test]
fn a_node_pause_says_its_method_and_only_a_node_pause_has_one() {
    let pause = |method: &str| {
        parse(&GOOD.replace(
            "kind = \"pause\"\ntarget = \"holder\"",
            &format!("kind = \"pause-node\"\nnodes = \"n1\"\n{method}"),
        ))
    };
    assert_eq!(
        first::<PauseNodeSpec>(&pause("").unwrap()).method,
        PauseMethod::Sigstop
    );
    let w = pause("method = \"freezer\"").unwrap();
    assert_eq!(first::<PauseNodeSpec>(&w).method, PauseMethod::Freezer);
    // Docker pauses containers with the freezer whatever this machine allows.
    assert!(w.with_runtime(Runtime::Docker).is_ok());
    let e = format!("{:#}", pause("method = \"thaw\"").unwrap_err());
    assert!(
        e.contains("faults[0].method") || e.contains("method"),
        "{e}"
    );
    assert!(e.contains("freezer") && e.contains("sigstop"), "{e}");
    // strace stalls the syncs of a process of this machine's only.
    let w = pause("method = \"fsync\"").unwrap();
    assert_eq!(first::<PauseNodeSpec>(&w).method, PauseMethod::Fsync);
    let e = format!("{:#}", w.with_runtime(Runtime::Docker).unwrap_err());
    assert!(
        e.contains("method") && e.contains("local runtime only"),
        "{e}"
    );
    let e = parse(&GOOD.replace(
        "target = \"holder\"",
        "target = \"holder\"\nmethod = \"freezer\"",
    ))
    .unwrap_err();
    assert!(
        format!("{e:#}").contains("only a pause-node fault"),
        "{e:#}"
    );
}

/// A backend's own keys are read by the backend: an unknown one is refused where
/// it is with the keys the backend reads, a bad value where it is, a value the
/// backend refuses and a key of another backend's in the owner's words.
#[test]
fn a_backends_own_keys_are_read_and_refused_by_the_backend() {
    use lockcheck_servers::backend::OwnOptions;
    use lockcheck_servers::backends::redis::client::{Options, Persistence};
    let with = |kind: &str, line: &str| {
        parse(&GOOD.replace(
            "kind = \"redis\"\nlease = \"1500ms\"",
            &format!("kind = \"{kind}\"\nlease = \"1500ms\"\n{line}"),
        ))
        .map_err(|e| format!("{e:#}"))
    };
    let w = with("redis", "persistence = \"aof-always\"").unwrap();
    assert_eq!(
        Options::of(&w.backend.options).persistence,
        Persistence::AofAlways
    );
    let e = with("redis", "persistense = \"aof-always\"").unwrap_err();
    assert!(
        e.starts_with("w/test.toml:10: backend.persistense: unknown field `persistense`")
            && e.contains("`lease`")
            && e.contains("`persistence`"),
        "{e}"
    );
    let e = with("redis", "persistence = \"aof\"").unwrap_err();
    assert!(
        e.starts_with("w/test.toml:10: backend.persistence: unknown variant `aof`")
            && e.contains("aof-always"),
        "{e}"
    );
    let e = with("etcd", "persistence = \"aof-always\"").unwrap_err();
    assert!(
        e.contains("backend.persistence: only redis runs with a persistence setting of lockcheck's; etcd has no such option"),
        "{e}"
    );
    // The keys an unknown key's error lists as every backend's are [backend]'s.
    for key in raw::BACKEND_KEYS
        .iter()
        .filter(|k| !["kind", "lease"].contains(k))
    {
        let e = with("redis", &format!("{key} = true"))
            .err()
            .unwrap_or_default();
        assert!(!e.contains("unknown field"), "{key}: {e}");
    }
    let e = with("redis-sentinel", "replica_acks = 3").unwrap_err();
    assert!(
        e.contains("backend.replica_acks: expected 1 to 2 (the replicas), found 3"),
        "{e}"
    );
}

#[test]
fn only_etcd_and_zookeeper_clients_are_pinned_to_a_follower() {
    let with = |kind: &str| {
        parse(&GOOD.replace(
            "kind = \"redis\"",
            &format!("kind = \"{kind}\"\nclient_endpoint = \"follower\""),
        ))
    };
    use lockcheck_servers::backend::OwnOptions;
    let options = with("etcd").unwrap().backend.options;
    assert_eq!(
        lockcheck_servers::backends::etcd::client::Options::of(&options).client_endpoint,
        Some(lockcheck_servers::backend::options::ClientEndpoint::Follower)
    );
    let options = with("zookeeper").unwrap().backend.options;
    assert_eq!(
        lockcheck_servers::backends::zookeeper::client::Options::of(&options).client_endpoint,
        Some(lockcheck_servers::backend::options::ClientEndpoint::Follower)
    );
    let e = format!("{:#}", with("redis").unwrap_err());
    assert!(
        e.contains("backend.client_endpoint") && e.contains("only etcd and zookeeper read it"),
        "{e}"
    );
}

#[test]
fn a_self_fencing_margin_must_leave_part_of_the_lease() {
    assert_eq!(parse(GOOD).unwrap().clients.self_fencing_margin_ms(), None);
    let with = |m: &str| {
        parse(&GOOD.replace(
            "count = 3",
            &format!("count = 3\nself_fencing_margin = \"{m}\""),
        ))
    };
    assert_eq!(
        with("200ms").unwrap().clients.self_fencing_margin_ms(),
        Some(200)
    );
    let e = format!("{:#}", with("1500ms").unwrap_err());
    assert!(e.contains("clients.self_fencing_margin"), "{e}");
}

#[test]
fn a_client_renewing_in_the_background_renews_within_its_lease_in_lock_mode_only() {
    let w = parse(GOOD).unwrap();
    assert_eq!((w.backend.renew, w.end), (Renew::Section, End::Duration));
    let with = |keys: &str| parse(&GOOD.replace("lease = \"1500ms\"", keys));
    // A third of the lease unless told, as a watchdog renews.
    let w = with("lease = \"1500ms\"\nrenew = \"background\"").unwrap();
    assert_eq!(w.backend.renew, Renew::Background);
    assert_eq!(
        w.backend.lease.renew_every,
        Some(Duration::from_millis(500))
    );
    let e = format!(
        "{:#}",
        with("lease = \"1500ms\"\nrenew = \"background\"\nrenew_every = \"2s\"").unwrap_err()
    );
    assert!(
        e.starts_with("w/test.toml: backend.renew_every: a client renewing in the background renews within its lease: expected less than 1500 ms, found 2000 ms"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        with("lease = \"1500ms\"\nrenew = \"always\"").unwrap_err()
    );
    assert!(e.contains("backend.renew: unknown variant `always`"), "{e}");
    let w = parse(&GOOD.replace("seed = 7", "seed = 7\nend = \"after-effect\"")).unwrap();
    assert_eq!(w.end, End::AfterEffect);
}

#[test]
fn a_full_workload_reads_with_defaults_filled_in() {
    let w = parse(GOOD).unwrap();
    assert_eq!(w.name, "test");
    assert_eq!(w.seed, 7);
    assert_eq!(w.backend.nodes, 1);
    assert!(w.backend.fencing_token);
    assert_eq!(w.backend.lease.ttl, Duration::from_millis(1500));
    assert_eq!(w.resource.fence, Fence::NotBelow);
    assert_eq!(w.resource.kind, resource::Kind::Lockcheck);
    assert_eq!(w.allow, vec![AnomalyKind::DoubleHolder]);
    assert_eq!(
        first::<PauseSpec>(&w),
        &PauseSpec {
            target: Target::Holder
        }
    );
    assert_eq!(w.faults[0].after, Duration::from_secs(1));
    assert_eq!(w.faults[0].interval, Some(Duration::from_secs(2)));
}

#[test]
fn the_resource_is_a_word_or_a_table_with_its_kind_and_fence() {
    let table = |t: &str| {
        parse(&format!(
            "{}\n[resource]\n{t}\n",
            GOOD.replace("resource = \"fenced\"\n", "")
        ))
    };
    let w = table("kind = \"postgres\"\nfence = \"<\"").unwrap();
    assert_eq!(
        w.resource,
        resource::Spec {
            kind: resource::Kind::Postgres,
            fence: Fence::Above
        }
    );
    let w = table("fence = \"none\"").unwrap();
    assert_eq!(w.resource.kind, resource::Kind::Lockcheck);
    assert_eq!(w.resource.fence.mode(), Mode::Unfenced);
    let e = format!(
        "{:#}",
        table("kind = \"postgres\"\nfence = \"<<\"").unwrap_err()
    );
    assert!(e.contains("resource.fence") && e.contains("`<=`"), "{e}");
    let e = format!(
        "{:#}",
        table("kind = \"postgres\"\nfence = \"<\"\nfenced = true").unwrap_err()
    );
    assert!(e.contains("resource.fenced: unknown field"), "{e}");
    let e = format!(
        "{:#}",
        parse(&GOOD.replace("\"fenced\"", "\"fencing\"")).unwrap_err()
    );
    assert!(
        e.contains("resource:") && e.contains("[resource] table"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        table("kind = \"postgres\"\nfence = \"<=\"")
            .and_then(|_| parse(&format!(
                "{}\n[resource]\nfence = \"<=\"\n",
                GOOD.replace("resource = \"fenced\"\n", "").replace(
                    "lease = \"1500ms\"",
                    "lease = \"1500ms\"\nfencing_token = false"
                )
            )))
            .unwrap_err()
    );
    assert!(e.contains("needs tokens"), "{e}");
}

#[test]
fn presets_are_usable_by_name() {
    let w = parse(&GOOD.replace("\"1500ms\"", "\"client-go\"")).unwrap();
    assert_eq!(w.backend.lease.ttl, Duration::from_secs(15));
    assert_eq!(w.backend.lease.renew_every, Some(Duration::from_secs(2)));
    let w = parse(&GOOD.replace("\"1500ms\"", "\"redis-docs\"")).unwrap();
    assert_eq!(w.backend.lease.ttl, Duration::from_millis(30000));
    let e = parse(&GOOD.replace("\"1500ms\"", "\"k8s\"")).unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.contains("w/test.toml:9: backend.lease:") && e.contains("client-go"),
        "{e}"
    );
}

#[test]
fn a_preset_fits_only_the_backends_its_users_run_it_on() {
    for preset in lease_presets() {
        // Patroni's clients only lead (an election, one per node): its presets
        // are read in a_patroni_workload_is_an_election_one_client_per_node_...
        for kind in BackendKind::ALL
            .into_iter()
            .filter(|&k| k != BackendKind::Patroni)
        {
            // Only the lease is under test: one node (or the backend's fixed
            // number), the backend's own token setting, a resource that needs none.
            let nodes = lockcheck_servers::cluster::recipe(kind)
                .fixed_nodes()
                .map_or(1, |_| lockcheck_servers::cluster::default_nodes(kind));
            let backend = format!(
                "[backend]\nnodes = {nodes}\nfencing_token = {}\nkind = \"{}\"",
                kind.token().is_some(),
                kind.name()
            );
            let text = GOOD
                .replace("[backend]\nkind = \"redis\"", &backend)
                .replace("\"1500ms\"", &format!("\"{}\"", preset.name))
                .replace("resource = \"fenced\"", "resource = \"unfenced\"");
            match parse(&text) {
                Ok(w) => {
                    assert!(kind.fits(preset), "{} on {kind:?}", preset.name);
                    assert_eq!(w.backend.lease.ttl, preset.ttl);
                    assert_eq!(w.backend.lease.preset, Some(preset));
                }
                Err(e) => {
                    let e = format!("{e:#}");
                    assert!(!kind.fits(preset), "{} on {kind:?}: {e}", preset.name);
                    assert!(
                        e.contains("w/test.toml:11: backend.lease: the preset")
                            && e.contains(preset.name)
                            && e.contains(&format!("not {}", kind.name())),
                        "{e}"
                    );
                }
            }
        }
    }
    // Every backend has a preset of its own users, beside the generic ones.
    for kind in BackendKind::ALL {
        assert!(!kind.lease_presets().is_empty(), "{kind:?}");
    }
}

#[test]
fn an_unknown_key_names_file_line_key_and_the_expected_keys() {
    let e = parse(&GOOD.replace("writes = 3", "writes = 3\nhodl = \"1s\"")).unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.contains("w/test.toml:17: critical_section.hodl: unknown field"),
        "{e}"
    );
    assert!(e.contains("hodl") && e.contains("hold"), "{e}");
}

#[test]
fn bad_values_name_the_key_and_what_is_expected() {
    let e = format!(
        "{:#}",
        parse(&GOOD.replace("\"300ms\"", "300")).unwrap_err()
    );
    assert!(
        e.contains(":15: critical_section.hold:") && e.contains("\"500ms\""),
        "{e}"
    );
    assert!(!e.contains("expected expected"), "{e}");
    let e = format!(
        "{:#}",
        parse(&GOOD.replace("\"holder\"", "\"leader\"")).unwrap_err()
    );
    assert!(e.contains("target") && e.contains("client-0"), "{e}");
    let e = format!(
        "{:#}",
        parse(&GOOD.replace("\"holder\"", "\"client-5\"")).unwrap_err()
    );
    assert!(
        e.contains("faults[0].target") && e.contains("3 clients"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        parse(&GOOD.replace("kind = \"redis\"", "kind = \"redlock\"")).unwrap_err()
    );
    assert!(e.contains("backend.fencing_token"), "{e}");
    let e = format!(
        "{:#}",
        parse(&GOOD.replace("\"double-holder\"", "\"two-holders\"")).unwrap_err()
    );
    assert!(
        e.contains("allow") && e.contains("stale-write-accepted"),
        "{e}"
    );
}

#[test]
fn a_missing_key_names_the_table_that_lacks_it() {
    let e = format!(
        "{:#}",
        parse(&GOOD.replace("writes = 3\n", "")).unwrap_err()
    );
    assert!(
        e.contains("w/test.toml:14: [critical_section]: missing field `writes`"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        parse(&GOOD.replace("duration = \"10s\"\n", "")).unwrap_err()
    );
    assert!(
        e.contains("w/test.toml: missing field `duration` (at the top level)"),
        "{e}"
    );
}

#[test]
fn the_documented_example_reads() {
    let example: String = include_str!("mod.rs")
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .skip_while(|l| !l.contains("```toml"))
        .skip(1)
        .take_while(|l| !l.contains("```"))
        .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
        .collect();
    let w = parse(&example).unwrap_or_else(|e| panic!("{e:#}\n{example}"));
    assert_eq!(w.name, "redis-pause");
    assert_eq!(
        w.backend.lease.renew_every,
        Some(Duration::from_millis(300))
    );
    assert_eq!(w.faults.len(), 1);
}

#[test]
fn durations_need_their_unit() {
    assert_eq!(
        "250ms".parse::<Dur>().unwrap().0,
        Duration::from_millis(250)
    );
    assert_eq!(
        "1.5s".parse::<Dur>().unwrap().0,
        Duration::from_millis(1500)
    );
    assert_eq!("2m".parse::<Dur>().unwrap().0, Duration::from_secs(120));
    assert!("2".parse::<Dur>().is_err());
    assert!("s".parse::<Dur>().is_err());
    assert!("-1s".parse::<Dur>().is_err());
}

#[test]
fn a_client_command_is_taken_from_the_workload_folder_and_library_self_fencing_needs_one() {
    assert!(parse(GOOD).unwrap().client.is_none());
    let with = |client: &str, clients: &str| {
        parse(&format!(
            "{}\n{client}",
            GOOD.replace("count = 3", &format!("count = 3\n{clients}"))
        ))
    };
    let w = with("[client]\ncommand = [\"python3\", \"lock.py\"]", "").unwrap();
    let program = w.client.unwrap();
    assert_eq!(program.argv, ["python3", "lock.py"]);
    assert!(program.dir.is_absolute() && program.dir.ends_with("w"));
    assert!(!w.clients.self_fencing_library);
    let w = with(
        "[client]\ncommand = [\"./lock\"]",
        "self_fencing = \"library\"",
    )
    .unwrap();
    assert!(w.clients.self_fencing_library);
    let e = format!("{:#}", with("", "self_fencing = \"library\"").unwrap_err());
    assert!(
        e.contains("clients.self_fencing") && e.contains("[client]"),
        "{e}"
    );
    let e = format!("{:#}", with("[client]\ncommand = []", "").unwrap_err());
    assert!(e.contains("client.command"), "{e}");
    // A folder of its own to run in; one that is not there is refused.
    let w = with("[client]\ncommand = [\"./lock\"]\ndir = \"/tmp\"", "").unwrap();
    assert_eq!(w.client.unwrap().dir, Path::new("/tmp"));
    let e = format!(
        "{:#}",
        with(
            "[client]\ncommand = [\"./lock\"]\ndir = \"/no/such/lockcheck\"",
            ""
        )
        .unwrap_err()
    );
    assert!(
        e.contains("client.dir") && e.contains("no such folder"),
        "{e}"
    );
    let e = format!("{:#}", with("[client]\nprogram = \"x\"", "").unwrap_err());
    assert!(e.contains("program"), "{e}");
    let e = format!("{:#}", with("", "self_fencing = \"lease\"").unwrap_err());
    assert!(e.contains("library"), "{e}");
}

#[test]
fn a_single_instance_backend_runs_one_node_whatever_the_runtime() {
    let with = |backend: &str| {
        parse(
            &GOOD
                .replace("kind = \"redis\"", backend)
                .replace("resource = \"fenced\"", "resource = \"unfenced\""),
        )
    };
    let e = format!("{:#}", with("kind = \"redis\"\nnodes = 2").unwrap_err());
    assert!(
        e.contains("backend.nodes: redis is a single instance: expected 1, found 2")
            && e.contains("redlock"),
        "{e}"
    );
    let w = with("kind = \"redlock\"\nnodes = 3\nfencing_token = false").unwrap();
    assert_eq!(w.backend.nodes, 3, "redlock takes any number");
    let e = format!(
        "{:#}",
        parse(&format!(
            "runtime = \"external\"\n{}",
            GOOD.replace(
                "kind = \"redis\"",
                "kind = \"redis\"\nendpoints = [\"127.0.0.1:1\", \"127.0.0.1:2\"]"
            )
        ))
        .unwrap_err()
    );
    assert!(
        e.contains("backend.endpoints: redis is a single instance: expected 1 address, found 2"),
        "{e}"
    );
}

#[test]
fn an_incident_names_its_source_and_rule_and_nothing_else() {
    let w = parse(&format!(
        "{GOOD}\n[incident]\nsource = \"a vendor page\"\nrule = \"fence by token\"\n"
    ))
    .unwrap();
    assert_eq!(
        w.incident,
        Some(lockcheck_rundir::Incident {
            source: "a vendor page".into(),
            rule: "fence by token".into(),
        })
    );
    assert_eq!(parse(GOOD).unwrap().incident, None);
    let lines = GOOD.lines().count();
    let e = format!(
        "{:#}",
        parse(&format!(
            "{GOOD}[incident]\nsource = \"a page\"\nrule = \"r\"\nseverity = \"high\"\n"
        ))
        .unwrap_err()
    );
    assert!(
        e.starts_with(&format!(
            "w/test.toml:{}: incident.severity: unknown field",
            lines + 4
        )),
        "{e}"
    );
    let e = format!(
        "{:#}",
        parse(&format!("{GOOD}[incident]\nsource = \"a page\"\n")).unwrap_err()
    );
    assert!(e.contains("[incident]") && e.contains("rule"), "{e}");
    let e = format!(
        "{:#}",
        parse(&format!("{GOOD}[incident]\nsource = \" \"\nrule = \"r\"\n")).unwrap_err()
    );
    assert!(
        e.starts_with(&format!(
            "w/test.toml:{}: incident.source: expected some words",
            lines + 2
        )),
        "{e}"
    );
}

#[test]
fn a_patroni_workload_is_an_election_one_client_per_node_on_an_unfenced_record() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../workloads/incidents/patroni-split-brain-api-check.toml"),
    )
    .unwrap();
    let w = parse(&text).unwrap();
    use lockcheck_servers::backend::OwnOptions;
    assert_eq!(
        lockcheck_servers::backends::patroni::client::Options::of(&w.backend.options).primary_check,
        lockcheck_servers::backends::patroni::client::PrimaryCheck::PatroniApi
    );
    let refused =
        |from: &str, to: &str| format!("{:#}", parse(&text.replace(from, to)).unwrap_err());
    let preset = parse(&text.replace("lease = \"5s\"", "lease = \"patroni\"")).unwrap();
    assert_eq!(preset.backend.lease.ttl, Duration::from_secs(30));
    let e = refused("lease = \"5s\"", "lease = \"redis-docs\"");
    assert!(e.contains("the preset redis-docs"), "{e}");
    let e = refused("mode = \"election\"\n", "");
    assert!(
        e.contains("w/test.toml: mode: patroni hands out no lock"),
        "{e}"
    );
    let e = refused("resource = \"unfenced\"", "resource = \"fenced\"");
    assert!(
        e.contains("w/test.toml: resource: a patroni leader acts by committing on its own node"),
        "{e}"
    );
    let e = refused("count = 3", "count = 2");
    assert!(e.contains("w/test.toml: clients.count: each patroni client is one node's application: expected 3 (backend.nodes), found 2"), "{e}");
    let e = refused("lease = \"5s\"", "lease = \"2500ms\"");
    assert!(e.contains("w/test.toml: backend.lease: Patroni's leader key TTL is whole seconds, at least 3: found 2500 ms"), "{e}");
    let e = format!(
        "{:#}",
        parse(&GOOD.replace(
            "lease = \"1500ms\"",
            "lease = \"1500ms\"\nprimary_check = \"postgres\""
        ))
        .unwrap_err()
    );
    assert!(
        e.contains("w/test.toml: backend.primary_check: only for kind = \"patroni\""),
        "{e}"
    );
}

/// An election's keys and their refusals (election.rs).
mod election {
    use crate::workload::{ClientMode, OnLeaseLoss, Workload};
    use std::path::Path;
    use std::time::Duration;

    const LEADER: &str = r#"mode = "election"
duration = "8s"

[backend]
kind = "etcd"
lease = "2s"

[clients]
count = 3
on_lease_loss = "exit"

[leader]
act_every = "150ms"
"#;

    fn parse(text: &str) -> anyhow::Result<Workload> {
        Workload::parse(text, Path::new("w/leader.toml"))
    }

    fn refused(text: &str) -> String {
        format!("{:#}", parse(text).expect_err("refused"))
    }

    #[test]
    fn an_election_reads_with_its_rhythm_and_renews_a_third_of_the_lease_by_default() {
        let w = parse(LEADER).unwrap();
        let ClientMode::Election(e) = &w.mode else {
            panic!("not an election: {:?}", w.mode)
        };
        assert_eq!(e.act_every, Duration::from_millis(150));
        assert_eq!(e.renew_every, Duration::from_secs(2) / 3);
        assert_eq!(e.on_lease_loss, OnLeaseLoss::Exit);
        let w = parse(&LEADER.replace("on_lease_loss = \"exit\"\n", "")).unwrap();
        assert!(
            matches!(&w.mode, ClientMode::Election(e) if e.on_lease_loss == OnLeaseLoss::Ignore)
        );
    }

    #[test]
    fn the_other_modes_keys_are_refused_naming_the_file_the_line_and_the_key() {
        let e = refused(&format!(
            "{LEADER}\n[critical_section]\nhold = \"1s\"\nwrites = 1\n"
        ));
        assert!(
            e.starts_with("w/leader.toml:15: critical_section: a leader holds"),
            "{e}"
        );
        let lock = LEADER.replace("mode = \"election\"\n", "");
        let e = refused(&lock);
        assert!(
            e.starts_with("w/leader.toml:9: clients.on_lease_loss: only for mode = \"election\""),
            "{e}"
        );
        let e = refused(&lock.replace("on_lease_loss = \"exit\"\n", ""));
        assert!(
            e.starts_with("w/leader.toml:10: leader: only for mode = \"election\""),
            "{e}"
        );
        let e = refused(
            &lock
                .replace("on_lease_loss = \"exit\"\n", "")
                .replace("[leader]\nact_every = \"150ms\"\n", ""),
        );
        assert!(
            e.starts_with("w/leader.toml: critical_section: missing"),
            "{e}"
        );
    }

    #[test]
    fn an_election_needs_a_backend_with_a_recipe_and_sane_values() {
        let e = refused(&LEADER.replace("kind = \"etcd\"", "kind = \"mariadb\""));
        assert!(
            e.starts_with("w/leader.toml:1: mode: mariadb has no leader-election recipe"),
            "{e}"
        );
        assert!(e.contains("etcd, zookeeper, redis, nats"), "{e}");
        let e = refused(&LEADER.replace("\"exit\"", "\"quit\""));
        assert!(
            e.starts_with("w/leader.toml:10: clients.on_lease_loss: unknown variant `quit`"),
            "{e}"
        );
        let e = refused(&LEADER.replace("\"150ms\"", "\"0ms\""));
        assert!(
            e.starts_with("w/leader.toml:13: leader.act_every: expected a period longer than 0"),
            "{e}"
        );
        let e = refused(&LEADER.replace("lease = \"2s\"", "lease = \"2s\"\nrenew_every = \"2s\""));
        assert!(
            e.starts_with("w/leader.toml: backend.renew_every: a leader renews within its lease"),
            "{e}"
        );
        let e =
            refused(&LEADER.replace("lease = \"2s\"", "lease = \"2s\"\nrenew = \"background\""));
        assert!(
            e.starts_with("w/leader.toml: backend.renew: a leader renews its own lease"),
            "{e}"
        );
        let e = refused(&LEADER.replace("act_every", "acts_every"));
        assert!(
            e.contains("w/leader.toml:13: leader.acts_every: unknown field"),
            "{e}"
        );
    }
}
