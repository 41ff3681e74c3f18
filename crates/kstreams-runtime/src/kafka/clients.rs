//! The one place that builds the Kafka clients' configurations, as Kafka
//! Streams' `StreamsConfig.getMainConsumerConfigs` and friends: the
//! defaults kstreams chooses for each client, then the user's settings
//! resolved by Kafka Streams' precedence ([`StreamsConfig::client_settings`]:
//! unprefixed, then `consumer.`, then the client's own prefix), then what
//! kstreams must decide itself (`bootstrap.servers`, `group.id`,
//! `client.id`, `enable.auto.commit`, and under exactly-once
//! `isolation.level` and `transactional.id`).
//!
//! | client | made by | group member |
//! |---|---|---|
//! | main consumer | each stream thread | yes (the application's group) |
//! | producer | each stream thread | no (transactional under exactly-once) |
//! | restore consumer | each stream thread's changelog reader | no (assigns itself) |
//! | global consumer | the global thread | no (assigns itself) |
//! | admin | start-up (topics) and the repartition purge | no |

use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;
use rdkafka::ClientConfig;

use super::config::{
    is_group_membership_key, reset_by_duration, GroupProtocol, KafkaClient, ProcessingGuarantee,
    StreamsConfig, BY_DURATION_FALLBACK,
};
use super::ffi::BatchedConsumer;
use super::RuntimeError;

/// The librdkafka settings kstreams gives its consumers (`consumer.` keys:
/// the main, restore and global consumers) and producers (`producer.`
/// keys) where librdkafka's
/// defaults starve a Streams workload; a user's setting of the same key
/// wins. Each was chosen by running the comparison's pass-through with the
/// key set; the runs, their commands and their figures are in
/// BENCHMARKS.md, "Client defaults this comparison chose".
///
/// - `fetch.queue.backoff.ms` 20 (librdkafka: 1000): once a partition has
///   `queued.min.messages` records prefetched, librdkafka stops fetching it
///   for this long. A stream thread empties such a queue in well under a
///   second and then sat idle until the backoff ended, so librdkafka's
///   default multiplied the wall time at the same CPU. At 0 the fetcher
///   spins.
/// - `queued.min.messages` 20 000 (librdkafka: 100 000): how many records
///   the consumer prefetches. librdkafka's docs say per partition, but its
///   fetcher measures each partition's queue after forwarding, that is the
///   consumer's one queue (`rd_kafka_toppar_fetch_decide`, `rd_kafka_q_len`),
///   so this bounds the whole consumer. Fewer prefetched records lower the
///   peak RSS at the same wall time and CPU, until the thread drains the
///   queue before the backoff above ends (10 000 alone was slower).
/// - `queued.max.messages.kbytes` 16 384 (librdkafka: 65 536): the cap on
///   the consumer's prefetched bytes (librdkafka counts a kbyte as 1 000
///   bytes), about 16 MB; with the count above it takes the peak RSS lower
///   again. Kafka Streams' own consumers buffer 1 000
///   records per partition (`buffered.records.per.partition`).
/// - `linger.ms` 5 (librdkafka's own default, written down because Kafka
///   Streams raises the Java producer's to 100): batches fill before it
///   ends at any real rate (a longer one made no difference to a
///   pass-through), and a longer linger only adds latency at low rates.
/// - `reconnect.backoff.ms` 50 (librdkafka: 100), for every client: Kafka's
///   Java clients' default. librdkafka also opens a client's connections to
///   brokers it has only just learnt of (the group coordinator, a
///   partition's leader) at most once per half of it
///   (`sparse_connect_intvl` in rdkafka_conf.c), and a new client learns
///   them from its bootstrap connection just after opening that one: each
///   client's first request to them waited half the backoff, which delayed
///   the start's topic check and a thread's first output.
pub const STREAM_CLIENT_DEFAULTS: &[(&str, &str)] = &[
    ("consumer.fetch.queue.backoff.ms", "20"),
    ("consumer.queued.min.messages", "20000"),
    ("consumer.queued.max.messages.kbytes", "16384"),
    ("consumer.reconnect.backoff.ms", "50"),
    ("producer.linger.ms", "5"),
    ("producer.reconnect.backoff.ms", "50"),
    ("admin.reconnect.backoff.ms", "50"),
];

/// Sets the [`STREAM_CLIENT_DEFAULTS`] of the client `prefix` names.
fn apply_stream_defaults(client: &mut ClientConfig, prefix: &str) {
    for (key, value) in STREAM_CLIENT_DEFAULTS {
        if let Some(key) = key.strip_prefix(prefix) {
            client.set(key, *value);
        }
    }
}

/// Sets the user's settings of `kind` on `client`, leaving out those
/// `skip` says kstreams decides.
fn apply_user_settings(
    client: &mut ClientConfig,
    config: &StreamsConfig,
    kind: KafkaClient,
    skip: impl Fn(&str) -> bool,
) {
    for (key, (_, value)) in config.client_settings(kind) {
        if !skip(&key) {
            client.set(key, value);
        }
    }
}

/// Settings kstreams always decides itself.
fn decided_by_kstreams(key: &str) -> bool {
    matches!(
        key,
        "bootstrap.servers" | "client.id" | "group.id" | "enable.auto.commit"
    )
}

/// Settings exactly-once needs as kstreams sets them.
fn decided_under_exactly_once(config: &StreamsConfig, key: &str) -> bool {
    config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2
        && matches!(
            key,
            "isolation.level" | "transactional.id" | "enable.idempotence"
        )
}

/// `isolation.level` for every consumer: under exactly-once a consumer
/// must not see records of aborted (or still open) transactions.
fn isolation_level(config: &StreamsConfig) -> &'static str {
    match config.processing_guarantee {
        ProcessingGuarantee::ExactlyOnceV2 => "read_committed",
        ProcessingGuarantee::AtLeastOnce => "read_uncommitted",
    }
}

/// The consumer of stream thread `index` (0-based) named `thread`: a
/// member of the application's group that commits offsets itself.
/// The `client.id` of stream thread `thread`'s main consumer, as Kafka
/// Streams names it.
pub(crate) fn consumer_client_id(thread: &str) -> String {
    format!("{thread}-consumer")
}

/// The `client.id` of stream thread `thread`'s restore consumer.
pub(crate) fn restore_consumer_client_id(thread: &str) -> String {
    format!("{thread}-restore-consumer")
}

/// The `client.id` of the consumer with which stream thread `thread` reads
/// a windowed changelog's tail before restoring it.
pub(crate) fn restore_probe_client_id(thread: &str) -> String {
    format!("{thread}-restore-probe")
}

/// The `client.id` of stream thread `thread`'s producer.
pub(crate) fn producer_client_id(thread: &str) -> String {
    format!("{thread}-producer")
}

pub(crate) fn main_consumer(config: &StreamsConfig, thread: &str, index: usize) -> ClientConfig {
    let mut client = ClientConfig::new();
    client
        .set("bootstrap.servers", &config.bootstrap_servers)
        .set("group.id", &config.application_id)
        .set("client.id", consumer_client_id(thread))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", isolation_level(config));
    apply_stream_defaults(&mut client, "consumer.");
    // A range assignor with identical subscriptions gives every thread the
    // same partition numbers of co-partitioned topics, so a task's
    // partitions stay together. Under the classic protocol it runs in the
    // group leader (eager: every task stops at a rebalance); under KIP-848
    // the broker runs it and members move only the partitions that change
    // owner, and librdkafka refuses the client-side setting.
    match config.group_protocol() {
        GroupProtocol::Classic => {
            client.set("partition.assignment.strategy", "range");
        }
        // The consumer joins no group: the thread's streams group member
        // assigns it the partitions of its active tasks. It keeps group.id
        // for committed offsets (OffsetFetch without a member is accepted)
        // and the transactions' group metadata.
        GroupProtocol::Streams => {}
        GroupProtocol::Consumer => {
            client.set("group.remote.assignor", "range");
            match config
                .client_settings(KafkaClient::MainConsumer)
                .get("group.remote.assignor")
            {
                Some((_, assignor)) if assignor != "range" => log::warn!(
                    "{thread}: group.remote.assignor={assignor}: unless that assignor gives \
                     every member the same partition numbers of all subscribed topics, \
                     co-partitioned topics (joins, merges) can land in different tasks"
                ),
                _ => {}
            }
        }
    }
    // Under the streams group protocol `group.instance.id` is the streams
    // group member's (streams_group.rs), not the consumer's: in the
    // transactions' group metadata it would name a static member the
    // broker does not know.
    let streams_group = config.group_protocol() == GroupProtocol::Streams;
    apply_user_settings(&mut client, config, KafkaClient::MainConsumer, |k| {
        decided_by_kstreams(k)
            || decided_under_exactly_once(config, k)
            || (streams_group && k == "group.instance.id")
    });
    if let Some((_, instance)) = config
        .client_settings(KafkaClient::MainConsumer)
        .get("group.instance.id")
        .filter(|_| config.group_protocol() != GroupProtocol::Streams)
    {
        // Static membership: one id per thread, as Kafka Streams suffixes
        // it, or the threads would fence each other.
        client.set("group.instance.id", format!("{instance}-{}", index + 1));
    }
    // A stream thread has no use for end-of-partition messages, and in its
    // batch reads (kafka/fetch_queue.rs) librdkafka moves the consumer's
    // position past each one's offset, a record not yet fetched.
    client.set("enable.partition.eof", "false");
    // by_duration: the rebalance listener places partitions without a
    // committed offset itself; librdkafka handles the rest.
    if client
        .get("auto.offset.reset")
        .and_then(reset_by_duration)
        .is_some()
    {
        client.set("auto.offset.reset", BY_DURATION_FALLBACK);
    }
    client
}

/// The producer of stream thread `index` (0-based) named `thread`, in the
/// instance `process_id`.
pub(crate) fn producer(
    config: &StreamsConfig,
    thread: &str,
    process_id: &str,
    index: usize,
) -> ClientConfig {
    let mut client = ClientConfig::new();
    client
        .set("bootstrap.servers", &config.bootstrap_servers)
        .set("client.id", producer_client_id(thread))
        // Java's default partitioner: murmur2 of the key bytes, so a key
        // lands where Kafka Streams would put it.
        .set("partitioner", "murmur2_random");
    apply_stream_defaults(&mut client, "producer.");
    if config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2 {
        set_exactly_once_producer_defaults(&mut client, config, process_id, index);
    }
    apply_user_settings(&mut client, config, KafkaClient::Producer, |k| {
        decided_by_kstreams(k) || decided_under_exactly_once(config, k) || k == "transactional.id"
    });
    client
}

/// Kafka Streams' exactly-once producer settings (`StreamsConfig`'s
/// `PRODUCER_EOS_OVERRIDES` and `ActiveTaskCreator`); the user's
/// `transaction.timeout.ms` still wins, as in Kafka Streams.
fn set_exactly_once_producer_defaults(
    client: &mut ClientConfig,
    config: &StreamsConfig,
    process_id: &str,
    index: usize,
) {
    client
        // KIP-447 (EOS v2): one transactional producer per thread, its id
        // `<application.id>-<process id>-<thread index from 1>`. The process
        // id survives a restart, so the restarted thread's producer fences
        // its dead predecessor and aborts the transaction it left open.
        .set(
            "transactional.id",
            format!("{}-{process_id}-{}", config.application_id, index + 1),
        )
        // Transactions need it; Kafka Streams does not let the user turn
        // it off (nor does kstreams: see `decided_under_exactly_once`).
        .set("enable.idempotence", "true")
        // librdkafka's default is 60 s: a transaction left open by an
        // instance that died and does not come back (or comes back with
        // another state directory) blocks read_committed consumers and
        // holds back the pending offsets for that long. Kafka Streams
        // lowers it to 10 s.
        .set("transaction.timeout.ms", "10000");
    // Kafka Streams also sets delivery.timeout.ms to Integer.MAX_VALUE
    // (retry until the transaction fails); librdkafka refuses a
    // message.timeout.ms (its delivery.timeout.ms) above
    // transaction.timeout.ms and, left unset, caps it there itself, which
    // is the same: a record is retried for as long as its transaction may
    // live. max.in.flight.requests.per.connection (at most 5 under
    // idempotence) is enforced by librdkafka.
}

/// A consumer that only assigns partitions to itself, to read them from a
/// given offset: `defaults`, then the user's consumer settings without
/// those of group membership. librdkafka's `assign()` still needs a
/// `group.id`; this consumer never joins that group nor commits to it.
fn assign_only_consumer(
    config: &StreamsConfig,
    kind: KafkaClient,
    client_id: String,
    group: &str,
    defaults: &[(&str, &str)],
) -> ClientConfig {
    let mut client = ClientConfig::new();
    client
        .set("bootstrap.servers", &config.bootstrap_servers)
        .set("client.id", client_id)
        .set("group.id", format!("{}-{group}", config.application_id))
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation_level(config));
    // Restoration and global stores read as fast as they can, as the main
    // consumer does.
    apply_stream_defaults(&mut client, "consumer.");
    for (k, v) in defaults {
        client.set(*k, *v);
    }
    apply_user_settings(&mut client, config, kind, |k| {
        decided_by_kstreams(k)
            || decided_under_exactly_once(config, k)
            || is_group_membership_key(k)
    });
    // auto.offset.reset=none (librdkafka's `error`) and by_duration are for
    // the main consumer: Kafka Streams decides the restore and global
    // consumers' reset itself, and here `error` would stall a partition
    // silently.
    let reset = client.get("auto.offset.reset");
    if reset == Some("error") || reset.and_then(reset_by_duration).is_some() {
        client.remove("auto.offset.reset");
        for (k, v) in defaults.iter().filter(|(k, _)| *k == "auto.offset.reset") {
            client.set(*k, *v);
        }
    }
    client
}

/// The consumer a stream thread named `thread` restores (and later keeps
/// standby tasks current) with.
pub(crate) fn restore_consumer(config: &StreamsConfig, thread: &str) -> ClientConfig {
    let mut client = assign_only_consumer(
        config,
        KafkaClient::RestoreConsumer,
        restore_consumer_client_id(thread),
        "restore",
        &[],
    );
    // A changelog offset out of range (retention deleted what a checkpoint
    // or a restore in progress points at) reads on from the log start, as a
    // restore from a checkpoint before it does: librdkafka's default, the
    // end, would skip the rest of the changelog silently (Kafka Streams
    // sets `none` and rebuilds the task from its changelog's start). Not a
    // user's choice: the main consumer's policy is for input.
    client.set("auto.offset.reset", "earliest");
    client
}

/// An assign-only consumer (`restore_consumer`'s) to read in batches: it
/// has a queue of its own, since it was made with a `group.id`.
pub(crate) fn batched(consumer: BaseConsumer) -> Result<BatchedConsumer, RuntimeError> {
    BatchedConsumer::new(consumer).ok_or_else(|| {
        RuntimeError::client(KafkaError::ClientCreation(
            "an assign-only consumer without a consumer queue (no group.id)".to_owned(),
        ))
    })
}

/// The global thread's consumer.
pub(crate) fn global_consumer(config: &StreamsConfig) -> ClientConfig {
    assign_only_consumer(
        config,
        KafkaClient::GlobalConsumer,
        format!("{}-global-consumer", config.application_id),
        "global",
        // Out of range (retention deleted what it was reading): start over
        // from the beginning rather than skip to the end.
        &[("auto.offset.reset", "earliest")],
    )
}

/// The admin client (topic checks and creation, the repartition purge).
pub(crate) fn admin(config: &StreamsConfig) -> ClientConfig {
    let mut client = ClientConfig::new();
    client.set("bootstrap.servers", &config.bootstrap_servers);
    apply_stream_defaults(&mut client, "admin.");
    apply_user_settings(&mut client, config, KafkaClient::Admin, |k| {
        k == "bootstrap.servers"
    });
    client
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::time::Duration;

    /// A configuration of `pairs` over an application id and bootstrap.
    pub(in crate::kafka) fn config(pairs: &[(&str, &str)]) -> StreamsConfig {
        let mut all = vec![("application.id", "app"), ("bootstrap.servers", "b:9092")];
        all.extend_from_slice(pairs);
        StreamsConfig::from_properties(all).unwrap()
    }

    #[test]
    fn stream_threads_get_the_streams_defaults_and_users_override_them() {
        let defaults = config(&[]);
        let consumer = main_consumer(&defaults, "t", 0);
        let sender = producer(&defaults, "t", "p", 0);
        assert_eq!(consumer.get("fetch.queue.backoff.ms"), Some("20"));
        assert_eq!(consumer.get("queued.min.messages"), Some("20000"));
        assert_eq!(consumer.get("queued.max.messages.kbytes"), Some("16384"));
        assert_eq!(consumer.get("linger.ms"), None);
        assert_eq!(sender.get("linger.ms"), Some("5"));
        assert_eq!(sender.get("fetch.queue.backoff.ms"), None);
        let tuned = config(&[
            ("consumer.fetch.queue.backoff.ms", "200"),
            ("producer.linger.ms", "30"),
        ]);
        assert_eq!(
            main_consumer(&tuned, "t", 0).get("fetch.queue.backoff.ms"),
            Some("200")
        );
        assert_eq!(producer(&tuned, "t", "p", 0).get("linger.ms"), Some("30"));
        // Restoration and global stores read at full speed too.
        assert_eq!(
            restore_consumer(&defaults, "t").get("fetch.queue.backoff.ms"),
            Some("20")
        );
        assert_eq!(
            global_consumer(&tuned).get("fetch.queue.backoff.ms"),
            Some("200")
        );
    }

    #[test]
    fn the_main_consumer_joins_the_application_group_with_the_range_assignor() {
        let client = main_consumer(&config(&[]), "app-1-StreamThread-1", 0);
        assert_eq!(client.get("group.id"), Some("app"));
        assert_eq!(client.get("enable.auto.commit"), Some("false"));
        assert_eq!(client.get("partition.assignment.strategy"), Some("range"));
        assert_eq!(client.get("isolation.level"), Some("read_uncommitted"));
        assert_eq!(
            client.get("client.id"),
            Some("app-1-StreamThread-1-consumer")
        );

        let kip848 = main_consumer(&config(&[("consumer.group.protocol", "consumer")]), "t", 0);
        assert_eq!(kip848.get("partition.assignment.strategy"), None);
        assert_eq!(kip848.get("group.remote.assignor"), Some("range"));
        assert_eq!(kip848.get("group.protocol"), Some("consumer"));
    }

    #[test]
    fn exactly_once_reads_committed_and_produces_transactionally_per_thread() {
        let eos = config(&[("processing.guarantee", "exactly_once_v2")]);
        assert_eq!(
            main_consumer(&eos, "t", 0).get("isolation.level"),
            Some("read_committed")
        );
        assert_eq!(
            restore_consumer(&eos, "t").get("isolation.level"),
            Some("read_committed")
        );
        assert_eq!(
            producer(&eos, "t", "p1", 1).get("transactional.id"),
            Some("app-p1-2")
        );
        assert_eq!(
            producer(&config(&[]), "t", "p1", 1).get("transactional.id"),
            None
        );
    }

    #[test]
    fn exactly_once_producers_take_kafka_streams_defaults_unless_the_user_sets_them() {
        let eos = config(&[("processing.guarantee", "exactly_once_v2")]);
        let client = producer(&eos, "t", "2b5f0c1e-7d4e-4c51-9f0a-0d4e1c2b3a41", 0);
        assert_eq!(
            client.get("transactional.id"),
            Some("app-2b5f0c1e-7d4e-4c51-9f0a-0d4e1c2b3a41-1")
        );
        assert_eq!(client.get("transaction.timeout.ms"), Some("10000"));
        assert_eq!(client.get("enable.idempotence"), Some("true"));
        // librdkafka caps it at transaction.timeout.ms when left unset.
        assert_eq!(client.get("delivery.timeout.ms"), None);
        assert_eq!(client.get("message.timeout.ms"), None);

        let user = config(&[
            ("processing.guarantee", "exactly_once_v2"),
            ("producer.transaction.timeout.ms", "30000"),
            ("producer.enable.idempotence", "false"),
        ]);
        let client = producer(&user, "t", "p", 0);
        assert_eq!(client.get("transaction.timeout.ms"), Some("30000"));
        assert_eq!(client.get("enable.idempotence"), Some("true"));

        let alos = producer(&config(&[]), "t", "p", 0);
        assert_eq!(alos.get("transaction.timeout.ms"), None);
        assert_eq!(alos.get("enable.idempotence"), None);
    }

    #[test]
    fn user_settings_win_and_static_membership_gets_one_id_per_thread() {
        let c = config(&[
            ("consumer.fetch.min.bytes", "7"),
            ("consumer.group.instance.id", "pod-a"),
            ("producer.linger.ms", "20"),
        ]);
        let consumer = main_consumer(&c, "t", 2);
        assert_eq!(consumer.get("fetch.min.bytes"), Some("7"));
        assert_eq!(consumer.get("group.instance.id"), Some("pod-a-3"));
        assert_eq!(producer(&c, "t", "p", 0).get("linger.ms"), Some("20"));
        // The murmur2 partitioner is Java's: a user's choice still wins.
        assert_eq!(
            producer(&c, "t", "p", 0).get("partitioner"),
            Some("murmur2_random")
        );
    }

    #[test]
    fn under_the_streams_protocol_the_instance_id_is_the_members_not_the_consumers() {
        for key in ["group.instance.id", "consumer.group.instance.id"] {
            let c = config(&[
                ("group.protocol", "streams"),
                ("processing.guarantee", "exactly_once_v2"),
                (key, "pod-a"),
            ]);
            // The member gets `pod-a-<thread>` (streams_group.rs); the
            // consumer, whose group metadata goes with each transaction,
            // none.
            assert_eq!(main_consumer(&c, "t", 0).get("group.instance.id"), None);
            assert_eq!(
                c.client_settings(KafkaClient::MainConsumer)
                    .get("group.instance.id")
                    .map(|(_, v)| v.as_str()),
                Some("pod-a"),
                "{key}"
            );
        }
    }

    #[test]
    fn assign_only_consumers_stay_out_of_the_application_group() {
        let c = config(&[
            ("consumer.group.instance.id", "pod-a"),
            ("consumer.session.timeout.ms", "30000"),
            ("consumer.auto.offset.reset", "latest"),
        ]);
        for client in [restore_consumer(&c, "t"), global_consumer(&c)] {
            assert_ne!(client.get("group.id"), Some("app"));
            assert_eq!(client.get("group.instance.id"), None);
            assert_eq!(client.get("session.timeout.ms"), None);
        }
        assert_eq!(
            restore_consumer(&c, "t").get("group.id"),
            Some("app-restore")
        );
        assert_eq!(global_consumer(&c).get("group.id"), Some("app-global"));
        // The user's reset policy wins over the global consumer's default,
        // never over the restore consumer's.
        assert_eq!(global_consumer(&c).get("auto.offset.reset"), Some("latest"));
        assert_eq!(
            restore_consumer(&c, "t").get("auto.offset.reset"),
            Some("earliest")
        );
        assert_eq!(
            global_consumer(&config(&[])).get("auto.offset.reset"),
            Some("earliest")
        );
    }

    #[test]
    fn the_admin_client_takes_only_admin_settings() {
        let c = config(&[
            ("admin.request.timeout.ms", "5000"),
            ("consumer.fetch.min.bytes", "7"),
        ]);
        let client = admin(&c);
        assert_eq!(client.get("bootstrap.servers"), Some("b:9092"));
        assert_eq!(client.get("request.timeout.ms"), Some("5000"));
        assert_eq!(client.get("fetch.min.bytes"), None);
    }

    /// Kafka Streams' precedence: unprefixed < `consumer.` < the client's
    /// own prefix; an unprefixed key reaches only the clients it is for.
    #[test]
    fn unprefixed_keys_reach_their_clients_and_prefixes_narrow_them() {
        let c = config(&[
            ("auto.offset.reset", "latest"),
            ("acks", "all"),
            ("compression.type", "gzip"),
            ("security.protocol", "SSL"),
            ("fetch.min.bytes", "1"),
            ("consumer.fetch.min.bytes", "2"),
            ("restore.consumer.fetch.min.bytes", "3"),
            ("main.consumer.fetch.min.bytes", "4"),
            ("producer.acks", "1"),
            ("admin.security.protocol", "SASL_SSL"),
            ("max.poll.records", "500"),
        ]);
        let main = main_consumer(&c, "t", 0);
        let restore = restore_consumer(&c, "t");
        let global = global_consumer(&c);
        let producer = producer(&c, "t", "p", 0);
        let admin = admin(&c);
        assert_eq!(main.get("fetch.min.bytes"), Some("4"));
        assert_eq!(restore.get("fetch.min.bytes"), Some("3"));
        assert_eq!(global.get("fetch.min.bytes"), Some("2"));
        // The restore consumer's reset is kstreams' (restore_consumer).
        assert_eq!(restore.get("auto.offset.reset"), Some("earliest"));
        for consumer in [&main, &global] {
            assert_eq!(consumer.get("auto.offset.reset"), Some("latest"));
        }
        for consumer in [&main, &restore, &global] {
            assert_eq!(consumer.get("acks"), None);
            assert_eq!(consumer.get("compression.type"), None);
            assert_eq!(consumer.get("security.protocol"), Some("SSL"));
            assert_eq!(consumer.get("max.poll.records"), None);
        }
        assert_eq!(producer.get("acks"), Some("1"));
        assert_eq!(producer.get("compression.type"), Some("gzip"));
        assert_eq!(producer.get("auto.offset.reset"), None);
        assert_eq!(producer.get("fetch.min.bytes"), None);
        assert_eq!(producer.get("security.protocol"), Some("SSL"));
        assert_eq!(admin.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(admin.get("auto.offset.reset"), None);
        assert_eq!(admin.get("acks"), None);
    }

    /// As Kafka Streams: the ids, the group, the commit mode and under
    /// exactly-once the isolation level are kstreams' own.
    #[test]
    fn what_kstreams_decides_is_not_overridden() {
        let c = config(&[
            ("processing.guarantee", "exactly_once_v2"),
            ("client.id", "mine"),
            ("consumer.group.id", "other"),
            ("consumer.enable.auto.commit", "true"),
            ("consumer.isolation.level", "read_uncommitted"),
            ("producer.transactional.id", "fixed"),
        ]);
        let main = main_consumer(&c, "t", 0);
        assert_eq!(main.get("client.id"), Some("t-consumer"));
        assert_eq!(main.get("group.id"), Some("app"));
        assert_eq!(main.get("enable.auto.commit"), Some("false"));
        assert_eq!(main.get("isolation.level"), Some("read_committed"));
        let producer = producer(&c, "t", "p", 0);
        assert_eq!(producer.get("transactional.id"), Some("app-p-1"));
        assert_eq!(producer.get("client.id"), Some("t-producer"));
        assert_eq!(
            restore_consumer(&c, "t").get("group.id"),
            Some("app-restore")
        );
        // Under at-least-once the isolation level is the user's.
        let alos = config(&[("consumer.isolation.level", "read_committed")]);
        assert_eq!(
            main_consumer(&alos, "t", 0).get("isolation.level"),
            Some("read_committed")
        );
    }

    #[test]
    fn auto_offset_reset_none_reaches_only_the_main_consumer() {
        let c = config(&[("auto.offset.reset", "none")]);
        assert_eq!(
            main_consumer(&c, "t", 0).get("auto.offset.reset"),
            Some("error")
        );
        assert_eq!(
            restore_consumer(&c, "t").get("auto.offset.reset"),
            Some("earliest")
        );
        assert_eq!(
            global_consumer(&c).get("auto.offset.reset"),
            Some("earliest")
        );
    }

    #[test]
    fn by_duration_leaves_librdkafka_a_reset_it_knows_and_the_duration_to_the_thread() {
        let c = config(&[("auto.offset.reset", "by_duration:PT2H")]);
        assert_eq!(
            main_consumer(&c, "t", 0).get("auto.offset.reset"),
            Some(BY_DURATION_FALLBACK)
        );
        assert_eq!(
            super::super::uncommitted_start::UncommittedStart::of_main_consumer(&c),
            super::super::uncommitted_start::UncommittedStart::ByDuration(Duration::from_secs(
                7200
            ))
        );
        assert_eq!(
            restore_consumer(&c, "t").get("auto.offset.reset"),
            Some("earliest")
        );
        assert_eq!(
            global_consumer(&c).get("auto.offset.reset"),
            Some("earliest")
        );
        // Every client built from it is one librdkafka takes.
        let consumer: Result<rdkafka::consumer::BaseConsumer, _> =
            main_consumer(&c, "t", 0).create();
        assert!(consumer.is_ok(), "{:?}", consumer.err());
    }
}
