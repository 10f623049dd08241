package io.rdma4j.kafka.exporter;

import io.rdma4j.core.RdmaException;

import java.net.BindException;
import java.util.concurrent.CountDownLatch;

/**
 * The sidecar: {@code java --enable-native-access=ALL-UNNAMED -cp ... io.rdma4j.kafka.exporter.LogExporterMain
 * [exporter.properties] [key=value ...]}, e.g. {@code rdma.exporter.log.dirs=/var/lib/kafka/data
 * rdma.exporter.bootstrap.servers=127.0.0.1:9092 rdma.exporter.listen.address=127.0.0.1:9299}.
 * Runs until killed. What it cannot start with (an unknown or malformed argument, a key missing, a port in use, ACLs
 * it cannot check) ends it with exit status 2 and one line on standard error saying what to change.
 */
public final class LogExporterMain {

    private LogExporterMain() {
    }

    public static void main(String[] args) throws InterruptedException {
        if (args.length == 1 && (args[0].equals("--help") || args[0].equals("-h"))) {
            System.out.println("usage: java --enable-native-access=ALL-UNNAMED -jar rdma-kafka-transport-*-exporter.jar"
                    + " key=value... | file.properties");
            System.out.println(ExporterArguments.USAGE);
            return;
        }
        LogExporter exporter;
        try {
            exporter = start(args);
        } catch (NotStarted e) {
            // A setting to change, not a fault: one line that says which, no stack trace.
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

    /** Why the exporter did not start, in one line that says what to change. */
    static final class NotStarted extends Exception {
        NotStarted(String message) {
            super(message, null, false, false);
        }
    }

    /** Starts the exporter the command line describes. */
    static LogExporter start(String... args) throws NotStarted {
        ExporterConfig config;
        try {
            config = ExporterConfig.fromProperties(ExporterArguments.parse(args));
        } catch (IllegalArgumentException e) {
            throw new NotStarted(e.getMessage());
        }
        try {
            return LogExporter.start(config);
        } catch (IllegalArgumentException | IllegalStateException e) {
            throw new NotStarted(e.getMessage());
        } catch (RdmaException e) {
            if (causedBy(e, BindException.class)) {
                throw new NotStarted("cannot listen on " + config.listenAddress() + " (" + rootMessage(e) + "): another "
                        + "process, perhaps another exporter, has that port; stop it, or set " + ExporterConfig.LISTEN
                        + " to a free address (and the consumers' rdma.exporter.port or rdma.exporter.address to match)");
            }
            throw new NotStarted(e.getMessage());
        }
    }

    private static boolean causedBy(Throwable e, Class<? extends Throwable> type) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (type.isInstance(t)) {
                return true;
            }
        }
        return false;
    }

    private static String rootMessage(Throwable e) {
        Throwable t = e;
        while (t.getCause() != null) {
            t = t.getCause();
        }
        return t.getMessage();
    }
}
