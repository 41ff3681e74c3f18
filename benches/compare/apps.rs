//! The measured processes on the Rust side: the kstreams app of each
//! workload, and the raw librdkafka consume-produce loop (the ceiling of a
//! pass-through). compat/'s `bench` command is the Kafka Streams side.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kstreams::embedded::rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance,
};
use kstreams::embedded::rdkafka::producer::{BaseProducer, BaseRecord};
use kstreams::embedded::rdkafka::{
    ClientConfig, ClientContext, Message, Offset, TopicPartitionList,
};
use kstreams::prelude::*;
use kstreams_benches::{flush_promptly, send_waiting};

use crate::progress::{cpu_time, peak_rss_kib, Progress};
use crate::scrape::Scraper;
use crate::workload::{self, Workload, WINDOW_SIZE_MS};
use crate::{Error, RunArgs};

/// The commit interval of at-least-once runs on every implementation.
/// Kafka Streams' default (30 s) would make "committed the whole input"
/// wait up to 30 s after the work is done; 1 s keeps that wait small and
/// equal for all, and costs each a commit per second. The interval is the
/// resolution of a run's wall time (the work done, a run still waits for
/// the next commit): BENCHMARKS.md says what 100 ms, which resolves the
/// raw-loop comparison, cost kstreams' CPU.
pub const AT_LEAST_ONCE_COMMIT_MS: u64 = 1_000;

fn topology(workload: Workload, run: &RunArgs) -> Result<Topology, Error> {
    let builder = StreamsBuilder::new();
    let strings = || Consumed::with(StringSerde, StringSerde);
    let stream = builder.stream_with(run.input.as_str(), strings());
    match workload {
        Workload::PassThrough | Workload::PassThroughEos => {
            stream
                .filter(|_, v: &String| !v.as_bytes().starts_with(&[workload::DROPPED_MARK]))
                .map_values(|v: String| v.to_ascii_uppercase())
                .to_with(
                    run.output.as_str(),
                    Produced::with(StringSerde, StringSerde),
                );
        }
        Workload::Count | Workload::CountEos | Workload::Restore => {
            stream.group_by_key().count().to_stream().to_with(
                run.output.as_str(),
                Produced::with(StringSerde, Nullable(I64Serde)),
            );
        }
        Workload::WindowCount => {
            stream
                .group_by_key()
                .windowed_by(TimeWindows::of_size_with_no_grace(Duration::from_millis(
                    WINDOW_SIZE_MS as u64,
                )))
                .count()
                .to_stream()
                .to_with(
                    run.output.as_str(),
                    Produced::with(
                        TimeWindowedSerde::new(StringSerde, WINDOW_SIZE_MS),
                        Nullable(I64Serde),
                    ),
                );
        }
        Workload::Join => {
            let table_topic = run.table.as_deref().ok_or("join needs --table")?;
            let table = builder.table_with(table_topic, strings(), Materialized::new());
            stream
                // Java's `v + "|" + t` is an exact-size concatenation
                // (StringConcatFactory); `concat` is its Rust counterpart
                // (`format!` would run the formatting machinery instead).
                .left_join(&table, |v: &String, t: Option<&String>| {
                    [v.as_str(), "|", t.map_or("null", String::as_str)].concat()
                })
                .to_with(
                    run.output.as_str(),
                    Produced::with(StringSerde, StringSerde),
                );
        }
    }
    Ok(builder.build()?)
}

/// Runs `workload` on kstreams with its default configuration (apart from
/// the settings every implementation shares) until the input is committed.
pub fn run_kstreams(workload: Workload, run: &RunArgs) -> Result<(), Error> {
    let mut config = StreamsConfig::new(run.app_id.as_str(), run.bootstrap.as_str());
    config.set("num.stream.threads", &run.threads.to_string())?;
    config.set("state.dir", &run.state_dir)?;
    if workload.exactly_once() {
        config.set("processing.guarantee", "exactly_once_v2")?;
    } else {
        config.set("commit.interval.ms", &AT_LEAST_ONCE_COMMIT_MS.to_string())?;
    }
    for (key, value) in &run.overrides {
        config.set(key, value)?;
    }
    let mut app = KafkaStreams::new(topology(workload, run)?, config);
    let ready = Arc::new(AtomicBool::new(false));
    let ready_flag = ready.clone();
    app.set_state_listener(move |new, _| {
        if new == State::Running {
            ready_flag.store(true, Ordering::Release);
        }
    });
    let progress = Progress::new(&run.bootstrap, &run.app_id, &run.inputs(), run.target)?;
    let _scraper = run
        .scrape_every
        .map(|every| Scraper::start(&app, every))
        .transpose()?;
    let restores = Arc::new(RestoreTally::default());
    // count-eos: what a restart after a crash restored, in its DONE line.
    if matches!(workload, Workload::Restore | Workload::CountEos) {
        app.set_global_state_restore_listener(restores.clone())?;
    }
    let started = Instant::now();
    app.start()?;
    let stopped = |app: &KafkaStreams| {
        (app.state() == State::Error || app.state() == State::NotRunning)
            .then(|| format!("kstreams stopped: {:?}", app.errors()))
    };
    if workload == Workload::Restore {
        let partitions = run
            .restore_partitions
            .ok_or("restore needs --restore-partitions")?;
        let then_target = run.then_target.ok_or("restore needs --then-target")?;
        // Serving: RUNNING, no thread restoring (the readiness an operator's
        // probe reads), and every changelog partition with records restored.
        loop {
            if let Some(why) = stopped(&app) {
                return Err(why.into());
            }
            if app.state() == State::Running
                && restores.ended() >= partitions
                && app.metadata().not_ready_reason().is_none()
            {
                break;
            }
            std::thread::sleep(SERVING_CHECK);
        }
        println!("{}", restores.done_line(started, partitions));
        return progress.wait_for(then_target, || stopped(&app));
    }
    let mut said_ready = false;
    let extra = || match workload {
        Workload::CountEos => format!(" restored={}", restores.restored()),
        _ => String::new(),
    };
    progress.wait_and_report(
        || {
            if !said_ready && ready.load(Ordering::Acquire) {
                said_ready = true;
                println!("READY");
            }
            stopped(&app)
        },
        extra,
    )?;
    if run.leave {
        // Leaves the group, so that the restore run after it joins at once.
        app.close(Duration::from_secs(30));
    }
    Ok(())
}

/// How often a restore run looks whether it serves again: the resolution of
/// its wall time (compat/'s `bench` looks as often).
const SERVING_CHECK: Duration = Duration::from_millis(2);

/// What the restore listener heard: per changelog partition (and store),
/// the records the restoration set out to read (ending minus starting
/// offset) and, once it ended, the records it restored.
#[derive(Default)]
struct RestoreTally {
    partitions: Mutex<HashMap<String, (i64, Option<u64>)>>,
}

impl RestoreTally {
    /// Records restored by the restorations that have ended.
    fn restored(&self) -> u64 {
        let partitions = self.partitions.lock().unwrap();
        partitions.values().filter_map(|(_, end)| *end).sum()
    }

    fn ended(&self) -> usize {
        let partitions = self.partitions.lock().unwrap();
        partitions.values().filter(|(_, end)| end.is_some()).count()
    }

    /// The `DONE` line of a restore run (the figures of Kafka Streams'
    /// side have the same names).
    fn done_line(&self, started: Instant, partitions: usize) -> String {
        let tally = self.partitions.lock().unwrap();
        let span: i64 = tally.values().map(|(span, _)| span).sum();
        let restored: u64 = tally.values().filter_map(|(_, end)| *end).sum();
        format!(
            "DONE wall_ms={} cpu_ms={} peak_rss_kib={} restored={restored} restore_span={span} \
             restored_partitions={} expected_partitions={partitions}",
            started.elapsed().as_millis(),
            cpu_time().as_millis(),
            peak_rss_kib(),
            tally.len(),
        )
    }
}

impl StateRestoreListener for RestoreTally {
    fn on_restore_start(
        &self,
        partition: &TopicPartition,
        store: &str,
        starting_offset: i64,
        ending_offset: i64,
    ) {
        self.partitions.lock().unwrap().insert(
            format!("{store}@{partition}"),
            (ending_offset - starting_offset, None),
        );
    }

    fn on_restore_end(&self, partition: &TopicPartition, store: &str, total_restored: u64) {
        self.partitions
            .lock()
            .unwrap()
            .entry(format!("{store}@{partition}"))
            .or_default()
            .1 = Some(total_restored);
    }
}

/// librdkafka's consumer and producer with the settings kstreams gives its
/// own clients (crates/kstreams-runtime/src/kafka/clients.rs), so the loop
/// is the ceiling of what kstreams' clients can do.
fn raw_clients(run: &RunArgs) -> Result<(BaseConsumer<RawLoopContext>, Arc<BaseProducer>), Error> {
    let mut consumer = ClientConfig::new();
    consumer
        .set("bootstrap.servers", &run.bootstrap)
        .set("group.id", &run.app_id)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("partition.assignment.strategy", "range");
    let mut producer = ClientConfig::new();
    producer
        .set("bootstrap.servers", &run.bootstrap)
        .set("partitioner", "murmur2_random");
    for (key, value) in kstreams::runtime::kafka::STREAM_CLIENT_DEFAULTS {
        match key.split_once('.') {
            Some(("consumer", k)) => consumer.set(k, *value),
            Some(("producer", k)) => producer.set(k, *value),
            // The loop has no admin client.
            Some(("admin", _)) => continue,
            _ => return Err(format!("unexpected client default {key}").into()),
        };
    }
    for (key, value) in &run.overrides {
        match key.split_once('.') {
            Some(("consumer", k)) => consumer.set(k, value),
            Some(("producer", k)) => producer.set(k, value),
            _ => return Err(format!("raw: override {key} names no client").into()),
        };
    }
    let producer: Arc<BaseProducer> = Arc::new(producer.create()?);
    let context = RawLoopContext {
        producer: producer.clone(),
    };
    Ok((consumer.create_with_context(context)?, producer))
}

/// What a loop does when the group takes partitions away: what it sent is
/// flushed and its positions committed first, as an at-least-once Streams
/// thread does, so that the next owner does not send those records again.
struct RawLoopContext {
    producer: Arc<BaseProducer>,
}

impl ClientContext for RawLoopContext {}

impl ConsumerContext for RawLoopContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(_) = rebalance {
            if let Err(e) = commit_positions(consumer, &self.producer) {
                eprintln!("raw loop: commit on revocation failed: {e}");
            }
        }
    }
}

/// Flushes the producer, then commits the consumer's positions: an
/// at-least-once commit.
fn commit_positions<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    producer: &BaseProducer,
) -> Result<(), Error> {
    flush_promptly(producer, Duration::from_secs(60))?;
    let mut committable = TopicPartitionList::new();
    for e in consumer.position()?.elements() {
        if let Offset::Offset(o) = e.offset() {
            committable.add_partition_offset(e.topic(), e.partition(), Offset::Offset(o))?;
        }
    }
    if committable.count() > 0 {
        consumer.commit(&committable, CommitMode::Sync)?;
    }
    Ok(())
}

/// Records the raw loop consumes (filtered ones included) between two
/// servings of delivery reports (and looks at the commit clock):
/// kstreams' poll batch, at most
/// `buffered.records.per.partition` (1000) records.
const REPORTS_EVERY: u32 = 1000;

/// The pass-through as plain loops, one per thread: poll, filter and map,
/// send with the input's timestamp and headers (what a Streams pass-through
/// writes); every commit interval, and on a revocation, flush the producer
/// and commit the positions (what an at-least-once commit is). A loop
/// serves delivery reports once per `REPORTS_EVERY` records, as kstreams
/// does once per poll batch: served per record, the clock reads of
/// `poll(0)` were a fifth of its CPU (so it also looks at the commit clock
/// only then).
pub fn run_raw(workload: Workload, run: &RunArgs) -> Result<(), Error> {
    if workload != Workload::PassThrough {
        return Err(format!("raw runs only {}", Workload::PassThrough).into());
    }
    let progress = Progress::new(&run.bootstrap, &run.app_id, &run.inputs(), run.target)?;
    let failure: Arc<Mutex<Option<String>>> = Arc::default();
    // One loop per thread, each with its own consumer (a member of the
    // group) and producer, as each Streams thread has.
    for _ in 0..run.threads.max(1) {
        let (consumer, producer) = raw_clients(run)?;
        consumer.subscribe(&[run.input.as_str()])?;
        let failure_in_loop = failure.clone();
        let output = run.output.clone();
        std::thread::spawn(move || {
            if let Err(e) = raw_loop(&consumer, &producer, &output) {
                *failure_in_loop.lock().unwrap() = Some(format!("raw loop failed: {e}"));
            }
        });
    }
    println!("READY");
    progress.wait_and_report(|| failure.lock().unwrap().clone(), String::new)
}

fn raw_loop(
    consumer: &BaseConsumer<RawLoopContext>,
    producer: &BaseProducer,
    output: &str,
) -> Result<(), Error> {
    let commit_every = Duration::from_millis(AT_LEAST_ONCE_COMMIT_MS);
    let mut last_commit = Instant::now();
    let mut unserved = 0;
    loop {
        let polled = consumer.poll(Duration::from_millis(100));
        let idle = polled.is_none();
        if let Some(message) = polled {
            let message = message?;
            unserved += 1;
            let value = message.payload().unwrap_or_default();
            // Checked as UTF-8, as both Streams libraries decode the value
            // into a String: the loop does that work too, with the check
            // kstreams' StringSerde uses.
            simdutf8::basic::from_utf8(value)?;
            if let Some(upper) = workload::pass_through(value) {
                // The output record keeps the input's timestamp and
                // headers, as a Streams pass-through's does: the loop reads
                // them as both libraries must.
                let mut record = BaseRecord::to(output)
                    .key(message.key().unwrap_or_default())
                    .payload(&upper[..]);
                if let Some(timestamp) = message.timestamp().to_millis() {
                    record = record.timestamp(timestamp);
                }
                if let Some(headers) = message.headers() {
                    record = record.headers(headers.detach());
                }
                send_waiting(producer, record)?;
            }
        }
        // Idle (nothing polled): serve the reports and look at the commit
        // clock now.
        if !idle && unserved < REPORTS_EVERY {
            continue;
        }
        producer.poll(Duration::ZERO);
        unserved = 0;
        if last_commit.elapsed() >= commit_every {
            commit_positions(consumer, producer)?;
            last_commit = Instant::now();
        }
    }
}
