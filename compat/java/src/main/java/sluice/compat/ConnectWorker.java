package sluice.compat;

import java.io.File;
import java.io.IOException;
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
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * One run of a Kafka Connect distributed worker as its own JVM ({@code ConnectDistributed worker.properties},
 * the compat module's classpath, FileStream connectors found on it), for {@link ConnectCompat}: its output
 * is appended to one log file; it can be stopped with SIGTERM (Connect's shutdown hook stops the herder,
 * commits offsets and leaves the group) or SIGKILL (nothing of that). Used from the suite's main thread only.
 */
final class ConnectWorker {
    final Process proc;
    final File log;
    final long started = System.currentTimeMillis();

    private ConnectWorker(Process proc, File log) { this.proc = proc; this.log = log; }

    static ConnectWorker start(String name, Map<String, String> props, Path dir, File log) throws IOException {
        Path file = dir.resolve("worker-" + name + ".properties");
        List<String> lines = new ArrayList<>();
        for (var e : props.entrySet()) lines.add(e.getKey() + "=" + e.getValue());
        Files.write(file, lines, StandardCharsets.UTF_8);
        String javaBin = ProcessHandle.current().info().command().orElse("java");
        ProcessBuilder pb = new ProcessBuilder(javaBin, "-Xmx512m",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=" + Checks.env("CONNECT_LOG_LEVEL", "info"),
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                // "Fencing out N task producers for source connector C" is a debug line of Worker
                "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.connect.runtime.Worker=debug",
                "-cp", System.getProperty("java.class.path"), "org.apache.kafka.connect.cli.ConnectDistributed", file.toString());
        pb.redirectErrorStream(true);
        Files.writeString(log.toPath(), "==== worker " + name + " starts\n", StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        pb.redirectOutput(ProcessBuilder.Redirect.appendTo(log));
        Process proc = pb.start();
        // the suite JVM ended by a signal (scripts/compat's timeout) takes its worker along
        Runtime.getRuntime().addShutdownHook(new Thread(proc::destroyForcibly));
        return new ConnectWorker(proc, log);
    }

    /** Waits until GET / answers 200 (the REST server is up and the herder started). */
    String awaitRest(String rest, long maxMs) throws Exception {
        HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
        long end = System.currentTimeMillis() + maxMs;
        String last = "no answer";
        while (System.currentTimeMillis() < end) {
            if (!proc.isAlive()) return "worker exited with " + proc.exitValue() + " before its REST API answered; " + errors();
            try {
                HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(rest + "/")).timeout(Duration.ofSeconds(5)).build(),
                        HttpResponse.BodyHandlers.ofString());
                if (r.statusCode() == 200)
                    return "ok REST up " + (System.currentTimeMillis() - started) + " ms after the JVM started: " + r.body();
                last = "HTTP " + r.statusCode();
            } catch (IOException e) {
                last = e.toString();
            }
            Thread.sleep(250);
        }
        return "REST not up within " + maxMs + " ms (" + last + "); " + errors();
    }

    /** SIGTERM and wait for the exit; null when the worker exited in time. */
    String stop(long maxMs) throws InterruptedException {
        if (!proc.isAlive()) return null;
        proc.destroy();
        if (!proc.waitFor(maxMs, TimeUnit.MILLISECONDS)) return "worker still alive " + maxMs + " ms after SIGTERM";
        return null;
    }

    /** SIGKILL: no offset commit, no LeaveGroup, open transactions stay open. */
    void kill() throws InterruptedException {
        proc.destroyForcibly();
        proc.waitFor(30, TimeUnit.SECONDS);
    }

    /** The log lines (of every run so far) that contain the text. */
    List<String> logLines(String text) throws IOException {
        List<String> out = new ArrayList<>();
        for (String l : Files.readAllLines(log.toPath(), StandardCharsets.UTF_8)) if (l.contains(text)) out.add(l);
        return out;
    }

    /** The last ERROR lines of the worker's log, for a failure's detail. */
    String errors() {
        try {
            List<String> all = Files.readAllLines(log.toPath(), StandardCharsets.UTF_8);
            List<String> errs = new ArrayList<>();
            for (String l : all) if (l.contains("ERROR") || l.startsWith("Exception")) errs.add(l.length() > 300 ? l.substring(0, 300) : l);
            return errs.isEmpty() ? "no ERROR in the worker log" : String.join(" | ", errs.subList(Math.max(0, errs.size() - 3), errs.size()));
        } catch (IOException e) {
            return "worker log unreadable: " + e;
        }
    }
}
