package io.rdma4j.testsupport.kafka;

import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.stream.IntStream;

/**
 * The records the Kafka throughput benchmarks read (on the host, {@code it/bench-kafka}; over rxe0, {@code it/lab-kafka}):
 * keys, 1–3 headers, values ~80 % around 1 KiB, ~15 % of 1 B–64 KiB, ~5 % empty, JSON-like so that they compress
 * as event payloads do; and one timed read of a whole topic as an application would do it.
 */
public final class MixedWorkload {

    private MixedWorkload() {
    }

    /** One read of a whole topic: bytes of keys and values, and how long it took. */
    public record Read(long bytes, long nanos) {
        public double mbPerSec() {
            return bytes / 1e6 / (nanos / 1e9);
        }
    }

    /**
     * Produces {@code records} mixed records with {@code codec} ("none", "lz4", ...), spread by Kafka's partitioner;
     * returns the bytes of keys and values. {@code more} adds producer properties (timeouts on a slow guest).
     */
    public static long produce(String bootstrap, String topic, String codec, int records, Map<String, Object> more) {
        SplittableRandom random = new SplittableRandom(42);
        byte[] corpus = corpus(random, 128 * 1024);
        byte[][] headerValues = {"application/json".getBytes(StandardCharsets.UTF_8), "checkout-service".getBytes(StandardCharsets.UTF_8)};
        long bytes = 0;
        java.util.concurrent.atomic.AtomicInteger failed = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicReference<Exception> firstFailure = new java.util.concurrent.atomic.AtomicReference<>();
        Map<String, Object> props = new HashMap<>(Map.of("bootstrap.servers", bootstrap, "linger.ms", "10",
                "batch.size", "131072", "compression.type", codec,
                "key.serializer", ByteArraySerializer.class, "value.serializer", ByteArraySerializer.class));
        props.putAll(more);
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props)) {
            for (int i = 0; i < records; i++) {
                byte[] key = ("order-" + random.nextInt(100_000)).getBytes(StandardCharsets.UTF_8);
                int size = valueSize(random);
                int from = random.nextInt(corpus.length - size + 1);
                byte[] value = Arrays.copyOfRange(corpus, from, from + size);
                RecordHeaders headers = new RecordHeaders();
                byte[] trace = new byte[8];
                random.nextBytes(trace);
                headers.add(new RecordHeader("trace-id", HexFormat.of().formatHex(trace).getBytes(StandardCharsets.UTF_8)));
                int extra = random.nextInt(3);
                if (extra >= 1) {
                    headers.add(new RecordHeader("content-type", headerValues[0]));
                }
                if (extra == 2) {
                    headers.add(new RecordHeader("source", headerValues[1]));
                }
                p.send(new ProducerRecord<>(topic, null, key, value, headers), (meta, e) -> {
                    if (e != null) {
                        failed.incrementAndGet();
                        firstFailure.compareAndSet(null, e);
                    }
                });
                bytes += key.length + value.length;
            }
            p.flush();
        }
        if (failed.get() > 0) {
            // A reader would wait for records that never came: say so now, with the producer's reason.
            throw new IllegalStateException(failed.get() + " of " + records + " records were not written to " + topic
                    + " (the broker too slow for the producer's delivery timeout?)", firstFailure.get());
        }
        return bytes;
    }

    /**
     * Reads the {@code partitions} partitions of {@code topic} from the beginning until {@code records} records came,
     * summing the sizes of keys and values (deserialised to byte arrays), as a raw-throughput application does.
     */
    public static Read readAll(Consumer<byte[], byte[]> c, String topic, int partitions, int records, Duration timeout) {
        List<TopicPartition> tps = IntStream.range(0, partitions).mapToObj(i -> new TopicPartition(topic, i)).toList();
        c.assign(tps);
        c.seekToBeginning(tps);
        tps.forEach(c::position);
        long bytes = 0;
        int n = 0;
        long t0 = System.nanoTime();
        long deadline = t0 + timeout.toNanos();
        while (n < records) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("read " + n + " of " + records + " records of " + topic + " within " + timeout);
            }
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                bytes += (r.key() == null ? 0 : r.key().length) + (r.value() == null ? 0 : r.value().length);
                n++;
            }
        }
        return new Read(bytes, System.nanoTime() - t0);
    }

    /** ~5 % empty, ~15 % uniform in 1 B–64 KiB, the rest around 1 KiB (512–1536 B). */
    private static int valueSize(SplittableRandom random) {
        double r = random.nextDouble();
        if (r < 0.05) {
            return 0;
        }
        if (r < 0.20) {
            return 1 + random.nextInt(64 * 1024);
        }
        return (int) Math.clamp(1024 + random.nextGaussian() * 160, 512, 1536);
    }

    /** JSON-like text with random ids and amounts: compresses about as event payloads do, unlike random bytes. */
    private static byte[] corpus(SplittableRandom random, int size) {
        String[] events = {"view", "click", "add-to-cart", "checkout", "refund"};
        StringBuilder sb = new StringBuilder(size + 256);
        while (sb.length() < size) {
            sb.append("{\"id\":").append(random.nextLong(1L << 40)).append(",\"user\":\"u").append(random.nextInt(1_000_000))
                    .append("\",\"event\":\"").append(events[random.nextInt(events.length)]).append("\",\"amount\":")
                    .append(random.nextInt(100_000) / 100.0).append(",\"ts\":").append(1_700_000_000_000L + random.nextInt(1 << 30))
                    .append("}\n");
        }
        return sb.substring(0, size).getBytes(StandardCharsets.US_ASCII);
    }
}
