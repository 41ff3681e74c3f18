//! The cargo that runs xtask, and the invocations of it that CI makes
//! (`native_builds` checks they build the native libraries one way).

use std::process::Command;

use crate::paths;

/// `cargo clippy` of CI's clippy step.
pub(crate) const CLIPPY: [&str; 6] = [
    "clippy",
    "--workspace",
    "--all-targets",
    "--",
    "-D",
    "warnings",
];
/// CI's check that the facade builds with the `rocksdb` feature off.
pub(crate) const NO_ROCKSDB: [&str; 4] = ["check", "-p", "kstreams", "--no-default-features"];
/// The test build CI makes before it starts a broker; the dashboard check
/// reuses it.
pub(crate) const TEST_NO_RUN: [&str; 3] = ["test", "--workspace", "--no-run"];

/// `cargo <args>` in the workspace root, with the cargo that runs xtask.
pub(crate) fn cargo(args: &[&str]) -> Command {
    let mut command = Command::new(cargo_bin());
    command.args(args).current_dir(paths::repo_root());
    command
}

/// The cargo that runs xtask, so every task uses one toolchain.
pub(crate) fn cargo_bin() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}
