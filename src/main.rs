//! The `lockcheck` command: a thin clap layer over the library; each subcommand
//! lives in `lockcheck::cli::<name>`.

use clap::{Parser, Subcommand};
use lockcheck::cli;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "lockcheck",
    version,
    about = "Tests whether a distributed lock keeps two holders apart, and whether the resource it protects rejects stale writes"
)]
struct Cli {
    /// More of what lockcheck logs on standard error: -v info, -vv debug (default:
    /// warnings; RUST_LOG, where set, chooses instead).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a recorded history (lockcheck's JSON Lines, Jepsen EDN, Porcupine logs).
    #[command(after_long_help = cli::exit_codes::CHECK.help())]
    Check(cli::check::Args),
    /// Run a workload against a real lock service, inject faults, check the history.
    #[command(after_long_help = cli::exit_codes::RUN.help())]
    Run(cli::run::Args),
    /// Audit one backend: the battery of scenarios that applies, N runs each, a scorecard and a verdict.
    #[command(
        after_long_help = cli::exit_codes::AUDIT.help(),
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true
    )]
    Audit(cli::audit::Args),
    /// Find the smallest workload that still breaks the lock as a stored run did (shrunk.toml).
    #[command(after_long_help = cli::exit_codes::SHRINK.help())]
    Shrink(cli::shrink::Args),
    /// Rerun a stored run's faults as they happened, N times: how often its anomaly comes back.
    #[command(after_long_help = cli::exit_codes::REPLAY.help())]
    Replay(cli::shrink::ReplayArgs),
    /// Rebuild a run directory's report.html (and JUnit XML) from what it stores.
    #[command(after_long_help = cli::exit_codes::REPORT.help())]
    Report(cli::report::Args),
    /// Re-check a stored run (other --allow, a newer checker) without running anything.
    #[command(after_long_help = cli::exit_codes::ANALYZE.help())]
    Analyze(cli::analyze::Args),
    /// Show which backends, faults and runtimes this machine can run, and how to install the rest.
    #[command(after_long_help = cli::exit_codes::DOCTOR.help())]
    Doctor(cli::doctor::Args),
    /// Undo what a run killed with -9 left behind (stopped processes, skewed clocks, servers).
    #[command(after_long_help = cli::exit_codes::RECOVER.help())]
    Recover(cli::recover::Args),
    /// Build the Docker image that runs this machine's own servers (lockcheck/host).
    #[cfg(feature = "docker")]
    #[command(after_long_help = cli::exit_codes::IMAGE.help())]
    Image(cli::image::Args),
    /// Time the checker on the Porcupine and Knossos corpora (and a lock history).
    #[command(after_long_help = cli::exit_codes::BENCH.help())]
    Bench(cli::bench::Args),
    /// (internal) One lock client, driven by the controller over stdin/stdout.
    #[command(hide = true)]
    Worker(cli::worker::Args),
}

/// Sends lockcheck's log events (a server that would not stop, a partition that
/// would not heal) to standard error, and never to standard output: `--json`
/// prints there, and the worker speaks its protocol to the controller there.
fn log_to_stderr(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(match verbose {
            0 => "warn",
            1 => "warn,lockcheck=info",
            _ => "warn,lockcheck=debug",
        })
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    log_to_stderr(cli.verbose);
    let result = match cli.command {
        Command::Check(args) => cli::check::main(args),
        Command::Run(args) => cli::run::main(args),
        Command::Audit(args) => cli::audit::main(args),
        Command::Doctor(args) => cli::doctor::main(args),
        Command::Recover(args) => cli::recover::main(args),
        #[cfg(feature = "docker")]
        Command::Image(args) => cli::image::main(args),
        Command::Bench(args) => cli::bench::main(args),
        Command::Worker(args) => cli::worker::main(args),
        Command::Report(args) => cli::report::main(args),
        Command::Shrink(args) => cli::shrink::main(args),
        Command::Replay(args) => cli::shrink::replay(args),
        Command::Analyze(args) => cli::analyze::main(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("lockcheck: {e:#}");
            ExitCode::from(cli::exit_code_of(&e))
        }
    }
}
