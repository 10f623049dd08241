package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.*;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.GroupLayout;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.UnionLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

/**
 * Compiles a C program against the real rdma-core headers and checks offsetof/sizeof of every field of
 * every generated layout (recursively, through nested and anonymous structs/unions) against Java.
 * A mismatch here means the committed bindings do not fit the installed headers.
 */
class LayoutOffsetsTest {

    /** C spelling of each generated aggregate: every struct the project binds. */
    static final Map<String, GroupLayout> LAYOUTS = new LinkedHashMap<>();

    static {
        LAYOUTS.put("struct ibv_context", ibv_context.layout());
        LAYOUTS.put("struct ibv_context_ops", ibv_context_ops.layout());
        LAYOUTS.put("struct ibv_device_attr", ibv_device_attr.layout());
        LAYOUTS.put("struct ibv_port_attr", ibv_port_attr.layout());
        LAYOUTS.put("union ibv_gid", ibv_gid.layout());
        LAYOUTS.put("struct ibv_gid_entry", ibv_gid_entry.layout());
        LAYOUTS.put("struct ibv_mr", ibv_mr.layout());
        LAYOUTS.put("struct ibv_pd", ibv_pd.layout());
        LAYOUTS.put("struct ibv_cq", ibv_cq.layout());
        LAYOUTS.put("struct ibv_comp_channel", ibv_comp_channel.layout());
        LAYOUTS.put("struct ibv_qp", ibv_qp.layout());
        LAYOUTS.put("struct ibv_qp_init_attr", ibv_qp_init_attr.layout());
        LAYOUTS.put("struct ibv_qp_cap", ibv_qp_cap.layout());
        LAYOUTS.put("struct ibv_qp_attr", ibv_qp_attr.layout());
        LAYOUTS.put("struct ibv_ah_attr", ibv_ah_attr.layout());
        LAYOUTS.put("struct ibv_global_route", ibv_global_route.layout());
        LAYOUTS.put("struct ibv_send_wr", ibv_send_wr.layout());
        LAYOUTS.put("struct ibv_mw_bind_info", ibv_mw_bind_info.layout());
        LAYOUTS.put("struct ibv_recv_wr", ibv_recv_wr.layout());
        LAYOUTS.put("struct ibv_sge", ibv_sge.layout());
        LAYOUTS.put("struct ibv_wc", ibv_wc.layout());
        LAYOUTS.put("struct ibv_async_event", ibv_async_event.layout());
        LAYOUTS.put("struct ibv_srq", ibv_srq.layout());
        LAYOUTS.put("struct ibv_srq_init_attr", ibv_srq_init_attr.layout());
        LAYOUTS.put("struct ibv_srq_attr", ibv_srq_attr.layout());
        LAYOUTS.put("struct rdma_event_channel", rdma_event_channel.layout());
        LAYOUTS.put("struct rdma_cm_id", rdma_cm_id.layout());
        LAYOUTS.put("struct rdma_conn_param", rdma_conn_param.layout());
        LAYOUTS.put("struct rdma_ud_param", rdma_ud_param.layout());
        LAYOUTS.put("struct rdma_cm_event", rdma_cm_event.layout());
        LAYOUTS.put("struct rdma_route", rdma_route.layout());
        LAYOUTS.put("struct rdma_addr", rdma_addr.layout());
        LAYOUTS.put("struct rdma_ib_addr", rdma_ib_addr.layout());
        LAYOUTS.put("struct sockaddr", sockaddr.layout());
        LAYOUTS.put("struct sockaddr_in", sockaddr_in.layout());
        LAYOUTS.put("struct sockaddr_in6", sockaddr_in6.layout());
        LAYOUTS.put("struct sockaddr_storage", sockaddr_storage.layout());
        LAYOUTS.put("struct in_addr", in_addr.layout());
        LAYOUTS.put("struct in6_addr", in6_addr.layout());
        LAYOUTS.put("pthread_mutex_t", pthread_mutex_t.layout());
        LAYOUTS.put("pthread_cond_t", pthread_cond_t.layout());
    }

    record Field(String type, String path, long offset, long size) {
        String key() {
            return type + " " + (path.isEmpty() ? "<sizeof>" : path);
        }
    }

    static void walk(String type, GroupLayout group, String prefix, long base, List<Field> out) {
        for (MemoryLayout m : group.memberLayouts()) {
            if (m.name().isEmpty()) {
                continue; // padding
            }
            String name = m.name().get();
            long offset = base + (group instanceof UnionLayout ? 0 : group.byteOffset(groupElement(name)));
            if (name.startsWith("$anon$")) { // anonymous struct/union: its members are reached directly in C
                walk(type, (GroupLayout) m, prefix, offset, out);
                continue;
            }
            out.add(new Field(type, prefix + name, offset, m.byteSize()));
            if (m instanceof GroupLayout g) {
                walk(type, g, prefix + name + ".", offset, out);
            }
        }
    }

    static List<Field> javaFields() {
        List<Field> fields = new ArrayList<>();
        LAYOUTS.forEach((type, layout) -> {
            fields.add(new Field(type, "", 0, layout.byteSize()));
            walk(type, layout, "", 0, fields);
        });
        return fields;
    }

    @Test
    void everyGeneratedFieldMatchesGcc() throws Exception {
        for (String h : List.of("/usr/include/infiniband/verbs.h", "/usr/include/rdma/rdma_cma.h")) {
            if (!Files.exists(Path.of(h))) {
                fail(h + " is missing: install the headers with `apt-get install libibverbs-dev librdmacm-dev`"
                        + " (RHEL: `dnf install rdma-core-devel`)");
            }
        }
        List<Field> fields = javaFields();
        StringBuilder c = new StringBuilder("""
                #include <stddef.h>
                #include <stdio.h>
                #include <infiniband/verbs.h>
                #include <rdma/rdma_cma.h>
                int main(void) {
                """);
        for (Field f : fields) {
            if (f.path().isEmpty()) {
                c.append("  printf(\"%s|%zu|%zu\\n\", \"").append(f.key()).append("\", (size_t) 0, sizeof(")
                        .append(f.type()).append("));\n");
            } else {
                c.append("  printf(\"%s|%zu|%zu\\n\", \"").append(f.key()).append("\", offsetof(").append(f.type())
                        .append(", ").append(f.path()).append("), sizeof(((").append(f.type()).append(" *) 0)->")
                        .append(f.path()).append("));\n");
            }
        }
        c.append("  return 0;\n}\n");
        Path dir = Files.createDirectories(Path.of("target", "layout-check"));
        Path source = dir.resolve("layouts.c");
        Path binary = dir.resolve("layouts");
        Files.writeString(source, c);

        String compile = run(List.of("gcc", "-Wall", "-o", binary.toString(), source.toString()),
                "gcc not found: install it with `apt-get install gcc` (RHEL: `dnf install gcc`)");
        String output = run(List.of(binary.toAbsolutePath().toString()), "cannot run " + binary);

        Map<String, String> gcc = new LinkedHashMap<>();
        for (String line : output.split("\n")) {
            String[] p = line.split("\\|");
            gcc.put(p[0], p[1] + "|" + p[2]);
        }
        List<String> mismatches = new ArrayList<>();
        for (Field f : fields) {
            String expected = gcc.get(f.key());
            String actual = f.offset() + "|" + f.size();
            if (!actual.equals(expected)) {
                mismatches.add(f.key() + ": java offset|size " + actual + ", gcc " + expected);
            }
        }
        assertThat(compile).as("gcc output").doesNotContain("warning");
        assertThat(fields).as("fields checked").hasSizeGreaterThan(300);
        assertThat(gcc).hasSize(fields.size());
        assertThat(mismatches).isEmpty();
    }

    private static String run(List<String> command, String missing) throws IOException, InterruptedException {
        Process p;
        try {
            p = new ProcessBuilder(command).redirectErrorStream(true).start();
        } catch (IOException e) {
            fail(missing + " (" + e.getMessage() + ")");
            throw e;
        }
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).as("process finished").isTrue();
        assertThat(p.exitValue()).as(String.join(" ", command) + " exit status; output:\n" + out).isZero();
        return out;
    }
}
