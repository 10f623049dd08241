package io.rdma4j.it.bench.spark;

import io.rdma4j.testsupport.spark.LocalSparkCluster;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import scala.Tuple2;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.ToLongFunction;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.sum;

/**
 * A mix of shuffle-heavy jobs on local-cluster[2,1,3072], with rdma4j's shuffle and with Spark's default sort
 * shuffle, each with {@code spark.shuffle.readHostLocalDisk} on (Spark's default: both executors share this host, so
 * each reads the other's map outputs from its files) and off (every block between the executors goes through the
 * shuffle's transport: rdma4j's, or Spark's Netty block transfer). After a warm-up app, each set-up runs as two apps
 * (the second pass in reverse order) of {@code rounds} rounds; prints per job the fastest run of each set-up, the
 * ratios rdma4j/Spark and the total, then how long those runs' reduce tasks waited for shuffle blocks
 * ({@link ShuffleReadTimes}). Every job's result is checked to be the same across the four set-ups. Arguments: shaded
 * jar and job jar (comma-separated), scale (default 1), provider (tcp), rounds per app (2).
 */
public final class SparkShuffleBench {

    private static final int RECORD_BYTES = 100; // 10-byte key + 90-byte value, as in TeraSort

    /** One job of the mix: returns a checksum of its result, the same for every shuffle. */
    private record Job(String name, ToLongFunction<SparkSession> run) { }

    private record Setup(String name, boolean rdma, boolean hostLocal, String provider) { }

    public static void main(String[] args) {
        String sparkJars = args[0];
        double scale = args.length > 1 ? Double.parseDouble(args[1]) : 1.0;
        String provider = args.length > 2 ? args[2] : "tcp";
        int rounds = args.length > 3 ? Integer.parseInt(args[3]) : 2;
        List<Job> jobs = jobs(scale);
        List<Setup> setups = List.of(new Setup("rdma4j(" + provider + ") host-local on", true, true, provider),
                new Setup("spark host-local on", false, true, null), new Setup("spark host-local off", false, false, null),
                new Setup("rdma4j(" + provider + ") host-local off", true, false, provider));
        Map<Setup, Fastest[]> best = new LinkedHashMap<>();
        long[] checksums = new long[jobs.size()];
        // A warm-up app first (its times are not counted): the driver JVM is shared by every app, so the first one
        // would pay its JIT warm-up (SQL planning and code generation run on the driver). Then two passes over the
        // set-ups, the second in reverse order, so that neither side always runs early or late.
        run(sparkJars, new Setup("warm-up (spark host-local on)", false, true, null), jobs, 1, checksums, true);
        List<Setup> order = new ArrayList<>(setups);
        order.addAll(setups.reversed());
        for (Setup setup : order) {
            Fastest[] runs = run(sparkJars, setup, jobs, rounds, checksums, false);
            best.merge(setup, runs, (a, b) -> {
                Fastest[] min = a.clone();
                for (int j = 0; j < min.length; j++) {
                    min[j] = b[j].millis() < a[j].millis() ? b[j] : a[j];
                }
                return min;
            });
        }
        Fastest[] rdmaOn = best.get(setups.get(0));
        Fastest[] sparkOn = best.get(setups.get(1));
        Fastest[] sparkOff = best.get(setups.get(2));
        Fastest[] rdmaOff = best.get(setups.get(3));
        System.out.printf("%nscale %.2f, fastest of %d runs per job (2 apps x %d rounds; ms), ratios rdma4j/spark%n", scale, 2 * rounds, rounds);
        System.out.printf("%-22s %12s %12s %8s | %12s %12s %8s%n", "job", "rdma4j on", "spark on", "ratio", "rdma4j off", "spark off", "ratio");
        for (int j = 0; j < jobs.size(); j++) {
            System.out.printf("%-22s %12d %12d %8.3f | %12d %12d %8.3f%n", jobs.get(j).name(), rdmaOn[j].millis(), sparkOn[j].millis(),
                    rdmaOn[j].millis() / (double) sparkOn[j].millis(), rdmaOff[j].millis(), sparkOff[j].millis(),
                    rdmaOff[j].millis() / (double) sparkOff[j].millis());
        }
        long a = total(rdmaOn, Fastest::millis);
        long b = total(sparkOn, Fastest::millis);
        long c = total(rdmaOff, Fastest::millis);
        long d = total(sparkOff, Fastest::millis);
        System.out.printf("%-22s %12d %12d %8.3f | %12d %12d %8.3f%n", "total", a, b, a / (double) b, c, d, c / (double) d);
        // How much the shuffle read could weigh: with one core per executor, a job's reduce tasks wait for blocks on
        // two cores at once, so at most about half their summed wait shows in the job's time.
        System.out.printf("%nin the same runs: reduce tasks' summed wait for shuffle blocks, ms (share of the job's summed task time),"
                + " and MB of shuffle read%n");
        System.out.printf("%-22s %18s %18s %18s %18s %8s%n", "job", "rdma4j on", "spark on", "rdma4j off", "spark off", "MB");
        for (int j = 0; j < jobs.size(); j++) {
            System.out.printf("%-22s %18s %18s %18s %18s %8d%n", jobs.get(j).name(), rdmaOn[j].waitShare(), sparkOn[j].waitShare(),
                    rdmaOff[j].waitShare(), sparkOff[j].waitShare(), sparkOff[j].shuffle().readBytes() >> 20);
        }
        System.out.printf("%-22s %18d %18d %18d %18d%n", "total", total(rdmaOn, f -> f.shuffle().fetchWaitMillis()),
                total(sparkOn, f -> f.shuffle().fetchWaitMillis()), total(rdmaOff, f -> f.shuffle().fetchWaitMillis()),
                total(sparkOff, f -> f.shuffle().fetchWaitMillis()));
    }

    /** A job's fastest run in one set-up: its time, and what its tasks reported about the shuffle read. */
    private record Fastest(long millis, ShuffleReadTimes.Totals shuffle) {

        String waitShare() {
            return String.format("%d (%.1f %%)", shuffle.fetchWaitMillis(), 100.0 * shuffle.fetchWaitMillis() / Math.max(1, shuffle.taskMillis()));
        }
    }

    private static long total(Fastest[] runs, ToLongFunction<Fastest> value) {
        return java.util.Arrays.stream(runs).mapToLong(value).sum();
    }

    /** Runs every job {@code rounds} times in one app of {@code setup}; the fastest run of each, checking its result. */
    private static Fastest[] run(String sparkJars, Setup setup, List<Job> jobs, int rounds, long[] checksums, boolean reference) {
        long[] millis = new long[jobs.size()];
        String[] fastestRun = new String[jobs.size()];
        java.util.Arrays.fill(millis, Long.MAX_VALUE);
        SparkConf conf = LocalSparkCluster.conf("bench-" + setup.name().replaceAll("[^a-z0-9]+", "-"), 2, 3072,
                        List.of(sparkJars.split(",")))
                .set("spark.shuffle.readHostLocalDisk", String.valueOf(setup.hostLocal()))
                .set("spark.sql.adaptive.enabled", "true")
                .set("spark.sql.shuffle.partitions", "32");
        if (setup.rdma()) {
            conf.set("spark.shuffle.manager", LocalSparkCluster.SHUFFLE_MANAGER)
                    .set("spark.shuffle.rdma.provider", setup.provider())
                    .set("spark.shuffle.rdma.fallback", "fail");
        }
        ShuffleReadTimes shuffleReads = new ShuffleReadTimes();
        try (JavaSparkContext sc = LocalSparkCluster.start(conf, Duration.ofMinutes(2))) {
            sc.sc().addSparkListener(shuffleReads);
            SparkSession spark = SparkSession.builder().sparkContext(sc.sc()).getOrCreate();
            for (int round = 0; round < rounds; round++) {
                for (int j = 0; j < jobs.size(); j++) {
                    String runName = round + "/" + j;
                    sc.setLocalProperty(ShuffleReadTimes.RUN, runName);
                    long start = System.nanoTime();
                    long checksum = jobs.get(j).run().applyAsLong(spark);
                    long ms = (System.nanoTime() - start) / 1_000_000;
                    if (ms < millis[j]) {
                        millis[j] = ms;
                        fastestRun[j] = runName;
                    }
                    if (reference && round == 0) {
                        checksums[j] = checksum;
                    } else if (checksum != checksums[j]) {
                        throw new IllegalStateException(jobs.get(j).name() + " on " + setup.name() + " gave " + checksum
                                + ", not " + checksums[j]);
                    }
                    System.out.printf("%-32s round %d %-22s %6d ms%n", setup.name(), round, jobs.get(j).name(), ms);
                }
            }
        }
        // Stopping the context delivered every task's metrics to the listener.
        Fastest[] fastest = new Fastest[jobs.size()];
        for (int j = 0; j < fastest.length; j++) {
            fastest[j] = new Fastest(millis[j], shuffleReads.of(fastestRun[j]));
        }
        return fastest;
    }

    private static List<Job> jobs(double scale) {
        int maps = 16;
        long words = (long) (4_000_000 * scale);
        long skewed = (long) (2_000_000 * scale);
        long sorted = (long) (2_000_000 * scale);
        long joined = (long) (1_000_000 * scale);
        long rows = (long) (4_000_000 * scale);
        long bigRecords = (long) (640_000 * scale); // 1 KiB each: 4 map outputs x 2 partitions of about 80 MiB
        List<Job> jobs = new ArrayList<>();
        jobs.add(new Job("reduceByKey", spark -> seeds(spark, maps)
                .flatMapToPair(s -> range(s, maps, words).mapToObj(i -> new Tuple2<>(i * 2654435761L % 200_000, 1L)).iterator())
                .reduceByKey(Long::sum, 16).map(t -> t._1() * 31 + t._2()).reduce(Long::sum)));
        jobs.add(new Job("groupByKey skewed", spark -> seeds(spark, maps)
                .flatMapToPair(s -> range(s, maps, skewed).mapToObj(i -> new Tuple2<>(i % 10 < 3 ? 0L : i % 100_000, "v" + i)).iterator())
                .groupByKey(16).map(t -> t._1() * 31 + size(t._2())).reduce(Long::sum)));
        jobs.add(new Job("sortByKey", spark -> {
            // The range boundaries come from a sample seeded by the RDD's id, which differs between rounds: the checksum
            // is order-free, and the order is checked on its own (within each partition, and across them).
            List<Tuple2<Integer, String[]>> parts = seeds(spark, maps).flatMapToPair(s -> records(s, sorted / maps))
                    .sortByKey(true, 16)
                    .mapPartitionsWithIndex((index, it) -> {
                        long sum = 0;
                        String first = null;
                        String last = null;
                        while (it.hasNext()) {
                            Tuple2<String, byte[]> t = it.next();
                            if (last != null && t._1().compareTo(last) < 0) {
                                throw new IllegalStateException("partition " + index + " out of order at " + t._1());
                            }
                            first = first == null ? t._1() : first;
                            last = t._1();
                            sum += t._1().hashCode() * 31L + t._2()[0];
                        }
                        return List.of(new Tuple2<>(index, new String[] {first, last, Long.toString(sum)})).iterator();
                    }, true).collect();
            long checksum = 0;
            String previousLast = null;
            for (Tuple2<Integer, String[]> p : parts.stream().sorted(java.util.Comparator.comparing(Tuple2::_1)).toList()) {
                if (p._2()[0] != null) {
                    if (previousLast != null && p._2()[0].compareTo(previousLast) < 0) {
                        throw new IllegalStateException("partition " + p._1() + " starts before the previous one ends");
                    }
                    previousLast = p._2()[1];
                }
                checksum += Long.parseLong(p._2()[2]);
            }
            return checksum;
        }));
        jobs.add(new Job("join", spark -> {
            JavaPairRDD<Long, Long> left = seeds(spark, maps).flatMapToPair(s -> range(s, maps, joined)
                    .mapToObj(i -> new Tuple2<>(i % (joined / 2), i)).iterator());
            JavaPairRDD<Long, String> right = seeds(spark, maps).flatMapToPair(s -> range(s, maps, joined / 2)
                    .mapToObj(i -> new Tuple2<>(i, "r" + i)).iterator());
            return left.join(right, 16).map(t -> t._1() + t._2()._1() + t._2()._2().length()).reduce(Long::sum);
        }));
        jobs.add(new Job("SQL aggregate (AQE)", spark -> {
            List<Row> out = spark.range(0, rows, 1, maps).selectExpr("id % 100000 as k", "id as v")
                    .repartition(32, col("k")).groupBy("k").agg(sum("v").as("s"), count("v").as("c"))
                    .selectExpr("sum(k * 7 + s % 1000003 + c) as x").collectAsList();
            return out.getFirst().getLong(0);
        }));
        jobs.add(new Job("blocks over 64 MiB", spark -> seeds(spark, 4)
                .flatMapToPair(s -> {
                    SplittableRandom random = new SplittableRandom(s);
                    return range(s, 4, bigRecords).mapToObj(i -> {
                        byte[] value = new byte[1024];
                        random.nextBytes(value);
                        return new Tuple2<>(i, value);
                    }).iterator();
                })
                .partitionBy(new org.apache.spark.HashPartitioner(2))
                .mapPartitions(it -> {
                    long sum = 0;
                    while (it.hasNext()) {
                        Tuple2<Long, byte[]> t = it.next();
                        sum += t._1() * 31 + t._2()[1023];
                    }
                    return List.of(sum).iterator();
                }).reduce(Long::sum)));
        return jobs;
    }

    private static org.apache.spark.api.java.JavaRDD<Integer> seeds(SparkSession spark, int slices) {
        return JavaSparkContext.fromSparkContext(spark.sparkContext())
                .parallelize(IntStream.range(0, slices).boxed().collect(Collectors.toList()), slices);
    }

    /** Task {@code slice}'s share of {@code 0..total}. */
    private static java.util.stream.LongStream range(int slice, int slices, long total) {
        return java.util.stream.LongStream.range(total * slice / slices, total * (slice + 1) / slices);
    }

    private static long size(Iterable<String> values) {
        long n = 0;
        for (String ignored : values) {
            n++;
        }
        return n;
    }

    private static Iterator<Tuple2<String, byte[]>> records(int seed, long count) {
        SplittableRandom random = new SplittableRandom(seed);
        return new Iterator<>() {
            long left = count;

            @Override
            public boolean hasNext() {
                return left > 0;
            }

            @Override
            public Tuple2<String, byte[]> next() {
                left--;
                char[] key = new char[10];
                for (int i = 0; i < key.length; i++) {
                    key[i] = (char) ('A' + random.nextInt(26));
                }
                byte[] value = new byte[RECORD_BYTES - key.length];
                random.nextBytes(value);
                return new Tuple2<>(new String(key), value);
            }
        };
    }
}
