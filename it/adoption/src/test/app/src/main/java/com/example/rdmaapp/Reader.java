package com.example.rdmaapp;

import io.rdma4j.spring.boot.RdmaTemplate;
import org.springframework.stereotype.Service;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;

// The README's Spring Boot quick start, verbatim.
@Service
class Reader {
    private final RdmaTemplate template;

    Reader(RdmaTemplate template) { this.template = template; }

    long load(InetSocketAddress peer, MemorySegment sink) {
        return template.read(peer, "prices", sink);  // a lookup request, then one-sided reads
    }
}
