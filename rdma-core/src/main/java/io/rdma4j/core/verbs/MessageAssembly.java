package io.rdma4j.core.verbs;

import io.rdma4j.core.ProtocolException;

import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * Puts a connection's message together from its fragments, which an RC queue pair delivers in order. It holds only
 * the bytes that came, never more than this side's max-message-size, whatever length a peer means to send.
 */
final class MessageAssembly {

    private final int maxMessageSize;
    private byte[] bytes = new byte[0];
    private int length;

    MessageAssembly(int maxMessageSize) {
        this.maxMessageSize = maxMessageSize;
    }

    /**
     * Adds a data or proof fragment. Returns the message its last fragment completes, else {@link
     * MessageChannel.Received#PARTIAL}.
     *
     * @throws ProtocolException when the message grows beyond this side's max-message-size
     */
    MessageChannel.Received add(MessageChannel.Fragment fragment) {
        ByteBuffer b = fragment.bytes();
        boolean more = (fragment.flag() & MessageChannel.FLAG_MORE) != 0;
        boolean proof = (fragment.flag() & MessageChannel.KIND) == MessageChannel.FLAG_PROOF;
        if (length == 0 && !more) {
            return new MessageChannel.Received(fragment.returnedCredits(), b, proof); // the usual: one fragment
        }
        if (proof) {
            throw new ProtocolException("peer sent a proof of the shared secret inside a message: not an rdma4j verbs"
                    + " peer, or a corrupted one");
        }
        int n = b.remaining();
        if ((long) length + n > maxMessageSize) {
            throw new ProtocolException("peer sent a message of more than " + (length + n)
                    + " bytes, over this side's max-message-size of " + maxMessageSize + ": it ignores the limit");
        }
        if (length + n > bytes.length) {
            bytes = Arrays.copyOf(bytes, Math.min(maxMessageSize, Math.max(2 * bytes.length, length + n)));
        }
        b.get(bytes, length, n);
        length += n;
        if (more) {
            return MessageChannel.Received.PARTIAL;
        }
        ByteBuffer whole = ByteBuffer.wrap(Arrays.copyOf(bytes, length));
        bytes = new byte[0];
        length = 0;
        return new MessageChannel.Received(fragment.returnedCredits(), whole, false);
    }
}
