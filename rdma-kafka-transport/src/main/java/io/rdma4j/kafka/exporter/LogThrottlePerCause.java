package io.rdma4j.kafka.exporter;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A {@link LogThrottle} for each kind of failure, the kind being the class of its root cause: a failure that lasts
 * (a registered-memory limit) is said once per interval, and a new cause is said at once, not hidden behind the old
 * one. The kinds are classes, so the map is as small as the code that can throw.
 */
final class LogThrottlePerCause {

    /** How deep a cause chain is followed: a chain that loops, or is absurdly long, ends here. */
    static final int MAX_DEPTH = 16;

    private final Duration interval;
    private final Map<Class<?>, LogThrottle> byCause = new ConcurrentHashMap<>();

    LogThrottlePerCause(Duration interval) {
        this.interval = interval;
    }

    /** For one failure: -1 when it goes quietly, else it goes loudly and this is how many of its kind went quietly. */
    long loudOrQuiet(Throwable failure) {
        return byCause.computeIfAbsent(rootCause(failure).getClass(), k -> new LogThrottle(interval)).loudOrQuiet();
    }

    static Throwable rootCause(Throwable failure) {
        Throwable root = failure;
        for (int depth = 0; depth < MAX_DEPTH && root.getCause() != null && root.getCause() != root; depth++) {
            root = root.getCause();
        }
        return root;
    }
}
