//! A workload under shrinking: the original file's tables, and its faults laid out
//! as explicit events, one `[[faults]]` entry each with one occurrence at its
//! `after`. Every candidate is an ordinary workload, written as TOML and run by
//! `lockcheck run`: what the search keeps is exactly what the user gets.

use anyhow::{anyhow, Result};
use lockcheck_fault::duration::Dur;
use std::time::Duration;
use toml::{Table, Value};

/// One fault as it happened in the run: when, for how long, to whom.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Its `[[faults]]` entry in the original workload (from 0).
    pub entry: usize,
    /// When it is due, from the run's start (`after`).
    pub at: Duration,
    /// How long it lasts (`duration`).
    pub duration: Duration,
    /// Its entry's other keys (kind, target or nodes, the kind's own), with the
    /// targets named where the original chose them at random.
    pub table: Table,
}

impl Event {
    /// Its `[[faults]]` entry.
    fn entry_table(&self) -> Table {
        let mut t = self.table.clone();
        t.insert("after".into(), Value::String(dur_text(self.at)));
        t.insert("duration".into(), Value::String(dur_text(self.duration)));
        t
    }

    /// When it is over.
    pub fn end(&self) -> Duration {
        self.at + self.duration
    }

    /// `kind target` in a few words, for progress lines and the header.
    pub fn describe(&self) -> String {
        let kind = self
            .table
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("fault");
        let whom = ["target", "nodes", "shape"]
            .iter()
            .find_map(|k| self.table.get(*k).and_then(Value::as_str))
            .unwrap_or("");
        format!(
            "{kind} {whom} at {:.1} s for {:.1} s",
            self.at.as_secs_f64(),
            self.duration.as_secs_f64()
        )
    }
}

/// A whole workload: its tables but the faults, and the faults as events.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The workload without `faults` and `schedule`.
    pub base: Table,
    pub events: Vec<Event>,
}

/// What a candidate weighs, for progress lines and the before/after table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Size {
    pub clients: u64,
    pub events: usize,
    pub duration: Duration,
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} client{}, {} fault event{}, {:.1} s",
            self.clients,
            if self.clients == 1 { "" } else { "s" },
            self.events,
            if self.events == 1 { "" } else { "s" },
            self.duration.as_secs_f64()
        )
    }
}

impl Candidate {
    /// The workload file's text (without the header the caller adds).
    pub fn text(&self) -> Result<String> {
        let mut t = self.base.clone();
        if !self.events.is_empty() {
            let faults = self
                .events
                .iter()
                .map(|e| Value::Table(e.entry_table()))
                .collect();
            t.insert("faults".into(), Value::Array(faults));
        }
        toml::to_string(&t).map_err(|e| anyhow!("writing the workload: {e}"))
    }

    pub fn size(&self) -> Size {
        Size {
            clients: self.clients(),
            events: self.events.len(),
            duration: self.duration(),
        }
    }

    pub fn clients(&self) -> u64 {
        self.base
            .get("clients")
            .and_then(|c| c.get("count"))
            .and_then(Value::as_integer)
            .map_or(0, |n| n.max(0) as u64)
    }

    pub fn with_clients(&self, n: u64) -> Candidate {
        let mut c = self.clone();
        if let Some(Value::Table(t)) = c.base.get_mut("clients") {
            t.insert("count".into(), Value::Integer(n as i64));
        }
        c
    }

    /// The run's length (`duration`).
    pub fn duration(&self) -> Duration {
        self.dur(&[], "duration").unwrap_or_default()
    }

    pub fn with_duration(&self, d: Duration) -> Candidate {
        self.with_dur(&[], "duration", d)
    }

    /// When the last fault is over: a run may not end before.
    pub fn faults_over(&self) -> Duration {
        self.events.iter().map(Event::end).max().unwrap_or_default()
    }

    /// A duration key of the workload: top level (`path` empty) or in a table.
    pub fn dur(&self, path: &[&str], key: &str) -> Option<Duration> {
        let mut t = &self.base;
        for p in path {
            t = t.get(*p)?.as_table()?;
        }
        let Dur(d) = t.get(key)?.as_str()?.parse().ok()?;
        Some(d)
    }

    pub fn with_dur(&self, path: &[&str], key: &str, d: Duration) -> Candidate {
        self.with_value(path, key, Value::String(dur_text(d)))
    }

    pub fn int(&self, path: &[&str], key: &str) -> Option<i64> {
        let mut t = &self.base;
        for p in path {
            t = t.get(*p)?.as_table()?;
        }
        t.get(key)?.as_integer()
    }

    pub fn with_value(&self, path: &[&str], key: &str, v: Value) -> Candidate {
        let mut c = self.clone();
        let mut t = &mut c.base;
        for p in path {
            let Some(Value::Table(inner)) = t.get_mut(*p) else {
                return c;
            };
            t = inner;
        }
        t.insert(key.into(), v);
        c
    }

    /// The same workload with only the events `keep` picks (by position).
    pub fn with_events(&self, events: Vec<Event>) -> Candidate {
        Candidate {
            base: self.base.clone(),
            events,
        }
    }
}

/// A duration as workloads write it: whole milliseconds.
pub fn dur_text(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Candidate {
        let base: Table = toml::from_str(
            "duration = \"6s\"\nresource = \"unfenced\"\n[backend]\nkind = \"redis\"\nlease = \"1s\"\n[clients]\ncount = 3\n[critical_section]\nhold = \"300ms\"\nwrites = 3\n",
        )
        .unwrap();
        let table: Table = toml::from_str("kind = \"pause\"\ntarget = \"holder\"\n").unwrap();
        Candidate {
            base,
            events: vec![Event {
                entry: 0,
                at: Duration::from_millis(1200),
                duration: Duration::from_millis(2500),
                table,
            }],
        }
    }

    #[test]
    fn an_event_is_one_explicit_faults_entry() {
        let text = sample().text().unwrap();
        let back: Table = toml::from_str(&text).unwrap();
        let faults = back["faults"].as_array().unwrap();
        assert_eq!(faults.len(), 1);
        assert_eq!(faults[0]["after"].as_str(), Some("1200ms"));
        assert_eq!(faults[0]["duration"].as_str(), Some("2500ms"));
        assert_eq!(faults[0]["target"].as_str(), Some("holder"));
        assert!(faults[0].get("interval").is_none());
    }

    #[test]
    fn sizes_and_edits() {
        let c = sample();
        assert_eq!(c.size().clients, 3);
        assert_eq!(c.faults_over(), Duration::from_millis(3700));
        let c = c.with_clients(2).with_duration(Duration::from_millis(4500));
        assert_eq!(c.clients(), 2);
        assert_eq!(c.duration(), Duration::from_millis(4500));
        let c = c.with_dur(&["critical_section"], "hold", Duration::from_millis(100));
        assert_eq!(
            c.dur(&["critical_section"], "hold"),
            Some(Duration::from_millis(100))
        );
        assert_eq!(c.int(&["critical_section"], "writes"), Some(3));
        assert!(!c.with_events(vec![]).text().unwrap().contains("faults"));
    }
}
