//! Every history of the Porcupine and Knossos corpora, checked with the format and
//! model `lockcheck check` picks by itself, against the verdict in the corpus's
//! `expected.tsv`. The corpora ship in `fixtures/corpus` (data only, with each
//! project's licence and source: its README); `$LOCKCHECK_CORPUS` names another
//! copy. A file listed and not there fails the test with its name: nothing is
//! skipped.

use lockcheck::check::choice::{check_file, CheckError, Options};
use lockcheck::check::Validity;
use lockcheck::cli::bench::{expected, find_corpus};
use lockcheck::history::HistoryError;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn corpus(name: &str) -> PathBuf {
    let root =
        find_corpus(None, Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap_or_else(|e| panic!("{e}"));
    root.join(name)
}

/// The data files under `dir` (every file but the README, the licence and the
/// table), relative to it.
fn data_files(dir: &Path) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if !["README.md", "LICENSE", "expected.tsv"]
                .iter()
                .any(|n| path.ends_with(n))
            {
                found.insert(path.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    found
}

/// Checks every row and lists every mismatch at once; `no_ops` rows hold no client
/// operation at all.
fn check_all(name: &str, expected_rows: usize, no_ops: usize) {
    let dir = corpus(name);
    let rows = expected(&dir).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(rows.len(), expected_rows, "rows in {name}/expected.tsv");
    let missing: Vec<String> = rows
        .iter()
        .filter(|(file, _, _)| !file.is_file())
        .map(|(file, _, _)| file.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "listed in {name}/expected.tsv, missing: {missing:?}"
    );
    // Every history there is one the table lists: none sits unchecked.
    let listed: BTreeSet<PathBuf> = rows
        .iter()
        .map(|(file, _, _)| file.strip_prefix(&dir).unwrap().to_path_buf())
        .collect();
    let unlisted: Vec<_> = data_files(&dir).difference(&listed).cloned().collect();
    assert!(
        unlisted.is_empty(),
        "not in {name}/expected.tsv: {unlisted:?}"
    );
    let mut wrong = Vec::new();
    let mut without_ops = Vec::new();
    for (file, model, ok) in &rows {
        // `kv-nopartition` rows are the same histories checked as one part; a
        // history is linearizable iff each key's part is (locality), so the kv
        // model's verdict is the one to match.
        let c = match check_file(file, &Options::default()) {
            Ok(c) => c,
            // Spec v1.1: a history without a client operation has no verdict (exit
            // 4), where the peers call it trivially linearizable (etcd_095.log is
            // empty, a row without a verdict, "-"; a Knossos file holds only
            // :nemesis ops). Never one they call invalid.
            Err(e @ CheckError::History(HistoryError::NoOperations { .. })) => {
                assert!(ok.unwrap_or(true), "{}: {e}", file.display());
                without_ops.push(file.display().to_string());
                continue;
            }
            Err(e) => panic!("{}: {e:#}", file.display()),
        };
        let want = if ok.unwrap_or(true) {
            Validity::Valid
        } else {
            Validity::Invalid
        };
        if c.verdict.valid != want {
            wrong.push(format!(
                "{} ({model}): expected {want:?}, got {:?} as {}: {:?}",
                file.display(),
                c.verdict.valid,
                c.model.name(),
                c.verdict.notes
            ));
        }
    }
    assert_eq!(without_ops.len(), no_ops, "{without_ops:?}");
    assert!(
        wrong.is_empty(),
        "{} of {} verdicts differ:\n{}",
        wrong.len(),
        rows.len(),
        wrong.join("\n")
    );
}

#[test]
fn porcupine_corpus_verdicts_match() {
    // 103 etcd logs, the 6 kv logs with the kv model, and 6 kv-nopartition rows.
    check_all("porcupine", 115, 1);
}

#[test]
fn knossos_corpus_verdicts_match() {
    check_all("knossos", 122, 1);
}
