//! A stored run, read back as the workload it actually was: the faults as they
//! happened (which entry, when, to whom), from the history alone, each made an
//! explicit event. A holder-targeted fault stays holder-targeted: the holder is a
//! role, not a process number, and the process that held the lock in one run need
//! not hold it in the next. A target the original chose at random is named.

use super::candidate::{Candidate, Event};
use anyhow::{anyhow, Context, Result};
use lockcheck_check::AnomalyKind;
use lockcheck_exit::Exit;
use lockcheck_history::{fault_ops, read_jsonl, Op, OpType, Process};
use lockcheck_run::RunReport;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::{Table, Value};

/// A run directory, read back.
pub struct Realised {
    pub dir: PathBuf,
    pub report: RunReport,
    /// The anomaly kind a reproduction must give.
    pub kind: AnomalyKind,
    /// The run exactly as it happened, faults as explicit events.
    pub candidate: Candidate,
}

/// How long before a holder fault's realised start it is armed: the fault waits
/// for the next grant after `after`, and the grant it hit came at its start.
const ARM_BEFORE: Duration = Duration::from_millis(50);

/// Reads `dir` (a run directory of `lockcheck run`) for anomaly `kind` (or the
/// first kind it flagged that its workload does not allow). A valid run, or one
/// that did not flag `kind`, is a usage error: there is nothing to reproduce.
pub fn realise(
    dir: &Path,
    kind: Option<AnomalyKind>,
    workload_dir: Option<&Path>,
) -> Result<Realised> {
    // Not a run directory is a bad argument; a run directory whose files do
    // not read as a run's is malformed input: neither is lockcheck's bug.
    let unreadable = |name: &str, e: &dyn std::fmt::Display| {
        Exit::usage(format!(
            "{}: cannot read {name} ({e}): expected the directory of a finished `lockcheck run`",
            dir.display()
        ))
    };
    let read =
        |name: &str| std::fs::read_to_string(dir.join(name)).map_err(|e| unreadable(name, &e));
    let report = lockcheck_rundir::read_run(dir).map_err(|e| match e {
        lockcheck_rundir::Error::Io { error, .. } => {
            unreadable(lockcheck_rundir::VERDICT_FILE, &error)
        }
        malformed @ lockcheck_rundir::Error::Malformed { .. } => Exit::malformed(malformed),
    })?;
    let kind =
        pick_kind(&report, kind).map_err(|e| Exit::usage(format!("{}: {e}", dir.display())))?;
    let text = read("workload.toml")?;
    let mut workload: Table = toml::from_str(&text)
        .map_err(|e| Exit::malformed(format!("{}: {e}", dir.join("workload.toml").display())))?;
    let entries = match workload.remove("faults") {
        Some(Value::Array(a)) => a
            .into_iter()
            .map(|v| match v {
                Value::Table(t) => Ok(t),
                _ => Err(anyhow!("workload.toml: faults: expected tables")),
            })
            .collect::<Result<Vec<Table>>>()?,
        _ => Vec::new(),
    };
    workload.remove("schedule");
    let history = read_jsonl(&dir.join("history.jsonl"))
        .with_context(|| format!("{}: history.jsonl", dir.display()))?;
    let mut events = events(&history.ops, &entries)?;
    fit_to_run(&mut events, &workload);
    let base_dir = workload_dir
        .map(Path::to_path_buf)
        .or_else(|| report.workload_dir.clone());
    absolute_paths(&mut workload, base_dir.as_deref())?;
    let name = workload
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or(&report.workload)
        .to_string();
    // A shrunk run shrunk again keeps one suffix.
    let name = name.strip_suffix("-shrunk").unwrap_or(&name);
    workload.insert("name".into(), Value::String(format!("{name}-shrunk")));
    workload.insert("seed".into(), Value::Integer(report.seed as i64));
    ran_where_it_ran(
        &mut workload,
        report.runtime.as_deref(),
        report.image.as_deref(),
    );
    Ok(Realised {
        dir: dir.to_path_buf(),
        report,
        kind,
        candidate: Candidate {
            base: workload,
            events,
        },
    })
}

/// Reruns go where the run's servers ran, which `--runtime` and `--image` may
/// have changed from the workload file's: a docker run shrunk on local
/// processes would be another run. Older verdicts do not say: the file's stays.
fn ran_where_it_ran(workload: &mut Table, runtime: Option<&str>, image: Option<&str>) {
    if let Some(runtime) = runtime {
        workload.insert("runtime".into(), Value::String(runtime.into()));
    }
    if let (Some(image), Some(Value::Table(backend))) = (image, workload.get_mut("backend")) {
        backend.insert("image".into(), Value::String(image.into()));
    }
}

/// The kind to reproduce: the one asked for, if the run flagged it; else the
/// first kind (in the anomaly list's order) the run flagged and its workload does
/// not allow.
pub fn pick_kind(report: &RunReport, asked: Option<AnomalyKind>) -> Result<AnomalyKind> {
    let flagged: Vec<AnomalyKind> = AnomalyKind::ALL
        .iter()
        .copied()
        .filter(|k| report.verdict.anomalies.iter().any(|a| a.kind == *k))
        .collect();
    if let Some(k) = asked {
        return if flagged.contains(&k) {
            Ok(k)
        } else {
            Err(anyhow!(
                "the run did not flag {} (it flagged: {})",
                k.name(),
                names(&flagged)
            ))
        };
    }
    AnomalyKind::ALL
        .iter()
        .copied()
        .find(|k| report.verdict.anomalies.iter().any(|a| a.kind == *k && !a.allowed))
        .ok_or_else(|| {
            anyhow!(
                "the run was valid (anomalies its workload does not allow: none; allowed: {}): there is no break to shrink or replay; --kind picks an allowed one",
                names(&flagged)
            )
        })
}

fn names(kinds: &[AnomalyKind]) -> String {
    if kinds.is_empty() {
        return "none".into();
    }
    kinds
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The faults the history shows starting, in order, each an explicit event.
fn events(ops: &[Op], entries: &[Table]) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    for op in ops {
        if op.process != Process::Nemesis || op.kind != OpType::Info {
            continue;
        }
        let Some(family) = fault_ops::started_by(&op.f) else {
            continue;
        };
        let entry = entry_of(op, entries, family.start)?;
        let mut table = entries[entry].clone();
        for timing in ["after", "interval", "duration"] {
            table.remove(timing);
        }
        let duration = entry_duration(&entries[entry])
            .with_context(|| format!("workload.toml: faults[{entry}].duration"))?;
        let at = Duration::from_nanos(op.time);
        let holder = table.get("target").and_then(Value::as_str) == Some("holder");
        let at = if holder {
            at.saturating_sub(ARM_BEFORE)
        } else {
            at
        };
        name_targets(&mut table, op);
        out.push(Event {
            entry,
            at: round_down(at),
            duration,
            table,
        });
    }
    Ok(out)
}

/// An occurrence the run started near its end was cut short by the end (a
/// repeating fault starts as many as fit and stops them all when the run ends):
/// as an explicit event it lasts what it lasted, since a workload may not plan a
/// fault past its end.
fn fit_to_run(events: &mut Vec<Event>, workload: &Table) {
    let run = workload
        .get("duration")
        .and_then(Value::as_str)
        .and_then(|d| d.parse::<lockcheck_fault::duration::Dur>().ok())
        .map(|d| d.0);
    let Some(run) = run else {
        return;
    };
    events.retain(|e| e.at < run);
    for e in events.iter_mut() {
        e.duration = e.duration.min(run - e.at);
    }
}

/// Which `[[faults]]` entry a start record belongs to: its `fault` field (written
/// since history v1.2), else the one entry whose kind starts with this `f`.
fn entry_of(op: &Op, entries: &[Table], start_f: &str) -> Result<usize> {
    if let Some(i) = op.value.get("fault").and_then(serde_json::Value::as_u64) {
        let i = i as usize;
        return if i < entries.len() {
            Ok(i)
        } else {
            Err(anyhow!(
                "history.jsonl: op {}: fault {i} names no [[faults]] entry of workload.toml ({} entries)",
                op.index,
                entries.len()
            ))
        };
    }
    let of_kind: Vec<usize> = (0..entries.len())
        .filter(|&i| {
            entries[i]
                .get("kind")
                .and_then(Value::as_str)
                .and_then(lockcheck_fault::catalogue::kind)
                .is_some_and(|k| k.ops.start == start_f)
        })
        .collect();
    match of_kind[..] {
        [i] => Ok(i),
        _ => Err(anyhow!(
            "history.jsonl: op {}: a {start_f} record without its `fault` entry, and {} [[faults]] entries start with {start_f}: this run was recorded before lockcheck named them; run it again to shrink it",
            op.index,
            of_kind.len()
        )),
    }
}

fn entry_duration(entry: &Table) -> Result<Duration> {
    let text = entry
        .get("duration")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("expected a duration"))?;
    let lockcheck_fault::duration::Dur(d) = text.parse().map_err(|e: String| anyhow!(e))?;
    Ok(d)
}

/// A target the original picked at random, named as it was picked; a role
/// (`holder`, `primary`) and a set (`majority`, `majority-with-primary`, `all`)
/// stay as they are.
fn name_targets(table: &mut Table, op: &Op) {
    let targets: Vec<&str> = op
        .value
        .get("targets")
        .and_then(serde_json::Value::as_array)
        .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    let [only] = targets[..] else {
        return;
    };
    for (key, chosen) in [
        ("target", "random"),
        ("nodes", "one"),
        ("nodes", "minority"),
    ] {
        if table.get(key).and_then(Value::as_str) == Some(chosen) {
            table.insert(key.into(), Value::String(only.to_string()));
        }
    }
}

/// Times in workloads are whole milliseconds; a tenth of a second is as fine as
/// a schedule on a loaded machine is kept.
fn round_down(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64 / 100 * 100)
}

/// Relative paths in a workload are its folder's: a candidate is written
/// elsewhere, so they become absolute (the adapter program, the ssh config).
fn absolute_paths(workload: &mut Table, dir: Option<&Path>) -> Result<()> {
    // The adapter runs in the workload's folder (or its `dir`), and every relative
    // path it is given, in its arguments or read by itself, is that folder's: the
    // rerun's workload lives elsewhere, so it names the folder.
    if let Some(Value::Table(client)) = workload.get_mut("client") {
        let mut folder = match client.remove("dir") {
            Some(Value::String(d)) => d,
            _ => ".".into(),
        };
        make_absolute("client.command", &mut folder, dir)?;
        client.insert("dir".into(), Value::String(folder));
    }
    let ssh_config = workload
        .get_mut("backend")
        .and_then(Value::as_table_mut)
        .and_then(|b| b.get_mut("ssh_config"));
    if let Some(Value::String(cfg)) = ssh_config {
        make_absolute("backend.ssh_config", cfg, dir)?;
    }
    Ok(())
}

fn make_absolute(key: &str, path: &mut String, dir: Option<&Path>) -> Result<()> {
    if Path::new(path.as_str()).is_absolute() {
        return Ok(());
    }
    let Some(dir) = dir else {
        return Err(Exit::usage(format!(
            "workload.toml: {key} = \"{path}\" is relative to the workload's folder, which this run directory does not record: give it with --workload-dir"
        )));
    };
    *path = dir.join(path.as_str()).display().to_string();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nemesis(index: u64, ms: u64, f: &str, value: serde_json::Value) -> Op {
        Op {
            index,
            time: ms * 1_000_000,
            process: Process::Nemesis,
            kind: OpType::Info,
            f: f.into(),
            value,
            node: None,
            error: None,
        }
    }

    fn entries(text: &str) -> Vec<Table> {
        let t: Table = toml::from_str(text).unwrap();
        t["faults"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_table().unwrap().clone())
            .collect()
    }

    #[test]
    fn each_occurrence_is_an_event_and_the_holder_stays_a_role() {
        let entries = entries(
            "[[faults]]\nkind = \"pause\"\ntarget = \"holder\"\nduration = \"2500ms\"\nafter = \"1s\"\ninterval = \"1s\"\n\
             [[faults]]\nkind = \"kill\"\nnodes = \"one\"\nduration = \"500ms\"\n",
        );
        let ops = vec![
            nemesis(
                3,
                1234,
                "pause",
                json!({"targets": ["client-2"], "fault": 0}),
            ),
            nemesis(9, 2000, "kill", json!({"targets": ["n2"], "fault": 1})),
            nemesis(11, 2500, "start", json!({"targets": ["n2"], "fault": 1})),
            nemesis(
                12,
                3734,
                "resume",
                json!({"targets": ["client-2"], "fault": 0}),
            ),
            nemesis(
                20,
                4790,
                "pause",
                json!({"targets": ["client-0"], "fault": 0}),
            ),
        ];
        let ev = events(&ops, &entries).unwrap();
        assert_eq!(ev.len(), 3);
        assert_eq!((ev[0].entry, ev[0].at), (0, Duration::from_millis(1100)));
        assert_eq!(ev[0].table["target"].as_str(), Some("holder"));
        assert!(ev[0].table.get("interval").is_none());
        assert_eq!(ev[0].duration, Duration::from_millis(2500));
        assert_eq!(ev[1].table["nodes"].as_str(), Some("n2"));
        assert_eq!(ev[1].at, Duration::from_millis(2000));
        assert_eq!(ev[2].at, Duration::from_millis(4700));
    }

    #[test]
    fn an_occurrence_the_end_cut_short_lasts_what_it_lasted() {
        let entries = entries("[[faults]]\nkind = \"pause\"\ntarget = \"holder\"\nduration = \"2500ms\"\ninterval = \"1s\"\n");
        let ops = vec![
            nemesis(
                1,
                1050,
                "pause",
                json!({"targets": ["client-0"], "fault": 0}),
            ),
            nemesis(
                2,
                4850,
                "pause",
                json!({"targets": ["client-1"], "fault": 0}),
            ),
        ];
        let mut ev = events(&ops, &entries).unwrap();
        let w: Table = toml::from_str("duration = \"6s\"").unwrap();
        fit_to_run(&mut ev, &w);
        assert_eq!(ev[0].duration, Duration::from_millis(2500));
        assert_eq!(ev[1].at, Duration::from_millis(4800));
        assert_eq!(ev[1].duration, Duration::from_millis(1200));
    }

    #[test]
    fn without_the_entry_index_only_an_unambiguous_kind_is_read() {
        let one = entries("[[faults]]\nkind = \"pause\"\ntarget = \"random\"\nduration = \"1s\"\n");
        let ev = events(
            &[nemesis(1, 1000, "pause", json!({"targets": ["client-1"]}))],
            &one,
        )
        .unwrap();
        assert_eq!(ev[0].table["target"].as_str(), Some("client-1"));
        let two = entries(
            "[[faults]]\nkind = \"pause\"\ntarget = \"holder\"\nduration = \"1s\"\n[[faults]]\nkind = \"pause\"\ntarget = \"random\"\nduration = \"1s\"\n",
        );
        let e = events(
            &[nemesis(1, 1000, "pause", json!({"targets": ["client-1"]}))],
            &two,
        );
        assert!(format!("{:#}", e.unwrap_err()).contains("2 [[faults]] entries start with pause"));
    }

    #[test]
    fn reruns_go_where_the_run_ran_not_where_its_file_says() {
        let file = "runtime = \"local\"\n[backend]\nkind = \"redis\"\n";
        let mut w: Table = toml::from_str(file).unwrap();
        ran_where_it_ran(&mut w, Some("docker"), Some("redis:7"));
        assert_eq!(w["runtime"].as_str(), Some("docker"));
        assert_eq!(w["backend"]["image"].as_str(), Some("redis:7"));
        // A verdict from before the runtime was recorded leaves the file's.
        let mut old: Table = toml::from_str(file).unwrap();
        ran_where_it_ran(&mut old, None, None);
        assert_eq!(old, toml::from_str::<Table>(file).unwrap());
    }

    #[test]
    fn an_adapter_runs_in_its_workloads_folder() {
        let mut w: Table =
            toml::from_str("[client]\ncommand = [\"python3\", \"../x.py\"]\n").unwrap();
        absolute_paths(&mut w, Some(Path::new("/w/clients"))).unwrap();
        assert_eq!(w["client"]["dir"].as_str(), Some("/w/clients/."));
        let mut w: Table =
            toml::from_str("[client]\ncommand = [\"./x\"]\ndir = \"lib\"\n").unwrap();
        absolute_paths(&mut w, Some(Path::new("/w"))).unwrap();
        assert_eq!(w["client"]["dir"].as_str(), Some("/w/lib"));
    }

    #[test]
    fn an_adapter_needs_the_workloads_folder() {
        // Its arguments and whatever it opens are relative to the folder it runs in.
        let mut w: Table = toml::from_str("[client]\ncommand = [\"python3\", \"x.py\"]\n").unwrap();
        assert!(absolute_paths(&mut w.clone(), None).is_err());
        absolute_paths(&mut w, Some(Path::new("/w"))).unwrap();
        assert_eq!(w["client"]["command"][1].as_str(), Some("x.py"));
        assert_eq!(w["client"]["dir"].as_str(), Some("/w/."));
    }
}
