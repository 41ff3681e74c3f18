//! Rebalance pauses under the classic consumer group protocol (eager,
//! client-side range assignor) and the KIP-848 consumer group protocol
//! (`consumer.group.protocol=consumer`, incremental, the server-side range
//! assignor the runtime asks for), on a real broker with its default group
//! settings (KIP-848: `group.consumer.heartbeat.interval.ms` 5 s; classic:
//! librdkafka's `heartbeat.interval.ms` 3 s).
//!
//! ```text
//! eval "$(cargo xtask kafka start)"
//! cargo bench -p kstreams-benches --bench rebalance_protocols -- [classic|consumer] [--runs N (5)] [--rate R]
//! ```
//!
//! Needs KSTREAMS_BOOTSTRAP; without it, it says so and exits. Each run
//! makes two co-partitioned input topics of 6 partitions and a producer
//! writing R records/s (default 2000) round-robin over their 12
//! partitions. Instance A (1 stream thread, the two inputs merged into one
//! sub-topology, so task `0_p` reads partition p of both topics) processes
//! that steady stream for 5 s; then instance B starts with the same
//! `application.id`, in the same process; later B closes. A `peek`
//! timestamps every record each instance processes, with its partition.
//!
//! B's join and leave are shifted by a different fraction of 5 s in each
//! run, so that the runs sample the heartbeat phase instead of all hitting
//! the same one: use 5 runs or more.
//!
//! Reported per run, and min/median/max per protocol:
//! - `B first`: from B's `start()` to B's first processed record;
//!   `B all`: until B has processed a record of each partition it ends up
//!   owning.
//! - `A gap join`: the longest time A processed nothing, from B's start
//!   until the assignment has been stable for 5 s; `A gap base` is the same
//!   over the 5 s before B starts (the noise floor).
//! - `moved join`: the longest a partition that moved to B went without
//!   being processed (A's last record of it to B's first): what a
//!   rebalance costs the records that change owner.
//! - `B close`: how long `close()` took; `A takeover`: from B's `close()`
//!   until A has processed a record of every partition B had; `A gap
//!   close`: A's longest gap from B's `close()` until 2 s after that;
//!   `moved close`: as `moved join`, for B's partitions going back to A.
//! - co-partitioning: once stable, partition p of both topics belongs to
//!   one instance, and no task was ever processed by the new owner before
//!   the old owner's last record of it (a task split across instances).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kstreams::embedded::rdkafka::error::{KafkaError, RDKafkaErrorCode};
use kstreams::embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams::embedded::rdkafka::ClientConfig;
use kstreams::embedded::{create_topic, unique_name, BOOTSTRAP_ENV};
use kstreams::prelude::*;
use kstreams::runtime::kafka::ConfigError;

const PARTITIONS: i32 = 6;
/// How long A processes alone before B starts.
const WARM: Duration = Duration::from_secs(5);
/// How long the assignment must stay the same to count as stable.
const STABLE: Duration = Duration::from_secs(5);
/// The trailing window in which an instance counts as owning a partition
/// it processed a record of.
const OWNERSHIP_WINDOW: Duration = Duration::from_secs(2);
/// Longest wait for a rebalance to finish.
const REBALANCE_TIMEOUT: Duration = Duration::from_secs(120);

type Error = Box<dyn std::error::Error>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Classic,
    Consumer,
}

impl Protocol {
    fn name(self) -> &'static str {
        match self {
            Protocol::Classic => "classic",
            Protocol::Consumer => "consumer",
        }
    }

    /// The settings that select the protocol; classic is the runtime's
    /// default.
    fn configure(self, config: &mut StreamsConfig) -> Result<(), ConfigError> {
        if self == Protocol::Consumer {
            config.set("consumer.group.protocol", "consumer")?;
        }
        Ok(())
    }
}

/// A topic-partition: index of the topic (0 or 1) and partition.
type Tp = (usize, i32);

/// When an instance processed a record, and of which partition.
#[derive(Default, Clone)]
struct Processed(Arc<Mutex<Vec<(Instant, Tp)>>>);

impl Processed {
    fn record(&self, value: &str) {
        let mut fields = value.split(':');
        let topic = fields.next().and_then(|t| t.parse().ok());
        let partition = fields.next().and_then(|p| p.parse().ok());
        if let (Some(topic), Some(partition)) = (topic, partition) {
            self.0
                .lock()
                .unwrap()
                .push((Instant::now(), (topic, partition)));
        }
    }

    fn snapshot(&self) -> Vec<(Instant, Tp)> {
        self.0.lock().unwrap().clone()
    }

    fn first_after(&self, from: Instant) -> Option<Instant> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(t, _)| *t)
            .find(|t| *t >= from)
    }
}

/// Partitions with a record processed in `[from, to]`.
fn owned(events: &[(Instant, Tp)], from: Instant, to: Instant) -> BTreeSet<Tp> {
    events
        .iter()
        .filter(|(t, _)| *t >= from && *t <= to)
        .map(|(_, tp)| *tp)
        .collect()
}

/// The longest stretch of `[from, to]` without a processed record.
fn longest_gap(events: &[(Instant, Tp)], from: Instant, to: Instant) -> Duration {
    let mut previous = events
        .iter()
        .map(|(t, _)| *t)
        .rfind(|t| *t <= from)
        .unwrap_or(from);
    let mut longest = Duration::ZERO;
    for (t, _) in events.iter().filter(|(t, _)| *t > from && *t <= to) {
        longest = longest.max(t.duration_since(previous));
        previous = *t;
    }
    longest.max(to.saturating_duration_since(previous))
}

fn first_of(events: &[(Instant, Tp)], tp: Tp, from: Instant) -> Option<Instant> {
    events
        .iter()
        .find(|(t, p)| *p == tp && *t >= from)
        .map(|(t, _)| *t)
}

fn last_of(events: &[(Instant, Tp)], tp: Tp, from: Instant) -> Option<Instant> {
    events
        .iter()
        .rev()
        .find(|(t, p)| *p == tp && *t >= from)
        .map(|(t, _)| *t)
}

/// The longest a partition of `tps` went unprocessed while it changed
/// hands: from the old owner's last record of it to the new owner's first,
/// both from `from` on.
fn handover(
    old: &[(Instant, Tp)],
    new: &[(Instant, Tp)],
    tps: &BTreeSet<Tp>,
    from: Instant,
) -> Duration {
    tps.iter()
        .filter_map(|tp| {
            let first_new = first_of(new, *tp, from)?;
            let last_old = old
                .iter()
                .rev()
                .find(|(t, p)| p == tp && *t >= from && *t <= first_new)
                .map_or(from, |(t, _)| *t);
            Some(first_new.duration_since(last_old))
        })
        .max()
        .unwrap_or(Duration::ZERO)
}

/// Partition numbers whose two partitions are not owned together.
fn not_co_partitioned(owned: &BTreeSet<Tp>) -> Vec<i32> {
    (0..PARTITIONS)
        .filter(|p| owned.contains(&(0, *p)) != owned.contains(&(1, *p)))
        .collect()
}

/// Tasks the new owner processed before the old owner's last record of
/// either of the task's partitions, from `from` on.
fn split_tasks(
    old: &[(Instant, Tp)],
    new: &[(Instant, Tp)],
    moved: &BTreeSet<i32>,
    from: Instant,
) -> Vec<i32> {
    moved
        .iter()
        .copied()
        .filter(|p| {
            let old_last = [0, 1]
                .iter()
                .filter_map(|t| last_of(old, (*t, *p), from))
                .max();
            let new_first = [0, 1]
                .iter()
                .filter_map(|t| first_of(new, (*t, *p), from))
                .min();
            matches!((old_last, new_first), (Some(o), Some(n)) if n < o)
        })
        .collect()
}

struct Instance {
    app: KafkaStreams,
    processed: Processed,
    state: Arc<Mutex<State>>,
    _state_dir: tempfile::TempDir,
}

impl Instance {
    fn start(
        bootstrap: &str,
        application_id: &str,
        topics: &[String; 2],
        output: &str,
        protocol: Protocol,
    ) -> Result<Self, Error> {
        let processed = Processed::default();
        let builder = StreamsBuilder::new();
        let a = builder.stream_with(&topics[0], Consumed::with(StringSerde, StringSerde));
        let b = builder.stream_with(&topics[1], Consumed::with(StringSerde, StringSerde));
        let log = processed.clone();
        a.merge(&b)
            .peek(move |_, v| log.record(v))
            .to_with(output, Produced::with(StringSerde, StringSerde));
        let state_dir = tempfile::tempdir()?;
        let mut config = StreamsConfig::new(application_id, bootstrap);
        config.set("state.dir", &state_dir.path().display().to_string())?;
        protocol.configure(&mut config)?;
        let mut app = KafkaStreams::new(builder.build()?, config);
        let state = Arc::new(Mutex::new(State::Created));
        let seen = state.clone();
        app.set_state_listener(move |new, _| *seen.lock().unwrap() = new);
        app.start()?;
        Ok(Instance {
            app,
            processed,
            state,
            _state_dir: state_dir,
        })
    }

    fn state(&self) -> State {
        *self.state.lock().unwrap()
    }

    fn check(&self, name: &str) -> Result<(), Error> {
        match self.app.state() {
            State::Error | State::PendingError => {
                Err(format!("instance {name} failed: {:?}", self.app.errors()).into())
            }
            _ => Ok(()),
        }
    }
}

/// Writes `rate` records/s round-robin over the 12 input partitions until
/// stopped; each value says its topic and partition.
struct Feeder {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<u64, KafkaError>>,
}

impl Feeder {
    fn start(bootstrap: &str, topics: &[String; 2], rate: u64) -> Result<Self, Error> {
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("linger.ms", "5")
            .create()?;
        let topics = topics.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let handle = std::thread::spawn(move || {
            let began = Instant::now();
            let mut sent: u64 = 0;
            while !stopped.load(Ordering::Acquire) {
                let due = (began.elapsed().as_secs_f64() * rate as f64) as u64;
                while sent < due {
                    let topic = (sent % 2) as usize;
                    let partition = ((sent / 2) % PARTITIONS as u64) as i32;
                    let value = format!("{topic}:{partition}:{sent}");
                    let mut record = BaseRecord::to(&topics[topic])
                        .partition(partition)
                        .key("k")
                        .payload(&value);
                    loop {
                        match producer.send(record) {
                            Ok(()) => break,
                            Err((
                                KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull),
                                back,
                            )) => {
                                producer.poll(Duration::from_millis(5));
                                record = back;
                            }
                            Err((e, _)) => return Err(e),
                        }
                    }
                    sent += 1;
                }
                producer.poll(Duration::ZERO);
                std::thread::sleep(Duration::from_millis(2));
            }
            producer.flush(Duration::from_secs(30))?;
            Ok(sent)
        });
        Ok(Feeder { stop, handle })
    }

    fn stop(self) -> Result<u64, Error> {
        self.stop.store(true, Ordering::Release);
        let sent = self.handle.join().map_err(|_| "the producer panicked")??;
        Ok(sent)
    }
}

/// The figures of one run.
#[derive(Debug, Default, Clone)]
struct Run {
    b_first: Duration,
    b_all: Duration,
    a_gap_base: Duration,
    a_gap_join: Duration,
    moved_join: Duration,
    b_close: Duration,
    a_takeover: Duration,
    a_gap_close: Duration,
    moved_close: Duration,
    /// Problems the run saw: co-partitioning, split tasks, states.
    notes: Vec<String>,
}

fn wait_for(
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> Result<bool, Error>,
) -> Result<(), Error> {
    let deadline = Instant::now() + timeout;
    while !done()? {
        if Instant::now() > deadline {
            return Err(format!("timed out after {timeout:?} waiting for {what}").into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Waits until the partitions processed in the trailing window split the
/// 12 input partitions between the instances (B owning some, if `with_b`)
/// and that split has not changed for [`STABLE`]. Returns when it became
/// the split, and the split.
fn wait_stable(
    a: &Instance,
    b: Option<&Instance>,
    all: &BTreeSet<Tp>,
) -> Result<(Instant, BTreeSet<Tp>, BTreeSet<Tp>), Error> {
    let mut current: Option<(Instant, BTreeSet<Tp>, BTreeSet<Tp>)> = None;
    let deadline = Instant::now() + REBALANCE_TIMEOUT;
    loop {
        a.check("A")?;
        if let Some(b) = b {
            b.check("B")?;
        }
        let now = Instant::now();
        let from = now - OWNERSHIP_WINDOW;
        let owned_a = owned(&a.processed.snapshot(), from, now);
        let owned_b = b.map_or_else(BTreeSet::new, |b| owned(&b.processed.snapshot(), from, now));
        let covering = owned_a.is_disjoint(&owned_b)
            && owned_a.union(&owned_b).copied().collect::<BTreeSet<_>>() == *all
            && (b.is_none() || !owned_b.is_empty());
        match &current {
            Some((since, ca, cb)) if covering && *ca == owned_a && *cb == owned_b => {
                if now.duration_since(*since) >= STABLE {
                    return Ok(current.expect("set"));
                }
            }
            _ => current = covering.then_some((now, owned_a, owned_b)),
        }
        if now > deadline {
            return Err("the assignment did not settle".into());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Run `n` (from 0) of `runs`: how much later than the fixed waits B joins
/// and leaves. Membership changes are seen at the next heartbeat (every 3 s
/// classic, 5 s KIP-848), and the fixed waits would put every run at the
/// same heartbeat phase; these offsets spread the runs over [0, 5 s).
fn offsets(n: u32, runs: u32) -> (Duration, Duration) {
    let step = PHASES / runs.max(1);
    (step * (n % runs), step * ((2 * n + 1) % runs))
}

/// The span the runs' offsets spread over.
const PHASES: Duration = Duration::from_secs(5);

fn one_run(
    bootstrap: &str,
    protocol: Protocol,
    rate: u64,
    (join_offset, close_offset): (Duration, Duration),
) -> Result<Run, Error> {
    let topics = [unique_name("rebalance-a"), unique_name("rebalance-b")];
    let output = unique_name("rebalance-out");
    for topic in topics.iter().chain([&output]) {
        create_topic(bootstrap, topic, PARTITIONS, 1)?;
    }
    let all: BTreeSet<Tp> = (0..2)
        .flat_map(|t| (0..PARTITIONS).map(move |p| (t, p)))
        .collect();
    let application_id = unique_name(&format!("rebalance-{}", protocol.name()));
    let feeder = Feeder::start(bootstrap, &topics, rate)?;
    let mut run = Run::default();
    let result = (|| -> Result<(), Error> {
        let a = Instance::start(bootstrap, &application_id, &topics, &output, protocol)?;
        wait_for("A's first record", REBALANCE_TIMEOUT, || {
            a.check("A")?;
            Ok(a.processed
                .first_after(Instant::now() - Duration::from_secs(3600))
                .is_some())
        })?;
        wait_stable(&a, None, &all)?;
        let warm_from = Instant::now();
        std::thread::sleep(WARM + join_offset);

        // B joins.
        let b_start = Instant::now();
        run.a_gap_base = longest_gap(&a.processed.snapshot(), warm_from, b_start);
        let mut b = Instance::start(bootstrap, &application_id, &topics, &output, protocol)?;
        wait_for("B's first record", REBALANCE_TIMEOUT, || {
            a.check("A")?;
            b.check("B")?;
            Ok(b.processed.first_after(b_start).is_some())
        })?;
        let (stable_since, owned_a, owned_b) = wait_stable(&a, Some(&b), &all)?;
        let joined = Instant::now();
        let (events_a, events_b) = (a.processed.snapshot(), b.processed.snapshot());
        run.b_first = b
            .processed
            .first_after(b_start)
            .expect("seen")
            .duration_since(b_start);
        run.b_all = owned_b
            .iter()
            .filter_map(|tp| first_of(&events_b, *tp, b_start))
            .max()
            .map_or(Duration::ZERO, |t| t.duration_since(b_start));
        run.a_gap_join = longest_gap(&events_a, b_start, joined);
        run.moved_join = handover(&events_a, &events_b, &owned_b, b_start);
        for (name, owned) in [("A", &owned_a), ("B", &owned_b)] {
            let bad = not_co_partitioned(owned);
            if !bad.is_empty() {
                run.notes.push(format!(
                    "after B joined, {name} holds one topic only of partitions {bad:?}"
                ));
            }
        }
        let moved: BTreeSet<i32> = owned_b.iter().map(|(_, p)| *p).collect();
        let split = split_tasks(&events_a, &events_b, &moved, b_start);
        if !split.is_empty() {
            run.notes.push(format!(
                "tasks {split:?} were processed by B before A let go of them"
            ));
        }
        for (name, instance) in [("A", &a), ("B", &b)] {
            if instance.state() != State::Running {
                run.notes.push(format!(
                    "after B joined, {name} is {:?} (processing, but the state never went back to RUNNING)",
                    instance.state()
                ));
            }
        }
        let _ = stable_since;

        // B leaves.
        std::thread::sleep(close_offset);
        let close_start = Instant::now();
        if !b.app.close(Duration::from_secs(60)) {
            run.notes.push("B did not close within 60 s".into());
        }
        run.b_close = close_start.elapsed();
        let mut taken_over = None;
        wait_for("A to take B's partitions over", REBALANCE_TIMEOUT, || {
            a.check("A")?;
            let events = a.processed.snapshot();
            let times: Option<Vec<Instant>> = owned_b
                .iter()
                .map(|tp| first_of(&events, *tp, close_start))
                .collect();
            taken_over = times.and_then(|t| t.into_iter().max());
            Ok(taken_over.is_some())
        })?;
        let taken_over = taken_over.expect("set");
        run.a_takeover = taken_over.duration_since(close_start);
        let (_, owned_a_after, _) = wait_stable(&a, None, &all)?;
        let events_a = a.processed.snapshot();
        run.a_gap_close = longest_gap(&events_a, close_start, taken_over + Duration::from_secs(2));
        run.moved_close = handover(
            &b.processed.snapshot(),
            &events_a,
            &owned_b,
            close_start - Duration::from_secs(1),
        );
        if owned_a_after != all {
            run.notes
                .push("after B left, A does not hold every partition".into());
        }
        let split = split_tasks(&b.processed.snapshot(), &events_a, &moved, close_start);
        if !split.is_empty() {
            run.notes.push(format!(
                "tasks {split:?} were processed by A before B let go of them"
            ));
        }
        if a.state() != State::Running {
            run.notes
                .push(format!("after B left, A is {:?}", a.state()));
        }
        let mut a = a;
        a.app.close(Duration::from_secs(60));
        Ok(())
    })();
    let sent = feeder.stop()?;
    result?;
    if sent == 0 {
        return Err("the producer sent nothing".into());
    }
    Ok(run)
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn summary(label: &str, mut values: Vec<Duration>) {
    values.sort();
    let (Some(min), Some(max)) = (values.first(), values.last()) else {
        return;
    };
    let median = values[values.len() / 2];
    println!(
        "  {label:<12} min {:>9}  median {:>9}  max {:>9}",
        ms(*min),
        ms(median),
        ms(*max)
    );
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut protocols = Vec::new();
    let mut runs: u32 = 5;
    let mut rate = 2000;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "classic" => protocols.push(Protocol::Classic),
            "consumer" => protocols.push(Protocol::Consumer),
            "--runs" => {
                i += 1;
                runs = args.get(i).ok_or("--runs needs a number")?.parse()?;
            }
            "--rate" => {
                i += 1;
                rate = args.get(i).ok_or("--rate needs records/s")?.parse()?;
            }
            // cargo bench passes --bench; other flags are not ours.
            _ => {}
        }
        i += 1;
    }
    if protocols.is_empty() {
        protocols = vec![Protocol::Classic, Protocol::Consumer];
    }
    let Ok(bootstrap) = std::env::var(BOOTSTRAP_ENV) else {
        println!("rebalance_protocols: {BOOTSTRAP_ENV} not set; start a broker with cargo xtask kafka start");
        return Ok(());
    };
    println!(
        "2 topics x {PARTITIONS} partitions, {rate} records/s, 1 thread per instance, broker {bootstrap}"
    );
    let mut results: BTreeMap<&str, Vec<Run>> = BTreeMap::new();
    for protocol in &protocols {
        for n in 1..=runs {
            match one_run(&bootstrap, *protocol, rate, offsets(n - 1, runs)) {
                Ok(run) => {
                    println!(
                        "{} run {n}: B first {}, B all {}, A gap base {}, A gap join {}, moved join {}, B close {}, A takeover {}, A gap close {}, moved close {}{}",
                        protocol.name(),
                        ms(run.b_first),
                        ms(run.b_all),
                        ms(run.a_gap_base),
                        ms(run.a_gap_join),
                        ms(run.moved_join),
                        ms(run.b_close),
                        ms(run.a_takeover),
                        ms(run.a_gap_close),
                        ms(run.moved_close),
                        if run.notes.is_empty() {
                            "; co-partitioned".to_string()
                        } else {
                            format!("; {}", run.notes.join("; "))
                        }
                    );
                    results.entry(protocol.name()).or_default().push(run);
                }
                Err(e) => {
                    println!("{} run {n}: failed: {e}", protocol.name());
                    break;
                }
            }
        }
    }
    for (protocol, runs) in &results {
        println!("{protocol} ({} runs):", runs.len());
        let column = |f: fn(&Run) -> Duration| runs.iter().map(f).collect::<Vec<_>>();
        summary("B first", column(|r| r.b_first));
        summary("B all", column(|r| r.b_all));
        summary("A gap base", column(|r| r.a_gap_base));
        summary("A gap join", column(|r| r.a_gap_join));
        summary("moved join", column(|r| r.moved_join));
        summary("B close", column(|r| r.b_close));
        summary("A takeover", column(|r| r.a_takeover));
        summary("A gap close", column(|r| r.a_gap_close));
        summary("moved close", column(|r| r.moved_close));
    }
    Ok(())
}
