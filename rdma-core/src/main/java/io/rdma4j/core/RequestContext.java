package io.rdma4j.core;

/**
 * What a {@link RequestHandler} knows about a request besides its body.
 *
 * @param type       the request's message type (see {@link RequestTypes})
 * @param peer       who sent it
 * @param connection the connection it came on: handlers that keep state per connection (e.g. what the peer proved
 *                   in an earlier request) key it by this object, which is the same for every request of one
 *                   connection, and forget it once {@link RdmaConnection#isOpen()} turns false
 */
public record RequestContext(int type, Peer peer, RdmaConnection connection) {
}
