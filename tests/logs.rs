//! lockcheck's warnings reach the user: its log events go to standard error (the
//! level from `RUST_LOG`, else `-v`, else warnings), never to standard output,
//! where `--json` prints and the worker speaks its protocol to the controller.

mod run_support;

use run_support::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A redis-server behind a wrapper that does not pass SIGTERM on, as a wrapper
/// script that forgets to: at the end of the run its node outlives the stop grace
/// and is killed. The server dies with the wrapper (`--pdeathsig`). The run keeps
/// its servers' data (`--keep-data`): one that drops it kills them at once, with
/// no grace to outlive.
fn wrapper_ignoring_sigterm(dir: &Path) -> PathBuf {
    let redis = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("redis-server installed");
    let path = dir.join("redis-server-ignoring-sigterm");
    std::fs::write(
        &path,
        format!("#!/bin/sh\ntrap '' TERM\nsetpriv --pdeathsig KILL {redis} \"$@\"\n"),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn run_with_wrapper(env: &[(&str, &str)]) -> Finished {
    let dir = tempfile::tempdir().unwrap();
    let w = no_fault_workload(dir.path(), "redis", true);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lockcheck"));
    cmd.env(
        "LOCKCHECK_REDIS_SERVER",
        wrapper_ignoring_sigterm(dir.path()),
    )
    .env_remove("RUST_LOG")
    .envs(env.iter().copied());
    let r = start_json_with(cmd, &w, &["--keep-data"]).finish();
    r.assert_nothing_left();
    r
}

const IGNORED: &str = "ignored SIGTERM for 5s: killing it";

#[test]
fn a_server_that_ignores_sigterm_is_a_warning_on_stderr_and_json_stays_clean() {
    // `finish` reads standard output as one JSON object: no log line is in it.
    let r = run_with_wrapper(&[]);
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    let line = r
        .stderr
        .lines()
        .find(|l| l.contains(IGNORED))
        .unwrap_or_else(|| panic!("no warning on stderr:\n{}", r.stderr));
    assert!(line.contains("WARN"), "{line}");
    // The workers' log events go to their own stderr (their log files), and
    // their standard output stayed the protocol: nothing odd was read from it.
    assert!(
        !r.stderr.contains("worker said something odd"),
        "{}",
        r.stderr
    );

    // RUST_LOG chooses the level: errors only, and the warning is not shown.
    let quiet = run_with_wrapper(&[("RUST_LOG", "error")]);
    assert_eq!(quiet.code, 0, "{}", quiet.stderr);
    assert!(!quiet.stderr.contains(IGNORED), "{}", quiet.stderr);
}

#[test]
fn verbose_is_a_flag_of_every_subcommand_and_keeps_stdout_to_the_output() {
    for args in [
        &["-v", "doctor", "--json"][..],
        &["doctor", "--json", "-vv"],
    ] {
        let out = lockcheck()
            .args(args)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "lockcheck {args:?}: not one JSON object ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        assert!(doc["items"].is_array(), "{doc}");
    }
}
