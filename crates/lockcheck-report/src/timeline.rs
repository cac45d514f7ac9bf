//! The timeline's data, as embedded in report.html: compact columns (one entry per
//! call, delta-encoded integers in microseconds) so that a million-op history stays
//! a few megabytes and the page decodes it into typed arrays without one DOM node per op.

use lockcheck_check::calls::Calls;
use lockcheck_history::{fault_ops, FaultOps, History, Process};
use rustc_hash::FxHashMap;
use serde::Serialize;
use serde_json::Value;

/// A fault period: a nemesis start line and its end line (or the end of the run).
#[derive(Debug, Clone, Serialize)]
pub struct FaultBand {
    /// The family's band (`history::fault_ops`): `pause`, `kill`, `partition`,
    /// `clock` or `latency`, the colour it is drawn in.
    pub kind: &'static str,
    /// `pause client-3`, `clock-skew n1 +20000 ms`, ...
    pub label: String,
    /// Run times (ns) of the start and the end lines; no end = it lasted to the end.
    pub start: u64,
    pub end: Option<u64>,
    /// History indexes of the start and end lines.
    pub indexes: Vec<u64>,
}

/// The colour of a band of `history::fault_ops`, in the page and its legend.
fn band_colour(band: &str) -> &'static str {
    fault_ops::ALL
        .iter()
        .find(|o| o.band == band)
        .map_or("#9ca3af", |o| o.colour)
}

/// Each band of `history::fault_ops` once, with its colour, for the legend.
pub fn bands() -> Vec<(&'static str, &'static str)> {
    let mut bands: Vec<(&str, &str)> = Vec::new();
    for o in fault_ops::ALL {
        if !bands.iter().any(|(b, _)| *b == o.band) {
            bands.push((o.band, o.colour));
        }
    }
    bands
}

/// A period still open: its band, its family, and what its start line names.
struct Open<'h> {
    band: usize,
    ops: &'static FaultOps,
    targets: &'h Value,
    links: &'h Value,
}

/// Pairs each nemesis start with its end (`history::fault_ops`): of the open
/// periods this `f` can end, the earliest one that names the same targets, else
/// the same links (a `heal` names the links it restores, and a latency and a
/// partition both end with one), else the earliest (Jepsen's `heal` names nothing).
pub fn fault_bands(history: &History) -> Vec<FaultBand> {
    let mut bands: Vec<FaultBand> = Vec::new();
    let mut open: Vec<Open> = Vec::new();
    for op in history.ops.iter().filter(|o| o.process == Process::Nemesis) {
        let targets = op.value.get("targets").unwrap_or(&Value::Null);
        let links = op.value.get("links").unwrap_or(&Value::Null);
        if let Some(ops) = fault_ops::started_by(&op.f) {
            open.push(Open {
                band: bands.len(),
                ops,
                targets,
                links,
            });
            bands.push(FaultBand {
                kind: ops.band,
                label: fault_label(&op.f, &op.value),
                start: op.time,
                end: None,
                indexes: vec![op.index],
            });
            continue;
        }
        let ends = |o: &&Open| o.ops.end == op.f;
        let named = |mine: &Value, theirs: &Value| !mine.is_null() && mine == theirs;
        let pos = open
            .iter()
            .position(|o| ends(&o) && named(targets, o.targets))
            .or_else(|| open.iter().position(|o| ends(&o) && named(links, o.links)))
            .or_else(|| open.iter().position(|o| ends(&o)));
        if let Some(pos) = pos {
            let b = open.remove(pos).band;
            bands[b].end = Some(op.time);
            bands[b].indexes.push(op.index);
        }
    }
    bands
}

fn fault_label(f: &str, value: &Value) -> String {
    let mut label = f.to_string();
    if let Some(Value::Array(t)) = value.get("targets") {
        let names: Vec<String> = t
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), String::from))
            .collect();
        label += &format!(" {}", names.join(","));
    }
    if let Some(ms) = value.get("offset_ms").and_then(Value::as_i64) {
        label += &format!(" {ms:+} ms");
    }
    label
}

/// The columns of every client call, in invoke order. Times are microseconds;
/// `t0` and `ix` are deltas from the previous entry; `tok` and `seq` are shifted
/// deltas from the previous present value (0 = none, d >= 0 written d + 1, d < 0
/// written d) so that runs of equal tokens cost one character each. Each column is
/// embedded as one string of variable-length integers (see `varints`).
#[derive(Debug, Default, Serialize)]
pub struct CallColumns {
    #[serde(serialize_with = "varints")]
    pub lane: Vec<u32>,
    #[serde(serialize_with = "varints")]
    pub f: Vec<u8>,
    #[serde(serialize_with = "varints")]
    pub t0: Vec<i64>,
    /// Duration, -1 when the call never completed.
    #[serde(serialize_with = "varints")]
    pub d: Vec<i64>,
    #[serde(serialize_with = "varints")]
    pub o: Vec<u8>,
    #[serde(serialize_with = "varints")]
    pub tok: Vec<i64>,
    #[serde(serialize_with = "varints")]
    pub seq: Vec<i64>,
    /// History index of the invoke (delta), and completion index minus invoke index (-1: none).
    #[serde(serialize_with = "varints")]
    pub ix: Vec<i64>,
    #[serde(serialize_with = "varints")]
    pub cx: Vec<i64>,
}

/// Critical sections: the acquire's call row (delta from the previous section's),
/// the release's row minus the acquire's (0: none), and times (µs) relative to the
/// section's start: end, lease end (-1: unknown), deposition (-1: never deposed).
#[derive(Debug, Default, Serialize)]
pub struct SectionColumns {
    #[serde(serialize_with = "varints")]
    pub c: Vec<i64>,
    #[serde(serialize_with = "varints")]
    pub r: Vec<i64>,
    #[serde(serialize_with = "varints")]
    pub e: Vec<i64>,
    #[serde(serialize_with = "varints")]
    pub le: Vec<i64>,
    #[serde(serialize_with = "varints")]
    pub z: Vec<i64>,
}

/// 64 characters that need no escaping in JSON or HTML.
const VARINT_DIGITS: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Integers as text, about a third of their JSON size: zigzag (so small negatives stay
/// small), then 5 bits per character, least significant first; a character with bit
/// 5 set says more follow. The page's `varints()` reads it back.
pub fn encode_varints(values: impl Iterator<Item = i64>) -> String {
    let mut out = Vec::new();
    for v in values {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 32 {
            out.push(VARINT_DIGITS[((z & 31) | 32) as usize]);
            z >>= 5;
        }
        out.push(VARINT_DIGITS[z as usize]);
    }
    // Every byte comes from VARINT_DIGITS: ASCII.
    String::from_utf8(out).unwrap_or_default()
}

fn varints<T: Copy + Into<i64>, S: serde::Serializer>(v: &[T], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&encode_varints(v.iter().map(|&x| x.into())))
}

#[derive(Debug, Serialize)]
pub struct TimelineData {
    pub end_us: i64,
    /// Each lane's processes as `[process, first op time µs]`, in time order (see `pack_lanes`).
    pub lanes: Vec<Vec<[i64; 2]>>,
    pub calls: CallColumns,
    pub sections: SectionColumns,
    pub faults: Vec<FaultJs>,
}

#[derive(Debug, Serialize)]
pub struct FaultJs {
    pub kind: &'static str,
    /// Its band's colour.
    pub c: &'static str,
    pub label: String,
    pub s: i64,
    pub e: i64,
    /// History indexes of its start and end lines (anomaly cards name them).
    pub ix: Vec<u64>,
}

fn us(ns: u64) -> i64 {
    (ns / 1_000) as i64
}

/// Shifted delta of an optional value against the last present one (see `CallColumns`).
fn shifted(v: Option<u64>, prev: &mut u64) -> i64 {
    match v {
        None => 0,
        Some(v) => {
            let d = v as i128 - *prev as i128;
            *prev = v;
            (if d >= 0 { d + 1 } else { d }) as i64
        }
    }
}

/// One lane per client process, except that a process which starts after another
/// one's last op may take over its lane: after an `info` a worker goes on under a new
/// process id, and a thousand retired ids must not make a thousand lanes. Of the free
/// lanes it takes the one freed last (most likely the same worker's).
pub fn pack_lanes(calls: &Calls) -> (Vec<Vec<[i64; 2]>>, FxHashMap<u64, u32>) {
    // (first invoke, last seen) per process.
    let mut span: FxHashMap<u64, (u64, u64)> = FxHashMap::default();
    for c in &calls.calls {
        let e = span.entry(c.process).or_insert((c.t0, c.last_seen()));
        e.1 = e.1.max(c.last_seen());
    }
    let mut procs: Vec<(u64, u64, u64)> = span.into_iter().map(|(p, (a, b))| (a, p, b)).collect();
    procs.sort_unstable();
    let mut lanes: Vec<Vec<[i64; 2]>> = Vec::new();
    let mut free_at: Vec<u64> = Vec::new();
    let mut lane_of = FxHashMap::default();
    for (first, p, last) in procs {
        let lane = (0..lanes.len())
            .filter(|&l| free_at[l] < first)
            .max_by_key(|&l| free_at[l])
            .unwrap_or_else(|| {
                lanes.push(Vec::new());
                free_at.push(0);
                lanes.len() - 1
            });
        lanes[lane].push([p as i64, us(first)]);
        free_at[lane] = last;
        lane_of.insert(p, lane as u32);
    }
    // Lanes in order of their first process id, so that p0, p1, ... read top down.
    let mut order: Vec<usize> = (0..lanes.len()).collect();
    order.sort_by_key(|&l| lanes[l][0][0]);
    let mut rank = vec![0u32; lanes.len()];
    for (r, &l) in order.iter().enumerate() {
        rank[l] = r as u32;
    }
    for v in lane_of.values_mut() {
        *v = rank[*v as usize];
    }
    let lanes = order
        .into_iter()
        .map(|l| std::mem::take(&mut lanes[l]))
        .collect();
    (lanes, lane_of)
}

pub fn build(history: &History, calls: &Calls, bands: &[FaultBand]) -> TimelineData {
    let (lanes, lane_of) = pack_lanes(calls);
    let lane_of = |p: u64| lane_of.get(&p).copied().unwrap_or(0);
    let idx = |pos: usize| history.ops[pos].index as i64;

    let mut cc = CallColumns::default();
    let (mut prev_t, mut prev_ix, mut prev_tok, mut prev_seq) = (0i64, 0i64, 0u64, 0u64);
    for c in &calls.calls {
        let t0 = us(c.t0);
        cc.lane.push(lane_of(c.process));
        cc.f.push(c.kind.code());
        cc.t0.push(t0 - prev_t);
        prev_t = t0;
        cc.d.push(c.t1.map_or(-1, |t1| us(t1) - t0));
        cc.o.push(c.outcome.code());
        cc.tok.push(shifted(c.token, &mut prev_tok));
        cc.seq.push(shifted(c.seq, &mut prev_seq));
        let ix = idx(c.invoke);
        cc.ix.push(ix - prev_ix);
        prev_ix = ix;
        cc.cx.push(c.completion.map_or(-1, |p| idx(p) - ix));
    }

    let mut sc = SectionColumns::default();
    let mut prev_c = 0i64;
    for (i, s) in calls.sections.iter().enumerate() {
        let start = us(s.start);
        sc.c.push(s.acquire as i64 - prev_c);
        prev_c = s.acquire as i64;
        sc.r.push(s.release.map_or(0, |r| r as i64 - s.acquire as i64));
        sc.e.push(us(s.end) - start);
        sc.le.push(s.lease_end.map_or(-1, |l| us(l) - start));
        sc.z.push(calls.deposer(i).map_or(-1, |n| us(n.start) - start));
    }

    let end_us = us(calls.end);
    TimelineData {
        end_us,
        lanes,
        calls: cc,
        sections: sc,
        faults: bands
            .iter()
            .map(|b| FaultJs {
                kind: b.kind,
                c: band_colour(b.kind),
                label: b.label.clone(),
                s: us(b.start),
                e: b.end.map_or(end_us, us),
                ix: b.indexes.clone(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockcheck_history::HistoryBuilder as H;

    #[test]
    fn faults_pair_by_family_and_targets() {
        let h = H::default()
            .nemesis(1, "pause", &["client-0"])
            .nemesis(2, "pause", &["client-1"])
            .nemesis(3, "resume", &["client-1"])
            .nemesis(4, "partition", &["n1"])
            .nemesis(5, "heal", &[])
            .nemesis(6, "resume", &["client-0"])
            .nemesis(7, "kill", &["n2"])
            .history();
        let b = fault_bands(&h);
        assert_eq!(b.len(), 4);
        assert_eq!(
            (b[0].label.as_str(), b[0].end),
            ("pause client-0", Some(6_000_000))
        );
        assert_eq!(b[1].indexes, vec![1, 2]);
        assert_eq!((b[2].kind, b[2].end), ("partition", Some(5_000_000)));
        assert_eq!((b[3].kind, b[3].end), ("kill", None));
    }

    #[test]
    fn a_latency_and_a_partition_each_end_with_their_own_heal() {
        use serde_json::json;
        let nemesis = |h: H, ms, f: &str, value| {
            h.op(ms, -1, lockcheck_history::OpType::Info, f, value, None)
        };
        let h = H::default();
        let h = nemesis(
            h,
            1,
            "latency",
            json!({"targets": ["n1"], "links": ["client-0->n1"], "delay_ms": 50}),
        );
        let h = nemesis(
            h,
            2,
            "partition",
            json!({"targets": ["n2"], "links": ["client-0->n2"]}),
        );
        let h = nemesis(h, 3, "heal", json!({"links": ["client-0->n2"]}));
        let h = nemesis(h, 4, "heal", json!({"links": ["client-0->n1"]}));
        let b = fault_bands(&h.history());
        assert_eq!(b.len(), 2, "{b:?}");
        assert_eq!((b[0].kind, b[0].end), ("latency", Some(4_000_000)));
        assert_eq!((b[1].kind, b[1].end), ("partition", Some(3_000_000)));
        // A heal that names nothing (Jepsen's) ends the earliest open period.
        let h = nemesis(H::default(), 1, "partition", json!({"targets": ["n2"]}));
        let h = nemesis(h, 2, "latency", json!({"targets": ["n1"]}));
        let h = nemesis(h, 3, "heal", json!(null));
        let b = fault_bands(&h.history());
        assert_eq!((b[0].end, b[1].end), (Some(3_000_000), None));
    }

    #[test]
    fn every_band_has_a_colour_of_its_own() {
        let bands = bands();
        for ops in fault_ops::ALL {
            assert_eq!(
                band_colour(ops.band),
                ops.colour,
                "{}: one colour",
                ops.band
            );
        }
        let colours: std::collections::BTreeSet<_> = bands.iter().map(|c| c.1).collect();
        assert_eq!(colours.len(), bands.len(), "{bands:?}");
    }

    #[test]
    fn retired_processes_share_the_lane_they_freed() {
        use serde_json::json;
        // p0 times out (info) and its worker goes on as p2; p1 runs throughout.
        let h = H::default()
            .acquire(0, 0, Some(1))
            .acquire(1, 1, Some(2))
            .inv(5, 0, "write", json!({"token": 1, "data": "x"}))
            .op(
                9,
                0,
                lockcheck_history::OpType::Info,
                "write",
                json!(null),
                None,
            )
            .acquire(10, 2, Some(3))
            .write(20, 1, Some(2), 1)
            .history();
        let calls = Calls::of(&h);
        let (lanes, lane_of) = pack_lanes(&calls);
        assert_eq!(lanes.len(), 2);
        assert_eq!(lanes[0], vec![[0, 0], [2, 10_000]]);
        assert_eq!((lane_of[&0], lane_of[&1], lane_of[&2]), (0, 1, 0));
    }

    #[test]
    fn varints_are_zigzag_5_bit_groups() {
        assert_eq!(encode_varints([0, -1, 1, 31, 1000].into_iter()), "ABC-Bw-B");
        assert_eq!(encode_varints(std::iter::empty()), "");
    }

    #[test]
    fn tokens_and_seqs_are_shifted_deltas() {
        let mut prev = 0;
        let enc: Vec<i64> = [Some(5), Some(5), None, Some(3), Some(0)]
            .into_iter()
            .map(|v| shifted(v, &mut prev))
            .collect();
        assert_eq!(enc, vec![6, 1, 0, -2, -3]);
    }
}
