package io.rdma4j.spring.boot;

import io.rdma4j.core.Access;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A peer whose region lookups lie: malformed replies and lengths that would size a file or memory are refused
 * before anything is created or allocated.
 */
class LyingPeerTest {

    private static final TransportConfig TCP = TransportConfig.builder().provider("tcp").build();

    @Test
    void lyingLookupRepliesCreateNoFileAndAllocateNothing(@TempDir Path dir) throws Exception {
        AtomicReference<byte[]> reply = new AtomicReference<>();
        // The arena closes last: the peer's responder may still hold the published memory for a serve that
        // finishes just after the reader has its bytes, and closing the transports first waits for it.
        try (Arena arena = Arena.ofShared();
             RdmaTransport peerTransport = RdmaTransport.open(TCP);
             RdmaTransport transport = RdmaTransport.open(TCP);
             RdmaTemplate template = new RdmaTemplate(transport)) {
            RdmaListener listener = peerTransport.listen(new InetSocketAddress("127.0.0.1", 0), RequestHandlers.of(
                    RequestTypes.SPRING_REGION_LOOKUP, RequestHandler.answering((body, context) -> ByteBuffer.wrap(reply.get()))));
            InetSocketAddress peer = listener.localAddress();
            MemorySegment data = arena.allocate(4096, 64);
            for (int i = 0; i < 4096; i++) {
                data.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 13));
            }
            RegisteredRegion published = peerTransport.register(data, Access.remoteRead());
            RegionDescriptor honest = published.descriptor();
            Path target = dir.resolve("region.bin");

            reply.set(new byte[7]);
            assertThatThrownBy(() -> template.readToFile(peer, "r", target)).isInstanceOf(ProtocolException.class)
                    .hasMessageContaining("with 7 bytes");
            byte[] padded = new byte[RegionDescriptor.SERIALIZED_SIZE + 8];
            System.arraycopy(honest.toBytes(), 0, padded, 0, RegionDescriptor.SERIALIZED_SIZE);
            reply.set(padded);
            assertThatThrownBy(() -> template.readToFile(peer, "r", target)).isInstanceOf(ProtocolException.class);
            reply.set(new byte[RegionDescriptor.SERIALIZED_SIZE]);
            assertThatThrownBy(() -> template.readToFile(peer, "r", target)).isInstanceOf(ProtocolException.class)
                    .hasMessageContaining("malformed descriptor");
            reply.set(new RegionDescriptor("verbs", honest.address(), honest.length(), honest.key(), honest.access()).toBytes());
            assertThatThrownBy(() -> template.readToFile(peer, "r", target)).isInstanceOf(ProtocolException.class)
                    .hasMessageContaining("cannot read");
            assertThat(target).as("no file for a malformed reply").doesNotExist();

            // a well-formed descriptor claiming far more than the disk, the memory or the caller's limit
            reply.set(new RegionDescriptor(honest.provider(), honest.address(), 1L << 60, honest.key(), honest.access()).toBytes());
            assertThatThrownBy(() -> template.readToFile(peer, "r", target)).isInstanceOf(RegionTooLargeException.class)
                    .hasMessageContaining("usable space");
            assertThat(target).as("no file for a region larger than the disk").doesNotExist();
            assertThatThrownBy(() -> template.read(peer, "r", arena)).isInstanceOf(RegionTooLargeException.class);
            reply.set(honest.toBytes());
            assertThatThrownBy(() -> template.readToFile(peer, "r", target, 1000)).isInstanceOf(RegionTooLargeException.class)
                    .hasMessageContaining("4096 bytes, more than the read's limit (1000 bytes)");
            assertThatThrownBy(() -> template.read(peer, "r", arena, 1000)).isInstanceOf(RegionTooLargeException.class);
            assertThat(target).doesNotExist();
            assertThat(transport.registeredRegions()).as("registrations after the refused reads").isZero();

            // the honest reply still reads, on the same connection
            assertThat(template.readToFile(peer, "r", target)).isEqualTo(4096);
            assertThat(MemorySegment.ofArray(Files.readAllBytes(target)).mismatch(data)).isEqualTo(-1);
        }
    }
}
