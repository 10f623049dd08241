package io.rdma4j.kafka.protocol;

/**
 * Where each field of a magic v2 record batch header is, as Kafka's {@code DefaultRecordBatch} writes it (big-endian);
 * the one place {@link BatchHeaders} and {@link RecordBatchParser} take their offsets from.
 */
final class BatchLayout {

    static final int BASE_OFFSET = 0;
    /** The bytes after {@link #LOG_OVERHEAD}. */
    static final int BATCH_LENGTH = 8;
    /** baseOffset(8) + batchLength(4): the batch length counts the bytes after these 12. */
    static final int LOG_OVERHEAD = 12;
    static final int PARTITION_LEADER_EPOCH = 12;
    static final int MAGIC = 16;
    /** CRC32C of everything from {@link #ATTRIBUTES} to the end of the batch. */
    static final int CRC = 17;
    static final int ATTRIBUTES = 21;
    static final int LAST_OFFSET_DELTA = 23;
    static final int BASE_TIMESTAMP = 27;
    static final int MAX_TIMESTAMP = 35;
    static final int PRODUCER_ID = 43;
    static final int RECORD_COUNT = 57;
    /** Where the records start: the header's size. */
    static final int RECORDS = 61;
    static final byte MAGIC_V2 = 2;
    /** Attribute bits. */
    static final int TRANSACTIONAL = 0x10;
    static final int CONTROL = 0x20;

    private BatchLayout() {
    }
}
