//! No code: this crate exists for its `Cargo.toml` (see there).
#![forbid(unsafe_code)]
