package io.rdma4j.core;

/**
 * What a {@link RequestHandler} knows about a request besides its body.
 *
 * @param type the request's message type (see {@link RequestTypes})
 * @param peer who sent it
 */
public record RequestContext(int type, Peer peer) {
}
