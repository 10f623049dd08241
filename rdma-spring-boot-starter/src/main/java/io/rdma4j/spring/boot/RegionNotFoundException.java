package io.rdma4j.spring.boot;

import io.rdma4j.core.RdmaException;

/** The peer has published no region of the requested name. */
public class RegionNotFoundException extends RdmaException {
    public RegionNotFoundException(String message) {
        super(message);
    }
}
