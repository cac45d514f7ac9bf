//! The fault catalogue: every kind of fault a workload may name, in one table
//! ([`CATALOGUE`]) that the workload reader, the nemesis and the run's setup all
//! read, and that points at the history's records of each (`history::fault_ops`,
//! which the report draws from a run directory alone). A new kind is its file and
//! one line here.

use super::spec::{Entry, Kind};
use super::{
    clock, disk_full, kill, latency, latency_nodes, partition, partition_nodes, pause, pause_node,
};
use anyhow::Result;
use std::collections::BTreeMap;

/// Every kind of fault, in the order the docs list them.
pub const CATALOGUE: &[&Kind] = &[
    &pause::KIND,
    &pause_node::KIND,
    &kill::KIND,
    &clock::KIND,
    &partition::KIND,
    &latency::KIND,
    &partition_nodes::KIND,
    &latency_nodes::KIND,
    &disk_full::KIND,
];

/// The kind a workload names `name`.
pub fn kind(name: &str) -> Option<&'static Kind> {
    CATALOGUE.iter().copied().find(|k| k.name == name)
}

/// Undoes `effect`, one of the journal's own variants, through the kind that
/// writes it ([`Kind::undo_journaled`]); `None` when no kind claims it.
pub fn undo_journaled(effect: &lockcheck_journal::Effect) -> Option<Result<String>> {
    CATALOGUE
        .iter()
        .filter_map(|k| k.undo_journaled)
        .find_map(|undo| undo(effect))
}

/// The entry of these keys: its `kind` must be in the catalogue, and every other
/// key one of that kind's or of `timing` (the keys the run reads itself).
/// `bad(key, what)` makes the error about a key.
pub fn entry<'a>(
    mut values: BTreeMap<String, toml::Value>,
    timing: &[&str],
    bad: &'a dyn Fn(&str, String) -> anyhow::Error,
) -> Result<Entry<'a>> {
    let names: Vec<String> = CATALOGUE
        .iter()
        .map(|k| format!("\"{}\"", k.name))
        .collect();
    let expected = format!("expected one of {}", names.join(", "));
    let kind = match values.remove("kind") {
        Some(toml::Value::String(s)) => match kind(&s) {
            Some(k) => k,
            None => return Err(bad("kind", format!("{expected}, found \"{s}\""))),
        },
        Some(other) => return Err(bad("kind", format!("{expected}, found {other}"))),
        None => return Err(bad("kind", format!("missing: {expected}"))),
    };
    if let Some(key) = values
        .keys()
        .find(|k| !timing.contains(&k.as_str()) && !kind.keys.contains(&k.as_str()))
    {
        return Err(bad(key, refusal(kind, key, timing)));
    }
    Ok(Entry { kind, values, bad })
}

/// Why an entry of this kind may not have `key`.
fn refusal(kind: &Kind, key: &str, timing: &[&str]) -> String {
    if let Some((_, what)) = kind.instead.iter().find(|(k, _)| *k == key) {
        return what.to_string();
    }
    let takers: Vec<&str> = CATALOGUE
        .iter()
        .filter(|k| k.keys.contains(&key))
        .map(|k| k.name)
        .collect();
    if !takers.is_empty() {
        return format!("only a {} fault takes it", takers.join(" or "));
    }
    let known: Vec<&str> = ["kind"]
        .iter()
        .chain(kind.keys)
        .chain(timing)
        .copied()
        .collect();
    format!(
        "unknown key: a {} fault takes {}",
        kind.name,
        known.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_name_and_its_keys_once() {
        for (i, k) in CATALOGUE.iter().enumerate() {
            assert!(
                CATALOGUE[..i].iter().all(|o| o.name != k.name),
                "{} twice",
                k.name
            );
            for (j, key) in k.keys.iter().enumerate() {
                assert!(!k.keys[..j].contains(key), "{}: {key} twice", k.name);
            }
            assert_eq!(kind(k.name).map(|k| k.name), Some(k.name));
        }
    }
}
