//! `lockcheck audit`: the battery of scenarios that applies to one backend
//! (`battery`), each run `--runs` times with distinct seeds as child `lockcheck
//! run` processes, several at once, within a budget (`execute`), added up into a
//! scorecard (`scorecard`, `stats`) with a verdict from a decision tree
//! (`decide`), shown in the terminal, as JUnit and as audit.html (`render`).
//!
//! The audit's directory (`results/audit-<backend>-<UTC stamp>/`) holds the
//! scenarios' workloads (`scenarios/*.toml`), the run directories (`runs/`), and
//! `audit.json`, `audit.xml`, `audit.html`.

pub mod battery;
pub mod decide;
pub mod execute;
pub mod render;
pub mod scorecard;
pub mod stats;

use crate::backend::BackendKind;
use crate::exit::Exit;
use anyhow::{Context, Result};
use battery::{Facts, Recipe};
use execute::Event;
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
    pub runs: u32,
    pub first_seed: u64,
    pub jobs: usize,
    pub budget: Duration,
    /// Where the audit's directory goes.
    pub results: PathBuf,
    /// The `lockcheck` program each run re-executes.
    pub exe: PathBuf,
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
            "no scenario asked for applies to {}: {}",
            opts.backend,
            why.join("; ")
        )));
    }
    let dir = crate::run::new_run_dir(&opts.results, &format!("audit-{}", opts.backend))
        .map_err(Exit::environment)?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))?;
    let workloads = battery::write_workloads(&battery.scenarios, &facts, &dir.join("scenarios"))?;
    progress(
        Event::Planned {
            scenarios: workloads.len(),
            runs: workloads.len() * opts.runs as usize,
            jobs: opts.jobs,
            dir: &dir,
        },
        opts.budget,
    );
    let executed = execute::execute(
        &workloads,
        &execute::Options {
            exe: opts.exe.clone(),
            results: dir.join("runs"),
            runs: opts.runs,
            first_seed: opts.first_seed,
            jobs: opts.jobs,
            budget: opts.budget,
        },
        progress,
    )?;
    let card = Scorecard::of(
        Setting {
            backend: opts.backend.name().to_string(),
            token: facts.token,
            client: opts.client.clone(),
            battery: &battery,
            workloads: &workloads,
            runs: opts.runs,
            jobs: opts.jobs,
            budget_s: opts.budget.as_secs_f64(),
            dir: dir.clone(),
        },
        executed,
    );
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write(JSON_FILE, serde_json::to_string_pretty(&card)? + "\n")?;
    write(JUNIT_FILE, render::junit(&card))?;
    write(HTML_FILE, render::html(&card))?;
    Ok(card)
}
