//! `lockcheck audit`: the battery of scenarios that applies to one backend
//! (`battery`), run as child `lockcheck run` processes with distinct seeds,
//! several at once (as many as `pace` finds the machine keeps the runs' timing
//! for), within a budget (`execute`), sequential and targeted
//! (`plan`: a "can it break?" scenario stops at its first provoked
//! counterexample, a fenced twin runs only for a recipe that broke in a provoked
//! run, up to its floor of provoked runs), each run classified from its history (`check::provoked`), added up
//! (`card`, `stats`) into a scorecard (`scorecard`) with a verdict from a
//! decision tree (`decide`), shown in the terminal, as JUnit and as audit.html
//! (`render`).
//!
//! The audit's directory (`results/audit-<backend>-<UTC stamp>/`) holds the
//! scenarios' workloads (`scenarios/*.toml`), the run directories (`runs/`), and
//! `audit.json`, `audit.xml`, `audit.html`.

pub mod battery;
pub mod card;
pub mod decide;
pub mod execute;
pub mod merge;
pub mod pace;
pub mod plan;
pub mod provenance;
pub mod publish;
pub mod render;
pub mod resume;
pub mod scorecard;
pub mod shard;
pub mod stats;
pub mod table;

use anyhow::{Context, Result};
use battery::{Facts, Fencing, Recipe};
use execute::Event;
use lockcheck_exit::Exit;
use lockcheck_servers::backend::BackendKind;
use plan::Plan;
use scorecard::{Scorecard, Setting};
use std::path::PathBuf;
use std::time::Duration;

pub use publish::{publish, HTML_FILE, JSON_FILE, JUNIT_FILE};

/// What an audit is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub backend: BackendKind,
    /// A lock client adapter program and its arguments, instead of the built-in client.
    pub client: Option<Vec<String>>,
    /// Only these recipes (`--scenarios`), else all that apply.
    pub recipes: Option<Vec<Recipe>>,
    /// Runs of a "can it break?" scenario at most.
    pub runs: u32,
    /// Provoked runs each fenced twin needs (`--provoked`).
    pub provoked: u32,
    /// Runs of a fenced twin at most (`--twin-runs`), at least `provoked`.
    pub twin_runs: u32,
    pub first_seed: u64,
    pub jobs: pace::Jobs,
    pub budget: Duration,
    /// Where the audit's directory goes.
    pub results: PathBuf,
    /// The `lockcheck` program each run re-executes.
    pub exe: PathBuf,
    /// The audit's command line, as the scorecard records it.
    pub argv: Vec<String>,
    /// `--bound`: the failure rate every claim runs to bound (runs and floor
    /// already set from it).
    pub bound: Option<f64>,
    /// `--shard I/N`: this process runs that share of the runs.
    pub share: Option<plan::Share>,
    /// `--asked`: the merged first phase whose twins this shard runs.
    pub asked: Option<PathBuf>,
    /// `--resume`: the directory of an audit stopped midway, to go on in.
    pub resume: Option<PathBuf>,
}

/// Runs the audit and writes its directory; `progress` is told of each run's start
/// and end with the budget's time left.
pub fn audit(opts: &Options, progress: &mut dyn FnMut(Event<'_>, Duration)) -> Result<Scorecard> {
    let facts = Facts::of(opts.backend, opts.client.clone())?;
    let battery = battery::battery(&facts, opts.recipes.as_deref());
    if battery.scenarios.is_empty() {
        let why: Vec<String> = battery
            .not_applicable
            .iter()
            .map(|n| format!("{}: {}", n.scenario, n.why))
            .collect();
        return Err(Exit::usage(format!(
            "--scenarios: none asked for applies to {}: {}",
            opts.backend,
            why.join("; ")
        )));
    }
    if let Some(shortest) = battery::shortest(&battery.scenarios, &facts) {
        let one_run = shortest + execute::FIRST_GUESS;
        if opts.budget < one_run {
            return Err(Exit::usage(format!(
                "--budget {}: shorter than one run ({} of workload and about {} to start and stop its servers)",
                stats::minutes(opts.budget.as_secs_f64()),
                stats::minutes(shortest.as_secs_f64()),
                stats::minutes(execute::FIRST_GUESS.as_secs_f64())
            )));
        }
    }
    let resumed = opts.resume.as_deref().map(resume::read).transpose()?;
    let dir = match &resumed {
        Some(r) => r.dir.clone(),
        None => {
            lockcheck_run::new_run_dir(&opts.results, &dir_name(opts)).map_err(Exit::environment)?
        }
    };
    let dir = dir
        .canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))?;
    let workloads = battery::write_workloads(&battery.scenarios, &facts, &dir.join("scenarios"))?;
    let mut provenance =
        provenance::Provenance::now(&workloads, &dir.join("scenarios"), &opts.argv)?;
    if let Some(r) = &resumed {
        provenance = r.provenance(&provenance)?;
    }
    let whole = Plan::of_battery(&battery.scenarios, opts.runs, opts.provoked, opts.twin_runs);
    let questions = whole.questions.clone();
    let fenced: Vec<bool> = battery
        .scenarios
        .iter()
        .map(|s| s.fencing == Fencing::Fenced)
        .collect();
    let whole = Plan::new(
        questions.clone(),
        &fenced,
        opts.runs,
        opts.provoked,
        opts.twin_runs,
    );
    let (plan, shards) = share(opts, whole, &workloads, &provenance)?;
    progress(
        Event::Planned {
            scenarios: workloads.len(),
            runs: (0..plan.caps.len()).map(|i| plan.most(i) as usize).sum(),
            jobs: opts.jobs.start(),
            dir: &dir,
        },
        opts.budget,
    );
    let setting = |executed: execute::Executed| {
        Scorecard::of(
            Setting {
                facts: &facts,
                battery: &battery,
                workloads: &workloads,
                questions: &questions,
                subset: opts.recipes.is_some(),
                runs: opts.runs,
                floor: opts.provoked,
                twin_runs: opts.twin_runs,
                jobs: opts.jobs.start(),
                budget_s: opts.budget.as_secs_f64(),
                dir: dir.clone(),
                provenance: &provenance,
                bound: opts.bound,
                shards: shards.clone(),
                pending: None,
            },
            executed,
        )
    };
    // After each run: an audit killed midway leaves its partial scorecard.
    let mut checkpoint = |so_far: &execute::Executed| {
        if let Err(e) = publish(&setting(so_far.clone())) {
            eprintln!("lockcheck audit: {e:#}");
        }
    };
    let executed = execute::execute(
        &workloads,
        &execute::Options {
            exe: opts.exe.clone(),
            results: dir.join("runs"),
            plan,
            first_seed: opts.first_seed,
            jobs: opts.jobs,
            budget: opts.budget,
            share: opts.share.unwrap_or(plan::Share::WHOLE),
            given: resumed
                .as_ref()
                .map(|r| r.records(&workloads))
                .transpose()?
                .unwrap_or_else(|| vec![Vec::new(); workloads.len()]),
            elapsed_before: resumed.as_ref().map_or(Duration::ZERO, |r| r.elapsed),
        },
        progress,
        &mut checkpoint,
    )?;
    let card = setting(executed);
    publish(&card)?;
    Ok(card)
}

/// `audit-etcd`, or for a part `audit-etcd-shard-2-of-4` (`-twins` in the
/// second phase), before its time stamp.
fn dir_name(opts: &Options) -> String {
    let part = match (opts.share, &opts.asked) {
        (None, _) => String::new(),
        (Some(s), None) => format!("-shard-{}-of-{}", s.index, s.of),
        (Some(s), Some(_)) => format!("-shard-{}-of-{}-twins", s.index, s.of),
    };
    format!("audit-{}{part}", opts.backend)
}

/// The plan and the part's `shards` for `--shard` (and `--asked`, the
/// second phase); the whole plan for an audit run whole.
fn share(
    opts: &Options,
    whole: Plan,
    workloads: &[battery::ScenarioWorkload],
    provenance: &provenance::Provenance,
) -> Result<(Plan, Option<shard::Shards>)> {
    let Some(share) = opts.share else {
        return Ok((whole, None));
    };
    let flags = shard::Flags {
        backend: opts.backend.name().to_string(),
        runs: opts.runs,
        provoked: opts.provoked,
        twin_runs: opts.twin_runs,
        bound: opts.bound,
        of: share.of,
        seed: opts.first_seed,
    };
    let asked = opts
        .asked
        .as_deref()
        .map(|path| merge::Asked::read(path, provenance, &flags))
        .transpose()?;
    let recipes = opts
        .recipes
        .as_ref()
        .map(|rs| rs.iter().map(|r| r.name().to_string()).collect());
    let (phase, part_phase) = match &asked {
        Some(a) => (a.phase(workloads), shard::PartPhase::Twins),
        None => (plan::Phase::Breaks, shard::PartPhase::Breaks),
    };
    let mut shards = shard::Shards::part(share, part_phase, opts.first_seed, recipes);
    if let Some(a) = asked {
        shards.asked_from = Some(a.from);
        shards.twins_asked = a.twins;
    }
    Ok((whole.shard(share, phase), Some(shards)))
}
