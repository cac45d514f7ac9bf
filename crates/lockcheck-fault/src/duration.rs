//! Durations as workloads write them: with their unit, and signed for offsets.
//! Here, under the faults whose entries take them, so that a fault's spec reads
//! its own; the workload reads all of its other durations with them too.

use serde::{Deserialize, Deserializer};
use std::fmt;
use std::time::Duration;

/// A signed duration, in nanoseconds: `"+20s"`, `"-500ms"`, `"20s"`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignedDur(pub i64);

impl<'de> Deserialize<'de> for SignedDur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let t = s.trim();
        let (sign, rest) = match t.strip_prefix('-') {
            Some(r) => (-1, r),
            None => (1, t.strip_prefix('+').unwrap_or(t)),
        };
        let Dur(d) = rest.parse().map_err(serde::de::Error::custom)?;
        i64::try_from(d.as_nanos())
            .map(|n| SignedDur(sign * n))
            .map_err(|_| serde::de::Error::custom(format!("{s} is too long")))
    }
}

/// A duration written with its unit: `"250ms"`, `"2s"`, `"1.5s"`, `"1m"`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dur(pub Duration);

pub const DURATION_EXPECTED: &str =
    "expected a duration with its unit, like \"500ms\", \"2s\" or \"1m\"";

impl std::str::FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, unit) = s.split_at(split);
        let scale = match unit.trim() {
            "ms" => 1e-3,
            "s" => 1.0,
            "m" | "min" => 60.0,
            _ => return Err(format!("{DURATION_EXPECTED}, found \"{s}\"")),
        };
        let n: f64 = number
            .parse()
            .map_err(|_| format!("{DURATION_EXPECTED}, found \"{s}\""))?;
        Duration::try_from_secs_f64(n * scale)
            .map(Dur)
            .map_err(|_| format!("{DURATION_EXPECTED}, found \"{s}\""))
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(DURATION_EXPECTED.trim_start_matches("expected "))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Dur, E> {
                s.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}
