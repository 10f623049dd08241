package io.rdma4j.core.tcp;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RemoteAccessException;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The tcp provider's wire format. Everything a peer sends is validated here before anything is
 * allocated for it, so a hostile or broken peer can only cause a {@link ProtocolException}.
 *
 * <p>Handshake (each side sends one, then reads the peer's): magic "R4JT"(4) version(2) flags(2) nonce(32).
 * With a shared secret the connecting side then sends its HMAC proof (32); the listener answers with a verdict
 * byte and, only if it accepted, its own proof (32); the connecting side ends with its verdict byte.
 *
 * <p>Frame: header type(1) flags(1) reserved(2, zero) payloadLength(4) requestId(8), big-endian, then
 * the payload. Requests carry address(8) length(8) key(8); data frames carry raw bytes that the
 * connection moves straight between socket and registered memory.
 */
public final class TcpFrameCodec {

    public static final int MAGIC = 0x52344A54; // "R4JT"
    public static final short VERSION = 1;
    public static final int NONCE_SIZE = 32;
    public static final int HELLO_PREFIX_SIZE = 8;
    public static final int HELLO_SIZE = HELLO_PREFIX_SIZE + NONCE_SIZE;
    public static final int PROOF_SIZE = 32;
    public static final int FLAG_AUTH = 1;

    public static final int HEADER_SIZE = 16;
    public static final int REQUEST_BODY_SIZE = 24;
    /** Largest data chunk any peer may send in one frame; the chunk-size option cannot exceed it. */
    public static final int MAX_DATA_CHUNK = 16 << 20;
    /** Longest error text a responder sends (longer text is truncated). */
    public static final int MAX_ERROR_MESSAGE = 1024;

    public static final byte READ_REQ = 1;
    public static final byte READ_DATA = 2;
    public static final byte READ_DONE = 3;
    public static final byte WRITE_REQ = 4;
    public static final byte WRITE_DATA = 5;
    public static final byte WRITE_ACK = 6;
    public static final byte ERROR = 7;
    public static final byte SEND = 8;
    public static final byte CLOSE = 9;
    /** Keep-alive: sent after a quarter of the idle timeout without traffic, so a live peer is never idle. */
    public static final byte PING = 10;

    private TcpFrameCodec() {
    }

    /** A validated frame header. */
    public record Header(byte type, int length, long id) {
    }

    /** A fully decoded frame (what {@link #decode} returns; the connection decodes piecewise). */
    public sealed interface Frame permits Request, Data, Done, Error, Message, Close, Ping {
    }

    /** READ_REQ or WRITE_REQ. */
    public record Request(byte type, long id, long address, long length, long key) implements Frame {
    }

    /** READ_DATA or WRITE_DATA of {@code length} bytes (the bytes themselves are skipped by {@link #decode}). */
    public record Data(byte type, long id, int length) implements Frame {
    }

    /** READ_DONE or WRITE_ACK. */
    public record Done(byte type, long id) implements Frame {
    }

    public record Error(long id, RemoteAccessException.Reason reason, String message) implements Frame {
    }

    public record Message(ByteBuffer payload) implements Frame {
    }

    public record Close() implements Frame {
    }

    public record Ping() implements Frame {
    }

    /** The peer's hello. */
    public record Hello(short version, int flags, byte[] nonce) {
        public boolean wantsAuth() {
            return (flags & FLAG_AUTH) != 0;
        }
    }

    // ---- handshake ----

    public static ByteBuffer encodeHello(int flags, byte[] nonce) {
        return ByteBuffer.allocate(HELLO_SIZE).putInt(MAGIC).putShort(VERSION).putShort((short) flags).put(nonce).flip();
    }

    /** Checks magic and version from the first {@link #HELLO_PREFIX_SIZE} bytes; returns the flags. */
    public static int decodeHelloPrefix(ByteBuffer prefix) {
        int magic = prefix.getInt();
        if (magic != MAGIC) {
            throw new ProtocolException("peer is not an rdma4j tcp endpoint (bad magic 0x" + Integer.toHexString(magic)
                    + "); check that the address points to an rdma4j listener");
        }
        short version = prefix.getShort();
        if (version != VERSION) {
            throw new ProtocolException("peer speaks rdma4j tcp protocol version " + version + ", this side speaks "
                    + VERSION + "; run compatible rdma4j versions on both sides");
        }
        int flags = prefix.getShort() & 0xffff;
        if ((flags & ~FLAG_AUTH) != 0) {
            throw new ProtocolException("peer sent unknown handshake flags 0x" + Integer.toHexString(flags));
        }
        return flags;
    }

    /** Decodes a whole hello (prefix and nonce). */
    public static Hello decodeHello(ByteBuffer in) {
        if (in.remaining() < HELLO_SIZE) {
            throw new ProtocolException("truncated handshake: " + in.remaining() + " of " + HELLO_SIZE + " bytes");
        }
        int flags = decodeHelloPrefix(in);
        byte[] nonce = new byte[NONCE_SIZE];
        in.get(nonce);
        return new Hello(VERSION, flags, nonce);
    }

    // ---- frames ----

    public static void putHeader(ByteBuffer out, byte type, int length, long id) {
        out.put(type).put((byte) 0).putShort((short) 0).putInt(length).putLong(id);
    }

    /**
     * Whether {@code in} holds a whole frame from its position on: a header and the payload it announces. Nothing
     * is validated (the header is decoded when the frame is read); a negative length reads as not whole.
     */
    public static boolean holdsWholeFrame(ByteBuffer in) {
        int n = in.remaining();
        if (n < HEADER_SIZE) {
            return false;
        }
        int payload = in.getInt(in.position() + 4);
        return payload >= 0 && n - HEADER_SIZE >= payload;
    }

    /**
     * Decodes and validates a header from exactly {@link #HEADER_SIZE} bytes: known type, zero reserved
     * bits, and a payload length allowed for the type (so the caller may allocate it).
     */
    public static Header decodeHeader(ByteBuffer in, int maxMessageSize) {
        byte type = in.get();
        int flags = in.get();
        int reserved = in.getShort();
        int length = in.getInt();
        long id = in.getLong();
        if (flags != 0 || reserved != 0) {
            throw new ProtocolException("malformed frame: non-zero reserved header bits");
        }
        boolean ok = switch (type) {
            case READ_REQ, WRITE_REQ -> length == REQUEST_BODY_SIZE;
            case READ_DATA, WRITE_DATA -> length > 0 && length <= MAX_DATA_CHUNK;
            case READ_DONE, WRITE_ACK, CLOSE, PING -> length == 0;
            case ERROR -> length >= 1 && length <= 1 + MAX_ERROR_MESSAGE;
            case SEND -> length >= 0 && length <= maxMessageSize;
            default -> throw new ProtocolException("malformed frame: unknown frame type " + type);
        };
        if (!ok) {
            throw new ProtocolException("malformed frame: payload length " + Integer.toUnsignedString(length)
                    + " is not allowed for frame type " + type + (type == SEND ? " (max-message-size " + maxMessageSize
                    + "; configure the same max-message-size on both sides)" : ""));
        }
        return new Header(type, length, id);
    }

    public static Request decodeRequest(Header h, ByteBuffer body) {
        return new Request(h.type(), h.id(), body.getLong(), body.getLong(), body.getLong());
    }

    public static Error decodeError(Header h, ByteBuffer body) {
        int code = body.get();
        RemoteAccessException.Reason[] reasons = RemoteAccessException.Reason.values();
        if (code < 1 || code > reasons.length) {
            throw new ProtocolException("malformed error frame: unknown reason code " + code);
        }
        byte[] text = new byte[body.remaining()];
        body.get(text);
        return new Error(h.id(), RemoteAccessException.Reason.fromCode(code), new String(text, StandardCharsets.UTF_8));
    }

    public static ByteBuffer encodeRequest(byte type, long id, long address, long length, long key) {
        ByteBuffer b = ByteBuffer.allocate(HEADER_SIZE + REQUEST_BODY_SIZE);
        putHeader(b, type, REQUEST_BODY_SIZE, id);
        return b.putLong(address).putLong(length).putLong(key).flip();
    }

    public static ByteBuffer encodeError(long id, RemoteAccessException.Reason reason, String message) {
        byte[] text = message.getBytes(StandardCharsets.UTF_8);
        int n = Math.min(text.length, MAX_ERROR_MESSAGE);
        ByteBuffer b = ByteBuffer.allocate(HEADER_SIZE + 1 + n);
        putHeader(b, ERROR, 1 + n, id);
        return b.put(reason.code()).put(text, 0, n).flip();
    }

    public static ByteBuffer encodeEmpty(byte type, long id) {
        ByteBuffer b = ByteBuffer.allocate(HEADER_SIZE);
        putHeader(b, type, 0, id);
        return b.flip();
    }

    public static ByteBuffer encodeSendHeader(int length) {
        ByteBuffer b = ByteBuffer.allocate(HEADER_SIZE);
        putHeader(b, SEND, length, 0);
        return b.flip();
    }

    /**
     * Decodes one whole frame from {@code in}, advancing it; null (position unchanged) when the frame is
     * not complete yet. Uses the same validation as the connection's reader.
     */
    public static Frame decode(ByteBuffer in, int maxMessageSize) {
        if (in.remaining() < HEADER_SIZE) {
            return null;
        }
        int start = in.position();
        Header h = decodeHeader(in.slice(start, HEADER_SIZE), maxMessageSize);
        if (in.remaining() - HEADER_SIZE < h.length()) {
            return null;
        }
        ByteBuffer body = in.slice(start + HEADER_SIZE, h.length());
        in.position(start + HEADER_SIZE + h.length());
        return switch (h.type()) {
            case READ_REQ, WRITE_REQ -> decodeRequest(h, body);
            case READ_DATA, WRITE_DATA -> new Data(h.type(), h.id(), h.length());
            case READ_DONE, WRITE_ACK -> new Done(h.type(), h.id());
            case ERROR -> decodeError(h, body);
            case SEND -> new Message(ByteBuffer.allocate(h.length()).put(body).flip());
            case CLOSE -> new Close();
            case PING -> new Ping();
            default -> throw new IllegalStateException("unreachable: header validated");
        };
    }
}
