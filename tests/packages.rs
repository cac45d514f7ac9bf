//! scripts/packages.txt, which scripts/setup reads on a fresh machine (before any
//! build), holds each backend's Debian packages as its server recipe declares them
//! (`ServerRecipe::packages`). The test fails naming every line that differs; with
//! `LOCKCHECK_BLESS=1` it writes the backends' lines again instead.

use lockcheck::backend::BackendKind;
use lockcheck::cluster::recipe;
use std::path::Path;

/// The line that opens the backends' part of the file: everything after it is
/// written from the recipes.
const BACKENDS_FROM: &str =
    "# (LOCKCHECK_BLESS=1 cargo nextest run --test packages writes them again).";

/// Each backend's lines, as its recipe declares them, in registry order.
fn declared() -> Vec<String> {
    BackendKind::ALL
        .into_iter()
        .flat_map(|kind| {
            recipe(kind)
                .packages()
                .into_iter()
                .map(move |p| format!("{:<18} {:<48} {}", kind.name(), p.check, p.name))
        })
        .collect()
}

#[test]
fn scripts_packages_holds_what_the_server_recipes_declare() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/packages.txt");
    let text = std::fs::read_to_string(&path).unwrap();
    let (head, written) = text
        .split_once(&format!("{BACKENDS_FROM}\n"))
        .unwrap_or_else(|| panic!("{}: no line {BACKENDS_FROM:?}", path.display()));
    let declared = declared();
    if std::env::var_os("LOCKCHECK_BLESS").is_some() {
        let text = format!("{head}{BACKENDS_FROM}\n{}\n", declared.join("\n"));
        std::fs::write(&path, text).unwrap();
        return;
    }
    let fields = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let written: Vec<Vec<String>> = written
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(fields)
        .collect();
    let declared: Vec<Vec<String>> = declared.iter().map(|l| fields(l)).collect();
    let missing: Vec<String> = declared
        .iter()
        .filter(|d| !written.contains(d))
        .map(|d| format!("  missing: {}", d.join(" ")))
        .collect();
    let extra: Vec<String> = written
        .iter()
        .filter(|w| !declared.contains(w))
        .map(|w| format!("  not declared by its recipe: {}", w.join(" ")))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty() && written == declared,
        "{} differs from what the server recipes declare (ServerRecipe::packages):\n{}\n\
         write it again with: LOCKCHECK_BLESS=1 cargo nextest run --test packages",
        path.display(),
        [missing, extra].concat().join("\n")
    );
}

/// scripts/setup reads every line: a group, a file or program, a package.
#[test]
fn every_line_of_scripts_packages_has_its_three_fields() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/packages.txt");
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
