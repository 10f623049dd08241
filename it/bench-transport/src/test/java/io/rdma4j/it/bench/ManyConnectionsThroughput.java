package io.rdma4j.it.bench;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RegisteredRegion;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;

import java.util.concurrent.TimeUnit;

/**
 * {@link #CONNECTIONS} connections to one server, one per benchmark thread, each with {@link #IN_FLIGHT} reads of
 * {@link #READ} bytes in flight: one operation is one batch, {@code IN_FLIGHT * READ} = 1 MiB, and JMH sums the
 * threads, so the score in ops/s is the aggregate MiB/s.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Threads(ManyConnectionsThroughput.CONNECTIONS)
public class ManyConnectionsThroughput {

    static final int CONNECTIONS = 64;
    static final int IN_FLIGHT = 16;
    static final int READ = 64 * 1024;
    private static final long BATCH = (long) IN_FLIGHT * READ;

    @State(Scope.Thread)
    public static class TcpConnection {
        RdmaConnection connection;
        RegisteredRegion sink;
        long offset;

        @Setup(Level.Trial)
        public void open(TcpSide tcp) throws Exception {
            connection = tcp.connect();
            sink = tcp.sink(BATCH);
        }

        @TearDown(Level.Trial)
        public void close() {
            connection.close();
        }
    }

    @State(Scope.Thread)
    public static class NioConnection {
        NioClient client;
        long offset;

        @Setup(Level.Trial)
        public void open(NioSide nio) throws Exception {
            client = nio.connect(BATCH);
        }

        @TearDown(Level.Trial)
        public void close() throws Exception {
            client.close();
        }
    }

    @Benchmark
    public void tcp(TcpSide tcp, TcpConnection mine) throws Exception {
        tcp.readBatch(mine.connection, mine.sink.segment(), mine.offset, READ, IN_FLIGHT);
        mine.offset = Transfers.next(mine.offset, BATCH);
    }

    @Benchmark
    public void nio(NioConnection mine) throws Exception {
        mine.client.readBatch(mine.offset, READ, IN_FLIGHT);
        mine.offset = Transfers.next(mine.offset, BATCH);
    }
}
