package zonegate.javapeer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Apache Kafka's Java transactional producer driven from the tests (JSON lines on stdout,
 * see Json). Against a broker finalizing transaction.version 2 it speaks KIP-890 part 2:
 * Produce v12 and TxnOffsetCommit v5 add partitions implicitly, EndTxn v5 bumps the epoch.
 *
 * <pre>
 * txn BOOTSTRAP SOURCE SINK GROUP TRANSACTIONAL_ID
 *     reads SOURCE's partition 0 from the start as GROUP (read_committed), then in three
 *     transactions writes "out-VALUE" of records to SINK: 5 committed with the group's
 *     offsets sent to the transaction, 5 aborted (offsets sent too), 5 committed (the
 *     aborted ones again). Prints "commit"/"abort" lines with the producer's epoch, then
 *     the group's committed offset.
 * fence BOOTSTRAP TOPIC TRANSACTIONAL_ID
 *     a producer opens a transaction; a second one with the same id initializes; the
 *     first one's commit fails: prints the exception's class.
 * </pre>
 */
public final class TxnDriver {
    private TxnDriver() {}

    public static void main(String[] args) throws Exception {
        switch (args.length > 0 ? args[0] : "") {
            case "txn" -> txn(args[1], args[2], args[3], args[4], args[5]);
            case "fence" -> fence(args[1], args[2], args[3]);
            default -> {
                System.err.println("usage: txn|fence BOOTSTRAP ... (see TxnDriver's javadoc)");
                System.exit(2);
            }
        }
    }

    private static KafkaProducer<String, String> producer(String bootstrap, String tid) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    private static void txn(String bootstrap, String source, String sink, String group, String tid) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        TopicPartition in = new TopicPartition(source, 0);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c);
                KafkaProducer<String, String> producer = producer(bootstrap, tid)) {
            consumer.subscribe(List.of(source));
            List<ConsumerRecord<String, String>> records = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (records.size() < 10 && System.currentTimeMillis() < deadline) {
                consumer.poll(Duration.ofMillis(200)).forEach(records::add);
            }
            producer.initTransactions();
            int[][] steps = {{0, 5, 1}, {5, 10, 0}, {5, 10, 1}};
            for (int[] step : steps) {
                producer.beginTransaction();
                for (int i = step[0]; i < step[1]; i++) {
                    producer.send(new ProducerRecord<>(sink, 0, null, "out-" + records.get(i).value()));
                }
                long next = records.get(step[1] - 1).offset() + 1;
                producer.sendOffsetsToTransaction(
                        Map.of(in, new OffsetAndMetadata(next)), consumer.groupMetadata());
                boolean commit = step[2] == 1;
                if (commit) {
                    producer.commitTransaction();
                } else {
                    producer.flush();
                    producer.abortTransaction();
                }
                Json.print("op", commit ? "commit" : "abort", "offset", next);
            }
            OffsetAndMetadata committed = consumer.committed(java.util.Set.of(in)).get(in);
            Json.print("op", "committed", "offset", committed == null ? -1 : committed.offset());
        }
    }

    private static void fence(String bootstrap, String topic, String tid) {
        KafkaProducer<String, String> zombie = producer(bootstrap, tid);
        zombie.initTransactions();
        zombie.beginTransaction();
        zombie.send(new ProducerRecord<>(topic, 0, null, "zombie"));
        zombie.flush();
        try (KafkaProducer<String, String> fresh = producer(bootstrap, tid)) {
            fresh.initTransactions();
            fresh.beginTransaction();
            fresh.send(new ProducerRecord<>(topic, 0, null, "fresh"));
            fresh.commitTransaction();
            Json.print("op", "fresh", "ok", true);
        }
        try {
            zombie.send(new ProducerRecord<>(topic, 0, null, "late"));
            zombie.commitTransaction();
            Json.print("op", "zombie", "ok", true);
        } catch (Exception e) {
            Json.print("op", "zombie", "ok", false, "error", e.getClass().getSimpleName());
        } finally {
            zombie.close(Duration.ZERO);
        }
    }
}
