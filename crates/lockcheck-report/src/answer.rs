//! The guidance's answer: which of the three designs fits what was observed, and
//! the figures behind it. Made by the analyses and the election's own guidance.

use serde::{Deserialize, Serialize};

/// Which of the three designs fits what was observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answer {
    /// Duplicates are cheap: the lock is an optimisation, not a guarantee.
    EfficiencyLock,
    /// The resource must check the token.
    FencingTokens,
    /// The client must check its own lease and stop (self-fencing).
    ExitOnLoss,
}

impl Answer {
    pub fn title(self) -> &'static str {
        match self {
            Answer::EfficiencyLock => "An efficiency lock is enough",
            Answer::FencingTokens => "Fencing tokens are needed",
            Answer::ExitOnLoss => "Exit on lease loss (self-fencing client)",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Guidance {
    pub answer: Answer,
    pub title: String,
    pub sentence: String,
    /// The figures behind the answer, each in words.
    pub figures: Vec<String>,
}
