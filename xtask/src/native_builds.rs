//! `cargo xtask native-builds`: checks that every cargo invocation of
//! README's two commands and CI builds RocksDB and librdkafka the same way,
//! so a fresh machine compiles each native library once (RocksDB's C++ is
//! about 11 minutes on two cores).
//!
//! Cargo gives a build script's output its own directory per hash of the
//! unit that runs it: the package, its features, its profile and, through
//! the build script's own compilation, every host crate it depends on with
//! their features and profiles. Each invocation resolves features anew, so
//! `cargo run -p kstreams-examples` and `cargo build -p kstreams-compat`
//! could disagree on, say, the features of bindgen's itertools and build
//! RocksDB twice. This check asks cargo for each invocation's unit graph
//! (`--unit-graph`, unstable, hence `RUSTC_BOOTSTRAP=1`; it plans and builds
//! nothing), reduces the unit that runs each native library's build script
//! to a fingerprint of everything in that hash but the profile's name, and
//! fails when two invocations disagree, naming the first crate that differs
//! and how. The fix then goes in workspace-hack/Cargo.toml (features) or
//! the root Cargo.toml's profiles.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::cargo::{self, CLIPPY, NO_ROCKSDB, TEST_NO_RUN};
use crate::cli::{exit_code, Args};
use crate::{bench, chaos, compat, example};

/// The packages whose build scripts compile native code from source.
pub(crate) const NATIVE: &[&str] = &["librocksdb-sys", "rdkafka-sys"];

/// Every cargo invocation that README's commands and CI make, by the name
/// the report uses. `cargo clippy` plans as `cargo check` does (clippy only
/// wraps the workspace's own crates' compiler).
fn invocations() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut example = example::CARGO_RUN.to_vec();
    example.push(example::DEFAULT);
    // Up to `--`: what follows is clippy's lint flags, for the workspace's
    // own crates only (and `cargo check` takes none).
    let mut clippy = vec!["check"];
    clippy.extend(CLIPPY[1..].iter().take_while(|&&arg| arg != "--"));
    vec![
        ("cargo xtask example", example),
        ("clippy", clippy),
        ("no-rocksdb", NO_ROCKSDB.to_vec()),
        ("cargo test", TEST_NO_RUN.to_vec()),
        ("compat", compat::CARGO_BUILD.to_vec()),
        ("chaos", chaos::CARGO_BUILD.to_vec()),
        ("bench --smoke", bench::CARGO_BUILD_NODE.to_vec()),
    ]
}

pub(crate) fn cli(args: Args) -> Result<ExitCode> {
    args.finish()?;
    Ok(exit_code(check()?))
}

/// Whether each native library is built one way across all invocations;
/// prints what it found either way.
pub(crate) fn check() -> Result<bool> {
    // library -> fingerprint -> (invocations, the build script's unit tree)
    let mut seen: BTreeMap<&str, BTreeMap<u64, (Vec<&str>, UnitTree)>> = BTreeMap::new();
    for (name, args) in invocations() {
        let graph = unit_graph(&args).with_context(|| format!("the unit graph of `{name}`"))?;
        for library in NATIVE {
            for tree in graph.build_script_runs(library) {
                let entry = seen
                    .entry(library)
                    .or_default()
                    .entry(tree.fingerprint)
                    .or_insert_with(|| (Vec::new(), tree));
                if !entry.0.contains(&name) {
                    entry.0.push(name);
                }
            }
        }
    }
    let mut one_each = true;
    for (library, builds) in &seen {
        if builds.len() == 1 {
            let (names, _) = builds.values().next().expect("one build");
            eprintln!(
                "native-builds: {library}: one build for {}",
                names.join(", ")
            );
            continue;
        }
        one_each = false;
        eprintln!("native-builds: {library} is built {} ways:", builds.len());
        let builds: Vec<&(Vec<&str>, UnitTree)> = builds.values().collect();
        for (names, _) in &builds {
            eprintln!("  by {}", names.join(", "));
        }
        for pair in builds.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            eprintln!("  {} against {}:", a.0.join(", "), b.0.join(", "));
            for line in a.1.differences(&b.1) {
                eprintln!("    {line}");
            }
        }
    }
    for library in NATIVE {
        if !seen.contains_key(library) {
            bail!("no invocation builds {library}: is the list in xtask/src/native_builds.rs current?");
        }
    }
    if !one_each {
        eprintln!(
            "native-builds: pin the differing features in workspace-hack/Cargo.toml \
             (a host crate under [build-dependencies]) or the profile in the root Cargo.toml"
        );
    }
    Ok(one_each)
}

/// One invocation's unit graph, as cargo prints it.
struct UnitGraph {
    units: Vec<Value>,
}

/// What a build script's run depends on: its fingerprint, and each crate in
/// its tree with the description of every way it is built there.
struct UnitTree {
    fingerprint: u64,
    crates: BTreeMap<String, BTreeSet<String>>,
}

impl UnitTree {
    /// One line per crate built differently in `self` and `other`.
    fn differences(&self, other: &UnitTree) -> Vec<String> {
        let names: BTreeSet<&String> = self.crates.keys().chain(other.crates.keys()).collect();
        let none = BTreeSet::new();
        names
            .into_iter()
            .filter_map(|name| {
                let (a, b) = (
                    self.crates.get(name).unwrap_or(&none),
                    other.crates.get(name).unwrap_or(&none),
                );
                (a != b).then(|| format!("{name}: {a:?} against {b:?}"))
            })
            .collect()
    }
}

fn unit_graph(args: &[&str]) -> Result<UnitGraph> {
    let mut command = cargo::cargo(args);
    command
        .args(["-Z", "unstable-options", "--unit-graph"])
        .env("RUSTC_BOOTSTRAP", "1");
    let output = command
        .output()
        .with_context(|| format!("cannot run {command:?}"))?;
    // `cargo run --unit-graph` prints the graph, then fails for having
    // nothing to run: the graph on stdout is what counts.
    let graph: Value = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "{command:?} printed no unit graph: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    let units = graph["units"]
        .as_array()
        .context("the unit graph has no units")?
        .clone();
    Ok(UnitGraph { units })
}

impl UnitGraph {
    /// The trees of every unit that runs `library`'s build script.
    fn build_script_runs(&self, library: &str) -> Vec<UnitTree> {
        (0..self.units.len())
            .filter(|&i| {
                let unit = &self.units[i];
                unit["mode"] == "run-custom-build" && package_name(unit) == library
            })
            .map(|i| {
                let mut crates = BTreeMap::new();
                let fingerprint = self.fingerprint(i, &mut HashMap::new(), &mut crates);
                UnitTree {
                    fingerprint,
                    crates,
                }
            })
            .collect()
    }

    /// A hash of unit `i` and all it depends on: what cargo's own hash of a
    /// unit takes in, less the profile's name (`cargo test` plans its
    /// dependencies under the test profile, which has the dev profile's
    /// settings and shares its builds).
    fn fingerprint(
        &self,
        i: usize,
        memo: &mut HashMap<usize, u64>,
        crates: &mut BTreeMap<String, BTreeSet<String>>,
    ) -> u64 {
        if let Some(&known) = memo.get(&i) {
            return known;
        }
        let unit = &self.units[i];
        let mut profile = unit["profile"].clone();
        if let Some(fields) = profile.as_object_mut() {
            fields.remove("name");
        }
        let own = format!(
            "{} features [{}] profile {{{}}}{}",
            unit["mode"].as_str().unwrap_or_default(),
            words(&unit["features"]),
            profile
                .as_object()
                .map(|fields| {
                    let pairs: Vec<String> =
                        fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    pairs.join(" ")
                })
                .unwrap_or_default(),
            unit["platform"]
                .as_str()
                .map(|target| format!(" for {target}"))
                .unwrap_or_default(),
        );
        let mut deps: Vec<u64> = unit["dependencies"]
            .as_array()
            .map(|deps| {
                deps.iter()
                    .filter_map(|dep| dep["index"].as_u64())
                    .map(|dep| self.fingerprint(dep as usize, memo, crates))
                    .collect()
            })
            .unwrap_or_default();
        deps.sort_unstable();
        let mut hasher = DefaultHasher::new();
        unit["pkg_id"].to_string().hash(&mut hasher);
        unit["target"]["name"].to_string().hash(&mut hasher);
        unit["target"]["kind"].to_string().hash(&mut hasher);
        own.hash(&mut hasher);
        deps.hash(&mut hasher);
        let fingerprint = hasher.finish();
        let name = format!("{} ({})", package_name(unit), unit["target"]["name"]);
        crates.entry(name).or_default().insert(own);
        memo.insert(i, fingerprint);
        fingerprint
    }
}

/// A JSON array of strings as one comma-separated line.
fn words(list: &Value) -> String {
    let words: Vec<&str> = list
        .as_array()
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    words.join(",")
}

/// The package's name in a unit's `pkg_id`, which cargo spells
/// `registry+https://...#name@version` or `path+file:///...#name@version`
/// (the name left out when it is the path's last part).
fn package_name(unit: &Value) -> String {
    let id = unit["pkg_id"].as_str().unwrap_or_default();
    let tail = id.rsplit_once('#').map_or(id, |(_, tail)| tail);
    let name = tail.split_once('@').map_or(tail, |(name, _)| name);
    // `path+file:///work/crates/x#0.1.0`: no name, only a version.
    if name.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        let path = id.split_once('#').map_or(id, |(path, _)| path);
        return path.rsplit('/').next().unwrap_or_default().to_owned();
    }
    name.to_owned()
}
