package io.rdma4j.core;

import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class RequestHandlersTest {

    private static final RequestHandler ECHO = RequestHandler.answering((body, context) -> body);

    @Test
    void aTypeHandledTwiceIsRefusedAtConstruction() {
        RequestHandlers one = RequestHandlers.of(RequestTypes.KAFKA_DIRECTORY, ECHO);
        assertThatThrownBy(() -> one.and(RequestTypes.KAFKA_DIRECTORY, ECHO))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("0x100 already has a handler");
        assertThat(one.and(RequestTypes.SPARK_DESCRIBE_MAP_OUTPUTS, ECHO).handler(RequestTypes.SPARK_DESCRIBE_MAP_OUTPUTS))
                .isSameAs(ECHO);
        assertThat(one.handler(RequestTypes.SPARK_DESCRIBE_MAP_OUTPUTS)).as("the original is unchanged").isNull();
        assertThat(RequestHandlers.none().handler(RequestTypes.KAFKA_DIRECTORY)).isNull();
    }

    @Test
    void answeringCompletesWithTheComputedReply() throws Exception {
        ByteBuffer body = ByteBuffer.wrap(new byte[] {1, 2});
        assertThat(ECHO.handle(body, null).toCompletableFuture().get()).isSameAs(body);
    }
}
