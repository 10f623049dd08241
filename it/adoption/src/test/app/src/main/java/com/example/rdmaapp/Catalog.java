package com.example.rdmaapp;

import io.rdma4j.spring.boot.RdmaRegion;
import org.springframework.context.annotation.Configuration;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

// The README's Spring Boot quick start, verbatim.
@Configuration
class Catalog {
    @RdmaRegion("prices")                       // published once all singletons exist, before peers connect
    MemorySegment prices(Arena arena) {         // the region owns the arena: closed after it is deregistered
        return arena.allocate(1 << 20);         // a MemorySegment or a direct ByteBuffer; or no argument,
    }                                           // returning memory you keep alive, or a Path (mapped read-only)
}
