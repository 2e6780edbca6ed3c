package sluice.compat;

import static sluice.compat.Checks.*;
import static sluice.compat.TxnSupport.*;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ClassicGroupDescription;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.config.ConfigResource;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * Kafka Connect in distributed mode against $BOOTSTRAP (java/connect; with the argument {@code eos}:
 * java/connect-eos, {@code exactly.once.source.support=enabled}, KIP-618). The worker is its own JVM
 * ({@link ConnectWorker}) so it can be stopped with SIGTERM and with SIGKILL. Checks: the worker creates
 * its config/offset/status topics compacted and joins its group with Connect's protocol type; a
 * FileStreamSource -> 1-partition topic -> FileStreamSink pipeline carries LINES distinct lines, the sink
 * file ends with exactly those lines in order; the REST API reports both connectors and their tasks
 * RUNNING; after a clean stop and restart MORE appended lines arrive with no duplicate; after a kill -9
 * while MORE lines are flowing and a restart, every line arrives (first occurrences in source order) and
 * the sink file's duplicates are counted (FileStreamSink is at-least-once in both modes); the source
 * connector is stopped, its offsets read and written back (KIP-875; in eos mode after a round of zombie
 * fencing, Admin.fenceProducers) and resumed, and MORE lines arrive with no new duplicate; the topic holds
 * every line, in eos mode (read_committed) none twice, otherwise duplicates counted. Prints PASS/FAIL lines
 * and "N passed, N failed"; the worker's log is compat/logs/java-connect[-eos]-worker.log.
 */
public final class ConnectCompat {
    static final int LINES = Integer.parseInt(env("CONNECT_LINES", "10000"));
    static final int MORE = Integer.parseInt(env("CONNECT_MORE_LINES", "1000"));
    static final ObjectMapper JSON = new ObjectMapper();
    static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    static String line(int i) { return String.format("line-%06d %s", i, "abcdefghij".repeat(1 + i % 5)); }

    public static void main(String[] args) throws Exception {
        boolean eos = args.length > 0 && args[0].equals("eos");
        String unit = eos ? "connect-eos" : "connect";
        String bootstrap = env("BOOTSTRAP", "127.0.0.1:9092");
        String prefix = env("TOPIC_PREFIX", "compat-" + System.currentTimeMillis() / 1000) + "-" + unit;
        System.out.println("CLIENT_VERSION: connect-runtime " + Checks.kafkaClientsVersion());
        Path dir = Files.createTempDirectory("sluice-" + unit);
        Path source = dir.resolve("source.txt"), sink = dir.resolve("sink.txt");
        String topic = prefix + "-lines", group = prefix + "-workers";
        String[] internal = {prefix + "-configs", prefix + "-offsets", prefix + "-status"};
        int port = freePort();
        String rest = "http://127.0.0.1:" + port;
        Map<String, String> props = workerProps(bootstrap, group, internal, port, eos);
        File log = new File(env("COMPAT_LOG_DIR", System.getProperty("java.io.tmpdir")), "java-" + unit + "-worker.log");
        log.delete();  // every worker run appends to it
        ConnectWorker[] worker = new ConnectWorker[1];
        long t0 = System.currentTimeMillis();
        try (Admin admin = admin(bootstrap)) {
            boolean up = run(unit + "/worker-start: source file of " + LINES + " lines, 1-partition topic, worker JVM answers REST", () -> {
                List<String> lines = new ArrayList<>(LINES);
                for (int i = 0; i < LINES; i++) lines.add(line(i));
                Files.write(source, lines, StandardCharsets.UTF_8);
                createTopic(admin, topic, 1);
                worker[0] = ConnectWorker.start("run1", props, dir, log);
                return worker[0].awaitRest(rest, 90_000);
            });
            if (!up) return;
            run(unit + "/internal-topics: config (1 partition), offset, status topics exist, cleanup.policy=compact",
                    () -> internalTopics(admin, internal));
            run(unit + "/worker-group: listed with protocol type \"connect\", classic, Stable; described: sub-protocol sessioned, one member", () -> workerGroup(admin, group));
            boolean created = run(unit + "/connectors: FileStreamSource and FileStreamSink created through REST, connector + task RUNNING", () -> {
                String err = put(rest, "source", Map.of("connector.class", "FileStreamSource", "tasks.max", "1",
                        "file", source.toString(), "topic", topic));
                if (err != null) return err;
                err = put(rest, "sink", Map.of("connector.class", "FileStreamSink", "tasks.max", "1",
                        "file", sink.toString(), "topics", topic));
                if (err != null) return err;
                return running(rest, 60_000);
            });
            if (!created) return;
            long p0 = System.currentTimeMillis();
            boolean piped = run(unit + "/pipeline: the sink file holds exactly the " + LINES + " source lines, in order",
                    () -> exact(sink, LINES, 90_000, p0));
            if (!piped) return;

            boolean restarted = run(unit + "/clean-restart: SIGTERM, worker exits, restarts, RUNNING again", () -> {
                long s0 = System.currentTimeMillis();
                // Beyond Jetty's 60 s stop timeout: Connect's shutdown hook and Jetty's own
                // JettyShutdownThread stop the REST server at once, and when they race ("Unable to
                // destroy ... STARTED") the hook waits out that timeout before the herder stops
                // (seen once at load 4 on 2026-12-05; no request reached the broker meanwhile).
                String err = worker[0].stop(100_000);
                if (err != null) return err;
                long stopped = System.currentTimeMillis() - s0;
                worker[0] = ConnectWorker.start("run2", props, dir, log);
                err = worker[0].awaitRest(rest, 90_000);
                if (err != null && !err.startsWith("ok")) return err;
                err = running(rest, 60_000);
                if (err != null && !err.startsWith("ok")) return err;
                return "ok stopped in " + stopped + " ms, RUNNING again " + (System.currentTimeMillis() - s0) + " ms after SIGTERM";
            });
            if (!restarted) return;
            long a0 = System.currentTimeMillis();
            boolean more = run(unit + "/after-clean-restart: " + MORE + " appended lines arrive, sink file exact, no duplicate", () -> {
                append(source, LINES, LINES + MORE);
                return exact(sink, LINES + MORE, 90_000, a0);
            });
            if (!more) return;

            int total = LINES + 2 * MORE;
            boolean killed = run(unit + "/kill-9: SIGKILL while " + MORE + " lines are flowing, restart, RUNNING again", () -> {
                Thread writer = new Thread(() -> {
                    try {
                        for (int i = LINES + MORE; i < total; i += 20) { append(source, i, Math.min(i + 20, total)); Thread.sleep(40); }
                    } catch (Exception e) { System.out.println("appender: " + e); }
                });
                writer.start();
                long end = System.currentTimeMillis() + 30_000;
                int seen = 0;
                while (System.currentTimeMillis() < end && (seen = readLines(sink).size()) < LINES + MORE + MORE / 4) Thread.sleep(20);
                long k0 = System.currentTimeMillis();
                worker[0].kill();
                writer.join(30_000);
                worker[0] = ConnectWorker.start("run3", props, dir, log);
                String err = worker[0].awaitRest(rest, 90_000);
                if (err != null && !err.startsWith("ok")) return err;
                err = running(rest, 120_000);
                if (err != null && !err.startsWith("ok")) return err;
                return "ok killed with " + seen + " sink lines, RUNNING again " + (System.currentTimeMillis() - k0) + " ms after SIGKILL";
            });
            if (!killed) return;
            long w0 = System.currentTimeMillis();
            int[] sinkDups = {-1};
            run(unit + "/after-kill-9: every one of " + total + " lines in the sink file, first occurrences in order; duplicates counted", () -> {
                String r = atLeastOnce(sink, total, 120_000, w0);
                if (r.startsWith("ok")) sinkDups[0] = readLines(sink).size() - total;
                return r;
            });

            // KIP-875: stop the source connector, read its offsets, write them back unchanged (with exactly-once
            // support the leader first fences the connector's task producers: Admin.fenceProducers), resume.
            int last = total + MORE;
            boolean altered = run(unit + "/offsets: stop source, GET offsets = source file size, PATCH them back"
                    + (eos ? " (zombie fencing first)" : "") + ", resume, RUNNING", () -> {
                String err = call(rest, "PUT", "/connectors/source/stop", null);
                if (err != null) return err;
                err = awaitState(rest, "source", "STOPPED", 60_000);
                if (err != null) return err;
                HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(rest + "/connectors/source/offsets"))
                        .timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
                if (r.statusCode() != 200) return "GET offsets: HTTP " + r.statusCode() + " " + r.body();
                JsonNode offsets = JSON.readTree(r.body());
                long position = offsets.path("offsets").path(0).path("offset").path("position").asLong(-1);
                if (offsets.path("offsets").size() != 1 || position != Files.size(source))
                    return "GET offsets " + r.body() + ", want one partition at position " + Files.size(source);
                err = call(rest, "PATCH", "/connectors/source/offsets", r.body());
                if (err != null) return err;
                String fenced = "";
                if (eos) {
                    List<String> f = worker[0].logLines("Fencing out");
                    if (f.isEmpty()) return "PATCH offsets answered, but the worker log has no 'Fencing out' line (no zombie fencing)";
                    fenced = "; " + f.get(f.size() - 1).replaceAll("^.* - ", "");
                }
                err = call(rest, "PUT", "/connectors/source/resume", null);
                if (err != null) return err;
                err = running(rest, 60_000);
                if (err != null && !err.startsWith("ok")) return err;
                return "ok position " + position + fenced + "; " + err.substring(3);
            });
            if (altered) {
                long o0 = System.currentTimeMillis();
                run(unit + "/after-offsets: " + MORE + " more lines arrive, no new duplicate in the sink file", () -> {
                    append(source, total, last);
                    String r = atLeastOnce(sink, last, 90_000, o0);
                    if (!r.startsWith("ok")) return r;
                    int dups = readLines(sink).size() - last;
                    if (sinkDups[0] >= 0 && dups != sinkDups[0]) return (dups - sinkDups[0]) + " new duplicates after the offsets round trip, want 0";
                    return r;
                });
            }
            int inTopic = altered ? last : total;
            run(unit + "/topic: " + inTopic + " lines " + (eos ? "read_committed, none twice (exactly-once source)" : "all there; duplicates counted (at-least-once source)"), () -> {
                List<ConsumerRecord<String, String>> recs = readAll(bootstrap, topic, 1, eos ? "read_committed" : "read_uncommitted", inTopic, 60_000);
                List<String> values = new ArrayList<>();
                for (ConsumerRecord<String, String> r : recs) values.add(r.value());
                String err = firstOccurrences(values, inTopic);
                if (err != null) return err;
                int dups = values.size() - inTopic;
                if (eos && dups != 0) return dups + " duplicate records in the topic (read_committed), want 0";
                return "ok " + values.size() + " records, " + dups + " duplicates";
            });
            run(unit + "/status-after-restarts: REST lists both connectors, every task RUNNING", () -> running(rest, 30_000));
        } finally {
            if (worker[0] != null) {
                String err = worker[0].stop(30_000);
                if (err != null) worker[0].kill();
            }
            System.out.println("connect unit took " + (System.currentTimeMillis() - t0) + " ms; worker log " + log);
            System.out.println(passed + " passed, " + failed + " failed");
            System.exit(failed == 0 ? 0 : 1);
        }
    }

    static Map<String, String> workerProps(String bootstrap, String group, String[] internal, int port, boolean eos) {
        Map<String, String> p = new LinkedHashMap<>();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
        p.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
        p.put("config.storage.topic", internal[0]);
        p.put("offset.storage.topic", internal[1]);
        p.put("status.storage.topic", internal[2]);
        p.put("config.storage.replication.factor", "1");
        p.put("offset.storage.replication.factor", "1");
        p.put("status.storage.replication.factor", "1");
        p.put("offset.storage.partitions", "5");
        p.put("status.storage.partitions", "3");
        p.put("offset.flush.interval.ms", "1000");
        p.put("listeners", "http://127.0.0.1:" + port);
        p.put("rest.advertised.host.name", "127.0.0.1");
        p.put("rest.advertised.port", String.valueOf(port));
        // a killed worker's member leaves the group after 6 s (the broker's group.min.session.timeout.ms)
        p.put("session.timeout.ms", "6000");
        p.put("heartbeat.interval.ms", "2000");
        p.put("scheduled.rebalance.max.delay.ms", "0");
        p.put("task.shutdown.graceful.timeout.ms", "10000");
        // the classpath plugins (FileStream connectors, converters) all have ServiceLoader manifests: no 15 s scan
        p.put("plugin.discovery", "service_load");
        // the sink task's consumer group (connect-sink): a killed worker's consumer leaves it after 10 s, not 45 s
        p.put("consumer.session.timeout.ms", "10000");
        p.put("consumer.heartbeat.interval.ms", "3000");
        if (eos) {
            p.put("exactly.once.source.support", "enabled");
            // A kill -9 can leave the source task's transaction open on the offsets topic; the restarted worker
            // reads that topic read_committed up to its high watermark before it starts any task, so it waits for
            // the broker to abort the transaction on its timeout (the producer default is 60 s).
            p.put("producer.transaction.timeout.ms", "15000");
            p.put("consumer.isolation.level", "read_committed");
        }
        return p;
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getByName("127.0.0.1"))) { return s.getLocalPort(); }
    }

    static String internalTopics(Admin admin, String[] internal) throws Exception {
        Map<String, TopicDescription> d = admin.describeTopics(List.of(internal)).allTopicNames().get(30, TimeUnit.SECONDS);
        if (d.get(internal[0]).partitions().size() != 1) return internal[0] + " has " + d.get(internal[0]).partitions().size() + " partitions, want 1";
        List<ConfigResource> rs = new ArrayList<>();
        for (String t : internal) rs.add(new ConfigResource(ConfigResource.Type.TOPIC, t));
        Map<ConfigResource, Config> cs = admin.describeConfigs(rs).all().get(30, TimeUnit.SECONDS);
        StringBuilder ok = new StringBuilder("ok");
        for (String t : internal) {
            var e = cs.get(new ConfigResource(ConfigResource.Type.TOPIC, t)).get("cleanup.policy");
            if (e == null || !"compact".equals(e.value())) return t + " cleanup.policy=" + (e == null ? "missing" : e.value()) + ", want compact";
            ok.append(' ').append(t.substring(t.lastIndexOf('-') + 1)).append('=').append(d.get(t).partitions().size()).append("p");
        }
        return ok.toString();
    }

    static String workerGroup(Admin admin, String group) throws Exception {
        long end = System.currentTimeMillis() + 30_000;
        String last = "not listed";
        while (System.currentTimeMillis() < end) {
            for (GroupListing g : admin.listGroups().all().get(30, TimeUnit.SECONDS)) {
                if (!g.groupId().equals(group)) continue;
                last = "type=" + g.type().map(Object::toString).orElse("?") + " protocol=" + g.protocol()
                        + " state=" + g.groupState().map(Object::toString).orElse("?");
                if ("connect".equals(g.protocol()) && g.type().map(t -> t.toString().equalsIgnoreCase("classic")).orElse(false)
                        && g.groupState().map(s -> s.toString().equalsIgnoreCase("stable")).orElse(false)) {
                    // DescribeGroups: JoinGroup chose Connect's "sessioned" sub-protocol; one member, the worker
                    ClassicGroupDescription d = admin.describeClassicGroups(List.of(group)).all().get(30, TimeUnit.SECONDS).get(group);
                    String desc = "described protocolType=" + d.protocol() + " protocol=" + d.protocolData() + " members=" + d.members().size();
                    if (!"connect".equals(d.protocol()) || !"sessioned".equals(d.protocolData()) || d.members().size() != 1
                            || !d.members().iterator().next().clientId().startsWith("connect-"))
                        return "group " + group + ": " + desc + ", want connect/sessioned with one connect-* member";
                    return "ok " + last + "; " + desc;
                }
            }
            Thread.sleep(500);
        }
        return "group " + group + ": " + last;
    }

    static String put(String rest, String name, Map<String, String> config) throws Exception {
        HttpRequest req = HttpRequest.newBuilder(URI.create(rest + "/connectors/" + name + "/config"))
                .timeout(Duration.ofSeconds(30)).header("Content-Type", "application/json")
                .PUT(HttpRequest.BodyPublishers.ofString(JSON.writeValueAsString(config))).build();
        HttpResponse<String> r = HTTP.send(req, HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200 && r.statusCode() != 201) return "PUT " + name + ": HTTP " + r.statusCode() + " " + r.body();
        return null;
    }

    /** Polls both connectors' status until the connector and every task (at least one) are RUNNING. */
    static String running(String rest, long maxMs) throws Exception {
        long end = System.currentTimeMillis() + maxMs, t0 = System.currentTimeMillis();
        String last = "";
        while (System.currentTimeMillis() < end) {
            try {
                HttpResponse<String> list = HTTP.send(HttpRequest.newBuilder(URI.create(rest + "/connectors")).timeout(Duration.ofSeconds(10)).build(),
                        HttpResponse.BodyHandlers.ofString());
                Set<String> names = new HashSet<>();
                for (JsonNode n : JSON.readTree(list.body())) names.add(n.asText());
                boolean all = names.equals(Set.of("source", "sink"));
                last = "connectors " + names;
                for (String c : List.of("source", "sink")) {
                    HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(rest + "/connectors/" + c + "/status"))
                            .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
                    if (r.statusCode() != 200) { all = false; last += "; " + c + ": HTTP " + r.statusCode(); continue; }
                    JsonNode s = JSON.readTree(r.body());
                    String cs = s.path("connector").path("state").asText();
                    List<String> ts = new ArrayList<>();
                    for (JsonNode t : s.path("tasks")) ts.add(t.path("state").asText() + (t.has("trace") ? " " + firstLine(t.path("trace").asText()) : ""));
                    last += "; " + c + "=" + cs + " tasks=" + ts;
                    if (!cs.equals("RUNNING") || ts.isEmpty() || !ts.stream().allMatch(x -> x.equals("RUNNING"))) all = false;
                }
                if (all) return "ok " + last.substring("connectors ".length()) + " after " + (System.currentTimeMillis() - t0) + " ms";
            } catch (IOException e) {
                last = "REST: " + e;
            }
            Thread.sleep(250);
        }
        return "not RUNNING within " + maxMs + " ms: " + last;
    }

    /** One REST call; null when it answered 2xx (stop answers 204, resume 202, PATCH offsets 200). */
    static String call(String rest, String method, String path, String body) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(rest + path)).timeout(Duration.ofSeconds(60))
                .header("Content-Type", "application/json")
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        HttpResponse<String> r = HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
        return r.statusCode() / 100 == 2 ? null : method + " " + path + ": HTTP " + r.statusCode() + " " + r.body();
    }

    static String awaitState(String rest, String connector, String state, long maxMs) throws Exception {
        long end = System.currentTimeMillis() + maxMs;
        String last = "";
        while (System.currentTimeMillis() < end) {
            HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(rest + "/connectors/" + connector + "/status"))
                    .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
            last = r.body();
            if (r.statusCode() == 200 && state.equals(JSON.readTree(last).path("connector").path("state").asText())) return null;
            Thread.sleep(250);
        }
        return connector + " not " + state + " within " + maxMs + " ms: " + last;
    }

    static String firstLine(String s) { int i = s.indexOf('\n'); return i < 0 ? s : s.substring(0, i); }

    static void append(Path source, int from, int to) throws IOException {
        StringBuilder b = new StringBuilder();
        for (int i = from; i < to; i++) b.append(line(i)).append('\n');
        Files.writeString(source, b, StandardCharsets.UTF_8, StandardOpenOption.APPEND);
    }

    /** The sink file's complete lines (a line still being written is left out). */
    static List<String> readLines(Path sink) throws IOException {
        if (!Files.exists(sink)) return List.of();
        String s = Files.readString(sink, StandardCharsets.UTF_8);
        int cut = s.lastIndexOf('\n');
        if (cut < 0) return List.of();
        return List.of(s.substring(0, cut).split("\n", -1));
    }

    /** Waits until the sink file holds want lines (then 2 s more for extras) and compares them one by one. */
    static String exact(Path sink, int want, long maxMs, long t0) throws Exception {
        List<String> got = settle(sink, want, maxMs);
        long ms = System.currentTimeMillis() - t0;
        if (got.size() != want) return got.size() + " lines in the sink file after " + ms + " ms, want " + want;
        for (int i = 0; i < want; i++)
            if (!got.get(i).equals(line(i))) return "sink line " + i + " is '" + got.get(i) + "', want '" + line(i) + "'";
        return "ok " + want + " lines, no duplicate, " + ms + " ms (" + want * 1000L / Math.max(ms, 1) + " lines/s incl. the 2 s settle)";
    }

    static String atLeastOnce(Path sink, int want, long maxMs, long t0) throws Exception {
        long end = System.currentTimeMillis() + maxMs;
        List<String> got = readLines(sink);
        while (System.currentTimeMillis() < end && new HashSet<>(got).size() < want) { Thread.sleep(100); got = readLines(sink); }
        got = settle(sink, got.size(), 5_000);
        String err = firstOccurrences(got, want);
        if (err != null) return err + " (after " + (System.currentTimeMillis() - t0) + " ms)";
        return "ok " + got.size() + " sink lines, " + (got.size() - want) + " duplicates, all there after " + (System.currentTimeMillis() - t0) + " ms";
    }

    /** Polls until the file has at least want lines and then no new line for 2 s. */
    static List<String> settle(Path sink, int want, long maxMs) throws Exception {
        long end = System.currentTimeMillis() + maxMs;
        List<String> got = readLines(sink);
        while (System.currentTimeMillis() < end && got.size() < want) { Thread.sleep(100); got = readLines(sink); }
        for (int n = -1; n != got.size(); ) { n = got.size(); Thread.sleep(2000); got = readLines(sink); }
        return got;
    }

    /** Null when values hold line(0..want) and nothing else, with first occurrences in source order. */
    static String firstOccurrences(List<String> values, int want) {
        Set<String> seen = new HashSet<>();
        int next = 0;
        for (String v : values) {
            if (!seen.add(v)) continue;
            if (next >= want || !v.equals(line(next))) return "first new value #" + next + " is '" + v + "', want '" + (next < want ? line(next) : "none") + "'";
            next++;
        }
        if (next != want) return values.size() + " values with " + next + " distinct lines, want " + want + " (first missing '" + line(next) + "')";
        return null;
    }
}
