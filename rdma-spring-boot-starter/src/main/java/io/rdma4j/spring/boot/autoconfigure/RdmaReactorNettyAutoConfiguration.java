package io.rdma4j.spring.boot.autoconfigure;

import io.netty.resolver.DefaultAddressResolverGroup;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.netty.reactor.RdmaLoopResources;
import io.rdma4j.spring.boot.RdmaProperties;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.http.client.autoconfigure.reactive.ClientHttpConnectorBuilderCustomizer;
import org.springframework.boot.http.client.reactive.ReactorClientHttpConnectorBuilder;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.client.ReactorResourceFactory;
import reactor.netty.resources.LoopResources;

/**
 * Reactor Netty on rdma4j: with {@code rdma4j.netty.enabled=true}, rdma4j's Netty transport
 * ({@code io.rdma4j:rdma-netty-transport}) and Reactor Netty on the class path, Reactor Netty's resources are loops of
 * the rdma4j transport bean, so Boot's Netty web server (WebFlux) serves, and WebClient connects, through rdma4j's
 * channels. Both ends must run rdma4j: a browser or a plain HTTP client cannot reach such a server. Each bean steps
 * aside for one of the application's; the transport's own settings (provider, shared secret, bounds) apply.
 */
@AutoConfiguration(after = RdmaAutoConfiguration.class, beforeName = {
        "org.springframework.boot.reactor.netty.autoconfigure.NettyReactiveWebServerAutoConfiguration",
        "org.springframework.boot.http.client.autoconfigure.reactive.ReactiveHttpClientAutoConfiguration",
        "org.springframework.boot.autoconfigure.web.reactive.ReactiveWebServerFactoryAutoConfiguration",
        "org.springframework.boot.autoconfigure.reactor.netty.ReactorNettyAutoConfiguration"})
@ConditionalOnClass({RdmaLoopResources.class, LoopResources.class, ReactorResourceFactory.class})
@ConditionalOnProperty(prefix = "rdma4j", name = "enabled", havingValue = "true", matchIfMissing = true)
@ConditionalOnProperty(prefix = "rdma4j.netty", name = "enabled", havingValue = "true")
@ConditionalOnBean(RdmaTransport.class)
public class RdmaReactorNettyAutoConfiguration {

    @Bean(destroyMethod = "dispose")
    @ConditionalOnMissingBean
    public RdmaLoopResources rdmaLoopResources(RdmaTransport transport, RdmaProperties properties) {
        return RdmaLoopResources.create(transport, properties.getNetty().getEventLoopThreads());
    }

    /** Boot's server factory and HTTP client connector take their loops from this factory. */
    @Bean
    @ConditionalOnMissingBean
    public ReactorResourceFactory reactorResourceFactory(RdmaLoopResources loops) {
        ReactorResourceFactory factory = new ReactorResourceFactory();
        factory.setUseGlobalResources(false);
        factory.setLoopResources(loops);
        return factory;
    }

    /** WebClient's connector (Boot 4): rdma4j's loops run no datagram channel for Netty's DNS resolver. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass({ClientHttpConnectorBuilderCustomizer.class, ReactorClientHttpConnectorBuilder.class})
    static class ClientConnector {

        @Bean
        @ConditionalOnMissingBean(name = "rdmaClientHttpConnectorBuilderCustomizer")
        ClientHttpConnectorBuilderCustomizer<ReactorClientHttpConnectorBuilder> rdmaClientHttpConnectorBuilderCustomizer(
                ReactorResourceFactory resources) {
            return builder -> builder.withReactorResourceFactory(resources)
                    .withHttpClientCustomizer(client -> client.resolver(DefaultAddressResolverGroup.INSTANCE));
        }
    }
}
