package io.rdma4j.spark;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RegionDescriptor;

import java.lang.foreign.MemorySegment;
import java.lang.reflect.Proxy;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A peer connection whose one-sided READs the test answers: each read is recorded with its future. With
 * {@link #peerBytes} set, a read is answered at once with those bytes from its offset; otherwise the test completes it.
 */
final class AnsweredReads {

    /** One READ as issued: {@code remoteOffset} of {@code remote} into {@code sink}. */
    record Read(RegionDescriptor remote, long remoteOffset, MemorySegment sink, CompletableFuture<Void> done) {

        /** Completes this read with {@code bytes} written to its sink. */
        void answer(byte[] bytes) {
            MemorySegment.copy(MemorySegment.ofArray(bytes), 0, sink, 0, sink.byteSize());
            done.complete(null);
        }
    }

    final List<Read> reads = new CopyOnWriteArrayList<>();
    /** The whole remote region, from offset 0, when reads are answered at once; null when the test answers them. */
    volatile byte[] peerBytes;
    /** When set, every read fails with it. */
    volatile Throwable failure;

    final RdmaConnection connection = (RdmaConnection) Proxy.newProxyInstance(RdmaConnection.class.getClassLoader(),
            new Class<?>[] {RdmaConnection.class}, (proxy, method, args) -> switch (method.getName()) {
                case "read" -> issue(args).done();
                case "readAndWait" -> {
                    try {
                        issue(args).done().join(); // as the real one: returns once the sink is no longer written
                    } catch (CompletionException e) {
                        throw e.getCause() instanceof RuntimeException r ? r : new RdmaException(e.getCause().toString(), e.getCause());
                    }
                    yield null;
                }
                default -> throw new UnsupportedOperationException(method.getName());
            });

    private Read issue(Object[] args) {
        Read read = new Read((RegionDescriptor) args[0], (Long) args[1], (MemorySegment) args[2], new CompletableFuture<>());
        reads.add(read);
        if (failure != null) {
            read.done().completeExceptionally(failure);
        } else if (peerBytes != null) {
            byte[] at = java.util.Arrays.copyOfRange(peerBytes, (int) read.remoteOffset(),
                    (int) (read.remoteOffset() + read.sink().byteSize()));
            read.answer(at);
        }
        return read;
    }
}
