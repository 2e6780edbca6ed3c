package sluice.compat;

/**
 * The check harness every Java compat suite shares: PASS/FAIL lines, the counters behind the closing
 * "N passed, N failed" line, and environment lookups. Suites use it through
 * {@code import static sluice.compat.Checks.*;}. Not thread-safe: suites report from their main thread.
 */
final class Checks {
    static int passed = 0, failed = 0;

    private Checks() {}

    static void check(String name, boolean ok, String detail) {
        if (ok) {
            passed++;
            System.out.println("PASS " + name + (detail.isEmpty() ? "" : " (" + detail + ")"));
        } else {
            failed++;
            System.out.println("FAIL " + name + ": " + detail);
        }
        System.out.flush();
    }

    interface Check { String run() throws Exception; }

    /** A check passes when it returns null or a string starting with "ok" (shown as detail). */
    static boolean run(String name, Check c) {
        try {
            String err = c.run();
            boolean ok = err == null || err.startsWith("ok");
            check(name, ok, err == null ? "" : err);
            return ok;
        } catch (Throwable t) {
            check(name, false, t.toString());
            return false;
        }
    }

    /**
     * The kafka-clients version on the classpath, from the jar's own kafka/kafka-version.properties
     * (AppInfoParser is common.utils.internals.AppInfoParser in 4.4.0, common.utils in 4.1.2).
     */
    static String kafkaClientsVersion() {
        try (java.io.InputStream in = Checks.class.getClassLoader().getResourceAsStream("kafka/kafka-version.properties")) {
            if (in == null) return "unknown";
            java.util.Properties p = new java.util.Properties();
            p.load(in);
            return p.getProperty("version", "unknown");
        } catch (java.io.IOException e) {
            return "unknown";
        }
    }

    /**
     * describeTopics of topics a createTopics just created, asked again while a broker answers
     * UNKNOWN_TOPIC_OR_PARTITION (at most 10 s): CreateTopics is answered once the controller
     * committed it, and the broker the describe goes to learns it from the metadata log a moment
     * later (Kafka's own integration tests wait for that propagation the same way).
     */
    static java.util.Map<String, org.apache.kafka.clients.admin.TopicDescription> describeCreated(
            org.apache.kafka.clients.admin.Admin admin, java.util.List<String> topics) throws Exception {
        long deadline = System.currentTimeMillis() + 10_000;
        while (true) {
            try {
                return admin.describeTopics(topics).allTopicNames().get(30, java.util.concurrent.TimeUnit.SECONDS);
            } catch (java.util.concurrent.ExecutionException e) {
                boolean unknown = e.getCause() instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
                if (!unknown || System.currentTimeMillis() > deadline) throw e;
                Thread.sleep(100);
            }
        }
    }

    static String env(String k, String def) {
        String v = System.getenv(k);
        return v == null || v.isEmpty() ? def : v;
    }
}
