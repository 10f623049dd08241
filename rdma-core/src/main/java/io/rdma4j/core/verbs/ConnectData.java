package io.rdma4j.core.verbs;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.nativeloader.RdmaCm;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The private data each side sends with rdma_connect / rdma_accept: the one owner of its format. It announces the
 * sender's max message size and receive depth, and with a shared secret the nonce its proof is bound to.
 */
final class ConnectData {

    /**
     * Magic+version, max message size, receive depth (data credits). Version 1 is what a side
     * without a shared secret sends, as rdma4j did before authentication; version 2 adds flags and a nonce and is
     * sent with a shared secret, so that a peer too old to authenticate refuses it by its version, naming both.
     */
    static final int MAGIC_V1 = 0x52344A01; // "R4J" v1
    static final int MAGIC_V2 = 0x52344A02; // "R4J" v2
    static final int PRIVATE_DATA_LENGTH = 12;
    /** Version 2: version 1's fields, flags, the nonce (within RC's 56 bytes of connect request private data). */
    static final int PRIVATE_DATA_V2_LENGTH = PRIVATE_DATA_LENGTH + 4 + 16;
    static final int NONCE_BYTES = 16;
    /** Version 2 flag: this side has a shared secret and requires the peer to prove it. */
    static final int CONNECT_FLAG_AUTH = 1;

    /** What the peer announced when connecting; {@code nonce} is null when it does not authenticate. */
    record PeerParameters(int maxMessageSize, int receiveDepth, byte[] nonce) {
        boolean authenticates() {
            return nonce != null;
        }
    }

    /**
     * This side's parameters for rdma_connect / rdma_accept: its private data, and 7 transport retries; credits
     * make RNR impossible, so infinite RNR retry (7) is only a backstop.
     */
    static RdmaCm.ConnectionParameters connectionParameters(int maxMessageSize, int receiveDepth, byte[] nonce,
                                                          int responderResources, int initiatorDepth) {
        return new RdmaCm.ConnectionParameters(privateData(maxMessageSize, receiveDepth, nonce), responderResources,
                initiatorDepth, 7, 7);
    }

    /** This side's private data without a shared secret (version 1): magic, max message size, receive depth. */
    static byte[] privateData(int maxMessageSize, int receiveDepth) {
        return privateData(maxMessageSize, receiveDepth, null);
    }

    /**
     * This side's private data: version 1 without a nonce; with one (a shared secret) version 2, which adds the
     * flags ({@link #CONNECT_FLAG_AUTH}) and the nonce.
     */
    static byte[] privateData(int maxMessageSize, int receiveDepth, byte[] nonce) {
        if (nonce == null) {
            return ByteBuffer.allocate(PRIVATE_DATA_LENGTH).order(ByteOrder.BIG_ENDIAN)
                    .putInt(MAGIC_V1).putInt(maxMessageSize).putInt(receiveDepth).array();
        }
        if (nonce.length != NONCE_BYTES) {
            throw new IllegalArgumentException("nonce of " + nonce.length + " bytes, expected " + NONCE_BYTES);
        }
        return ByteBuffer.allocate(PRIVATE_DATA_V2_LENGTH).order(ByteOrder.BIG_ENDIAN).putInt(MAGIC_V2)
                .putInt(maxMessageSize).putInt(receiveDepth).putInt(CONNECT_FLAG_AUTH).put(nonce).array();
    }

    /**
     * Reads and checks the peer's private data; a peer announcing a receive depth or message size this side
     * cannot honour is refused before anything is sized by them.
     */
    static PeerParameters peer(byte[] privateData) {
        if (privateData.length < PRIVATE_DATA_LENGTH) {
            throw new ProtocolException("peer sent " + privateData.length + " bytes of connection data, expected "
                    + PRIVATE_DATA_LENGTH + " (not an rdma4j verbs peer?)");
        }
        ByteBuffer b = ByteBuffer.wrap(privateData).order(ByteOrder.BIG_ENDIAN);
        int magic = b.getInt();
        if (magic != MAGIC_V1 && magic != MAGIC_V2) {
            throw new ProtocolException("peer speaks protocol 0x" + Integer.toHexString(magic) + ", this side 0x"
                    + Integer.toHexString(MAGIC_V1) + " or 0x" + Integer.toHexString(MAGIC_V2)
                    + ": use the same rdma4j version on both sides");
        }
        int maxMessageSize = b.getInt();
        int receiveDepth = b.getInt();
        byte[] nonce = null;
        if (magic == MAGIC_V2) {
            if (privateData.length < PRIVATE_DATA_V2_LENGTH) {
                throw new ProtocolException("peer sent " + privateData.length + " bytes of version 2 connection data,"
                        + " expected " + PRIVATE_DATA_V2_LENGTH + ": not an rdma4j verbs peer, or a corrupted one");
            }
            int flags = b.getInt();
            if ((flags & ~CONNECT_FLAG_AUTH) != 0) {
                throw new ProtocolException("peer announced unknown connection flags 0x" + Integer.toHexString(flags)
                        + ": use the same rdma4j version on both sides");
            }
            if ((flags & CONNECT_FLAG_AUTH) != 0) {
                nonce = new byte[NONCE_BYTES];
                b.get(nonce);
            }
        }
        if (maxMessageSize < 1 || maxMessageSize > Integer.MAX_VALUE - MessageChannel.HEADER) {
            throw new ProtocolException("peer announced a max-message-size of " + maxMessageSize
                    + " bytes in its connection data: not an rdma4j verbs peer, or a corrupted one");
        }
        if (receiveDepth < VerbsOptions.MIN_RECEIVE_DEPTH || receiveDepth > VerbsOptions.MAX_RECEIVE_DEPTH) {
            throw new ProtocolException("peer announced a receive depth of " + receiveDepth + " in its connection data, outside ["
                    + VerbsOptions.MIN_RECEIVE_DEPTH + ", " + VerbsOptions.MAX_RECEIVE_DEPTH
                    + "]: not an rdma4j verbs peer, or a corrupted one");
        }
        return new PeerParameters(maxMessageSize, receiveDepth, nonce);
    }

    private ConnectData() {
    }
}
