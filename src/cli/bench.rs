//! `lockcheck bench`: times the checker on the Porcupine and Knossos corpora (and on
//! a lock history, given one) and prints the figures: wall time, verdicts against
//! the corpus's `expected.tsv`, and the peak memory of the process. The corpora ship
//! in the repository (`fixtures/corpus`, with their licences and sources).

use crate::check::choice::{check_file, CheckError, ModelKind, Options};
use crate::check::models::kv;
use crate::check::{Limits, Validity};
use crate::history::import::{self, Format};
use crate::history::{History, HistoryError};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The corpus folder (holding porcupine/ and knossos/); default: $LOCKCHECK_CORPUS,
    /// else fixtures/corpus (the shipped set, from the repository's root).
    #[arg(long, value_name = "DIR")]
    pub corpus: Option<PathBuf>,
    /// Also time the lock checker on this lock history.
    #[arg(long, value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// Per-key time limit for the kv keys, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub time_limit: f64,
}

/// The environment variable naming the corpus folder.
pub const CORPUS_ENV: &str = "LOCKCHECK_CORPUS";

/// The shipped corpora, from the repository's root.
pub const SHIPPED_CORPUS: &str = "fixtures/corpus";

/// The corpora's folders; a corpus holds both.
pub const CORPORA: [&str; 2] = ["porcupine", "knossos"];

/// Where the corpora are, in the documented places only: `explicit` (`--corpus`),
/// else `$LOCKCHECK_CORPUS`, else the shipped set under `root` (the repository's
/// root). A place named (by the flag or the variable) is the only one looked at:
/// a typo never falls through to some other corpus. The error says where it
/// looked, what is missing there and how to name another place.
pub fn find_corpus(explicit: Option<&Path>, root: &Path) -> Result<PathBuf> {
    let (dir, how) = match (explicit, std::env::var_os(CORPUS_ENV)) {
        (Some(dir), _) => (dir.to_path_buf(), "named by --corpus"),
        (None, Some(dir)) => (PathBuf::from(dir), "named by $LOCKCHECK_CORPUS"),
        (None, None) => (root.join(SHIPPED_CORPUS), "the shipped set"),
    };
    let missing: Vec<&str> = CORPORA
        .into_iter()
        .filter(|c| !dir.join(c).is_dir())
        .collect();
    if missing.is_empty() {
        return Ok(dir);
    }
    anyhow::bail!(
        "no corpus at {} ({how}): {} missing; run from the repository's root \
         (the shipped set is {SHIPPED_CORPUS}) or name one with --corpus DIR or ${CORPUS_ENV}",
        dir.display(),
        missing
            .iter()
            .map(|c| format!("{c}/"))
            .collect::<Vec<_>>()
            .join(" and ")
    )
}

/// One row of a corpus's `expected.tsv`: file, model, expected verdict (`None`
/// where the source asserts none: `-`).
pub fn expected(dir: &Path) -> Result<Vec<(PathBuf, String, Option<bool>)>> {
    let tsv = dir.join("expected.tsv");
    let text =
        std::fs::read_to_string(&tsv).with_context(|| format!("reading {}", tsv.display()))?;
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            let cols: Vec<&str> = l.split('\t').collect();
            match cols[..] {
                [file, model, verdict, ..] if ["ok", "illegal", "-"].contains(&verdict) => Ok((
                    dir.join(file),
                    model.to_string(),
                    (verdict != "-").then_some(verdict == "ok"),
                )),
                _ => anyhow::bail!(
                    "{}:{}: expected file, model, ok|illegal|-",
                    tsv.display(),
                    i + 2
                ),
            }
        })
        .collect()
}

/// Peak resident memory of this process so far, in MiB.
pub fn peak_rss_mib() -> f64 {
    // SAFETY: getrusage only writes into the struct we hand it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return f64::NAN;
    }
    ru.ru_maxrss as f64 / 1024.0
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

pub fn main(args: Args) -> Result<u8> {
    let cwd = std::env::current_dir()?;
    let corpus = find_corpus(args.corpus.as_deref(), &cwd)?;
    let limits = Limits {
        time: Duration::from_secs_f64(args.time_limit),
        ..Limits::default()
    };
    let mut wrong = 0;
    println!("corpus: {}", corpus.display());

    // Porcupine's etcd logs, one after the other, as Porcupine's tests run them.
    let porcupine = corpus.join("porcupine");
    let rows = expected(&porcupine)?;
    let etcd: Vec<_> = rows.iter().filter(|r| r.1 == "etcd").cloned().collect();
    wrong += time_rows("porcupine etcd", &etcd)?;

    // Porcupine's kv logs: the whole file (keys in parallel), then each key alone.
    for name in ["c50-ok.txt", "c50-bad.txt"] {
        let file = porcupine.join("kv").join(name);
        let t = Instant::now();
        let c = check_file(&file, &Options::default())?;
        println!(
            "kv {name}: {:?} in {} (all keys, in parallel)",
            c.verdict.valid,
            ms(t.elapsed())
        );
        let (history, _) = import::read(&file, Some(Format::PorcupineKv))?;
        let mut per_key = Vec::new();
        for (key, h) in split_by_key(&history) {
            let t = Instant::now();
            let v = kv::check(
                &h,
                &Limits {
                    threads: 1,
                    ..limits
                },
            )?;
            per_key.push(format!("\"{key}\" {:?} {}", v.valid, ms(t.elapsed())));
        }
        println!("  per key: {}", per_key.join(", "));
    }

    // Knossos's histories, every one against its default model.
    wrong += time_rows("knossos", &expected(&corpus.join("knossos"))?)?;

    if let Some(lock) = &args.lock {
        let t = Instant::now();
        let c = check_file(
            lock,
            &Options {
                model: Some(ModelKind::Lock),
                limits,
                ..Options::default()
            },
        )?;
        println!(
            "lock {}: {} ops, {:?} (anomalies: {}) in {}",
            lock.display(),
            c.ops,
            c.verdict.valid,
            c.verdict.anomalies.len(),
            ms(t.elapsed())
        );
    }
    println!("peak memory (maxrss): {:.1} MiB", peak_rss_mib());
    if wrong > 0 {
        println!("{wrong} verdicts differ from expected.tsv");
        return Ok(crate::exit::ANOMALIES);
    }
    Ok(crate::exit::VALID)
}

/// Checks each file with the defaults `check` picks, one after the other, and
/// prints the total time and the slowest files; returns how many verdicts differ
/// from the expected ones.
fn time_rows(label: &str, rows: &[(PathBuf, String, Option<bool>)]) -> Result<usize> {
    let mut wrong = 0;
    let mut times = Vec::new();
    let start = Instant::now();
    for (file, _, ok) in rows {
        let t = Instant::now();
        let c = match check_file(file, &Options::default()) {
            Ok(c) => c,
            // No client op (an empty log, nemesis ops only): no verdict to time
            // (spec v1.1), where the peers call it trivially valid.
            Err(CheckError::History(HistoryError::NoOperations { .. })) => {
                println!("  {}: no operations, no verdict", file.display());
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        times.push((t.elapsed(), file));
        if ok.is_some_and(|ok| (c.verdict.valid == Validity::Valid) != ok) {
            wrong += 1;
            println!("  MISMATCH {}: {:?}", file.display(), c.verdict.valid);
        }
    }
    let total = start.elapsed();
    times.sort_by_key(|t| std::cmp::Reverse(t.0));
    let slowest: Vec<String> = times
        .iter()
        .take(3)
        .map(|(d, f)| {
            format!(
                "{} {}",
                f.file_name().unwrap_or_default().to_string_lossy(),
                ms(*d)
            )
        })
        .collect();
    println!(
        "{label}: {} files in {} (read + check, one after the other; slowest: {})",
        rows.len(),
        ms(total),
        slowest.join(", ")
    );
    Ok(wrong)
}

/// A kv history cut into one history per key (indexes kept: they name the ops).
fn split_by_key(h: &History) -> Vec<(String, History)> {
    let mut keys: std::collections::BTreeMap<String, History> = Default::default();
    for op in &h.ops {
        let key = op
            .value
            .get("key")
            .map(|k| k.as_str().map_or(k.to_string(), str::to_string));
        if let Some(key) = key {
            keys.entry(key).or_default().ops.push(op.clone());
        }
    }
    keys.into_iter().collect()
}
