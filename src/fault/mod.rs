//! fault (being built)

pub mod clock;
pub mod journal;
pub mod node;
pub mod proxy;
