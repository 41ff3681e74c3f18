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
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed.BufferConfig;
import org.apache.kafka.streams.kstream.Suppressed;
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
    /** stream-stream-join's window: the largest time difference and the grace period. */
    static final Duration JOIN_DIFFERENCE = Duration.ofSeconds(3);
    static final Duration JOIN_GRACE = Duration.ofSeconds(2);

    private Scenarios() {}

    static Topology build(String name, String input, String output) throws HarnessException {
        return switch (name) {
            case "wordcount" -> wordcount(input, output);
            case "filter-map" -> filterMap(input, output);
            case "windowed-count" -> windowedCount(input, output);
            case "table-aggregate" -> tableAggregate(input, output);
            case "stream-table-join" -> streamTableJoin(inputs(input, name), output);
            case "table-table-join" -> tableTableJoin(inputs(input, name), output, false);
            case "table-table-outer-join" -> tableTableJoin(inputs(input, name), output, true);
            case "stream-stream-join" -> streamStreamJoin(inputs(input, name), output);
            default -> throw new HarnessException("unknown scenario " + name + " (wordcount, filter-map, "
                    + "windowed-count, table-aggregate, stream-table-join, table-table-join, "
                    + "table-table-outer-join, stream-stream-join)");
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

    /** The two input topics of a join scenario, given as {@code first,second}. */
    private static String[] inputs(String input, String name) throws HarnessException {
        String[] topics = input.split(",");
        if (topics.length != 2) {
            throw new HarnessException(name + " reads two topics, --input FIRST,SECOND; got " + input);
        }
        return topics;
    }

    private static String orNull(String value) {
        return value == null ? "null" : value;
    }

    /** Orders (key: customer) left-joined with the customers table: {@code order|name-or-null}. */
    static Topology streamTableJoin(String[] inputs, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table(inputs[0], Consumed.with(Serdes.String(), Serdes.String()));
        builder.stream(inputs[1], Consumed.with(Serdes.String(), Serdes.String()))
                .leftJoin(customers, (order, name) -> order + "|" + orNull(name))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    /** Two tables joined inner or outer, {@code left|right}; deletes become tombstones. */
    static Topology tableTableJoin(String[] inputs, String output, boolean outer) {
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> left = builder.table(inputs[0], Consumed.with(Serdes.String(), Serdes.String()));
        KTable<String, String> right = builder.table(inputs[1], Consumed.with(Serdes.String(), Serdes.String()));
        KTable<String, String> joined = outer
                ? left.outerJoin(right, (l, r) -> orNull(l) + "|" + orNull(r))
                : left.join(right, (l, r) -> l + "|" + r);
        joined.toStream().to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    /**
     * Two streams left-joined within {@link #JOIN_DIFFERENCE} and a grace of
     * {@link #JOIN_GRACE}: {@code left|right}, and {@code left|null} once the
     * window of a left record without a match has closed.
     */
    static Topology streamStreamJoin(String[] inputs, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> left = builder.stream(inputs[0], Consumed.with(Serdes.String(), Serdes.String()));
        KStream<String, String> right = builder.stream(inputs[1], Consumed.with(Serdes.String(), Serdes.String()));
        left.leftJoin(right, (l, r) -> l + "|" + orNull(r),
                        JoinWindows.ofTimeDifferenceAndGrace(JOIN_DIFFERENCE, JOIN_GRACE),
                        StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String()))
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
