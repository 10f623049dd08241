package io.rdma4j.it.bench;

import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/** The baseline side: a {@link NioServer} over a {@link Transfers#filledRegion}, and one client connected to it. */
@State(Scope.Benchmark)
public class NioSide {

    Arena arena;
    NioServer server;
    /** Its sink has room for 8 large reads at once. */
    NioClient client;

    @Setup(Level.Trial)
    public void open() throws Exception {
        arena = Arena.ofShared();
        server = new NioServer(Transfers.filledRegion(arena));
        client = connect(8L * Transfers.LARGE);
        client.readBatch(4096, Transfers.LARGE, 1);
        Transfers.requireSame(client.sink().asSlice(0, Transfers.LARGE), server.data().asSlice(4096, Transfers.LARGE), "nio");
        ByteBuffer echoed = ByteBuffer.allocateDirect(Transfers.SMALL);
        client.roundTrip(server.data().asSlice(0, Transfers.SMALL).asByteBuffer(), echoed);
        Transfers.requireSame(MemorySegment.ofBuffer(echoed.flip()), server.data().asSlice(0, Transfers.SMALL), "nio echo");
    }

    /** A new connection whose replies land in a sink of {@code sinkBytes}. */
    NioClient connect(long sinkBytes) throws Exception {
        return new NioClient(server.address(), arena.allocate(sinkBytes, 4096));
    }

    @TearDown(Level.Trial)
    public void close() throws Exception {
        client.close();
        server.close();
        arena.close();
    }
}
