//! `cargo xtask package`: every publishable crate packaged as `cargo
//! publish` would package it, and built with the Rust release its
//! `rust-version` declares (issue 50).
//!
//! The crates are the workspace members whose `publish` is not `false`
//! (cargo metadata), so a new library crate is covered without a list to
//! keep. In order:
//!
//! 1. Metadata: each has a description, a licence, a repository, a readme,
//!    keywords, categories and a `rust-version`, and the features its
//!    `[package.metadata.docs.rs]` names exist.
//! 2. The toolchain: the crates' `rust-version` must be the release of the
//!    rustc that cargo runs (same minor version), or of a toolchain rustup
//!    has installed; anything else fails, naming the toolchain to install.
//!    A newer compiler would prove nothing: it builds what the declared
//!    release cannot.
//! 3. `cargo package --no-verify` of all of them in one invocation, with
//!    that toolchain: cargo resolves their path dependencies on each other
//!    through a local overlay, in dependency order, and writes the
//!    `.crate` files that `cargo publish` would upload.
//! 4. Each `.crate` holds its LICENSE and readme, no tests, examples or
//!    fixtures, and fits crates.io's 10 MiB.
//! 5. `cargo package` again, verifying, for the crates whose dependencies
//!    (their dev-dependencies' too: the overlay must resolve them) build no
//!    native library: cargo unpacks each `.crate` and builds it alone.
//!    The others build RocksDB or librdkafka, and alone they resolve other
//!    features for them (and their build dependencies) than the workspace
//!    does, so verifying them would compile RocksDB's C++ again (about 11
//!    minutes on two cores; `cargo xtask native-builds` says why one build
//!    matters). `--verify-all` verifies them too, for a release.
//! 6. Unless the caller already did it with the same toolchain (CI's clippy
//!    step), `cargo check --workspace --all-targets` with that toolchain:
//!    the crates not verified are built on the declared release too. It is
//!    the invocation CI's clippy plans, so it builds no native library a
//!    second time (`native-builds` checks that one).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::cargo::{cargo, cargo_bin, CLIPPY};
use crate::cli::{exit_code, Args};
use crate::native_builds::NATIVE;
use crate::paths;
use crate::process;

/// crates.io refuses a larger `.crate` unless the registry raised its limit.
const MAX_CRATE_BYTES: u64 = 10 * 1024 * 1024;

/// A crate's directories of tests, examples and benchmarks: none of them
/// belongs in a package (neither does a `fixtures` directory anywhere).
const LEFT_OUT: &[&str] = &["tests/", "examples/", "benches/"];

pub(crate) fn cli(mut args: Args) -> Result<ExitCode> {
    let verify_all = args.flag("verify-all");
    args.finish()?;
    Ok(exit_code(check(verify_all, false)?))
}

/// Packages every publishable crate and checks the declared MSRV; prints
/// what it did and how long each part took. `built_on_this_toolchain`:
/// the caller has already compiled every crate with the toolchain running
/// xtask (CI's clippy step), so when that one is the declared release, the
/// check build (step 6) is left out.
pub(crate) fn check(verify_all: bool, built_on_this_toolchain: bool) -> Result<bool> {
    let start = Instant::now();
    let metadata = Metadata::read()?;
    let crates = metadata.publishable();
    if crates.is_empty() {
        bail!("no publishable crate in the workspace (every member has publish = false)");
    }
    let names: Vec<&str> = crates.iter().map(|c| c.name.as_str()).collect();
    eprintln!(
        "package: {} publishable crates: {}",
        names.len(),
        names.join(", ")
    );

    let mut passed = true;
    let problems = metadata_problems(&crates);
    for problem in &problems {
        eprintln!("package: {problem}");
    }
    passed &= problems.is_empty();

    let toolchain = msrv_toolchain(&crates)?;
    eprintln!(
        "package: rust-version {} checked with {}",
        toolchain.rust_version, toolchain.label
    );

    let step = Instant::now();
    let mut all = toolchain.cargo(&["package", "--no-verify", "--allow-dirty"]);
    for name in &names {
        all.args(["-p", name]);
    }
    let packaged = run_package(&mut all)?;
    eprintln!("package: packaged in {:.0?}", step.elapsed());
    if !packaged {
        // Nothing to look into or verify: cargo said what is wrong.
        return Ok(false);
    }
    for krate in &crates {
        let file = metadata
            .target_directory
            .join("package")
            .join(format!("{}-{}.crate", krate.name, krate.version));
        match crate_problems(krate, &file) {
            Ok(found) if found.is_empty() => {}
            Ok(found) => {
                passed = false;
                for problem in found {
                    eprintln!("package: {}: {problem}", krate.name);
                }
            }
            Err(error) => {
                passed = false;
                eprintln!("package: {}: {error:#}", krate.name);
            }
        }
    }

    let (verified, unverified) = if verify_all {
        (names.clone(), Vec::new())
    } else {
        metadata.split_by_native_builds(&crates)
    };
    if !unverified.is_empty() {
        eprintln!(
            "package: not verified from their .crate (alone they would build {} \
             with other features than the workspace): {}",
            NATIVE.join(" or "),
            unverified.join(", ")
        );
    }
    if !verified.is_empty() {
        let step = Instant::now();
        let mut verify = toolchain.cargo(&["package", "--allow-dirty"]);
        for name in &verified {
            verify.args(["-p", name]);
        }
        let ok = run_package(&mut verify)?;
        eprintln!(
            "package: verified {} ({}) in {:.0?}",
            verified.join(", "),
            if ok { "built" } else { "FAILED" },
            step.elapsed()
        );
        passed &= ok;
    }

    if !unverified.is_empty() {
        if built_on_this_toolchain && toolchain.is_current {
            eprintln!(
                "package: the others were built with {} by the clippy step",
                toolchain.label
            );
        } else {
            let step = Instant::now();
            // CI's clippy invocation as `cargo check`: the unit graph that
            // `native-builds` compares, so RocksDB is not built again.
            let mut args = vec!["check"];
            args.extend(CLIPPY[1..].iter().take_while(|&&arg| arg != "--"));
            let ok = process::status(&mut toolchain.cargo(&args), "cargo check")?.success();
            eprintln!(
                "package: `cargo {}` with {}: {} in {:.0?}",
                args.join(" "),
                toolchain.label,
                if ok { "built" } else { "FAILED" },
                step.elapsed()
            );
            passed &= ok;
        }
    }
    eprintln!(
        "package: {} in {:.0?}",
        if passed { "passed" } else { "FAILED" },
        start.elapsed()
    );
    Ok(passed)
}

/// Runs `cargo package`, passing its output on but for the warning it
/// gives for each test, example and bench target whose file `include`
/// leaves out (on purpose: one summary line says so); whether it passed.
fn run_package(command: &mut Command) -> Result<bool> {
    let mut child = command
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {command:?}"))?;
    let stderr = child.stderr.take().context("cargo package's stderr")?;
    let mut left_out = 0;
    for line in BufReader::new(stderr).lines() {
        let line = line.context("reading cargo package's output")?;
        if is_left_out_target(&line) {
            left_out += 1;
        } else {
            eprintln!("{line}");
        }
    }
    let status = child.wait().context("waiting for cargo package")?;
    if left_out > 0 {
        eprintln!(
            "package: {left_out} test, example and bench targets are not in the packages \
             (`include`); they stay in the repository"
        );
    }
    Ok(status.success())
}

/// cargo's `warning: ignoring test `x` as `tests/x.rs` is not included in
/// the published package`.
fn is_left_out_target(line: &str) -> bool {
    line.strip_prefix("warning: ignoring ").is_some_and(|rest| {
        ["test ", "example ", "bench "]
            .iter()
            .any(|kind| rest.starts_with(kind))
            && rest.ends_with("is not included in the published package")
    })
}

/// A publishable workspace member, as cargo metadata describes it.
#[derive(Debug)]
struct Crate {
    id: String,
    name: String,
    version: String,
    manifest_path: PathBuf,
    package: Value,
}

impl Crate {
    fn field(&self, key: &str) -> Option<&str> {
        self.package[key].as_str().filter(|s| !s.trim().is_empty())
    }

    fn list(&self, key: &str) -> usize {
        self.package[key].as_array().map_or(0, Vec::len)
    }

    /// The manifest's path from the workspace root, for messages.
    fn manifest(&self) -> String {
        let root = paths::repo_root();
        self.manifest_path
            .strip_prefix(&root)
            .unwrap_or(&self.manifest_path)
            .display()
            .to_string()
    }
}

/// `cargo metadata` of the workspace, with the resolved dependency graph.
struct Metadata {
    json: Value,
    target_directory: PathBuf,
}

impl Metadata {
    fn read() -> Result<Metadata> {
        let output = process::output(
            &mut cargo(&["metadata", "--format-version", "1"]),
            "cargo metadata",
        )?;
        let json: Value = serde_json::from_str(&output).context("cargo metadata's JSON")?;
        Metadata::from_json(json)
    }

    fn from_json(json: Value) -> Result<Metadata> {
        let target_directory = json["target_directory"]
            .as_str()
            .map(PathBuf::from)
            .context("cargo metadata printed no target_directory")?;
        Ok(Metadata {
            json,
            target_directory,
        })
    }

    /// The workspace members cargo would publish (`publish` absent, or a
    /// list of registries that is not empty), in cargo's order.
    fn publishable(&self) -> Vec<Crate> {
        let members = self.members();
        self.packages()
            .filter(|p| p["id"].as_str().is_some_and(|id| members.contains(id)))
            .filter(|p| match &p["publish"] {
                Value::Null => true,
                Value::Array(registries) => !registries.is_empty(),
                _ => false,
            })
            .map(|p| Crate {
                id: p["id"].as_str().unwrap_or_default().to_owned(),
                name: p["name"].as_str().unwrap_or_default().to_owned(),
                version: p["version"].as_str().unwrap_or_default().to_owned(),
                manifest_path: PathBuf::from(p["manifest_path"].as_str().unwrap_or_default()),
                package: p.clone(),
            })
            .collect()
    }

    fn packages(&self) -> impl Iterator<Item = &Value> {
        self.json["packages"].as_array().into_iter().flatten()
    }

    fn members(&self) -> BTreeSet<&str> {
        self.json["workspace_members"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect()
    }

    /// Package id -> its resolved dependencies: (package id, whether only
    /// as a dev-dependency).
    fn graph(&self) -> BTreeMap<&str, Vec<(&str, bool)>> {
        let nodes = self.json["resolve"]["nodes"]
            .as_array()
            .into_iter()
            .flatten();
        nodes
            .filter_map(|node| {
                let id = node["id"].as_str()?;
                let deps = node["deps"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|dep| {
                        let kinds = dep["dep_kinds"].as_array()?;
                        let dev_only = kinds.iter().all(|k| k["kind"] == "dev");
                        Some((dep["pkg"].as_str()?, dev_only))
                    })
                    .collect();
                Some((id, deps))
            })
            .collect()
    }

    /// The crates whose package can be verified without building a native
    /// library, and the others; both in `crates`' order. A crate is cheap
    /// when no native library is among its normal and build dependencies,
    /// and every workspace member it reaches (through dev-dependencies as
    /// well) is a cheap publishable crate: cargo's overlay resolves those
    /// from the same invocation, so they are verified with it.
    fn split_by_native_builds<'a>(&self, crates: &'a [Crate]) -> (Vec<&'a str>, Vec<&'a str>) {
        let graph = self.graph();
        let names: BTreeMap<&str, &str> = self
            .packages()
            .filter_map(|p| Some((p["id"].as_str()?, p["name"].as_str()?)))
            .collect();
        let members = self.members();
        let publishable: BTreeSet<&str> = crates.iter().map(|c| c.id.as_str()).collect();
        let builds_native = |id: &str| {
            reachable(&graph, id, false)
                .iter()
                .any(|dep| names.get(dep).is_some_and(|name| NATIVE.contains(name)))
        };
        let cheap = |krate: &Crate| {
            !builds_native(&krate.id)
                && reachable(&graph, &krate.id, true)
                    .iter()
                    .filter(|dep| members.contains(*dep))
                    .all(|dep| publishable.contains(dep) && !builds_native(dep))
        };
        let (mut verified, mut unverified) = (Vec::new(), Vec::new());
        for krate in crates {
            if cheap(krate) {
                verified.push(krate.name.as_str());
            } else {
                unverified.push(krate.name.as_str());
            }
        }
        (verified, unverified)
    }
}

/// Every package reachable from `from` (itself left out), through normal
/// and build dependencies, and dev-dependencies too when `with_dev`. Only
/// the first step may be a dev-dependency: a dependency's own
/// dev-dependencies are never built or resolved for it.
fn reachable<'a>(
    graph: &BTreeMap<&'a str, Vec<(&'a str, bool)>>,
    from: &str,
    with_dev: bool,
) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<&str> = graph
        .get(from)
        .into_iter()
        .flatten()
        .filter(|(_, dev_only)| with_dev || !dev_only)
        .map(|(id, _)| *id)
        .collect();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        for (dep, dev_only) in graph.get(id).into_iter().flatten() {
            if !dev_only {
                stack.push(dep);
            }
        }
    }
    seen
}

/// What crates.io or docs.rs would miss in each crate's metadata.
fn metadata_problems(crates: &[Crate]) -> Vec<String> {
    let mut problems = Vec::new();
    for krate in crates {
        let manifest = krate.manifest();
        let mut missing = |what: &str, fix: &str| {
            problems.push(format!("{manifest}: no {what}; {fix}"));
        };
        if krate.field("description").is_none() {
            missing(
                "description",
                "add `description = \"...\"` (crates.io requires one)",
            );
        }
        if krate.field("license").is_none() && krate.field("license_file").is_none() {
            missing("licence", "add `license.workspace = true`");
        }
        if krate.field("repository").is_none() {
            missing("repository", "add `repository.workspace = true`");
        }
        if krate.field("readme").is_none() {
            missing(
                "readme",
                "add a README.md beside it and `readme = \"README.md\"`",
            );
        }
        if krate.field("rust_version").is_none() {
            missing("rust-version", "add `rust-version.workspace = true`");
        }
        if krate.list("keywords") == 0 {
            missing(
                "keywords",
                "add up to five `keywords` crates.io searches by",
            );
        }
        if krate.list("categories") == 0 {
            missing(
                "categories",
                "add `categories` from crates.io's category slugs",
            );
        }
        let features = &krate.package["features"];
        let docs_rs = &krate.package["metadata"]["docs.rs"];
        for feature in docs_rs["features"].as_array().into_iter().flatten() {
            let name = feature.as_str().unwrap_or_default();
            if features.get(name).is_none() {
                problems.push(format!(
                    "{manifest}: [package.metadata.docs.rs] names feature `{name}`, \
                     which the crate does not have (docs.rs would fail to build it)"
                ));
            }
        }
    }
    problems
}

/// What is wrong with a `.crate` file's contents: the licence or readme
/// missing, tests or fixtures inside, too large for crates.io.
fn crate_problems(krate: &Crate, file: &Path) -> Result<Vec<String>> {
    let size = std::fs::metadata(file)
        .with_context(|| format!("cargo package wrote no {}", file.display()))?
        .len();
    let listing = process::output(
        Command::new("tar").arg("-tzf").arg(file),
        &format!("tar -tzf {}", file.display()),
    )?;
    let root = format!("{}-{}/", krate.name, krate.version);
    let files: Vec<&str> = listing
        .lines()
        .filter_map(|line| line.strip_prefix(&root))
        .collect();
    let license = krate
        .field("license_file")
        .map_or("LICENSE", |path| file_name(path));
    let readme = krate.field("readme").map_or("README.md", file_name);
    let mut problems = contents_problems(&files, license, readme);
    if size > MAX_CRATE_BYTES {
        problems.push(format!(
            "{} is {size} bytes, more than crates.io accepts ({MAX_CRATE_BYTES}): \
             narrow `include` in {}",
            file.display(),
            krate.manifest()
        ));
    }
    eprintln!(
        "package: {}: {} files, {} KiB",
        krate.name,
        files.len(),
        size.div_ceil(1024)
    );
    Ok(problems)
}

fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// The rules on a package's file list (paths inside the package).
fn contents_problems(files: &[&str], license: &str, readme: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (what, name) in [("licence", license), ("readme", readme)] {
        if !files.contains(&name) {
            problems.push(format!(
                "the package has no {name} (its {what}): a file or symlink beside \
                 Cargo.toml, listed in `include`"
            ));
        }
    }
    let left_in: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| {
            LEFT_OUT.iter().any(|dir| f.starts_with(dir))
                || f.split('/').any(|part| part == "fixtures")
        })
        .collect();
    if !left_in.is_empty() {
        problems.push(format!(
            "the package holds tests, examples or fixtures ({}, ...): keep them out \
             with `include`",
            left_in[0]
        ));
    }
    problems
}

/// The cargo that builds with the declared release.
#[derive(Debug)]
struct Toolchain {
    rust_version: String,
    /// `rustup run <name>` before `cargo`, or nothing for the cargo that
    /// runs xtask.
    rustup: Option<String>,
    label: String,
    is_current: bool,
}

impl Toolchain {
    fn cargo(&self, args: &[&str]) -> Command {
        let mut command = match &self.rustup {
            None => cargo(&[]),
            Some(name) => {
                let mut command = Command::new("rustup");
                command
                    .args(["run", name, "cargo"])
                    .current_dir(paths::repo_root());
                command
            }
        };
        command.args(args);
        command
    }
}

/// The toolchain of the crates' one declared `rust-version`.
fn msrv_toolchain(crates: &[Crate]) -> Result<Toolchain> {
    let mut declared: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for krate in crates {
        if let Some(version) = krate.field("rust_version") {
            declared.entry(version).or_default().push(&krate.name);
        }
    }
    let rust_version = match declared.len() {
        0 => {
            bail!("no publishable crate declares a rust-version (`rust-version.workspace = true`)")
        }
        1 => declared.keys().next().expect("one").to_string(),
        _ => {
            let each: Vec<String> = declared
                .iter()
                .map(|(version, names)| format!("{version} ({})", names.join(", ")))
                .collect();
            bail!(
                "the publishable crates declare different rust-versions: {}; \
                 one workspace-wide rust-version is what this check builds with",
                each.join("; ")
            )
        }
    };
    let wanted = minor_release(&rust_version)
        .with_context(|| format!("rust-version `{rust_version}` is not MAJOR.MINOR[.PATCH]"))?;

    let current = rustc_release(Command::new(rustc_bin()))?;
    if minor_release(&current) == Some(wanted) {
        return Ok(Toolchain {
            label: format!("rustc {current}, the toolchain running xtask"),
            rust_version,
            rustup: None,
            is_current: true,
        });
    }
    let installed = Command::new("rustup")
        .args(["toolchain", "list"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if let Some(name) = rustup_toolchain(&installed, wanted) {
        let mut rustc = Command::new("rustup");
        rustc.args(["run", &name, "rustc"]);
        let release = rustc_release(rustc)?;
        if minor_release(&release) == Some(wanted) {
            return Ok(Toolchain {
                label: format!("rustc {release} (rustup toolchain {name})"),
                rust_version,
                rustup: Some(name),
                is_current: false,
            });
        }
    }
    bail!(
        "rust-version {rust_version} must be checked with a {major}.{minor} compiler, \
         but cargo's rustc is {current} and rustup has no {major}.{minor} toolchain: \
         `rustup toolchain install {major}.{minor} --profile minimal`, or raise \
         rust-version in the root Cargo.toml (a minor release: docs/versioning.md)",
        major = wanted.0,
        minor = wanted.1
    )
}

/// The rustc cargo runs: RUSTC when set, else `rustc` on PATH (through
/// rustup's proxy, the toolchain cargo itself came from).
fn rustc_bin() -> String {
    std::env::var("RUSTC").unwrap_or_else(|_| {
        // cargo_bin() is a toolchain's own cargo when xtask runs under
        // `cargo run`: its sibling is that toolchain's rustc.
        let cargo = PathBuf::from(cargo_bin());
        match cargo.parent() {
            Some(dir) if dir.join("rustc").is_file() => dir.join("rustc").display().to_string(),
            _ => "rustc".to_owned(),
        }
    })
}

/// `release: 1.95.0` of `rustc -vV`.
fn rustc_release(mut rustc: Command) -> Result<String> {
    let output = process::output(rustc.arg("-vV"), "rustc -vV")?;
    output
        .lines()
        .find_map(|line| line.strip_prefix("release: "))
        .map(|release| release.trim().to_owned())
        .with_context(|| format!("`rustc -vV` printed no release line: {output}"))
}

/// (major, minor) of `1.95`, `1.95.0` or `1.95.1-beta.2`: a patch release
/// fixes bugs only, so any 1.95 compiler checks rust-version 1.95.
fn minor_release(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The installed rustup toolchain of a release, from `rustup toolchain
/// list` (`1.95.0-x86_64-unknown-linux-gnu`, `1.95-...`): a channel name
/// such as `stable` may point anywhere later, so only versioned ones count.
fn rustup_toolchain(list: &str, wanted: (u32, u32)) -> Option<String> {
    list.lines()
        .filter_map(|line| line.split_whitespace().next())
        .find(|name| {
            let version = name.split('-').next().unwrap_or_default();
            version.split('.').count() >= 2 && minor_release(version) == Some(wanted)
        })
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn krate(package: Value) -> Crate {
        Crate {
            id: package["id"].as_str().unwrap_or("x").to_owned(),
            name: package["name"].as_str().unwrap_or("x").to_owned(),
            version: "0.1.0".to_owned(),
            manifest_path: PathBuf::from("/ws/crates/x/Cargo.toml"),
            package,
        }
    }

    #[test]
    fn only_targets_left_out_by_include_are_filtered() {
        assert!(is_left_out_target(
            "warning: ignoring test `records` as `tests/records.rs` is not included in the published package"
        ));
        assert!(is_left_out_target(
            "warning: ignoring example `b` as `examples/b.rs` is not included in the published package"
        ));
        assert!(!is_left_out_target(
            "warning: manifest has no documentation"
        ));
        assert!(!is_left_out_target(
            "error: failed to prepare local package for uploading"
        ));
    }

    #[test]
    fn releases_compare_by_minor_version() {
        assert_eq!(minor_release("1.95"), Some((1, 95)));
        assert_eq!(minor_release("1.95.0"), Some((1, 95)));
        assert_eq!(minor_release("1.95.1-beta.2"), Some((1, 95)));
        assert_eq!(minor_release("1.96.0-nightly"), Some((1, 96)));
        assert_eq!(minor_release("stable"), None);
        assert_eq!(minor_release("1"), None);
    }

    #[test]
    fn only_a_versioned_rustup_toolchain_of_the_release_is_taken() {
        let list = "stable-x86_64-unknown-linux-gnu (active, default)\n\
                    nightly-x86_64-unknown-linux-gnu\n\
                    1.94.1-x86_64-unknown-linux-gnu\n\
                    1.95.0-x86_64-unknown-linux-gnu\n";
        assert_eq!(
            rustup_toolchain(list, (1, 95)).as_deref(),
            Some("1.95.0-x86_64-unknown-linux-gnu")
        );
        assert_eq!(rustup_toolchain(list, (1, 93)), None);
        assert_eq!(
            rustup_toolchain("1.95-x86_64-apple-darwin\n", (1, 95)).as_deref(),
            Some("1.95-x86_64-apple-darwin")
        );
    }

    #[test]
    fn incomplete_metadata_is_named_field_by_field() {
        let complete = krate(json!({
            "name": "good", "description": "d", "license": "Apache-2.0",
            "repository": "r", "readme": "README.md", "rust_version": "1.95",
            "keywords": ["kafka"], "categories": ["encoding"],
            "features": {"tls": []},
            "metadata": {"docs.rs": {"features": ["tls"]}}
        }));
        assert!(metadata_problems(&[complete]).is_empty());
        let bare = krate(json!({
            "name": "bare", "description": " ", "license": null, "license_file": null,
            "keywords": [], "features": {},
            "metadata": {"docs.rs": {"features": ["derive"]}}
        }));
        let problems = metadata_problems(&[bare]);
        for what in [
            "no description",
            "no licence",
            "no repository",
            "no readme",
            "no rust-version",
            "no keywords",
            "no categories",
            "feature `derive`",
        ] {
            assert!(
                problems.iter().any(|p| p.contains(what)),
                "`{what}` not reported: {problems:?}"
            );
        }
        assert_eq!(problems.len(), 8, "{problems:?}");
    }

    #[test]
    fn a_package_needs_its_licence_and_readme_and_no_tests() {
        let good = [
            "Cargo.toml",
            "Cargo.toml.orig",
            "LICENSE",
            "README.md",
            "src/lib.rs",
        ];
        assert!(contents_problems(&good, "LICENSE", "README.md").is_empty());
        let bad = [
            "Cargo.toml",
            "README.md",
            "src/lib.rs",
            "tests/fixtures/a.tsv",
        ];
        let problems = contents_problems(&bad, "LICENSE", "README.md");
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("no LICENSE"));
        assert!(problems[1].contains("tests/fixtures/a.tsv"));
        let nested = ["LICENSE", "README.md", "src/operators/fixtures/x.bin"];
        assert_eq!(contents_problems(&nested, "LICENSE", "README.md").len(), 1);
        // A module's unit tests in a file of their own are sources.
        let unit_tests = [
            "LICENSE",
            "README.md",
            "src/thread/tests.rs",
            "src/a/tests/b.rs",
        ];
        assert!(contents_problems(&unit_tests, "LICENSE", "README.md").is_empty());
    }

    /// A workspace of four publishable crates and one that is not: `a`
    /// pure, `b` on a native library through a registry crate, `c` on `a`
    /// with `b` as a dev-dependency, `d` on `a` only.
    fn workspace() -> Metadata {
        let package = |id: &str, publish: Value| json!({"id": id, "name": id, "version": "0.1.0", "publish": publish});
        let dep = |pkg: &str, kind: Value| json!({"pkg": pkg, "dep_kinds": [{"kind": kind}]});
        Metadata::from_json(json!({
            "target_directory": "/target",
            "workspace_members": ["a", "b", "c", "d", "hack"],
            "packages": [
                package("a", Value::Null), package("b", Value::Null), package("c", Value::Null),
                package("d", json!(["crates-io"])), package("hack", json!([])),
                package("rocks", Value::Null), package("librocksdb-sys", Value::Null),
            ],
            "resolve": {"nodes": [
                {"id": "a", "deps": []},
                {"id": "b", "deps": [dep("rocks", Value::Null)]},
                {"id": "c", "deps": [dep("a", Value::Null), dep("b", json!("dev"))]},
                {"id": "d", "deps": [dep("a", Value::Null), dep("hack", json!("build"))]},
                {"id": "hack", "deps": []},
                {"id": "rocks", "deps": [dep("librocksdb-sys", Value::Null)]},
                {"id": "librocksdb-sys", "deps": []},
            ]}
        }))
        .unwrap()
    }

    #[test]
    fn publishable_members_are_those_without_publish_false() {
        let names: Vec<String> = workspace()
            .publishable()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
    }

    #[test]
    fn crates_reaching_a_native_library_are_not_verified() {
        let metadata = workspace();
        let crates = metadata.publishable();
        let (verified, unverified) = metadata.split_by_native_builds(&crates);
        // b builds RocksDB; c needs b in the overlay for its dev-dependency;
        // d reaches a member that is not published.
        assert_eq!(verified, ["a"]);
        assert_eq!(unverified, ["b", "c", "d"]);
    }
}
