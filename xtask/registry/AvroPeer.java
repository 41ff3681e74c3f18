// The Java peer of kstreams-avro's cross-language test: Apicurio Registry's
// Avro serde for Kafka Streams writes and reads records in the Confluent wire
// format (magic byte, 4-byte schema id, Avro binary) through the registry.
//
//   java -cp <classpath> AvroPeer.java write <registry-url> <topic> <schema-json> <name> <number>
//       prints the serialized value as hex
//   java -cp <classpath> AvroPeer.java read <registry-url> <topic> <hex>
//       prints the deserialized record as Avro's JSON text
//
// <registry-url> is Apicurio's own API, http://host:port/apis/registry/v2.

import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;

import io.apicurio.registry.serde.avro.AvroSerde;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;

public class AvroPeer {
    public static void main(String[] args) {
        if (args.length < 3) {
            throw new IllegalArgumentException("usage: write|read <registry-url> <topic> ...");
        }
        String topic = args[2];
        try (AvroSerde<GenericRecord> serde = new AvroSerde<>()) {
            serde.configure(config(args[1]), false);
            switch (args[0]) {
                case "write" -> {
                    Schema schema = new Schema.Parser().parse(args[3]);
                    GenericRecord record = new GenericData.Record(schema);
                    record.put("name", args[4]);
                    record.put("favorite_number", Integer.valueOf(args[5]));
                    byte[] bytes = serde.serializer().serialize(topic, record);
                    System.out.println(HexFormat.of().formatHex(bytes));
                }
                case "read" -> {
                    byte[] bytes = HexFormat.of().parseHex(args[3]);
                    GenericRecord record = serde.deserializer().deserialize(topic, bytes);
                    System.out.println(record);
                }
                default -> throw new IllegalArgumentException("unknown command " + args[0]);
            }
        }
    }

    private static Map<String, Object> config(String url) {
        Map<String, Object> config = new HashMap<>();
        config.put("apicurio.registry.url", url);
        // TopicIdStrategy: the schema goes to artifact <topic>-value, the
        // subject of the same name in the Confluent-compatible API.
        config.put("apicurio.registry.auto-register", "true");
        // The schema id goes in the payload, not in record headers, as
        // 4 bytes after the magic byte: the Confluent wire format.
        config.put("apicurio.registry.headers.enabled", "false");
        config.put("apicurio.registry.as-confluent", "true");
        config.put("apicurio.registry.use-id", "contentId");
        return config;
    }
}
