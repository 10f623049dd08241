package io.rdma4j.spark;

import org.apache.spark.Aggregator;
import org.apache.spark.InterruptibleIterator;
import org.apache.spark.MapOutputTracker;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.TaskContext;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.BlockStoreShuffleReader;
import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.shuffle.checksum.RowBasedChecksum;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;
import org.apache.spark.util.collection.ExternalSorter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;
import scala.Product2;
import scala.Tuple2;
import scala.Tuple3;
import scala.jdk.javaapi.CollectionConverters;

import java.io.InputStream;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Reads a range of map outputs and reduce partitions (as AQE asks for them) through
 * {@link RdmaBlockFetcher}, then deserialises, aggregates and sorts exactly as Spark's own reader does.
 */
final class RdmaShuffleReader<K, C> implements ShuffleReader<K, C> {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaShuffleReader.class);
    /** Peers already reported as unreachable, so the log says why once per peer, not once per task. */
    private static final Set<String> REPORTED_UNREACHABLE = ConcurrentHashMap.newKeySet();

    private final BaseShuffleHandle<K, ?, C> handle;
    private final int startMapIndex;
    private final int endMapIndex;
    private final int startPartition;
    private final int endPartition;
    private final TaskContext context;
    private final ShuffleReadMetricsReporter metrics;
    private final ExecutorRuntime runtime;
    private final SerializerManager serializerManager;
    private final BlockManager blockManager;
    private final MapOutputTracker mapOutputTracker;

    RdmaShuffleReader(BaseShuffleHandle<K, ?, C> handle, int startMapIndex, int endMapIndex, int startPartition, int endPartition,
                      TaskContext context, ShuffleReadMetricsReporter metrics, ExecutorRuntime runtime,
                      SerializerManager serializerManager, BlockManager blockManager, MapOutputTracker mapOutputTracker) {
        this.handle = handle;
        this.startMapIndex = startMapIndex;
        this.endMapIndex = endMapIndex;
        this.startPartition = startPartition;
        this.endPartition = endPartition;
        this.context = context;
        this.metrics = metrics;
        this.runtime = runtime;
        this.serializerManager = serializerManager;
        this.blockManager = blockManager;
        this.mapOutputTracker = mapOutputTracker;
    }

    @Override
    @SuppressWarnings({"unchecked", "rawtypes"})
    public scala.collection.Iterator<Product2<K, C>> read() {
        int shuffleId = handle.shuffleId();
        List<Tuple2<BlockManagerId, scala.collection.Seq<Tuple3<BlockId, Object, Object>>>> sparkGroups = new ArrayList<>();
        List<Tuple2<BlockManagerId, List<WantedBlock>>> groups = new ArrayList<>();
        CollectionConverters.asJava(mapOutputTracker.getMapSizesByExecutorId(shuffleId, startMapIndex, endMapIndex, startPartition, endPartition))
                .forEachRemaining(group -> {
                    sparkGroups.add(group);
                    List<WantedBlock> wanted = new ArrayList<>();
                    for (Tuple3<BlockId, Object, Object> block : CollectionConverters.asJava(group._2())) {
                        if (!(block._1() instanceof ShuffleBlockId id)) {
                            throw new IllegalStateException("rdma4j shuffle reads only plain shuffle blocks, got " + block._1()
                                    + "; turn off push-based shuffle (spark.shuffle.push.enabled)");
                        }
                        wanted.add(new WantedBlock(id, (Integer) block._3()));
                    }
                    groups.add(new Tuple2<>(group._1(), wanted));
                });

        SparkBlockTransfer spark = runtime.conf.fallback() == RdmaShuffleConf.Fallback.SPARK
                ? new SparkBlockTransfer(context, metrics, serializerManager, blockManager, mapOutputTracker, sparkGroups) : null;
        RdmaBlockFetcher fetcher = new RdmaBlockFetcher(runtime, shuffleId, context, metrics, serializerManager, spark);
        context.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) ctx -> fetcher.cleanup());
        try {
            fetcher.start(groups);
        } catch (PeerUnreachableException e) {
            fetcher.cleanup();
            if (runtime.conf.fallback() == RdmaShuffleConf.Fallback.FAIL) {
                BlockManagerId peer = sparkGroups.stream().map(Tuple2::_1).filter(id -> id.executorId().equals(e.executorId()))
                        .findFirst().orElse(null);
                throw sneaky(new FetchFailedException(peer, shuffleId, -1L, -1, startPartition,
                        "rdma4j shuffle: " + e.getMessage() + " (spark.shuffle.rdma.fallback=fail)", e));
            }
            RdmaShuffleMetrics.fellBack(RdmaShuffleMetrics.FallbackReason.PEER_UNREACHABLE);
            if (REPORTED_UNREACHABLE.add(e.executorId())) {
                LOG.warn("rdma4j shuffle: {}; reading from it through Spark's block transfer (spark.shuffle.rdma.fallback=spark)", e.getMessage());
            }
            return new BlockStoreShuffleReader<>(handle, CollectionConverters.asScala(sparkGroups.iterator()), context, metrics,
                    serializerManager, blockManager, mapOutputTracker, false).read();
        }
        return records(fetcher);
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private scala.collection.Iterator<Product2<K, C>> records(RdmaBlockFetcher fetcher) {
        ShuffleDependency<K, ?, C> dep = handle.dependency();
        SerializerInstance serializer = dep.serializer().newInstance();
        Iterator<Product2<Object, Object>> recordIter = new Iterator<>() {
            private scala.collection.Iterator<Tuple2<Object, Object>> current = scala.collection.Iterator.empty();
            private boolean finished;

            @Override
            public boolean hasNext() {
                while (!current.hasNext()) {
                    if (!fetcher.hasNext()) {
                        if (!finished) {
                            finished = true;
                            context.taskMetrics().mergeShuffleReadMetrics();
                        }
                        return false;
                    }
                    Tuple2<BlockId, InputStream> next = fetcher.next();
                    // asKeyValueIterator closes the stream (releasing its buffer) once its records are read.
                    current = serializer.deserializeStream(next._2()).asKeyValueIterator();
                }
                return true;
            }

            @Override
            public Product2<Object, Object> next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                metrics.incRecordsRead(1);
                return current.next();
            }
        };
        scala.collection.Iterator interruptible = new InterruptibleIterator(context, CollectionConverters.asScala(recordIter));
        scala.collection.Iterator aggregated;
        Option<Aggregator<K, ?, C>> aggregator = (Option) dep.aggregator();
        if (aggregator.isDefined()) {
            aggregated = dep.mapSideCombine()
                    ? ((Aggregator) aggregator.get()).combineCombinersByKey(interruptible, context)
                    : ((Aggregator) aggregator.get()).combineValuesByKey(interruptible, context);
        } else {
            aggregated = interruptible;
        }
        scala.collection.Iterator result;
        if (dep.keyOrdering().isDefined()) {
            ExternalSorter sorter = new ExternalSorter(context, Option.empty(), Option.empty(), dep.keyOrdering(), dep.serializer(),
                    new RowBasedChecksum[0]);
            result = sorter.insertAllAndUpdateMetrics(aggregated);
        } else {
            result = aggregated;
        }
        return result instanceof InterruptibleIterator ? result : new InterruptibleIterator(context, result);
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException sneaky(Throwable t) throws E {
        throw (E) t;
    }
}
