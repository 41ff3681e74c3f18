//! `cargo xtask bench [NAME] [-- ARGS]`: the benchmarks of benches/, with a
//! real broker for the ones that need one (broker_passthrough); and
//! `cargo xtask bench compare`, kstreams side by side with Kafka Streams.

mod compare;

use std::process::{Command, ExitCode};

use anyhow::Result;

use crate::cli::Args;
use crate::kafka::{Lease, BOOTSTRAP_ENV};
use crate::paths;
use crate::process;

pub fn cli(args: Args) -> Result<ExitCode> {
    let rest = args.rest();
    if rest.first().map(String::as_str) == Some("compare") {
        return compare(Args::new(rest.into_iter().skip(1)));
    }
    let lease = Lease::acquire()?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
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
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `bench compare` with its arguments.
pub fn compare(args: Args) -> Result<ExitCode> {
    compare::cli(args)
}
