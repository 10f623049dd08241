package io.rdma4j.spring.boot;

import io.rdma4j.core.RdmaException;

/** The peer's region is larger than the read may take: nothing was allocated or created for it. */
public class RegionTooLargeException extends RdmaException {
    public RegionTooLargeException(String message) {
        super(message);
    }
}
