//! Reading `history.jsonl`: every rule of the spec (v1.1) checked, every bad line
//! named by file, 1-based line and field. Nothing is skipped silently, and nothing
//! unread passes for an empty history: no client operation is an error.
//!
//! Two readings of a line give the same ops and refuse the same lines
//! (`tests::the_fast_reading_agrees_with_the_full_parse`): the fast one takes the
//! fields of a plainly well-formed line straight from the text, and whatever it
//! cannot vouch for goes to the full one, which names what is wrong.

use super::input::{Input, Line};
use super::json::{self, Fault};
use super::malformed::HistoryError;
use super::op::{AppliedWrite, History, Op, OpRef, OpType, Process};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::path::Path;

/// Reads and validates a history file (`-` = standard input; gzip and zstd undone).
pub fn read_jsonl(path: &Path) -> Result<History, HistoryError> {
    read_jsonl_from(Input::open(path)?)
}

/// Reads and validates a history from an opened input.
pub fn read_jsonl_from(input: Input) -> Result<History, HistoryError> {
    let mut ops = Vec::new();
    let warnings = read_lines(input, parse_line_ref, |op| {
        ops.push(op.to_op().map_err(|e| ("value".into(), e.to_string()))?);
        Ok(())
    })?;
    Ok(History { ops, warnings })
}

/// Parses and validates history text, every line by the full parse; `file` only
/// names the source in errors.
pub fn parse_jsonl(text: &str, file: &str) -> Result<History, HistoryError> {
    let input = Input::from_reader(file, std::io::Cursor::new(text.as_bytes().to_vec()))?;
    let mut ops = Vec::new();
    let warnings = read_lines(input, parse_line, |op| {
        ops.push(op.to_op().map_err(|e| ("value".into(), e.to_string()))?);
        Ok(())
    })?;
    Ok(History { ops, warnings })
}

/// Reads and validates a history file one line at a time, handing each op to `each`
/// instead of keeping them: for histories too large to hold whole as `Op`s (a
/// million lines of `Op` take about a gigabyte). Returns the warnings.
pub fn read_jsonl_each(path: &Path, mut each: impl FnMut(Op)) -> Result<Vec<String>, HistoryError> {
    read_lines(Input::open(path)?, parse_line_ref, |op| {
        each(op.to_op().map_err(|e| ("value".into(), e.to_string()))?);
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
    read_jsonl_refs_from(Input::open(path)?, |op| {
        each(op);
        Ok(())
    })
}

/// `read_jsonl_refs` from an opened input (a pipe, standard input, a decompressed
/// file), read once front to back; an error of `each` (parsing the line's value
/// whole) is named by the line.
pub fn read_jsonl_refs_from(
    input: Input,
    mut each: impl FnMut(OpRef<'_>) -> Result<(), serde_json::Error>,
) -> Result<Vec<String>, HistoryError> {
    read_lines(input, parse_line_ref, |op| {
        each(op).map_err(|e| ("value".into(), e.to_string()))
    })
}

/// A line read into its op, and the `seq` of its value where it has one (a write
/// ok's `seq` must be unique across lines).
type Parsed<'r> = (OpRef<'r>, Option<u64>);

fn read_lines(
    input: Input,
    parse: for<'r> fn(&'r str) -> Result<Parsed<'r>, Fault>,
    mut each: impl FnMut(OpRef<'_>) -> Result<(), Fault>,
) -> Result<Vec<String>, HistoryError> {
    let mut lines = input.lines();
    let mut reading = Lines::new(lines.name.clone());
    while let Some(line) = lines.next_line()? {
        if let Some(op) = reading.next(line, parse)? {
            each(op).map_err(|f| reading.bad(f))?;
        }
    }
    reading.finish()
}

/// The line-by-line reading: the rules across lines, the warnings, and what was
/// seen (for "no operations").
struct Lines {
    file: String,
    line: usize,
    rules: Rules,
    warnings: Vec<String>,
    clients: u64,
    nemesis: u64,
    /// Why the only line of the input was not used (it had no newline).
    only_line: Option<String>,
}

/// A carriage return can only be whitespace in a JSON line: one in the middle means
/// the file's lines end with CR alone, which the spec does not allow.
const CR_INSIDE: &str =
    "a carriage return inside the line: lines end with LF or CRLF, not CR alone (old Mac line endings?)";

impl Lines {
    fn new(file: String) -> Self {
        Lines {
            file,
            line: 0,
            rules: Rules::default(),
            warnings: Vec::new(),
            clients: 0,
            nemesis: 0,
            only_line: None,
        }
    }

    /// The error for the current line.
    fn bad(&self, (field, reason): Fault) -> HistoryError {
        HistoryError::Malformed {
            file: self.file.clone(),
            line: self.line,
            field: field.into_owned(),
            reason,
        }
    }

    /// The op of the next line (`None`: a truncated tail, not used), read by `parse`.
    fn next<'r>(
        &mut self,
        line: Line<'r>,
        parse: fn(&'r str) -> Result<Parsed<'r>, Fault>,
    ) -> Result<Option<OpRef<'r>>, HistoryError> {
        self.line = line.number;
        let text = line.text.strip_suffix('\r').unwrap_or(line.text);
        let parsed = match text.contains('\r') {
            true => Err(("line".into(), CR_INSIDE.into())),
            false => parse(text),
        };
        let admitted =
            parsed.and_then(|(op, seq)| self.rules.admit(&op, seq, line.number).map(|()| op));
        if !line.terminated {
            // A run killed mid-write leaves a final line without its newline. Whatever
            // came before is intact; the tail is used only if it is a whole valid op,
            // and never when it is all there is (spec v1.1).
            let (file, n) = (&self.file, line.number);
            if n == 1 {
                self.only_line = Some(match text.contains('\r') {
                    true => "its only line has no newline and holds carriage returns (lines ending with CR alone?)".into(),
                    false => "its only line has no newline (a run killed while writing it?)".into(),
                });
                return Ok(None);
            }
            return Ok(match admitted {
                Ok(op) => {
                    self.warnings.push(format!(
                        "{file}:{n}: the final line has no newline (a run killed mid-write?); it is complete and was used"
                    ));
                    self.count(&op);
                    Some(op)
                }
                Err(f) => {
                    let e = self.bad(f);
                    self.warnings.push(format!(
                        "{file}:{n}: truncated final line ignored ({e}); the {} lines before it were used",
                        n - 1
                    ));
                    None
                }
            });
        }
        let op = admitted.map_err(|f| self.bad(f))?;
        self.count(&op);
        Ok(Some(op))
    }

    fn count(&mut self, op: &OpRef<'_>) {
        match op.process {
            Process::Client(_) => self.clients += 1,
            Process::Nemesis => self.nemesis += 1,
        }
    }

    /// The warnings, or "no operations" where no client op was read.
    fn finish(self) -> Result<Vec<String>, HistoryError> {
        if self.clients > 0 {
            return Ok(self.warnings);
        }
        let why = match (self.line, self.only_line, self.nemesis) {
            (0, _, _) => "the input is empty".to_string(),
            (_, Some(why), _) => why,
            (lines, _, n) if n as usize == lines => {
                format!("its {n} line(s) are all the fault injector's (process \"nemesis\")")
            }
            (lines, _, n) => format!(
                "of its {lines} lines, {n} are the fault injector's and the rest a truncated final line"
            ),
        };
        Err(HistoryError::NoOperations {
            file: self.file,
            why,
        })
    }
}

/// Reads `resource.jsonl`, the protected resource's own log of applied writes, with
/// the history's rules for lines (bounded, UTF-8, CRLF or LF, strict JSON): a bad
/// line, a field of the wrong type, or a `seq` applied twice is an error naming
/// the file and the 1-based line (both lines, for a `seq` twice).
pub fn read_resource(path: &Path) -> Result<Vec<AppliedWrite>, HistoryError> {
    read_resource_from(Input::open(path)?)
}

/// `read_resource` from an opened input.
pub fn read_resource_from(input: Input) -> Result<Vec<AppliedWrite>, HistoryError> {
    let mut lines = input.lines();
    let mut out = Vec::new();
    let mut applied: FxHashMap<u64, usize> = FxHashMap::default();
    while let Some(line) = lines.next_line()? {
        let n = line.number;
        let text = line.text.strip_suffix('\r').unwrap_or(line.text);
        let write = match text.contains('\r') {
            true => Err(("line".into(), CR_INSIDE.into())),
            false => applied_write(text),
        }
        .and_then(|w| match applied.insert(w.seq, n) {
            Some(first) => Err(same_seq(w.seq, first)),
            None => Ok(w),
        });
        out.push(write.map_err(|(field, reason)| HistoryError::Malformed {
            file: lines.name.clone(),
            line: n,
            field: field.into_owned(),
            reason,
        })?);
    }
    Ok(out)
}

fn same_seq(seq: u64, first: usize) -> Fault {
    (
        "seq".into(),
        format!("seq {seq} was already applied on line {first}: two applied writes with the same seq (spec v1.1)"),
    )
}

/// One line of `resource.jsonl`: `{"seq", "process", "token", "data"}`.
fn applied_write(text: &str) -> Result<AppliedWrite, Fault> {
    if text.trim().is_empty() {
        return Err(("line".into(), "blank line".into()));
    }
    let fields = json::fields(text)?;
    let mut w = AppliedWrite {
        seq: 0,
        process: 0,
        token: None,
        data: String::new(),
    };
    let (mut seq, mut process, mut data) = (false, false, false);
    for (key, raw) in &fields {
        let v = json::value(key, raw)?;
        let bad = |what: &str| {
            Err((
                key.to_string().into(),
                format!("expected {what}, found {v}"),
            ))
        };
        match (key.as_ref(), &v) {
            ("seq", v) if v.is_u64() => (w.seq, seq) = (v.as_u64().unwrap_or(0), true),
            ("process", v) if v.is_u64() => (w.process, process) = (v.as_u64().unwrap_or(0), true),
            ("seq" | "process", _) => return bad("a non-negative integer"),
            ("token", Value::Null) => w.token = None,
            ("token", v) if v.is_u64() => w.token = v.as_u64(),
            ("token", _) => return bad("a non-negative integer or null"),
            ("data", Value::String(s)) => (w.data, data) = (s.clone(), true),
            ("data", _) => return bad("a string"),
            _ => {}
        }
    }
    for (field, seen) in [("seq", seq), ("process", process), ("data", data)] {
        if !seen {
            return Err((field.into(), "missing".into()));
        }
    }
    Ok(w)
}

/// The full parse of a line: every field checked, with the reason when one is wrong.
fn parse_line(raw: &str) -> Result<Parsed<'_>, Fault> {
    if raw.trim().is_empty() {
        return Err((
            "line".into(),
            "blank line (the spec allows none in the middle)".into(),
        ));
    }
    let fields = json::fields(raw)?;
    let get = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    let parse = |name: &'static str| -> Result<Option<Value>, Fault> {
        get(name).map(|raw| json::value(name, raw)).transpose()
    };
    let uint = |name: &'static str| match parse(name)? {
        None => Err((name.into(), "missing".into())),
        Some(v) => v.as_u64().ok_or_else(|| {
            (
                name.into(),
                format!("expected a non-negative integer, found {v}"),
            )
        }),
    };
    let index = uint("index")?;
    let time = uint("time")?;
    let process = match parse("process")? {
        None => return Err(("process".into(), "missing".into())),
        Some(v) => {
            serde_json::from_value::<Process>(v).map_err(|e| ("process".into(), e.to_string()))?
        }
    };
    let kind = match parse("type")? {
        None => return Err(("type".into(), "missing".into())),
        Some(Value::String(s)) => match s.as_str() {
            "invoke" => OpType::Invoke,
            "ok" => OpType::Ok,
            "fail" => OpType::Fail,
            "info" => OpType::Info,
            other => {
                return Err((
                    "type".into(),
                    format!("\"{other}\" is not one of \"invoke\", \"ok\", \"fail\", \"info\""),
                ))
            }
        },
        Some(other) => return Err(("type".into(), format!("expected a string, found {other}"))),
    };
    let f = match parse("f")? {
        None => return Err(("f".into(), "missing".into())),
        Some(Value::String(s)) if !s.is_empty() => s,
        Some(other) => {
            return Err((
                "f".into(),
                format!("expected a non-empty string, found {other}"),
            ))
        }
    };
    let opt_str = |name: &'static str| match parse(name)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(Cow::Owned(s))),
        Some(v) => Err((name.into(), format!("expected a string, found {v}"))),
    };
    let node = opt_str("node")?;
    let error = opt_str("error")?;
    // Fields the spec does not name are allowed (it grows by new optional fields),
    // but held to the same JSON: no key twice, numbers in range.
    for (key, raw) in &fields {
        if !KNOWN.contains(&key.as_ref()) {
            json::value(key, raw)?;
        }
    }
    let (value, seq) = match parse("value")? {
        None | Some(Value::Null) => (None, None),
        Some(v) => {
            let seq = allowed(process, &f, &v)?;
            (get("value").map(Cow::Borrowed), seq)
        }
    };
    let op = OpRef {
        index,
        time,
        process,
        kind,
        f: Cow::Owned(f),
        value,
        node,
        error,
    };
    Ok((op, seq))
}

const KNOWN: [&str; 8] = [
    "index", "time", "process", "type", "f", "value", "node", "error",
];

/// Whether a (non-null) `value` is of a type its op allows (spec v1.1: a wrong type
/// is malformed, never "absent"), and its `seq` where it has one. The fault
/// injector's values are free-form objects; a client's are objects (or, for a
/// read, a counter; for an `f` the spec does not name, any number), and their
/// fields named in the spec have the spec's types.
fn allowed(process: Process, f: &str, v: &Value) -> Result<Option<u64>, Fault> {
    use super::op::f::{ACQUIRE, READ, RELEASE, RENEW, WRITE};
    let shape = match v {
        Value::Object(_) => true,
        Value::Number(_) if process == Process::Nemesis => true,
        Value::Number(n) => match f {
            READ => n.is_u64(),
            ACQUIRE | RENEW | RELEASE | WRITE => false,
            _ => true,
        },
        _ => false,
    };
    if !shape {
        let expected = match (process, f) {
            (Process::Client(_), READ) => "an object, a counter (a non-negative integer) or null",
            (Process::Client(_), ACQUIRE | RENEW | RELEASE | WRITE) => "an object or null",
            _ => "an object, a number or null",
        };
        return Err((
            "value".into(),
            format!("expected {expected} for {f}, found {v}"),
        ));
    }
    let Value::Object(m) = v else {
        return Ok(None);
    };
    if process == Process::Nemesis {
        return Ok(None);
    }
    for (key, expected) in [
        ("token", "a non-negative integer or null"),
        ("lease_ms", "a non-negative integer or null"),
        ("seq", "a non-negative integer"),
        ("lock", "a string (the lock's name)"),
        ("data", "a string or null"),
    ] {
        let Some(x) = m.get(key) else { continue };
        let fits = match key {
            "token" | "lease_ms" => x.is_null() || x.is_u64(),
            "seq" => x.is_u64(),
            "lock" => x.is_string(),
            _ => x.is_null() || x.is_string(),
        };
        if !fits {
            return Err((
                format!("value.{key}").into(),
                format!("expected {expected}, found {x}"),
            ));
        }
    }
    Ok(m.get("seq").and_then(Value::as_u64))
}

/// The fast reading of a line: its fields borrowed, its value left raw. Whatever it
/// cannot take as plainly well-formed goes to the full parse (`parse_line`), which
/// decides with its exact reasons.
fn parse_line_ref(raw: &str) -> Result<Parsed<'_>, Fault> {
    match parse_plain(raw) {
        Some(parsed) => Ok(parsed),
        None => parse_line(raw),
    }
}

/// A line read straight into its fields, or `None` where only the full parse can
/// judge it.
fn parse_plain(raw: &str) -> Option<Parsed<'_>> {
    // Unknown keys refused: serde skips them without looking for a key twice.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
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
    // A client's value with only the fields the spec names, each of its type
    // (`seq` and `lock` must not be null; serde's `Option` would take null).
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Known<'a> {
        #[serde(default)]
        #[allow(dead_code)]
        token: Option<u64>,
        #[serde(default)]
        #[allow(dead_code)]
        lease_ms: Option<u64>,
        #[serde(default, deserialize_with = "present")]
        seq: Option<u64>,
        #[serde(default, borrow, deserialize_with = "present")]
        #[allow(dead_code)]
        lock: Option<&'a str>,
        #[serde(default, borrow)]
        #[allow(dead_code)]
        data: Option<&'a str>,
    }
    fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        T::deserialize(d).map(Some)
    }
    if !plain(raw.as_bytes()) {
        return None;
    }
    // Any error (a missing or mistyped field, a key twice, an escaped string that
    // cannot be borrowed) is left to the full parse to name.
    let line: Line = serde_json::from_str(raw).ok()?;
    let process = match line.process.get() {
        "\"nemesis\"" => Process::Nemesis,
        // A JSON number of digits only is a non-negative integer: `as_u64` agrees.
        p => Process::Client(p.parse().ok()?),
    };
    if line.f.is_empty() {
        return None;
    }
    use super::op::f::{ACQUIRE, READ, RELEASE, RENEW, WRITE};
    let mut seq = None;
    if let Some(v) = line.value {
        let text = v.get();
        match (text.as_bytes()[0], process) {
            (b'{', Process::Client(_)) => seq = serde_json::from_str::<Known>(text).ok()?.seq,
            // The injector's objects are free-form: the full parse looks for keys twice.
            (b'{', Process::Nemesis) => return None,
            (b'-' | b'0'..=b'9', Process::Nemesis) => {}
            (b'-' | b'0'..=b'9', _) => match line.f {
                READ => _ = text.parse::<u64>().ok()?,
                ACQUIRE | RENEW | RELEASE | WRITE => return None,
                _ => {}
            },
            _ => return None,
        }
    }
    let op = OpRef {
        index: line.index,
        time: line.time,
        process,
        kind: line.kind,
        f: Cow::Borrowed(line.f),
        value: line.value.map(Cow::Borrowed),
        node: line.node.map(Cow::Borrowed),
        error: line.error.map(Cow::Borrowed),
    };
    Some((op, seq))
}

/// True when skipping over the line's unread parts (the raw value) cannot accept
/// what the full parse rejects. Skipping does not decode `\u` escapes (a lone
/// surrogate is an error only when decoded), does not evaluate numbers (`1e400`
/// overflows only when evaluated) and has no depth limit. So: no backslash, no
/// digit before an exponent, no run of digits long enough to overflow an f64, and
/// few enough brackets. A line this refuses is not wrong, only read the slow way.
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

/// The rules that span lines: dense indexes, a clock that never goes back, one op in
/// flight per process, completions that match their invoke, retired processes, and
/// no two applied writes with the same `seq`.
#[derive(Default)]
struct Rules {
    next_index: u64,
    last_time: u64,
    /// Each client's op in flight: whether one is, and its `f`. The name's buffer
    /// is kept from op to op, so a million invokes allocate nothing.
    in_flight: FxHashMap<u64, (bool, String)>,
    retired: FxHashSet<u64>,
    /// The `seq` of each write ok so far, and its line.
    applied: FxHashMap<u64, usize>,
}

impl Rules {
    fn admit(&mut self, op: &OpRef<'_>, seq: Option<u64>, line: usize) -> Result<(), Fault> {
        if op.index != self.next_index {
            return Err((
                "index".into(),
                format!("expected {}, found {}", self.next_index, op.index),
            ));
        }
        if op.time < self.last_time {
            return Err((
                "time".into(),
                format!(
                    "{} is earlier than the previous line's {}",
                    op.time, self.last_time
                ),
            ));
        }
        let Process::Client(p) = op.process else {
            if op.kind != OpType::Info {
                return Err(("type".into(), "nemesis ops must have type \"info\"".into()));
            }
            self.next_index += 1;
            self.last_time = op.time;
            return Ok(());
        };
        if self.retired.contains(&p) {
            return Err((
                "process".into(),
                format!("process {p} was retired after an info completion and must not act again"),
            ));
        }
        let (open, f) = self.in_flight.entry(p).or_default();
        match op.kind {
            OpType::Invoke if *open => {
                return Err((
                    "type".into(),
                    format!(
                        "process {p} invokes {} while its {f} is still in flight",
                        op.f
                    ),
                ))
            }
            OpType::Invoke => {
                *open = true;
                f.clear();
                f.push_str(&op.f);
            }
            _ if !*open => {
                return Err((
                    "type".into(),
                    format!("process {p} completes {} that it never invoked", op.f),
                ))
            }
            _ if *f != op.f => {
                return Err((
                    "f".into(),
                    format!("process {p} completes {} but invoked {f}", op.f),
                ))
            }
            kind => {
                if let (OpType::Ok, super::op::f::WRITE, Some(seq)) = (kind, op.f.as_ref(), seq) {
                    if let Some(&first) = self.applied.get(&seq) {
                        let (_, reason) = same_seq(seq, first);
                        return Err(("value.seq".into(), reason));
                    }
                    self.applied.insert(seq, line);
                }
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
