package io.rdma4j.core.internal;

import io.rdma4j.core.ProviderSelection;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RdmaTransportFactory;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.spi.RdmaProvider;
import io.rdma4j.core.verbs.MessageBufferSizing;
import io.rdma4j.core.verbs.VerbsDiscovery;
import io.rdma4j.nativeloader.MemlockLimit;
import io.rdma4j.nativeloader.discovery.DiscoveryReport;

/** rdma-core's {@link RdmaTransportFactory}, provided in module-info.java and registered in {@code META-INF/services}. */
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
    public String doctorReport(TransportConfig config, int connections) {
        StringBuilder out = new StringBuilder();
        // printed once, with the discovery; the lines below leave it out
        String advice = "";
        try {
            DiscoveryReport discovery = DiscoveryReport.forThisHost(VerbsDiscovery.options(config));
            out.append(discovery.toText());
            advice = VerbsDiscovery.advice(discovery);
        } catch (IllegalArgumentException e) {
            out.append("configuration problem: ").append(e.getMessage()).append(System.lineSeparator());
        }
        out.append("providers:").append(System.lineSeparator());
        for (RdmaProvider p : ProviderRegistry.providers()) {
            var a = p.probe(config);
            out.append("  ").append(p.name()).append(" (auto preference ").append(p.autoPreference()).append("): ")
                    .append(a.usable() ? "usable: " : "unusable: ").append(without(a.reason(), advice))
                    .append(System.lineSeparator());
        }
        try {
            // the doctor is where the hint points
            ProviderSelection s = ProviderRegistry.explain(config).withoutDoctorHint();
            out.append("provider=").append(config.provider()).append(" chooses ").append(s.provider()).append(": ")
                    .append(s.summary()).append(System.lineSeparator());
        } catch (RuntimeException e) {
            out.append("provider=").append(config.provider()).append(" chooses nothing: ")
                    .append(without(e.getMessage(), advice)).append(System.lineSeparator());
        }
        try {
            out.append(MemlockAdvice.text(MessageBufferSizing.of(DefaultRdmaTransport.providerConfig(config)),
                    MessageBufferSizing.of(config).settings(), connections, MemlockLimit.current()));
        } catch (IllegalArgumentException e) {
            // a bad verbs option: the provider lines above say so
        }
        return out.toString();
    }

    private static String without(String text, String part) {
        return part.isEmpty() || text == null ? text : text.replace(part, "");
    }
}
