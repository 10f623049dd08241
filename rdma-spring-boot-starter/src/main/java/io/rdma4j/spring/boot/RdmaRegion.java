package io.rdma4j.spring.boot;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Publishes what a method of a Spring bean returns as a named region peers can read through
 * {@link RdmaTemplate#read}: a native {@link java.lang.foreign.MemorySegment}, a direct
 * {@link java.nio.ByteBuffer}, or a {@link java.nio.file.Path} (mapped read-only). The method takes no
 * arguments (the bean keeps the memory alive) or one {@link java.lang.foreign.Arena}: a shared arena
 * the region owns, closed after the region is deregistered. It is called once, after all singletons
 * exist and before the endpoint accepts peers; the region is withdrawn when the context closes.
 *
 * <pre>{@code
 * @Component
 * class Catalog {
 *     @RdmaRegion("prices")
 *     MemorySegment prices(Arena arena) { return arena.allocate(1 << 20); }
 *
 *     @RdmaRegion("catalog")
 *     Path catalogFile() { return Path.of("/data/catalog.bin"); }
 * }
 * }</pre>
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface RdmaRegion {

    /** The name peers look the region up by. */
    String value();
}
