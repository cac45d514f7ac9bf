//! Which model a history is checked against, and checking a file or a history
//! with it: what `lockcheck check`, `bench` and `analyze` share. The model is the
//! one named, else the one the history's source checks it against (from its
//! format and its ops).

use crate::lock::{LockInput, Stream};
use crate::models::ModelError;
use crate::models::{kv, multi_register::MultiRegister, mutex::Mutex, register::Register};
use crate::{Limits, Validity, Verdict};
use lockcheck_history::import::{self, Format};
use lockcheck_history::{f, History, HistoryError, Input, Op};
use std::path::{Path, PathBuf};

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

/// A register's initial value (`None` = nil, empty); parsed from an integer or
/// `nil`.
#[derive(Debug, Clone, Copy)]
pub struct Initial(pub Option<i64>);

impl std::str::FromStr for Initial {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "nil" {
            return Ok(Initial(None));
        }
        s.parse()
            .map(|v| Initial(Some(v)))
            .map_err(|_| format!("expected an integer or nil, found \"{s}\""))
    }
}

/// How to check one file; `None` = chosen from the file.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub format: Option<Format>,
    pub model: Option<ModelKind>,
    pub initial: Option<Initial>,
    /// The resource's log of applied writes (resource.jsonl), for the lock models.
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

/// Why a history got no verdict: it could not be read, or it does not fit the
/// model it is checked against.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    History(#[from] HistoryError),
    /// An op the model does not know (an acquire in a kv history, a string
    /// written to an integer register).
    #[error("{name}: {error} (checking as {})", model.name())]
    Model {
        name: String,
        model: ModelKind,
        error: ModelError,
    },
    /// A resource log given for a model that does not read one.
    #[error(
        "a resource log is only read by the lock and fenced-mutex models, not {}",
        .0.name()
    )]
    ResourceNotRead(ModelKind),
}

/// Reads and checks one file (`-` = standard input), once, front to back.
/// Malformed input (a bad line, an op the model does not know, no client op at
/// all) is an error naming the file and where.
pub fn check_file(file: &Path, opts: &Options) -> Result<Checked, CheckError> {
    check_input(Input::open(file)?, opts)
}

/// Checks an opened input. One path for every layout of a JSONL history: it is
/// read line by line, and from its first lock op on (or from the start, under
/// `--model lock|fenced-mutex`) only into the lock checker's compact copy, so a
/// million-line lock history never sits in memory as `Op`s, wherever its first
/// lock op is. A history with no lock op is held whole, as the other models and
/// the default choice of model need it.
pub fn check_input(input: Input, opts: &Options) -> Result<Checked, CheckError> {
    let format = opts.format.unwrap_or_else(|| input.format());
    let name = input.name.clone();
    if format != Format::Jsonl || !opts.model.is_none_or(ModelKind::is_lock) {
        let (history, format) = import::read_input(input, Some(format))?;
        return check_history(&history, &name, format, opts);
    }
    let mut whole: Vec<Op> = Vec::new();
    let mut lock: Option<Stream> = opts.model.is_some().then(Stream::default);
    let warnings = lockcheck_history::read_jsonl_refs_from(input, |op| {
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
        .map(lockcheck_history::read_resource)
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
) -> Result<Checked, CheckError> {
    let model = opts
        .model
        .unwrap_or_else(|| ModelKind::default_for(format, history));
    let malformed = |error| CheckError::Model {
        name: name.to_string(),
        model,
        error,
    };
    if opts.resource.is_some() && !model.is_lock() {
        return Err(CheckError::ResourceNotRead(model));
    }
    let resource = opts
        .resource
        .as_deref()
        .map(lockcheck_history::read_resource)
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
        ModelKind::Lock => crate::lock::check(history, &input, limits),
        ModelKind::FencedMutex => crate::lock::check_fenced(history, &input, limits),
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

impl Checked {
    /// The verdict in words, `file` being what was checked: one line, then each
    /// anomaly with its ops, then the notes.
    pub fn in_words(&self, file: &Path) -> String {
        let v = &self.verdict;
        let counted =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let head = match v.valid {
            Validity::Valid if v.anomalies.is_empty() => {
                format!("VALID: consistent with {}", v.model)
            }
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
            self.format,
            counted(self.ops, "op", "ops")
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
}
