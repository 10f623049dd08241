package io.rdma4j.spring.boot.autoconfigure;

import io.rdma4j.spring.boot.RdmaStatus;
import org.springframework.boot.actuate.info.Info;
import org.springframework.boot.actuate.info.InfoContributor;

import java.util.function.Supplier;

/**
 * {@code /actuator/info} section {@code rdma4j}: provider, why it was selected (the reason names the
 * devices auto-detection found or why none was usable), fallback, endpoint and regions.
 */
// The actuator is optional (requires static): applications with it require it themselves.
@SuppressWarnings("exports")
public class RdmaInfoContributor implements InfoContributor {

    private final Supplier<RdmaStatus> status;

    public RdmaInfoContributor(Supplier<RdmaStatus> status) {
        this.status = status;
    }

    @Override
    public void contribute(Info.Builder builder) {
        builder.withDetail("rdma4j", status.get().details());
    }
}
