//! The `[[faults]]` kinds of the fault catalogue, as workload files write them.

use lockcheck::fault::clock::ClockChange;
use lockcheck::fault::node::NodeTarget;
use lockcheck::run::workload::{FaultKind, Workload};
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
    let f = &w.faults[0];
    assert_eq!(
        (f.kind, &f.nodes),
        (FaultKind::Clock, &NodeTarget::Majority)
    );
    assert_eq!(
        f.clock,
        Some(ClockChange::Jump {
            offset_ns: 20_000_000_000
        })
    );
    let w = parse("kind = \"clock\"\nnodes = \"n2\"\nrate = 0.5\nduration = \"1s\"").unwrap();
    assert_eq!(w.faults[0].clock, Some(ClockChange::Rate { rate: 0.5 }));
    let w = parse("kind = \"clock\"\nnodes = \"all\"\noffset2 = \"-1500ms\"\nperiod = \"20ms\"\nduration = \"1s\"").unwrap();
    assert_eq!(
        w.faults[0].clock,
        Some(ClockChange::Strobe {
            offset_ns: 0,
            offset2_ns: -1_500_000_000,
            period: Duration::from_millis(20)
        })
    );
}

#[test]
fn node_faults_name_nodes_and_client_faults_name_clients() {
    let w = parse("kind = \"kill\"\nnodes = \"primary\"\nwipe = true\nduration = \"1s\"").unwrap();
    assert!(w.faults[0].wipe);
    assert_eq!(w.faults[0].nodes, NodeTarget::Primary);
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
fn the_shipped_fault_workloads_load() {
    for name in ["redlock-clock-jump", "redis-kill-restart"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("workloads/{name}.toml"));
        Workload::load(&path).unwrap_or_else(|e| panic!("{name}: {e:#}"));
    }
}
