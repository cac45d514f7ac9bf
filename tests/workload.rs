//! Workload files: the shipped ones all read, and a bad one is refused with the
//! file, the line and the key named, before anything starts.

use lockcheck::run::workload::Workload;
use std::path::Path;

#[test]
fn every_shipped_workload_reads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads");
    let mut names = Vec::new();
    // The incident catalogue's entries too (docs/incidents.md).
    let files = std::fs::read_dir(&dir)
        .unwrap()
        .chain(std::fs::read_dir(dir.join("incidents")).unwrap());
    for e in files.flatten() {
        let path = e.path();
        if path.extension().is_some_and(|x| x == "toml") {
            let w = Workload::load(&path).unwrap_or_else(|e| panic!("{e:#}"));
            // A catalogue entry names the failure it replays and the rule against it.
            let entry = path.parent().is_some_and(|p| p.ends_with("incidents"));
            assert_eq!(
                w.incident.is_some(),
                entry,
                "{}: [incident]",
                path.display()
            );
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
        "leader-keeps-acting",
        "leader-keeps-acting-exit-on-loss",
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

/// A preset on a backend whose users do not run it: `lockcheck run` refuses it
/// before anything starts, naming the file, the line, the key, the preset, and the
/// presets that fit.
#[test]
fn a_preset_for_another_backend_is_refused_naming_the_file_the_line_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("misfit.toml");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/nats-pause-unfenced.toml"),
    )
    .unwrap()
    .replace("lease = \"2s\"", "lease = \"pglock\"");
    std::fs::write(&path, &text).unwrap();
    let line = text.lines().position(|l| l.starts_with("lease")).unwrap() + 1;
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
            "{}:{line}: backend.lease: the preset pglock is what postgres-lease users run",
            path.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("not nats"), "{stderr}");
    assert!(
        stderr.contains("nats-kv-leader-elect"),
        "the presets that fit are named: {stderr}"
    );
    assert!(!dir.path().join("results").exists(), "nothing started");
}

/// The presets of PostgreSQL, MariaDB and NATS users read on their own backends,
/// with the numbers their sources give.
#[test]
fn the_database_and_nats_presets_read_on_their_backends() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    for (workload, preset, ttl, renew) in [
        ("postgres-lease-pause-unfenced.toml", "pglock", 20, Some(5)),
        (
            "postgres-advisory-pause.toml",
            "rds-postgres-keepalive",
            360,
            None,
        ),
        (
            "postgres-advisory-pause.toml",
            "postgres-keepalive",
            7875,
            None,
        ),
        ("mariadb-pause.toml", "mariadb-wait-timeout", 28800, None),
        ("mariadb-pause.toml", "skysql-wait-timeout", 600, None),
        ("mariadb-pause.toml", "go-mysql-lock", 28800, Some(1)),
        (
            "nats-pause-unfenced.toml",
            "nats-kv-leader-elect",
            300,
            Some(225),
        ),
    ] {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("workloads")
                .join(workload),
        )
        .unwrap();
        let lease = text
            .lines()
            .find(|l| l.starts_with("lease ="))
            .expect("a lease line");
        let path = dir.path().join(format!("{preset}.toml"));
        std::fs::write(&path, text.replace(lease, &format!("lease = \"{preset}\""))).unwrap();
        let w = Workload::load(&path).unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(w.backend.lease.ttl, Duration::from_secs(ttl), "{preset}");
        assert_eq!(
            w.backend.lease.renew_every,
            renew.map(Duration::from_secs),
            "{preset}"
        );
        assert_eq!(w.backend.lease.preset.map(|p| p.name), Some(preset));
    }
}
