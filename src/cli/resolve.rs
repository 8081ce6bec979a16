//! Resource names.
