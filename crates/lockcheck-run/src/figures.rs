//! The run's figures, for `verdict.json` and the summary: ops by kind and outcome,
//! acquire latency, critical sections completed, and when the first anomaly happened.
//! A pure function of the history and the verdict.

use lockcheck_check::Verdict;
use lockcheck_history::{f, fault_ops, History, Op, OpType, Process};
use std::collections::BTreeMap;

pub use lockcheck_rundir::{Figures, Percentiles};

fn outcome_name(kind: OpType) -> &'static str {
    match kind {
        OpType::Ok => "ok",
        OpType::Fail => "fail",
        OpType::Info | OpType::Invoke => "info",
    }
}

/// The figures of a run's history, judged by `verdict`.
pub fn of(history: &History, verdict: &Verdict) -> Figures {
    let ops = &history.ops;
    let mut counts: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut latencies = Vec::new();
    let mut write_latencies = Vec::new();
    for (invoke, done) in history.pairs() {
        let inv = &ops[invoke];
        let outcome = done.map_or(OpType::Info, |d| ops[d].kind);
        *counts
            .entry(inv.f.clone())
            .or_default()
            .entry(outcome_name(outcome).into())
            .or_default() += 1;
        let Some(d) = done else { continue };
        let took = ops[d].time.saturating_sub(inv.time) as f64 / 1e6;
        if inv.f == f::ACQUIRE && outcome == OpType::Ok {
            latencies.push(took);
        }
        let answered = outcome == OpType::Ok
            || ops[d].error.as_deref() == Some(lockcheck_resource::STALE_TOKEN);
        if inv.f == f::WRITE && answered {
            write_latencies.push(took);
        }
    }
    // A section counts once its holder's release succeeds.
    let mut holding = std::collections::HashSet::new();
    let mut sections = 0;
    let mut faults = 0;
    let mut unreachable = Vec::new();
    let mut monotonic_offsets = Vec::new();
    let mut rejected = 0;
    for op in ops.iter().filter(|o| o.kind.is_completion()) {
        match (op.process, op.f.as_str(), op.kind) {
            (Process::Nemesis, _, _) => {
                // A time namespace is how the whole run's servers were started,
                // not a fault that began: it shows under monotonic_offsets.
                let shifted_at_start = op.value["method"] == "time-namespace";
                faults += u64::from(fault_ops::started_by(&op.f).is_some() && !shifted_at_start);
                if op.value["method"] == "time-namespace" {
                    if let Some(ms) = op.value["monotonic_offset_ms"].as_i64() {
                        let nodes = op.value["targets"].as_array().into_iter().flatten();
                        for n in nodes.filter_map(|n| n.as_str()) {
                            monotonic_offsets.push(format!(
                                "{n}: monotonic {ms:+} ms from start (time namespace)"
                            ));
                        }
                    }
                }
                let missed = op.value.get("unreachable");
                for m in missed.and_then(|m| m.as_array()).into_iter().flatten() {
                    let said = format!(
                        "{}: {}",
                        m["node"].as_str().unwrap_or("?"),
                        m["why"].as_str().unwrap_or("unreachable")
                    );
                    if !unreachable.contains(&said) {
                        unreachable.push(said);
                    }
                }
            }
            (Process::Client(p), f::ACQUIRE, OpType::Ok) => {
                holding.insert(p);
            }
            (Process::Client(p), f::RELEASE, OpType::Ok) => {
                sections += u64::from(holding.remove(&p));
            }
            (Process::Client(_), f::WRITE, OpType::Fail) => {
                rejected += u64::from(op.error.as_deref() == Some(lockcheck_resource::STALE_TOKEN))
            }
            _ => {}
        }
    }
    let span = match (ops.first(), ops.last()) {
        (Some(a), Some(b)) => b.time.saturating_sub(a.time),
        _ => 0,
    };
    Figures {
        run_time_s: span as f64 / 1e9,
        ops: counts,
        acquire_latency_ms: Percentiles::of(latencies),
        write_latency_ms: Percentiles::of(write_latencies),
        critical_sections: sections,
        faults,
        unreachable,
        monotonic_offsets,
        writes_rejected_by_fence: rejected,
        first_anomaly_s: verdict
            .anomalies
            .iter()
            .filter(|a| !a.allowed)
            .filter_map(|a| a.time)
            .min()
            .map(|t| t as f64 / 1e9),
    }
}

/// Why a run saw nothing of its faults, if it did not: no acquire succeeded after
/// the first fault began. A lock breaks under a fault only through a grant made
/// after it starts (to a second client while the first is paused, cut off, behind
/// a skewed clock, or on a restarted server), so a run without one tested nothing
/// of it, whatever its verdict: a service down from the fault to the end, a server
/// that came back only as the run ended. A history without any acquire (an
/// election's campaigns) or without faults is not judged here.
pub fn unobserved_fault(ops: &[Op]) -> Option<String> {
    if !ops.iter().any(|o| o.f == f::ACQUIRE) {
        return None;
    }
    let began = ops
        .iter()
        .find(|o| o.process == Process::Nemesis && fault_ops::started_by(&o.f).is_some())?;
    let acquired_after = ops
        .iter()
        .any(|o| o.kind == OpType::Ok && o.f == f::ACQUIRE && o.time > began.time);
    let end = ops.last().map_or(0, |o| o.time);
    (!acquired_after).then(|| {
        format!(
            "no client acquired the lock after the first fault began ({} at {:.1} s) before the run ended ({:.1} s): it saw nothing of the fault",
            began.f,
            began.time as f64 / 1e9,
            end as f64 / 1e9
        )
    })
}

/// For a holder that asks its library whether it still holds
/// (`self_fencing = "library"`): a fault on its clock that moved the worker's
/// clock but not its adapter's (`"adapter": true` among the record's
/// `unreachable`: a Go library reads the vDSO) never touched what the holder
/// asks, and a valid run is no evidence of the library under that fault.
pub fn library_out_of_reach(ops: &[Op]) -> Option<String> {
    let missed = ops
        .iter()
        .filter(|o| o.process == Process::Nemesis && fault_ops::started_by(&o.f).is_some())
        .flat_map(|o| {
            o.value
                .get("unreachable")
                .and_then(|u| u.as_array())
                .into_iter()
                .flatten()
        })
        .find(|m| m["adapter"] == true)?;
    Some(format!(
        "the holder's clock fault never reached the library it asks whether it holds ({}: {}): the library's `held` ran on real time",
        missed["node"].as_str().unwrap_or("?"),
        missed["why"].as_str().unwrap_or("unreachable")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockcheck_check::{Anomaly, AnomalyKind, Validity};

    #[test]
    fn figures_count_outcomes_sections_faults_and_the_first_anomaly() {
        let text = [
            r#"{"index":0,"time":0,"process":0,"type":"invoke","f":"acquire","value":null}"#,
            r#"{"index":1,"time":2000000,"process":0,"type":"ok","f":"acquire","value":{"token":1,"lease_ms":1000}}"#,
            r#"{"index":2,"time":2000001,"process":"nemesis","type":"info","f":"pause","value":{"targets":["client-0"]}}"#,
            r#"{"index":3,"time":3000000,"process":1,"type":"invoke","f":"acquire","value":null}"#,
            r#"{"index":4,"time":7000000,"process":1,"type":"ok","f":"acquire","value":{"token":2,"lease_ms":1000}}"#,
            r#"{"index":5,"time":7000001,"process":1,"type":"invoke","f":"release","value":{"token":2}}"#,
            r#"{"index":6,"time":8000000,"process":1,"type":"ok","f":"release","value":null}"#,
            r#"{"index":7,"time":9000000,"process":"nemesis","type":"info","f":"resume","value":{"targets":["client-0"]}}"#,
            r#"{"index":8,"time":9000001,"process":0,"type":"invoke","f":"write","value":{"token":1,"data":"0:1"}}"#,
            r#"{"index":9,"time":9500000,"process":0,"type":"fail","f":"write","value":{"token":1,"data":"0:1"},"error":"stale-token"}"#,
            r#"{"index":10,"time":9600000,"process":0,"type":"invoke","f":"release","value":{"token":1}}"#,
        ]
        .join("\n")
            + "\n";
        let history = lockcheck_history::parse_jsonl(&text, "t").unwrap();
        let anomaly = |kind, time, allowed| Anomaly {
            kind,
            indexes: vec![],
            processes: vec![],
            tokens: vec![],
            time: Some(time),
            explanation: String::new(),
            allowed,
        };
        let verdict = Verdict {
            valid: Validity::Invalid,
            model: "lock".into(),
            anomalies: vec![
                anomaly(AnomalyKind::DoubleHolder, 4_000_000_000, true),
                anomaly(AnomalyKind::StaleWriteAccepted, 9_000_000_000, false),
            ],
            notes: vec![],
        };
        let fig = of(&history, &verdict);
        assert_eq!(fig.ops["acquire"]["ok"], 2);
        assert_eq!(fig.ops["write"]["fail"], 1);
        assert_eq!(fig.ops["release"]["ok"], 1);
        assert_eq!(
            fig.ops["release"]["info"], 1,
            "an invoke without completion is info"
        );
        assert_eq!(fig.critical_sections, 1);
        assert_eq!(fig.faults, 1);
        assert_eq!(fig.writes_rejected_by_fence, 1);
        let lat = fig.acquire_latency_ms.unwrap();
        assert_eq!((lat.p50, lat.max), (2.0, 4.0));
        assert_eq!(
            fig.first_anomaly_s,
            Some(9.0),
            "the allowed anomaly does not count"
        );
        assert!((fig.run_time_s - 0.0096).abs() < 1e-9);
    }

    fn op(time_s: f64, process: Process, kind: OpType, f: &str) -> Op {
        Op {
            index: 0,
            time: (time_s * 1e9) as u64,
            process,
            kind,
            f: f.into(),
            value: serde_json::Value::Null,
            node: None,
            error: None,
        }
    }

    #[test]
    fn a_valid_run_with_no_grant_after_its_fault_saw_nothing() {
        use OpType::{Info, Ok as Done};
        let (c, n) = (Process::Client(0), Process::Nemesis);
        // A server killed at 2 s that came back as the run ended: the last grant
        // was before the kill.
        let mut ops = vec![
            op(0.5, c, Done, f::ACQUIRE),
            op(2.0, n, Info, f::KILL),
            op(7.9, n, Info, f::START),
            op(8.0, c, Done, f::RELEASE),
        ];
        let why = unobserved_fault(&ops).expect("nothing after the kill");
        assert!(why.contains("kill at 2.0 s"), "{why}");
        // One grant after the restart: the run tested the scenario.
        ops.insert(3, op(7.95, c, Done, f::ACQUIRE));
        assert_eq!(unobserved_fault(&ops), None);
        // A run without faults is judged elsewhere (a missed fault), not here.
        assert_eq!(unobserved_fault(&ops[..1]), None);
    }

    #[test]
    fn a_clock_fault_that_missed_the_holders_library_is_said() {
        use OpType::Info;
        let mut skew = op(1.0, Process::Nemesis, Info, "clock-skew");
        skew.value = serde_json::json!({"targets": ["client-0"], "offset_ms": -20000});
        let mut ops = vec![skew];
        assert_eq!(library_out_of_reach(&ops), None, "its library was reached");
        ops[0].value["unreachable"] = serde_json::json!([{
            "node": "client-0's adapter (pid 7)",
            "why": "unreachable: etcd-concurrency is a Go binary reading the vDSO",
            "adapter": true,
        }]);
        let why = library_out_of_reach(&ops).expect("said");
        assert!(
            why.contains("client-0's adapter (pid 7)") && why.contains("Go binary"),
            "{why}"
        );
        // A server the interposer missed is not the holder's library.
        ops[0].value["unreachable"][0]["adapter"] = serde_json::Value::Null;
        assert_eq!(library_out_of_reach(&ops), None);
    }
}
