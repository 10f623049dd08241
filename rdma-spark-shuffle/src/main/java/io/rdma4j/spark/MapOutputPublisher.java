package io.rdma4j.spark;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RegistrationException;
import io.rdma4j.core.RequestContext;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Makes this executor's committed map outputs (Spark's data, index and checksum files) readable by
 * peers: each file is mapped into an arena and registered for remote read ({@link RdmaTransport#registerFile}),
 * once, and kept
 * until the shuffle is unregistered. Also answers peers' "describe map outputs" requests with the
 * region descriptors.
 */
final class MapOutputPublisher implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(MapOutputPublisher.class);

    /** One committed map output, mapped and registered. Segments are null for empty files. */
    record Published(long mapId, Arena arena, MemorySegment index, MemorySegment data, MemorySegment checksums,
                     List<RegisteredRegion> regions, RegionDescriptor indexRegion, RegionDescriptor dataRegion,
                     RegionDescriptor checksumRegion) {
        void release() {
            regions.forEach(RegisteredRegion::close);
            arena.close();
        }
    }

    private final RdmaTransport transport;
    private final IndexShuffleBlockResolver resolver;
    private final RdmaShuffleConf conf;
    private final Map<Integer, Map<Long, Published>> published = new ConcurrentHashMap<>();
    private volatile boolean closed;
    /** Time spent mapping and registering map outputs, reported per shuffle (lazy vs eager registration cost). */
    private final Map<Integer, java.util.concurrent.atomic.LongAdder> publishNanos = new ConcurrentHashMap<>();
    /** Shuffles whose refused registration was logged at warning level. */
    private final java.util.Set<Integer> refusedShuffles = ConcurrentHashMap.newKeySet();
    /**
     * By shuffle, the map outputs whose registration was refused and when: each reducer of the shuffle asks, and on verbs
     * every try pins the file's pages until the limit stops it, so a refusal is repeated without a try for a while.
     */
    private final Map<Integer, Map<Long, Long>> refusedAt = new ConcurrentHashMap<>();
    private static final long REFUSAL_KEPT_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
    /**
     * The last {@value #UNPUBLISHED_REMEMBERED} shuffles unpublished (Spark never reuses a shuffle id): a late describe
     * or a zombie map task's eager publish must not register their files, which nothing would release again.
     */
    private final java.util.Set<Integer> unpublished = java.util.Collections.synchronizedSet(java.util.Collections.newSetFromMap(
            new java.util.LinkedHashMap<>(16, 0.75f, false) {
                @Override
                protected boolean removeEldestEntry(Map.Entry<Integer, Boolean> eldest) {
                    return size() > UNPUBLISHED_REMEMBERED;
                }
            }));
    private static final int UNPUBLISHED_REMEMBERED = 10_000;

    MapOutputPublisher(RdmaTransport transport, IndexShuffleBlockResolver resolver, RdmaShuffleConf conf) {
        this.transport = transport;
        this.resolver = resolver;
        this.conf = conf;
    }

    /** The published map output, mapping and registering it on first use; null when its files are gone. */
    Published publish(int shuffleId, long mapId) {
        if (closed) {
            return null;
        }
        Map<Long, Published> maps = published.get(shuffleId);
        if (maps == null) {
            // a peer may name any shuffle: nothing is kept for one whose files this executor does not have
            if (unpublished.contains(shuffleId) || !resolver.getIndexFile(shuffleId, mapId, Option.empty()).isFile()) {
                return null;
            }
            maps = published.computeIfAbsent(shuffleId, id -> new ConcurrentHashMap<>());
        }
        Published p = maps.get(mapId);
        if (p != null) {
            return p;
        }
        synchronized (maps) {
            if (closed || published.get(shuffleId) != maps || unpublished.contains(shuffleId)) {
                // unpublished (or closed) meanwhile: nothing would release what were registered now
                if (unpublished.contains(shuffleId)) {
                    published.remove(shuffleId, maps); // made after unpublish had removed the shuffle's
                }
                return null;
            }
            p = maps.get(mapId);
            if (p == null) {
                long start = System.nanoTime();
                p = mapAndRegister(shuffleId, mapId);
                if (p != null) {
                    long nanos = System.nanoTime() - start;
                    publishNanos.computeIfAbsent(shuffleId, id -> new java.util.concurrent.atomic.LongAdder()).add(nanos);
                    RdmaShuffleMetrics.mapOutputRegistered(nanos);
                    maps.put(mapId, p);
                }
            }
            return p;
        }
    }

    private Published mapAndRegister(int shuffleId, long mapId) {
        File indexFile = resolver.getIndexFile(shuffleId, mapId, Option.empty());
        File dataFile = resolver.getDataFile(shuffleId, mapId);
        if (!indexFile.isFile() || !dataFile.isFile()) {
            return null;
        }
        File checksumFile = conf.checksumEnabled()
                ? resolver.getChecksumFile(shuffleId, mapId, conf.checksumAlgorithm(), Option.empty()) : null;
        Arena arena = Arena.ofShared();
        List<RegisteredRegion> regions = new ArrayList<>(3);
        try {
            Mapped index = mapAndRegister(indexFile, arena, regions);
            Mapped data = mapAndRegister(dataFile, arena, regions);
            Mapped checksums = checksumFile != null && checksumFile.isFile() ? mapAndRegister(checksumFile, arena, regions) : Mapped.EMPTY;
            return new Published(mapId, arena, index.segment(), data.segment(), checksums.segment(), List.copyOf(regions),
                    index.descriptor(), data.descriptor(), checksums.descriptor());
        } catch (IOException | RuntimeException e) {
            regions.forEach(RegisteredRegion::close);
            arena.close();
            if (e instanceof IOException io) {
                throw new UncheckedIOException("cannot map shuffle " + shuffleId + " map " + mapId + " output", io);
            }
            throw (RuntimeException) e;
        }
    }

    /** A file's mapping and the descriptor of its registration; both null for an empty file. */
    private record Mapped(MemorySegment segment, RegionDescriptor descriptor) {
        static final Mapped EMPTY = new Mapped(null, null);
    }

    /** Maps and registers the file for peers to read (the transport picks a mapping its kernel can pin). */
    private Mapped mapAndRegister(File file, Arena arena, List<RegisteredRegion> regions) throws IOException {
        long size = Files.size(file.toPath());
        if (size == 0) {
            return Mapped.EMPTY;
        }
        RegisteredRegion region = transport.registerFile(file.toPath(), size, arena);
        regions.add(region);
        return new Mapped(region.segment(), region.descriptor());
    }

    /** Deregisters and unmaps a shuffle's outputs; called before Spark deletes the files. */
    void unpublish(int shuffleId) {
        unpublished.add(shuffleId);
        Map<Long, Published> maps = published.remove(shuffleId);
        java.util.concurrent.atomic.LongAdder nanos = publishNanos.remove(shuffleId);
        refusedShuffles.remove(shuffleId);
        refusedAt.remove(shuffleId);
        if (maps != null) {
            LOG.info("rdma4j shuffle: shuffle {}: {} map outputs were mapped and registered in {} ms in total", shuffleId, maps.size(),
                    nanos == null ? 0 : nanos.sum() / 1_000_000);
            synchronized (maps) {
                maps.values().forEach(Published::release);
                maps.clear();
            }
        }
    }

    /** Shuffles this publisher keeps state for. */
    int shufflesKnown() {
        return published.size() + publishNanos.size();
    }

    int publishedCount() {
        return published.values().stream().mapToInt(Map::size).sum();
    }

    /** Answers a peer's describe request, publishing the map outputs it names on first use. */
    ByteBuffer describe(ByteBuffer request, RequestContext context) {
        DescribeMapOutputs.Request r = DescribeMapOutputs.decodeRequest(request);
        List<DescribeMapOutputs.MapOutput> outputs = new ArrayList<>(r.mapIds().length);
        for (long mapId : r.mapIds()) {
            Published p;
            try {
                if (!isPublished(r.shuffleId(), mapId) && refusedRecently(r.shuffleId(), mapId)) {
                    RdmaShuffleMetrics.MAP_OUTPUTS_NOT_SERVED.inc();
                    outputs.add(DescribeMapOutputs.MapOutput.notServed(mapId));
                    continue;
                }
                p = publish(r.shuffleId(), mapId);
            } catch (RegistrationException e) {
                if (gone(e)) {
                    LOG.debug("rdma4j shuffle: shuffle {} map {} was deleted while being registered", r.shuffleId(), mapId);
                    outputs.add(DescribeMapOutputs.MapOutput.missing(mapId));
                    continue;
                }
                // The files are there: the reader reads them through Spark's transfer (a registered-memory limit, say).
                notServed(r.shuffleId(), mapId, e);
                outputs.add(DescribeMapOutputs.MapOutput.notServed(mapId));
                continue;
            } catch (RuntimeException e) {
                // files deleted or cut short meanwhile: what Spark's transfer would not serve either
                LOG.debug("rdma4j shuffle: cannot map shuffle {} map {}: {}", r.shuffleId(), mapId, e.toString());
                p = null;
            }
            outputs.add(p == null ? DescribeMapOutputs.MapOutput.missing(mapId)
                    : new DescribeMapOutputs.MapOutput(mapId, true, p.indexRegion(), p.dataRegion(), p.checksumRegion()));
        }
        return DescribeMapOutputs.encodeReply(outputs);
    }

    /** Whether a file vanished under the registration: what Spark's transfer would not serve either. */
    private static boolean gone(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof java.nio.file.NoSuchFileException || t instanceof java.io.FileNotFoundException) {
                return true;
            }
        }
        return false;
    }

    private boolean isPublished(int shuffleId, long mapId) {
        Map<Long, Published> maps = published.get(shuffleId);
        return maps != null && maps.containsKey(mapId);
    }

    private boolean refusedRecently(int shuffleId, long mapId) {
        Map<Long, Long> refused = refusedAt.get(shuffleId);
        Long at = refused == null ? null : refused.get(mapId);
        return at != null && System.nanoTime() - at < REFUSAL_KEPT_NANOS;
    }

    /** Logs a refused registration once per shuffle (a reader asks for many map outputs at once), the rest at debug. */
    private void notServed(int shuffleId, long mapId, RegistrationException e) {
        RdmaShuffleMetrics.MAP_OUTPUTS_NOT_SERVED.inc();
        if (!unpublished.contains(shuffleId)) {
            refusedAt.computeIfAbsent(shuffleId, id -> new ConcurrentHashMap<>()).put(mapId, System.nanoTime());
            if (unpublished.contains(shuffleId)) {
                refusedAt.remove(shuffleId); // unpublished meanwhile
            }
        }
        if (refusedShuffles.add(shuffleId)) {
            LOG.warn("rdma4j shuffle: cannot register shuffle {} map {} for RDMA reads, so readers read this shuffle's "
                    + "map outputs that cannot be registered through Spark's block transfer: {}", shuffleId, mapId, e.getMessage());
        } else {
            LOG.debug("rdma4j shuffle: cannot register shuffle {} map {}: {}", shuffleId, mapId, e.toString());
        }
    }

    @Override
    public void close() {
        closed = true;
        for (Integer shuffleId : List.copyOf(published.keySet())) {
            unpublish(shuffleId);
        }
    }
}
