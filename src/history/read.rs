//! Reading `history.jsonl`: every rule of the spec checked, every bad line named by
//! file, 1-based line and field. Nothing is skipped silently.

use super::{AppliedWrite, History, Op, OpRef, OpType, Process};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
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
        ops.extend(lines.next(raw, terminated, parse_line, Op::head)?);
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
    read_lines(path, |op| {
        each(op.to_op().map_err(|e| ("value", e.to_string()))?);
        Ok(())
    })
}

/// As `read_jsonl_each`, but each line is handed over as an `OpRef` borrowed from
/// the reader's buffer, its value unparsed: the fastest way through a large history.
/// The same rules are checked and the same lines accepted.
pub fn read_jsonl_refs(
    path: &Path,
    mut each: impl FnMut(OpRef<'_>),
) -> Result<Vec<String>, HistoryError> {
    read_lines(path, |op| {
        each(op);
        Ok(())
    })
}

fn read_lines(
    path: &Path,
    mut each: impl FnMut(OpRef<'_>) -> Result<(), Fault>,
) -> Result<Vec<String>, HistoryError> {
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
        let raw = buf.trim_end_matches('\n');
        if let Some(op) = lines.next(raw, terminated, parse_line_ref, OpRef::head)? {
            each(op).map_err(|(f, r)| lines.bad(f, r))?;
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

    /// The error for the current line.
    fn bad(&self, field: &str, reason: String) -> HistoryError {
        HistoryError::Malformed {
            file: self.file.to_string(),
            line: self.line,
            field: field.to_string(),
            reason,
        }
    }

    /// The op of the next line, read by `parse` (`head` gives what the rules across
    /// lines look at); `terminated` = the line ended with a newline (only the last
    /// line of a file may not).
    fn next<'r, T>(
        &mut self,
        raw: &'r str,
        terminated: bool,
        parse: impl FnOnce(&'r str) -> Result<T, Fault>,
        head: fn(&T) -> Head<'_>,
    ) -> Result<Option<T>, HistoryError> {
        self.line += 1;
        let (file, line) = (self.file, self.line);
        let parsed = parse(raw.trim_end_matches('\r'));
        if !terminated {
            // A run killed mid-write leaves a final line without its newline. Whatever
            // came before is intact; the tail is used only if it is a whole valid op.
            let rules = &mut self.rules;
            return Ok(
                match parsed.and_then(|op| rules.admit(head(&op)).map(|_| op)) {
                    Ok(op) => {
                        self.warnings.push(format!(
                        "{file}:{line}: the final line has no newline (a run killed mid-write?); it is complete and was used"
                    ));
                        Some(op)
                    }
                    Err((f, r)) => {
                        let e = self.bad(f, r);
                        self.warnings.push(format!(
                        "{file}:{line}: truncated final line ignored ({e}); the {} lines before it were used",
                        line - 1
                    ));
                        None
                    }
                },
            );
        }
        let op = parsed.map_err(|(f, r)| self.bad(f, r))?;
        self.rules
            .admit(head(&op))
            .map_err(|(f, r)| self.bad(f, r))?;
        Ok(Some(op))
    }
}

/// Reads `resource.jsonl`, the protected resource's own log of applied writes. A bad
/// line is an error naming the file and the 1-based line, as for the history.
pub fn read_resource(path: &Path) -> Result<Vec<AppliedWrite>, HistoryError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| HistoryError::Io {
        file: file.clone(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str::<AppliedWrite>(l).map_err(|e| HistoryError::Malformed {
                file: file.clone(),
                line: i + 1,
                field: "line".into(),
                reason: format!(
                    "not an applied write {{\"seq\", \"process\", \"token\", \"data\"}}: {e}"
                ),
            })
        })
        .collect()
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

/// The fast reading of a line: its fields borrowed, its value left raw. Whatever it
/// cannot take as plainly well-formed goes to the full parse (`parse_line`), which
/// decides with its exact reasons: both readings accept the same lines and give
/// the same ops (`tests::the_fast_reading_agrees_with_the_full_parse`).
fn parse_line_ref(raw: &str) -> Result<OpRef<'_>, Fault> {
    match parse_plain(raw) {
        Some(op) => Ok(op),
        None => {
            let op = parse_line(raw)?;
            let value = match op.value.is_null() {
                true => None,
                false => Some(Cow::Owned(
                    serde_json::value::to_raw_value(&op.value)
                        .map_err(|e| ("value", e.to_string()))?,
                )),
            };
            Ok(OpRef {
                index: op.index,
                time: op.time,
                process: op.process,
                kind: op.kind,
                f: Cow::Owned(op.f),
                value,
                node: op.node.map(Cow::Owned),
                error: op.error.map(Cow::Owned),
            })
        }
    }
}

/// A line read straight into its fields, or `None` where only the full parse can
/// judge it.
fn parse_plain(raw: &str) -> Option<OpRef<'_>> {
    #[derive(Deserialize)]
    struct Line<'a> {
        index: u64,
        time: u64,
        #[serde(borrow)]
        process: &'a RawValue,
        #[serde(rename = "type")]
        kind: OpType,
        f: &'a str,
        #[serde(borrow)]
        value: Option<&'a RawValue>,
        node: Option<&'a str>,
        error: Option<&'a str>,
    }
    if !plain(raw.as_bytes()) {
        return None;
    }
    // Any error (a missing or mistyped field, a duplicate key, an escaped string
    // that cannot be borrowed) is left to the full parse to name.
    let line: Line = serde_json::from_str(raw).ok()?;
    let process = match line.process.get() {
        "\"nemesis\"" => Process::Nemesis,
        // A JSON number of digits only is a non-negative integer: `as_u64` agrees.
        p => Process::Client(p.parse().ok()?),
    };
    if line.f.is_empty() {
        return None;
    }
    let value = match line.value {
        Some(v) if !matches!(v.get().as_bytes()[0], b'{' | b'-' | b'0'..=b'9') => return None,
        v => v.map(Cow::Borrowed),
    };
    Some(OpRef {
        index: line.index,
        time: line.time,
        process,
        kind: line.kind,
        f: Cow::Borrowed(line.f),
        value,
        node: line.node.map(Cow::Borrowed),
        error: line.error.map(Cow::Borrowed),
    })
}

/// True when skipping over the line's unread parts (an extra field, the raw value)
/// cannot accept what the full parse rejects. Skipping does not decode `\u`
/// escapes (a lone surrogate is an error only when decoded), does not evaluate
/// numbers (`1e400` overflows only when evaluated) and has no depth limit (the full
/// parse stops at 128). So: no backslash, no digit before an exponent, no run of
/// digits long enough to overflow an f64, and few enough brackets. A line this
/// refuses is not wrong, only read the slow way.
fn plain(line: &[u8]) -> bool {
    let (mut digits, mut open) = (0usize, 0usize);
    for &b in line {
        match b {
            b'0'..=b'9' => {
                digits += 1;
                if digits > 300 {
                    return false;
                }
                continue;
            }
            b'e' | b'E' if digits > 0 => return false,
            b'\\' => return false,
            b'{' | b'[' => open += 1,
            _ => {}
        }
        digits = 0;
    }
    open < 100
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

/// What the rules across lines look at in an op.
struct Head<'a> {
    index: u64,
    time: u64,
    process: Process,
    kind: OpType,
    f: &'a str,
}

impl Op {
    fn head(&self) -> Head<'_> {
        Head {
            index: self.index,
            time: self.time,
            process: self.process,
            kind: self.kind,
            f: &self.f,
        }
    }
}

impl OpRef<'_> {
    fn head(&self) -> Head<'_> {
        Head {
            index: self.index,
            time: self.time,
            process: self.process,
            kind: self.kind,
            f: &self.f,
        }
    }
}

/// The rules that span lines: dense indexes, a clock that never goes back, one op in
/// flight per process, completions that match their invoke, retired processes.
#[derive(Default)]
struct Rules {
    next_index: u64,
    last_time: u64,
    /// Each client's op in flight: whether one is, and its `f`. The name's buffer
    /// is kept from op to op, so a million invokes allocate nothing.
    in_flight: FxHashMap<u64, (bool, String)>,
    retired: FxHashSet<u64>,
}

impl Rules {
    fn admit(&mut self, op: Head<'_>) -> Result<(), Fault> {
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
        let (open, f) = self.in_flight.entry(p).or_default();
        match op.kind {
            OpType::Invoke if *open => {
                return Err((
                    "type",
                    format!(
                        "process {p} invokes {} while its {f} is still in flight",
                        op.f
                    ),
                ))
            }
            OpType::Invoke => {
                *open = true;
                f.clear();
                f.push_str(op.f);
            }
            _ if !*open => {
                return Err((
                    "type",
                    format!("process {p} completes {} that it never invoked", op.f),
                ))
            }
            _ if *f != op.f => {
                return Err((
                    "f",
                    format!("process {p} completes {} but invoked {f}", op.f),
                ))
            }
            kind => {
                *open = false;
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

    /// The fast reading hands over the same ops and names the same faults as the
    /// full parse, on lines made to trip it: escapes, duplicate keys, numbers and
    /// nesting only the full parse evaluates, values of every JSON type.
    #[test]
    fn the_fast_reading_agrees_with_the_full_parse() {
        let head = r#"{"index":0,"time":1,"process":3,"type":"invoke","f":"acquire","value":null}"#;
        let tails = [
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":{"token":7,"lock":"l"},"node":"n1"}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acq\u0075ire","value":{"token":7}}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":{"data":"a\"b\\c","lock":"x\ud800"}}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":{"token":1e400}}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":{"token":1.5E3,"seq":-0}}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","extra":1e999,"value":7}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","index":1,"value":{}}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":{"token":1,"token":2}}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":[1]}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":"x"}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":true}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":-2.5}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"","value":null}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","error":5}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","node":null,"error":"t"}"#,
            r#"{"index":1.0,"time":2,"process":3,"type":"ok","f":"acquire"}"#,
            r#"{"index":1,"time":2,"process":"3","type":"ok","f":"acquire"}"#,
            r#"{"index":1,"time":2,"process":-3,"type":"ok","f":"acquire"}"#,
            r#"{"index":1,"time":2,"process":18446744073709551616,"type":"ok","f":"acquire"}"#,
            r#"{"index":1,"time":2,"process":"nemesis","type":"info","f":"pause","value":{"targets":["c"]}}"#,
            r#"{"index":1,"time":2,"process":"nem\u0065sis","type":"info","f":"pause"}"#,
            r#"{"index":1,"time":2,"process":3,"type":"done","f":"acquire"}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":{"x":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire"} x"#,
            r#" {"index":1, "time":2 ,"process":3,"type":"ok","f":"acquire"}	"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":{"token":1"#,
            "{\"index\":1,\"time\":2,\"process\":3,\"type\":\"ok\",\"f\":\"acq\t\",\"value\":null}",
            "{\"index\":1,\"time\":2,\"process\":3,\"type\":\"ok\",\"f\":\"acquire\",\"value\":{\"d\":\"a\tb\"}}",
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":{"a":[true,false,null,-0.5,0,{}],"b":01}}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":{"a":[1,]}}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":{"a":tru}}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":{"a":-}}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":{"a":1.}}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":{"a" 1}}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":{"a":{"b":[]},"c":[{}]},"node":"x",}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","value":nullx}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","node":"a","node":"a"}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire","":0,"":1}"#,
            r#"{"time":2,"process":3,"type":"ok","f":"acquire"}"#,
            r#"{}"#,
            r#"{"index":1,"time":2,"process":3,"type":"ok","f":"acquire"}}"#,
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let file = path.display().to_string();
        for tail in tails {
            for end in ["\n", ""] {
                let text = format!("{head}\n{tail}{end}");
                std::fs::write(&path, &text).unwrap();
                let mut ops = Vec::new();
                let each = read_jsonl_each(&path, |op| ops.push(op)).map_err(|e| e.to_string());
                match parse_jsonl(&text, &file) {
                    Ok(whole) => {
                        assert_eq!(each, Ok(whole.warnings), "{tail}");
                        assert_eq!(ops, whole.ops, "{tail}");
                    }
                    Err(e) => assert_eq!(each, Err(e.to_string()), "{tail}"),
                }
            }
        }
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
