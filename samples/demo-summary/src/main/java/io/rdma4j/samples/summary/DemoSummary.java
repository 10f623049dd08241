package io.rdma4j.samples.summary;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Prints the table that {@code ./mvnw -q -Pdemo verify} ends with. Each demo leaves its row in
 * {@code target/demo-result.tsv} (the file {@code -Ddemo.result} names): demo, provider and why, what moved,
 * by which path, result; tab-separated. A demo that did not run this time has no row: the table says so.
 */
public final class DemoSummary {

    /** In the order the build runs them. */
    static final List<String> DEMOS = List.of("transport-demo", "spring-demo", "spark-demo", "kafka-demo");
    static final List<String> HEADER = List.of("demo", "provider (why)", "what moved", "path", "result");
    private static final String DOCTOR_HINT = "; run rdma4j-doctor.jar for details";

    private DemoSummary() {
    }

    public static void main(String[] args) throws IOException {
        Path samples = Path.of(args.length > 0 ? args[0] : "samples");
        List<List<String>> rows = new ArrayList<>();
        rows.add(HEADER);
        boolean doctorHint = false;
        for (String demo : DEMOS) {
            Path result = samples.resolve(demo).resolve("target/demo-result.tsv");
            if (!Files.isRegularFile(result)) {
                rows.add(List.of(demo, "-", "-", "-", "did not run"));
                continue;
            }
            List<String> row = new ArrayList<>(List.of(Files.readString(result).strip().split("\t", -1)));
            doctorHint |= row.get(1).contains(DOCTOR_HINT);
            row.set(1, row.get(1).replace(DOCTOR_HINT, ""));
            rows.add(row);
        }
        System.out.println();
        System.out.print(table(rows));
        if (doctorHint) {
            System.out.println("Why this provider, in detail: the doctor (README, \"Does RDMA work between these two hosts?\").");
        }
    }

    /** Columns padded to their widest cell, a rule under the header. */
    static String table(List<List<String>> rows) {
        int columns = rows.getFirst().size();
        int[] width = new int[columns];
        for (List<String> row : rows) {
            for (int c = 0; c < columns; c++) {
                width[c] = Math.max(width[c], cell(row, c).length());
            }
        }
        StringBuilder out = new StringBuilder();
        for (int r = 0; r < rows.size(); r++) {
            StringBuilder line = new StringBuilder();
            for (int c = 0; c < columns; c++) {
                line.append(c == 0 ? "" : "  ").append(String.format("%-" + width[c] + "s", cell(rows.get(r), c)));
            }
            out.append(line.toString().stripTrailing()).append('\n');
            if (r == 0) {
                int total = columns * 2 - 2;
                for (int w : width) {
                    total += w;
                }
                out.append("-".repeat(total)).append('\n');
            }
        }
        return out.toString();
    }

    private static String cell(List<String> row, int column) {
        return column < row.size() ? row.get(column) : "";
    }
}
