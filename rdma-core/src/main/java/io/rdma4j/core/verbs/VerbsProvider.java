package io.rdma4j.core.verbs;

import io.rdma4j.core.ProviderUnavailableException;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.internal.auth.SecretProof;
import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.core.spi.Availability;
import io.rdma4j.core.spi.ProviderTransport;
import io.rdma4j.core.spi.RdmaProvider;
import io.rdma4j.nativeloader.discovery.DiscoveryOptions;
import io.rdma4j.nativeloader.discovery.DiscoveryReport;
import io.rdma4j.nativeloader.discovery.NativeStatus;
import io.rdma4j.nativeloader.discovery.SelectionResult;

import java.net.InetAddress;
import java.net.UnknownHostException;

/**
 * RDMA through libibverbs and librdmacm: InfiniBand, RoCE and iWARP NICs (and rxe/siw). With a shared secret, peers
 * prove it to each other before any message flows ({@link ProofExchange}).
 */
public final class VerbsProvider implements RdmaProvider {

    public static final String NAME = "verbs";

    @Override
    public String name() {
        return NAME;
    }

    /** Above tcp: a usable RDMA device always wins under {@code auto}. */
    @Override
    public int autoPreference() {
        return 100;
    }

    @Override
    public Availability probe(TransportConfig config) {
        try {
            return examine(config).availability();
        } catch (RuntimeException e) {
            return Availability.unusable("verbs probe failed (" + e.getClass().getSimpleName() + ")", "verbs probe failed: " + e);
        }
    }

    @Override
    public ProviderTransport open(TransportConfig config, TransportMetrics metrics) {
        SecretProof.checkSecret(config.sharedSecret());
        VerbsOptions options = VerbsOptions.from(config);
        // Right after the registry's probe: discovery reuses that probe's scan of the host.
        Examination e = examine(config);
        if (e.selection() == null) {
            throw new ProviderUnavailableException("verbs provider unavailable: " + e.availability().reason());
        }
        return VerbsTransport.open(config, options, metrics, e.selection());
    }

    /** What discovery says for this config: a usable selection, or why not. */
    record Examination(Availability availability, SelectionResult.Selection selection) {
    }

    static Examination examine(TransportConfig config) {
        DiscoveryOptions options;
        try {
            options = options(config);
        } catch (IllegalArgumentException e) {
            return new Examination(Availability.unusable("bad verbs option", e.getMessage()), null);
        }
        DiscoveryReport report = DiscoveryReport.forThisHost(options);
        NativeStatus natives = report.natives().orElseThrow();
        if (natives.libraryProblem().isPresent()) {
            return new Examination(Availability.unusable("RDMA libraries not installed", natives.libraryProblem().get()), null);
        }
        if (natives.callProblem().isPresent()) {
            return new Examination(Availability.unusable("RDMA libraries failed", natives.describe()), null);
        }
        if (natives.verbs().orElseThrow().none()) {
            return new Examination(Availability.unusable("no RDMA device found", "no RDMA devices: " + natives.verbs().get().describe()
                    + VerbsDiscovery.advice(report)), null);
        }
        if (!natives.rdmaCm().orElseThrow().available()) {
            return new Examination(Availability.unusable("rdma_cm unavailable", natives.rdmaCm().get().describe()
                    + ": load it with `modprobe rdma_ucm`" + VerbsDiscovery.advice(report)), null);
        }
        return switch (report.selection()) {
            case SelectionResult.Selection s -> new Examination(Availability.usable(s.device().name() + " port "
                    + s.port().number() + ", " + s.transport(), s.reason()), s);
            case SelectionResult.NoUsableDevice n -> new Examination(Availability.unusable("no usable RDMA port",
                    n.reason() + VerbsDiscovery.advice(report)), null);
        };
    }

    static DiscoveryOptions options(TransportConfig config) {
        DiscoveryOptions o = DiscoveryOptions.auto();
        if (config.device() != null && !config.device().isBlank()) {
            o = o.withDevice(config.device());
        }
        if (config.port() != TransportConfig.AUTO_PORT) {
            o = o.withPort(config.port());
        }
        if (config.gidIndex() != TransportConfig.AUTO_GID_INDEX) {
            o = o.withGidIndex(config.gidIndex());
        }
        if (config.networkInterface() != null) {
            o = o.withInterface(config.networkInterface());
        }
        if (config.localAddress() != null) {
            o = o.withAddress(parseAddress(config.localAddress()));
        }
        return o;
    }

    static InetAddress parseAddress(String literal) {
        if (!literal.matches("[0-9a-fA-F.:]+")) {
            throw new IllegalArgumentException("rdma4j option 'address' needs an IP address literal, got '" + literal + "'");
        }
        try {
            return InetAddress.getByName(literal);
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("rdma4j option 'address' is not an IP address: '" + literal + "'");
        }
    }
}
