package io.rdma4j.it.lab;

import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.contract.ProviderContractTest;

import java.net.InetSocketAddress;
import java.time.Duration;

/**
 * The provider contract on the lab device (rxe0 or siw0) through the verbs provider. The hooks say what
 * an RDMA NIC can observe; every security property (no data returned, no memory modified, the requester
 * fails and loses the connection) is still asserted.
 */
class VerbsContractGuestTest extends ProviderContractTest {

    private final LabDevice device = LabDevice.current();

    @Override
    protected TransportConfig config() {
        // Shorter than the suite's 60 s waits, so a stuck operation surfaces as the facade's timeout.
        return VerbsLab.config(device).toBuilder().operationTimeout(Duration.ofSeconds(40)).build();
    }

    @Override
    protected String expectedProvider() {
        return "verbs";
    }

    @Override
    protected InetSocketAddress listenAddress() {
        return new InetSocketAddress(device.address(), 0);
    }

    /** A NIC reports one status (remote access error) for a bad key, a bad range and missing rights. */
    @Override
    protected boolean reportsPreciseRefusalReasons() {
        return false;
    }

    /** One-sided READ and WRITE are served by the responder's NIC, never by its CPU. */
    @Override
    protected boolean countsResponderWork() {
        return false;
    }

    /** A message is reassembled from registered receive slots into a buffer of rdma4j's own. */
    @Override
    protected boolean readsIntoLentBuffers() {
        return false;
    }

    /** A message is copied into registered staging slots, sent in place or not. */
    @Override
    protected boolean sendsInPlace() {
        return false;
    }

    /** iWARP: the responder answers a refusal with TERMINATE; the requester's request is flushed. */
    @Override
    protected boolean refusalsMayArriveAsConnectionLoss() {
        return device.kind() == LabDevice.Kind.SIW;
    }

    /** iWARP: a WRITE completes at the requester before the responder has checked it. */
    @Override
    protected boolean writeCompletionsConfirmAcceptance() {
        return device.kind() != LabDevice.Kind.SIW;
    }

    /** siw (Linux 6.1) serves READs without checking REMOTE_READ: see the hook's documentation. */
    @Override
    protected boolean enforcesRemoteReadRight() {
        return device.kind() != LabDevice.Kind.SIW;
    }
}
