package dev.kstreams.compat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.errors.LogAndContinueExceptionHandler;
import org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;

/**
 * {@code run}: runs one scenario on Kafka Streams until it has processed its
 * input, then closes it.
 */
final class RunApp {
    /** A hundred years: see {@link #config}. */
    static final long WINDOWED_CHANGELOG_EXTRA_RETENTION_MS = 100L * 365 * 24 * 60 * 60 * 1000;

    private RunApp() {}

    static void run(Args args) throws Exception {
        String scenario = args.positional(0, "scenario name");
        String bootstrap = args.required("bootstrap");
        String appId = args.required("app-id");
        String input = args.required("input");
        Duration timeout = Duration.ofSeconds(Long.parseLong(args.optional("timeout-secs", "120")));

        Topology topology = Scenarios.build(scenario, input, args.required("output"));
        String describeTo = args.optional("describe-to", null);
        if (describeTo != null) {
            Files.writeString(Path.of(describeTo), topology.describe().toString(), StandardCharsets.UTF_8);
        }

        AtomicReference<Throwable> died = new AtomicReference<>();
        long started = System.nanoTime();
        Properties props = config(args, bootstrap, appId);
        // processing-handler-by-type: the application's own processing
        // handler, named by its class as a properties file names it.
        if (scenario.equals("processing-handler-by-type")) {
            props.put(StreamsConfig.PROCESSING_EXCEPTION_HANDLER_CLASS_CONFIG, DeadLettersByType.class.getName());
        }
        try (KafkaStreams streams = new KafkaStreams(topology, props);
                Admin admin = Topics.admin(bootstrap)) {
            streams.setUncaughtExceptionHandler(e -> {
                died.set(e);
                return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            streams.start();
            List<String> groupInputs = groupInputs(topology, input);
            AwaitIdle.await(admin, appId, groupInputs, timeout, () -> failure(streams, died));
            String consumedTo = args.optional("consumed-to", null);
            if (consumedTo != null) {
                writeConsumed(streams, groupInputs, Path.of(consumedTo));
            }
            if (Boolean.parseBoolean(args.optional("hold", "false"))) {
                // A killed migration: the harness kills this process with
                // SIGKILL once it sees the group idle; no close, no final
                // checkpoint, the group not left.
                System.err.println("compat: " + scenario + " idle, holding until killed");
                Thread.sleep(Long.MAX_VALUE);
            }
            streams.close(Duration.ofSeconds(30));
        }
        System.err.printf("compat: %s processed its input in %d ms%n", scenario,
                Duration.ofNanos(System.nanoTime() - started).toMillis());
    }

    /**
     * The input topics the group consumes: all but those of global stores,
     * which the global thread reads without a group (so it commits nothing).
     */
    static List<String> groupInputs(Topology topology, String input) {
        Set<String> global = new HashSet<>();
        for (TopologyDescription.GlobalStore store : topology.describe().globalStores()) {
            global.addAll(store.source().topicSet());
        }
        return Arrays.stream(input.split(",")).filter(topic -> !global.contains(topic)).toList();
    }

    /**
     * {@code --consumed-to FILE}: how many records this instance's consumers
     * took from each input topic the group reads (the consumers'
     * {@code records-consumed-total}, which names a topic with its dots as
     * underscores), as {@code topic<TAB>count} lines; written once the group
     * has committed the end of the input, so the counts are final. A
     * migration checks with them that no input was read twice.
     */
    static void writeConsumed(KafkaStreams streams, List<String> topics, Path file) throws Exception {
        Map<String, Long> counts = new TreeMap<>();
        for (String topic : topics) {
            counts.put(topic, 0L);
        }
        for (Map.Entry<MetricName, ? extends Metric> metric : streams.metrics().entrySet()) {
            MetricName name = metric.getKey();
            String tagged = name.tags().get("topic");
            if (!name.name().equals("records-consumed-total")
                    || !name.group().equals("consumer-fetch-manager-metrics") || tagged == null) {
                continue;
            }
            for (String topic : topics) {
                if (topic.replace('.', '_').equals(tagged)) {
                    long value = ((Number) metric.getValue().metricValue()).longValue();
                    counts.merge(topic, value, Long::sum);
                }
            }
        }
        StringBuilder text = new StringBuilder();
        counts.forEach((topic, count) -> text.append(topic).append('\t').append(count).append('\n'));
        Path written = Path.of(file + ".tmp");
        Files.writeString(written, text, StandardCharsets.UTF_8);
        Files.move(written, file, StandardCopyOption.ATOMIC_MOVE);
    }

    private static Optional<String> failure(KafkaStreams streams, AtomicReference<Throwable> died) {
        if (died.get() != null) {
            return Optional.of("the Streams application died: " + died.get());
        }
        KafkaStreams.State state = streams.state();
        if (state == KafkaStreams.State.ERROR || state == KafkaStreams.State.PENDING_ERROR
                || state == KafkaStreams.State.NOT_RUNNING) {
            return Optional.of("the Streams application is " + state);
        }
        return Optional.empty();
    }

    /**
     * Settings that make the output a deterministic function of the input:
     * no record cache (every update is forwarded, none merged between commits)
     * unless {@code --cache-max-bytes} asks for one (table-table-join-cached),
     * and one thread; a short commit interval only makes the run quicker.
     * {@code --dlq TOPIC} (dead-letter-queue, processing-dead-letters) skips
     * records that fail to deserialize or to be processed and sends them to
     * that topic.
     */
    private static Properties config(Args args, String bootstrap, String appId) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG,
                Long.parseLong(args.optional("cache-max-bytes", "0")));
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args.optional("state-dir", System.getProperty("java.io.tmpdir")));
        // Left and outer stream-stream joins emit the records left without a
        // match at most once a second of wall-clock time by default; at every
        // record, the output no longer depends on how fast the run goes.
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX, 0L);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
                args.optional("processing-guarantee", StreamsConfig.AT_LEAST_ONCE));
        // A mixed group (Kafka Streams and kstreams sharing one streams
        // group): the streams protocol, and each side's endpoint names it.
        String groupProtocol = args.optional("group-protocol", null);
        if (groupProtocol != null) {
            props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, groupProtocol);
        }
        String idle = args.optional("max-task-idle-ms", null);
        if (idle != null) {
            props.put(StreamsConfig.MAX_TASK_IDLE_MS_CONFIG, Long.parseLong(idle));
        }
        String server = args.optional("application-server", null);
        if (server != null) {
            props.put(StreamsConfig.APPLICATION_SERVER_CONFIG, server);
        }
        // The generators stamp their records in 2023: with the default extra
        // day a windowed changelog's records are past retention at once and
        // the broker's cleaner deletes them while the run compares them.
        props.put(StreamsConfig.WINDOW_STORE_CHANGE_LOG_ADDITIONAL_RETENTION_MS_CONFIG,
                WINDOWED_CHANGELOG_EXTRA_RETENTION_MS);
        String dlq = args.optional("dlq", null);
        if (dlq != null) {
            props.put(StreamsConfig.ERRORS_DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG, dlq);
            props.put(StreamsConfig.DESERIALIZATION_EXCEPTION_HANDLER_CLASS_CONFIG,
                    LogAndContinueExceptionHandler.class);
            props.put(StreamsConfig.PROCESSING_EXCEPTION_HANDLER_CLASS_CONFIG,
                    LogAndContinueProcessingExceptionHandler.class);
        }
        return props;
    }
}
