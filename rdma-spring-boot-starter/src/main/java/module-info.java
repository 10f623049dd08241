/**
 * The Spring Boot starter: the transport as beans, {@code RdmaTemplate} and regions ({@code io.rdma4j.spring.boot}),
 * the auto-configuration ({@code .autoconfigure}) and the Spring Kafka wiring ({@code .kafka}). Every package is API:
 * applications inject, replace or exclude these beans by type.
 * <p>
 * Spring's jars have no module descriptors; the names below are their Automatic-Module-Names. Actuator, health,
 * Micrometer, Spring Kafka and the Kafka module are optional ({@code requires static}): each part of the
 * auto-configuration that needs one is conditional on its classes.
 */
@SuppressWarnings({"requires-automatic", "requires-transitive-automatic"})
module io.rdma4j.spring.boot {
    requires transitive io.rdma4j.core;
    // Their types are in the starter's API (SmartLifecycle, ObjectProvider, DataSize, the auto-configuration's
    // annotations): transitive.
    requires transitive spring.boot;
    requires transitive spring.boot.autoconfigure;
    requires transitive spring.beans;
    requires transitive spring.context;
    requires transitive spring.core;
    requires spring.aop;
    // RdmaTemplate bounds a region read into new memory by the machine's physical memory (com.sun.management).
    requires java.management;
    requires jdk.management;

    // Boot 4's health API (spring-boot-health); Boot 3.5's health and both lines' info API (spring-boot-actuator and
    // its auto-configuration).
    requires static spring.boot.health;
    requires static spring.boot.actuator;
    requires static spring.boot.actuator.autoconfigure;
    requires static micrometer.core;
    requires static spring.kafka;
    requires static io.rdma4j.kafka;
    requires static kafka.clients;
    // RdmaReactorNettyAutoConfiguration only: applications that turn Reactor Netty onto rdma4j bring these
    requires static io.rdma4j.netty;
    requires static reactor.netty.core;
    requires static reactor.netty.http;
    requires static io.netty.resolver;
    requires static spring.boot.http.client;
    requires static spring.web;

    exports io.rdma4j.spring.boot;
    exports io.rdma4j.spring.boot.autoconfigure;
    exports io.rdma4j.spring.boot.kafka;

    // The auto-configuration's nested configurations and bean methods are package-private: Spring reaches them by
    // deep reflection (ReflectionUtils.makeAccessible, in spring.core).
    opens io.rdma4j.spring.boot.autoconfigure to spring.core;
}
