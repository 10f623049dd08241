package io.rdma4j.core;

import java.io.File;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.Set;

/**
 * The class path of a child JVM that runs this module's test classes (a cross-process peer, a serving doctor).
 * Surefire runs these tests on the module path, patched into io.rdma4j.core: the main classes and the native loader
 * are then on {@code jdk.module.path}, the test classes in the patch, JUnit and AssertJ on {@code java.class.path}.
 * The child gets them all on its class path.
 */
public final class ChildClassPath {

    private ChildClassPath() {
    }

    public static String ofThisTestRun() {
        Set<String> entries = new LinkedHashSet<>();
        // surefire's working directory is the module's
        entries.add(Path.of("target", "test-classes").toAbsolutePath().toString());
        for (String property : new String[] {"jdk.module.path", "java.class.path"}) {
            for (String entry : System.getProperty(property, "").split(File.pathSeparator)) {
                if (!entry.isEmpty()) {
                    entries.add(entry);
                }
            }
        }
        return String.join(File.pathSeparator, entries);
    }
}
