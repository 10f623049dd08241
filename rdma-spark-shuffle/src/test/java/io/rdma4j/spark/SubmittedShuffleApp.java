package io.rdma4j.spark;

import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Tuple2;

import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/**
 * The application {@link RdmaShuffleSparkSubmitTest} runs with spark-submit: waits for its executors, runs one
 * shuffle and prints the result on a line of its own. Arguments: the number of executors, and how many seconds to
 * wait for them.
 */
public final class SubmittedShuffleApp {

    static final String RESULT = "rdma4j-submitted-result ";

    private SubmittedShuffleApp() {
    }

    public static void main(String[] args) throws InterruptedException {
        int executors = Integer.parseInt(args[0]);
        long waitSeconds = Long.parseLong(args[1]);
        try (JavaSparkContext sc = new JavaSparkContext(new SparkConf())) {
            long deadline = System.nanoTime() + waitSeconds * 1_000_000_000L;
            // The driver counts too: wait for every executor, so that the shuffle crosses JVMs.
            while (sc.sc().getExecutorMemoryStatus().size() < executors + 1) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(executors + " executors did not register within " + waitSeconds + " s");
                }
                Thread.sleep(100);
            }
            Map<Integer, Long> counts = sc.parallelize(IntStream.range(0, 40_000).boxed().collect(Collectors.toList()), 8)
                    .mapToPair(i -> new Tuple2<>(i % 10, 1L))
                    .reduceByKey(Long::sum, 4)
                    .collectAsMap();
            System.out.println(RESULT + new TreeMap<>(counts));
            Thread.sleep(1500); // the executors' CSV sink reports every second: once more after the job
        }
    }
}
