//! `cargo xtask example [NAME]`: README's first command. Checks (and as
//! root installs) the system packages the build needs, then runs an example
//! app of examples/ on librdkafka's in-process mock cluster.

use std::process::ExitCode;

use anyhow::Result;

use crate::cargo;
use crate::cli::{exit_code, Args};
use crate::process;
use crate::setup::{self, Scope};

/// The example README's first command runs.
pub(crate) const DEFAULT: &str = "pageviews";

/// `cargo run` of an example, less its name.
pub(crate) const CARGO_RUN: [&str; 4] = ["run", "-p", "kstreams-examples", "--example"];

pub(crate) fn cli(mut args: Args) -> Result<ExitCode> {
    let name = args.next().unwrap_or_else(|| DEFAULT.to_owned());
    args.finish()?;
    setup::ensure(Scope::Build)?;
    let mut run = cargo::cargo(&CARGO_RUN);
    run.arg(&name);
    let status = process::status(&mut run, &format!("the {name} example"))?;
    Ok(exit_code(status.success()))
}
