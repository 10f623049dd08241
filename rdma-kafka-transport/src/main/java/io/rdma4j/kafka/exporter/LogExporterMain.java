package io.rdma4j.kafka.exporter;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

/**
 * The sidecar: {@code java --enable-native-access=ALL-UNNAMED -cp ... io.rdma4j.kafka.exporter.LogExporterMain
 * [exporter.properties] [key=value ...]}, e.g. {@code rdma.exporter.log.dirs=/var/lib/kafka/data
 * rdma.exporter.bootstrap.servers=127.0.0.1:9092 rdma.exporter.listen.address=127.0.0.1:9299}.
 * Runs until killed. A configuration it cannot run with (a key missing or malformed, ACLs it cannot check) ends it
 * with exit status 2 and one line on standard error saying what to set.
 */
public final class LogExporterMain {

    private LogExporterMain() {
    }

    public static void main(String[] args) throws IOException, InterruptedException {
        Properties props = new Properties();
        for (String arg : args) {
            int eq = arg.indexOf('=');
            if (eq > 0) {
                props.setProperty(arg.substring(0, eq), arg.substring(eq + 1));
            } else {
                try (InputStream in = Files.newInputStream(Path.of(arg))) {
                    props.load(in);
                }
            }
        }
        LogExporter exporter;
        try {
            exporter = LogExporter.start(ExporterConfig.fromProperties(props));
        } catch (IllegalArgumentException | IllegalStateException e) {
            // A setting to change, not a fault: one line that says which.
            System.err.println("rdma4j log exporter not started: " + e.getMessage());
            System.exit(2);
            return;
        }
        System.out.println("rdma4j log exporter listening on " + exporter.address() + " via " + exporter.transport().selection());
        CountDownLatch stop = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            exporter.close();
            stop.countDown();
        }));
        stop.await();
    }
}
