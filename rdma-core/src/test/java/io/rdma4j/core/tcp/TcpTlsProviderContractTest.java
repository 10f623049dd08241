package io.rdma4j.core.tcp;

import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.contract.ProviderContractTest;

import java.time.Duration;
import java.util.Optional;

/** The tcp provider over mutual TLS with a shared secret passes the provider contract unchanged. */
class TcpTlsProviderContractTest extends ProviderContractTest {

    @Override
    protected TransportConfig config() {
        TlsStores stores = TlsStores.get();
        return TransportConfig.builder().provider("tcp").operationTimeout(Duration.ofSeconds(60))
                .sharedSecret("correct horse battery")
                .providerOption("tcp.tls", "true")
                .providerOption("tcp.tls.key-store", stores.member.toString())
                .providerOption("tcp.tls.key-store-password", TlsStores.PASSWORD)
                .providerOption("tcp.tls.trust-store", stores.trust.toString())
                .providerOption("tcp.tls.trust-store-password", TlsStores.PASSWORD)
                .build();
    }

    @Override
    protected String expectedProvider() {
        return "tcp";
    }

    /** Mutual TLS: the handler sees the client certificate's subject. */
    @Override
    protected Optional<String> expectedPrincipal() {
        return Optional.of("CN=member");
    }
}
