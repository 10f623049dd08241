/** A Kafka application on the module path: the Kafka module brings rdma-core and the Kafka clients with it. */
module rdma4j.kafka.app {
    requires io.rdma4j.kafka;
}
