//! Each backend's folder holds its servers' Debian packages,
//! crates/lockcheck-servers/src/backends/<backend>/packages.txt, which scripts/setup reads on a fresh
//! machine (before any build), as its server recipe declares them
//! (`ServerRecipe::packages`). The test fails naming every line that differs; with
//! `LOCKCHECK_BLESS=1` it writes each folder's lines again instead.

use lockcheck::backend::BackendKind;
use lockcheck::cluster::recipe;
use std::path::{Path, PathBuf};

/// The line that opens a folder's lines: everything after it is written from the
/// recipes.
const BACKENDS_FROM: &str =
    "# (LOCKCHECK_BLESS=1 cargo nextest run --test packages writes them again).";

/// One backend's lines, as its recipe declares them.
fn declared(kind: BackendKind) -> Vec<String> {
    recipe(kind)
        .packages()
        .into_iter()
        .map(|p| format!("{:<18} {:<48} {}", kind.name(), p.check, p.name))
        .collect()
}

/// Every backend folder's packages.txt, by path.
fn folder_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/lockcheck-servers/src/backends");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path().join("packages.txt"))
        .filter(|p| p.exists())
        .collect();
    files.sort();
    files
}

fn fields(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

/// Each backend's lines are in one folder's file (the one that names it), in the
/// registry's order there, and every line of the files is a backend's.
#[test]
fn each_folder_holds_what_its_server_recipes_declare() {
    let mut wrong = Vec::new();
    let mut found = Vec::new();
    for path in folder_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let (head, written) = text
            .split_once(&format!("{BACKENDS_FROM}\n"))
            .unwrap_or_else(|| panic!("{}: no line {BACKENDS_FROM:?}", path.display()));
        let written: Vec<Vec<String>> = written
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(fields)
            .collect();
        // The backends the file is for: those its lines name.
        let kinds: Vec<BackendKind> = BackendKind::ALL
            .into_iter()
            .filter(|k| written.iter().any(|w| w[0] == k.name()))
            .collect();
        for w in written
            .iter()
            .filter(|w| kinds.iter().all(|k| k.name() != w[0]))
        {
            wrong.push(format!("{}: no backend is named {}", path.display(), w[0]));
        }
        let declared: Vec<String> = kinds.iter().flat_map(|k| declared(*k)).collect();
        if std::env::var_os("LOCKCHECK_BLESS").is_some() {
            let text = format!("{head}{BACKENDS_FROM}\n{}\n", declared.join("\n"));
            std::fs::write(&path, text).unwrap();
        } else if written != declared.iter().map(|l| fields(l)).collect::<Vec<_>>() {
            wrong.push(format!(
                "{} differs from what its server recipes declare:\n  written:  {}\n  declared: {}",
                path.display(),
                written
                    .iter()
                    .map(|w| w.join(" "))
                    .collect::<Vec<_>>()
                    .join("\n            "),
                declared
                    .iter()
                    .map(|l| fields(l).join(" "))
                    .collect::<Vec<_>>()
                    .join("\n            "),
            ));
        }
        found.extend(kinds);
    }
    for kind in BackendKind::ALL {
        match found.iter().filter(|k| **k == kind).count() {
            1 => {}
            0 => wrong.push(format!(
                "no crates/lockcheck-servers/src/backends/*/packages.txt names {kind}: add a line `{kind} CHECK PACKAGE` \
                 to its folder's, and write them again"
            )),
            n => wrong.push(format!("{n} folders' packages.txt name {kind}: one may")),
        }
    }
    assert!(
        wrong.is_empty(),
        "the backends' packages.txt against their server recipes (ServerRecipe::packages):\n{}\n\
         write them again with: LOCKCHECK_BLESS=1 cargo nextest run --test packages",
        wrong.join("\n")
    );
}

/// scripts/setup reads every line: a group, a file or program, a package.
#[test]
fn every_line_of_the_package_lists_has_its_three_fields() {
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/packages.txt");
    for path in std::iter::once(scripts).chain(folder_files()) {
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            assert_eq!(
                line.split_whitespace().count(),
                3,
                "{}:{}: expected GROUP CHECK PACKAGE: {line}",
                path.display(),
                i + 1
            );
        }
    }
}
