package io.rdma4j.kafka;

import io.rdma4j.kafka.protocol.InflateArrays;
import io.rdma4j.kafka.protocol.RecordBatchParser;
import io.rdma4j.kafka.protocol.RecordBatchParser.Batch;
import io.rdma4j.kafka.protocol.RecordBatchParser.Parsed;
import io.rdma4j.kafka.protocol.RecordBatchParser.ParsedRecord;
import org.apache.kafka.common.utils.BufferSupplier;

import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * The whole batches of a range read by RDMA, each with its CRC checked and its records parsed (inflated where
 * compressed) either ahead, on the fetcher's decoder thread while the application works on earlier records, or
 * when the consumer's thread first asks. A batch that failed ahead fails with the same exception when asked for,
 * so a corrupt batch is reported where the consumer reaches it, as without decoding ahead. A compressed batch is
 * inflated into an array of {@code arrays}, given back when the consumer has converted all its records
 * ({@link #converted}).
 */
final class DecodedBatches {

    private final List<Batch> batches;
    /** Byte offset of each batch in the range. */
    private final long[] starts;
    /** Marks a batch whose CRC was checked and whose records were not parsed yet. */
    private static final Object CHECKED = new Object();
    /** Per batch: null (nothing done yet), {@link #CHECKED}, its {@link Parsed} records, or the exception decoding it threw. */
    private final Object[] outcomes;
    private final int from;
    private final InflateArrays arrays;

    private DecodedBatches(List<Batch> batches, long[] starts, Object[] outcomes, int from, InflateArrays arrays) {
        this.batches = batches;
        this.starts = starts;
        this.outcomes = outcomes;
        this.from = from;
        this.arrays = arrays;
    }

    /** The whole batches at the start of {@code bytes}, nothing decoded yet. */
    static DecodedBatches parse(MemorySegment bytes) {
        return parse(bytes, InflateArrays.SHARED);
    }

    static DecodedBatches parse(MemorySegment bytes, InflateArrays arrays) {
        List<Batch> batches = RecordBatchParser.batches(bytes.asByteBuffer());
        long[] starts = new long[batches.size()];
        long at = 0;
        for (int i = 0; i < starts.length; i++) {
            starts[i] = at;
            at += batches.get(i).sizeInBytes();
        }
        return new DecodedBatches(batches, starts, new Object[batches.size()], 0, arrays);
    }

    /** As {@link #parse}, then every batch checked and its records parsed, with {@code buffers} of the calling thread. */
    static DecodedBatches decode(MemorySegment bytes, BufferSupplier buffers) {
        return decode(bytes, buffers, InflateArrays.SHARED);
    }

    static DecodedBatches decode(MemorySegment bytes, BufferSupplier buffers, InflateArrays arrays) {
        DecodedBatches d = parse(bytes, arrays);
        for (int i = 0; i < d.batches.size(); i++) {
            try {
                Batch batch = d.batches.get(i);
                batch.ensureValid();
                d.outcomes[i] = batch.records(buffers, arrays);
            } catch (RuntimeException e) {
                d.outcomes[i] = e;
            }
        }
        return d;
    }

    List<Batch> batches() {
        return batches.subList(from, batches.size());
    }

    /** Verifies batch {@code i} (of {@link #batches()}), unless that was done ahead. */
    void ensureValid(int i) {
        Object outcome = outcomes[from + i];
        if (outcome instanceof RuntimeException e) {
            throw e;
        }
        if (outcome == null) {
            batches.get(from + i).ensureValid();
            outcomes[from + i] = CHECKED;
        }
    }

    /**
     * The records of batch {@code i}, parsed ahead or now with {@code buffers} (kept, so a poll that resumes inside
     * the batch does not inflate it again). Call {@link #ensureValid} first.
     */
    List<ParsedRecord> records(int i, BufferSupplier buffers) {
        Object outcome = outcomes[from + i];
        if (outcome instanceof Parsed parsed) {
            return parsed.records();
        }
        if (outcome != CHECKED) {
            throw new IllegalStateException("batch " + i + " was not checked");
        }
        Parsed parsed = batches.get(from + i).records(buffers, arrays);
        outcomes[from + i] = parsed;
        return parsed.records();
    }

    /**
     * Says that the records of batch {@code i} from {@link #records} are no longer read (each converted, keys and values
     * copied): its inflated array goes back to the pool, and asking for its records again inflates it again.
     */
    void converted(int i) {
        if (outcomes[from + i] instanceof Parsed parsed && parsed.inflatedInto() != null) {
            outcomes[from + i] = CHECKED;
            arrays.giveBack(parsed.inflatedInto());
        }
    }

    /** The batches from byte {@code offset} of this view on, or null when no batch starts there. */
    DecodedBatches from(long offset) {
        long base = starts.length == 0 || from == starts.length ? 0 : starts[from];
        for (int i = from; i < starts.length; i++) {
            if (starts[i] - base == offset) {
                return new DecodedBatches(batches, starts, outcomes, i, arrays);
            }
        }
        return null;
    }
}
