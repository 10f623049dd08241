package io.rdma4j.core;

import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The request handlers of a listener, one per message type ({@link RequestTypes}); immutable. A request of
 * a type without a handler gets a {@link RemoteRequestException.Status#UNKNOWN_TYPE} reply.
 *
 * <pre>{@code
 * transport.listen(address, RequestHandlers.of(RequestTypes.SPRING_REGION_LOOKUP,
 *         RequestHandler.answering((body, context) -> lookup(body, context.peer()))));
 * }</pre>
 */
public final class RequestHandlers {

    private static final RequestHandlers NONE = new RequestHandlers(Map.of());

    private final Map<Integer, RequestHandler> byType;

    private RequestHandlers(Map<Integer, RequestHandler> byType) {
        this.byType = Map.copyOf(byType);
    }

    /** No handlers: every request is answered with UNKNOWN_TYPE. */
    public static RequestHandlers none() {
        return NONE;
    }

    public static RequestHandlers of(int type, RequestHandler handler) {
        return NONE.and(type, handler);
    }

    /** These handlers plus {@code handler} for {@code type}; a type handled twice is a programming error. */
    public RequestHandlers and(int type, RequestHandler handler) {
        Objects.requireNonNull(handler, "handler");
        if (byType.containsKey(type)) {
            throw new IllegalArgumentException("request type 0x" + Integer.toHexString(type) + " already has a handler");
        }
        Map<Integer, RequestHandler> more = new HashMap<>(byType);
        more.put(type, handler);
        return new RequestHandlers(more);
    }

    /** The handler for {@code type}, or null. */
    public RequestHandler handler(int type) {
        return byType.get(type);
    }

    @Override
    public String toString() {
        return "RequestHandlers" + byType.keySet();
    }
}
