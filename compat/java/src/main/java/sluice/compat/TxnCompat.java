package sluice.compat;

import static sluice.compat.Checks.*;
import static sluice.compat.TxnSupport.*;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * Transactions with kafka-clients against $BOOTSTRAP (java/txn): commit and abort seen by read_committed
 * and read_uncommitted readers, end offsets at both isolation levels (markers counted exactly), fencing of
 * a producer by a second one with the same transactional.id, an open transaction holding read_committed
 * readers at the last stable offset, and sendOffsetsToTransaction offsets that become visible only on
 * commit. Prints PASS/FAIL lines and "N passed, N failed".
 */
public final class TxnCompat {
    static final int PARTITIONS = 3;
    static String bootstrap, prefix;
    static Admin admin;

    /** Sends keyed values inside the current transaction and returns their metadata (flushed). */
    static List<RecordMetadata> send(KafkaProducer<String, String> p, String topic, List<String> values) throws Exception {
        List<Future<RecordMetadata>> fs = new ArrayList<>();
        for (int i = 0; i < values.size(); i++) fs.add(p.send(new ProducerRecord<>(topic, "k" + (i % 17), values.get(i))));
        p.flush();
        List<RecordMetadata> out = new ArrayList<>();
        for (var f : fs) out.add(f.get(30, TimeUnit.SECONDS));
        return out;
    }

    static List<String> values(String tag, int n) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < n; i++) out.add(String.format("%s-%05d", tag, i));
        return out;
    }

    static Set<Integer> touched(List<RecordMetadata> ms) {
        return ms.stream().map(RecordMetadata::partition).collect(Collectors.toCollection(TreeSet::new));
    }

    /** null when the records are exactly the wanted values (each once); else what differs. */
    static String sameValues(List<ConsumerRecord<String, String>> got, Set<String> want) {
        List<String> vals = got.stream().map(ConsumerRecord::value).collect(Collectors.toList());
        Set<String> uniq = new TreeSet<>(vals);
        if (vals.size() != want.size() || !uniq.equals(want)) {
            Set<String> missing = new TreeSet<>(want); missing.removeAll(uniq);
            Set<String> extra = new TreeSet<>(uniq); extra.removeAll(want);
            return "read " + vals.size() + " records (" + uniq.size() + " distinct), want " + want.size()
                    + "; missing " + missing.size() + " " + first(missing) + ", unexpected " + extra.size() + " " + first(extra);
        }
        return null;
    }

    /** Exception class names along the cause chain, e.g. "ExecutionException <- ProducerFencedException". */
    static String chain(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) sb.append(sb.length() == 0 ? "" : " <- ").append(c.getClass().getSimpleName());
        return sb.toString();
    }

    static String first(Set<String> s) { return s.isEmpty() ? "" : "(first " + s.iterator().next() + ")"; }

    // ------------------------------------------------------------------ (a) commit and abort
    static boolean commitAbort() {
        String topic = prefix + "-txn-a";
        int n = 300, m = 100;
        List<String> committed = values("commit", n), aborted = values("abort", m);
        List<List<RecordMetadata>> meta = new ArrayList<>();
        KafkaProducer<String, String> p = producer(bootstrap, prefix + "-txn-a");
        try {
            if (!run("txn/create-topic", () -> { createTopic(admin, topic, PARTITIONS); return null; })) return false;
            if (!run("txn/init-transactions", () -> { p.initTransactions(); return null; })) return false;
            if (!run("txn/commit", () -> {
                p.beginTransaction();
                meta.add(send(p, topic, committed));
                p.commitTransaction();
                return "ok: " + n + " records over partitions " + touched(meta.get(0));
            })) return false;
            if (!run("txn/abort", () -> {
                p.beginTransaction();
                meta.add(send(p, topic, aborted));
                p.abortTransaction();
                return "ok: " + m + " records over partitions " + touched(meta.get(1));
            })) return false;
        } finally {
            p.close(Duration.ofSeconds(5));
        }
        run("txn/read-committed", () -> {
            var got = readAll(bootstrap, topic, PARTITIONS, "read_committed", n, 20000);
            String err = sameValues(got, new TreeSet<>(committed));
            if (err != null) return err;
            // each committed record at the offset its send() reported
            Map<String, RecordMetadata> at = new HashMap<>();
            for (int i = 0; i < n; i++) at.put(committed.get(i), meta.get(0).get(i));
            for (var r : got) {
                RecordMetadata md = at.get(r.value());
                if (md.partition() != r.partition() || md.offset() != r.offset())
                    return r.value() + " read at " + r.partition() + "/" + r.offset() + ", sent to " + md.partition() + "/" + md.offset();
            }
            return "ok: exactly the " + n + " committed records, at their acked offsets";
        });
        run("txn/read-uncommitted", () -> {
            var got = readAll(bootstrap, topic, PARTITIONS, "read_uncommitted", n + m, 20000);
            Set<String> want = new TreeSet<>(committed); want.addAll(aborted);
            String err = sameValues(got, want);
            return err != null ? err : "ok: " + n + " committed + " + m + " aborted records";
        });
        run("txn/end-offsets", () -> {
            var hw = endOffsets(admin, topic, PARTITIONS, IsolationLevel.READ_UNCOMMITTED);
            var lso = endOffsets(admin, topic, PARTITIONS, IsolationLevel.READ_COMMITTED);
            if (!hw.equals(lso)) return "read_uncommitted " + hw + " != read_committed " + lso + " after both transactions ended";
            // one marker per partition and transaction: the last record of each transaction is followed by its marker
            Map<Integer, Long> want = new TreeMap<>();
            for (int p2 = 0; p2 < PARTITIONS; p2++) want.put(p2, 0L);
            for (List<RecordMetadata> ms : meta)
                for (RecordMetadata md : ms) want.merge(md.partition(), md.offset() + 2, Math::max);
            long markers = touched(meta.get(0)).size() + touched(meta.get(1)).size();
            long sum = hw.values().stream().mapToLong(Long::longValue).sum();
            if (!hw.equals(want) || sum != n + m + markers)
                return "end offsets " + hw + " (sum " + sum + "), want " + want + " (" + n + " + " + m + " records + " + markers + " markers)";
            return "ok: " + hw + " at both isolation levels, " + markers + " markers";
        });
        return true;
    }

    // ------------------------------------------------------------------ (b) fencing
    static void fencing() {
        String topic = prefix + "-txn-b", id = prefix + "-txn-b";
        KafkaProducer<String, String> p1 = producer(bootstrap, id), p2 = producer(bootstrap, id);
        try {
            if (!run("txn/fence-setup", () -> {
                createTopic(admin, topic, PARTITIONS);
                p1.initTransactions();
                p1.beginTransaction();
                send(p1, topic, values("zombie", 20));
                p2.initTransactions();  // bumps the epoch: p1 is fenced and its open transaction aborted
                return "ok: second producer initialized while the first had 20 records in an open transaction";
            })) return;
            run("txn/fenced-commit", () -> {
                try {
                    p1.commitTransaction();
                    return "the fenced producer committed";
                } catch (Exception e) {
                    return causeOf(e, ProducerFencedException.class) != null ? "ok: " + chain(e) : "want ProducerFencedException, got " + chain(e);
                }
            });
            run("txn/fenced-send", () -> {
                try {
                    p1.send(new ProducerRecord<>(topic, "k", "zombie-late")).get(30, TimeUnit.SECONDS);
                    return "the fenced producer's send succeeded";
                } catch (Exception e) {
                    return causeOf(e, ProducerFencedException.class) != null ? "ok: " + chain(e) : "want ProducerFencedException, got " + chain(e);
                }
            });
            run("txn/fence-new-producer-commits", () -> {
                p2.beginTransaction();
                send(p2, topic, values("winner", 20));
                p2.commitTransaction();
                var got = readAll(bootstrap, topic, PARTITIONS, "read_committed", 20, 20000);
                String err = sameValues(got, new TreeSet<>(values("winner", 20)));
                return err != null ? err : "ok: read_committed sees the 20 records of the new producer, none of the fenced one";
            });
        } finally {
            p1.close(Duration.ofSeconds(5));
            p2.close(Duration.ofSeconds(5));
        }
    }

    // ------------------------------------------------------------------ (c) last stable offset
    static void lastStableOffset() {
        String topic = prefix + "-txn-c";
        List<String> before = values("before", 30), open = values("open", 60);
        KafkaProducer<String, String> p = producer(bootstrap, prefix + "-txn-c");
        KafkaConsumer<String, String> rc = null;
        try {
            List<List<RecordMetadata>> meta = new ArrayList<>();
            if (!run("txn/lso-setup", () -> {
                createTopic(admin, topic, PARTITIONS);
                p.initTransactions();
                p.beginTransaction();
                send(p, topic, before);
                p.commitTransaction();
                p.beginTransaction();
                meta.add(send(p, topic, open));
                return "ok: 30 committed, 60 in an open transaction";
            })) return;
            run("txn/lso-list-offsets", () -> {
                var hw = endOffsets(admin, topic, PARTITIONS, IsolationLevel.READ_UNCOMMITTED);
                var lso = endOffsets(admin, topic, PARTITIONS, IsolationLevel.READ_COMMITTED);
                Map<Integer, Long> firstOpen = new TreeMap<>(), wantHw = new TreeMap<>();
                for (RecordMetadata md : meta.get(0)) {
                    firstOpen.merge(md.partition(), md.offset(), Math::min);
                    wantHw.merge(md.partition(), md.offset() + 1, Math::max);
                }
                for (var e : firstOpen.entrySet())
                    if (!lso.get(e.getKey()).equals(e.getValue()) || !hw.get(e.getKey()).equals(wantHw.get(e.getKey())))
                        return "partition " + e.getKey() + ": read_committed " + lso.get(e.getKey()) + " (want the open transaction's first offset "
                                + e.getValue() + "), read_uncommitted " + hw.get(e.getKey()) + " (want " + wantHw.get(e.getKey()) + ")";
                return "ok: read_committed " + lso + " (first open offsets), read_uncommitted " + hw;
            });
            rc = reader(bootstrap, topic, PARTITIONS, "read_committed");
            KafkaConsumer<String, String> rcf = rc;
            run("txn/lso-blocks-read-committed", () -> {
                var got = poll(rcf, 1000, 2500);  // waits the full 2.5 s: nothing past the LSO may arrive
                String err = sameValues(got, new TreeSet<>(before));
                return err != null ? err : "ok: only the 30 records before the open transaction in 3 s";
            });
            run("txn/lso-read-uncommitted-sees-open", () -> {
                var got = readAll(bootstrap, topic, PARTITIONS, "read_uncommitted", 90, 20000);
                Set<String> want = new TreeSet<>(before); want.addAll(open);
                String err = sameValues(got, want);
                return err != null ? err : "ok: 90 records including the open transaction's 60";
            });
            run("txn/lso-commit-releases", () -> {
                p.commitTransaction();
                var got = poll(rcf, open.size(), 20000);
                String err = sameValues(got, new TreeSet<>(open));
                return err != null ? err : "ok: the same read_committed consumer gets the 60 records after the commit";
            });
        } finally {
            if (rc != null) rc.close(Duration.ofSeconds(5));
            p.close(Duration.ofSeconds(5));
        }
    }

    // ------------------------------------------------------------------ (d) sendOffsetsToTransaction
    static Map<Integer, Long> groupOffsets(String group, String topic, boolean requireStable) throws Exception {
        var r = admin.listConsumerGroupOffsets(group, new ListConsumerGroupOffsetsOptions().requireStable(requireStable))
                .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
        Map<Integer, Long> out = new TreeMap<>();
        for (var e : r.entrySet())
            if (e.getKey().topic().equals(topic) && e.getValue() != null) out.put(e.getKey().partition(), e.getValue().offset());
        return out;
    }

    /**
     * Committed offsets once they equal {@code want} (up to 10 s): Kafka writes a transaction's markers to
     * __consumer_offsets after EndTxn returns, so the offsets appear shortly after the commit.
     */
    static Map<Integer, Long> awaitGroupOffsets(String group, String topic, Map<Integer, Long> want) throws Exception {
        long end = System.currentTimeMillis() + 10000;
        Map<Integer, Long> got = groupOffsets(group, topic, true);
        while (!got.equals(want) && System.currentTimeMillis() < end) {
            Thread.sleep(100);
            got = groupOffsets(group, topic, true);
        }
        return got;
    }

    static Map<TopicPartition, OffsetAndMetadata> offsets(String topic, long... at) {
        Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
        for (int i = 0; i < at.length; i++) m.put(new TopicPartition(topic, i), new OffsetAndMetadata(at[i], "txn-" + i));
        return m;
    }

    static void sendOffsets() {
        String in = prefix + "-txn-d-in", out = prefix + "-txn-d-out";
        String g1 = prefix + "-txn-d-group1", g2 = prefix + "-txn-d-group2";
        KafkaProducer<String, String> p = producer(bootstrap, prefix + "-txn-d");
        try {
            if (!run("txn/offsets-setup", () -> {
                createTopic(admin, in, PARTITIONS);
                createTopic(admin, out, PARTITIONS);
                p.initTransactions();
                p.beginTransaction();
                send(p, out, values("d-out", 6));
                p.sendOffsetsToTransaction(offsets(in, 5, 7, 9), new ConsumerGroupMetadata(g1));
                return "ok: offsets 5, 7, 9 for " + g1 + " in an open transaction";
            })) return;
            run("txn/offsets-pending-invisible", () -> {
                var got = groupOffsets(g1, in, false);
                return got.isEmpty() ? "ok: no committed offsets before the commit" : "committed offsets visible before commit: " + got;
            });
            run("txn/offsets-visible-after-commit", () -> {
                p.commitTransaction();
                var got = awaitGroupOffsets(g1, in, Map.of(0, 5L, 1, 7L, 2, 9L));
                return got.equals(Map.of(0, 5L, 1, 7L, 2, 9L)) ? "ok: " + got : "committed offsets " + got + " 10 s after the commit, want {0=5, 1=7, 2=9}";
            });
            run("txn/offsets-absent-after-abort", () -> {
                p.beginTransaction();
                send(p, out, values("d-aborted", 6));
                p.sendOffsetsToTransaction(offsets(in, 3, 3, 3), new ConsumerGroupMetadata(g2));
                p.sendOffsetsToTransaction(offsets(in, 11, 12, 13), new ConsumerGroupMetadata(g1));
                p.abortTransaction();
                // the abort markers land after EndTxn returns: until then require_stable answers
                // UNSTABLE_OFFSET_COMMIT, so wait for the stable answer (11/12/13 must never show)
                var got1 = awaitGroupOffsets(g1, in, Map.of(0, 5L, 1, 7L, 2, 9L));
                if (!got1.equals(Map.of(0, 5L, 1, 7L, 2, 9L))) return g1 + " offsets " + got1 + " after an aborted transaction, want {0=5, 1=7, 2=9}";
                // a later committed transaction: once its offsets show, the abort before it was applied too
                p.beginTransaction();
                p.sendOffsetsToTransaction(offsets(in, 20, 21, 22), new ConsumerGroupMetadata(g1));
                p.commitTransaction();
                got1 = awaitGroupOffsets(g1, in, Map.of(0, 20L, 1, 21L, 2, 22L));
                var got2 = groupOffsets(g2, in, true);
                if (!got2.isEmpty()) return g2 + " has offsets " + got2 + " after an aborted transaction";
                if (!got1.equals(Map.of(0, 20L, 1, 21L, 2, 22L))) return g1 + " offsets " + got1 + " after the next commit, want {0=20, 1=21, 2=22}";
                return "ok: aborted offsets dropped (" + g2 + " none, " + g1 + " never 11/12/13), the next commit shows " + got1;
            });
        } finally {
            p.close(Duration.ofSeconds(5));
        }
    }

    public static void main(String[] args) throws Exception {
        bootstrap = env("BOOTSTRAP", "127.0.0.1:9092");
        prefix = env("TOPIC_PREFIX", "compat-" + System.currentTimeMillis() / 1000);
        System.out.println("CLIENT_VERSION: kafka-clients " + kafkaClientsVersion());
        long t0 = System.currentTimeMillis();
        admin = admin(bootstrap);
        // a broker without a transaction coordinator fails initTransactions: the other parts would only repeat it
        if (commitAbort()) {
            fencing();
            lastStableOffset();
            sendOffsets();
        }
        admin.close(Duration.ofSeconds(5));
        System.out.println("seconds: " + (System.currentTimeMillis() - t0) / 1000.0);
        System.out.println(passed + " passed, " + failed + " failed");
        System.out.flush();
        Runtime.getRuntime().halt(failed == 0 ? 0 : 1);
    }
}
