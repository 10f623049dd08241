package rdma4j.trespasser;

/** Names one class of each package that rdma-core and the native loader keep to themselves; javac must refuse. */
final class Trespasser {

    private Trespasser() {
    }

    static Object[] reach() {
        return new Object[] {
            io.rdma4j.core.RdmaTransport.class,  // exported: the control
            io.rdma4j.core.internal.DefaultTransportFactory.class,
            io.rdma4j.core.tcp.TcpProvider.class,
            io.rdma4j.core.verbs.VerbsProvider.class,
            io.rdma4j.core.doctor.Doctor.class,
            io.rdma4j.nativeloader.bindings.RdmaBindings.class,
            io.rdma4j.nativeloader.NativeLibraries.class,
            io.rdma4j.nativeloader.discovery.DiscoveryReport.class,
        };
    }
}
