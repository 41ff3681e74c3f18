//! `cargo xtask ci`: what CI checks, runnable locally.
//!
//! First the system packages, as `cargo xtask setup --ci` checks (and as
//! root installs) them; a machine without them fails here, with the line
//! that installs them, not an hour later in a build script.
//!
//! Steps: rustfmt, that every invocation builds RocksDB and librdkafka one
//! way (`native-builds`), no import cycle between a crate's modules
//! (`module-cycles`), clippy (warnings are errors), every publishable crate
//! packaged and built on the declared rust-version (`package`), cargo-deny
//! (licenses, bans, sources), the workspace tests against a real broker,
//! the compat scenarios on both sides (Apache Kafka Streams and kstreams) and some
//! with both in one streams group (`compat --mixed`) or moved from one to
//! the other mid-input (`compat --migrate`), the chaos
//! scenarios in their short form, and a smoke run of the benchmark
//! comparison (`bench compare --smoke`), then the Grafana dashboard's
//! queries against a real Prometheus (`cargo xtask dashboard`). Every step
//! runs even when an earlier one failed, so one run reports everything; the
//! exit status is 1 if any step failed.

use std::process::{Command, ExitCode};

use anyhow::Result;

use crate::bench;
use crate::cargo::{cargo, cargo_bin, CLIPPY, NO_ROCKSDB, TEST_NO_RUN};
use crate::chaos;
use crate::cli::Args;
use crate::compat;
use crate::dashboard;
use crate::kafka::{Lease, BOOTSTRAP_ENV};
use crate::module_cycles;
use crate::native_builds;
use crate::package;
use crate::process;
use crate::registry;
use crate::setup::{self, Scope};
use crate::test_failures;

/// The steps that share the broker, with how each ended, and the digest
/// of the failing tests.
type BrokerSteps = (Vec<(&'static str, Outcome)>, Vec<String>);

/// How a step ended.
enum Outcome {
    Passed,
    Failed,
    Skipped(&'static str),
}

pub(crate) fn cli(args: Args) -> Result<ExitCode> {
    args.finish()?;
    setup::ensure(Scope::Ci)?;
    let mut results: Vec<(&str, Outcome)> = vec![
        ("fmt", cargo_step(&["fmt", "--all", "--", "--check"])?),
        // Before anything compiles: a second build of RocksDB costs more
        // than this whole check.
        (
            "native-builds",
            match native_builds::check() {
                Ok(one_each) => outcome(one_each),
                Err(error) => {
                    eprintln!("ci: native-builds: {error:#}");
                    Outcome::Failed
                }
            },
        ),
        (
            "module-cycles",
            match module_cycles::check() {
                Ok(none) => outcome(none),
                Err(error) => {
                    eprintln!("ci: module-cycles: {error:#}");
                    Outcome::Failed
                }
            },
        ),
        ("clippy", cargo_step(&CLIPPY)?),
        // The `rocksdb` feature off (in-memory stores only) must keep
        // building: nothing else compiles the facade that way.
        ("no-rocksdb", cargo_step(&NO_ROCKSDB)?),
        // After clippy, which compiled every crate with this toolchain: when
        // it is the declared rust-version, the step does not build them again.
        (
            "package",
            match package::check(false, true) {
                Ok(passed) => outcome(passed),
                Err(error) => {
                    eprintln!("ci: package: {error:#}");
                    Outcome::Failed
                }
            },
        ),
        ("deny", deny()?),
    ];
    let (broker_results, failed_tests) = broker_steps()?;
    results.extend(broker_results);
    // Three brokers of its own, the single one above being stopped.
    results.push((
        "failover",
        match chaos::leader_failover_ci() {
            Ok(passed) => outcome(passed),
            Err(error) => {
                eprintln!("ci: chaos leader-failover: {error:#}");
                Outcome::Failed
            }
        },
    ));
    // The Grafana dashboard against a real Prometheus, on the in-process
    // cluster (no broker needed); Prometheus is built once, then cached.
    results.push((
        "dashboard",
        match dashboard::check(&dashboard::default_path()) {
            Ok(passed) => outcome(passed),
            Err(error) => {
                eprintln!("ci: dashboard: {error:#}");
                Outcome::Failed
            }
        },
    ));

    let summary: Vec<String> = results
        .iter()
        .map(|(name, outcome)| match outcome {
            Outcome::Passed => format!("{name} ok"),
            Outcome::Failed => format!("{name} FAILED"),
            Outcome::Skipped(why) => format!("{name} skipped ({why})"),
        })
        .collect();
    eprintln!("ci: {}", summary.join(", "));
    // Last, so that a log read from its end names what failed.
    for line in &failed_tests {
        eprintln!("ci: failed test: {line}");
    }
    let failed = results.iter().any(|(_, o)| matches!(o, Outcome::Failed));
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The tests and the compat scenarios, which share one broker; the tests
/// also get a schema registry. Both are started only after the tests
/// compiled, and stopped (when ci started them) when their leases drop,
/// whatever happened.
fn broker_steps() -> Result<BrokerSteps> {
    if let Outcome::Failed = cargo_step(&TEST_NO_RUN)? {
        return Ok((vec![("test", Outcome::Failed)], Vec::new()));
    }
    let lease = match Lease::acquire() {
        Ok(lease) => lease,
        Err(error) => {
            eprintln!("ci: no broker: {error:#}");
            return Ok((vec![("broker", Outcome::Failed)], Vec::new()));
        }
    };
    // The Avro tests' Schema Registry and Java peer: without them those
    // tests would skip, so a failure to start them fails the step.
    let registry = match registry::Lease::acquire() {
        Ok(registry) => registry,
        Err(error) => {
            eprintln!("ci: no schema registry: {error:#}");
            return Ok((vec![("registry", Outcome::Failed)], Vec::new()));
        }
    };
    let java_peer = match registry::java_peer_classpath() {
        Ok(classpath) => classpath,
        Err(error) => {
            eprintln!("ci: no Java Avro peer: {error:#}");
            return Ok((vec![("registry", Outcome::Failed)], Vec::new()));
        }
    };
    let python_peer = match registry::python_peer() {
        Ok(python) => python,
        Err(error) => {
            eprintln!("ci: no Python Protobuf/JSON Schema peer: {error:#}");
            return Ok((vec![("registry", Outcome::Failed)], Vec::new()));
        }
    };
    // --no-fail-fast: one failing test binary must not hide the others' results.
    let mut test = cargo(&["test", "--workspace", "--no-fail-fast"]);
    test.env(BOOTSTRAP_ENV, lease.bootstrap())
        .env(registry::REGISTRY_ENV, registry.url())
        .env(registry::JAVA_PEER_ENV, java_peer)
        .env(registry::PYTHON_PEER_ENV, python_peer)
        .envs(lease.sasl_ssl_env().iter().map(|(k, v)| (k, v)));
    let (passed, failed_tests) = test_failures::run(&mut test)?;
    let tests = outcome(passed);
    drop(registry);
    let compat = match compat::run_all_both(lease.bootstrap()) {
        Ok(agree) => outcome(agree),
        Err(error) => {
            eprintln!("ci: compat: {error:#}");
            Outcome::Failed
        }
    };
    // Kafka Streams and kstreams sharing one streams group: about a minute.
    let mixed = match compat::run_mixed_ci(lease.bootstrap()) {
        Ok(agree) => outcome(agree),
        Err(error) => {
            eprintln!("ci: compat --mixed: {error:#}");
            Outcome::Failed
        }
    };
    // An application moved between Kafka Streams and kstreams, both ways:
    // about 3 minutes.
    let migrate = match compat::run_migrations_ci(lease.bootstrap()) {
        Ok(agree) => outcome(agree),
        Err(error) => {
            eprintln!("ci: compat --migrate: {error:#}");
            Outcome::Failed
        }
    };
    // Short: 3 kills per run, 1k malformed records, 2 churn rounds per group
    // protocol, one broker restart; about 5 minutes.
    let scenarios: Vec<String> = chaos::CI_SCENARIOS.iter().map(|s| s.to_string()).collect();
    let chaos = match chaos::run(lease.bootstrap(), &scenarios, false, None) {
        Ok(passed) => outcome(passed),
        Err(error) => {
            eprintln!("ci: chaos: {error:#}");
            Outcome::Failed
        }
    };
    // One small run of every workload on all three implementations, each
    // output checked: the comparison stays runnable. No figures are judged.
    // It finds the broker leased above (the running cluster).
    let bench = match bench::compare(Args::new(["--smoke".to_owned()])) {
        Ok(code) => outcome(code == ExitCode::SUCCESS),
        Err(error) => {
            eprintln!("ci: bench compare --smoke: {error:#}");
            Outcome::Failed
        }
    };
    Ok((
        vec![
            ("test", tests),
            ("compat", compat),
            ("mixed", mixed),
            ("migrate", migrate),
            ("chaos", chaos),
            ("bench", bench),
        ],
        failed_tests,
    ))
}

/// cargo-deny without the advisories check: that one fetches the RustSec
/// database from GitHub, which CI's network does not reach.
fn deny() -> Result<Outcome> {
    let installed = Command::new(cargo_bin())
        .args(["deny", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        eprintln!("ci: cargo-deny is not installed (cargo install cargo-deny --locked); skipped");
        return Ok(Outcome::Skipped("cargo-deny not installed"));
    }
    eprintln!(
        "ci: cargo deny: advisories not checked (no network access to the advisory database)"
    );
    cargo_step(&[
        "deny",
        "check",
        "--hide-inclusion-graph",
        "licenses",
        "bans",
        "sources",
    ])
}

fn cargo_step(args: &[&str]) -> Result<Outcome> {
    eprintln!("ci: cargo {}", args.join(" "));
    let status = process::status(&mut cargo(args), &format!("cargo {}", args[0]))?;
    Ok(outcome(status.success()))
}

fn outcome(passed: bool) -> Outcome {
    if passed {
        Outcome::Passed
    } else {
        Outcome::Failed
    }
}
