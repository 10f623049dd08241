package io.rdma4j.spark;

import org.apache.spark.SparkEnv;
import org.apache.spark.rpc.RpcCallContext;
import org.apache.spark.rpc.RpcEndpointRef;
import org.apache.spark.rpc.RpcEnv;
import org.apache.spark.rpc.ThreadSafeRpcEndpoint;
import org.apache.spark.util.RpcUtils;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.PartialFunction;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractPartialFunction;
import scala.runtime.BoxedUnit;

import java.net.InetSocketAddress;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Where each executor's rdma4j listener is, and its block manager's local directories. Executors listen on a free port
 * and register it, with the provider their transport runs on and their local directories, with the driver over Spark's
 * own RPC; the driver logs each executor's provider once. Reducers look peers up by executor id (and cache the
 * answer): the address to read a peer's map outputs by RDMA, the directories to read them from its files when it runs
 * on the same host ({@code spark.shuffle.readHostLocalDisk}).
 */
final class EndpointRegistry {

    static final String ENDPOINT_NAME = "rdma4j-shuffle-endpoints";

    /*
     * Messages are plain strings: Spark's RPC layer deserialises replies with the executor's system class
     * loader, which cannot see classes shipped in spark.jars.
     */
    private static final String REGISTER = "rdma4j-register\n";
    private static final String LOOKUP = "rdma4j-lookup\n";
    private static final String UNAVAILABLE = "rdma4j-unavailable\n";

    private static final Logger LOG = LoggerFactory.getLogger(EndpointRegistry.class);

    /** Separates local directories in messages (no path holds it). */
    private static final String DIRS_SEPARATOR = "\u0000";

    /** An executor's endpoint and local directories (empty when it registered none). */
    record Location(String host, int port, List<String> localDirs) {
        InetSocketAddress address() {
            return new InetSocketAddress(host, port);
        }
    }

    /** Runs on the driver. */
    static final class DriverEndpoint implements ThreadSafeRpcEndpoint {
        private final RpcEnv rpcEnv;
        private final Map<String, Location> locations = new ConcurrentHashMap<>();
        private final Map<String, String> providers = new ConcurrentHashMap<>();

        DriverEndpoint(RpcEnv rpcEnv) {
            this.rpcEnv = rpcEnv;
        }

        @Override
        public RpcEnv rpcEnv() {
            return rpcEnv;
        }

        @Override
        public PartialFunction<Object, BoxedUnit> receiveAndReply(RpcCallContext context) {
            return new AbstractPartialFunction<>() {
                @Override
                public boolean isDefinedAt(Object message) {
                    return message instanceof String m && (m.startsWith(REGISTER) || m.startsWith(LOOKUP) || m.startsWith(UNAVAILABLE));
                }

                @Override
                public <A1, B1> B1 applyOrElse(A1 message, scala.Function1<A1, B1> otherwise) {
                    if (!isDefinedAt(message)) {
                        return otherwise.apply(message);
                    }
                    String[] parts = ((String) message).split("\n", -1);
                    if (parts[0].equals(REGISTER.strip())) {
                        locations.put(parts[1], new Location(parts[2], Integer.parseInt(parts[3]), dirs(parts, 5)));
                        String provider = parts.length > 4 ? parts[4] : "unknown";
                        if (!provider.equals(providers.put(parts[1], provider))) {
                            LOG.info("rdma4j shuffle: executor {} serves map outputs at {}:{} on provider {}", parts[1], parts[2],
                                    parts[3], provider);
                        }
                        context.reply(Boolean.TRUE);
                    } else if (parts[0].equals(UNAVAILABLE.strip())) {
                        locations.remove(parts[1]);
                        String why = parts.length > 2 ? parts[2] : "unknown";
                        if (!("none: " + why).equals(providers.put(parts[1], "none: " + why))) {
                            LOG.info("rdma4j shuffle: executor {} runs without rdma4j ({}); its shuffle blocks go through"
                                    + " Spark's block transfer", parts[1], why);
                        }
                        context.reply(Boolean.TRUE);
                    } else {
                        Location l = locations.get(parts[1]);
                        context.reply(l == null ? "" : l.host() + "\n" + l.port() + "\n" + String.join(DIRS_SEPARATOR, l.localDirs()));
                    }
                    @SuppressWarnings("unchecked")
                    B1 unit = (B1) BoxedUnit.UNIT;
                    return unit;
                }
            };
        }
    }

    private final RpcEndpointRef driver;
    private final Map<String, Location> cache = new ConcurrentHashMap<>();

    private EndpointRegistry(RpcEndpointRef driver) {
        this.driver = driver;
    }

    /** Starts the registry endpoint on the driver. */
    static RpcEndpointRef startOnDriver(SparkEnv env) {
        return env.rpcEnv().setupEndpoint(ENDPOINT_NAME, new DriverEndpoint(env.rpcEnv()));
    }

    /** A client of the driver's registry, for an executor. */
    static EndpointRegistry connect(SparkEnv env) {
        return new EndpointRegistry(RpcUtils.makeDriverRef(ENDPOINT_NAME, env.conf(), env.rpcEnv()));
    }

    /**
     * Registers this executor's endpoint, {@code provider} (what its transport runs on, and why) and its block
     * manager's local directories (where its map outputs are).
     */
    void register(String executorId, InetSocketAddress address, String provider, List<String> localDirs) {
        driver.askSync(REGISTER + executorId + "\n" + address.getHostString() + "\n" + address.getPort() + "\n"
                + provider.replace('\n', ' ') + "\n" + String.join(DIRS_SEPARATOR, localDirs), ClassTag$.MODULE$.apply(Boolean.class));
    }

    /** Tells the driver that this executor's transport could not start, and why (its shuffle falls back to Spark's). */
    void unavailable(String executorId, String why) {
        driver.askSync(UNAVAILABLE + executorId + "\n" + why.replace('\n', ' '), ClassTag$.MODULE$.apply(Boolean.class));
    }

    /** Where the peer is, or null when that executor has no rdma4j endpoint. */
    Location lookup(String executorId) {
        Location known = cache.get(executorId);
        if (known != null) {
            return known;
        }
        String location = driver.askSync(LOOKUP + executorId, ClassTag$.MODULE$.apply(String.class));
        if (location.isEmpty()) {
            return null;
        }
        String[] parts = location.split("\n", -1);
        Location l = new Location(parts[0], Integer.parseInt(parts[1]), dirs(parts, 2));
        cache.put(executorId, l);
        return l;
    }

    /** The local directories in {@code parts[at]} of a message (none when absent). */
    private static List<String> dirs(String[] parts, int at) {
        return parts.length > at && !parts[at].isEmpty() ? List.of(parts[at].split(DIRS_SEPARATOR)) : List.of();
    }

    void forget(String executorId) {
        cache.remove(executorId);
    }
}
