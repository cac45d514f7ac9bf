//! Porcupine's etcd test logs: Jepsen console output, one client op per
//! `INFO  jepsen.util - P :type :f value` line (fields separated by any whitespace).
//! Other lines are log noise and are passed over, as Porcupine's parser does.
//! (Porcupine's kv logs are EDN maps: `edn::op_from_map` reads them.)

use super::raw::{Fault, RawOp};
use crate::{OpType, Process};
use serde_json::{json, Value};

pub fn etcd(text: &str) -> Result<Vec<RawOp>, Fault> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let mut words = line.split_whitespace();
        if words.next() != Some("INFO")
            || words.next() != Some("jepsen.util")
            || words.next() != Some("-")
        {
            continue;
        }
        let fault = |field: &str, reason: String| Fault {
            line: line_no,
            field: field.into(),
            reason,
        };
        let process = match words.next() {
            Some(":nemesis") => Process::Nemesis,
            Some(w) => Process::Client(w.parse().map_err(|_| {
                fault(
                    "process",
                    format!("expected a non-negative integer, found \"{w}\""),
                )
            })?),
            None => return Err(fault("process", "missing".into())),
        };
        let kind = match words.next() {
            Some(":invoke") => OpType::Invoke,
            Some(":ok") => OpType::Ok,
            Some(":fail") => OpType::Fail,
            Some(":info") => OpType::Info,
            Some(w) => {
                return Err(fault(
                    "type",
                    format!("\"{w}\" is not one of :invoke, :ok, :fail, :info"),
                ))
            }
            None => return Err(fault("type", "missing".into())),
        };
        let f = match words.next() {
            Some(w) if w.len() > 1 && w.starts_with(':') => w[1..].to_string(),
            Some(w) => {
                return Err(fault(
                    "f",
                    format!("expected a keyword like :read, found \"{w}\""),
                ))
            }
            None => return Err(fault("f", "missing".into())),
        };
        let value_text = words.collect::<Vec<_>>().join(" ");
        let mut op = RawOp {
            line: line_no,
            process,
            kind,
            f,
            value: Value::Null,
            time: None,
            error: None,
        };
        if process == Process::Nemesis {
            op.value = json!({"value": value_text});
            out.push(op);
            continue;
        }
        let value = parse_value(&value_text).map_err(|r| fault("value", r))?;
        encode(&mut op, value).map_err(|r| fault("value", r))?;
        out.push(op);
    }
    Ok(out)
}

/// A value as Jepsen prints it in these logs.
enum Logged {
    Nil,
    Int(i64),
    Pair(i64, i64),
    Keyword(String),
}

fn parse_value(s: &str) -> Result<Logged, String> {
    let int = |w: &str| {
        w.parse::<i64>()
            .map_err(|_| format!("expected an integer, found \"{w}\""))
    };
    if s == "nil" {
        Ok(Logged::Nil)
    } else if let Some(k) = s.strip_prefix(':') {
        Ok(Logged::Keyword(k.to_string()))
    } else if let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        let ab: Vec<&str> = inner.split_whitespace().collect();
        match ab[..] {
            [a, b] => Ok(Logged::Pair(int(a)?, int(b)?)),
            _ => Err(format!("expected [from to], found \"{s}\"")),
        }
    } else {
        int(s).map(Logged::Int)
    }
}

/// Porcupine's reading of each line kind (see the corpus README and `import/mod.rs`).
fn encode(op: &mut RawOp, v: Logged) -> Result<(), String> {
    use Logged::*;
    let shape = |expected: &str| format!("{expected} expected for {:?} {}", op.kind, op.f);
    op.value = match (op.kind, op.f.as_str(), v) {
        (OpType::Invoke, "read", _) => Value::Null,
        (OpType::Invoke, "write", Int(x)) => json!({"value": x}),
        (OpType::Invoke, "cas", Pair(a, b)) => json!({"from": a, "to": b}),
        (OpType::Ok, "read", Nil) => json!({"value": null}),
        (OpType::Ok, "read", Int(x)) => json!({"value": x}),
        (OpType::Ok, "write", Int(x)) => json!({"value": x}),
        (OpType::Ok, "cas", Pair(a, b)) => json!({"from": a, "to": b, "ok": true}),
        // The cas ran and its compare failed: it returned false.
        (OpType::Fail, "cas", Pair(a, b)) => {
            op.kind = OpType::Ok;
            json!({"from": a, "to": b, "ok": false})
        }
        // The read returned here, with an output nobody knows.
        (OpType::Fail, "read", Keyword(k)) if k == "timed-out" => {
            op.kind = OpType::Ok;
            op.error = Some(k);
            Value::Null
        }
        // Porcupine's parser matches no other completion: the call stays open.
        (OpType::Info | OpType::Fail, "read" | "write" | "cas", v) => {
            op.error = match v {
                Keyword(k) => Some(k),
                _ => Some("no result".into()),
            };
            op.kind = OpType::Info;
            Value::Null
        }
        (_, "read" | "write" | "cas", _) => {
            return Err(shape(match op.f.as_str() {
                "cas" => "[from to]",
                "read" => "nil or an integer",
                _ => "an integer",
            }))
        }
        (_, f, _) => {
            return Err(format!(
                "unsupported op :{f} (expected :read, :write or :cas)"
            ))
        }
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_line_kind_as_porcupine_does() {
        let text = "noise\nINFO  jepsen.util - 2\t:invoke\t:cas\t[3 0]\nINFO  jepsen.util - 2   :fail   :cas   [3 0]\nINFO  jepsen.util - 3 :invoke :read nil\nINFO  jepsen.util - 3 :fail :read :timed-out\nINFO  jepsen.util - 4 :invoke :write 4\nINFO  jepsen.util - 4 :info :write :timed-out\n";
        let ops = etcd(text).unwrap();
        assert_eq!(ops.len(), 6);
        assert_eq!(ops[0].line, 2);
        assert_eq!(ops[1].kind, OpType::Ok);
        assert_eq!(ops[1].value, json!({"from": 3, "to": 0, "ok": false}));
        assert_eq!((ops[3].kind, &ops[3].value), (OpType::Ok, &Value::Null));
        assert_eq!(ops[5].kind, OpType::Info);
    }

    #[test]
    fn a_malformed_line_names_line_and_field() {
        let e = etcd("INFO  jepsen.util - 2 :invoke :cas [3]\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (1, "value"));
        let e = etcd("\nINFO  jepsen.util - x :invoke :read nil\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "process"));
    }
}
