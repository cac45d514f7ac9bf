//! A small EDN reader: the part of EDN that Jepsen and Knossos histories use (maps,
//! vectors, lists, sets, keywords, symbols, strings, integers, floats, nil,
//! booleans, `;` comments, commas as whitespace), and the conversion of Jepsen op
//! maps into lockcheck's ops.

use super::raw::{Fault, RawOp};
use crate::input::MAX_DEPTH;
use crate::{OpType, Process};
use serde_json::{json, Map, Value};

/// One EDN value.
#[derive(Debug, Clone, PartialEq)]
pub enum Edn {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// Without the leading colon.
    Keyword(String),
    Symbol(String),
    /// Vectors, lists and sets alike: order is all a history needs.
    Seq(Vec<Edn>),
    Map(Vec<(Edn, Edn)>),
}

impl Edn {
    /// The value of `:key` in a map.
    pub fn get(&self, key: &str) -> Option<&Edn> {
        match self {
            Edn::Map(entries) => entries
                .iter()
                .find(|(k, _)| matches!(k, Edn::Keyword(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// EDN as JSON: keywords and symbols become strings, collections arrays,
    /// maps objects (keys as text).
    pub fn to_json(&self) -> Value {
        match self {
            Edn::Nil => Value::Null,
            Edn::Bool(b) => json!(b),
            Edn::Int(i) => json!(i),
            Edn::Float(f) => json!(f),
            Edn::Str(s) | Edn::Keyword(s) | Edn::Symbol(s) => json!(s),
            Edn::Seq(items) => Value::Array(items.iter().map(Edn::to_json).collect()),
            Edn::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| {
                        let key = match k {
                            Edn::Str(s) | Edn::Keyword(s) | Edn::Symbol(s) => s.clone(),
                            other => other.to_json().to_string(),
                        };
                        (key, v.to_json())
                    })
                    .collect::<Map<_, _>>(),
            ),
        }
    }
}

/// Reads the forms of an EDN history: either one collection of op maps (Knossos's
/// files) or one map per line (Jepsen's and Porcupine's logs). Each op comes with
/// the 1-based line it starts on.
pub fn read_forms(text: &str) -> Result<Vec<(usize, Edn)>, Fault> {
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        pos: 0,
        line: 1,
        depth: 0,
    };
    let mut forms = Vec::new();
    p.skip_ws();
    let single_collection = matches!(p.peek(), Some(b'[') | Some(b'('));
    if single_collection {
        let close = if p.peek() == Some(b'[') { b']' } else { b')' };
        p.pos += 1;
        p.depth = 1;
        loop {
            p.skip_ws();
            match p.peek() {
                None => return Err(p.fault("the history's collection is never closed")),
                Some(c) if c == close => {
                    p.pos += 1;
                    break;
                }
                Some(_) => {
                    let line = p.line;
                    forms.push((line, p.value()?));
                }
            }
        }
        p.skip_ws();
        if p.peek().is_some() {
            return Err(p.fault("text after the history's closing bracket"));
        }
    } else {
        while p.peek().is_some() {
            let line = p.line;
            forms.push((line, p.value()?));
            p.skip_ws();
        }
    }
    Ok(forms)
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    pos: usize,
    line: usize,
    /// Collections open around `pos`: bounded by `MAX_DEPTH`, so the recursion
    /// below cannot overflow the stack on a hostile file.
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn fault(&self, reason: impl Into<String>) -> Fault {
        Fault {
            line: self.line,
            field: "edn".into(),
            reason: reason.into(),
        }
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                b'\n' => {
                    self.line += 1;
                    self.pos += 1;
                }
                b' ' | b'\t' | b'\r' | b',' => self.pos += 1,
                b';' => {
                    while self.peek().is_some_and(|c| c != b'\n') {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn value(&mut self) -> Result<Edn, Fault> {
        self.skip_ws();
        match self.peek() {
            None => Err(self.fault("unexpected end of input")),
            Some(b'[') => self.seq(b']').map(Edn::Seq),
            Some(b'(') => self.seq(b')').map(Edn::Seq),
            Some(b'{') => {
                let items = self.seq(b'}')?;
                if items.len() % 2 != 0 {
                    return Err(self.fault("a map with an odd number of forms"));
                }
                let mut it = items.into_iter();
                let mut entries = Vec::new();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    entries.push((k, v));
                }
                Ok(Edn::Map(entries))
            }
            Some(b'#') if self.s.get(self.pos + 1) == Some(&b'{') => {
                self.pos += 1;
                self.seq(b'}').map(Edn::Seq)
            }
            Some(b'"') => self.string(),
            Some(c @ (b')' | b']' | b'}')) => {
                Err(self.fault(format!("unexpected closing '{}'", c as char)))
            }
            Some(_) => self.atom(),
        }
    }

    fn seq(&mut self, close: u8) -> Result<Vec<Edn>, Fault> {
        if self.depth >= MAX_DEPTH {
            return Err(self.fault(format!(
                "nested deeper than the {MAX_DEPTH} levels spec v1.1 allows"
            )));
        }
        self.depth += 1;
        let items = self.items(close);
        self.depth -= 1;
        items
    }

    fn items(&mut self, close: u8) -> Result<Vec<Edn>, Fault> {
        let open_line = self.line;
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => {
                    return Err(Fault {
                        line: open_line,
                        field: "edn".into(),
                        reason: format!(
                            "the {} opened here is never closed",
                            match close {
                                b']' => "vector",
                                b')' => "list",
                                _ => "map or set",
                            }
                        ),
                    })
                }
                Some(c) if c == close => {
                    self.pos += 1;
                    return Ok(items);
                }
                Some(_) => items.push(self.value()?),
            }
        }
    }

    fn string(&mut self) -> Result<Edn, Fault> {
        let open_line = self.line;
        self.pos += 1;
        let mut out = String::new();
        let mut start = self.pos;
        loop {
            match self.peek() {
                None => {
                    return Err(Fault {
                        line: open_line,
                        field: "edn".into(),
                        reason: "a string opened here is never closed".into(),
                    })
                }
                Some(b'"') => {
                    out.push_str(&self.text[start..self.pos]);
                    self.pos += 1;
                    return Ok(Edn::Str(out));
                }
                Some(b'\\') => {
                    out.push_str(&self.text[start..self.pos]);
                    let esc = self.s.get(self.pos + 1).copied();
                    out.push(match esc {
                        Some(b'n') => '\n',
                        Some(b't') => '\t',
                        Some(b'r') => '\r',
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        _ => return Err(self.fault("an unsupported escape in a string")),
                    });
                    self.pos += 2;
                    start = self.pos;
                }
                Some(b'\n') => {
                    self.line += 1;
                    self.pos += 1;
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    fn atom(&mut self) -> Result<Edn, Fault> {
        let start = self.pos;
        while self.peek().is_some_and(|c| {
            !matches!(
                c,
                b' ' | b'\t'
                    | b'\r'
                    | b'\n'
                    | b','
                    | b';'
                    | b'('
                    | b')'
                    | b'['
                    | b']'
                    | b'{'
                    | b'}'
                    | b'"'
            )
        }) {
            self.pos += 1;
        }
        let tok = &self.text[start..self.pos];
        if tok.is_empty() {
            return Err(self.fault("unexpected character"));
        }
        Ok(match tok {
            "nil" => Edn::Nil,
            "true" => Edn::Bool(true),
            "false" => Edn::Bool(false),
            _ if tok.starts_with(':') && tok.len() > 1 => Edn::Keyword(tok[1..].to_string()),
            _ if tok.starts_with(|c: char| c.is_ascii_digit())
                || (tok.len() > 1
                    && tok.starts_with(['-', '+'])
                    && tok[1..].starts_with(|c: char| c.is_ascii_digit())) =>
            {
                let digits = tok.trim_end_matches(['N', 'M']);
                if let Ok(i) = digits.parse::<i64>() {
                    Edn::Int(i)
                } else if let Ok(f) = digits.parse::<f64>() {
                    Edn::Float(f)
                } else {
                    return Err(self.fault(format!("\"{tok}\" is not a number")));
                }
            }
            _ if tok.starts_with('#') => {
                return Err(self.fault(format!(
                    "tagged or dispatch form \"{tok}\" is not supported"
                )))
            }
            _ => Edn::Symbol(tok.to_string()),
        })
    }
}

/// One Jepsen op map as a raw op, its value encoded as `import/mod.rs` says.
/// `line` names the map's first line in errors.
pub fn op_from_map(line: usize, m: &Edn) -> Result<RawOp, Fault> {
    let fault = |field: &str, reason: String| Fault {
        line,
        field: field.into(),
        reason,
    };
    if !matches!(m, Edn::Map(_)) {
        return Err(fault(
            "op",
            "expected a map like {:process 0, :type :invoke, ...}".into(),
        ));
    }
    let process = match m.get("process") {
        Some(Edn::Int(p)) if *p >= 0 => Process::Client(*p as u64),
        Some(Edn::Keyword(k)) if k == "nemesis" => Process::Nemesis,
        Some(other) => {
            return Err(fault(
                "process",
                format!(
                    "expected a non-negative integer or :nemesis, found {}",
                    other.to_json()
                ),
            ))
        }
        None => return Err(fault("process", "missing".into())),
    };
    let kind = match m.get("type") {
        Some(Edn::Keyword(k)) => match k.as_str() {
            "invoke" => OpType::Invoke,
            "ok" => OpType::Ok,
            "fail" => OpType::Fail,
            "info" => OpType::Info,
            other => {
                return Err(fault(
                    "type",
                    format!(":{other} is not one of :invoke, :ok, :fail, :info"),
                ))
            }
        },
        Some(other) => {
            return Err(fault(
                "type",
                format!("expected a keyword, found {}", other.to_json()),
            ))
        }
        None => return Err(fault("type", "missing".into())),
    };
    let f = match m.get("f") {
        Some(Edn::Keyword(s) | Edn::Str(s) | Edn::Symbol(s)) if !s.is_empty() => s.clone(),
        Some(other) => {
            return Err(fault(
                "f",
                format!("expected a keyword, found {}", other.to_json()),
            ))
        }
        None => return Err(fault("f", "missing".into())),
    };
    let time = match m.get("time") {
        None | Some(Edn::Nil) => None,
        Some(Edn::Int(t)) if *t >= 0 => Some(*t as u64),
        Some(other) => {
            return Err(fault(
                "time",
                format!("expected a non-negative integer, found {}", other.to_json()),
            ))
        }
    };
    let error = match m.get("error") {
        None | Some(Edn::Nil) => None,
        Some(Edn::Keyword(s) | Edn::Str(s)) => Some(s.clone()),
        Some(other) => Some(other.to_json().to_string()),
    };
    let raw = m.get("value").cloned().unwrap_or(Edn::Nil);
    let value = match m.get("key") {
        // Porcupine's kv logs: the key sits beside the value.
        Some(key) => json!({"key": key.to_json(), "value": raw.to_json()}),
        None => encode_value(&f, kind, &raw).map_err(|r| fault("value", r))?,
    };
    Ok(RawOp {
        line,
        process,
        kind,
        f,
        value,
        time,
        error,
    })
}

/// Knossos's values in lockcheck's encoding (see `import/mod.rs`).
fn encode_value(f: &str, kind: OpType, v: &Edn) -> Result<Value, String> {
    let int = |e: &Edn| match e {
        Edn::Int(i) => Ok(json!(i)),
        Edn::Nil => Ok(Value::Null),
        other => Err(format!(
            "expected an integer or nil, found {}",
            other.to_json()
        )),
    };
    Ok(match (f, kind) {
        ("read", OpType::Invoke) => Value::Null,
        // Knossos: a read of nil is a read whose result nobody knows.
        ("read", _) => match v {
            Edn::Nil => Value::Null,
            other => json!({"value": int(other)?}),
        },
        ("write", _) => json!({"value": int(v)?}),
        ("cas", _) => match v {
            Edn::Seq(ab) if ab.len() == 2 => {
                let mut o = json!({"from": int(&ab[0])?, "to": int(&ab[1])?});
                if kind == OpType::Ok {
                    o["ok"] = json!(true);
                }
                o
            }
            Edn::Nil if kind != OpType::Invoke => Value::Null,
            other => return Err(format!("expected [from to], found {}", other.to_json())),
        },
        ("txn", _) => match v {
            Edn::Seq(_) => json!({"txn": v.to_json()}),
            Edn::Nil if kind != OpType::Invoke => Value::Null,
            other => {
                return Err(format!(
                    "expected a vector of [:read|:write key value], found {}",
                    other.to_json()
                ))
            }
        },
        (_, _) => match v {
            Edn::Nil => Value::Null,
            Edn::Map(_) => v.to_json(),
            other => json!({"value": other.to_json()}),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_layouts_with_comments_and_lines() {
        let one = "; a comment\n[{:a 1, :b \"x\\\"y\"}\n {:c nil :d [1 -2 :k]}]\n";
        let forms = read_forms(one).unwrap();
        assert_eq!(forms.len(), 2);
        assert_eq!(forms[0].0, 2);
        assert_eq!(forms[1].0, 3);
        assert_eq!(forms[0].1.get("b"), Some(&Edn::Str("x\"y".into())));
        assert_eq!(forms[1].1.get("d").unwrap().to_json(), json!([1, -2, "k"]));
        let lines = "{:a 1}\n{:a (2 3)}\n";
        let forms = read_forms(lines).unwrap();
        assert_eq!(forms.len(), 2);
        assert_eq!(forms[1].0, 2);
    }

    #[test]
    fn broken_edn_names_the_line() {
        let e = read_forms("[{:a 1}\n{:b 2\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.reason.contains("never closed"), "{}", e.reason);
        let e = read_forms("{:a 1}\n{:a 1 :b}\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.reason.contains("odd number"));
        let e = read_forms("{:a #inst \"x\"}").unwrap_err();
        assert!(e.reason.contains("not supported"));
    }

    #[test]
    fn knossos_values_are_encoded() {
        let m =
            &read_forms("{:process 1, :type :ok, :f :cas, :value [1 2], :time 5}").unwrap()[0].1;
        let op = op_from_map(1, m).unwrap();
        assert_eq!(op.value, json!({"from": 1, "to": 2, "ok": true}));
        assert_eq!(op.time, Some(5));
        let m = &read_forms("{:process 1, :type :ok, :f :read, :value nil}").unwrap()[0].1;
        assert_eq!(op_from_map(1, m).unwrap().value, Value::Null);
        let m = &read_forms("{:process :nemesis, :type :info, :f :start}").unwrap()[0].1;
        assert_eq!(op_from_map(1, m).unwrap().process, Process::Nemesis);
        let m = &read_forms("{:process \"x\", :type :ok, :f :read}").unwrap()[0].1;
        assert_eq!(op_from_map(7, m).unwrap_err().field, "process");
    }
}
