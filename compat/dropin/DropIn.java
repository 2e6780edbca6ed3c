// The stock Java client against one listener of a broker started as a compose service would be:
// describes the cluster (the endpoint the broker advertises to this listener), produces one record
// and reads it back, all through `bootstrap`. Prints "nodes=HOST:PORT" and "roundtrip=ok".
//
//   java -cp 'libs/*' compat/dropin/DropIn.java BOOTSTRAP TOPIC
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class DropIn {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "10000");
        p.put("default.api.timeout.ms", "20000");
        try (Admin admin = Admin.create(p)) {
            String nodes = admin.describeCluster().nodes().get().stream()
                    .map(n -> n.host() + ":" + n.port())
                    .collect(Collectors.joining(","));
            System.out.println("nodes=" + nodes);
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
        Properties pp = new Properties();
        pp.putAll(p);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("max.block.ms", "20000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            producer.send(new ProducerRecord<>(topic, "k", "via " + bootstrap)).get();
        }
        Properties cp = new Properties();
        cp.putAll(p);
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 20000;
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                if (!records.isEmpty()) {
                    String v = records.iterator().next().value();
                    if (!v.equals("via " + bootstrap)) {
                        throw new IllegalStateException("read back " + v);
                    }
                    System.out.println("roundtrip=ok");
                    return;
                }
            }
            throw new IllegalStateException("record not read back within 20 s");
        }
    }
}
