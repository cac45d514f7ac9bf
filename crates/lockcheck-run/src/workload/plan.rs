//! The faults a run is planned to start, decided before it starts: a workload
//! whose faults cannot all start within the run is refused here, naming the file,
//! the line, the key and the figures, instead of running, injecting nothing and
//! reporting a green verdict on a test that never tested what it says.

use super::faults::PlannedFault;
use super::located::line_of;
use super::Workload;
use anyhow::{anyhow, Result};
use std::time::Duration;

impl Workload {
    /// Every occurrence the run plans to start, in the order they are due, for a
    /// run of the workload's duration or `time_limit` (`--time-limit`) and this
    /// seed (a random `[schedule]` draws from it).
    ///
    /// An error (file, line, key and figures) if some `[[faults]]` entry would
    /// never start: due at or past the run's end, or, in a run of the workload's
    /// own duration, outlasting what is left of it (cut short, it would not be
    /// the fault the workload asks for). `--time-limit` shortens a run on purpose:
    /// under it, a fault cut short is accepted, one that cannot start is not.
    pub fn planned_faults(
        &self,
        time_limit: Option<Duration>,
        seed: u64,
    ) -> Result<Vec<PlannedFault>> {
        let run = time_limit.unwrap_or(self.duration);
        let the_run = match time_limit {
            Some(_) => format!("the run (cut to {} by --time-limit)", secs(run)),
            None => format!("the run ({})", secs(run)),
        };
        let mut planned = Vec::new();
        match self.schedule {
            Some(schedule) => {
                let durations: Vec<Duration> = self.faults.iter().map(|f| f.duration).collect();
                let slots =
                    lockcheck_fault::schedule::timeline(&durations, &schedule.plan(run), seed)
                        .map_err(|e| self.bad_schedule(format!("{e:#}")))?;
                if let Some(i) =
                    (0..self.faults.len()).find(|&i| !slots.iter().any(|s| s.fault == i))
                {
                    let f = &self.faults[i];
                    return Err(self.bad(
                        i,
                        "duration",
                        format!(
                            "the [schedule] never starts this {} ({} long) in {}: quiet {}, final heal {}, seed {seed}; shorten it, or lengthen the run",
                            f.name(),
                            secs(f.duration),
                            the_run,
                            secs(schedule.quiet),
                            secs(schedule.heal),
                        ),
                    ));
                }
                planned.extend(slots.iter().map(|s| PlannedFault {
                    fault: s.fault,
                    at: s.at,
                    duration: s.duration,
                }));
            }
            None => {
                for (i, f) in self.faults.iter().enumerate() {
                    let what = format!("this {} ({} long)", f.name(), secs(f.duration));
                    if f.after >= run {
                        return Err(self.bad(
                            i,
                            "after",
                            format!(
                                "{what} is due {} after the start, when {} has ended: it would never start",
                                secs(f.after),
                                the_run
                            ),
                        ));
                    }
                    if time_limit.is_none() && f.after + f.duration > run {
                        return Err(self.bad(
                            i,
                            "duration",
                            format!(
                                "{what} starts {} after the start of {}: only {} are left, it would be cut short; shorten it, start it earlier, or lengthen the run",
                                secs(f.after),
                                the_run,
                                secs(run - f.after)
                            ),
                        ));
                    }
                    let mut at = f.after;
                    while at < run {
                        planned.push(PlannedFault {
                            fault: i,
                            at,
                            duration: f.duration,
                        });
                        match f.interval {
                            Some(gap) => at += f.duration + gap,
                            None => break,
                        }
                    }
                }
                planned.sort_by_key(|p| (p.at, p.fault));
            }
        }
        Ok(planned)
    }

    /// `FILE:LINE: faults[i].KEY: what`, the line of the key in the entry (else
    /// the entry's first line).
    fn bad(&self, i: usize, key: &str, what: String) -> anyhow::Error {
        // toml's span of an array-of-tables entry may be its header alone: the
        // entry runs to the next header.
        let start = self.faults[i].span.start.min(self.text.len());
        let end = self.text[start..]
            .match_indices("\n[")
            .map(|(o, _)| start + o)
            .find(|&o| o >= self.faults[i].span.end)
            .unwrap_or(self.text.len());
        let entry = &self.text[start..end];
        let at = entry
            .match_indices(key)
            .find(|&(o, _)| {
                let line_start = entry[..o].rfind('\n').map_or(0, |n| n + 1);
                entry[line_start..o].trim().is_empty()
                    && entry[o + key.len()..].trim_start().starts_with('=')
            })
            .map_or(0, |(o, _)| o);
        let line = line_of(&self.text, start + at);
        anyhow!("{}:{line}: faults[{i}].{key}: {what}", self.path.display())
    }

    fn bad_schedule(&self, what: String) -> anyhow::Error {
        let line = self
            .text
            .lines()
            .position(|l| l.trim() == "[schedule]")
            .map_or(String::new(), |l| format!(":{}", l + 1));
        anyhow!("{}{line}: schedule: {what}", self.path.display())
    }
}

/// A duration as the workload would write it.
fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn workload(duration: &str, fault: &str) -> Result<Workload> {
        Workload::parse(
            &format!(
                "duration = \"{duration}\"\n[backend]\nkind = \"redis\"\nlease = \"1s\"\n\
                 [clients]\ncount = 2\n[critical_section]\nhold = \"100ms\"\nwrites = 1\n\
                 \n[[faults]]\nkind = \"pause\"\ntarget = \"holder\"\n{fault}\n"
            ),
            Path::new("w.toml"),
        )
    }

    #[test]
    fn a_fault_due_after_the_end_is_refused_with_its_line_and_figures() {
        let e = format!(
            "{:#}",
            workload("8s", "duration = \"1s\"\nafter = \"10s\"").unwrap_err()
        );
        assert!(
            e.starts_with("w.toml:15: faults[0].after:")
                && e.contains("10 s")
                && e.contains("(8 s)"),
            "{e}"
        );
    }

    #[test]
    fn a_fault_longer_than_what_is_left_is_refused() {
        let e = format!(
            "{:#}",
            workload("8s", "duration = \"60s\"\nafter = \"1s\"").unwrap_err()
        );
        assert!(
            e.starts_with("w.toml:14: faults[0].duration:")
                && e.contains("60 s long")
                && e.contains("only 7 s are left"),
            "{e}"
        );
        // It fits exactly: planned once.
        let w = workload("8s", "duration = \"7s\"\nafter = \"1s\"").unwrap();
        assert_eq!(w.planned_faults(None, 0).unwrap().len(), 1);
    }

    #[test]
    fn a_time_limit_may_cut_a_fault_short_but_not_before_it_starts() {
        let w = workload(
            "10s",
            "duration = \"2500ms\"\nafter = \"1s\"\ninterval = \"1s\"",
        )
        .unwrap();
        let at: Vec<u64> = w
            .planned_faults(None, 0)
            .unwrap()
            .iter()
            .map(|p| p.at.as_millis() as u64)
            .collect();
        assert_eq!(at, [1000, 4500, 8000]);
        let limited = w.planned_faults(Some(Duration::from_secs(3)), 0).unwrap();
        assert_eq!(limited.len(), 1, "cut short, but started");
        let e = format!(
            "{:#}",
            w.planned_faults(Some(Duration::from_millis(500)), 0)
                .unwrap_err()
        );
        assert!(
            e.contains("faults[0].after") && e.contains("--time-limit") && e.contains("500 ms"),
            "{e}"
        );
    }

    #[test]
    fn a_schedule_that_never_starts_a_fault_is_refused() {
        let text = |kill: &str| {
            format!(
                "duration = \"10s\"\n[backend]\nkind = \"redlock\"\nlease = \"1s\"\nfencing_token = false\n\
                 [clients]\ncount = 2\n[critical_section]\nhold = \"100ms\"\nwrites = 1\n\
                 [schedule]\nmix = \"interval\"\ngap = \"1s\"\n\
                 [[faults]]\nkind = \"pause\"\ntarget = \"holder\"\nduration = \"2s\"\n\
                 [[faults]]\nkind = \"kill\"\nnodes = \"one\"\nduration = \"{kill}\"\n"
            )
        };
        let w = Workload::parse(&text("1s"), Path::new("w.toml")).unwrap();
        let planned = w.planned_faults(None, 0).unwrap();
        assert!(planned.iter().any(|p| p.fault == 1), "{planned:?}");
        let e = format!(
            "{:#}",
            Workload::parse(&text("9s"), Path::new("w.toml")).unwrap_err()
        );
        assert!(
            e.contains("faults[1].duration") && e.contains("[schedule] never starts"),
            "{e}"
        );
    }
}
