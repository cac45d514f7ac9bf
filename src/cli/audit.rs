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
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The backend to audit, as a workload's `backend.kind` names it (redis, etcd, ...).
    #[arg(long, value_parser = backend, required_unless_present = "resume")]
    pub backend: Option<BackendKind>,
    /// Audit this lock client adapter instead of the built-in client: its command
    /// line, split into words as a POSIX shell splits them (quotes and backslashes,
    /// no expansion) (docs/clients.md); adds library self-fencing scenarios.
    #[arg(long, value_name = "CMD")]
    pub client: Option<String>,
    /// Runs of each "can it break?" scenario at most (it stops at its first
    /// break), with seeds --seed .. --seed+N-1; also the cap of a self-fencing twin.
    #[arg(long, value_name = "N", default_value_t = 10, conflicts_with = "bound",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Provoked runs (history.md v1.2) each fenced twin needs before the verdict
    /// may rest on it: its floor. A fenced twin runs until it has them, is
    /// flagged, ran --twin-runs runs (6 × N unless given), or its provoked share
    /// is too low to reach N within them.
    /// Below the default the audit is exploratory: never complete (exit 3).
    #[arg(long, value_name = "N", default_value_t = audit::plan::DEFAULT_FLOOR, conflicts_with = "bound",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub provoked: u32,
    /// Run every claim the verdict would rest on until, with none failing,
    /// its failure rate is bounded at P or below (one-sided 95 %, exact): each
    /// "can it break?" scenario to that many checked runs with no break, each
    /// fenced twin to that many provoked runs (1% is 299, 5% is 59). Sets
    /// --runs and --provoked; no --budget unless given (hours on one machine:
    /// see --shard).
    #[arg(long, value_name = "P", value_parser = audit::shard::parse_bound)]
    pub bound: Option<f64>,
    /// Run shard I of N (1-based) of the audit: run numbers I, I+N, ... of each
    /// scenario, with the seeds the whole audit gives them; writes a part for
    /// `lockcheck audit merge`. Without --asked, the first phase: the "can it
    /// break?" scenarios. A part exits 0 when it ran its share to the end.
    #[arg(long, value_name = "I/N", value_parser = audit::shard::parse_share)]
    pub shard: Option<audit::plan::Share>,
    /// The second phase of a sharded audit: the merge of the first phase's
    /// parts (its audit.json), whose fenced twins this shard runs its share of.
    #[arg(long, value_name = "FILE", requires = "shard")]
    pub asked: Option<PathBuf>,
    /// Go on with the audit in DIR (stopped midway: killed, rebooted,
    /// interrupted) from the scorecard it wrote after its last run that ended,
    /// with the flags it was started with; the runs in flight are made again.
    #[arg(long, value_name = "DIR", conflicts_with_all = [
        "backend", "client", "runs", "provoked", "bound", "twin_runs", "budget", "jobs",
        "expect", "results", "scenarios", "seed", "shrink", "shard", "asked"])]
    pub resume: Option<PathBuf>,
    /// Runs of a fenced twin at most (default 6 × --provoked). A twin whose
    /// runs seldom provoke stops once even the upper end of its provoked
    /// share's interval would not reach the floor within them: raise it, with
    /// --budget, for a lock whose break seldom recurs with a deposed holder
    /// writing (nats' kill and restart: 5 provoked of 25).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub twin_runs: Option<u32>,
    /// Start no run that would end past this (what is left out is said).
    /// Default 15m; none with --bound.
    #[arg(long, value_name = "DURATION", value_parser = budget)]
    pub budget: Option<Duration>,
    /// Runs at once (default: one a core within this machine's memory, up to
    /// four a core while probes show the CPU has room and timers still wake on
    /// time).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// Exit 1 unless the verdict is this one.
    #[arg(long, value_name = "VERDICT", value_parser = super::one_of(&AuditVerdict::ALL, AuditVerdict::name))]
    pub expect: Option<AuditVerdict>,
    /// Print the scorecard as one JSON object (its "verdict" one of `efficiency-lock-only`, `safe-with-fencing`, `unsafe-even-with-fencing`, `no-break-found`, `inconclusive`, `partial`).
    #[arg(long)]
    pub json: bool,
    /// Where the audit's directory goes.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub results: PathBuf,
    /// Only these recipes, comma-separated.
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          value_parser = super::one_of(&Recipe::ALL, Recipe::name))]
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

/// `lockcheck audit merge`.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Add up the parts of a sharded audit (`--shard I/N`) into one scorecard
    /// and verdict, under the rules of an audit run whole.
    #[command(after_long_help = crate::cli::exit_codes::AUDIT_MERGE.help())]
    Merge(MergeArgs),
}

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// The parts: audit directories, their audit.json, or directories holding
    /// audit directories (each one a part).
    #[arg(required = true, value_name = "PART")]
    pub parts: Vec<PathBuf>,
    /// The merge's directory (made; never one already there).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Print the scorecard as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 unless the verdict is this one.
    #[arg(long, value_name = "VERDICT", value_parser = super::one_of(&AuditVerdict::ALL, AuditVerdict::name))]
    pub expect: Option<AuditVerdict>,
}

/// The budget of an audit without `--budget`: one machine's quarter of an
/// hour, or none for a `--bound` (which asks for the runs it takes).
const DEFAULT_BUDGET: Duration = Duration::from_secs(15 * 60);
const NO_BUDGET: Duration = Duration::from_secs(365 * 24 * 3600);

fn backend(s: &str) -> Result<BackendKind, String> {
    let lockable = || BackendKind::ALL.into_iter().filter(|k| k.has_lock());
    match BackendKind::named(s) {
        Ok(k) if k.has_lock() => Ok(k),
        Ok(k) => Err(format!(
            "{k} hands out no lock to audit: {}; run {}",
            k.leads_instead().unwrap_or_default(),
            k.shown_by()
                .iter()
                .map(|w| format!("workloads/{w}*.toml"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        // Built without it: the feature to build it with.
        Err(why) if BackendKind::buildable(s) => Err(why),
        Err(_) => {
            let names: Vec<&str> = lockable().map(|k| k.name()).collect();
            Err(format!("expected one of {}", names.join(", ")))
        }
    }
}

/// A fenced twin's cap: `--twin-runs`, else 6 × the floor; never below the floor.
fn twin_runs(args: &Args, floor: u32) -> Result<u32> {
    let runs = args
        .twin_runs
        .unwrap_or(floor.saturating_mul(audit::plan::CAP_PER_FLOOR));
    if runs < floor {
        return Err(Exit::usage(format!(
            "--twin-runs {runs}: fewer than the floor of {floor} provoked runs: no fenced twin could reach it"
        )));
    }
    Ok(runs)
}

/// `--runs`, `--provoked` and the budget, or what `--bound` makes of them
/// (said on stderr as the audit starts).
fn plan_figures(args: &Args) -> (u32, u32, Duration) {
    let Some(p) = args.bound else {
        return (
            args.runs,
            args.provoked,
            args.budget.unwrap_or(DEFAULT_BUDGET),
        );
    };
    let n = audit::plan::runs_for_bound(p);
    eprintln!(
        "lockcheck audit: --bound {:.1}%: each \"can it break?\" scenario to {n} checked runs with no break, each fenced twin to {n} provoked runs with none flagged: 0 of {n} bounds a failure rate at {:.2}% (one-sided 95%, exact)",
        p * 100.0,
        audit::stats::upper_95(0, n as usize).unwrap_or(1.0) * 100.0
    );
    (n, n, args.budget.unwrap_or(NO_BUDGET))
}

/// Whether an audit's time left is no budget's: a `--bound` given no `--budget`
/// runs under a year's.
fn unbounded(left: Duration) -> bool {
    left > NO_BUDGET / 2
}

/// `14m52s`, or `no budget` for a `--bound` given none.
fn budget_left(left: Duration) -> String {
    match unbounded(left) {
        true => "no budget".into(),
        false => render::minutes(left.as_secs_f64()),
    }
}

/// A run's progress line's end: ` | 14m52s left`, or nothing where the audit has
/// no budget, whose "no budget left" would read as a budget spent.
fn time_left(left: Duration) -> String {
    match unbounded(left) {
        true => String::new(),
        false => format!(" | {} left", render::minutes(left.as_secs_f64())),
    }
}

/// `--resume DIR`: the flags the audit in DIR was started with, read back
/// from its scorecard's command line, to go on with.
fn resumed_args(dir: &std::path::Path) -> Result<Args> {
    let card = audit::resume::read(dir)?;
    let argv = card.argv().ok_or_else(|| {
        Exit::malformed(format!(
            "--resume {}: its scorecard's field provenance.argv names no audit command line",
            dir.display()
        ))
    })?;
    let command = <Args as clap::Args>::augment_args(
        clap::Command::new("audit")
            .args_conflicts_with_subcommands(true)
            .subcommand_negates_reqs(true),
    );
    let matches = command.try_get_matches_from(argv).map_err(|e| {
        Exit::malformed(format!(
            "--resume {}: its recorded command line no longer parses: {e}",
            dir.display()
        ))
    })?;
    let mut args = <Args as clap::FromArgMatches>::from_arg_matches(&matches)
        .map_err(|e| Exit::malformed(format!("--resume {}: {e}", dir.display())))?;
    args.resume = Some(dir.to_path_buf());
    Ok(args)
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
    if let Some(Command::Merge(m)) = args.command {
        return merge(m);
    }
    let json = args.json;
    let args = match &args.resume {
        Some(dir) => Args {
            json,
            ..resumed_args(dir)?
        },
        None => args,
    };
    let Some(backend) = args.backend else {
        return Err(Exit::usage("--backend: required"));
    };
    let client = args.client.as_deref().map(client_command).transpose()?;
    let (runs, floor, budget) = plan_figures(&args);
    let twin_runs = twin_runs(&args, floor)?;
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
        backend,
        client,
        recipes: (!args.scenarios.is_empty()).then(|| args.scenarios.clone()),
        runs,
        provoked: floor,
        twin_runs,
        first_seed: args.seed,
        jobs,
        budget,
        results: args.results.clone(),
        exe: std::env::current_exe().context("finding the lockcheck program")?,
        argv: std::env::args().collect(),
        bound: args.bound,
        share: args.shard,
        asked: args.asked.clone(),
        resume: args.resume.clone(),
    };
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
            budget_left(left),
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
                "[{done:>3}] {scenario} run {}: {what} ({class}) in {:.1} s | flagged so far {flagged}/{counted}, {provoked} provoked{}",
                slot.run,
                record.wall_s,
                time_left(left)
            );
        }
    }
    };
    let mut card = audit::audit(&opts, &mut progress)?;
    if args.shrink && card.interrupted.is_none() {
        shrink_breaks(&mut card, &opts, args.shrink_budget)?;
    }
    show(&card, args.json, args.expect)
}

/// `lockcheck audit merge`: the parts added up, shown as an audit's scorecard.
fn merge(m: MergeArgs) -> Result<u8> {
    let card = audit::merge::merge(&audit::merge::Options {
        parts: m.parts,
        out: m.out,
        argv: std::env::args().collect(),
    })?;
    show(&card, m.json, m.expect)
}

/// The scorecard on stdout (a table, or JSON), what it lacks on stderr, and
/// the exit code it gives.
fn show(card: &Scorecard, json: bool, expect: Option<AuditVerdict>) -> Result<u8> {
    if json {
        println!("{}", serde_json::to_string(card)?);
    } else {
        print!("{}", render::table(card));
        println!(
            "scorecard: {} ({}, {})",
            card.dir.join(audit::HTML_FILE).display(),
            audit::JSON_FILE,
            audit::JUNIT_FILE
        );
    }
    let code = card.exit(expect);
    match (&card.interrupted, expect) {
        (Some(signal), _) => {
            eprintln!("lockcheck audit: interrupted by {signal}; every run in flight was stopped")
        }
        _ if card.is_part() => eprintln!(
            "lockcheck audit: {} (exit {code}): `lockcheck audit merge` adds the parts up into the verdict",
            card.shards.as_ref().map(|s| s.describe()).unwrap_or_default()
        ),
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
