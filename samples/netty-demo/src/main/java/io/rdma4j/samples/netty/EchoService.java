package io.rdma4j.samples.netty;

import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;

/**
 * A gRPC service without generated code: byte-array messages and four methods, enough to exercise unary calls,
 * server and bidirectional streaming, deadlines and large messages over any transport.
 */
public final class EchoService {

    public static final String NAME = "rdma4j.samples.Echo";

    /** Messages are the bytes as they are. */
    private static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    };
    /** Answers with the request. */
    public static final MethodDescriptor<byte[], byte[]> ECHO = method(MethodDescriptor.MethodType.UNARY, "Echo");
    /** Answers a request of one byte n with n messages of one byte each, 0 to n-1. */
    public static final MethodDescriptor<byte[], byte[]> COUNT = method(MethodDescriptor.MethodType.SERVER_STREAMING, "Count");
    /** Answers every message of the stream with itself, reversed. */
    public static final MethodDescriptor<byte[], byte[]> REVERSE = method(MethodDescriptor.MethodType.BIDI_STREAMING, "Reverse");
    /** Answers after the number of milliseconds the request's first byte says, times ten. */
    public static final MethodDescriptor<byte[], byte[]> SLOW = method(MethodDescriptor.MethodType.UNARY, "Slow");

    private EchoService() {
    }

    public static ServerServiceDefinition definition() {
        return ServerServiceDefinition.builder(NAME)
                .addMethod(ECHO, ServerCalls.asyncUnaryCall((request, response) -> {
                    response.onNext(request);
                    response.onCompleted();
                }))
                .addMethod(COUNT, ServerCalls.asyncServerStreamingCall((request, response) -> {
                    for (int i = 0; i < (request[0] & 0xff); i++) {
                        response.onNext(new byte[] {(byte) i});
                    }
                    response.onCompleted();
                }))
                .addMethod(REVERSE, ServerCalls.asyncBidiStreamingCall(response -> new StreamObserver<byte[]>() {
                    @Override
                    public void onNext(byte[] value) {
                        byte[] reversed = new byte[value.length];
                        for (int i = 0; i < value.length; i++) {
                            reversed[i] = value[value.length - 1 - i];
                        }
                        response.onNext(reversed);
                    }

                    @Override
                    public void onError(Throwable t) {
                        response.onError(t);
                    }

                    @Override
                    public void onCompleted() {
                        response.onCompleted();
                    }
                }))
                .addMethod(SLOW, ServerCalls.asyncUnaryCall((request, response) -> {
                    try {
                        Thread.sleep(10L * (request[0] & 0xff));
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    if (((io.grpc.stub.ServerCallStreamObserver<byte[]>) response).isCancelled()) {
                        return; // the caller's deadline passed: nobody reads a reply
                    }
                    response.onNext(request);
                    response.onCompleted();
                }))
                .build();
    }

    private static MethodDescriptor<byte[], byte[]> method(MethodDescriptor.MethodType type, String name) {
        return MethodDescriptor.<byte[], byte[]>newBuilder()
                .setType(type)
                .setFullMethodName(MethodDescriptor.generateFullMethodName(NAME, name))
                .setRequestMarshaller(BYTES)
                .setResponseMarshaller(BYTES)
                .build();
    }

}
