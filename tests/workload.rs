//! Workload files: the shipped ones all read, and a bad one is refused with the
//! file, the line and the key named, before anything starts.

use lockcheck::run::workload::Workload;
use std::path::Path;

#[test]
fn every_shipped_workload_reads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads");
    let mut names = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let path = e.path();
        if path.extension().is_some_and(|x| x == "toml") {
            let w = Workload::load(&path).unwrap_or_else(|e| panic!("{e:#}"));
            // Short enough for tests and the demo.
            assert!(w.duration.as_secs() <= 15, "{}", path.display());
            names.push(w.name);
        }
    }
    names.sort();
    for required in [
        "demo",
        "etcd-pause-fenced",
        "etcd-pause-unfenced",
        "redis-pause-fenced",
        "redis-pause-unfenced",
        "redlock-pause-unfenced",
    ] {
        assert!(
            names.iter().any(|n| n == required),
            "{required} missing: {names:?}"
        );
    }
}

#[test]
fn an_unknown_key_is_refused_naming_the_file_the_line_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.toml");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/redis-pause-unfenced.toml"),
    )
    .unwrap()
    .replace("count = 3", "count = 3\nthreads = 4");
    std::fs::write(&path, &text).unwrap();
    let line = text.lines().position(|l| l.starts_with("threads")).unwrap() + 1;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .arg("run")
        .arg(&path)
        .arg("--results")
        .arg(dir.path().join("results"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:{line}: clients.threads: unknown field `threads`",
            path.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("`count`"),
        "the expected keys are listed: {stderr}"
    );
    assert!(!dir.path().join("results").exists(), "nothing started");
}
