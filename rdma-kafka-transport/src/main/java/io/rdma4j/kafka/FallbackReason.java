package io.rdma4j.kafka;

/** Why a partition falls back to the normal fetch path; {@link #tag()} is the {@code reason} tag of {@code fallbacks-total}. */
enum FallbackReason {
    EXPORTER_UNREACHABLE("exporter-unreachable", "the log exporter cannot be reached"),
    EXPORTER_CONNECTING("exporter-connecting", "its connection to the log exporter is being set up"),
    NOT_EXPORTED("not-exported", "the offset is not in an exported segment"),
    BELOW_LOG_START("below-log-start", "the offset is below the exported log start"),
    CORRUPT_BATCH("corrupt-batch", "a batch read by RDMA failed its CRC check"),
    READ_FAILED("read-failed", "the RDMA READ or segment lookup failed"),
    DIRECTORY_CHANGING("directory-changing", "the segment directory kept changing"),
    LEADER_MOVING("leader-moving", "the partition's leader kept moving between brokers"),
    NOT_AUTHORIZED("not-authorized", "the exporter checks Kafka ACLs and refused this consumer the topic"),
    ACLS_NOT_CHECKED("acls-not-checked", "this consumer proves a delegation token, and the exporter checks no Kafka ACLs"),
    ABORTED_TRANSACTIONS("aborted-transactions", "the exporter could not tell the aborted transactions of the range"),
    EXPORTER_STALLED("exporter-stalled", "the exporter stopped refreshing the partition's watermark");

    private final String tag;
    private final String words;

    FallbackReason(String tag, String words) {
        this.tag = tag;
        this.words = words;
    }

    String tag() {
        return tag;
    }

    String words() {
        return words;
    }
}
