package io.rdma4j.core.verbs;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import static org.assertj.core.api.Assertions.assertThat;

/** The send queue's requests in post order: a completion finishes its request and the unsignalled ones before it. */
class PostedRequestsTest {

    @Test
    void aCompletionFinishesItsRequestAndThoseBeforeItAndFreesTheirSendSlots() {
        PostedRequests posted = new PostedRequests();
        CompletableFuture<Void> a = new CompletableFuture<>();
        CompletableFuture<Void> b = new CompletableFuture<>();
        CompletableFuture<Void> c = new CompletableFuture<>();
        long first = posted.nextId();
        posted.addOneSided("read", List.of(a, b)); // a chain: only b's completion is signalled
        long credit = posted.nextId();
        posted.add("credit update", null, 7);
        long send = posted.nextId();
        posted.add("send", c, 3);
        List<Integer> freed = new ArrayList<>();

        PostedRequests.Completed reads = posted.completeUpTo(first + 1, freed::add);
        assertThat(reads.last().future()).isSameAs(b);
        assertThat(reads.earlier()).extracting(PostedRequests.Pending::future).containsExactly(a);
        assertThat(freed).isEmpty();

        PostedRequests.Completed sends = posted.completeUpTo(send, freed::add);
        assertThat(sends.last().future()).isSameAs(c);
        assertThat(sends.earlier()).extracting(PostedRequests.Pending::wrId).containsExactly(credit);
        assertThat(freed).as("both messages' staging slots").containsExactly(7, 3);
        assertThat(posted.isEmpty()).isTrue();
        assertThat(posted.completeUpTo(send + 1, freed::add).last()).as("nothing left to complete").isNull();
    }
}
