//! The CI examples are jobs the binary runs: every `lockcheck ...` line of
//! docs/ci.md's code, of docs/runtimes.md's (its CI job against a staging
//! cluster) and of docs/shards.md's (a sharded audit's steps) names a subcommand,
//! flags and values the binary takes, and shipped workloads that exist;
//! docs/ci.md's job, run step then report step, runs as written in a directory
//! of its own, the report step writing its JUnit XML.

mod docs_support;

use docs_support::{command_lines, lockcheck, read, root, run_in, CommandLine};

const PAGES: [&str; 3] = ["docs/ci.md", "docs/runtimes.md", "docs/shards.md"];

fn args_text(c: &CommandLine) -> String {
    c.args.join(" ")
}

#[test]
fn every_lockcheck_line_of_the_ci_pages_is_one_the_binary_takes() {
    let mut checked = 0;
    for page in PAGES {
        for c in command_lines(&read(page)) {
            // With `--help` after the line's own words, clap reads every flag and
            // value first (an unknown flag or a bad value is refused, exit 2) and
            // then prints the help instead of running anything.
            let out = lockcheck().args(&c.args).arg("--help").output().unwrap();
            assert!(
                out.status.success(),
                "{page}:{}: lockcheck {}: {}",
                c.line,
                args_text(&c),
                String::from_utf8_lossy(&out.stderr)
            );
            for shipped in c.args.iter().filter(|a| a.starts_with("workloads/")) {
                assert!(
                    root().join(shipped).exists(),
                    "{page}:{}: no {shipped} in the repository",
                    c.line
                );
            }
            checked += 1;
        }
    }
    let ci = command_lines(&read("docs/ci.md"));
    let subs: Vec<&str> = ci.iter().map(|c| c.subcommand()).collect();
    assert!(
        subs.contains(&"run") && subs.contains(&"report"),
        "docs/ci.md's job runs a workload and reports it: {subs:?}"
    );
    assert!(
        checked > ci.len(),
        "docs/runtimes.md shows no lockcheck line"
    );
}

/// The value of `flag` in `c`, if it has one.
fn value_of<'a>(c: &'a CommandLine, flag: &str) -> Option<&'a str> {
    let at = c.args.iter().position(|a| a == flag)?;
    c.args.get(at + 1).map(String::as_str)
}

#[test]
fn the_ci_job_runs_as_written_and_its_report_step_writes_junit() {
    let job = command_lines(&read("docs/ci.md"));
    let dir = tempfile::tempdir().unwrap();
    // The job runs at the repository's root: its shipped workloads are there.
    std::os::unix::fs::symlink(root().join("workloads"), dir.path().join("workloads")).unwrap();
    let mut reported = false;
    for c in &job {
        match c.subcommand() {
            "run" => {
                let out = run_in(dir.path(), &c.args);
                let stderr = String::from_utf8_lossy(&out.stderr);
                let code = out.status.code().unwrap_or(-1);
                // The job's verdict is the run's: 0, 1 or 3; never a refusal of the
                // line itself, this machine's lack or a bug.
                assert!(
                    [0, 1, 3].contains(&code),
                    "docs/ci.md:{}: lockcheck {} exited {code}: {stderr}",
                    c.line,
                    args_text(c)
                );
                let results = value_of(c, "--results").unwrap_or("results");
                assert!(
                    dir.path().join(results).join("latest").exists(),
                    "docs/ci.md:{}: no {results}/latest after the run",
                    c.line
                );
            }
            "report" => {
                let out = run_in(dir.path(), &c.args);
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "docs/ci.md:{}: lockcheck {}: {}",
                    c.line,
                    args_text(c),
                    String::from_utf8_lossy(&out.stderr)
                );
                if let Some(junit) = value_of(c, "--junit") {
                    let xml = std::fs::read_to_string(dir.path().join(junit))
                        .unwrap_or_else(|e| panic!("docs/ci.md:{}: {junit}: {e}", c.line));
                    assert!(xml.contains("<testsuite"), "{xml}");
                }
                reported = true;
            }
            _ => {}
        }
    }
    assert!(reported, "docs/ci.md's job has no report step");
}
