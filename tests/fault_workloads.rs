//! The `[[faults]]` kinds of the fault catalogue, as workload files write them.

use lockcheck::fault::clock::{ClockChange, ClockSpec, Clocks};
use lockcheck::fault::kill::KillSpec;
use lockcheck::fault::latency::{LatencySpec, Slowness};
use lockcheck::fault::node::NodeTarget;
use lockcheck::fault::partition::PartitionSpec;
use lockcheck::fault::shape::Cut;
use lockcheck::fault::spec::Spec;
use lockcheck::run::workload::Workload;
use std::path::Path;
use std::time::Duration;

const BASE: &str = r#"
duration = "5s"
[backend]
kind = "redlock"
lease = "1s"
[clients]
count = 2
[critical_section]
hold = "100ms"
writes = 1
"#;

/// The spec of the workload's first fault, as a `T`.
fn first<T: Spec>(w: &Workload) -> &T {
    w.faults[0]
        .spec
        .downcast()
        .unwrap_or_else(|| panic!("{:?}", w.faults[0].spec))
}

fn parse(faults: &str) -> anyhow::Result<Workload> {
    Workload::parse(
        &format!("{BASE}\n[[faults]]\n{faults}"),
        Path::new("w.toml"),
    )
}

#[test]
fn clock_entries_say_jump_rate_or_strobe() {
    let w = parse("kind = \"clock\"\nnodes = \"majority\"\noffset = \"+20s\"\nduration = \"1s\"")
        .unwrap();
    assert_eq!(
        first::<ClockSpec>(&w),
        &ClockSpec {
            clocks: Clocks::Nodes(NodeTarget::Majority),
            change: ClockChange::Jump {
                offset_ns: 20_000_000_000
            }
        }
    );
    let w = parse("kind = \"clock\"\nnodes = \"n2\"\nrate = 0.5\nduration = \"1s\"").unwrap();
    assert_eq!(
        first::<ClockSpec>(&w).change,
        ClockChange::Rate { rate: 0.5 }
    );
    let w = parse("kind = \"clock\"\nnodes = \"all\"\noffset2 = \"-1500ms\"\nperiod = \"20ms\"\nduration = \"1s\"").unwrap();
    assert_eq!(
        first::<ClockSpec>(&w).change,
        ClockChange::Strobe {
            offset_ns: 0,
            offset2_ns: -1_500_000_000,
            period: Duration::from_millis(20)
        }
    );
}

#[test]
fn node_faults_name_nodes_and_client_faults_name_clients() {
    let w = parse("kind = \"kill\"\nnodes = \"primary\"\nwipe = true\nduration = \"1s\"").unwrap();
    assert_eq!(
        first::<KillSpec>(&w),
        &KillSpec {
            nodes: NodeTarget::Primary,
            wipe: true
        }
    );
    for (bad, key) in [
        (
            "kind = \"kill\"\ntarget = \"holder\"\nduration = \"1s\"",
            "faults[0].target",
        ),
        (
            "kind = \"pause\"\nnodes = \"one\"\ntarget = \"holder\"\nduration = \"1s\"",
            "faults[0].nodes",
        ),
        (
            "kind = \"pause-node\"\nnodes = \"one\"\nwipe = true\nduration = \"1s\"",
            "faults[0].wipe",
        ),
        (
            "kind = \"clock\"\nnodes = \"one\"\nduration = \"1s\"",
            "faults[0].kind",
        ),
        (
            "kind = \"clock\"\nnodes = \"one\"\nrate = -1.0\nduration = \"1s\"",
            "faults[0].rate",
        ),
        (
            "kind = \"kill\"\nnodes = \"one\"\noffset = \"1s\"\nduration = \"1s\"",
            "faults[0].offset",
        ),
        (
            "kind = \"kill\"\nnodes = \"most\"\nduration = \"1s\"",
            "\"most\"",
        ),
    ] {
        let e = format!("{:#}", parse(bad).unwrap_err());
        assert!(e.contains(key), "{bad}: {e}");
    }
}

#[test]
fn link_entries_cut_or_slow() {
    use lockcheck::fault::link_fault::Links;
    use lockcheck::fault::Target;
    let w = parse("kind = \"partition\"\nnodes = \"primary\"\nduration = \"1s\"").unwrap();
    assert_eq!(
        first::<PartitionSpec>(&w),
        &PartitionSpec {
            links: Links::ToNodes(NodeTarget::Primary),
            cut: Cut::Blackhole
        },
        "a black hole unless told"
    );
    let w = parse("kind = \"partition\"\ntarget = \"holder\"\ncut = \"reset\"\nduration = \"1s\"")
        .unwrap();
    assert_eq!(
        first::<PartitionSpec>(&w),
        &PartitionSpec {
            links: Links::FromClient(Target::Holder),
            cut: Cut::Reset
        }
    );
    assert_eq!(
        *w.faults[0].spec.fault(w.faults[0].duration).target(),
        Target::Holder,
        "armed on the holder's acquire"
    );
    let w = parse("kind = \"latency\"\nnodes = \"all\"\ndelay = \"50ms\"\njitter = \"5ms\"\nduration = \"1s\"").unwrap();
    assert_eq!(
        first::<LatencySpec>(&w),
        &LatencySpec {
            links: Links::ToNodes(NodeTarget::All),
            slowness: Slowness {
                delay: Duration::from_millis(50),
                jitter: Duration::from_millis(5)
            }
        }
    );
    for (bad, key) in [
        ("kind = \"partition\"\nduration = \"1s\"", "faults[0].nodes"),
        ("kind = \"partition\"\nnodes = \"all\"\ntarget = \"holder\"\nduration = \"1s\"", "faults[0].nodes"),
        ("kind = \"latency\"\nnodes = \"all\"\nduration = \"1s\"", "faults[0].delay"),
        ("kind = \"latency\"\nnodes = \"all\"\ndelay = \"5ms\"\ncut = \"reset\"\nduration = \"1s\"", "faults[0].cut"),
        ("kind = \"kill\"\nnodes = \"all\"\njitter = \"5ms\"\nduration = \"1s\"", "faults[0].jitter"),
    ] {
        let e = format!("{:#}", parse(bad).unwrap_err());
        assert!(e.contains(key), "{bad}: {e}");
    }
}

#[test]
fn the_shipped_fault_workloads_load() {
    for name in [
        "redlock-clock-jump",
        "redis-kill-restart",
        "etcd-partition-leader",
        "etcd-holder-node-killed",
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("workloads/{name}.toml"));
        Workload::load(&path).unwrap_or_else(|e| panic!("{name}: {e:#}"));
    }
}

#[test]
fn a_schedule_lays_the_faults_out_from_the_seed() {
    use lockcheck::fault::schedule::{timeline, Mix};
    let text = format!(
        "{BASE}\n[schedule]\nmix = \"random\"\ngap = \"500ms\"\nheal = \"1s\"\n\
         [[faults]]\nkind = \"kill\"\nnodes = \"one\"\nduration = \"300ms\"\n\
         [[faults]]\nkind = \"pause-node\"\nnodes = \"minority\"\nduration = \"400ms\"\n"
    );
    let w = Workload::parse(&text, Path::new("w.toml")).unwrap();
    let s = w.schedule.unwrap();
    assert_eq!(
        s.mix,
        Mix::Random {
            mean_gap: Duration::from_millis(500)
        }
    );
    let plan = s.plan(w.duration);
    let durations: Vec<Duration> = w.faults.iter().map(|f| f.duration).collect();
    let slots = timeline(&durations, &plan, w.seed).unwrap();
    assert!(slots.len() >= 3, "{slots:?}");
    let last = slots.last().unwrap();
    assert!(
        last.at + last.duration <= Duration::from_secs(4),
        "healed a second before the end"
    );

    let timed = text.replace(
        "duration = \"300ms\"",
        "duration = \"300ms\"\nafter = \"1s\"",
    );
    let e = format!(
        "{:#}",
        Workload::parse(&timed, Path::new("w.toml")).unwrap_err()
    );
    assert!(e.contains("faults[0]") && e.contains("[schedule]"), "{e}");
    let impossible = text.replace("heal = \"1s\"", "heal = \"9s\"");
    let e = format!(
        "{:#}",
        Workload::parse(&impossible, Path::new("w.toml")).unwrap_err()
    );
    assert!(e.contains("schedule"), "{e}");
}

/// The fault catalogue's example in the workload docs reads, every kind of it.
#[test]
fn the_documented_fault_catalogue_reads() {
    let source = include_str!("../crates/lockcheck-run/src/workload/mod.rs");
    let example: String = source
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .skip_while(|l| !l.contains("The fault catalogue"))
        .skip_while(|l| !l.contains("```toml"))
        .skip(1)
        .take_while(|l| !l.contains("```"))
        .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
        .collect();
    // Node links are cut in the nodes' network namespaces; the run is long
    // enough for the schedule to start every fault of the catalogue.
    let base = BASE
        .replace("[backend]\n", "[backend]\nnetwork = \"namespaces\"\n")
        .replace("duration = \"5s\"", "duration = \"120s\"");
    let w = Workload::parse(&format!("{base}\n{example}"), Path::new("w.toml"))
        .unwrap_or_else(|e| panic!("{e:#}\n{example}"));
    let kinds: Vec<&str> = w.faults.iter().map(|f| f.name()).collect();
    assert_eq!(
        kinds,
        [
            "pause-node",
            "kill",
            "clock",
            "partition",
            "partition-nodes",
            "latency",
            "latency-nodes",
            "disk-full"
        ]
    );
    assert!(w.schedule.is_some());
    // With the client pause, the example shows every kind of the catalogue.
    let pause = parse("kind = \"pause\"\ntarget = \"holder\"\nduration = \"1s\"").unwrap();
    for kind in lockcheck::fault::catalogue::CATALOGUE {
        assert!(
            w.faults
                .iter()
                .chain(&pause.faults)
                .any(|f| f.name() == kind.name),
            "{} is not in the documented example",
            kind.name
        );
        // Each records a period the report draws: a start and an end of one
        // family of history::fault_ops.
        let ops = lockcheck::history::fault_ops::started_by(kind.ops.start)
            .unwrap_or_else(|| panic!("{}: `{}` opens no band", kind.name, kind.ops.start));
        assert_eq!(ops, kind.ops, "{}", kind.name);
    }
}
