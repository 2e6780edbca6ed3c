package sluice.compat;

import static sluice.compat.Checks.*;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * KIP-932 share groups with the stock Java {@code KafkaShareConsumer} (kafka-clients 4.1.2 speaks
 * ShareGroupHeartbeat/ShareGroupDescribe/ShareFetch/ShareAcknowledge v1) against $BOOTSTRAP: the
 * group is set to {@code share.auto.offset.reset=earliest} through a GROUP config resource, three
 * consumers in explicit acknowledgement mode share one partition of 300 records (one record per
 * batch); every record with offset % 10 == 3 is RELEASEd on its first delivery, every one with
 * offset % 10 == 7 REJECTed, the rest ACCEPTed. Checks: no record is held by two consumers at once,
 * every released record comes back with a higher delivery count, rejected records never come back,
 * every other record is accepted exactly once, the work is spread over more than one consumer, and
 * ShareGroupDescribe (Admin.describeShareGroups) shows the three members. Against a Kafka 4.1 whose
 * share.version is 0 it first finalizes share.version 1 (UpdateFeatures), as kafka-features does.
 * Prints one PASS/FAIL line per check and a final "N passed, N failed" line.
 */
public final class ShareCompat {
    static final int RECORDS = 300;
    static final int CONSUMERS = 3;
    static String bootstrap;

    /** Per offset: the consumer holding it now (delivered, not yet acknowledged). */
    static final Map<Long, String> holder = new ConcurrentHashMap<>();
    /** Per offset: how often it was delivered, and the highest delivery count seen. */
    static final Map<Long, AtomicInteger> deliveries = new ConcurrentHashMap<>();
    static final Map<Long, Integer> maxDeliveryCount = new ConcurrentHashMap<>();
    static final Set<Long> accepted = ConcurrentHashMap.newKeySet();
    static final Set<Long> rejected = ConcurrentHashMap.newKeySet();
    static final Set<Long> released = ConcurrentHashMap.newKeySet();
    static final List<String> violations = java.util.Collections.synchronizedList(new ArrayList<>());
    static final Map<String, AtomicInteger> perConsumer = new ConcurrentHashMap<>();

    static boolean done() {
        return accepted.size() + rejected.size() == RECORDS;
    }

    /** One share consumer polling on its own thread (KafkaShareConsumer is single-threaded). */
    static final class Member implements Runnable {
        final String name;
        final KafkaShareConsumer<String, String> consumer;
        volatile boolean stop = false;
        volatile Throwable error;

        Member(String name, String group, String topic) {
            this.name = name;
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
            p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
            p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "10");
            consumer = new KafkaShareConsumer<>(p);
            consumer.subscribe(List.of(topic));
            perConsumer.put(name, new AtomicInteger());
        }

        public void run() {
            try {
                while (!stop) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                        long o = r.offset();
                        String before = holder.putIfAbsent(o, name);
                        if (before != null) {
                            violations.add("offset " + o + " delivered to " + name + " while " + before + " holds it");
                        }
                        int n = deliveries.computeIfAbsent(o, k -> new AtomicInteger()).incrementAndGet();
                        int count = r.deliveryCount().map(Short::intValue).orElse(-1);
                        maxDeliveryCount.merge(o, count, Math::max);
                        perConsumer.get(name).incrementAndGet();
                        AcknowledgeType type;
                        if (o % 10 == 7) {
                            type = AcknowledgeType.REJECT;
                        } else if (o % 10 == 3 && n == 1) {
                            type = AcknowledgeType.RELEASE;
                        } else {
                            type = AcknowledgeType.ACCEPT;
                        }
                        // Cleared before the broker hears of it: a second holder is then a real
                        // double delivery, never an artefact of the order here.
                        holder.remove(o, name);
                        consumer.acknowledge(r, type);
                        switch (type) {
                            case REJECT: rejected.add(o); break;
                            case RELEASE: released.add(o); break;
                            default:
                                if (!accepted.add(o)) violations.add("offset " + o + " accepted twice");
                        }
                    }
                    consumer.commitSync(Duration.ofSeconds(10));
                }
            } catch (WakeupException e) {
                // stop
            } catch (Throwable t) {
                error = t;
            }
        }
    }

    /** Finalizes share.version 1 on a broker that has share groups off (Kafka 4.1's default). */
    static String enableShareGroups(Admin admin) throws Exception {
        FinalizedVersionRange level = admin.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS)
            .finalizedFeatures().get("share.version");
        if (level != null && level.maxVersionLevel() >= 1) {
            return "ok, share.version " + level.maxVersionLevel() + " already finalized";
        }
        admin.updateFeatures(
            Map.of("share.version", new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.UPGRADE)),
            new UpdateFeaturesOptions()).all().get(30, TimeUnit.SECONDS);
        return "ok, finalized share.version 1";
    }

    public static void main(String[] args) throws Exception {
        bootstrap = env("BOOTSTRAP", "127.0.0.1:9092");
        String prefix = env("TOPIC_PREFIX", "compat-" + System.currentTimeMillis());
        String topic = prefix + "-java-share";
        String group = prefix + "-java-share-group";
        System.out.println("CLIENT_VERSION: kafka-clients " + kafkaClientsVersion());
        System.out.println("bootstrap=" + bootstrap + " prefix=" + prefix);
        Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap));
        boolean ready = run("share groups enabled (share.version >= 1)", () -> enableShareGroups(admin))
            && run("create a 1-partition topic and produce " + RECORDS + " records, one per batch", () -> {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
                Properties p = new Properties();
                p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                    for (int i = 0; i < RECORDS; i++) {
                        producer.send(new ProducerRecord<>(topic, 0, null, "v" + i)).get(30, TimeUnit.SECONDS);
                    }
                }
                return null;
            })
            && run("IncrementalAlterConfigs GROUP " + group + " share.auto.offset.reset=earliest", () -> {
                ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
                AlterConfigOp op = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                    AlterConfigOp.OpType.SET);
                admin.incrementalAlterConfigs(Map.of(res, List.of(op))).all().get(30, TimeUnit.SECONDS);
                return null;
            });
        if (ready) {
            List<Member> members = new ArrayList<>();
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < CONSUMERS; i++) {
                Member m = new Member("share-" + i, group, topic);
                members.add(m);
                Thread t = new Thread(m, m.name);
                threads.add(t);
                t.start();
            }
            long deadline = System.currentTimeMillis() + 90_000;
            while (!done() && System.currentTimeMillis() < deadline) Thread.sleep(100);
            run("ShareGroupDescribe shows " + CONSUMERS + " members", () -> {
                ShareGroupDescription d = admin.describeShareGroups(List.of(group)).all()
                    .get(30, TimeUnit.SECONDS).get(group);
                return d.members().size() == CONSUMERS
                    ? "ok, state " + d.groupState() + ", epoch " + d.groupEpoch()
                    : d.members().size() + " members: " + d;
            });
            for (Member m : members) m.stop = true;
            for (Thread t : threads) t.join(20_000);
            for (Member m : members) m.consumer.close(Duration.ofSeconds(10));
            for (Member m : members) {
                check(m.name + " polled without error", m.error == null, String.valueOf(m.error));
            }
            check("every record acknowledged (accepted or rejected)", done(),
                "accepted " + accepted.size() + " rejected " + rejected.size() + " of " + RECORDS);
            check("no record held by two consumers at once", violations.isEmpty(),
                violations.isEmpty() ? "" : violations.subList(0, Math.min(5, violations.size())).toString());
            int releasedExpected = RECORDS / 10;
            long redelivered = released.stream()
                .filter(o -> deliveries.get(o).get() >= 2 && maxDeliveryCount.getOrDefault(o, 0) >= 2
                    && accepted.contains(o))
                .count();
            check("released records redelivered with delivery count >= 2 and then accepted",
                released.size() == releasedExpected && redelivered == releasedExpected,
                "released " + released.size() + ", redelivered " + redelivered + " of " + releasedExpected);
            long rejectedOnce = rejected.stream().filter(o -> deliveries.get(o).get() == 1).count();
            check("rejected records never redelivered", rejected.size() == RECORDS / 10 && rejectedOnce == rejected.size(),
                "rejected " + rejected.size() + ", delivered once " + rejectedOnce);
            long accepts = accepted.stream().filter(o -> o % 10 != 3).filter(o -> deliveries.get(o).get() == 1).count();
            check("other records delivered once and accepted", accepts == RECORDS - 2L * (RECORDS / 10),
                accepts + " of " + (RECORDS - 2 * (RECORDS / 10)));
            long busy = perConsumer.values().stream().filter(n -> n.get() > 0).count();
            check("records spread over more than one consumer", busy > 1, perConsumer.toString());
        }
        admin.close();
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
