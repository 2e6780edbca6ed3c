package sluice.compat;

import static sluice.compat.Checks.*;
import static sluice.compat.TxnSupport.*;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * Exactly-once consume-transform-produce across a kill -9 of the application (java/txn-ctp): INPUT records
 * are pre-produced to a 3-partition topic; {@link TxnCtpApp} runs as its own JVM, is killed with SIGKILL
 * while the records of an open transaction are flushed (it stalls there once KILL_AFTER records are
 * committed), and is started
 * again: it fences its predecessor (same transactional.id), resumes from the group's transactionally
 * committed offsets and runs to the end of the input. Checks: right after the kill, read_committed output
 * holds exactly what the app reported committed and read_uncommitted also the open transaction; at the end,
 * read_committed output is the transformed input, every record exactly once, in input order per key, and
 * the group's committed offsets are the input's end offsets. Prints PASS/FAIL lines and "N passed, N failed".
 */
public final class TxnCtpCompat {
    static final int PARTITIONS = 3;
    static final int INPUT = Integer.parseInt(env("CTP_RECORDS", "20000"));
    static final int KILL_AFTER = Integer.parseInt(env("CTP_KILL_AFTER", "6000"));

    static String key(int i) { return "k" + (i % 101); }
    static String value(int i) { return String.format("in-%06d", i); }

    /** One run of the application JVM; its stdout is followed line by line. */
    static final class App {
        final Process proc;
        volatile long committed = 0, sentOpen = 0;
        volatile boolean done = false, killed = false;
        final List<String> tail = new ArrayList<>();

        App(String name, Map<String, String> env, File log) throws Exception {
            String java = ProcessHandle.current().info().command().orElse("java");
            ProcessBuilder pb = new ProcessBuilder(java, "-Xmx512m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                    "-cp", System.getProperty("java.class.path"), "sluice.compat.TxnCtpApp");
            pb.environment().putAll(env);
            pb.redirectErrorStream(true);
            proc = pb.start();
            Thread t = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(proc.getInputStream()));
                     java.io.PrintWriter w = new java.io.PrintWriter(new java.io.FileWriter(log, true))) {
                    for (String line; (line = r.readLine()) != null; ) {
                        w.println(name + ": " + line);
                        w.flush();
                        if (!line.startsWith("\tat ") && !line.startsWith("sent ") && !line.startsWith("committed "))
                            synchronized (tail) { tail.add(line.length() > 240 ? line.substring(0, 240) + "..." : line); if (tail.size() > 4) tail.remove(0); }
                        if (line.startsWith("sent ")) onSent(Long.parseLong(line.substring(5)));
                        else if (line.startsWith("committed ")) { committed = Long.parseLong(line.substring(10)); sentOpen = 0; }
                        else if (line.startsWith("done")) done = true;
                        else if (!line.contains(" WARN ")) System.out.println(name + ": " + line);
                    }
                } catch (Exception e) {
                    if (!killed) System.out.println(name + ": stdout reader: " + e);
                }
            });
            t.setDaemon(true);
            t.start();
        }

        /** Kill mode: SIGKILL as soon as an open transaction's records are flushed after KILL_AFTER committed. */
        volatile boolean killArmed = false;
        synchronized void onSent(long n) {
            sentOpen = n;
            if (killArmed && !killed && committed >= KILL_AFTER) {
                proc.destroyForcibly();  // SIGKILL on Linux: no close, no abort, no LeaveGroup
                killed = true;
                notifyAll();
            }
        }

        synchronized boolean awaitKill(long ms) throws InterruptedException {
            long end = System.currentTimeMillis() + ms;
            while (!killed && proc.isAlive() && System.currentTimeMillis() < end) wait(200);
            return killed;
        }

        String tail() { synchronized (tail) { return String.join(" | ", tail); } }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = env("BOOTSTRAP", "127.0.0.1:9092");
        String prefix = env("TOPIC_PREFIX", "compat-" + System.currentTimeMillis() / 1000);
        String input = prefix + "-ctp-in", output = prefix + "-ctp-out", group = prefix + "-ctp-group";
        System.out.println("CLIENT_VERSION: kafka-clients " + kafkaClientsVersion());
        long t0 = System.currentTimeMillis();
        Admin admin = admin(bootstrap);
        File log = new File(env("COMPAT_LOG_DIR", System.getProperty("java.io.tmpdir")), "java-txn-ctp-app.log");
        log.delete();  // both app runs append to it
        Map<String, String> appEnv = Map.of("BOOTSTRAP", bootstrap, "CTP_INPUT", input, "CTP_OUTPUT", output,
                "CTP_GROUP", group, "CTP_TXN_ID", prefix + "-ctp-app", "CTP_PARTITIONS", String.valueOf(PARTITIONS));
        App[] apps = new App[2];
        long[] atKill = new long[2];
        try {
            boolean ok = run("ctp/setup", () -> {
                createTopic(admin, input, PARTITIONS);
                createTopic(admin, output, PARTITIONS);
                Properties p = new Properties();
                p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
                try (KafkaProducer<String, String> pr = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
                    List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
                    for (int i = 0; i < INPUT; i++) fs.add(pr.send(new ProducerRecord<>(input, key(i), value(i))));
                    pr.flush();
                    for (var f : fs) f.get(30, TimeUnit.SECONDS);
                }
                return "ok: " + INPUT + " input records over " + PARTITIONS + " partitions";
            });
            if (ok) ok = run("ctp/kill-9-mid-transaction", () -> {
                Map<String, String> env1 = new java.util.HashMap<>(appEnv);
                env1.put("CTP_STALL_AFTER", String.valueOf(KILL_AFTER));
                apps[0] = new App("app1", env1, log);
                apps[0].killArmed = true;
                if (!apps[0].awaitKill(90000))
                    return "app not killed: " + apps[0].committed + " committed, " + (apps[0].proc.isAlive() ? "still running" : "exited " + apps[0].proc.exitValue())
                            + "; last output: " + apps[0].tail() + " (all in " + log + ")";
                apps[0].proc.waitFor(10, TimeUnit.SECONDS);
                atKill[0] = apps[0].committed;
                atKill[1] = apps[0].sentOpen;
                return "ok: SIGKILL with " + atKill[0] + " records committed and " + atKill[1] + " flushed in an open transaction";
            });
            if (ok) {
                run("ctp/after-kill-read-committed", () -> {
                    var got = readAll(bootstrap, output, PARTITIONS, "read_committed", (int) atKill[0], 20000);
                    return got.size() == atKill[0] ? "ok: " + got.size() + " records, what the app reported committed"
                            : "read_committed output has " + got.size() + " records, the app committed " + atKill[0];
                });
                run("ctp/after-kill-read-uncommitted", () -> {
                    long want = atKill[0] + atKill[1];
                    var got = readAll(bootstrap, output, PARTITIONS, "read_uncommitted", (int) want, 20000);
                    return got.size() == want ? "ok: " + got.size() + " records including the open transaction's " + atKill[1]
                            : "read_uncommitted output has " + got.size() + " records, want " + atKill[0] + " committed + " + atKill[1] + " open";
                });
            }
            if (ok) ok = run("ctp/restart-runs-to-end", () -> {
                apps[1] = new App("app2", appEnv, log);
                if (!apps[1].proc.waitFor(100, TimeUnit.SECONDS)) return "restarted app still running after 100 s; last output: " + apps[1].tail();
                Thread.sleep(100);
                if (apps[1].proc.exitValue() != 0 || !apps[1].done)
                    return "restarted app exited " + apps[1].proc.exitValue() + "; last output: " + apps[1].tail();
                return "ok: the restarted app committed " + apps[1].committed + " more records";
            });
            if (ok) {
                run("ctp/output-exactly-once", () -> {
                    var got = readAll(bootstrap, output, PARTITIONS, "read_committed", INPUT, 30000);
                    Map<String, Integer> seen = new HashMap<>();
                    for (var r : got) seen.merge(r.value(), 1, Integer::sum);
                    int missing = 0, dups = 0, wrongKey = 0;
                    String firstMissing = null;
                    Map<String, String> keyOf = new HashMap<>();
                    for (var r : got) keyOf.put(r.value(), r.key());
                    for (int i = 0; i < INPUT; i++) {
                        String v = TxnCtpApp.transform(value(i));
                        Integer c = seen.remove(v);
                        if (c == null) { missing++; if (firstMissing == null) firstMissing = v; }
                        else {
                            if (c > 1) dups += c - 1;
                            if (!key(i).equals(keyOf.get(v))) wrongKey++;
                        }
                    }
                    if (missing > 0 || dups > 0 || !seen.isEmpty() || wrongKey > 0)
                        return "output " + got.size() + " records: " + missing + " missing (first " + firstMissing + "), " + dups
                                + " duplicates, " + seen.size() + " unexpected values, " + wrongKey + " with a wrong key";
                    return "ok: " + got.size() + " records = the " + INPUT + " input records transformed, each once";
                });
                run("ctp/output-order-per-key", () -> {
                    var got = readAll(bootstrap, output, PARTITIONS, "read_committed", INPUT, 30000);
                    Map<String, Integer> last = new HashMap<>();
                    Map<String, Integer> partOf = new HashMap<>();
                    got.sort((a, b) -> a.partition() != b.partition() ? a.partition() - b.partition() : Long.compare(a.offset(), b.offset()));
                    for (ConsumerRecord<String, String> r : got) {
                        int i = Integer.parseInt(r.value().substring(5, 11));
                        Integer prev = last.put(r.key(), i);
                        if (prev != null && prev >= i) return "key " + r.key() + ": " + r.value() + " after in-" + prev;
                        Integer pp = partOf.putIfAbsent(r.key(), r.partition());
                        if (pp != null && pp != r.partition()) return "key " + r.key() + " on partitions " + pp + " and " + r.partition();
                    }
                    return "ok: " + last.size() + " keys, each on one partition in input order";
                });
                run("ctp/group-offsets-at-input-end", () -> {
                    Map<TopicPartition, OffsetAndMetadata> c = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
                    var ends = endOffsets(admin, input, PARTITIONS, IsolationLevel.READ_UNCOMMITTED);
                    Map<Integer, Long> got = new TreeMap<>();
                    for (var e : c.entrySet()) if (e.getValue() != null) got.put(e.getKey().partition(), e.getValue().offset());
                    return got.equals(ends) ? "ok: " + got : "committed " + got + ", input end offsets " + ends;
                });
                run("ctp/aborted-records-stay-in-log", () -> {
                    var got = readAll(bootstrap, output, PARTITIONS, "read_uncommitted", INPUT + (int) atKill[1], 30000);
                    return got.size() >= INPUT + atKill[1] ? "ok: read_uncommitted " + got.size() + " records (" + (got.size() - INPUT) + " aborted)"
                            : "read_uncommitted output has " + got.size() + " records, want at least " + INPUT + " + " + atKill[1] + " aborted";
                });
            }
        } finally {
            for (App a : apps) if (a != null && a.proc.isAlive()) a.proc.destroyForcibly();
            admin.close(Duration.ofSeconds(5));
        }
        System.out.println("seconds: " + (System.currentTimeMillis() - t0) / 1000.0);
        System.out.println(passed + " passed, " + failed + " failed");
        System.out.flush();
        Runtime.getRuntime().halt(failed == 0 ? 0 : 1);
    }
}
