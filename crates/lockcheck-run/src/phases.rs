//! How long each phase of a run took, logged at `-v` (`lockcheck run -v`): the
//! run directory, the servers up and ready, the resource, the clients, the live
//! part, stopping, the check and the report. Everything but the live part is the
//! run's fixed cost, which an audit of hundreds of runs pays most (docs/fixed-cost.md).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The phases a run has gone through, each with its wall time, in order.
pub struct Phases {
    started: Instant,
    /// When the last phase ended, and each phase's name and length.
    done: Mutex<(Instant, Vec<(&'static str, Duration)>)>,
}

/// The phase whose length is the workload's own, not fixed cost.
pub const LIVE: &str = "live";

impl Phases {
    pub fn start() -> Phases {
        let now = Instant::now();
        Phases {
            started: now,
            done: Mutex::new((now, Vec::new())),
        }
    }

    /// Ends `phase`: it took the time since the previous one ended.
    pub fn done(&self, phase: &'static str) {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let took = now - done.0;
        done.0 = now;
        done.1.push((phase, took));
    }

    /// One line: each phase, the total, and the fixed cost (all but the live part).
    pub fn line(&self) -> String {
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        let total = done.0 - self.started;
        let live: Duration = done
            .1
            .iter()
            .filter(|(p, _)| *p == LIVE)
            .map(|(_, d)| *d)
            .sum();
        let each: Vec<String> = done
            .1
            .iter()
            .map(|(p, d)| format!("{p} {:.3} s", d.as_secs_f64()))
            .collect();
        format!(
            "{}; total {:.3} s, fixed {:.3} s",
            each.join(", "),
            total.as_secs_f64(),
            (total - live).as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_cost_is_everything_but_the_live_part() {
        let phases = Phases::start();
        phases.done("servers");
        std::thread::sleep(Duration::from_millis(30));
        phases.done(LIVE);
        phases.done("check");
        let line = phases.line();
        let secs = |key: &str| -> f64 {
            let at = line.find(key).unwrap_or_else(|| panic!("{key} in {line}")) + key.len();
            line[at..].split(' ').next().unwrap().parse().unwrap()
        };
        assert!(secs("live ") >= 0.030, "{line}");
        let (total, fixed) = (secs("total "), secs("fixed "));
        assert!((total - fixed - secs("live ")).abs() < 0.002, "{line}");
        assert!(line.starts_with("servers "), "{line}");
    }
}
