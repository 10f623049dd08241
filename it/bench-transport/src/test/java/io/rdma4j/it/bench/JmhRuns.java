package io.rdma4j.it.bench;

import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.regex.Pattern;

/**
 * Runs JMH benchmarks in forked JVMs through its {@link Runner} API and turns their results into a table of
 * same-run ratios. Short on purpose (one fork, a few one-second iterations): the machines are shared and noisy,
 * so only ratios from one run mean anything.
 */
final class JmhRuns {

    static final int FORKS = 1;
    /**
     * Enough for C2 to be done with the transport on 2 cores; with 2 it still compiled in the first measured seconds.
     * {@code -Dbench.warmups=1 -Dbench.measurements=1} checks a set-up quickly (a JDK carried to another machine).
     */
    static final int WARMUP_ITERATIONS = Integer.getInteger("bench.warmups", 5);
    static final int MEASUREMENT_ITERATIONS = Integer.getInteger("bench.measurements", 5);
    static final TimeValue ITERATION = TimeValue.seconds(1);

    private final Collection<RunResult> results;
    private final StringBuilder table = new StringBuilder();

    private JmhRuns(Collection<RunResult> results, String title) {
        this.results = results;
        table.append(String.format(Locale.ROOT, "%s, loopback, %d cores, JDK %s, JMH %d fork, %d x %s warm-up, %d x %s measured%n",
                title, Runtime.getRuntime().availableProcessors(), System.getProperty("java.vm.version"),
                FORKS, WARMUP_ITERATIONS, ITERATION, MEASUREMENT_ITERATIONS, ITERATION));
    }

    /** Runs what {@code options} selects, with the shared forks, iterations and JVM flags. */
    static JmhRuns run(String title, ChainedOptionsBuilder options) throws Exception {
        return new JmhRuns(new Runner(options
                .forks(FORKS)
                .warmupIterations(WARMUP_ITERATIONS).warmupTime(ITERATION)
                .measurementIterations(MEASUREMENT_ITERATIONS).measurementTime(ITERATION)
                // JMH 1.37 still reads field offsets through sun.misc.Unsafe
                .jvmArgs("--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow", "-Xms1g", "-Xmx1g")
                .shouldFailOnError(true)
                .build()).run(), title);
    }

    /** Selects every benchmark method of {@code type}. */
    static String all(Class<?> type) {
        return Pattern.quote(type.getName() + ".");
    }

    /** Selects one benchmark method. */
    static String method(Class<?> type, String name) {
        return Pattern.quote(type.getName() + "." + name) + "$";
    }

    /** The result of benchmark {@code type.method} with these {@code name=value} parameters. */
    RunResult result(Class<?> type, String method, String... params) {
        List<RunResult> matching = new ArrayList<>();
        for (RunResult r : results) {
            if (!r.getParams().getBenchmark().equals(type.getName() + "." + method)) {
                continue;
            }
            boolean all = true;
            for (String param : params) {
                String[] kv = param.split("=", 2);
                all &= kv[1].equals(r.getParams().getParam(kv[0]));
            }
            if (all) {
                matching.add(r);
            }
        }
        if (matching.size() != 1) {
            throw new IllegalStateException(matching.size() + " results for " + type.getSimpleName() + "." + method + " "
                    + List.of(params));
        }
        return matching.getFirst();
    }

    static double percentile(RunResult r, double p) {
        return r.getPrimaryResult().getStatistics().getPercentile(p);
    }

    static double score(RunResult r) {
        return r.getPrimaryResult().getScore();
    }

    void heading(String ours, String baseline) {
        table.append(String.format(Locale.ROOT, "%-58s %12s %12s %10s%n", "", ours, baseline, ours + "/" + baseline));
    }

    void row(String metric, double ours, double baseline, String unit) {
        table.append(String.format(Locale.ROOT, "%-58s %12s %12s %9.2fx%n", metric,
                String.format(Locale.ROOT, "%.1f %s", ours, unit), String.format(Locale.ROOT, "%.1f %s", baseline, unit),
                ours / baseline));
    }

    /** Prints the table and writes it to {@code target/<file>}. */
    String report(String file) throws Exception {
        String text = table.toString();
        System.out.println(text);
        Path out = Path.of("target", file);
        Files.createDirectories(out.getParent());
        Files.writeString(out, text);
        return text;
    }
}
