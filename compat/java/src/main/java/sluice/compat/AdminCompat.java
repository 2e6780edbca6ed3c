package sluice.compat;

import static sluice.compat.Checks.*;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.OffsetOutOfRangeException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.StringSerializer;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * Topic administration with the stock Java AdminClient (kafka-clients) against $BOOTSTRAP, every
 * call's result read back: createTopics with configs (and the v5+ config echo), a duplicate create,
 * describeTopics, describeConfigs (topic and broker, values and sources), incrementalAlterConfigs
 * SET/DELETE/APPEND (and an invalid value refused), createPartitions (grow; shrink refused),
 * deleteRecords (low watermark; beyond the end refused), listOffsets (earliest, latest, timestamp,
 * max timestamp), deleteTopics, describeCluster.
 * Prints one PASS/FAIL line per check and a final "N passed, N failed" line.
 */
public final class AdminCompat {

    /** The cause of a failed future, or null when it succeeded. */
    static Throwable failure(org.apache.kafka.common.KafkaFuture<?> f) throws InterruptedException {
        try {
            f.get(30, TimeUnit.SECONDS);
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (java.util.concurrent.TimeoutException e) {
            return e;
        }
    }

    static String expectError(org.apache.kafka.common.KafkaFuture<?> f, Class<? extends Throwable> want)
            throws InterruptedException {
        Throwable t = failure(f);
        if (want.isInstance(t)) return "ok " + want.getSimpleName();
        return "expected " + want.getSimpleName() + ", got " + (t == null ? "success" : t.toString());
    }

    static Config topicConfig(Admin admin, String topic) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        return admin.describeConfigs(List.of(r)).all().get(30, TimeUnit.SECONDS).get(r);
    }

    static String entryIs(Config c, String name, String value, ConfigEntry.ConfigSource source) {
        ConfigEntry e = c.get(name);
        if (e == null) return name + " missing";
        if (!value.equals(e.value())) return name + "=" + e.value() + ", want " + value;
        if (source != null && e.source() != source) return name + " source " + e.source() + ", want " + source;
        return null;
    }

    static String firstError(String... errs) {
        for (String e : errs) if (e != null) return e;
        return null;
    }

    /**
     * c until it returns null, for up to 10 s (Kafka applies config and partition changes to its
     * metadata cache asynchronously: a read right after the change may still see the old state).
     */
    static String eventually(Check c) throws Exception {
        long deadline = System.currentTimeMillis() + 10_000;
        while (true) {
            String err = c.run();
            if (err == null || System.currentTimeMillis() > deadline) return err;
            Thread.sleep(200);
        }
    }

    static TopicDescription describe(Admin admin, String topic) throws Exception {
        return admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = env("BOOTSTRAP", "127.0.0.1:9092");
        String prefix = env("TOPIC_PREFIX", "compat") + "-java-admin";
        String compacted = prefix + "-compacted";
        String plain = prefix + "-plain";
        System.out.println("CLIENT_VERSION: kafka-clients " + kafkaClientsVersion());
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        try (Admin admin = Admin.create(p)) {
            int[] nodeId = {-1};
            run("describeCluster: cluster id, one node at the bootstrap address", () -> {
                DescribeClusterResult r = admin.describeCluster();
                String id = r.clusterId().get(30, TimeUnit.SECONDS);
                Collection<Node> nodes = r.nodes().get(30, TimeUnit.SECONDS);
                Node controller = r.controller().get(30, TimeUnit.SECONDS);
                if (id == null || id.isEmpty()) return "no cluster id";
                if (nodes.size() != 1) return "nodes " + nodes;
                Node n = nodes.iterator().next();
                nodeId[0] = n.id();
                if (!bootstrap.endsWith(":" + n.port())) return "node " + n + " is not at " + bootstrap;
                if (controller == null || controller.id() != n.id()) return "controller " + controller;
                return "ok cluster " + id + ", node " + n.id();
            });

            run("createTopics with configs: 3 partitions, configs echoed", () -> {
                NewTopic t = new NewTopic(compacted, 3, (short) 1).configs(Map.of(
                        "cleanup.policy", "compact",
                        "retention.ms", "3600000",
                        "segment.bytes", "1048576"));
                CreateTopicsResult r = admin.createTopics(List.of(t));
                r.all().get(30, TimeUnit.SECONDS);
                if (r.numPartitions(compacted).get() != 3) return "numPartitions " + r.numPartitions(compacted).get();
                if (r.replicationFactor(compacted).get() != 1) return "replicationFactor " + r.replicationFactor(compacted).get();
                Uuid id = r.topicId(compacted).get();
                if (id == null || Uuid.ZERO_UUID.equals(id)) return "topic id " + id;
                Config echo = r.config(compacted).get();
                return firstError(
                        entryIs(echo, "cleanup.policy", "compact", null),
                        entryIs(echo, "retention.ms", "3600000", null),
                        entryIs(echo, "segment.bytes", "1048576", null));
            });
            run("createTopics: plain topic, 1 partition", () -> {
                admin.createTopics(List.of(new NewTopic(plain, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
                return null;
            });
            run("createTopics: an existing name is refused (TopicExistsException)", () ->
                    expectError(admin.createTopics(List.of(new NewTopic(compacted, 1, (short) 1))).all(),
                            TopicExistsException.class));

            run("describeTopics: 3 partitions, each led by the node, replicas = isr = [node]", () -> {
                TopicDescription d = describe(admin, compacted);
                if (d.partitions().size() != 3) return "partitions " + d.partitions().size();
                if (d.isInternal()) return "internal";
                if (Uuid.ZERO_UUID.equals(d.topicId())) return "zero topic id";
                for (TopicPartitionInfo pi : d.partitions()) {
                    if (pi.leader() == null || pi.leader().id() != nodeId[0]) return "partition " + pi;
                    if (pi.replicas().size() != 1 || pi.isr().size() != 1) return "partition " + pi;
                }
                return null;
            });

            run("describeConfigs(topic): overrides are DYNAMIC_TOPIC_CONFIG, the rest defaults", () -> {
                Config c = topicConfig(admin, compacted);
                return firstError(
                        entryIs(c, "cleanup.policy", "compact", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG),
                        entryIs(c, "retention.ms", "3600000", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG),
                        entryIs(c, "segment.bytes", "1048576", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG),
                        entryIs(c, "compression.type", "producer", ConfigEntry.ConfigSource.DEFAULT_CONFIG),
                        entryIs(c, "min.cleanable.dirty.ratio", "0.5", ConfigEntry.ConfigSource.DEFAULT_CONFIG),
                        c.entries().size() < 30 ? "only " + c.entries().size() + " entries" : null);
            });
            run("describeConfigs(broker): the node's log and message settings with their defaults", () -> {
                ConfigResource r = new ConfigResource(ConfigResource.Type.BROKER, Integer.toString(nodeId[0]));
                Config c = admin.describeConfigs(List.of(r)).all().get(30, TimeUnit.SECONDS).get(r);
                ConfigEntry mmb = c.get("message.max.bytes");
                if (mmb == null || Integer.parseInt(mmb.value()) <= 0) return "message.max.bytes " + mmb;
                String err = firstError(
                        entryIs(c, "log.retention.hours", "168", null),
                        entryIs(c, "log.segment.bytes", "1073741824", null),
                        entryIs(c, "log.cleanup.policy", "delete", null),
                        entryIs(c, "num.partitions", "1", null));
                return err != null ? err : "ok " + c.entries().size() + " entries";
            });

            run("incrementalAlterConfigs SET/DELETE/APPEND, read back", () -> {
                ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, compacted);
                List<AlterConfigOp> ops = List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("segment.bytes", null), AlterConfigOp.OpType.DELETE),
                        new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.APPEND));
                admin.incrementalAlterConfigs(Map.of(r, ops)).all().get(30, TimeUnit.SECONDS);
                return eventually(() -> {
                    Config c = topicConfig(admin, compacted);
                    return firstError(
                        entryIs(c, "retention.ms", "7200000", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG),
                        entryIs(c, "segment.bytes", "1073741824", ConfigEntry.ConfigSource.DEFAULT_CONFIG),
                        entryIs(c, "cleanup.policy", "compact,delete", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG));
                });
            });
            run("incrementalAlterConfigs: a bad value is refused and changes nothing", () -> {
                ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, compacted);
                List<AlterConfigOp> ops = List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET));
                String e = expectError(admin.incrementalAlterConfigs(Map.of(r, ops)).all(),
                        InvalidConfigurationException.class);
                if (!e.startsWith("ok")) return e;
                return firstError(entryIs(topicConfig(admin, compacted), "retention.ms", "7200000", null), e);
            });

            run("createPartitions: 3 -> 5, describeTopics shows 5", () -> {
                admin.createPartitions(Map.of(compacted, NewPartitions.increaseTo(5))).all().get(30, TimeUnit.SECONDS);
                return eventually(() -> {
                    int n = describe(admin, compacted).partitions().size();
                    return n == 5 ? null : "partitions " + n;
                });
            });
            run("createPartitions: 5 -> 2 is refused (InvalidPartitionsException)", () ->
                    expectError(admin.createPartitions(Map.of(compacted, NewPartitions.increaseTo(2))).all(),
                            InvalidPartitionsException.class));

            long ts0 = System.currentTimeMillis() - 60_000;
            run("produce 10 records with timestamps ts0+i to the plain topic", () -> {
                Properties pp = new Properties();
                pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                try (KafkaProducer<String, String> prod = new KafkaProducer<>(pp)) {
                    for (int i = 0; i < 10; i++) {
                        long off = prod.send(new ProducerRecord<>(plain, 0, ts0 + i, "k" + i, "v" + i))
                                .get(30, TimeUnit.SECONDS).offset();
                        if (off != i) return "record " + i + " at offset " + off;
                    }
                }
                return null;
            });
            TopicPartition tp = new TopicPartition(plain, 0);
            run("deleteRecords before offset 4: low watermark 4", () -> {
                long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4)))
                        .lowWatermarks().get(tp).get(30, TimeUnit.SECONDS).lowWatermark();
                return low == 4 ? null : "low watermark " + low;
            });
            run("deleteRecords beyond the high watermark is refused (OffsetOutOfRangeException)", () ->
                    expectError(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(11)))
                            .lowWatermarks().get(tp), OffsetOutOfRangeException.class));
            run("listOffsets: earliest 4, latest 10, timestamp ts0+6 -> 6, max timestamp -> 9", () -> {
                String[] names = {"earliest", "latest", "forTimestamp", "maxTimestamp"};
                OffsetSpec[] specs = {OffsetSpec.earliest(), OffsetSpec.latest(),
                        OffsetSpec.forTimestamp(ts0 + 6), OffsetSpec.maxTimestamp()};
                long[] want = {4, 10, 6, 9};
                StringBuilder got = new StringBuilder();
                boolean ok = true;
                for (int i = 0; i < specs.length; i++) {
                    ListOffsetsResult.ListOffsetsResultInfo info =
                            admin.listOffsets(Map.of(tp, specs[i])).partitionResult(tp).get(30, TimeUnit.SECONDS);
                    got.append(names[i]).append('=').append(info.offset()).append(' ');
                    ok &= info.offset() == want[i];
                    if (i >= 2 && info.timestamp() != ts0 + want[i]) {
                        ok = false;
                        got.append("(timestamp ").append(info.timestamp() - ts0).append(") ");
                    }
                }
                return ok ? "ok " + got.toString().trim() : got.toString().trim();
            });

            run("deleteTopics: both gone from listTopics and describeTopics", () -> {
                admin.deleteTopics(List.of(compacted, plain)).all().get(30, TimeUnit.SECONDS);
                long deadline = System.currentTimeMillis() + 15_000;
                while (true) {
                    Set<String> names = admin.listTopics().names().get(30, TimeUnit.SECONDS);
                    if (!names.contains(compacted) && !names.contains(plain)) break;
                    if (System.currentTimeMillis() > deadline) return "still listed: " + names;
                    Thread.sleep(200);
                }
                return expectError(admin.describeTopics(List.of(compacted)).allTopicNames(),
                        UnknownTopicOrPartitionException.class);
            });
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
