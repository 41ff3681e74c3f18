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
use std::time::{Duration, Instant};

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
use crate::process::{self, secs};
use crate::registry;
use crate::setup::{self, Scope};
use crate::test_failures;

/// One step of the run: its name, how it ended and how long it took (the
/// summary line gives each step's time, so that a cold run says where its
/// minutes went).
struct Step {
    name: &'static str,
    outcome: Outcome,
    took: Duration,
}

/// How a step ended.
enum Outcome {
    Passed,
    Failed,
    Skipped(&'static str),
}

pub(crate) fn cli(args: Args) -> Result<ExitCode> {
    args.finish()?;
    setup::ensure(Scope::Ci)?;
    let mut steps = vec![
        timed("fmt", || cargo_step(&["fmt", "--all", "--", "--check"]))?,
        // Before anything compiles: a second build of RocksDB costs more
        // than this whole check.
        timed("native-builds", || {
            Ok(verdict("native-builds", native_builds::check()))
        })?,
        timed("module-cycles", || {
            Ok(verdict("module-cycles", module_cycles::check()))
        })?,
        timed("clippy", || cargo_step(&CLIPPY))?,
        // The `rocksdb` feature off (in-memory stores only) must keep
        // building: nothing else compiles the facade that way.
        timed("no-rocksdb", || cargo_step(&NO_ROCKSDB))?,
        // After clippy, which compiled every crate with this toolchain: when
        // it is the declared rust-version, the step does not build them again.
        timed("package", || {
            Ok(verdict("package", package::check(false, true)))
        })?,
        timed("deny", deny)?,
    ];
    let (broker_steps, failed_tests) = broker_steps()?;
    steps.extend(broker_steps);
    // Three brokers of its own, the single one above being stopped.
    steps.push(timed("failover", || {
        Ok(verdict(
            "chaos leader-failover",
            chaos::leader_failover_ci(),
        ))
    })?);
    // The Grafana dashboard against a real Prometheus, on the in-process
    // cluster (no broker needed); Prometheus is built once, then cached.
    steps.push(timed("dashboard", || {
        Ok(verdict(
            "dashboard",
            dashboard::check(&dashboard::default_path()),
        ))
    })?);

    let summary: Vec<String> = steps
        .iter()
        .map(|step| {
            let took = secs(step.took);
            match step.outcome {
                Outcome::Passed => format!("{} ok ({took})", step.name),
                Outcome::Failed => format!("{} FAILED ({took})", step.name),
                Outcome::Skipped(why) => format!("{} skipped ({why})", step.name),
            }
        })
        .collect();
    let total: Duration = steps.iter().map(|step| step.took).sum();
    eprintln!("ci: {} — {} in all", summary.join(", "), secs(total));
    // Last, so that a log read from its end names what failed.
    for line in &failed_tests {
        eprintln!("ci: failed test: {line}");
    }
    let failed = steps
        .iter()
        .any(|step| matches!(step.outcome, Outcome::Failed));
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The tests and the compat scenarios, which share one broker; the tests
/// also get a schema registry. Both are started only after the tests
/// compiled, and stopped (when ci started them) when their leases drop,
/// whatever happened. The test step's time includes compiling the tests
/// and starting the broker and the registry.
fn broker_steps() -> Result<(Vec<Step>, Vec<String>)> {
    let started = Instant::now();
    let failed = |name| Step {
        name,
        outcome: Outcome::Failed,
        took: started.elapsed(),
    };
    if let Outcome::Failed = cargo_step(&TEST_NO_RUN)? {
        return Ok((vec![failed("test")], Vec::new()));
    }
    let lease = match Lease::acquire() {
        Ok(lease) => lease,
        Err(error) => {
            eprintln!("ci: no broker: {error:#}");
            return Ok((vec![failed("broker")], Vec::new()));
        }
    };
    // The Avro tests' Schema Registry and Java peer: without them those
    // tests would skip, so a failure to start them fails the step.
    let registry = match registry::Lease::acquire() {
        Ok(registry) => registry,
        Err(error) => {
            eprintln!("ci: no schema registry: {error:#}");
            return Ok((vec![failed("registry")], Vec::new()));
        }
    };
    let java_peer = match registry::java_peer_classpath() {
        Ok(classpath) => classpath,
        Err(error) => {
            eprintln!("ci: no Java Avro peer: {error:#}");
            return Ok((vec![failed("registry")], Vec::new()));
        }
    };
    let python_peer = match registry::python_peer() {
        Ok(python) => python,
        Err(error) => {
            eprintln!("ci: no Python Protobuf/JSON Schema peer: {error:#}");
            return Ok((vec![failed("registry")], Vec::new()));
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
    let tests = Step {
        name: "test",
        outcome: outcome(passed),
        took: started.elapsed(),
    };
    drop(registry);
    let bootstrap = lease.bootstrap();
    let compat = timed("compat", || {
        Ok(verdict("compat", compat::run_all_both(bootstrap)))
    })?;
    // Kafka Streams and kstreams sharing one streams group: about a minute.
    let mixed = timed("mixed", || {
        Ok(verdict("compat --mixed", compat::run_mixed_ci(bootstrap)))
    })?;
    // An application moved between Kafka Streams and kstreams, both ways:
    // about 3 minutes.
    let migrate = timed("migrate", || {
        Ok(verdict(
            "compat --migrate",
            compat::run_migrations_ci(bootstrap),
        ))
    })?;
    // Short: 3 kills per run, 1k malformed records, 2 churn rounds per group
    // protocol, one broker restart, the secured failover on four listeners;
    // about 6.5 minutes.
    let scenarios: Vec<String> = chaos::CI_SCENARIOS.iter().map(|s| s.to_string()).collect();
    let chaos = timed("chaos", || {
        Ok(verdict(
            "chaos",
            chaos::run(bootstrap, &scenarios, false, None),
        ))
    })?;
    // One small run of every workload on all three implementations, each
    // output checked: the comparison stays runnable. No figures are judged.
    // It finds the broker leased above (the running cluster).
    let bench = timed("bench", || {
        Ok(verdict(
            "bench compare --smoke",
            bench::compare(Args::new(["--smoke".to_owned()])).map(|code| code == ExitCode::SUCCESS),
        ))
    })?;
    Ok((
        vec![tests, compat, mixed, migrate, chaos, bench],
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

/// Runs a step and notes how long it took.
fn timed(name: &'static str, run: impl FnOnce() -> Result<Outcome>) -> Result<Step> {
    let started = Instant::now();
    let outcome = run()?;
    Ok(Step {
        name,
        outcome,
        took: started.elapsed(),
    })
}

/// A check's result as a step's outcome: an error is printed under `what`
/// and fails the step (the run goes on to the next one).
fn verdict(what: &str, result: Result<bool>) -> Outcome {
    match result {
        Ok(passed) => outcome(passed),
        Err(error) => {
            eprintln!("ci: {what}: {error:#}");
            Outcome::Failed
        }
    }
}

fn outcome(passed: bool) -> Outcome {
    if passed {
        Outcome::Passed
    } else {
        Outcome::Failed
    }
}
