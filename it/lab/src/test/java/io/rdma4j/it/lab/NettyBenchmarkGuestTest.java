package io.rdma4j.it.lab;

import io.rdma4j.it.bench.netty.NettyTransportBenchmark;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetAddress;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * it/bench-netty's benchmark inside the lab: rdma4j's Netty transport on the verbs provider over this device, against
 * Netty's NIO and epoll transports on the same guest address, interleaved round by round. Emulated RDMA proves
 * correctness, not speed: the ratios are recorded, not judged. Fewer rounds than on the host, since the emulated CPU
 * makes each one slow.
 */
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class NettyBenchmarkGuestTest {

    @Test
    void nettyOverVerbsAgainstNioAndEpoll() throws Exception {
        LabDevice device = LabDevice.current();
        String table = NettyTransportBenchmark.run(VerbsLab.config(device), InetAddress.getByName(device.address()),
                Integer.getInteger("bench.rounds", 6), Integer.getInteger("bench.pings", 500),
                Integer.getInteger("bench.slice-millis", 400));
        System.out.println("[" + device.name() + "] " + table);
        assertThat(table).contains("rdma4j (verbs").contains("/ NIO:").contains("/ epoll:");
    }
}
