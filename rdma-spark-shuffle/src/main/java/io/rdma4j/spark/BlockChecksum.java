package io.rdma4j.spark;

import java.nio.ByteBuffer;
import java.util.zip.Adler32;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;
import java.util.zip.Checksum;

/** The checksum Spark's map task wrote for each block, by {@code spark.shuffle.checksum.algorithm}. */
final class BlockChecksum {

    private BlockChecksum() {
    }

    /** {@code bytes}' checksum (its position is left as it is) under {@code algorithm}, in upper case. */
    static long of(String algorithm, ByteBuffer bytes) {
        Checksum c = switch (algorithm) {
            case "ADLER32" -> new Adler32();
            case "CRC32" -> new CRC32();
            case "CRC32C" -> new CRC32C();
            default -> throw new IllegalArgumentException("unsupported spark.shuffle.checksum.algorithm " + algorithm);
        };
        c.update(bytes.duplicate());
        return c.getValue();
    }
}
