package io.rdma4j.core.internal;

import io.rdma4j.core.ProviderSelection;
import io.rdma4j.core.ProviderUnavailableException;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.core.spi.Availability;
import io.rdma4j.core.spi.ProviderTransport;
import io.rdma4j.core.spi.RdmaProvider;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.ServiceLoader;
import java.util.stream.Collectors;

/** Finds providers with {@link ServiceLoader} and applies the {@code auto}/named selection rules. */
public final class ProviderRegistry {

    private static final System.Logger LOG = System.getLogger(ProviderRegistry.class.getName());

    private ProviderRegistry() {
    }

    /** Every provider found (module path or class path), highest auto preference first. */
    public static List<RdmaProvider> providers() {
        List<RdmaProvider> found = new ArrayList<>();
        ServiceLoader.load(RdmaProvider.class, ProviderRegistry.class.getClassLoader()).forEach(found::add);
        found.sort(Comparator.comparingInt(RdmaProvider::autoPreference).reversed());
        return found;
    }

    /** What {@code auto} (or the named provider) would choose here, without opening anything. */
    public static ProviderSelection explain(TransportConfig config) {
        Notes notes = new Notes();
        for (RdmaProvider p : candidates(config)) {
            Availability a = p.probe(config);
            if (a.usable()) {
                return notes.selection(config, p, a);
            }
            notes.unusable(p, a);
        }
        throw new ProviderUnavailableException(notes.details());
    }

    record Opened(ProviderSelection selection, ProviderTransport transport, TransportMetrics metrics) {
    }

    static Opened open(TransportConfig config) {
        Notes notes = new Notes();
        for (RdmaProvider p : candidates(config)) {
            Availability a = p.probe(config);
            if (!a.usable()) {
                notes.unusable(p, a);
                continue;
            }
            TransportMetrics metrics = new TransportMetrics(p.name());
            try {
                ProviderTransport transport = p.open(config, metrics);
                return new Opened(notes.selection(config, p, a), transport, metrics);
            } catch (ProviderUnavailableException e) {
                if (!TransportConfig.AUTO.equals(config.provider())) {
                    throw e;
                }
                // Usable by the probe yet failing to open is a problem on this host, worth a line of its own.
                LOG.log(System.Logger.Level.WARNING, "rdma4j: " + p.name() + " failed to open, trying the next provider: "
                        + e.getMessage());
                notes.failed(p, e);
            }
        }
        throw new ProviderUnavailableException("no rdma4j provider can run here: " + notes.details());
    }

    /** Why the providers before the chosen one were passed over, in the short and the detailed form. */
    private static final class Notes {
        private final List<String> summaries = new ArrayList<>();
        private final List<String> details = new ArrayList<>();

        void unusable(RdmaProvider p, Availability a) {
            summaries.add(a.summary());
            details.add(p.name() + " unusable: " + a.reason());
        }

        void failed(RdmaProvider p, ProviderUnavailableException e) {
            summaries.add(p.name() + " failed to open");
            details.add(p.name() + " failed to open: " + e.getMessage());
        }

        String details() {
            return String.join("; ", details);
        }

        ProviderSelection selection(TransportConfig config, RdmaProvider chosen, Availability a) {
            String mode = TransportConfig.AUTO.equals(config.provider()) ? "auto" : "configured";
            String reason = mode + ": " + (details.isEmpty() ? "" : details() + "; ") + a.reason();
            String summary = summaries.isEmpty()
                    ? mode + ": " + a.summary()
                    : mode + ": " + String.join("; ", summaries) + "; " + ProviderSelection.DOCTOR_HINT;
            return new ProviderSelection(chosen.name(), reason, summary);
        }
    }

    private static List<RdmaProvider> candidates(TransportConfig config) {
        List<RdmaProvider> all = providers();
        if (TransportConfig.AUTO.equals(config.provider())) {
            return all;
        }
        List<RdmaProvider> named = all.stream().filter(p -> p.name().equals(config.provider())).toList();
        if (named.isEmpty()) {
            throw new IllegalArgumentException("unknown rdma4j provider '" + config.provider() + "'; known: auto, "
                    + all.stream().map(RdmaProvider::name).collect(Collectors.joining(", ")));
        }
        return named;
    }
}
