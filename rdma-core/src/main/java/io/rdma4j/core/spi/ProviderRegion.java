package io.rdma4j.core.spi;

/** A provider's registration of one region. */
public interface ProviderRegion {

    /** The remote key peers present; software providers must use at least 64 random bits. */
    long key();

    /** Local key for verbs work requests (0 where not applicable). */
    default long localKey() {
        return 0;
    }

    /**
     * Revokes the key at once and returns only when the provider no longer touches the memory (in-flight
     * serving of this region finished or aborted). Idempotent.
     */
    void close();
}
