package sluice.compat;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * Helpers the transaction suites share (java/txn, java/txn-ctp, cli/transactions): transactional producers
 * with a bounded max.block.ms (a broker without a transaction coordinator fails in seconds, not a minute),
 * assign()-based readers at either isolation level, and per-partition end offsets from ListOffsets.
 */
final class TxnSupport {
    private TxnSupport() {}

    static Admin admin(String bootstrap) {
        return Admin.create(Map.of("bootstrap.servers", bootstrap, "request.timeout.ms", 15000, "default.api.timeout.ms", 30000));
    }

    static void createTopic(Admin admin, String topic, int partitions) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
    }

    static KafkaProducer<String, String> producer(String bootstrap, String transactionalId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, Integer.parseInt(Checks.env("TXN_MAX_BLOCK_MS", "15000")));
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 60000);
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    static List<TopicPartition> partitions(String topic, int n) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < n; i++) tps.add(new TopicPartition(topic, i));
        return tps;
    }

    static KafkaConsumer<String, String> reader(String bootstrap, String topic, int n, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        KafkaConsumer<String, String> c = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
        List<TopicPartition> tps = partitions(topic, n);
        c.assign(tps);
        c.seekToBeginning(tps);
        return c;
    }

    /** Polls until at least {@code want} records arrived (or maxMs passed), then 500 ms more to catch extras. */
    static List<ConsumerRecord<String, String>> poll(KafkaConsumer<String, String> c, int want, long maxMs) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long end = System.currentTimeMillis() + maxMs;
        while (System.currentTimeMillis() < end && out.size() < want)
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) out.add(r);
        long quiet = System.currentTimeMillis() + 500;
        while (System.currentTimeMillis() < quiet)
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) out.add(r);
        return out;
    }

    /** Reads a whole topic from the beginning at one isolation level. */
    static List<ConsumerRecord<String, String>> readAll(String bootstrap, String topic, int n, String isolation, int want, long maxMs) {
        try (KafkaConsumer<String, String> c = reader(bootstrap, topic, n, isolation)) {
            return poll(c, want, maxMs);
        }
    }

    /** Latest offset per partition: the high watermark (READ_UNCOMMITTED) or the last stable offset (READ_COMMITTED). */
    static Map<Integer, Long> endOffsets(Admin admin, String topic, int n, IsolationLevel level) throws Exception {
        Map<TopicPartition, OffsetSpec> req = new TreeMap<>((a, b) -> a.partition() - b.partition());
        for (TopicPartition tp : partitions(topic, n)) req.put(tp, OffsetSpec.latest());
        var res = admin.listOffsets(req, new ListOffsetsOptions(level)).all().get(30, TimeUnit.SECONDS);
        Map<Integer, Long> out = new TreeMap<>();
        for (var e : res.entrySet()) out.put(e.getKey().partition(), e.getValue().offset());
        return out;
    }

    /** The exception itself or the first cause of the given type, else null. */
    static <T extends Throwable> T causeOf(Throwable t, Class<T> type) {
        for (Throwable c = t; c != null; c = c.getCause()) if (type.isInstance(c)) return type.cast(c);
        return null;
    }
}
