package dev.kstreams.compat;

import com.sun.management.OperatingSystemMXBean;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.processor.StateRestoreListener;

/**
 * {@code bench WORKLOAD}: the Kafka Streams side of {@code cargo xtask bench
 * compare}. Mirrors benches/compare/apps.rs (the kstreams side) workload by
 * workload, with Kafka Streams' default configuration apart from the settings
 * both sides share (threads, guarantee, the at-least-once commit interval,
 * state directory). Prints {@code READY} once RUNNING and one {@code DONE}
 * line of figures when the group has committed the whole input, as
 * benches/compare/progress.rs does, then exits without closing ({@code --leave
 * true}: closes first, leaving the group).
 *
 * <p>{@code restore} runs the count's topology on the state the count left in
 * its changelog (xtask deletes the local state before): {@code DONE} once it
 * serves again (RUNNING, and a {@link StateRestoreListener} has seen the
 * restoration of {@code --restore-partitions} changelog partitions end), with
 * the records restored; then {@code CAUGHT_UP} once the group has committed
 * {@code --then-target} input records (the records xtask feeds after the
 * restore), as benches/compare/apps.rs does.
 *
 * <pre>
 * bench WORKLOAD --bootstrap B --app-id A --input T [--table T2] --output O
 *       --threads N --state-dir D [--target RECORDS] [--set KEY=VALUE ...]
 *       [--leave true] [--restore-partitions P --then-target RECORDS]
 *       [--rocksdb-bound BYTES]
 * </pre>
 *
 * <p>{@code --rocksdb-bound BYTES}: every RocksDB store shares one block cache and
 * write buffer manager bounded to BYTES ({@link BoundedMemoryRocksDBConfig}), as
 * kstreams' {@code kstreams.rocksdb.bounded.memory.bytes} does.
 */
final class Bench {
    /** benches/compare/apps.rs AT_LEAST_ONCE_COMMIT_MS. */
    private static final long AT_LEAST_ONCE_COMMIT_MS = 1_000;
    /** benches/compare/workload.rs WINDOW_SIZE_MS and DROPPED_MARK. */
    private static final Duration WINDOW_SIZE = Duration.ofMillis(60_000);
    private static final char DROPPED_MARK = '#';
    /** benches/compare/progress.rs STEADY_FROM. */
    private static final double STEADY_FROM = 0.25;
    /** benches/compare/apps.rs SERVING_CHECK. */
    private static final long SERVING_CHECK_MS = 2;

    private Bench() {}

    static void run(Args args) throws Exception {
        long started = System.nanoTime();
        String workload = args.positional(0, "workload");
        String bootstrap = args.required("bootstrap");
        String appId = args.required("app-id");
        String input = args.required("input");
        String table = args.optional("table", null);
        List<String> inputs = new ArrayList<>(List.of(input));
        if (table != null) {
            inputs.add(table);
        }
        Topology topology = topology(workload, input, table, args.required("output"));
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(args.required("threads")));
        props.put(StreamsConfig.STATE_DIR_CONFIG, args.required("state-dir"));
        if (workload.endsWith("-eos")) {
            props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        } else {
            props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, AT_LEAST_ONCE_COMMIT_MS);
        }
        String rocksdbBound = args.optional("rocksdb-bound", null);
        if (rocksdbBound != null) {
            props.put(StreamsConfig.ROCKSDB_CONFIG_SETTER_CLASS_CONFIG, BoundedMemoryRocksDBConfig.class);
            props.put(BoundedMemoryRocksDBConfig.BOUND_BYTES_CONFIG, Long.toString(Long.parseLong(rocksdbBound)));
        }
        for (String kv : args.all("set")) {
            String[] parts = kv.split("=", 2);
            if (parts.length != 2) {
                throw new HarnessException("--set wants KEY=VALUE, got " + kv);
            }
            props.put(parts[0], parts[1]);
        }
        String target = args.optional("target", null);

        AtomicReference<Throwable> died = new AtomicReference<>();
        try (Admin admin = Topics.admin(bootstrap)) {
            List<TopicPartition> partitions = admin.describeTopics(inputs).allTopicNames().get().values().stream()
                    .flatMap(d -> d.partitions().stream().map(p -> new TopicPartition(d.name(), p.partition())))
                    .collect(Collectors.toList());
            long end = target != null ? Long.parseLong(target)
                    : admin.listOffsets(partitions.stream().collect(Collectors.toMap(tp -> tp, tp -> OffsetSpec.latest())))
                            .all().get().values().stream().mapToLong(i -> i.offset()).sum();
            KafkaStreams streams = new KafkaStreams(topology, props);
            streams.setUncaughtExceptionHandler(e -> {
                died.set(e);
                return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            boolean restore = workload.equals("restore");
            streams.setStateListener((now, before) -> {
                if (now == KafkaStreams.State.RUNNING && !restore) {
                    System.out.println("READY");
                    System.out.flush();
                }
            });
            RestoreTally restores = new RestoreTally();
            // count-eos: what a restart after a crash restored, in its DONE line.
            boolean countEos = workload.equals("count-eos");
            if (restore || countEos) {
                streams.setGlobalStateRestoreListener(restores);
            }
            streams.start();
            OperatingSystemMXBean os = (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
            if (restore) {
                int expected = Integer.parseInt(args.required("restore-partitions"));
                long thenTarget = Long.parseLong(args.required("then-target"));
                // Serving: RUNNING (every task restored) and every changelog
                // partition with records restored, as the listener tells.
                while (streams.state() != KafkaStreams.State.RUNNING || restores.ended() < expected) {
                    if (died.get() != null) {
                        throw new HarnessException("Kafka Streams died: " + died.get());
                    }
                    Thread.sleep(SERVING_CHECK_MS);
                }
                long now = System.nanoTime();
                System.out.printf("DONE wall_ms=%d cpu_ms=%d peak_rss_kib=%d restored=%d restore_span=%d"
                        + " restored_partitions=%d expected_partitions=%d%n",
                        (now - started) / 1_000_000, os.getProcessCpuTime() / 1_000_000, peakRssKib(),
                        restores.restored(), restores.span(), restores.started(), expected);
                System.out.flush();
                while (committed(admin, appId, partitions) < thenTarget) {
                    if (died.get() != null) {
                        throw new HarnessException("Kafka Streams died: " + died.get());
                    }
                    Thread.sleep(50);
                }
                System.out.println("CAUGHT_UP");
                System.out.flush();
                return;
            }
            long steadyAt = -1;
            long steadyCpu = 0;
            long steadyRecords = 0;
            while (true) {
                if (died.get() != null) {
                    throw new HarnessException("Kafka Streams died: " + died.get());
                }
                long done = committed(admin, appId, partitions);
                long now = System.nanoTime();
                if (steadyAt < 0 && done >= end * STEADY_FROM) {
                    steadyAt = now;
                    steadyCpu = os.getProcessCpuTime();
                    steadyRecords = done;
                }
                if (done >= end) {
                    if (rocksdbBound != null && !workload.startsWith("pass-through")) {
                        System.err.println(BoundedMemoryRocksDBConfig.summary());
                    }
                    long cpu = os.getProcessCpuTime();
                    System.out.printf("DONE wall_ms=%d cpu_ms=%d steady_records=%d steady_cpu_ms=%d steady_wall_ms=%d%s%n",
                            (now - started) / 1_000_000, cpu / 1_000_000, done - steadyRecords,
                            (cpu - steadyCpu) / 1_000_000, (now - steadyAt) / 1_000_000,
                            countEos ? " restored=" + restores.restored() : "");
                    System.out.flush();
                    if (args.optional("leave", "false").equals("true")) {
                        // So that the restore run after it joins at once.
                        streams.close(CloseOptions.groupMembershipOperation(
                                CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                                .withTimeout(Duration.ofSeconds(30)));
                    }
                    return;
                }
                Thread.sleep(50);
            }
        }
    }

    /** Input records the group has committed. */
    private static long committed(Admin admin, String appId, List<TopicPartition> partitions) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(appId).partitionsToOffsetAndMetadata().get();
        return partitions.stream()
                .mapToLong(tp -> committed.get(tp) == null ? 0 : committed.get(tp).offset())
                .sum();
    }

    /** VmHWM of /proc/self/status in KiB, as benches/compare/progress.rs reads it. */
    private static long peakRssKib() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmHWM:")) {
                return Long.parseLong(line.substring("VmHWM:".length()).replace("kB", "").trim());
            }
        }
        return 0;
    }

    /**
     * What the restore listener heard: per changelog partition (and store), the
     * records the restoration set out to read and, once ended, the records
     * restored (benches/compare/apps.rs RestoreTally).
     */
    private static final class RestoreTally implements StateRestoreListener {
        private final Map<String, Long> spans = new ConcurrentHashMap<>();
        private final Map<String, Long> ended = new ConcurrentHashMap<>();

        @Override
        public void onRestoreStart(TopicPartition partition, String store, long startingOffset, long endingOffset) {
            spans.put(store + "@" + partition, endingOffset - startingOffset);
        }

        @Override
        public void onBatchRestored(TopicPartition partition, String store, long batchEndOffset, long numRestored) {}

        @Override
        public void onRestoreEnd(TopicPartition partition, String store, long totalRestored) {
            ended.put(store + "@" + partition, totalRestored);
        }

        int ended() {
            return ended.size();
        }

        int started() {
            return spans.size();
        }

        long restored() {
            return ended.values().stream().mapToLong(Long::longValue).sum();
        }

        long span() {
            return spans.values().stream().mapToLong(Long::longValue).sum();
        }
    }

    private static Topology topology(String workload, String input, String table, String output)
            throws HarnessException {
        StreamsBuilder builder = new StreamsBuilder();
        Consumed<String, String> strings = Consumed.with(Serdes.String(), Serdes.String());
        KStream<String, String> stream = builder.stream(input, strings);
        switch (workload) {
            case "pass-through", "pass-through-eos" -> stream
                    .filter((k, v) -> v.isEmpty() || v.charAt(0) != DROPPED_MARK)
                    .mapValues(v -> v.toUpperCase(java.util.Locale.ROOT))
                    .to(output, Produced.with(Serdes.String(), Serdes.String()));
            case "count", "count-eos", "restore" -> stream.groupByKey().count().toStream()
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
            case "window-count" -> stream.groupByKey()
                    .windowedBy(TimeWindows.ofSizeWithNoGrace(WINDOW_SIZE))
                    .count()
                    .toStream()
                    .to(output, Produced.with(
                            WindowedSerdes.timeWindowedSerdeFrom(String.class, WINDOW_SIZE.toMillis()),
                            Serdes.Long()));
            case "join" -> {
                if (table == null) {
                    throw new HarnessException("join needs --table");
                }
                KTable<String, String> customers = builder.table(table, strings);
                stream.leftJoin(customers, (v, c) -> v + "|" + (c == null ? "null" : c))
                        .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            default -> throw new HarnessException("unknown bench workload " + workload
                    + " (pass-through, pass-through-eos, count, count-eos, window-count, join, restore)");
        }
        return builder.build();
    }
}
