// Benchmark client for scripts/bench. Compiled against the same kafka-clients jar that Kafka's own
// ProducerPerformance uses (.tools/kafka/libs), so both brokers see one client binary.
//
// No consumer group anywhere (Sluice has none yet): consumers use assign().
//
//   create-topic BOOTSTRAP TOPIC PARTITIONS [STEP]
//                (with STEP: create STEP partitions, then CreatePartitions in steps of STEP, because
//                Kafka's controller refuses one operation of more than 10,000 records)
//   create-topics BOOTSTRAP TOPIC:PARTITIONS...
//                (several topics in one CreateTopics call: one JVM start instead of one per topic)
//   produce-rr   BOOTSTRAP TOPIC PARTITIONS RECORDS_PER_PARTITION RECORD_SIZE
//                (round-robin over every partition, explicit partition numbers, acks=1)
//   consume      BOOTSTRAP TOPIC EXPECTED_RECORDS
//   latency      BOOTSTRAP TOPIC RATE_PER_SEC SECONDS RECORD_SIZE WARMUP_SECONDS
//
// Every mode prints one line "RESULT {json}" on stdout.
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

public class BenchClient {
    public static void main(String[] args) throws Exception {
        if (args.length < 1) usage();
        switch (args[0]) {
            case "create-topic":
                createTopic(args[1], args[2], Integer.parseInt(args[3]),
                        args.length > 4 ? Integer.parseInt(args[4]) : Integer.parseInt(args[3]));
                break;
            case "create-topics":
                createTopics(args[1], Arrays.copyOfRange(args, 2, args.length));
                break;
            case "produce-rr":
                produceRoundRobin(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                        Integer.parseInt(args[5]));
                break;
            case "consume": consume(args[1], args[2], Long.parseLong(args[3])); break;
            case "latency":
                latency(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                        Integer.parseInt(args[5]), Integer.parseInt(args[6]));
                break;
            default: usage();
        }
        System.exit(0);
    }

    static void usage() {
        System.err.println("usage: BenchClient create-topic|create-topics|produce-rr|consume|latency ... (see source)");
        System.exit(2);
    }

    static Properties consumerProps(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        return p;
    }

    static Properties producerProps(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        return p;
    }

    // Creates the topic (in steps when STEP < PARTITIONS), then waits until the metadata shows every
    // partition with a leader. Reports the admin calls' time and the time until all are ready.
    static void createTopic(String bootstrap, String topic, int partitions, int step) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "300000");
        p.put("default.api.timeout.ms", "300000");
        double created, ready;
        try (Admin admin = Admin.create(p)) {
            admin.describeCluster().nodes().get(60, TimeUnit.SECONDS);  // connected before the clock
            long start = System.nanoTime();
            int n = Math.min(partitions, step);
            try {
                admin.createTopics(List.of(new NewTopic(topic, n, (short) 1))).all().get(300, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) throw e;
            }
            while (n < partitions) {
                n = Math.min(partitions, n + step);
                admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(n))).all().get(300, TimeUnit.SECONDS);
            }
            created = (System.nanoTime() - start) / 1e9;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(300);
            while (true) {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(300, TimeUnit.SECONDS).get(topic);
                long led = d.partitions().stream().filter(tp -> tp.leader() != null && !tp.leader().isEmpty()).count();
                if (d.partitions().size() == partitions && led == partitions) break;
                if (System.nanoTime() > deadline) throw new RuntimeException("only " + led + " partitions have a leader");
                Thread.sleep(100);
            }
            ready = (System.nanoTime() - start) / 1e9;
        }
        System.out.printf("RESULT {\"topic\":\"%s\",\"partitions\":%d,\"create_s\":%.3f,\"ready_s\":%.3f}%n",
                topic, partitions, created, ready);
    }

    // Creates every TOPIC:PARTITIONS in one CreateTopics call (existing topics are fine), then waits until
    // the metadata shows every partition of every topic with a leader.
    static void createTopics(String bootstrap, String[] specs) throws Exception {
        Map<String, Integer> want = new java.util.LinkedHashMap<>();
        for (String spec : specs) {
            int colon = spec.lastIndexOf(':');
            if (colon <= 0) usage();
            want.put(spec.substring(0, colon), Integer.parseInt(spec.substring(colon + 1)));
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            List<NewTopic> topics = new ArrayList<>();
            want.forEach((t, n) -> topics.add(new NewTopic(t, n, (short) 1)));
            for (var f : admin.createTopics(topics).values().values()) {
                try {
                    f.get(60, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof TopicExistsException)) throw e;
                }
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (true) {
                boolean ready;
                try {
                    Map<String, TopicDescription> ds = admin.describeTopics(want.keySet()).allTopicNames().get(60, TimeUnit.SECONDS);
                    ready = want.entrySet().stream().allMatch(e -> ds.get(e.getKey()).partitions().size() == e.getValue()
                            && ds.get(e.getKey()).partitions().stream().allMatch(tp -> tp.leader() != null && !tp.leader().isEmpty()));
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) throw e;
                    ready = false;  // created, not yet in this broker's metadata
                }
                if (ready) break;
                if (System.nanoTime() > deadline) throw new RuntimeException("topics not ready: " + want.keySet());
                Thread.sleep(100);
            }
        }
        System.out.printf("RESULT {\"topics\":%d}%n", want.size());
    }

    // Sends PARTITIONS * RECORDS_PER_PARTITION records of RECORD_SIZE bytes, record i to partition
    // i % PARTITIONS (so every partition gets the same count), acks=1, then flushes. Fails on any error.
    static void produceRoundRobin(String bootstrap, String topic, int partitions, int perPartition, int size)
            throws Exception {
        Properties pp = producerProps(bootstrap);
        pp.put("acks", "1");
        pp.put("linger.ms", "5");
        pp.put("batch.size", "16384");
        // One open batch per partition: 10,000 x 16 KiB does not fit the default 32 MiB pool.
        pp.put("buffer.memory", String.valueOf(256L * 1024 * 1024));
        pp.put("max.block.ms", "300000");
        pp.put("delivery.timeout.ms", "300000");
        pp.put("request.timeout.ms", "120000");
        long total = (long) partitions * perPartition;
        AtomicLong errors = new AtomicLong();
        byte[] value = new byte[size];
        Arrays.fill(value, (byte) 'v');
        double secs;
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
            int known = p.partitionsFor(topic).size();  // metadata before the clock starts
            if (known != partitions) throw new RuntimeException(topic + " has " + known + " partitions");
            long start = System.nanoTime();
            for (long i = 0; i < total; i++) {
                p.send(new ProducerRecord<>(topic, (int) (i % partitions), null, value),
                        (md, e) -> { if (e != null) errors.incrementAndGet(); });
            }
            p.flush();
            secs = (System.nanoTime() - start) / 1e9;
        }
        if (errors.get() > 0) throw new RuntimeException(errors.get() + " of " + total + " sends failed");
        System.out.printf("RESULT {\"records\":%d,\"seconds\":%.3f,\"records_per_sec\":%.1f,\"mb_per_sec\":%.2f}%n",
                total, secs, total / secs, total * (double) size / secs / (1024.0 * 1024.0));
    }

    static List<TopicPartition> partitionsOf(KafkaConsumer<byte[], byte[]> c, String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(30))) tps.add(new TopicPartition(topic, pi.partition()));
        return tps;
    }

    // Reads EXPECTED_RECORDS from the beginning of every partition (assign + seekToBeginning).
    static void consume(String bootstrap, String topic, long expected) {
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bootstrap))) {
            List<TopicPartition> tps = partitionsOf(c, topic);
            c.assign(tps);
            c.seekToBeginning(tps);
            long records = 0, bytes = 0;
            long cpu0 = processCpuNanos();
            long start = System.nanoTime();
            long deadline = start + TimeUnit.SECONDS.toNanos(300);
            while (records < expected) {
                if (System.nanoTime() > deadline) throw new RuntimeException("timed out after " + records + " records");
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(1000));
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    records++;
                    bytes += r.serializedValueSize() + Math.max(0, r.serializedKeySize());
                }
            }
            double secs = (System.nanoTime() - start) / 1e9;
            double cpuSecs = (processCpuNanos() - cpu0) / 1e9;
            // the client's view of the fetches: how many, how big, how long each took, and how much of
            // the time its network layer waited for the broker (from the cumulative io-wait-time-ns-total:
            // the *-ratio and *-rate metrics divide by at least 30 s, longer than a quick run)
            String fm = "consumer-fetch-manager-metrics";
            double fetches = metric(c, fm, "fetch-total"), fetchBytes = metric(c, fm, "fetch-size-avg"),
                    fetchLatency = metric(c, fm, "fetch-latency-avg"),
                    perRequest = metric(c, fm, "records-per-request-avg"),
                    ioWaitNs = metric(c, "consumer-metrics", "io-wait-time-ns-total");
            System.out.printf("RESULT {\"records\":%d,\"bytes\":%d,\"seconds\":%.3f,\"records_per_sec\":%.1f,\"mb_per_sec\":%.2f,"
                    + "\"fetches\":%.0f,\"fetch_size_avg_kib\":%.1f,\"fetch_latency_avg_ms\":%.2f,"
                    + "\"records_per_request_avg\":%.1f,\"io_wait_share\":%.4f,"
                    + "\"client_process_cpu_s\":%.3f}%n",
                    records, bytes, secs, records / secs, bytes / secs / (1024.0 * 1024.0),
                    fetches, fetchBytes / 1024.0, fetchLatency, perRequest, ioWaitNs / 1e9 / secs, cpuSecs);
        }
    }

    // A client-wide metric of the group (not per topic or node); -1 when absent or not a finite number
    // (the RESULT line is JSON, which has no NaN).
    static double metric(KafkaConsumer<byte[], byte[]> c, String group, String name) {
        for (var e : c.metrics().entrySet()) {
            if (e.getKey().name().equals(name) && e.getKey().group().equals(group)
                    && !e.getKey().tags().containsKey("topic") && !e.getKey().tags().containsKey("node-id")) {
                Object v = e.getValue().metricValue();
                if (v instanceof Number && Double.isFinite(((Number) v).doubleValue())) return ((Number) v).doubleValue();
            }
        }
        return -1;
    }

    // CPU time of this whole JVM (every thread: the poll loop, GC, JIT), in nanoseconds.
    static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    // Fixed-rate producer (acks=1, linger 0) and an assign()-based consumer in another thread. Each value
    // starts with System.nanoTime() at send; latency = consume time - send time (same JVM, same clock).
    static void latency(String bootstrap, String topic, int rate, int seconds, int size, int warmup) throws Exception {
        Properties pp = producerProps(bootstrap);
        pp.put("acks", "1");
        pp.put("linger.ms", "0");
        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bootstrap));
        List<TopicPartition> tps = partitionsOf(c, topic);
        c.assign(tps);
        c.seekToEnd(tps);
        for (TopicPartition tp : tps) c.position(tp);
        long total = (long) rate * (seconds + warmup);
        long warmRecords = (long) rate * warmup;
        long[] lat = new long[(int) total];
        AtomicLong received = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        Thread consumer = new Thread(() -> {
            while (!stop.get() && received.get() < total) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    long now = System.nanoTime();
                    long sent = ByteBuffer.wrap(r.value()).getLong();
                    long i = received.getAndIncrement();
                    if (i < total) lat[(int) i] = now - sent;
                }
            }
        });
        consumer.start();
        long errors = 0;
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
            // warm the connection and metadata before the clock starts
            p.partitionsFor(topic);
            long interval = 1_000_000_000L / rate;
            long next = System.nanoTime();
            AtomicLong sendErrors = new AtomicLong();
            for (long i = 0; i < total; i++) {
                long now;
                while ((now = System.nanoTime()) < next) {
                    long left = next - now;
                    if (left > 200_000) Thread.sleep(0, 100_000); else Thread.onSpinWait();
                }
                next += interval;
                byte[] v = new byte[size];
                ByteBuffer.wrap(v).putLong(System.nanoTime());
                p.send(new ProducerRecord<>(topic, v), (md, e) -> { if (e != null) sendErrors.incrementAndGet(); });
            }
            p.flush();
            errors = sendErrors.get();
        }
        consumer.join(30_000);
        stop.set(true);
        consumer.join(5_000);
        c.close();
        long got = Math.min(received.get(), total);
        if (got <= warmRecords) throw new RuntimeException("only " + got + " records consumed");
        long[] m = Arrays.copyOfRange(lat, (int) warmRecords, (int) got);
        Arrays.sort(m);
        System.out.printf("RESULT {\"sent\":%d,\"received\":%d,\"send_errors\":%d,\"measured\":%d,\"rate\":%d,"
                + "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"max_ms\":%.3f}%n",
                total, got, errors, m.length, rate, pct(m, 0.5), pct(m, 0.99), pct(m, 0.999), m[m.length - 1] / 1e6);
    }

    static double pct(long[] sorted, double q) {
        int i = (int) Math.min(sorted.length - 1, Math.floor(sorted.length * q));
        return sorted[i] / 1e6;
    }
}
