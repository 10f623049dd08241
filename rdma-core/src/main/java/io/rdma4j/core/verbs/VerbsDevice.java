package io.rdma4j.core.verbs;

import io.rdma4j.core.ProviderUnavailableException;
import io.rdma4j.nativeloader.RdmaCm;
import io.rdma4j.nativeloader.Verbs;
import io.rdma4j.nativeloader.discovery.WireProtocol;
import io.rdma4j.nativeloader.discovery.SelectionResult;

import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;

/**
 * The device side of an opened verbs provider, closed in reverse order of creation: the rdma_cm event
 * channel, an anchor cm id bound to the device's address (so librdmacm attaches every id of this transport
 * to the same device context), one protection domain and one completion channel for all CQs.
 */
final class VerbsDevice implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(VerbsDevice.class.getName());
    static final long MAX_OPERATION_LENGTH_CAP = 1L << 30;
    /** Most RDMA READs one queue pair has in flight, whatever the device allows. */
    private static final int MAX_READ_DEPTH = 128;

    final MemorySegment eventChannel;
    final MemorySegment context;
    final MemorySegment pd;
    final MemorySegment completionChannel;
    final boolean iwarp;
    final long maxOperationLength;
    final int readDepth;
    private final MemorySegment anchorId;

    private VerbsDevice(MemorySegment eventChannel, MemorySegment anchorId, MemorySegment context, MemorySegment pd,
                        MemorySegment completionChannel, boolean iwarp, long maxOperationLength, int readDepth) {
        this.eventChannel = eventChannel;
        this.anchorId = anchorId;
        this.context = context;
        this.pd = pd;
        this.completionChannel = completionChannel;
        this.iwarp = iwarp;
        this.maxOperationLength = maxOperationLength;
        this.readDepth = readDepth;
    }

    /**
     * Opens the selected device through {@code localAddress}.
     *
     * @throws ProviderUnavailableException when the address is on no RDMA device, or on another one
     * @throws io.rdma4j.nativeloader.NativeCallException when a verbs call fails
     */
    static VerbsDevice open(SelectionResult.Selection selection, InetAddress localAddress) {
        List<Runnable> undo = new ArrayList<>();
        try {
            MemorySegment eventChannel = RdmaCm.createEventChannel();
            undo.add(() -> RdmaCm.destroyEventChannel(eventChannel));
            MemorySegment anchorId = RdmaCm.createId(eventChannel);
            undo.add(() -> RdmaCm.destroyId(anchorId));
            RdmaCm.bind(anchorId, new InetSocketAddress(localAddress, 0));
            MemorySegment context = RdmaCm.deviceContext(anchorId);
            if (context.equals(MemorySegment.NULL)) {
                throw new ProviderUnavailableException("address " + localAddress.getHostAddress()
                        + " is not on an RDMA device: set the rdma4j 'address' option to the IP of "
                        + selection.device().name() + "'s net device");
            }
            String deviceName = Verbs.deviceName(context);
            if (!deviceName.equals(selection.device().name())) {
                throw new ProviderUnavailableException("address " + localAddress.getHostAddress() + " belongs to RDMA device "
                        + deviceName + ", not to the selected " + selection.device().name()
                        + ": set the rdma4j 'device' and 'address' options consistently");
            }
            MemorySegment pd = Verbs.allocateProtectionDomain(context);
            undo.add(() -> Verbs.deallocateProtectionDomain(pd));
            MemorySegment completionChannel = Verbs.createCompletionChannel(context);
            undo.add(() -> Verbs.destroyCompletionChannel(completionChannel));
            long maxMessage = Verbs.maxMessageSize(context, selection.port().number());
            long maxOperationLength = Math.min(maxMessage == 0 ? MAX_OPERATION_LENGTH_CAP : maxMessage, MAX_OPERATION_LENGTH_CAP);
            int readDepth = Math.max(1, Math.min(MAX_READ_DEPTH, Verbs.maxReadDepth(context)));
            return new VerbsDevice(eventChannel, anchorId, context, pd, completionChannel,
                    selection.transport() == WireProtocol.IWARP, maxOperationLength, readDepth);
        } catch (RuntimeException e) {
            for (int i = undo.size() - 1; i >= 0; i--) {
                undo.get(i).run();
            }
            throw e;
        }
    }

    /** After every cm id, queue pair, CQ and memory region of the device is gone. */
    @Override
    public void close() {
        RdmaCm.destroyId(anchorId);
        Verbs.destroyCompletionChannel(completionChannel);
        int rc = Verbs.deallocateProtectionDomain(pd);
        if (rc != 0) {
            LOG.log(System.Logger.Level.WARNING, "ibv_dealloc_pd failed (" + rc + "): memory regions still registered");
        }
        RdmaCm.destroyEventChannel(eventChannel);
    }
}
