//! Shared by the tests that hold documentation to the code: the repository's files,
//! the `lockcheck ...` command lines of a page's code, the binary's `--help`, and
//! pages generated from the code (compared, or rewritten with `LOCKCHECK_BLESS=1`).
#![allow(dead_code)] // each test binary uses its own part of this module

use std::path::Path;
use std::process::{Command, Output};

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn read(rel: &str) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn lockcheck() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockcheck"))
}

/// `lockcheck ARGS`' standard output; the command must succeed.
pub fn help(args: &[&str]) -> String {
    let out = lockcheck().args(args).output().unwrap();
    assert!(out.status.success(), "lockcheck {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands `lockcheck --help` lists, but `help` and the hidden `worker`.
pub fn listed_subcommands() -> Vec<String> {
    let top = help(&["--help"]);
    let listed: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| !["help", "worker"].contains(c))
        .map(String::from)
        .collect();
    assert!(listed.len() >= 8, "{top}");
    listed
}

/// One `lockcheck ...` line of a page's code: its line number (from 1) and the
/// words after the program, up to a `#` comment or the end of the shell command.
#[derive(Debug)]
pub struct CommandLine {
    pub line: usize,
    pub args: Vec<String>,
}

impl CommandLine {
    pub fn subcommand(&self) -> &str {
        &self.args[0]
    }

    /// The long flags it uses (`--junit`, not its value).
    pub fn flags(&self) -> Vec<String> {
        self.args
            .iter()
            .filter_map(|w| w.trim_start_matches('[').strip_prefix("--"))
            .map(|f| format!("--{}", f.split(['=', ']']).next().unwrap_or("")))
            .collect()
    }
}

/// The `lockcheck SUBCOMMAND ...` lines of `page`'s code (fenced blocks and
/// indented lines), as `command_args` reads them.
pub fn command_lines(page: &str) -> Vec<CommandLine> {
    let mut found = Vec::new();
    let mut in_code = false;
    for (i, line) in page.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !(in_code || line.starts_with("    ")) {
            continue;
        }
        if let Some(args) = command_args(line) {
            found.push(CommandLine { line: i + 1, args });
        }
    }
    found
}

/// The words after the program if `line` (of a page's code, or of a shell script)
/// runs `lockcheck SUBCOMMAND`: its first word is `lockcheck` or a path to it, or,
/// in a CI job's YAML, the first word after `run:`.
pub fn command_args(line: &str) -> Option<Vec<String>> {
    let mut words = line.split_whitespace().peekable();
    if words.peek() == Some(&"-") {
        words.next();
    }
    if words.peek() == Some(&"run:") {
        words.next();
    }
    if !words.next().is_some_and(|w| w.ends_with("lockcheck")) {
        return None;
    }
    // The shell command ends at a comment, a pipe, a redirection or the next command.
    let args: Vec<String> = words
        .take_while(|w| !["#", "|", "||", "&&", ";", ">", "2>", ">>", "\\"].contains(w))
        .map(String::from)
        .collect();
    args.first()
        .is_some_and(|sub| !sub.starts_with('-'))
        .then_some(args)
}

/// Holds `rel` (a page generated from the code) to `fresh`: with
/// `LOCKCHECK_BLESS=1` it is rewritten, else a stale page fails with the first
/// line that differs and the command that rewrites it.
pub fn generated_page(rel: &str, fresh: &str, test: &str) {
    let path = root().join(rel);
    if std::env::var_os("LOCKCHECK_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, fresh).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    if stored == fresh {
        return;
    }
    let differs = stored
        .lines()
        .zip(fresh.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(stored.lines().count().min(fresh.lines().count()));
    panic!(
        "{rel} is stale (first difference at line {}):\n  stored:    {:?}\n  generated: {:?}\n\
         rewrite it with: LOCKCHECK_BLESS=1 cargo test --test {test}",
        differs + 1,
        stored.lines().nth(differs).unwrap_or("(end of file)"),
        fresh.lines().nth(differs).unwrap_or("(end of file)"),
    );
}

/// `lockcheck ARGS` run in `dir`.
pub fn run_in(dir: &Path, args: &[String]) -> Output {
    lockcheck().args(args).current_dir(dir).output().unwrap()
}
