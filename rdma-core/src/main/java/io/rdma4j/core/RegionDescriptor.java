package io.rdma4j.core;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.Set;

/**
 * What a peer needs to access a registered region one-sided: the provider that registered it, the
 * region's address and length, its remote key and the rights granted. It is plain data: send it to
 * a peer in {@link #toBytes()} form (over {@link RdmaConnection#send}, or any channel you have).
 *
 * <p>Holding a descriptor grants nothing by itself: the responder checks the key, the bounds and the
 * access rights of every operation against the live registration.
 */
public record RegionDescriptor(String provider, long address, long length, long key, Set<Access> access) {

    /**
     * Bytes of the serialised form: magic(4) version(1) access(1) nameLength(1) reserved(1) name(8)
     * address(8) length(8) key(8), big-endian.
     */
    public static final int SERIALIZED_SIZE = 40;
    private static final byte FORMAT_VERSION = 1;
    private static final int MAGIC = 0x52344A44; // "R4JD"

    public RegionDescriptor {
        Objects.requireNonNull(provider, "provider");
        if (length < 0) {
            throw new IllegalArgumentException("negative region length " + length);
        }
        access = Set.copyOf(access);
    }

    /**
     * A descriptor for a sub-range of this region. Useful to publish part of a region; the responder
     * still enforces the bounds of the whole registration, so this is a convenience, not a fence.
     */
    public RegionDescriptor slice(long offset, long sliceLength) {
        checkRange(offset, sliceLength);
        return new RegionDescriptor(provider, address + offset, sliceLength, key, access);
    }

    /**
     * Checks that {@code [offset, offset + len)} lies inside this region.
     *
     * @throws RemoteAccessException with {@link RemoteAccessException.Reason#OUT_OF_RANGE} otherwise
     */
    public void checkRange(long offset, long len) {
        if (offset < 0 || len < 0) {
            throw new RemoteAccessException(RemoteAccessException.Reason.OUT_OF_RANGE,
                    "negative offset " + offset + " or length " + len);
        }
        long end;
        try {
            end = Math.addExact(offset, len);
        } catch (ArithmeticException overflow) {
            throw new RemoteAccessException(RemoteAccessException.Reason.OUT_OF_RANGE,
                    "offset " + offset + " + length " + len + " overflows");
        }
        if (end > length) {
            throw new RemoteAccessException(RemoteAccessException.Reason.OUT_OF_RANGE,
                    "range [" + offset + ", " + end + ") is outside the region of " + length + " bytes");
        }
    }

    public boolean allows(Access right) {
        return access.contains(right);
    }

    /** The compact, versioned byte form a peer decodes with {@link #fromBytes(byte[])}. */
    public byte[] toBytes() {
        byte[] name = provider.getBytes(StandardCharsets.US_ASCII);
        if (name.length == 0 || name.length > 8) {
            throw new IllegalStateException("provider name must be 1 to 8 ASCII bytes: " + provider);
        }
        ByteBuffer out = ByteBuffer.allocate(SERIALIZED_SIZE).order(ByteOrder.BIG_ENDIAN);
        out.putInt(MAGIC).put(FORMAT_VERSION).put((byte) Access.toBits(access)).put((byte) name.length).put((byte) 0);
        out.put(name).position(16);
        out.putLong(address).putLong(length).putLong(key);
        return out.array();
    }

    /** Decodes {@link #toBytes()}. */
    public static RegionDescriptor fromBytes(byte[] bytes) {
        return fromBytes(ByteBuffer.wrap(bytes));
    }

    /**
     * Decodes {@link #toBytes()} from the buffer's position, advancing it.
     *
     * @throws IllegalArgumentException if the bytes are not a descriptor of a known version
     */
    public static RegionDescriptor fromBytes(ByteBuffer in) {
        if (in.remaining() < SERIALIZED_SIZE) {
            throw new IllegalArgumentException("region descriptor needs " + SERIALIZED_SIZE + " bytes, got " + in.remaining());
        }
        ByteBuffer buf = in.slice(in.position(), SERIALIZED_SIZE).order(ByteOrder.BIG_ENDIAN);
        if (buf.getInt() != MAGIC) {
            throw new IllegalArgumentException("not a region descriptor (bad magic)");
        }
        byte version = buf.get();
        if (version != FORMAT_VERSION) {
            throw new IllegalArgumentException("unsupported region descriptor version " + version);
        }
        int accessBits = buf.get() & 0xff;
        int nameLength = buf.get() & 0xff;
        buf.get();
        if (nameLength == 0 || nameLength > 8) {
            throw new IllegalArgumentException("bad provider name length " + nameLength);
        }
        byte[] name = new byte[nameLength];
        buf.get(name);
        buf.position(16);
        long address = buf.getLong();
        long length = buf.getLong();
        long key = buf.getLong();
        in.position(in.position() + SERIALIZED_SIZE);
        return new RegionDescriptor(new String(name, StandardCharsets.US_ASCII), address, length, key,
                Access.fromBits(accessBits));
    }

    @Override
    public String toString() {
        // The key is a capability: never print it whole.
        return "RegionDescriptor[" + provider + " @0x" + Long.toHexString(address) + " +" + length + " " + access + "]";
    }
}
