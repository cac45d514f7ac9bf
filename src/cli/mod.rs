//! One file per subcommand. Each has `Args` (clap) and `main(Args) -> Result<u8>`,
//! the process exit code: 0 valid, 1 anomalies, 2 usage, 3 unknown, 4 malformed
//! input, 5 environment problem (a server binary missing, ...).

pub mod analyze;
pub mod bench;
pub mod check;
pub mod doctor;
pub mod recover;
pub mod report;
pub mod run;
pub mod worker;

/// An error that carries its own exit code (malformed input = 4, environment = 5).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Exit {
    pub code: u8,
    pub message: String,
}

pub const EXIT_MALFORMED: u8 = 4;
pub const EXIT_ENVIRONMENT: u8 = 5;

/// The exit code for an error: its own where it carries one, else 2.
pub fn exit_code_of(e: &anyhow::Error) -> u8 {
    e.chain()
        .find_map(|c| c.downcast_ref::<Exit>().map(|x| x.code))
        .or_else(|| {
            e.chain()
                .any(|c| c.downcast_ref::<crate::history::HistoryError>().is_some())
                .then_some(EXIT_MALFORMED)
        })
        .unwrap_or(2)
}
