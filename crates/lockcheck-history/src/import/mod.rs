//! Importers: Jepsen's EDN histories and Porcupine's etcd and kv logs, read into
//! lockcheck's history, each following its own source's semantics.
//!
//! ## How foreign ops are encoded
//!
//! Every imported op becomes an `Op` with a dense `index` (its position), `time` =
//! the source's `:time` where every op has one and they never go back, else the
//! position, and `value` in these shapes (what the models in `check::models` read):
//!
//! | f | invoke value | completion value |
//! |---|---|---|
//! | `read` | null | `{"value": V}` (V an integer, or null = the register is empty); **null** = it returned, output unknown |
//! | `write` | `{"value": V}` | `{"value": V}` |
//! | `cas` | `{"from": A, "to": B}` | `{"from": A, "to": B, "ok": true or false}` |
//! | `txn` | `{"txn": [["read", "x", null], ["write", "y", 2]]}` | same, reads filled in (null = unknown) |
//! | `get`/`put`/`append` | `{"key": K, "value": V}` | same; a get's value is the string read |
//! | anything else | the EDN value as JSON (wrapped as `{"value": ...}` unless a map or nil) | same |
//!
//! Semantics per source, as the corpus READMEs spell them out:
//! - **Knossos / Jepsen EDN**: `:fail` did not happen (kept as type `fail`, which the
//!   checker drops); `:info` or no completion may take effect any time after the
//!   invoke, or never (type `info`); a read of `nil` returned an unknown value
//!   (completion value null).
//! - **Porcupine etcd logs**: `:fail :cas` *happened* and returned false, so it is
//!   type `ok` with `"ok": false` (the register's value was not A); `:fail :read
//!   :timed-out` returned with an unknown output (type `ok`, value null); `:ok :read
//!   nil` read an empty register (`{"value": null}`); `:info` stays open (type `info`);
//!   any other `:fail` line Porcupine's parser does not match either, so the call
//!   stays open, as an `info`.
//! - **Porcupine kv logs**: one EDN map per line with `:key`; only invoke and ok.
//!
//! lockcheck's own rules (one op in flight per process, a process retired after an
//! `info`) are made to hold rather than enforced: a process that invokes again while
//! an op is open, or acts after an `info`, goes on under a fresh process id (as Jepsen
//! would have numbered it), and a completion nobody invoked is dropped; each with a
//! warning. Fault-injector ops keep process `nemesis` and become type `info`.
//! A file that cannot be read as its format is an error naming file, line and reason.

pub mod edn;
pub mod porcupine;
mod raw;

pub use raw::{Fault, RawOp};

use super::{History, HistoryError, Input, Op, OpType, Process};
use rustc_hash::{FxHashMap, FxHashSet};
use std::path::Path;

/// The formats `check` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// lockcheck's own `history.jsonl`.
    Jsonl,
    /// Jepsen / Knossos EDN: one collection of op maps, or one map per line.
    JepsenEdn,
    /// Porcupine's etcd test logs (Jepsen console output).
    PorcupineEtcd,
    /// Porcupine's kv test logs (one EDN map per line with `:key`).
    PorcupineKv,
}

impl Format {
    pub const ALL: [Format; 4] = [
        Format::Jsonl,
        Format::JepsenEdn,
        Format::PorcupineEtcd,
        Format::PorcupineKv,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Jsonl => "jsonl",
            Format::JepsenEdn => "jepsen-edn",
            Format::PorcupineEtcd => "porcupine-etcd",
            Format::PorcupineKv => "porcupine-kv",
        }
    }

    /// Guesses the format from the text (and, for an empty file, the file name).
    pub fn detect(text: &str, path: &Path) -> Format {
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with(';'));
        let Some(first) = first else {
            // `h.edn.gz`: the name under the compression's.
            let path = match path.extension().and_then(|e| e.to_str()) {
                Some("gz" | "zst") => Path::new(path.file_stem().unwrap_or_default()),
                _ => path,
            };
            return match path.extension().and_then(|e| e.to_str()) {
                Some("log") => Format::PorcupineEtcd,
                Some("edn") => Format::JepsenEdn,
                Some("txt") => Format::PorcupineKv,
                _ => Format::Jsonl,
            };
        };
        if first.contains("jepsen.util") || text.contains("jepsen.util -") {
            Format::PorcupineEtcd
        } else if first.starts_with('{') && first[1..].trim_start().starts_with('"') {
            Format::Jsonl
        } else if first.starts_with('{') && first.contains(":key ") {
            Format::PorcupineKv
        } else if first.starts_with(['{', '[', '(']) {
            Format::JepsenEdn
        } else {
            // Let the strictest reader say what is wrong, with the line.
            Format::Jsonl
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Format::ALL.iter().map(|f| f.name()).collect();
                format!(
                    "unknown format \"{s}\" (expected one of: {})",
                    names.join(", ")
                )
            })
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Reads `path` (`-` = standard input; gzip and zstd undone) as `format`
/// (detected from its first bytes when `None`).
pub fn read(path: &Path, format: Option<Format>) -> Result<(History, Format), HistoryError> {
    read_input(Input::open(path)?, format)
}

/// Reads an opened input as `format` (detected from its first bytes when `None`),
/// once, front to back.
pub fn read_input(input: Input, format: Option<Format>) -> Result<(History, Format), HistoryError> {
    let format = format.unwrap_or_else(|| input.format());
    if format == Format::Jsonl {
        return Ok((super::read_jsonl_from(input)?, format));
    }
    let (file, text) = input.read_text()?;
    Ok((parse(&text, &file, format)?, format))
}

impl Input {
    /// The format of this input, told from its first bytes (and, where they are
    /// empty, from its name).
    pub fn format(&self) -> Format {
        Format::detect(
            &String::from_utf8_lossy(self.prefix()),
            Path::new(&self.name),
        )
    }
}

/// Parses history text in `format`; `file` only names the source in errors.
pub fn parse(text: &str, file: &str, format: Format) -> Result<History, HistoryError> {
    let named = |f: Fault| HistoryError::Malformed {
        file: file.to_string(),
        line: f.line,
        field: f.field,
        reason: f.reason,
    };
    let raws = match format {
        Format::Jsonl => return super::parse_jsonl(text, file),
        Format::JepsenEdn | Format::PorcupineKv => edn::read_forms(text)
            .and_then(|forms| {
                forms
                    .iter()
                    .map(|(line, m)| edn::op_from_map(*line, m))
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(named)?,
        Format::PorcupineEtcd => porcupine::etcd(text).map_err(named)?,
    };
    let history = build(raws).map_err(named)?;
    if !history.ops.iter().any(|o| o.process.client().is_some()) {
        let why = match (text.trim().is_empty(), history.ops.len()) {
            (true, _) => "the input is empty".to_string(),
            (false, 0) => format!("no {format} op was found in it"),
            (false, n) => format!("its {n} op(s) are all the fault injector's (:nemesis)"),
        };
        return Err(HistoryError::NoOperations {
            file: file.to_string(),
            why,
        });
    }
    Ok(history)
}

/// At most this many warnings of one kind are listed; the rest are counted.
const WARN_EACH: usize = 5;

/// Turns raw ops into a history that follows lockcheck's rules (see the module doc).
fn build(raws: Vec<RawOp>) -> Result<History, Fault> {
    let mut warnings = Warnings::default();
    let use_time = !raws.is_empty()
        && raws.iter().all(|r| r.time.is_some())
        && raws.windows(2).all(|w| w[0].time <= w[1].time);
    if !use_time && raws.iter().any(|r| r.time.is_some()) {
        warnings.push(
            "time",
            "some ops have no :time or times go backwards in file order; the position in the file is used as time".into(),
        );
    }
    let mut next_fresh = raws
        .iter()
        .filter_map(|r| r.process.client())
        .max()
        .map_or(0, |m| m + 1);
    // The id each source process currently goes by, and what it has in flight.
    let mut alias: FxHashMap<u64, u64> = FxHashMap::default();
    let mut in_flight: FxHashMap<u64, String> = FxHashMap::default();
    let mut retired: FxHashSet<u64> = FxHashSet::default();
    let mut ops = Vec::with_capacity(raws.len());
    for r in raws {
        let process = match r.process {
            Process::Nemesis => Process::Nemesis,
            Process::Client(p) => {
                let mut id = *alias.get(&p).unwrap_or(&p);
                if r.kind == OpType::Invoke {
                    let reason = if retired.contains(&id) {
                        Some("acts again after an info completion")
                    } else if in_flight.contains_key(&id) {
                        Some("invokes again while an op is still open (the open op counts as info)")
                    } else {
                        None
                    };
                    if let Some(reason) = reason {
                        warnings.push(
                            "process",
                            format!(
                                "line {}: process {p} {reason}; it goes on as process {next_fresh}",
                                r.line
                            ),
                        );
                        id = next_fresh;
                        next_fresh += 1;
                        alias.insert(p, id);
                    }
                    in_flight.insert(id, r.f.clone());
                } else {
                    match in_flight.get(&id) {
                        None => {
                            warnings.push(
                                "orphan",
                                format!(
                                    "line {}: process {p} completes {} that it never invoked; ignored",
                                    r.line, r.f
                                ),
                            );
                            continue;
                        }
                        Some(f) if *f != r.f => {
                            return Err(Fault {
                                line: r.line,
                                field: "f".into(),
                                reason: format!("process {p} completes {} but invoked {f}", r.f),
                            })
                        }
                        Some(_) => {
                            in_flight.remove(&id);
                            if r.kind == OpType::Info {
                                retired.insert(id);
                            }
                        }
                    }
                }
                Process::Client(id)
            }
        };
        let index = ops.len() as u64;
        ops.push(Op {
            index,
            time: if use_time {
                r.time.unwrap_or(index)
            } else {
                index
            },
            process,
            kind: if process == Process::Nemesis {
                OpType::Info
            } else {
                r.kind
            },
            f: r.f,
            value: r.value,
            node: None,
            error: r.error,
        });
    }
    Ok(History {
        ops,
        warnings: warnings.finish(),
    })
}

/// Warnings grouped by kind, a few of each listed and the rest counted.
#[derive(Default)]
struct Warnings {
    kinds: Vec<(&'static str, Vec<String>, usize)>,
}

impl Warnings {
    fn push(&mut self, kind: &'static str, text: String) {
        match self.kinds.iter_mut().find(|(k, _, _)| *k == kind) {
            Some((_, listed, more)) if listed.len() >= WARN_EACH => *more += 1,
            Some((_, listed, _)) => listed.push(text),
            None => self.kinds.push((kind, vec![text], 0)),
        }
    }

    fn finish(self) -> Vec<String> {
        let mut out = Vec::new();
        for (_, listed, more) in self.kinds {
            out.extend(listed);
            if more > 0 {
                out.push(format!("... and {more} more like the above"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn raw(line: usize, p: u64, kind: OpType, f: &str) -> RawOp {
        RawOp {
            line,
            process: Process::Client(p),
            kind,
            f: f.into(),
            value: Value::Null,
            time: None,
            error: None,
        }
    }

    #[test]
    fn foreign_processes_are_made_to_follow_our_rules() {
        let h = build(vec![
            raw(1, 0, OpType::Invoke, "write"),
            raw(2, 0, OpType::Info, "write"),
            raw(3, 0, OpType::Invoke, "read"),
            raw(4, 0, OpType::Ok, "read"),
            raw(5, 1, OpType::Ok, "read"),
        ])
        .unwrap();
        assert_eq!(h.ops.len(), 4);
        assert_eq!(h.ops[2].process, Process::Client(2));
        assert_eq!(h.ops[3].process, Process::Client(2));
        assert_eq!(h.ops[3].index, 3);
        assert!(h.warnings[0].contains("after an info"));
        assert!(h.warnings[1].contains("never invoked"));
        // The result passes lockcheck's own reader.
        let text: String = h
            .ops
            .iter()
            .map(|o| serde_json::to_string(o).unwrap() + "\n")
            .collect();
        crate::parse_jsonl(&text, "x").unwrap();
        let e = build(vec![
            raw(1, 0, OpType::Invoke, "write"),
            raw(2, 0, OpType::Ok, "read"),
        ])
        .unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "f"));
    }

    #[test]
    fn detects_formats() {
        let p = Path::new("h");
        assert_eq!(Format::detect("{\"index\":0}\n", p), Format::Jsonl);
        assert_eq!(Format::detect("; c\n[{:process 0}]", p), Format::JepsenEdn);
        assert_eq!(
            Format::detect(
                "{:process 9, :type :invoke, :f :get, :key \"9\", :value nil}\n",
                p
            ),
            Format::PorcupineKv
        );
        assert_eq!(
            Format::detect("x\nINFO  jepsen.util - 2\t:invoke\t:write\t4\n", p),
            Format::PorcupineEtcd
        );
        assert_eq!(
            Format::detect("", Path::new("etcd_095.log")),
            Format::PorcupineEtcd
        );
    }
}
