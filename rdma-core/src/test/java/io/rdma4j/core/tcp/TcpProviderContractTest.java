package io.rdma4j.core.tcp;

import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.contract.ProviderContractTest;

import java.time.Duration;

/** The tcp provider passes the provider contract unchanged. */
class TcpProviderContractTest extends ProviderContractTest {

    @Override
    protected TransportConfig config() {
        return TransportConfig.builder().provider("tcp").operationTimeout(Duration.ofSeconds(60)).build();
    }

    @Override
    protected String expectedProvider() {
        return "tcp";
    }
}
