package io.rdma4j.spark;

import org.apache.spark.SparkConf;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/** {@link RdmaShufflePlugin}'s metrics as executors report them through Spark's CSV sink. */
final class PluginCsvMetrics {

    private static final String SOURCE = "plugin." + RdmaShufflePlugin.class.getName() + ".";

    private PluginCsvMetrics() {
    }

    /** The settings that enable the plugin and a CSV sink on executors, reporting into {@code dir} every second. */
    static Map<String, String> settings(Path dir) {
        return Map.of("spark.plugins", RdmaShufflePlugin.class.getName(),
                "spark.metrics.conf.executor.sink.csv.class", "org.apache.spark.metrics.sink.CsvSink",
                "spark.metrics.conf.executor.sink.csv.period", "1",
                "spark.metrics.conf.executor.sink.csv.unit", "seconds",
                "spark.metrics.conf.executor.sink.csv.directory", dir.toString());
    }

    static SparkConf enable(SparkConf conf, Path dir) {
        settings(dir).forEach(conf::set);
        return conf;
    }

    /** The last value of each plugin metric by executor id, from the files {@code <app>.<executor>.<source>.<metric>.csv}. */
    static Map<String, Map<String, Long>> read(Path dir) throws IOException {
        Map<String, Map<String, Long>> byExecutor = new HashMap<>();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path file : files.toList()) {
                String name = file.getFileName().toString();
                int source = name.indexOf(SOURCE);
                if (source < 0 || !name.endsWith(".csv")) {
                    continue;
                }
                String prefix = name.substring(0, source - 1);
                String executor = prefix.substring(prefix.lastIndexOf('.') + 1);
                String metric = name.substring(source + SOURCE.length(), name.length() - ".csv".length());
                List<String> lines = Files.readAllLines(file);
                if (lines.size() < 2) {
                    continue; // the header only, nothing reported yet
                }
                String value = lines.getLast().split(",")[1]; // the count of counters and timers, a gauge's value
                byExecutor.computeIfAbsent(executor, k -> new HashMap<>()).put(metric, (long) Double.parseDouble(value));
            }
        }
        return byExecutor;
    }

    /**
     * The metrics read from {@code dir} once {@code metric}, summed over executors, is positive (the CSV sink reports
     * every second), or as last read when 30 s passed without.
     */
    static Map<String, Map<String, Long>> awaitPositive(Path dir, String metric) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(30);
        Map<String, Map<String, Long>> metrics = Map.of();
        while (sum(metrics, metric) == 0 && System.nanoTime() < deadline) {
            Thread.sleep(500);
            metrics = read(dir);
        }
        return metrics;
    }

    /** {@code metric} summed over the executors of {@code metrics}. */
    static long sum(Map<String, Map<String, Long>> metrics, String metric) {
        return metrics.values().stream().mapToLong(m -> m.getOrDefault(metric, 0L)).sum();
    }

    /** Deletes and recreates {@code dir}. */
    static Path emptyDirectory(Path dir) throws IOException {
        if (Files.exists(dir)) {
            try (Stream<Path> paths = Files.walk(dir)) {
                for (Path p : paths.sorted(java.util.Comparator.reverseOrder()).toList()) {
                    Files.delete(p);
                }
            }
        }
        return Files.createDirectories(dir);
    }
}
