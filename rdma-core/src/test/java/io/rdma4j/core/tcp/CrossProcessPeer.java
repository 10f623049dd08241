package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;

import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.util.HexFormat;

/**
 * The child JVM of {@link CrossProcessTest}: publishes {@code args[0]} bytes of {@link #pattern}, prints
 * {@code READY <port> <descriptor hex>}, and serves until its standard input closes.
 */
public final class CrossProcessPeer {

    private CrossProcessPeer() {
    }

    static byte pattern(long i) {
        return (byte) (i * 131 + 17);
    }

    public static void main(String[] args) throws Exception {
        long size = Long.parseLong(args[0]);
        try (Arena arena = Arena.ofShared();
             RdmaTransport transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build())) {
            MemorySegment memory = arena.allocate(size, 64);
            for (long i = 0; i < size; i++) {
                memory.set(ValueLayout.JAVA_BYTE, i, pattern(i));
            }
            RegisteredRegion region = transport.register(memory, Access.remoteRead());
            RdmaListener listener = transport.listen(new InetSocketAddress("127.0.0.1", 0));
            System.out.println("READY " + listener.localAddress().getPort() + " " + HexFormat.of().formatHex(region.descriptor().toBytes()));
            System.out.flush();
            InputStream in = System.in;
            while (in.read() >= 0) {
                // serve until the parent closes our stdin (or kills us)
            }
        }
    }
}
