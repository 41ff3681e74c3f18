//! Project tasks for kstreams, run as `cargo xtask <task>`; `cargo xtask
//! --help` lists them (the table `TASKS` below), `cargo xtask help <task>`
//! gives a task's arguments.
//!
//! xtask depends on no native library, so it builds on a fresh machine
//! before anything is installed: `setup` (and `example` and `ci` through
//! it) then checks the system packages the rest of the build needs, and
//! installs them when it runs as root.

mod bench;
mod cargo;
mod chaos;
mod ci;
mod cli;
mod compat;
mod dashboard;
mod example;
mod kafka;
mod maven;
mod module_cycles;
mod native_builds;
mod package;
mod paths;
mod process;
mod prometheus;
mod registry;
mod setup;
mod test_failures;

use std::process::ExitCode;

use anyhow::{bail, Result};

use crate::cli::{Args, Task};

/// Every task, in the order `--help` lists them: first what a newcomer
/// runs, then the tools the others are built from.
const TASKS: &[Task] = &[
    Task {
        name: "example",
        summary: "set up, then run an example app on the in-process Kafka",
        usage: "\
example [NAME]
    checks the system packages the build needs (as `setup` does, installing
    them as root), then runs `cargo run -p kstreams-examples --example NAME`
    (default: pageviews) on librdkafka's in-process mock cluster
",
        run: example::cli,
    },
    Task {
        name: "ci",
        summary: "set up (with a JDK and Maven), then everything CI checks",
        usage: "\
ci
    checks the system packages (as `setup --ci` does, installing them as
    root), then: fmt, native-builds, module-cycles, clippy, package (every
    publishable crate packaged and built on the MSRV), cargo-deny, the
    tests against a broker, the compat scenarios, the chaos scenarios in
    their short form, a `bench compare --smoke` run and the dashboard check
    (`dashboard`)
",
        run: ci::cli,
    },
    Task {
        name: "setup",
        summary: "check the system packages the build needs; install them as root",
        usage: "\
setup [--ci] [--check]
    checks with dpkg-query the Debian packages the build needs (compilers,
    cmake, pkg-config, libclang-dev, libssl-dev, zlib1g-dev); --ci: also a JDK
    and Maven. As root, installs the missing ones with apt-get; otherwise
    prints the one line that does. --check: never install, only say
",
        run: setup::cli,
    },
    Task {
        name: "kafka",
        summary: "start, stop or ask about a real Apache Kafka broker (KRaft)",
        usage: "\
kafka start [--brokers N] [--port P]
    start a KRaft Apache Kafka cluster of N (1 or 3) combined broker+controller
    nodes on 127.0.0.1; P is the first broker port (default: free ports);
    prints `export KSTREAMS_BOOTSTRAP=...`
kafka stop
    stop the cluster that `kafka start` started
kafka status
    say whether it runs (exit status 1 when not)
",
        run: kafka::cli,
    },
    Task {
        name: "registry",
        summary: "start, stop or ask about a Schema Registry for the Avro tests",
        usage: "\
registry start [--port P]
    start a schema registry with the Confluent REST API (Apicurio Registry,
    in-memory) on 127.0.0.1; prints `export KSTREAMS_TEST_SCHEMA_REGISTRY=...`
    and the Java Avro serde's KSTREAMS_TEST_AVRO_JAVA_CLASSPATH
registry stop|status
    stop it, or say whether it runs
",
        run: registry::cli,
    },
    Task {
        name: "compat",
        summary: "run a scenario on Apache Kafka Streams and kstreams, diff them",
        usage: "\
compat <scenario|all> [--side java|kstreams|both] [--seed N] [--records N]
    run a reference scenario and diff its output (`compat list` of compat/README.md)
compat <scenario> --migrate java-to-kstreams|kstreams-to-java [--state same|empty] [--kill]
    move the application between the two halfway through its input
compat <scenario> --mixed
    run Kafka Streams and kstreams in one streams group, sharing the tasks
",
        run: compat::cli,
    },
    Task {
        name: "chaos",
        summary: "kill, damage and restart things under load; check nothing is lost",
        usage: "\
chaos [SCENARIO...] [--long] [--seed N]
    chaos scenarios on a broker, verified under read_committed (sigkill, disk,
    malformed, churn, broker-restart: it restarts the cluster `kafka start`
    runs; secured-failover: 3 instances of a streams group with a standby
    under exactly-once, one SIGKILLed, on the plaintext, SASL_SSL
    SCRAM-SHA-512, mutual TLS and OAUTHBEARER listeners; rolling-restart:
    3 static members restarted one at a time, no task may move; default all;
    --long: 20 kills over 1M records, 10k malformed, 10 churn rounds, 3
    broker restarts)
chaos leader-failover [--long]
    on three brokers (the running cluster of three, else its own), one at
    a time killed for 15 s (--long: each of the three)
",
        run: chaos::cli,
    },
    Task {
        name: "bench",
        summary: "the benchmarks of benches/, or kstreams beside Kafka Streams",
        usage: "\
bench [NAME] [ARGS]
    cargo bench -p kstreams-benches [--bench NAME], with a broker in
    KSTREAMS_BOOTSTRAP (stateless_chain, broker_passthrough, ...)
bench compare [WORKLOAD...] [--records N] [--keys K] [--runs R]
              [--threads 1,2] [--latency-seconds S] [--latency-rate R[,R]]
              [--latency-workload pass-through|count] [--rocksdb-bound BYTES]
              [--set KEY=VALUE] [--only IMPL,...] [--baseline BENCH_NODE]
              [--smoke]
    kstreams, Apache Kafka Streams and a raw librdkafka loop on the same
    input, outputs checked; results in <target>/bench/compare.{md,svg,tsv}
    (workloads: pass-through, count, window-count, join, pass-through-eos,
    restore: start to serving after the local state is deleted;
    --keys: the input's key space, 10 000 unless given (millions: a
    state far beyond the record cache); --smoke: one small run of each;
    crash-eos, run only when named: the count under exactly-once as a
    static member SIGKILLed at half of the input and restarted on its
    state, timed until input is committed and output readable again,
    kstreams with and without transactional stores (kstreams-txn);
    the workload `latency`: the latency runs alone; --latency-workload
    count: the count over the --keys keys, each counted once first, then
    fed at each rate (which --latency-rate must give); --rocksdb-bound:
    RocksDB's memory bounded to BYTES on both sides (Kafka Streams'
    BoundedMemoryRocksDBConfig recipe), shown in the workload names;
    --only may also name
    kstreams-debug-metrics and kstreams-scraped: kstreams with DEBUG
    metrics, and with /metrics scraped every second; --baseline runs a
    bench-node built from another commit as kstreams-baseline, for a
    before/after table in one run)
",
        run: bench::cli,
    },
    Task {
        name: "dashboard",
        summary: "check the Grafana dashboard's queries against a real Prometheus",
        usage: "\
dashboard [--dashboard PATH]
    builds Prometheus from its Go module once (cached under
    ~/.cache/kstreams/prometheus-<version>/), runs the dashboard app of
    kstreams-http on the in-process Kafka, lets Prometheus scrape it and
    evaluates every panel query of PATH (default docs/grafana/kstreams.json);
    fails naming each panel whose queries return no series or only zeros
",
        run: dashboard::cli,
    },
    Task {
        name: "native-builds",
        summary: "check that CI builds RocksDB and librdkafka once",
        usage: "\
native-builds
    asks cargo for the unit graph of every invocation README's commands and
    CI make (nothing is built) and fails when two of them would build a
    native library's build script differently, naming the crate whose
    features or profile differ (pin it in workspace-hack/Cargo.toml)
",
        run: native_builds::cli,
    },
    Task {
        name: "package",
        summary: "package every publishable crate; build them on the declared MSRV",
        usage: "\
package [--verify-all]
    checks each publishable crate's metadata, that the workspace's
    rust-version is the toolchain's release (or a rustup toolchain's), then
    `cargo package` of every crate with it: the .crate files hold LICENSE
    and README and no tests; those that build no native library are built
    from their .crate, the others by `cargo check --workspace --all-targets`
    (--verify-all: every crate from its .crate, which compiles RocksDB and
    librdkafka again with a lone crate's features)
",
        run: package::cli,
    },
    Task {
        name: "module-cycles",
        summary: "check that no crate has an import cycle between its modules",
        usage: "\
module-cycles
    reads every crate's modules (a file each) and the `crate::`, `super::`
    and `self::` paths between them (its tests left out), and fails on
    any import cycle, naming its modules
",
        run: module_cycles::cli,
    },
];

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
    // Taken before the task's name: `--help` is a flag, not an option with
    // a value.
    let help = args.flag("help");
    let name = args.next();
    let task = match name.as_deref() {
        None | Some("help" | "-h") => {
            return match args.next() {
                Some(name) => {
                    print!("{}", cli::task_help(find(&name)?));
                    Ok(ExitCode::SUCCESS)
                }
                None => {
                    print!("{}", cli::overview(TASKS));
                    Ok(ExitCode::SUCCESS)
                }
            };
        }
        Some(name) => find(name)?,
    };
    if help {
        print!("{}", cli::task_help(task));
        return Ok(ExitCode::SUCCESS);
    }
    (task.run)(args)
}

fn find(name: &str) -> Result<&'static Task> {
    match TASKS.iter().find(|task| task.name == name) {
        Some(task) => Ok(task),
        None => bail!("unknown task `{name}`\n\n{}", cli::overview(TASKS)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_fits_one_line_of_the_overview() {
        let overview = cli::overview(TASKS);
        for task in TASKS {
            let line = overview
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{} ", task.name)))
                .unwrap_or_else(|| panic!("{} is not listed:\n{overview}", task.name));
            assert!(line.len() <= 80, "too long for a terminal: {line}");
            assert!(
                task.usage.starts_with(task.name),
                "{}'s usage starts with another name",
                task.name
            );
        }
        let mut names: Vec<_> = TASKS.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), TASKS.len(), "a task name is listed twice");
    }

    #[test]
    fn help_for_an_unknown_task_is_an_error() {
        let args = |line: &str| Args::new(line.split_whitespace().map(String::from));
        assert!(run(args("help no-such-task")).is_err());
        assert!(run(args("no-such-task")).is_err());
        assert!(run(args("kafka --help")).is_ok());
    }
}
