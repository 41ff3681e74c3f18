//! Where things live: the repository, the broker's state, the download cache.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

/// The workspace root (xtask sits one level below it).
///
/// Read at run time first: `cargo run` sets CARGO_MANIFEST_DIR for the
/// process too, and a binary reused from a shared target directory may have
/// been compiled in another checkout, whose path `env!` would have baked in.
pub(crate) fn repo_root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .expect("xtask lives inside the workspace")
}

/// State of the cluster that `cargo xtask kafka start` runs (gitignored).
pub(crate) fn kafka_dir() -> PathBuf {
    repo_root().join(".kafka")
}

/// Per-user cache outside the repository, so that a fresh clone or
/// `cargo clean` does not resolve the broker again.
pub(crate) fn cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("kstreams")
}

/// Cargo's target directory, wherever CARGO_TARGET_DIR or config put it.
pub(crate) fn cargo_target_dir(cargo: &str) -> Result<PathBuf> {
    let output = Command::new(cargo)
        .current_dir(repo_root())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("cannot run cargo metadata")?;
    let text = String::from_utf8_lossy(&output.stdout);
    // The one field needed; not worth a JSON parser in xtask.
    let start = text
        .find("\"target_directory\":\"")
        .context("cargo metadata printed no target_directory")?
        + "\"target_directory\":\"".len();
    let end = text[start..]
        .find('"')
        .context("malformed cargo metadata output")?;
    Ok(PathBuf::from(&text[start..start + end]))
}
