package io.rdma4j.core.tcp;

import java.io.IOException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectionKey;
import java.nio.channels.SocketChannel;

/**
 * A connection attached to a {@link TcpPoller}: who leads its reading between the poller's thread and its reader
 * threads. The leader leaves the lead with the poller when reading on would wait for the socket, the poller's thread
 * takes it when input arrives (or the socket has room for frames that wait), and a reader thread takes it when the
 * socket closes or the connection leaves the poller, since a closed socket is never reported by a selector.
 */
final class PolledReading {

    private final TcpConnection connection;
    private final TcpPoller poller;
    private final ReaderThreads readers;
    private final SocketChannel socket;
    private final SelectionKey key;
    private final FrameInput input;
    private final IncomingMessage incoming;
    private final ReadBounds bounds;
    private final OutgoingFrames outgoing;
    private final int maxMessageSize;
    /**
     * Frames and message bytes read per poll at most, so that one busy peer does not starve the loop's other
     * connections, and the loop receives what it read before it reads more: read ahead of the loop, messages would
     * fill the connection's inbox to its bound and hand reading to a reader thread, which polls for room.
     */
    private static final int MAX_FRAMES_PER_POLL = 64;
    private static final long MAX_MESSAGE_BYTES_PER_POLL = 1 << 20;

    private volatile boolean detached;
    /** Polling thread, within one {@link #read}: a read found the socket empty, so the next one would too. */
    private boolean socketEmpty;
    /** Polling thread, within one {@link #read}: the bytes of the messages begun. */
    private long messageBytes;
    /** Whether the poller took the last interest set on leaving (false: the key was cancelled). */
    private volatile boolean armed;

    PolledReading(TcpConnection connection, TcpPoller poller, ReaderThreads readers, SocketChannel socket,
                  FrameInput input, IncomingMessage incoming, ReadBounds bounds, OutgoingFrames outgoing,
                  int maxMessageSize) throws ClosedChannelException {
        this.connection = connection;
        this.poller = poller;
        this.readers = readers;
        this.socket = socket;
        this.input = input;
        this.incoming = incoming;
        this.bounds = bounds;
        this.outgoing = outgoing;
        this.maxMessageSize = maxMessageSize;
        this.key = poller.register(socket, this);
    }

    TcpPoller poller() {
        return poller;
    }

    /** Polling thread: the socket is ready ({@code ops}), or whole frames wait in the buffer (0). */
    void ready(int ops) {
        if (!detached && readers.takeFromPoller(this::disarm)) {
            read((ops & SelectionKey.OP_WRITE) != 0);
        }
    }

    /**
     * Polling thread, leading: reads the frames that have arrived without waiting, then leaves the lead with the
     * poller, or passes it to a reader thread where the next frame cannot be read without waiting (too long for the
     * buffer, or held back by a bound).
     */
    void read(boolean writable) {
        try {
            if (writable) {
                outgoing.socketWritable();
            }
            socketEmpty = false;
            messageBytes = 0;
            for (int n = 0; n < MAX_FRAMES_PER_POLL && messageBytes < MAX_MESSAGE_BYTES_PER_POLL; n++) {
                Next next = readFrame();
                if (next != Next.READ) {
                    outgoing.flush();
                    if (next == Next.WAIT || !readers.passToReader()) {
                        leave(outgoing.awaitsRoom()); // no reader thread to be had: the poller tries again
                    }
                    return;
                }
            }
            // fair to the loop's other connections: what is buffered or arrived is read at the next poll
            outgoing.flush();
            leaveAndReadAgain(outgoing.awaitsRoom());
        } catch (IOException | RuntimeException | InternalError e) {
            connection.pollingFailed(e);
        }
    }

    private enum Next { READ, WAIT, BLOCKS }

    private Next readFrame() throws IOException {
        if (incoming.partial() != null) {
            if (!input.tryReadFully(incoming.partial())) {
                return Next.WAIT;
            }
            incoming.deliver();
            return Next.READ;
        }
        if (bounds.atBound(0)) {
            return Next.BLOCKS;
        }
        if (!input.holdsWholeFrame() && !socketEmpty) {
            int room = input.fillRoom();
            socketEmpty = input.tryFill() < room;
        }
        TcpFrameCodec.Header h = input.peekHeader(maxMessageSize);
        if (h == null) {
            return Next.WAIT;
        }
        if (h.type() == TcpFrameCodec.SEND) {
            long cost = IncomingMessage.cost(h);
            if (!bounds.tryAdmitMessage(cost)) {
                return Next.BLOCKS;
            }
            input.skipHeader();
            messageBytes += h.length();
            if (!input.tryReadFully(incoming.begin(h, cost))) {
                return Next.WAIT;
            }
            incoming.deliver();
            return Next.READ;
        }
        if (!input.holdsWholeFrame()) {
            return FrameInput.fitsBuffer(h.length()) ? Next.WAIT : Next.BLOCKS;
        }
        input.skipHeader();
        connection.dispatch(h);
        return Next.READ;
    }

    /**
     * The leader, between frames, with no whole frame buffered: leaves the lead with the poller, which watches for
     * input and, where frames wait for room, for room. If the poller cannot hold it any more (detached, the socket
     * closed meanwhile), a reader thread takes it back.
     */
    void leave(boolean awaitsRoom) {
        int ops = SelectionKey.OP_READ | (awaitsRoom ? SelectionKey.OP_WRITE : 0);
        readers.leaveToPoller(() -> armed = poller.interest(key, ops));
        if (!armed || detached || !socket.isOpen()) {
            wake();
        }
    }

    /** Polling thread: leaves the lead with the poller, to read again at its next poll without waiting. */
    void leaveAndReadAgain(boolean awaitsRoom) {
        leave(awaitsRoom);
        poller.readAgain(this);
    }

    /** From any thread, once frames wait for room: the poller watches for room too while it holds the lead. */
    void awaitRoom() {
        readers.whilePolled(() -> poller.interest(key, SelectionKey.OP_READ | SelectionKey.OP_WRITE));
    }

    /** From any thread: a reader thread takes the lead if the poller holds it (the socket closed, or detached). */
    void wake() {
        readers.leadFromPoller(this::disarm);
    }

    /** The connection leaves the poller: its reader threads read it from now on. */
    void detach() {
        detached = true;
        wake();
        key.cancel();
        connection.pollingStopped(this);
    }

    private void disarm() {
        poller.interest(key, 0);
    }
}
