//! `AsyncKafkaStreams` on librdkafka's in-process cluster, under a
//! current-thread tokio runtime: start, RUNNING through the state watch,
//! awaited queries and close, with proof that none of them holds the
//! runtime's one thread (a ticking task must advance while each is in
//! progress, or the step waiting for it fails); the state transitions and
//! uncaught exceptions as streams; a close whose future is dropped.

use crate::common::{self, Input};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kstreams_dsl::{Materialized, StreamsBuilder};
use kstreams_embedded::EmbeddedKafka;
use kstreams_runtime::kafka::{
    AsyncKafkaStreams, KafkaStreams, QueryableStoreTypes, State, StoreQueryParameters,
    StreamThreadExceptionResponse, StreamsConfig,
};

const PARTITIONS: i32 = 2;
const KEYS: usize = 5;
const RECORDS: usize = 100;
/// The value that makes the gate processor wait (see `Gate`).
const GATE: &str = "gate";

/// A task of the test's runtime that counts its turns: it advances only
/// while the runtime's thread is free.
fn ticker() -> Arc<AtomicUsize> {
    let ticks = Arc::new(AtomicUsize::new(0));
    let counting = ticks.clone();
    tokio::spawn(async move {
        loop {
            counting.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    ticks
}

/// Called on a kstreams thread in the middle of a step: waits until the
/// ticker has moved on, which it can only if the step is not blocking the
/// runtime; records a failure after 20 s instead of hanging.
#[derive(Clone)]
struct Proof {
    ticks: Arc<AtomicUsize>,
    /// Steps during which the ticker stood still.
    stalled: Arc<Mutex<Vec<String>>>,
    /// Steps during which it moved.
    moved: Arc<Mutex<Vec<String>>>,
}

impl Proof {
    fn new(ticks: Arc<AtomicUsize>) -> Self {
        Self {
            ticks,
            stalled: Arc::default(),
            moved: Arc::default(),
        }
    }

    fn ticker_moves_during(&self, step: &str) {
        let from = self.ticks.load(Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.ticks.load(Ordering::Relaxed) < from + 3 {
            if Instant::now() > deadline {
                self.stalled.lock().unwrap().push(step.to_string());
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.moved.lock().unwrap().push(step.to_string());
    }
}

/// Holds the stream thread on the record `GATE` until `open` is set, then
/// proves the runtime free while a query waits for that thread.
#[derive(Clone, Default)]
struct Gate {
    reached: Arc<AtomicBool>,
    open: Arc<AtomicBool>,
}

fn counting_app(kafka: &EmbeddedKafka, name: &str, gate: Gate, proof: Proof) -> KafkaStreams {
    let _ = env_logger::builder().is_test(true).try_init();
    let input = format!("{name}-input");
    kafka.create_topic(&input, PARTITIONS, 1).unwrap();
    kafka
        .create_topic(&format!("{name}-counts-changelog"), PARTITIONS, 1)
        .unwrap();
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(&input)
        .peek(move |_, value| {
            if value == GATE {
                gate.reached.store(true, Ordering::Release);
                while !gate.open.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                proof.ticker_moves_during("query");
            }
        })
        .group_by_key()
        .count_with(None, Materialized::as_("counts"));
    let dir = std::env::temp_dir().join(format!(
        "kstreams-async-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let config = StreamsConfig::new(name, kafka.bootstrap_servers())
        .commit_interval(Duration::from_millis(100))
        .state_dir(&dir);
    KafkaStreams::new(builder.build().unwrap(), config)
}

fn produce(kafka: &EmbeddedKafka, name: &str, values: impl Iterator<Item = (String, String)>) {
    let inputs = values.map(|(k, v)| {
        let partition = k[1..].parse::<i32>().unwrap() % PARTITIONS;
        Input::new(k, v).in_partition(partition)
    });
    common::produce(&kafka.bootstrap_servers(), &format!("{name}-input"), inputs);
}

fn key(i: usize) -> String {
    format!("k{}", i % KEYS)
}

#[tokio::test(flavor = "current_thread")]
async fn start_queries_and_close_are_awaited_without_holding_the_runtime_thread() {
    const APP: &str = "async-face";
    let kafka = EmbeddedKafka::start(1).unwrap();
    let ticks = ticker();
    let proof = Proof::new(ticks.clone());
    let gate = Gate::default();
    let app = counting_app(&kafka, APP, gate.clone(), proof.clone());
    // The listener runs inside start (CREATED -> REBALANCING) and close
    // (-> PENDING_SHUTDOWN), on the threads that run them.
    let listening = proof.clone();
    app.set_state_listener(move |new, old| match (old, new) {
        (State::Created, State::Rebalancing) => listening.ticker_moves_during("start"),
        (_, State::PendingShutdown) => listening.ticker_moves_during("close"),
        _ => {}
    });
    let app = AsyncKafkaStreams::new(app);
    let mut transitions = app.state_transitions();
    let mut state = app.state_changes();
    assert_eq!(*state.borrow(), State::Created);
    produce(&kafka, APP, (0..RECORDS).map(|i| (key(i), format!("v{i}"))));

    app.start().await.unwrap();
    let running = tokio::time::timeout(
        Duration::from_secs(60),
        state.wait_for(|s| *s == State::Running),
    )
    .await
    .map(|reached| reached.map(|s| *s));
    assert!(
        matches!(running, Ok(Ok(State::Running))),
        "not RUNNING: {:?}",
        app.state()
    );

    let counts = app
        .store(StoreQueryParameters::from_name_and_type(
            "counts",
            QueryableStoreTypes::key_value_store::<String, i64>(),
        ))
        .unwrap();
    let mut want = BTreeMap::new();
    for i in 0..RECORDS {
        *want.entry(key(i)).or_insert(0i64) += 1;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let all: Option<BTreeMap<String, i64>> = counts
            .all_async()
            .await
            .ok()
            .map(|a| a.into_iter().collect());
        if all.as_ref() == Some(&want) {
            break;
        }
        assert!(Instant::now() < deadline, "counts: {all:?}, want {want:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (k, n) in &want {
        assert_eq!(counts.get_async(k).await.unwrap(), Some(*n), "{k}");
    }
    assert_eq!(counts.get_async(&"absent".to_string()).await.unwrap(), None);
    let ranged = counts
        .range_async(Some(&"k1".to_string()), Some(&"k2".to_string()))
        .await
        .unwrap();
    assert_eq!(
        ranged.into_iter().collect::<BTreeMap<_, _>>(),
        BTreeMap::from([
            ("k1".to_string(), want["k1"]),
            ("k2".to_string(), want["k2"])
        ])
    );
    // One partition's store only: the keys of that partition.
    let one = app
        .store(
            StoreQueryParameters::from_name_and_type(
                "counts",
                QueryableStoreTypes::key_value_store::<String, i64>(),
            )
            .with_partition(1),
        )
        .unwrap();
    let mut odd: Vec<String> = one
        .all_async()
        .await
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    odd.sort();
    assert_eq!(odd, ["k1", "k3"]);

    // A query that the stream thread answers only after the ticker moved:
    // it is held at the gate record until the query is out.
    produce(&kafka, APP, std::iter::once((key(0), GATE.to_string())));
    while !gate.reached.load(Ordering::Acquire) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    gate.open.store(true, Ordering::Release);
    let during_gate = counts.get_async(&key(0)).await.unwrap();
    assert!(during_gate.is_some());

    // Blocking calls without a twin run on a kstreams thread too.
    let with_app = proof.clone();
    let threads = app
        .with_app(move |app| {
            with_app.ticker_moves_during("with_app");
            app.metadata().threads.len()
        })
        .await
        .unwrap();
    assert_eq!(threads, 1);

    assert!(app.close(Duration::from_secs(30)).await);
    assert_eq!(app.state(), State::NotRunning);
    assert_eq!(*state.borrow_and_update(), State::NotRunning);
    let mut seen = Vec::new();
    while let Some(transition) = transitions.next().await {
        seen.push(transition);
    }
    // The stream ended after NOT_RUNNING, with every transition in order.
    assert_eq!(seen.first(), Some(&(State::Rebalancing, State::Created)));
    assert_eq!(
        seen.last(),
        Some(&(State::NotRunning, State::PendingShutdown))
    );
    assert!(seen.contains(&(State::Running, State::Rebalancing)));
    assert!(
        seen.windows(2).all(|pair| pair[0].0 == pair[1].1),
        "{seen:?}"
    );

    assert_eq!(*proof.stalled.lock().unwrap(), Vec::<String>::new());
    let mut moved = proof.moved.lock().unwrap().clone();
    moved.sort();
    assert_eq!(moved, ["close", "query", "start", "with_app"]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_failed_thread_is_an_item_of_the_uncaught_exceptions_stream() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic("async-failing-input", 1, 1).unwrap();
    kafka.create_topic("async-failing-output", 1, 1).unwrap();
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>("async-failing-input")
        .peek(|_, v| assert_ne!(v, "poison", "a poison record"))
        .to("async-failing-output");
    let config = StreamsConfig::new("async-failing", kafka.bootstrap_servers());
    let app = KafkaStreams::new(builder.build().unwrap(), config);
    app.set_uncaught_exception_handler(|_| StreamThreadExceptionResponse::ShutdownClient);
    let app = AsyncKafkaStreams::new(app);
    let mut failures = app.uncaught_exceptions();
    let mut transitions = app.state_transitions();
    common::produce(
        &kafka.bootstrap_servers(),
        "async-failing-input",
        [Input::new("k", "poison")],
    );
    app.start().await.unwrap();

    let failure = tokio::time::timeout(Duration::from_secs(60), failures.next())
        .await
        .expect("no failure within 60 s")
        .expect("the stream ended without an item");
    assert!(failure.error.contains("a poison record"), "{failure:?}");
    assert!(
        failure.thread.contains("StreamThread-1"),
        "{}",
        failure.thread
    );
    assert_eq!(
        failure.response,
        StreamThreadExceptionResponse::ShutdownClient
    );
    // The instance goes to ERROR by itself, and both streams end.
    let mut last = None;
    while let Some(transition) = transitions.next().await {
        last = Some(transition);
    }
    assert_eq!(last, Some((State::Error, State::PendingError)));
    assert!(failures.next().await.is_none());
    assert_eq!(app.errors().len(), 1);
    assert!(app.close(Duration::from_secs(30)).await);
    assert_eq!(app.state(), State::Error);
}

#[tokio::test(flavor = "current_thread")]
async fn a_close_whose_future_is_dropped_finishes_and_a_later_close_waits_for_it() {
    const APP: &str = "async-cancel";
    let kafka = EmbeddedKafka::start(1).unwrap();
    let ticks = ticker();
    let app = counting_app(&kafka, APP, Gate::default(), Proof::new(ticks));
    let app = AsyncKafkaStreams::new(app);
    app.start().await.unwrap();
    let mut state = app.state_changes();
    tokio::time::timeout(
        Duration::from_secs(60),
        state.wait_for(|s| *s == State::Running),
    )
    .await
    .unwrap()
    .unwrap();

    // Polled once (the closing thread starts), then dropped.
    let abandoned = tokio::time::timeout(Duration::ZERO, app.close(Duration::from_secs(30))).await;
    assert!(abandoned.is_err(), "a close does not finish at once");
    // The abandoned close goes on by itself...
    tokio::time::timeout(
        Duration::from_secs(60),
        state.wait_for(|s| *s == State::NotRunning),
    )
    .await
    .unwrap()
    .unwrap();
    // ...and another one finds it done.
    assert!(app.close(Duration::from_secs(30)).await);
    assert_eq!(app.state(), State::NotRunning);
    let queried = app.store(StoreQueryParameters::from_name_and_type(
        "counts",
        QueryableStoreTypes::key_value_store::<String, i64>(),
    ));
    assert!(queried.is_err());
}
