//! run (being built)
