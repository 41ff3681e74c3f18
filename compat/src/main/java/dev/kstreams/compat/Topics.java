package dev.kstreams.compat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.config.TopicConfig;

/**
 * {@code create-topics}: creates the topics a scenario reads and writes;
 * {@code list-topics --prefix P}: prints the names of the topics whose names
 * start with P, sorted (the internal topics of an application id).
 */
final class Topics {
    private Topics() {}

    static void create(Args args) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        for (String spec : args.all("topic")) {
            String[] parts = spec.split(":");
            if (parts.length != 2) {
                throw new HarnessException("--topic wants NAME:PARTITIONS, got " + spec);
            }
            // Scenario timestamps are fixed in the past so that runs are
            // reproducible; time-based retention must not delete them.
            topics.add(new NewTopic(parts[0], Optional.of(Integer.parseInt(parts[1])), Optional.empty())
                    .configs(Map.of(TopicConfig.RETENTION_MS_CONFIG, "-1")));
        }
        try (Admin admin = admin(args.required("bootstrap"))) {
            admin.createTopics(topics).all().get();
        } catch (ExecutionException e) {
            throw new HarnessException("creating topics failed: " + e.getCause());
        }
    }

    static void list(Args args) throws Exception {
        String prefix = args.required("prefix");
        try (Admin admin = admin(args.required("bootstrap"))) {
            admin.listTopics().names().get().stream()
                    .filter(name -> name.startsWith(prefix))
                    .sorted()
                    .forEach(System.out::println);
        } catch (ExecutionException e) {
            throw new HarnessException("listing topics failed: " + e.getCause());
        }
    }

    static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(props);
    }
}
