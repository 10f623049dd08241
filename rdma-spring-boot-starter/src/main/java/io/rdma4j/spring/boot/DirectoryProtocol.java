package io.rdma4j.spring.boot;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RegionDescriptor;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * The named-region directory spoken over a connection's send/receive. Every message is
 * {@code version(1) type(1) correlationId(8)} followed by, per type:
 * <ul>
 * <li>{@code LOOKUP}: {@code nameLength(2) name(UTF-8)}</li>
 * <li>{@code FOUND}: {@link RegionDescriptor#toBytes()}</li>
 * <li>{@code NOT_FOUND}, {@code ERROR}: {@code messageLength(2) message(UTF-8)}</li>
 * </ul>
 * The correlation id pairs a reply with its request, so a client may have many lookups in flight.
 */
final class DirectoryProtocol {

    static final byte VERSION = 1;
    static final byte LOOKUP = 1;
    static final byte FOUND = 2;
    static final byte NOT_FOUND = 3;
    static final byte ERROR = 4;
    static final int HEADER = 10;
    /** Longest region name in UTF-8 bytes; keeps every request far below the smallest message size. */
    static final int MAX_NAME_BYTES = 1024;

    private DirectoryProtocol() {
    }

    record Message(byte type, long correlationId, ByteBuffer body) {
    }

    static byte[] nameBytes(String name) {
        if (name == null || name.isBlank()) {
            throw new IllegalArgumentException("region name must not be empty");
        }
        byte[] bytes = name.getBytes(StandardCharsets.UTF_8);
        if (bytes.length > MAX_NAME_BYTES) {
            throw new IllegalArgumentException("region name is " + bytes.length + " bytes in UTF-8; use at most " + MAX_NAME_BYTES);
        }
        return bytes;
    }

    static ByteBuffer lookup(long correlationId, String name) {
        byte[] bytes = nameBytes(name);
        return header(LOOKUP, correlationId, 2 + bytes.length).putShort((short) bytes.length).put(bytes).flip();
    }

    static ByteBuffer found(long correlationId, RegionDescriptor descriptor) {
        return header(FOUND, correlationId, RegionDescriptor.SERIALIZED_SIZE).put(descriptor.toBytes()).flip();
    }

    static ByteBuffer text(byte type, long correlationId, String message) {
        byte[] bytes = message.getBytes(StandardCharsets.UTF_8);
        int length = Math.min(bytes.length, MAX_NAME_BYTES);
        return header(type, correlationId, 2 + length).putShort((short) length).put(bytes, 0, length).flip();
    }

    private static ByteBuffer header(byte type, long correlationId, int bodyLength) {
        return ByteBuffer.allocate(HEADER + bodyLength).order(ByteOrder.BIG_ENDIAN).put(VERSION).put(type).putLong(correlationId);
    }

    static Message parse(ByteBuffer message) {
        ByteBuffer in = message.duplicate().order(ByteOrder.BIG_ENDIAN);
        if (in.remaining() < HEADER) {
            throw new ProtocolException("rdma4j directory message of " + in.remaining() + " bytes is shorter than its header");
        }
        byte version = in.get();
        if (version != VERSION) {
            throw new ProtocolException("rdma4j directory protocol version " + version + " is not supported (expected " + VERSION
                    + "); run the same rdma4j version on both peers");
        }
        byte type = in.get();
        long correlationId = in.getLong();
        return new Message(type, correlationId, in.slice().order(ByteOrder.BIG_ENDIAN));
    }

    static String readText(ByteBuffer body) {
        if (body.remaining() < 2) {
            throw new ProtocolException("rdma4j directory message lacks its text length");
        }
        int length = body.getShort() & 0xffff;
        if (length > body.remaining()) {
            throw new ProtocolException("rdma4j directory text of " + length + " bytes overruns the message");
        }
        byte[] bytes = new byte[length];
        body.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
