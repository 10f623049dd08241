/**
 * The rdma4j transport API ({@code io.rdma4j.core}), the provider SPI ({@code .spi}), registered buffer pools
 * ({@code .pool}) and metrics ({@code .metrics}). The implementation, the tcp and verbs providers and the doctor
 * stay inside: the API finds the implementation and the providers through the service clauses below. The doctor's
 * main class, {@code io.rdma4j.core.doctor.Doctor}, runs with {@code java -m} or from its runnable jar.
 */
@SuppressWarnings("requires-automatic")
module io.rdma4j.core {
    requires io.rdma4j.nativeloader;
    // The doctor sets the level of rdma4j's loggers, whose System.Logger backend is java.util.logging.
    requires java.logging;
    // MicrometerMetrics only: applications without Micrometer never load it, and those that bind it to a registry
    // require Micrometer themselves. Not transitive, which would make every module compiled against rdma-core look
    // for Micrometer. micrometer.core is the Automatic-Module-Name of Micrometer's jar (it has no descriptor).
    requires static micrometer.core;

    exports io.rdma4j.core;
    exports io.rdma4j.core.spi;
    exports io.rdma4j.core.pool;
    exports io.rdma4j.core.metrics;

    uses io.rdma4j.core.RdmaTransportFactory;
    uses io.rdma4j.core.spi.RdmaProvider;

    provides io.rdma4j.core.RdmaTransportFactory with io.rdma4j.core.internal.DefaultTransportFactory;
    provides io.rdma4j.core.spi.RdmaProvider with io.rdma4j.core.verbs.VerbsProvider, io.rdma4j.core.tcp.TcpProvider;
}
