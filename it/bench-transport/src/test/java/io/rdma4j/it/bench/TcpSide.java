package io.rdma4j.it.bench;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.ReadRequest;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.tcp.TlsStores;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Path;

import java.util.ArrayList;
import java.util.List;

/**
 * The rdma4j side: two tcp-provider transports on loopback, the server publishing a {@link Transfers#filledRegion}
 * and echoing {@link Transfers#ECHO} requests, the client connected once with a sink for reads.
 */
@State(Scope.Benchmark)
public class TcpSide {

    /** {@code plain}, or {@code tls}: mutual TLS 1.3 with certificates and a shared secret. */
    @Param({"plain"})
    public String security;

    Arena arena;
    RdmaTransport server;
    RdmaTransport client;
    RdmaListener listener;
    RegionDescriptor remote;
    MemorySegment data;
    RdmaConnection connection;
    /** Room for 8 large reads at once. */
    RegisteredRegion sink;

    @Setup(Level.Trial)
    public void open() throws Exception {
        TransportConfig config = config();
        arena = Arena.ofShared();
        server = RdmaTransport.open(config);
        client = RdmaTransport.open(config);
        data = Transfers.filledRegion(arena);
        remote = server.register(data, Access.remoteRead()).descriptor();
        listener = server.listen(new InetSocketAddress("127.0.0.1", 0),
                RequestHandlers.of(Transfers.ECHO, RequestHandler.answering((body, context) -> body)));
        connection = connect();
        sink = sink(8L * Transfers.LARGE);
        readBatch(connection, sink.segment(), 4096, Transfers.LARGE, 1);
        Transfers.requireSame(sink.segment().asSlice(0, Transfers.LARGE), data.asSlice(4096, Transfers.LARGE), "tcp " + security);
        ByteBuffer echoed = connection.requestAndWait(Transfers.ECHO, data.asSlice(0, Transfers.SMALL).asByteBuffer());
        Transfers.requireSame(MemorySegment.ofBuffer(echoed), data.asSlice(0, Transfers.SMALL), "tcp " + security + " echo");
    }

    RdmaConnection connect() throws Exception {
        return client.connect(listener.localAddress()).get();
    }

    /** A region of the client's that reads may land in. */
    RegisteredRegion sink(long bytes) {
        return client.register(arena.allocate(bytes, 4096), Access.readSink());
    }

    /** {@code depth} reads of {@code length} bytes from {@code offset} on, in flight together, into {@code into}. */
    void readBatch(RdmaConnection c, MemorySegment into, long offset, int length, int depth) throws Exception {
        if (depth == 1) {
            c.read(remote, offset, into.asSlice(0, length)).get();
            return;
        }
        // one batch, as an application with several reads at hand posts them
        List<ReadRequest> reads = new ArrayList<>(depth);
        for (int i = 0; i < depth; i++) {
            reads.add(new ReadRequest(remote, offset + (long) i * length, into.asSlice((long) i * length, length)));
        }
        c.readAll(reads).get();
    }

    @TearDown(Level.Trial)
    public void close() throws Exception {
        // transports first: they stop using the arena's memory before it goes
        client.close();
        server.close();
        arena.close();
    }

    private TransportConfig config() throws Exception {
        TransportConfig plain = TransportConfig.builder().provider("tcp").build();
        return switch (security) {
            case "plain" -> plain;
            case "tls" -> {
                TlsStores stores = TlsStores.get();
                Path keys = stores.member;
                Path trust = stores.trust;
                yield plain.toBuilder().sharedSecret("bench secret of 16+ bytes")
                        .providerOption("tcp.tls", "true")
                        .providerOption("tcp.tls.key-store", keys.toString())
                        .providerOption("tcp.tls.key-store-password", TlsStores.PASSWORD)
                        .providerOption("tcp.tls.trust-store", trust.toString())
                        .providerOption("tcp.tls.trust-store-password", TlsStores.PASSWORD)
                        .build();
            }
            default -> throw new IllegalArgumentException("security must be plain or tls, got " + security);
        };
    }

}
