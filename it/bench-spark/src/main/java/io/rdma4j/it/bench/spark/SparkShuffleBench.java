package io.rdma4j.it.bench.spark;

import io.rdma4j.it.spark.LocalSparkCluster;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import scala.Tuple2;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/**
 * Sorts generated records (same seed, same data) on local-cluster[2,1,mem] twice in one run: with
 * rdma4j's shuffle and with Spark's default sort shuffle, and prints job time, total fetch wait and
 * shuffle bytes of each, and the ratios. Arguments: shaded jar, GiB of records (default 1), provider.
 */
public final class SparkShuffleBench {

    private static final int RECORD_BYTES = 100; // 10-byte key + 90-byte value, as in TeraSort

    record Result(long millis, long fetchWaitMillis, long shuffleBytes, long checksum) { }

    public static void main(String[] args) throws Exception {
        String sparkJars = args[0]; // comma-separated: the shaded rdma4j jar and the job's own jar
        double gib = args.length > 1 ? Double.parseDouble(args[1]) : 1.0;
        String provider = args.length > 2 ? args[2] : "tcp";
        long records = (long) (gib * (1L << 30) / RECORD_BYTES);
        int rounds = args.length > 3 ? Integer.parseInt(args[3]) : 2;
        // Alternating order (rdma, spark, spark, rdma, ...) so that warm-up and a busy shared machine
        // do not favour one side; each side's best run is compared.
        List<Result> rdmaRuns = new ArrayList<>();
        List<Result> sparkRuns = new ArrayList<>();
        for (int round = 0; round < rounds; round++) {
            boolean rdmaFirst = round % 2 == 0;
            for (boolean rdma : new boolean[] {rdmaFirst, !rdmaFirst}) {
                Result r = run(sparkJars, records, rdma, provider);
                (rdma ? rdmaRuns : sparkRuns).add(r);
                System.out.printf("run %d %s: job %d ms, fetch wait %d ms, shuffle read %d MiB%n", round,
                        rdma ? "rdma4j(" + provider + ")" : "spark", r.millis(), r.fetchWaitMillis(), r.shuffleBytes() >> 20);
            }
        }
        long checksum = rdmaRuns.getFirst().checksum();
        for (Result r : rdmaRuns.size() > 0 ? concat(rdmaRuns, sparkRuns) : sparkRuns) {
            if (r.checksum() != checksum) {
                throw new IllegalStateException("runs sorted different data: " + rdmaRuns + " vs " + sparkRuns);
            }
        }
        Result rdma = best(rdmaRuns);
        Result spark = best(sparkRuns);
        System.out.printf("records=%d (%.2f GiB of records)%n", records, records * (double) RECORD_BYTES / (1L << 30));
        System.out.printf("best rdma4j (%s): job %d ms, fetch wait %d ms, shuffle read %d MiB%n", provider, rdma.millis(), rdma.fetchWaitMillis(), rdma.shuffleBytes() >> 20);
        System.out.printf("best spark default: job %d ms, fetch wait %d ms, shuffle read %d MiB%n", spark.millis(), spark.fetchWaitMillis(), spark.shuffleBytes() >> 20);
        System.out.printf("ratio rdma4j/spark: job %.3f, fetch wait %.3f%n", rdma.millis() / (double) spark.millis(),
                rdma.fetchWaitMillis() / (double) Math.max(1, spark.fetchWaitMillis()));
    }

    private static List<Result> concat(List<Result> a, List<Result> b) {
        List<Result> all = new ArrayList<>(a);
        all.addAll(b);
        return all;
    }

    private static Result best(List<Result> runs) {
        return runs.stream().min(java.util.Comparator.comparingLong(Result::millis)).orElseThrow();
    }

    private static Result run(String sparkJars, long records, boolean rdma, String provider) {
        SparkConf conf = LocalSparkCluster.conf(rdma ? "bench-rdma4j" : "bench-spark", 2, 3072, List.of(sparkJars.split(",")));
        if (rdma) {
            conf.set("spark.shuffle.manager", LocalSparkCluster.SHUFFLE_MANAGER)
                    .set("spark.shuffle.rdma.provider", provider)
                    .set("spark.shuffle.rdma.fallback", "fail");
        }
        try (JavaSparkContext sc = LocalSparkCluster.start(conf, Duration.ofMinutes(2))) {
            AtomicLong fetchWait = new AtomicLong();
            AtomicLong shuffleBytes = new AtomicLong();
            sc.sc().addSparkListener(new SparkListener() {
                @Override
                public void onTaskEnd(SparkListenerTaskEnd end) {
                    if (end.taskMetrics() != null) {
                        fetchWait.addAndGet(end.taskMetrics().shuffleReadMetrics().fetchWaitTime());
                        shuffleBytes.addAndGet(end.taskMetrics().shuffleReadMetrics().totalBytesRead());
                    }
                }
            });
            int mapTasks = 16;
            long perTask = records / mapTasks;
            List<Integer> seeds = IntStream.range(0, mapTasks).boxed().collect(Collectors.toList());
            long start = System.nanoTime();
            long checksum = sc.parallelize(seeds, mapTasks)
                    .flatMapToPair(seed -> generate(seed, perTask))
                    .sortByKey(true, 16)
                    .mapPartitions(it -> {
                        long sum = 0;
                        long position = 0;
                        while (it.hasNext()) {
                            Tuple2<String, byte[]> t = it.next();
                            sum += t._1().hashCode() * ++position + t._2()[0];
                        }
                        return List.of(sum).iterator();
                    })
                    .reduce(Long::sum);
            long millis = (System.nanoTime() - start) / 1_000_000;
            Thread.sleep(1000); // let the last task-end events arrive
            return new Result(millis, fetchWait.get(), shuffleBytes.get(), checksum);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private static Iterator<Tuple2<String, byte[]>> generate(int seed, long count) {
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
