// Benchmark client for scripts/bench. Compiled against the same kafka-clients jar that Kafka's own
// ProducerPerformance uses (.tools/kafka/libs), so both brokers see one client binary.
//
// No consumer group anywhere (Sluice has none yet): consumers use assign().
//
//   create-topic BOOTSTRAP TOPIC PARTITIONS
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
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;

public class BenchClient {
    public static void main(String[] args) throws Exception {
        if (args.length < 1) usage();
        switch (args[0]) {
            case "create-topic": createTopic(args[1], args[2], Integer.parseInt(args[3])); break;
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
        System.err.println("usage: BenchClient create-topic|consume|latency ... (see source)");
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

    static void createTopic(String bootstrap, String topic, int partitions) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(60, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException)) throw e;
        }
        System.out.println("RESULT {\"topic\":\"" + topic + "\",\"partitions\":" + partitions + "}");
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
