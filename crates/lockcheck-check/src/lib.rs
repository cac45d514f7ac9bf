//! lockcheck's checker: is a history consistent with its model? A pure function
//! of the history: no server, no clock, no I/O beyond reading it. It depends only
//! on [`lockcheck_history`] (here as [`history`]) and builds with no async
//! runtime, no server client and no C compiler, so a test of your own can take it.
//!
//! # The API on one screen
//!
//! - **A history** is what the clients did, each call's invoke and completion, on
//!   one clock ([`history::History`]; docs/history.md is the format): read from a
//!   file ([`history::read_jsonl`]; [`history::import`] for Jepsen EDN and
//!   Porcupine logs), or built in a test ([`history::HistoryBuilder`]).
//! - **A lock's history**: [`lock::check`]`(&history, &LockInput, &Limits)`
//!   gives a [`Verdict`]: mutual exclusion, fencing tokens, and with the
//!   resource's log ([`lock::LockInput`]) the order of its writes.
//! - **Any file, as `lockcheck check` reads it**, the model named or chosen from
//!   the file: [`choice::check_file`]`(path, &Options)`, or
//!   [`choice::check_history`] for a history in memory, give a
//!   [`choice::Checked`] (the verdict, and what it was read and checked as).
//! - **A model of your own**, as in Porcupine: implement [`model::Model`]
//!   (`init`, `step`; states compare with `Eq`; `describe` for the evidence),
//!   turn your calls into [`model::Operation`]s, and
//!   [`linear::check_operations`] gives a [`linear::Outcome`]: a legal order, or
//!   the smallest failing part.
//! - **The answer**: a [`Verdict`] is [`Validity`] (valid, invalid, unknown), the
//!   [`Anomaly`]s found, each of an [`AnomalyKind`] with the ops that show it and a
//!   sentence, and notes.
//! - **Bounds**: [`Limits`] (time, search states, threads); past them the verdict
//!   is unknown, never a hang.
//!
//! # Example
//!
//! One history where two processes take the lock in turn, one where the second is
//! granted it while the first still holds it:
//!
//! ```
//! use lockcheck_check::history::HistoryBuilder;
//! use lockcheck_check::{lock, AnomalyKind, Limits, Validity};
//!
//! // Times in ms: process 0 asks at 0 and holds from 1 (token 1) until it
//! // releases at 10; process 1 asks at 20 and holds from 21 (token 2).
//! let in_turn = HistoryBuilder::default()
//!     .acquire(0, 0, Some(1))
//!     .release(10, 0, Some(1))
//!     .acquire(20, 1, Some(2))
//!     .history();
//! let verdict = lock::check(&in_turn, &Default::default(), &Limits::default());
//! assert_eq!(verdict.valid, Validity::Valid);
//!
//! // Process 1 is granted the lock at 6 ms; process 0 releases only at 10.
//! let two_holders = HistoryBuilder::default()
//!     .acquire(0, 0, Some(1))
//!     .acquire(5, 1, Some(2))
//!     .release(10, 0, Some(1))
//!     .history();
//! let verdict = lock::check(&two_holders, &Default::default(), &Limits::default());
//! assert_eq!(verdict.valid, Validity::Invalid);
//! assert_eq!(verdict.anomalies[0].kind, AnomalyKind::DoubleHolder);
//! assert_eq!(verdict.anomalies[0].processes, [0, 1]);
//! ```
//!
//! A test of your own records its history as its threads use a lock, and checks
//! it: `tests/checking_in_your_own_test.rs` in this crate.
//!
//! # Modules
//!
//! - [`lock`]: the lock model (mutual exclusion by linearizability against an
//!   owner-aware mutex, fencing tokens, the resource's order of writes).
//! - [`model`] + [`linear`]: a general linearizability engine (Wing & Gong with
//!   Lowe's memoization, P-compositional), generic over a small `Model` trait.
//! - [`models`]: the registers, kv and mutex models of Jepsen and Porcupine
//!   histories.
//! - [`choice`]: which model a history is checked against, and checking a file.
//! - [`calls`], [`provoked`]: a history's calls and critical sections, and whether
//!   a run was provoked: what lockcheck's report and audit read of a run.

pub use lockcheck_history as history;

pub mod calls;
pub mod choice;
pub mod linear;
pub mod lock;
pub mod model;
pub mod models;
pub mod provoked;

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Whether a history is consistent with its model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    Valid,
    Invalid,
    /// The search gave up within its limits.
    Unknown,
}

impl Serialize for Validity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Validity::Valid => s.serialize_bool(true),
            Validity::Invalid => s.serialize_bool(false),
            Validity::Unknown => s.serialize_str("unknown"),
        }
    }
}

impl<'de> Deserialize<'de> for Validity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Bool(true) => Ok(Validity::Valid),
            serde_json::Value::Bool(false) => Ok(Validity::Invalid),
            serde_json::Value::String(s) if s == "unknown" => Ok(Validity::Unknown),
            other => Err(serde::de::Error::custom(format!(
                "expected true, false or \"unknown\", found {other}"
            ))),
        }
    }
}

impl Validity {
    /// Exit code of `check` and `run`: 0 valid, 1 anomalies found, 3 unknown.
    pub fn exit_code(self) -> u8 {
        match self {
            Validity::Valid => 0,
            Validity::Invalid => 1,
            Validity::Unknown => 3,
        }
    }
}

/// The one list of anomaly kinds: each with its stable name (the spec's table),
/// the check it fails (one JUnit case per check, in this order) and its meaning in
/// one sentence. Every output — verdict.json, JUnit, the HTML report's legend, the
/// docs' tables — is derived from it, so a kind added here is in all of them (the
/// tests in tests/anomaly_kinds.rs hold each output to it).
macro_rules! anomaly_kinds {
    ($($(#[$doc:meta])* $kind:ident = $name:literal, $check:literal, $meaning:literal;)*) => {
        /// Stable anomaly names (the spec's table), plus `not-linearizable` for the
        /// general models, whose only anomaly is that no order of the ops fits.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum AnomalyKind {
            $($(#[$doc])* #[serde(rename = $name)] $kind,)*
        }

        impl AnomalyKind {
            /// Every kind, in the order of the checks.
            pub const ALL: &'static [AnomalyKind] = &[$(AnomalyKind::$kind),*];

            pub fn name(self) -> &'static str {
                match self {
                    $(AnomalyKind::$kind => $name,)*
                }
            }

            /// The check this kind fails (JUnit's test case): kinds of one check
            /// are next to each other in [`AnomalyKind::ALL`].
            pub fn check(self) -> &'static str {
                match self {
                    $(AnomalyKind::$kind => $check,)*
                }
            }

            /// What it means, in one sentence (the docs' table).
            pub fn meaning(self) -> &'static str {
                match self {
                    $(AnomalyKind::$kind => $meaning,)*
                }
            }
        }
    };
}

anomaly_kinds! {
    DoubleHolder = "double-holder", "mutual exclusion",
        "two processes held the lock at once: no order of the ops fits an owner-aware mutex";
    StaleWriteAccepted = "stale-write-accepted", "fencing (stale writes)",
        "the resource applied a write whose token is lower than one it had applied";
    TokenNotMonotonic = "token-not-monotonic", "tokens",
        "a critical section that began after another ended got a token that is not greater";
    DuplicateToken = "duplicate-token", "tokens",
        "two critical sections got the same token";
    ForeignRelease = "foreign-release", "releases",
        "a release succeeded from a process that did not hold the lock";
    LostUpdate = "lost-update", "lost updates",
        "a counter read back less than the increments acknowledged before it asked, or less than an earlier read (one that completed before it asked) returned";
    InterleavedWrites = "interleaved-writes", "interleaving",
        "in the resource's order, one critical section's writes are split by another's";
    /// The general models' only anomaly: no order of the ops fits.
    NotLinearizable = "not-linearizable", "linearizability",
        "(general models) no order of the ops fits the model";
}

impl AnomalyKind {
    /// The token itself broke (reissued, or going backwards): the token source
    /// lost what it had handed out, whatever any holder wrote, and a fence
    /// comparing such tokens no longer follows the lock's order.
    pub fn breaks_the_token(self) -> bool {
        matches!(
            self,
            AnomalyKind::TokenNotMonotonic | AnomalyKind::DuplicateToken
        )
    }

    /// The checks a verdict of `model` answers, in order, each with its kinds:
    /// every kind's check, but linearizability only for the general models (the
    /// lock model decides mutual exclusion itself) or where it was found.
    pub fn checks(model: &str, found: &[AnomalyKind]) -> Vec<(&'static str, Vec<AnomalyKind>)> {
        let mut out: Vec<(&'static str, Vec<AnomalyKind>)> = Vec::new();
        for &k in AnomalyKind::ALL {
            if k == AnomalyKind::NotLinearizable && model == "lock" && !found.contains(&k) {
                continue;
            }
            match out.last_mut() {
                Some((check, kinds)) if *check == k.check() => kinds.push(k),
                _ => out.push((k.check(), vec![k])),
            }
        }
        out
    }
}

impl std::str::FromStr for AnomalyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        AnomalyKind::ALL
            .iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = AnomalyKind::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown anomaly kind \"{s}\" (expected one of: {})",
                    names.join(", ")
                )
            })
    }
}

/// One anomaly, with the evidence: the ops (history indexes) that show it, and a
/// sentence a person follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anomaly {
    pub kind: AnomalyKind,
    /// History `index`es of the ops that show it, in history order.
    pub indexes: Vec<u64>,
    /// Client processes involved.
    #[serde(default)]
    pub processes: Vec<u64>,
    /// Fencing tokens involved, where there are any.
    #[serde(default)]
    pub tokens: Vec<u64>,
    /// Run time (ns) at which the anomaly happened (e.g. the second acquire's ok).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<u64>,
    /// What happened, in one or two sentences: "process 0 acquired at 1.000 s with
    /// token 1; process 1 acquired at 1.011 s with token 2 before 0 released".
    pub explanation: String,
    /// True when `--allow` (or the workload's `allow`) accepts this kind: still
    /// listed, but it does not make the history invalid.
    #[serde(default)]
    pub allowed: bool,
}

/// The checker's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub valid: Validity,
    /// The model the history was checked against (`lock`, `cas-register`, ...).
    pub model: String,
    pub anomalies: Vec<Anomaly>,
    /// Why the verdict is `unknown`, warnings from reading, limits reached: in words.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Verdict {
    /// Marks allowed kinds and recomputes validity: invalid only if an anomaly that
    /// is not allowed remains; unknown stays unknown if nothing disallowed was found.
    pub fn apply_allow(&mut self, allow: &[AnomalyKind]) {
        for a in &mut self.anomalies {
            a.allowed = allow.contains(&a.kind);
        }
        let disallowed = self.anomalies.iter().any(|a| !a.allowed);
        self.valid = match (disallowed, self.valid) {
            (true, _) => Validity::Invalid,
            (false, Validity::Unknown) => Validity::Unknown,
            (false, _) => Validity::Valid,
        };
    }
}

/// Bounds on the search: past them the verdict is `unknown`, never a hang or an
/// out-of-memory kill.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub time: Duration,
    /// Upper bound on memoized search states kept across the whole check.
    pub max_states: usize,
    /// Worker threads for independent parts (keys, locks). 0 = number of cores.
    pub threads: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            time: Duration::from_secs(60),
            max_states: 20_000_000,
            threads: 0,
        }
    }
}

/// Formats a run time in ns as seconds for sentences: `1.011 s`.
pub fn secs(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

/// Two run times for one sentence (`from .. to ..`): as `secs`, with as many more
/// digits (up to the nanosecond) as it takes for different times to read differently,
/// so that an overlap of 40 µs does not read `from 0.772 s to 0.772 s`.
pub fn secs_apart(a: u64, b: u64) -> (String, String) {
    let show = |ns: u64, d: usize| format!("{:.d$} s", ns as f64 / 1e9);
    let d = (3..=9)
        .find(|&d| show(a, d) != show(b, d))
        .filter(|_| a != b)
        .unwrap_or(3);
    (show(a, d), show(b, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_turns_invalid_into_valid_but_keeps_the_anomaly() {
        let mut v = Verdict {
            valid: Validity::Invalid,
            model: "lock".into(),
            anomalies: vec![Anomaly {
                kind: AnomalyKind::DoubleHolder,
                indexes: vec![1, 2],
                processes: vec![0, 1],
                tokens: vec![],
                time: Some(2),
                explanation: "two holders".into(),
                allowed: false,
            }],
            notes: vec![],
        };
        v.apply_allow(&[AnomalyKind::DoubleHolder]);
        assert_eq!(v.valid, Validity::Valid);
        assert!(v.anomalies[0].allowed);
        assert_eq!(
            serde_json::to_value(&v).unwrap()["valid"],
            serde_json::json!(true)
        );
        assert_eq!(
            "stale-write-accepted".parse::<AnomalyKind>(),
            Ok(AnomalyKind::StaleWriteAccepted)
        );
    }

    #[test]
    fn two_times_get_the_digits_that_tell_them_apart() {
        let pair = |a, b| {
            let (x, y) = secs_apart(a, b);
            format!("{x} {y}")
        };
        assert_eq!(pair(1_011_000_000, 2_500_000_000), "1.011 s 2.500 s");
        assert_eq!(pair(772_100_000, 772_140_000), "0.77210 s 0.77214 s");
        assert_eq!(
            pair(772_000_001, 772_000_002),
            "0.772000001 s 0.772000002 s"
        );
        assert_eq!(pair(772_000_000, 772_000_000), "0.772 s 0.772 s");
    }
}
