//! fault (being built)

pub mod clock;
