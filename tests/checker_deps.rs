//! The checker is a library a user's test takes alone: `lockcheck-check` and the
//! `lockcheck-history` under it build with no async runtime, no server client and
//! no C compiler, and take directly only the few crates they were written with;
//! so do `lockcheck-rundir` beside it, the run directory's records, and
//! `lockcheck-report` above them, which makes the report again from a run
//! directory alone, below the runner.
//! The trees are read with `cargo tree --offline` (Cargo.lock and the crates
//! already fetched for this build), so the test needs no network.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// What the runner needs and the checker must not: each with why it is barred.
const BARRED: &[(&str, &str)] = &[
    ("tokio", "an async runtime"),
    ("async-trait", "async code"),
    ("futures-util", "async code"),
    ("etcd-client", "a server client (and protoc at build time)"),
    ("tonic", "a gRPC client"),
    ("redis", "a server client"),
    ("bollard", "a docker client"),
    ("tokio-postgres", "a server client"),
    ("mysql_async", "a server client"),
    ("async-nats", "a server client"),
    ("zookeeper-client", "a server client"),
    ("hyper", "an HTTP client"),
    ("nix", "process control, the runner's"),
    ("cc", "a C build"),
    ("cmake", "a C build"),
    ("pkg-config", "a C build"),
];

/// The crates below the runner, held to the same rules.
const CRATES: [&str; 4] = [
    "lockcheck-check",
    "lockcheck-history",
    "lockcheck-rundir",
    "lockcheck-report",
];

/// The crates the history, the checker and the run directory take directly (docs/checker.md,
/// "The checker as a library"): a new one is a decision, made here.
const DIRECT: &[&str] = &[
    "lockcheck-history",
    "lockcheck-check",
    "serde",
    "serde_json",
    "rustc-hash",
    "thiserror",
    "rand",
    "rand_chacha",
    "flate2",
    "ruzstd",
];

/// What the report takes besides ([`DIRECT`]): the run directory's records, the
/// workload file's format, and errors with their context.
const REPORT_DIRECT: &[&str] = &["lockcheck-rundir", "anyhow", "toml"];

/// The names of the packages in `package`'s tree of normal and build
/// dependencies (dev-dependencies are its own tests', not a user's), down to
/// `depth` (None: all of it), the package itself left out.
fn tree(package: &str, depth: Option<u32>) -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args([
        "tree",
        "--offline",
        "--prefix",
        "none",
        "--edges",
        "normal,build",
    ])
    .args(["--manifest-path", "Cargo.toml", "--package", package])
    .current_dir(root);
    if let Some(d) = depth {
        cmd.args(["--depth", &d.to_string()]);
    }
    let out = cmd.output().expect("running cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let names: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != package)
        .map(str::to_string)
        .collect();
    // The tree was read: the checker's own first dependencies are in it.
    assert!(
        names.contains("serde_json"),
        "cargo tree -p {package} listed no serde_json: {text}"
    );
    names
}

#[test]
fn the_checker_builds_with_no_async_runtime_no_server_client_and_no_c_compiler() {
    for package in CRATES {
        let names = tree(package, None);
        let barred: Vec<String> = BARRED
            .iter()
            .filter(|(name, _)| names.contains(*name))
            .map(|(name, why)| format!("{name} ({why})"))
            .collect();
        assert!(
            barred.is_empty(),
            "{package}'s dependencies include {}; all of them: {names:?}",
            barred.join(", ")
        );
    }
    assert!(tree("lockcheck-check", Some(1)).contains("lockcheck-history"));
}

#[test]
fn the_history_and_the_checker_take_only_the_crates_they_were_written_with() {
    for package in CRATES {
        let allowed: BTreeSet<&str> = match package {
            "lockcheck-report" => DIRECT.iter().chain(REPORT_DIRECT).copied().collect(),
            _ => DIRECT.iter().copied().collect(),
        };
        let direct = tree(package, Some(1));
        let other: Vec<&String> = direct
            .iter()
            .filter(|n| !allowed.contains(n.as_str()))
            .collect();
        assert!(
            other.is_empty(),
            "{package} takes {other:?} besides {allowed:?}: add it to DIRECT (or \
             REPORT_DIRECT) in tests/checker_deps.rs only if it brings no runtime, \
             client or C build"
        );
    }
    // And the runner does take them: the test reads a tree that has them.
    assert!(tree("lockcheck", Some(1)).contains("tokio"));
}
