//! `cargo xtask example [NAME]`: README's first command. Checks (and as
//! root installs) the system packages the build needs, then runs an example
//! app of examples/ on librdkafka's in-process mock cluster.

use std::process::ExitCode;

use anyhow::Result;

use crate::ci;
use crate::cli::Args;
use crate::process;
use crate::setup::{self, Scope};

/// The example README's first command runs.
const DEFAULT: &str = "pageviews";

pub fn cli(mut args: Args) -> Result<ExitCode> {
    let name = args.next().unwrap_or_else(|| DEFAULT.to_owned());
    args.finish()?;
    setup::ensure(Scope::Build)?;
    let mut run = ci::cargo(&["run", "-p", "kstreams-examples", "--example", &name]);
    let status = process::status(&mut run, &format!("the {name} example"))?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
