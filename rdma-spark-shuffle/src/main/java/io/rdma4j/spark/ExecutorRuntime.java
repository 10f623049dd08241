package io.rdma4j.spark;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.pool.RegisteredBufferPool;
import org.apache.spark.SparkEnv;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.storage.BlockManagerId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * What one executor runs for the RDMA shuffle: the transport, a listener on a free port (registered with
 * the driver), the map output publisher, the reducers' registered buffer pool and connections to peers.
 */
final class ExecutorRuntime implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(ExecutorRuntime.class);

    private record DescribedKey(String executorId, int shuffleId, long mapId) { }

    final RdmaShuffleConf conf;
    final RdmaTransport transport;
    final RegisteredBufferPool pool;
    final MapOutputPublisher publisher;
    final String executorId;
    private final RdmaListener listener;
    private final EndpointRegistry registry;
    /** This executor's block manager host: peers registered with it run on this host. */
    private final String host;
    /** Spark's {@code spark.diskStore.subDirectories}, which places map output files under a local directory. */
    final int subDirsPerLocalDir;
    private final PeerConnections connections;
    private final Map<DescribedKey, DescribeMapOutputs.MapOutput> described = new ConcurrentHashMap<>();

    private ExecutorRuntime(RdmaShuffleConf conf, RdmaTransport transport, RegisteredBufferPool pool, MapOutputPublisher publisher,
                            String executorId, RdmaListener listener, EndpointRegistry registry, String host, int subDirsPerLocalDir) {
        this.conf = conf;
        this.transport = transport;
        this.pool = pool;
        this.publisher = publisher;
        this.executorId = executorId;
        this.listener = listener;
        this.registry = registry;
        this.host = host;
        this.subDirsPerLocalDir = subDirsPerLocalDir;
        this.connections = new PeerConnections(conf.connectionIdleTimeout(), this::connect);
    }

    static ExecutorRuntime start(RdmaShuffleConf conf, SparkEnv env, IndexShuffleBlockResolver resolver) {
        TransportConfig secured = ShuffleSecurity.secured(env.conf(), conf.transport(), applicationSecret(env));
        RdmaTransport transport = RdmaTransport.open(secured);
        try {
            RegisteredBufferPool pool = transport.createBufferPool(conf.poolConfig());
            MapOutputPublisher publisher = new MapOutputPublisher(transport, resolver, conf);
            // The RDMA interface may differ from the one Spark talks on (and verbs binds its listener to a
            // device by address): the configured address wins over the block manager's host.
            String host = conf.transport().localAddress() != null ? conf.transport().localAddress()
                    : env.blockManager().blockManagerId().host();
            RdmaListener listener = transport.listen(new InetSocketAddress(host, 0),
                    RequestHandlers.of(RequestTypes.SPARK_DESCRIBE_MAP_OUTPUTS, RequestHandler.answering(publisher::describe)));
            EndpointRegistry registry = EndpointRegistry.connect(env);
            String executorId = env.executorId();
            registry.register(executorId, listener.localAddress(), transport.selection().toString(),
                    List.of(env.blockManager().diskBlockManager().localDirsString()));
            LOG.info("rdma4j shuffle: executor {} serves map outputs at {} on provider {}; {}", executorId,
                    listener.localAddress(), transport.selection(), ShuffleSecurity.describe(env.conf(), secured));
            RdmaShuffleMetrics.transport(transport);
            return new ExecutorRuntime(conf, transport, pool, publisher, executorId, listener, registry,
                    env.blockManager().blockManagerId().host(), env.blockManager().diskBlockManager().subDirsPerLocalDir());
        } catch (RuntimeException | Error e) {
            transport.close();
            throw e;
        }
    }

    /** Spark's application secret, or null where authentication is off or Spark has none. */
    private static String applicationSecret(SparkEnv env) {
        if (!env.securityManager().isAuthenticationEnabled()) {
            return null;
        }
        try {
            return env.securityManager().getSecretKey();
        } catch (IllegalArgumentException none) {
            return null; // ShuffleSecurity says what to set
        }
    }

    /** Where this executor's endpoint listens (and what it registered with the driver). */
    InetSocketAddress endpoint() {
        return listener.localAddress();
    }

    /** A lease on a connection to the peer executor's endpoint (opened on first use), held until the task ends. */
    PeerConnections.Lease connection(String peerExecutorId) throws PeerUnreachableException {
        InetSocketAddress address;
        try {
            EndpointRegistry.Location location = registry.lookup(peerExecutorId);
            address = location == null ? null : location.address();
        } catch (RuntimeException e) {
            throw new PeerUnreachableException(peerExecutorId, "cannot ask the driver where executor " + peerExecutorId + " listens: " + e, e);
        }
        if (address == null) {
            throw new PeerUnreachableException(peerExecutorId, "executor " + peerExecutorId + " has no rdma4j endpoint (its transport did not start)", null);
        }
        return connections.acquire(peerExecutorId, address);
    }

    private RdmaConnection connect(String peerExecutorId, InetSocketAddress address) throws PeerUnreachableException {
        try {
            return transport.connect(address).get(conf.transport().connectTimeout().toMillis() + 1000, TimeUnit.MILLISECONDS);
        } catch (ExecutionException | TimeoutException e) {
            registry.forget(peerExecutorId);
            Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
            throw new PeerUnreachableException(peerExecutorId, "cannot connect to executor " + peerExecutorId + " at " + address + ": " + cause, cause);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new PeerUnreachableException(peerExecutorId, "interrupted while connecting to executor " + peerExecutorId, e);
        }
    }

    /** Connections to peers open now (idle ones close after spark.shuffle.rdma.connectionIdleTimeout). */
    int peerConnections() {
        return connections.size();
    }

    /**
     * The local directories of {@code peer} when its map outputs are to be read from its files: it runs on this
     * executor's host and {@code spark.shuffle.readHostLocalDisk} is on (Spark's default); null otherwise, or when the
     * driver cannot say.
     */
    List<String> hostLocalDirs(BlockManagerId peer) {
        if (!conf.readHostLocalDisk() || !peer.host().equals(host)) {
            return null;
        }
        try {
            EndpointRegistry.Location location = registry.lookup(peer.executorId());
            return location == null || location.localDirs().isEmpty() ? null : location.localDirs();
        } catch (RuntimeException e) {
            LOG.debug("rdma4j shuffle: no local directories of executor {}: {}", peer.executorId(), e.toString());
            return null;
        }
    }

    /** Drops a broken connection so that the next reader reconnects (or learns the peer is gone). */
    void forget(String peerExecutorId, RdmaConnection connection) {
        connections.forget(peerExecutorId, connection);
        registry.forget(peerExecutorId);
    }

    /** The region descriptors of the given map outputs on a peer, asking it for those not cached. */
    Map<Long, DescribeMapOutputs.MapOutput> describe(String peerExecutorId, RdmaConnection connection, int shuffleId, List<Long> mapIds)
            throws Exception {
        Map<Long, DescribeMapOutputs.MapOutput> result = new HashMap<>();
        List<Long> missing = new java.util.ArrayList<>();
        for (long mapId : mapIds) {
            DescribeMapOutputs.MapOutput known = described.get(new DescribedKey(peerExecutorId, shuffleId, mapId));
            if (known != null) {
                result.put(mapId, known);
            } else {
                missing.add(mapId);
            }
        }
        int perRequest = DescribeMapOutputs.maxMapsPerRequest(conf.transport().maxMessageSize());
        for (int from = 0; from < missing.size(); from += perRequest) {
            List<Long> chunk = missing.subList(from, Math.min(missing.size(), from + perRequest));
            long[] ids = chunk.stream().mapToLong(Long::longValue).toArray();
            for (DescribeMapOutputs.MapOutput o : DescribeMapOutputs.ask(connection, shuffleId, ids)) {
                result.put(o.mapId(), o);
                if (o.present()) {
                    described.put(new DescribedKey(peerExecutorId, shuffleId, o.mapId()), o);
                }
            }
        }
        return result;
    }

    void unregisterShuffle(int shuffleId) {
        described.keySet().removeIf(k -> k.shuffleId() == shuffleId);
        publisher.unpublish(shuffleId);
    }

    @Override
    public void close() {
        listener.close();
        connections.close();
        publisher.close();
        pool.close();
        transport.close();
    }
}
