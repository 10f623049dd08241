package io.rdma4j.core.spi;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.function.BooleanSupplier;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A provider's connection. The transport has already checked bounds against the descriptor, rights,
 * and that local memory lies in a live registration (passed as {@code localRegion}); lengths are at
 * most {@link ProviderTransport#maxOperationLength()}. The provider completes the futures from its own
 * threads; the transport moves user callbacks off them.
 */
public interface ProviderConnection {

    /** Starts delivering events; called once, before any operation. */
    void start(ConnectionEvents events);

    /** One-sided read of {@code sink.byteSize()} bytes at remote virtual address {@code remoteAddress}. */
    CompletableFuture<Void> read(long remoteAddress, long remoteKey, MemorySegment sink, ProviderRegion localRegion);

    /** Several reads; providers that can post them together override this. */
    default List<CompletableFuture<Void>> readAll(List<ProviderRead> reads) {
        List<CompletableFuture<Void>> results = new ArrayList<>(reads.size());
        for (ProviderRead r : reads) {
            results.add(read(r.remoteAddress(), r.remoteKey(), r.sink(), r.localRegion()));
        }
        return results;
    }

    /**
     * Lets a caller about to wait for something this connection's threads bring about check for it ({@code done})
     * briefly without sleeping, where the provider finds that cheaper than being woken; returns at once by default.
     */
    default void spinWait(BooleanSupplier done) {
    }

    /**
     * Called from {@link ConnectionEvents#onMessage} on the provider's thread: where the provider can have another
     * thread read the connection from now on, it does so and returns true, and the calling thread may then run
     * application code that blocks before returning. False (the default): the caller returns promptly, and such code
     * runs elsewhere.
     */
    default boolean handOffReading() {
        return false;
    }

    /**
     * Waits until {@code operation} (a future this connection returned) is done, or until
     * {@code deadlineNanos} on the {@link System#nanoTime()} scale; false at the deadline. Providers that can
     * reap completions in the calling thread override this, so a waiting caller needs no thread hand-off.
     * Interrupts do not end the wait; the flag is restored.
     */
    default boolean await(CompletableFuture<?> operation, long deadlineNanos) {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    operation.get(Math.max(0, deadlineNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
                    return true;
                } catch (ExecutionException | CancellationException e) {
                    return true;
                } catch (TimeoutException e) {
                    return false;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** One-sided write of {@code source} at remote virtual address {@code remoteAddress}. */
    CompletableFuture<Void> write(long remoteAddress, long remoteKey, MemorySegment source, ProviderRegion localRegion);

    /** Sends a message of at most the configured max message size (already checked). */
    CompletableFuture<Void> send(ByteBuffer message);

    /**
     * Sends {@code header} followed by {@code body} as one message (their sizes already checked); the provider may
     * read both until the future completes, and the caller keeps them unchanged until then. By default they are
     * copied into one buffer first.
     */
    default CompletableFuture<Void> send(ByteBuffer header, ByteBuffer body) {
        ByteBuffer message = ByteBuffer.allocate(header.remaining() + body.remaining());
        return send(message.put(header.duplicate()).put(body.duplicate()).flip());
    }

    /**
     * {@link #send(ByteBuffer, ByteBuffer)} that, with {@code more}, the provider may hold back until a send without
     * it or {@link #flushSends()}, to write them together. By default every send goes out at once.
     */
    default CompletableFuture<Void> send(ByteBuffer header, ByteBuffer body, boolean more) {
        return send(header, body);
    }

    /** Writes the sends held back by {@code more}; on any thread. */
    default void flushSends() {
    }

    /** Whether {@link #send(ByteBuffer, ByteBuffer)} reads the caller's buffers as they are, without copying them first. */
    default boolean sendsInPlace() {
        return false;
    }

    /**
     * The application took a queued message ({@link ConnectionEvents#unreceivedMessageBytes()} fell): a provider that
     * holds its reading back at the inbox bound may read on. Called often; must return at once.
     */
    default void messageTaken() {
    }

    InetSocketAddress remoteAddress();

    InetSocketAddress localAddress();

    /**
     * Who the peer proved to be when connecting, e.g. the subject of its verified TLS certificate; empty when
     * the provider authenticates no identity (a shared secret proves membership, not who).
     */
    default Optional<String> peerPrincipal() {
        return Optional.empty();
    }

    /** Closes; pending operations fail with {@link io.rdma4j.core.ConnectionClosedException}; then {@code onClosed}. Idempotent. */
    void close();

    /** One read of a batch. */
    record ProviderRead(long remoteAddress, long remoteKey, MemorySegment sink, ProviderRegion localRegion) {
    }
}
