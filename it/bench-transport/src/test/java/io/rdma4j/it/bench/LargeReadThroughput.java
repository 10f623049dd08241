package io.rdma4j.it.bench;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;

import java.util.concurrent.TimeUnit;

/** {@link Transfers#LARGE} reads, {@code depth} in flight on one connection; one operation is one batch of {@code depth}. */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public class LargeReadThroughput {

    @Param({"1", "8"})
    public int depth;

    private long offset;

    @Benchmark
    public void tcp(TcpSide tcp) throws Exception {
        tcp.readBatch(tcp.connection, tcp.sink.segment(), nextOffset(), Transfers.LARGE, depth);
    }

    @Benchmark
    public void nio(NioSide nio) throws Exception {
        nio.client.readBatch(nextOffset(), Transfers.LARGE, depth);
    }

    private long nextOffset() {
        long at = offset;
        offset = Transfers.next(offset, (long) depth * Transfers.LARGE);
        return at;
    }
}
