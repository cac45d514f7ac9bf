//! The audit's directory as it is published: audit.json, audit.xml and
//! audit.html, written after every run and at the end, every path in them
//! relative to the directory (so it can be copied into docs/audits or merged).

use super::render;
use super::scorecard::Scorecard;
use anyhow::{Context, Result};

pub const JSON_FILE: &str = "audit.json";
pub const JUNIT_FILE: &str = "audit.xml";
pub const HTML_FILE: &str = "audit.html";

/// Writes the scorecard into its directory: audit.json, audit.xml, audit.html
/// (again after `--shrink` added the shrunk counterexamples).
pub fn publish(card: &Scorecard) -> Result<()> {
    // Written aside and renamed: an audit killed while writing (it writes
    // after every run) leaves the last whole scorecard, which `--resume` reads.
    let write = |name: &str, text: String| {
        let path = card.dir.join(name);
        let aside = card.dir.join(format!(".{name}.partial"));
        std::fs::write(&aside, text)
            .and_then(|()| std::fs::rename(&aside, &path))
            .with_context(|| format!("writing {}", path.display()))
    };
    write(JSON_FILE, published(card)?)?;
    write(JUNIT_FILE, render::junit(card))?;
    write(HTML_FILE, render::html(card))
}

/// audit.json as it is published: every path inside the audit's directory
/// relative to it, and the directory by its name alone, so that a scorecard copied
/// elsewhere (docs/audits) names nothing of the machine it ran on and its runs are
/// found beside it. (`--json` on stdout keeps absolute paths, for the caller.)
fn published(card: &Scorecard) -> Result<String> {
    // The adapter's command as it was given: the audit made the paths in it that
    // exist here absolute, for the scenarios' workloads.
    let given;
    let card = match (&card.client, std::env::current_dir()) {
        (Some(words), Ok(here)) => {
            given = Scorecard {
                client: Some(as_given(words, &here)),
                ..card.clone()
            };
            &given
        }
        _ => card,
    };
    let mut v = serde_json::to_value(card)?;
    let name = card
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    relative_to(&mut v, &card.dir.display().to_string(), &name);
    Ok(serde_json::to_string_pretty(&v)? + "\n")
}

/// Each word that is a path below `here` by its path from `here`.
fn as_given(words: &[String], here: &std::path::Path) -> Vec<String> {
    let here = here.canonicalize().unwrap_or_else(|_| here.to_path_buf());
    words
        .iter()
        .map(|w| match std::path::Path::new(w).strip_prefix(&here) {
            Ok(rest) => rest.display().to_string(),
            Err(_) => w.clone(),
        })
        .collect()
}

/// Every mention of `dir` in the scorecard's strings (a run's directory, a
/// counterexample named in an evidence sentence): what is inside it by its path
/// from it, the directory itself by its `name`.
fn relative_to(v: &mut serde_json::Value, dir: &str, name: &str) {
    use serde_json::Value;
    match v {
        Value::String(s) if s.contains(dir) => {
            *s = s.replace(&format!("{dir}/"), "").replace(dir, name);
        }
        Value::Array(a) => a.iter_mut().for_each(|x| relative_to(x, dir, name)),
        Value::Object(o) => o.values_mut().for_each(|x| relative_to(x, dir, name)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::{as_given, published};
    use crate::scorecard;
    use std::path::Path;

    /// Every published scorecard reads (formats 2 and 3), and one of the current
    /// format is written back as it was: the same JSON, laid out the same (its
    /// text as serde_json reads and writes it again: its reader may take a float
    /// to its neighbour, `0.10304568726144975` read and written is `…976`).
    #[test]
    fn every_published_scorecard_reads_and_one_of_this_format_is_written_as_it_was() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/audits");
        let mut current = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let card = scorecard::read(&path).unwrap();
            let was: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            if was["format"] != crate::provenance::FORMAT {
                continue;
            }
            current += 1;
            let written = published(&card).unwrap();
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(&written).unwrap(),
                was,
                "{}",
                path.display()
            );
            assert_eq!(
                written,
                serde_json::to_string_pretty(&was).unwrap() + "\n",
                "{}",
                path.display()
            );
        }
        assert!(
            current > 0,
            "no scorecard of this format in {}",
            dir.display()
        );
    }

    #[test]
    fn a_published_client_command_names_no_path_of_this_machine_below_here() {
        let words = [
            "/w/repo/clients/go/run",
            "etcd-concurrency",
            "/usr/bin/python3",
        ]
        .map(String::from);
        assert_eq!(
            as_given(&words, Path::new("/w/repo")),
            ["clients/go/run", "etcd-concurrency", "/usr/bin/python3"]
        );
    }
}
