package io.rdma4j.it.modules;

import org.junit.jupiter.api.Test;

import java.io.File;
import java.lang.module.FindException;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.lang.module.ModuleReference;
import java.nio.file.Path;
import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Why rdma-spark-shuffle has no module-info.java: a named module could read Spark only as a module, and Spark's
 * core jar cannot be one. When Spark gives its jars module names this fails, and the shuffle can become a named
 * module like the others.
 */
class SparkModuleNameIT {

    @Test
    void sparkCoreHasNoLegalModuleNameSoTheShuffleIsAnAutomaticModule() {
        assertThatThrownBy(() -> ModuleFinder.of(jar("spark-core_2.13-")).findAll())
                .isInstanceOf(FindException.class)
                .hasRootCauseMessage("spark.core.2.13: Invalid module name: '2' is not a Java identifier");
        ModuleDescriptor shuffle = ModuleFinder.of(jar("rdma-spark-shuffle_2.13-")).findAll().stream()
                .map(ModuleReference::descriptor).findFirst().orElseThrow();
        assertThat(shuffle.name()).isEqualTo("io.rdma4j.spark");
        assertThat(shuffle.isAutomatic()).as("the shuffle jar has no module descriptor").isTrue();
    }

    /** The jar on this test's class path whose file name starts with {@code prefix}. */
    private static Path jar(String prefix) {
        return Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator)).map(Path::of)
                .filter(p -> p.getFileName().toString().startsWith(prefix) && p.toString().endsWith(".jar"))
                .findFirst().orElseThrow(() -> new AssertionError(prefix + "*.jar is not on the test class path"));
    }
}
