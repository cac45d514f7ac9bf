//! A bounded-time mutational fuzzer for lockcheck's readers, on the stable toolchain
//! (cargo-fuzz needs nightly's sanitizers): the JSONL reader, the Jepsen EDN
//! importer, the Porcupine importers and the workload parser. `scripts/fuzz [SECONDS]`
//! runs it; it is not part of the test suite.
//!
//!     cargo run --release --example fuzz -- --seconds 60 [--target jsonl] [--corpus DIR]
//!
//! Each target runs in a child process of its own (a stack overflow or an abort is
//! a crash, never the end of the fuzzer), under a 2 GiB address-space limit (a
//! blow-up is a crash, not the machine's memory). The child mutates seed inputs
//! (bit flips, bytes, splices, repeated brackets, tokens of the format) and keeps an
//! input that shows a new outcome (a new kind of error, or a new verdict), as a
//! cheap stand-in for coverage. A crash is a panic, a signal, a hang past 10 s, or,
//! for JSONL, the fast reading and the full parse disagreeing. Each crashing input
//! is saved under `target/fuzz/TARGET/`. Printed per target: executions, crashes,
//! peak memory.

use anyhow::{Context, Result};
use clap::Parser;
use lockcheck::history::import::{self, Format};
use lockcheck::history::{parse_jsonl, read_jsonl_from, read_resource_from, Input};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// Seconds per target.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Only this target (jsonl, edn, porcupine, workload).
    #[arg(long)]
    target: Option<String>,
    /// Another directory of seed inputs (read recursively; e.g. the shared corpus).
    #[arg(long)]
    corpus: Vec<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run as the child for one target (internal).
    #[arg(long, hide = true)]
    child: bool,
}

const TARGETS: [&str; 4] = ["jsonl", "edn", "porcupine", "workload"];

fn main() -> Result<()> {
    let args = Args::parse();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if args.child {
        let target = args.target.as_deref().context("--child needs --target")?;
        return child(target, &args, root);
    }
    let targets: Vec<&str> = match &args.target {
        Some(t) => vec![t.as_str()],
        None => TARGETS.to_vec(),
    };
    println!(
        "{:<10} {:>12} {:>8} {:>8} {:>12}",
        "target", "executions", "crashes", "corpus", "peak MiB"
    );
    let mut crashed = 0;
    for target in targets {
        let r = parent(target, &args)?;
        crashed += r.crashes;
        println!(
            "{:<10} {:>12} {:>8} {:>8} {:>12.1}",
            target,
            r.execs,
            r.crashes,
            r.corpus,
            r.peak_kib as f64 / 1024.0
        );
    }
    if crashed > 0 {
        println!(
            "crashing inputs are in {}",
            root.join("target/fuzz").display()
        );
        std::process::exit(1);
    }
    Ok(())
}

/// What a child reports.
#[derive(Default)]
struct Report {
    execs: u64,
    crashes: u64,
    corpus: usize,
    peak_kib: i64,
}

/// Runs one target's child, restarting it after a crash that killed it, until the
/// time is up; sums its reports.
fn parent(target: &str, args: &Args) -> Result<Report> {
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let mut total = Report::default();
    let mut round = 0;
    while Instant::now() < deadline {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_secs()
            .max(1);
        let out_file =
            std::env::temp_dir().join(format!("lockcheck-fuzz-{}-{target}", std::process::id()));
        let mut cmd = std::process::Command::new(std::env::current_exe()?);
        cmd.args([
            "--child",
            "--target",
            target,
            "--seconds",
            &left.to_string(),
        ])
        .args(["--seed", &(args.seed + round).to_string()])
        .env("LOCKCHECK_FUZZ_REPORT", &out_file);
        for c in &args.corpus {
            cmd.arg("--corpus").arg(c);
        }
        let child = cmd.spawn().context("starting the fuzz child")?;
        let (status, rusage) = wait4(child.id() as i32, Duration::from_secs(left + 10))?;
        total.peak_kib = total.peak_kib.max(rusage);
        let report = std::fs::read_to_string(&out_file).unwrap_or_default();
        let _ = std::fs::remove_file(&out_file);
        let mut fields = report
            .split_whitespace()
            .map(|w| w.parse::<u64>().unwrap_or(0));
        total.execs += fields.next().unwrap_or(0);
        total.crashes += fields.next().unwrap_or(0);
        total.corpus = total.corpus.max(fields.next().unwrap_or(0) as usize);
        if status != 0 {
            // Killed by a signal, aborted or hung: the input it was on is saved.
            total.crashes += 1;
            eprintln!("{target}: the child ended with status {status:#x}; see target/fuzz/{target}/last-input*");
            let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("target/fuzz")
                .join(target);
            let _ = std::fs::rename(
                dir.join("last-input"),
                dir.join(format!("last-input-{round}")),
            );
        }
        round += 1;
    }
    Ok(total)
}

/// Waits for `pid`, killing it past `limit`; its wait status and peak memory (KiB).
fn wait4(pid: i32, limit: Duration) -> Result<(i32, i64)> {
    let start = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: plain libc calls on our own child; the structs are zeroed out-params.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            return Ok((status, usage.ru_maxrss));
        }
        anyhow::ensure!(r == 0, "wait4: {}", std::io::Error::last_os_error());
        if start.elapsed() > limit {
            // SAFETY: our own child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The child: fuzzes one target until its time is up and writes
/// `executions crashes corpus` to the report file.
fn child(target: &str, args: &Args, root: &Path) -> Result<()> {
    // A blow-up must end this child, not eat the machine.
    let limit = libc::rlimit {
        rlim_cur: 2 << 30,
        rlim_max: 2 << 30,
    };
    // SAFETY: setrlimit with a valid struct.
    unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) };
    let out = root.join("target/fuzz").join(target);
    std::fs::create_dir_all(&out)?;
    let mut corpus = seeds(target, root, &args.corpus)?;
    anyhow::ensure!(!corpus.is_empty(), "no seeds for {target}");
    let words = dictionary(target);
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let mut seen: HashSet<String> = HashSet::new();
    let (mut execs, mut crashes) = (0u64, 0u64);
    let last = out.join("last-input");
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    // Panics are findings, reported once each below, not printed per input.
    std::panic::set_hook(Box::new(|_| {}));
    while Instant::now() < deadline {
        for _ in 0..64 {
            let input = mutate(&corpus, words, &mut rng);
            // Kept where a crash that kills this process can be found again.
            std::fs::write(&last, &input)?;
            execs += 1;
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(target, &input)))
                    .unwrap_or_else(|_| Err("panic".into()));
            match outcome {
                Ok(signature) => {
                    if corpus.len() < 20_000 && seen.insert(signature) {
                        corpus.push(input);
                    }
                }
                Err(finding) => {
                    crashes += 1;
                    if crashes <= 100 {
                        let name = out.join(format!("crash-{}-{crashes}", args.seed));
                        std::fs::write(&name, &input)?;
                        eprintln!("{target}: {finding}: {}", name.display());
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_file(&last);
    if let Ok(report) = std::env::var("LOCKCHECK_FUZZ_REPORT") {
        std::fs::write(report, format!("{execs} {crashes} {}", corpus.len()))?;
    }
    Ok(())
}

/// Runs one input through a target: `Ok(signature of the outcome)`, or
/// `Err(finding)` where the target broke its own rule.
fn run(target: &str, data: &[u8]) -> Result<String, String> {
    let text = String::from_utf8_lossy(data);
    let sig = |r: Result<String, String>| match r {
        Ok(s) => s,
        // The kind of error, without its numbers: a new one is a new outcome.
        Err(e) => e
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .skip_while(|c| *c != ':')
            .take(60)
            .collect(),
    };
    Ok(match target {
        "jsonl" => {
            let input = || Input::from_reader("f", std::io::Cursor::new(data.to_vec()));
            let fast = input()
                .and_then(read_jsonl_from)
                .map(|h| format!("ok {} {}", h.ops.len(), h.warnings.len()));
            let full =
                parse_jsonl(&text, "f").map(|h| format!("ok {} {}", h.ops.len(), h.warnings.len()));
            // Valid UTF-8 is read alike by both (the full parse takes text).
            if std::str::from_utf8(data).is_ok() {
                let (a, b) = (
                    fast.as_ref().map_err(|e| e.to_string()),
                    full.as_ref().map_err(|e| e.to_string()),
                );
                if a != b {
                    return Err(format!("fast and full readings disagree: {a:?} / {b:?}"));
                }
            }
            let resource = input()
                .and_then(read_resource_from)
                .map(|w| format!("res {}", w.len()));
            format!(
                "{} | {}",
                sig(fast.map_err(|e| e.to_string())),
                sig(resource.map_err(|e| e.to_string()))
            )
        }
        "edn" | "porcupine" => {
            let formats: &[Format] = match target {
                "edn" => &[Format::JepsenEdn],
                _ => &[Format::PorcupineEtcd, Format::PorcupineKv],
            };
            let mut out = String::new();
            for &format in formats {
                let r = import::parse(&text, "f", format)
                    .map(|h| format!("ok {}", h.ops.len().min(3)))
                    .map_err(|e| e.to_string());
                out += &sig(r);
            }
            // Detection and reading from a stream, as `check` does.
            let detected = Input::from_reader("f", std::io::Cursor::new(data.to_vec()))
                .and_then(|i| import::read_input(i, None))
                .map(|(_, f)| f.to_string())
                .map_err(|e| e.to_string());
            out + " | " + &sig(detected)
        }
        "workload" => {
            let r = lockcheck::run::workload::Workload::parse(&text, Path::new("w.toml"))
                .map(|_| "ok".to_string())
                .map_err(|e| format!("{e:#}"));
            sig(r)
        }
        other => return Err(format!("unknown target {other}")),
    })
}

/// The seed inputs of a target: its files in `fuzz/corpus/TARGET`, the repository's
/// own (fixtures, workloads), and any `--corpus` directory's of its kind.
fn seeds(target: &str, root: &Path, extra: &[PathBuf]) -> Result<Vec<Vec<u8>>> {
    let mut dirs = vec![root.join("fuzz/corpus").join(target)];
    match target {
        "jsonl" => dirs.push(root.join("fixtures")),
        "workload" => dirs.push(root.join("workloads")),
        _ => {}
    }
    dirs.extend(extra.iter().cloned());
    let wanted = |p: &Path| {
        let name = p.to_string_lossy();
        match target {
            "jsonl" => name.ends_with(".jsonl"),
            "edn" => name.ends_with(".edn"),
            "porcupine" => name.ends_with(".log") || name.ends_with(".txt"),
            _ => name.ends_with(".toml"),
        }
    };
    let mut out = Vec::new();
    let mut stack = dirs;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if wanted(&p) && entry.metadata().is_ok_and(|m| m.len() < 256 << 10) {
                out.push(std::fs::read(&p)?);
            }
        }
    }
    Ok(out)
}

/// Tokens of each format, spliced in by the mutator.
fn dictionary(target: &str) -> &'static [&'static str] {
    match target {
        "jsonl" => &[
            "{",
            "}",
            "[",
            "]",
            "\"",
            ",",
            ":",
            "\n",
            "\r",
            "\r\n",
            "null",
            "true",
            "-1",
            "0",
            "1e400",
            "18446744073709551616",
            "\\u0000",
            "\\ud800",
            "\"token\":",
            "\"seq\":",
            "\"lock\":",
            "\"value\":",
            "\"process\":\"nemesis\"",
            "\"type\":\"ok\"",
            "\"f\":\"write\"",
            "\"f\":\"acquire\"",
            "\"index\":0",
            "\"data\":",
        ],
        "edn" => &[
            "{",
            "}",
            "[",
            "]",
            "(",
            ")",
            "#{",
            "\"",
            "\\",
            ";",
            ",",
            "\n",
            "nil",
            ":process",
            ":type",
            ":invoke",
            ":ok",
            ":info",
            ":fail",
            ":f",
            ":value",
            ":time",
            ":nemesis",
            ":cas",
            ":read",
            ":write",
            ":txn",
            "1N",
            "1M",
            "-",
            "1e999",
            "#inst",
            "99999999999999999999",
        ],
        "porcupine" => &[
            "INFO  jepsen.util - ",
            "\t",
            " ",
            "\n",
            ":invoke",
            ":ok",
            ":fail",
            ":info",
            ":read",
            ":write",
            ":cas",
            "nil",
            "[",
            "]",
            ":timed-out",
            "{",
            "}",
            ":key",
            "\"",
            "-1",
            "99999999999999999999",
            ":nemesis",
            ":process",
            ":value",
        ],
        _ => &[
            "[",
            "]",
            "[[",
            "]]",
            "=",
            "\"",
            "\n",
            "#",
            "{",
            "}",
            ",",
            "0",
            "-1",
            "1e400",
            "18446744073709551616",
            "true",
            "[[faults]]",
            "kind",
            "after",
            "duration",
            "every",
            "[backend]",
            "[clients]",
            "count",
            "[resource]",
            "targets",
            "\"redis\"",
            "\"pause\"",
            "nodes",
            "time_limit",
            "ms",
            "s",
            "\"10s\"",
        ],
    }
}

/// One mutant of a seed (or of two spliced).
fn mutate(corpus: &[Vec<u8>], words: &[&str], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut d = corpus[rng.gen_range(0..corpus.len())].clone();
    for _ in 0..rng.gen_range(1..=6) {
        let at = if d.is_empty() {
            0
        } else {
            rng.gen_range(0..=d.len())
        };
        match rng.gen_range(0..9) {
            0 if !d.is_empty() => {
                let i = at.min(d.len() - 1);
                d[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if !d.is_empty() => {
                let i = at.min(d.len() - 1);
                d[i] = rng.gen();
            }
            2 => {
                let end = (at + rng.gen_range(1..64)).min(d.len());
                d.drain(at..end);
            }
            3 => {
                let w = words[rng.gen_range(0..words.len())].as_bytes();
                d.splice(at..at, w.iter().copied());
            }
            4 if !d.is_empty() => {
                // A piece repeated: long lines, many ops.
                let end = (at + rng.gen_range(1..256)).min(d.len());
                let piece = d[at..end].to_vec();
                for _ in 0..rng.gen_range(1..32) {
                    d.splice(at..at, piece.iter().copied());
                }
            }
            5 => {
                // Deep nesting, around the limit and far past it.
                let (open, close) =
                    [("[", "]"), ("{\"a\":", "}"), ("(", ")"), ("#{", "}")][rng.gen_range(0..4)];
                let n = [127, 128, 129, 1_000, 20_000][rng.gen_range(0..5)];
                let nest =
                    open.repeat(n) + &close.repeat(if rng.gen_bool(0.8) { n } else { n / 2 });
                d.splice(at..at, nest.bytes());
            }
            6 => {
                let other = &corpus[rng.gen_range(0..corpus.len())];
                if !other.is_empty() {
                    let from = rng.gen_range(0..other.len());
                    let end = (from + rng.gen_range(1..4_096)).min(other.len());
                    d.splice(at..at, other[from..end].iter().copied());
                }
            }
            7 => d.truncate(at),
            _ => {
                // A line (or a few) swapped or dropped.
                let lines: Vec<&[u8]> = d.split(|&b| b == b'\n').collect();
                if lines.len() > 2 {
                    let i = rng.gen_range(0..lines.len());
                    let j = rng.gen_range(0..lines.len());
                    let mut l: Vec<Vec<u8>> = lines.iter().map(|x| x.to_vec()).collect();
                    if rng.gen_bool(0.5) {
                        l.swap(i, j);
                    } else {
                        l.remove(i);
                    }
                    d = l.join(&b'\n');
                }
            }
        }
        if d.len() > 1 << 20 {
            d.truncate(1 << 20);
        }
    }
    d
}
