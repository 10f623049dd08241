package io.rdma4j.kafka.exporter;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Runs the {@link LogExporter} inside the broker JVM: {@code metric.reporters=io.rdma4j.kafka.exporter.BrokerExporterReporter}
 * plus {@code rdma.*} broker properties. A metrics reporter is the one plugin every broker loads with its whole
 * configuration; it reports no metrics. {@code log.dirs} and the Admin bootstrap (the inter-broker, else the first
 * non-controller listener) come from the broker's own configuration unless {@code rdma.exporter.*} sets them.
 *
 * <p>The configuration is checked at once (a setting it cannot run with fails the broker's start); the exporter itself
 * starts once the broker's listener accepts connections, so that its Admin client meets no refused connection (each
 * one a WARN line of Kafka's client). What fails then (its port in use, say) is logged at ERROR.
 *
 * <p>Only a node whose {@code process.roles} include {@code broker} exports (a controller has no partition logs).
 * In combined mode the broker and the controller each create their reporters from the same configuration, so
 * the exporter is shared per log directories in the JVM and closed when its last reporter closes.
 */
public final class BrokerExporterReporter implements MetricsReporter {

    private static final Logger LOG = LoggerFactory.getLogger(BrokerExporterReporter.class);
    private static final Map<String, Shared> RUNNING = new HashMap<>();

    private record Shared(Deferred exporter, int[] users) {
    }

    /** An exporter that starts once the broker listens; one closed before that never starts. */
    private static final class Deferred {
        private final Thread starter;
        private LogExporter exporter;
        private boolean closed;

        Deferred(ExporterConfig config) {
            starter = Thread.ofPlatform().daemon().name("rdma4j-log-exporter-start").unstarted(() -> start(config));
            starter.start();
        }

        private void start(ExporterConfig config) {
            String broker = config.bootstrapServers().split(",")[0].trim();
            try {
                BrokerListenerWait.await(broker);
            } catch (InterruptedException e) {
                return; // closed first
            }
            synchronized (this) {
                if (closed) {
                    return;
                }
                try {
                    exporter = LogExporter.startInBroker(config);
                    LOG.info("rdma4j log exporter started in the broker on {} via {}", exporter.address(), exporter.transport().selection());
                } catch (RuntimeException e) {
                    LOG.error("rdma4j log exporter not started: {}", e.getMessage());
                }
            }
        }

        synchronized LogExporter exporter() {
            return exporter;
        }

        void close() {
            starter.interrupt();
            LogExporter running;
            synchronized (this) {
                closed = true;
                running = exporter;
                exporter = null;
            }
            if (running != null) {
                running.close();
                LOG.info("rdma4j log exporter in the broker stopped");
            }
        }
    }

    private String key;

    /** The broker creates it from {@code metric.reporters}. */
    public BrokerExporterReporter() {
    }

    /** The exporter this JVM runs for {@code logDirs} (comma-separated as in {@code log.dirs}), or null (none, or not started yet). */
    public static LogExporter running(String logDirs) {
        synchronized (RUNNING) {
            Shared s = RUNNING.get(logDirs);
            return s == null ? null : s.exporter().exporter();
        }
    }

    @Override
    public void configure(Map<String, ?> configs) {
        String roles = string(configs, "process.roles", "");
        if (!Arrays.stream(roles.split(",")).map(r -> r.trim().toLowerCase(Locale.ROOT)).toList().contains("broker")) {
            LOG.info("rdma4j log exporter not started: process.roles={} has no broker role, so no partition logs", roles);
            return;
        }
        Map<String, Object> props = new HashMap<>();
        configs.forEach((k, v) -> {
            if (k.startsWith("rdma.") && v != null) {
                props.put(k, v);
            }
        });
        String logDirs = string(configs, "log.dirs", string(configs, "log.dir", ""));
        props.putIfAbsent(ExporterConfig.LOG_DIRS, logDirs);
        if (!props.containsKey(ExporterConfig.BOOTSTRAP)) {
            props.put(ExporterConfig.BOOTSTRAP, bootstrapFrom(configs));
        }
        // A broker that checks ACLs gets an exporter that checks them too, unless told otherwise; without an authorizer
        // of its own the exporter still asks the cluster (rdma.exporter.acls=auto).
        if (!string(configs, "authorizer.class.name", "").isEmpty()) {
            props.putIfAbsent(ExporterConfig.ACLS, "true");
        }
        if (props.containsKey(ExporterConfig.PORT_OFFSET)) {
            props.put(ExporterConfig.LISTEN, listenWithOffset(configs, String.valueOf(props.get(ExporterConfig.PORT_OFFSET)),
                    props.get(ExporterConfig.LISTEN)));
            props.remove(ExporterConfig.PORT_OFFSET);
        }
        ExporterConfig config = ExporterConfig.fromProperties(props);
        key = String.valueOf(props.get(ExporterConfig.LOG_DIRS));
        synchronized (RUNNING) {
            Shared s = RUNNING.get(key);
            if (s != null) {
                s.users()[0]++;
                return;
            }
            RUNNING.put(key, new Shared(new Deferred(config), new int[] {1}));
        }
    }

    /**
     * With {@code rdma.exporter.port.offset}: the exporter listens at the host of the broker's first advertised client
     * listener (or the host of {@code rdma.exporter.listen.address}, given without a port) on that listener's port plus
     * the offset, which is where consumers with the same offset look for it.
     */
    static String listenWithOffset(Map<String, ?> configs, String offset, Object listenHost) {
        String advertised = firstClientListener(configs, string(configs, "advertised.listeners", string(configs, "listeners", "")));
        InetSocketAddress broker = advertised == null ? null : ExporterConfig.parseAddress(advertised.startsWith(":")
                ? "127.0.0.1" + advertised : advertised);
        if (broker == null || broker.getPort() == 0) {
            throw new IllegalArgumentException("cannot tell the broker's advertised port from advertised.listeners/listeners ("
                    + advertised + ") for " + ExporterConfig.PORT_OFFSET + ": set " + ExporterConfig.LISTEN + "=host:port instead");
        }
        if (listenHost != null && listenHost.toString().contains(":")) {
            throw new IllegalArgumentException("set either " + ExporterConfig.PORT_OFFSET + " or a port in " + ExporterConfig.LISTEN
                    + " (then give it the host alone), not both; got " + ExporterConfig.LISTEN + "=" + listenHost);
        }
        String host = listenHost != null ? listenHost.toString().trim() : broker.getHostString();
        return host + ":" + ExporterConfig.exporterPort(broker.getPort(), offset);
    }

    /** host:port of the first listener in {@code listeners} that is not a controller listener, or null. */
    private static String firstClientListener(Map<String, ?> configs, String listeners) {
        List<String> controllers = Arrays.stream(string(configs, "controller.listener.names", "").split(","))
                .map(String::trim).filter(s -> !s.isEmpty()).toList();
        for (String listener : listeners.split(",")) {
            String l = listener.trim();
            int sep = l.indexOf("://");
            if (sep > 0 && !controllers.contains(l.substring(0, sep))) {
                return l.substring(sep + 3);
            }
        }
        return null;
    }

    /** host:port of the listener the Admin client uses; PLAINTEXT only unless rdma.exporter.admin.* configures security. */
    static String bootstrapFrom(Map<String, ?> configs) {
        List<String> controllers = Arrays.stream(string(configs, "controller.listener.names", "").split(","))
                .map(String::trim).filter(s -> !s.isEmpty()).toList();
        String preferred = string(configs, "inter.broker.listener.name", "");
        String chosen = null;
        for (String listener : string(configs, "listeners", "").split(",")) {
            String l = listener.trim();
            int sep = l.indexOf("://");
            if (sep <= 0) {
                continue;
            }
            String name = l.substring(0, sep);
            if (controllers.contains(name)) {
                continue;
            }
            if (chosen == null || name.equals(preferred)) {
                chosen = l.substring(sep + 3);
            }
        }
        if (chosen == null || chosen.endsWith(":0")) {
            throw new IllegalArgumentException("cannot tell the broker's address from listeners=" + string(configs, "listeners", "")
                    + ": set " + ExporterConfig.BOOTSTRAP + "=host:port of a broker listener");
        }
        return chosen.startsWith(":") ? "127.0.0.1" + chosen : chosen;
    }

    private static String string(Map<String, ?> configs, String key, String fallback) {
        Object v = configs.get(key);
        return v == null ? fallback : v.toString().trim();
    }

    @Override
    public void init(List<KafkaMetric> metrics) {
    }

    @Override
    public void metricChange(KafkaMetric metric) {
    }

    @Override
    public void metricRemoval(KafkaMetric metric) {
    }

    @Override
    public void close() {
        if (key == null) {
            return;
        }
        synchronized (RUNNING) {
            Shared s = RUNNING.get(key);
            if (s != null && --s.users()[0] == 0) {
                RUNNING.remove(key);
                s.exporter().close();
            }
        }
        key = null;
    }
}
