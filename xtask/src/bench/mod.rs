//! `cargo xtask bench [NAME] [-- ARGS]`: the benchmarks of benches/, with a
//! real broker for the ones that need one (broker_passthrough); and
//! `cargo xtask bench compare`, kstreams side by side with Kafka Streams.

mod compare;

pub(crate) use self::compare::CARGO_BUILD_NODE;

use std::process::{Command, ExitCode};

use anyhow::Result;

use crate::cargo;
use crate::cli::{exit_code, Args};
use crate::kafka::{Lease, BOOTSTRAP_ENV};
use crate::paths;
use crate::process;

pub(crate) fn cli(args: Args) -> Result<ExitCode> {
    let rest = args.rest();
    if rest.first().map(String::as_str) == Some("compare") {
        return compare(Args::new(rest.into_iter().skip(1)));
    }
    let lease = Lease::acquire()?;
    let cargo = cargo::cargo_bin();
    let mut command = Command::new(cargo);
    command
        .current_dir(paths::repo_root())
        .args(["bench", "--package", "kstreams-benches"])
        .env(BOOTSTRAP_ENV, lease.bootstrap());
    match rest.split_first() {
        Some((name, more)) if !name.starts_with('-') => {
            command.args(["--bench", name]).args(more);
        }
        _ => {
            command.args(&rest);
        }
    }
    let status = process::status(&mut command, "cargo bench")?;
    Ok(exit_code(status.success()))
}

/// `bench compare` with its arguments.
pub(crate) fn compare(args: Args) -> Result<ExitCode> {
    compare::cli(args)
}
