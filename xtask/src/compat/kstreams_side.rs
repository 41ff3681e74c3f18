//! The kstreams side of the compat scenarios: compat/kstreams, a binary
//! running the same topologies as the Java apps on the kstreams runtime.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::consumed;
use super::java::{AppRun, JavaHarness};
use crate::cargo;
use crate::paths;
use crate::process::{self, secs};

/// The built kstreams-compat binary and the scenarios it supports.
pub(super) struct KstreamsSide {
    binary: PathBuf,
    supported: Vec<String>,
}

/// The build of compat/kstreams (`native_builds` checks it).
pub(crate) const CARGO_BUILD: [&str; 3] = ["build", "--package", "kstreams-compat"];

impl KstreamsSide {
    /// Builds compat/kstreams (incremental: fast when nothing changed).
    pub(super) fn build() -> Result<Self> {
        let began = Instant::now();
        let cargo = cargo::cargo_bin();
        process::run(
            Command::new(&cargo)
                .current_dir(paths::repo_root())
                .args(CARGO_BUILD)
                .arg("--quiet"),
            "building compat/kstreams",
        )?;
        let binary = paths::cargo_target_dir(&cargo)?.join("debug/kstreams-compat");
        let listed = Command::new(&binary)
            .arg("supported")
            .output()
            .with_context(|| format!("cannot run {}", binary.display()))?;
        let supported = String::from_utf8_lossy(&listed.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect();
        eprintln!(
            "compat: built the kstreams side ({})",
            secs(began.elapsed())
        );
        Ok(KstreamsSide { binary, supported })
    }

    pub(super) fn supports(&self, scenario: &str) -> bool {
        self.supported.iter().any(|s| s == scenario)
    }

    /// Runs the scenario until its group has committed the end of its
    /// input, then stops it with SIGTERM (a clean close) and checks it
    /// exited well.
    pub(super) fn run_scenario(
        &self,
        bootstrap: &str,
        run: &AppRun,
        java: &JavaHarness,
    ) -> Result<()> {
        self.run_until_idle(bootstrap, run, java, false)
    }

    /// Runs the scenario until its group has committed the end of its
    /// input, then kills it with SIGKILL: no close, no final checkpoint.
    pub(super) fn run_scenario_and_kill(
        &self,
        bootstrap: &str,
        run: &AppRun,
        java: &JavaHarness,
    ) -> Result<()> {
        self.run_until_idle(bootstrap, run, java, true)
    }

    /// Starts the scenario's app; it runs until [`stop`]ped.
    pub(super) fn start(&self, bootstrap: &str, run: &AppRun) -> Result<Child> {
        Command::new(&self.binary)
            .args(["run", run.scenario, "--bootstrap", bootstrap])
            .args(run.app_args())
            .spawn()
            .with_context(|| format!("cannot start {}", self.binary.display()))
    }

    fn run_until_idle(
        &self,
        bootstrap: &str,
        run: &AppRun,
        java: &JavaHarness,
        kill: bool,
    ) -> Result<()> {
        let mut child = self.start(bootstrap, run)?;
        let inputs: Vec<&str> = run.group_inputs.iter().map(String::as_str).collect();
        let idle = java.await_idle(bootstrap, &run.app_id, &inputs);
        if kill {
            if let Some(file) = &run.consumed_to {
                consumed::await_settled(file);
            }
            let _ = child.kill();
            let _ = child.wait();
            return idle;
        }
        let stopped = stop(&mut child);
        idle?;
        stopped
    }
}

/// Stops a kstreams app started with [`KstreamsSide::start`] as a user
/// would (SIGTERM: it closes), and waits for it.
pub(crate) fn stop(child: &mut Child) -> Result<()> {
    process::signal(child.id() as i32, libc::SIGTERM);
    let mut status = None;
    process::wait_until(Duration::from_secs(40), || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    match status {
        Some(s) if s.success() => Ok(()),
        Some(s) => bail!("the kstreams app exited with {s}"),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("the kstreams app did not stop within 40 s of SIGTERM")
        }
    }
}
