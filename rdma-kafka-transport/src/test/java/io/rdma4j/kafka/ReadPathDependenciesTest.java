package io.rdma4j.kafka;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.classfile.ClassFile;
import java.lang.classfile.ClassModel;
import java.lang.classfile.MethodModel;
import java.lang.classfile.constantpool.ClassEntry;
import java.lang.classfile.instruction.InvokeInstruction;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The consumer's read path as its classes are compiled: RDMA READs are issued from {@link ExporterReads} only, and
 * the rooms the fetcher composes never refer back to it.
 */
class ReadPathDependenciesTest {

    private static final String CONNECTION = "io/rdma4j/core/RdmaConnection";
    private static final String PACKAGE = "io/rdma4j/kafka/";

    private static List<ClassModel> consumerClasses() throws IOException, URISyntaxException {
        Path root = Path.of(RdmaFetcher.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        assertThat(root.resolve(PACKAGE)).as("compiled classes in a folder, as surefire runs them").isDirectory();
        List<ClassModel> out = new ArrayList<>();
        try (Stream<Path> files = Files.walk(root.resolve(PACKAGE))) {
            for (Path f : files.filter(p -> p.toString().endsWith(".class")).toList()) {
                out.add(ClassFile.of().parse(f));
            }
        }
        return out;
    }

    /** The top-level class {@code internalName} belongs to, without its package. */
    private static String room(String internalName) {
        String simple = internalName.substring(internalName.lastIndexOf('/') + 1);
        int nested = simple.indexOf('$');
        return nested < 0 ? simple : simple.substring(0, nested);
    }

    @Test
    void onlyExporterReadsIssuesReads() throws Exception {
        Set<String> issuing = new TreeSet<>();
        for (ClassModel c : consumerClasses()) {
            for (MethodModel m : c.methods()) {
                m.code().ifPresent(code -> code.forEach(e -> {
                    if (e instanceof InvokeInstruction i && i.owner().asInternalName().equals(CONNECTION)
                            && i.name().stringValue().startsWith("read")) {
                        issuing.add(room(c.thisClass().asInternalName()) + "." + m.methodName().stringValue());
                    }
                }));
            }
        }
        assertThat(issuing).as("methods posting RDMA READs").isNotEmpty()
                .allSatisfy(where -> assertThat(where).startsWith("ExporterReads."));
    }

    @Test
    void theFetchersRoomsDoNotReferToIt() throws Exception {
        Set<String> rooms = Set.of("SegmentLocator", "DirectoryLookups", "ExporterReads", "RecordCollector", "StableRange", "BatchRange",
                "DecodedBatches", "FetchResult", "ReadCommittedFilter", "RecordConversion");
        Set<String> referring = new TreeSet<>();
        for (ClassModel c : consumerClasses()) {
            String room = room(c.thisClass().asInternalName());
            if (!rooms.contains(room)) {
                continue;
            }
            for (var entry : c.constantPool()) {
                if (entry instanceof ClassEntry ce && ce.asInternalName().startsWith(PACKAGE) && room(ce.asInternalName()).equals("RdmaFetcher")) {
                    referring.add(c.thisClass().asInternalName());
                }
            }
        }
        assertThat(referring).as("classes the fetcher uses that refer back to it").isEmpty();
    }
}
