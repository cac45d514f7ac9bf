//! fault (being built)

pub mod clock;
pub mod proxy;
