package io.rdma4j.core;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Memory of {@code Arena.ofConfined()} is refused where it enters the transport, with the fix in the message, rather
 * than failing later with a WrongThreadException on one of the transport's threads.
 */
class ConfinedMemoryTest {

    private static final String FIX = "allocate it from Arena.ofShared(), Arena.ofAuto() or Arena.global()";

    private final RdmaTransport server = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
    private final RdmaTransport client = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
    private final Arena shared = Arena.ofShared();

    @AfterEach
    void close() {
        client.close();
        server.close();
        shared.close();
    }

    @Test
    void registeringConfinedMemoryIsRefused() {
        try (Arena confined = Arena.ofConfined()) {
            assertThatThrownBy(() -> client.register(confined.allocate(4096), Access.readSink()))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("confined to one thread").hasMessageContaining(FIX);
        }
        assertThat(client.registeredRegions()).isZero();
    }

    @Test
    void aConfinedSinkFailsTheReadAtOnceAndASharedOneWorks() throws Exception {
        RegisteredRegion published = server.register(shared.allocate(4096), Access.remoteRead());
        published.segment().fill((byte) 7);
        MemorySegment memory = shared.allocate(4096);
        client.register(memory, Access.readSink());
        RdmaListener listener = server.listen(new InetSocketAddress("127.0.0.1", 0), c -> { });
        try (RdmaConnection connection = client.connect(listener.localAddress()).get(10, TimeUnit.SECONDS);
             Arena confined = Arena.ofConfined()) {
            // The same registered bytes, but usable by this thread only.
            MemorySegment confinedView = memory.reinterpret(confined, null);
            assertThatThrownBy(() -> connection.read(published.descriptor(), 0, confinedView).get(10, TimeUnit.SECONDS))
                    .isInstanceOf(ExecutionException.class).cause()
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(FIX);
            assertThatThrownBy(() -> connection.readAndWait(published.descriptor(), 0, confinedView))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(FIX);

            connection.read(published.descriptor(), 0, memory).get(10, TimeUnit.SECONDS);
            assertThat(memory.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 4095)).isEqualTo((byte) 7);
        }
    }
}
