//! Which exit codes each subcommand returns, and what each means there: the one
//! source of each subcommand's `--help` "Exit codes" and of docs/exit-codes.md
//! (tests/exit_codes_doc.rs holds the page to it, and ties rows to behaviour).
//! The codes themselves are `crate::exit`'s; a row here says what the code means
//! for that subcommand, because the same number does not mean the same thing
//! everywhere: `report` exits 0 on an INVALID run (it wrote the report), `shrink`
//! exits 1 when the break came back (the useful outcome) and 2 on a valid run.

use crate::exit::{
    ANOMALIES, ENVIRONMENT, INTERNAL, INTERRUPTED, MALFORMED, UNKNOWN, USAGE, VALID,
};

/// One exit code of one subcommand.
#[derive(Debug, Clone, Copy)]
pub struct Code {
    pub code: u8,
    pub meaning: &'static str,
}

/// One subcommand and every exit code it returns, in increasing order.
#[derive(Debug)]
pub struct Subcommand {
    pub name: &'static str,
    pub codes: &'static [Code],
}

const fn code(code: u8, meaning: &'static str) -> Code {
    Code { code, meaning }
}

/// clap's own refusal (an unknown flag, a missing value) exits 2 for every
/// subcommand; these rows add what the subcommand itself refuses.
const USAGE_FLAGS: &str = "usage: an argument or flag it does not take (the message says which)";
const INTERNAL_ROW: Code = code(
    INTERNAL,
    "internal: an error lockcheck does not classify (a bug, or a failure nobody foresaw): report it",
);
const MALFORMED_HISTORY: Code = code(
    MALFORMED,
    "malformed input: the history (or resource log) cannot be read as one (the message names file, line and field)",
);

pub const CHECK: Subcommand = Subcommand {
    name: "check",
    codes: &[
        code(VALID, "valid: no anomaly but those `--allow` accepts"),
        code(ANOMALIES, "anomalies found, each listed with the ops that show it"),
        code(
            USAGE,
            "usage: a bad flag or flag value (`--time-limit` not a positive number, the history and `--resource` both standard input, `--resource` with a model that does not read it)",
        ),
        code(
            UNKNOWN,
            "unknown: the checker gave up within its limits (`--time-limit`); never a pass",
        ),
        MALFORMED_HISTORY,
        INTERNAL_ROW,
    ],
};

pub const RUN: Subcommand = Subcommand {
    name: "run",
    codes: &[
        code(
            VALID,
            "valid: every run (of `--test-count`) had no anomaly its workload does not allow, and every planned fault started",
        ),
        code(ANOMALIES, "a run found anomalies"),
        code(
            USAGE,
            "usage: a bad flag, or a workload lockcheck refuses (the message names file, line and key)",
        ),
        code(
            UNKNOWN,
            "untested or unknown, and no run found anomalies: a planned fault never started or no client acquired once it had (`--allow-missed-faults` passes it on purpose), or the checker gave up",
        ),
        code(
            ENVIRONMENT,
            "environment: this machine cannot run the workload (a server binary missing, too little memory, no root for a fault): the message says what to install or free; or a worker's lock client could not connect before the run began (a loaded machine, a service not yet serving), so nothing was tested",
        ),
        INTERNAL_ROW,
        code(
            INTERRUPTED,
            "interrupted by a signal; every server, worker and fault the run started was stopped",
        ),
    ],
};

pub const AUDIT: Subcommand = Subcommand {
    name: "audit",
    codes: &[
        code(
            VALID,
            "a complete audit (whatever its verdict, unless `--expect` names another)",
        ),
        code(ANOMALIES, "the verdict is not the one `--expect` names"),
        code(
            USAGE,
            "usage: a bad flag, `--scenarios` of which none applies to the backend, a `--budget` shorter than one run, a `--client` line that cannot be split into words, `--twin-runs` below `--provoked`, `--shard` outside 1..N, `--asked` a merge that asks no twin, `--resume` a directory with no scorecard or an audit that ended",
        ),
        code(
            UNKNOWN,
            "not complete: a subset of the scenarios, a budget that cut it short, runs that missed their faults (the scorecard says which); a part (`--shard`) that did not run its share to the end",
        ),
        code(
            MALFORMED,
            "malformed input: `--asked` or `--resume` names a scorecard that does not read, or one of another audit, lockcheck commit or battery (the message names the file and field)",
        ),
        code(
            ENVIRONMENT,
            "environment: this machine cannot run the backend's servers or faults, or the results directory cannot be made",
        ),
        INTERNAL_ROW,
        code(
            INTERRUPTED,
            "interrupted by a signal; every run in flight was stopped",
        ),
    ],
};

pub const AUDIT_MERGE: Subcommand = Subcommand {
    name: "audit merge",
    codes: &[
        code(
            VALID,
            "the parts add up to a complete audit (whatever its verdict, unless `--expect` names another)",
        ),
        code(ANOMALIES, "the verdict is not the one `--expect` names"),
        code(
            USAGE,
            "usage: a bad flag, no part found where one was named, or `--out` already there (nothing merged before is written over)",
        ),
        code(
            UNKNOWN,
            "not complete: a shard's part missing from either phase, the second phase the first asked (`.shards.twins_pending`), or what an audit run whole would lack (the scorecard's `missing` names each)",
        ),
        code(
            MALFORMED,
            "a part refused: not a part's scorecard, corrupt or cut short, of another lockcheck commit, battery, backend, client or flags than the first part, the same part or shard twice, or asked by other first-phase parts (the message names the file and field)",
        ),
        INTERNAL_ROW,
    ],
};

/// `shrink` and `replay` read a stored run and rerun it.
const RERUN_USAGE: Code = code(
    USAGE,
    "usage: the run was valid (no break to shrink or replay: `--kind` picks an allowed one), `--kind` names an anomaly the run did not flag, the directory is not a run's (no verdict.json or workload.toml), or a bad flag",
);
const RERUN_MALFORMED: Code = code(
    MALFORMED,
    "malformed input: the run directory's verdict.json or workload.toml does not read as a run's (another lockcheck version's, say), or its history.jsonl is missing or malformed; the message names the file",
);
const RERUN_ENVIRONMENT: Code = code(
    ENVIRONMENT,
    "environment: this machine cannot rerun the workload (the message says what it lacks)",
);
const RERUN_INTERRUPTED: Code = code(
    INTERRUPTED,
    "interrupted by a signal; every rerun in flight was stopped",
);

pub const SHRINK: Subcommand = Subcommand {
    name: "shrink",
    codes: &[
        code(
            ANOMALIES,
            "the anomaly came back: the smallest workload that still gives it is written to RUN_DIR/shrunk.toml",
        ),
        RERUN_USAGE,
        code(
            UNKNOWN,
            "not reproduced: the run as it happened, or its shrunk workload, never gave the anomaly again; nothing written",
        ),
        RERUN_MALFORMED,
        RERUN_ENVIRONMENT,
        INTERNAL_ROW,
        RERUN_INTERRUPTED,
    ],
};

pub const REPLAY: Subcommand = Subcommand {
    name: "replay",
    codes: &[
        code(
            ANOMALIES,
            "reproduced: the anomaly came back in at least one replay",
        ),
        RERUN_USAGE,
        code(UNKNOWN, "not reproduced: no replay gave the anomaly again"),
        RERUN_MALFORMED,
        RERUN_ENVIRONMENT,
        INTERNAL_ROW,
        RERUN_INTERRUPTED,
    ],
};

pub const REPORT: Subcommand = Subcommand {
    name: "report",
    codes: &[
        code(
            VALID,
            "the report was written, whatever the run's verdict (VALID, INVALID or UNTESTED is printed, and in the JUnit XML)",
        ),
        code(USAGE, USAGE_FLAGS),
        code(
            MALFORMED,
            "malformed input: the run directory's history.jsonl is missing or cannot be read as a history (the message names file, line and field)",
        ),
        code(
            INTERNAL,
            "internal: a report or JUnit file that cannot be written, a verdict.json that cannot be read, or an error nobody foresaw",
        ),
    ],
};

pub const ANALYZE: Subcommand = Subcommand {
    name: "analyze",
    codes: &[
        code(
            VALID,
            "valid: no anomaly but those allowed (`--allow`, else the workload's `allow`), and every planned fault of the run started",
        ),
        code(ANOMALIES, "anomalies found"),
        code(USAGE, USAGE_FLAGS),
        code(
            UNKNOWN,
            "unknown: the checker gave up, or the run missed planned faults it did not allow: never a pass",
        ),
        code(
            MALFORMED,
            "malformed input: the run directory's history.jsonl is missing or cannot be read as a history",
        ),
        INTERNAL_ROW,
    ],
};

pub const DOCTOR: Subcommand = Subcommand {
    name: "doctor",
    codes: &[
        code(VALID, "this machine has everything lockcheck can use"),
        code(
            ANOMALIES,
            "something is missing: a line says `MISSING`; the `apt-get install` line printed last names the packages that fix it, if any do (root and a delegated cgroup no package gives)",
        ),
        code(USAGE, USAGE_FLAGS),
        INTERNAL_ROW,
    ],
};

pub const RECOVER: Subcommand = Subcommand {
    name: "recover",
    codes: &[
        code(
            VALID,
            "everything the run left behind was undone (or had already ended)",
        ),
        code(
            ANOMALIES,
            "something could not be undone: each warning says what, for the user to look at",
        ),
        code(
            USAGE,
            "usage: the directory has no journal (not a run directory, or its run changed nothing), or a bad flag",
        ),
        INTERNAL_ROW,
    ],
};

pub const IMAGE: Subcommand = Subcommand {
    name: "image",
    codes: &[
        code(VALID, "the image was built, or was already there"),
        code(USAGE, USAGE_FLAGS),
        code(
            ENVIRONMENT,
            "environment: Docker is missing or could not build the image",
        ),
        INTERNAL_ROW,
    ],
};

pub const BENCH: Subcommand = Subcommand {
    name: "bench",
    codes: &[
        code(
            VALID,
            "every verdict is the one the corpus's expected.tsv gives",
        ),
        code(
            ANOMALIES,
            "some verdicts differ from expected.tsv (counted)",
        ),
        code(USAGE, USAGE_FLAGS),
        MALFORMED_HISTORY,
        code(
            INTERNAL,
            "internal: the corpus or its expected.tsv not found, or an error nobody foresaw",
        ),
    ],
};

/// Every subcommand people run, in `lockcheck --help`'s order (the hidden
/// `worker`, which the controller starts, speaks its own protocol).
pub const SUBCOMMANDS: &[&Subcommand] = &[
    &CHECK,
    &RUN,
    &AUDIT,
    &AUDIT_MERGE,
    &SHRINK,
    &REPLAY,
    &REPORT,
    &ANALYZE,
    &DOCTOR,
    &RECOVER,
    &IMAGE,
    &BENCH,
];

impl Subcommand {
    /// The "Exit codes" section of this subcommand's `--help`.
    pub fn help(&self) -> String {
        let mut out = String::from("Exit codes:\n");
        for c in self.codes {
            out += &format!("  {:>3}  {}\n", c.code, c.meaning);
        }
        out.pop();
        out
    }
}

/// The subcommand named `name`, if people run it.
pub fn of(name: &str) -> Option<&'static Subcommand> {
    SUBCOMMANDS.iter().copied().find(|s| s.name == name)
}

/// docs/exit-codes.md, whole.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Exit codes\n\n\
         <!-- Generated from src/cli/exit_codes.rs: edit there, then \
         `LOCKCHECK_BLESS=1 cargo test --test exit_codes_doc` rewrites this page \
         (the test fails while it is stale). -->\n\n\
         Each subcommand's exit codes, and what each means for it: the same number does \
         not mean the same everywhere (`report` exits 0 on an INVALID run because it \
         wrote the report; `shrink` exits 1 when the break came back). \
         `lockcheck SUBCOMMAND --help` ends with the same table. \
         A refusal by the argument parser (an unknown flag, a missing value) exits 2 \
         for every subcommand.\n\n\
         | subcommand | exit codes |\n|---|---|\n",
    );
    for s in SUBCOMMANDS {
        let codes: Vec<String> = s.codes.iter().map(|c| c.code.to_string()).collect();
        out += &format!("| [`{0}`](#{0}) | {1} |\n", s.name, codes.join(", "));
    }
    for s in SUBCOMMANDS {
        out += &format!("\n## {}\n\n| code | meaning |\n|---|---|\n", s.name);
        for c in s.codes {
            out += &format!("| {} | {} |\n", c.code, c.meaning.replace('|', "\\|"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_subcommand_lists_each_code_once_in_increasing_order_with_usage_and_internal() {
        for s in SUBCOMMANDS {
            let codes: Vec<u8> = s.codes.iter().map(|c| c.code).collect();
            assert!(
                codes.windows(2).all(|w| w[0] < w[1]),
                "{}: {codes:?}",
                s.name
            );
            // clap refuses bad flags with 2 and an unclassified error is 6, for all.
            assert!(codes.contains(&USAGE), "{}", s.name);
            assert!(codes.contains(&INTERNAL), "{}", s.name);
            assert!(s.codes.iter().all(|c| !c.meaning.is_empty()), "{}", s.name);
        }
        let mut names: Vec<&str> = SUBCOMMANDS.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), SUBCOMMANDS.len());
    }
}
