package io.rdma4j.core;

/**
 * The message types of requests ({@link RdmaConnection#request}), in one place so that no two
 * components pick the same number. Each component owns a range; add a constant here when adding a type.
 * <ul>
 * <li>{@code 0x0000-0x00FF}: rdma4j core (reserved)</li>
 * <li>{@code 0x0100-0x01FF}: Kafka transport</li>
 * <li>{@code 0x0200-0x02FF}: Spark shuffle</li>
 * <li>{@code 0x0300-0x03FF}: Spring Boot starter</li>
 * <li>{@code 0x10000} and above: applications</li>
 * </ul>
 */
public final class RequestTypes {

    /** rdma4j core: the doctor's fabric check ({@code --ping}) asks a {@code --serve} doctor for its provider and test region. */
    public static final int DOCTOR_HELLO = 0x0001;
    /** Kafka: the segments of a topic-partition from an offset (the log exporter's directory). */
    public static final int KAFKA_DIRECTORY = 0x0100;
    /** Kafka: the aborted transactions that overlap an offset range of a topic-partition (for read_committed). */
    public static final int KAFKA_ABORTED_TRANSACTIONS = 0x0101;
    /**
     * Kafka: a consumer proves to a log exporter that it holds a delegation token (challenge, then proof), so that the
     * exporter serves it only the topics the token's owner may read.
     */
    public static final int KAFKA_AUTHENTICATE = 0x0102;
    /**
     * Kafka: a consumer that reads by one-sided READ alone says now and then that it is still there, so that the log
     * exporter does not close its connection as idle; the answer is empty.
     */
    public static final int KAFKA_KEEPALIVE = 0x0103;
    /** Spark: the region descriptors of map outputs on an executor. */
    public static final int SPARK_DESCRIBE_MAP_OUTPUTS = 0x0200;
    /** Spring Boot: the descriptor of a region published under a name. */
    public static final int SPRING_REGION_LOOKUP = 0x0300;
    /** The first type applications may use. */
    public static final int FIRST_APPLICATION_TYPE = 0x10000;

    private RequestTypes() {
    }
}
