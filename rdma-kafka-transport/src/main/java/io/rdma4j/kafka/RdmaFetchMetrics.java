package io.rdma4j.kafka;

import org.apache.kafka.common.Metric;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.metrics.JmxReporter;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.KafkaMetricsContext;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.Sensor;
import org.apache.kafka.common.metrics.stats.Avg;
import org.apache.kafka.common.metrics.stats.CumulativeCount;
import org.apache.kafka.common.metrics.stats.CumulativeSum;
import org.apache.kafka.common.metrics.stats.Max;
import org.apache.kafka.common.metrics.stats.Meter;
import org.apache.kafka.common.metrics.stats.Value;
import org.apache.kafka.common.utils.Time;

import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The RDMA fetch metrics of one consumer, in Kafka's conventions: a {@link Metrics} registry of its own (the internal
 * KafkaConsumer's is not reachable through public API) with a JMX reporter under {@code kafka.consumer}, group
 * {@value #GROUP}, tagged with the consumer's client-id. {@link #merged} also adjusts the consumer's standard
 * {@code records-consumed}/{@code bytes-consumed} metrics so that they count what came by RDMA.
 */
final class RdmaFetchMetrics implements AutoCloseable {

    static final String GROUP = "consumer-rdma-fetch-metrics";
    static final String FETCH_MANAGER_GROUP = "consumer-fetch-manager-metrics";

    private final Metrics metrics;
    private final Map<String, String> tags;
    private final Sensor records;
    private final Sensor bytes;
    private final Sensor batches;
    private final Sensor crcFailures;
    private final Sensor retries;
    private final Sensor readLatency;
    private final Sensor lagMax;
    private final Sensor exporterReconnects;
    /** Partitions with a lag sensor, each the child of {@link #lagMax}; dropped once no longer assigned. */
    private final Set<TopicPartition> lagged = ConcurrentHashMap.newKeySet();
    /** Partitions with a records sensor, each the child of {@link #records}; dropped once no longer assigned. */
    private final Set<TopicPartition> counted = ConcurrentHashMap.newKeySet();
    /** The partitions RDMA serves now (not in a fallback period); read by other threads through metrics(). */
    private volatile Set<TopicPartition> served = Set.of();
    private final Map<FallbackReason, Sensor> fallbacks = new EnumMap<>(FallbackReason.class);
    /** Standard name -> the RDMA metric added to it. Only the client-level metrics: see the README. */
    private final Map<MetricName, MetricName> adjusted = new LinkedHashMap<>();
    /** One adjusted instance per standard metric, so that registries holding it (Micrometer) see it stay live. */
    private final Map<MetricName, Metric> adjustedCache = new ConcurrentHashMap<>();

    /** The client-id Kafka tags this consumer's metrics with (configured or generated). */
    static String clientIdOf(KafkaConsumer<?, ?> consumer) {
        for (MetricName name : consumer.metrics().keySet()) {
            String id = name.tags().get("client-id");
            if (id != null) {
                return id;
            }
        }
        return "";
    }

    RdmaFetchMetrics(String clientId) {
        this(clientId, true);
    }

    /** Counts for a fetcher that reports to no consumer's {@code metrics()} nor to JMX (the fetcher's own tests). */
    static RdmaFetchMetrics detached() {
        return new RdmaFetchMetrics("detached", false);
    }

    private RdmaFetchMetrics(String clientId, boolean jmx) {
        this.tags = Map.of("client-id", clientId);
        this.metrics = new Metrics(new MetricConfig().tags(tags), new ArrayList<>(), Time.SYSTEM); // addReporter adds to it
        // Every registry counts its metrics under the same name as the internal consumer's (kafka-metrics-count);
        // dropped before JMX sees it, so neither metrics() nor JMX shows a second one.
        metrics.removeMetric(metrics.metricName("count", "kafka-metrics-count"));
        if (jmx) {
            JmxReporter reporter = new JmxReporter();
            reporter.contextChange(new KafkaMetricsContext("kafka.consumer"));
            metrics.addReporter(reporter);
        }
        records = metrics.sensor("rdma-records");
        records.add(new Meter(name("records-rdma-rate", "The average number of records per second returned from RDMA reads"),
                name("records-rdma-total", "The total number of records returned from RDMA reads")));
        bytes = metrics.sensor("rdma-bytes");
        bytes.add(new Meter(name("bytes-rdma-rate", "The average number of record batch bytes per second read by RDMA"),
                name("bytes-rdma-total", "The total number of record batch bytes read by RDMA")));
        batches = metrics.sensor("rdma-batches");
        batches.add(name("batches-rdma-total", "The total number of record batches read by RDMA and verified by CRC"), new CumulativeSum());
        crcFailures = metrics.sensor("rdma-crc-failures");
        crcFailures.add(name("crc-failures-total", "The total number of RDMA-read batches that failed their CRC check (fetched through Kafka instead)"), new CumulativeCount());
        retries = metrics.sensor("rdma-retries");
        retries.add(name("retries-total", "The total number of RDMA fetches retried at once after a rejected READ or a closed connection"), new CumulativeCount());
        readLatency = metrics.sensor("rdma-read-latency");
        readLatency.add(name("read-latency-avg", "The average time taken for an RDMA READ in ms"), new Avg());
        readLatency.add(name("read-latency-max", "The max time taken for an RDMA READ in ms"), new Max());
        exporterReconnects = metrics.sensor("rdma-exporter-reconnects");
        exporterReconnects.add(name("exporter-reconnects-total", "The total number of times the consumer connected again to a"
                + " log exporter it had been connected to (its connection closed as idle, or broken)"), new CumulativeCount());
        lagMax = metrics.sensor("rdma-records-lag");
        lagMax.add(name("records-lag-max", "The maximum lag in records of any partition served by RDMA, at its last RDMA fetch"), new Max());
        for (FallbackReason r : FallbackReason.values()) {
            Sensor s = metrics.sensor("rdma-fallbacks." + r.tag());
            Map<String, String> t = new LinkedHashMap<>(tags);
            t.put("reason", r.tag());
            s.add(metrics.metricName("fallbacks-total", GROUP,
                    "The total number of times a partition fell back to the normal fetch path for this reason", t), new CumulativeCount());
            fallbacks.put(r, s);
        }
        adjusted.put(standard("records-consumed-total"), name("records-rdma-total", null));
        adjusted.put(standard("records-consumed-rate"), name("records-rdma-rate", null));
        adjusted.put(standard("bytes-consumed-total"), name("bytes-rdma-total", null));
        adjusted.put(standard("bytes-consumed-rate"), name("bytes-rdma-rate", null));
    }

    private MetricName name(String name, String description) {
        return metrics.metricName(name, GROUP, description == null ? "" : description, tags);
    }

    private MetricName standard(String name) {
        return new MetricName(name, FETCH_MANAGER_GROUP, "", tags);
    }

    /** {@code n} records of {@code tp} returned from an RDMA fetch: counted for the partition and the client. */
    void records(TopicPartition tp, int n) {
        Sensor s = metrics.getSensor(recordsSensor(tp));
        if (s == null) {
            s = metrics.sensor(recordsSensor(tp), records);
            s.add(metrics.metricName("records-rdma-total", GROUP, "The total number of records of the partition returned from RDMA reads",
                    partitionTags(tp)), new CumulativeSum());
            counted.add(tp);
        }
        s.record(n);
    }

    /** {@code count} batches of {@code sizeInBytes} in all, read by RDMA and verified, in one fetch. */
    void batches(int count, long sizeInBytes) {
        batches.record(count);
        bytes.record(sizeInBytes);
    }

    /**
     * The consumer's transport figures from now on, as gauges of the RDMA group: {@code transport-connections} (open),
     * {@code transport-buffered-bytes} (what exporters make the consumer hold), {@code transport-registered-bytes}
     * (its read buffers), {@code transport-message-buffer-bytes} (what the provider registered for messages) and
     * {@code transport-receive-credits-lent} (verbs: what the shared receive pool lends exporters).
     */
    void transport(io.rdma4j.core.metrics.TransportMetrics transport) {
        gauge("transport-connections", "The consumer's open connections to log exporters", transport::openConnections);
        gauge("transport-buffered-bytes", "Bytes exporters make the consumer hold: messages not yet received",
                transport::bufferedBytes);
        gauge("transport-registered-bytes", "Memory the consumer registered for its RDMA read buffers", transport::registeredBytes);
        gauge("transport-message-buffer-bytes", "Memory the provider registered for its own message buffers",
                transport::messageBufferBytes);
        gauge("transport-receive-credits-lent", "Receive credits the verbs shared pool lends exporters with more to send",
                transport::lentReceiveCredits);
    }

    private void gauge(String name, String description, java.util.function.LongSupplier value) {
        metrics.addMetric(name(name, description), (org.apache.kafka.common.metrics.Gauge<Long>) (config, now) -> value.getAsLong());
    }

    /** The client's cumulative figure {@code name} of this group ({@code records-rdma-total}, {@code retries-total}, ...). */
    long total(String name) {
        KafkaMetric m = metrics.metric(name(name, null));
        return m == null ? 0 : ((Number) m.metricValue()).longValue();
    }

    void exporterReconnected() {
        exporterReconnects.record();
    }

    void crcFailure() {
        crcFailures.record();
    }

    void retry() {
        retries.record();
    }

    void fallback(FallbackReason reason) {
        fallbacks.get(reason).record();
    }

    /** The lag of {@code tp} (high watermark minus the position) after an RDMA fetch, as Kafka's fetcher records it. */
    void lag(TopicPartition tp, long lag) {
        Sensor s = metrics.getSensor(lagSensor(tp));
        if (s == null) {
            s = metrics.sensor(lagSensor(tp), lagMax);
            s.add(metrics.metricName("records-lag", GROUP, "The latest lag in records of the partition, at its last RDMA fetch",
                    partitionTags(tp)), new Value());
            lagged.add(tp);
        }
        s.record(lag);
    }

    /** Drops the per-partition metrics of partitions no longer assigned, as Kafka's fetcher does. */
    void retainPartitions(Set<TopicPartition> assigned) {
        for (TopicPartition tp : counted) {
            if (!assigned.contains(tp)) {
                metrics.removeSensor(recordsSensor(tp));
                counted.remove(tp);
            }
        }
        for (TopicPartition tp : lagged) {
            if (!assigned.contains(tp)) {
                metrics.removeSensor(lagSensor(tp));
                adjustedCache.remove(new MetricName("records-lag", FETCH_MANAGER_GROUP, "", partitionTags(tp)));
                lagged.remove(tp);
            }
        }
    }

    void served(Set<TopicPartition> partitions) {
        served = Set.copyOf(partitions);
    }

    private MetricName rdmaLag(TopicPartition tp) {
        return new MetricName("records-lag", GROUP, "", partitionTags(tp));
    }

    private Map<String, String> partitionTags(TopicPartition tp) {
        Map<String, String> t = new LinkedHashMap<>(tags);
        t.put("topic", tp.topic());
        t.put("partition", String.valueOf(tp.partition()));
        return t;
    }

    private static String lagSensor(TopicPartition tp) {
        return "rdma-records-lag." + tp;
    }

    private static String recordsSensor(TopicPartition tp) {
        return "rdma-records." + tp;
    }

    void readNanos(long nanos) {
        readLatency.record(nanos / 1_000_000.0);
    }

    /**
     * The internal consumer's metrics with the standard client-level {@code records-consumed-*} and
     * {@code bytes-consumed-*} replaced by ones that add the RDMA counts, {@code records-lag} following the path
     * that serves each partition, and this consumer's RDMA metrics.
     */
    Map<MetricName, Metric> merged(Map<MetricName, ? extends Metric> kafka) {
        Map<MetricName, Metric> out = new LinkedHashMap<>(kafka);
        Map<MetricName, KafkaMetric> own = metrics.metrics();
        for (Map.Entry<MetricName, MetricName> e : adjusted.entrySet()) {
            Metric standard = kafka.get(e.getKey());
            KafkaMetric rdma = own.get(e.getValue());
            if (standard != null && rdma != null) {
                out.put(e.getKey(), adjustedCache.computeIfAbsent(e.getKey(), k -> new Sum(standard, rdma)));
            }
        }
        // records-lag of a partition: the RDMA one while RDMA serves it, else the internal consumer's. Both looked up
        // on each read (the registries' maps are live), since the partition moves between the paths.
        for (TopicPartition tp : lagged) {
            MetricName std = new MetricName("records-lag", FETCH_MANAGER_GROUP, "", partitionTags(tp));
            out.put(std, adjustedCache.computeIfAbsent(std, k -> new PartitionLag(k, kafka, own, rdmaLag(tp), tp, this)));
        }
        MetricName lagMaxStd = new MetricName("records-lag-max", FETCH_MANAGER_GROUP, "", tags);
        Metric kafkaLagMax = kafka.get(lagMaxStd);
        KafkaMetric rdmaLagMax = own.get(name("records-lag-max", null));
        if (kafkaLagMax != null && rdmaLagMax != null) {
            out.put(lagMaxStd, adjustedCache.computeIfAbsent(lagMaxStd, k -> new Larger(kafkaLagMax, rdmaLagMax)));
        }
        own.forEach((name, metric) -> {
            if (GROUP.equals(name.group())) {
                out.put(name, metric);
            }
        });
        return Collections.unmodifiableMap(out);
    }

    /** A standard metric whose value adds the RDMA metric's to the internal consumer's. */
    private record Sum(Metric standard, KafkaMetric rdma) implements Metric {
        @Override
        public MetricName metricName() {
            return standard.metricName();
        }

        @Override
        public Object metricValue() {
            return value(standard) + value(rdma);
        }
    }

    /** records-lag of one partition: the RDMA path's while RDMA serves it, else the internal consumer's (NaN if none). */
    private record PartitionLag(MetricName metricName, Map<MetricName, ? extends Metric> kafka, Map<MetricName, KafkaMetric> own,
                                MetricName rdma, TopicPartition tp, RdmaFetchMetrics owner) implements Metric {
        @Override
        public Object metricValue() {
            Metric m = owner.served.contains(tp) ? own.get(rdma) : kafka.get(metricName);
            if (m == null) {
                m = own.get(rdma);
            }
            return m == null ? Double.NaN : value(m);
        }
    }

    /** records-lag-max: the larger of the two paths' (each a windowed max; NaN where a path recorded none). */
    private record Larger(Metric standard, KafkaMetric rdma) implements Metric {
        @Override
        public MetricName metricName() {
            return standard.metricName();
        }

        @Override
        public Object metricValue() {
            double a = value(standard);
            double b = value(rdma);
            return Double.isNaN(a) ? b : Double.isNaN(b) ? a : Math.max(a, b);
        }
    }

    private static double value(Metric m) {
        return m.metricValue() instanceof Number n ? n.doubleValue() : Double.NaN;
    }

    @Override
    public void close() {
        metrics.close();
    }
}
