package dev.kstreams.compat;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.Suppressed.BufferConfig;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The reference topologies. Each one is mirrored by a scenario of the same name
 * in xtask/src/compat/scenario.rs (input generator and expected output) and
 * by the kstreams app in compat/kstreams; change them together.
 */
final class Scenarios {
    /** filter-map keeps the values that contain this character. */
    static final char FILTER_CHAR = 'a';
    /** windowed-count's tumbling windows: their size and grace period. */
    static final Duration WINDOW_SIZE = Duration.ofSeconds(10);
    static final Duration WINDOW_GRACE = Duration.ofSeconds(5);

    private Scenarios() {}

    static Topology build(String name, String input, String output) throws HarnessException {
        return switch (name) {
            case "wordcount" -> wordcount(input, output);
            case "filter-map" -> filterMap(input, output);
            case "windowed-count" -> windowedCount(input, output);
            case "table-aggregate" -> tableAggregate(input, output);
            default -> throw new HarnessException("unknown scenario " + name
                    + " (wordcount, filter-map, windowed-count, table-aggregate)");
        };
    }

    /**
     * Lines to words (lower case, split on non-word characters), grouped by word
     * and counted. The store is named so that its internal topics are
     * {@code <app>-counts-repartition} and {@code <app>-counts-changelog}.
     */
    static Topology wordcount(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    /** Stateless: keep values containing {@link #FILTER_CHAR}, upper-case them. */
    static Topology filterMap(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .filter((key, value) -> value.indexOf(FILTER_CHAR) >= 0)
                .mapValues(value -> value.toUpperCase(Locale.ROOT))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    /**
     * Events per user counted in tumbling windows with a grace period; only
     * each window's final count is written, once stream time has passed its
     * end plus the grace (records later than that are dropped).
     */
    static Topology windowedCount(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(WINDOW_SIZE, WINDOW_GRACE))
                .count()
                .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()))
                .toStream()
                .to(output, Produced.with(
                        WindowedSerdes.timeWindowedSerdeFrom(String.class, WINDOW_SIZE.toMillis()),
                        Serdes.Long()));
        return builder.build();
    }

    /**
     * A table of user -> region (null values delete), grouped by region and
     * counted: a user moving counts down under the old region and up under
     * the new one; an update to the same region goes through the subtractor
     * and the adder in one step.
     */
    static Topology tableAggregate(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.table(input, Consumed.with(Serdes.String(), Serdes.String()))
                .groupBy((user, region) -> KeyValue.pair(region, region),
                        Grouped.with(Serdes.String(), Serdes.String()))
                .count()
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }
}
