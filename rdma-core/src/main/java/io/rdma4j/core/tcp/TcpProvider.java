package io.rdma4j.core.tcp;

import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.core.spi.Availability;
import io.rdma4j.core.spi.ProviderTransport;
import io.rdma4j.core.spi.RdmaProvider;

/**
 * Software emulation of RDMA semantics over TCP (in the spirit of soft-iWARP): registered regions,
 * random keys checked by the responder, one-sided reads and writes served by the peer's provider
 * threads without involving its application. Runs everywhere; the fallback of {@code auto}.
 */
public final class TcpProvider implements RdmaProvider {

    public static final String NAME = "tcp";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public int autoPreference() {
        return 10;
    }

    @Override
    public Availability probe(TransportConfig config) {
        return Availability.usable("software emulation over TCP", "software provider: no RDMA device needed");
    }

    @Override
    public ProviderTransport open(TransportConfig config, TransportMetrics metrics) {
        TcpHandshake.checkSecret(config.sharedSecret());
        return new TcpTransport(config, TcpOptions.from(config), metrics);
    }
}
