//! The application the scenarios kill: a pass-through or a count, under the
//! guarantee and cache size it is given, running until its stdin closes (a
//! clean close, checkpoints written) or it is killed. Meanwhile a line
//! `query\tKEYS\tANSWERS` on its stdin makes it answer
//! `query_metadata_for_key` for every key of the file KEYS into the file
//! ANSWERS ([`crate::queries`]).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use kstreams::prelude::*;
use kstreams::runtime::kafka::{StandbyUpdateListener, SuspendReason};

use crate::queries::{self, KeyAnswer, Local};

/// What the application computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Input to output unchanged (String keys and values).
    PassThrough,
    /// Records counted per key, the count table streamed out (i64).
    Count,
    /// i64 values incremented by one: a value that is not 8 bytes fails to
    /// deserialize and goes to the dead-letter queue.
    Increment,
    /// The pass-through to the output topic and the count to
    /// [`counts_topic`] of it, from one source: one run checks both.
    Both,
}

/// Where [`Mode::Both`] writes its counts.
pub(crate) fn counts_topic(output: &str) -> String {
    format!("{output}-counts")
}

impl Mode {
    pub(crate) fn parse(name: &str) -> Result<Self, String> {
        match name {
            "passthrough" => Ok(Mode::PassThrough),
            "count" => Ok(Mode::Count),
            "increment" => Ok(Mode::Increment),
            "both" => Ok(Mode::Both),
            other => Err(format!(
                "unknown mode {other} (passthrough, count, increment, both)"
            )),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::PassThrough => "passthrough",
            Mode::Count => "count",
            Mode::Increment => "increment",
            Mode::Both => "both",
        }
    }
}

/// How to run one instance.
#[derive(Debug, Clone)]
pub(crate) struct AppSpec {
    pub bootstrap: String,
    pub application_id: String,
    pub input: String,
    pub output: String,
    pub mode: Mode,
    pub exactly_once: bool,
    pub cache_bytes: u64,
    pub state_dir: PathBuf,
    pub dead_letter_queue: Option<String>,
    /// `classic` (none given), `consumer` (KIP-848) or `streams` (KIP-1071).
    pub group_protocol: Option<String>,
    /// The static member's `group.instance.id` suffix; none: a dynamic
    /// member, which leaves the group when it closes.
    pub static_member: Option<String>,
    /// `num.standby.replicas` (streams protocol only).
    pub standby_replicas: Option<String>,
    /// `enable.transactional.statestores` (KIP-892; exactly-once only).
    pub transactional_stores: bool,
    /// A file of client keys (`key=value` lines: `security.protocol`,
    /// `ssl.*`, `sasl.*`) set on the configuration, so every client reaches
    /// a secured listener ([`crate::listener::Listener::write_keys`]).
    pub security: Option<PathBuf>,
    /// `application.server` (`host:port`), which the streams group hands the
    /// other instances for their interactive queries.
    pub application_server: Option<String>,
}

const USAGE: &str = "usage: kstreams-chaos app BOOTSTRAP APP_ID INPUT OUTPUT MODE eos|alos \
                     CACHE_BYTES STATE_DIR [dlq=TOPIC] [protocol=P] [member=ID] [standby=N] \
                     [stores=transactional] [security=KEYS_FILE] [server=HOST:PORT]";

impl AppSpec {
    /// The arguments of `kstreams-chaos app` that make this instance.
    pub(crate) fn to_args(&self) -> Vec<String> {
        let mut args = vec![
            "app".to_string(),
            self.bootstrap.clone(),
            self.application_id.clone(),
            self.input.clone(),
            self.output.clone(),
            self.mode.name().to_string(),
            if self.exactly_once { "eos" } else { "alos" }.to_string(),
            self.cache_bytes.to_string(),
            self.state_dir.display().to_string(),
        ];
        let options = [
            ("dlq", &self.dead_letter_queue),
            ("protocol", &self.group_protocol),
            ("member", &self.static_member),
            ("standby", &self.standby_replicas),
            ("server", &self.application_server),
        ];
        for (name, value) in options {
            if let Some(value) = value {
                args.push(format!("{name}={value}"));
            }
        }
        if self.transactional_stores {
            args.push("stores=transactional".to_string());
        }
        if let Some(keys) = &self.security {
            args.push(format!("security={}", keys.display()));
        }
        args
    }

    pub(crate) fn from_args(args: &[String]) -> Result<Self, String> {
        let [bootstrap, application_id, input, output, mode, guarantee, cache, state_dir, rest @ ..] =
            args
        else {
            return Err(USAGE.to_string());
        };
        let (mut dead_letter_queue, mut group_protocol, mut static_member) = (None, None, None);
        let (mut standby_replicas, mut transactional_stores) = (None, false);
        let (mut security, mut application_server) = (None, None);
        for option in rest {
            match option.split_once('=') {
                Some(("dlq", topic)) => dead_letter_queue = Some(topic.to_string()),
                Some(("protocol", protocol)) => group_protocol = Some(protocol.to_string()),
                Some(("member", id)) => static_member = Some(id.to_string()),
                Some(("standby", n)) => standby_replicas = Some(n.to_string()),
                Some(("stores", "transactional")) => transactional_stores = true,
                Some(("security", keys)) => security = Some(PathBuf::from(keys)),
                Some(("server", server)) => application_server = Some(server.to_string()),
                _ => return Err(format!("unknown option {option}\n{USAGE}")),
            }
        }
        Ok(AppSpec {
            bootstrap: bootstrap.clone(),
            application_id: application_id.clone(),
            input: input.clone(),
            output: output.clone(),
            mode: Mode::parse(mode)?,
            exactly_once: match guarantee.as_str() {
                "eos" => true,
                "alos" => false,
                other => return Err(format!("unknown guarantee {other} (eos, alos)")),
            },
            cache_bytes: cache
                .parse()
                .map_err(|_| format!("bad cache size {cache}"))?,
            state_dir: PathBuf::from(state_dir),
            dead_letter_queue,
            group_protocol,
            static_member,
            standby_replicas,
            transactional_stores,
            security,
            application_server,
        })
    }
}

fn topology(spec: &AppSpec) -> Result<Topology, TopologyError> {
    let builder = StreamsBuilder::new();
    match spec.mode {
        Mode::PassThrough => {
            builder
                .stream::<String, String>(&spec.input)
                .to(&spec.output);
        }
        Mode::Count => {
            builder
                .stream::<String, String>(&spec.input)
                .group_by_key()
                .count_with(None, Materialized::as_(queries::STORE))
                .to_stream()
                .to_with(
                    &spec.output,
                    Produced::with(StringSerde, Nullable(I64Serde)),
                );
        }
        Mode::Increment => {
            builder
                .stream_with(&spec.input, Consumed::with(StringSerde, I64Serde))
                .map_values(|v| v + 1)
                .to_with(&spec.output, Produced::with(StringSerde, I64Serde));
        }
        Mode::Both => {
            let input = builder.stream::<String, String>(&spec.input);
            input.clone().to(&spec.output);
            input
                .group_by_key()
                .count_with(None, Materialized::as_(queries::STORE))
                .to_stream()
                .to_with(
                    &counts_topic(&spec.output),
                    Produced::with(StringSerde, Nullable(I64Serde)),
                );
        }
    }
    builder.build()
}

fn config(spec: &AppSpec) -> Result<StreamsConfig, Box<dyn std::error::Error>> {
    let guarantee = if spec.exactly_once {
        ProcessingGuarantee::ExactlyOnceV2
    } else {
        ProcessingGuarantee::AtLeastOnce
    };
    let mut config = StreamsConfig::new(&spec.application_id, &spec.bootstrap)
        .processing_guarantee(guarantee)
        .state_dir(&spec.state_dir);
    if let Some(member) = &spec.static_member {
        // Static membership: a restarted instance takes its predecessor's
        // place at once, without waiting for the dead member's session to
        // time out, as operators of crash-prone deployments set it up.
        config = config.client_config(
            "consumer.group.instance.id",
            &format!("{}-{member}", spec.application_id),
        );
    }
    match spec.group_protocol.as_deref() {
        None | Some("classic") => {
            config = config.client_config("consumer.session.timeout.ms", "10000");
        }
        // The broker decides the session timeout of KIP-848 members.
        Some("consumer") => config = config.client_config("consumer.group.protocol", "consumer"),
        Some(protocol) => config.set("group.protocol", protocol)?,
    }
    if let Some(replicas) = &spec.standby_replicas {
        config.set("num.standby.replicas", replicas)?;
    }
    config.set("statestore.cache.max.bytes", &spec.cache_bytes.to_string())?;
    // Said either way: kstreams' default is on, and the scenarios without
    // them test the full restore after a crash.
    config = config.transactional_state_stores(spec.transactional_stores);
    if let Some(keys) = &spec.security {
        for (key, value) in crate::listener::read_keys(keys)? {
            config.set(&key, &value)?;
        }
    }
    if let Some(server) = &spec.application_server {
        config.set("application.server", server)?;
    }
    if let Some(dlq) = &spec.dead_letter_queue {
        config.set(
            "default.deserialization.exception.handler",
            "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler",
        )?;
        config.set("errors.dead.letter.queue.topic.name", dlq)?;
    }
    Ok(config)
}

/// Writes each finished restore to the instance's log (its stderr), at any
/// log level: the scenarios add them up (`restored=` in their figures).
struct RestoreLog;

/// The line [`RestoreLog`] writes, before the number of records.
pub(crate) const RESTORED: &str = "chaos app: changelog records restored: ";

impl StateRestoreListener for RestoreLog {
    fn on_restore_start(&self, _: &TopicPartition, _: &str, _: i64, _: i64) {}
    fn on_batch_restored(&self, _: &TopicPartition, _: &str, _: i64, _: u64) {}
    fn on_restore_end(&self, partition: &TopicPartition, store: &str, total: u64) {
        eprintln!("{RESTORED}{total} ({store}, {partition:?})");
    }
}

/// Writes each standby store promoted to an active task's to the
/// instance's log: the scenarios tell a task that moved to its standby
/// from one rebuilt elsewhere (`promoted=` in their figures).
struct StandbyLog;

/// The line [`StandbyLog`] writes, before the changelog partition's number.
pub(crate) const PROMOTED: &str = "chaos app: standby promoted, changelog partition ";

impl StandbyUpdateListener for StandbyLog {
    fn on_update_start(&self, _: &TopicPartition, _: &str, _: i64) {}
    fn on_batch_loaded(&self, _: &TopicPartition, _: &str, _: &str, _: i64, _: u64, _: i64) {}
    fn on_update_suspended(
        &self,
        partition: &TopicPartition,
        store: &str,
        store_offset: i64,
        current_end_offset: i64,
        reason: SuspendReason,
    ) {
        if reason == SuspendReason::Promoted {
            eprintln!(
                "{PROMOTED}{} ({store}, {}, at offset {store_offset} of {current_end_offset})",
                partition.partition, partition.topic
            );
        }
    }
}

/// What the instance's stdin asks of it.
enum Request {
    /// Answer the metadata of the keys of file `keys` into file `answers`.
    Query { keys: PathBuf, answers: PathBuf },
    /// Stdin closed: close cleanly.
    Close,
}

/// Reads stdin's requests, one a line, until it closes.
fn read_requests(requests: std::sync::mpsc::Sender<Request>) {
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match line.split('\t').collect::<Vec<_>>()[..] {
            [queries::COMMAND, keys, answers] => {
                let request = Request::Query {
                    keys: keys.into(),
                    answers: answers.into(),
                };
                if requests.send(request).is_err() {
                    return;
                }
            }
            _ => log::error!("chaos app: unknown request on stdin: {line:?}"),
        }
    }
    let _ = requests.send(Request::Close);
}

/// Answers `query_metadata_for_key` for every key of `keys` (a file, one key
/// a line) into `answers` ([`queries::format_line`]), with the key's count
/// in this instance's store where it is the active host; written whole
/// (a rename) so that the scenario never reads half a file.
fn answer_queries(
    app: &KafkaStreams,
    spec: &AppSpec,
    keys: &Path,
    answers: &Path,
) -> Result<(), String> {
    let keys = std::fs::read_to_string(keys).map_err(|e| format!("{}: {e}", keys.display()))?;
    let here = spec.application_server.as_deref();
    let mut metadata: Vec<(String, queries::Answer)> = Vec::new();
    for key in keys.lines().filter(|k| !k.is_empty()) {
        let key = key.to_string();
        let answer = app
            .query_metadata_for_key(queries::STORE, &key, &StringSerde)
            .map(|m| KeyAnswer {
                partition: m.partition,
                active: m.active_host.to_string(),
                standbys: m.standby_hosts.iter().map(ToString::to_string).collect(),
                local: Local::NotActiveHere,
            })
            .map_err(|e| e.to_string());
        metadata.push((key, answer));
    }
    // One read of each partition this instance is the active host of,
    // rather than one per key: each read waits for a stream thread's pass.
    let mut held: std::collections::BTreeMap<i32, Result<_, String>> = Default::default();
    for (key, answer) in &mut metadata {
        let Ok(answer) = answer else { continue };
        if here != Some(answer.active.as_str()) {
            continue;
        }
        let counts = held.entry(answer.partition).or_insert_with(|| {
            app.store(
                StoreQueryParameters::from_name_and_type(
                    queries::STORE,
                    QueryableStoreTypes::key_value_store::<String, i64>(),
                )
                .with_partition(answer.partition),
            )
            .and_then(|store| store.all())
            .map(|pairs| {
                pairs
                    .into_iter()
                    .collect::<std::collections::HashMap<_, _>>()
            })
            .map_err(|e| e.to_string())
        });
        answer.local = Local::Missing;
        match counts {
            Ok(counts) => {
                if let Some(&count) = counts.get(key.as_str()) {
                    answer.local = Local::Count(count);
                }
            }
            Err(error) => answer.local = Local::Error(error.clone()),
        }
    }
    let text: String = metadata
        .iter()
        .map(|(key, answer)| queries::format_line(key, answer))
        .collect();
    let partial = answers.with_extension("partial");
    std::fs::write(&partial, text)
        .and_then(|()| std::fs::rename(&partial, answers))
        .map_err(|e| format!("{}: {e}", answers.display()))
}

/// Runs the instance: exit status 0 after a clean close (stdin closed),
/// 2 if it stopped with an error, 3 if it could not start.
pub(crate) fn run(spec: &AppSpec) -> i32 {
    let started = topology(spec).map_err(|e| e.to_string()).and_then(|t| {
        let config = config(spec).map_err(|e| e.to_string())?;
        let mut app = KafkaStreams::new(t, config);
        app.set_global_state_restore_listener(std::sync::Arc::new(RestoreLog))
            .map_err(|e| e.to_string())?;
        app.set_standby_update_listener(std::sync::Arc::new(StandbyLog))
            .map_err(|e| e.to_string())?;
        app.start().map_err(|e| e.to_string())?;
        Ok(app)
    });
    let mut app = match started {
        Ok(app) => app,
        Err(error) => {
            log::error!("chaos app: start failed: {error}");
            return 3;
        }
    };
    let (requests_tx, requests) = std::sync::mpsc::channel();
    std::thread::spawn(move || read_requests(requests_tx));
    loop {
        match requests.recv_timeout(Duration::from_millis(100)) {
            Ok(Request::Query { keys, answers }) => {
                if let Err(error) = answer_queries(&app, spec, &keys, &answers) {
                    log::error!("chaos app: could not answer the queries: {error}");
                }
            }
            Ok(Request::Close) | Err(RecvTimeoutError::Disconnected) => {
                let clean = app.close(Duration::from_secs(60));
                return if clean && app.state() == State::NotRunning {
                    0
                } else {
                    2
                };
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        if app.state() == State::Error {
            log::error!("chaos app: stopped with errors {:?}", app.errors());
            app.close(Duration::from_secs(10));
            return 2;
        }
    }
}
