package io.rdma4j.it.lab;

import io.rdma4j.core.TransportConfig;

import java.time.Duration;

/** Transport configuration for the verbs provider on a lab device. */
final class VerbsLab {

    private VerbsLab() {
    }

    static TransportConfig config(LabDevice device) {
        return TransportConfig.builder().provider("verbs").device(device.name()).localAddress(device.address())
                // the emulated CPU makes big transfers slow: operations get time, failures still surface
                .operationTimeout(Duration.ofSeconds(90))
                // the guest's device address is not loopback: the suites that test unauthenticated peers say so
                // (VerbsGuestTest checks that protected mode refuses the listener otherwise)
                .allowUnauthenticated(true).build();
    }
}
