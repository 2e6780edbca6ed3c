package sluice.compat;

import static sluice.compat.Checks.*;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Stock Java client (kafka-clients) against a broker at $BOOTSTRAP.
 * Consumers use assign() only: no consumer-group APIs are needed.
 * Prints one PASS/FAIL line per check and a final "N passed, N failed" line.
 */
public final class JavaCompat {
    static final int PARTITIONS = 6;
    static String bootstrap;
    static String prefix;

    public static void main(String[] args) throws Exception {
        bootstrap = env("BOOTSTRAP", "127.0.0.1:9092");
        prefix = env("TOPIC_PREFIX", "compat-" + System.currentTimeMillis());
        int n = Integer.parseInt(env("JAVA_RECORDS", "10000"));
        System.out.println("CLIENT_VERSION: kafka-clients " + kafkaClientsVersion());
        System.out.println("bootstrap=" + bootstrap + " prefix=" + prefix + " records=" + n);

        String main = prefix + "-java-default";
        String t0 = prefix + "-java-acks0";
        String t1 = prefix + "-java-acks1";

        boolean created = run("admin.createTopics(6 partitions), describeTopics, listOffsets(latest)=0", () -> {
            try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                    AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000))) {
                admin.createTopics(List.of(
                        new NewTopic(main, PARTITIONS, (short) 1),
                        new NewTopic(t0, PARTITIONS, (short) 1),
                        new NewTopic(t1, PARTITIONS, (short) 1))).all().get(30, TimeUnit.SECONDS);
                Map<String, org.apache.kafka.clients.admin.TopicDescription> d =
                        describeCreated(admin, List.of(main, t0, t1));
                for (var e : d.entrySet()) {
                    if (e.getValue().partitions().size() != PARTITIONS)
                        return e.getKey() + " has " + e.getValue().partitions().size() + " partitions, want " + PARTITIONS;
                }
                // Wait until every partition answers ListOffsets (its leader is ready). Right after
                // CreateTopics Kafka can still answer Produce with NOT_LEADER_OR_FOLLOWER, and the idempotent
                // Java producer may then wedge on OUT_OF_ORDER_SEQUENCE_NUMBER retries until delivery.timeout.ms.
                Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
                for (String t : List.of(main, t0, t1))
                    for (int i = 0; i < PARTITIONS; i++) specs.put(new TopicPartition(t, i), OffsetSpec.latest());
                var offs = admin.listOffsets(specs).all().get(30, TimeUnit.SECONDS);
                for (var e : offs.entrySet())
                    if (e.getValue().offset() != 0) return e.getKey() + " end offset " + e.getValue().offset() + ", want 0 for a new topic";
            }
            return null;
        });

        if (created) {
            Map<String, Integer> producedPartition = new HashMap<>();
            boolean produced = run("producer(default settings, idempotent) " + n + " keyed records, every future succeeds", () -> {
                Properties p = clientProps();
                try (KafkaProducer<String, String> prod = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
                    List<Future<RecordMetadata>> fs = new ArrayList<>(n);
                    for (int i = 0; i < n; i++) fs.add(prod.send(new ProducerRecord<>(main, key(i), value(i))));
                    prod.flush();
                    int bad = 0;
                    String firstErr = null;
                    for (int i = 0; i < n; i++) {
                        try {
                            RecordMetadata md = fs.get(i).get(60, TimeUnit.SECONDS);
                            Integer prev = producedPartition.put(key(i), md.partition());
                            if (prev != null && prev != md.partition()) {
                                bad++;
                                if (firstErr == null) firstErr = "key " + key(i) + " acked on partitions " + prev + " and " + md.partition();
                            }
                        } catch (Exception e) {
                            bad++;
                            if (firstErr == null) firstErr = "record " + i + ": " + e;
                        }
                    }
                    if (bad > 0) return bad + " sends failed/inconsistent; first: " + firstErr;
                    return "ok " + n + " acked";
                }
            });
            if (produced) {
                run("consumer(assign+seekToBeginning) reads back " + n + " records: count, values, per-key partition, contiguous offsets",
                        () -> verifyReadBack(main, n, producedPartition));
            }
            for (String acks : new String[]{"0", "1"}) {
                String topic = acks.equals("0") ? t0 : t1;
                int m = 1000;
                run("producer acks=" + acks + " (enable.idempotence=false) " + m + " records + read back", () -> {
                    Properties p = clientProps();
                    p.put(ProducerConfig.ACKS_CONFIG, acks);
                    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
                    Map<String, Integer> parts = new HashMap<>();
                    try (KafkaProducer<String, String> prod = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
                        List<Future<RecordMetadata>> fs = new ArrayList<>();
                        for (int i = 0; i < m; i++) fs.add(prod.send(new ProducerRecord<>(topic, key(i), value(i))));
                        prod.flush();
                        for (int i = 0; i < m; i++) {
                            RecordMetadata md = fs.get(i).get(60, TimeUnit.SECONDS);
                            // acks=0 gives no offsets back (offset -1); the partition is still the partitioner's choice
                            parts.put(key(i), md.partition());
                        }
                    }
                    return verifyReadBack(topic, m, parts);
                });
            }
            String dataDir = System.getenv("BROKER_DATA_DIR");
            if (dataDir != null && !dataDir.isEmpty() && produced) {
                run("DumpLogSegments reads the broker's segments of " + main + ": exit 0, " + n + " records, producerId set, no errors",
                        () -> dumpLog(dataDir, main, n));
            } else {
                System.out.println("SKIP dumplog: BROKER_DATA_DIR not set");
            }
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }

    static String key(int i) { return "key-" + (i % 997); }
    static String value(int i) { return "value-" + i + "-" + "x".repeat(i % 50); }

    static Properties clientProps() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);  // everything else stays at the client's defaults
        return p;
    }

    /** Reads every partition of the topic from the beginning with assign() and checks what came back. */
    static String verifyReadBack(String topic, int n, Map<String, Integer> producedPartition) {
        Properties p = clientProps();
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "2000");
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < PARTITIONS; i++) tps.add(new TopicPartition(topic, i));
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) got.add(r);
            }
            // Any extra record (duplicates) shows up in a short final poll.
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) got.add(r);
        }
        if (got.size() != n) return "read " + got.size() + " records, want " + n;
        Map<String, Integer> keyPart = new HashMap<>();
        boolean[] seen = new boolean[n];
        Map<Integer, Long> nextOffset = new HashMap<>();
        Pattern vp = Pattern.compile("value-(\\d+)-x*");
        for (ConsumerRecord<String, String> r : got) {
            Matcher m = vp.matcher(r.value() == null ? "" : r.value());
            if (!m.matches()) return "unexpected value " + r.value();
            int i = Integer.parseInt(m.group(1));
            if (i < 0 || i >= n || !r.value().equals(value(i))) return "corrupt value " + r.value();
            if (seen[i]) return "duplicate value " + r.value();
            seen[i] = true;
            if (!key(i).equals(r.key())) return "value " + i + " has key " + r.key() + ", want " + key(i);
            Integer prev = keyPart.put(r.key(), r.partition());
            if (prev != null && prev != r.partition()) return "key " + r.key() + " found in partitions " + prev + " and " + r.partition();
            Integer acked = producedPartition.get(r.key());
            if (acked != null && acked != r.partition()) return "key " + r.key() + " acked on partition " + acked + " but read from " + r.partition();
            long want = nextOffset.getOrDefault(r.partition(), 0L);
            if (r.offset() != want) return "partition " + r.partition() + ": offset " + r.offset() + ", want " + want + " (not contiguous from 0)";
            nextOffset.put(r.partition(), want + 1);
        }
        return "ok " + n + " records over " + nextOffset.size() + " partitions " + nextOffset;
    }

    /** kafka.tools.DumpLogSegments up to Kafka 4.1, org.apache.kafka.tools.DumpLogSegments in 4.4. */
    static String dumpLogSegmentsClass(String libs) {
        File[] jars = new File(libs).listFiles((d, name) -> name.startsWith("kafka-tools-") && name.endsWith(".jar"));
        for (File jar : jars == null ? new File[0] : jars) {
            try (java.util.zip.ZipFile z = new java.util.zip.ZipFile(jar)) {
                if (z.getEntry("org/apache/kafka/tools/DumpLogSegments.class") != null) return "org.apache.kafka.tools.DumpLogSegments";
            } catch (java.io.IOException e) {
                // an unreadable jar: keep looking, fall back to the 4.1 class name
            }
        }
        return "kafka.tools.DumpLogSegments";
    }

    static String dumpLog(String dataDir, String topic, int n) throws Exception {
        String libs = env("KAFKA_LIBS", "");
        if (libs.isEmpty()) return "KAFKA_LIBS not set (folder with kafka_2.13 + kafka-tools jars)";
        List<String> files = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            File dir = new File(dataDir, topic + "-" + p);
            File[] logs = dir.listFiles((d, name) -> name.endsWith(".log"));
            if (logs == null) return "no partition directory " + dir;
            Arrays.sort(logs);
            for (File f : logs) files.add(f.getPath());
        }
        if (files.isEmpty()) return "no .log segment files";
        List<String> cmd = new ArrayList<>(List.of("java", "-Xmx512m", "-cp", libs + File.separator + "*",
                dumpLogSegmentsClass(libs), "--print-data-log", "--files", String.join(",", files)));
        Process proc = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        long records = 0, dataLines = 0, noPid = 0;
        List<String> errors = new ArrayList<>();
        Pattern countP = Pattern.compile("\\bcount: (\\d+)");
        Pattern pidP = Pattern.compile("\\bproducerId: (-?\\d+)");
        try (BufferedReader br = new BufferedReader(new InputStreamReader(proc.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = br.readLine()) != null) {
                if (line.startsWith("baseOffset:")) {
                    Matcher m = countP.matcher(line);
                    if (m.find()) records += Long.parseLong(m.group(1));
                    Matcher pm = pidP.matcher(line);
                    if (pm.find() && Long.parseLong(pm.group(1)) < 0) noPid++;
                } else if (line.startsWith("| offset:")) {
                    dataLines++;
                } else if (line.contains("Exception") || line.toLowerCase().contains("error") || line.contains("corrupt")
                        || line.contains("mismatch") || line.contains("Found ")) {
                    if (errors.size() < 5) errors.add(line);
                }
            }
        }
        if (!proc.waitFor(120, TimeUnit.SECONDS)) { proc.destroyForcibly(); return "DumpLogSegments timed out"; }
        int rc = proc.exitValue();
        if (rc != 0) return "DumpLogSegments exit " + rc + " " + errors;
        if (!errors.isEmpty()) return "DumpLogSegments reported: " + errors;
        if (records != n || dataLines != n) return "DumpLogSegments saw " + records + " records in batch headers and " + dataLines + " record lines, want " + n;
        if (noPid > 0) return noPid + " batches without a producerId (default producer is idempotent)";
        return "ok " + files.size() + " segment files, " + records + " records";
    }

}
