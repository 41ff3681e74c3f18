package dev.kstreams.compat;

import java.io.BufferedWriter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * {@code dump}: reads a topic from the beginning to the end offsets seen at
 * start (read_committed) and writes its records, partition by partition in
 * offset order, decoded with the named serdes. With {@code --headers true}
 * each line has a sixth field, the record's headers (see {@link #headers}).
 */
final class Dump {
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    private Dump() {}

    static void run(Args args) throws Exception {
        String topic = args.required("topic");
        String keySerde = args.optional("key", "string");
        String valueSerde = args.optional("value", "string");
        boolean withHeaders = Boolean.parseBoolean(args.optional("headers", "false"));
        List<ConsumerRecord<byte[], byte[]>> records = read(args.required("bootstrap"), topic);
        records.sort(Comparator.<ConsumerRecord<byte[], byte[]>>comparingInt(ConsumerRecord::partition)
                .thenComparingLong(ConsumerRecord::offset));
        try (BufferedWriter out = Files.newBufferedWriter(Path.of(args.required("out")), StandardCharsets.UTF_8)) {
            for (ConsumerRecord<byte[], byte[]> r : records) {
                out.write(r.partition() + "\t" + r.offset() + "\t" + r.timestamp() + "\t"
                        + Tsv.escape(decode(r.key(), keySerde)) + "\t"
                        + Tsv.escape(decode(r.value(), valueSerde))
                        + (withHeaders ? "\t" + Tsv.escape(headers(r.headers())) : "") + "\n");
            }
        }
        System.err.println("compat: dumped " + records.size() + " records from " + topic);
    }

    private static List<ConsumerRecord<byte[], byte[]>> read(String bootstrap, String topic) throws HarnessException {
        List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap)) {
            List<TopicPartition> partitions = consumer.partitionsFor(topic).stream()
                    .map(p -> new TopicPartition(topic, p.partition()))
                    .toList();
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            long deadline = System.nanoTime() + TIMEOUT.toNanos();
            while (!reachedEnd(consumer, end)) {
                if (System.nanoTime() > deadline) {
                    throw new HarnessException("timed out reading " + topic + " up to " + end);
                }
                consumer.poll(Duration.ofMillis(200)).forEach(records::add);
            }
        }
        return records;
    }

    private static boolean reachedEnd(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> end) {
        return end.entrySet().stream().allMatch(e -> consumer.position(e.getKey()) >= e.getValue());
    }

    private static KafkaConsumer<byte[], byte[]> consumer(String bootstrap) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        // Only what a committed transaction wrote counts as output.
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        return new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static String decode(byte[] bytes, String serde) throws HarnessException {
        if (bytes == null) {
            return null;
        }
        return switch (serde) {
            case "string" -> new String(bytes, StandardCharsets.UTF_8);
            case "long" -> {
                if (bytes.length != Long.BYTES) {
                    throw new HarnessException("a long needs 8 bytes, got " + bytes.length);
                }
                yield Long.toString(ByteBuffer.wrap(bytes).getLong());
            }
            case "bytes" -> HexFormat.of().formatHex(bytes);
            case "windowed-string" -> windowedString(bytes);
            case "session-string" -> sessionString(bytes);
            default -> throw new HarnessException(
                    "unknown serde " + serde + " (string, long, bytes, windowed-string, session-string)");
        };
    }

    /**
     * A record's headers in order, each {@code name=HEX} (the value's bytes in
     * lower-case hex) or just {@code name} for a null value, joined with
     * {@code ,}; empty without headers.
     */
    static String headers(Headers headers) {
        StringBuilder out = new StringBuilder();
        for (Header header : headers) {
            if (out.length() > 0) {
                out.append(',');
            }
            out.append(header.key());
            if (header.value() != null) {
                out.append('=').append(HexFormat.of().formatHex(header.value()));
            }
        }
        return out.toString();
    }

    /**
     * A time-windowed String key as {@code TimeWindowedSerializer} writes it
     * (the key's bytes, then the window start as 8 bytes big-endian), shown
     * as {@code key@start}.
     */
    private static String windowedString(byte[] bytes) throws HarnessException {
        if (bytes.length < Long.BYTES) {
            throw new HarnessException("a time-windowed key needs at least 8 bytes, got " + bytes.length);
        }
        int keyLength = bytes.length - Long.BYTES;
        long start = ByteBuffer.wrap(bytes, keyLength, Long.BYTES).getLong();
        return new String(bytes, 0, keyLength, StandardCharsets.UTF_8) + "@" + start;
    }

    /**
     * A session-windowed String key as {@code SessionWindowedSerializer}
     * writes it (the key's bytes, then the session end, then its start, each
     * 8 bytes big-endian), shown as {@code key@start-end}.
     */
    private static String sessionString(byte[] bytes) throws HarnessException {
        if (bytes.length < 2 * Long.BYTES) {
            throw new HarnessException("a session-windowed key needs at least 16 bytes, got " + bytes.length);
        }
        int keyLength = bytes.length - 2 * Long.BYTES;
        ByteBuffer window = ByteBuffer.wrap(bytes, keyLength, 2 * Long.BYTES);
        long end = window.getLong();
        long start = window.getLong();
        return new String(bytes, 0, keyLength, StandardCharsets.UTF_8) + "@" + start + "-" + end;
    }
}
