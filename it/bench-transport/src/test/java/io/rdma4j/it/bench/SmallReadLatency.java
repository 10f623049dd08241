package io.rdma4j.it.bench;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;

import java.util.concurrent.TimeUnit;

/** One {@link Transfers#SMALL} read at a time, each waited for: latency percentiles. */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class SmallReadLatency {

    private long offset;

    @Benchmark
    public void tcpReadAndWait(TcpSide tcp) {
        tcp.connection.readAndWait(tcp.remote, nextOffset(), tcp.sink.segment().asSlice(0, Transfers.SMALL));
    }

    @Benchmark
    public void tcpReadGet(TcpSide tcp) throws Exception {
        tcp.connection.read(tcp.remote, nextOffset(), tcp.sink.segment().asSlice(0, Transfers.SMALL)).get();
    }

    @Benchmark
    public void nio(NioSide nio) throws Exception {
        nio.client.readBatch(nextOffset(), Transfers.SMALL, 1);
    }

    private long nextOffset() {
        long at = offset;
        offset = Transfers.next(offset, Transfers.STRIDE);
        return at;
    }
}
