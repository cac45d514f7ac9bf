//! The exit codes each subcommand documents (`lockcheck::cli::exit_codes`) are
//! those docs/exit-codes.md and each `--help` show, and, where it is cheap to make
//! the case happen, those the binary returns: `report` exits 0 on an INVALID run,
//! `analyze` by the stored run and its `--allow`, `doctor` exits 1 exactly when a
//! line is missing, `check` follows the fixtures' known verdicts.

mod docs_support;

use docs_support::{generated_page, help, listed_subcommands, lockcheck, root};
use lockcheck::cli::exit_codes::{self, Subcommand};
use lockcheck::exit;
use std::path::Path;
use std::process::Output;

#[test]
fn the_exit_codes_page_is_the_one_the_table_makes() {
    generated_page(
        "docs/exit-codes.md",
        &exit_codes::markdown(),
        "exit_codes_doc",
    );
}

#[test]
fn every_subcommand_has_its_exit_codes_in_the_table_and_in_its_help() {
    let listed = listed_subcommands();
    // A nested subcommand (`audit merge`) is its parent's, not `--help`'s list.
    let tabled: Vec<&str> = exit_codes::SUBCOMMANDS
        .iter()
        .map(|s| s.name)
        .filter(|n| !n.contains(' '))
        .collect();
    assert_eq!(
        listed, tabled,
        "`lockcheck --help` and src/cli/exit_codes.rs's SUBCOMMANDS differ"
    );
    assert!(help(&["audit", "--help"]).contains("merge"));
    for s in exit_codes::SUBCOMMANDS {
        let mut words: Vec<&str> = s.name.split(' ').collect();
        words.push("--help");
        let text = help(&words);
        assert!(
            text.contains(&s.help()),
            "lockcheck {} --help does not end with its exit codes:\n{text}",
            s.name
        );
    }
}

/// `out` exited `want`, a code `sub`'s table lists.
fn assert_code(sub: &Subcommand, out: &Output, want: u8) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(i32::from(want)),
        "lockcheck {}: {stderr}",
        sub.name
    );
    assert!(
        sub.codes.iter().any(|c| c.code == want),
        "lockcheck {} exited {want}, which its table does not list",
        sub.name
    );
}

fn fixture(rel: &str) -> std::path::PathBuf {
    root().join("fixtures").join(rel)
}

#[test]
fn check_exits_as_the_fixtures_known_verdicts_say() {
    let expected = docs_support::read("fixtures/expected.tsv");
    let mut seen = std::collections::BTreeSet::new();
    for row in expected.lines().skip(1) {
        let cols: Vec<&str> = row.split('\t').collect();
        let want = match cols[2] {
            "valid" => exit::VALID,
            "invalid" => exit::ANOMALIES,
            "unknown" => exit::UNKNOWN,
            "malformed" => exit::MALFORMED,
            other => panic!("fixtures/expected.tsv: verdict {other:?}"),
        };
        // One history of each verdict is enough to hold the table to it.
        if !seen.insert(want) {
            continue;
        }
        let out = lockcheck()
            .args(["check", "--model", cols[1]])
            .arg(fixture(cols[0]))
            .output()
            .unwrap();
        assert_code(&exit_codes::CHECK, &out, want);
    }
    assert!(seen.len() >= 3, "fixtures/expected.tsv: {seen:?}");
    let bad_limit = lockcheck()
        .args(["check", "--time-limit", "0"])
        .arg(fixture("no-token.jsonl"))
        .output()
        .unwrap();
    assert_code(&exit_codes::CHECK, &bad_limit, exit::USAGE);
}

/// A copy of the fixture run directory `name` (the commands below write into it).
fn run_dir(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let from = fixture("report").join(name);
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

fn lockcheck_on(sub: &str, dir: &Path, flags: &[&str]) -> Output {
    lockcheck().arg(sub).arg(dir).args(flags).output().unwrap()
}

#[test]
fn report_exits_0_on_an_invalid_run_and_4_without_a_history() {
    let run = run_dir("unfenced-pause");
    let junit = run.path().join("junit.xml");
    let out = lockcheck_on("report", run.path(), &["--junit", junit.to_str().unwrap()]);
    assert_code(&exit_codes::REPORT, &out, exit::VALID);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("INVALID: wrote "));
    assert!(std::fs::read_to_string(&junit)
        .unwrap()
        .contains("<failure"));

    let empty = tempfile::tempdir().unwrap();
    let out = lockcheck_on("report", empty.path(), &[]);
    assert_code(&exit_codes::REPORT, &out, exit::MALFORMED);
}

/// (`shrink` and `replay` refusing a valid run with 2 is tests/shrink.rs's, on a
/// real run: the fixture run directories predate the fields they read.)
#[test]
fn analyze_exits_by_the_stored_runs_verdict_and_its_allow() {
    let run = run_dir("redis-pause-unfenced-run");
    let out = lockcheck_on("analyze", run.path(), &[]);
    assert_code(&exit_codes::ANALYZE, &out, exit::ANOMALIES);
    // Every kind allowed: the stored run is now a valid one.
    let mut allow_all = Vec::new();
    for kind in lockcheck::check::AnomalyKind::ALL {
        allow_all.extend(["--allow", kind.name()]);
    }
    let out = lockcheck_on("analyze", run.path(), &allow_all);
    assert_code(&exit_codes::ANALYZE, &out, exit::VALID);
}

#[test]
fn doctor_exits_1_exactly_when_a_line_is_missing() {
    let out = lockcheck().args(["doctor", "--json"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let missing = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["ok"] == false);
    let want = if missing {
        exit::ANOMALIES
    } else {
        exit::VALID
    };
    assert_code(&exit_codes::DOCTOR, &out, want);
}

#[test]
fn recover_and_audit_refuse_what_they_cannot_use_with_2() {
    let empty = tempfile::tempdir().unwrap();
    let out = lockcheck_on("recover", empty.path(), &[]);
    assert_code(&exit_codes::RECOVER, &out, exit::USAGE);
    // Refused before anything starts: no fenced twin could reach its floor.
    let out = lockcheck()
        .args([
            "audit",
            "--backend",
            "redis",
            "--provoked",
            "5",
            "--twin-runs",
            "2",
        ])
        .output()
        .unwrap();
    assert_code(&exit_codes::AUDIT, &out, exit::USAGE);
}

/// `shrink` and `replay` on what is not a run directory: a usage error (2);
/// on a run directory whose verdict.json another version wrote: malformed (4).
/// Neither is lockcheck's bug (6).
#[test]
fn shrink_and_replay_refuse_a_directory_that_is_no_run_with_2_and_a_foreign_run_with_4() {
    let empty = tempfile::tempdir().unwrap();
    let foreign = run_dir("unfenced-pause");
    std::fs::write(foreign.path().join("verdict.json"), "{\"verdict\": 7}").unwrap();
    for (sub, table) in [
        ("shrink", &exit_codes::SHRINK),
        ("replay", &exit_codes::REPLAY),
    ] {
        let out = lockcheck_on(sub, empty.path(), &[]);
        assert_code(table, &out, exit::USAGE);
        let out = lockcheck_on(sub, foreign.path(), &[]);
        assert_code(table, &out, exit::MALFORMED);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("verdict.json"), "{stderr}");
    }
}
