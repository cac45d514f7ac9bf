//! One way down: the top-level modules of src/ import each other only along the
//! edges of [`ALLOWED`], so there is no cycle among them and each layer can be read
//! (and tested) knowing only the layers under it.
//!
//! The test reads every file of the library (src/, and the crates whose modules
//! src/lib.rs re-exports by name, as crates/lockcheck-servers's `backend`,
//! `cluster` and `backends`, read as if they were src/'s) and names each top-level module it
//! reaches: `crate::x` anywhere (a path, a `use`, a doc link), every item of a
//! `use crate::{..}` group, a `super::` that climbs out of its top-level module, and
//! `lockcheck::x` in the binaries. Any edge the table does not allow fails the test
//! with its file and line. The backends' folders ([`FOLDERS_DIR`]) are no module of
//! the table: their files are placed one by one, each in `backend`'s layer or, a
//! server recipe, in `cluster`'s ([`FOLDERS`]). docs/architecture.md prints the
//! same table, and the test holds the two equal. The history and the checker are
//! crates of their own (crates/), named as modules by src/lib.rs: Cargo holds them
//! to their layers (a crate names only its dependencies), and their files are read
//! here for loops and lengths as src/'s are.

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
    ("rundir", &["check"]),
    ("backend", &["history"]),
    ("cluster", &["history", "journal", "backend"]),
    ("fault", &["history", "journal", "backend", "cluster"]),
    (
        "resource",
        &["history", "rundir", "journal", "backend", "cluster"],
    ),
    (
        "recover",
        &["history", "journal", "backend", "cluster", "fault"],
    ),
    ("report", &["history", "check", "rundir"]),
    (
        "run",
        &[
            "exit", "history", "journal", "check", "rundir", "backend", "cluster", "fault",
            "resource", "recover", "report",
        ],
    ),
    (
        "audit",
        &[
            "exit", "check", "rundir", "backend", "cluster", "fault", "resource", "report", "run",
        ],
    ),
    (
        "shrink",
        &[
            "exit", "history", "check", "rundir", "fault", "report", "run", "audit",
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

/// The backends' folders ([`FOLDERS_DIR`]/<backend>/) are no layer of their own:
/// each of their files is in one of two layers by what it is. A backend's server
/// recipe (its file `server.rs`, or its folder `server/`) is in [`SERVER_SIDE`];
/// every other file of the folder (its lock client, options, presets) in
/// [`CLIENT_SIDE`]. So a backend's client may use only what `backend` may, its
/// server recipe only what `cluster` may, and no other module may use the one or
/// the other beyond what it may use of those two. A folder's `mod.rs`
/// (backends/mod.rs, backends/<backend>/mod.rs) only declares its files,
/// whose sides differ: it names nothing, and a path into a folder names the file
/// it uses (`crate::backends::redis::client::..`), never the folder alone, whose
/// side the test could not tell. docs/architecture.md prints the same rule.
const FOLDERS: &str = "backends";
/// Where the backends' folders are, from the repository's root.
const FOLDERS_DIR: &str = "crates/lockcheck-servers/src/backends";
const SERVER_SIDE: &str = "cluster";
const CLIENT_SIDE: &str = "backend";

/// The layer of a module of the library (a path below the crate root): its
/// top-level module's, or in the backends' folders, its side's; `None` for a
/// folder's `mod.rs` (`backends`, `backends::redis`), which is no side, and for
/// a module the table lacks.
fn layer_of(module: &[String]) -> Option<&'static str> {
    match module {
        [] => Some(TOP),
        // A module the table lacks is refused by the module-level check already.
        [top, ..] if top != FOLDERS => ALLOWED.iter().map(|(m, _)| *m).find(|m| m == top),
        [_] | [_, _] => None,
        [_, _, file, ..] if file == "server" => Some(SERVER_SIDE),
        _ => Some(CLIENT_SIDE),
    }
}

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
/// below the crate root (src/cli/mod.rs is 1, src/cli/audit.rs 2).
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
    if top == FOLDERS {
        let side = match parts.get(2) {
            Some(file) if file.trim_end_matches(".rs") == "server" => SERVER_SIDE,
            _ => CLIENT_SIDE,
        };
        return (side.into(), depth, false);
    }
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
            // A crate of the workspace by its own name (`lockcheck_journal::Journal`
            // in crates/lockcheck-servers, which has no `crate::journal`): the
            // module src/lib.rs gives it; the servers crate gives its modules
            // under their own names.
            _ if !bin && next(1) == "::" && tok.starts_with("lockcheck_") => {
                match &tok["lockcheck_".len()..] {
                    "servers" => heads(&t, k + 2, &mut out),
                    module => out.push(Edge {
                        line: t[k].1,
                        to: module.to_string(),
                    }),
                }
            }
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

/// The library's sources: src/, and the crates whose modules src/lib.rs re-exports
/// under their own names (`pub use lockcheck_servers::{backend, backends, cluster};`):
/// their files stand where they would in src/
/// (crates/lockcheck-servers/src/cluster/local.rs is `cluster::local`), and their
/// crate roots, which only declare those modules, stand apart.
fn library_roots(root: &Path) -> Vec<PathBuf> {
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let mut roots = vec![root.join("src")];
    for (krate, _) in grouped_re_exports(&lib) {
        roots.push(root.join(format!("crates/lockcheck-{krate}/src")));
    }
    roots
}

/// src/lib.rs's lines `pub use lockcheck_X::{a, b};`: each crate (`X`, as its
/// folder under crates/ names it) with the modules it gives.
fn grouped_re_exports(lib: &str) -> Vec<(String, Vec<String>)> {
    lib.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("pub use lockcheck_")?;
            let (krate, group) = rest.split_once("::{")?;
            let group = group.strip_suffix("};")?;
            let modules = group.split(',').map(|m| m.trim().to_string());
            Some((krate.replace('_', "-"), modules.collect()))
        })
        .collect()
}

/// Every file of the library's sources, each with the root it is under.
fn library_sources(roots: &[PathBuf]) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for root in roots {
        let mut files = Vec::new();
        rust_files(root, &mut files);
        out.extend(files.into_iter().map(|f| (root.clone(), f)));
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

fn table() -> BTreeMap<&'static str, BTreeSet<&'static str>> {
    ALLOWED
        .iter()
        .map(|(m, uses)| (*m, uses.iter().copied().collect()))
        .collect()
}

#[test]
fn every_import_flows_down_the_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let roots = library_roots(root);
    let table = table();
    let mut wrong = String::new();
    let mut pending = BTreeSet::new();
    let mut count = 0;
    for (src, file) in &library_sources(&roots) {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let (from, depth, bin) = place(src, file);
        for e in edges(&text, depth, bin) {
            count += 1;
            let shown = file.strip_prefix(root).unwrap().display();
            let at = lines.get(e.line - 1).map(|l| l.trim()).unwrap_or("");
            if e.to == FOLDERS {
                // Which side of a folder it uses, the file graph says (below).
                continue;
            }
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
    wrong.push_str(&folder_edges(root, &roots));
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

/// The imports into, out of and within the backends' folders, file by file, that
/// the table does not allow between their layers ([`FOLDERS`]), each as a line of
/// the test's failure.
fn folder_edges(root: &Path, roots: &[PathBuf]) -> String {
    let table = table();
    let files = library_files(roots);
    let mut wrong = String::new();
    for (from, to) in file_imports(roots) {
        for (target, line) in to {
            let within = |m: &ModPath| m.first().is_some_and(|t| t == FOLDERS);
            // The crate root stands for the crates named as modules
            // (`crate::history::..`), which the module-level check places.
            if (!within(&from) && !within(&target)) || target.is_empty() {
                continue;
            }
            let shown = files[&from]
                .strip_prefix(root)
                .unwrap()
                .display()
                .to_string();
            let (Some(a), Some(b)) = (layer_of(&from), layer_of(&target)) else {
                // A folder's mod.rs only declares its files, whose sides differ:
                // it names nothing, and a path names the file it uses.
                let why = if layer_of(&from).is_none() {
                    "a folder's mod.rs only declares its files and names none"
                } else {
                    "a path names the file it uses (`client`, `server`, ...), whose layer \
                     the test then knows, not its folder"
                };
                writeln!(
                    wrong,
                    "{shown}:{line}: names `{}`: {why}",
                    target.join("::")
                )
                .unwrap();
                continue;
            };
            if a != TOP && a != b && !table[a].contains(b) {
                writeln!(
                    wrong,
                    "{shown}:{line}: {a} -> {b} is not allowed: `{}` is in the layer \
                     `{b}` ({a} may use: {})",
                    target.join("::"),
                    table[a].iter().copied().collect::<Vec<_>>().join(", ")
                )
                .unwrap();
            }
        }
    }
    wrong
}

#[test]
fn the_table_is_one_way_and_names_every_module_of_lib_rs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    // A module, or a crate of the workspace under a module's name
    // (`pub use lockcheck_check as check;`): its crate's dependencies keep it in
    // its layer (tests/checker_deps.rs).
    let declared: BTreeSet<&str> = lib
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            l.strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("mod "))
                .or_else(|| {
                    l.strip_prefix("pub use lockcheck_")
                        .and_then(|l| l.split_once(" as "))
                        .map(|(_, name)| name)
                })
        })
        .map(|l| l.trim_end_matches(';').trim())
        .collect();
    // And the crates that give several modules under their own names
    // (`pub use lockcheck_servers::{backend, backends, cluster};`).
    let grouped = grouped_re_exports(&lib);
    let declared: BTreeSet<&str> = declared
        .into_iter()
        .chain(
            grouped
                .iter()
                .flat_map(|(_, ms)| ms.iter().map(String::as_str)),
        )
        .collect();
    let table = table();
    let listed: BTreeSet<&str> = table.keys().copied().collect();
    assert!(
        declared.contains(FOLDERS),
        "src/lib.rs declares no {FOLDERS}"
    );
    let declared: BTreeSet<&str> = declared.into_iter().filter(|m| *m != FOLDERS).collect();
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

/// docs/architecture.md places the backends' files as [`layer_of`] does: a row
/// for the server recipe's files, in [`SERVER_SIDE`], and one for every other
/// file of a folder, in [`CLIENT_SIDE`].
#[test]
fn docs_architecture_places_the_backends_files_as_the_test_does() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    // Rows like: | crates/lockcheck-servers/src/backends/<backend>/server.rs, ... | `cluster` |
    let rows: Vec<(bool, String)> = doc
        .lines()
        .filter(|l| l.starts_with(&format!("| {FOLDERS_DIR}/")))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let layer = cells[2].trim_matches('`').to_string();
            (cells[1].contains("/server"), layer)
        })
        .collect();
    let want = vec![
        (true, SERVER_SIDE.to_string()),
        (false, CLIENT_SIDE.to_string()),
    ];
    assert_eq!(
        rows,
        want,
        "{}'s rows for {FOLDERS_DIR}/ against layer_of in tests/layers.rs",
        path.display()
    );
    let src: Vec<String> = ["backends", "redis", "server", "sentinel"]
        .map(String::from)
        .into();
    assert_eq!(layer_of(&src), Some(SERVER_SIDE));
    assert_eq!(layer_of(&src[..3]), Some(SERVER_SIDE));
    let client: Vec<String> = ["backends", "etcd", "client"].map(String::from).into();
    assert_eq!(layer_of(&client), Some(CLIENT_SIDE));
    assert_eq!(layer_of(&client[..2]), None);
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
    let _ = lockcheck_journal::Journal::for_run(d);
    let _ = lockcheck_servers::{cluster::Runtime, backend};
}
"##;
    // As src/cli/audit.rs: two modules below the crate root.
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
        (30, "journal"),
        (31, "cluster"),
        (31, "backend"),
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

/// A module below the crate root, as its path: `["cluster", "local"]`.
type ModPath = Vec<String>;

/// Every file of the library (the binaries stand apart: they are crates of their
/// own) by the module it is: src/cluster/local.rs is `cluster::local`,
/// src/cluster/mod.rs is `cluster`, src/lib.rs the root; under each of `roots`
/// ([`library_roots`]), whose first is src/ and whose crate roots give way to it.
fn library_files(roots: &[PathBuf]) -> BTreeMap<ModPath, PathBuf> {
    let mut files = BTreeMap::new();
    for (src, f) in library_sources(roots) {
        let Some((module, f)) = library_file(&src, f) else {
            continue;
        };
        if module.is_empty() && src != roots[0] {
            continue;
        }
        files.insert(module, f);
    }
    files
}

/// The module a file of `src` is, if it is the library's.
fn library_file(src: &Path, f: PathBuf) -> Option<(ModPath, PathBuf)> {
    let rel = f.strip_prefix(src).unwrap().to_path_buf();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts[0] == "bin" || parts == ["main"] {
        return None;
    }
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    Some((parts, f))
}

/// One use tree (or one path of code) from token `k` on, each of its leaves pushed
/// onto `out` as a full path from `prefix`; returns the token after it.
fn use_tree(
    t: &[(String, usize)],
    mut k: usize,
    prefix: &[String],
    out: &mut Vec<ModPath>,
) -> usize {
    let ident = |s: &str| {
        s.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
    };
    let mut segs = prefix.to_vec();
    while let Some((tok, _)) = t.get(k) {
        if tok == "{" {
            k += 1;
            while t.get(k).is_some_and(|x| x.0 != "}") {
                k = use_tree(t, k, &segs, out);
                if t.get(k).is_some_and(|x| x.0 == ",") {
                    k += 1;
                }
            }
            return k + 1;
        }
        if !ident(tok) && tok != "*" {
            break;
        }
        // `self` in a group names the group's module; `*` all of it.
        if tok != "self" && tok != "*" {
            segs.push(tok.clone());
        }
        k += 1;
        if t.get(k).is_some_and(|x| x.0 == "::") {
            k += 1;
            continue;
        }
        break;
    }
    out.push(segs);
    if t.get(k).is_some_and(|x| x.0 == "as") {
        k += 2;
    }
    k
}

/// The modules `text` (the file of `module`) names, each with the line: every path
/// from `crate::`, `super::` or `self::`, and from one of the file's own child
/// modules (`local::NodeSpec` in cluster/mod.rs), each leaf of a `use` group apart.
/// A re-export is an import like any other: `pub use local::NodeSpec` in
/// cluster/mod.rs makes cluster/mod.rs import cluster/local.rs.
fn named_paths(text: &str, module: &ModPath, children: &BTreeSet<String>) -> Vec<(usize, ModPath)> {
    let (code, _) = blank(text);
    let t = tokens(&code);
    let mut out = Vec::new();
    // The module each point of the file is in: inline `mod x { .. }` blocks nest.
    let mut here = module.clone();
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
                    here.pop();
                }
            }
            "mod" if next(2) == "{" => {
                inline.push(braces);
                here.push(next(1).to_string());
            }
            _ => {}
        }
        if (k > 0 && t[k - 1].0 == "::") || next(1) != "::" {
            continue;
        }
        let (base, from) = match tok {
            "crate" => (Vec::new(), k + 2),
            "self" => (here.clone(), k + 2),
            "super" => {
                let mut base = here.clone();
                let mut j = k;
                while t.get(j).is_some_and(|x| x.0 == "super")
                    && t.get(j + 1).is_some_and(|x| x.0 == "::")
                {
                    base.pop();
                    j += 2;
                }
                (base, j)
            }
            name if inline.is_empty() && children.contains(name) => (here.clone(), k),
            _ => continue,
        };
        let mut paths = Vec::new();
        use_tree(&t, from, &base, &mut paths);
        out.extend(paths.into_iter().map(|p| (t[k].1, p)));
    }
    out
}

/// The file a path leads to: the deepest module of it that is a file
/// (`crate::cluster::local::NodeSpec` is cluster/local.rs; `crate::cluster::Runtime`
/// cluster/mod.rs, which defines or re-exports it).
fn file_of<'a>(files: &'a BTreeMap<ModPath, PathBuf>, path: &[String]) -> Option<&'a ModPath> {
    (0..=path.len())
        .rev()
        .find_map(|n| files.get_key_value(&path[..n]).map(|(k, _)| k))
}

/// Each file's imports of other files: to the file, the first line that names it.
fn file_imports(roots: &[PathBuf]) -> BTreeMap<ModPath, BTreeMap<ModPath, usize>> {
    let files = library_files(roots);
    let mut graph = BTreeMap::new();
    for (module, file) in &files {
        let children: BTreeSet<String> = files
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
            .map(|m| m.last().unwrap().clone())
            .collect();
        let text = std::fs::read_to_string(file).unwrap();
        let mut to: BTreeMap<ModPath, usize> = BTreeMap::new();
        for (line, path) in named_paths(&text, module, &children) {
            if let Some(target) = file_of(&files, &path).filter(|t| *t != module) {
                to.entry(target.clone()).or_insert(line);
            }
        }
        graph.insert(module.clone(), to);
    }
    graph
}

/// The groups of files that import each other around a loop (the strongly
/// connected components of more than one file), each sorted, by Tarjan.
fn file_cycles(graph: &BTreeMap<ModPath, BTreeMap<ModPath, usize>>) -> Vec<Vec<ModPath>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<ModPath, BTreeMap<ModPath, usize>>,
        index: BTreeMap<&'a ModPath, (usize, usize)>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a ModPath) {
            let n = self.index.len();
            self.index.insert(v, (n, n));
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph[v].keys() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.index[w].1.min(self.index[v].1);
                    self.index.get_mut(v).unwrap().1 = low;
                } else if self.on_stack.contains(w) {
                    let low = self.index[w].0.min(self.index[v].1);
                    self.index.get_mut(v).unwrap().1 = low;
                }
            }
            if self.index[v].0 == self.index[v].1 {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    group.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.out.push(group);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.out.sort();
    walk.out
}

fn shown(module: &ModPath) -> String {
    if module.is_empty() {
        "lib".into()
    } else {
        module.join("::")
    }
}

/// File-level cycles that work in flight removes, tolerated while they last (none
/// now: the audit's decide and scorecard share audit/card.rs); delete a line once
/// its cycle is gone.
const PENDING_CYCLES: &[&[&str]] = &[];

/// No file imports another that imports it back, directly or around a loop: each
/// folder has files at its base that import none of their siblings' users, so a
/// reader (and a change) can start from them.
#[test]
fn no_file_imports_itself_around_a_loop() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let roots = library_roots(root);
    let mut graph = file_imports(&roots);
    // The workspace's other crates, each under the module name src/lib.rs gives
    // it (crates/lockcheck-check is `check`): a crate's files import each other
    // as a module's do; between crates, Cargo allows no loop.
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let dir = entry.unwrap().path().join("src");
        if roots.contains(&dir) {
            continue;
        }
        let name = dir
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let module = name.trim_start_matches("lockcheck-").to_string();
        let under = |m: ModPath| -> ModPath { std::iter::once(module.clone()).chain(m).collect() };
        for (from, to) in file_imports(std::slice::from_ref(&dir)) {
            let to = to.into_iter().map(|(t, line)| (under(t), line)).collect();
            graph.insert(under(from), to);
        }
    }
    let edges: usize = graph.values().map(BTreeMap::len).sum();
    assert!(
        graph.len() > 150 && edges > 300,
        "only {} files and {edges} imports: the parser is broken",
        graph.len()
    );
    let mut wrong = String::new();
    for group in file_cycles(&graph) {
        let names: Vec<String> = group.iter().map(shown).collect();
        if PENDING_CYCLES
            .iter()
            .any(|p| p.iter().copied().eq(names.iter().map(String::as_str)))
        {
            continue;
        }
        writeln!(wrong, "a cycle of {} files:", group.len()).unwrap();
        for from in &group {
            for (to, line) in &graph[from] {
                if group.contains(to) {
                    writeln!(wrong, "  {} (line {line}) -> {}", shown(from), shown(to)).unwrap();
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "files that import each other (move what both need into a file below them):\n{wrong}"
    );
}

#[test]
fn the_file_reader_resolves_groups_supers_children_and_re_exports() {
    let files: BTreeMap<ModPath, PathBuf> = [
        "",
        "cluster",
        "cluster::local",
        "cluster::plan",
        "cluster::ssh",
        "cluster::ssh::node",
        "history",
    ]
    .iter()
    .map(|m| {
        let path: ModPath = m
            .split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        (path, PathBuf::new())
    })
    .collect();
    let text = r#"//! crate::history in a comment names nothing.
pub use local::LocalCluster;
use self::plan::{ClusterSpec, NodeSpec as Spec};
use crate::{history::{self, Op}, cluster::ssh::node};
fn f() { let s = "crate::history"; super::history::f(); }
mod tests {
    use super::*;
    use super::plan::NodeSpec;
    fn g() { local::x(); }
}
"#;
    let module: ModPath = vec!["cluster".into()];
    let children: BTreeSet<String> = ["local", "plan", "ssh"].map(String::from).into();
    let got: Vec<(usize, String)> = named_paths(text, &module, &children)
        .into_iter()
        .map(|(line, p)| (line, shown(file_of(&files, &p).unwrap())))
        .collect();
    let want: Vec<(usize, String)> = [
        (2, "cluster::local"),
        (3, "cluster::plan"),
        (3, "cluster::plan"),
        (4, "history"),
        (4, "history"),
        (4, "cluster::ssh::node"),
        (5, "history"),
        (7, "cluster"),
        (8, "cluster::plan"),
    ]
    .into_iter()
    .map(|(l, m)| (l, m.to_string()))
    .collect();
    assert_eq!(got, want);
    // Two files around a loop, and one file on its own, give one group of two.
    let m = |s: &str| -> ModPath { s.split("::").map(String::from).collect() };
    let graph: BTreeMap<ModPath, BTreeMap<ModPath, usize>> = [
        (m("a"), BTreeMap::from([(m("b"), 1)])),
        (m("b"), BTreeMap::from([(m("c"), 1)])),
        (m("c"), BTreeMap::from([(m("a"), 1)])),
        (m("d"), BTreeMap::from([(m("a"), 1)])),
    ]
    .into();
    assert_eq!(file_cycles(&graph), vec![vec![m("a"), m("b"), m("c")]]);
}

/// The longest a function of src/ may be, from its `fn` line to its closing brace.
const MAX_FN_LINES: usize = 120;
/// The longest a file of src/ may be.
const MAX_FILE_LINES: usize = 1200;

/// Functions over the limit that work in flight shortens, tolerated while they
/// last: (file, function). None now: the audit's render table is split.
const PENDING_LONG: &[(&str, &str)] = &[];

/// Every function with a body in `text`: its name, its first line and how many
/// lines it spans (its `fn` line to its closing brace), by matching braces in the
/// blanked source (so braces in strings, characters and comments do not count).
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let (code, _) = blank(text);
    let t = tokens(&code);
    let mut out = Vec::new();
    for k in 0..t.len() {
        if t[k].0 != "fn"
            || !t
                .get(k + 1)
                .is_some_and(|x| x.0.chars().all(|c| c.is_alphanumeric() || c == '_'))
        {
            continue;
        }
        // The body opens at the first `{` before any `;` (a declaration has none).
        let Some(open) = (k + 2..t.len()).find(|&j| t[j].0 == "{" || t[j].0 == ";") else {
            continue;
        };
        if t[open].0 == ";" {
            continue;
        }
        let mut depth = 0;
        for (tok, line) in &t[open..] {
            match tok.as_str() {
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if depth == 0 {
                        out.push((t[k + 1].0.clone(), t[k].1, line - t[k].1 + 1));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Short functions and files: a function of src/ spans at most 120 lines, a file
/// at most 1,200; past that, split it where its steps are.
#[test]
fn no_function_over_120_lines_and_no_file_over_1200() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("crates"), &mut files);
    files.sort();
    let mut wrong = String::new();
    let mut seen = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let shown = file.strip_prefix(root).unwrap().display().to_string();
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            writeln!(wrong, "{shown}: {lines} lines (at most {MAX_FILE_LINES})").unwrap();
        }
        for (name, line, span) in functions(&text) {
            seen += 1;
            if span > MAX_FN_LINES && !PENDING_LONG.contains(&(shown.as_str(), name.as_str())) {
                writeln!(
                    wrong,
                    "{shown}:{line}: fn {name} spans {span} lines (at most {MAX_FN_LINES})"
                )
                .unwrap();
            }
        }
    }
    assert!(
        seen > 1000,
        "only {seen} functions found: the scan is broken"
    );
    assert!(wrong.is_empty(), "too long:\n{wrong}");
}

#[test]
fn the_function_scan_counts_bodies_not_braces_in_text() {
    let text = "trait T {\n    fn declared(&self);\n}\nfn short() {\n    let s = \"}}}\";\n    let c = '{';\n    // }\n}\nfn generic<T: Into<u8>>(t: T) -> u8\nwhere\n    T: Copy,\n{\n    if true {\n        t.into()\n    } else {\n        0\n    }\n}\n";
    assert_eq!(
        functions(text),
        vec![("short".to_string(), 4, 5), ("generic".to_string(), 9, 10)]
    );
}
