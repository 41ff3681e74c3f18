//! Empty: cargo activates `[build-dependencies]` (whose features are the
//! point of this crate) only for a package with a build script.

fn main() {}
