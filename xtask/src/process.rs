//! Running tools and watching the processes xtask started.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Fails with an install hint when `tool` cannot be run at all.
pub(crate) fn require_tool(tool: &str, version_flag: &str, hint: &str) -> Result<()> {
    match Command::new(tool)
        .arg(version_flag)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            bail!("`{tool}` was not found on PATH; {hint}")
        }
        Err(e) => Err(e).with_context(|| format!("cannot run `{tool}`")),
    }
}

/// Runs a command with inherited output; fails unless it exits 0.
pub(crate) fn run(command: &mut Command, what: &str) -> Result<()> {
    let status = status(command, what)?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// Runs a command with inherited output and returns how it exited.
pub(crate) fn status(command: &mut Command, what: &str) -> Result<ExitStatus> {
    command
        .status()
        .with_context(|| format!("cannot start {what}: {command:?}"))
}

/// Runs a command and returns its standard output (its stderr is
/// inherited); fails unless it exits 0.
pub(crate) fn output(command: &mut Command, what: &str) -> Result<String> {
    let output = command
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("cannot start {what}: {command:?}"))?;
    if !output.status.success() {
        bail!("{what} failed ({})", output.status);
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Runs a command quietly; on failure the error carries its output.
pub(crate) fn run_captured(command: &mut Command, what: &str) -> Result<()> {
    let output = command
        .output()
        .with_context(|| format!("cannot start {what}: {command:?}"))?;
    if !output.status.success() {
        bail!(
            "{what} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// Whether `pid` is alive and still the process we started: its command line
/// must contain `marker`, which guards against a recycled pid.
pub(crate) fn is_ours(pid: i32, marker: &str) -> bool {
    if !signal(pid, 0) {
        return false;
    }
    match fs::read(format!("/proc/{pid}/cmdline")) {
        // A zombie's command line is empty: it has exited, only not been reaped.
        Ok(cmdline) => String::from_utf8_lossy(&cmdline).contains(marker),
        // Without procfs (macOS) the liveness check above has to do.
        Err(_) => !Path::new("/proc/self").exists(),
    }
}

/// Sends `sig` to `pid`; true when it was delivered.
pub(crate) fn signal(pid: i32, sig: i32) -> bool {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Waits until `done` holds or `timeout` passes; true when it held.
pub(crate) fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The last `lines` lines of a log file, for error messages.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    match fs::read_to_string(path) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

/// Seconds with one decimal, for progress messages.
pub(crate) fn secs(elapsed: Duration) -> String {
    format!("{:.1} s", elapsed.as_secs_f64())
}
