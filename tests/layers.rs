//! One way down: the top-level modules of src/ import each other only along the
//! edges of [`ALLOWED`], so there is no cycle among them and each layer can be read
//! (and tested) knowing only the layers under it.
//!
//! The test reads every file under src/ and names each top-level module it
//! reaches: `crate::x` anywhere (a path, a `use`, a doc link), every item of a
//! `use crate::{..}` group, a `super::` that climbs out of its top-level module, and
//! `lockcheck::x` in the binaries. Any edge the table does not allow fails the test
//! with its file and line. docs/architecture.md prints the same table, and the test
//! holds the two equal.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Each top-level module of the library and the modules it may use besides
/// itself, bottom layer first. A module added to src/lib.rs needs its row here
/// (and in docs/architecture.md) before this test passes.
const ALLOWED: &[(&str, &[&str])] = &[
    ("exit", &[]),
    ("history", &[]),
    ("journal", &[]),
    ("check", &["history"]),
    ("backend", &["history"]),
    ("cluster", &["history", "journal", "backend"]),
    ("fault", &["history", "journal", "backend", "cluster"]),
    ("resource", &["history", "journal", "backend", "cluster"]),
    (
        "recover",
        &["history", "journal", "backend", "cluster", "fault"],
    ),
    ("report", &["history", "check"]),
    (
        "run",
        &[
            "exit", "history", "journal", "check", "backend", "cluster", "fault", "resource",
            "recover", "report",
        ],
    ),
    (
        "audit",
        &[
            "exit", "check", "backend", "cluster", "fault", "resource", "report", "run",
        ],
    ),
    (
        "shrink",
        &[
            "exit", "history", "check", "fault", "report", "run", "audit",
        ],
    ),
    (
        "cli",
        &[
            "exit", "history", "journal", "check", "backend", "cluster", "fault", "resource",
            "recover", "report", "run", "audit", "shrink",
        ],
    ),
];

/// Edges against the table that work in flight removes, tolerated while they
/// last (none now: the exit codes moved to `exit`, which `run` and `cli` both
/// use). The test fails once one of them is gone, so that its line goes too.
const PENDING: &[(&str, &str)] = &[];

/// The crate root (src/lib.rs) only declares the modules, and the binaries
/// (src/main.rs, src/bin/) sit above everything: they may name any module, as
/// long as it is one of the table's.
const TOP: &str = "(top)";

/// One module named from one place.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Edge {
    line: usize,
    to: String,
}

/// Where a file sits: its top-level module, and how many modules deep it is
/// below the crate root (src/fault/mod.rs is 1, src/fault/node.rs 2).
fn place(src: &Path, file: &Path) -> (String, usize, bool) {
    let rel = file.strip_prefix(src).unwrap();
    let parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let is_bin = parts[0] == "bin" || rel == Path::new("main.rs");
    if is_bin || rel == Path::new("lib.rs") {
        return (TOP.into(), 0, is_bin);
    }
    let last = parts.last().unwrap();
    let depth = if last == "mod.rs" {
        parts.len() - 1
    } else {
        parts.len()
    };
    let top = parts[0].trim_end_matches(".rs").to_string();
    (top, depth, false)
}

/// The source with comments and the insides of string and character literals
/// blanked (newlines kept, so lines still count), and the doc comments apart, with
/// their line numbers.
fn blank(src: &str) -> (Vec<char>, Vec<(usize, String)>) {
    let c: Vec<char> = src.chars().collect();
    let n = c.len();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = c.clone();
    let mut docs = Vec::new();
    let mut line = 1;
    let blank_range = |out: &mut Vec<char>, from: usize, to: usize| {
        for ch in &mut out[from..to.min(n)] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
    };
    let mut i = 0;
    while i < n {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            let start = i;
            while i < n && c[i] != '\n' {
                i += 1;
            }
            let text: String = c[start..i].iter().collect();
            if text.starts_with("///") || text.starts_with("//!") {
                docs.push((line, text));
            }
            blank_range(&mut out, start, i);
        } else if ch == '/' && at(i + 1) == '*' {
            let start = i;
            let mut depth = 0;
            while i < n {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
            blank_range(&mut out, start, i);
        } else if ch == 'r'
            && matches!(at(i + 1), '"' | '#')
            && (i == 0 || !ident(c[i - 1]) || (c[i - 1] == 'b' && (i < 2 || !ident(c[i - 2]))))
        {
            // A raw string: r"..", r#".."#, br"..".
            let mut j = i + 1;
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) != '"' {
                i += 1;
                continue;
            }
            let start = j + 1;
            j = start;
            while j < n && !(c[j] == '"' && (1..=hashes).all(|h| at(j + h) == '#')) {
                line += usize::from(c[j] == '\n');
                j += 1;
            }
            blank_range(&mut out, start, j);
            i = j + 1 + hashes;
        } else if ch == '"' {
            let start = i + 1;
            let mut j = start;
            while j < n && c[j] != '"' {
                // An escaped character may be the newline of a continued line.
                let skip = if c[j] == '\\' { 2 } else { 1 };
                line += c[j..(j + skip).min(n)]
                    .iter()
                    .filter(|&&x| x == '\n')
                    .count();
                j += skip;
            }
            blank_range(&mut out, start, j);
            i = j + 1;
        } else if ch == '\'' && at(i + 1) == '\\' {
            // An escaped character: '\n', '\'', '\u{7b}'.
            let mut j = i + 3;
            while j < n && c[j] != '\'' {
                j += 1;
            }
            blank_range(&mut out, i + 1, j);
            i = j + 1;
        } else if ch == '\'' && at(i + 2) == '\'' {
            // A character: '{' must not open a block. (Else a lifetime.)
            blank_range(&mut out, i + 1, i + 2);
            i += 3;
        } else {
            i += 1;
        }
    }
    (out, docs)
}

/// A token of blanked source: an identifier or one punctuation character (`::`
/// kept whole), with its line.
fn tokens(code: &[char]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < code.len() {
        let ch = code[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < code.len() && (code[i].is_alphanumeric() || code[i] == '_') {
                i += 1;
            }
            out.push((code[start..i].iter().collect(), line));
        } else if ch == ':' && code.get(i + 1) == Some(&':') {
            out.push(("::".into(), line));
            i += 2;
        } else {
            out.push((ch.to_string(), line));
            i += 1;
        }
    }
    out
}

/// The heads of a path's next segment at `k` (just after a `::` that leaves the
/// crate root): one module, or each item of a `{..}` group.
fn heads(t: &[(String, usize)], k: usize, out: &mut Vec<Edge>) {
    let Some((tok, line)) = t.get(k) else { return };
    if tok != "{" {
        out.push(Edge {
            line: *line,
            to: tok.clone(),
        });
        return;
    }
    let mut depth = 0;
    let mut expect_item = false;
    for (tok, line) in &t[k..] {
        match tok.as_str() {
            "{" => {
                depth += 1;
                expect_item = depth == 1;
            }
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return;
                }
            }
            "," if depth == 1 => expect_item = true,
            _ if expect_item => {
                expect_item = false;
                // `self` in a group is the crate root itself: it names no module.
                if tok != "self" {
                    out.push(Edge {
                        line: *line,
                        to: tok.clone(),
                    });
                }
            }
            _ => {}
        }
    }
}

/// Every top-level module that `text` (a file `depth` modules below the crate
/// root, of the library or, with `bin`, a binary) names.
fn edges(text: &str, depth: usize, bin: bool) -> Vec<Edge> {
    let (code, docs) = blank(text);
    let t = tokens(&code);
    let mut out = Vec::new();
    // The braces that close inline `mod x { .. }` blocks, innermost last.
    let mut inline: Vec<usize> = Vec::new();
    let mut braces = 0;
    for k in 0..t.len() {
        let tok = t[k].0.as_str();
        let next = |d: usize| t.get(k + d).map(|x| x.0.as_str()).unwrap_or("");
        match tok {
            "{" => braces += 1,
            "}" => {
                braces -= 1;
                if inline.last() == Some(&braces) {
                    inline.pop();
                }
            }
            "mod" if next(2) == "{" => inline.push(braces),
            _ => {}
        }
        if k > 0 && t[k - 1].0 == "::" {
            continue;
        }
        match tok {
            "crate" if !bin && next(1) == "::" => heads(&t, k + 2, &mut out),
            "lockcheck" if bin && next(1) == "::" => heads(&t, k + 2, &mut out),
            "super" if !bin => {
                let mut climbs = 0;
                while t.get(k + 2 * climbs).map(|x| x.0.as_str()) == Some("super")
                    && t.get(k + 2 * climbs + 1).map(|x| x.0.as_str()) == Some("::")
                {
                    climbs += 1;
                }
                if climbs == depth + inline.len() {
                    heads(&t, k + 2 * climbs, &mut out);
                }
            }
            _ => {}
        }
    }
    if !bin {
        for (line, doc) in docs {
            for (at, _) in doc.match_indices("crate::") {
                let rest = &doc[at + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let prior = doc[..at].chars().last();
                if !name.is_empty() && !prior.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    out.push(Edge { line, to: name });
                }
            }
        }
    }
    out.sort_by_key(|e| e.line);
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn table() -> BTreeMap<&'static str, BTreeSet<&'static str>> {
    ALLOWED
        .iter()
        .map(|(m, uses)| (*m, uses.iter().copied().collect()))
        .collect()
}

#[test]
fn every_import_flows_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let table = table();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong = String::new();
    let mut pending = BTreeSet::new();
    let mut count = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let (from, depth, bin) = place(&src, file);
        for e in edges(&text, depth, bin) {
            count += 1;
            let shown = file.strip_prefix(src.parent().unwrap()).unwrap().display();
            let at = lines.get(e.line - 1).map(|l| l.trim()).unwrap_or("");
            if !table.contains_key(e.to.as_str()) {
                writeln!(
                    wrong,
                    "{shown}:{}: names `{}`, which is no module of the layers table \
                     (add it to ALLOWED in tests/layers.rs): {at}",
                    e.line, e.to
                )
                .unwrap();
            } else if PENDING.contains(&(from.as_str(), e.to.as_str())) {
                pending.insert((from.clone(), e.to));
            } else if from != TOP && e.to != from && !table[from.as_str()].contains(e.to.as_str()) {
                writeln!(
                    wrong,
                    "{shown}:{}: {from} -> {} is not allowed ({from} may use: {}): {at}",
                    e.line,
                    e.to,
                    table[from.as_str()]
                        .iter()
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                )
                .unwrap();
            }
        }
    }
    for (from, to) in PENDING {
        if !pending.contains(&(from.to_string(), to.to_string())) {
            writeln!(
                wrong,
                "{from} -> {to} no longer occurs: remove it from PENDING in tests/layers.rs"
            )
            .unwrap();
        }
    }
    assert!(
        count > 100,
        "only {count} imports found: the parser is broken"
    );
    assert!(
        wrong.is_empty(),
        "imports against the layers (see docs/architecture.md):\n{wrong}"
    );
}

#[test]
fn the_table_is_one_way_and_names_every_module_of_lib_rs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let declared: BTreeSet<&str> = lib
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("pub mod ")
                .or_else(|| l.trim().strip_prefix("mod "))
        })
        .map(|l| l.trim_end_matches(';').trim())
        .collect();
    let table = table();
    let listed: BTreeSet<&str> = table.keys().copied().collect();
    assert_eq!(declared, listed, "src/lib.rs's modules against ALLOWED");
    // Bottom first: a module may use only modules listed above it, so the edges
    // can hold no cycle.
    for (i, (m, uses)) in ALLOWED.iter().enumerate() {
        let below: BTreeSet<&str> = ALLOWED[..i].iter().map(|(x, _)| *x).collect();
        for u in *uses {
            assert!(below.contains(u), "{m} may use {u}, which is not below it");
        }
    }
    // The layer rules in words (HELPERS.md, issue 12), against the table.
    let may = |a: &str, b: &str| table[a].contains(b);
    assert!(table["history"].is_empty(), "history is the bottom");
    assert_eq!(table["check"], BTreeSet::from(["history"]));
    for lower in ["cluster", "fault", "check"] {
        assert!(!may("backend", lower), "backend knows no {lower}");
    }
    assert!(!may("cluster", "fault"), "cluster knows no fault");
    for m in ["fault", "resource", "report"] {
        assert!(!may(m, "run"), "{m} never reaches run");
    }
    assert!(!may("report", "backend"), "report never reaches backend");
    for m in listed.iter().filter(|m| **m != "cli") {
        assert!(!may(m, "cli"), "{m} is below cli and names it");
    }
    for m in ["cluster", "fault", "recover"] {
        assert!(!may("journal", m), "the journal knows no {m}");
    }
}

#[test]
fn docs_architecture_prints_the_same_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    // Rows like: | `cluster` | `history`, `journal`, `backend` |
    let mut printed = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || !cells[1].starts_with('`') {
            continue;
        }
        let names = |cell: &str| -> BTreeSet<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect()
        };
        let module = names(cells[1]).into_iter().next().unwrap();
        printed.insert(module, names(cells[2]));
    }
    let table: BTreeMap<String, BTreeSet<String>> = table()
        .into_iter()
        .map(|(m, u)| (m.to_string(), u.into_iter().map(str::to_string).collect()))
        .collect();
    assert_eq!(
        printed,
        table,
        "{}'s table against ALLOWED in tests/layers.rs",
        path.display()
    );
}

#[test]
fn the_reader_finds_every_form_of_import_and_nothing_in_strings_or_comments() {
    let text = r##"//! Names [`crate::history::Op`] in its docs.
use super::Sibling;
use crate::backend::BackendKind;
use crate::{
    check::{self, Verdict},
    cluster,
};
// use crate::fault; in a comment
/* crate::run in /* a nested */ block */
fn f() {
    let s = "crate::report { \
             continued";
    let r = r#"crate::cli " {"#;
    let open = '{';
    let q = '\'';
    let x: &'static str = s;
    g(crate::resource::STALE);
}
pub(crate) fn h() {}
mod tests {
    use super::*;
    use super::super::super::journal::Effect;
    fn t() {
        let _ = super::super::Sibling;
    }
}
/// After a continued string, see [`crate::run`]'s line.
fn after() {
    let _ = super::super::recover::undo;
}
"##;
    // As src/fault/node.rs: two modules below the crate root.
    let got: Vec<(usize, String)> = edges(text, 2, false)
        .into_iter()
        .map(|e| (e.line, e.to))
        .collect();
    let want: Vec<(usize, String)> = [
        (1, "history"),
        (3, "backend"),
        (5, "check"),
        (6, "cluster"),
        (17, "resource"),
        (22, "journal"),
        (27, "run"),
        (29, "recover"),
    ]
    .into_iter()
    .map(|(l, m)| (l, m.to_string()))
    .collect();
    assert_eq!(got, want);
    // A binary names modules as `lockcheck::x`; its own `crate::` is its own.
    let bin =
        "use lockcheck::{cli, run::x};\nuse crate::helper;\nfn main() { lockcheck::fault::f(); }\n";
    let got: Vec<String> = edges(bin, 0, true).into_iter().map(|e| e.to).collect();
    assert_eq!(got, ["cli", "run", "fault"]);
}
