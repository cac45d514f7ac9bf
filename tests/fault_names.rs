//! A fault is its own file plus one catalogue line: nothing else in src/ or crates/ names a
//! particular kind of fault. The test reads every file there and fails naming
//! each file:line that does, so that adding a fault stays "its file, its
//! catalogue line, a workload, a test" (README, "Adding a backend or a fault"; docs/extending.md).
//!
//! **What names a fault kind** (in code; comments are prose and are not read):
//! - a token that is the name of a kind of two words or more as workloads write
//!   it (`pause-node`, `disk-full`) or as its module is named (`pause_node`):
//!   a message, a path, a string;
//! - a kind of one word (`pause`, `kill`, `clock`) as its module in a path:
//!   `clock::reach`, `fault::kill`. As a word it is also a signal, a history
//!   record (`f = "pause"`) or a method of the cluster's, none of them a kind.
//!
//! **Not read**: comments, test code (a file's `#[cfg(test)]` module and files
//! named tests.rs), `mod x;` declarations (the module tree).
//!
//! **The kind's own files**: `crates/lockcheck-fault/src/<module>.rs` or `crates/lockcheck-fault/src/<module>/`.
//! **The registry** is [`REGISTRY`]; a few files name a kind for a reason of their
//! own, each said in [`ELSEWHERE`]; the ones that should not, and do since before
//! this test, are [`PENDING`], each failing once it no longer names one.

mod names_support;

use lockcheck::fault::catalogue::CATALOGUE;
use names_support::{files, rust_code};
use std::collections::BTreeSet;
use std::path::Path;

/// The registry: the one place that lists every kind.
const REGISTRY: &[(&str, &str)] = &[
    (
        "crates/lockcheck-fault/src/catalogue.rs",
        "every kind, in one table",
    ),
    (
        "crates/lockcheck-fault/src/lib.rs",
        "the module tree of the kinds' files",
    ),
];

/// Files that name a kind for a reason of their own.
const ELSEWHERE: &[(&str, &str)] = &[
    (
        "crates/lockcheck-run/src/workload/keys.rs",
        "the workload-key reference (docs/workload-keys.md): its words quote fault kinds as a \
         user writes them (`network = \"namespaces\"` is what `partition-nodes` needs); each \
         kind's own keys come from the catalogue",
    ),
    (
        "crates/lockcheck-history/src/op.rs",
        "the history's records of fault periods (`f` names, `fault_ops`: band, colour): the \
         report is rebuilt from a run directory alone and history is at the bottom, so a kind \
         that records a pair of its own (`disk-full` / `disk-free`) adds one line there",
    ),
    (
        "crates/lockcheck-audit/src/battery.rs",
        "the audit's scenarios are workloads: each names the faults it runs",
    ),
    (
        "src/bin/lockcheck-test-helper.rs",
        "the tests' helper drives the clock page directly, as a killed controller left it",
    ),
];

/// Files that named a kind since before this test, for what the kinds' common
/// route did not carry then, each failing once it no longer names one: none
/// left. The clock interposer and the node link proxies are set up by their
/// kinds' [`lockcheck::fault::spec::Spec::prepare_run`], the clock page's
/// reset is the clock kind's `undo_journaled` through the catalogue, doctor
/// lists each kind's `requires` from the catalogue. A new kind adds nothing here.
const PENDING: &[(&str, &str)] = &[];

/// Kinds of two words or more, as workloads write them and as modules.
fn long_names() -> BTreeSet<String> {
    CATALOGUE
        .iter()
        .filter(|k| k.name.contains('-'))
        .flat_map(|k| [k.name.to_string(), k.name.replace('-', "_")])
        .collect()
}

/// Kinds of one word.
fn short_names() -> BTreeSet<String> {
    CATALOGUE
        .iter()
        .filter(|k| !k.name.contains('-'))
        .map(|k| k.name.to_string())
        .collect()
}

/// Whether `rel` (relative to the crate) is one kind's own file.
fn own(rel: &str) -> bool {
    let Some(rest) = rel.strip_prefix("crates/lockcheck-fault/src/") else {
        return false;
    };
    let stem = rest.split('/').next().unwrap().trim_end_matches(".rs");
    CATALOGUE.iter().any(|k| stem == k.name.replace('-', "_"))
}

/// Each kind named on each line of `code`: (line, the name).
fn named(code: &str, long: &BTreeSet<String>, short: &BTreeSet<String>) -> Vec<(usize, String)> {
    names_support::words(code)
        .into_iter()
        .filter(|(_, token, before, after)| {
            let module = before.ends_with("fault::") || after.starts_with("::");
            long.contains(*token) || (module && short.contains(*token))
        })
        .map(|(line, token, _, _)| (line, token.to_string()))
        .collect()
}

#[test]
fn nothing_outside_a_faults_file_and_the_catalogue_names_a_fault_kind() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (long, short) = (long_names(), short_names());
    let mut all = Vec::new();
    files(&root.join("src"), &mut all);
    files(&root.join("crates"), &mut all);
    all.sort();
    let under = |rel: &str, p: &str| rel == p || (p.ends_with('/') && rel.starts_with(p));
    let mut wrong = Vec::new();
    let mut needed = BTreeSet::new();
    for path in all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let registry = REGISTRY.iter().any(|(p, _)| under(&rel, p));
        if registry || own(&rel) || rel.ends_with("/tests.rs") {
            continue;
        }
        let code = rust_code(&std::fs::read_to_string(path).unwrap());
        let allowed = ELSEWHERE
            .iter()
            .chain(PENDING)
            .find(|(p, _)| under(&rel, p));
        for (line, name) in named(&code, &long, &short) {
            match allowed {
                Some((p, _)) => {
                    needed.insert(*p);
                }
                None => wrong.push(format!("{rel}:{line}: names the fault kind `{name}`")),
            }
        }
    }
    for (p, _) in ELSEWHERE
        .iter()
        .chain(PENDING)
        .filter(|(p, _)| !needed.contains(p))
    {
        wrong.push(format!(
            "{p}: names no fault kind any more: drop its line of ELSEWHERE or PENDING"
        ));
    }
    assert!(
        wrong.is_empty(),
        "code outside a fault's own file and the catalogue names a fault kind; move it \
         into the kind (its spec's needs, its prepare_nodes hook, its journal effect and \
         undo) or say why here (ELSEWHERE):\n{}",
        wrong.join("\n")
    );
}

/// The rule itself, on lines that name a kind and lines that do not.
#[test]
fn a_fault_kind_is_named_as_a_kind_not_as_a_word() {
    let (long, short) = (long_names(), short_names());
    let hits = |code: &str| -> Vec<String> {
        named(code, &long, &short)
            .into_iter()
            .map(|(_, n)| n)
            .collect()
    };
    assert_eq!(hits("use crate::fault::pause_node::KIND;"), ["pause_node"]);
    assert_eq!(hits(r#"if kind == "pause-node" {"#), ["pause-node"]);
    assert_eq!(hits("crate::fault::clock::reset_file(f)"), ["clock"]);
    assert_eq!(hits("let k = kill::KIND;"), ["kill"]);
    assert_eq!(hits("cluster.kill(&n).await?;"), Vec::<String>::new());
    assert_eq!(
        hits("signal::kill(pid, Signal::SIGSTOP)"),
        Vec::<String>::new()
    );
    assert_eq!(hits(r#"f: "pause".into(),"#), Vec::<String>::new());
    assert_eq!(hits("pub mod pause_node;"), Vec::<String>::new());
    assert!(own("crates/lockcheck-fault/src/pause_node.rs"));
    assert!(own("crates/lockcheck-fault/src/clock/page.rs"));
    assert!(!own("crates/lockcheck-fault/src/node.rs"));
}
