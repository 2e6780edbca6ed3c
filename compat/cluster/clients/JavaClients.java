// The Java client (kafka-clients) half of compat/cluster/clients.py, run in source-file mode
// (java -cp 'KAFKA_LIBS/*' JavaClients.java ...): an acks=all idempotent producer and a reader, speaking
// the line protocol the harness parses (the same as the librdkafka and franz-go programs):
//
//   produce BOOTSTRAP TOPIC COUNT RATE  ->  "A <id> <partition> <offset>" per acknowledged record,
//                                           "E <id> <error>" per failed one, then "DONE acked=N failed=N"
//   consume BOOTSTRAP TOPIC             ->  "R <partition> <offset> <id>" per record up to each partition's
//                                           high watermark at the start, then "DONE read=N"
//
// The value of record i is the decimal id i; RATE paces the producer (records per second).
import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class JavaClients {
    static final PrintWriter OUT = new PrintWriter(new BufferedWriter(
            new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16), false);

    public static void main(String[] args) throws Exception {
        if (args.length == 5 && args[0].equals("produce")) {
            produce(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
        } else if (args.length == 3 && args[0].equals("consume")) {
            consume(args[1], args[2]);
        } else {
            System.err.println("usage: produce BOOTSTRAP TOPIC COUNT RATE | consume BOOTSTRAP TOPIC");
            System.exit(2);
        }
        OUT.flush();
    }

    static void produce(String bootstrap, String topic, int count, int rate) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("linger.ms", "5");
        p.put("delivery.timeout.ms", "120000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        int[] acked = {0};
        int[] failed = {0};
        long start = System.nanoTime();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                if (i % 100 == 0) {
                    long due = start + (long) i * 1_000_000_000L / rate;
                    long wait = due - System.nanoTime();
                    if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                    synchronized (OUT) { OUT.flush(); }
                }
                final int id = i;
                producer.send(new ProducerRecord<>(topic, Integer.toString(id)), (md, err) -> {
                    synchronized (OUT) {
                        if (err != null) {
                            failed[0]++;
                            OUT.println("E " + id + " " + err);
                        } else {
                            acked[0]++;
                            OUT.println("A " + id + " " + md.partition() + " " + md.offset());
                        }
                    }
                });
            }
            producer.flush();
        }
        synchronized (OUT) { OUT.println("DONE acked=" + acked[0] + " failed=" + failed[0]); }
    }

    static void consume(String bootstrap, String topic) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        int read = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                tps.add(new TopicPartition(topic, info.partition()));
            }
            Map<TopicPartition, Long> want = new HashMap<>();
            consumer.endOffsets(tps, Duration.ofSeconds(30)).forEach((tp, end) -> { if (end > 0) want.put(tp, end); });
            consumer.assign(new ArrayList<>(want.keySet()));
            consumer.seekToBeginning(want.keySet());
            long deadline = System.nanoTime() + 120_000_000_000L;
            while (!want.isEmpty()) {
                if (System.nanoTime() > deadline) {
                    OUT.flush();
                    System.err.println("still waiting for " + want + " after 120 s");
                    System.exit(1);
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofSeconds(1))) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    Long end = want.get(tp);
                    if (end == null || r.offset() >= end) continue;
                    read++;
                    OUT.println("R " + r.partition() + " " + r.offset() + " " + r.value());
                    if (r.offset() + 1 >= end) want.remove(tp);
                }
            }
        }
        OUT.println("DONE read=" + read);
    }
}
