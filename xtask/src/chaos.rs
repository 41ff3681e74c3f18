//! `cargo xtask chaos [scenario...] [--long] [--seed N]`: kstreams' chaos
//! scenarios (the kstreams-chaos crate) on a real broker.
//!
//! xtask only leases the broker and runs `kstreams-chaos run <scenario>`
//! once per scenario; the scenarios, the app they kill and the verifier live
//! in chaos/, so xtask stays free of Kafka clients.

use std::process::{Command, ExitCode};

use anyhow::{bail, Result};

use crate::cargo;
use crate::cli::{exit_code, Args};
use crate::kafka::{self, Lease};
use crate::paths;
use crate::process;

/// Every scenario, in the order a bare `cargo xtask chaos` runs them.
/// `secured-failover` runs once per listener of the cluster: plaintext,
/// SASL_SSL (SCRAM-SHA-512), mutual TLS and OAUTHBEARER.
pub(crate) const SCENARIOS: &[&str] = &[
    "sigkill",
    "disk",
    "malformed",
    "churn",
    "broker-restart",
    "secured-failover",
    "rolling-restart",
];

/// Scenarios run only when named: `leader-failover` needs a cluster of
/// three brokers: the one running (`cargo xtask kafka start --brokers 3`),
/// or, when none runs, one it starts and stops.
pub(crate) const NAMED_ONLY: &[&str] = &["leader-failover"];

/// The scenarios CI runs, in their short form, on its single broker:
/// churn's short form (2 rounds per group protocol, the streams protocol
/// with a standby and with SIGKILLs included) took 1 min 48 s beside a
/// build on this machine, broker-restart (one restart) about 45 s,
/// secured-failover (one SIGKILL per listener, four listeners) 1 min 20 s,
/// rolling-restart (three static members restarted in turn) 1 min 12 s.
/// leader-failover runs after them on three brokers of its own
/// ([`leader_failover_ci`]). That is every scenario of a bare `cargo
/// xtask chaos`.
pub(crate) const CI_SCENARIOS: &[&str] = SCENARIOS;

pub(crate) fn cli(args: Args) -> Result<ExitCode> {
    let mut scenarios = Vec::new();
    let mut long = false;
    let mut seed = None;
    let mut rest = args.rest().into_iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--long" => long = true,
            "--seed" => match rest.next() {
                Some(value) => seed = Some(value),
                None => bail!("--seed needs a value"),
            },
            name if SCENARIOS.contains(&name) || NAMED_ONLY.contains(&name) => {
                scenarios.push(name.to_string())
            }
            other => bail!(
                "unknown chaos scenario or option `{other}` (scenarios: {}, {})",
                SCENARIOS.join(", "),
                NAMED_ONLY.join(", ")
            ),
        }
    }
    if scenarios.is_empty() {
        scenarios = SCENARIOS.iter().map(|s| s.to_string()).collect();
    }
    let three_brokers = scenarios.iter().all(|s| NAMED_ONLY.contains(&s.as_str()));
    let lease = if three_brokers && kafka::running_bootstrap().is_none() {
        // Nothing running: leader-failover starts the three brokers it
        // needs (and stops them after), as CI runs it.
        Lease::cluster(3)?
    } else {
        Lease::acquire()?
    };
    let passed = run(lease.bootstrap(), &scenarios, long, seed.as_deref())?;
    Ok(exit_code(passed))
}

/// CI's leader-failover, short form (one leader broker killed, about 1.5
/// min with the cluster's start): on three brokers started for it and
/// stopped after, as the single broker of the other steps is gone by then.
pub(crate) fn leader_failover_ci() -> Result<bool> {
    let lease = Lease::cluster(3)?;
    run(
        lease.bootstrap(),
        &["leader-failover".to_string()],
        false,
        None,
    )
}

/// The build of the chaos binary (`native_builds` checks it).
pub(crate) const CARGO_BUILD: [&str; 3] = ["build", "--package", "kstreams-chaos"];

/// The variables of the secured listeners of the cluster at `bootstrap`,
/// on which `secured-failover` runs: the running xtask cluster's when
/// `bootstrap` is its plaintext listener, whoever leased it (`cargo xtask
/// ci` calls [`run`] with its own lease's address). Else none: the
/// caller's own `KSTREAMS_SASL_SSL_BOOTSTRAP`, ... reach the scenarios as
/// they are, and without them the secured runs fail naming the variable.
fn secured_listeners(bootstrap: &str) -> Vec<(&'static str, String)> {
    if kafka::running_bootstrap().as_deref() == Some(bootstrap) {
        kafka::sasl_ssl_env()
    } else {
        Vec::new()
    }
}

/// Runs `scenarios` against `bootstrap`; whether all passed. Each runs even
/// when an earlier one failed, so one run reports everything.
pub(crate) fn run(
    bootstrap: &str,
    scenarios: &[String],
    long: bool,
    seed: Option<&str>,
) -> Result<bool> {
    let cargo = cargo::cargo_bin();
    let mut build = Command::new(&cargo);
    build
        .current_dir(paths::repo_root())
        .args(CARGO_BUILD)
        .arg("--quiet");
    if !process::status(&mut build, "cargo build -p kstreams-chaos")?.success() {
        return Ok(false);
    }
    let secured = secured_listeners(bootstrap);
    let mut passed = true;
    for scenario in scenarios {
        eprintln!("chaos: {scenario}{}", if long { " (long)" } else { "" });
        let mut command = Command::new(&cargo);
        command.current_dir(paths::repo_root()).args([
            "run",
            "--quiet",
            "--package",
            "kstreams-chaos",
            "--",
            "run",
            scenario,
            "--bootstrap",
            bootstrap,
        ]);
        if long {
            command.arg("--long");
        }
        if scenario == "broker-restart" || scenario == "leader-failover" {
            // It restarts the nodes of the cluster xtask runs, from their
            // run files (a broker of KSTREAMS_BOOTSTRAP's it cannot restart).
            command.arg("--kafka-dir").arg(paths::kafka_dir());
        }
        if let Some(seed) = seed {
            command.args(["--seed", seed]);
        }
        command.envs(secured.iter().map(|(key, value)| (key, value)));
        passed &= process::status(&mut command, "kstreams-chaos")?.success();
    }
    Ok(passed)
}
