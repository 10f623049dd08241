package io.rdma4j.core;

import java.util.ServiceLoader;

/**
 * Loads the one {@link RdmaTransportFactory}, once: rdma-core's module provides it, or on the class path its
 * META-INF/services entry.
 */
final class TransportFactoryLoader {

    private static final RdmaTransportFactory FACTORY = load();

    private TransportFactoryLoader() {
    }

    static RdmaTransportFactory factory() {
        return FACTORY;
    }

    private static RdmaTransportFactory load() {
        return ServiceLoader.load(RdmaTransportFactory.class, TransportFactoryLoader.class.getClassLoader())
                .findFirst()
                .orElseThrow(() -> new IllegalStateException("no " + RdmaTransportFactory.class.getName()
                        + " on the class path: rdma-core's META-INF/services entry is missing (a shaded or merged"
                        + " jar must keep META-INF/services, e.g. with the shade plugin's ServicesResourceTransformer)"));
    }
}
