package io.rdma4j.spark;

import org.apache.spark.SparkEnv;
import org.apache.spark.rpc.RpcCallContext;
import org.apache.spark.rpc.RpcEndpointRef;
import org.apache.spark.rpc.RpcEnv;
import org.apache.spark.rpc.ThreadSafeRpcEndpoint;
import org.apache.spark.util.RpcUtils;
import scala.PartialFunction;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractPartialFunction;
import scala.runtime.BoxedUnit;

import java.io.Serializable;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Where each executor's rdma4j listener is. Executors listen on a free port and register it with the
 * driver over Spark's own RPC; reducers look peers up by executor id (and cache the answer).
 */
final class EndpointRegistry {

    static final String ENDPOINT_NAME = "rdma4j-shuffle-endpoints";

    record Register(String executorId, String host, int port) implements Serializable { }

    record Lookup(String executorId) implements Serializable { }

    /** The answer to {@link Lookup}; {@code port} is -1 when the executor never registered. */
    record Location(String host, int port) implements Serializable {
        boolean known() {
            return port > 0;
        }
    }

    /** Runs on the driver. */
    static final class DriverEndpoint implements ThreadSafeRpcEndpoint {
        private final RpcEnv rpcEnv;
        private final Map<String, Location> locations = new ConcurrentHashMap<>();

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
                    return message instanceof Register || message instanceof Lookup;
                }

                @Override
                public <A1, B1> B1 applyOrElse(A1 message, scala.Function1<A1, B1> otherwise) {
                    switch (message) {
                        case Register r -> {
                            locations.put(r.executorId(), new Location(r.host(), r.port()));
                            context.reply(Boolean.TRUE);
                        }
                        case Lookup l -> context.reply(locations.getOrDefault(l.executorId(), new Location("", -1)));
                        default -> {
                            return otherwise.apply(message);
                        }
                    }
                    @SuppressWarnings("unchecked")
                    B1 unit = (B1) BoxedUnit.UNIT;
                    return unit;
                }
            };
        }
    }

    private final RpcEndpointRef driver;
    private final Map<String, InetSocketAddress> cache = new ConcurrentHashMap<>();

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

    void register(String executorId, InetSocketAddress address) {
        driver.askSync(new Register(executorId, address.getHostString(), address.getPort()), ClassTag$.MODULE$.apply(Boolean.class));
    }

    /** The peer's rdma4j address, or null when that executor has no rdma4j endpoint. */
    InetSocketAddress lookup(String executorId) {
        InetSocketAddress known = cache.get(executorId);
        if (known != null) {
            return known;
        }
        Location location = driver.askSync(new Lookup(executorId), ClassTag$.MODULE$.apply(Location.class));
        if (!location.known()) {
            return null;
        }
        InetSocketAddress address = new InetSocketAddress(location.host(), location.port());
        cache.put(executorId, address);
        return address;
    }

    void forget(String executorId) {
        cache.remove(executorId);
    }
}
