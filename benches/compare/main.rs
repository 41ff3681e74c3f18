//! `bench-node`: the Rust side of `cargo xtask bench compare`. Each command
//! is one step, run as its own process by xtask so that every measured
//! implementation is a process of its own:
//!
//! ```text
//! bench-node create-topics --bootstrap B --topic NAME:PARTITIONS[:append] ...
//! bench-node delete-topics --bootstrap B [--topic NAME ...] [--prefix APP_ID ...]
//! bench-node produce  --bootstrap B --workload W --topic T [--table T2] --records N --seed S [--keys K]
//! bench-node produce-rate --bootstrap B --topic T --seed S --rate R --seconds D [--keys K]
//! bench-node produce-keys --bootstrap B --topic T --keys K  (one record per key)
//! bench-node await-committed --bootstrap B --group G --topic T --target N [--timeout-secs S]
//! bench-node kstreams|raw --bootstrap B --workload W --app-id A --input T [--table T2]
//!                     --output O --threads N --state-dir D [--target N] [--set KEY=VALUE ...]
//!                     [--scrape-ms N]  (kstreams: /metrics fetched every N ms)
//!                     [--leave true]  (close, leaving the group, once done)
//!                     [--restore-partitions P --then-target N]  (restore, below)
//! bench-node produce-check --bootstrap B --topic T --records N [--keys K]
//! bench-node changelog --bootstrap B --app-id A
//! bench-node await-group-empty --bootstrap B --group G [--timeout-secs S]
//! bench-node verify   --bootstrap B --workload W --output O --records N --seed S [--keys K]
//!                     [--preload true]  (count: produce-keys' records counted first)
//! bench-node latency  --bootstrap B --output O [--skip 0.1]
//! bench-node follow-latency --bootstrap B --output O --group G --input T --target N [--skip 0.1]
//! bench-node recovery-watch --bootstrap B --group G --input T --output O [--timeout-secs S]
//! bench-node report   --results FILE.tsv --out-dir DIR
//! ```
//!
//! `--keys K`: the input's key space (default 10 000, a state that fits in
//! the record cache; the large-state runs give millions).
//!
//! Measured runs print `READY` once they process, then one `DONE` line of
//! figures when their group has committed the whole input (see
//! progress.rs); compat/'s `bench` prints the same lines for Kafka Streams.
//!
//! `restore` runs the count's topology on the state the count left in its
//! changelog (xtask runs `count` with the same app id first, with `--leave
//! true`, then deletes the local state): `DONE` once the app serves again
//! (RUNNING, no store restoring, `--restore-partitions` changelog
//! partitions restored as the restore listener tells), with the records
//! restored; then, once xtask has fed `produce-check`'s records, `CAUGHT_UP`
//! when the group has committed `--then-target` input records.
//!
//! The latency of a count over a large state: `produce-keys` gives every
//! key a count, the app counts them (`await-committed`), then
//! `follow-latency` reads the output from its end while `produce-rate`
//! feeds the same keys (see load.rs `follow_latency`).

mod apps;
mod load;
mod progress;
mod report;
mod scrape;
mod verify;
mod workload;

use std::collections::HashMap;
use std::process::ExitCode;

use workload::Workload;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// `--key value` options; repeated keys keep every value.
struct Options(HashMap<String, Vec<String>>);

impl Options {
    fn parse(args: &[String]) -> Result<Options, Error> {
        let mut options: HashMap<String, Vec<String>> = HashMap::new();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let key = arg
                .strip_prefix("--")
                .ok_or_else(|| format!("expected an --option, found `{arg}`"))?;
            let value = args
                .next()
                .ok_or_else(|| format!("--{key} needs a value"))?;
            options
                .entry(key.to_owned())
                .or_default()
                .push(value.clone());
        }
        Ok(Options(options))
    }

    fn optional(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.last()).map(String::as_str)
    }

    fn required(&self, key: &str) -> Result<&str, Error> {
        self.optional(key)
            .ok_or_else(|| format!("--{key} is required").into())
    }

    fn all(&self, key: &str) -> &[String] {
        self.0.get(key).map_or(&[], Vec::as_slice)
    }

    fn number<T: std::str::FromStr>(&self, key: &str) -> Result<T, Error> {
        self.required(key)?
            .parse()
            .map_err(|_| format!("--{key}: not a number").into())
    }

    /// `--keys`: the input's key space, never empty.
    fn keys(&self) -> Result<u64, Error> {
        let keys = match self.optional("keys") {
            None => workload::DEFAULT_KEYS,
            Some(_) => self.number("keys")?,
        };
        if keys == 0 {
            return Err("--keys must be at least 1".into());
        }
        Ok(keys)
    }
}

/// What a measured run is given.
pub struct RunArgs {
    pub bootstrap: String,
    pub app_id: String,
    pub input: String,
    pub table: Option<String>,
    pub output: String,
    pub threads: usize,
    pub state_dir: String,
    /// Records to wait for; `None`: the input's end offsets at start.
    pub target: Option<i64>,
    /// `--set KEY=VALUE`: configuration on top of the defaults.
    pub overrides: Vec<(String, String)>,
    /// `--scrape-ms N`: serve the HTTP endpoints and fetch `/metrics`
    /// every N ms while the run lasts, as a Prometheus would (kstreams
    /// only), to measure what being watched costs.
    pub scrape_every: Option<std::time::Duration>,
    /// `--leave true`: once done, close the app (leaving the group), so
    /// that the next run of the same app id does not wait out this
    /// member's session.
    pub leave: bool,
    /// restore: the changelog partitions that hold records, each of which
    /// must be restored before the app serves.
    pub restore_partitions: Option<usize>,
    /// restore: the input records committed once the check records are
    /// processed.
    pub then_target: Option<i64>,
}

impl RunArgs {
    fn parse(options: &Options) -> Result<RunArgs, Error> {
        let overrides = options
            .all("set")
            .iter()
            .map(|kv| {
                kv.split_once('=')
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .ok_or_else(|| format!("--set {kv}: expected KEY=VALUE"))
            })
            .collect::<Result<_, _>>()?;
        Ok(RunArgs {
            bootstrap: options.required("bootstrap")?.to_owned(),
            app_id: options.required("app-id")?.to_owned(),
            input: options.required("input")?.to_owned(),
            table: options.optional("table").map(str::to_owned),
            output: options.required("output")?.to_owned(),
            threads: options.number("threads")?,
            state_dir: options.required("state-dir")?.to_owned(),
            target: options.optional("target").map(str::parse).transpose()?,
            overrides,
            scrape_every: options
                .optional("scrape-ms")
                .map(str::parse)
                .transpose()?
                .map(std::time::Duration::from_millis),
            leave: options.optional("leave") == Some("true"),
            restore_partitions: options
                .optional("restore-partitions")
                .map(str::parse)
                .transpose()?,
            then_target: options
                .optional("then-target")
                .map(str::parse)
                .transpose()?,
        })
    }

    /// The topics whose committed offsets tell that the run is done.
    pub fn inputs(&self) -> Vec<&str> {
        std::iter::once(self.input.as_str())
            .chain(self.table.as_deref())
            .collect()
    }
}

fn run(command: &str, options: &Options) -> Result<(), Error> {
    let bootstrap = || options.required("bootstrap");
    let workload = || Workload::parse(options.required("workload")?).map_err(Error::from);
    match command {
        "create-topics" => {
            for spec in options.all("topic") {
                let mut parts = spec.split(':');
                let name = parts.next().unwrap_or_default();
                let partitions: i32 = parts
                    .next()
                    .ok_or_else(|| format!("--topic {spec}: expected NAME:PARTITIONS"))?
                    .parse()?;
                // The input's event times are fixed in the past (a seed
                // decides them): time-based retention must not delete them.
                let mut config = vec![("retention.ms", "-1")];
                if parts.next() == Some("append") {
                    config.push(("message.timestamp.type", "LogAppendTime"));
                }
                kstreams::embedded::create_topic_with_config(
                    bootstrap()?,
                    name,
                    partitions,
                    1,
                    &config,
                )?;
            }
        }
        "delete-topics" => {
            let mut names: Vec<String> = options.all("topic").to_vec();
            // --prefix: an app's internal topics (changelogs, repartitions).
            for prefix in options.all("prefix") {
                names.extend(verify::topics_named(bootstrap()?, prefix)?);
            }
            // A topic named twice in one request is refused.
            names.sort();
            names.dedup();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            kstreams::embedded::delete_topics(bootstrap()?, &names)?;
        }
        "produce" => {
            let seed = options.number("seed")?;
            let records = options.number("records")?;
            let keys = options.keys()?;
            let sent = load::produce_all(
                bootstrap()?,
                options.required("topic")?,
                workload::stream_input(seed, records, keys),
            )?;
            if let Some(table) = options.optional("table") {
                load::produce_all(bootstrap()?, table, workload::table_input(keys))?;
            }
            println!("PRODUCED {sent}");
        }
        "produce-keys" => {
            let sent = load::produce_all(
                bootstrap()?,
                options.required("topic")?,
                workload::preload_input(options.keys()?),
            )?;
            println!("PRODUCED {sent}");
        }
        "await-committed" => {
            let progress = progress::Progress::new(
                bootstrap()?,
                options.required("group")?,
                &[options.required("topic")?],
                Some(options.number("target")?),
            )?;
            let timeout = std::time::Duration::from_secs(
                options
                    .optional("timeout-secs")
                    .map_or(Ok(600), str::parse)?,
            );
            let began = std::time::Instant::now();
            progress.wait_for(options.number("target")?, || {
                (began.elapsed() > timeout)
                    .then(|| format!("not committed after {} s", timeout.as_secs()))
            })?;
        }
        "produce-check" => {
            let sent = load::produce_all(
                bootstrap()?,
                options.required("topic")?,
                workload::check_input(options.number("records")?, options.keys()?),
            )?;
            println!("PRODUCED {sent}");
        }
        "changelog" => {
            let (partitions, records) =
                verify::changelog(bootstrap()?, options.required("app-id")?)?;
            println!("CHANGELOG partitions={partitions} records={records}");
        }
        "await-group-empty" => {
            let timeout = options
                .optional("timeout-secs")
                .map_or(Ok(120), str::parse)?;
            verify::await_group_empty(
                bootstrap()?,
                options.required("group")?,
                std::time::Duration::from_secs(timeout),
            )?;
        }
        "produce-rate" => {
            let sent = load::produce_at_rate(
                bootstrap()?,
                options.required("topic")?,
                options.number("seed")?,
                options.number("rate")?,
                options.number("seconds")?,
                options.keys()?,
            )?;
            println!("PRODUCED {sent}");
        }
        "kstreams" => apps::run_kstreams(workload()?, &RunArgs::parse(options)?)?,
        "raw" => apps::run_raw(workload()?, &RunArgs::parse(options)?)?,
        "verify" => {
            let workload = workload()?;
            let mut expected = workload::expected(
                workload,
                options.number("seed")?,
                options.number("records")?,
                options.keys()?,
            );
            if options.optional("preload") == Some("true") {
                expected = workload::with_preload(expected, options.keys()?)?;
            }
            let (observed, span) =
                verify::observed(bootstrap()?, options.required("output")?, workload)?;
            if let Some(difference) = verify::difference(&expected, &observed) {
                return Err(
                    format!("{workload}: output differs from the expected: {difference}").into(),
                );
            }
            println!("VERIFIED {}", verify::fingerprint(&observed));
            // Not part of the fingerprint: it differs from run to run.
            println!("OUTPUT_TIMES_MS first={} last={}", span.first, span.last);
        }
        "latency" => {
            let skip = options.optional("skip").map_or(Ok(0.1), str::parse)?;
            let (total, n, [p50, p99, p999]) =
                load::latency(bootstrap()?, options.required("output")?, skip)?;
            println!(
                "LATENCY total={total} measured={n} p50_ms={p50:.2} p99_ms={p99:.2} p999_ms={p999:.2}"
            );
        }
        "recovery-watch" => {
            let timeout = options
                .optional("timeout-secs")
                .map_or(Ok(600), str::parse)?;
            let (committed, readable) = progress::watch_recovery(
                bootstrap()?,
                options.required("group")?,
                options.required("input")?,
                options.required("output")?,
                std::time::Duration::from_secs(timeout),
            )?;
            println!("RECOVERED committed_ms={committed} readable_ms={readable}");
        }
        "follow-latency" => {
            let skip = options.optional("skip").map_or(Ok(0.1), str::parse)?;
            let (total, n, [p50, p99, p999]) = load::follow_latency(
                bootstrap()?,
                options.required("output")?,
                options.required("group")?,
                options.required("input")?,
                options.number("target")?,
                skip,
            )?;
            println!(
                "LATENCY total={total} measured={n} p50_ms={p50:.2} p99_ms={p99:.2} p999_ms={p999:.2}"
            );
        }
        "report" => report::write(
            std::path::Path::new(options.required("results")?),
            std::path::Path::new(options.required("out-dir")?),
        )?,
        other => {
            return Err(format!("unknown command `{other}` (see benches/compare/main.rs)").into())
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    // Warnings and errors by default, more with RUST_LOG; to stderr, which
    // xtask keeps in <target>/bench/logs/.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp_millis()
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        eprintln!("usage: bench-node <command> [--option value ...] (see benches/compare/main.rs)");
        return ExitCode::from(2);
    };
    let result = Options::parse(rest).and_then(|options| run(command, &options));
    match result {
        Ok(()) => {
            // A measured run is over once it has reported: leave without
            // closing, as the Kafka Streams side does, so that no run pays
            // for its shutdown.
            std::process::exit(0)
        }
        Err(error) => {
            eprintln!("bench-node {command}: {error}");
            ExitCode::FAILURE
        }
    }
}
