package io.rdma4j.core.internal;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.pool.PoolConfig;
import io.rdma4j.core.pool.PooledBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The pool's own rules, on a real tcp transport: how sizes map to classes, that a slab is carved whole before the next
 * is registered, which block comes back first, when a cached large registration is reused or freed, the accounting
 * when a registration fails, and that concurrent borrowers never share a byte.
 */
class SlabBufferPoolTest {

    private static final long SLAB = 64 * 1024;
    private static final long MIN = 1024;

    private RdmaTransport transport;
    private SlabBufferPool pool;

    @BeforeEach
    void open() {
        transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
        pool = new SlabBufferPool(transport, new PoolConfig(SLAB, MIN, 4 * SLAB, 4 * SLAB, Access.readSink()));
    }

    @AfterEach
    void close() {
        pool.close();
        transport.close();
    }

    @Test
    void aSizeTakesTheSmallestPowerOfTwoClassThatHoldsIt() {
        PooledBuffer one = pool.acquire(1);
        PooledBuffer min = pool.acquire(MIN);
        assertThat(min.region()).as("1 B and 1 KiB: the smallest class").isSameAs(one.region());
        assertThat(min.segment().address() - one.segment().address()).isEqualTo(MIN);

        PooledBuffer justOver = pool.acquire(MIN + 1);
        PooledBuffer exact = pool.acquire(2 * MIN);
        assertThat(justOver.region()).as("1 KiB + 1 B: the 2 KiB class, a slab of its own").isNotSameAs(one.region());
        assertThat(exact.region()).as("exactly 2 KiB stays in the 2 KiB class").isSameAs(justOver.region());
        assertThat(exact.segment().address() - justOver.segment().address()).isEqualTo(2 * MIN);

        PooledBuffer wholeSlab = pool.acquire(SLAB);
        assertThat(wholeSlab.region().segment().byteSize()).isEqualTo(SLAB);
        assertThat(wholeSlab.segment().address()).as("a slab-sized buffer is its slab").isEqualTo(wholeSlab.region().segment().address());
        assertThat(transport.registeredRegions()).isEqualTo(3);
        assertThat(pool.pooledBytes()).isEqualTo(3 * SLAB);
    }

    @Test
    void aSlabIsLentWholeBeforeTheNextIsRegistered() {
        List<PooledBuffer> lent = new ArrayList<>();
        for (int i = 0; i < SLAB / MIN; i++) {
            lent.add(pool.acquire(MIN));
        }
        assertThat(transport.registeredRegions()).as("64 blocks of 1 KiB from one slab").isEqualTo(1);
        MemorySegment slab = lent.getFirst().region().segment();
        assertThat(lent).extracting(b -> b.segment().address() - slab.address()).as("every block of the slab once")
                .containsExactlyInAnyOrderElementsOf(java.util.stream.LongStream.range(0, SLAB / MIN).map(i -> i * MIN).boxed().toList());

        PooledBuffer next = pool.acquire(MIN);
        assertThat(next.region()).isNotSameAs(lent.getFirst().region());
        assertThat(transport.registeredRegions()).isEqualTo(2);
        assertThat(pool.outstandingBuffers()).isEqualTo(SLAB / MIN + 1);
    }

    @Test
    void theBlockReturnedLastIsLentFirst() {
        PooledBuffer a = pool.acquire(MIN);
        PooledBuffer b = pool.acquire(MIN);
        long addressOfB = b.segment().address();
        a.close();
        b.close();
        assertThat(pool.acquire(MIN).segment().address()).as("the most recently used block, likely still in cache")
                .isEqualTo(addressOfB);
    }

    @Test
    void aCachedLargeRegistrationServesAtMostTwiceItsSize() {
        PooledBuffer big = pool.acquire(3 * SLAB);
        long address = big.segment().address();
        big.close();
        assertThat(transport.registeredRegions()).as("kept for reuse").isEqualTo(1);

        PooledBuffer small = pool.acquire(SLAB + 1);
        assertThat(small.segment().address()).as("3 slabs for one slab + 1 B would waste more than half").isNotEqualTo(address);
        assertThat(transport.registeredRegions()).isEqualTo(2);
        small.close();

        PooledBuffer fits = pool.acquire(2 * SLAB);
        assertThat(fits.segment().address()).as("3 slabs for 2: reused").isEqualTo(address);
        assertThat(fits.segment().byteSize()).isEqualTo(2 * SLAB);
    }

    @Test
    void largeRegistrationsPastTheCacheBudgetAreFreedOnRelease() {
        List<PooledBuffer> large = List.of(pool.acquire(2 * SLAB), pool.acquire(2 * SLAB), pool.acquire(2 * SLAB));
        assertThat(transport.registeredRegions()).isEqualTo(3);
        large.forEach(PooledBuffer::close);
        assertThat(transport.registeredRegions()).as("the 4-slab cache keeps two of them").isEqualTo(2);
        assertThat(pool.outstandingBuffers()).isZero();
    }

    @Test
    void buffersOutstandingAtCloseAreFreedOnReturnAndUnreadable() {
        PooledBuffer small = pool.acquire(100);
        PooledBuffer large = pool.acquire(2 * SLAB);
        pool.close();
        assertThat(transport.registeredRegions()).as("the slab goes with the pool; the large buffer is still lent").isEqualTo(1);
        assertThatThrownBy(() -> small.segment().get(ValueLayout.JAVA_BYTE, 0)).as("its memory is gone, safely")
                .isInstanceOf(IllegalStateException.class);
        small.close();
        large.close();
        assertThat(transport.registeredRegions()).as("a buffer returned to a closed pool is deregistered").isZero();
        assertThat(pool.outstandingBuffers()).isZero();
        assertThatThrownBy(() -> pool.acquire(100)).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
    }

    @Test
    void aFailedRegistrationLeavesTheCountsAsTheyWere() {
        transport.close(); // registering on a closed transport fails, as an exhausted memlock limit does on verbs
        assertThatThrownBy(() -> pool.acquire(100)).hasMessageContaining("closed");
        assertThatThrownBy(() -> pool.acquire(2 * SLAB)).hasMessageContaining("closed");
        assertThat(pool.pooledBytes()).as("no slab was added").isZero();
        assertThat(pool.outstandingBuffers()).isZero();
        assertThat(pool.oneOffRegistrations()).isZero();
    }

    @Test
    void concurrentBorrowersNeverShareAByte() throws Exception {
        int threads = 4;
        ExecutorService executor = Executors.newFixedThreadPool(threads);
        try {
            List<Future<Integer>> results = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                byte mark = (byte) (t + 1);
                long seed = t;
                results.add(executor.submit(() -> borrowAndCheck(mark, new SplittableRandom(seed))));
            }
            for (Future<Integer> result : results) {
                assertThat(result.get()).as("buffers whose bytes another borrower changed").isZero();
            }
        } finally {
            executor.shutdownNow();
        }
        assertThat(pool.outstandingBuffers()).isZero();
        assertThat(pool.pooledBytes()).isLessThanOrEqualTo(4 * SLAB);
    }

    /** Holds up to 8 buffers of mixed sizes at a time, filled with {@code mark}; counts those found changed on return. */
    private int borrowAndCheck(byte mark, SplittableRandom random) {
        List<PooledBuffer> held = new ArrayList<>();
        int corrupted = 0;
        for (int i = 0; i < 2000; i++) {
            if (held.size() < 8 && random.nextBoolean()) {
                long size = random.nextInt(8) == 0 ? SLAB + random.nextInt((int) SLAB) : 1 + random.nextInt((int) (4 * MIN));
                PooledBuffer b = pool.acquire(size);
                b.segment().fill(mark);
                held.add(b);
            } else if (!held.isEmpty()) {
                PooledBuffer b = held.remove(random.nextInt(held.size()));
                if (!isFilledWith(b.segment(), mark)) {
                    corrupted++;
                }
                b.close();
            }
        }
        held.forEach(PooledBuffer::close);
        return corrupted;
    }

    private static boolean isFilledWith(MemorySegment segment, byte mark) {
        for (long i = 0; i < segment.byteSize(); i++) {
            if (segment.get(ValueLayout.JAVA_BYTE, i) != mark) {
                return false;
            }
        }
        return true;
    }
}
