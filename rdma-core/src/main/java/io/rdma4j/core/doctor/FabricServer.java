package io.rdma4j.core.doctor;

import io.rdma4j.core.Access;
import io.rdma4j.core.ProtectedModeException;
import io.rdma4j.core.ProviderUnavailableException;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RegistrationException;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.TransportConfig;

import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/**
 * {@code Doctor --serve}: publishes a registered test region and answers the {@link RequestTypes#DOCTOR_HELLO}
 * request of each pinger with this side's provider and the region's descriptor, until the process is stopped.
 */
final class FabricServer {

    private FabricServer() {
    }

    static int serve(TransportConfig config, String target, PrintStream out, PrintStream err) {
        InetSocketAddress requested;
        try {
            // Loopback unless told otherwise: serving other hosts is a choice, made with an address.
            String fallbackHost = config.localAddress() != null ? config.localAddress() : "127.0.0.1";
            requested = FabricWire.parse(target == null ? "" : target, fallbackHost);
        } catch (IllegalArgumentException e) {
            err.println("rdma4j doctor: --serve " + e.getMessage());
            return ExitCode.BAD_ARGUMENTS;
        }
        InetSocketAddress address = new InetSocketAddress(requested.getHostString(), requested.getPort());
        if (address.isUnresolved()) {
            err.println("rdma4j doctor: cannot resolve '" + requested.getHostString() + "' to listen on: give this host's"
                    + " IP address, e.g. --serve 10.0.0.5:" + Doctor.DEFAULT_PORT);
            return ExitCode.BAD_ARGUMENTS;
        }
        RdmaTransport transport;
        try {
            transport = RdmaTransport.open(config);
        } catch (ProviderUnavailableException e) {
            err.println("rdma4j doctor: cannot open the transport here: " + e.getMessage()
                    + " (run the doctor without --serve for this host's report)");
            return ExitCode.CANNOT_RUN_HERE;
        } catch (IllegalArgumentException e) {
            err.println("rdma4j doctor: " + e.getMessage());
            return ExitCode.BAD_ARGUMENTS;
        }
        Arena arena = Arena.ofShared();
        RdmaListener listener;
        try {
            MemorySegment memory = arena.allocate(FabricWire.REGION_BYTES, 4096);
            FabricWire.fill(memory);
            RegisteredRegion region = transport.register(memory, Access.remoteRead());
            Map<String, String> hello = new LinkedHashMap<>();
            hello.put("doctor", FabricWire.VERSION);
            hello.put("host", FabricWire.hostName());
            hello.put("provider", transport.provider());
            hello.put("selection", transport.selection().withoutDoctorHint().toString());
            hello.put("region", HexFormat.of().formatHex(region.descriptor().toBytes()));
            listener = transport.listen(address, RequestHandlers.of(RequestTypes.DOCTOR_HELLO,
                    RequestHandler.answering((body, context) -> {
                        Map<String, String> pinger = FabricWire.decode(body);
                        InetSocketAddress from = context.peer().address();
                        out.println("ping from " + pinger.getOrDefault("host", "?") + " (" + from.getAddress().getHostAddress()
                                + ":" + from.getPort() + "), "
                                + pinger.getOrDefault("selection", context.peer().provider()));
                        return FabricWire.encode(hello);
                    })));
        } catch (RuntimeException e) {
            err.println("rdma4j doctor: cannot serve on " + address + " with " + transport.provider() + ": " + e.getMessage()
                    + (e instanceof RegistrationException || e instanceof ProtectedModeException ? ""
                    : " (is the address this host's and the port free?)"));
            transport.close();
            arena.close();
            return ExitCode.CANNOT_RUN_HERE;
        }
        InetSocketAddress bound = listener.localAddress();
        String reachAs = bound.getAddress().isAnyLocalAddress() ? FabricWire.hostName() : bound.getAddress().getHostAddress();
        out.println("rdma4j doctor serving on " + bound.getAddress().getHostAddress() + ":" + bound.getPort() + " via "
                + transport.selection().withoutDoctorHint());
        out.println("on the other host run: java -jar rdma4j-doctor.jar --ping " + reachAs + ":" + bound.getPort()
                + " (with the same provider and shared-secret options); stop this one with Ctrl-C");
        out.flush();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            listener.close();
            transport.close();
            arena.close();
            stopped.countDown();
        }, "rdma4j-doctor-stop"));
        try {
            stopped.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return ExitCode.OK;
    }
}
