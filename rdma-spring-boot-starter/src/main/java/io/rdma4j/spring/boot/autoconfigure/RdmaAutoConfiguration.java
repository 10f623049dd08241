package io.rdma4j.spring.boot.autoconfigure;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.pool.RegisteredBufferPool;
import io.rdma4j.spring.boot.RdmaEndpoint;
import io.rdma4j.spring.boot.RdmaProperties;
import io.rdma4j.spring.boot.RdmaRegionPublisher;
import io.rdma4j.spring.boot.RdmaTemplate;
import io.rdma4j.spring.boot.UnavailableRdmaTransport;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;

import java.net.InetSocketAddress;

/**
 * The rdma4j transport as beans: {@link RdmaTransport}, {@link RegisteredBufferPool},
 * {@link RdmaTemplate}, {@link RdmaRegionPublisher} and, with {@code rdma4j.endpoint.enabled=true}, the
 * listening {@link RdmaEndpoint}. Each backs off when the application defines its own; with
 * {@code rdma4j.enabled=false} none is defined and no native code is touched.
 *
 * <p>Shutdown order follows the dependencies: the endpoint stops (lifecycle) before beans are
 * destroyed; then the template withdraws and deregisters its regions, the pool frees its buffers,
 * and the transport closes last.
 */
@AutoConfiguration
@ConditionalOnClass(RdmaTransport.class)
@ConditionalOnProperty(prefix = "rdma4j", name = "enabled", havingValue = "true", matchIfMissing = true)
@EnableConfigurationProperties(RdmaProperties.class)
public class RdmaAutoConfiguration {

    private static final System.Logger LOG = System.getLogger(RdmaAutoConfiguration.class.getName());

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public RdmaTransport rdmaTransport(RdmaProperties properties) {
        TransportConfig config = properties.toTransportConfig();
        try {
            return RdmaTransport.open(config);
        } catch (RuntimeException e) {
            if (properties.isFailFast()) {
                throw e;
            }
            LOG.log(System.Logger.Level.WARNING, "rdma4j transport failed to open; running without it (rdma4j.fail-fast=false): "
                    + e.getMessage());
            return new UnavailableRdmaTransport(config, e);
        }
    }

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public RegisteredBufferPool rdmaBufferPool(RdmaTransport transport, RdmaProperties properties) {
        // Registers nothing until the first acquire, so it exists even while the transport is unavailable.
        return transport.createBufferPool(properties.getPool().toPoolConfig());
    }

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public RdmaTemplate rdmaTemplate(RdmaTransport transport) {
        return new RdmaTemplate(transport);
    }

    @Bean
    @ConditionalOnMissingBean
    public RdmaRegionPublisher rdmaRegionPublisher(ConfigurableListableBeanFactory beanFactory, ObjectProvider<RdmaTemplate> template) {
        return new RdmaRegionPublisher(beanFactory, template);
    }

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnProperty(prefix = "rdma4j.endpoint", name = "enabled", havingValue = "true")
    public RdmaEndpoint rdmaEndpoint(RdmaTransport transport, RdmaTemplate template, RdmaProperties properties) {
        RdmaProperties.Endpoint endpoint = properties.getEndpoint();
        return new RdmaEndpoint(transport, template, new InetSocketAddress(endpoint.getAddress(), endpoint.getPort()),
                properties.isFailFast());
    }
}
