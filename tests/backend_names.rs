//! A backend is its own files plus one registry line: nothing else in src/, crates/ or
//! scripts/ names a particular backend. The test reads every file there and fails
//! naming each file:line that does, so that adding a backend stays "its files, its
//! registry line, a workload, a test" (README, "How to add a backend").
//!
//! **What names a backend** (in code; comments are prose and are not read):
//! - a token that is a backend's name as workloads write it (`redis`,
//!   `postgres-lease`) or as its module is named (`redis_sentinel`, `postgres`): a
//!   `kind = "redis"` in a message, a path `backends::etcd::...`, a word in a
//!   script. Tokens are split at every character that is not a letter, a digit,
//!   `_` or `-`, so `redis-server` (a program) and `tokio_postgres` (a crate) are
//!   other words;
//! - a backend's variant in a path: `BackendKind::Patroni`, `::Etcd`.
//!
//! A product's name in prose, in a comment or capitalised in a message ("like
//! Redis", "PostgreSQL's initdb"), is not a backend named: lockcheck's docs and
//! messages speak of the servers by their names.
//!
//! **Not read**: comments (`//` in Rust, `#` in scripts); test code (a file's
//! `#[cfg(test)]` module, which by the crate's convention closes the file, and
//! test-module files named tests.rs), whose workloads must name some backend;
//! `mod x;` declarations, which are the module tree, not code.
//!
//! **The backend's own files**: its folder, `crates/lockcheck-servers/src/backends/<name>/`, where `<name>`
//! is a backend's module name (`redis` holds Redis's, Sentinel's and Redlock's).
//! **The registry** is [`REGISTRY`]; a few files name a backend for another
//! reason, each said in [`ELSEWHERE`].

mod names_support;

use lockcheck::backend::BackendKind;
use names_support::{files, rust_code, script_code};
use std::collections::BTreeSet;
use std::path::Path;

/// The registry: the one place that lists every backend.
const REGISTRY: &[(&str, &str)] = &[
    (
        "crates/lockcheck-servers/src/backend/mod.rs",
        "the backends' kinds, each one's lock service (its client, options and presets)",
    ),
    (
        "crates/lockcheck-servers/src/cluster/recipes.rs",
        "each backend's server recipe",
    ),
    (
        "crates/lockcheck-servers/src/backends/mod.rs",
        "the backends' folders, each behind its cargo feature",
    ),
    (
        "crates/lockcheck-servers/Cargo.toml",
        "each backend's cargo feature, with its client library",
    ),
];

/// Files that name a backend for a reason of their own.
const ELSEWHERE: &[(&str, &str)] = &[
    (
        "scripts/demo",
        "the demo is a Redis lock's: it builds lockcheck with the Redis backend's feature alone",
    ),
    (
        "scripts/test",
        "clippy on the Redis-only build, the one the demo makes: the features must compile apart",
    ),
    (
        "scripts/packages.txt",
        "the client adapters' packages: the Redis and etcd client libraries of Debian's \
         Python and Go, by the paths that say they are installed",
    ),
    (
        "crates/lockcheck-run/src/workload/keys.rs",
        "the workload-key reference (docs/workload-keys.md): its examples and words quote \
         backend names as a user writes them in a workload; the allowed values come from the \
         registry",
    ),
    (
        "crates/lockcheck-resource/",
        "the PostgreSQL resource (resource = { kind = \"postgres\" }) is a protected resource, \
         not a lock service; it starts its server with the postgres backends' recipe",
    ),
    (
        "src/bin/lockcheck-etcd-lock.rs",
        "an adapter of etcd's own lock service (clients/etcd-lock), a client like those of clients/",
    ),
    (
        "crates/lockcheck-history/src/import/",
        "Porcupine's etcd logs: a history format lockcheck check reads, named after the test that wrote it",
    ),
    (
        "src/cli/bench.rs",
        "times the checker on Porcupine's etcd logs (a history format)",
    ),
];

/// The names a backend goes by in code: as workloads write it, as its module is
/// named (the snake form, and the first word: `postgres` of `postgres-lease`).
fn names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for kind in BackendKind::ALL {
        let name = kind.name();
        names.insert(name.to_string());
        names.insert(name.replace('-', "_"));
        names.insert(name.split('-').next().unwrap().to_string());
    }
    names
}

/// The variants' names (`RedisSentinel`), named in a path.
fn variants() -> BTreeSet<String> {
    BackendKind::ALL
        .into_iter()
        .map(|k| format!("{k:?}"))
        .collect()
}

/// Whether `rel` (relative to the crate) is one backend's own file: a file of
/// its folder.
fn own(rel: &str, names: &BTreeSet<String>) -> bool {
    rel.strip_prefix("crates/lockcheck-servers/src/backends/")
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(folder, _)| names.contains(folder))
}

/// Each backend named on each line of `code`: (line, the name).
fn named(
    code: &str,
    names: &BTreeSet<String>,
    variants: &BTreeSet<String>,
) -> Vec<(usize, String)> {
    names_support::words(code)
        .into_iter()
        .filter(|(_, token, before, _)| {
            names.contains(*token) || (before.ends_with("::") && variants.contains(*token))
        })
        .map(|(line, token, _, _)| (line, token.to_string()))
        .collect()
}

#[test]
fn nothing_outside_a_backends_files_and_the_registry_names_a_backend() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (names, variants) = (names(), variants());
    let mut all = Vec::new();
    files(&root.join("src"), &mut all);
    files(&root.join("crates"), &mut all);
    files(&root.join("scripts"), &mut all);
    all.sort();
    let under = |rel: &str, p: &str| rel == p || (p.ends_with('/') && rel.starts_with(p));
    let mut wrong = Vec::new();
    let mut needed = BTreeSet::new();
    for path in all {
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let registry = REGISTRY.iter().any(|(p, _)| under(&rel, p));
        if registry || own(&rel, &names) || rel.ends_with("/tests.rs") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let code = if rel.ends_with(".rs") {
            rust_code(&text)
        } else {
            script_code(&text)
        };
        let elsewhere = ELSEWHERE.iter().find(|(p, _)| under(&rel, p));
        for (line, name) in named(&code, &names, &variants) {
            match elsewhere {
                Some((p, _)) => {
                    needed.insert(*p);
                }
                None => wrong.push(format!("{rel}:{line}: names the backend `{name}`")),
            }
        }
    }
    for (p, _) in ELSEWHERE.iter().filter(|(p, _)| !needed.contains(p)) {
        wrong.push(format!(
            "{p}: names no backend any more: drop its line of ELSEWHERE"
        ));
    }
    assert!(
        wrong.is_empty(),
        "code outside a backend's own files and the registry names a backend; move it \
         into the backend (its options, its server recipe, its registry entry) or say \
         why here (ELSEWHERE):\n{}",
        wrong.join("\n")
    );
}

/// The rule itself, on lines that name a backend and lines that do not.
#[test]
fn a_backend_is_named_in_code_not_in_prose() {
    let (names, variants) = (names(), variants());
    let hits = |code: &str| -> Vec<String> {
        named(code, &names, &variants)
            .into_iter()
            .map(|(_, n)| n)
            .collect()
    };
    assert_eq!(hits("if kind == BackendKind::Patroni {"), ["Patroni"]);
    assert_eq!(hits("crate::backends::redis::sentinel::SERVERS"), ["redis"]);
    assert_eq!(hits(r#"bail!("only for kind = \"etcd\"")"#), ["etcd"]);
    assert_eq!(hits("  \"nats-server:nats-server\""), Vec::<String>::new());
    assert_eq!(hits("use tokio_postgres::Client;"), Vec::<String>::new());
    assert_eq!(
        hits(r#"bail!("a Redis without its keys")"#),
        Vec::<String>::new()
    );
    assert_eq!(hits("mod etcd;"), Vec::<String>::new());
    assert_eq!(
        rust_code("let a = 1; // etcd\n/* redis */ let url = \"http://x\"; // nats\n"),
        "let a = 1; \n let url = \"http://x\"; \n"
    );
    assert_eq!(
        script_code("x=1 # redis\n# etcd\necho a#b"),
        "x=1 \n\necho a#b"
    );
    assert!(own(
        "crates/lockcheck-servers/src/backends/redis/instance.rs",
        &names
    ));
    assert!(own(
        "crates/lockcheck-servers/src/backends/redis/server/sentinel.rs",
        &names
    ));
    assert!(own(
        "crates/lockcheck-servers/src/backends/postgres/packages.txt",
        &names
    ));
    assert!(!own("crates/lockcheck-servers/src/backends/mod.rs", &names));
    assert!(!own(
        "crates/lockcheck-servers/src/backend/adapter.rs",
        &names
    ));
}
