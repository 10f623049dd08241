package io.rdma4j.it.lab;

import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.contract.ProviderContractTest;

import java.net.InetSocketAddress;
import java.time.Duration;

/** The provider contract, unchanged, on the lab device (rxe0 or siw0) through the verbs provider. */
class VerbsContractGuestTest extends ProviderContractTest {

    private final LabDevice device = LabDevice.current();

    @Override
    protected TransportConfig config() {
        return VerbsLab.config(device);
    }

    @Override
    protected String expectedProvider() {
        return "verbs";
    }

    @Override
    protected InetSocketAddress listenAddress() {
        return new InetSocketAddress(device.address(), 0);
    }
}
