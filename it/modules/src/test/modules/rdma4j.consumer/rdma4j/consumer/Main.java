package rdma4j.consumer;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RdmaTransportFactory;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.pool.PoolConfig;
import io.rdma4j.core.pool.PooledBuffer;
import io.rdma4j.core.pool.RegisteredBufferPool;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandles;
import java.lang.module.ModuleDescriptor;
import java.net.InetSocketAddress;
import java.util.TreeSet;

/**
 * Prints one line per finding for ModulePathIT: a READ between two tcp transports on loopback into a pooled buffer,
 * what rdma-core and the native loader export, which of their classes this module may access (the class names given
 * as arguments), and the doctor's native probe.
 */
public final class Main {

    private Main() {
    }

    public static void main(String[] args) throws Exception {
        read();
        for (String module : new String[] {"io.rdma4j.core", "io.rdma4j.nativeloader"}) {
            ModuleDescriptor descriptor = ModuleLayer.boot().findModule(module).orElseThrow().getDescriptor();
            TreeSet<String> exports = new TreeSet<>();
            descriptor.exports().forEach(e -> exports.add(e.source() + (e.isQualified() ? " to " + e.targets() : "")));
            System.out.println("EXPORTS " + module + " " + exports);
        }
        Module self = Main.class.getModule();
        for (String name : args) {
            Class<?> type = Class.forName(name);
            try {
                MethodHandles.lookup().accessClass(type); // the access check of linking, made on demand
                System.out.println("ACCESSIBLE " + name);
            } catch (IllegalAccessException e) {
                Module target = type.getModule();
                System.out.println("DENIED " + name + ": " + e.getMessage() + "; " + self.getName()
                        + (self.canRead(target) ? " reads " : " does not read ") + target.getName() + ", which "
                        + (target.isExported(type.getPackageName(), self) ? "exports " : "does not export ")
                        + type.getPackageName() + " to it");
            }
        }
        // The doctor's report loads libibverbs and librdmacm and calls them: the native loader's downcalls.
        try {
            String report = RdmaTransportFactory.loaded().doctorReport(TransportConfig.defaults(), 1);
            report.lines().filter(l -> l.contains("libibverbs")).forEach(l -> System.out.println("NATIVE " + l.strip()));
        } catch (IllegalCallerException e) {
            System.out.println("NATIVE DENIED " + e.getMessage());
        }
    }

    private static void read() throws Exception {
        TransportConfig tcp = TransportConfig.builder().provider("tcp").build();
        try (Arena arena = Arena.ofShared();
             RdmaTransport server = RdmaTransport.open(tcp);
             RdmaTransport client = RdmaTransport.open(tcp)) {
            MemorySegment data = arena.allocate(1 << 16);
            for (long i = 0; i < data.byteSize(); i++) {
                data.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + 7));
            }
            RegisteredRegion region = server.register(data, Access.remoteRead());
            byte[] descriptor = region.descriptor().toBytes();
            RdmaListener listener = server.listen(new InetSocketAddress("127.0.0.1", 0), c -> c.send(descriptor));
            RdmaConnection connection = client.connect(listener.localAddress()).get();
            RegionDescriptor remote = RegionDescriptor.fromBytes(connection.receive().get());
            RegisteredBufferPool pool = client.createBufferPool(PoolConfig.defaults());
            try (PooledBuffer sink = pool.acquire(remote.length())) {
                connection.read(remote, 0, sink.segment()).get();
                MemorySegment bytes = sink.segment().asSlice(0, remote.length());
                System.out.println("READ " + bytes.byteSize() + " bytes over " + client.selection().provider()
                        + ", first difference at " + bytes.mismatch(data));
            }
        }
    }
}
