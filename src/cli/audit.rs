//! `lockcheck audit --backend B`: the battery of scenarios that applies to one
//! backend, run sequentially and targeted, added up into a scorecard with a
//! verdict. Exit: 0 the audit is complete (and its verdict matches `--expect`,
//! if given), 1 the verdict does not match `--expect`, 2 usage, 3 not complete
//! (a `--scenarios` subset, the budget ran out, or something the verdict would
//! rest on is missing: the scorecard's `missing` says what), 5 environment, 130
//! interrupted (`crate::exit`).

use crate::audit::battery::Recipe;
use crate::audit::card::ShrunkBreak;
use crate::audit::decide::AuditVerdict;
use crate::audit::execute::{Event, Outcome};
use crate::audit::scorecard::Scorecard;
use crate::audit::{self, render};
use crate::backend::BackendKind;
use crate::exit::{self, Exit};
use crate::run::workload::Dur;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The backend to audit, as a workload's `backend.kind` names it (redis, etcd, ...).
    #[arg(long, value_parser = backend)]
    pub backend: BackendKind,
    /// Audit this lock client adapter instead of the built-in client: its command
    /// line, split into words as a POSIX shell splits them (quotes and backslashes,
    /// no expansion) (docs/clients.md); adds library self-fencing scenarios.
    #[arg(long, value_name = "CMD")]
    pub client: Option<String>,
    /// Runs of each "can it break?" scenario at most (it stops at its first
    /// break), with seeds --seed .. --seed+N-1; also the cap of a self-fencing twin.
    #[arg(long, value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Provoked runs (history.md v1.2) each fenced twin needs before the verdict
    /// may rest on it: its floor. A fenced twin runs until it has them, is
    /// flagged, ran --twin-runs runs (6 × N unless given), or its provoked share
    /// is too low to reach N within them.
    /// Below the default the audit is exploratory: never complete (exit 3).
    #[arg(long, value_name = "N", default_value_t = audit::plan::DEFAULT_FLOOR,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub provoked: u32,
    /// Runs of a fenced twin at most (default 6 × --provoked). A twin whose
    /// runs seldom provoke stops once even the upper end of its provoked
    /// share's interval would not reach the floor within them: raise it, with
    /// --budget, for a lock whose break seldom recurs with a deposed holder
    /// writing (nats' kill and restart: 5 provoked of 25).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub twin_runs: Option<u32>,
    /// Start no run that would end past this (what is left out is said).
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = budget)]
    pub budget: Duration,
    /// Runs at once (default: one a core within this machine's memory, up to
    /// four a core while probes show the CPU has room and timers still wake on
    /// time).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// Exit 1 unless the verdict is this one.
    #[arg(long, value_enum, value_name = "VERDICT")]
    pub expect: Option<AuditVerdict>,
    /// Print the scorecard as one JSON object (its "verdict" one of `efficiency-lock-only`, `safe-with-fencing`, `unsafe-even-with-fencing`, `no-break-found`, `inconclusive`, `partial`).
    #[arg(long)]
    pub json: bool,
    /// Where the audit's directory goes.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub results: PathBuf,
    /// Only these recipes, comma-separated (holder-pause, clock-jump-majority,
    /// clock-rate-majority, clock-jump-holder, clock-rate-holder, kill-restart,
    /// kill-restart-durable, kill-restart-wiped, holder-cut-off, leader-isolated,
    /// slow-links, disk-full).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = recipe)]
    pub scenarios: Vec<Recipe>,
    /// The first run's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Cut each break's counterexample down with `lockcheck shrink` (its
    /// defaults: 2 of 3 reruns, 10 confirming reruns), after the audit; the
    /// scorecard names each `shrunk.toml`. Not part of --budget.
    #[arg(long)]
    pub shrink: bool,
    /// With --shrink: each break's shrink time, its confirmation included.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = budget, requires = "shrink")]
    pub shrink_budget: Duration,
}

fn backend(s: &str) -> Result<BackendKind, String> {
    let lockable = || BackendKind::ALL.into_iter().filter(|k| k.has_lock());
    match BackendKind::ALL.into_iter().find(|k| k.name() == s) {
        Some(k) if k.has_lock() => Ok(k),
        Some(k) => Err(format!(
            "{k} hands out no lock to audit: {}; run {}",
            k.leads_instead().unwrap_or_default(),
            k.shown_by()
                .iter()
                .map(|w| format!("workloads/{w}*.toml"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        None => {
            let names: Vec<&str> = lockable().map(|k| k.name()).collect();
            Err(format!("expected one of {}", names.join(", ")))
        }
    }
}

fn recipe(s: &str) -> Result<Recipe, String> {
    Recipe::named(s).ok_or_else(|| {
        let names: Vec<&str> = Recipe::ALL.iter().map(|r| r.name()).collect();
        format!("expected one of {}", names.join(", "))
    })
}

/// A fenced twin's cap: `--twin-runs`, else 6 × `--provoked`; never below the floor.
fn twin_runs(args: &Args) -> Result<u32> {
    let runs = args
        .twin_runs
        .unwrap_or(args.provoked.saturating_mul(audit::plan::CAP_PER_FLOOR));
    if runs < args.provoked {
        return Err(Exit::usage(format!(
            "--twin-runs {runs}: fewer than --provoked {}: no fenced twin could reach its floor",
            args.provoked
        )));
    }
    Ok(runs)
}

fn budget(s: &str) -> Result<Duration, String> {
    let Dur(d) = s.parse()?;
    if d.is_zero() {
        return Err("expected a budget longer than 0".into());
    }
    Ok(d)
}

/// A `--client` command line, split into words as a POSIX shell splits them
/// (`python3 "my lock.py" --name 'a b'`: quotes and backslashes, no expansion);
/// relative paths that exist here are made absolute, since the scenarios'
/// workloads live in the audit's own directory.
fn client_command(line: &str) -> Result<Vec<String>> {
    let words = shlex::split(line).ok_or_else(|| {
        Exit::usage(format!(
            "--client: cannot split {line:?} into words: an unclosed quote or a trailing backslash"
        ))
    })?;
    if words.is_empty() {
        return Err(Exit::usage(
            "--client: expected a command line, found nothing",
        ));
    }
    words
        .into_iter()
        .map(|w| {
            let p = std::path::Path::new(&w);
            if p.is_relative() && w.contains('/') && p.exists() {
                let abs = p
                    .canonicalize()
                    .with_context(|| format!("--client: resolving {w}"))?;
                Ok(abs.display().to_string())
            } else {
                Ok(w)
            }
        })
        .collect()
}

pub fn main(args: Args) -> Result<u8> {
    let client = args.client.as_deref().map(client_command).transpose()?;
    let twin_runs = twin_runs(&args)?;
    let jobs = match args.jobs {
        Some(j) => audit::pace::Jobs::Fixed(usize::from(j)),
        None => {
            let (start, why) = crate::run::capacity::parallel_runs();
            let most = crate::run::capacity::paced_runs_most();
            eprintln!(
                "lockcheck audit: {start} runs at once ({why}), up to {most} while one more run would leave the CPU within {:.0} % busy and timers wake within {} ms at p99; --jobs to choose",
                audit::pace::CPU_CEILING * 100.0,
                audit::pace::LATENESS_LIMIT.as_millis()
            );
            audit::pace::Jobs::Paced { start, most }
        }
    };
    let opts = audit::Options {
        backend: args.backend,
        client,
        recipes: (!args.scenarios.is_empty()).then(|| args.scenarios.clone()),
        runs: args.runs,
        provoked: args.provoked,
        twin_runs,
        first_seed: args.seed,
        jobs,
        budget: args.budget,
        results: args.results.clone(),
        exe: std::env::current_exe().context("finding the lockcheck program")?,
        argv: std::env::args().collect(),
    };
    let floor = args.provoked;
    let mut progress = |event: Event<'_>, left: Duration| {
        match event {
        Event::Planned {
            scenarios,
            runs: all,
            jobs,
            dir,
        } => eprintln!(
            "lockcheck audit: {} scenarios, {all} runs at most (each \"can it break?\" scenario stops at its first break, a fenced twin at {floor} provoked runs or {twin_runs} runs), {jobs} at once, budget {}; in {}",
            scenarios,
            render::minutes(left.as_secs_f64()),
            dir.display()
        ),
        Event::Started { .. } => {}
        Event::Paced { left, now } => eprintln!(
            "lockcheck audit: {now} runs at once from here ({})",
            left.line()
        ),
        Event::Ended {
            scenario,
            slot,
            record,
            flagged,
            provoked,
            counted,
            done,
        } => {
            let what = match record.outcome {
                Outcome::Flagged => format!("flagged ({})", record.anomalies.join(", ")),
                Outcome::Valid => "valid".into(),
                Outcome::Unknown => "unknown (not counted)".into(),
                Outcome::MissedFaults => "missed planned faults (not counted)".into(),
                Outcome::Unobserved | Outcome::OutOfReach => format!(
                    "valid, not counted: {}",
                    record.error.as_deref().unwrap_or("")
                ),
                Outcome::Error => format!(
                    "error (not counted): {}",
                    record.error.as_deref().unwrap_or("")
                ),
            };
            let class = record.provoked.map_or("", |p| p.name());
            eprintln!(
                "[{done:>3}] {scenario} run {}: {what} ({class}) in {:.1} s | flagged so far {flagged}/{counted}, {provoked} provoked | {} left",
                slot.run,
                record.wall_s,
                render::minutes(left.as_secs_f64())
            );
        }
    }
    };
    let mut card = audit::audit(&opts, &mut progress)?;
    if args.shrink && card.interrupted.is_none() {
        shrink_breaks(&mut card, &opts, args.shrink_budget)?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&card)?);
    } else {
        print!("{}", render::table(&card));
        println!(
            "scorecard: {} ({}, {})",
            card.dir.join(audit::HTML_FILE).display(),
            audit::JSON_FILE,
            audit::JUNIT_FILE
        );
    }
    let code = card.exit(args.expect);
    match (&card.interrupted, args.expect) {
        (Some(signal), _) => {
            eprintln!("lockcheck audit: interrupted by {signal}; every run in flight was stopped")
        }
        _ if !card.complete => eprintln!(
            "lockcheck audit: not complete (exit {code}), verdict {}: {}",
            card.verdict.name(),
            card.missing.join("; ")
        ),
        (None, Some(want)) if want != card.verdict => eprintln!(
            "lockcheck audit: expected {}, the verdict is {} (exit {code})",
            want.name(),
            card.verdict.name()
        ),
        _ => {}
    }
    Ok(code)
}

/// `--shrink`: each counterexample cut down to the smallest workload that still
/// breaks the lock, named in the scorecard, which is written again. A break
/// that does not come back says so; it is still a break (it happened once).
fn shrink_breaks(card: &mut Scorecard, opts: &audit::Options, budget: Duration) -> Result<()> {
    let shrink_opts = crate::shrink::Options {
        kind: None,
        rule: crate::shrink::RULE,
        jobs: opts.jobs.start(),
        budget,
        confirm: crate::shrink::CONFIRM,
        reliable: crate::shrink::RELIABLE,
        workload_dir: None,
        exe: opts.exe.clone(),
    };
    for c in card.scenarios.iter_mut() {
        let Some(dir) = c.counterexample.clone() else {
            continue;
        };
        let name = c.scenario.clone();
        let mut line = |l: &str| eprintln!("{name}: {l}");
        let started = std::time::Instant::now();
        c.shrunk = Some(match crate::shrink::shrink(&dir, &shrink_opts, &mut line) {
            Ok(s) => shrunk_break(&s),
            Err(e)
                if e.downcast_ref::<Exit>()
                    .is_some_and(|x| x.code == exit::INTERRUPTED) =>
            {
                audit::publish(card)?;
                return Err(e);
            }
            Err(e) => ShrunkBreak {
                kind: c.anomalies.first().cloned().unwrap_or_default(),
                before: String::new(),
                after: None,
                reproduced: None,
                workload: None,
                seconds: started.elapsed().as_secs_f64(),
                not_shrunk: Some(format!("{e:#}")),
            },
        });
        if let Some(s) = &c.shrunk {
            eprintln!("lockcheck audit: {}: {}", c.scenario, s.line());
        }
    }
    audit::publish(card)
}

/// What the scorecard keeps of one shrink.
fn shrunk_break(s: &crate::shrink::Shrinking) -> ShrunkBreak {
    let not_shrunk = match (&s.file, &s.confirm) {
        (Some(_), _) => None,
        (None, None) => Some(format!(
            "it came back in {}/{} reruns of the run as it happened: nothing to shrink",
            s.first.flagged, s.first.ran
        )),
        (None, Some(c)) => Some(format!(
            "the shrunk workload never gave it in {} reruns",
            c.ran
        )),
    };
    ShrunkBreak {
        kind: s.kind.name().to_string(),
        before: s
            .search
            .as_ref()
            .map_or(String::new(), |x| x.start.to_string()),
        after: s.search.as_ref().map(|x| x.best.size().to_string()),
        reproduced: s.confirm.as_ref().map(|c| (c.flagged, c.ran)),
        workload: s.file.clone(),
        seconds: s.elapsed.as_secs_f64(),
        not_shrunk,
    }
}

#[cfg(test)]
mod tests {
    use super::client_command;

    #[test]
    fn a_client_command_line_is_split_as_a_shell_splits_it() {
        let words = client_command(r#"python3 "my lock.py" --name 'a b' c\ d  -v"#).unwrap();
        assert_eq!(
            words,
            ["python3", "my lock.py", "--name", "a b", "c d", "-v"]
        );
        // An empty quoted argument is a word, as in a shell.
        assert_eq!(client_command("lock ''").unwrap(), ["lock", ""]);
    }

    #[test]
    fn a_relative_path_that_exists_here_is_made_absolute() {
        // Tests run in the package's folder.
        let words = client_command("python3 'src/cli/audit.rs' --flag x/y").unwrap();
        let here = std::path::Path::new("src/cli/audit.rs")
            .canonicalize()
            .unwrap();
        assert_eq!(
            words,
            ["python3", &here.display().to_string(), "--flag", "x/y"]
        );
    }

    #[test]
    fn a_client_command_line_that_does_not_split_is_a_usage_error() {
        for line in ["", "   ", "python3 'lock.py", "lock \\"] {
            let e = client_command(line).unwrap_err();
            let exit = e.downcast_ref::<crate::exit::Exit>();
            assert!(exit.is_some(), "{line:?}: {e:#}");
            assert!(format!("{e:#}").contains("--client"), "{line:?}: {e:#}");
        }
    }
}
