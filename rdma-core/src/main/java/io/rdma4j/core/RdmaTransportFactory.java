package io.rdma4j.core;

/**
 * How {@link RdmaTransport#open(TransportConfig)}, {@link RdmaTransport#explain(TransportConfig)} and the
 * {@link io.rdma4j.core.doctor.Doctor} reach rdma-core's implementation without naming it: found with {@link java.util.ServiceLoader}
 * (rdma-core's {@code provides} clause, or {@code META-INF/services/io.rdma4j.core.RdmaTransportFactory} on the class
 * path), so the API package depends on no implementation package. Applications call
 * {@link RdmaTransport#open(TransportConfig)} instead.
 */
public interface RdmaTransportFactory {

    /** rdma-core's own implementation, found once. */
    static RdmaTransportFactory loaded() {
        return TransportFactoryLoader.factory();
    }

    /** Opens a transport on the provider the config asks for (see {@link RdmaTransport#open(TransportConfig)}). */
    RdmaTransport open(TransportConfig config);

    /** What {@link #open(TransportConfig)} would choose here and why, without opening anything. */
    ProviderSelection explain(TransportConfig config);

    /**
     * The doctor's report: this host's RDMA devices, every provider's availability, the choice, and whether the
     * memlock limit holds {@code connections} verbs connections.
     */
    String doctorReport(TransportConfig config, int connections);
}
