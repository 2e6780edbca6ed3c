package sluice.compat;

import static sluice.compat.Checks.*;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Classic consumer groups with the stock Java client (kafka-clients) against $BOOTSTRAP:
 * for the range and the cooperative-sticky assignor, 3 consumers of one group on a 6-partition topic
 * get disjoint assignments covering all 6 partitions; one member is closed without LeaveGroup and its
 * partitions move to the survivors after the session timeout; each group (two groups on one topic)
 * receives every record; the committed offsets reach the log end.
 * With GROUP_PROTOCOL=consumer the same checks run with the KIP-848 protocol
 * ({@code group.protocol=consumer}) and the broker's uniform and range assignors
 * ({@code group.remote.assignor}); the "killed" member closes with REMAIN_IN_GROUP and its
 * partitions move when the broker's session timeout (group.consumer.session.timeout.ms) expires.
 * Prints one PASS/FAIL line per check and a final "N passed, N failed" line.
 */
public final class GroupsCompat {
    static final int PARTITIONS = 6;
    static final int PER_PARTITION = 50;
    static String bootstrap;
    /** Records produced to the topic so far (every group must end up with all of them). */
    static int produced = 0;
    /** True for the KIP-848 protocol (GROUP_PROTOCOL=consumer). */
    static boolean consumerProtocol = false;

    /** One group member polling on its own thread (KafkaConsumer is single-threaded). */
    static final class Member implements Runnable {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final Set<String> seen;
        final AtomicBoolean stop = new AtomicBoolean();
        volatile Set<TopicPartition> assignment = Set.of();
        volatile Throwable error;
        final Thread thread;

        Member(String name, String group, String topic, String assignor, Set<String> seen) {
            this.name = name;
            this.seen = seen;
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            if (consumerProtocol) {
                // The broker assigns; session and heartbeat timing are broker configs.
                p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
                p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
            } else {
                p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
                p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
                p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
                // A "killed" member must not send LeaveGroup when it stops.
                p.put("internal.leave.group.on.close", "false");
            }
            consumer = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
            consumer.subscribe(List.of(topic));
            thread = new Thread(this, name);
            thread.setDaemon(true);
            thread.start();
        }

        public void run() {
            try {
                while (!stop.get()) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                    for (ConsumerRecord<String, String> r : records) seen.add(r.value());
                    assignment = Set.copyOf(consumer.assignment());
                    if (!records.isEmpty()) {
                        try {
                            consumer.commitSync(Duration.ofSeconds(10));
                        } catch (Exception e) {
                            // a rebalance in progress: the next poll rejoins and commits again
                        }
                    }
                }
            } catch (Throwable t) {
                error = t;
            } finally {
                if (consumerProtocol) {
                    consumer.close(CloseOptions.groupMembershipOperation(
                            CloseOptions.GroupMembershipOperation.REMAIN_IN_GROUP).withTimeout(Duration.ofSeconds(5)));
                } else {
                    consumer.close(Duration.ofSeconds(5));
                }
            }
        }

        void kill() throws InterruptedException {
            stop.set(true);
            thread.join(20000);
        }
    }

    /** Waits until the members' assignments are disjoint and cover every partition. */
    static String waitForCover(List<Member> members, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        String last = "";
        int stableRounds = 0;
        while (System.currentTimeMillis() < deadline) {
            Set<Integer> all = new TreeSet<>();
            int total = 0;
            StringBuilder sb = new StringBuilder();
            for (Member m : members) {
                if (m.error != null) return "member " + m.name + " failed: " + m.error;
                Set<Integer> mine = new TreeSet<>();
                for (TopicPartition tp : m.assignment) mine.add(tp.partition());
                all.addAll(mine);
                total += mine.size();
                sb.append(m.name).append('=').append(mine).append(' ');
            }
            last = sb.toString().trim();
            boolean ok = all.size() == PARTITIONS && total == PARTITIONS
                    && members.stream().allMatch(m -> !m.assignment.isEmpty() || members.size() > PARTITIONS);
            stableRounds = ok ? stableRounds + 1 : 0;
            // Stable for 2 s: cooperative rebalances settle in two rounds.
            if (stableRounds >= 10) return "ok " + last;
            Thread.sleep(200);
        }
        return "assignments never covered all " + PARTITIONS + " partitions disjointly: " + last;
    }

    static String waitForAll(Set<String> seen, int want, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline) {
            if (seen.size() >= want) return "ok " + seen.size() + " distinct records";
            Thread.sleep(100);
        }
        return "saw " + seen.size() + " distinct records, want " + want;
    }

    static void produce(String topic, int from, int to) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = from; i < to; i++) prod.send(new ProducerRecord<>(topic, i % PARTITIONS, "k" + i, "v" + i));
            prod.flush();
        }
        produced += to - from;
    }

    static void groupScenario(String prefix, String topic, String assignorName, String assignor) throws Exception {
        String group = prefix + "-java-" + assignorName;
        // KIP-848: a silent member goes after the broker's 45 s session timeout.
        long failoverMs = consumerProtocol ? 120000 : 60000;
        Set<String> seen = ConcurrentHashMap.newKeySet();
        List<Member> members = new ArrayList<>();
        for (int i = 0; i < 3; i++) members.add(new Member(assignorName + "-" + i, group, topic, assignor, seen));
        try {
            run(assignorName + ": 3 members get disjoint assignments covering all 6 partitions",
                    () -> waitForCover(members, 60000));
            int initial = produced;
            run(assignorName + ": the group receives every record", () -> waitForAll(seen, initial, 60000));

            Member victim = members.get(2);
            victim.kill();
            List<Member> survivors = members.subList(0, 2);
            String how = consumerProtocol ? "with REMAIN_IN_GROUP" : "without LeaveGroup";
            run(assignorName + ": a member closed " + how + " loses its partitions to the others",
                    () -> waitForCover(survivors, failoverMs));
            produce(topic, initial, initial + 60);
            int total = produced;
            run(assignorName + ": survivors receive records produced after the failover",
                    () -> waitForAll(seen, total, 60000));
            run(assignorName + ": committed offsets reach the log end offsets", () -> {
                long deadline = System.currentTimeMillis() + 30000;
                String last = "";
                try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
                    while (System.currentTimeMillis() < deadline) {
                        Map<TopicPartition, OffsetAndMetadata> committed =
                                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
                        long sum = 0;
                        for (OffsetAndMetadata o : committed.values()) if (o != null) sum += o.offset();
                        last = committed.size() + " partitions, sum " + sum;
                        if (committed.size() == PARTITIONS && sum == total) return "ok " + last;
                        Thread.sleep(300);
                    }
                }
                return "committed offsets: " + last + ", want sum " + total;
            });
        } finally {
            for (Member m : members) m.kill();
        }
    }

    public static void main(String[] args) throws Exception {
        bootstrap = env("BOOTSTRAP", "127.0.0.1:9092");
        String prefix = env("TOPIC_PREFIX", "compat-" + System.currentTimeMillis());
        consumerProtocol = env("GROUP_PROTOCOL", "classic").equals("consumer");
        String topic = prefix + (consumerProtocol ? "-java-groups-consumer" : "-java-groups");
        System.out.println("CLIENT_VERSION: kafka-clients " + kafkaClientsVersion());
        System.out.println("bootstrap=" + bootstrap + " prefix=" + prefix);
        boolean ready = run("create a 6-partition topic and produce " + PARTITIONS * PER_PARTITION + " records", () -> {
            try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
                admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get(30, TimeUnit.SECONDS);
            }
            produce(topic, 0, PARTITIONS * PER_PARTITION);
            return null;
        });
        if (ready) {
            // Two groups on one topic: each one must receive every record on its own.
            if (consumerProtocol) {
                groupScenario(prefix, topic, "consumer-uniform", "uniform");
                groupScenario(prefix, topic, "consumer-range", "range");
            } else {
                groupScenario(prefix, topic, "range", RangeAssignor.class.getName());
                groupScenario(prefix, topic, "cooperative-sticky", CooperativeStickyAssignor.class.getName());
            }
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
