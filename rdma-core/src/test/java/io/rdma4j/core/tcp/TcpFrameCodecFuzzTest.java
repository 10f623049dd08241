package io.rdma4j.core.tcp;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RemoteAccessException;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Random and mutated byte streams through the frame and handshake decoders: the only failure allowed
 * is {@link ProtocolException}, and nothing decoded may be larger than the limits (so nothing huge is
 * ever allocated). Seed: {@code -Drdma4j.fuzz.seed=N} to replay; failures print it.
 */
class TcpFrameCodecFuzzTest {

    private static final long SEED = Long.getLong("rdma4j.fuzz.seed", 20261122L);
    private static final int MAX_MESSAGE = 65536;
    private static final int ROUNDS = 20_000;

    @Test
    void mutatedAndRandomFramesYieldValidFramesOrProtocolExceptionOnly() {
        Random random = new Random(SEED);
        int valid = 0;
        int refused = 0;
        for (int round = 0; round < ROUNDS; round++) {
            byte[] input = random.nextInt(4) == 0 ? randomBytes(random) : mutate(random, validStream(random));
            try {
                valid += decodeAll(input);
            } catch (ProtocolException expected) {
                refused++;
            } catch (Throwable unexpected) {
                throw new AssertionError("round " + round + " (seed " + SEED + ") failed with " + unexpected, unexpected);
            }
        }
        // both outcomes must actually occur, or the fuzzer is not exercising the decoder
        assertThat(valid).as("valid frames decoded (seed " + SEED + ")").isGreaterThan(ROUNDS / 4);
        assertThat(refused).as("streams refused (seed " + SEED + ")").isGreaterThan(ROUNDS / 10);
    }

    @Test
    void aWholeFrameIsAHeaderAndAllThePayloadItAnnounces() {
        ByteBuffer request = TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, 9, 4096, 64, 77);
        int whole = request.remaining();
        ByteBuffer buffer = ByteBuffer.allocate(whole + 3).put(new byte[3]).put(request).flip().position(3);
        assertThat(TcpFrameCodec.holdsWholeFrame(buffer)).isTrue();
        assertThat(TcpFrameCodec.holdsWholeFrame(buffer.slice(3, whole - 1))).as("payload short by a byte").isFalse();
        assertThat(TcpFrameCodec.holdsWholeFrame(buffer.slice(3, TcpFrameCodec.HEADER_SIZE - 1))).as("part of a header").isFalse();
        assertThat(TcpFrameCodec.holdsWholeFrame(TcpFrameCodec.encodeEmpty(TcpFrameCodec.READ_DONE, 1))).isTrue();
        ByteBuffer lying = ByteBuffer.allocate(TcpFrameCodec.HEADER_SIZE).put(0, TcpFrameCodec.SEND).putInt(4, -1);
        assertThat(TcpFrameCodec.holdsWholeFrame(lying)).as("a negative length").isFalse();
    }

    @Test
    void validFramesRoundTrip() {
        Random random = new Random(SEED);
        for (int i = 0; i < 1000; i++) {
            long id = random.nextLong();
            long address = random.nextLong();
            long length = random.nextLong();
            long key = random.nextLong();
            assertThat(TcpFrameCodec.decode(TcpFrameCodec.encodeRequest(TcpFrameCodec.WRITE_REQ, id, address, length, key), MAX_MESSAGE))
                    .isEqualTo(new TcpFrameCodec.Request(TcpFrameCodec.WRITE_REQ, id, address, length, key));
            RemoteAccessException.Reason reason = RemoteAccessException.Reason.values()[random.nextInt(5)];
            assertThat(TcpFrameCodec.decode(TcpFrameCodec.encodeError(id, reason, "why " + i), MAX_MESSAGE))
                    .isEqualTo(new TcpFrameCodec.Error(id, reason, "why " + i));
        }
        assertThat(TcpFrameCodec.decode(TcpFrameCodec.encodeError(1, RemoteAccessException.Reason.OUT_OF_RANGE, "x".repeat(5000)),
                MAX_MESSAGE)).satisfies(f -> assertThat(((TcpFrameCodec.Error) f).message()).hasSize(TcpFrameCodec.MAX_ERROR_MESSAGE));
        ByteBuffer partial = TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, 1, 2, 3, 4).limit(30);
        assertThat(TcpFrameCodec.decode(partial, MAX_MESSAGE)).as("incomplete frame").isNull();
        assertThat(partial.position()).isZero();
    }

    @Test
    void mutatedHandshakesYieldAHelloOrProtocolExceptionOnly() {
        Random random = new Random(SEED + 1);
        int accepted = 0;
        for (int round = 0; round < 5000; round++) {
            byte[] nonce = new byte[TcpFrameCodec.NONCE_SIZE];
            random.nextBytes(nonce);
            byte[] hello = TcpFrameCodec.encodeHello(random.nextInt(2), nonce).array();
            byte[] input = mutate(random, hello);
            try {
                TcpFrameCodec.Hello h = TcpFrameCodec.decodeHello(ByteBuffer.wrap(input));
                assertThat(h.nonce()).hasSize(TcpFrameCodec.NONCE_SIZE);
                accepted++;
            } catch (ProtocolException expected) {
                // refused
            } catch (Throwable unexpected) {
                throw new AssertionError("handshake round " + round + " (seed " + SEED + ") failed with " + unexpected, unexpected);
            }
        }
        assertThat(accepted).isPositive().isLessThan(5000);
    }

    /** Decodes frames until the input is used up or incomplete; returns how many were decoded. */
    private static int decodeAll(byte[] input) {
        ByteBuffer in = ByteBuffer.wrap(input);
        int frames = 0;
        while (true) {
            TcpFrameCodec.Frame f = TcpFrameCodec.decode(in, MAX_MESSAGE);
            if (f == null) {
                return frames;
            }
            switch (f) {
                case TcpFrameCodec.Message m -> assertThat(m.payload().remaining()).isLessThanOrEqualTo(MAX_MESSAGE);
                case TcpFrameCodec.Data d -> assertThat(d.length()).isBetween(1, TcpFrameCodec.MAX_DATA_CHUNK);
                case TcpFrameCodec.Error e -> assertThat(e.message().length()).isLessThanOrEqualTo(TcpFrameCodec.MAX_ERROR_MESSAGE);
                default -> { }
            }
            frames++;
        }
    }

    private static byte[] validStream(Random random) {
        List<ByteBuffer> frames = new ArrayList<>();
        int n = 1 + random.nextInt(5);
        for (int i = 0; i < n; i++) {
            long id = random.nextInt(100);
            frames.add(switch (random.nextInt(7)) {
                case 0 -> TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, id, random.nextLong(), random.nextLong(), random.nextLong());
                case 1 -> TcpFrameCodec.encodeRequest(TcpFrameCodec.WRITE_REQ, id, random.nextLong(), random.nextInt(1 << 20), random.nextLong());
                case 2 -> TcpFrameCodec.encodeEmpty(random.nextBoolean() ? TcpFrameCodec.READ_DONE : TcpFrameCodec.WRITE_ACK, id);
                case 3 -> TcpFrameCodec.encodeError(id, RemoteAccessException.Reason.values()[random.nextInt(5)], "refused " + id);
                case 4 -> {
                    int len = random.nextInt(300);
                    ByteBuffer b = ByteBuffer.allocate(TcpFrameCodec.HEADER_SIZE + len);
                    TcpFrameCodec.putHeader(b, TcpFrameCodec.SEND, len, 0);
                    yield b.position(b.capacity()).flip();
                }
                case 5 -> {
                    int len = 1 + random.nextInt(300);
                    ByteBuffer b = ByteBuffer.allocate(TcpFrameCodec.HEADER_SIZE + len);
                    TcpFrameCodec.putHeader(b, random.nextBoolean() ? TcpFrameCodec.READ_DATA : TcpFrameCodec.WRITE_DATA, len, id);
                    yield b.position(b.capacity()).flip();
                }
                default -> TcpFrameCodec.encodeEmpty(TcpFrameCodec.CLOSE, 0);
            });
        }
        int total = frames.stream().mapToInt(ByteBuffer::remaining).sum();
        ByteBuffer all = ByteBuffer.allocate(total);
        frames.forEach(all::put);
        return all.array();
    }

    private static byte[] mutate(Random random, byte[] input) {
        byte[] out = input.clone();
        switch (random.nextInt(6)) {
            case 0 -> { // flip a few bits
                for (int i = 0, n = 1 + random.nextInt(4); i < n; i++) {
                    int at = random.nextInt(out.length);
                    out[at] ^= (byte) (1 << random.nextInt(8));
                }
            }
            case 1 -> { // truncate
                out = java.util.Arrays.copyOf(out, random.nextInt(out.length + 1));
            }
            case 2 -> { // hostile length field in the first header
                if (out.length >= 8) {
                    ByteBuffer.wrap(out).putInt(4, random.nextBoolean() ? random.nextInt() : Integer.MAX_VALUE - random.nextInt(16));
                }
            }
            case 3 -> { // random type byte
                out[0] = (byte) random.nextInt(256);
            }
            case 4 -> { // overwrite a random byte
                out[random.nextInt(out.length)] = (byte) random.nextInt(256);
            }
            default -> { // leave valid
            }
        }
        return out;
    }

    private static byte[] randomBytes(Random random) {
        byte[] b = new byte[random.nextInt(200)];
        random.nextBytes(b);
        return b;
    }
}
