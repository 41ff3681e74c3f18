//! Failover with and without a standby replica, on a real broker under
//! `group.protocol=streams`: how long the tasks of an instance killed with
//! SIGKILL go unprocessed before the surviving instance runs them, when it
//! has their standby copies (`num.standby.replicas=1`) and when it must
//! restore their stores from the changelogs.
//!
//! ```text
//! eval "$(cargo xtask kafka start)"
//! cargo run --release -p kstreams-benches --example standby_failover -- [--keys N (1000000)] [--standby 0|1] [--session-ms MS (6000)]
//! ```
//!
//! Each run counts N distinct keys (RocksDB store, so N changelog records
//! over 4 partitions) with two instances of one stream thread each: A in
//! this process, B a child process. Once both have processed everything
//! (and A's standbys have applied B's changelog records), a producer writes
//! 200 records/s over every partition, B is killed with SIGKILL, and the
//! bench waits until A has processed a new record of each partition B had.
//!
//! Reported: `detected`, from the SIGKILL until A starts creating B's tasks
//! (the broker's session timeout: the run sets the group's
//! `streams.session.timeout.ms`, which the xtask broker lets go down to 6
//! s); `restored` records and `restore` seconds of those tasks' stores;
//! `resumed`, from the SIGKILL until A has processed a record of each of
//! B's partitions; `after detection`, the same from the moment A started
//! creating the tasks: what a standby replica saves.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kstreams::embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams::embedded::rdkafka::ClientConfig;
use kstreams::embedded::{create_topic, unique_name, BOOTSTRAP_ENV};
use kstreams::prelude::*;
use kstreams_benches::send_waiting;

const PARTITIONS: i32 = 4;
/// Set in the child: the run's settings, tab-separated.
const CHILD_ENV: &str = "KSTREAMS_FAILOVER_CHILD";
const TRICKLE_PER_SECOND: u64 = 200;

type Error = Box<dyn std::error::Error>;

struct Settings {
    bootstrap: String,
    input: String,
    app_id: String,
    standby: u32,
    session_ms: u64,
}

impl Settings {
    fn encode(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{}",
            self.bootstrap, self.input, self.app_id, self.standby, self.session_ms
        )
    }

    fn decode(text: &str) -> Option<Settings> {
        let mut parts = text.split('\t');
        Some(Settings {
            bootstrap: parts.next()?.to_string(),
            input: parts.next()?.to_string(),
            app_id: parts.next()?.to_string(),
            standby: parts.next()?.parse().ok()?,
            session_ms: parts.next()?.parse().ok()?,
        })
    }
}

/// Per partition, when this instance last processed a record of it; and
/// how many records it processed.
#[derive(Default)]
struct Progress {
    last: Mutex<BTreeMap<i32, Instant>>,
    processed: AtomicU64,
}

/// When the instance began creating tasks and how much it restored.
#[derive(Default)]
struct Restores {
    started: Mutex<Vec<Instant>>,
    ended: Mutex<Vec<Instant>>,
    records: AtomicU64,
}

impl StateRestoreListener for Restores {
    fn on_restore_start(&self, _: &TopicPartition, _: &str, _: i64, _: i64) {
        self.started.lock().unwrap().push(Instant::now());
    }
    fn on_batch_restored(&self, _: &TopicPartition, _: &str, _: i64, n: u64) {
        self.records.fetch_add(n, Ordering::SeqCst);
    }
    fn on_restore_end(&self, _: &TopicPartition, _: &str, _: u64) {
        self.ended.lock().unwrap().push(Instant::now());
    }
}

fn instance(
    settings: &Settings,
    dir: &std::path::Path,
    progress: Arc<Progress>,
) -> Result<KafkaStreams, Error> {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(&settings.input)
        .peek(move |key, _| {
            // Trickle keys name their partition: `trickle-{i}` went to
            // partition i % PARTITIONS.
            if let Some(i) = key
                .strip_prefix("trickle-")
                .and_then(|i| i.parse::<u64>().ok())
            {
                let partition = (i % PARTITIONS as u64) as i32;
                progress
                    .last
                    .lock()
                    .unwrap()
                    .insert(partition, Instant::now());
            }
            progress.processed.fetch_add(1, Ordering::Relaxed);
        })
        .group_by_key()
        .count_with(None, Materialized::as_("counts"));
    // Commits every second: what B processed is committed before it dies,
    // so A's time after the takeover is the takeover, not reprocessing.
    let mut config = StreamsConfig::new(&settings.app_id, &settings.bootstrap)
        .state_dir(dir)
        .commit_interval(Duration::from_secs(1));
    config.set("group.protocol", "streams")?;
    config.set("num.standby.replicas", &settings.standby.to_string())?;
    Ok(KafkaStreams::new(builder.build()?, config))
}

/// The child: instance B, which prints how many records it processed
/// until it is killed.
fn run_child(settings: Settings) -> Result<(), Error> {
    let dir = std::env::temp_dir().join(unique_name("kstreams-failover-b"));
    let progress = Arc::new(Progress::default());
    let mut app = instance(&settings, &dir, progress.clone())?;
    app.start()?;
    loop {
        println!("processed {}", progress.processed.load(Ordering::Relaxed));
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn spawn_child(settings: &Settings) -> Result<(Child, Arc<AtomicU64>), Error> {
    let mut child = Command::new(std::env::current_exe()?)
        .env(CHILD_ENV, settings.encode())
        .stdout(Stdio::piped())
        .spawn()?;
    let processed = Arc::new(AtomicU64::new(0));
    let seen = processed.clone();
    let stdout = child.stdout.take().ok_or("no stdout")?;
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(n) = line.strip_prefix("processed ").and_then(|n| n.parse().ok()) {
                seen.store(n, Ordering::SeqCst);
            }
        }
    });
    Ok((child, processed))
}

fn producer(bootstrap: &str) -> Result<BaseProducer, Error> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "20")
        .set("partitioner", "murmur2_random")
        .create()?)
}

fn wait_for(what: &str, timeout: Duration, done: impl Fn() -> bool) -> Result<(), Error> {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}").into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

fn run(bootstrap: &str, keys: u64, standby: u32, session_ms: u64) -> Result<(), Error> {
    let settings = Settings {
        bootstrap: bootstrap.to_string(),
        input: unique_name("failover-in"),
        app_id: unique_name("failover"),
        standby,
        session_ms,
    };
    create_topic(bootstrap, &settings.input, PARTITIONS, 1)?;
    // The group's session timeout, before any member joins.
    let admin = kstreams_group::Admin::new(kstreams_group::ConnectionConfig::new(bootstrap));
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(admin.set_group_configs(
            &settings.app_id,
            &[("streams.session.timeout.ms", &session_ms.to_string())],
        ))?;
    let load = producer(bootstrap)?;
    let started = Instant::now();
    for i in 0..keys {
        let key = format!("key-{i:09}");
        send_waiting(
            &load,
            BaseRecord::to(&settings.input)
                .key(key.as_bytes())
                .payload(&b"x"[..]),
        )?;
        if i % 10_000 == 0 {
            load.poll(Duration::ZERO);
        }
    }
    load.flush(Duration::from_secs(60))?;
    eprintln!(
        "standby={standby}: {keys} keys produced in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let (mut child, child_processed) = spawn_child(&settings)?;
    let dir = std::env::temp_dir().join(unique_name("kstreams-failover-a"));
    let progress = Arc::new(Progress::default());
    let restores = Arc::new(Restores::default());
    let mut app = instance(&settings, &dir, progress.clone())?;
    app.set_global_state_restore_listener(restores.clone())?;
    app.start()?;
    let result = (|| -> Result<(), Error> {
        wait_for(
            "both instances to process the keys",
            Duration::from_secs(600),
            || {
                progress.processed.load(Ordering::SeqCst) + child_processed.load(Ordering::SeqCst)
                    >= keys
            },
        )?;
        // The standbys have caught up once A's updates stop growing.
        let updates = || {
            let text = app.metrics().gather_text();
            text.lines()
                .filter(|l| l.starts_with("kstreams_thread_standby_updates_total"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>() as u64
        };
        let mut last = (updates(), Instant::now());
        while last.1.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(200));
            let now = updates();
            if now != last.0 {
                last = (now, Instant::now());
            }
        }
        eprintln!("standby={standby}: A's standbys applied {} records", last.0);
        let a_partitions: BTreeSet<i32> = app
            .metadata()
            .threads
            .iter()
            .flat_map(|t| &t.active_tasks)
            .map(|t| t.partition)
            .collect();
        let b_partitions: BTreeSet<i32> = (0..PARTITIONS)
            .filter(|p| !a_partitions.contains(p))
            .collect();
        if b_partitions.is_empty() {
            return Err("B runs no task".into());
        }

        // A trickle over every partition, then B dies.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let trickle = {
            let (stop, settings_input, bootstrap) =
                (stop.clone(), settings.input.clone(), bootstrap.to_string());
            std::thread::spawn(move || -> Result<(), String> {
                let p = producer(&bootstrap).map_err(|e| e.to_string())?;
                let mut i = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    for partition in 0..PARTITIONS {
                        let key = format!("trickle-{i}");
                        let record = BaseRecord::to(&settings_input)
                            .key(key.as_bytes())
                            .payload(&b"y"[..])
                            .partition(partition);
                        send_waiting(&p, record).map_err(|e| e.to_string())?;
                        i += 1;
                    }
                    p.poll(Duration::ZERO);
                    std::thread::sleep(Duration::from_millis(
                        1000 * PARTITIONS as u64 / TRICKLE_PER_SECOND,
                    ));
                }
                p.flush(Duration::from_secs(10)).map_err(|e| e.to_string())
            })
        };
        std::thread::sleep(Duration::from_secs(2));
        let restores_before = restores.started.lock().unwrap().len();
        let restored_before = restores.records.load(Ordering::SeqCst);
        let killed = Instant::now();
        // Child::kill is SIGKILL on Unix: no clean close, no leave.
        child.kill()?;
        let resumed = |p: &i32| {
            progress
                .last
                .lock()
                .unwrap()
                .get(p)
                .is_some_and(|t| *t > killed)
        };
        // Detected: A starts creating B's tasks (its thread says it is
        // restoring, or already runs them).
        let mut detected_at = None;
        let deadline = killed + Duration::from_secs(600);
        while !b_partitions.iter().all(resumed) {
            if detected_at.is_none() {
                let metadata = app.metadata();
                let taking = metadata.threads.iter().any(|t| {
                    t.restoring
                        || t.active_tasks
                            .iter()
                            .any(|task| b_partitions.contains(&task.partition))
                });
                if taking {
                    detected_at = Some(Instant::now());
                }
            }
            if Instant::now() > deadline {
                return Err("A did not take B's partitions over".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let resumed_after = killed.elapsed();
        stop.store(true, Ordering::SeqCst);
        let _ = trickle.join();
        let started = restores.started.lock().unwrap()[restores_before..].to_vec();
        let ended = restores.ended.lock().unwrap().clone();
        let detected = detected_at.map(|t| t.duration_since(killed));
        let restore_span = match (started.first(), ended.last()) {
            (Some(s), Some(e)) if e > s => e.duration_since(*s),
            _ => Duration::ZERO,
        };
        let restored = restores.records.load(Ordering::SeqCst) - restored_before;
        let after_detection = detected.map(|d| resumed_after.saturating_sub(d));
        println!(
            "| {standby} | {keys} | {} | {:.2} | {restored} | {:.2} | {:.2} | {} |",
            b_partitions.len(),
            detected.map_or(f64::NAN, |d| d.as_secs_f64()),
            restore_span.as_secs_f64(),
            resumed_after.as_secs_f64(),
            after_detection.map_or("-".to_string(), |d| format!("{:.2}", d.as_secs_f64())),
        );
        Ok(())
    })();
    let _ = child.kill();
    let _ = child.wait();
    app.close(Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn main() -> Result<(), Error> {
    let _ = env_logger::builder().try_init();
    if let Ok(child) = std::env::var(CHILD_ENV) {
        let settings = Settings::decode(&child).ok_or("bad child settings")?;
        return run_child(settings);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let option = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let keys: u64 = option("--keys").map_or(Ok(1_000_000), |v| v.parse())?;
    let session_ms: u64 = option("--session-ms").map_or(Ok(6_000), |v| v.parse())?;
    let modes: Vec<u32> = match option("--standby") {
        Some(n) => vec![n.parse()?],
        None => vec![1, 0],
    };
    let Ok(bootstrap) = std::env::var(BOOTSTRAP_ENV) else {
        eprintln!("standby_failover needs a broker: eval \"$(cargo xtask kafka start)\" first");
        return Ok(());
    };
    println!("| standby replicas | keys | B's partitions | detected s | restored records | restore s | resumed s (from SIGKILL) | s after detection |");
    println!("|---|---|---|---|---|---|---|---|");
    for standby in modes {
        run(&bootstrap, keys, standby, session_ms)?;
    }
    Ok(())
}
