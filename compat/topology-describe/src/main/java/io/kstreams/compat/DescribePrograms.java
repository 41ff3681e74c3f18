/*
 * Ground-truth generator for Topology.describe() text.
 *
 * Regenerate the fixtures (run from the repository root; needs only Java 17 + Maven, no broker):
 *
 *   mvn -q -f compat/topology-describe/pom.xml compile exec:java -Dexec.args=crates/kstreams-dsl/tests/fixtures/describe
 *
 * Each program below is built with real Apache Kafka Streams (version in pom.xml) and
 * builder.build().describe().toString() (or topology.describe().toString() for the
 * Processor API program) is written byte-for-byte to <outdir>/<name>.txt. It also writes
 * <outdir>/dsl_programs.jsonl: per program, the node-level operations the DSL performed on
 * InternalTopologyBuilder in insertion order (read by reflection) plus the describe text, in the
 * format of RandomPapiTopologies (checked by compat/topology-describe/describe_ref.py); the
 * source of a global store carries "global":true.
 *
 * topic_extractor.txt differs on every run: a lambda's toString() is JVM-generated.
 *
 * The code between "// BEGIN <name>" and "// END <name>" is quoted verbatim in
 * crates/kstreams-dsl/tests/fixtures/describe/PROGRAMS.md; keep them in sync.
 */
package io.kstreams.compat;

import java.io.IOException;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import java.util.regex.Pattern;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Printed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.ProcessorSupplier;
import org.apache.kafka.streams.processor.RecordContext;
import org.apache.kafka.streams.processor.TopicNameExtractor;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.Stores;

public final class DescribePrograms {

    /** A pass-through processor; its behaviour is irrelevant to describe(). */
    static final class PassThrough implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> context;

        @Override
        public void init(final ProcessorContext<String, String> context) {
            this.context = context;
        }

        @Override
        public void process(final Record<String, String> record) {
            context.forward(record);
        }
    }

    static Topology filterMapTo() {
        // BEGIN filter_map_to
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("input")
            .filter((k, v) -> v != null)
            .mapValues(v -> v.toUpperCase())
            .to("output");
        return builder.build();
        // END filter_map_to
    }

    static Topology twoTopicsFlatMap() {
        // BEGIN two_topics_flat_map
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(List.of("a", "b"))
            .flatMapValues(v -> List.of(v.split(" ")))
            .selectKey((k, v) -> v)
            .peek((k, v) -> { })
            .to("out");
        return builder.build();
        // END two_topics_flat_map
    }

    static Topology patternSource() {
        // BEGIN pattern_source
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(Pattern.compile("in-.*"))
            .map((k, v) -> KeyValue.pair(v, k))
            .foreach((k, v) -> { });
        return builder.build();
        // END pattern_source
    }

    static Topology splitMerge() {
        // BEGIN split_merge
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> input = builder.stream("input");
        Map<String, KStream<String, String>> branches = input
            .split(Named.as("branch-"))
            .branch((k, v) -> v.startsWith("a"), Branched.as("a"))
            .branch((k, v) -> v.startsWith("b"), Branched.as("b"))
            .defaultBranch(Branched.as("other"));
        branches.get("branch-a")
            .merge(branches.get("branch-b"))
            .filterNot((k, v) -> v.isEmpty())
            .to("merged");
        branches.get("branch-other").to("other");
        return builder.build();
        // END split_merge
    }

    static Topology repartition() {
        // BEGIN repartition
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("input")
            .selectKey((k, v) -> v)
            .repartition()
            .mapValues(v -> v.toUpperCase())
            .to("output");
        return builder.build();
        // END repartition
    }

    static Topology namedRepartition() {
        // BEGIN named_repartition
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("input")
            .map((k, v) -> KeyValue.pair(v, k))
            .repartition(Repartitioned.as("by-user"))
            .filter((k, v) -> v != null)
            .to("output");
        return builder.build();
        // END named_repartition
    }

    static Topology namedOperators() {
        // BEGIN named_operators
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream("input", Consumed.<String, String>as("my-source"))
            .filter((k, v) -> v != null, Named.as("only-valid"))
            .mapValues(v -> v.toUpperCase(), Named.as("upper"))
            .to("output", Produced.as("my-sink"));
        return builder.build();
        // END named_operators
    }

    static Topology processWithStore() {
        // BEGIN process_with_store
        StreamsBuilder builder = new StreamsBuilder();
        builder.addStateStore(Stores.keyValueStoreBuilder(
            Stores.inMemoryKeyValueStore("counts"), Serdes.String(), Serdes.Long()));
        ProcessorSupplier<String, String, String, String> supplier = PassThrough::new;
        builder.<String, String>stream("input")
            .process(supplier, "counts")
            .to("output");
        return builder.build();
        // END process_with_store
    }

    static Topology topicExtractor() {
        // BEGIN topic_extractor
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("input")
            .mapValues(v -> v.toUpperCase())
            .to((k, v, ctx) -> "out-" + k);
        return builder.build();
        // END topic_extractor
    }

    /**
     * A TopicNameExtractor whose toString() is fixed, so that the "extractor class: ..." text is
     * deterministic (a lambda's toString() contains a JVM-generated class name and identity hash).
     */
    static final class OutPrefixExtractor implements TopicNameExtractor<String, String> {
        @Override
        public String extract(final String key, final String value, final RecordContext recordContext) {
            return "out-" + key;
        }

        @Override
        public String toString() {
            return "OutPrefixExtractor";
        }
    }

    static Topology topicExtractorNamed() {
        // BEGIN topic_extractor_named
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("input")
            .mapValues(v -> v.toUpperCase())
            .to(new OutPrefixExtractor());
        return builder.build();
        // END topic_extractor_named
    }

    static Topology printAndFlatMap() {
        // BEGIN print_and_flat_map
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("input")
            .flatMap((k, v) -> List.of(KeyValue.pair(k, v), KeyValue.pair(v, k)))
            .print(Printed.toSysOut());
        builder.<String, String>stream("other")
            .filter((k, v) -> v != null)
            .to("other-out");
        return builder.build();
        // END print_and_flat_map
    }

    static Topology topologyPapi() {
        // BEGIN topology_papi
        Topology topology = new Topology();
        topology.addSource("Source", "src-topic");
        topology.addProcessor("Process", (ProcessorSupplier<String, String, String, String>) PassThrough::new, "Source");
        topology.addStateStore(Stores.keyValueStoreBuilder(
            Stores.inMemoryKeyValueStore("Counts"), Serdes.String(), Serdes.Long()), "Process");
        topology.addSink("Sink", "sink-topic", "Process");
        return topology;
        // END topology_papi
    }

    static Topology mergeOfThree() {
        // BEGIN merge_of_three
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> a = builder.stream("a");
        KStream<String, String> b = builder.stream("b");
        KStream<String, String> c = builder.stream("c");
        a.merge(b)
            .merge(c)
            .mapValues(v -> v.toUpperCase())
            .to("out");
        return builder.build();
        // END merge_of_three
    }

    static Topology splitNoDefault() {
        // BEGIN split_no_default
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("input")
            .split()
            .branch((k, v) -> v.startsWith("x"), Branched.withConsumer(ks -> ks.to("x")))
            .branch((k, v) -> v.startsWith("y"), Branched.withConsumer(ks -> ks.to("y")))
            .noDefaultBranch();
        return builder.build();
        // END split_no_default
    }

    // ------------------------------------------------------------------ stateful DSL

    static Topology wordCount() {
        // BEGIN word_count
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("sentences")
            .flatMapValues(v -> List.of(v.split(" ")))
            .groupBy((k, v) -> v)
            .count()
            .toStream()
            .to("word-counts");
        return builder.build();
        // END word_count
    }

    static Topology wordCountMaterialized() {
        // BEGIN word_count_materialized
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("sentences")
            .flatMapValues(v -> List.of(v.split(" ")))
            .groupBy((k, v) -> v)
            .count(Materialized.as("counts"))
            .toStream()
            .to("word-counts");
        return builder.build();
        // END word_count_materialized
    }

    static Topology selectKeyGroupByKey() {
        // BEGIN select_key_group_by_key
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("input")
            .selectKey((k, v) -> v)
            .groupByKey()
            .count()
            .toStream()
            .to("output");
        return builder.build();
        // END select_key_group_by_key
    }

    static Topology selectKeyGroupByKeyGrouped() {
        // BEGIN select_key_group_by_key_grouped
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("input")
            .selectKey((k, v) -> v)
            .groupByKey(Grouped.as("by-value"))
            .count()
            .toStream()
            .to("output");
        return builder.build();
        // END select_key_group_by_key_grouped
    }

    static Topology streamAggregations() {
        // BEGIN stream_aggregations
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> grouped = builder.<String, String>stream("input").groupByKey();
        grouped.count().toStream().to("counts");
        grouped.reduce((a, b) -> a + b).toStream().to("reduced");
        grouped.aggregate(() -> 0L, (k, v, agg) -> agg + v.length()).toStream().to("lengths");
        return builder.build();
        // END stream_aggregations
    }

    static Topology streamAggregationsNamed() {
        // BEGIN stream_aggregations_named
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> grouped = builder.<String, String>stream("input").groupByKey();
        grouped.count(Named.as("count-op")).toStream().to("counts");
        grouped.reduce((a, b) -> a + b, Named.as("reduce-op"), Materialized.with(Serdes.String(), Serdes.String()))
            .toStream().to("reduced");
        grouped.aggregate(() -> 0L, (k, v, agg) -> agg + v.length(), Named.as("aggregate-op"),
                Materialized.with(Serdes.String(), Serdes.Long()))
            .toStream().to("lengths");
        return builder.build();
        // END stream_aggregations_named
    }

    static Topology streamAggregationsMaterialized() {
        // BEGIN stream_aggregations_materialized
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> grouped = builder.<String, String>stream("input")
            .groupBy((k, v) -> v);
        grouped.count(Materialized.as("count-store")).toStream().to("counts");
        grouped.reduce((a, b) -> a + b, Materialized.as("reduce-store")).toStream().to("reduced");
        grouped.aggregate(() -> 0L, (k, v, agg) -> agg + v.length(), Materialized.as("aggregate-store"))
            .toStream().to("lengths");
        return builder.build();
        // END stream_aggregations_materialized
    }

    static Topology streamAggregationsNamedMaterialized() {
        // BEGIN stream_aggregations_named_materialized
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> grouped = builder.<String, String>stream("input").groupByKey();
        grouped.count(Named.as("count-op"), Materialized.as("count-store")).toStream().to("counts");
        grouped.reduce((a, b) -> a + b, Named.as("reduce-op"), Materialized.as("reduce-store"))
            .toStream().to("reduced");
        grouped.aggregate(() -> 0L, (k, v, agg) -> agg + v.length(), Named.as("aggregate-op"),
                Materialized.as("aggregate-store"))
            .toStream().to("lengths");
        return builder.build();
        // END stream_aggregations_named_materialized
    }

    static Topology namedGroupingTwoAggregations() {
        // BEGIN named_grouping_two_aggregations
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> grouped = builder.<String, String>stream("input")
            .groupBy((k, v) -> v, Grouped.as("by-value"));
        grouped.count().toStream().to("counts");
        grouped.reduce((a, b) -> a + b).toStream().to("reduced");
        return builder.build();
        // END named_grouping_two_aggregations
    }

    static Topology tableOps() {
        // BEGIN table_ops
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>table("users")
            .filter((k, v) -> v != null)
            .filterNot((k, v) -> v.isEmpty())
            .mapValues(v -> v.toUpperCase())
            .toStream()
            .to("output");
        return builder.build();
        // END table_ops
    }

    static Topology tableMaterialized() {
        // BEGIN table_materialized
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>table("users", Materialized.as("users-store"))
            .filter((k, v) -> v != null, Materialized.as("filtered"))
            .mapValues(v -> v.toUpperCase(), Named.as("upper"), Materialized.as("upper-store"))
            .toStream(Named.as("to-stream"))
            .to("output");
        return builder.build();
        // END table_materialized
    }

    static Topology tableConsumedNamed() {
        // BEGIN table_consumed_named
        StreamsBuilder builder = new StreamsBuilder();
        builder.table("users", Consumed.<String, String>as("users-source"))
            .filterNot((k, v) -> v.isEmpty(), Named.as("non-empty"))
            .mapValues(v -> v.length(), Materialized.with(Serdes.String(), Serdes.Integer()))
            .filter((k, v) -> v > 1, Materialized.with(Serdes.String(), Serdes.Integer()))
            .toStream()
            .to("output");
        return builder.build();
        // END table_consumed_named
    }

    static Topology streamToTable() {
        // BEGIN stream_to_table
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("input")
            .toTable()
            .filter((k, v) -> v != null)
            .toStream()
            .to("output");
        return builder.build();
        // END stream_to_table
    }

    static Topology streamToTableNamed() {
        // BEGIN stream_to_table_named
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("input")
            .toTable(Named.as("as-table"), Materialized.as("table-store"))
            .toStream()
            .to("output");
        return builder.build();
        // END stream_to_table_named
    }

    static Topology selectKeyToTable() {
        // BEGIN select_key_to_table
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("input")
            .selectKey((k, v) -> v)
            .toTable()
            .toStream()
            .to("output");
        return builder.build();
        // END select_key_to_table
    }

    static Topology selectKeyToTableNamed() {
        // BEGIN select_key_to_table_named
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("input")
            .selectKey((k, v) -> v)
            .toTable(Named.as("as-table"), Materialized.as("table-store"))
            .toStream()
            .to("output");
        return builder.build();
        // END select_key_to_table_named
    }

    static Topology tableGroupByCount() {
        // BEGIN table_group_by_count
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>table("users")
            .groupBy((k, v) -> KeyValue.pair(v, k))
            .count()
            .toStream()
            .to("output");
        return builder.build();
        // END table_group_by_count
    }

    static Topology tableGroupByReduce() {
        // BEGIN table_group_by_reduce
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>table("users")
            .groupBy((k, v) -> KeyValue.pair(v, k))
            .reduce((a, b) -> a + b, (a, b) -> a)
            .toStream()
            .to("output");
        return builder.build();
        // END table_group_by_reduce
    }

    static Topology tableGroupByAggregateNamed() {
        // BEGIN table_group_by_aggregate_named
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>table("users", Materialized.as("users-store"))
            .groupBy((k, v) -> KeyValue.pair(v, k), Grouped.as("by-region"))
            .aggregate(() -> 0L, (k, v, agg) -> agg + 1, (k, v, agg) -> agg - 1,
                Named.as("region-count"), Materialized.as("region-counts"))
            .toStream()
            .to("output");
        return builder.build();
        // END table_group_by_aggregate_named
    }

    static Topology tableGroupByReduceMaterialized() {
        // BEGIN table_group_by_reduce_materialized
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>table("users")
            .groupBy((k, v) -> KeyValue.pair(v, k))
            .reduce((a, b) -> a + b, (a, b) -> a, Materialized.as("reduced"))
            .toStream()
            .to("output");
        return builder.build();
        // END table_group_by_reduce_materialized
    }

    static Topology windowedCount() {
        // BEGIN windowed_count
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("clicks")
            .groupByKey()
            .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMinutes(5)))
            .count()
            .toStream()
            .to("windowed-counts");
        return builder.build();
        // END windowed_count
    }

    static Topology windowedCountNamed() {
        // BEGIN windowed_count_named
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("clicks")
            .groupBy((k, v) -> v)
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(5), Duration.ofMinutes(1))
                .advanceBy(Duration.ofMinutes(1)))
            .count(Named.as("hopping-count"), Materialized.as("hopping-counts"))
            .toStream()
            .to("windowed-counts");
        return builder.build();
        // END windowed_count_named
    }

    static Topology slidingCount() {
        // BEGIN sliding_count
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("clicks")
            .groupByKey()
            .windowedBy(SlidingWindows.ofTimeDifferenceWithNoGrace(Duration.ofMinutes(5)))
            .count()
            .toStream()
            .to("sliding-counts");
        return builder.build();
        // END sliding_count
    }

    static Topology sessionCount() {
        // BEGIN session_count
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("clicks")
            .groupByKey()
            .windowedBy(SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMinutes(5)))
            .count()
            .toStream()
            .to("session-counts");
        return builder.build();
        // END session_count
    }

    static Topology suppressWindowed() {
        // BEGIN suppress_windowed
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("clicks")
            .groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(5), Duration.ofMinutes(1)))
            .count()
            .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
            .toStream()
            .to("final-counts");
        return builder.build();
        // END suppress_windowed
    }

    static Topology suppressNamed() {
        // BEGIN suppress_named
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("clicks")
            .groupByKey()
            .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMinutes(5), Duration.ofMinutes(1)))
            .count(Materialized.as("sessions"))
            .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()).withName("final-sessions"))
            .toStream()
            .to("final-counts");
        return builder.build();
        // END suppress_named
    }

    static Topology cogroupTwo() {
        // BEGIN cogroup_two
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> clicks = builder.<String, String>stream("clicks").groupByKey();
        KGroupedStream<String, String> views = builder.<String, String>stream("views").groupByKey();
        clicks.<Long>cogroup((k, v, agg) -> agg + 1)
            .cogroup(views, (k, v, agg) -> agg + 10)
            .aggregate(() -> 0L)
            .toStream()
            .to("activity");
        return builder.build();
        // END cogroup_two
    }

    static Topology cogroupThreeWindowed() {
        // BEGIN cogroup_three_windowed
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> clicks = builder.<String, String>stream("clicks").groupByKey();
        KGroupedStream<String, String> views = builder.<String, String>stream("views").groupByKey();
        KGroupedStream<String, String> buys = builder.<String, String>stream("buys")
            .groupBy((k, v) -> v);
        clicks.<Long>cogroup((k, v, agg) -> agg + 1)
            .cogroup(views, (k, v, agg) -> agg + 10)
            .cogroup(buys, (k, v, agg) -> agg + 100)
            .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMinutes(5)))
            .aggregate(() -> 0L)
            .toStream()
            .to("activity");
        return builder.build();
        // END cogroup_three_windowed
    }

    static Topology cogroupNamed() {
        // BEGIN cogroup_named
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> clicks = builder.<String, String>stream("clicks").groupByKey();
        KGroupedStream<String, String> views = builder.<String, String>stream("views")
            .groupBy((k, v) -> v, Grouped.as("views-by-value"));
        clicks.<Long>cogroup((k, v, agg) -> agg + 1)
            .cogroup(views, (k, v, agg) -> agg + 10)
            .aggregate(() -> 0L, Named.as("activity"), Materialized.as("activity-store"))
            .toStream()
            .to("activity");
        return builder.build();
        // END cogroup_named
    }

    static Topology cogroupSession() {
        // BEGIN cogroup_session
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> clicks = builder.<String, String>stream("clicks").groupByKey();
        KGroupedStream<String, String> views = builder.<String, String>stream("views").groupByKey();
        clicks.<Long>cogroup((k, v, agg) -> agg + 1)
            .cogroup(views, (k, v, agg) -> agg + 10)
            .windowedBy(SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMinutes(5)))
            .aggregate(() -> 0L, (k, a, b) -> a + b)
            .toStream()
            .to("activity");
        return builder.build();
        // END cogroup_session
    }

    static Topology windowedReduceAggregate() {
        // BEGIN windowed_reduce_aggregate
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> grouped = builder.<String, String>stream("clicks").groupByKey();
        grouped.windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMinutes(5)))
            .reduce((a, b) -> a + b)
            .toStream()
            .to("tumbling-reduced");
        grouped.windowedBy(SlidingWindows.ofTimeDifferenceWithNoGrace(Duration.ofMinutes(5)))
            .aggregate(() -> 0L, (k, v, agg) -> agg + v.length(), Named.as("sliding-agg"),
                Materialized.as("sliding-store"))
            .toStream()
            .to("sliding-lengths");
        grouped.windowedBy(SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMinutes(5)))
            .reduce((a, b) -> a + b, Named.as("session-reduce"))
            .toStream()
            .to("session-reduced");
        grouped.windowedBy(SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMinutes(5)))
            .aggregate(() -> 0L, (k, v, agg) -> agg + v.length(), (k, a, b) -> a + b)
            .toStream()
            .to("session-lengths");
        return builder.build();
        // END windowed_reduce_aggregate
    }

    static Topology windowedEmitFinal() {
        // BEGIN windowed_emit_final
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("clicks")
            .groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(5), Duration.ofMinutes(1)))
            .emitStrategy(EmitStrategy.onWindowClose())
            .count()
            .toStream()
            .to("final-counts");
        return builder.build();
        // END windowed_emit_final
    }

    static Topology tableSuppressTimeLimit() {
        // BEGIN table_suppress_time_limit
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>table("users")
            .suppress(Suppressed.untilTimeLimit(Duration.ofMinutes(1),
                Suppressed.BufferConfig.maxRecords(100).emitEarlyWhenFull()))
            .toStream()
            .to("output");
        return builder.build();
        // END table_suppress_time_limit
    }

    static Topology tableGroupByNamedOps() {
        // BEGIN table_group_by_named_ops
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> users = builder.table("users");
        users.groupBy((k, v) -> KeyValue.pair(v, k))
            .count(Named.as("count-op"))
            .toStream()
            .to("counts");
        users.groupBy((k, v) -> KeyValue.pair(k, v))
            .reduce((a, b) -> a + b, (a, b) -> a, Named.as("reduce-op"),
                Materialized.with(Serdes.String(), Serdes.String()))
            .toStream()
            .to("reduced");
        return builder.build();
        // END table_group_by_named_ops
    }

    static Topology tableNamedGroupingTwoAggregations() {
        // BEGIN table_named_grouping_two_aggregations
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedTable<String, String> grouped = builder.<String, String>table("users")
            .groupBy((k, v) -> KeyValue.pair(v, k), Grouped.as("by-value"));
        grouped.count().toStream().to("counts");
        grouped.reduce((a, b) -> a + b, (a, b) -> a).toStream().to("reduced");
        return builder.build();
        // END table_named_grouping_two_aggregations
    }

    static Topology toTableFilterGroupBy() {
        // BEGIN to_table_filter_group_by
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream("input")
            .toTable()
            .filter((k, v) -> v != null)
            .groupBy((k, v) -> KeyValue.pair(v, k))
            .count()
            .toStream()
            .to("output");
        return builder.build();
        // END to_table_filter_group_by
    }

    // ------------------------------------------------------------------ joins

    static Topology streamTableJoin() {
        // BEGIN stream_table_join
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table("customers");
        builder.<String, String>stream("orders")
            .join(customers, (order, customer) -> order + "/" + customer)
            .to("enriched");
        return builder.build();
        // END stream_table_join
    }

    static Topology streamTableLeftJoin() {
        // BEGIN stream_table_left_join
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table("customers");
        builder.<String, String>stream("orders")
            .leftJoin(customers, (order, customer) -> order + "/" + customer)
            .to("enriched");
        return builder.build();
        // END stream_table_left_join
    }

    static Topology streamTableJoinNamed() {
        // BEGIN stream_table_join_named
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table("customers");
        builder.<String, String>stream("orders")
            .join(customers, (order, customer) -> order + "/" + customer, Joined.as("enrich"))
            .to("enriched");
        return builder.build();
        // END stream_table_join_named
    }

    static Topology streamTableLeftJoinNamed() {
        // BEGIN stream_table_left_join_named
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table("customers");
        builder.<String, String>stream("orders")
            .leftJoin(customers, (order, customer) -> order + "/" + customer, Joined.as("enrich"))
            .to("enriched");
        return builder.build();
        // END stream_table_left_join_named
    }

    static Topology streamTableJoinRepartitioned() {
        // BEGIN stream_table_join_repartitioned
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table("customers");
        builder.<String, String>stream("orders")
            .selectKey((k, v) -> v)
            .join(customers, (order, customer) -> order + "/" + customer)
            .to("enriched");
        return builder.build();
        // END stream_table_join_repartitioned
    }

    static Topology streamTableLeftJoinRepartitionedNamed() {
        // BEGIN stream_table_left_join_repartitioned_named
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table("customers");
        builder.<String, String>stream("orders")
            .selectKey((k, v) -> v)
            .leftJoin(customers, (order, customer) -> order + "/" + customer, Joined.as("enrich"))
            .to("enriched");
        return builder.build();
        // END stream_table_left_join_repartitioned_named
    }

    static Topology streamTableJoinVersionedGrace() {
        // BEGIN stream_table_join_versioned_grace
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table("customers",
            Materialized.<String, String>as(
                    Stores.persistentVersionedKeyValueStore("customers-versioned", Duration.ofMinutes(10)))
                .withKeySerde(Serdes.String())
                .withValueSerde(Serdes.String()));
        builder.<String, String>stream("orders")
            .join(customers, (order, customer) -> order + "/" + customer,
                Joined.<String, String, String>with(Serdes.String(), Serdes.String(), Serdes.String())
                    .withGracePeriod(Duration.ofMinutes(1)))
            .to("enriched");
        return builder.build();
        // END stream_table_join_versioned_grace
    }

    static Topology streamTableLeftJoinVersionedGraceNamed() {
        // BEGIN stream_table_left_join_versioned_grace_named
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> customers = builder.table("customers",
            Materialized.<String, String>as(
                    Stores.persistentVersionedKeyValueStore("customers-versioned", Duration.ofMinutes(10)))
                .withKeySerde(Serdes.String())
                .withValueSerde(Serdes.String()));
        builder.<String, String>stream("orders")
            .selectKey((k, v) -> v)
            .leftJoin(customers, (order, customer) -> order + "/" + customer,
                Joined.<String, String, String>with(Serdes.String(), Serdes.String(), Serdes.String())
                    .withName("enrich")
                    .withGracePeriod(Duration.ofMinutes(1)))
            .to("enriched");
        return builder.build();
        // END stream_table_left_join_versioned_grace_named
    }

    static Topology tableTableJoin() {
        // BEGIN table_table_join
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> users = builder.table("users");
        KTable<String, String> regions = builder.table("regions");
        users.join(regions, (u, r) -> u + "/" + r)
            .toStream()
            .to("joined");
        return builder.build();
        // END table_table_join
    }

    static Topology tableTableLeftJoin() {
        // BEGIN table_table_left_join
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> users = builder.table("users");
        KTable<String, String> regions = builder.table("regions");
        users.leftJoin(regions, (u, r) -> u + "/" + r)
            .toStream()
            .to("joined");
        return builder.build();
        // END table_table_left_join
    }

    static Topology tableTableOuterJoin() {
        // BEGIN table_table_outer_join
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> users = builder.table("users");
        KTable<String, String> regions = builder.table("regions");
        users.outerJoin(regions, (u, r) -> u + "/" + r)
            .toStream()
            .to("joined");
        return builder.build();
        // END table_table_outer_join
    }

    static Topology tableTableJoinNamed() {
        // BEGIN table_table_join_named
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> users = builder.table("users");
        KTable<String, String> regions = builder.table("regions");
        users.join(regions, (u, r) -> u + "/" + r, Named.as("user-regions"))
            .toStream()
            .to("joined");
        return builder.build();
        // END table_table_join_named
    }

    static Topology tableTableLeftJoinNamed() {
        // BEGIN table_table_left_join_named
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> users = builder.table("users");
        KTable<String, String> regions = builder.table("regions");
        users.leftJoin(regions, (u, r) -> u + "/" + r, Named.as("user-regions"))
            .toStream()
            .to("joined");
        return builder.build();
        // END table_table_left_join_named
    }

    static Topology tableTableOuterJoinNamed() {
        // BEGIN table_table_outer_join_named
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> users = builder.table("users");
        KTable<String, String> regions = builder.table("regions");
        users.outerJoin(regions, (u, r) -> u + "/" + r, Named.as("user-regions"))
            .toStream()
            .to("joined");
        return builder.build();
        // END table_table_outer_join_named
    }

    static Topology tableTableJoinNamedMaterialized() {
        // BEGIN table_table_join_named_materialized
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> users = builder.table("users");
        KTable<String, String> regions = builder.table("regions");
        users.join(regions, (u, r) -> u + "/" + r, Named.as("user-regions"),
                Materialized.as("user-regions-store"))
            .toStream()
            .to("joined");
        return builder.build();
        // END table_table_join_named_materialized
    }

    static Topology tableTableLeftJoinMaterializedUnnamed() {
        // BEGIN table_table_left_join_materialized_unnamed
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> users = builder.table("users");
        KTable<String, String> regions = builder.table("regions");
        users.leftJoin(regions, (u, r) -> u + "/" + r,
                Materialized.with(Serdes.String(), Serdes.String()))
            .toStream()
            .to("joined");
        return builder.build();
        // END table_table_left_join_materialized_unnamed
    }

    static Topology streamStreamJoin() {
        // BEGIN stream_stream_join
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> clicks = builder.stream("clicks");
        KStream<String, String> views = builder.stream("views");
        clicks.join(views, (c, v) -> c + "/" + v,
                JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMinutes(5)))
            .to("pairs");
        return builder.build();
        // END stream_stream_join
    }

    static Topology streamStreamLeftJoin() {
        // BEGIN stream_stream_left_join
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> clicks = builder.stream("clicks");
        KStream<String, String> views = builder.stream("views");
        clicks.leftJoin(views, (c, v) -> c + "/" + v,
                JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMinutes(5), Duration.ofMinutes(1)))
            .to("pairs");
        return builder.build();
        // END stream_stream_left_join
    }

    static Topology streamStreamOuterJoin() {
        // BEGIN stream_stream_outer_join
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> clicks = builder.stream("clicks");
        KStream<String, String> views = builder.stream("views");
        clicks.outerJoin(views, (c, v) -> c + "/" + v,
                JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMinutes(5), Duration.ofMinutes(1)))
            .to("pairs");
        return builder.build();
        // END stream_stream_outer_join
    }

    static Topology streamStreamJoinNamed() {
        // BEGIN stream_stream_join_named
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> clicks = builder.stream("clicks");
        KStream<String, String> views = builder.stream("views");
        clicks.join(views, (c, v) -> c + "/" + v,
                JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMinutes(5)),
                StreamJoined.<String, String, String>with(Serdes.String(), Serdes.String(), Serdes.String())
                    .withName("click-views"))
            .to("pairs");
        return builder.build();
        // END stream_stream_join_named
    }

    static Topology streamStreamLeftJoinStoreName() {
        // BEGIN stream_stream_left_join_store_name
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> clicks = builder.stream("clicks");
        KStream<String, String> views = builder.stream("views");
        clicks.leftJoin(views, (c, v) -> c + "/" + v,
                JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMinutes(5), Duration.ofMinutes(1)),
                StreamJoined.<String, String, String>with(Serdes.String(), Serdes.String(), Serdes.String())
                    .withStoreName("click-views-store"))
            .to("pairs");
        return builder.build();
        // END stream_stream_left_join_store_name
    }

    static Topology streamStreamOuterJoinNamedStoreName() {
        // BEGIN stream_stream_outer_join_named_store_name
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> clicks = builder.stream("clicks");
        KStream<String, String> views = builder.stream("views");
        clicks.outerJoin(views, (c, v) -> c + "/" + v,
                JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMinutes(5), Duration.ofMinutes(1)),
                StreamJoined.<String, String, String>with(Serdes.String(), Serdes.String(), Serdes.String())
                    .withName("click-views")
                    .withStoreName("click-views-store"))
            .to("pairs");
        return builder.build();
        // END stream_stream_outer_join_named_store_name
    }

    static Topology streamStreamJoinRepartitioned() {
        // BEGIN stream_stream_join_repartitioned
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> clicks = builder.<String, String>stream("clicks")
            .selectKey((k, v) -> v);
        KStream<String, String> views = builder.stream("views");
        clicks.join(views, (c, v) -> c + "/" + v,
                JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMinutes(5)))
            .to("pairs");
        return builder.build();
        // END stream_stream_join_repartitioned
    }

    static Topology streamStreamOuterJoinRepartitionedNamed() {
        // BEGIN stream_stream_outer_join_repartitioned_named
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> clicks = builder.stream("clicks");
        KStream<String, String> views = builder.<String, String>stream("views")
            .selectKey((k, v) -> v);
        clicks.outerJoin(views, (c, v) -> c + "/" + v,
                JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMinutes(5), Duration.ofMinutes(1)),
                StreamJoined.<String, String, String>with(Serdes.String(), Serdes.String(), Serdes.String())
                    .withName("click-views"))
            .to("pairs");
        return builder.build();
        // END stream_stream_outer_join_repartitioned_named
    }

    static Topology globalTableJoin() {
        // BEGIN global_table_join
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> orders = builder.stream("orders");
        GlobalKTable<String, String> products = builder.globalTable("products");
        orders.join(products, (k, v) -> v, (order, product) -> order + "/" + product)
            .to("enriched");
        return builder.build();
        // END global_table_join
    }

    static Topology globalTableLeftJoin() {
        // BEGIN global_table_left_join
        StreamsBuilder builder = new StreamsBuilder();
        GlobalKTable<String, String> products = builder.globalTable("products");
        builder.<String, String>stream("orders")
            .leftJoin(products, (k, v) -> v, (order, product) -> order + "/" + product)
            .to("enriched");
        return builder.build();
        // END global_table_left_join
    }

    static Topology globalTableJoinsNamedWithKey() {
        // BEGIN global_table_joins_named_with_key
        StreamsBuilder builder = new StreamsBuilder();
        GlobalKTable<String, String> products = builder.globalTable("products");
        KStream<String, String> orders = builder.stream("orders");
        orders.join(products, (k, v) -> v, (order, product) -> order + "/" + product,
                Named.as("with-product"))
            .leftJoin(products, (k, v) -> v, (k, order, product) -> k + ":" + order + "/" + product,
                Named.as("maybe-product"))
            .join(products, (k, v) -> v, (k, order, product) -> k + ":" + order)
            .to("enriched");
        return builder.build();
        // END global_table_joins_named_with_key
    }

    static Topology globalTablesInterleaved() {
        // BEGIN global_tables_interleaved
        StreamsBuilder builder = new StreamsBuilder();
        GlobalKTable<String, String> products = builder.globalTable("products",
            Consumed.as("products"), Materialized.as("products-store"));
        KStream<String, String> orders = builder.stream("orders");
        GlobalKTable<String, String> customers = builder.globalTable("customers");
        builder.<String, String>stream("returns")
            .leftJoin(products, (k, v) -> v, (ret, product) -> ret + "/" + product)
            .to("returns-enriched");
        orders.join(customers, (k, v) -> k, (order, customer) -> order + "/" + customer)
            .join(products, (k, v) -> v, (order, product) -> order + "/" + product)
            .to("orders-enriched");
        return builder.build();
        // END global_tables_interleaved
    }

    static Topology streamTablesCogroup() {
        // BEGIN stream_tables_cogroup
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> users = builder.table("users");
        KTable<String, String> regions = builder.table("regions");
        KGroupedStream<String, String> clicks = builder.<String, String>stream("clicks")
            .leftJoin(users, (click, user) -> click + "/" + user)
            .leftJoin(regions, (click, region) -> click + "/" + region)
            .groupByKey();
        KGroupedStream<String, String> views = builder.<String, String>stream("views").groupByKey();
        KGroupedStream<String, String> buys = builder.<String, String>stream("buys").groupByKey();
        clicks.<Long>cogroup((k, v, agg) -> agg + 1)
            .cogroup(views, (k, v, agg) -> agg + 10)
            .cogroup(buys, (k, v, agg) -> agg + 100)
            .aggregate(() -> 0L)
            .toStream()
            .to("activity");
        return builder.build();
        // END stream_tables_cogroup
    }

    static Map<String, Supplier<Topology>> programs() {
        final Map<String, Supplier<Topology>> programs = new LinkedHashMap<>();
        programs.put("filter_map_to", DescribePrograms::filterMapTo);
        programs.put("two_topics_flat_map", DescribePrograms::twoTopicsFlatMap);
        programs.put("pattern_source", DescribePrograms::patternSource);
        programs.put("split_merge", DescribePrograms::splitMerge);
        programs.put("repartition", DescribePrograms::repartition);
        programs.put("named_repartition", DescribePrograms::namedRepartition);
        programs.put("named_operators", DescribePrograms::namedOperators);
        programs.put("process_with_store", DescribePrograms::processWithStore);
        programs.put("topic_extractor", DescribePrograms::topicExtractor);
        programs.put("topic_extractor_named", DescribePrograms::topicExtractorNamed);
        programs.put("print_and_flat_map", DescribePrograms::printAndFlatMap);
        programs.put("topology_papi", DescribePrograms::topologyPapi);
        programs.put("merge_of_three", DescribePrograms::mergeOfThree);
        programs.put("split_no_default", DescribePrograms::splitNoDefault);
        programs.put("word_count", DescribePrograms::wordCount);
        programs.put("word_count_materialized", DescribePrograms::wordCountMaterialized);
        programs.put("select_key_group_by_key", DescribePrograms::selectKeyGroupByKey);
        programs.put("select_key_group_by_key_grouped", DescribePrograms::selectKeyGroupByKeyGrouped);
        programs.put("stream_aggregations", DescribePrograms::streamAggregations);
        programs.put("stream_aggregations_named", DescribePrograms::streamAggregationsNamed);
        programs.put("stream_aggregations_materialized", DescribePrograms::streamAggregationsMaterialized);
        programs.put("stream_aggregations_named_materialized", DescribePrograms::streamAggregationsNamedMaterialized);
        programs.put("named_grouping_two_aggregations", DescribePrograms::namedGroupingTwoAggregations);
        programs.put("table_ops", DescribePrograms::tableOps);
        programs.put("table_materialized", DescribePrograms::tableMaterialized);
        programs.put("table_consumed_named", DescribePrograms::tableConsumedNamed);
        programs.put("stream_to_table", DescribePrograms::streamToTable);
        programs.put("stream_to_table_named", DescribePrograms::streamToTableNamed);
        programs.put("select_key_to_table", DescribePrograms::selectKeyToTable);
        programs.put("select_key_to_table_named", DescribePrograms::selectKeyToTableNamed);
        programs.put("table_group_by_count", DescribePrograms::tableGroupByCount);
        programs.put("table_group_by_reduce", DescribePrograms::tableGroupByReduce);
        programs.put("table_group_by_aggregate_named", DescribePrograms::tableGroupByAggregateNamed);
        programs.put("table_group_by_reduce_materialized", DescribePrograms::tableGroupByReduceMaterialized);
        programs.put("windowed_count", DescribePrograms::windowedCount);
        programs.put("windowed_count_named", DescribePrograms::windowedCountNamed);
        programs.put("sliding_count", DescribePrograms::slidingCount);
        programs.put("session_count", DescribePrograms::sessionCount);
        programs.put("suppress_windowed", DescribePrograms::suppressWindowed);
        programs.put("suppress_named", DescribePrograms::suppressNamed);
        programs.put("cogroup_two", DescribePrograms::cogroupTwo);
        programs.put("cogroup_three_windowed", DescribePrograms::cogroupThreeWindowed);
        programs.put("cogroup_named", DescribePrograms::cogroupNamed);
        programs.put("cogroup_session", DescribePrograms::cogroupSession);
        programs.put("windowed_reduce_aggregate", DescribePrograms::windowedReduceAggregate);
        programs.put("windowed_emit_final", DescribePrograms::windowedEmitFinal);
        programs.put("table_suppress_time_limit", DescribePrograms::tableSuppressTimeLimit);
        programs.put("table_group_by_named_ops", DescribePrograms::tableGroupByNamedOps);
        programs.put("table_named_grouping_two_aggregations", DescribePrograms::tableNamedGroupingTwoAggregations);
        programs.put("to_table_filter_group_by", DescribePrograms::toTableFilterGroupBy);
        programs.put("stream_table_join", DescribePrograms::streamTableJoin);
        programs.put("stream_table_left_join", DescribePrograms::streamTableLeftJoin);
        programs.put("stream_table_join_named", DescribePrograms::streamTableJoinNamed);
        programs.put("stream_table_left_join_named", DescribePrograms::streamTableLeftJoinNamed);
        programs.put("stream_table_join_repartitioned", DescribePrograms::streamTableJoinRepartitioned);
        programs.put("stream_table_left_join_repartitioned_named", DescribePrograms::streamTableLeftJoinRepartitionedNamed);
        programs.put("stream_table_join_versioned_grace", DescribePrograms::streamTableJoinVersionedGrace);
        programs.put("stream_table_left_join_versioned_grace_named", DescribePrograms::streamTableLeftJoinVersionedGraceNamed);
        programs.put("table_table_join", DescribePrograms::tableTableJoin);
        programs.put("table_table_left_join", DescribePrograms::tableTableLeftJoin);
        programs.put("table_table_outer_join", DescribePrograms::tableTableOuterJoin);
        programs.put("table_table_join_named", DescribePrograms::tableTableJoinNamed);
        programs.put("table_table_left_join_named", DescribePrograms::tableTableLeftJoinNamed);
        programs.put("table_table_outer_join_named", DescribePrograms::tableTableOuterJoinNamed);
        programs.put("table_table_join_named_materialized", DescribePrograms::tableTableJoinNamedMaterialized);
        programs.put("table_table_left_join_materialized_unnamed", DescribePrograms::tableTableLeftJoinMaterializedUnnamed);
        programs.put("stream_stream_join", DescribePrograms::streamStreamJoin);
        programs.put("stream_stream_left_join", DescribePrograms::streamStreamLeftJoin);
        programs.put("stream_stream_outer_join", DescribePrograms::streamStreamOuterJoin);
        programs.put("stream_stream_join_named", DescribePrograms::streamStreamJoinNamed);
        programs.put("stream_stream_left_join_store_name", DescribePrograms::streamStreamLeftJoinStoreName);
        programs.put("stream_stream_outer_join_named_store_name", DescribePrograms::streamStreamOuterJoinNamedStoreName);
        programs.put("stream_stream_join_repartitioned", DescribePrograms::streamStreamJoinRepartitioned);
        programs.put("stream_stream_outer_join_repartitioned_named", DescribePrograms::streamStreamOuterJoinRepartitionedNamed);
        programs.put("global_table_join", DescribePrograms::globalTableJoin);
        programs.put("global_table_left_join", DescribePrograms::globalTableLeftJoin);
        programs.put("global_tables_interleaved", DescribePrograms::globalTablesInterleaved);
        programs.put("global_table_joins_named_with_key", DescribePrograms::globalTableJoinsNamedWithKey);
        programs.put("stream_tables_cogroup", DescribePrograms::streamTablesCogroup);
        return programs;
    }

    // ------------------------------------------------------------------ builder-op dump

    private static Object field(final Object o, final Class<?> c, final String name) throws ReflectiveOperationException {
        final Field f = c.getDeclaredField(name);
        f.setAccessible(true);
        return f.get(o);
    }

    private static String q(final String s) {
        final StringBuilder sb = new StringBuilder("\"");
        for (final char c : s.toCharArray()) {
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        return sb.append('"').toString();
    }

    private static String qList(final Collection<String> l) {
        final List<String> quoted = new ArrayList<>();
        for (final String s : l) {
            quoted.add(q(s));
        }
        return "[" + String.join(",", quoted) + "]";
    }

    /**
     * The node-level operations the DSL performed on InternalTopologyBuilder, in insertion order
     * (read by reflection from its nodeFactories LinkedHashMap), in the JSON format of
     * RandomPapiTopologies. Store connections are listed after the nodes (one op per processor and
     * store; a processor's stores are listed in its HashSet order, fine for one store per processor).
     */
    @SuppressWarnings("unchecked")
    static String builderOps(final Topology topology) throws ReflectiveOperationException {
        final Class<?> itb = Class.forName("org.apache.kafka.streams.processor.internals.InternalTopologyBuilder");
        final Class<?> nodeFactory = Class.forName("org.apache.kafka.streams.processor.internals.InternalTopologyBuilder$NodeFactory");
        final Object builder = field(topology, Topology.class, "internalTopologyBuilder");
        final Map<String, Object> factories = (Map<String, Object>) field(builder, itb, "nodeFactories");
        final Set<String> globalTopics = (Set<String>) field(builder, itb, "globalTopics");
        final List<String> ops = new ArrayList<>();
        final List<String> storeOps = new ArrayList<>();
        for (final Map.Entry<String, Object> e : factories.entrySet()) {
            final Object f = e.getValue();
            final String kind = f.getClass().getSimpleName();
            final String[] preds = (String[]) field(f, nodeFactory, "predecessors");
            if (kind.startsWith("Source")) {
                final Pattern pattern = (Pattern) field(f, f.getClass(), "pattern");
                final List<String> topics = (List<String>) field(f, f.getClass(), "topics");
                final boolean global = pattern == null && globalTopics.contains(topics.get(0));
                ops.add("{\"op\":\"source\",\"name\":" + q(e.getKey())
                    + (pattern != null ? ",\"pattern\":" + q(pattern.pattern()) : ",\"topics\":" + qList(topics))
                    + (global ? ",\"global\":true" : "") + "}");
            } else if (kind.startsWith("Sink")) {
                final Object extractor = field(f, f.getClass(), "topicExtractor");
                final String target = extractor.getClass().getSimpleName().equals("StaticTopicNameExtractor")
                    ? ",\"topic\":" + q((String) field(extractor, extractor.getClass(), "topicName"))
                    : ",\"extractor\":" + q(String.valueOf(extractor));
                ops.add("{\"op\":\"sink\",\"name\":" + q(e.getKey()) + target + ",\"parents\":" + qList(List.of(preds)) + "}");
            } else {
                ops.add("{\"op\":\"processor\",\"name\":" + q(e.getKey()) + ",\"parents\":" + qList(List.of(preds)) + "}");
                Class<?> c = f.getClass();
                while (!c.getSimpleName().equals("ProcessorNodeFactory")) {
                    c = c.getSuperclass();
                }
                for (final String store : (Set<String>) field(f, c, "stateStoreNames")) {
                    storeOps.add("{\"op\":\"store\",\"store\":" + q(store) + ",\"processors\":" + qList(List.of(e.getKey())) + "}");
                }
            }
        }
        ops.addAll(storeOps);
        return "[" + String.join(",", ops) + "]";
    }

    public static void main(final String[] args) throws IOException, ReflectiveOperationException {
        if (args.length != 1) {
            System.err.println("usage: DescribePrograms <outdir>");
            System.exit(2);
        }
        final Path outDir = Path.of(args[0]);
        Files.createDirectories(outDir);
        final StringBuilder jsonl = new StringBuilder();
        int caseNo = 0;
        for (final Map.Entry<String, Supplier<Topology>> e : programs().entrySet()) {
            final Topology topology = e.getValue().get();
            final String text = topology.describe().toString();
            final Path file = outDir.resolve(e.getKey() + ".txt");
            Files.write(file, text.getBytes(StandardCharsets.UTF_8));
            System.out.println("wrote " + file);
            jsonl.append("{\"case\":").append(caseNo++)
                .append(",\"program\":").append(q(e.getKey()))
                .append(",\"ops\":").append(builderOps(topology))
                .append(",\"describe\":").append(q(text)).append("}\n");
        }
        final Path opsFile = outDir.resolve("dsl_programs.jsonl");
        Files.write(opsFile, jsonl.toString().getBytes(StandardCharsets.UTF_8));
        System.out.println("wrote " + opsFile);
    }
}
