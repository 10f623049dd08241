package io.rdma4j.it.lab;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;

/**
 * The serving side of {@link ConnectionScaleGuestTest} in its own JVM: publishes a 4 KiB region, answers requests of
 * type {@link #ECHO} with their body, prints {@code READY <port> <descriptor hex>}, then answers commands on stdin:
 * {@code STATUS} prints {@code STATUS <VmPin kB> <VmLck kB> <message buffer bytes> <open connections> <CapEff>};
 * {@code REGISTER <bytes>} prints {@code REGISTERED} or {@code REFUSED <why>}; {@code MEMLOCK <bytes>} sets the
 * soft {@code RLIMIT_MEMLOCK} (up to the hard one) and prints {@code MEMLOCK <rc>}. Ends at end of input.
 * Arguments: device name, device address, device kind.
 */
public final class ScalePeerProcess {

    static final int ECHO = io.rdma4j.core.RequestTypes.FIRST_APPLICATION_TYPE + 11;

    private ScalePeerProcess() {
    }

    public static void main(String[] args) throws Throwable {
        LabDevice device = new LabDevice(args[0], args[1], LabDevice.Kind.valueOf(args[2]));
        try (Arena arena = Arena.ofShared(); RdmaTransport transport = RdmaTransport.open(VerbsLab.config(device))) {
            MemorySegment memory = arena.allocate(4096, 4096);
            memory.fill((byte) 7);
            RegisteredRegion region = transport.register(memory, Access.remoteRead());
            var listener = transport.listen(new InetSocketAddress(device.address(), 0),
                    RequestHandlers.of(ECHO, RequestHandler.answering((body, context) -> body)), c -> { });
            System.out.println("READY " + listener.localAddress().getPort() + " "
                    + HexFormat.of().formatHex(region.descriptor().toBytes()));
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) {
                if (line.equals("STATUS")) {
                    System.out.println("STATUS " + status("VmPin") + " " + status("VmLck") + " "
                            + transport.metrics().messageBufferBytes() + " " + transport.metrics().openConnections() + " "
                            + status("CapEff"));
                } else if (line.startsWith("MEMLOCK ")) {
                    System.out.println("MEMLOCK " + setSoftMemlock(Long.parseLong(line.substring(8))));
                } else if (line.startsWith("REGISTER ")) {
                    try (RegisteredRegion big = transport.register(arena.allocate(Long.parseLong(line.substring(9)), 4096),
                            Access.remoteRead())) {
                        System.out.println("REGISTERED " + big.segment().byteSize());
                    } catch (RuntimeException e) {
                        System.out.println("REFUSED " + e.getMessage());
                    }
                }
                System.out.flush();
            }
        }
    }

    /** {@code setrlimit(RLIMIT_MEMLOCK)} with {@code soft} and the current hard limit: 0, or -1. */
    private static int setSoftMemlock(long soft) throws Throwable {
        int rlimitMemlock = 8;
        Linker linker = Linker.nativeLinker();
        MethodHandle get = linker.downcallHandle(linker.defaultLookup().find("getrlimit").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.ADDRESS));
        MethodHandle set = linker.downcallHandle(linker.defaultLookup().find("setrlimit").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.ADDRESS));
        try (Arena a = Arena.ofConfined()) {
            MemorySegment limit = a.allocate(16, 8); // struct rlimit { rlim_t rlim_cur, rlim_max; }
            int rc = (int) get.invokeExact(rlimitMemlock, limit);
            if (rc != 0) {
                return rc;
            }
            limit.set(ValueLayout.JAVA_LONG, 0, soft);
            return (int) set.invokeExact(rlimitMemlock, limit);
        }
    }

    /** A field of /proc/self/status: the number for kB fields, the text otherwise. */
    static String status(String field) throws java.io.IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith(field + ":")) {
                String value = line.substring(field.length() + 1).trim();
                return value.endsWith(" kB") ? value.substring(0, value.length() - 3) : value;
            }
        }
        return "?";
    }
}
