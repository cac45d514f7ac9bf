//! The documentation a clone ships is held to the code: the history format's page
//! names every `f` lockcheck records, every write error readers tell apart and every
//! anomaly kind (from the code's own lists); the README's commands use only the
//! subcommands and flags `--help` lists; every relative link resolves; and nothing
//! published names a path of the machine it was written on.

mod docs_support;

use docs_support::{command_lines, help, listed_subcommands, read, root};
use lockcheck::check::AnomalyKind;
use lockcheck::history::{error, f, fault_ops};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The names missing from `text`, each looked for as inline code (`` `name` ``).
fn unnamed<'a>(text: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    names
        .into_iter()
        .filter(|n| !text.contains(&format!("`{n}`")))
        .collect()
}

#[test]
fn the_history_page_names_every_f_error_and_anomaly_kind_the_code_has() {
    let page = read("docs/history.md");
    assert!(
        page.starts_with("# The history format (v1.2)"),
        "docs/history.md: the title names the version"
    );
    let nemesis = fault_ops::ALL.iter().flat_map(|o| [o.start, o.end]);
    let fs = unnamed(&page, f::CLIENT.into_iter().chain(nemesis));
    assert!(fs.is_empty(), "docs/history.md does not name f {fs:?}");
    let errors = unnamed(&page, error::ALL);
    assert!(
        errors.is_empty(),
        "docs/history.md does not name error {errors:?}"
    );
    let kinds = unnamed(&page, AnomalyKind::ALL.iter().map(|k| k.name()));
    assert!(
        kinds.is_empty(),
        "docs/history.md does not name kind {kinds:?}"
    );
}

#[test]
fn the_client_page_is_versioned_and_both_contracts_are_linked_from_the_readme() {
    assert!(read("docs/client.md").starts_with("# The lock client protocol (v1)"));
    let readme = read("README.md");
    for page in ["docs/history.md", "docs/client.md"] {
        assert!(
            readme.contains(&format!("({page})")),
            "README.md links no {page}"
        );
    }
}

/// Markdown files published: the README and every page under docs/.
fn markdown() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    files.extend(
        files_under(&root().join("docs"))
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "md")),
    );
    files
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let mut broken = Vec::new();
    for file in markdown() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            for target in line.split("](").skip(1).filter_map(|s| s.split(')').next()) {
                let target = target.split('#').next().unwrap_or("");
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                if !file.parent().unwrap().join(target).exists() {
                    broken.push(format!("{}:{}: {target}", file.display(), i + 1));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to nothing:\n{}",
        broken.join("\n")
    );
}

/// Prefixes of paths that only exist on the machine something was written on.
const MACHINE_PATHS: [&str; 4] = ["/work/", "/tmp/", "/home/", "/root/"];

#[test]
fn nothing_published_names_a_path_of_the_machine_it_was_made_on() {
    let mut files = files_under(&root().join("docs"));
    files.push(root().join("README.md"));
    let mut found = Vec::new();
    for file in files {
        // Images and other binary files hold no text to search.
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            for prefix in MACHINE_PATHS {
                // A path begins the line or follows something that is not part of a
                // name: `results/work/` is no machine path, `"/work/` is.
                let starts = line.match_indices(prefix).any(|(at, _)| {
                    line[..at]
                        .chars()
                        .next_back()
                        .is_none_or(|c| !(c.is_alphanumeric() || "._-/~$".contains(c)))
                });
                if starts {
                    found.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "machine paths:\n{}", found.join("\n"));
}

/// `lockcheck SUBCOMMAND ...` lines of the README's code: each subcommand with the
/// long flags its lines use.
fn readme_commands(readme: &str) -> BTreeMap<String, Vec<String>> {
    let mut commands: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in command_lines(readme) {
        commands
            .entry(c.subcommand().to_string())
            .or_default()
            .extend(c.flags());
    }
    commands
}

#[test]
fn the_readme_commands_are_those_the_binary_offers() {
    let readme = read("README.md");
    let commands = readme_commands(&readme);
    assert!(commands.len() >= 8, "{commands:?}");
    // Every subcommand is in the README, but the one the controller starts itself.
    let listed = listed_subcommands();
    let missing: Vec<_> = listed
        .iter()
        .filter(|c| !commands.contains_key(c.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md shows no `lockcheck` {missing:?}"
    );
    for (sub, flags) in &commands {
        let text = help(&[sub, "--help"]);
        for flag in flags {
            assert!(
                text.contains(&format!("{flag} ")) || text.contains(&format!("{flag}\n")),
                "README.md: lockcheck {sub} has no {flag}:\n{text}"
            );
        }
    }
}
