package io.rdma4j.it.lab;

import io.rdma4j.core.TransportConfig;

/** The provider contract on the lab device with a shared secret: every connection proves it first. */
class SecretVerbsContractGuestTest extends VerbsContractGuestTest {

    @Override
    protected TransportConfig config() {
        return super.config().toBuilder().sharedSecret("the contract's secret, 16+ bytes").build();
    }
}
