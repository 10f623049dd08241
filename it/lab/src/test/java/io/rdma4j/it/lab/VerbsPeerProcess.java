package io.rdma4j.it.lab;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.util.HexFormat;

/**
 * A responder in its own JVM, for VerbsGuestTest's peer-death test: publishes a region, prints
 * "READY <listen port> <descriptor hex>" and serves until killed.
 * Arguments: device name, device address, region size in bytes.
 */
public final class VerbsPeerProcess {

    private VerbsPeerProcess() {
    }

    public static void main(String[] args) throws Exception {
        LabDevice device = new LabDevice(args[0], args[1], LabDevice.Kind.RXE);
        long size = Long.parseLong(args[2]);
        RdmaTransport transport = RdmaTransport.open(VerbsLab.config(device));
        MemorySegment memory = Arena.global().allocate(size, 4096);
        for (long i = 0; i < size; i += 4096) {
            memory.set(ValueLayout.JAVA_BYTE, i, (byte) 1);
        }
        RegisteredRegion region = transport.register(memory, Access.remoteRead());
        var listener = transport.listen(new InetSocketAddress(device.address(), 0), c -> { });
        System.out.println("READY " + listener.localAddress().getPort() + " "
                + HexFormat.of().formatHex(region.descriptor().toBytes()));
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
