package io.rdma4j.core.internal;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RemoteRequestException;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The header the transport puts in front of every two-sided message, so plain messages, requests and
 * replies share a connection. Big-endian, {@value #SIZE} bytes:
 * {@code version(1) kind(1) status(1) reserved(1) type(4) correlationId(8)}, then the body. Plain messages
 * carry zeros after the kind; a reply's status is 0 for a body, else an error status (ordinal of
 * {@link RemoteRequestException.Status} plus one) with a UTF-8 reason as body.
 */
record MessageHeader(byte kind, int status, int type, long correlationId) {

    static final int SIZE = 16;
    static final byte VERSION = 1;
    static final byte MESSAGE = 1;
    static final byte REQUEST = 2;
    static final byte REPLY = 3;
    static final int OK = 0;
    /** Longest reason of an error reply, in UTF-8 bytes: a reason is a sentence, not a payload. */
    static final int MAX_REASON_BYTES = 512;

    /** The header alone, for a body sent after it from the caller's buffer. */
    static ByteBuffer header(byte kind, int status, int type, long correlationId) {
        ByteBuffer out = ByteBuffer.allocate(SIZE);
        out.put(VERSION).put(kind).put((byte) status).put((byte) 0).putInt(type).putLong(correlationId);
        return out.flip();
    }

    /** A buffer holding the header followed by {@code body}, ready to send. */
    static ByteBuffer frame(byte kind, int status, int type, long correlationId, ByteBuffer body) {
        ByteBuffer out = ByteBuffer.allocate(SIZE + body.remaining());
        out.put(VERSION).put(kind).put((byte) status).put((byte) 0).putInt(type).putLong(correlationId).put(body.duplicate());
        return out.flip();
    }

    static ByteBuffer errorReply(int type, long correlationId, RemoteRequestException.Status status, String reason) {
        byte[] bytes = reason.getBytes(StandardCharsets.UTF_8);
        int length = Math.min(bytes.length, MAX_REASON_BYTES);
        return frame(REPLY, status.ordinal() + 1, type, correlationId, ByteBuffer.wrap(bytes, 0, length));
    }

    /** Reads and checks the header; {@code message} is left positioned at the body. */
    static MessageHeader parse(ByteBuffer message) {
        if (message.remaining() < SIZE) {
            throw new ProtocolException("rdma4j message of " + message.remaining() + " bytes is shorter than its "
                    + SIZE + "-byte header");
        }
        byte version = message.get();
        if (version != VERSION) {
            throw new ProtocolException("peer speaks rdma4j message header version " + version + ", this side "
                    + VERSION + "; run the same rdma4j version on both peers");
        }
        byte kind = message.get();
        int status = message.get() & 0xff;
        byte reserved = message.get();
        int type = message.getInt();
        long correlationId = message.getLong();
        if (reserved != 0) {
            throw new ProtocolException("rdma4j message header has reserved byte " + reserved + " set");
        }
        switch (kind) {
            case MESSAGE -> {
                if (status != 0 || type != 0 || correlationId != 0) {
                    throw new ProtocolException("rdma4j plain message carries a status, type or correlation id");
                }
            }
            case REQUEST -> {
                if (status != 0) {
                    throw new ProtocolException("rdma4j request carries status " + status);
                }
            }
            case REPLY -> {
                if (status > RemoteRequestException.Status.values().length) {
                    throw new ProtocolException("rdma4j reply has unknown status " + status);
                }
            }
            default -> throw new ProtocolException("rdma4j message of unknown kind " + kind);
        }
        return new MessageHeader(kind, status, type, correlationId);
    }

    RemoteRequestException.Status errorStatus() {
        return RemoteRequestException.Status.values()[status - 1];
    }
}
