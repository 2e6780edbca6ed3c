package sluice.compat;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * The consume-transform-produce application the java/txn-ctp harness (TxnCtpCompat) runs as its own JVM and
 * kills with SIGKILL: a read_committed group consumer on CTP_INPUT, every polled batch transformed
 * ({@link #transform}) to CTP_OUTPUT in one transaction together with the input offsets
 * (sendOffsetsToTransaction with the consumer's group metadata). Prints "sent N" once a transaction's
 * records are flushed (still open), "committed N" (records committed so far by this process) after each
 * commit, and "done" and exits 0 when its position reached the input's end offsets on every partition.
 * With CTP_STALL_AFTER=N it stalls for a minute with a flushed open transaction once N records are
 * committed: the harness kills it there, so the kill point does not depend on thread timing.
 */
public final class TxnCtpApp {
    static String transform(String v) { return "T(" + v + ")"; }

    public static void main(String[] args) throws Exception {
        String bootstrap = Checks.env("BOOTSTRAP", "127.0.0.1:9092");
        String input = System.getenv("CTP_INPUT"), output = System.getenv("CTP_OUTPUT");
        String group = System.getenv("CTP_GROUP"), txnId = System.getenv("CTP_TXN_ID");
        int partitions = Integer.parseInt(Checks.env("CTP_PARTITIONS", "3"));
        long pauseMs = Long.parseLong(Checks.env("CTP_PAUSE_MS", "20"));
        // the harness's kill point: once this many records are committed, stall with the next transaction open
        long stallAfter = Long.parseLong(Checks.env("CTP_STALL_AFTER", "-1"));
        long deadline = System.currentTimeMillis() + Long.parseLong(Checks.env("CTP_DEADLINE_MS", "120000"));

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 250);
        cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 6000);
        cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500);
        KafkaProducer<String, String> producer = TxnSupport.producer(bootstrap, txnId);
        try {
            producer.initTransactions();  // fences a killed predecessor and aborts its open transaction
        } catch (KafkaException e) {
            System.out.println("initTransactions failed: " + e);
            System.exit(4);
        }
        System.out.println("initialized");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
            List<TopicPartition> tps = TxnSupport.partitions(input, partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofSeconds(30));
            consumer.subscribe(List.of(input));
            long committed = 0;
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(200));
                if (!recs.isEmpty()) {
                    Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                    try {
                        producer.beginTransaction();
                        for (ConsumerRecord<String, String> r : recs) {
                            producer.send(new ProducerRecord<>(output, r.key(), transform(r.value())));
                            next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                        }
                        producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                        producer.flush();
                        System.out.println("sent " + recs.count());
                        System.out.flush();
                        Thread.sleep(stallAfter >= 0 && committed >= stallAfter ? 60000 : pauseMs);
                        producer.commitTransaction();
                        committed += recs.count();
                        System.out.println("committed " + committed);
                        System.out.flush();
                    } catch (ProducerFencedException e) {
                        System.out.println("fenced: " + e);
                        System.exit(3);
                    } catch (KafkaException e) {
                        // abortable: drop the transaction, rewind to the group's committed offsets, go on
                        System.out.println("aborting after " + e);
                        producer.abortTransaction();
                        var c = consumer.committed(consumer.assignment(), Duration.ofSeconds(30));
                        for (TopicPartition tp : consumer.assignment()) {
                            OffsetAndMetadata om = c.get(tp);
                            if (om != null) consumer.seek(tp, om.offset());
                            else consumer.seekToBeginning(List.of(tp));
                        }
                    }
                }
                var assigned = consumer.assignment();
                boolean done = assigned.size() == partitions;
                for (TopicPartition tp : assigned) done &= consumer.position(tp) >= ends.get(tp);
                if (done) {
                    System.out.println("done " + committed);
                    System.out.flush();
                    producer.close(Duration.ofSeconds(10));
                    consumer.close(Duration.ofSeconds(10));
                    System.exit(0);
                }
            }
            System.out.println("deadline reached after " + committed + " committed records");
            System.exit(2);
        }
    }
}
