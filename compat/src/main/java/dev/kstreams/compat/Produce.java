package dev.kstreams.compat;

import java.io.BufferedReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * {@code produce}: writes an input file to a topic, each record to the
 * partition and with the timestamp the file names, so both sides see exactly
 * the same input. With {@code --compression C1,C2,...} one producer per codec
 * writes: partition {@code p} goes through the producer of codec
 * {@code p % n}, so the topic holds batches of each codec.
 */
final class Produce {
    private Produce() {}

    static void run(Args args) throws Exception {
        String topic = args.required("topic");
        Path input = Path.of(args.required("input"));
        long count = 0;
        // Sends are asynchronous; the first failure is kept and reported after flush.
        AtomicReference<Exception> failed = new AtomicReference<>();
        List<KafkaProducer<String, String>> producers = new ArrayList<>();
        for (String codec : args.optional("compression", "none").split(",")) {
            producers.add(producer(args.required("bootstrap"), codec.trim()));
        }
        try (BufferedReader reader = Files.newBufferedReader(input, StandardCharsets.UTF_8)) {
            String line;
            while ((line = reader.readLine()) != null) {
                ProducerRecord<String, String> record = record(topic, line);
                producers.get(record.partition() % producers.size()).send(record, (metadata, e) -> {
                    if (e != null) {
                        failed.compareAndSet(null, e);
                    }
                });
                count++;
            }
        } finally {
            for (KafkaProducer<String, String> producer : producers) {
                producer.flush();
                producer.close();
            }
        }
        if (failed.get() != null) {
            throw new HarnessException("producing to " + topic + " failed: " + failed.get());
        }
        System.err.println("compat: produced " + count + " records to " + topic);
    }

    /**
     * {@code produce-atomically --topics T1,T2 --inputs F1,F2}: writes each
     * file to its topic in one transaction, so that a read_committed
     * application already running sees all of its input at once, as if it
     * had been there before it started (a stream-table join then finds the
     * table's rows as in a run started after the input).
     */
    static void runAtomically(Args args) throws Exception {
        String[] topics = args.required("topics").split(",");
        String[] inputs = args.required("inputs").split(",");
        if (topics.length != inputs.length) {
            throw new HarnessException("--topics and --inputs must name as many topics as files");
        }
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.required("bootstrap"));
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "compat-produce-" + java.util.UUID.randomUUID());
        long count = 0;
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < topics.length; i++) {
                for (String line : Files.readAllLines(Path.of(inputs[i]), StandardCharsets.UTF_8)) {
                    producer.send(record(topics[i], line));
                    count++;
                }
            }
            producer.commitTransaction();
        }
        System.err.println("compat: produced " + count + " records to " + String.join(", ", topics)
                + " in one transaction");
    }

    private static ProducerRecord<String, String> record(String topic, String line) throws HarnessException {
        String[] fields = line.split("\t", -1);
        if (fields.length != 4) {
            throw new HarnessException("input line needs 4 fields: " + line);
        }
        int partition = Integer.parseInt(fields[0]);
        long timestamp = Long.parseLong(fields[1]);
        return new ProducerRecord<>(topic, partition, timestamp, Tsv.unescape(fields[2]), Tsv.unescape(fields[3]));
    }

    private static KafkaProducer<String, String> producer(String bootstrap, String codec) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        // Idempotence keeps the file's order within each partition across retries.
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    }
}
