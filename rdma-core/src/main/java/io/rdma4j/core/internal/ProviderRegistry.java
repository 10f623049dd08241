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

    private ProviderRegistry() {
    }

    /** Every provider on the class path, highest auto preference first. */
    public static List<RdmaProvider> providers() {
        List<RdmaProvider> found = new ArrayList<>();
        ServiceLoader.load(RdmaProvider.class, ProviderRegistry.class.getClassLoader()).forEach(found::add);
        found.sort(Comparator.comparingInt(RdmaProvider::autoPreference).reversed());
        return found;
    }

    /** What {@code auto} (or the named provider) would choose here, without opening anything. */
    public static ProviderSelection explain(TransportConfig config) {
        List<String> notes = new ArrayList<>();
        for (RdmaProvider p : candidates(config)) {
            Availability a = p.probe(config);
            if (a.usable()) {
                return new ProviderSelection(p.name(), describe(config, notes, a));
            }
            notes.add(p.name() + " unusable: " + a.reason());
        }
        throw new ProviderUnavailableException(String.join("; ", notes));
    }

    record Opened(ProviderSelection selection, ProviderTransport transport, TransportMetrics metrics) {
    }

    static Opened open(TransportConfig config) {
        List<String> notes = new ArrayList<>();
        for (RdmaProvider p : candidates(config)) {
            Availability a = p.probe(config);
            if (!a.usable()) {
                notes.add(p.name() + " unusable: " + a.reason());
                continue;
            }
            TransportMetrics metrics = new TransportMetrics(p.name());
            try {
                return new Opened(new ProviderSelection(p.name(), describe(config, notes, a)), p.open(config, metrics), metrics);
            } catch (ProviderUnavailableException e) {
                if (!TransportConfig.AUTO.equals(config.provider())) {
                    throw e;
                }
                notes.add(p.name() + " failed to open: " + e.getMessage());
            }
        }
        throw new ProviderUnavailableException("no rdma4j provider can run here: " + String.join("; ", notes));
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

    private static String describe(TransportConfig config, List<String> notes, Availability chosen) {
        String mode = TransportConfig.AUTO.equals(config.provider()) ? "auto" : "configured";
        return mode + ": " + (notes.isEmpty() ? "" : String.join("; ", notes) + "; ") + chosen.reason();
    }
}
