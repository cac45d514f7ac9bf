//! A single register of integers: `register` (read, write) and `cas-register`
//! (read, write, compare-and-set). The initial value is configurable: Porcupine's
//! etcd model starts empty (`None`, a read of nil = "key absent"); Knossos's
//! `(cas-register 0)` starts at 0.

use super::{int_field, operations, unsupported, verdict, ModelError};
use crate::linear::check_partitioned;
use crate::model::Model;
use crate::{Limits, Verdict};
use lockcheck_history::History;

#[derive(Debug, Clone)]
pub struct Register {
    /// The value before any write; `None` = empty.
    pub initial: Option<i64>,
    /// Whether compare-and-set is an op of the model (`cas-register`).
    pub cas: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegIn {
    Read,
    Write(i64),
    Cas { from: i64, to: i64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegOut {
    /// What a read returned (`None` = the register was empty).
    Read(Option<i64>),
    Written,
    /// Whether the compare succeeded.
    Cas(bool),
}

fn show(v: Option<i64>) -> String {
    v.map_or("nil".into(), |v| v.to_string())
}

impl Model for Register {
    type State = Option<i64>;
    type Input = RegIn;
    type Output = RegOut;

    fn init(&self) -> Option<i64> {
        self.initial
    }

    fn step(&self, s: &Option<i64>, input: &RegIn, output: Option<&RegOut>) -> Option<Option<i64>> {
        match (input, output) {
            (RegIn::Read, None) => Some(*s),
            (RegIn::Read, Some(RegOut::Read(v))) => (v == s).then_some(*s),
            (RegIn::Write(v), _) => Some(Some(*v)),
            (RegIn::Cas { from, to }, Some(RegOut::Cas(true))) => {
                (*s == Some(*from)).then_some(Some(*to))
            }
            (RegIn::Cas { from, .. }, Some(RegOut::Cas(false))) => {
                (*s != Some(*from)).then_some(*s)
            }
            // A cas whose answer is unknown: it set the value if the compare held.
            (RegIn::Cas { from, to }, _) => Some(if *s == Some(*from) { Some(*to) } else { *s }),
            (RegIn::Read, Some(_)) => None,
        }
    }

    fn eager(&self, input: &RegIn, output: Option<&RegOut>) -> bool {
        // Reads, and compares that failed, change nothing wherever they fit.
        matches!(
            (input, output),
            (RegIn::Read, _) | (RegIn::Cas { .. }, Some(RegOut::Cas(false)))
        )
    }

    fn describe_state(&self, s: &Option<i64>) -> String {
        show(*s)
    }

    fn describe(&self, input: &RegIn, output: Option<&RegOut>) -> String {
        match (input, output) {
            (RegIn::Read, Some(RegOut::Read(v))) => format!("read {}", show(*v)),
            (RegIn::Read, _) => "read (value unknown)".into(),
            (RegIn::Write(v), _) => format!("write {v}"),
            (RegIn::Cas { from, to }, Some(RegOut::Cas(ok))) => {
                format!(
                    "cas {from}->{to} {}",
                    if *ok { "succeeded" } else { "failed" }
                )
            }
            (RegIn::Cas { from, to }, _) => format!("cas {from}->{to} (outcome unknown)"),
        }
    }
}

impl Register {
    pub fn name(&self) -> &'static str {
        if self.cas {
            "cas-register"
        } else {
            "register"
        }
    }

    pub fn check(&self, history: &History, limits: &Limits) -> Result<Verdict, ModelError> {
        let ops = operations(history, |inv, ok| {
            let input = match inv.f.as_str() {
                "read" => RegIn::Read,
                "write" => RegIn::Write(
                    int_field(&inv.value, "value")?
                        .ok_or("a write of nil: expected {\"value\": integer}")?,
                ),
                "cas" if self.cas => {
                    let need =
                        |f| int_field(&inv.value, f)?.ok_or(format!("a cas without \"{f}\""));
                    RegIn::Cas {
                        from: need("from")?,
                        to: need("to")?,
                    }
                }
                f => {
                    let known = if self.cas {
                        "read, write, cas"
                    } else {
                        "read, write"
                    };
                    return Err(unsupported(self.name(), f, known));
                }
            };
            let output = match (input, ok) {
                (_, None) => None,
                // A read completed with value null returned something nobody knows.
                (RegIn::Read, Some(done)) if done.value.is_null() => None,
                (RegIn::Read, Some(done)) => Some(RegOut::Read(int_field(&done.value, "value")?)),
                (RegIn::Write(_), Some(_)) => Some(RegOut::Written),
                (RegIn::Cas { .. }, Some(done)) => Some(RegOut::Cas(
                    done.value
                        .get("ok")
                        .and_then(|v| v.as_bool())
                        .unwrap_or(true),
                )),
            };
            Ok((input, output))
        })?;
        let parts = check_partitioned(self, &ops, limits);
        Ok(verdict::<Self>(self.name(), history, &ops, &parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Validity;
    use lockcheck_history::import::{parse, Format};

    fn check(text: &str, initial: Option<i64>) -> Verdict {
        let h = parse(text, "t", Format::PorcupineEtcd).unwrap();
        Register { initial, cas: true }
            .check(&h, &Limits::default())
            .unwrap()
    }

    const LOG: &str = "INFO  jepsen.util - 0 :invoke :write 1\nINFO  jepsen.util - 0 :ok :write 1\nINFO  jepsen.util - 1 :invoke :cas [1 2]\nINFO  jepsen.util - 1 :fail :cas [1 2]\n";

    #[test]
    fn a_failed_cas_in_porcupine_logs_returned_false() {
        // The cas ran after the write returned, so its compare had to succeed:
        // "returned false" is impossible.
        let v = check(LOG, None);
        assert_eq!(v.valid, Validity::Invalid);
        assert_eq!(v.anomalies[0].indexes, vec![0, 1, 2, 3]);
        assert!(v.anomalies[0]
            .explanation
            .contains("cas 1->2 failed by process 1"));
    }

    #[test]
    fn nil_is_empty_for_porcupine_and_unknown_for_knossos() {
        let read_nil =
            "INFO  jepsen.util - 0 :invoke :read nil\nINFO  jepsen.util - 0 :ok :read nil\n";
        assert_eq!(check(read_nil, None).valid, Validity::Valid);
        assert_eq!(check(read_nil, Some(0)).valid, Validity::Invalid);
        let edn = "[{:process 0 :type :invoke :f :read :value nil}\n{:process 0 :type :ok :f :read :value nil}\n{:process 0 :type :invoke :f :cas :value [5 6]}\n{:process 0 :type :fail :f :cas :value [5 6]}]";
        let h = parse(edn, "t", Format::JepsenEdn).unwrap();
        let v = Register {
            initial: Some(0),
            cas: true,
        }
        .check(&h, &Limits::default())
        .unwrap();
        // The nil read is unknown; the failed cas did not happen.
        assert_eq!(v.valid, Validity::Valid);
        let open_cas = "[{:process 0 :type :invoke :f :cas :value [5 6]}]";
        let h = parse(open_cas, "t", Format::JepsenEdn).unwrap();
        let err = Register {
            initial: Some(0),
            cas: false,
        }
        .check(&h, &Limits::default())
        .unwrap_err();
        assert!(err
            .reason
            .contains("\"cas\" is not an op of the register model"));
    }

    /// Every order of every subset of the ops (all finite ones, any open-ended
    /// ones) that real time allows, tried one by one: the reference.
    fn brute_force(m: &Register, ops: &[crate::model::Operation<RegIn, RegOut>]) -> bool {
        fn go(
            m: &Register,
            ops: &[crate::model::Operation<RegIn, RegOut>],
            used: &mut Vec<bool>,
            state: Option<i64>,
        ) -> bool {
            let all_finite = ops
                .iter()
                .zip(used.iter())
                .all(|(o, &u)| u || o.ret == u64::MAX);
            if all_finite {
                return true;
            }
            for i in 0..ops.len() {
                // i may go next if every op that returned before i was called is used.
                let ready = !used[i]
                    && ops
                        .iter()
                        .zip(used.iter())
                        .all(|(o, &u)| u || o.ret >= ops[i].call);
                if !ready {
                    continue;
                }
                if let Some(next) = m.step(&state, &ops[i].input, ops[i].output.as_ref()) {
                    used[i] = true;
                    let ok = go(m, ops, used, next);
                    used[i] = false;
                    if ok {
                        return true;
                    }
                }
            }
            false
        }
        go(m, ops, &mut vec![false; ops.len()], m.init())
    }

    #[test]
    fn the_search_agrees_with_trying_every_order() {
        use crate::linear::{check_operations, Outcome};
        use crate::model::Operation;
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let m = Register {
            initial: Some(0),
            cas: true,
        };
        let mut verdicts = [0; 2];
        for _ in 0..3000 {
            let n = rng.gen_range(1..=7);
            let ops: Vec<Operation<RegIn, RegOut>> = (0..n)
                .map(|p| {
                    let call = rng.gen_range(0..20);
                    let ret = if rng.gen_bool(0.2) {
                        u64::MAX
                    } else {
                        call + rng.gen_range(0..8)
                    };
                    let v = rng.gen_range(0..3);
                    let (input, output) = match rng.gen_range(0..4) {
                        0 => (RegIn::Read, Some(RegOut::Read(Some(v)))),
                        1 => (RegIn::Write(v), Some(RegOut::Written)),
                        2 => (
                            RegIn::Cas {
                                from: v,
                                to: rng.gen_range(0..3),
                            },
                            Some(RegOut::Cas(rng.gen_bool(0.5))),
                        ),
                        _ => (RegIn::Read, None),
                    };
                    Operation {
                        process: p,
                        input,
                        output: if ret == u64::MAX { None } else { output },
                        call,
                        ret,
                        indexes: vec![],
                    }
                })
                .collect();
            let expected = brute_force(&m, &ops);
            let got = match check_operations(&m, &ops, &Limits::default()) {
                Outcome::Linearizable { .. } => true,
                Outcome::Illegal { .. } => false,
                o => panic!("{o:?}"),
            };
            assert_eq!(got, expected, "{ops:#?}");
            verdicts[expected as usize] += 1;
        }
        assert!(verdicts[0] > 300 && verdicts[1] > 300, "{verdicts:?}");
    }
}
