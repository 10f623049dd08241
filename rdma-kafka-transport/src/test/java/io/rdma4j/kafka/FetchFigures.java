package io.rdma4j.kafka;

import org.apache.kafka.clients.consumer.Consumer;

import java.util.Map;
import java.util.TreeMap;

/** What an RDMA consumer's metrics say, for the tests' assertions and messages. */
final class FetchFigures {

    private FetchFigures() {
    }

    /** The consumer's {@code fallbacks-total} per reason (those above zero). */
    static Map<String, Double> fallbacks(Consumer<?, ?> c) {
        Map<String, Double> out = new TreeMap<>();
        c.metrics().forEach((n, m) -> {
            if (n.name().equals("fallbacks-total") && ((Number) m.metricValue()).doubleValue() > 0) {
                out.put(n.tags().get("reason"), ((Number) m.metricValue()).doubleValue());
            }
        });
        return out;
    }
}
