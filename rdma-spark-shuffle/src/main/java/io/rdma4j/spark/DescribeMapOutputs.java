package io.rdma4j.spark;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RequestTypes;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * The bodies of a {@link io.rdma4j.core.RequestTypes#SPARK_DESCRIBE_MAP_OUTPUTS} request from a reducer to a map
 * output's executor and of its reply. Request: {@code shuffleId(4) count(4) mapId(8)*count}; reply:
 * {@code count(4)} then per map output {@code mapId(8) flags(1)} and its region descriptors.
 */
final class DescribeMapOutputs {
    private static final int PRESENT = 1;
    private static final int HAS_DATA = 2;
    private static final int HAS_CHECKSUMS = 4;
    /** The files are there, but the executor could not register them (its registered-memory limit): Spark serves them. */
    private static final int NOT_SERVED = 8;
    /** Worst-case bytes of one map output in a reply. */
    static final int REPLY_ENTRY_SIZE = 8 + 1 + 3 * RegionDescriptor.SERIALIZED_SIZE;

    private DescribeMapOutputs() {
    }

    record Request(int shuffleId, long[] mapIds) { }

    /**
     * A map output's regions; {@code data} is null for an empty data file, {@code checksums} when checksums are off.
     * Not {@code present}: the executor has no such files, or ({@code notServed}) cannot register them for reads.
     */
    record MapOutput(long mapId, boolean present, RegionDescriptor index, RegionDescriptor data, RegionDescriptor checksums,
                     boolean notServed) {
        MapOutput(long mapId, boolean present, RegionDescriptor index, RegionDescriptor data, RegionDescriptor checksums) {
            this(mapId, present, index, data, checksums, false);
        }

        static MapOutput missing(long mapId) {
            return new MapOutput(mapId, false, null, null, null);
        }

        static MapOutput notServed(long mapId) {
            return new MapOutput(mapId, false, null, null, null, true);
        }
    }

    /** How many map ids fit in one request so that the reply fits a message. */
    static int maxMapsPerRequest(int maxMessageSize) {
        return Math.max(1, Math.min((maxMessageSize - 8) / 8, (maxMessageSize - 4) / REPLY_ENTRY_SIZE));
    }

    static ByteBuffer encodeRequest(int shuffleId, long[] mapIds) {
        ByteBuffer b = ByteBuffer.allocate(8 + 8 * mapIds.length);
        b.putInt(shuffleId).putInt(mapIds.length);
        for (long id : mapIds) {
            b.putLong(id);
        }
        return b.flip();
    }

    static Request decodeRequest(ByteBuffer b) {
        if (b.remaining() < 8) {
            throw new ProtocolException("describe request of " + b.remaining() + " bytes is shorter than its 8-byte header");
        }
        int shuffleId = b.getInt();
        int count = b.getInt();
        if (count < 0 || b.remaining() != 8L * count) {
            throw new ProtocolException("describe request announces " + count + " maps but carries " + b.remaining() + " bytes");
        }
        long[] ids = new long[count];
        for (int i = 0; i < count; i++) {
            ids[i] = b.getLong();
        }
        return new Request(shuffleId, ids);
    }

    static ByteBuffer encodeReply(List<MapOutput> outputs) {
        ByteBuffer b = ByteBuffer.allocate(4 + REPLY_ENTRY_SIZE * outputs.size());
        b.putInt(outputs.size());
        for (MapOutput o : outputs) {
            int flags = (o.present() ? PRESENT : 0) | (o.data() != null ? HAS_DATA : 0) | (o.checksums() != null ? HAS_CHECKSUMS : 0)
                    | (o.notServed() ? NOT_SERVED : 0);
            b.putLong(o.mapId()).put((byte) flags);
            if (o.present()) {
                b.put(o.index().toBytes());
                if (o.data() != null) {
                    b.put(o.data().toBytes());
                }
                if (o.checksums() != null) {
                    b.put(o.checksums().toBytes());
                }
            }
        }
        return b.flip();
    }

    /**
     * Asks {@code connection}'s executor for the regions of {@code mapIds}: the reply must describe exactly those
     * map outputs, in order, or it is a {@link ProtocolException}.
     */
    static List<MapOutput> ask(RdmaConnection connection, int shuffleId, long[] mapIds) {
        ByteBuffer reply = connection.requestAndWait(RequestTypes.SPARK_DESCRIBE_MAP_OUTPUTS,
                encodeRequest(shuffleId, mapIds));
        return decodeReply(reply, mapIds);
    }

    /** The reply to a request for {@code requested}: one entry per requested map id, in the request's order. */
    static List<MapOutput> decodeReply(ByteBuffer b, long[] requested) {
        if (b.remaining() < 4) {
            throw new ProtocolException("describe reply of " + b.remaining() + " bytes is shorter than its 4-byte header");
        }
        int count = b.getInt();
        if (count != requested.length) {
            throw new ProtocolException("describe reply announces " + count + " map outputs for a request of "
                    + requested.length + ": the peer executor is not an rdma4j shuffle of this version, or a corrupted one");
        }
        if (count > b.remaining() / 9) {
            throw new ProtocolException("describe reply announces " + count + " maps but carries " + b.remaining() + " bytes");
        }
        List<MapOutput> outputs = new ArrayList<>(count);
        try {
            decodeEntries(b, count, outputs);
        } catch (java.nio.BufferUnderflowException | IllegalArgumentException e) {
            throw new ProtocolException("malformed describe reply: " + e);
        }
        for (int i = 0; i < count; i++) {
            if (outputs.get(i).mapId() != requested[i]) {
                throw new ProtocolException("describe reply entry " + i + " is for map " + outputs.get(i).mapId()
                        + ", the request asked for map " + requested[i]);
            }
        }
        return outputs;
    }

    private static void decodeEntries(ByteBuffer b, int count, List<MapOutput> outputs) {
        for (int i = 0; i < count; i++) {
            long mapId = b.getLong();
            int flags = b.get();
            if ((flags & PRESENT) == 0) {
                outputs.add((flags & NOT_SERVED) != 0 ? MapOutput.notServed(mapId) : MapOutput.missing(mapId));
                continue;
            }
            RegionDescriptor index = RegionDescriptor.fromBytes(b);
            RegionDescriptor data = (flags & HAS_DATA) != 0 ? RegionDescriptor.fromBytes(b) : null;
            RegionDescriptor checksums = (flags & HAS_CHECKSUMS) != 0 ? RegionDescriptor.fromBytes(b) : null;
            outputs.add(new MapOutput(mapId, true, index, data, checksums));
        }
    }
}
