package io.rdma4j.core.pool;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class RegisteredBufferPoolTest {

    private static final long SLAB = 64 * 1024;

    private RdmaTransport transport;
    private RegisteredBufferPool pool;

    @BeforeEach
    void open() {
        transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
        pool = transport.createBufferPool(new PoolConfig(SLAB, 1024, 2 * SLAB, 4 * SLAB, Access.readSink()));
    }

    @AfterEach
    void close() {
        transport.close();
    }

    @Test
    void buffersComeFromSizeClassesOfOneSlab() {
        PooledBuffer a = pool.acquire(100);
        PooledBuffer b = pool.acquire(1000);
        PooledBuffer c = pool.acquire(1025);
        assertThat(a.segment().byteSize()).isEqualTo(100);
        assertThat(a.region()).isSameAs(b.region());
        assertThat(b.segment().address() - a.segment().address()).as("1 KiB class").isEqualTo(1024);
        assertThat(c.region()).as("2 KiB class gets its own slab").isNotSameAs(a.region());
        assertThat(a.region().segment().byteSize()).isEqualTo(SLAB);
        assertThat(a.descriptor().length()).isEqualTo(100);
        assertThat(a.descriptor().address()).isEqualTo(a.segment().address());
        assertThat(transport.registeredRegions()).isEqualTo(2);
        assertThat(pool.outstandingBuffers()).isEqualTo(3);
    }

    @Test
    void returnedBuffersAreReusedWithoutRegistering() {
        PooledBuffer a = pool.acquire(3000);
        long address = a.segment().address();
        a.close();
        a.close();
        assertThat(pool.outstandingBuffers()).isZero();
        PooledBuffer again = pool.acquire(4000);
        assertThat(again.segment().address()).isEqualTo(address);
        assertThat(transport.registeredRegions()).isEqualTo(1);
    }

    @Test
    void largerThanASlabGetsADedicatedCachedRegistration() {
        PooledBuffer big = pool.acquire(SLAB * 2 + 1);
        assertThat(big.segment().byteSize()).isEqualTo(SLAB * 2 + 1);
        assertThat(big.region().segment().byteSize()).isEqualTo(SLAB * 2 + 1);
        long address = big.segment().address();
        big.close();
        PooledBuffer reused = pool.acquire(SLAB * 2);
        assertThat(reused.segment().address()).isEqualTo(address);
        assertThat(reused.segment().byteSize()).isEqualTo(SLAB * 2);
        assertThat(transport.registeredRegions()).isEqualTo(1);
    }

    @Test
    void pastTheLimitBuffersAreRegisteredPerUse() {
        pool.acquire(SLAB);
        pool.acquire(SLAB);
        assertThat(pool.oneOffRegistrations()).isZero();
        PooledBuffer extra = pool.acquire(SLAB);
        assertThat(pool.oneOffRegistrations()).isEqualTo(1);
        assertThat(pool.pooledBytes()).isEqualTo(2 * SLAB);
        assertThat(transport.registeredRegions()).isEqualTo(3);
        extra.close();
        assertThat(transport.registeredRegions()).as("one-off freed on release").isEqualTo(2);
    }

    @Test
    void closeDeregistersEverything() {
        pool.acquire(100);
        pool.acquire(SLAB * 3).close();
        assertThat(transport.registeredRegions()).isEqualTo(2);
        pool.close();
        assertThat(transport.registeredRegions()).isZero();
        assertThatThrownBy(() -> pool.acquire(10)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> pool.acquire(0)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void theTransportClosesItsPools() {
        pool.acquire(100);
        assertThat(transport.registeredRegions()).isEqualTo(1);
        transport.close();
        assertThat(transport.registeredRegions()).isZero();
        assertThatThrownBy(() -> pool.acquire(10)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("closed");
    }
}
