//! resource (being built)
