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
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

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
     * Starts fetching {@code wanted}, by executor the blocks to fetch (null: all of the task's blocks of that executor),
     * by one of Spark's iterators, which sends its requests at once and keeps to Spark's in-flight limits; returns the
     * blocks as they arrive, their streams wrapped (decompressed, decrypted) as Spark's reader wraps them. Spark's
     * iterator counts its own metrics and lets go of its buffers when the task ends.
     */
    java.util.Iterator<Tuple2<BlockId, InputStream>> fetch(Map<BlockManagerId, Set<BlockId>> wanted) {
        List<Tuple2<BlockManagerId, scala.collection.Seq<Tuple3<BlockId, Object, Object>>>> selected = new ArrayList<>();
        for (Tuple2<BlockManagerId, scala.collection.Seq<Tuple3<BlockId, Object, Object>>> group : groups) {
            if (!wanted.containsKey(group._1())) {
                continue;
            }
            Set<BlockId> only = wanted.get(group._1());
            if (only == null) {
                selected.add(group);
                continue;
            }
            List<Tuple3<BlockId, Object, Object>> blocks = new ArrayList<>();
            for (Tuple3<BlockId, Object, Object> block : CollectionConverters.asJava(group._2())) {
                if (only.contains(block._1())) {
                    blocks.add(block);
                }
            }
            selected.add(new Tuple2<>(group._1(), CollectionConverters.asScala(blocks).toSeq()));
        }
        SparkConf conf = SparkEnv.get().conf();
        Iterator<Tuple2<BlockId, InputStream>> blocks = new ShuffleBlockFetcherIterator(
                context,
                blockManager.blockStoreClient(),
                blockManager,
                mapOutputTracker,
                CollectionConverters.asScala(selected.iterator()),
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
