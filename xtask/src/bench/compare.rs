//! `cargo xtask bench compare`: kstreams, Apache Kafka Streams and a raw
//! librdkafka loop on the same input, each run as its own process on the
//! broker xtask leases, alternating, every output checked.
//!
//! The input of each workload is generated once from a seed and produced
//! before the runs (benches/compare: `bench-node produce`). A run is timed
//! from its process's start until its group has committed the whole input
//! (the process prints `DONE` then), its CPU time and peak RSS come from
//! the kernel (`wait4`), and its output is read back and checked against
//! the expected output (`bench-node verify`) and against the other
//! implementations'. Where each input record makes one output record that
//! is readable once appended (pass-through and join at least once), the
//! output topic keeps the broker's append time, and a second wall figure
//! runs from the process's start to the last output record's append (and
//! one to the first's, so that start-up can be told from processing):
//! commits step every second, so the committed figure of a run of a few
//! seconds lands on whole commit intervals, these do not. A latency run then feeds pass-through at half of Kafka
//! Streams' steady rate and measures producer-send to output-append time.
//!
//! `restore` (kstreams and Kafka Streams; the raw loop keeps no state):
//! the count runs once on the input (its output checked as count's is)
//! and leaves its group, its local state directory is deleted, and the
//! same application (id, state directory) starts again; timed from that
//! process's start until it serves again: RUNNING with every changelog
//! partition restored, as a restore listener tells. The restorations must
//! set out to read the whole changelog (its watermarks) and restore between
//! one record per key and that span (the log cleaner compacts meanwhile);
//! then one more record for every tenth key is fed and
//! the output must hold each of those counts one above the restored one.
//! Its CPU time and peak RSS are the process's own when it serves.
//! `--keys K` sets the input's key space (10 000 unless given, a state that
//! fits in the record cache): millions make the count's and the window
//! count's state, and the restore's changelog, far larger than the cache.
//! Results go to `<target>/bench/compare.{tsv,md,svg}`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};

use crate::cargo::cargo_bin;
use crate::cli::Args;
use crate::compat::java::JavaHarness;
use crate::kafka::Lease;
use crate::paths;
use crate::process::{self, secs};

const WORKLOADS: [&str; 6] = [
    "pass-through",
    "count",
    "window-count",
    "join",
    "pass-through-eos",
    "restore",
];
/// Workloads run only when named: `crash-eos` (its runs are long and
/// kill processes).
const OPT_IN: [&str; 1] = ["crash-eos"];
const PARTITIONS: u32 = 4;
const SEED: u64 = 42;
/// Longest a single measured run may take before it counts as hung.
const RUN_TIMEOUT: Duration = Duration::from_secs(900);
/// The key space of the input when `--keys` does not say (benches/compare's
/// `DEFAULT_KEYS`): a state that fits in the record cache.
const DEFAULT_KEYS: u64 = 10_000;

/// The records `restore` feeds once the app serves again over `keys`
/// keys (benches/compare/workload.rs `check_records`: one per tenth key);
/// `produce-check` must say as many.
fn check_records(keys: u64) -> u64 {
    keys.div_ceil(10)
}

/// The keys of a count's output, from its fingerprint (`keys=N digest=…`).
fn distinct_keys(fingerprint: &str) -> Result<u64> {
    fingerprint
        .split_whitespace()
        .find_map(|field| field.strip_prefix("keys="))
        .and_then(|keys| keys.parse().ok())
        .ok_or_else(|| anyhow!("a count's fingerprint without keys=N: {fingerprint}"))
}

/// What to run.
struct Plan {
    workloads: Vec<&'static str>,
    records: u64,
    /// `--keys K`: the input's key space; millions make the state far
    /// larger than the record cache (the large-state runs).
    keys: u64,
    runs: u32,
    threads: Vec<u32>,
    /// Seconds of the rate-limited latency run; 0: none.
    latency_seconds: u64,
    /// Build bench-node with the dev profile (the smoke run, which must not
    /// compile every dependency a second time, optimized).
    debug: bool,
    /// Extra kstreams settings, to try a configuration.
    kstreams_settings: Vec<String>,
    /// `--latency-rate R[,R]`: the latency runs' rates instead of half of
    /// Kafka Streams' steady pass-through rate; one run per rate.
    latency_rates: Vec<u64>,
    /// `--latency-workload W`: what the latency runs measure: the
    /// pass-through (the send time in the value), or the count over the
    /// `--keys` key space, each key counted once before the measured period
    /// so that the state is large from its start.
    latency_workload: &'static str,
    /// `--rocksdb-bound BYTES`: RocksDB's memory (block cache, index and
    /// filter blocks, memtables) bounded on both sides, one shared cache
    /// and write buffer manager per process; shown in the results'
    /// workload names.
    rocksdb_bound: Option<u64>,
    /// `--only NAME[,NAME]`: run just these implementations (and the
    /// observed kstreams variants, `OBSERVED`, only when named here).
    only: Option<Vec<String>>,
    /// `--baseline PATH`: a bench-node binary built from another commit,
    /// run as `kstreams-baseline` beside this one, so that a change is
    /// measured before and after in one run on the same broker and input.
    baseline: Option<PathBuf>,
}

impl Plan {
    fn parse(mut args: Args) -> Result<Plan> {
        let smoke = args.flag("smoke");
        let records = args.option("records")?;
        let keys: Option<u64> = args.option("keys")?;
        if keys == Some(0) {
            bail!("--keys must be at least 1");
        }
        let runs = args.option("runs")?;
        let threads: Option<String> = args.option("threads")?;
        let latency_seconds = args.option("latency-seconds")?;
        let latency_rates = match args.option::<String>("latency-rate")? {
            Some(list) => list
                .split(',')
                .map(|r| r.parse().with_context(|| format!("--latency-rate {list}")))
                .collect::<Result<Vec<u64>>>()?,
            None => Vec::new(),
        };
        let latency_workload = match args.option::<String>("latency-workload")?.as_deref() {
            None | Some("pass-through") => "pass-through",
            Some("count") => "count",
            Some(other) => bail!("--latency-workload {other}: pass-through or count"),
        };
        if latency_workload == "count" && latency_rates.is_empty() {
            bail!("--latency-workload count needs --latency-rate (a rate both implementations sustain at that key space)");
        }
        let rocksdb_bound: Option<u64> = args.option("rocksdb-bound")?;
        if rocksdb_bound == Some(0) {
            bail!("--rocksdb-bound must be at least 1 byte");
        }
        let only = args
            .option::<String>("only")?
            .map(|list| list.split(',').map(str::to_owned).collect());
        let baseline: Option<PathBuf> = args.option::<String>("baseline")?.map(PathBuf::from);
        if let Some(path) = &baseline {
            if !path.is_file() {
                bail!(
                    "--baseline {}: no such file (give a bench-node binary built from the \
                     commit to compare with: `cargo build --profile bench --package \
                     kstreams-benches --bin bench-node` there, then copy target/release/bench-node)",
                    path.display()
                );
            }
        }
        let mut kstreams_settings = Vec::new();
        while let Some(setting) = args.option::<String>("set")? {
            kstreams_settings.push(setting);
        }
        let mut workloads = Vec::new();
        // `latency`: the latency runs without a throughput workload.
        let mut latency_only = false;
        while let Some(name) = args.next() {
            if name == "latency" {
                latency_only = true;
                continue;
            }
            let workload = WORKLOADS
                .into_iter()
                .chain(OPT_IN)
                .find(|w| *w == name)
                .ok_or_else(|| {
                    anyhow!(
                        "unknown workload `{name}` (one of: {}, {}, latency)",
                        WORKLOADS.join(", "),
                        OPT_IN.join(", ")
                    )
                })?;
            workloads.push(workload);
        }
        args.finish()?;
        if workloads.is_empty() && !latency_only {
            workloads = WORKLOADS.to_vec();
        }
        let threads = match threads {
            Some(list) => list
                .split(',')
                .map(|t| t.parse().with_context(|| format!("--threads {list}")))
                .collect::<Result<_>>()?,
            None if smoke => vec![1],
            None => vec![1, 2],
        };
        Ok(Plan {
            workloads,
            records: records.unwrap_or(if smoke { 20_000 } else { 2_000_000 }),
            keys: keys.unwrap_or(DEFAULT_KEYS),
            runs: runs.unwrap_or(if smoke { 1 } else { 3 }),
            threads,
            latency_seconds: latency_seconds.unwrap_or(if smoke { 3 } else { 20 }),
            latency_workload,
            rocksdb_bound,
            debug: smoke,
            kstreams_settings,
            latency_rates,
            only,
            baseline,
        })
    }
}

pub(super) fn cli(args: Args) -> Result<ExitCode> {
    let plan = Plan::parse(args)?;
    let node = BenchNode::build(plan.debug)?;
    let baseline = plan.baseline.clone().map(|binary| BenchNode { binary });
    let java = JavaHarness::build()?;
    let lease = Lease::acquire()?;
    let out_dir = paths::cargo_target_dir(&cargo_bin())?.join("bench");
    fs::create_dir_all(out_dir.join("logs"))?;
    let mut bench = Bench {
        plan: &plan,
        node: &node,
        baseline: baseline.as_ref(),
        java: &java,
        bootstrap: lease.bootstrap().to_owned(),
        out_dir: out_dir.clone(),
        results: String::from(
            "kind\tworkload\tthreads\timpl\trun\trecords\twall_s\tfirst_output_s\toutput_s\tcpu_s\trss_mib\tsteady_records\tsteady_cpu_s\tp50_ms\tp99_ms\tp999_ms\n",
        ),
        stamp: SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis(),
    };
    let outcome = bench.run_all();
    let results = out_dir.join("compare.tsv");
    fs::write(&results, &bench.results)?;
    outcome?;
    process::run(
        node.command("report")
            .arg("--results")
            .arg(&results)
            .arg("--out-dir")
            .arg(&out_dir),
        "writing the report",
    )?;
    eprintln!(
        "bench: results in {} (compare.md, compare.svg, compare.tsv)",
        out_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The build of bench-node with the dev profile, as the smoke run in CI
/// makes it (`native_builds` checks it).
pub(crate) const CARGO_BUILD_NODE: [&str; 5] = [
    "build",
    "--package",
    "kstreams-benches",
    "--bin",
    "bench-node",
];

/// The built benches/compare binary.
struct BenchNode {
    binary: PathBuf,
}

impl BenchNode {
    fn build(debug: bool) -> Result<BenchNode> {
        let began = Instant::now();
        let cargo = cargo_bin();
        let mut command = Command::new(&cargo);
        command
            .current_dir(paths::repo_root())
            .args(CARGO_BUILD_NODE)
            .arg("--quiet");
        if !debug {
            // Optimized, with the debug info a profiler needs (the
            // workspace's bench profile); cargo puts it under release/.
            command.args(["--profile", "bench"]);
        }
        process::run(&mut command, "building benches/compare (bench-node)")?;
        let profile = if debug { "debug" } else { "release" };
        let binary = paths::cargo_target_dir(&cargo)?
            .join(profile)
            .join("bench-node");
        eprintln!(
            "bench: built bench-node, {profile} ({})",
            secs(began.elapsed())
        );
        Ok(BenchNode { binary })
    }

    fn command(&self, name: &str) -> Command {
        let mut command = Command::new(&self.binary);
        command.arg(name);
        command
    }
}

/// Figures of one measured process.
struct Measured {
    wall: Duration,
    /// The wall clock at its spawn, in milliseconds since the epoch: the
    /// origin of the output-complete figure (the broker's append times).
    spawned_epoch_ms: i64,
    cpu: Duration,
    rss_mib: f64,
    /// The figures of its `DONE` line.
    figures: Tagged,
}

impl Measured {
    /// A figure of the `DONE` line.
    fn figure(&self, k: &str) -> Result<u64> {
        self.figures.get(k)
    }

    /// Records per wall second after start-up (see progress.rs).
    fn steady_rate(&self) -> Result<f64> {
        Ok(self.figure("steady_records")? as f64
            / (self.figure("steady_wall_ms")? as f64 / 1000.0).max(1e-3))
    }
}

struct Bench<'a> {
    plan: &'a Plan,
    node: &'a BenchNode,
    /// `--baseline`'s bench-node, run as `kstreams-baseline`.
    baseline: Option<&'a BenchNode>,
    java: &'a JavaHarness,
    bootstrap: String,
    out_dir: PathBuf,
    results: String,
    stamp: u128,
}

/// One workload's topics.
struct Topics {
    input: String,
    table: Option<String>,
}

impl Bench<'_> {
    fn run_all(&mut self) -> Result<()> {
        let mut pass_through_rate = None;
        for workload in self.plan.workloads.clone() {
            // restore feeds records to its input after the restore: each of
            // its runs has an input of its own (`restore_run`).
            let topics = if workload == "restore" {
                None
            } else {
                Some(self.produce(workload, workload)?)
            };
            let mut fingerprints: HashMap<String, String> = HashMap::new();
            // restore: the output after the restore and the check records,
            // equal on every implementation too.
            let mut restored_fingerprints: HashMap<String, String> = HashMap::new();
            for threads in self.plan.threads.clone() {
                for run in 1..=self.plan.runs {
                    let mut order = implementations(workload);
                    if self.baseline.is_some() {
                        order.insert(1, BASELINE);
                    }
                    if let Some(only) = &self.plan.only {
                        order.extend(OBSERVED);
                        order.retain(|i| only.iter().any(|o| o == i));
                    }
                    // Each implementation leads once every `order.len()`
                    // runs: the first run after the input is produced (the
                    // broker still writing it out) was the slowest, and
                    // reversing every other run put the same one first in
                    // runs 1 and 3.
                    let lead = (run as usize - 1) % order.len().max(1);
                    order.rotate_left(lead);
                    for implementation in order {
                        if workload == "restore" {
                            let (fingerprint, restored) =
                                self.restore_run(implementation, threads, run)?;
                            for (seen, new, what) in [
                                (&mut fingerprints, fingerprint, "count run's output"),
                                (
                                    &mut restored_fingerprints,
                                    restored,
                                    "output after the restore",
                                ),
                            ] {
                                if let Some(other) = seen.values().find(|f| **f != new) {
                                    bail!(
                                        "restore: {implementation}'s {what} ({new}) differs from another run's ({other})"
                                    );
                                }
                                seen.insert(format!("{implementation}-{threads}-{run}"), new);
                            }
                            continue;
                        }
                        let topics = topics
                            .as_ref()
                            .expect("produced for every workload but restore");
                        if workload == "crash-eos" {
                            let fingerprint =
                                self.crash_run(implementation, threads, run, topics)?;
                            if let Some(other) = fingerprints.values().find(|f| **f != fingerprint)
                            {
                                bail!(
                                    "{workload}: {implementation}'s output ({fingerprint}) differs from another run's ({other})"
                                );
                            }
                            fingerprints
                                .insert(format!("{implementation}-{threads}-{run}"), fingerprint);
                            continue;
                        }
                        let (measured, fingerprint) =
                            self.throughput_run(workload, implementation, threads, run, topics)?;
                        if let Some(other) = fingerprints.values().find(|f| **f != fingerprint) {
                            bail!(
                                "{workload}: {implementation}'s output ({fingerprint}) differs from another run's ({other})"
                            );
                        }
                        fingerprints
                            .insert(format!("{implementation}-{threads}-{run}"), fingerprint);
                        if workload == "pass-through"
                            && threads == 1
                            && implementation == "kafka-streams"
                        {
                            // Its rate once warmed up (wall time), the
                            // first such run's.
                            if pass_through_rate.is_none() {
                                pass_through_rate = Some(measured.steady_rate()?);
                            }
                        }
                    }
                }
            }
            if let Some(topics) = &topics {
                let mut inputs = vec![topics.input.as_str()];
                inputs.extend(topics.table.as_deref());
                self.delete_topics(&inputs, None)?;
            }
        }
        if self.plan.latency_seconds > 0 {
            // Half of Kafka Streams' measured rate, rounded to a thousand
            // (at least a thousand), unless given (a count's always is).
            let rates = match (&self.plan.latency_rates[..], pass_through_rate) {
                ([], Some(max)) => vec![((max / 2.0 / 1000.0).round().max(1.0) * 1000.0) as u64],
                ([], None) => {
                    eprintln!(
                        "bench: no latency run (it needs the pass-through at 1 thread on Kafka Streams, or --latency-rate)"
                    );
                    return Ok(());
                }
                (rates, _) => rates.to_vec(),
            };
            let mut order = implementations(self.plan.latency_workload);
            if self.baseline.is_some() {
                order.insert(1, BASELINE);
            }
            for rate in rates {
                for implementation in order.iter().copied() {
                    if self
                        .plan
                        .only
                        .as_ref()
                        .is_some_and(|o| !o.iter().any(|i| i == implementation))
                    {
                        continue;
                    }
                    self.latency_run(implementation, rate)?;
                }
            }
        }
        Ok(())
    }

    /// `workload` as the results name it: with the RocksDB bound when one
    /// is set and the workload keeps a store, so that the report says what
    /// ran.
    fn label(&self, workload: &str) -> String {
        match self.plan.rocksdb_bound {
            Some(bytes) if !workload.starts_with("pass-through") => {
                format!("{workload}, RocksDB bound {}", bytes_label(bytes))
            }
            _ => workload.to_owned(),
        }
    }

    fn name(&self, parts: &str) -> String {
        format!("bench-{parts}-{}", self.stamp)
    }

    fn create_topics(&self, topics: &[String]) -> Result<()> {
        let mut command = self.node.command("create-topics");
        command.args(["--bootstrap", &self.bootstrap]);
        for topic in topics {
            command.arg("--topic").arg(topic);
        }
        process::run(&mut command, "creating the bench topics")
    }

    /// Deletes topics once read, so that a long run does not fill the
    /// broker's disk.
    /// `app_id`: also that app's internal topics (changelogs).
    fn delete_topics(&self, topics: &[&str], app_id: Option<&str>) -> Result<()> {
        let mut command = self.node.command("delete-topics");
        command.args(["--bootstrap", &self.bootstrap]);
        for topic in topics {
            command.args(["--topic", topic]);
        }
        if let Some(app_id) = app_id {
            command.args(["--prefix", &format!("{app_id}-")]);
        }
        process::run(&mut command, "deleting the bench topics")
    }

    /// Produces `workload`'s input to a topic named after `stem`.
    fn produce(&self, workload: &str, stem: &str) -> Result<Topics> {
        let began = Instant::now();
        let input = self.name(&format!("{stem}-in"));
        let table = (workload == "join").then(|| self.name(&format!("{workload}-table")));
        let mut specs = vec![format!("{input}:{PARTITIONS}")];
        specs.extend(table.iter().map(|t| format!("{t}:{PARTITIONS}")));
        self.create_topics(&specs)?;
        let mut command = self.node.command("produce");
        command
            .args([
                "--bootstrap",
                &self.bootstrap,
                "--workload",
                workload,
                "--topic",
                &input,
            ])
            .args(self.input_shape());
        if let Some(table) = &table {
            command.args(["--table", table]);
        }
        process::run(&mut command, "producing the bench input")?;
        eprintln!(
            "bench: {workload}: produced {} records over {} keys to {input} ({})",
            self.plan.records,
            self.plan.keys,
            secs(began.elapsed())
        );
        Ok(Topics { input, table })
    }

    /// The command that runs `implementation` on `workload`.
    fn app(
        &self,
        workload: &str,
        implementation: &str,
        app_id: &str,
        topics: &Topics,
        output: &str,
        threads: u32,
    ) -> Result<Command> {
        let state_dir = self.out_dir.join("state").join(app_id);
        let mut command = match implementation {
            "kafka-streams" => {
                let mut command = self.java.tool("bench", &self.bootstrap);
                command.arg(workload);
                if let Some(bytes) = self.plan.rocksdb_bound {
                    command.args(["--rocksdb-bound", &bytes.to_string()]);
                }
                command
            }
            "raw" => {
                let mut command = self.node.command(implementation);
                command.args(["--bootstrap", &self.bootstrap, "--workload", workload]);
                command
            }
            "kstreams"
            | "kstreams-debug-metrics"
            | "kstreams-scraped"
            | TRANSACTIONAL
            | BASELINE => {
                let node = match (implementation, self.baseline) {
                    (BASELINE, Some(baseline)) => baseline,
                    (BASELINE, None) => bail!("{BASELINE} runs only with --baseline"),
                    _ => self.node,
                };
                let mut command = node.command("kstreams");
                command.args(["--bootstrap", &self.bootstrap, "--workload", workload]);
                if let Some(bytes) = self.plan.rocksdb_bound {
                    command.args([
                        "--set",
                        &format!("kstreams.rocksdb.bounded.memory.bytes={bytes}"),
                    ]);
                }
                for setting in &self.plan.kstreams_settings {
                    command.args(["--set", setting]);
                }
                match implementation {
                    "kstreams-debug-metrics" => {
                        command.args(["--set", "metrics.recording.level=DEBUG"]);
                    }
                    "kstreams-scraped" => {
                        command.args(["--scrape-ms", "1000"]);
                    }
                    TRANSACTIONAL => {
                        command.args(["--set", "enable.transactional.statestores=true"]);
                    }
                    _ => {}
                }
                command
            }
            other => bail!("unknown implementation {other}"),
        };
        command
            .args([
                "--app-id",
                app_id,
                "--input",
                &topics.input,
                "--output",
                output,
            ])
            .args(["--threads", &threads.to_string()])
            .arg("--state-dir")
            .arg(&state_dir);
        if let Some(table) = &topics.table {
            command.args(["--table", table]);
        }
        Ok(command)
    }

    fn throughput_run(
        &mut self,
        workload: &str,
        implementation: &str,
        threads: u32,
        run: u32,
        topics: &Topics,
    ) -> Result<(Measured, String)> {
        let label = format!("{workload}-{implementation}-{threads}t-{run}");
        let app_id = self.name(&label);
        let output = format!("{app_id}-out");
        let timed_on_append = matches!(workload, "pass-through" | "join");
        self.create_topics(&[if timed_on_append {
            format!("{output}:{PARTITIONS}:append")
        } else {
            format!("{output}:{PARTITIONS}")
        }])?;
        let command = self.app(workload, implementation, &app_id, topics, &output, threads)?;
        let log = self.out_dir.join("logs").join(format!("{label}.log"));
        let measured = measure(command, &log, || Ok(()), None)?;
        let _ = fs::remove_dir_all(self.out_dir.join("state").join(&app_id));
        let (fingerprint, verified) = self.verify(workload, &output, &label)?;
        self.delete_topics(&[&output], Some(&app_id))?;
        let (first_output_s, output_s) = if timed_on_append {
            let times = Tagged::find(&verified, "OUTPUT_TIMES_MS", &label)?;
            let since_spawn = |k: &str| -> Result<String> {
                let ms: i64 = times.get(k)?;
                Ok(format!(
                    "{:.3}",
                    (ms - measured.spawned_epoch_ms) as f64 / 1000.0
                ))
            };
            (since_spawn("first")?, since_spawn("last")?)
        } else {
            ("-".to_owned(), "-".to_owned())
        };
        eprintln!(
            "bench: {label}: {:.2} s wall (output from {first_output_s} s to {output_s} s), {:.2} s CPU, {:.0} MiB, output verified",
            measured.wall.as_secs_f64(),
            measured.cpu.as_secs_f64(),
            measured.rss_mib
        );
        let _ = writeln!(
            self.results,
            "throughput\t{}\t{threads}\t{implementation}\t{run}\t{}\t{:.3}\t{first_output_s}\t{output_s}\t{:.3}\t{:.1}\t{}\t{:.3}\t-\t-\t-",
            self.label(workload),
            self.plan.records,
            measured.wall.as_secs_f64(),
            measured.cpu.as_secs_f64(),
            measured.rss_mib,
            measured.figure("steady_records")?,
            measured.figure("steady_cpu_ms")? as f64 / 1000.0
        );
        Ok((measured, fingerprint))
    }

    /// The options that say which input a workload has: `produce` makes
    /// it, `verify` computes the expected output from the same.
    fn input_shape(&self) -> [String; 6] {
        self.input_shape_of(self.plan.records)
    }

    /// As [`Self::input_shape`] with `records` records.
    fn input_shape_of(&self, records: u64) -> [String; 6] {
        [
            "--records".to_owned(),
            records.to_string(),
            "--seed".to_owned(),
            SEED.to_string(),
            "--keys".to_owned(),
            self.plan.keys.to_string(),
        ]
    }

    /// Reads `output` back and checks it against `workload`'s expected
    /// output: the fingerprint, and all that verify printed.
    fn verify(&self, workload: &str, output: &str, label: &str) -> Result<(String, String)> {
        self.verify_input(workload, output, label, self.plan.records, false)
    }

    /// As [`Self::verify`], for an input of `records` records over the
    /// `--keys` keys, after a record per key when `preload`.
    fn verify_input(
        &self,
        workload: &str,
        output: &str,
        label: &str,
        records: u64,
        preload: bool,
    ) -> Result<(String, String)> {
        let verified = process::output(
            self.node
                .command("verify")
                .args([
                    "--bootstrap",
                    &self.bootstrap,
                    "--workload",
                    workload,
                    "--output",
                    output,
                ])
                .args(self.input_shape_of(records))
                .args(["--preload", if preload { "true" } else { "false" }]),
            &format!("checking the output of {label}"),
        )?;
        let fingerprint = verified
            .lines()
            .find_map(|l| l.strip_prefix("VERIFIED "))
            .ok_or_else(|| anyhow!("{label}: verify printed no VERIFIED line"))?
            .to_owned();
        Ok((fingerprint, verified))
    }

    /// One `restore` run of `implementation`: the count over the input
    /// (untimed, its output checked), its local state deleted, then the
    /// same app started again and timed until it serves; the check records
    /// fed and the output checked. Returns the fingerprints of the count's
    /// output and of the output after the check records.
    fn restore_run(
        &mut self,
        implementation: &str,
        threads: u32,
        run: u32,
    ) -> Result<(String, String)> {
        let label = format!("restore-{implementation}-{threads}t-{run}");
        let app_id = self.name(&label);
        let output = format!("{app_id}-out");
        let state_dir = self.out_dir.join("state").join(&app_id);
        // Its own input: the check records are fed to it.
        let topics = &self.produce("restore", &label)?;
        self.create_topics(&[format!("{output}:{PARTITIONS}")])?;

        // The state to restore: the count, which then leaves its group.
        let mut setup = self.app("count", implementation, &app_id, topics, &output, threads)?;
        setup.args(["--leave", "true"]);
        let setup_log = self.out_dir.join("logs").join(format!("{label}-count.log"));
        let counted = measure(setup, &setup_log, || Ok(()), None)?;
        let (count_fingerprint, _) = self.verify("count", &output, &format!("{label} (count)"))?;
        // Should it not have left, the restart would first wait out its
        // session, which is not the restore's time.
        process::run(
            self.node.command("await-group-empty").args([
                "--bootstrap",
                &self.bootstrap,
                "--group",
                &app_id,
                "--timeout-secs",
                "120",
            ]),
            "waiting for the count run to leave its group",
        )?;
        let changelog = process::output(
            self.node.command("changelog").args([
                "--bootstrap",
                &self.bootstrap,
                "--app-id",
                &app_id,
            ]),
            "reading the changelog's size",
        )?;
        let changelog = Tagged::find(&changelog, "CHANGELOG", &label)?;
        let (partitions, changelog_records): (u64, u64) =
            (changelog.get("partitions")?, changelog.get("records")?);
        if !state_dir.is_dir() {
            bail!(
                "{label}: the count run left no local state in {}",
                state_dir.display()
            );
        }
        fs::remove_dir_all(&state_dir)
            .with_context(|| format!("deleting {}", state_dir.display()))?;

        // The restore, timed.
        let mut command = self.app("restore", implementation, &app_id, topics, &output, threads)?;
        command
            .args(["--restore-partitions", &partitions.to_string()])
            .args([
                "--then-target",
                &(self.plan.records + check_records(self.plan.keys)).to_string(),
            ]);
        let log = self.out_dir.join("logs").join(format!("{label}.log"));
        let feed_check = || {
            let produced = process::output(
                self.node.command("produce-check").args([
                    "--bootstrap",
                    &self.bootstrap,
                    "--topic",
                    &topics.input,
                    "--records",
                    &self.plan.records.to_string(),
                    "--keys",
                    &self.plan.keys.to_string(),
                ]),
                "feeding the records after the restore",
            )?;
            let expected = check_records(self.plan.keys);
            if produced.trim() != format!("PRODUCED {expected}") {
                bail!("produce-check: {produced:?}, expected PRODUCED {expected}");
            }
            Ok(())
        };
        let measured = measure(command, &log, || Ok(()), Some(&feed_check))?;
        let _ = fs::remove_dir_all(&state_dir);
        let (restored_fingerprint, _) =
            self.verify("restore", &output, &format!("{label} (after the restore)"))?;
        self.delete_topics(&[&topics.input, &output], Some(&app_id))?;

        let restored = measured.figure("restored")?;
        let span = measured.figure("restore_span")?;
        let restored_partitions = measured.figure("restored_partitions")?;
        // The restorations must set out to read the whole changelog. What
        // they find in it is at most that span and at least one record per
        // key: the broker's log cleaner compacts the changelog's closed
        // segments meanwhile (the test broker's are 1 MiB), so a state of
        // millions of keys restores fewer records than its offsets span.
        let keys = distinct_keys(&count_fingerprint)?;
        if span != changelog_records
            || restored > span
            || restored < keys
            || restored_partitions != partitions
        {
            bail!(
                "{label}: restored {restored} records from {restored_partitions} partitions; \
                 the restorations set out to read {span}, the changelog holds \
                 {changelog_records} in {partitions} partitions, for {keys} keys"
            );
        }
        // The process's own CPU time and peak RSS when it served: wait4's
        // would add the check records after it.
        let cpu = measured.figure("cpu_ms")? as f64 / 1000.0;
        let rss_mib = measured.figure("peak_rss_kib")? as f64 / 1024.0;
        let wall = measured.wall.as_secs_f64();
        eprintln!(
            "bench: {label}: serving after {wall:.2} s ({restored} records restored, {:.0} records/s), \
             {cpu:.2} s CPU, {rss_mib:.0} MiB; the count before it {:.2} s; counts go on after it",
            restored as f64 / wall.max(1e-3),
            counted.wall.as_secs_f64()
        );
        let _ = writeln!(
            self.results,
            "restore\t{}\t{threads}\t{implementation}\t{run}\t{restored}\t{wall:.3}\t-\t-\t{cpu:.3}\t{rss_mib:.1}\t-\t-\t-\t-\t-",
            self.label("restore"),
        );
        Ok((count_fingerprint, restored_fingerprint))
    }

    /// One rate-limited run of `--latency-workload` on `implementation`:
    /// the pass-through, timed from the send time in each value to the
    /// output's append time; or the count over `--keys` keys, each counted
    /// once first (`produce-keys`, then the app processes them), then fed
    /// at `rate` over the same keys while `follow-latency` reads the
    /// output from its end (see benches/compare/load.rs).
    fn latency_run(&mut self, implementation: &str, rate: u64) -> Result<()> {
        let workload = self.plan.latency_workload;
        let count = workload == "count";
        let label = format!("latency-{workload}-{implementation}-{rate}");
        let app_id = self.name(&label);
        let input = format!("{app_id}-in");
        let output = format!("{app_id}-out");
        // The count's output keeps the input's timestamps (the send times).
        let output_spec = if count {
            format!("{output}:{PARTITIONS}")
        } else {
            format!("{output}:{PARTITIONS}:append")
        };
        self.create_topics(&[format!("{input}:{PARTITIONS}"), output_spec])?;
        let total = rate * self.plan.latency_seconds;
        // The count's state before the measured period: a count per key.
        let preload = if count { self.plan.keys } else { 0 };
        let rate_keys = if count { self.plan.keys } else { DEFAULT_KEYS };
        if count {
            let produced = process::output(
                self.node.command("produce-keys").args([
                    "--bootstrap",
                    &self.bootstrap,
                    "--topic",
                    &input,
                    "--keys",
                    &preload.to_string(),
                ]),
                "producing a record per key",
            )?;
            if produced.trim() != format!("PRODUCED {preload}") {
                bail!("produce-keys: {produced:?}, expected PRODUCED {preload}");
            }
        }
        let topics = Topics {
            input: input.clone(),
            table: None,
        };
        let mut command = self.app(workload, implementation, &app_id, &topics, &output, 1)?;
        command.args(["--target", &(preload + total).to_string()]);
        let log = self.out_dir.join("logs").join(format!("{label}.log"));
        let mut follower: Option<Follower> = None;
        let produce = || {
            if count {
                self.await_committed(&app_id, &input, preload)?;
                follower =
                    Some(self.follow_latency(&app_id, &input, &output, preload + total, &label)?);
            }
            process::run(
                self.node
                    .command("produce-rate")
                    .args(["--bootstrap", &self.bootstrap, "--topic", &input])
                    .args(["--seed", &SEED.to_string(), "--rate", &rate.to_string()])
                    .args(["--seconds", &self.plan.latency_seconds.to_string()])
                    .args(["--keys", &rate_keys.to_string()]),
                "producing the latency input",
            )
        };
        let measured = measure(command, &log, produce, None);
        let report = match (measured.as_ref(), follower) {
            (Ok(_), Some(follower)) => follower.finish(),
            (Err(_), Some(follower)) => follower.abandon(),
            (_, None) => process::output(
                self.node.command("latency").args([
                    "--bootstrap",
                    &self.bootstrap,
                    "--output",
                    &output,
                ]),
                &format!("measuring the latency of {label}"),
            ),
        };
        let measured = measured?;
        let report = report?;
        let _ = fs::remove_dir_all(self.out_dir.join("state").join(&app_id));
        let line = report
            .lines()
            .find_map(|l| l.strip_prefix("LATENCY "))
            .ok_or_else(|| anyhow!("{label}: latency printed no LATENCY line"))?
            .to_owned();
        let figures = key_values(&line);
        let figure = |k: &str| figures.get(k).cloned().unwrap_or_else(|| "-".to_owned());
        if count {
            // Every count final: the preload's and the rate's records.
            self.verify_input(workload, &output, &label, total, true)?;
        } else if figure("total") != total.to_string() {
            bail!(
                "{label}: the output holds {} records, the input {total}",
                figure("total")
            );
        }
        self.delete_topics(&[&input, &output], Some(&app_id))?;
        eprintln!("bench: {label}: {rate} records/s: {line}");
        let workload_label = if count {
            self.label(&format!("count over {} keys", self.plan.keys))
        } else {
            workload.to_owned()
        };
        let _ = writeln!(
            self.results,
            "latency\t{workload_label}\t1\t{implementation}\t1\t{total}\t{}\t-\t-\t{:.3}\t{:.1}\t-\t-\t{}\t{}\t{}",
            self.plan.latency_seconds,
            measured.cpu.as_secs_f64(),
            measured.rss_mib,
            figure("p50_ms"),
            figure("p99_ms"),
            figure("p999_ms"),
        );
        Ok(())
    }

    /// Waits until `group` has committed `target` records of `input`.
    fn await_committed(&self, group: &str, input: &str, target: u64) -> Result<()> {
        process::output(
            self.node.command("await-committed").args([
                "--bootstrap",
                &self.bootstrap,
                "--group",
                group,
                "--topic",
                input,
                "--target",
                &target.to_string(),
            ]),
            "waiting for the app to count every key",
        )
        .map(drop)
    }

    /// Starts `follow-latency` on `output` and returns once it reads from
    /// the output's end.
    fn follow_latency(
        &self,
        group: &str,
        input: &str,
        output: &str,
        target: u64,
        label: &str,
    ) -> Result<Follower> {
        let mut command = self.node.command("follow-latency");
        command
            .args(["--bootstrap", &self.bootstrap, "--output", output])
            .args(["--group", group, "--input", input])
            .args(["--target", &target.to_string()]);
        let log = self
            .out_dir
            .join("logs")
            .join(format!("{label}-follow.log"));
        Follower::start(command, &log, "FOLLOWING")
    }

    /// Starts `recovery-watch` on `group` and `output` and returns once it
    /// has taken its baselines.
    fn watch_recovery(
        &self,
        group: &str,
        input: &str,
        output: &str,
        label: &str,
    ) -> Result<Follower> {
        let mut command = self.node.command("recovery-watch");
        command
            .args(["--bootstrap", &self.bootstrap, "--output", output])
            .args(["--group", group, "--input", input]);
        let log = self.out_dir.join("logs").join(format!("{label}-watch.log"));
        Follower::start(command, &log, "WATCHING")
    }

    /// One `crash-eos` run of `implementation`: the count under
    /// exactly_once_v2 as a static member (`group.instance.id`, a session
    /// that outlasts the restart, so that the restart neither waits for
    /// the killed member's session nor rebalances), SIGKILLed once its
    /// group has committed half of the input, then started again on the
    /// same state directory and run to the input's end, its output checked
    /// as the count's. Timed from the restart's spawn (and from the kill)
    /// until the group commits input again and until the output holds a
    /// record readable under read_committed again (`recovery-watch`).
    /// Returns the output's fingerprint.
    fn crash_run(
        &mut self,
        implementation: &str,
        threads: u32,
        run: u32,
        topics: &Topics,
    ) -> Result<String> {
        let workload = "count-eos";
        let label = format!("crash-eos-{implementation}-{threads}t-{run}");
        let app_id = self.name(&label);
        let output = format!("{app_id}-out");
        self.create_topics(&[format!("{output}:{PARTITIONS}")])?;
        let logs = self.out_dir.join("logs");

        let mut first = self.app(workload, implementation, &app_id, topics, &output, threads)?;
        first.args(["--target", &(self.plan.records / 2).to_string()]);
        static_member(&mut first, implementation);
        let killed_ms = run_then_kill(first, &logs.join(format!("{label}-killed.log")))?;

        let watcher = self.watch_recovery(&app_id, &topics.input, &output, &label)?;
        let mut restart = self.app(workload, implementation, &app_id, topics, &output, threads)?;
        static_member(&mut restart, implementation);
        let measured = measure(restart, &logs.join(format!("{label}.log")), || Ok(()), None);
        let watched = match &measured {
            Ok(_) => watcher.finish(),
            Err(_) => watcher.abandon(),
        };
        let (measured, watched) = (measured?, watched?);
        let _ = fs::remove_dir_all(self.out_dir.join("state").join(&app_id));
        let (fingerprint, _) = self.verify(workload, &output, &label)?;
        self.delete_topics(&[&output], Some(&app_id))?;

        let times = Tagged::find(&watched, "RECOVERED", &label)?;
        let at = |k: &str| -> Result<i64> { times.get(k) };
        let since = |from: i64, to: i64| (to - from) as f64 / 1000.0;
        let restarted_ms = measured.spawned_epoch_ms;
        let (committed, readable) = (
            since(restarted_ms, at("committed_ms")?),
            since(restarted_ms, at("readable_ms")?),
        );
        let readable_after_kill = since(killed_ms, at("readable_ms")?);
        let restored = measured.figure("restored")?;
        eprintln!(
            "bench: {label}: after the restart, input committed again in {committed:.2} s and \
             output readable in {readable:.2} s ({readable_after_kill:.2} s after the kill), \
             {restored} records restored; run to the end in {:.2} s, output verified",
            measured.wall.as_secs_f64()
        );
        let _ = writeln!(
            self.results,
            "recovery\t{}\t{threads}\t{implementation}\t{run}\t{restored}\t{committed:.3}\t{readable:.3}\t{readable_after_kill:.3}\t{:.3}\t{:.1}\t-\t-\t-\t-\t-",
            self.label(&format!("crash-eos over {} keys", self.plan.keys)),
            measured.cpu.as_secs_f64(),
            measured.rss_mib,
        );
        Ok(fingerprint)
    }
}

/// A bench-node helper running beside a measured app (`follow-latency`,
/// `recovery-watch`), past the line that says it is ready.
struct Follower {
    child: std::process::Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Follower {
    /// Starts `command` and returns once it prints `ready`.
    fn start(mut command: Command, log: &Path, ready: &str) -> Result<Follower> {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(File::create(log)?)
            .spawn()
            .with_context(|| format!("starting {command:?}"))?;
        let mut lines = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        match lines.next() {
            Some(Ok(line)) if line == ready => Ok(Follower { child, lines }),
            other => {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "{:?} printed {other:?}, not {ready}; the end of {}:\n{}",
                    command.get_program(),
                    log.display(),
                    process::tail(log, 20)
                )
            }
        }
    }

    /// Ends it when the run it watched failed.
    fn abandon(mut self) -> Result<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        Ok(String::new())
    }

    /// The rest of its output once it has ended, which it does when the
    /// app's group has committed the whole input and the output is read.
    fn finish(mut self) -> Result<String> {
        let rest: Vec<String> = self.lines.by_ref().map_while(Result::ok).collect();
        let status = self.child.wait()?;
        if !status.success() {
            bail!("follow-latency failed ({status}): {rest:?}");
        }
        Ok(rest.join("\n"))
    }
}

/// kstreams as it is watched, run only when `--only` names them: every
/// metric of `metrics.recording.level=DEBUG`, and the default INFO with the
/// HTTP endpoints served and /metrics scraped every second.
const OBSERVED: [&str; 2] = ["kstreams-debug-metrics", "kstreams-scraped"];

/// kstreams built from another commit (`--baseline`).
const BASELINE: &str = "kstreams-baseline";

/// The implementations that run `workload`: the raw loop runs only the
/// pass-through (it keeps no state: no count, no restore).
fn implementations(workload: &str) -> Vec<&'static str> {
    match workload {
        "pass-through" => vec!["kstreams", "kafka-streams", "raw"],
        // kstreams with and without transactional stores.
        "crash-eos" => vec!["kstreams", TRANSACTIONAL, "kafka-streams"],
        _ => vec!["kstreams", "kafka-streams"],
    }
}

/// kstreams with `enable.transactional.statestores=true` (KIP-892).
const TRANSACTIONAL: &str = "kstreams-txn";

/// A byte count as the results show it: MiB when whole.
fn bytes_label(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} B")
    }
}

/// `a=1 b=2` as a map.
fn key_values(line: &str) -> HashMap<String, String> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The `k=v` figures of the line a bench-node tool prints after its tag
/// (`DONE`, `CHANGELOG`, `LATENCY`, ...).
struct Tagged {
    tag: &'static str,
    figures: HashMap<String, String>,
}

impl Tagged {
    /// The figures of `tag`'s line in `output`, `label`'s run.
    fn find(output: &str, tag: &'static str, label: &str) -> Result<Self> {
        let line = output
            .lines()
            .find_map(|l| l.strip_prefix(tag)?.strip_prefix(' '))
            .ok_or_else(|| anyhow!("{label}: no {tag} line in {output:?}"))?;
        Ok(Self::of(tag, line))
    }

    fn of(tag: &'static str, line: &str) -> Self {
        Tagged {
            tag,
            figures: key_values(line),
        }
    }

    /// Figure `k`, parsed.
    fn get<T>(&self, k: &str) -> Result<T>
    where
        T: std::str::FromStr,
        T::Err: std::error::Error + Send + Sync + 'static,
    {
        let tag = self.tag;
        self.figures
            .get(k)
            .ok_or_else(|| anyhow!("{tag} lacks {k}"))?
            .parse()
            .with_context(|| format!("{tag} {k}"))
    }
}

/// Runs `command` until it prints `DONE`, calling `on_ready` once it prints
/// `READY`; its stderr goes to `log`. Wall time runs from the spawn to the
/// `DONE` line; CPU time and peak RSS are the kernel's for the whole process.
/// With `after_done`, that is called once `DONE` is read, and the process
/// then runs on until it prints `CAUGHT_UP` (restore: the check records
/// processed), which is untimed.
fn measure(
    mut command: Command,
    log: &Path,
    on_ready: impl FnOnce() -> Result<()>,
    after_done: Option<&dyn Fn() -> Result<()>>,
) -> Result<Measured> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(File::create(log)?);
    let spawned_epoch_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64;
    let started = Instant::now();
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot start {command:?}"))?;
    let pid = child.id() as libc::pid_t;
    let stdout = child.stdout.take().expect("stdout is piped");
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut on_ready = Some(on_ready);
    let mut done = None;
    let finished = loop {
        match received.recv_timeout(RUN_TIMEOUT.saturating_sub(started.elapsed())) {
            Ok(line) if line == "READY" => {
                if let Some(ready) = on_ready.take() {
                    ready()?;
                }
            }
            Ok(line) if line == "CAUGHT_UP" && done.is_some() => break true,
            Ok(line) => {
                if let Some(figures) = line.strip_prefix("DONE ") {
                    done = Some((started.elapsed(), Tagged::of("DONE", figures)));
                    let Some(after_done) = after_done else {
                        break true;
                    };
                    if let Err(error) = after_done() {
                        process::signal(pid, libc::SIGKILL);
                        let _ = reap(pid);
                        return Err(error);
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                process::signal(pid, libc::SIGKILL);
                break false;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break false,
        }
    };
    let (status, usage) = reap(pid)?;
    let (Some((wall, figures)), true) = (done, finished) else {
        bail!(
            "{:?} ended without finishing ({status}); the end of {}:\n{}",
            command.get_program(),
            log.display(),
            process::tail(log, 30)
        );
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Ok(Measured {
        wall,
        spawned_epoch_ms,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
        rss_mib: usage.ru_maxrss as f64 / 1024.0,
        figures,
    })
}

/// The settings of a crash-eos run's app: a static member whose session
/// outlasts the restart (the classic protocol replaces a static member that
/// joins again at once), and for kstreams transactional stores said
/// explicitly off unless `implementation` is [`TRANSACTIONAL`].
fn static_member(command: &mut Command, implementation: &str) {
    command.args(["--set", "group.instance.id=bench-crash"]);
    command.args(["--set", "session.timeout.ms=60000"]);
    if implementation == "kstreams" {
        command.args(["--set", "enable.transactional.statestores=false"]);
    }
}

/// Runs `command` until it prints `DONE` (its group has committed its
/// `--target`), then SIGKILLs it: a crash mid-input. Returns when it was
/// killed, in milliseconds since the epoch.
fn run_then_kill(mut command: Command, log: &Path) -> Result<i64> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(File::create(log)?);
    let started = Instant::now();
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot start {command:?}"))?;
    let pid = child.id() as libc::pid_t;
    let stdout = child.stdout.take().expect("stdout is piped");
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let reached = loop {
        match received.recv_timeout(RUN_TIMEOUT.saturating_sub(started.elapsed())) {
            Ok(line) if line.starts_with("DONE ") => break true,
            Ok(_) => {}
            Err(_) => break false,
        }
    };
    process::signal(pid, libc::SIGKILL);
    let killed_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64;
    let (status, _) = reap(pid)?;
    if !reached {
        bail!(
            "{:?} ended before its target ({status}); the end of {}:\n{}",
            command.get_program(),
            log.display(),
            process::tail(log, 30)
        );
    }
    Ok(killed_ms)
}

/// Waits for the child `pid` to exit (killing it after 30 s: it has
/// reported, nothing it does after counts) and returns its exit status and
/// resource usage.
fn reap(pid: libc::pid_t) -> Result<(String, libc::rusage)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut status = 0;
        // SAFETY: wait4 writes an int and a rusage through the pointers,
        // both valid locals that outlive the call; a zeroed rusage is a
        // valid value (plain integers).
        let (reaped, usage) = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            let flags = if Instant::now() < deadline {
                libc::WNOHANG
            } else {
                0
            };
            (libc::wait4(pid, &mut status, flags, &mut usage), usage)
        };
        if reaped == pid {
            let status = if libc::WIFEXITED(status) {
                format!("exit status {}", libc::WEXITSTATUS(status))
            } else {
                format!("signal {}", libc::WTERMSIG(status))
            };
            return Ok((status, usage));
        }
        if reaped < 0 {
            bail!("wait4 failed: {}", std::io::Error::last_os_error());
        }
        if Instant::now() >= deadline {
            process::signal(pid, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
