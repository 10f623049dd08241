package io.rdma4j.core.verbs;

import io.rdma4j.core.TransportConfig;

import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * The verbs provider's options ({@code verbs.*} keys of {@link TransportConfig}), validated like the tcp
 * provider's: an unknown key is a typo and fails with the list of known ones.
 *
 * @param receiveDepth   receive buffers (message credits) per connection
 * @param busyPoll       the progress thread spins on the CQs instead of arming them and sleeping
 * @param awaitSpinNanos how long a caller waiting on an operation polls the CQ itself before it blocks
 */
record VerbsOptions(int receiveDepth, boolean busyPoll, long awaitSpinNanos) {

    static final Set<String> KEYS = Set.of("receive-depth", "busy-poll", "await-spin-micros");
    static final int MIN_RECEIVE_DEPTH = 2;
    static final int MAX_RECEIVE_DEPTH = 4096;
    static final long MAX_AWAIT_SPIN_MICROS = 1_000_000;

    private static final String PREFIX = VerbsProvider.NAME + ".";

    static VerbsOptions from(TransportConfig config) {
        for (String qualified : config.providerOptions().keySet()) {
            if (qualified.startsWith(PREFIX) && !KEYS.contains(qualified.substring(PREFIX.length()))) {
                throw new IllegalArgumentException("unknown verbs provider option '" + qualified + "'; known: " + PREFIX
                        + String.join(", " + PREFIX, KEYS.stream().sorted().toList()));
            }
        }
        long depth = option(config, "receive-depth").map(v -> parseLong("receive-depth", v)).orElse(32L);
        if (depth < MIN_RECEIVE_DEPTH || depth > MAX_RECEIVE_DEPTH) {
            throw new IllegalArgumentException("verbs.receive-depth must be in [" + MIN_RECEIVE_DEPTH + ", "
                    + MAX_RECEIVE_DEPTH + "], got " + depth + ": set it to the number of messages a peer may send unanswered");
        }
        boolean busyPoll = option(config, "busy-poll").map(VerbsOptions::parseBoolean).orElse(false);
        long spinMicros = option(config, "await-spin-micros").map(v -> parseLong("await-spin-micros", v)).orElse(1000L);
        if (spinMicros < 0 || spinMicros > MAX_AWAIT_SPIN_MICROS) {
            throw new IllegalArgumentException("verbs.await-spin-micros must be in [0, " + MAX_AWAIT_SPIN_MICROS
                    + "], got " + spinMicros + ": set 0 to leave all polling to the progress thread");
        }
        return new VerbsOptions((int) depth, busyPoll, TimeUnit.MICROSECONDS.toNanos(spinMicros));
    }

    private static Optional<String> option(TransportConfig config, String key) {
        return config.option(VerbsProvider.NAME, key);
    }

    private static long parseLong(String key, String value) {
        try {
            return Long.parseLong(value.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("rdma4j option '" + PREFIX + key + "' needs an integer, got '" + value + "'");
        }
    }

    private static boolean parseBoolean(String value) {
        return switch (value.trim()) {
            case "true" -> true;
            case "false" -> false;
            default -> throw new IllegalArgumentException("verbs.busy-poll must be true or false, got '" + value + "'");
        };
    }
}
