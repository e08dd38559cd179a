package zonegate.javapeer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Apache Kafka's Java client driven from the tests: one command per run, results as JSON
 * lines on stdout (see Json), so a Python test can compare them field by field.
 *
 * <pre>
 * produce BOOTSTRAP TOPIC COUNT PARTITIONS [key=value ...]
 *     idempotent producer (acks=all, enable.idempotence=true: Kafka 4's defaults, stated),
 *     record i = key "k-i", value "v-i" to partition i % PARTITIONS; one "ack" line each.
 * consume BOOTSTRAP TOPIC GROUP PROTOCOL MAX TIMEOUT_MS [key=value ...]
 *     a group member (group.protocol=classic|consumer) that handles at most MAX records,
 *     commits exactly the offsets after the ones it handled, and prints them.
 * admin BOOTSTRAP OP ...
 *     OP: create:TOPIC:PARTITIONS[:k=v,...]  describe:TOPIC  delete:TOPIC  list  cluster
 *         describe-group:GROUP, and AdminOps' ops; each prints one line, with the error's class, code and
 *         message when the call fails, so callers compare what Kafka's client raised.
 * </pre>
 */
public final class ClientDriver {
    private ClientDriver() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            usage();
        }
        switch (args[0]) {
            case "produce" -> produce(args);
            case "consume" -> consume(args);
            case "admin" -> admin(args[1], Arrays.copyOfRange(args, 2, args.length));
            default -> usage();
        }
    }

    private static void usage() {
        System.err.println("usage: produce|consume|admin BOOTSTRAP ... (see ClientDriver's javadoc)");
        System.exit(2);
    }

    /** key=value arguments after the fixed ones, layered over a client's settings. */
    private static void extra(Properties props, String[] args, int from) {
        for (int i = from; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
    }

    private static void produce(String[] args) throws Exception {
        String topic = args[2];
        int count = Integer.parseInt(args[3]);
        int partitions = Integer.parseInt(args[4]);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        extra(props, args, 5);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>(count);
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, i % partitions, "k-" + i, "v-" + i)));
            }
            producer.flush();
            for (int i = 0; i < count; i++) {
                RecordMetadata md = sent.get(i).get(60, TimeUnit.SECONDS);
                Json.print("event", "ack", "i", i, "p", md.partition(), "o", md.offset());
            }
        }
        Json.print("event", "produced", "count", count);
    }

    private static void consume(String[] args) {
        String topic = args[2];
        int max = Integer.parseInt(args[5]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[6]);
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[3]);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, args[4]);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        extra(props, args, 7);
        Map<TopicPartition, OffsetAndMetadata> handled = new HashMap<>();
        int got = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            while (got < max && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    if (got >= max) {
                        break; // not handled, so not committed: the next member gets it
                    }
                    Json.print("event", "record", "p", r.partition(), "o", r.offset(), "k", r.key(), "v", r.value());
                    handled.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    got++;
                }
            }
            consumer.commitSync(handled, Duration.ofSeconds(30));
            Map<String, Object> committed = new TreeMap<>();
            Set<TopicPartition> assigned = consumer.assignment();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e
                    : consumer.committed(assigned, Duration.ofSeconds(30)).entrySet()) {
                committed.put(String.valueOf(e.getKey().partition()), e.getValue() == null ? null : e.getValue().offset());
            }
            List<Integer> parts = new ArrayList<>();
            for (TopicPartition tp : assigned) {
                parts.add(tp.partition());
            }
            parts.sort(null);
            Json.print("event", "committed", "count", got, "assigned", parts, "offsets", committed);
        }
    }

    private static void admin(String bootstrap, String[] ops) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(props)) {
            for (String op : ops) {
                String[] f = op.split(":", 4);
                try {
                    Json.print(runOp(admin, f).toArray());
                } catch (ExecutionException e) {
                    Throwable cause = e.getCause();
                    Json.print("op", f[0], "arg", f.length > 1 ? f[1] : null,
                            "error", cause.getClass().getSimpleName(),
                            "code", (int) Errors.forException(cause).code(),
                            "message", cause.getMessage());
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
    }

    /** One admin call; returns the keys and values of its output line. */
    private static List<Object> runOp(Admin admin, String[] f) throws ExecutionException, InterruptedException {
        List<Object> out = new ArrayList<>(List.of("op", f[0], "arg", f.length > 1 ? f[1] : ""));
        switch (f[0]) {
            case "create" -> {
                NewTopic t = new NewTopic(f[1], Optional.of(Integer.parseInt(f[2])), Optional.empty());
                if (f.length > 3) {
                    Map<String, String> configs = new HashMap<>();
                    for (String kv : f[3].split(",")) {
                        String[] p = kv.split("=", 2);
                        configs.put(p[0], p[1]);
                    }
                    t.configs(configs);
                }
                admin.createTopics(List.of(t)).all().get();
                out.addAll(List.of("ok", true));
            }
            case "describe" -> {
                TopicDescription d = admin.describeTopics(List.of(f[1])).allTopicNames().get().get(f[1]);
                List<Object> parts = new ArrayList<>();
                for (TopicPartitionInfo p : d.partitions()) {
                    List<Object> replicas = new ArrayList<>();
                    for (Node n : p.replicas()) {
                        replicas.add(n.id());
                    }
                    parts.add(Json.obj("p", p.partition(), "leader", p.leader() == null ? null : p.leader().id(),
                            "replicas", replicas));
                }
                out.addAll(List.of("ok", true, "internal", d.isInternal(), "partitions", parts,
                        "topic_id", String.valueOf(d.topicId())));
            }
            case "delete" -> {
                admin.deleteTopics(List.of(f[1])).all().get();
                out.addAll(List.of("ok", true));
            }
            case "list" -> out.addAll(List.of("ok", true, "topics", new TreeSet<>(admin.listTopics().names().get())));
            case "cluster" -> {
                DescribeClusterResult c = admin.describeCluster();
                List<Object> nodes = new ArrayList<>();
                for (Node n : c.nodes().get()) {
                    nodes.add(Json.obj("id", n.id(), "host", n.host(), "port", n.port(), "rack", n.rack()));
                }
                Node controller = c.controller().get();
                out.addAll(List.of("ok", true, "cluster_id", c.clusterId().get(), "nodes", nodes,
                        "controller", controller == null ? -1 : controller.id()));
            }
            case "describe-group" -> {
                ConsumerGroupDescription g = admin.describeConsumerGroups(List.of(f[1])).all().get().get(f[1]);
                out.addAll(List.of("ok", true, "type", g.type().toString(), "state", g.groupState().toString(),
                        "members", g.members().size()));
            }
            default -> {
                if (!AdminOps.run(admin, String.join(":", f), out)) {
                    throw new IllegalArgumentException("unknown admin op " + f[0]);
                }
            }
        }
        return out;
    }
}
