//! The application the scenarios kill: a pass-through or a count, under the
//! guarantee and cache size it is given, running until its stdin closes (a
//! clean close, checkpoints written) or it is killed.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use kstreams::prelude::*;

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
}

const USAGE: &str = "usage: kstreams-chaos app BOOTSTRAP APP_ID INPUT OUTPUT MODE eos|alos \
                     CACHE_BYTES STATE_DIR [dlq=TOPIC] [protocol=P] [member=ID] [standby=N] \
                     [stores=transactional]";

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
        ];
        for (name, value) in options {
            if let Some(value) = value {
                args.push(format!("{name}={value}"));
            }
        }
        if self.transactional_stores {
            args.push("stores=transactional".to_string());
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
        for option in rest {
            match option.split_once('=') {
                Some(("dlq", topic)) => dead_letter_queue = Some(topic.to_string()),
                Some(("protocol", protocol)) => group_protocol = Some(protocol.to_string()),
                Some(("member", id)) => static_member = Some(id.to_string()),
                Some(("standby", n)) => standby_replicas = Some(n.to_string()),
                Some(("stores", "transactional")) => transactional_stores = true,
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
                .count_with(None, Materialized::as_("counts"))
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
                .count_with(None, Materialized::as_("counts"))
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
    if spec.transactional_stores {
        config = config.transactional_state_stores(true);
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

/// Runs the instance: exit status 0 after a clean close (stdin closed),
/// 2 if it stopped with an error, 3 if it could not start.
pub(crate) fn run(spec: &AppSpec) -> i32 {
    let started = topology(spec).map_err(|e| e.to_string()).and_then(|t| {
        let config = config(spec).map_err(|e| e.to_string())?;
        let mut app = KafkaStreams::new(t, config);
        app.set_global_state_restore_listener(std::sync::Arc::new(RestoreLog))
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
    let (closed_tx, closed_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        let _ = closed_tx.send(());
    });
    loop {
        if closed_rx.recv_timeout(Duration::from_millis(100)).is_ok() {
            let clean = app.close(Duration::from_secs(60));
            return if clean && app.state() == State::NotRunning {
                0
            } else {
                2
            };
        }
        if app.state() == State::Error {
            log::error!("chaos app: stopped with errors {:?}", app.errors());
            app.close(Duration::from_secs(10));
            return 2;
        }
    }
}
