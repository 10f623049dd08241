package io.rdma4j.core.internal;

import io.rdma4j.core.ProviderSelection;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RdmaTransportFactory;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.spi.RdmaProvider;
import io.rdma4j.core.verbs.VerbsDiscovery;
import io.rdma4j.nativeloader.discovery.DiscoveryReport;

/** rdma-core's {@link RdmaTransportFactory}, registered in {@code META-INF/services}. */
public final class DefaultTransportFactory implements RdmaTransportFactory {

    @Override
    public RdmaTransport open(TransportConfig config) {
        return DefaultRdmaTransport.open(config);
    }

    @Override
    public ProviderSelection explain(TransportConfig config) {
        return ProviderRegistry.explain(config);
    }

    @Override
    public String doctorReport(TransportConfig config) {
        StringBuilder out = new StringBuilder();
        DiscoveryReport discovery;
        try {
            discovery = DiscoveryReport.forThisHost(VerbsDiscovery.options(config));
            out.append(discovery.toText());
        } catch (IllegalArgumentException e) {
            out.append("configuration problem: ").append(e.getMessage()).append(System.lineSeparator());
        }
        out.append("providers:").append(System.lineSeparator());
        for (RdmaProvider p : ProviderRegistry.providers()) {
            var a = p.probe(config);
            out.append("  ").append(p.name()).append(" (auto preference ").append(p.autoPreference()).append("): ")
                    .append(a.usable() ? "usable: " : "unusable: ").append(a.reason()).append(System.lineSeparator());
        }
        try {
            ProviderSelection s = ProviderRegistry.explain(config);
            // the details are printed above, once
            out.append("provider=").append(config.provider()).append(" chooses ").append(s.provider()).append(": ")
                    .append(s.summary().replace("; " + ProviderSelection.DOCTOR_HINT, "")).append(System.lineSeparator());
        } catch (RuntimeException e) {
            out.append("provider=").append(config.provider()).append(" chooses nothing: ").append(e.getMessage())
                    .append(System.lineSeparator());
        }
        return out.toString();
    }
}
