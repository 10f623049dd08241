package io.rdma4j.it.bench;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

import java.nio.ByteBuffer;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * A request of {@code size} bytes answered with the same bytes: the control channel's request API against a NIO
 * write of the same message and a read of its echo. Latency percentiles, one round trip at a time.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class RequestRoundTrip {

    /** Up to the maximum message size, 64 KiB by default. */
    @Param({"64"})
    public int size;

    private ByteBuffer body;
    private ByteBuffer reply;

    @Setup(Level.Trial)
    public void message() {
        byte[] bytes = new byte[size];
        ThreadLocalRandom.current().nextBytes(bytes);
        body = ByteBuffer.allocateDirect(size).put(bytes).flip();
        reply = ByteBuffer.allocateDirect(size);
    }

    @Benchmark
    public ByteBuffer tcpRequest(TcpSide tcp) {
        return tcp.connection.requestAndWait(Transfers.ECHO, body.duplicate());
    }

    @Benchmark
    public ByteBuffer nio(NioSide nio) throws Exception {
        nio.client.roundTrip(body, reply);
        return reply;
    }
}
