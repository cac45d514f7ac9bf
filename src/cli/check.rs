//! `lockcheck check HISTORY`: reads a history (lockcheck's JSON Lines, Jepsen EDN,
//! Porcupine logs), checks it against a model, prints the verdict.

use super::{Exit, EXIT_MALFORMED};
use crate::check::lock::LockInput;
use crate::check::models::{kv, multi_register::MultiRegister, mutex::Mutex, register::Register};
use crate::check::{AnomalyKind, Limits, Validity, Verdict};
use crate::history::import::{self, Format};
use crate::history::{History, HistoryError};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The history file.
    pub file: PathBuf,
    /// jsonl, jepsen-edn, porcupine-etcd or porcupine-kv (detected from the content
    /// when not given).
    #[arg(long)]
    pub format: Option<Format>,
    /// lock, mutex, fenced-mutex, register, cas-register, multi-register or kv
    /// (chosen from the format and the ops when not given).
    #[arg(long)]
    pub model: Option<ModelKind>,
    /// The register's value before any write: an integer, or nil for empty
    /// (default: nil for porcupine-etcd, as Porcupine's etcd model; else 0, as Knossos).
    #[arg(long, value_name = "VALUE", value_parser = parse_initial)]
    pub initial: Option<Initial>,
    /// The resource's log of applied writes (resource.jsonl), for the lock model.
    #[arg(long, value_name = "FILE")]
    pub resource: Option<PathBuf>,
    /// Give up with verdict "unknown" after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub time_limit: f64,
    /// Print one JSON object instead of words.
    #[arg(long)]
    pub json: bool,
    /// Accept an anomaly kind the design tolerates on purpose (repeatable).
    #[arg(long = "allow", value_name = "KIND")]
    pub allow: Vec<AnomalyKind>,
    /// Also write the self-contained HTML report of this history to FILE.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Also write JUnit XML (one test case per check) to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// What a history is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    Lock,
    Mutex,
    FencedMutex,
    Register,
    CasRegister,
    MultiRegister,
    Kv,
}

impl ModelKind {
    pub const ALL: [ModelKind; 7] = [
        ModelKind::Lock,
        ModelKind::Mutex,
        ModelKind::FencedMutex,
        ModelKind::Register,
        ModelKind::CasRegister,
        ModelKind::MultiRegister,
        ModelKind::Kv,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Lock => "lock",
            ModelKind::Mutex => "mutex",
            ModelKind::FencedMutex => "fenced-mutex",
            ModelKind::Register => "register",
            ModelKind::CasRegister => "cas-register",
            ModelKind::MultiRegister => "multi-register",
            ModelKind::Kv => "kv",
        }
    }

    /// The model a history in `format` is checked against when none is named: the
    /// one its source checks it against (the corpus READMEs), from its ops.
    pub fn default_for(format: Format, history: &History) -> ModelKind {
        let has = |names: &[&str]| {
            history
                .ops
                .iter()
                .any(|o| o.process.client().is_some() && names.contains(&o.f.as_str()))
        };
        match format {
            Format::PorcupineEtcd => ModelKind::CasRegister,
            Format::PorcupineKv => ModelKind::Kv,
            Format::Jsonl if has(&["acquire", "release", "renew"]) => ModelKind::Lock,
            _ if has(&["acquire", "release"]) => ModelKind::Mutex,
            _ if has(&["txn"]) => ModelKind::MultiRegister,
            _ if has(&["get", "put", "append"]) => ModelKind::Kv,
            Format::Jsonl if !has(&["read", "write", "cas"]) => ModelKind::Lock,
            _ => ModelKind::CasRegister,
        }
    }
}

impl std::str::FromStr for ModelKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ModelKind::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = ModelKind::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "unknown model \"{s}\" (expected one of: {})",
                    names.join(", ")
                )
            })
    }
}

/// A register's initial value as given on the command line (`None` = nil, empty).
#[derive(Debug, Clone, Copy)]
pub struct Initial(pub Option<i64>);

fn parse_initial(s: &str) -> Result<Initial, String> {
    if s == "nil" {
        return Ok(Initial(None));
    }
    s.parse()
        .map(|v| Initial(Some(v)))
        .map_err(|_| format!("expected an integer or nil, found \"{s}\""))
}

/// How to check one file; `None` = chosen from the file.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub format: Option<Format>,
    pub model: Option<ModelKind>,
    pub initial: Option<Initial>,
    pub resource: Option<PathBuf>,
    pub limits: Limits,
}

/// A checked file: the verdict and what it was read and checked as.
#[derive(Debug, Clone)]
pub struct Checked {
    pub verdict: Verdict,
    pub format: Format,
    pub model: ModelKind,
    pub ops: usize,
}

/// Reads and checks one file. Malformed input (a bad line, an op the model does not
/// know) is an error with exit code 4 naming the file and where.
pub fn check_file(file: &Path, opts: &Options) -> Result<Checked> {
    if let Some(model) = streamed_lock_model(file, opts)? {
        let resource = opts
            .resource
            .as_deref()
            .map(crate::history::read_resource)
            .transpose()?;
        let input = LockInput {
            resource: resource.as_deref(),
        };
        let fenced = model == ModelKind::FencedMutex;
        let (verdict, ops) = crate::check::lock::check_jsonl(file, &input, &opts.limits, fenced)?;
        return Ok(Checked {
            verdict,
            format: Format::Jsonl,
            model,
            ops,
        });
    }
    let (history, format) = import::read(file, opts.format)?;
    let model = opts
        .model
        .unwrap_or_else(|| ModelKind::default_for(format, &history));
    let malformed = |e: crate::check::models::ModelError| Exit {
        code: EXIT_MALFORMED,
        message: format!("{}: {e} (checking as {})", file.display(), model.name()),
    };
    if opts.resource.is_some() && !matches!(model, ModelKind::Lock | ModelKind::FencedMutex) {
        anyhow::bail!(
            "--resource is only read by the lock and fenced-mutex models, not {}",
            model.name()
        );
    }
    let resource = opts
        .resource
        .as_deref()
        .map(crate::history::read_resource)
        .transpose()?;
    let initial = opts.initial.map_or(
        if format == Format::PorcupineEtcd {
            None
        } else {
            Some(0)
        },
        |i| i.0,
    );
    let limits = &opts.limits;
    let mut verdict = match model {
        ModelKind::Lock => crate::check::lock::check(
            &history,
            &LockInput {
                resource: resource.as_deref(),
            },
            limits,
        ),
        ModelKind::FencedMutex => crate::check::lock::check_fenced(
            &history,
            &LockInput {
                resource: resource.as_deref(),
            },
            limits,
        ),
        ModelKind::Mutex => Mutex.check(&history, limits).map_err(malformed)?,
        ModelKind::Register | ModelKind::CasRegister => Register {
            initial,
            cas: model == ModelKind::CasRegister,
        }
        .check(&history, limits)
        .map_err(malformed)?,
        ModelKind::MultiRegister => MultiRegister::check(&history, limits).map_err(malformed)?,
        ModelKind::Kv => kv::check(&history, limits).map_err(malformed)?,
    };
    verdict
        .notes
        .extend(history.warnings.iter().map(|w| format!("warning: {w}")));
    Ok(Checked {
        verdict,
        format,
        model,
        ops: history.ops.len(),
    })
}

/// The lock model to check `file` against line by line, when it is one of our own
/// lock histories: jsonl, and `--model lock|fenced-mutex`, or no `--model` and lock
/// ops among its first lines (the default picks `lock` then, from the whole file
/// too). The lock checker never needs such a history whole, and a million lines
/// held as `Op`s take about a gigabyte.
fn streamed_lock_model(file: &Path, opts: &Options) -> Result<Option<ModelKind>, HistoryError> {
    let lock_model = matches!(
        opts.model,
        None | Some(ModelKind::Lock | ModelKind::FencedMutex)
    );
    if !lock_model || !matches!(opts.format, None | Some(Format::Jsonl)) {
        return Ok(None);
    }
    let head = head(file)?;
    if opts.format.is_none() && Format::detect(&head, file) != Format::Jsonl {
        return Ok(None);
    }
    let lock_op = |line: &str| {
        serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| {
            v.get("process").is_some_and(|p| p.is_u64())
                && matches!(
                    v.get("f").and_then(|f| f.as_str()),
                    Some("acquire" | "release" | "renew")
                )
        })
    };
    // The head's last line may be cut short: only whole lines count.
    let lines: Vec<&str> = head.lines().collect();
    let whole = &lines[..lines.len().saturating_sub(1)];
    Ok(opts
        .model
        .or_else(|| whole.iter().any(|l| lock_op(l)).then_some(ModelKind::Lock)))
}

/// The first 64 KiB of a file.
fn head(file: &Path) -> Result<String, HistoryError> {
    use std::io::Read;
    let io = |source| HistoryError::Io {
        file: file.display().to_string(),
        source,
    };
    let mut head = Vec::new();
    std::fs::File::open(file)
        .map_err(io)?
        .take(64 * 1024)
        .read_to_end(&mut head)
        .map_err(io)?;
    Ok(String::from_utf8_lossy(&head).into_owned())
}

pub fn main(args: Args) -> Result<u8> {
    if !(args.time_limit > 0.0 && args.time_limit.is_finite()) {
        anyhow::bail!("--time-limit must be a positive number of seconds");
    }
    let opts = Options {
        format: args.format,
        model: args.model,
        initial: args.initial,
        resource: args.resource,
        limits: Limits {
            time: Duration::from_secs_f64(args.time_limit),
            ..Limits::default()
        },
    };
    let mut checked = check_file(&args.file, &opts)?;
    checked.verdict.apply_allow(&args.allow);
    if let Some(out) = &args.report {
        // The report draws every op, so the history is read whole here even where
        // the check itself streamed it.
        let (history, _) = import::read(&args.file, opts.format)?;
        let resource = opts
            .resource
            .as_deref()
            .map(crate::history::read_resource)
            .transpose()?;
        let title = args.file.display().to_string();
        let input = crate::report::Input {
            title: &title,
            history: &history,
            resource: resource.as_deref(),
            verdict: &checked.verdict,
            run: None,
            workload: None,
        };
        crate::report::write_html_for(&input, out)?;
    }
    if let Some(out) = &args.junit {
        let suite = args.file.display().to_string();
        let xml = crate::report::junit::render(&suite, &checked.verdict, 0);
        std::fs::write(out, xml).with_context(|| format!("writing {}", out.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&checked.verdict)?);
    } else {
        print!("{}", human(&args.file, &checked));
    }
    Ok(checked.verdict.valid.exit_code())
}

/// The verdict in words: one line, then each anomaly with its ops, then the notes.
pub fn human(file: &Path, c: &Checked) -> String {
    let v = &c.verdict;
    let counted =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let head = match v.valid {
        Validity::Valid if v.anomalies.is_empty() => format!("VALID: consistent with {}", v.model),
        Validity::Valid => format!(
            "VALID: consistent with {} but for {} allowed",
            v.model,
            counted(v.anomalies.len(), "anomaly", "anomalies")
        ),
        Validity::Invalid => format!(
            "INVALID: not consistent with {} ({})",
            v.model,
            counted(
                v.anomalies.iter().filter(|a| !a.allowed).count(),
                "anomaly",
                "anomalies"
            )
        ),
        Validity::Unknown => format!(
            "UNKNOWN: the check gave up before deciding against {}",
            v.model
        ),
    };
    let mut out = format!(
        "{head}\n  {} ({}, {})\n",
        file.display(),
        c.format,
        counted(c.ops, "op", "ops")
    );
    for a in &v.anomalies {
        let idx: Vec<String> = a.indexes.iter().map(u64::to_string).collect();
        out += &format!(
            "\n{}{} at indexes {}:\n  {}\n",
            a.kind.name(),
            if a.allowed { " (allowed)" } else { "" },
            idx.join(", "),
            a.explanation
        );
    }
    if !v.notes.is_empty() {
        out += "\nnotes:\n";
        for n in &v.notes {
            out += &format!("  - {n}\n");
        }
    }
    out
}
