//! Porcupine's key-value store: get, put and append of strings, per key, checked key
//! by key (P-compositionality) and in parallel.
//!
//! A get reveals the exact string, so it reveals the sequence of writes applied
//! since the last put. The checker reads that sequence back out of the values read
//! instead of guessing it:
//! - where every write to a key has its own value, two gets that place a write at
//!   two different spots (or two writes at one spot) contradict each other outright,
//!   as in Elle's inference for list-append: the key is decided without a search;
//! - otherwise the search runs on the values read, not on strings: the state is the
//!   value so far only while it is still the start of some value a get returned
//!   (a node of the tree of values read); past that no get can succeed until a put,
//!   so every such value is one state, "dirty". Orders of appends that no get saw
//!   collapse into that one state instead of one string each, and writes that no get
//!   can ever see are taken without branching. That is what decides the keys whose
//!   every order a string search would try (Porcupine's c50-bad keys "0" and "9").
//!
//! The abstraction is exact: a get matches the string iff it matches its node.

use super::{operations, unsupported, ModelError, Tally};
use crate::linear::check_partitioned;
use crate::model::{Model, Operation};
use crate::{Anomaly, AnomalyKind, Limits, Verdict};
use lockcheck_history::History;
use rustc_hash::FxHashMap;
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvOp {
    Get,
    Put(String),
    Append(String),
}

/// An op on the key numbered `key`; a get's output is the string it returned.
#[derive(Debug, Clone)]
pub struct KvIn {
    pub key: usize,
    pub op: KvOp,
}

fn describe(op: &KvOp, output: Option<&String>) -> String {
    match (op, output) {
        (KvOp::Get, Some(v)) => format!("get {v:?}"),
        (KvOp::Get, None) => "get (value unknown)".into(),
        (KvOp::Put(v), _) => format!("put {v:?}"),
        (KvOp::Append(v), _) => format!("append {v:?}"),
    }
}

fn by_key<I, O>(
    keys: &[String],
    ops: &[Operation<I, O>],
    key_of: impl Fn(&I) -> usize,
) -> Vec<(String, Vec<usize>)> {
    let mut parts: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, o) in ops.iter().enumerate() {
        parts.entry(key_of(&o.input)).or_default().push(i);
    }
    parts
        .into_iter()
        .map(|(k, v)| (keys[k].clone(), v))
        .collect()
}

/// A node of a key's tree of values read: the value so far, while it is the start
/// of some get's value. `DIRTY`: it is not.
type Node = u32;
const DIRTY: Node = u32::MAX;
/// The empty value, where every key starts.
const EMPTY: Node = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// A get that returned this node's value.
    Get(Node),
    /// A get whose value no order of the writes can build.
    Impossible,
    /// A get whose value nobody knows.
    AnyGet,
    /// A put: whatever came before, the value becomes this.
    Put(Node),
    /// An append of value number `.0` (in the key's table of transitions);
    /// `hidden` when no get can ever see it, whatever the value before it.
    Append(u32, bool),
}

/// An op of the kv model over values read, with the original op in words.
#[derive(Debug, Clone)]
pub struct KvStep {
    key: usize,
    step: Step,
    words: String,
}

/// The kv model over the values read (see the module doc): one for all keys, each
/// key with its own table of which append leads from which node to which.
#[derive(Debug, Clone, Default)]
pub struct KvReads {
    keys: Vec<String>,
    appends: Vec<FxHashMap<(Node, u32), Node>>,
    /// The value of each node (node numbers are shared by all keys; 0 is empty).
    values: Vec<String>,
}

impl Model for KvReads {
    type State = Node;
    type Input = KvStep;
    type Output = ();

    fn init(&self) -> Node {
        EMPTY
    }

    fn step(&self, s: &Node, input: &KvStep, _: Option<&()>) -> Option<Node> {
        match input.step {
            Step::Get(n) => (*s == n).then_some(n),
            Step::Impossible => None,
            Step::AnyGet => Some(*s),
            Step::Put(n) => Some(n),
            Step::Append(_, true) => Some(DIRTY),
            Step::Append(v, false) => {
                Some(*self.appends[input.key].get(&(*s, v)).unwrap_or(&DIRTY))
            }
        }
    }

    /// Gets change nothing; a write no get can see turns every value dirty, so once
    /// the value is dirty it changes nothing and is never needed later.
    fn eager(&self, input: &KvStep, _: Option<&()>) -> bool {
        matches!(
            input.step,
            Step::Get(_) | Step::AnyGet | Step::Put(DIRTY) | Step::Append(_, true)
        )
    }

    fn describe(&self, input: &KvStep, _: Option<&()>) -> String {
        input.words.clone()
    }

    fn describe_state(&self, s: &Node) -> String {
        if *s == DIRTY {
            "a value no get returned or began with".into()
        } else {
            format!("{:?}", self.values[*s as usize])
        }
    }

    fn partition(&self, ops: &[Operation<KvStep, ()>]) -> Vec<(String, Vec<usize>)> {
        by_key(&self.keys, ops, |i| i.key)
    }
}

/// Checks a kv history key by key.
pub fn check(history: &History, limits: &Limits) -> Result<Verdict, ModelError> {
    let (keys, ops) = kv_operations(history)?;
    let mut tally = Tally::default();
    let mut model = KvReads {
        keys: keys.clone(),
        appends: vec![FxHashMap::default(); keys.len()],
        values: vec![String::new()],
    };
    let mut steps: Vec<Operation<KvStep, ()>> = Vec::new();
    let mut by_inference = 0;
    for (_, part) in by_key(&keys, &ops, |i| i.key) {
        if let Some(c) = contradiction(&ops, &part) {
            by_inference += 1;
            tally.add_decided(part.len(), Some(anomaly(&keys, &ops, c)));
            continue;
        }
        let key = ops[part[0]].input.key;
        let (table, part_steps) = tree_of_reads(&ops, &part, &mut model.values);
        model.appends[key] = table;
        for (&i, step) in part.iter().zip(part_steps) {
            let o = &ops[i];
            steps.push(Operation {
                process: o.process,
                input: KvStep {
                    key,
                    step,
                    words: describe(&o.input.op, o.output.as_ref()),
                },
                output: o.output.as_ref().map(|_| ()),
                call: o.call,
                ret: o.ret,
                indexes: o.indexes.clone(),
            });
        }
    }
    tally.add(&steps, &check_partitioned(&model, &steps, limits));
    if by_inference > 0 {
        tally.notes.push(format!(
            "{by_inference} of {} keys decided without a search: their gets contradict each other",
            keys.len()
        ));
    }
    Ok(tally.finish("kv", history))
}

/// A kv history as the engine's ops, and the key names (ops name keys by number).
type KvOps = (Vec<String>, Vec<Operation<KvIn, String>>);

/// The engine's ops of a kv history (`{"key": K, "value": V}`) and the key names.
fn kv_operations(history: &History) -> Result<KvOps, ModelError> {
    let mut key_ids: FxHashMap<String, usize> = FxHashMap::default();
    let mut keys: Vec<String> = Vec::new();
    let ops = operations(history, |inv, ok| {
        let key = match inv.value.get("key") {
            Some(Value::String(k)) => k.clone(),
            Some(k) if !k.is_null() => k.to_string(),
            _ => return Err("expected {\"key\": K, \"value\": V}".into()),
        };
        let key = *key_ids.entry(key.clone()).or_insert_with(|| {
            keys.push(key);
            keys.len() - 1
        });
        let string = |v: &Value| match v.get("value") {
            Some(Value::String(s)) => Ok(s.clone()),
            other => Err(format!(
                "\"value\": expected a string, found {}",
                other.unwrap_or(&Value::Null)
            )),
        };
        let op = match inv.f.as_str() {
            "get" => KvOp::Get,
            "put" => KvOp::Put(string(&inv.value)?),
            "append" => KvOp::Append(string(&inv.value)?),
            f => return Err(unsupported("kv", f, "get, put, append")),
        };
        // A get completed with a null value returned something nobody knows.
        let output = match (&op, ok.map(|d| d.value.get("value"))) {
            (KvOp::Get, Some(Some(Value::String(s)))) => Some(s.clone()),
            (KvOp::Get, Some(None | Some(Value::Null)) | None) => None,
            (KvOp::Get, Some(Some(other))) => {
                return Err(format!("a get returned {other}, expected a string"))
            }
            _ => Some(String::new()),
        };
        Ok((KvIn { key, op }, output))
    })?;
    Ok((keys, ops))
}

/// Builds one key's tree of values read: every value a get returned, cut at each
/// point where a sequence of this key's writes can end (a put's value, then
/// appends' values). Gives the append transitions between nodes, and each op's step.
fn tree_of_reads<'a>(
    ops: &'a [Operation<KvIn, String>],
    part: &[usize],
    values: &mut Vec<String>,
) -> (FxHashMap<(Node, u32), Node>, Vec<Step>) {
    let mut append_id: FxHashMap<&'a str, u32> = FxHashMap::default();
    let mut puts: Vec<&'a str> = Vec::new();
    for &i in part {
        match &ops[i].input.op {
            KvOp::Append(v) => {
                let n = append_id.len() as u32;
                append_id.entry(v).or_insert(n);
            }
            KvOp::Put(v) => puts.push(v),
            KvOp::Get => {}
        }
    }
    let mut lengths: Vec<usize> = append_id.keys().map(|v| v.len()).collect();
    lengths.sort_unstable();
    lengths.dedup();
    let mut nodes: FxHashMap<&str, Node> = FxHashMap::default();
    nodes.insert("", EMPTY);
    let mut intern = |s: &'a str| {
        *nodes.entry(s).or_insert_with(|| {
            values.push(s.to_string());
            (values.len() - 1) as Node
        })
    };
    let mut trans: FxHashMap<(Node, u32), Node> = FxHashMap::default();
    let mut read_node: FxHashMap<usize, Node> = FxHashMap::default();
    let mut put_node: FxHashMap<&str, Node> = FxHashMap::default();
    for &g in part {
        let (KvOp::Get, Some(r)) = (&ops[g].input.op, &ops[g].output) else {
            continue;
        };
        // Which lengths of r a sequence of writes can build: from the empty value,
        // or from a put whose value r begins with; then append by append.
        let mut reach = vec![false; r.len() + 1];
        reach[0] = true;
        for p in &puts {
            if r.starts_with(p) {
                reach[p.len()] = true;
                put_node.insert(p, intern(&r[..p.len()]));
            }
        }
        for at in 0..r.len() {
            if !reach[at] {
                continue;
            }
            let from = intern(&r[..at]);
            for &len in &lengths {
                let Some(v) = r.get(at..at + len) else { break };
                if let Some(&id) = append_id.get(v) {
                    reach[at + len] = true;
                    trans.insert((from, id), intern(&r[..at + len]));
                }
            }
        }
        if reach[r.len()] {
            read_node.insert(g, intern(r.as_str()));
        }
    }
    let seen: rustc_hash::FxHashSet<u32> = trans.keys().map(|&(_, v)| v).collect();
    let steps = part
        .iter()
        .map(|&i| match (&ops[i].input.op, &ops[i].output) {
            (KvOp::Get, None) => Step::AnyGet,
            (KvOp::Get, Some(_)) => read_node
                .get(&i)
                .map_or(Step::Impossible, |&n| Step::Get(n)),
            (KvOp::Put(v), _) => Step::Put(
                put_node
                    .get(v.as_str())
                    .copied()
                    .unwrap_or(if v.is_empty() { EMPTY } else { DIRTY }),
            ),
            (KvOp::Append(v), _) => {
                let id = append_id[v.as_str()];
                Step::Append(id, !seen.contains(&id))
            }
        })
        .collect();
    (trans, steps)
}

/// Where every write to the key has its own value: two gets (positions into the
/// ops) that place one write at two spots, or two writes at one spot, and why.
/// A value then sits at one spot of one "epoch" (the run of appends after one put,
/// or after the empty start), and every get sees a prefix of its epoch.
fn contradiction(
    ops: &[Operation<KvIn, String>],
    part: &[usize],
) -> Option<(usize, usize, String)> {
    let mut writer: FxHashMap<&str, usize> = FxHashMap::default();
    for &i in part {
        if let KvOp::Put(v) | KvOp::Append(v) = &ops[i].input.op {
            if v.is_empty() || writer.insert(v, i).is_some() {
                return None;
            }
        }
    }
    // Prefix-free values cut a read back into writes in exactly one way. In sorted
    // order a value that is a prefix of another is a prefix of its successor.
    let mut values: Vec<&str> = writer.keys().copied().collect();
    values.sort_unstable();
    if values.windows(2).any(|w| w[1].starts_with(w[0])) {
        return None;
    }
    let mut lengths: Vec<usize> = values.iter().map(|v| v.len()).collect();
    lengths.sort_unstable();
    lengths.dedup();
    // (epoch = the put that began it, or none; place in it) of each write, and the
    // get that first said so.
    type Spot = (Option<usize>, usize);
    let mut spot_of: FxHashMap<usize, (Spot, usize)> = FxHashMap::default();
    let mut at_spot: FxHashMap<Spot, (usize, usize)> = FxHashMap::default();
    for &g in part {
        let (KvOp::Get, Some(s)) = (&ops[g].input.op, &ops[g].output) else {
            continue;
        };
        let Some(writes) = cut(s, &writer, &lengths) else {
            continue;
        };
        // A put after the first spot would have wiped what came before it: this get
        // alone is impossible, which the search will show.
        if writes
            .iter()
            .skip(1)
            .any(|&w| matches!(ops[w].input.op, KvOp::Put(_)))
        {
            continue;
        }
        let epoch = writes
            .first()
            .filter(|&&w| matches!(ops[w].input.op, KvOp::Put(_)))
            .copied();
        for (n, &w) in writes.iter().enumerate() {
            let spot = (epoch, n);
            match spot_of.get(&w) {
                Some(&(other, g2)) if other != spot => {
                    let why = format!(
                        "they place {} at different spots",
                        describe(&ops[w].input.op, None)
                    );
                    return Some((g2, g, why));
                }
                Some(_) => {}
                None => {
                    spot_of.insert(w, (spot, g));
                }
            }
            match at_spot.get(&spot) {
                Some(&(w2, g2)) if w2 != w => {
                    let why = format!(
                        "one saw {} where the other saw {}",
                        describe(&ops[w2].input.op, None),
                        describe(&ops[w].input.op, None)
                    );
                    return Some((g2, g, why));
                }
                Some(_) => {}
                None => {
                    at_spot.insert(spot, (w, g));
                }
            }
        }
    }
    None
}

/// The writes (positions into the ops) whose values make up `s`, in order, or
/// `None` if no sequence of the writes does. The values must be prefix-free.
fn cut(s: &str, writer: &FxHashMap<&str, usize>, lengths: &[usize]) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let (len, w) = lengths.iter().find_map(|&l| {
            rest.get(..l)
                .and_then(|head| writer.get(head))
                .map(|&w| (l, w))
        })?;
        out.push(w);
        rest = &rest[len..];
    }
    Some(out)
}

/// Two gets that cannot both be right, as an anomaly.
fn anomaly(
    keys: &[String],
    ops: &[Operation<KvIn, String>],
    (a, b, why): (usize, usize, String),
) -> Anomaly {
    let words = |i: usize| {
        let o = &ops[i];
        format!(
            "the {} by process {} (index {})",
            describe(&o.input.op, o.output.as_ref()),
            o.process,
            o.indexes.last().copied().unwrap_or(0)
        )
    };
    let mut indexes: Vec<u64> = ops[a]
        .indexes
        .iter()
        .chain(&ops[b].indexes)
        .copied()
        .collect();
    indexes.sort_unstable();
    let mut processes = vec![ops[a].process, ops[b].process];
    processes.sort_unstable();
    processes.dedup();
    Anomaly {
        kind: AnomalyKind::NotLinearizable,
        indexes,
        processes,
        tokens: Vec::new(),
        time: None,
        explanation: format!(
            "key {}: {} and {} cannot both be right: every write happens once, in one order, but {why}",
            keys[ops[a].input.key],
            words(a),
            words(b)
        ),
        allowed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Validity;
    use lockcheck_history::import::{parse, Format};

    fn check_text(text: &str) -> Verdict {
        let h = parse(text, "t", Format::PorcupineKv).unwrap();
        check(&h, &Limits::default()).unwrap()
    }

    fn line(p: u64, ty: &str, f: &str, key: &str, v: &str) -> String {
        let v = if v == "nil" {
            "nil".to_string()
        } else {
            format!("{v:?}")
        };
        format!("{{:process {p}, :type :{ty}, :f :{f}, :key {key:?}, :value {v}}}\n")
    }

    #[test]
    fn reads_that_disagree_on_the_order_of_appends_contradict() {
        let mut t = String::new();
        for (p, v) in [(0, "a "), (1, "b ")] {
            t += &line(p, "invoke", "append", "k", v);
        }
        t += &line(0, "ok", "append", "k", "a ");
        t += &line(1, "ok", "append", "k", "b ");
        t += &line(2, "invoke", "get", "k", "nil");
        t += &line(2, "ok", "get", "k", "a b ");
        t += &line(3, "invoke", "get", "k", "nil");
        t += &line(3, "ok", "get", "k", "b a ");
        let v = check_text(&t);
        assert_eq!(v.valid, Validity::Invalid);
        assert_eq!(v.anomalies[0].indexes, vec![4, 5, 6, 7]);
        assert!(
            v.anomalies[0].explanation.contains("cannot both be right"),
            "{}",
            v.anomalies[0].explanation
        );
        // Agreeing reads are fine, and so is a read from before either append.
        let ok = t.replace("\"b a \"", "\"a b \"");
        assert_eq!(check_text(&ok).valid, Validity::Valid);
    }

    /// The plain model, string per key, as Porcupine has it: the reference the
    /// model over values read must agree with.
    struct Plain;

    impl Model for Plain {
        type State = String;
        type Input = KvIn;
        type Output = String;
        fn init(&self) -> String {
            String::new()
        }
        fn step(&self, s: &String, i: &KvIn, o: Option<&String>) -> Option<String> {
            match &i.op {
                KvOp::Get => o.is_none_or(|o| o == s).then(|| s.clone()),
                KvOp::Put(v) => Some(v.clone()),
                KvOp::Append(v) => Some(format!("{s}{v}")),
            }
        }
    }

    /// A random history of one key: processes invoke, take effect at some point,
    /// complete; some gets lie. Values repeat and one is a prefix of another.
    fn random_history(rng: &mut impl rand::Rng) -> History {
        use lockcheck_history::{Op, OpType, Process};
        use serde_json::json;
        let mut ops = Vec::new();
        let mut value = String::new();
        // Per process: (f, argument, applied result) of the op in flight.
        let mut flight: Vec<Option<(&str, String, Option<String>)>> = vec![None; 3];
        let mut started = 0;
        while started < 7 || flight.iter().any(Option::is_some) {
            let p = rng.gen_range(0..3);
            let push = |ops: &mut Vec<Op>, kind, f: &str, v: Value| {
                let index = ops.len() as u64;
                ops.push(Op {
                    index,
                    time: index,
                    process: Process::Client(p as u64),
                    kind,
                    f: f.into(),
                    value: v,
                    node: None,
                    error: None,
                });
            };
            match flight[p].take() {
                None if started < 7 => {
                    started += 1;
                    let f = ["get", "put", "append", "append"][rng.gen_range(0..4)];
                    let arg = ["a", "b", "ab", "c"][rng.gen_range(0..4)].to_string();
                    let v = if f == "get" { Value::Null } else { json!(arg) };
                    push(&mut ops, OpType::Invoke, f, json!({"key": "k", "value": v}));
                    flight[p] = Some((f, arg, None));
                }
                None => {}
                Some((f, arg, None)) => {
                    match f {
                        "put" => value = arg.clone(),
                        "append" => value += &arg,
                        _ => {}
                    }
                    flight[p] = Some((f, arg, Some(value.clone())));
                }
                Some((f, arg, Some(seen))) => {
                    let v = match f {
                        "get" if rng.gen_bool(0.15) => {
                            json!(["", "a", "ab", "ba"][rng.gen_range(0..4)])
                        }
                        "get" => json!(seen),
                        _ => json!(arg),
                    };
                    push(&mut ops, OpType::Ok, f, json!({"key": "k", "value": v}));
                }
            }
        }
        History::new(ops)
    }

    #[test]
    fn the_model_over_values_read_agrees_with_the_string_model() {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut seen = [0; 2];
        for _ in 0..400 {
            let h = random_history(&mut rng);
            let (_, ops) = kv_operations(&h).unwrap();
            let plain = match crate::linear::check_operations(&Plain, &ops, &Limits::default()) {
                crate::linear::Outcome::Linearizable { .. } => Validity::Valid,
                crate::linear::Outcome::Illegal { .. } => Validity::Invalid,
                o => panic!("{o:?}"),
            };
            let ours = check(&h, &Limits::default()).unwrap().valid;
            assert_eq!(ours, plain, "{:#?}", h.ops);
            seen[(plain == Validity::Valid) as usize] += 1;
        }
        // Both verdicts were exercised.
        assert!(seen[0] > 20 && seen[1] > 20, "{seen:?}");
    }

    #[test]
    fn a_put_wipes_what_came_before_it() {
        // A get after the put returned still sees the append: illegal.
        let mut t = String::new();
        t += &line(0, "invoke", "append", "k", "a ");
        t += &line(0, "ok", "append", "k", "a ");
        t += &line(1, "invoke", "put", "k", "p ");
        t += &line(1, "ok", "put", "k", "p ");
        t += &line(2, "invoke", "get", "k", "nil");
        t += &line(2, "ok", "get", "k", "a ");
        let v = check_text(&t);
        assert_eq!(v.valid, Validity::Invalid);
        assert!(v.anomalies[0]
            .explanation
            .contains("get \"a \" by process 2"));
        // A get that overlaps the put may come before it.
        let mut t2 = String::new();
        t2 += &line(0, "invoke", "append", "k", "a ");
        t2 += &line(0, "ok", "append", "k", "a ");
        t2 += &line(1, "invoke", "put", "k", "p ");
        t2 += &line(2, "invoke", "get", "k", "nil");
        t2 += &line(2, "ok", "get", "k", "a ");
        t2 += &line(1, "ok", "put", "k", "p ");
        assert_eq!(check_text(&t2).valid, Validity::Valid);
    }
}
