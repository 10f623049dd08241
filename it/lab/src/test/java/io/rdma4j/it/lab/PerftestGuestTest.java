package io.rdma4j.it.lab;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** perftest's RDMA READ latency test, server and client on the lab device's own address. */
class PerftestGuestTest {

    private static final int ITERATIONS = 200;
    /** One port per device: the devices' guest JVMs run at the same time. */
    private static final int BASE_PORT = 18_600;
    private static final Duration RUN_TIMEOUT = Duration.ofSeconds(180);
    private static final Duration LISTEN_TIMEOUT = Duration.ofSeconds(60);
    /** The result row: #bytes #iterations t_min t_max t_typical t_avg ... (microseconds). */
    private static final Pattern RESULT_ROW = Pattern.compile(
            "(?m)^\\s*(\\d+)\\s+(\\d+)\\s+(\\d+\\.\\d+)\\s+(\\d+\\.\\d+)\\s+(\\d+\\.\\d+)\\s+(\\d+\\.\\d+)\\s");

    private final LabDevice device = LabDevice.current();
    private final int port = BASE_PORT + LabDevice.ALL.indexOf(device);

    @Test
    void readLatencyCompletesAndReportsALatencyRow() throws Exception {
        try (GuestCommand server = GuestCommand.start(perftest(null))) {
            awaitListening(server);
            GuestCommand.Result client = GuestCommand.run(RUN_TIMEOUT, perftest(device.address()));
            GuestCommand.Result serverResult = server.await(RUN_TIMEOUT);

            String output = client.requireSuccess();
            serverResult.requireSuccess();
            Matcher row = RESULT_ROW.matcher(output);
            assertThat(row.find()).as("latency row in ib_read_lat output:\n%s", output).isTrue();
            assertThat(Integer.parseInt(row.group(1))).as("#bytes").isEqualTo(2);
            assertThat(Integer.parseInt(row.group(2))).as("#iterations").isEqualTo(ITERATIONS);
            double min = Double.parseDouble(row.group(3));
            double max = Double.parseDouble(row.group(4));
            double typical = Double.parseDouble(row.group(5));
            assertThat(min).as("t_min[usec]").isPositive();
            assertThat(typical).as("t_typical[usec]").isBetween(min, max);
            System.out.printf("ib_read_lat %s: t_typical %.2f us (emulated: compare only within one boot)%n",
                    device.name(), typical);
        }
    }

    /** ib_read_lat arguments; a server when {@code serverAddress} is null. */
    private String[] perftest(String serverAddress) {
        List<String> args = new ArrayList<>(List.of("ib_read_lat", "-d", device.name(), "-F",
                "-n", Integer.toString(ITERATIONS), "-p", Integer.toString(port)));
        if (device.kind() == LabDevice.Kind.SIW) {
            args.add("-R"); // iWARP connections must be made through rdma_cm
        }
        if (serverAddress != null) {
            args.add(serverAddress);
        }
        return args.toArray(String[]::new);
    }

    /** The client fails outright when it connects too early, so wait for the server's TCP listener. */
    private void awaitListening(GuestCommand server) throws Exception {
        long deadline = System.nanoTime() + LISTEN_TIMEOUT.toNanos();
        while (System.nanoTime() < deadline) {
            String listeners = GuestCommand.run(Duration.ofSeconds(30), "ss", "-Hltn", "sport = :" + port)
                    .requireSuccess();
            if (!listeners.isBlank()) {
                return;
            }
            if (!server.isAlive()) {
                throw new AssertionError("ib_read_lat server exited before listening:\n" + server.outputSoFar());
            }
            Thread.sleep(100);
        }
        throw new AssertionError("ib_read_lat server not listening on port " + port + " after " + LISTEN_TIMEOUT
                + ":\n" + server.outputSoFar());
    }
}
