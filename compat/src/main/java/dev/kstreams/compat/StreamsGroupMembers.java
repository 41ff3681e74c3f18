package dev.kstreams.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.errors.GroupIdNotFoundException;

/**
 * {@code streams-group-members}: waits until a streams group (KIP-1071) is
 * stable with at least {@code --members} members, each running the active
 * tasks the broker assigned it and at least one of them, then prints one line
 * per member: its endpoint host ({@code application.server}, which names the
 * side in a mixed group) and its active tasks ({@code subtopology_partition},
 * comma-separated), tab-separated.
 */
final class StreamsGroupMembers {
    private static final Duration CHECK_INTERVAL = Duration.ofMillis(300);

    private StreamsGroupMembers() {}

    static void run(Args args) throws Exception {
        String group = args.required("group");
        int members = Integer.parseInt(args.required("members"));
        Duration timeout = Duration.ofSeconds(Long.parseLong(args.optional("timeout-secs", "120")));
        long deadline = System.nanoTime() + timeout.toNanos();
        String seen = "not described yet";
        try (Admin admin = Topics.admin(args.required("bootstrap"))) {
            while (System.nanoTime() < deadline) {
                StreamsGroupDescription description;
                try {
                    description = admin.describeStreamsGroups(List.of(group)).all().get().get(group);
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof GroupIdNotFoundException)) {
                        throw e;
                    }
                    // No member has joined yet.
                    Thread.sleep(CHECK_INTERVAL.toMillis());
                    continue;
                }
                seen = description.groupState() + ": " + lines(description.members());
                if (settled(description, members)) {
                    if (Boolean.parseBoolean(args.optional("topology", "false"))) {
                        // The topology the group registered, as the broker keeps it.
                        description.subtopologies().stream()
                                .sorted(java.util.Comparator.comparing(
                                        org.apache.kafka.clients.admin.StreamsGroupSubtopologyDescription::subtopologyId))
                                .forEach(s -> System.err.println("topology: " + s));
                    }
                    System.out.print(lines(description.members()));
                    return;
                }
                Thread.sleep(CHECK_INTERVAL.toMillis());
            }
        }
        throw new HarnessException("streams group " + group + " did not settle with " + members
                + " members, each with active tasks, in " + timeout.toSeconds() + " s; last seen " + seen);
    }

    private static boolean settled(StreamsGroupDescription description, int members) {
        return description.groupState() == GroupState.STABLE
                && description.members().size() >= members
                && description.members().stream().allMatch(m ->
                        !m.assignment().activeTasks().isEmpty()
                                && Objects.equals(m.assignment(), m.targetAssignment()));
    }

    private static String lines(Collection<StreamsGroupMemberDescription> members) {
        StringBuilder out = new StringBuilder();
        for (StreamsGroupMemberDescription member : members) {
            String host = member.userEndpoint().map(StreamsGroupMemberDescription.Endpoint::host).orElse("-");
            out.append(host).append('\t').append(tasks(member.assignment())).append('\n');
        }
        return out.toString();
    }

    private static String tasks(StreamsGroupMemberAssignment assignment) {
        List<String> tasks = new ArrayList<>();
        for (StreamsGroupMemberAssignment.TaskIds ids : assignment.activeTasks()) {
            for (int partition : ids.partitions()) {
                tasks.add(ids.subtopologyId() + "_" + partition);
            }
        }
        return tasks.stream().sorted().collect(Collectors.joining(","));
    }
}
