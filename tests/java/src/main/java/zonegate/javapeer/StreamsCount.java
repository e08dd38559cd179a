package zonegate.javapeer;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * A Kafka Streams application with a stateful count, for the exactly-once tests: every
 * input record (key K, value a unique id) adds one to K's count in a persistent state
 * store (logged to a changelog topic) and writes (K, "ID:COUNT") to the output topic.
 * Read with read_committed, a run that kept exactly-once holds, per key, the counts
 * 1..n once each and every input id once; a lost state update repeats a count, a
 * duplicate repeats an id.
 *
 * <pre>
 * StreamsCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [key=value ...]
 * </pre>
 *
 * The extra key=value pairs are StreamsConfig settings (client.id for the zone tag,
 * commit.interval.ms, ...). It prints "state RUNNING" and the like on stdout as the
 * instance changes state, and runs until SIGTERM (a clean close) or SIGKILL.
 */
public final class StreamsCount {
    private StreamsCount() {}

    static final String STORE = "counts";

    static final class Count implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> context;
        private KeyValueStore<String, Long> store;

        @Override
        public void init(ProcessorContext<String, String> context) {
            this.context = context;
            this.store = context.getStateStore(STORE);
        }

        @Override
        public void process(Record<String, String> record) {
            Long before = store.get(record.key());
            long count = before == null ? 1 : before + 1;
            store.put(record.key(), count);
            context.forward(record.withValue(record.value() + ":" + count));
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println(
                    "usage: StreamsCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [k=v ...]");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        // Shorter than the defaults, so a restarted instance's transactions and group
        // membership settle within a test's minute: a new transaction times out after 10 s
        // (a kill -9 leaves one open), and a dead member leaves the group after 6 s.
        props.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 10000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        for (int i = 5; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.addStateStore(
                Stores.keyValueStoreBuilder(
                        Stores.persistentKeyValueStore(STORE), Serdes.String(), Serdes.Long()));
        builder.<String, String>stream(args[2]).process(Count::new, STORE).to(args[3]);

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener(
                (now, before) -> {
                    System.out.println("state " + now);
                    System.out.flush();
                });
        streams.setUncaughtExceptionHandler(
                e -> {
                    System.out.println("error " + e);
                    System.out.flush();
                    // A fatal error in the thread: start a new thread, as an operator's
                    // default would be to restart the instance.
                    return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                            .StreamThreadExceptionResponse.REPLACE_THREAD;
                });
        Runtime.getRuntime()
                .addShutdownHook(
                        new Thread(
                                () -> {
                                    streams.close(Duration.ofSeconds(20));
                                    closed.countDown();
                                }));
        streams.start();
        closed.await();
    }
}
