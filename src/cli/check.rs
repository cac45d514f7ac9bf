//! `lockcheck check HISTORY`: reads a history (lockcheck's JSON Lines, Jepsen EDN,
//! Porcupine logs), checks it against a model, prints the verdict.

use super::{Exit, EXIT_MALFORMED};
use crate::check::lock::{LockInput, Stream};
use crate::check::models::{kv, multi_register::MultiRegister, mutex::Mutex, register::Register};
use crate::check::{AnomalyKind, Limits, Validity, Verdict};
use crate::history::import::{self, Format};
use crate::history::{f, History, Input, Op};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The history file: `-` for standard input; a pipe, FIFO or `/dev/stdin` works
    /// too (read once); gzip or zstd is undone.
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

    /// The models the lock checker decides.
    pub fn is_lock(self) -> bool {
        matches!(self, ModelKind::Lock | ModelKind::FencedMutex)
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

/// Reads and checks one file (`-` = standard input), once, front to back. Malformed
/// input (a bad line, an op the model does not know, no client op at all) is an
/// error with exit code 4 naming the file and where.
pub fn check_file(file: &Path, opts: &Options) -> Result<Checked> {
    check_input(Input::open(file)?, opts)
}

/// Checks an opened input. One path for every layout of a JSONL history: it is
/// read line by line, and from its first lock op on (or from the start, under
/// `--model lock|fenced-mutex`) only into the lock checker's compact copy, so a
/// million-line lock history never sits in memory as `Op`s, wherever its first
/// lock op is. A history with no lock op is held whole, as the other models and
/// the default choice of model need it.
pub fn check_input(input: Input, opts: &Options) -> Result<Checked> {
    let format = opts.format.unwrap_or_else(|| input.format());
    let name = input.name.clone();
    if format != Format::Jsonl || !opts.model.is_none_or(ModelKind::is_lock) {
        let (history, format) = import::read_input(input, Some(format))?;
        return check_history(&history, &name, format, opts);
    }
    let mut whole: Vec<Op> = Vec::new();
    let mut lock: Option<Stream> = opts.model.is_some().then(Stream::default);
    let warnings = crate::history::read_jsonl_refs_from(input, |op| {
        let lock_op = op.process.client().is_some()
            && matches!(op.f.as_ref(), f::ACQUIRE | f::RELEASE | f::RENEW);
        if lock.is_none() && lock_op {
            // The default model is `lock` now whatever follows.
            let mut stream = Stream::default();
            for op in whole.drain(..) {
                stream.push(&op);
            }
            lock = Some(stream);
        }
        match &mut lock {
            Some(stream) => stream.push_ref(&op),
            None => whole.push(op.to_op()?),
        }
        Ok(())
    })?;
    let Some(stream) = lock else {
        let history = History {
            ops: whole,
            warnings,
        };
        return check_history(&history, &name, format, opts);
    };
    let model = opts.model.unwrap_or(ModelKind::Lock);
    let resource = opts
        .resource
        .as_deref()
        .map(crate::history::read_resource)
        .transpose()?;
    let input = LockInput {
        resource: resource.as_deref(),
    };
    let fenced = model == ModelKind::FencedMutex;
    let (verdict, ops) = stream.check(warnings, &input, &opts.limits, fenced);
    Ok(Checked {
        verdict,
        format,
        model,
        ops,
    })
}

/// Checks a history read whole (`format`: what it was read as; `name` names it in
/// errors).
pub fn check_history(
    history: &History,
    name: &str,
    format: Format,
    opts: &Options,
) -> Result<Checked> {
    let model = opts
        .model
        .unwrap_or_else(|| ModelKind::default_for(format, history));
    let malformed = |e: crate::check::models::ModelError| Exit {
        code: EXIT_MALFORMED,
        message: format!("{name}: {e} (checking as {})", model.name()),
    };
    if opts.resource.is_some() && !model.is_lock() {
        return Err(Exit::usage(format!(
            "--resource is only read by the lock and fenced-mutex models, not {}",
            model.name()
        )));
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
    let input = LockInput {
        resource: resource.as_deref(),
    };
    let mut verdict = match model {
        ModelKind::Lock => crate::check::lock::check(history, &input, limits),
        ModelKind::FencedMutex => crate::check::lock::check_fenced(history, &input, limits),
        ModelKind::Mutex => Mutex.check(history, limits).map_err(malformed)?,
        ModelKind::Register | ModelKind::CasRegister => Register {
            initial,
            cas: model == ModelKind::CasRegister,
        }
        .check(history, limits)
        .map_err(malformed)?,
        ModelKind::MultiRegister => MultiRegister::check(history, limits).map_err(malformed)?,
        ModelKind::Kv => kv::check(history, limits).map_err(malformed)?,
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

pub fn main(args: Args) -> Result<u8> {
    if !(args.time_limit > 0.0 && args.time_limit.is_finite()) {
        return Err(Exit::usage(format!(
            "--time-limit: expected a positive number of seconds, found {}",
            args.time_limit
        )));
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
    if args.file.as_os_str() == "-" && opts.resource.as_deref() == Some(Path::new("-")) {
        return Err(Exit::usage(
            "the history and --resource cannot both be standard input",
        ));
    }
    let input = Input::open(&args.file)?;
    let title = input.name.clone();
    // The report draws every op: with one, the history is read whole (once) and
    // checked from memory; without, it is streamed.
    let (mut checked, history) = match &args.report {
        None => (check_input(input, &opts)?, None),
        Some(_) => {
            let (history, format) = import::read_input(input, opts.format)?;
            (
                check_history(&history, &title, format, &opts)?,
                Some(history),
            )
        }
    };
    checked.verdict.apply_allow(&args.allow);
    if let (Some(out), Some(history)) = (&args.report, &history) {
        let resource = opts
            .resource
            .as_deref()
            .map(crate::history::read_resource)
            .transpose()?;
        let input = crate::report::Input {
            title: &title,
            history,
            resource: resource.as_deref(),
            verdict: &checked.verdict,
            run: None,
            workload: None,
        };
        crate::report::write_html_for(&input, out)?;
    }
    if let Some(out) = &args.junit {
        let xml = crate::report::junit::render(&title, &checked.verdict, 0);
        std::fs::write(out, xml).with_context(|| format!("writing {}", out.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&checked.verdict)?);
    } else {
        print!("{}", human(Path::new(&title), &checked));
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
