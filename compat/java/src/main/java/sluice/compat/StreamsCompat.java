package sluice.compat;

import static sluice.compat.Checks.*;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * Kafka Streams word count against $BOOTSTRAP: a 3-partition input topic, flatMapValues + groupBy + count
 * (Streams creates its own repartition and changelog topics through AdminClient and purges the repartition
 * topic with DeleteRecords), counts to an output topic read back with an assign()-based consumer (latest
 * value per key). Checks: RUNNING, internal topics, final counts, repartition purge, committed offsets, and
 * a second instance (same application.id, fresh state dir: restores from the changelog) that resumes from
 * the committed offsets without recounting. The first argument (or STREAMS_GUARANTEE) picks processing.guarantee
 * (default at_least_once; exactly_once_v2 for the java/streams-eos unit, whose output is read read_committed).
 * STREAMS_BROKER_RESTART=1 (java/streams-eos-restart, driven by compat/crash/streams_restart.py) has the
 * broker killed and restarted while more lines are produced and counted, then checks the exact counts and
 * ends before the second instance. Prints PASS/FAIL lines and "N passed, N failed".
 */
public final class StreamsCompat {
    static final int PARTITIONS = 3;
    static final String[] VOCAB = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot",
            "golf", "hotel", "india", "juliet", "kilo", "lima"};
    static final long DEADLINE_MS = Long.parseLong(env("STREAMS_DEADLINE_MS", "90000"));
    static final long RUNNING_MS = Long.parseLong(env("STREAMS_RUNNING_TIMEOUT_MS", "60000"));
    /** java/streams-eos-restart (compat/crash/streams_restart.py): the broker is killed and restarted mid-run. */
    static final boolean BROKER_RESTART = "1".equals(env("STREAMS_BROKER_RESTART", ""));
    static String bootstrap, guarantee, tag, appId, input, output;

    static List<String> lines(int from, int n) {
        List<String> out = new ArrayList<>();
        for (int i = from; i < from + n; i++) {
            StringBuilder sb = new StringBuilder();
            for (int j = 0; j <= i % 5; j++) {
                if (j > 0) sb.append(j % 2 == 0 ? "  " : " ");
                String w = VOCAB[(i * 7 + j * 3) % VOCAB.length];
                sb.append(j == 1 ? w.toUpperCase() : w);
            }
            out.add(sb.toString());
        }
        return out;
    }

    static void addCounts(Map<String, Long> m, List<String> ls) {
        for (String l : ls)
            for (String w : l.toLowerCase().split("\\s+"))
                if (!w.isEmpty()) m.merge(w, 1L, Long::sum);
    }

    static void produce(List<String> ls, int from) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
            for (int i = 0; i < ls.size(); i++) fs.add(pr.send(new ProducerRecord<>(input, "line-" + (from + i), ls.get(i))));
            pr.flush();
            for (var f : fs) f.get(30, TimeUnit.SECONDS);
        }
    }

    static KafkaStreams start(java.nio.file.Path stateDir, String state[]) {
        StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream(input)
                .flatMapValues(v -> Arrays.asList(v.toLowerCase().split("\\s+")))
                .filter((k, w) -> !w.isEmpty())
                .groupBy((k, w) -> w, Grouped.with("counts", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 500);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 1000);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        // Streams members do not send LeaveGroup on close: the restarted instance waits for the session timeout
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        KafkaStreams ks = new KafkaStreams(b.build(), p);
        ks.setStateListener((n, o) -> { state[0] = n.toString(); System.out.println("streams state " + o + " -> " + n); });
        ks.setUncaughtExceptionHandler(e -> {
            System.out.println("streams uncaught exception: " + e);
            e.printStackTrace(System.out);
            // across a broker restart a production app replaces a dead stream thread rather than stopping
            return BROKER_RESTART ? org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD
                    : org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        ks.start();
        return ks;
    }

    static String waitRunning(String[] state) throws InterruptedException {
        long end = System.currentTimeMillis() + RUNNING_MS;
        while (System.currentTimeMillis() < end) {
            if ("RUNNING".equals(state[0])) return null;
            if ("ERROR".equals(state[0]) || "NOT_RUNNING".equals(state[0]) || "PENDING_ERROR".equals(state[0])) break;
            Thread.sleep(100);
        }
        return "state " + state[0] + " after waiting for RUNNING";
    }

    /** Output reader: latest value per word and the highest value ever seen per word. */
    static final Map<String, Long> latest = new TreeMap<>(), highest = new HashMap<>();
    static KafkaConsumer<String, Long> out;

    static void pollOnce() {
        for (ConsumerRecord<String, Long> r : out.poll(Duration.ofMillis(200))) {
            latest.put(r.key(), r.value());
            highest.merge(r.key(), r.value(), Math::max);
        }
    }

    static String waitCounts(Map<String, Long> expected, String[] state) {
        long end = System.currentTimeMillis() + DEADLINE_MS;
        while (System.currentTimeMillis() < end && !latest.equals(expected)) {
            pollOnce();
            if ("ERROR".equals(state[0]) || "NOT_RUNNING".equals(state[0])) break;
        }
        if (!latest.equals(expected)) return "latest counts " + latest + " != expected " + expected + " (streams " + state[0] + ")";
        // stay stable for 3 s (no late recount), and never above the expected count
        long quiet = System.currentTimeMillis() + 3000;
        while (System.currentTimeMillis() < quiet) pollOnce();
        if (!latest.equals(expected)) return "counts changed after reaching expected: " + latest;
        for (var e : highest.entrySet())
            if (e.getValue() > expected.getOrDefault(e.getKey(), 0L)) return "word " + e.getKey() + " reached " + e.getValue() + " > " + expected.get(e.getKey()) + " (recount)";
        long total = expected.values().stream().mapToLong(Long::longValue).sum();
        return "ok: " + expected.size() + " words, " + total + " occurrences";
    }

    /**
     * Restart mode: lines 200..499 are produced at ~100 lines/s; after the first 100 are acknowledged the
     * wrapper is asked (stdout "BROKER_RESTART", answer "restarted" on stdin) to kill -9 and restart the
     * broker while Streams processes and the producer keeps sending. Then every line must be acknowledged
     * and the counts must reach exactly the new totals (never above: no recount of a committed transaction).
     */
    static boolean brokerRestart(Map<String, Long> exp1, String[] state) throws Exception {
        List<String> mid = lines(200, 300);
        Map<String, Long> exp = new TreeMap<>(exp1);
        addCounts(exp, mid);
        java.util.concurrent.atomic.AtomicInteger acked = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.CompletableFuture<String> sent = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.ACKS_CONFIG, "all");
            p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120000);
            try (KafkaProducer<String, String> pr = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
                List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
                for (int i = 0; i < mid.size(); i++) {
                    fs.add(pr.send(new ProducerRecord<>(input, "line-" + (200 + i), mid.get(i)), (md, e) -> { if (e == null) acked.incrementAndGet(); }));
                    if (i % 10 == 9) Thread.sleep(100);
                }
                pr.flush();
                for (var f : fs) f.get(120, TimeUnit.SECONDS);
                return null;
            } catch (Exception e) {
                return e.toString();
            }
        });
        boolean ok = run(tag + "/broker-restart", () -> {
            long end = System.currentTimeMillis() + 30000;
            while (acked.get() < 100 && System.currentTimeMillis() < end) Thread.sleep(20);
            if (acked.get() < 100) return "only " + acked.get() + " of the first 100 lines acknowledged in 30 s";
            int before = acked.get();
            System.out.println("BROKER_RESTART");
            System.out.flush();
            String answer = new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
            if (!"restarted".equals(answer)) return "the wrapper answered " + answer + " instead of restarted";
            return "ok: broker killed and restarted with " + before + " of " + mid.size() + " lines acknowledged, streams " + state[0];
        });
        ok &= run(tag + "/broker-restart-produce", () -> {
            String err = sent.get(150, TimeUnit.SECONDS);
            return err != null ? err : "ok: all " + mid.size() + " lines acknowledged across the restart";
        });
        return ok && run(tag + "/broker-restart-counts", () -> waitCounts(exp, state));
    }

    public static void main(String[] args) throws Exception {
        bootstrap = env("BOOTSTRAP", "127.0.0.1:9092");
        guarantee = args.length > 0 ? args[0] : env("STREAMS_GUARANTEE", "at_least_once");
        tag = guarantee.equals("at_least_once") ? "streams" : BROKER_RESTART ? "streams-eos-restart" : "streams-eos";
        String prefix = env("TOPIC_PREFIX", "compat") + "-" + tag;
        appId = prefix + "-wordcount";
        input = prefix + "-lines";
        output = prefix + "-counts";
        System.out.println("CLIENT_VERSION: kafka-streams " + kafkaClientsVersion() + " (" + guarantee + ")");
        long t0 = System.currentTimeMillis();
        Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap));
        boolean ok = run(tag + "/create-topics", () -> {
            admin.createTopics(List.of(new NewTopic(input, PARTITIONS, (short) 1), new NewTopic(output, PARTITIONS, (short) 1)))
                    .all().get(30, TimeUnit.SECONDS);
            return null;
        });
        List<String> batch1 = lines(0, 200), batch2 = lines(200, 100);
        Map<String, Long> exp1 = new TreeMap<>(), exp2 = new TreeMap<>();
        addCounts(exp1, batch1);
        addCounts(exp2, batch1);
        addCounts(exp2, batch2);
        if (ok) ok = run(tag + "/produce-lines", () -> { produce(batch1, 0); return "ok: " + batch1.size() + " lines"; });

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, guarantee.equals("at_least_once") ? "read_uncommitted" : "read_committed");
        out = new KafkaConsumer<>(cp, new StringDeserializer(), new LongDeserializer());
        List<TopicPartition> outTps = new ArrayList<>();
        for (int i = 0; i < PARTITIONS; i++) outTps.add(new TopicPartition(output, i));
        out.assign(outTps);
        out.seekToBeginning(outTps);

        java.nio.file.Path dir1 = Files.createTempDirectory("sluice-streams-1"), dir2 = Files.createTempDirectory("sluice-streams-2");
        String[] state1 = {"CREATED"};
        KafkaStreams ks1 = ok ? start(dir1, state1) : null;
        if (ok) ok = run(tag + "/running", () -> waitRunning(state1));
        if (ok) ok = run(tag + "/counts", () -> waitCounts(exp1, state1));
        if (ok && BROKER_RESTART) ok = brokerRestart(exp1, state1);
        String repartition = appId + "-counts-repartition", changelog = appId + "-counts-changelog";
        if (ks1 != null) run(tag + "/internal-topics", () -> {
            Set<String> names = new TreeSet<>(admin.listTopics(new ListTopicsOptions().listInternal(true)).names().get(30, TimeUnit.SECONDS));
            Set<String> mine = names.stream().filter(n -> n.startsWith(appId)).collect(Collectors.toCollection(TreeSet::new));
            if (!mine.contains(repartition) || !mine.contains(changelog)) return "want " + repartition + " and " + changelog + ", have " + mine;
            var d = admin.describeTopics(List.of(repartition, changelog)).allTopicNames().get(30, TimeUnit.SECONDS);
            int rp = d.get(repartition).partitions().size(), cl = d.get(changelog).partitions().size();
            if (rp != PARTITIONS || cl != PARTITIONS) return "partitions: repartition " + rp + ", changelog " + cl + " (want " + PARTITIONS + ")";
            var cfg = admin.describeConfigs(List.of(new org.apache.kafka.common.config.ConfigResource(
                    org.apache.kafka.common.config.ConfigResource.Type.TOPIC, changelog))).all().get(30, TimeUnit.SECONDS);
            String policy = cfg.values().iterator().next().get("cleanup.policy").value();
            if (!policy.contains("compact")) return "changelog cleanup.policy=" + policy + " (want compact)";
            return "ok: " + mine + ", changelog cleanup.policy=" + policy;
        });
        if (ok) run(tag + "/repartition-purged", () -> {
            // Streams deletes consumed repartition records (DeleteRecords) after a commit
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < PARTITIONS; i++) tps.add(new TopicPartition(repartition, i));
            long end = System.currentTimeMillis() + 30000;
            Map<TopicPartition, Long> starts = new TreeMap<>((a, b) -> a.partition() - b.partition());
            long sum = 0;
            while (System.currentTimeMillis() < end) {
                var r = admin.listOffsets(tps.stream().collect(Collectors.toMap(tp -> tp, tp -> OffsetSpec.earliest())))
                        .all().get(30, TimeUnit.SECONDS);
                sum = 0;
                for (var e : r.entrySet()) { starts.put(e.getKey(), e.getValue().offset()); sum += e.getValue().offset(); }
                if (sum > 0) return "ok: log start offsets " + starts.values();
                Thread.sleep(500);
            }
            return "repartition log start offsets still " + starts.values() + " after 30 s";
        });
        // restart mode: an app that never ran would only wait out close's timeout (the JVM halts at the end)
        if (ks1 != null && (ok || !BROKER_RESTART)) run(tag + "/close", () -> ks1.close(Duration.ofSeconds(30)) ? null : "close timed out (state " + state1[0] + ")");
        if (ok) ok = run(tag + "/committed-offsets", () -> {
            Map<TopicPartition, OffsetAndMetadata> c = admin.listConsumerGroupOffsets(appId).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < PARTITIONS; i++) tps.add(new TopicPartition(input, i));
            var ends = admin.listOffsets(tps.stream().collect(Collectors.toMap(tp -> tp, tp -> OffsetSpec.latest()))).all().get(30, TimeUnit.SECONDS);
            for (TopicPartition tp : tps) {
                OffsetAndMetadata om = c.get(tp);
                if (om == null || om.offset() != ends.get(tp).offset())
                    return tp + ": committed " + (om == null ? "none" : om.offset()) + ", log end " + ends.get(tp).offset() + " (all committed: " + c + ")";
            }
            return "ok: input committed at the log end";
        });

        // second instance: same application.id, fresh state dir (restores the store from the changelog);
        // the restart mode ends before it (java/streams-eos covers it)
        if (BROKER_RESTART) ok = false;
        String[] state2 = {"CREATED"};
        KafkaStreams ks2 = ok ? start(dir2, state2) : null;
        if (ok) ok = run(tag + "/restart-running", () -> waitRunning(state2));
        if (ok) ok = run(tag + "/restart-produce", () -> { produce(batch2, 200); return "ok: " + batch2.size() + " more lines"; });
        if (ok) run(tag + "/restart-counts", () -> waitCounts(exp2, state2));
        if (ks2 != null) run(tag + "/restart-close", () -> ks2.close(Duration.ofSeconds(30)) ? null : "close timed out (state " + state2[0] + ")");
        out.close();
        for (java.nio.file.Path d : List.of(dir1, dir2))
            try (var w = Files.walk(d)) { w.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete()); }
        admin.close(Duration.ofSeconds(5));
        System.out.println("seconds: " + (System.currentTimeMillis() - t0) / 1000.0);
        System.out.println(passed + " passed, " + failed + " failed");
        System.out.flush();
        Runtime.getRuntime().halt(failed == 0 ? 0 : 1);
    }
}
