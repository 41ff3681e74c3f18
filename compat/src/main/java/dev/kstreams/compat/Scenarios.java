package dev.kstreams.compat;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.BiFunction;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed.BufferConfig;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TableJoined;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.processor.StreamPartitioner;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

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
    /** cogroup's aggregators: what a left and a right record add to the key's total. */
    static final long COGROUP_LEFT_STEP = 1;
    static final long COGROUP_RIGHT_STEP = 1000;
    /** session-windows' sessions: the inactivity gap that ends one and the grace period. */
    static final Duration SESSION_GAP = Duration.ofSeconds(5);
    static final Duration SESSION_GRACE = Duration.ofSeconds(2);
    /** sliding-windows' windows: the largest time difference (also the window size) and the grace period. */
    static final Duration SLIDING_DIFFERENCE = Duration.ofSeconds(5);
    static final Duration SLIDING_GRACE = Duration.ofSeconds(2);
    /** suppress-time-limit holds each key's latest count this long (stream time), for at most this many keys. */
    static final Duration SUPPRESS_TIME_LIMIT = Duration.ofSeconds(5);
    static final long SUPPRESS_MAX_RECORDS = 1000;
    /** versioned-join-grace: the customers store, its history retention and the join's grace period. */
    static final String VERSIONED_STORE = "customers-versioned";
    static final Duration VERSIONED_HISTORY = Duration.ofMinutes(5);
    static final Duration VERSIONED_JOIN_GRACE = Duration.ofSeconds(3);
    /** punctuation's store, and how often (stream time) it writes out every count. */
    static final String PUNCTUATED_STORE = "punctuated-counts";
    static final Duration PUNCTUATE_INTERVAL = Duration.ofSeconds(10);

    /** Every scenario name, in the order of {@link #build}. */
    static final List<String> NAMES = List.of(
            "wordcount", "filter-map", "windowed-count", "windowed-count-histogram", "table-aggregate", "stream-table-join",
            "table-table-join", "table-table-outer-join", "stream-stream-join", "cogroup", "session-windows",
            "sliding-windows", "foreign-key-join", "foreign-key-join-options", "global-table-join", "suppress-time-limit",
            "versioned-join-grace", "table-table-join-cached", "punctuation", "dead-letter-queue", "processing-dead-letters",
            "branch-merge", "stream-stream-outer-join", "session-suppress", "custom-partitioner",
            "processing-handler-by-type", "global-table-join-named", "suppress-logging-disabled",
            "table-table-join-materialized");

    private Scenarios() {}

    static Topology build(String name, String input, String output) throws HarnessException {
        return switch (name) {
            case "wordcount" -> wordcount(input, output);
            case "filter-map" -> filterMap(input, output);
            case "windowed-count" -> windowedCount(input, output);
            case "windowed-count-histogram" -> windowedCountHistogram(input, output);
            case "table-aggregate" -> tableAggregate(input, output);
            case "stream-table-join" -> streamTableJoin(inputs(input, name), output);
            // table-table-join-cached differs only in its run: with the record cache on.
            case "table-table-join", "table-table-join-cached" -> tableTableJoin(inputs(input, name), output, false);
            case "table-table-outer-join" -> tableTableJoin(inputs(input, name), output, true);
            case "table-table-join-materialized" -> tableTableJoinMaterialized(inputs(input, name), output);
            case "stream-stream-join" -> streamStreamJoin(inputs(input, name), output, false);
            case "cogroup" -> cogroup(inputs(input, name), output);
            case "session-windows" -> sessionWindows(input, output);
            case "session-suppress" -> sessionSuppress(input, output);
            case "custom-partitioner" -> customPartitioner(input, output);
            case "processing-handler-by-type" -> processingHandlerByType(input, output);
            case "sliding-windows" -> slidingWindows(input, output);
            case "foreign-key-join" -> foreignKeyJoin(inputs(input, name), output);
            case "foreign-key-join-options" -> foreignKeyJoinOptions(inputs(input, name), output);
            case "global-table-join" -> globalTableJoin(inputs(input, name), output);
            case "global-table-join-named" -> globalTableJoinNamed(inputs(input, name), output);
            case "suppress-time-limit" -> suppressTimeLimit(input, output);
            case "suppress-logging-disabled" -> suppressLoggingDisabled(input, output);
            case "versioned-join-grace" -> versionedJoinGrace(inputs(input, name), output);
            case "punctuation" -> punctuation(input, output);
            case "dead-letter-queue" -> deadLetterQueue(input, output);
            case "processing-dead-letters" -> processingDeadLetters(input, output);
            case "branch-merge" -> branchMerge(input, output);
            case "stream-stream-outer-join" -> streamStreamJoin(inputs(input, name), output, true);
            default -> throw new HarnessException(
                    "unknown scenario " + name + " (" + String.join(", ", NAMES) + ")");
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

    /** table-table-join-materialized's join name and result store. */
    static final String TABLE_JOIN_NAME = "left-right";
    static final String TABLE_JOIN_STORE = "left-right-store";

    /**
     * tableTableJoin (inner) named {@link #TABLE_JOIN_NAME} with its result
     * materialized in {@link #TABLE_JOIN_STORE} (the {@code Named,
     * Materialized} overload): the merge node writes the store's changelog.
     */
    static Topology tableTableJoinMaterialized(String[] inputs, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> left = builder.table(inputs[0], Consumed.with(Serdes.String(), Serdes.String()));
        KTable<String, String> right = builder.table(inputs[1], Consumed.with(Serdes.String(), Serdes.String()));
        left.join(right, (l, r) -> l + "|" + r, Named.as(TABLE_JOIN_NAME),
                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(TABLE_JOIN_STORE)
                                .withKeySerde(Serdes.String())
                                .withValueSerde(Serdes.String()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    /**
     * Two streams joined within {@link #JOIN_DIFFERENCE} and a grace of
     * {@link #JOIN_GRACE}. Left join: {@code left|right}, and {@code left|null}
     * once the window of a left record without a match has closed. Outer join:
     * the same, plus {@code null|right} for a right record without a match, so
     * the outer join store holds both sides' unmatched records.
     */
    static Topology streamStreamJoin(String[] inputs, String output, boolean outer) {
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> left = builder.stream(inputs[0], Consumed.with(Serdes.String(), Serdes.String()));
        KStream<String, String> right = builder.stream(inputs[1], Consumed.with(Serdes.String(), Serdes.String()));
        JoinWindows windows = JoinWindows.ofTimeDifferenceAndGrace(JOIN_DIFFERENCE, JOIN_GRACE);
        StreamJoined<String, String, String> serdes =
                StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String());
        KStream<String, String> joined = outer
                ? left.outerJoin(right, (l, r) -> orNull(l) + "|" + orNull(r), windows, serdes)
                : left.leftJoin(right, (l, r) -> l + "|" + orNull(r), windows, serdes);
        joined.to(output, Produced.with(Serdes.String(), Serdes.String()));
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
     * How many (user, window) pairs have each count: the windowed counts of
     * windowed-count, regrouped by count and counted. A window's first
     * update carries the initializer's 0 as its old value, which the
     * regrouping takes out of count "0" (a tombstone, as nothing is there).
     */
    static Topology windowedCountHistogram(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(WINDOW_SIZE, WINDOW_GRACE))
                .count()
                .groupBy((window, count) -> KeyValue.pair(Long.toString(count), window.key()),
                        Grouped.with(Serdes.String(), Serdes.String()))
                .count()
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
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

    /**
     * Two grouped streams aggregated into one table per key (KIP-150): a left
     * record adds {@link #COGROUP_LEFT_STEP}, a right one
     * {@link #COGROUP_RIGHT_STEP}, so the total tells which side each update
     * came from. One named store ({@code cogrouped}) serves both inputs.
     */
    static Topology cogroup(String[] inputs, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> left =
                builder.stream(inputs[0], Consumed.with(Serdes.String(), Serdes.String())).groupByKey();
        KGroupedStream<String, String> right =
                builder.stream(inputs[1], Consumed.with(Serdes.String(), Serdes.String())).groupByKey();
        left.<Long>cogroup((key, value, total) -> total + COGROUP_LEFT_STEP)
                .cogroup(right, (key, value, total) -> total + COGROUP_RIGHT_STEP)
                .aggregate(() -> 0L, Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("cogrouped")
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    /**
     * Events per key counted in session windows ({@link #SESSION_GAP},
     * grace {@link #SESSION_GRACE}). A record that bridges two sessions merges
     * them: the old sessions are retracted (a tombstone for each windowed key)
     * before the merged one's count is written.
     */
    static Topology sessionWindows(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .windowedBy(SessionWindows.ofInactivityGapAndGrace(SESSION_GAP, SESSION_GRACE))
                .count()
                .toStream()
                .to(output, Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), Serdes.Long()));
        return builder.build();
    }

    /**
     * session-windows' sessions, each written once, final: suppressed until
     * it closes (stream time past its end, the inactivity gap and the
     * grace). Sessions merged away before they close are never written.
     */
    static Topology sessionSuppress(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .windowedBy(SessionWindows.ofInactivityGapAndGrace(SESSION_GAP, SESSION_GRACE))
                .count()
                .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()))
                .toStream()
                .to(output, Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), Serdes.Long()));
        return builder.build();
    }

    /**
     * Events per key counted in sliding windows ({@link #SLIDING_DIFFERENCE},
     * grace {@link #SLIDING_GRACE}): each record creates and updates the
     * windows it falls in, every update written (cache off).
     */
    static Topology slidingWindows(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(SLIDING_DIFFERENCE, SLIDING_GRACE))
                .count()
                .toStream()
                .to(output, Produced.with(
                        WindowedSerdes.timeWindowedSerdeFrom(String.class, SLIDING_DIFFERENCE.toMillis()),
                        Serdes.Long()));
        return builder.build();
    }

    /**
     * The orders table (value: a customer id) left-joined with the customers
     * table on that foreign key (KIP-213): {@code customerId|name-or-null}.
     * Exercises the subscription and response topics and their wire layouts.
     */
    static Topology foreignKeyJoin(String[] inputs, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table(inputs[0], Consumed.with(Serdes.String(), Serdes.String()));
        KTable<String, String> orders = builder.table(inputs[1], Consumed.with(Serdes.String(), Serdes.String()));
        orders.leftJoin(customers, customerId -> customerId,
                        (customerId, name) -> customerId + "|" + orNull(name))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    /** foreign-key-join-options: the join's name, its result store, an order without a customer. */
    static final String FK_JOIN_NAME = "orders-with-customers";
    static final String FK_JOIN_STORE = "orders-with-customers-store";
    static final String NO_CUSTOMER = "none";

    /**
     * foreign-key-join with Kafka Streams 4.4's options: the foreign key read
     * from the key and the value (KIP-1104), null for an order whose value is
     * {@link #NO_CUSTOMER} (KIP-962: the left join keeps it, joined with
     * null), a {@code TableJoined} naming the internal topics and store after
     * {@link #FK_JOIN_NAME} with partitioners of the application's own on
     * both sides (both input topics are partitioned by the number N of the
     * keys {@code customer-N} and {@code order-N}, N % partitions), and the
     * result materialized in {@link #FK_JOIN_STORE}.
     */
    static Topology foreignKeyJoinOptions(String[] inputs, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table(inputs[0], Consumed.with(Serdes.String(), Serdes.String()));
        KTable<String, String> orders = builder.table(inputs[1], Consumed.with(Serdes.String(), Serdes.String()));
        BiFunction<String, String, String> customerOf =
                (orderId, customerId) -> NO_CUSTOMER.equals(customerId) ? null : customerId;
        orders.leftJoin(customers, customerOf,
                        (customerId, name) -> customerId + "|" + orNull(name),
                        TableJoined.<String, String>with(new ByKeyNumber(), new ByKeyNumber())
                                .withName(FK_JOIN_NAME),
                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(FK_JOIN_STORE)
                                .withKeySerde(Serdes.String())
                                .withValueSerde(Serdes.String()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    /**
     * foreign-key-join-options' partitioner of both tables: a key "kind-N"
     * to partition N % partitions. A subscription without a foreign key
     * comes with a null key: the default partitioner then.
     */
    static final class ByKeyNumber implements StreamPartitioner<String, Void> {
        @Override
        public Optional<Set<Integer>> partitions(String topic, String key, Void value, int partitions) {
            return key == null ? Optional.empty() : Optional.of(Set.of(userNumber(key) % partitions));
        }

        @SuppressWarnings("deprecation")
        public Integer partition(String topic, String key, Void value, int partitions) {
            return key == null ? null : userNumber(key) % partitions;
        }
    }

    /**
     * Orders (value: a customer id) left-joined with a global customers table
     * looked up by that id: {@code customerId|name-or-null}. The global table
     * is read in full before processing starts, so no co-partitioning is needed.
     */
    static Topology globalTableJoin(String[] inputs, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        GlobalKTable<String, String> customers =
                builder.globalTable(inputs[0], Consumed.with(Serdes.String(), Serdes.String()));
        builder.stream(inputs[1], Consumed.with(Serdes.String(), Serdes.String()))
                .leftJoin(customers, (orderId, customerId) -> customerId,
                        (customerId, name) -> customerId + "|" + orNull(name))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    /** global-table-join-named's join processor. */
    static final String GLOBAL_JOIN_NAME = "orders-with-names";

    /**
     * globalTableJoin with a named join processor ({@link #GLOBAL_JOIN_NAME},
     * the {@code Named} overload) and a joiner that sees the order's key
     * ({@code ValueJoinerWithKey}, KIP-149): {@code order|customer|name}.
     */
    static Topology globalTableJoinNamed(String[] inputs, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        GlobalKTable<String, String> customers =
                builder.globalTable(inputs[0], Consumed.with(Serdes.String(), Serdes.String()));
        builder.stream(inputs[1], Consumed.with(Serdes.String(), Serdes.String()))
                .leftJoin(customers, (orderId, customerId) -> customerId,
                        (orderId, customerId, name) -> orderId + "|" + customerId + "|" + orNull(name),
                        Named.as(GLOBAL_JOIN_NAME))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    /**
     * suppressTimeLimit with the buffer's changelog off
     * ({@code BufferConfig#withLoggingDisabled}): the count's changelog is
     * the only internal topic.
     */
    static Topology suppressLoggingDisabled(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .count()
                .suppress(Suppressed.untilTimeLimit(SUPPRESS_TIME_LIMIT,
                        BufferConfig.maxRecords(SUPPRESS_MAX_RECORDS).emitEarlyWhenFull().withLoggingDisabled()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    /**
     * Counts per key, each key's latest count held back until
     * {@link #SUPPRESS_TIME_LIMIT} of stream time has passed since its first
     * buffered update; a full buffer ({@link #SUPPRESS_MAX_RECORDS} keys)
     * emits its oldest early rather than failing.
     */
    static Topology suppressTimeLimit(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .count()
                .suppress(Suppressed.untilTimeLimit(SUPPRESS_TIME_LIMIT,
                        BufferConfig.maxRecords(SUPPRESS_MAX_RECORDS).emitEarlyWhenFull()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    /**
     * Orders left-joined with a versioned customers table (history
     * {@link #VERSIONED_HISTORY}) with a grace period of
     * {@link #VERSIONED_JOIN_GRACE} (KIP-923): orders wait in a buffer until
     * stream time passes them plus the grace, then each joins the customer's
     * name as of the order's timestamp, so out-of-order customer updates
     * still count. A join grace period requires the versioned store.
     */
    static Topology versionedJoinGrace(String[] inputs, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table(inputs[0], Consumed.with(Serdes.String(), Serdes.String()),
                Materialized.<String, String>as(
                                Stores.persistentVersionedKeyValueStore(VERSIONED_STORE, VERSIONED_HISTORY))
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.String()));
        builder.stream(inputs[1], Consumed.with(Serdes.String(), Serdes.String()))
                .leftJoin(customers, (order, name) -> order + "|" + orNull(name),
                        Joined.<String, String, String>with(Serdes.String(), Serdes.String(), Serdes.String())
                                .withGracePeriod(VERSIONED_JOIN_GRACE))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    /**
     * The Processor API inside the DSL: {@link PunctuatedCount} counts per key
     * in the store {@link #PUNCTUATED_STORE} and writes every count out on a
     * stream-time punctuation every {@link #PUNCTUATE_INTERVAL}.
     */
    static Topology punctuation(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.addStateStore(Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore(PUNCTUATED_STORE), Serdes.String(), Serdes.Long()));
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .process(PunctuatedCount::new, PUNCTUATED_STORE)
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    /**
     * Integer values written back as text. A value that is not exactly four
     * bytes fails the source's deserializer; the run sets the log-and-continue
     * handler and a dead letter queue (KIP-1034), so the record is skipped and
     * sent to the DLQ topic instead of stopping the application.
     */
    static Topology deadLetterQueue(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.Integer()))
                .mapValues(value -> Integer.toString(value))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    /**
     * Numbers as text doubled by a processor that throws on a multiple of
     * seven; the run sets the log-and-continue processing handler and a dead
     * letter queue (KIP-1034), so the record is skipped and sent to the DLQ
     * topic with the exception in its headers.
     */
    static Topology processingDeadLetters(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .process(DoubleOrReject::new)
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    /**
     * Numbers as text doubled by a processor that fails two ways
     * ({@link DoubleOrRejectByType}); the run sets the application's own
     * processing handler ({@link DeadLettersByType}), which dead-letters one
     * kind of failure and drops the other.
     */
    static Topology processingHandlerByType(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .process(DoubleOrRejectByType::new)
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    /**
     * A stream split three ways by value length modulo 3 (KIP-418), two
     * branches mapped, and merged back: exercises the branch names
     * ({@code split-three}, {@code split-one}, {@code split-other}) and the
     * processor names they give.
     */
    static Topology branchMerge(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        Map<String, KStream<String, String>> branches = builder
                .stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .split(Named.as("split-"))
                .branch((key, value) -> value.length() % 3 == 0,
                        Branched.withFunction(s -> s.mapValues(value -> "three:" + value), "three"))
                .branch((key, value) -> value.length() % 3 == 1, Branched.as("one"))
                .defaultBranch(Branched.withFunction(
                        s -> s.mapValues(value -> value.toUpperCase(Locale.ROOT)), "other"));
        branches.get("split-three")
                .merge(branches.get("split-one"))
                .merge(branches.get("split-other"))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    /** custom-partitioner's repartition topic and its partition count. */
    static final String PARTITIONED_BY_NUMBER = "by-user-number";
    static final int PARTITIONED_BY_NUMBER_PARTITIONS = 3;

    /**
     * Partitioners of the application's own on a repartition topic and on
     * the output: user-N's records go through a repartition topic of 3
     * partitions by N % 3 (not Kafka's hash of the key), then to the
     * output (6 partitions) by a multicast partitioner (KIP-837) that
     * drops users N % 7 == 0, copies users N % 7 == 1 to partitions
     * N % 3 and N % 3 + 3, sends users N % 7 == 2 to N % 3 + 3 and the
     * others to N % 3. One input partition keeps the repartition topic's
     * order the input's, and each output partition is written by one task.
     */
    static Topology customPartitioner(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .repartition(Repartitioned.with(Serdes.String(), Serdes.String())
                        .withName(PARTITIONED_BY_NUMBER)
                        .withNumberOfPartitions(PARTITIONED_BY_NUMBER_PARTITIONS)
                        .withStreamPartitioner(new ByUserNumber()))
                .to(output, Produced.with(Serdes.String(), Serdes.String())
                        .withStreamPartitioner(new UserCopies()));
        return builder.build();
    }

    /** N of a key "user-N". */
    static int userNumber(String key) {
        return Integer.parseInt(key.substring(key.indexOf('-') + 1));
    }

    /** custom-partitioner's repartition: partition N % partitions. */
    static final class ByUserNumber implements StreamPartitioner<String, String> {
        @Override
        public Optional<Set<Integer>> partitions(String topic, String key, String value, int partitions) {
            return Optional.of(Set.of(userNumber(key) % partitions));
        }

        @SuppressWarnings("deprecation")
        public Integer partition(String topic, String key, String value, int partitions) {
            return userNumber(key) % partitions;
        }
    }

    /** custom-partitioner's output: drops, multicasts or moves by N % 7. */
    static final class UserCopies implements StreamPartitioner<String, String> {
        @Override
        public Optional<Set<Integer>> partitions(String topic, String key, String value, int partitions) {
            int n = userNumber(key);
            int home = n % 3;
            return Optional.of(switch (n % 7) {
                case 0 -> Set.of();
                case 1 -> Set.of(home, home + 3);
                case 2 -> Set.of(home + 3);
                default -> Set.of(home);
            });
        }

        @SuppressWarnings("deprecation")
        public Integer partition(String topic, String key, String value, int partitions) {
            return null;
        }
    }
}
