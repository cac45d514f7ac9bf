//! Every history of the Porcupine and Knossos corpora, checked with the format and
//! model `lockcheck check` picks by itself, against the verdict in the corpus's
//! `expected.tsv`. The corpora are not ours to commit: they are found at
//! `$LOCKCHECK_CORPUS`, else `../shared/corpus` next to the repository, and where
//! there is none these tests fail and say where they looked.

use lockcheck::check::Validity;
use lockcheck::cli::bench::{expected, find_corpus};
use lockcheck::cli::check::{check_file, Options};
use lockcheck::history::HistoryError;
use std::path::{Path, PathBuf};

fn corpus(name: &str) -> PathBuf {
    let root =
        find_corpus(None, Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap_or_else(|e| panic!("{e}"));
    let dir = root.join(name);
    assert!(
        dir.is_dir(),
        "{} is missing from the corpus at {}",
        name,
        root.display()
    );
    dir
}

/// Checks every row and lists every mismatch at once; `no_ops` rows hold no client
/// operation at all.
fn check_all(name: &str, expected_rows: usize, no_ops: usize) {
    let rows = expected(&corpus(name)).unwrap();
    assert_eq!(rows.len(), expected_rows, "rows in {name}/expected.tsv");
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
            Err(e)
                if matches!(
                    e.downcast_ref::<HistoryError>(),
                    Some(HistoryError::NoOperations { .. })
                ) =>
            {
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
