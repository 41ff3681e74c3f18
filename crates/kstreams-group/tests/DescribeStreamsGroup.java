// The Java Admin's view of a streams group, for the describe test in
// streams_group.rs: `java -cp <kafka jars> DescribeStreamsGroup.java <bootstrap> <group>`
// (Java's source-file mode; nothing to build).

import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;

public class DescribeStreamsGroup {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String group = args[1];
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            StreamsGroupDescription description =
                admin.describeStreamsGroups(List.of(group)).describedGroups().get(group).get();
            System.out.println("group=" + description.groupId() + " state=" + description.groupState()
                + " epoch=" + description.groupEpoch() + " members=" + description.members().size());
            for (StreamsGroupMemberDescription member : description.members()) {
                System.out.println("member=" + member.memberId() + " process=" + member.processId()
                    + " active=" + member.assignment().activeTasks()
                    + " standby=" + member.assignment().standbyTasks());
            }
        }
    }
}
