package io.rdma4j.core.tcp;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;

/** A hand-driven peer speaking (or deliberately breaking) the tcp provider's wire protocol. */
final class RawPeer implements AutoCloseable {

    final Socket socket;
    final DataInputStream in;
    final OutputStream out;

    RawPeer(Socket socket) throws IOException {
        this.socket = socket;
        socket.setSoTimeout(20_000);
        socket.setTcpNoDelay(true);
        this.in = new DataInputStream(socket.getInputStream());
        this.out = socket.getOutputStream();
    }

    static RawPeer connect(InetSocketAddress address) throws IOException {
        return new RawPeer(new Socket(address.getAddress(), address.getPort()));
    }

    /** Sends a hello of {@code version} and returns the peer's hello. */
    TcpFrameCodec.Hello handshake(short version) throws IOException {
        sendHello(version);
        return readHello();
    }

    void sendHello(short version) throws IOException {
        ByteBuffer hello = ByteBuffer.allocate(TcpFrameCodec.HELLO_SIZE)
                .putInt(TcpFrameCodec.MAGIC).putShort(version).putShort((short) 0).put(new byte[TcpFrameCodec.NONCE_SIZE]);
        out.write(hello.array());
        out.flush();
    }

    TcpFrameCodec.Hello readHello() throws IOException {
        byte[] hello = new byte[TcpFrameCodec.HELLO_SIZE];
        in.readFully(hello);
        return TcpFrameCodec.decodeHello(ByteBuffer.wrap(hello));
    }

    void send(ByteBuffer... frames) throws IOException {
        for (ByteBuffer f : frames) {
            byte[] bytes = new byte[f.remaining()];
            f.get(bytes);
            out.write(bytes);
        }
        out.flush();
    }

    void send(byte[] raw) throws IOException {
        out.write(raw);
        out.flush();
    }

    /** Reads the next whole frame; data frames come back as {@link TcpFrameCodec.Data} and their bytes in {@code data}. */
    TcpFrameCodec.Frame readFrame(ByteBuffer data) throws IOException {
        byte[] header = new byte[TcpFrameCodec.HEADER_SIZE];
        in.readFully(header);
        TcpFrameCodec.Header h = TcpFrameCodec.decodeHeader(ByteBuffer.wrap(header), Integer.MAX_VALUE);
        byte[] body = new byte[h.length()];
        in.readFully(body);
        if ((h.type() == TcpFrameCodec.READ_DATA || h.type() == TcpFrameCodec.WRITE_DATA) && data != null) {
            data.put(body);
        }
        ByteBuffer whole = ByteBuffer.allocate(header.length + body.length).put(header).put(body).flip();
        return TcpFrameCodec.decode(whole, Integer.MAX_VALUE);
    }

    /** True when the other side closed the connection (EOF or reset) before {@code timeout} passed. */
    boolean closedByPeer() throws IOException {
        try {
            byte[] discard = new byte[64 * 1024];
            while (true) {
                if (in.read(discard) < 0) {
                    return true;
                }
            }
        } catch (EOFException | SocketException e) {
            return true;
        } catch (SocketTimeoutException e) {
            return false;
        }
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
