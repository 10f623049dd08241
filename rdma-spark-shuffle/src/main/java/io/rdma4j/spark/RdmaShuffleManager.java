package io.rdma4j.spark;

import io.rdma4j.core.metrics.TransportMetrics;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.rpc.RpcEndpointRef;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.ShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.ShuffleManager;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.shuffle.sort.SortShuffleManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;
import scala.Product2;

import java.io.IOException;
import java.net.InetSocketAddress;

/**
 * A Spark {@link ShuffleManager} whose reducers fetch shuffle blocks by one-sided RDMA READ.
 *
 * <p>Map tasks run Spark's own sort shuffle writers and keep its on-disk format (data, index and checksum
 * files, spills, serializers, compression). Each executor publishes its committed map outputs by
 * mapping the files and registering them for remote read; reducers read the index entries and block
 * ranges they need straight from the peer's page cache. Enable with
 * {@code spark.shuffle.manager=io.rdma4j.spark.RdmaShuffleManager}; options: {@link RdmaShuffleConf}.
 */
public final class RdmaShuffleManager implements ShuffleManager {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaShuffleManager.class);

    private final SortShuffleManager delegate;
    private final RdmaShuffleConf conf;
    private final boolean isDriver;
    private RpcEndpointRef driverEndpoint;
    private ExecutorRuntime runtime;
    private boolean runtimeFailed;

    public RdmaShuffleManager(SparkConf sparkConf, boolean isDriver) {
        refuseUnsupported(sparkConf);
        this.conf = RdmaShuffleConf.from(sparkConf);
        ShuffleSecurity.check(sparkConf, conf.transport());
        this.isDriver = isDriver;
        this.delegate = new SortShuffleManager(sparkConf);
    }

    private static void refuseUnsupported(SparkConf c) {
        if (c.getBoolean("spark.shuffle.service.enabled", false)) {
            throw new IllegalArgumentException("rdma4j shuffle serves map outputs from the executors themselves and cannot work "
                    + "with the external shuffle service: set spark.shuffle.service.enabled=false, or use Spark's sort shuffle");
        }
        if (c.getBoolean("spark.dynamicAllocation.enabled", false)
                && !c.getBoolean("spark.dynamicAllocation.shuffleTracking.enabled", true)) {
            throw new IllegalArgumentException("rdma4j shuffle with dynamic allocation needs spark.dynamicAllocation.shuffleTracking.enabled=true, "
                    + "so executors holding shuffle data are not removed");
        }
        if (c.getBoolean("spark.shuffle.push.enabled", false)) {
            throw new IllegalArgumentException("rdma4j shuffle does not support push-based shuffle: set spark.shuffle.push.enabled=false");
        }
    }

    @Override
    public <K, V, C> ShuffleHandle registerShuffle(int shuffleId, ShuffleDependency<K, V, C> dependency) {
        if (isDriver) {
            ensureDriverEndpoint();
        }
        return delegate.registerShuffle(shuffleId, dependency);
    }

    private synchronized void ensureDriverEndpoint() {
        if (driverEndpoint == null) {
            driverEndpoint = EndpointRegistry.startOnDriver(SparkEnv.get());
        }
    }

    /** This executor's runtime, started on first use; null when it cannot start and the fallback is Spark's transfer. */
    private synchronized ExecutorRuntime runtime() {
        if (runtime == null && !runtimeFailed) {
            if (isDriver) {
                ensureDriverEndpoint(); // local mode: the driver is the only executor
            }
            try {
                runtime = ExecutorRuntime.start(conf, SparkEnv.get(), delegate.shuffleBlockResolver());
            } catch (ShuffleSecurity.RefusedException e) {
                throw e; // Spark's security settings cannot be honoured: no fallback hides that
            } catch (RuntimeException e) {
                String why = RdmaShuffleConf.sparkNames(e.getMessage());
                if (conf.fallback() == RdmaShuffleConf.Fallback.FAIL) {
                    throw new IllegalStateException("rdma4j shuffle cannot start on this executor (spark.shuffle.rdma.fallback=fail): " + why, e);
                }
                runtimeFailed = true;
                LOG.warn("rdma4j shuffle cannot start on this executor ({}); using Spark's block transfer (spark.shuffle.rdma.fallback=spark)",
                        why);
                tellDriverUnavailable(why);
            }
        }
        return runtime;
    }

    /** So that the driver's log says, once per executor, which ones run without rdma4j. */
    private static void tellDriverUnavailable(String why) {
        SparkEnv env = SparkEnv.get();
        try {
            EndpointRegistry.connect(env).unavailable(env.executorId(), String.valueOf(why));
        } catch (RuntimeException e) {
            LOG.debug("cannot tell the driver that rdma4j is unavailable here", e); // informative only: the shuffle goes on
        }
    }

    @Override
    public <K, V> ShuffleWriter<K, V> getWriter(ShuffleHandle handle, long mapId, TaskContext context, ShuffleWriteMetricsReporter metrics) {
        ExecutorRuntime rt = runtime();
        ShuffleWriter<K, V> writer = delegate.getWriter(handle, mapId, context, metrics);
        if (rt == null || !conf.eagerRegistration()) {
            return writer;
        }
        int shuffleId = handle.shuffleId();
        return new ShuffleWriter<>() {
            @Override
            public void write(scala.collection.Iterator<Product2<K, V>> records) throws IOException {
                writer.write(records);
            }

            @Override
            public Option<MapStatus> stop(boolean success) {
                Option<MapStatus> status = writer.stop(success);
                if (success && status.isDefined()) {
                    try {
                        rt.publisher.publish(shuffleId, mapId);
                    } catch (RuntimeException e) {
                        // The output is committed and Spark serves it whatever happens here; a describe tries again.
                        LOG.warn("rdma4j shuffle: cannot register shuffle {} map {} when it commits; a reader's first "
                                + "request registers it: {}", shuffleId, mapId, e.toString());
                    }
                }
                return status;
            }

            @Override
            public long[] getPartitionLengths() {
                return writer.getPartitionLengths();
            }
        };
    }

    @Override
    @SuppressWarnings("unchecked")
    public <K, C> ShuffleReader<K, C> getReader(ShuffleHandle handle, int startMapIndex, int endMapIndex, int startPartition,
                                                int endPartition, TaskContext context, ShuffleReadMetricsReporter metrics) {
        ExecutorRuntime rt = runtime();
        if (rt == null) {
            RdmaShuffleMetrics.fellBack(RdmaShuffleMetrics.FallbackReason.TRANSPORT_UNAVAILABLE);
            return delegate.getReader(handle, startMapIndex, endMapIndex, startPartition, endPartition, context, metrics);
        }
        SparkEnv env = SparkEnv.get();
        return new RdmaShuffleReader<>((BaseShuffleHandle<K, ?, C>) handle, startMapIndex, endMapIndex, startPartition, endPartition,
                context, metrics, rt, env.serializerManager(), env.blockManager(), env.mapOutputTracker());
    }

    @Override
    public boolean unregisterShuffle(int shuffleId) {
        ExecutorRuntime rt;
        synchronized (this) {
            rt = runtime;
        }
        if (rt != null) {
            rt.unregisterShuffle(shuffleId); // deregister and unmap before Spark deletes the files
        }
        return delegate.unregisterShuffle(shuffleId);
    }

    @Override
    public ShuffleBlockResolver shuffleBlockResolver() {
        return delegate.shuffleBlockResolver();
    }

    /** Map outputs this executor has mapped and registered (for tests and metrics). */
    public synchronized int publishedMapOutputs() {
        return runtime == null ? 0 : runtime.publisher.publishedCount();
    }

    /** The provider this executor's transport runs on, or empty when it did not start. */
    public synchronized Option<String> provider() {
        return runtime == null ? Option.empty() : Option.apply(runtime.transport.provider());
    }

    /** Where this executor's rdma4j endpoint listens, or empty when it did not start. */
    public synchronized Option<InetSocketAddress> endpoint() {
        return runtime == null ? Option.empty() : Option.apply(runtime.endpoint());
    }

    /** Operation counts of this executor's transport (e.g. its RDMA READs), or empty when it did not start. */
    public synchronized Option<TransportMetrics> transportMetrics() {
        return runtime == null ? Option.empty() : Option.apply(runtime.transport.metrics());
    }

    @Override
    public void stop() {
        synchronized (this) {
            if (runtime != null) {
                runtime.close();
                runtime = null;
            }
            if (driverEndpoint != null) {
                SparkEnv env = SparkEnv.get();
                if (env != null) {
                    env.rpcEnv().stop(driverEndpoint);
                }
                driverEndpoint = null;
            }
        }
        delegate.stop();
    }
}
