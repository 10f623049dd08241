package io.rdma4j.spark;

import org.apache.spark.MapOutputTracker;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockFetcherIterator;
import org.apache.spark.util.SystemClock;
import scala.Tuple2;
import scala.Tuple3;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

import java.io.InputStream;
import java.util.List;

/**
 * Fetches some executors' blocks of a reduce task through Spark's own block transfer, with the settings Spark's reader
 * uses: for the executors that cannot serve their map outputs by RDMA (they could not register them), while the task
 * reads the others' blocks by RDMA.
 */
final class SparkBlockTransfer {

    private final TaskContext context;
    private final ShuffleReadMetricsReporter metrics;
    private final SerializerManager serializerManager;
    private final BlockManager blockManager;
    private final MapOutputTracker mapOutputTracker;
    /** The task's blocks by executor, as Spark's map output tracker listed them. */
    private final List<Tuple2<BlockManagerId, scala.collection.Seq<Tuple3<BlockId, Object, Object>>>> groups;

    SparkBlockTransfer(TaskContext context, ShuffleReadMetricsReporter metrics, SerializerManager serializerManager,
                       BlockManager blockManager, MapOutputTracker mapOutputTracker,
                       List<Tuple2<BlockManagerId, scala.collection.Seq<Tuple3<BlockId, Object, Object>>>> groups) {
        this.context = context;
        this.metrics = metrics;
        this.serializerManager = serializerManager;
        this.blockManager = blockManager;
        this.mapOutputTracker = mapOutputTracker;
        this.groups = groups;
    }

    /**
     * Starts fetching {@code peer}'s blocks (Spark sends its requests at once) and returns them as they arrive, their
     * streams wrapped (decompressed, decrypted) as Spark's reader wraps them; Spark's iterator counts its own metrics
     * and lets go of its buffers when the task ends.
     */
    java.util.Iterator<Tuple2<BlockId, InputStream>> fetch(BlockManagerId peer) {
        List<Tuple2<BlockManagerId, scala.collection.Seq<Tuple3<BlockId, Object, Object>>>> wanted =
                groups.stream().filter(g -> g._1().equals(peer)).toList();
        SparkConf conf = SparkEnv.get().conf();
        Iterator<Tuple2<BlockId, InputStream>> blocks = new ShuffleBlockFetcherIterator(
                context,
                blockManager.blockStoreClient(),
                blockManager,
                mapOutputTracker,
                CollectionConverters.asScala(wanted.iterator()),
                (blockId, stream) -> serializerManager.wrapStream(blockId, stream),
                conf.getSizeAsMb("spark.reducer.maxSizeInFlight", "48m") * 1024 * 1024,
                conf.getInt("spark.reducer.maxReqsInFlight", Integer.MAX_VALUE),
                conf.getInt("spark.reducer.maxBlocksInFlightPerAddress", Integer.MAX_VALUE),
                conf.getSizeAsBytes("spark.network.maxRemoteBlockSizeFetchToMem", "200m"),
                conf.getInt("spark.shuffle.maxAttemptsOnNettyOOM", 10),
                conf.getBoolean("spark.shuffle.detectCorrupt", true),
                conf.getBoolean("spark.shuffle.detectCorrupt.useExtraMemory", false),
                conf.getBoolean("spark.shuffle.checksum.enabled", true),
                conf.get("spark.shuffle.checksum.algorithm", "ADLER32"),
                metrics,
                false,
                new SystemClock()).toCompletionIterator();
        return CollectionConverters.asJava(blocks);
    }
}
