package io.rdma4j.kafka.protocol;

import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The watermark record as consumers read it one-sided: every field back, and a torn record recognised. */
class WatermarkTest {

    @Test
    void everyFieldIncludingTheLeaderComesBack() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment record = arena.allocate(Watermark.SIZE);
            Watermark w = new Watermark(1000, 900, 4096, 10, 990, 950, 7, 1_795_700_000_000L, 3);
            w.writeTo(record);
            assertThat(Watermark.readFrom(record)).isEqualTo(w);
            new Watermark(1, 0, 0, 0, 1, 0, 1, 1, Watermark.UNKNOWN_LEADER).writeTo(record);
            assertThat(Watermark.readFrom(record).leaderId()).isEqualTo(Watermark.UNKNOWN_LEADER);
        }
    }

    @Test
    void aRecordCaughtMidUpdateReadsAsNullAndTooShortABufferIsRefused() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment record = arena.allocate(Watermark.SIZE);
            new Watermark(1000, 900, 4096, 10, 990, 950, 7, 1, 3).writeTo(record);
            record.set(ValueLayout.JAVA_BYTE, 79, (byte) 9); // The leader field's low byte, after the CRC was written.
            assertThat(Watermark.readFrom(record)).as("CRC mismatch: the reader reads again").isNull();
            assertThatThrownBy(() -> Watermark.readFrom(arena.allocate(8))).isInstanceOf(IllegalArgumentException.class);
        }
    }
}
