//! Exactly-once after a SIGKILL, on a real broker (`cargo xtask kafka
//! start`, found through KSTREAMS_BOOTSTRAP; skipped without it).
//!
//! A restarted instance must fence its dead predecessor's producers at
//! once: its transactional ids come from the process id kept in the state
//! directory, so `init_transactions` aborts the transaction the dead one
//! left open. Without that, read_committed consumers of the output stall
//! until the broker times the transaction out.

use crate::common::{self, Input};

use std::collections::BTreeMap;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::FreshRun;
use kstreams_dsl::StreamsBuilder;
use kstreams_embedded::rdkafka::Message;
use kstreams_embedded::test_broker;
use kstreams_runtime::kafka::{KafkaStreams, ProcessingGuarantee, StreamsConfig};

/// Set in a child process: run the exactly-once app until killed.
const CHILD_ENV: &str = "KSTREAMS_TEST_EOS_RESTART_CHILD";

fn pass_through_app(spec: &str) -> KafkaStreams {
    let common::ChildRun {
        bootstrap,
        app_id,
        input,
        output,
        state_dir,
    } = common::ChildRun::parse(spec, CHILD_ENV);
    let builder = StreamsBuilder::new();
    builder.stream::<String, String>(input).to(output);
    let config = StreamsConfig::new(app_id, bootstrap)
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .commit_interval(Duration::from_millis(100))
        .state_dir(state_dir)
        // Static membership: the restarted member takes its predecessor's
        // place in the group at once instead of waiting out its session,
        // so what this test sees is the transactions alone.
        .client_config("consumer.group.instance.id", &format!("{app_id}-member"))
        .client_config("consumer.session.timeout.ms", "30000");
    KafkaStreams::new(builder.build().unwrap(), config)
}

/// The child side: runs the app until the parent kills it.
#[test]
fn eos_restart_child_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return; // only meaningful when started by the restart test
    };
    common::run_until_killed(pass_through_app(&spec));
}

fn spawn_child(spec: &str) -> Child {
    common::spawn_test_child(module_path!(), "eos_restart_child_process", CHILD_ENV, spec)
}

/// What a read_committed consumer of the output saw: each value with when
/// it arrived.
type Seen = Arc<Mutex<Vec<(String, Instant)>>>;

fn read_committed_in_background(
    bootstrap: &str,
    topic: &str,
    stop: Arc<AtomicBool>,
) -> (Seen, std::thread::JoinHandle<()>) {
    let consumer = common::read_committed_consumer(bootstrap, topic);
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let handle = std::thread::spawn(move || {
        while !stop.load(Ordering::Acquire) {
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(50)) {
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string();
                sink.lock().unwrap().push((value, Instant::now()));
            }
        }
    });
    (seen, handle)
}

/// Produces `total` records at about `per_second`, keys `k0`..`k9`,
/// values their sequence number.
fn produce_steadily(
    bootstrap: &str,
    topic: &str,
    total: usize,
    per_second: u64,
) -> std::thread::JoinHandle<()> {
    let inputs = (0..total).map(|i| Input::new(format!("k{}", i % 10), i.to_string()));
    common::produce_paced(bootstrap, topic, inputs.collect(), per_second)
}

#[test]
fn a_restarted_exactly_once_instance_fences_its_dead_predecessor_at_once() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let run = FreshRun::new(&bootstrap, "eos-restart");
    let spec = run.child_spec(&bootstrap);
    let FreshRun {
        input,
        output,
        app_id: _,
        state_dir,
    } = run;
    let total = 12_000;
    let per_second = 1_000;

    let stop_reading = Arc::new(AtomicBool::new(false));
    let (seen, reader) = read_committed_in_background(&bootstrap, &output, stop_reading.clone());
    let producing = produce_steadily(&bootstrap, &input, total, per_second);

    let mut first = spawn_child(&spec);
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.lock().unwrap().len() < 2_000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        seen.lock().unwrap().len() >= 2_000,
        "the first instance made progress before the kill"
    );
    // Input keeps arriving: the instance dies with a transaction open.
    first.kill().unwrap();
    first.wait().unwrap();
    // Whatever the dead instance committed reaches the reader meanwhile, so
    // every record read after the restart comes from the new instance.
    std::thread::sleep(Duration::from_secs(1));
    let seen_before_restart = seen.lock().unwrap().len();

    let restarted_at = Instant::now();
    let mut second = spawn_child(&spec);
    let deadline = restarted_at + Duration::from_secs(90);
    let first_new = loop {
        if let Some(&(_, at)) = seen.lock().unwrap().get(seen_before_restart) {
            break Some(at);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stall = first_new.map(|at| at.duration_since(restarted_at));
    eprintln!("read_committed stall after the restart: {stall:?}");

    producing.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.lock().unwrap().len() < total && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Anything arriving shortly after would be a duplicate: wait for it.
    std::thread::sleep(Duration::from_secs(2));
    stop_reading.store(true, Ordering::Release);
    reader.join().unwrap();
    second.kill().unwrap();
    second.wait().unwrap();
    let _ = std::fs::remove_dir_all(&state_dir);

    let stall = stall.expect("the restarted instance produced nothing within 90 s");
    assert!(
        stall < Duration::from_secs(10),
        "read_committed consumers stalled {stall:?} after the restart: the dead \
         instance's transaction was not fenced"
    );
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for (value, _) in seen.lock().unwrap().iter() {
        *counts.entry(value.parse().unwrap()).or_default() += 1;
    }
    let duplicated: Vec<_> = counts.iter().filter(|(_, &n)| n > 1).collect();
    let missing: Vec<_> = (0..total).filter(|i| !counts.contains_key(i)).collect();
    assert!(duplicated.is_empty(), "duplicated: {duplicated:?}");
    assert!(
        missing.is_empty(),
        "{} missing, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
}
