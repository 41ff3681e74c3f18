package dev.kstreams.compat;

import java.util.Arrays;

/**
 * Entry point of the Java reference side. Each command does one step of a
 * differential run so that the same steps serve both sides: xtask produces the
 * input and dumps the output with these tools whichever side ran the topology.
 *
 * <pre>
 * create-topics --bootstrap B --topic NAME:PARTITIONS [--topic ...]
 * list-topics   --bootstrap B --prefix P
 * produce       --bootstrap B --topic T --input FILE [--compression C1,C2,...]
 * produce-atomically --bootstrap B --topics T1,T2 --inputs FILE1,FILE2 (one transaction)
 * run SCENARIO  --bootstrap B --app-id A --input T[,T2] --output T --state-dir D
 *               [--timeout-secs S] [--describe-to FILE] [--cache-max-bytes N] [--dlq TOPIC]
 *               [--processing-guarantee G] [--group-protocol P] [--application-server H:P]
 *               [--max-task-idle-ms MS]
 *               [--hold true]
 * await-idle    --bootstrap B --group G --topics T1,T2 [--timeout-secs S]
 * streams-group-members --bootstrap B --group G --members N [--timeout-secs S]
 * dump          --bootstrap B --topic T --key SERDE --value SERDE --out FILE [--headers true]
 *               (SERDE: string, long, bytes, windowed-string, session-string)
 * bench WORKLOAD --bootstrap B --app-id A --input T [--table T2] --output O
 *               --threads N --state-dir D [--target N] [--set KEY=VALUE] [--leave true]
 *               [--restore-partitions P --then-target N]
 *               (see Bench.java; cargo xtask bench compare runs it)
 * config-names  (every StreamsConfig name with its type and default; see ConfigNames.java)
 * wire-vectors  (bytes of Kafka Streams' internal topic layouts; see WireVectors.java)
 * </pre>
 *
 * Files are the tab-separated records of {@link Tsv}. Exit status 0 means
 * success; anything else comes with a message on stderr.
 */
public final class Main {
    private Main() {}

    public static void main(String[] argv) throws Exception {
        // Before any logger exists: the clients' INFO chatter would bury the
        // harness's own messages.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        // Kafka Streams subscribes before it creates its repartition topics;
        // the client's warnings about them not existing yet are expected.
        System.setProperty("org.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient", "error");
        // Inputs with out-of-order table updates and late records are made
        // on purpose (table-aggregate, windowed-count, session-windows,
        // sliding-windows); each draws a warning.
        for (String quiet : new String[] {"KTableSource", "KStreamWindowAggregate", "KStreamSessionWindowAggregate",
                "KStreamSlidingWindowAggregate"}) {
            System.setProperty("org.slf4j.simpleLogger.log.org.apache.kafka.streams.kstream.internals." + quiet,
                    "error");
        }
        // So are values that fail to deserialize (dead-letter-queue).
        System.setProperty("org.slf4j.simpleLogger.log.org.apache.kafka.streams.errors.LogAndContinueExceptionHandler",
                "error");
        if (argv.length == 0) {
            usage();
        }
        Args args = Args.parse(Arrays.copyOfRange(argv, 1, argv.length));
        try {
            switch (argv[0]) {
                case "create-topics" -> Topics.create(args);
                case "list-topics" -> Topics.list(args);
                case "produce" -> Produce.run(args);
                case "produce-atomically" -> Produce.runAtomically(args);
                case "run" -> RunApp.run(args);
                case "await-idle" -> AwaitIdle.run(args);
                case "streams-group-members" -> StreamsGroupMembers.run(args);
                case "dump" -> Dump.run(args);
                case "bench" -> Bench.run(args);
                case "config-names" -> ConfigNames.run(args);
                case "wire-vectors" -> WireVectors.run(args);
                default -> usage();
            }
        } catch (HarnessException e) {
            System.err.println("compat: " + e.getMessage());
            System.exit(1);
        }
        // Client threads (e.g. the admin's) may linger past close; do not wait.
        System.exit(0);
    }

    private static void usage() {
        System.err.println(
                "usage: Main create-topics|list-topics|produce|run|await-idle|dump|bench|config-names|wire-vectors [options] (see Main.java)");
        System.exit(2);
    }
}
