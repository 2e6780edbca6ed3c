package sluice.compat;

import static sluice.compat.Checks.*;
import static sluice.compat.TxnSupport.*;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Kafka's TransactionsCommand (kafka-tools, from the jars in $KAFKA_LIBS, run as its own JVM like
 * kafka-transactions.sh) against $BOOTSTRAP while this program holds a transaction open and after it ends
 * (cli/transactions): `describe --transactional-id` (Ongoing with its partitions, then CompleteCommit),
 * `describe-producers` (the open transaction's start offset, then None), `list` (the id with its state and
 * producer id; also with --transactional-id-pattern), `find-hanging` (none), an unknown id refused.
 * The tool's tab-separated tables are parsed by column name. Prints PASS/FAIL lines and "N passed, N failed".
 */
public final class TxnCliCompat {
    static String bootstrap, libs;

    /** Runs TransactionsCommand with the arguments; returns stdout+stderr (SLF4J noise and stack frames dropped). */
    static String tool(String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElse("java"), "-Xmx256m",
                "-Dlog4j2.level=error", "-cp", libs + "/*", "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bootstrap));
        cmd.addAll(List.of(args));
        File out = File.createTempFile("txn-cli", ".out");
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(out).start();
            if (!p.waitFor(60, TimeUnit.SECONDS)) { p.destroyForcibly(); return "(timed out after 60 s)"; }
            StringBuilder sb = new StringBuilder();
            for (String l : Files.readAllLines(out.toPath(), StandardCharsets.UTF_8))
                if (!l.startsWith("SLF4J") && !l.startsWith("\tat ")) sb.append(l).append('\n');
            return sb.toString();
        } finally {
            out.delete();
        }
    }

    /** Rows of the tool's table as column -> value (header = first line with a tab). */
    static List<Map<String, String>> table(String text) {
        List<Map<String, String>> rows = new ArrayList<>();
        String[] header = null;
        for (String line : text.split("\n")) {
            if (!line.contains("\t")) continue;
            String[] cells = line.split("\t");
            if (header == null) { header = cells; continue; }
            Map<String, String> row = new LinkedHashMap<>();
            for (int i = 0; i < header.length; i++) row.put(header[i].trim(), i < cells.length ? cells[i].trim() : "");
            rows.add(row);
        }
        return rows;
    }

    static Map<String, String> rowWith(String text, String column, String value) {
        for (Map<String, String> r : table(text)) if (value.equals(r.get(column))) return r;
        return null;
    }

    static String flat(String s) { return s.replace('\n', '|').replace('\t', ' ').replaceAll(" +", " "); }

    /** null when the row has every wanted column value; else what differs. */
    static String expectRow(String text, String keyColumn, String key, Map<String, String> want) {
        Map<String, String> r = rowWith(text, keyColumn, key);
        if (r == null) return "no row with " + keyColumn + "=" + key + " in: " + flat(text);
        for (var e : want.entrySet())
            if (!e.getValue().equals(r.get(e.getKey()))) return e.getKey() + "=" + r.get(e.getKey()) + ", want " + e.getValue() + " (row " + r + ")";
        return null;
    }

    public static void main(String[] args) throws Exception {
        bootstrap = env("BOOTSTRAP", "127.0.0.1:9092");
        String prefix = env("TOPIC_PREFIX", "compat-" + System.currentTimeMillis() / 1000);
        libs = env("KAFKA_LIBS", ".tools/kafka/libs");
        File[] jars = new File(libs).listFiles((d, n) -> n.matches("kafka-tools-\\d.*\\.jar"));
        System.out.println("CLIENT_VERSION: kafka CLI " + (jars == null || jars.length == 0 ? "(no kafka-tools jar in " + libs + ")"
                : jars[0].getName().replace("kafka-tools-", "").replace(".jar", "")) + " (TransactionsCommand)");
        long t0 = System.currentTimeMillis();
        Admin admin = admin(bootstrap);
        String topic = prefix + "-cli-txn", id = prefix + "-cli-txn", abortId = prefix + "-cli-txn-aborted";
        KafkaProducer<String, String> p = producer(bootstrap, id), p2 = producer(bootstrap, abortId);
        List<RecordMetadata> open = new ArrayList<>();
        String[] producerId = {null}, epoch = {null};
        try {
            if (!run("transactions-cli/open-transaction", () -> {
                createTopic(admin, topic, 2);
                p.initTransactions();
                p.beginTransaction();
                p.send(new ProducerRecord<>(topic, 0, "k", "before")).get(30, TimeUnit.SECONDS);
                p.commitTransaction();
                p.beginTransaction();
                for (int i = 0; i < 10; i++) open.add(p.send(new ProducerRecord<>(topic, i % 2, "k", "open-" + i)).get(30, TimeUnit.SECONDS));
                return "ok: 10 records over partitions 0 and 1 in an open transaction (after one committed record)";
            })) {
                finish(admin, t0);
                return;
            }
            run("transactions-cli/describe-ongoing", () -> {
                String out = tool("describe", "--transactional-id", id);
                Map<String, String> r = rowWith(out, "TransactionalId", id);
                if (r == null) return "no row for " + id + ": " + flat(out);
                producerId[0] = r.get("ProducerId");
                epoch[0] = r.get("ProducerEpoch");
                List<String> tps = List.of(r.getOrDefault("TopicPartitions", "").split(","));
                // transactions V1 keep epoch 0 from initTransactions; V2 (KIP-890, Kafka 4.x's default) bumps it per commit
                if (!"Ongoing".equals(r.get("TransactionState")) || !tps.contains(topic + "-0") || !tps.contains(topic + "-1") || tps.size() != 2
                        || !"60000".equals(r.get("TransactionTimeoutMs")) || !List.of("0", "1").contains(epoch[0]))
                    return "want Ongoing, epoch 0 (V1) or 1 (V2), timeout 60000, partitions " + topic + "-0," + topic + "-1; got " + r;
                return "ok: " + r.get("TransactionState") + " " + r.get("TopicPartitions") + " producer " + producerId[0] + " epoch " + epoch[0];
            });
            run("transactions-cli/describe-producers-ongoing", () -> {
                String out = tool("describe-producers", "--topic", topic, "--partition", "0");
                long start = open.stream().filter(m -> m.partition() == 0).mapToLong(RecordMetadata::offset).min().orElse(-1);
                // partition 0 got sequence 0 in the first transaction, then 5 records: 1..5 at the same epoch (V1),
                // 0..4 after V2's epoch bump
                String err = expectRow(out, "ProducerId", String.valueOf(producerId[0]), Map.of("ProducerEpoch", String.valueOf(epoch[0]),
                        "CurrentTransactionStartOffset", String.valueOf(start), "LastSequence", "0".equals(epoch[0]) ? "5" : "4"));
                return err != null ? err : "ok: producer " + producerId[0] + " CurrentTransactionStartOffset " + start;
            });
            run("transactions-cli/list-ongoing", () -> {
                String out = tool("list");
                String err = expectRow(out, "TransactionalId", id, Map.of("TransactionState", "Ongoing", "ProducerId", String.valueOf(producerId[0]), "Coordinator", "1"));
                return err != null ? err : "ok: " + id + " Ongoing";
            });
            run("transactions-cli/find-hanging-none", () -> {
                String out = tool("find-hanging", "--broker-id", "1");
                List<Map<String, String>> rows = table(out);
                if (!out.contains("Topic\tPartition\tProducerId")) return "no table header: " + flat(out);
                return rows.isEmpty() ? "ok: no hanging transactions" : "hanging transactions reported: " + rows;
            });
            run("transactions-cli/describe-complete-commit", () -> {
                p.commitTransaction();
                String out = tool("describe", "--transactional-id", id);
                String err = expectRow(out, "TransactionalId", id, Map.of("TransactionState", "CompleteCommit", "TopicPartitions", "", "ProducerId", String.valueOf(producerId[0])));
                return err != null ? err : "ok: CompleteCommit, no partitions";
            });
            run("transactions-cli/describe-producers-complete", () -> {
                String out = tool("describe-producers", "--topic", topic, "--partition", "1");
                // V1: the marker keeps epoch and sequence; V2: the commit marker carries the bumped epoch, sequence reset
                boolean v1 = "0".equals(epoch[0]);
                String err = expectRow(out, "ProducerId", String.valueOf(producerId[0]), Map.of("CurrentTransactionStartOffset", "None",
                        "ProducerEpoch", v1 ? "0" : String.valueOf(Integer.parseInt(epoch[0]) + 1), "LastSequence", v1 ? "4" : "-1"));
                return err != null ? err : "ok: no open transaction on partition 1";
            });
            run("transactions-cli/list-complete", () -> {
                p2.initTransactions();
                p2.beginTransaction();
                p2.send(new ProducerRecord<>(topic, 0, "k", "dropped")).get(30, TimeUnit.SECONDS);
                p2.abortTransaction();
                String out = tool("list");
                String err = expectRow(out, "TransactionalId", id, Map.of("TransactionState", "CompleteCommit"));
                if (err == null) err = expectRow(out, "TransactionalId", abortId, Map.of("TransactionState", "CompleteAbort"));
                return err != null ? err : "ok: " + id + " CompleteCommit, " + abortId + " CompleteAbort";
            });
            run("transactions-cli/list-pattern", () -> {
                String out = tool("list", "--transactional-id-pattern", java.util.regex.Pattern.quote(prefix) + "-cli-txn-ab.*");
                List<Map<String, String>> rows = table(out);
                if (rows.size() != 1 || !abortId.equals(rows.get(0).get("TransactionalId"))) return "want only " + abortId + ", got " + flat(out);
                return "ok: the pattern selects " + abortId;
            });
            run("transactions-cli/describe-unknown-id", () -> {
                String out = tool("describe", "--transactional-id", id + "-unknown");
                return out.contains("the ID could not be found") ? "ok: refused" : "want 'the ID could not be found', got " + flat(out);
            });
        } finally {
            p.close(Duration.ofSeconds(5));
            p2.close(Duration.ofSeconds(5));
        }
        finish(admin, t0);
    }

    static void finish(Admin admin, long t0) {
        admin.close(Duration.ofSeconds(5));
        System.out.println("seconds: " + (System.currentTimeMillis() - t0) / 1000.0);
        System.out.println(passed + " passed, " + failed + " failed");
        System.out.flush();
        Runtime.getRuntime().halt(failed == 0 ? 0 : 1);
    }
}
