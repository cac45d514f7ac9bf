//! Why a history could not be read: the one error of every reader, naming file,
//! line and field.

/// Why a history could not be read. Display gives `file:line: field: reason`.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The reason is in the message itself, not chained as a source, so that it
    /// is printed once.
    #[error("{file}: {reason}")]
    Io {
        file: String,
        reason: std::io::Error,
    },
    #[error("{file}:{line}: {field}: {reason}")]
    Malformed {
        file: String,
        line: usize,
        field: String,
        reason: String,
    },
    /// Nothing a verdict could be about (spec v1.1): never VALID.
    #[error("{file}: no operations: {why}; a history without a client operation has no verdict")]
    NoOperations { file: String, why: String },
}
