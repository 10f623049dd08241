package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;

/**
 * A tcp responder in its own JVM for {@link TcpFloodHeapTest}: publishes a 1 MiB region, prints
 * {@code READY port address key}, and answers each {@code heap} line on stdin with {@code HEAP <bytes>}, the
 * heap in use after a full collection.
 */
public final class FloodResponder {

    private FloodResponder() {
    }

    public static void main(String[] args) throws Exception {
        int size = 1 << 20;
        try (Arena arena = Arena.ofShared();
             RdmaTransport transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build())) {
            MemorySegment s = arena.allocate(size, 64);
            for (int i = 0; i < size; i++) {
                s.set(ValueLayout.JAVA_BYTE, i, (byte) i);
            }
            RegisteredRegion region = transport.register(s, Access.remoteRead());
            RdmaListener listener = transport.listen(new InetSocketAddress("127.0.0.1", 0));
            System.out.println("READY " + listener.localAddress().getPort() + " " + region.descriptor().address() + " "
                    + region.descriptor().key());
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.equals("heap")) {
                    System.gc();
                    System.out.println("HEAP " + ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed());
                    System.out.flush();
                }
            }
        }
    }
}
