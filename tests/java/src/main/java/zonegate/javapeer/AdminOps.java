package zonegate.javapeer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The admin calls of the differential test (tests/e2e/test_differential.py), beside
 * ClientDriver's: each returns the fields of its output line, compared field by field
 * with what a real Apache Kafka broker answers. Arguments are separated by ':'.
 *
 * <pre>
 * create-rf:TOPIC:PARTITIONS:RF          a topic with an explicit replication factor
 * create-validate:TOPIC:PARTITIONS[:k=v,...]   CreateTopics with validateOnly
 * configs:TOPIC                          DescribeConfigs of a topic with synonyms: name -> value,
 *                                        source, read-only, sensitive, type, synonyms
 * incr-alter:TOPIC:OP/k[=v],...          IncrementalAlterConfigs (OP: SET DELETE APPEND SUBTRACT)
 * partitions:TOPIC:COUNT                 CreatePartitions up to COUNT
 * offsets:TOPIC:PARTITION:SPEC           ListOffsets (SPEC: earliest latest max-timestamp)
 * delete-records:TOPIC:PARTITION:OFFSET  DeleteRecords before OFFSET
 * commit:GROUP:TOPIC:PARTITION:OFFSET    AlterConsumerGroupOffsets (the group must be empty)
 * group-offsets:GROUP                    ListConsumerGroupOffsets
 * list-groups:PREFIX                     ListGroups, the groups whose id starts with PREFIX
 * delete-group:GROUP                     DeleteConsumerGroups
 * delete-offsets:GROUP:TOPIC:PARTITION   DeleteConsumerGroupOffsets
 * join:GROUP:TOPIC                       a classic consumer joins GROUP and stays, polling,
 *                                        until it has an assignment (and until leave)
 * leave:GROUP                            that consumer leaves the group
 * produce-ts:TOPIC:PARTITION:TS,...      records "v-i" with these timestamps (idempotent,
 *                                        acks=all) through a node the admin client knows
 * </pre>
 */
final class AdminOps {
    private AdminOps() {}

    /** The group members `join` started, by group: each polls on a thread of its own. */
    private static final Map<String, Member> MEMBERS = new HashMap<>();

    /** A classic-protocol consumer kept in its group until `leave`. */
    private static final class Member {
        final KafkaConsumer<String, String> consumer;
        final Thread thread;
        volatile boolean assigned;
        volatile boolean stop;

        Member(KafkaConsumer<String, String> consumer, String topic) {
            this.consumer = consumer;
            this.thread = new Thread(() -> {
                consumer.subscribe(List.of(topic));
                while (!stop) {
                    consumer.poll(Duration.ofMillis(100));
                    assigned = !consumer.assignment().isEmpty();
                }
                consumer.close(); // leaves the group
            });
            thread.setDaemon(true); // a script that never says leave still ends
        }
    }

    /** Adds the op's fields to `out`; false when the op is not one of these. */
    static boolean run(Admin admin, String op, List<Object> out) throws ExecutionException, InterruptedException {
        String[] f = op.split(":");
        switch (f[0]) {
            case "create-rf" -> {
                NewTopic t = new NewTopic(f[1], Integer.parseInt(f[2]), Short.parseShort(f[3]));
                admin.createTopics(List.of(t)).all().get();
                out.addAll(List.of("ok", true));
            }
            case "create-validate" -> {
                NewTopic t = new NewTopic(f[1], Optional.of(Integer.parseInt(f[2])), Optional.empty());
                if (f.length > 3) {
                    Map<String, String> configs = new HashMap<>();
                    for (String kv : f[3].split(",")) {
                        String[] p = kv.split("=", 2);
                        configs.put(p[0], p[1]);
                    }
                    t.configs(configs);
                }
                admin.createTopics(List.of(t), new CreateTopicsOptions().validateOnly(true)).all().get();
                out.addAll(List.of("ok", true));
            }
            case "configs" -> {
                ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, f[1]);
                Config c = admin.describeConfigs(List.of(r), new DescribeConfigsOptions().includeSynonyms(true))
                        .all().get().get(r);
                Map<String, Object> entries = new TreeMap<>();
                for (ConfigEntry e : c.entries()) {
                    List<Object> synonyms = new ArrayList<>();
                    for (ConfigEntry.ConfigSynonym syn : e.synonyms()) {
                        synonyms.add(List.of(syn.name(), String.valueOf(syn.value()), syn.source().toString()));
                    }
                    entries.put(e.name(), Json.obj("value", e.value(), "source", e.source().toString(),
                            "read_only", e.isReadOnly(), "sensitive", e.isSensitive(), "type", e.type().toString(),
                            "synonyms", synonyms));
                }
                out.addAll(List.of("ok", true, "configs", entries));
            }
            case "incr-alter" -> {
                List<AlterConfigOp> ops = new ArrayList<>();
                for (String item : f[2].split(",")) {
                    String[] opAndEntry = item.split("/", 2);
                    String[] kv = opAndEntry[1].split("=", 2);
                    ops.add(new AlterConfigOp(new ConfigEntry(kv[0], kv.length > 1 ? kv[1] : null),
                            AlterConfigOp.OpType.valueOf(opAndEntry[0])));
                }
                ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, f[1]);
                admin.incrementalAlterConfigs(Map.of(r, ops)).all().get();
                out.addAll(List.of("ok", true));
            }
            case "partitions" -> {
                admin.createPartitions(Map.of(f[1], NewPartitions.increaseTo(Integer.parseInt(f[2])))).all().get();
                out.addAll(List.of("ok", true));
            }
            case "offsets" -> {
                TopicPartition tp = new TopicPartition(f[1], Integer.parseInt(f[2]));
                OffsetSpec spec = switch (f[3]) {
                    case "earliest" -> OffsetSpec.earliest();
                    case "latest" -> OffsetSpec.latest();
                    case "max-timestamp" -> OffsetSpec.maxTimestamp();
                    default -> OffsetSpec.forTimestamp(Long.parseLong(f[3]));
                };
                ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get();
                out.addAll(List.of("ok", true, "offset", info.offset(), "timestamp", info.timestamp(),
                        "leader_epoch", info.leaderEpoch().orElse(-1)));
            }
            case "delete-records" -> {
                TopicPartition tp = new TopicPartition(f[1], Integer.parseInt(f[2]));
                long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(Long.parseLong(f[3]))))
                        .lowWatermarks().get(tp).get().lowWatermark();
                out.addAll(List.of("ok", true, "low_watermark", low));
            }
            case "commit" -> {
                TopicPartition tp = new TopicPartition(f[2], Integer.parseInt(f[3]));
                admin.alterConsumerGroupOffsets(f[1], Map.of(tp, new OffsetAndMetadata(Long.parseLong(f[4])))).all().get();
                out.addAll(List.of("ok", true));
            }
            case "group-offsets" -> {
                Map<String, Object> offsets = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e
                        : admin.listConsumerGroupOffsets(f[1]).partitionsToOffsetAndMetadata().get().entrySet()) {
                    offsets.put(e.getKey().toString(), e.getValue() == null ? null : e.getValue().offset());
                }
                out.addAll(List.of("ok", true, "offsets", offsets));
            }
            case "list-groups" -> {
                List<Object> groups = new ArrayList<>();
                List<GroupListing> listed = new ArrayList<>(admin.listGroups(new ListGroupsOptions()).all().get());
                listed.sort((a, b) -> a.groupId().compareTo(b.groupId()));
                for (GroupListing g : listed) {
                    if (g.groupId().startsWith(f[1])) {
                        groups.add(Json.obj("id", g.groupId(), "type", String.valueOf(g.type().orElse(null)),
                                "protocol", g.protocol(), "state", String.valueOf(g.groupState().orElse(null))));
                    }
                }
                out.addAll(List.of("ok", true, "groups", groups));
            }
            case "delete-group" -> {
                admin.deleteConsumerGroups(List.of(f[1])).all().get();
                out.addAll(List.of("ok", true));
            }
            case "delete-offsets" -> {
                TopicPartition tp = new TopicPartition(f[2], Integer.parseInt(f[3]));
                admin.deleteConsumerGroupOffsets(f[1], Set.of(tp)).all().get();
                out.addAll(List.of("ok", true));
            }
            case "join" -> {
                Node node = admin.describeCluster().nodes().get().iterator().next();
                Properties props = new Properties();
                props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, node.host() + ":" + node.port());
                props.put(ConsumerConfig.GROUP_ID_CONFIG, f[1]);
                props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
                props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
                props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
                Member m = new Member(new KafkaConsumer<>(props), f[2]);
                MEMBERS.put(f[1], m);
                m.thread.start();
                long deadline = System.currentTimeMillis() + 60_000;
                while (!m.assigned && System.currentTimeMillis() < deadline) {
                    Thread.sleep(50);
                }
                out.addAll(List.of("ok", m.assigned));
            }
            case "leave" -> {
                Member m = MEMBERS.remove(f[1]);
                m.stop = true;
                m.thread.join(60_000);
                out.addAll(List.of("ok", !m.thread.isAlive()));
            }
            case "produce-ts" -> {
                Node node = admin.describeCluster().nodes().get().iterator().next();
                Map<String, Object> props = new HashMap<>();
                props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, node.host() + ":" + node.port());
                props.put(ProducerConfig.ACKS_CONFIG, "all");
                props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                String[] stamps = f[3].split(",");
                try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
                    for (int i = 0; i < stamps.length; i++) {
                        producer.send(new ProducerRecord<>(f[1], Integer.parseInt(f[2]), Long.parseLong(stamps[i]),
                                null, "v-" + i)).get();
                    }
                }
                out.addAll(List.of("ok", true, "count", stamps.length));
            }
            default -> {
                return false;
            }
        }
        return true;
    }
}
