//! The run's figures as verdict.json records them: ops by kind and outcome,
//! latencies, critical sections completed, and when the first anomaly happened.
//! The runner computes them from the history and the verdict.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// From the first op to the last, in seconds.
    pub run_time_s: f64,
    /// Completed client ops: `f` → outcome (`ok`, `fail`, `info`) → count. An invoke
    /// left without completion counts as `info`, as the spec says.
    pub ops: BTreeMap<String, BTreeMap<String, u64>>,
    /// Latency of successful acquires (invoke to ok), in milliseconds.
    pub acquire_latency_ms: Option<Percentiles>,
    /// Latency of the writes the resource answered (applied, or rejected by its
    /// fence), invoke to completion, in milliseconds.
    #[serde(default)]
    pub write_latency_ms: Option<Percentiles>,
    /// Acquires followed by a successful release by the same process.
    pub critical_sections: u64,
    /// Faults started (nemesis start records).
    pub faults: u64,
    /// What a fault aimed at but could not reach, and why ("n1: unreachable: etcd
    /// is a Go binary reading the vDSO ..."): said, never pretended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreachable: Vec<String>,
    /// Nodes whose monotonic clock ran shifted for the whole run, in a time
    /// namespace (`backend.monotonic_offset`): "n1: monotonic +600000 ms from start
    /// (time namespace)".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub monotonic_offsets: Vec<String>,
    /// Writes the resource's fence rejected (`stale-token`).
    pub writes_rejected_by_fence: u64,
    /// Run time of the earliest anomaly that makes the run invalid (allowed kinds
    /// do not count), in seconds.
    pub first_anomaly_s: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles; `None` for no samples.
    pub fn of(mut samples: Vec<f64>) -> Option<Percentiles> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let i = ((p / 100.0) * samples.len() as f64).ceil() as usize;
            samples[i.clamp(1, samples.len()) - 1]
        };
        Some(Percentiles {
            p50: rank(50.0),
            p90: rank(90.0),
            p99: rank(99.0),
            max: samples[samples.len() - 1],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let p = Percentiles::of((1..=100).map(f64::from).collect()).unwrap();
        assert_eq!((p.p50, p.p90, p.p99, p.max), (50.0, 90.0, 99.0, 100.0));
        let p = Percentiles::of(vec![3.0]).unwrap();
        assert_eq!((p.p50, p.max), (3.0, 3.0));
        assert!(Percentiles::of(vec![]).is_none());
    }
}
