package io.rdma4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketConnectionAttemptTest;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

import java.util.List;

/** Connection refused, with and without half-closure; the timeout and cancellation run in RdmaChannelTest. */
class RdmaSocketConnectionAttemptTest extends SocketConnectionAttemptTest {

    private static final String OFF_HOST = "connects to the TEST-NET address 198.51.100.254, off this host, and this"
            + " project's tests send traffic to loopback only; RdmaChannelTest runs it against a loopback peer that"
            + " never answers";

    @Override
    protected List<BootstrapFactory<Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.clientSocket();
    }

    @Test
    @Override
    @Disabled(OFF_HOST)
    public void testConnectTimeout(TestInfo testInfo) {
    }

    @Test
    @Override
    @Disabled(OFF_HOST)
    public void testConnectCancellation(TestInfo testInfo) {
    }
}
