//! Reading `history.jsonl`: every rule of the spec checked, every bad line named by
//! file, 1-based line and field. Nothing is skipped silently.

use super::{History, Op, OpType, Process};
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::{Map, Value};
use std::path::Path;

/// Why a history could not be read. Display gives `file:line: field: reason`.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{file}: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}:{line}: {field}: {reason}")]
    Malformed {
        file: String,
        line: usize,
        field: String,
        reason: String,
    },
}

/// Reads and validates a history file.
pub fn read_jsonl(path: &Path) -> Result<History, HistoryError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| HistoryError::Io {
        file: file.clone(),
        source,
    })?;
    parse_jsonl(&text, &file)
}

/// Parses and validates history text; `file` only names the source in errors.
pub fn parse_jsonl(text: &str, file: &str) -> Result<History, HistoryError> {
    let mut lines = Lines::new(file);
    let mut ops = Vec::new();
    let ends_with_newline = text.is_empty() || text.ends_with('\n');
    let raw: Vec<&str> = text.split_terminator('\n').collect();
    let last = raw.len();
    for (i, raw) in raw.iter().enumerate() {
        let terminated = i + 1 < last || ends_with_newline;
        ops.extend(lines.next(raw, terminated)?);
    }
    Ok(History {
        ops,
        warnings: lines.warnings,
    })
}

/// Reads and validates a history file one line at a time, handing each op to `each`
/// instead of keeping them: for histories too large to hold whole as `Op`s (a
/// million lines of `Op` take about a gigabyte). Returns the warnings.
pub fn read_jsonl_each(path: &Path, mut each: impl FnMut(Op)) -> Result<Vec<String>, HistoryError> {
    use std::io::BufRead;
    let file = path.display().to_string();
    let io = |source| HistoryError::Io {
        file: file.clone(),
        source,
    };
    let mut reader =
        std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path).map_err(io)?);
    let mut lines = Lines::new(&file);
    let mut buf = String::new();
    loop {
        buf.clear();
        if reader.read_line(&mut buf).map_err(io)? == 0 {
            break;
        }
        let terminated = buf.ends_with('\n');
        if let Some(op) = lines.next(buf.trim_end_matches('\n'), terminated)? {
            each(op);
        }
    }
    Ok(lines.warnings)
}

/// The line-by-line reading shared by `parse_jsonl` and `read_jsonl_each`.
struct Lines<'f> {
    file: &'f str,
    line: usize,
    rules: Rules,
    warnings: Vec<String>,
}

impl<'f> Lines<'f> {
    fn new(file: &'f str) -> Self {
        Lines {
            file,
            line: 0,
            rules: Rules::default(),
            warnings: Vec::new(),
        }
    }

    /// The op of the next line; `terminated` = it ended with a newline (only the
    /// last line of a file may not).
    fn next(&mut self, raw: &str, terminated: bool) -> Result<Option<Op>, HistoryError> {
        self.line += 1;
        let (file, line) = (self.file, self.line);
        let bad = |field: &str, reason: String| HistoryError::Malformed {
            file: file.to_string(),
            line,
            field: field.to_string(),
            reason,
        };
        let parsed = parse_line(raw.trim_end_matches('\r')).map_err(|(f, r)| bad(f, r));
        if !terminated {
            // A run killed mid-write leaves a final line without its newline. Whatever
            // came before is intact; the tail is used only if it is a whole valid op.
            let rules = &mut self.rules;
            return Ok(
                match parsed.and_then(|op| rules.admit(&op).map(|_| op).map_err(|(f, r)| bad(f, r)))
                {
                    Ok(op) => {
                        self.warnings.push(format!(
                        "{file}:{line}: the final line has no newline (a run killed mid-write?); it is complete and was used"
                    ));
                        Some(op)
                    }
                    Err(e) => {
                        self.warnings.push(format!(
                        "{file}:{line}: truncated final line ignored ({e}); the {} lines before it were used",
                        line - 1
                    ));
                        None
                    }
                },
            );
        }
        let op = parsed?;
        self.rules.admit(&op).map_err(|(f, r)| bad(f, r))?;
        Ok(Some(op))
    }
}

type Fault = (&'static str, String);

fn parse_line(raw: &str) -> Result<Op, Fault> {
    if raw.trim().is_empty() {
        return Err((
            "line",
            "blank line (the spec allows none in the middle)".into(),
        ));
    }
    let value: Value =
        serde_json::from_str(raw).map_err(|e| ("line", format!("not valid JSON: {e}")))?;
    let Value::Object(mut obj) = value else {
        return Err(("line", "not a JSON object".into()));
    };
    let index = uint(&obj, "index")?;
    let time = uint(&obj, "time")?;
    let process = match obj.get("process") {
        None => return Err(("process", "missing".into())),
        Some(v) => {
            serde_json::from_value::<Process>(v.clone()).map_err(|e| ("process", e.to_string()))?
        }
    };
    let kind = match obj.get("type") {
        None => return Err(("type", "missing".into())),
        Some(Value::String(s)) => match s.as_str() {
            "invoke" => OpType::Invoke,
            "ok" => OpType::Ok,
            "fail" => OpType::Fail,
            "info" => OpType::Info,
            other => {
                return Err((
                    "type",
                    format!("\"{other}\" is not one of \"invoke\", \"ok\", \"fail\", \"info\""),
                ))
            }
        },
        Some(other) => return Err(("type", format!("expected a string, found {other}"))),
    };
    let f = match obj.get("f") {
        None => return Err(("f", "missing".into())),
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(other) => return Err(("f", format!("expected a non-empty string, found {other}"))),
    };
    // Taken, not cloned: a million lines make the copy count.
    let value = obj.remove("value").unwrap_or(Value::Null);
    if !(value.is_null() || value.is_object() || value.is_number()) {
        return Err((
            "value",
            format!("expected an object, a number or null, found {value}"),
        ));
    }
    Ok(Op {
        index,
        time,
        process,
        kind,
        f,
        value,
        node: opt_str(&obj, "node")?,
        error: opt_str(&obj, "error")?,
    })
}

fn uint(obj: &Map<String, Value>, field: &'static str) -> Result<u64, Fault> {
    match obj.get(field) {
        None => Err((field, "missing".into())),
        Some(v) => v
            .as_u64()
            .ok_or_else(|| (field, format!("expected a non-negative integer, found {v}"))),
    }
}

fn opt_str(obj: &Map<String, Value>, field: &'static str) -> Result<Option<String>, Fault> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err((field, format!("expected a string, found {v}"))),
    }
}

/// The rules that span lines: dense indexes, a clock that never goes back, one op in
/// flight per process, completions that match their invoke, retired processes.
#[derive(Default)]
struct Rules {
    next_index: u64,
    last_time: u64,
    in_flight: FxHashMap<u64, String>,
    retired: FxHashSet<u64>,
}

impl Rules {
    fn admit(&mut self, op: &Op) -> Result<(), Fault> {
        if op.index != self.next_index {
            return Err((
                "index",
                format!("expected {}, found {}", self.next_index, op.index),
            ));
        }
        if op.time < self.last_time {
            return Err((
                "time",
                format!(
                    "{} is earlier than the previous line's {}",
                    op.time, self.last_time
                ),
            ));
        }
        let Process::Client(p) = op.process else {
            if op.kind != OpType::Info {
                return Err(("type", "nemesis ops must have type \"info\"".into()));
            }
            self.next_index += 1;
            self.last_time = op.time;
            return Ok(());
        };
        if self.retired.contains(&p) {
            return Err((
                "process",
                format!("process {p} was retired after an info completion and must not act again"),
            ));
        }
        match (op.kind, self.in_flight.get(&p)) {
            (OpType::Invoke, Some(f)) => {
                return Err((
                    "type",
                    format!(
                        "process {p} invokes {} while its {f} is still in flight",
                        op.f
                    ),
                ))
            }
            (OpType::Invoke, None) => {
                self.in_flight.insert(p, op.f.clone());
            }
            (_, None) => {
                return Err((
                    "type",
                    format!("process {p} completes {} that it never invoked", op.f),
                ))
            }
            (_, Some(f)) if *f != op.f => {
                return Err((
                    "f",
                    format!("process {p} completes {} but invoked {f}", op.f),
                ))
            }
            (kind, Some(_)) => {
                self.in_flight.remove(&p);
                if kind == OpType::Info {
                    self.retired.insert(p);
                }
            }
        }
        self.next_index += 1;
        self.last_time = op.time;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(i: u64, t: u64, p: &str, ty: &str, f: &str) -> String {
        format!(r#"{{"index":{i},"time":{t},"process":{p},"type":"{ty}","f":"{f}","value":null}}"#)
    }

    fn err(text: &str) -> String {
        parse_jsonl(text, "h.jsonl").unwrap_err().to_string()
    }

    #[test]
    fn reads_a_valid_history() {
        let text = [
            line(0, 0, "0", "invoke", "acquire"),
            line(1, 5, "\"nemesis\"", "info", "pause"),
            line(2, 9, "0", "ok", "acquire"),
        ]
        .join("\n")
            + "\n";
        let h = parse_jsonl(&text, "h.jsonl").unwrap();
        assert_eq!(h.ops.len(), 3);
        assert!(h.warnings.is_empty());
        assert_eq!(h.pairs(), vec![(0, Some(2))]);
    }

    #[test]
    fn names_file_line_and_field() {
        let text =
            line(0, 0, "0", "invoke", "acquire") + "\n" + &line(2, 1, "0", "ok", "acquire") + "\n";
        assert_eq!(err(&text), "h.jsonl:2: index: expected 1, found 2");
        let text =
            line(0, 9, "0", "invoke", "acquire") + "\n" + &line(1, 1, "0", "ok", "acquire") + "\n";
        assert!(err(&text).starts_with("h.jsonl:2: time: 1 is earlier"));
        assert!(err("[1]\n").contains("h.jsonl:1: line: not a JSON object"));
        assert!(err("{\n").contains("h.jsonl:1: line: not valid JSON"));
        let text = line(0, 0, "0", "begin", "acquire") + "\n";
        assert!(err(&text).contains("type: \"begin\" is not one of"));
    }

    #[test]
    fn rejects_broken_pairing() {
        let text = line(0, 0, "0", "ok", "acquire") + "\n";
        assert!(err(&text).contains("never invoked"));
        let text = line(0, 0, "0", "invoke", "acquire")
            + "\n"
            + &line(1, 1, "0", "invoke", "release")
            + "\n";
        assert!(err(&text).contains("still in flight"));
        let text =
            line(0, 0, "0", "invoke", "acquire") + "\n" + &line(1, 1, "0", "ok", "release") + "\n";
        assert!(err(&text).starts_with("h.jsonl:2: f:"));
        let text = [
            line(0, 0, "0", "invoke", "acquire"),
            line(1, 1, "0", "info", "acquire"),
            line(2, 2, "0", "invoke", "acquire"),
        ]
        .join("\n")
            + "\n";
        assert!(err(&text).contains("retired"));
    }

    #[test]
    fn reading_line_by_line_gives_the_same_ops_and_warnings() {
        let text = line(0, 0, "0", "invoke", "acquire")
            + "\n"
            + &line(1, 1, "0", "ok", "acquire")
            + "\n"
            + r#"{"index":2,"#;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        std::fs::write(&path, &text).unwrap();
        let whole = parse_jsonl(&text, &path.display().to_string()).unwrap();
        let mut ops = Vec::new();
        let warnings = read_jsonl_each(&path, |op| ops.push(op)).unwrap();
        assert_eq!(ops, whole.ops);
        assert_eq!(warnings, whole.warnings);
        std::fs::write(&path, text.replace("\"index\":1", "\"index\":5")).unwrap();
        let e = read_jsonl_each(&path, |_| {}).unwrap_err().to_string();
        assert!(e.ends_with(":2: index: expected 1, found 5"), "{e}");
    }

    #[test]
    fn truncated_tail_is_a_warning_and_the_rest_is_kept() {
        let text = line(0, 0, "0", "invoke", "acquire") + "\n" + r#"{"index":1,"ti"#;
        let h = parse_jsonl(&text, "h.jsonl").unwrap();
        assert_eq!(h.ops.len(), 1);
        assert!(h.warnings[0].contains("truncated final line"));
        let text = line(0, 0, "0", "invoke", "acquire") + "\n" + &line(1, 1, "0", "ok", "acquire");
        let h = parse_jsonl(&text, "h.jsonl").unwrap();
        assert_eq!(h.ops.len(), 2);
        assert!(h.warnings[0].contains("no newline"));
    }
}
