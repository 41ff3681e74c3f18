/*
 * Random Processor-API topologies + their real describe() text, as JSON lines, for testing an
 * exact re-implementation of TopologyDescription.toString() (node order, "-->"/"<--" order,
 * sub-topology numbering, topic/store set order).
 *
 * Run from the repository root:
 *
 *   mvn -q -f compat/topology-describe/pom.xml compile exec:java \
 *       -Dexec.mainClass=io.kstreams.compat.RandomPapiTopologies \
 *       -Dexec.args="crates/kstreams-dsl/tests/fixtures/describe/papi_random.jsonl 300 42"
 *
 * args: <out.jsonl> <count> <seed>. Output is deterministic for a given count and seed.
 *
 * One JSON object per line:
 *   {"case":N,
 *    "ops":[ {"op":"source","name":..,"topics":[..]} | {"op":"source","name":..,"pattern":".."}
 *          | {"op":"processor","name":..,"parents":[..]} | {"op":"sink","name":..,"topic":..,"parents":[..]}
 *          | {"op":"store","store":..,"processors":[..]} ],
 *    "describe":"<exact toString() text>"}
 * The ops are applied in order to a new Topology (addSource / addProcessor / addSink /
 * addStateStore(storeBuilder, processors...)).
 *
 * compat/topology-describe/describe_ref.py is a reference implementation of the rules that
 * reproduces every "describe" value of this file (python3 describe_ref.py <file.jsonl>).
 */
package io.kstreams.compat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.regex.Pattern;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorSupplier;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.Stores;

public final class RandomPapiTopologies {

    private static final String[] OPS = {
        "FILTER", "MAP", "MAPVALUES", "FLATMAP", "PEEK", "MERGE", "KEY-SELECT", "BRANCH", "PROCESSOR"
    };

    /** Processor body is irrelevant to describe(). */
    static final class DiscardProcessor implements Processor<Object, Object, Object, Object> {
        @Override
        public void process(final Record<Object, Object> record) {
        }
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

    private static String qList(final List<String> l) {
        final StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < l.size(); i++) {
            if (i > 0) {
                sb.append(',');
            }
            sb.append(q(l.get(i)));
        }
        return sb.append(']').toString();
    }

    private static String randomName(final Random r, final Set<String> used, final int counter) {
        while (true) {
            final String name;
            switch (r.nextInt(4)) {
                case 0:
                case 1:
                    name = "KSTREAM-" + OPS[r.nextInt(OPS.length)] + "-" + String.format("%010d", counter + r.nextInt(3));
                    break;
                case 2: {
                    final StringBuilder sb = new StringBuilder();
                    final int len = 1 + r.nextInt(8);
                    for (int i = 0; i < len; i++) {
                        sb.append((char) ('a' + r.nextInt(26)));
                    }
                    name = sb.toString();
                    break;
                }
                default: {
                    final String alphabet = "ABCabc-_019xyzXYZ";
                    final StringBuilder sb = new StringBuilder();
                    final int len = 1 + r.nextInt(6);
                    for (int i = 0; i < len; i++) {
                        sb.append(alphabet.charAt(r.nextInt(alphabet.length())));
                    }
                    name = sb.toString();
                }
            }
            if (used.add(name)) {
                return name;
            }
        }
    }

    private static String oneCase(final int caseNo, final Random r) {
        final Topology topology = new Topology();
        final List<String> ops = new ArrayList<>();
        final Set<String> used = new HashSet<>();
        final List<String> parentsPool = new ArrayList<>();
        final List<String> processors = new ArrayList<>();
        int topicCounter = 0;
        int patternCounter = 0;
        final int nodes = 1 + r.nextInt(r.nextBoolean() ? 12 : 45);
        final ProcessorSupplier<Object, Object, Object, Object> supplier = DiscardProcessor::new;

        for (int i = 0; i < nodes; i++) {
            final int kind = parentsPool.isEmpty() ? 0 : r.nextInt(100);
            final String name = randomName(r, used, i);
            if (kind < 18) {
                if (r.nextInt(8) == 0) {
                    final String pattern = "pat" + (patternCounter++) + "-.*";
                    topology.addSource(name, Pattern.compile(pattern));
                    ops.add("{\"op\":\"source\",\"name\":" + q(name) + ",\"pattern\":" + q(pattern) + "}");
                } else {
                    final List<String> topics = new ArrayList<>();
                    final int n = 1 + (r.nextInt(3) == 0 ? r.nextInt(14) : 0);
                    for (int t = 0; t < n; t++) {
                        topics.add(r.nextBoolean() ? "topic-" + (topicCounter++) : "t" + (char) ('a' + r.nextInt(26)) + (topicCounter++));
                    }
                    topology.addSource(name, topics.toArray(new String[0]));
                    ops.add("{\"op\":\"source\",\"name\":" + q(name) + ",\"topics\":" + qList(topics) + "}");
                }
                parentsPool.add(name);
            } else {
                final List<String> parents = new ArrayList<>();
                final int np = r.nextInt(4) == 0 ? 1 + r.nextInt(Math.min(3, parentsPool.size())) : 1;
                while (parents.size() < np) {
                    // prefer recent nodes so that chains form
                    final int idx = r.nextInt(3) == 0
                        ? r.nextInt(parentsPool.size())
                        : Math.max(0, parentsPool.size() - 1 - r.nextInt(Math.min(3, parentsPool.size())));
                    final String p = parentsPool.get(idx);
                    if (!parents.contains(p)) {
                        parents.add(p);
                    }
                }
                if (kind < 75) {
                    topology.addProcessor(name, supplier, parents.toArray(new String[0]));
                    ops.add("{\"op\":\"processor\",\"name\":" + q(name) + ",\"parents\":" + qList(parents) + "}");
                    parentsPool.add(name);
                    processors.add(name);
                } else {
                    final String topic = "out-" + r.nextInt(1000);
                    topology.addSink(name, topic, parents.toArray(new String[0]));
                    ops.add("{\"op\":\"sink\",\"name\":" + q(name) + ",\"topic\":" + q(topic)
                        + ",\"parents\":" + qList(parents) + "}");
                }
            }
        }

        if (!processors.isEmpty()) {
            final int stores = r.nextInt(4);
            final Set<String> storeNames = new HashSet<>();
            for (int s = 0; s < stores; s++) {
                final String store = randomName(r, storeNames, s);
                final List<String> users = new ArrayList<>();
                final int nu = 1 + r.nextInt(Math.min(2, processors.size()));
                while (users.size() < nu) {
                    final String p = processors.get(r.nextInt(processors.size()));
                    if (!users.contains(p)) {
                        users.add(p);
                    }
                }
                topology.addStateStore(
                    Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore(store), Serdes.String(), Serdes.Long()),
                    users.toArray(new String[0]));
                ops.add("{\"op\":\"store\",\"store\":" + q(store) + ",\"processors\":" + qList(users) + "}");
            }
        }

        final String text = topology.describe().toString();
        return "{\"case\":" + caseNo + ",\"ops\":[" + String.join(",", ops) + "],\"describe\":" + q(text) + "}";
    }

    public static void main(final String[] args) throws IOException {
        if (args.length != 3) {
            System.err.println("usage: RandomPapiTopologies <out.jsonl> <count> <seed>");
            System.exit(2);
        }
        final Path out = Path.of(args[0]);
        final int count = Integer.parseInt(args[1]);
        final long seed = Long.parseLong(args[2]);
        final StringBuilder sb = new StringBuilder();
        for (int i = 0; i < count; i++) {
            sb.append(oneCase(i, new Random(seed * 1_000_003L + i))).append('\n');
        }
        if (out.getParent() != null) {
            Files.createDirectories(out.getParent());
        }
        Files.write(out, sb.toString().getBytes(StandardCharsets.UTF_8));
        System.out.println("wrote " + count + " cases to " + out);
    }
}
