//! What the names tests share (`backend_names.rs`, `fault_names.rs`): code read
//! without its comments and test modules, and every file under a folder.

#![allow(dead_code)] // each test binary uses its own part of this module

use std::path::{Path, PathBuf};

/// Rust source with its comments blanked (strings kept; lines kept) and its test
/// module cut off.
pub fn rust_code(text: &str) -> String {
    // The inline test module: `#[cfg(test)]` then `mod tests {` (a `mod tests;`
    // declaration is a file of its own, tests.rs).
    let inline = text.match_indices("#[cfg(test)]").find(|(at, attr)| {
        let rest = text[at + attr.len()..].trim_start();
        let (open, end) = (rest.find('{'), rest.find(';'));
        rest.starts_with("mod ") && matches!((open, end), (Some(o), e) if e.is_none_or(|e| o < e))
    });
    let text = match inline {
        Some((at, _)) => &text[..at],
        None => text,
    };
    let c: Vec<char> = text.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            while i < c.len() && !(c[i] == '*' && at(i + 1) == '/') {
                if c[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else if ch == '\'' && (at(i + 2) == '\'' || (at(i + 1) == '\\' && at(i + 3) == '\'')) {
            // A character literal ('"', '\n'): no string opens there.
            let len = if at(i + 1) == '\\' { 4 } else { 3 };
            out.extend(&c[i..(i + len).min(c.len())]);
            i += len;
        } else if ch == '"' || (ch == 'r' && (at(i + 1) == '"' || at(i + 1) == '#')) {
            // A string, raw or not, to its end: kept, comments inside it are text.
            let hashes = if ch == 'r' {
                let mut h = 0;
                while at(i + 1 + h) == '#' {
                    h += 1;
                }
                if at(i + 1 + h) != '"' {
                    out.push(ch);
                    i += 1;
                    continue;
                }
                out.extend(&c[i..i + 2 + h]);
                i += 2 + h;
                Some(h)
            } else {
                out.push(ch);
                i += 1;
                None
            };
            while i < c.len() {
                let close = match hashes {
                    Some(h) => c[i] == '"' && (1..=h).all(|k| at(i + k) == '#'),
                    None => c[i] == '"',
                };
                if hashes.is_none() && c[i] == '\\' {
                    out.extend(&c[i..(i + 2).min(c.len())]);
                    i += 2;
                    continue;
                }
                out.push(c[i]);
                i += 1;
                if close {
                    let h = hashes.unwrap_or(0);
                    out.extend(&c[i..(i + h).min(c.len())]);
                    i += h;
                    break;
                }
            }
        } else {
            out.push(ch);
            i += 1;
        }
    }
    out
}

/// Each word of `code` (letters, digits, `_`, `-`; outer `-` trimmed) with its
/// line number and the text before and after it on its line, for a test to say
/// which words name a thing. `mod x;` declarations are skipped: a module is
/// declared where it lives.
pub fn words(code: &str) -> Vec<(usize, &str, &str, &str)> {
    let word = |ch: char| ch.is_alphanumeric() || ch == '_' || ch == '-';
    let mut found = Vec::new();
    for (i, line) in code.lines().enumerate() {
        let t = line.trim_start();
        let declaration = t
            .trim_start_matches("pub ")
            .trim_start_matches("pub(crate) ");
        if declaration.starts_with("mod ") && t.ends_with(';') {
            continue;
        }
        let mut at = 0;
        for token in line.split(|ch: char| !word(ch)) {
            let start = line[at..].find(token).map_or(at, |p| at + p);
            at = start + token.len();
            found.push((i + 1, token.trim_matches('-'), &line[..start], &line[at..]));
        }
    }
    found
}

/// A script with its comments cut: a `#` that starts a word starts a comment.
pub fn script_code(text: &str) -> String {
    text.lines()
        .map(|line| {
            let cut = line
                .char_indices()
                .find(|&(i, ch)| ch == '#' && (i == 0 || line[..i].ends_with(char::is_whitespace)))
                .map_or(line.len(), |(i, _)| i);
            &line[..cut]
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every file under `dir`, into `out`.
pub fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}
