//! A sharded audit end to end against real Redis: two shards' first phase, the
//! merge that asks the fenced twins, the second phase, and the last merge, which
//! adds up to the runs and seeds one machine would have made; the merge's
//! refusals on recorded parts (the same part twice, another audit's flags, a
//! truncated file, a shard missing, a merge written over); and an audit killed
//! with -9 midway, resumed from its directory.

mod run_support;
use run_support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

/// The holder-pause recipe alone, short: a break at every unfenced run, a
/// floor of 2 provoked runs for its fenced twin.
const SHORT: [&str; 10] = [
    "--backend",
    "redis",
    "--scenarios",
    "holder-pause",
    "--runs",
    "2",
    "--provoked",
    "2",
    "--jobs",
    "2",
];

fn lockcheck_out(args: &[&str]) -> Output {
    lockcheck().args(args).output().unwrap()
}

fn card_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Runs `lockcheck audit SHORT --shard I/2 [--asked FILE]` into `results`.
fn part(results: &Path, index: u32, asked: Option<&Path>) -> Value {
    let shard = format!("{index}/2");
    let results = results.display().to_string();
    let mut args: Vec<&str> = vec!["audit"];
    args.extend(SHORT);
    args.extend(["--shard", &shard, "--results", &results, "--json"]);
    let asked = asked.map(|a| a.display().to_string());
    if let Some(a) = &asked {
        args.extend(["--asked", a]);
    }
    let out = lockcheck_out(&args);
    let card = card_of(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a part that ran its share exits 0: {}\n{card:#}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(card["verdict"], "partial", "{card:#}");
    assert_eq!(card["shards"]["shard"], index);
    card
}

fn merge(out: &Path, parts: &[&Path]) -> Output {
    let mut args: Vec<String> = vec!["audit".into(), "merge".into(), "--json".into()];
    args.extend(["--out".into(), out.display().to_string()]);
    args.extend(parts.iter().map(|p| p.display().to_string()));
    lockcheck().args(&args).output().unwrap()
}

fn scenario<'a>(card: &'a Value, name: &str) -> &'a Value {
    card["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["scenario"] == name)
        .unwrap_or_else(|| panic!("no scenario {name} in {card:#}"))
}

/// (run, seed) of each of a scenario's runs.
fn runs_of(card: &Value, name: &str) -> Vec<(u64, u64)> {
    scenario(card, name)["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["run"].as_u64().unwrap(), r["seed"].as_u64().unwrap()))
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn two_shards_in_two_phases_merge_into_the_runs_one_machine_makes() {
    let tmp = tempfile::tempdir().unwrap();
    let (first, second) = (tmp.path().join("first"), tmp.path().join("second"));
    let one = part(&first, 1, None);
    let two = part(&first, 2, None);
    // The first phase asks only "can it break?": shard 1 makes run 1, shard 2
    // run 2, each with the seed the whole audit gives it.
    assert_eq!(runs_of(&one, "holder-pause-unfenced"), [(1, 1)]);
    assert_eq!(runs_of(&two, "holder-pause-unfenced"), [(2, 2)]);
    assert_eq!(
        scenario(&one, "holder-pause-fenced")["stopped"],
        "other-phase"
    );
    let dir = |card: &Value| PathBuf::from(card["dir"].as_str().unwrap());
    let (one_dir, two_dir) = (dir(&one), dir(&two));

    // Merged, the first phase broke the lock unfenced: its twins are asked.
    let asked = tmp.path().join("asked");
    let out = merge(&asked, &[&first]);
    let merged = card_of(&out);
    assert_eq!(out.status.code(), Some(3), "{}\n{merged:#}", stderr(&out));
    let pending = merged["shards"]["twins_pending"].as_array().unwrap();
    assert!(
        pending.contains(&Value::from("holder-pause-fenced")),
        "{merged:#}"
    );
    assert!(
        merged["missing"].to_string().contains("second phase"),
        "{merged:#}"
    );
    // A counterexample's run directory comes along into the merge.
    let counterexample = scenario(&merged, "holder-pause-unfenced")["counterexample"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        Path::new(&counterexample).starts_with(asked.canonicalize().unwrap())
            && Path::new(&counterexample).join("verdict.json").is_file(),
        "{counterexample}"
    );

    // The second phase: each shard its share of the twins' runs.
    let asked_file = asked.join("audit.json");
    let t1 = part(&second, 1, Some(&asked_file));
    let t2 = part(&second, 2, Some(&asked_file));
    assert_eq!(t1["shards"]["phase"], "twins");
    assert_eq!(scenario(&t2, "holder-pause-unfenced")["ran"], 0);

    let last = tmp.path().join("last");
    let out = merge(&last, &[&one_dir, &two_dir, &second]);
    let card = card_of(&out);
    // A --scenarios subset is never complete: exit 3, as unsharded.
    assert_eq!(out.status.code(), Some(3), "{}\n{card:#}", stderr(&out));
    assert_eq!(card["shards"]["twins_pending"], Value::Array(vec![]));
    assert_eq!(card["shards"]["parts"].as_array().unwrap().len(), 4);
    assert_eq!(runs_of(&card, "holder-pause-unfenced"), [(1, 1), (2, 2)]);
    let fenced = scenario(&card, "holder-pause-fenced");
    assert_eq!(fenced["flagged"], 0, "{fenced:#}");
    assert!(fenced["provoked"].as_u64().unwrap() >= 2, "{fenced:#}");
    assert_eq!(fenced["stopped"], "floor", "{fenced:#}");
    // Each run number once, with its own seed, across the shards.
    let twin_runs = runs_of(&card, "holder-pause-fenced");
    assert!(twin_runs.iter().all(|(r, s)| r == s), "{twin_runs:?}");
    let mut numbers: Vec<u64> = twin_runs.iter().map(|(r, _)| *r).collect();
    numbers.dedup();
    assert_eq!(numbers.len(), twin_runs.len(), "{twin_runs:?}");

    refusals(tmp.path(), &one_dir, &two_dir);
}

/// What `audit merge` refuses, on the recorded parts of the first phase.
fn refusals(tmp: &Path, one: &Path, two: &Path) {
    let out_dir = |name: &str| tmp.join(name);
    // The same part twice.
    let out = merge(&out_dir("twice"), &[one, one]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("given twice"), "{}", stderr(&out));
    // A shard missing: merged, not complete, named.
    let out = merge(&out_dir("half"), &[one]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        card_of(&out)["missing"]
            .to_string()
            .contains("shards [2] of 2"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Written over: refused, and what is there is kept.
    let out = merge(&out_dir("half"), &[one, two]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(out_dir("half").join("audit.json").is_file());
    // A part of another audit (other flags): refused by field.
    let other = tmp.join("other");
    copy_part(two, &other, |v| v["runs_per_scenario"] = 3.into());
    let out = merge(&out_dir("other-flags"), &[one, &other]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("field runs_per_scenario"),
        "{}",
        stderr(&out)
    );
    // Cut short in the middle: refused, the file named.
    let cut = tmp.join("cut");
    std::fs::create_dir_all(&cut).unwrap();
    let text = std::fs::read_to_string(two.join("audit.json")).unwrap();
    std::fs::write(cut.join("audit.json"), &text[..text.len() / 3]).unwrap();
    let out = merge(&out_dir("cut-out"), &[one, &cut]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&cut.join("audit.json").display().to_string()),
        "{}",
        stderr(&out)
    );
    // A shard outside its count never starts.
    let out = lockcheck_out(&["audit", "--backend", "redis", "--shard", "3/2"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("shard 3 of 2"), "{}", stderr(&out));
}

/// `from`'s audit.json, changed by `edit`, as the part in `to`.
fn copy_part(from: &Path, to: &Path, edit: impl Fn(&mut Value)) {
    std::fs::create_dir_all(to).unwrap();
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(from.join("audit.json")).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(to.join("audit.json"), v.to_string()).unwrap();
}

#[test]
fn an_audit_killed_with_9_midway_resumes_from_its_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().display().to_string();
    let mut args: Vec<&str> = vec!["audit"];
    args.extend(SHORT);
    args.extend(["--results", &results]);
    let mut child = lockcheck()
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once its scorecard holds a run: what it wrote after that run is
    // what a machine that died would leave.
    let card_path = || {
        std::fs::read_dir(tmp.path())
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("audit.json"))
            .find(|p| p.is_file())
    };
    let ran = |p: &Path| -> u64 {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .map_or(0, |v| {
                v["scenarios"].as_array().map_or(0, |a| {
                    a.iter().map(|s| s["ran"].as_u64().unwrap_or(0)).sum()
                })
            })
    };
    let written = wait_for(
        "the audit's scorecard after its first run",
        std::time::Duration::from_secs(180),
        || card_path().filter(|p| ran(p) >= 1),
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let before: Value = serde_json::from_str(&std::fs::read_to_string(&written).unwrap()).unwrap();
    let dir = written.parent().unwrap().to_path_buf();

    let out = lockcheck_out(&["audit", "--resume", &dir.display().to_string(), "--json"]);
    let card = card_of(&out);
    // A subset: exit 3, as the audit would have given; ended, not interrupted.
    assert_eq!(out.status.code(), Some(3), "{}\n{card:#}", stderr(&out));
    assert_eq!(card["interrupted"], Value::Null, "{card:#}");
    assert_eq!(
        card["dir"],
        dir.canonicalize().unwrap().display().to_string()
    );
    // The runs made before the kill count, unmade again; numbers stay dense.
    for s in before["scenarios"].as_array().unwrap() {
        let name = s["scenario"].as_str().unwrap();
        let now = runs_of(&card, name);
        for r in s["runs"].as_array().unwrap() {
            let run = (r["run"].as_u64().unwrap(), r["seed"].as_u64().unwrap());
            assert!(now.contains(&run), "{name}: {run:?} lost: {now:?}");
        }
        let numbers: Vec<u64> = now.iter().map(|(r, _)| *r).collect();
        let dense: Vec<u64> = (1..=numbers.len() as u64).collect();
        assert_eq!(numbers, dense, "{name}");
    }
    assert_eq!(scenario(&card, "holder-pause-unfenced")["stopped"], "broke");
    assert_eq!(scenario(&card, "holder-pause-fenced")["stopped"], "floor");
    // An audit that ended has nothing to resume.
    let out = lockcheck_out(&["audit", "--resume", &dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nothing to resume"),
        "{}",
        stderr(&out)
    );
}
