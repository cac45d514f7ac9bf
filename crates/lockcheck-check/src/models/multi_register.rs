//! Knossos's multi-register: integer registers named by keys (`:x`, `:y`, ...), all
//! initially 0, and transactions of reads and writes over them that take effect at
//! once. A read of nil in a completed transaction returned something nobody knows.

use super::{operations, unsupported, verdict, ModelError};
use crate::linear::check_partitioned;
use crate::model::Model;
use crate::{Limits, Verdict};
use lockcheck_history::History;
use serde_json::Value;

/// The registers, each known by its position in `keys`.
#[derive(Debug, Clone, Default)]
pub struct MultiRegister {
    keys: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Micro {
    /// A read of a register, with the value it returned where that is known.
    Read(usize, Option<i64>),
    Write(usize, i64),
}

impl Model for MultiRegister {
    type State = Vec<i64>;
    type Input = Vec<Micro>;
    type Output = ();

    fn init(&self) -> Vec<i64> {
        vec![0; self.keys.len()]
    }

    fn step(&self, s: &Vec<i64>, txn: &Vec<Micro>, output: Option<&()>) -> Option<Vec<i64>> {
        let mut next = s.clone();
        for m in txn {
            match *m {
                Micro::Read(k, Some(v)) if output.is_some() && next[k] != v => return None,
                Micro::Read(..) => {}
                Micro::Write(k, v) => next[k] = v,
            }
        }
        Some(next)
    }

    fn eager(&self, txn: &Vec<Micro>, _: Option<&()>) -> bool {
        txn.iter().all(|m| matches!(m, Micro::Read(..)))
    }

    fn describe(&self, txn: &Vec<Micro>, output: Option<&()>) -> String {
        let words: Vec<String> = txn
            .iter()
            .map(|m| match *m {
                Micro::Read(k, Some(v)) if output.is_some() => {
                    format!("read {} = {v}", self.keys[k])
                }
                Micro::Read(k, _) => format!("read {} = ?", self.keys[k]),
                Micro::Write(k, v) => format!("write {} := {v}", self.keys[k]),
            })
            .collect();
        format!("txn [{}]", words.join(", "))
    }
}

impl MultiRegister {
    pub fn check(history: &History, limits: &Limits) -> Result<Verdict, ModelError> {
        let mut model = MultiRegister::default();
        let ops = operations(history, |inv, ok| {
            if inv.f != "txn" {
                return Err(unsupported("multi-register", &inv.f, "txn"));
            }
            // A completed txn carries the values its reads returned.
            let txn = model.parse_txn(&ok.unwrap_or(inv).value)?;
            Ok((txn, ok.map(|_| ())))
        })?;
        let parts = check_partitioned(&model, &ops, limits);
        Ok(verdict::<Self>("multi-register", history, &ops, &parts))
    }

    /// `{"txn": [["read", "x", null], ["write", "y", 2]]}` as micro-ops.
    fn parse_txn(&mut self, value: &Value) -> Result<Vec<Micro>, String> {
        let items = value.get("txn").and_then(Value::as_array).ok_or_else(|| {
            format!("expected {{\"txn\": [[\"read\"|\"write\", key, value], ...]}}, found {value}")
        })?;
        items
            .iter()
            .map(|item| {
                let bad = || {
                    format!(
                        "a transaction step must be [\"read\"|\"write\", key, value], found {item}"
                    )
                };
                let [f, key, v] = item.as_array().map(Vec::as_slice).ok_or_else(bad)? else {
                    return Err(bad());
                };
                let key = match key {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let k = match self.keys.iter().position(|x| *x == key) {
                    Some(k) => k,
                    None => {
                        self.keys.push(key);
                        self.keys.len() - 1
                    }
                };
                let v = match v {
                    Value::Null => None,
                    v => Some(v.as_i64().ok_or_else(bad)?),
                };
                match (f.as_str(), v) {
                    (Some("read"), v) => Ok(Micro::Read(k, v)),
                    (Some("write"), Some(v)) => Ok(Micro::Write(k, v)),
                    _ => Err(bad()),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Validity;
    use lockcheck_history::import::{parse, Format};

    fn check(edn: &str) -> Verdict {
        let h = parse(edn, "t", Format::JepsenEdn).unwrap();
        MultiRegister::check(&h, &Limits::default()).unwrap()
    }

    #[test]
    fn transactions_see_each_other_whole() {
        let w = "{:process 0 :type :invoke :f :txn :value [[:write :x 1] [:write :y 1]]}\n{:process 0 :type :ok :f :txn :value [[:write :x 1] [:write :y 1]]}\n";
        let torn = format!("{w}{{:process 1 :type :invoke :f :txn :value [[:read :x nil] [:read :y nil]]}}\n{{:process 1 :type :ok :f :txn :value [[:read :x 1] [:read :y 0]]}}\n");
        let v = check(&torn);
        assert_eq!(v.valid, Validity::Invalid);
        assert!(v.anomalies[0]
            .explanation
            .contains("read x = 1, read y = 0"));
        let whole = torn.replace("[:read :y 0]]}", "[:read :y 1]]}");
        assert_eq!(check(&whole).valid, Validity::Valid);
        let unknown = torn.replace("[:read :y 0]]}", "[:read :y nil]]}");
        assert_eq!(check(&unknown).valid, Validity::Valid);
    }
}
