package io.rdma4j.core.internal;

import io.rdma4j.core.RdmaException;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/** How the connection's user-facing futures fail: with the operation's own exception, never a wrapper. */
final class Futures {

    private Futures() {
    }

    static Throwable unwrap(Throwable t) {
        while (t instanceof CompletionException && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    static RuntimeException rethrowable(Throwable cause) {
        return cause instanceof RuntimeException r ? r : new RdmaException(cause.getMessage(), cause);
    }

    /** Waits for a user-facing future without giving up on interrupts; throws what it failed with. */
    static void awaitResult(CompletableFuture<Void> f) {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    f.get();
                    return;
                } catch (InterruptedException e) {
                    interrupted = true;
                } catch (ExecutionException e) {
                    throw rethrowable(unwrap(e.getCause()));
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    static CompletableFuture<Void> allOf(List<CompletableFuture<Void>> futures) {
        if (futures.size() == 1) {
            return futures.getFirst();
        }
        CompletableFuture<Void> all = CompletableFuture.allOf(futures.toArray(CompletableFuture[]::new));
        // Fail with the first failure itself, not a CompletionException wrapper.
        return all.handle((v, error) -> {
            if (error != null) {
                for (CompletableFuture<Void> f : futures) {
                    if (f.isCompletedExceptionally()) {
                        throw new CompletionException(unwrap(f.exceptionNow()));
                    }
                }
                throw new CompletionException(unwrap(error));
            }
            return null;
        });
    }
}
