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
pub mod pace;
pub mod plan;
pub mod provenance;
pub mod render;
pub mod scorecard;
pub mod stats;
pub mod table;

use crate::backend::BackendKind;
use crate::exit::Exit;
use anyhow::{Context, Result};
use battery::{Facts, Fencing, Recipe};
use execute::Event;
use plan::Plan;
use scorecard::{Scorecard, Setting};
use std::path::PathBuf;
use std::time::Duration;

pub const JSON_FILE: &str = "audit.json";
pub const JUNIT_FILE: &str = "audit.xml";
pub const HTML_FILE: &str = "audit.html";

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
    let dir = crate::run::new_run_dir(&opts.results, &format!("audit-{}", opts.backend))
        .map_err(Exit::environment)?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))?;
    let workloads = battery::write_workloads(&battery.scenarios, &facts, &dir.join("scenarios"))?;
    let provenance = provenance::Provenance::now(&workloads, &dir.join("scenarios"), &opts.argv)?;
    let questions = battery::questions(&battery.scenarios);
    let fenced: Vec<bool> = battery
        .scenarios
        .iter()
        .map(|s| s.fencing == Fencing::Fenced)
        .collect();
    let plan = Plan::new(
        questions.clone(),
        &fenced,
        opts.runs,
        opts.provoked,
        opts.twin_runs,
    );
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
        },
        progress,
        &mut checkpoint,
    )?;
    let card = setting(executed);
    publish(&card)?;
    Ok(card)
}

/// Writes the scorecard into its directory: audit.json, audit.xml, audit.html
/// (again after `--shrink` added the shrunk counterexamples).
pub fn publish(card: &Scorecard) -> Result<()> {
    let write = |name: &str, text: String| {
        let path = card.dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write(JSON_FILE, published(card)?)?;
    write(JUNIT_FILE, render::junit(card))?;
    write(HTML_FILE, render::html(card))
}

/// audit.json as it is published: every path inside the audit's directory
/// relative to it, and the directory by its name alone, so that a scorecard copied
/// elsewhere (docs/audits) names nothing of the machine it ran on and its runs are
/// found beside it. (`--json` on stdout keeps absolute paths, for the caller.)
fn published(card: &Scorecard) -> Result<String> {
    let mut v = serde_json::to_value(card)?;
    let name = card
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    relative_to(&mut v, &card.dir.display().to_string(), &name);
    // The adapter's command as it was given: the audit made the paths in it that
    // exist here absolute, for the scenarios' workloads.
    if let (Some(words), Ok(here)) = (&card.client, std::env::current_dir()) {
        v["client"] = serde_json::json!(as_given(words, &here));
    }
    Ok(serde_json::to_string_pretty(&v)? + "\n")
}

/// Each word that is a path below `here` by its path from `here`.
fn as_given(words: &[String], here: &std::path::Path) -> Vec<String> {
    let here = here.canonicalize().unwrap_or_else(|_| here.to_path_buf());
    words
        .iter()
        .map(|w| match std::path::Path::new(w).strip_prefix(&here) {
            Ok(rest) => rest.display().to_string(),
            Err(_) => w.clone(),
        })
        .collect()
}

/// Every mention of `dir` in the scorecard's strings (a run's directory, a
/// counterexample named in an evidence sentence): what is inside it by its path
/// from it, the directory itself by its `name`.
fn relative_to(v: &mut serde_json::Value, dir: &str, name: &str) {
    use serde_json::Value;
    match v {
        Value::String(s) if s.contains(dir) => {
            *s = s.replace(&format!("{dir}/"), "").replace(dir, name);
        }
        Value::Array(a) => a.iter_mut().for_each(|x| relative_to(x, dir, name)),
        Value::Object(o) => o.values_mut().for_each(|x| relative_to(x, dir, name)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::as_given;
    use std::path::Path;

    #[test]
    fn a_published_client_command_names_no_path_of_this_machine_below_here() {
        let words = [
            "/w/repo/clients/go/run",
            "etcd-concurrency",
            "/usr/bin/python3",
        ]
        .map(String::from);
        assert_eq!(
            as_given(&words, Path::new("/w/repo")),
            ["clients/go/run", "etcd-concurrency", "/usr/bin/python3"]
        );
    }
}
