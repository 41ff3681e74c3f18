//! kstreams' chaos scenarios on a real broker (run them with `cargo xtask
//! chaos`, which leases the broker):
//!
//! - `kstreams-chaos app ...`: the application the scenarios kill;
//! - `kstreams-chaos run <scenario> --bootstrap B [--long] [--seed N]`: one
//!   scenario, verified from outside under read_committed; one line of
//!   figures per run, exit status 1 if any failed. `broker-restart` kills
//!   and restarts the nodes of the cluster `cargo xtask kafka` runs, found
//!   in `--kafka-dir`; `leader-failover` kills one node of a three-node
//!   cluster at a time (`cargo xtask kafka start --brokers 3`).
//!   `secured-failover` runs on the plaintext listener and on the secured
//!   ones whose variables `cargo xtask chaos` passes ([`listener`]).
//!   `rolling-restart` restarts three static members one at a time.

mod app;
mod kafka_io;
mod listener;
mod queries;
mod scenarios;
mod verify;

use std::process::ExitCode;

const USAGE: &str =
    "usage: kstreams-chaos run sigkill|disk|malformed|churn|secured-failover|rolling-restart --bootstrap B [--long] [--seed N] [--only NAME]
       kstreams-chaos run broker-restart|leader-failover --bootstrap B --kafka-dir DIR [--long] [--seed N]
       kstreams-chaos app BOOTSTRAP APP_ID INPUT OUTPUT MODE eos|alos CACHE_BYTES STATE_DIR \
                          [dlq=TOPIC] [protocol=P] [member=ID] [standby=N] [stores=transactional] \
                          [security=KEYS_FILE] [server=HOST:PORT]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("app") => {
            env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
                .init();
            match app::AppSpec::from_args(&args[1..]) {
                Ok(spec) => ExitCode::from(app::run(&spec) as u8),
                Err(error) => {
                    eprintln!("{error}");
                    ExitCode::from(64)
                }
            }
        }
        Some("run") => match run(&args[1..]) {
            Ok(code) => code,
            Err(error) => {
                eprintln!("kstreams-chaos: {error}\n{USAGE}");
                ExitCode::from(64)
            }
        },
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(64)
        }
    }
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let mut scenario = None;
    let mut bootstrap = None;
    let mut long = false;
    let mut seed = None;
    let mut kafka_dir = None;
    let mut only = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--long" => long = true,
            "--bootstrap" => bootstrap = rest.next().cloned(),
            "--only" => only = rest.next().map(String::as_str),
            "--kafka-dir" => kafka_dir = rest.next().map(std::path::PathBuf::from),
            "--seed" => {
                let value = rest.next().ok_or("--seed needs a value")?;
                seed = Some(value.parse().map_err(|_| format!("bad seed {value}"))?);
            }
            name if scenario.is_none() && !name.starts_with("--") => scenario = Some(name),
            other => return Err(format!("unexpected argument {other}")),
        }
    }
    let bootstrap = bootstrap.ok_or("--bootstrap is required")?;
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64 | 1)
    });
    let size = scenarios::Size { long, seed, only };
    println!(
        "chaos: scenario {} (seed {seed}{})",
        scenario.unwrap_or("?"),
        if long { ", long" } else { "" }
    );
    let outcomes = match scenario.ok_or("which scenario?")? {
        "sigkill" => scenarios::sigkill(&bootstrap, size),
        "disk" => scenarios::disk(&bootstrap, size),
        "malformed" => scenarios::malformed(&bootstrap, size),
        "churn" => scenarios::churn(&bootstrap, size),
        "secured-failover" => scenarios::secured_failover(&bootstrap, size),
        "rolling-restart" => scenarios::rolling_restart(&bootstrap, size),
        "broker-restart" => scenarios::broker_faults(
            &bootstrap,
            size,
            &kafka_dir.ok_or("broker-restart needs --kafka-dir")?,
            scenarios::BrokerFault::RestartAll,
        ),
        "leader-failover" => scenarios::broker_faults(
            &bootstrap,
            size,
            &kafka_dir.ok_or("leader-failover needs --kafka-dir")?,
            scenarios::BrokerFault::LeaderFailover,
        ),
        other => return Err(format!("unknown scenario {other}")),
    };
    let failed = outcomes.iter().any(|o| !o.passed);
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
