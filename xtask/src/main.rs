//! Project tasks for kstreams, run as `cargo xtask <task>`.
//!
//! - `kafka start|stop|status`: a real Apache Kafka broker (KRaft, resolved
//!   with Maven) for tests and demos; its address goes to `.kafka/bootstrap`.
//! - `compat <scenario>`: a differential run of a reference scenario on Apache
//!   Kafka Streams (compat/), diffed record by record against the expected output.
//! - `ci`: everything CI checks, with a broker for the tests.
//! - `bench [NAME]`: the benchmarks of benches/, with a broker for those that
//!   need one; `bench compare`: kstreams beside Kafka Streams (BENCHMARKS.md).
//! - `chaos [SCENARIO...] [--long]`: the chaos scenarios of chaos/ (SIGKILLs,
//!   damaged state directories, malformed records, a broker restart) on a
//!   real broker.
//! - `registry start|stop|status`: a schema registry with the Confluent REST
//!   API (Apicurio Registry, resolved with Maven) for the Avro tests.

mod bench;
mod chaos;
mod ci;
mod cli;
mod compat;
mod kafka;
mod maven;
mod paths;
mod process;
mod registry;

use std::process::ExitCode;

use anyhow::{bail, Result};

use crate::cli::Args;

const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  kafka start [--brokers N] [--port P]
                       start a KRaft Apache Kafka cluster of N (1 or 3) combined
                       broker+controller nodes on 127.0.0.1; P is the first
                       broker port (default: free ports); prints
                       `export KSTREAMS_BOOTSTRAP=...`
  kafka stop           stop the cluster that `kafka start` started
  kafka status         say whether it runs (exit status 1 when not)
  compat <scenario|all> [--side java|kstreams|both] [--seed N] [--records N]
                       run a reference scenario and diff its output
                       (scenarios: wordcount, filter-map)
  registry start [--port P]
                       start a schema registry with the Confluent REST API
                       (Apicurio Registry, in-memory) on 127.0.0.1; prints
                       `export KSTREAMS_TEST_SCHEMA_REGISTRY=...` and the
                       Java Avro serde's KSTREAMS_TEST_AVRO_JAVA_CLASSPATH
  registry stop|status stop it, or say whether it runs
  ci                   fmt, clippy, cargo-deny, then the tests against a broker,
                       then the chaos scenarios in their short form and
                       a bench compare --smoke run
  chaos [SCENARIO...] [--long] [--seed N]
                       chaos scenarios on a broker, verified under
                       read_committed (sigkill, disk, malformed,
                       broker-restart: it restarts the cluster `kafka start`
                       runs; default all; --long: 20 kills over 1M records,
                       10k malformed, 3 broker restarts)
  bench [NAME] [ARGS]  cargo bench -p kstreams-benches [--bench NAME], with a
                       broker in KSTREAMS_BOOTSTRAP (stateless_chain,
                       broker_passthrough, ...)
  bench compare [WORKLOAD...] [--records N] [--runs R] [--threads 1,2]
                [--latency-seconds S] [--latency-rate R] [--set KEY=VALUE]
                [--only IMPL,...]
                [--smoke]
                       kstreams, Apache Kafka Streams and a raw librdkafka
                       loop on the same input, outputs checked; results in
                       <target>/bench/compare.{md,svg,tsv} (workloads:
                       pass-through, count, window-count, join,
                       pass-through-eos; --smoke: one small run of each)
";

fn main() -> ExitCode {
    let args = Args::new(std::env::args().skip(1));
    match run(args) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("xtask: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(mut args: Args) -> Result<ExitCode> {
    match args.next().as_deref() {
        Some("kafka") => kafka::cli(args),
        Some("compat") => compat::cli(args),
        Some("ci") => ci::cli(args),
        Some("bench") => bench::cli(args),
        Some("chaos") => chaos::cli(args),
        Some("registry") => registry::cli(args),
        Some("help" | "-h" | "--help") | None => {
            print!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        Some(other) => bail!("unknown task `{other}`\n\n{USAGE}"),
    }
}
