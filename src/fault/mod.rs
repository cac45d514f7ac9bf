//! fault (being built)
