package io.rdma4j.core;

import io.rdma4j.core.pool.PoolConfig;
import io.rdma4j.core.pool.PooledBuffer;
import io.rdma4j.core.pool.RegisteredBufferPool;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The README's transport and control-channel quick starts, as written there (the README marks each snippet with this
 * file, and it/adoption's ReadmeSnippetsTest checks that every line of it is here). Lines marked {@code // (test)} are
 * this test's own.
 */
class ReadmeExamplesTest {

    static final int MY_TYPE = RequestTypes.FIRST_APPLICATION_TYPE + 1; // (test)

    @Test
    void transportQuickStart() throws Exception {
        try (Arena arena = Arena.ofShared();   // closes last: published memory outlives the transports serving it
             RdmaTransport transport = RdmaTransport.open(TransportConfig.defaults());   // auto: verbs, else tcp
             RdmaTransport other = RdmaTransport.open(TransportConfig.defaults())) {     // usually another process or host
            System.out.println(transport.selection());      // e.g. "tcp (auto: no RDMA device found; run rdma4j-doctor.jar for details)"

            // Publish memory: peers read it one-sided, without this application on the data path.
            MemorySegment data = arena.allocate(1 << 20);
            data.fill((byte) 42); // (test)
            RegisteredRegion region = transport.register(data, Access.remoteRead());
            byte[] descriptor = region.descriptor().toBytes();  // 40 bytes: provider, address, length, key, rights
            assertThat(descriptor).hasSize(40); // (test)
            RdmaListener listener = transport.listen(new InetSocketAddress("127.0.0.1", 0),
                    connection -> connection.send(descriptor));

            // Elsewhere: connect, learn the descriptor, read into a pooled registered buffer.
            RegisteredBufferPool pool = other.createBufferPool(PoolConfig.defaults());  // the transport closes it
            RdmaConnection connection = other.connect(listener.localAddress()).get();
            RegionDescriptor remote = RegionDescriptor.fromBytes(connection.receive().get());
            try (PooledBuffer sink = pool.acquire(remote.length())) {
                connection.read(remote, 0, sink.segment()).get();
                assertThat(sink.segment().asSlice(0, data.byteSize()).mismatch(data)).as("bytes read").isEqualTo(-1); // (test)
            }
        }
    }

    @Test
    void controlChannel() throws Exception {
        InetSocketAddress address = new InetSocketAddress(InetAddress.getLoopbackAddress(), 0); // (test)
        ByteBuffer body = ByteBuffer.wrap("prices?".getBytes(StandardCharsets.UTF_8)); // (test)
        try (RdmaTransport transport = RdmaTransport.open(TransportConfig.defaults()); // (test)
             RdmaTransport client = RdmaTransport.open(TransportConfig.defaults())) { // (test)
            RdmaListener listener = listen(transport, address); // (test)
            RdmaConnection connection = client.connect(listener.localAddress()).get(); // (test)
            ByteBuffer reply = connection.request(MY_TYPE, body).get();  // or requestAndWait; many may be in flight
            assertThat(StandardCharsets.UTF_8.decode(reply).toString()) // (test)
                    .isEqualTo("answer to prices? from a " + client.selection().provider() + " peer"); // (test)
        }
    }

    private static RdmaListener listen(RdmaTransport transport, InetSocketAddress address) { // (test)
        RdmaListener listener = transport.listen(address, RequestHandlers.of(MY_TYPE,
                RequestHandler.answering((body, context) -> answer(body, context.peer()))));  // peer: address, provider, principal
        return listener; // (test)
    }

    private static ByteBuffer answer(ByteBuffer body, Peer peer) { // (test)
        String question = StandardCharsets.UTF_8.decode(body).toString(); // (test)
        return ByteBuffer.wrap(("answer to " + question + " from a " + peer.provider() + " peer").getBytes(StandardCharsets.UTF_8)); // (test)
    }
}
