package io.rdma4j.core.doctor;

import io.rdma4j.core.Access;
import io.rdma4j.core.AuthenticationException;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProviderUnavailableException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RemoteRequestException;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.TransportConfig;

import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * {@code Doctor --ping}: connects to a {@code --serve} doctor, prints the provider of each side, then measures and
 * verifies READ latency (8 B reads, one at a time) and bandwidth (1 MiB reads, a few in flight) on its test region.
 */
final class FabricPing {

    static final int LATENCY_BYTES = 8;
    static final long BANDWIDTH_BLOCK = 1L << 20;
    static final int BANDWIDTH_IN_FLIGHT = 4;
    private static final int WARM_UP_READS = 100;

    /** A failure with its exit code and a message that says what to do. */
    private static final class Failure extends Exception {
        private final int code;

        Failure(int code, String message) {
            super(message, null, false, false);
            this.code = code;
        }
    }

    private FabricPing() {
    }

    static int ping(TransportConfig config, String target, int latencyReads, double bandwidthSeconds, PrintStream out,
                    PrintStream err) {
        InetSocketAddress server;
        try {
            InetSocketAddress parsed = FabricWire.parse(target, "");
            if (parsed.getHostString().isEmpty() || parsed.getPort() == 0) {
                throw new IllegalArgumentException("'" + target + "': give the server's host and port, e.g. 10.0.0.5:"
                        + Doctor.DEFAULT_PORT);
            }
            server = new InetSocketAddress(parsed.getHostString(), parsed.getPort());
        } catch (IllegalArgumentException e) {
            err.println("rdma4j doctor: --ping " + e.getMessage());
            return ExitCode.BAD_ARGUMENTS;
        }
        if (server.isUnresolved()) {
            err.println("rdma4j doctor: cannot connect: cannot resolve host '" + server.getHostString()
                    + "': check the name, or give the server's IP address");
            return ExitCode.CANNOT_CONNECT;
        }
        RdmaTransport transport;
        try {
            transport = RdmaTransport.open(config);
        } catch (ProviderUnavailableException e) {
            err.println("rdma4j doctor: cannot open the transport here: " + e.getMessage()
                    + " (run the doctor without --ping for this host's report)");
            return ExitCode.CANNOT_RUN_HERE;
        } catch (IllegalArgumentException e) {
            err.println("rdma4j doctor: " + e.getMessage());
            return ExitCode.BAD_ARGUMENTS;
        }
        try (transport; Arena arena = Arena.ofShared()) {
            out.println("rdma4j doctor: ping " + server.getHostString() + ":" + server.getPort());
            out.println("this side:   " + FabricWire.hostName() + ", " + transport.selection().withoutDoctorHint());
            RdmaConnection connection = connect(transport, server);
            Map<String, String> hello = hello(transport, connection, server);
            out.println("server side: " + hello.get("host") + ", " + hello.get("selection"));
            RegionDescriptor remote = descriptor(hello, server);
            MemorySegment expected = arena.allocate(remote.length(), 4096);
            FabricWire.fill(expected);
            String kind = FabricWire.readKind(transport.provider());
            out.println(latency(transport, connection, remote, expected, arena, latencyReads, kind));
            out.println(bandwidth(transport, connection, remote, expected, arena, bandwidthSeconds, kind));
            out.println("OK: " + kind + " works between " + FabricWire.hostName() + " and " + hello.get("host"));
            connection.close();
            return ExitCode.OK;
        } catch (Failure f) {
            err.println("rdma4j doctor: " + f.getMessage());
            return f.code;
        } catch (RuntimeException e) {
            err.println("rdma4j doctor: unexpected failure: " + e);
            return ExitCode.FAILED;
        }
    }

    private static RdmaConnection connect(RdmaTransport transport, InetSocketAddress server) throws Failure {
        Duration timeout = transport.config().connectTimeout().plusSeconds(5);
        try {
            return transport.connect(server).get(timeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException | CompletionException e) {
            throw connectFailure(transport, server, e.getCause());
        } catch (TimeoutException e) {
            throw connectFailure(transport, server, new RdmaTimeoutException("no answer within " + timeout));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failure(ExitCode.FAILED, "interrupted while connecting");
        }
    }

    private static Failure connectFailure(RdmaTransport transport, InetSocketAddress server, Throwable cause) {
        if (cause instanceof AuthenticationException) {
            return new Failure(ExitCode.AUTHENTICATION_FAILED, "authentication with " + server + " failed: "
                    + cause.getMessage());
        }
        return new Failure(ExitCode.CANNOT_CONNECT, "cannot connect to " + server + " with the " + transport.provider()
                + " provider: " + cause.getMessage() + ". Check that `java -jar rdma4j-doctor.jar --serve` runs there on"
                + " this address and port, with the same provider (a verbs server cannot be reached over tcp, nor the"
                + " reverse), and that no firewall blocks the port");
    }

    private static Map<String, String> hello(RdmaTransport transport, RdmaConnection connection, InetSocketAddress server)
            throws Failure {
        Map<String, String> mine = new LinkedHashMap<>();
        mine.put("doctor", FabricWire.VERSION);
        mine.put("host", FabricWire.hostName());
        mine.put("selection", transport.selection().withoutDoctorHint().toString());
        try {
            Map<String, String> reply = FabricWire.decode(connection.request(RequestTypes.DOCTOR_HELLO,
                    FabricWire.encode(mine)).get(transport.config().operationTimeout().plusSeconds(5).toMillis(),
                    TimeUnit.MILLISECONDS));
            for (String key : new String[] {"host", "provider", "selection", "region"}) {
                if (!reply.containsKey(key)) {
                    throw new Failure(ExitCode.CANNOT_CONNECT, server + " answered without '" + key + "': run the same"
                            + " rdma4j-doctor.jar version on both hosts");
                }
            }
            return reply;
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof AuthenticationException) {
                throw new Failure(ExitCode.AUTHENTICATION_FAILED, "authentication with " + server + " failed: "
                        + cause.getMessage());
            }
            if (cause instanceof RemoteRequestException r && r.status() == RemoteRequestException.Status.UNKNOWN_TYPE) {
                throw new Failure(ExitCode.CANNOT_CONNECT, server + " is an rdma4j listener but not a doctor: point --ping"
                        + " at `java -jar rdma4j-doctor.jar --serve`");
            }
            throw new Failure(ExitCode.CANNOT_CONNECT, "connected to " + server + " but it did not answer the doctor's"
                    + " hello: " + cause.getMessage() + (cause instanceof ConnectionClosedException
                    ? " (if the server requires a shared-secret or TLS, give this side the same options)" : ""));
        } catch (TimeoutException e) {
            throw new Failure(ExitCode.CANNOT_CONNECT, server + " did not answer the doctor's hello in time");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failure(ExitCode.FAILED, "interrupted while waiting for the server's hello");
        }
    }

    private static RegionDescriptor descriptor(Map<String, String> hello, InetSocketAddress server) throws Failure {
        try {
            RegionDescriptor d = RegionDescriptor.fromBytes(HexFormat.of().parseHex(hello.get("region")));
            if (d.length() < BANDWIDTH_BLOCK || d.length() > FabricWire.REGION_BYTES || d.length() % 8 != 0) {
                throw new IllegalArgumentException("a test region of " + d.length() + " bytes");
            }
            return d;
        } catch (IllegalArgumentException e) {
            throw new Failure(ExitCode.CANNOT_CONNECT, server + " described its test region wrongly (" + e.getMessage()
                    + "): run the same rdma4j-doctor.jar version on both hosts");
        }
    }

    private static String latency(RdmaTransport transport, RdmaConnection connection, RegionDescriptor remote,
                                  MemorySegment expected, Arena arena, int reads, String kind) throws Failure {
        RegisteredRegion sink = transport.register(arena.allocate(4096, 4096), Access.readSink());
        MemorySegment into = sink.segment().asSlice(0, LATENCY_BYTES);
        long[] nanos = new long[reads];
        long slots = remote.length() / LATENCY_BYTES;
        for (int i = -Math.min(WARM_UP_READS, reads); i < reads; i++) {
            long offset = Math.floorMod(i * 4099L, slots) * LATENCY_BYTES; // spread over the region, 8-byte aligned
            long start = System.nanoTime();
            try {
                connection.readAndWait(remote, offset, into);
            } catch (RdmaException e) {
                throw new Failure(ExitCode.READS_FAILED, LATENCY_BYTES + "-byte " + kind + " at offset " + offset
                        + " failed: " + e);
            }
            long took = System.nanoTime() - start;
            verify(into, expected, offset, kind);
            if (i >= 0) {
                nanos[i] = took;
            }
        }
        Arrays.sort(nanos);
        long median = nanos[reads / 2];
        long p99 = nanos[(int) Math.ceil(reads * 0.99) - 1];
        return "%s latency, %d B, one at a time: median %.1f us, p99 %.1f us (%d reads, all verified)"
                .formatted(kind, LATENCY_BYTES, median / 1e3, p99 / 1e3, reads);
    }

    private static String bandwidth(RdmaTransport transport, RdmaConnection connection, RegionDescriptor remote,
                                    MemorySegment expected, Arena arena, double seconds, String kind) throws Failure {
        RegisteredRegion sink = transport.register(arena.allocate(BANDWIDTH_BLOCK * BANDWIDTH_IN_FLIGHT, 4096),
                Access.readSink());
        long blocks = remote.length() / BANDWIDTH_BLOCK;
        List<CompletableFuture<Void>> inFlight = new ArrayList<>(Collections.nCopies(BANDWIDTH_IN_FLIGHT, null));
        long[] offsets = new long[BANDWIDTH_IN_FLIGHT];
        long start = System.nanoTime();
        long deadline = start + (long) (seconds * 1e9);
        long issued = 0;
        long bytes = 0;
        while (true) {
            boolean busy = false;
            for (int slot = 0; slot < BANDWIDTH_IN_FLIGHT; slot++) {
                MemorySegment into = sink.segment().asSlice(slot * BANDWIDTH_BLOCK, BANDWIDTH_BLOCK);
                if (inFlight.get(slot) != null) {
                    await(inFlight.get(slot), offsets[slot], kind, transport.config().operationTimeout());
                    verify(into, expected, offsets[slot], kind);
                    bytes += BANDWIDTH_BLOCK;
                    inFlight.set(slot, null);
                }
                if (System.nanoTime() < deadline) {
                    offsets[slot] = (issued++ % blocks) * BANDWIDTH_BLOCK;
                    inFlight.set(slot, connection.read(remote, offsets[slot], into));
                    busy = true;
                }
            }
            if (!busy) {
                break;
            }
        }
        double elapsed = (System.nanoTime() - start) / 1e9;
        return "%s bandwidth, %d KiB reads, %d in flight: %.0f MiB/s (%d MiB in %.1f s, all verified)"
                .formatted(kind, BANDWIDTH_BLOCK >> 10, BANDWIDTH_IN_FLIGHT, bytes / 1048576.0 / elapsed, bytes >> 20, elapsed);
    }

    private static void await(CompletableFuture<Void> read, long offset, String kind, Duration timeout) throws Failure {
        try {
            read.get(timeout.plusSeconds(5).toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            throw new Failure(ExitCode.READS_FAILED, (BANDWIDTH_BLOCK >> 10) + " KiB " + kind + " at offset " + offset
                    + " failed: " + e.getCause());
        } catch (TimeoutException e) {
            throw new Failure(ExitCode.READS_FAILED, (BANDWIDTH_BLOCK >> 10) + " KiB " + kind + " at offset " + offset
                    + " did not complete within " + timeout.plusSeconds(5));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failure(ExitCode.FAILED, "interrupted while reading");
        }
    }

    private static void verify(MemorySegment got, MemorySegment expected, long offset, String kind) throws Failure {
        long at = got.mismatch(expected.asSlice(offset, got.byteSize()));
        if (at >= 0) {
            throw new Failure(ExitCode.READS_FAILED, kind + " of " + got.byteSize() + " bytes at offset " + offset
                    + " returned other bytes than the server published (first difference at byte " + (offset + at)
                    + "): the data path corrupts data; check the NIC's firmware and driver, or report it with this output");
        }
    }
}
