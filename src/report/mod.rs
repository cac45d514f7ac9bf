//! report (being built)
