package sluice.compat;

import static sluice.compat.Checks.*;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Online group migration (KIP-848's upgrade and downgrade, broker `group.consumer.migration.policy`
 * at its default `bidirectional`) with the stock Java client against $BOOTSTRAP: two consumers with
 * {@code group.protocol=classic} (default assignors: range, cooperative-sticky) consume a 6-partition
 * topic; a third with {@code group.protocol=consumer} joins the same live group: it gets no error, the
 * group becomes a consumer group, the partitions spread disjointly over all three members and every
 * record is consumed; then the consumer-protocol member leaves, the group becomes classic again and the
 * two classic members go on consuming every new record; committed offsets reach the log end. Runs twice:
 * classic members with the client's default assignors (range, eager) and with cooperative-sticky.
 * Prints one PASS/FAIL line per check and a final "N passed, N failed" line.
 */
public final class MigrationCompat {
    static final int PARTITIONS = 6;
    static String bootstrap;
    static int produced = 0;

    /** One group member polling on its own thread (KafkaConsumer is single-threaded). */
    static final class Member implements Runnable {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final Set<String> seen;
        final AtomicInteger deliveries;
        final AtomicBoolean stop = new AtomicBoolean();
        volatile Set<TopicPartition> assignment = Set.of();
        volatile Throwable error;
        final Thread thread;

        Member(String name, String group, String topic, String protocol, String strategy,
               Set<String> seen, AtomicInteger deliveries) {
            this.name = name;
            this.seen = seen;
            this.deliveries = deliveries;
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
            if (protocol.equals("classic")) {
                p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
                p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
                if (strategy != null) p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, strategy);
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
                    for (ConsumerRecord<String, String> r : records) {
                        seen.add(r.value());
                        deliveries.incrementAndGet();
                    }
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
                // A normal close: the member leaves the group.
                consumer.close(Duration.ofSeconds(10));
            }
        }

        void close() throws InterruptedException {
            stop.set(true);
            thread.join(30000);
        }
    }

    /** Waits until the members' assignments are disjoint, cover every partition, none empty. */
    static String waitForCover(List<Member> members, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        String last = "";
        int stableRounds = 0;
        while (System.currentTimeMillis() < deadline) {
            Set<Integer> all = new TreeSet<>();
            int total = 0;
            boolean noneEmpty = true;
            StringBuilder sb = new StringBuilder();
            for (Member m : members) {
                if (m.error != null) return "member " + m.name + " failed: " + m.error;
                Set<Integer> mine = new TreeSet<>();
                for (TopicPartition tp : m.assignment) mine.add(tp.partition());
                all.addAll(mine);
                total += mine.size();
                noneEmpty &= !mine.isEmpty();
                sb.append(m.name).append('=').append(mine).append(' ');
            }
            last = sb.toString().trim();
            boolean ok = all.size() == PARTITIONS && total == PARTITIONS && noneEmpty;
            stableRounds = ok ? stableRounds + 1 : 0;
            if (stableRounds >= 10) return "ok " + last;
            Thread.sleep(200);
        }
        return "assignments never covered all " + PARTITIONS + " partitions disjointly: " + last;
    }

    static String waitForAll(Set<String> seen, AtomicInteger deliveries, int want, long timeoutMs)
            throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline) {
            if (seen.size() >= want) {
                return "ok " + seen.size() + " distinct records, " + deliveries.get() + " deliveries";
            }
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

    /** Waits until Admin describes the group with the given type and member count. */
    static String waitForType(Admin admin, String group, GroupType want, int members, long timeoutMs)
            throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        String last = "";
        while (System.currentTimeMillis() < deadline) {
            try {
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
                        .describedGroups().get(group).get(30, TimeUnit.SECONDS);
                last = d.type() + " " + d.groupState() + " " + d.members().size() + " members";
                if (d.type() == want && d.members().size() == members) return "ok " + last;
            } catch (Exception e) {
                last = e.toString();
            }
            Thread.sleep(300);
        }
        return "group is " + last + ", want " + want + " with " + members + " members";
    }

    /**
     * One migration round trip on its own topic and group. {@code strategy}: the classic members'
     * partition.assignment.strategy (null: the client default, range then cooperative-sticky).
     */
    static void scenario(Admin admin, String prefix, String name, String strategy) throws Exception {
        String topic = prefix + "-java-migration-" + name;
        String group = topic;
        produced = 0;
        Set<String> seen = ConcurrentHashMap.newKeySet();
        AtomicInteger deliveries = new AtomicInteger();
        List<Member> all = new ArrayList<>();
        boolean ready = run(name + ": create a 6-partition topic and produce 300 records", () -> {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get(30, TimeUnit.SECONDS);
            produce(topic, 0, 300);
            return null;
        });
        if (!ready) return;
        try {
            Member c1 = new Member(name + "-classic-1", group, topic, "classic", strategy, seen, deliveries);
            Member c2 = new Member(name + "-classic-2", group, topic, "classic", strategy, seen, deliveries);
            all.add(c1);
            all.add(c2);
            List<Member> classic = List.of(c1, c2);
            run(name + ": 2 classic members cover all 6 partitions disjointly", () -> waitForCover(classic, 60000));
            run(name + ": the group receives every record", () -> waitForAll(seen, deliveries, produced, 60000));
            run(name + ": the group is a classic group", () -> waitForType(admin, group, GroupType.CLASSIC, 2, 30000));

            produce(topic, 300, 400);
            Member k = new Member(name + "-consumer-1", group, topic, "consumer", null, seen, deliveries);
            all.add(k);
            List<Member> three = List.of(c1, c2, k);
            run(name + ": upgrade: a group.protocol=consumer member joins the live group; all 3 share the 6 partitions",
                    () -> waitForCover(three, 90000));
            run(name + ": upgrade: the group is now a consumer group of 3 members",
                    () -> waitForType(admin, group, GroupType.CONSUMER, 3, 30000));
            produce(topic, 400, 500);
            run(name + ": upgrade: every record is consumed", () -> waitForAll(seen, deliveries, produced, 60000));

            k.close();
            run(name + ": downgrade: the consumer-protocol member left without error",
                    () -> k.error == null ? null : k.name + " failed: " + k.error);
            run(name + ": downgrade: the 2 classic members cover all 6 partitions again",
                    () -> waitForCover(classic, 90000));
            run(name + ": downgrade: the group is a classic group again",
                    () -> waitForType(admin, group, GroupType.CLASSIC, 2, 30000));
            produce(topic, 500, 600);
            run(name + ": downgrade: the classic members receive every new record",
                    () -> waitForAll(seen, deliveries, produced, 60000));
            run(name + ": committed offsets reach the log end offsets", () -> {
                long deadline = System.currentTimeMillis() + 30000;
                String last = "";
                while (System.currentTimeMillis() < deadline) {
                    Map<TopicPartition, OffsetAndMetadata> committed =
                            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
                    long sum = 0;
                    for (OffsetAndMetadata o : committed.values()) if (o != null) sum += o.offset();
                    last = committed.size() + " partitions, sum " + sum;
                    if (committed.size() == PARTITIONS && sum == produced) return "ok " + last;
                    Thread.sleep(300);
                }
                return "committed offsets: " + last + ", want sum " + produced;
            });
            run(name + ": no classic member failed", () -> {
                for (Member m : classic) if (m.error != null) return m.name + " failed: " + m.error;
                return null;
            });
        } finally {
            for (Member m : all) m.close();
        }
    }

    public static void main(String[] args) throws Exception {
        bootstrap = env("BOOTSTRAP", "127.0.0.1:9092");
        String prefix = env("TOPIC_PREFIX", "compat-" + System.currentTimeMillis());
        System.out.println("CLIENT_VERSION: kafka-clients " + Checks.kafkaClientsVersion());
        System.out.println("bootstrap=" + bootstrap + " prefix=" + prefix);
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            // Eager (range first in the client default) and cooperative classic members.
            scenario(admin, prefix, "default", null);
            scenario(admin, prefix, "cooperative", CooperativeStickyAssignor.class.getName());
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
