// Share-group (KIP-932) benchmark client for scripts/bench. Compiled against kafka-clients 4.4.0 (the
// newest release the compat units run, whose KafkaShareConsumer speaks ShareFetch / ShareAcknowledge v2),
// not the 4.1.2 jar of the other Java workloads: share groups are production-ready from Kafka 4.2 on.
//
//   fill    BOOTSTRAP TOPIC RECORDS RECORD_SIZE
//           share groups on (finalizes share.version 1 if the broker has it at 0, as kafka-features
//           does), a 1-partition topic, RECORDS records whose value starts with its id (0..RECORDS-1,
//           8 bytes big-endian), padded to RECORD_SIZE; idempotent producer, acks=all, linger.ms=5,
//           batch.size=131072, so record id i lands at offset i
//   consume BOOTSTRAP TOPIC GROUP CONSUMERS TOTAL WARM RECORD_SIZE
//           sets the group's share.auto.offset.reset=earliest (IncrementalAlterConfigs on a GROUP
//           resource), then CONSUMERS KafkaShareConsumers of GROUP, each polled on its own thread in this
//           one JVM (KafkaShareConsumer is single-threaded; Kafka's ShareConsumerPerformance --threads
//           runs its consumers the same way), implicit acknowledgement (every record of a poll is
//           ACCEPTed by the next poll; commitSync once every record was seen, so the last ones go out
//           at once). They consume until every one of the TOTAL records is acknowledged, confirmed
//           by the broker (the acknowledgement commit callback with no error). The clock starts when
//           WARM distinct records were seen (JIT, group join and share-partition initialization are
//           behind by then) and stops when the last of the TOTAL ids was first delivered: records/s =
//           (TOTAL - records seen when the clock started) / that time. Checks while measuring: every
//           id seen, id == offset, the value's size, duplicate deliveries (a record delivered again,
//           e.g. after a lock timeout) and records whose delivery count is above 1.
//
// Every mode prints one line "RESULT {json}" on stdout.
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.WakeupException;

public class ShareBench {
    public static void main(String[] args) throws Exception {
        if (args.length < 1) usage();
        switch (args[0]) {
            case "fill":
                if (args.length != 5) usage();
                fill(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
                break;
            case "consume":
                if (args.length != 8) usage();
                consume(args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                        Integer.parseInt(args[6]), Integer.parseInt(args[7]));
                break;
            default: usage();
        }
        System.exit(0);
    }

    static void usage() {
        System.err.println("usage: ShareBench fill BOOTSTRAP TOPIC RECORDS RECORD_SIZE | "
                + "consume BOOTSTRAP TOPIC GROUP CONSUMERS TOTAL WARM RECORD_SIZE");
        System.exit(2);
    }

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        return Admin.create(p);
    }

    /** share.version >= 1, finalizing 1 on a broker that has share groups off (Kafka 4.1's default). */
    static String enableShareGroups(Admin admin) throws Exception {
        FinalizedVersionRange level = admin.describeFeatures().featureMetadata().get(60, TimeUnit.SECONDS)
                .finalizedFeatures().get("share.version");
        if (level != null && level.maxVersionLevel() >= 1) return "share.version " + level.maxVersionLevel();
        admin.updateFeatures(
                Map.of("share.version", new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.UPGRADE)),
                new UpdateFeaturesOptions()).all().get(60, TimeUnit.SECONDS);
        return "share.version 1 (finalized now)";
    }

    static void fill(String bootstrap, String topic, int records, int size) throws Exception {
        if (size < 8) throw new IllegalArgumentException("RECORD_SIZE must be at least 8");
        String share;
        try (Admin admin = admin(bootstrap)) {
            share = enableShareGroups(admin);
            try {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(60, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) throw e;
            }
        }
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        pp.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        pp.put("acks", "all");
        pp.put("enable.idempotence", "true");
        pp.put("linger.ms", "5");
        pp.put("batch.size", "131072");
        AtomicLong errors = new AtomicLong();
        AtomicLong misplaced = new AtomicLong();
        double secs;
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
            p.partitionsFor(topic);  // metadata before the clock
            long start = System.nanoTime();
            for (int i = 0; i < records; i++) {
                byte[] v = new byte[size];
                ByteBuffer.wrap(v).putLong(i);
                final long id = i;
                p.send(new ProducerRecord<>(topic, 0, null, v), (md, e) -> {
                    if (e != null) errors.incrementAndGet();
                    else if (md.offset() != id) misplaced.incrementAndGet();
                });
            }
            p.flush();
            secs = (System.nanoTime() - start) / 1e9;
        }
        if (errors.get() > 0) throw new RuntimeException(errors.get() + " of " + records + " sends failed");
        if (misplaced.get() > 0) throw new RuntimeException(misplaced.get() + " records not at the offset of their id"
                + " (the topic was not empty?)");
        System.out.printf("RESULT {\"records\":%d,\"seconds\":%.3f,\"records_per_sec\":%.1f,\"share\":\"%s\"}%n",
                records, secs, records / secs, share);
    }

    // ------------------------------------------------------------------ consume

    static int total, warm, size;
    static AtomicIntegerArray deliveries;   // per id: how many times delivered
    static AtomicIntegerArray acked;        // per offset: acknowledgement confirmed by the broker
    static final AtomicLong distinct = new AtomicLong();
    static final AtomicLong ackedCount = new AtomicLong();
    static final AtomicLong duplicates = new AtomicLong();
    static final AtomicLong redelivered = new AtomicLong();
    static final AtomicLong mismatched = new AtomicLong();
    static final AtomicLong badValues = new AtomicLong();
    static final AtomicLong ackErrors = new AtomicLong();
    static volatile long tStart = 0, tAllSeen = 0, tAllAcked = 0, tFirst = 0;
    static volatile long seenAtStart = 0, activeAtStart = 0, cpuAtStart = 0;
    static volatile boolean stop = false;
    static final CountDownLatch allAcked = new CountDownLatch(1);
    static final CountDownLatch allSeen = new CountDownLatch(1);
    static volatile Throwable failure;

    /** One share consumer polled on its own thread. */
    static final class Member implements Runnable {
        final int index;
        final KafkaShareConsumer<byte[], byte[]> consumer;
        long records, measured;
        volatile long firstRecordNanos;
        double[] metricsAtStart, metricsAtEnd;

        Member(int index, String bootstrap, String group, String topic) {
            this.index = index;
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("group.id", group);
            p.put("client.id", "share-bench-" + index);
            p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
            p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
            p.put("share.acknowledgement.mode", "implicit");
            consumer = new KafkaShareConsumer<>(p);
            consumer.setAcknowledgementCommitCallback((offsets, exception) -> {
                for (var e : offsets.entrySet()) {
                    if (exception != null) {
                        ackErrors.addAndGet(e.getValue().size());
                        continue;
                    }
                    for (long o : e.getValue()) {
                        if (o >= 0 && o < total && acked.compareAndSet((int) o, 0, 1)
                                && ackedCount.incrementAndGet() == total) {
                            tAllAcked = System.nanoTime();
                            allAcked.countDown();
                        }
                    }
                }
            });
            consumer.subscribe(List.of(topic));
        }

        public void run() {
            try {
                while (!stop) {
                    ConsumerRecords<byte[], byte[]> rs = consumer.poll(Duration.ofMillis(100));
                    long now = System.nanoTime();
                    for (ConsumerRecord<byte[], byte[]> r : rs) {
                        if (firstRecordNanos == 0) firstRecordNanos = now;
                        records++;
                        if (tStart != 0) measured++;
                        byte[] v = r.value();
                        if (v == null || v.length != size) {
                            badValues.incrementAndGet();
                            continue;
                        }
                        long id = ByteBuffer.wrap(v).getLong();
                        if (id < 0 || id >= total) {
                            badValues.incrementAndGet();
                            continue;
                        }
                        if (r.offset() != id) mismatched.incrementAndGet();
                        if (r.deliveryCount().map(c -> c > 1).orElse(false)) redelivered.incrementAndGet();
                        if (deliveries.incrementAndGet((int) id) > 1) {
                            duplicates.incrementAndGet();
                            continue;
                        }
                        long d = distinct.incrementAndGet();
                        if (tFirst == 0) tFirst = now;
                        if (d == warm) startClock(now, d);
                        if (d == total) {
                            tAllSeen = now;
                            allSeen.countDown();
                        }
                    }
                    if (tStart != 0 && metricsAtStart == null) metricsAtStart = fetchMetrics(consumer);
                    // implicit mode: the records of the last poll are accepted now, not with a later fetch
                    if (tAllSeen != 0 && ackedCount.get() < total) consumer.commitSync(Duration.ofSeconds(10));
                }
            } catch (WakeupException e) {
                // stopping
            } catch (Throwable t) {
                failure = t;
                allSeen.countDown();
                allAcked.countDown();
            }
            metricsAtEnd = fetchMetrics(consumer);
        }
    }

    static synchronized void startClock(long now, long seen) {
        if (tStart != 0) return;
        seenAtStart = seen;
        long active = 0;
        for (Member m : members) if (m.firstRecordNanos != 0) active++;
        activeAtStart = active;
        cpuAtStart = processCpuNanos();
        tStart = now;
    }

    static final List<Member> members = new ArrayList<>();

    // Client-wide share-fetch metrics: cumulative (fetches, records and bytes consumed, acknowledgements sent),
    // then the fetch latency (ShareFetch sent to answered: a long poll counts whole) over the metrics' own window.
    static final String[] METRICS = {"fetch-total", "records-consumed-total", "bytes-consumed-total",
            "acknowledgements-send-total", "acknowledgements-error-total", "fetch-latency-avg", "fetch-latency-max"};

    static double[] fetchMetrics(KafkaShareConsumer<byte[], byte[]> c) {
        double[] out = new double[METRICS.length];
        java.util.Arrays.fill(out, Double.NaN);
        for (var e : c.metrics().entrySet()) {
            if (!e.getKey().group().equals("consumer-share-fetch-manager-metrics")) continue;
            if (e.getKey().tags().containsKey("topic")) continue;
            for (int i = 0; i < METRICS.length; i++) {
                if (e.getKey().name().equals(METRICS[i]) && e.getValue().metricValue() instanceof Number) {
                    out[i] = ((Number) e.getValue().metricValue()).doubleValue();
                }
            }
        }
        return out;
    }

    static void consume(String bootstrap, String topic, String group, int consumers, int totalRecords, int warmRecords,
                        int recordSize) throws Exception {
        total = totalRecords;
        warm = Math.max(1, Math.min(warmRecords, totalRecords - 1));
        size = recordSize;
        deliveries = new AtomicIntegerArray(total);
        acked = new AtomicIntegerArray(total);
        try (Admin admin = admin(bootstrap)) {
            enableShareGroups(admin);
            ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp op = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                    AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(res, List.of(op))).all().get(60, TimeUnit.SECONDS);
        }
        for (int i = 0; i < consumers; i++) members.add(new Member(i, bootstrap, group, topic));
        List<Thread> threads = new ArrayList<>();
        long t0 = System.nanoTime();
        for (Member m : members) {
            Thread t = new Thread(m, "share-" + m.index);
            threads.add(t);
            t.start();
        }
        // Generous bounds, only so a broken run ends: every repetition's records are consumed long before.
        boolean seen = allSeen.await(600, TimeUnit.SECONDS);
        boolean done = seen && failure == null && allAcked.await(60, TimeUnit.SECONDS);
        long cpuEnd = processCpuNanos();
        stop = true;
        for (Member m : members) m.consumer.wakeup();
        for (Thread t : threads) t.join(30_000);
        if (failure != null) throw new RuntimeException("a consumer failed", failure);
        if (!seen) throw new RuntimeException("timed out: " + distinct.get() + " of " + total + " records seen");
        if (!done) throw new RuntimeException("timed out: " + ackedCount.get() + " of " + total + " acknowledged");
        long measuredRecords = total - seenAtStart;
        double secs = (tAllSeen - tStart) / 1e9;
        double ackSecs = (tAllAcked - tStart) / 1e9;
        long perMin = Long.MAX_VALUE, perMax = 0, lastFirst = 0, firstFirst = Long.MAX_VALUE;
        double[] sum = new double[METRICS.length];
        double latencyAvg = 0, latencyMax = 0;
        StringBuilder per = new StringBuilder();
        for (Member m : members) {
            perMin = Math.min(perMin, m.measured);
            perMax = Math.max(perMax, m.measured);
            if (m.firstRecordNanos != 0) {
                lastFirst = Math.max(lastFirst, m.firstRecordNanos);
                firstFirst = Math.min(firstFirst, m.firstRecordNanos);
            }
            per.append(per.length() == 0 ? "" : ",").append(m.measured);
            for (int i = 0; i < 5; i++) {
                double a = m.metricsAtStart == null ? 0 : m.metricsAtStart[i];
                sum[i] += m.metricsAtEnd[i] - a;
            }
            if (Double.isFinite(m.metricsAtEnd[5])) latencyAvg += m.metricsAtEnd[5] / members.size();
            if (Double.isFinite(m.metricsAtEnd[6])) latencyMax = Math.max(latencyMax, m.metricsAtEnd[6]);
        }
        // the time from the RESULT line back to the end of the measured phase (the driver's CPU window)
        double resultDelay = (System.nanoTime() - tAllAcked) / 1e9;
        System.out.printf("RESULT {\"records\":%d,\"total\":%d,\"warm\":%d,\"consumers\":%d,\"bytes\":%d,"
                + "\"seconds\":%.3f,\"records_per_sec\":%.1f,\"mb_per_sec\":%.2f,"
                + "\"ack_seconds\":%.3f,\"acked_records_per_sec\":%.1f,\"last_ack_after_last_record_ms\":%.1f,"
                + "\"join_to_first_record_s\":%.3f,\"first_record_spread_s\":%.3f,\"consumers_active_at_start\":%d,"
                + "\"per_consumer_min\":%d,\"per_consumer_max\":%d,\"per_consumer\":[%s],"
                + "\"duplicates\":%d,\"redelivered\":%d,\"offset_mismatch\":%d,\"bad_values\":%d,\"ack_errors\":%d,"
                + "\"fetches\":%.0f,\"records_per_fetch\":%.1f,\"acknowledgements_sent\":%.0f,"
                + "\"fetch_latency_avg_ms\":%.1f,\"fetch_latency_max_ms\":%.1f,"
                + "\"client_process_cpu_s\":%.3f,\"result_delay_s\":%.3f}%n",
                measuredRecords, total, seenAtStart, consumers, measuredRecords * size,
                secs, measuredRecords / secs, measuredRecords * (double) size / secs / (1024.0 * 1024.0),
                ackSecs, measuredRecords / ackSecs, (tAllAcked - tAllSeen) / 1e6,
                (tFirst - t0) / 1e9, (lastFirst - firstFirst) / 1e9, activeAtStart,
                perMin, perMax, per, duplicates.get(), redelivered.get(), mismatched.get(), badValues.get(),
                ackErrors.get(), sum[0], sum[0] > 0 ? sum[1] / sum[0] : -1, sum[3], latencyAvg, latencyMax,
                (cpuEnd - cpuAtStart) / 1e9, resultDelay);
        System.out.flush();
        for (Member m : members) m.consumer.close(Duration.ofSeconds(10));
    }

    // CPU time of this whole JVM (every thread: the poll loops, the consumers' background threads, GC, JIT).
    static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }
}
