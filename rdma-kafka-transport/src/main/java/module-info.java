/**
 * The Kafka integration: {@code RdmaKafkaConsumer} and its factory ({@code io.rdma4j.kafka}), the log exporter and its
 * broker plugin ({@code .exporter}) and the Kafka Streams client supplier ({@code .streams}). The exporter's wire
 * format ({@code .protocol}) is shared by the consumer and the exporter only.
 * <p>
 * The Kafka jars have no module descriptor and no Automatic-Module-Name: {@code kafka.clients} and
 * {@code kafka.streams} are the automatic names derived from their file names (kafka-clients-VERSION.jar,
 * kafka-streams-VERSION.jar), the names they get on every module path.
 */
@SuppressWarnings({"requires-automatic", "requires-transitive-automatic"})
module io.rdma4j.kafka {
    requires transitive io.rdma4j.core;
    requires transitive kafka.clients;
    // RdmaKafkaClientSupplier only: Streams applications bring kafka-streams and require it themselves.
    requires static kafka.streams;
    requires org.slf4j;

    exports io.rdma4j.kafka;
    exports io.rdma4j.kafka.exporter;
    exports io.rdma4j.kafka.streams;
}
