package dev.kstreams.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * {@code await-idle}: waits until a Streams application has processed all of
 * its input, judged from the outside so that it works for either side.
 *
 * <p>The application is idle when its group has committed, for every partition
 * of its source topics, of its repartition topics ({@code <group>-*-repartition})
 * and of the other internal topics it reads ({@code <group>-*-topic}: a
 * foreign-key join's subscription registration and response topics), the end
 * offset of that partition. A committed input offset means the output of
 * those records was flushed first (at-least-once commits flush the producer), so
 * idle means the output is complete. Two checks in a row must agree, because a
 * repartition topic can grow between reading its end offset and the group's.
 */
final class AwaitIdle {
    private static final Duration CHECK_INTERVAL = Duration.ofMillis(300);

    private AwaitIdle() {}

    static void run(Args args) throws Exception {
        List<String> topics = Arrays.asList(args.required("topics").split(","));
        Duration timeout = Duration.ofSeconds(Long.parseLong(args.optional("timeout-secs", "120")));
        try (Admin admin = Topics.admin(args.required("bootstrap"))) {
            await(admin, args.required("group"), topics, timeout, Optional::empty);
        }
    }

    /**
     * Returns when the group is idle; throws on timeout or when {@code failure}
     * reports that the application died.
     */
    static void await(Admin admin, String group, List<String> sourceTopics, Duration timeout,
            Supplier<Optional<String>> failure) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        int idleChecks = 0;
        String lag = "";
        while (idleChecks < 2) {
            Optional<String> failed = failure.get();
            if (failed.isPresent()) {
                throw new HarnessException(failed.get());
            }
            if (System.nanoTime() > deadline) {
                throw new HarnessException("timed out after " + timeout.toSeconds() + " s waiting for group "
                        + group + " to process its input; lag: " + lag);
            }
            Thread.sleep(CHECK_INTERVAL.toMillis());
            lag = lag(admin, group, sourceTopics);
            idleChecks = lag.isEmpty() ? idleChecks + 1 : 0;
        }
    }

    /** Partitions whose committed offset is behind the end, as text; empty when none. */
    private static String lag(Admin admin, String group, List<String> sourceTopics) throws Exception {
        List<String> topics = new ArrayList<>(sourceTopics);
        admin.listTopics().names().get().stream()
                .filter(t -> t.startsWith(group + "-") && (t.endsWith("-repartition") || t.endsWith("-topic")))
                .forEach(topics::add);
        Map<TopicPartition, OffsetSpec> latest = admin.describeTopics(topics).allTopicNames().get().values().stream()
                .flatMap(d -> d.partitions().stream().map(p -> new TopicPartition(d.name(), p.partition())))
                .collect(Collectors.toMap(tp -> tp, tp -> OffsetSpec.latest()));
        Map<TopicPartition, ListOffsetsResultInfo> end = admin.listOffsets(latest).all().get();
        Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        return end.entrySet().stream()
                .filter(e -> e.getValue().offset() > committedOffset(committed, e.getKey()))
                .map(e -> e.getKey() + " " + committedOffset(committed, e.getKey()) + "/" + e.getValue().offset())
                .sorted()
                .collect(Collectors.joining(", "));
    }

    private static long committedOffset(Map<TopicPartition, OffsetAndMetadata> committed, TopicPartition tp) {
        OffsetAndMetadata offset = committed.get(tp);
        return offset == null ? 0 : offset.offset();
    }
}
