package io.rdma4j.spring.boot;

import io.rdma4j.core.ProviderSelection;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What health and info report about the transport, independent of the Spring Boot line (the health
 * API moved packages between Boot 3 and 4, so each line has its own thin indicator around this).
 *
 * @param state   how health reports it
 * @param details provider, selection reason, whether tcp is a fallback, regions, endpoint; the error
 *                when not {@link State#UP}, and the mode the application runs in without RDMA
 * @param failure why the transport or the endpoint is unavailable, or null
 */
public record RdmaStatus(State state, Map<String, Object> details, Throwable failure) {

    public enum State {
        /** The transport is open (and the endpoint listens where one is enabled). Health UP. */
        UP("UP"),
        /**
         * The transport failed to open and the application runs without it, as {@code rdma4j.fail-fast=false}
         * allows. Health UNKNOWN, not DOWN: the application works as configured.
         */
        WITHOUT_RDMA("UNKNOWN"),
        /** The transport is open but the enabled endpoint failed to listen ({@code rdma4j.fail-fast=false}). Health DOWN. */
        DOWN("DOWN");

        private final String healthStatus;

        State(String healthStatus) {
            this.healthStatus = healthStatus;
        }

        /** The health status code, the same string on both Boot lines' health APIs. */
        public String healthStatus() {
            return healthStatus;
        }
    }

    /** The {@code mode} detail while the transport is unavailable. */
    public static final String WITHOUT_RDMA_MODE = "running without RDMA (rdma4j.fail-fast=false)";

    /** The provider that emulates RDMA in software. */
    public static final String SOFTWARE_PROVIDER = "tcp";

    public static RdmaStatus of(RdmaTransport transport, RdmaEndpoint endpoint, RdmaTemplate template) {
        ProviderSelection selection = transport.selection();
        Map<String, Object> details = new LinkedHashMap<>();
        details.put("provider", selection.provider());
        details.put("reason", selection.summary());  // the full story is the doctor's and DEBUG's
        if (transport instanceof UnavailableRdmaTransport unavailable) {
            details.put("error", unavailable.failure().getMessage());
            details.put("mode", WITHOUT_RDMA_MODE);
            return new RdmaStatus(State.WITHOUT_RDMA, details, unavailable.failure());
        }
        // tcp chosen by auto-detection means no usable RDMA device: worth seeing, not an outage.
        boolean fallback = SOFTWARE_PROVIDER.equals(selection.provider())
                && TransportConfig.AUTO.equals(transport.config().provider());
        details.put("fallback", fallback);
        details.put("registeredRegions", transport.registeredRegions());
        details.put("connections", transport.metrics().openConnections());
        // what peers make this process hold (bounded on tcp by tcp.max-buffered-bytes)
        details.put("bufferedBytes", transport.metrics().bufferedBytes());
        details.put("messageBufferBytes", transport.metrics().messageBufferBytes());
        details.put("lentReceiveCredits", transport.metrics().lentReceiveCredits());
        if (template != null) {
            details.put("publishedRegions", template.publishedNames());
        }
        if (endpoint != null && endpoint.isRunning()) {
            details.put("endpoint", endpoint.localAddress().getHostString() + ":" + endpoint.localAddress().getPort());
        }
        RuntimeException endpointFailure = endpoint == null ? null : endpoint.failure();
        if (endpointFailure != null) {
            details.put("error", "endpoint failed to listen: " + endpointFailure.getMessage());
            return new RdmaStatus(State.DOWN, details, endpointFailure);
        }
        return new RdmaStatus(State.UP, details, null);
    }
}
