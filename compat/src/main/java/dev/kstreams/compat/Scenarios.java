package dev.kstreams.compat;

import java.util.Arrays;
import java.util.Locale;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The reference topologies. Each one is mirrored by a scenario of the same name
 * in xtask/src/compat/scenario.rs (input generator and expected output) and
 * by the kstreams app in compat/kstreams; change them together.
 */
final class Scenarios {
    /** filter-map keeps the values that contain this character. */
    static final char FILTER_CHAR = 'a';

    private Scenarios() {}

    static Topology build(String name, String input, String output) throws HarnessException {
        return switch (name) {
            case "wordcount" -> wordcount(input, output);
            case "filter-map" -> filterMap(input, output);
            default -> throw new HarnessException("unknown scenario " + name + " (wordcount, filter-map)");
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
}
