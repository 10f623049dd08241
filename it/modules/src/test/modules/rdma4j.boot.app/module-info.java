/** A Spring Boot application on the module path, with the starter and Boot 4's health support. */
module rdma4j.boot.app {
    requires io.rdma4j.spring.boot;
    requires spring.boot.health;
    // Spring creates the configuration (spring.beans) and calls its package-private @RdmaRegion method (made
    // accessible by spring.core) by reflection.
    opens rdma4j.boot.app to spring.core, spring.beans;
}
