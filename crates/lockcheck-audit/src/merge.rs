//! `lockcheck audit merge`: the parts of a sharded audit (`shard`) added up
//! into one scorecard under exactly the rules of an audit run whole. Each
//! scenario's runs are the union of its parts' runs; the whole audit's plan
//! (its caps and floors, not a shard's) decides how each scenario ended from
//! the sums, and the verdict follows from the cards as for any audit.
//!
//! What is refused, naming the file and the field (exit 4): a file that is not
//! a part's scorecard, parts of another lockcheck commit than this one, battery,
//! backend, client or flags than the first part's, the same part twice, a run
//! two parts both made. What is missing leaves the merge not complete (exit 3),
//! named: a shard's part of either phase, or the second phase the first asked.
//! Nothing is written over: the merge goes into a directory of its own.

use super::battery::{self, Facts, Fencing, Question, Recipe, ScenarioWorkload};
use super::execute::{Ending, Executed, Outcome, RunRecord};
use super::plan::{Phase, Plan, Tally, Want, Why};
use super::provenance::{self, Provenance};
use super::scorecard::{self, Scorecard, Setting};
use super::shard::{digest, first_phase_digest, Flags, Part, PartPhase, Shards};
use anyhow::{Context, Result};
use lockcheck_exit::Exit;
use lockcheck_servers::backend::BackendKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A part as read: its file, its digest and its scorecard.
struct Read {
    path: PathBuf,
    digest: String,
    card: Scorecard,
    shards: Shards,
}

/// Finds the parts `args` name: an audit's directory, its audit.json, or a
/// directory holding audits' directories (each one a part).
pub fn part_files(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for a in args {
        let own = a.join(super::publish::JSON_FILE);
        if a.is_file() {
            files.push(a.clone());
        } else if own.is_file() {
            files.push(own);
        } else if a.is_dir() {
            let mut inner: Vec<PathBuf> = std::fs::read_dir(a)
                .with_context(|| format!("reading {}", a.display()))?
                .filter_map(|e| e.ok().map(|e| e.path().join(super::publish::JSON_FILE)))
                .filter(|p| p.is_file())
                .collect();
            if inner.is_empty() {
                return Err(Exit::usage(format!(
                    "{}: no part there (no {} in it or in a directory inside it)",
                    a.display(),
                    super::publish::JSON_FILE
                )));
            }
            inner.sort();
            files.extend(inner);
        } else {
            return Err(Exit::usage(format!(
                "{}: no such file or directory",
                a.display()
            )));
        }
    }
    Ok(files)
}

fn read_part(path: &Path) -> Result<Read> {
    let card = scorecard::read(path)?;
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let shards = match &card.shards {
        Some(s) if s.phase != PartPhase::Merged => s.clone(),
        Some(_) => {
            return Err(Exit::malformed(format!(
                "{}: a merge, not a part: give the parts it names in its field shards.parts",
                path.display()
            )))
        }
        None => {
            return Err(Exit::malformed(format!(
                "{}: field shards is null: an audit run whole, not a part of a sharded one (--shard I/N)",
                path.display()
            )))
        }
    };
    Ok(Read {
        path: path.to_path_buf(),
        digest: digest(&bytes),
        card,
        shards,
    })
}

/// What every part must share with the first, by field: the same program, the
/// same battery, the same question asked of the same backend.
fn identity(r: &Read) -> Vec<(&'static str, String)> {
    let c = &r.card;
    let show = |v: &dyn std::fmt::Debug| format!("{v:?}");
    vec![
        ("provenance.commit", show(&c.provenance.commit)),
        (
            "provenance.battery_digest",
            show(&c.provenance.battery_digest),
        ),
        ("backend", c.backend.clone()),
        ("client", show(&c.client)),
        ("runs_per_scenario", c.runs_per_scenario.to_string()),
        ("provoked_floor", c.provoked_floor.to_string()),
        ("twin_runs", c.twin_runs.to_string()),
        ("bound", show(&c.bound)),
        ("shards.of", r.shards.of.to_string()),
        ("shards.seed", r.shards.seed.to_string()),
        ("shards.scenarios", show(&r.shards.scenarios)),
    ]
}

/// Refuses a part unlike the first, or made by another lockcheck than this one.
fn check_alike(parts: &[Read]) -> Result<()> {
    let first = &parts[0];
    if first.card.provenance.commit.as_deref() != Some(provenance::COMMIT) {
        return Err(Exit::malformed(format!(
            "{}: field provenance.commit is {}, this lockcheck is {}: merge with the lockcheck that ran the parts (its rules decide the verdict)",
            first.path.display(),
            first.card.provenance.commit.as_deref().unwrap_or("null"),
            provenance::COMMIT
        )));
    }
    let want = identity(first);
    for p in &parts[1..] {
        for ((field, a), (_, b)) in want.iter().zip(identity(p)) {
            if *a != b {
                return Err(Exit::malformed(format!(
                    "{}: field {field} is {b}, where {} has {a}: not a part of the same audit",
                    p.path.display(),
                    first.path.display()
                )));
            }
        }
    }
    for (i, p) in parts.iter().enumerate() {
        if let Some(q) = parts[..i].iter().find(|q| q.digest == p.digest) {
            return Err(Exit::malformed(format!(
                "{}: the same part as {} (digest {}): given twice",
                p.path.display(),
                q.path.display(),
                p.digest
            )));
        }
        let twin = parts[..i]
            .iter()
            .find(|q| q.shards.shard == p.shards.shard && q.shards.phase == p.shards.phase);
        if let Some(q) = twin {
            return Err(Exit::malformed(format!(
                "{}: field shards.shard {} (phase {}) again, as in {}: one part per shard and phase",
                p.path.display(),
                p.shards.shard.unwrap_or(0),
                p.shards.phase.name(),
                q.path.display()
            )));
        }
    }
    Ok(())
}

/// The second phase's parts must have been asked by exactly these first-phase
/// parts: a twin asked by another merge answers another question.
fn check_asked(parts: &[Read], first_phase: &str, asked: &[String]) -> Result<()> {
    for p in parts.iter().filter(|p| p.shards.phase == PartPhase::Twins) {
        if p.shards.asked_from.as_deref() != Some(first_phase) {
            return Err(Exit::malformed(format!(
                "{}: field shards.asked_from is {}, the first-phase parts given make {first_phase}: it was asked by other parts",
                p.path.display(),
                p.shards.asked_from.as_deref().unwrap_or("null")
            )));
        }
        if p.shards.twins_asked != asked {
            return Err(Exit::malformed(format!(
                "{}: field shards.twins_asked is {:?}, the first phase asks {asked:?}",
                p.path.display(),
                p.shards.twins_asked
            )));
        }
    }
    Ok(())
}

/// What a merge is asked to do.
pub struct Options {
    pub parts: Vec<PathBuf>,
    /// The merge's directory: created, never written over.
    pub out: PathBuf,
    pub argv: Vec<String>,
}

/// The battery the parts ran, as this lockcheck makes it.
struct Ran {
    facts: Facts,
    battery: battery::Battery,
    workloads: Vec<ScenarioWorkload>,
    questions: Vec<Question>,
    plan: Plan,
    subset: bool,
}

fn battery_of(first: &Read, dir: &Path) -> Result<Ran> {
    let c = &first.card;
    let field = |f: &str, why: String| {
        Exit::malformed(format!("{}: field {f}: {why}", first.path.display()))
    };
    let kind = BackendKind::named(&c.backend).map_err(|why| field("backend", why))?;
    let recipes = match &first.shards.scenarios {
        None => None,
        Some(names) => Some(
            names
                .iter()
                .map(|n| {
                    Recipe::named(n)
                        .ok_or_else(|| field("shards.scenarios", format!("no recipe {n:?}")))
                })
                .collect::<Result<Vec<Recipe>, _>>()?,
        ),
    };
    let facts = Facts::of(kind, c.client.clone())?;
    let battery = battery::battery(&facts, recipes.as_deref());
    let workloads = battery::write_workloads(&battery.scenarios, &facts, &dir.join("scenarios"))?;
    let plan = Plan::of_battery(
        &battery.scenarios,
        c.runs_per_scenario,
        c.provoked_floor,
        c.twin_runs,
    );
    let questions = plan.questions.clone();
    let fenced: Vec<bool> = battery
        .scenarios
        .iter()
        .map(|s| s.fencing == Fencing::Fenced)
        .collect();
    let plan = Plan::new(
        questions.clone(),
        &fenced,
        c.runs_per_scenario,
        c.provoked_floor,
        c.twin_runs,
    );
    Ok(Ran {
        facts,
        battery,
        workloads,
        questions,
        plan,
        subset: recipes.is_some(),
    })
}

/// Each scenario's runs over all parts, by battery index; a counterexample's
/// run directory copied into `dir` (the others stay with their parts).
fn union(parts: &[Read], ran: &Ran, dir: &Path) -> Result<Vec<Vec<RunRecord>>> {
    let mut records: Vec<Vec<RunRecord>> = vec![Vec::new(); ran.workloads.len()];
    for p in parts {
        let part_dir = p.path.parent().unwrap_or(Path::new("."));
        for c in &p.card.scenarios {
            let i = ran
                .workloads
                .iter()
                .position(|w| w.scenario.name() == c.scenario)
                .ok_or_else(|| {
                    Exit::malformed(format!(
                        "{}: field scenarios: {} is not in the battery",
                        p.path.display(),
                        c.scenario
                    ))
                })?;
            for r in &c.runs {
                if let Some(q) = records[i].iter().find(|q| q.run == r.run) {
                    return Err(Exit::malformed(format!(
                        "{}: {} run {} (seed {}) was made by another part too (seed {}): parts of overlapping shards",
                        p.path.display(),
                        c.scenario,
                        r.run,
                        r.seed,
                        q.seed
                    )));
                }
                let mut r = r.clone();
                r.run_dir = match (&r.run_dir, r.outcome) {
                    (Some(d), Outcome::Flagged) => {
                        let from = part_dir.join(d);
                        let name = from.file_name().unwrap_or_default();
                        let to = dir
                            .join("runs")
                            .join(format!(
                                "shard-{}-{}",
                                p.shards.shard.unwrap_or(0),
                                p.shards.phase.name()
                            ))
                            .join(name);
                        copy_run(&from, &to)?;
                        Some(to)
                    }
                    _ => None,
                };
                records[i].push(r);
            }
        }
    }
    for r in &mut records {
        r.sort_by_key(|r| r.run);
    }
    Ok(records)
}

/// A run's directory without its servers' data (the history, verdict,
/// workload and logs are what `report`, `shrink` and `replay` read): regular
/// files and links; a server's socket is no file to copy.
fn copy_run(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    let entries = std::fs::read_dir(from)
        .with_context(|| format!("reading the counterexample {}", from.display()))?;
    for e in entries {
        let e = e.with_context(|| format!("reading {}", from.display()))?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let kind = e.file_type()?;
        if kind.is_dir() && e.file_name() != "data" {
            copy_run(&src, &dst)?;
        } else if kind.is_file() {
            std::fs::copy(&src, &dst).with_context(|| format!("copying {}", src.display()))?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)
                .with_context(|| format!("copying the link {}", src.display()))?;
        }
    }
    Ok(())
}

/// How each scenario ended over all parts, and what the merge still waits on.
fn endings(
    parts: &[Read],
    ran: &Ran,
    records: &[Vec<RunRecord>],
) -> (Vec<Ending>, Vec<String>, Vec<String>) {
    let of = parts[0].shards.of;
    let given = |phase| -> Vec<u32> {
        parts
            .iter()
            .filter(|p| p.shards.phase == phase)
            .filter_map(|p| p.shards.shard)
            .collect()
    };
    let absent = |have: Vec<u32>| -> Vec<u32> { (1..=of).filter(|i| !have.contains(i)).collect() };
    let (breaks, twins) = (given(PartPhase::Breaks), given(PartPhase::Twins));
    let mut waits = Vec::new();
    let missing_breaks = absent(breaks);
    if !missing_breaks.is_empty() {
        waits.push(format!(
            "first-phase (breaks) parts of shards {missing_breaks:?} of {of} not given"
        ));
    }
    let missing_twins = absent(twins.clone());
    let so_far = Executed {
        records: records.to_vec(),
        ..Executed::default()
    };
    let tallies: Vec<Tally> = (0..records.len()).map(|i| so_far.tally(i, 0)).collect();
    let cut_in_a_part = |name: &str| {
        parts.iter().any(|p| {
            p.card
                .scenarios
                .iter()
                .any(|c| c.scenario == name && c.stopped == super::card::Stopped::CutShort)
        })
    };
    let mut pending = Vec::new();
    let endings = (0..records.len())
        .map(|i| {
            let name = ran.workloads[i].scenario.name();
            let want = ran.plan.want(i, &tallies);
            match (want, ran.questions[i]) {
                _ if cut_in_a_part(&name) => Ending::CutShort,
                (Want::Done(why), _) => Ending::Done(why),
                (_, Question::CanItBreak) if !missing_breaks.is_empty() => Ending::CutShort,
                // Every shard ran its share to its end: what the sums lack, the
                // verdict says (checked runs short of --runs).
                (_, Question::CanItBreak) => Ending::Done(Why::RanOut),
                (Want::Wait, Question::DoesItHold { .. }) => Ending::CutShort,
                (_, Question::DoesItHold { .. }) if twins.is_empty() => {
                    pending.push(name);
                    Ending::CutShort
                }
                (_, Question::DoesItHold { .. }) if !missing_twins.is_empty() => Ending::CutShort,
                // Every shard ran its share of the twin: below its floor.
                (_, Question::DoesItHold { .. }) => Ending::Done(Why::Cap),
            }
        })
        .collect();
    if !pending.is_empty() {
        waits.push(
            "the second phase of this sharded audit not run (its twins: `shards` below)"
                .to_string(),
        );
    } else if !twins.is_empty() && !missing_twins.is_empty() {
        waits.push(format!(
            "second-phase (twins) parts of shards {missing_twins:?} of {of} not given"
        ));
    }
    (endings, pending, waits)
}

/// Merges the parts into `opts.out`; the scorecard is written there.
pub fn merge(opts: &Options) -> Result<Scorecard> {
    let files = part_files(&opts.parts)?;
    let parts = files
        .iter()
        .map(|f| read_part(f))
        .collect::<Result<Vec<_>>>()?;
    let Some(first) = parts.first() else {
        return Err(Exit::usage("audit merge: no part given"));
    };
    check_alike(&parts)?;
    if opts.out.exists() {
        return Err(Exit::usage(format!(
            "--out {}: already there; a merge goes into a directory of its own, so nothing merged before is written over",
            opts.out.display()
        )));
    }
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating {}", opts.out.display()))?;
    let dir = opts
        .out
        .canonicalize()
        .with_context(|| format!("resolving {}", opts.out.display()))?;
    let ran = battery_of(first, &dir)?;
    let listed: Vec<Part> = parts.iter().map(part_of).collect();
    let first_phase = first_phase_digest(&listed);
    let records = union(&parts, &ran, &dir)?;
    let (endings, pending, waits) = endings(&parts, &ran, &records);
    let asked_by_parts = parts
        .iter()
        .find(|p| p.shards.phase == PartPhase::Twins)
        .map(|p| p.shards.twins_asked.clone());
    if let Some(asked) = &asked_by_parts {
        check_asked(&parts, &first_phase, asked)?;
    }
    let mut provenance = first.card.provenance.clone();
    provenance.argv = Some(
        std::iter::once("lockcheck".to_string())
            .chain(opts.argv.iter().skip(1).cloned())
            .collect(),
    );
    provenance.started_utc = parts
        .iter()
        .filter_map(|p| p.card.provenance.started_utc.clone())
        .min();
    let shards = Shards {
        shard: None,
        of: first.shards.of,
        phase: PartPhase::Merged,
        seed: first.shards.seed,
        scenarios: first.shards.scenarios.clone(),
        asked_from: None,
        twins_asked: Vec::new(),
        parts: listed,
        twins_pending: pending,
    };
    let slowest = parts.iter().map(|p| p.card.elapsed_s).fold(0.0, f64::max);
    let executed = Executed {
        records,
        endings,
        elapsed: Duration::from_secs_f64(slowest),
        interrupted: None,
        levels: parts.iter().flat_map(|p| p.card.levels.clone()).collect(),
    };
    let card = Scorecard::of(
        Setting {
            facts: &ran.facts,
            battery: &ran.battery,
            workloads: &ran.workloads,
            questions: &ran.questions,
            subset: ran.subset,
            runs: first.card.runs_per_scenario,
            floor: first.card.provoked_floor,
            twin_runs: first.card.twin_runs,
            jobs: first.card.jobs,
            budget_s: first.card.budget_s,
            dir,
            provenance: &provenance,
            bound: first.card.bound,
            shards: Some(shards),
            pending: (!waits.is_empty()).then(|| waits.join("; ")),
        },
        executed,
    );
    super::publish::publish(&card)?;
    Ok(card)
}

fn part_of(p: &Read) -> Part {
    Part {
        shard: p.shards.shard.unwrap_or(0),
        phase: p.shards.phase,
        digest: p.digest.clone(),
        dir: p
            .path
            .parent()
            .and_then(|d| d.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        started_utc: p.card.provenance.started_utc.clone(),
        elapsed_s: p.card.elapsed_s,
        runs: p.card.scenarios.iter().map(|c| c.ran).sum(),
        machine: p.card.provenance.machine.clone(),
    }
}

/// `--asked MERGED`: the first phase's merge whose twins a second-phase shard runs.
pub struct Asked {
    /// [`first_phase_digest`] of the parts the merge added up.
    pub from: String,
    /// The twins it asks, by scenario name.
    pub twins: Vec<String>,
}

impl Asked {
    /// Reads the merge, refusing one that is not a first phase's merge of this
    /// audit (exit 4) or that asks no twin (exit 2).
    pub fn read(path: &Path, provenance: &Provenance, flags: &Flags) -> Result<Asked> {
        let card = scorecard::read(path)?;
        let field = |f: &str, is: String, want: String| {
            Exit::malformed(format!(
                "--asked {}: field {f} is {is}, this audit's is {want}: not the first phase of this audit",
                path.display()
            ))
        };
        let Some(shards) = card
            .shards
            .as_ref()
            .filter(|s| s.phase == PartPhase::Merged)
        else {
            return Err(Exit::malformed(format!(
                "--asked {}: field shards: not a merge of a sharded audit's parts (`lockcheck audit merge`)",
                path.display()
            )));
        };
        let show = |v: &dyn std::fmt::Debug| format!("{v:?}");
        for (f, is, want) in [
            (
                "provenance.commit",
                show(&card.provenance.commit),
                show(&provenance.commit),
            ),
            (
                "provenance.battery_digest",
                show(&card.provenance.battery_digest),
                show(&provenance.battery_digest),
            ),
            ("backend", card.backend.clone(), flags.backend.clone()),
            (
                "runs_per_scenario",
                card.runs_per_scenario.to_string(),
                flags.runs.to_string(),
            ),
            (
                "provoked_floor",
                card.provoked_floor.to_string(),
                flags.provoked.to_string(),
            ),
            (
                "twin_runs",
                card.twin_runs.to_string(),
                flags.twin_runs.to_string(),
            ),
            ("bound", show(&card.bound), show(&flags.bound)),
            ("shards.of", shards.of.to_string(), flags.of.to_string()),
            (
                "shards.seed",
                shards.seed.to_string(),
                flags.seed.to_string(),
            ),
        ] {
            if is != want {
                return Err(field(f, is, want));
            }
        }
        if shards.twins_pending.is_empty() {
            return Err(Exit::usage(format!(
                "--asked {}: the first phase asks no fenced twin (field shards.twins_pending is empty): its merge is the audit's scorecard",
                path.display()
            )));
        }
        Ok(Asked {
            from: first_phase_digest(&shards.parts),
            twins: shards.twins_pending.clone(),
        })
    }

    /// The plan's phase: the twins asked, by battery index.
    pub fn phase(&self, workloads: &[ScenarioWorkload]) -> Phase {
        Phase::Twins {
            asked: workloads
                .iter()
                .map(|w| self.twins.contains(&w.scenario.name()))
                .collect(),
        }
    }
}
