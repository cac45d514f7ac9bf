use super::*;
use lockcheck_check::provoked::{Provocation, Provoked};
use lockcheck_check::Validity;
use resource::{Fence, Kind, Mode};

fn verdict() -> Verdict {
    Verdict {
        valid: Validity::Valid,
        model: "lock".into(),
        anomalies: vec![],
        notes: vec!["a note".into()],
    }
}

/// A run's record with every optional field given.
fn full() -> RunReport {
    RunReport {
        verdict: verdict(),
        workload: "redis-pause-fenced".into(),
        seed: 7,
        backend: "redis".into(),
        resource: Mode::Fenced,
        resource_kind: Kind::Lockcheck,
        fence: Fence::NotBelow,
        figures: Figures {
            run_time_s: 2.5,
            ops: [("acquire".to_string(), [("ok".to_string(), 3)].into())].into(),
            acquire_latency_ms: Percentiles::of(vec![1.0, 2.0]),
            write_latency_ms: None,
            critical_sections: 3,
            faults: 1,
            unreachable: vec!["n1: unreachable".into()],
            monotonic_offsets: vec![],
            writes_rejected_by_fence: 1,
            first_anomaly_s: None,
        },
        run_dir: "results/redis-pause-fenced-1".into(),
        workload_dir: Some("workloads".into()),
        self_fencing_margin_ms: Some(150),
        mode: Some(ELECTION.into()),
        on_lease_loss: Some(OnLeaseLoss::Exit),
        incident: Some(Incident {
            source: "a vendor page".into(),
            rule: "fence by token".into(),
        }),
        client: Some(ClientInfo {
            command: vec!["adapter".into()],
            library: Some("lib 1.0".into()),
            ops: vec!["renew".into()],
            self_fencing: None,
        }),
        provoked: Some(Provoked {
            class: Provocation::Provoked,
            deposed: 1,
            late_writes: 1,
            late_writes_reached: 1,
            faults_started: 1,
            deposed_before_fault: 0,
        }),
        runtime: Some("docker".into()),
        image: Some("redis:7".into()),
        faults: FaultAccount {
            planned: 2,
            started: 1,
            missed: vec![MissedFault {
                fault: 1,
                kind: "kill".into(),
                planned: 1,
                started: 0,
                why: "due at 5.0 s".into(),
            }],
            allowed: false,
            unseen: None,
            out_of_reach: false,
        },
        missed_faults: true,
    }
}

fn written(file: &VerdictFile) -> String {
    let dir = tempfile::tempdir().unwrap();
    file.write(dir.path()).unwrap();
    std::fs::read_to_string(dir.path().join(VERDICT_FILE)).unwrap()
}

#[test]
fn a_run_record_written_reads_back_equal() {
    let file = VerdictFile::of_run(full());
    let dir = tempfile::tempdir().unwrap();
    file.write(dir.path()).unwrap();
    assert_eq!(read(dir.path()).unwrap(), Some(file));
    assert_eq!(read_run(dir.path()).unwrap(), full());
}

#[test]
fn the_file_of_a_run_is_its_record_as_serde_writes_it() {
    // What the runner wrote before the record had a crate: the report alone.
    let before = serde_json::to_string_pretty(&full()).unwrap();
    assert_eq!(written(&VerdictFile::of_run(full())), before);
}

#[test]
fn a_record_without_the_optional_fields_reads_with_defaults() {
    let text = r#"{"valid": true, "model": "lock", "anomalies": [],
        "workload": "w", "seed": 1, "backend": "redis", "resource": "unfenced",
        "figures": {"run_time_s": 1.0, "ops": {}, "acquire_latency_ms": null,
                    "critical_sections": 0, "faults": 0,
                    "writes_rejected_by_fence": 0, "first_anomaly_s": null},
        "run_dir": "results/w-1"}"#;
    let file = VerdictFile::parse(text).unwrap();
    let run = file.run().unwrap();
    assert_eq!(run.verdict.notes, Vec::<String>::new());
    assert_eq!(run.resource_kind, Kind::Lockcheck);
    assert_eq!(run.fence, Fence::Off, "an unfenced resource had no fence");
    assert_eq!(run.faults, FaultAccount::default());
    assert!(!run.missed_faults && run.provoked.is_none() && run.runtime.is_none());
    assert!(file.analysis.is_none() && file.other.is_empty());
    // Written back, it keeps the keys every version wrote and gains the defaults.
    let again: Value = serde_json::from_str(&written(&file)).unwrap();
    assert_eq!(again["fence"], "none");
    assert!(again.get("incident").is_none());
    let fenced = text.replace("\"unfenced\"", "\"fenced\"");
    let fenced = VerdictFile::parse(&fenced).unwrap();
    assert_eq!(fenced.run().unwrap().fence, Fence::NotBelow);
}

#[test]
fn a_verdict_alone_keeps_its_analysis_and_the_keys_it_does_not_know() {
    let text = r#"{"valid": false, "model": "lock", "anomalies": [], "notes": [],
        "analysis": {"guidance": {"title": "t"}},
        "run": {"backend": "redis", "fenced": true}}"#;
    let file = VerdictFile::parse(text).unwrap();
    assert!(file.run().is_none());
    assert_eq!(file.verdict().valid, Validity::Invalid);
    assert_eq!(file.analysis.as_ref().unwrap()["guidance"]["title"], "t");
    assert_eq!(file.other["run"]["fenced"], true);
    let again: Value = serde_json::from_str(&written(&file)).unwrap();
    let want: Value = serde_json::from_str(text).unwrap();
    assert_eq!(again, want);
}

#[test]
fn a_field_that_does_not_read_is_named_with_the_file() {
    let mut doc = serde_json::to_value(full()).unwrap();
    doc["seed"] = Value::from("seven");
    let e = VerdictFile::parse(&doc.to_string()).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("seed"), "{e}");
    doc["seed"] = Value::from(7);
    doc["figures"]["ops"] = Value::from("many");
    let e = VerdictFile::parse(&doc.to_string()).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("figures"), "{e}");
    doc.as_object_mut().unwrap().remove("figures");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(VERDICT_FILE), doc.to_string()).unwrap();
    let e = read(dir.path()).unwrap_err().to_string();
    assert!(e.contains("verdict.json: `figures`: missing ("), "{e}");
}

#[test]
fn a_directory_without_a_run_record_is_no_run() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(read(dir.path()).unwrap(), None);
    assert!(read_run(dir.path()).is_err());
    let alone = VerdictFile {
        recorded: Recorded::Verdict(verdict()),
        analysis: None,
        other: Map::new(),
    };
    alone.write(dir.path()).unwrap();
    let e = read_run(dir.path()).unwrap_err().to_string();
    assert!(e.contains("`workload`"), "{e}");
}

/// A field missing from the object itself is named; one missing further in is
/// blamed on the field that holds it, as is a value of the wrong type.
#[test]
fn the_field_to_blame_is_the_one_at_this_level() {
    let blame = |value: Value| {
        let map = value.as_object().unwrap().clone();
        let error = serde_json::from_value::<RunReport>(value).unwrap_err();
        field_to_blame::<RunReport>(&map, &error)
    };
    let whole = serde_json::to_value(full()).unwrap();
    let mut v = whole.clone();
    v.as_object_mut().unwrap().remove("seed");
    assert_eq!(blame(v).as_deref(), Some("seed"));
    let mut v = whole.clone();
    v["figures"].as_object_mut().unwrap().remove("run_time_s");
    assert_eq!(blame(v).as_deref(), Some("figures"));
    let mut v = whole;
    v["seed"] = "seven".into();
    assert_eq!(blame(v).as_deref(), Some("seed"));
}
