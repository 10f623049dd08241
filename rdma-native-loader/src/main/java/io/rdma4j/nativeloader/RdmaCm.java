package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.RdmaBindings;
import io.rdma4j.nativeloader.bindings.ibv_qp_cap;
import io.rdma4j.nativeloader.bindings.ibv_qp_init_attr;
import io.rdma4j.nativeloader.bindings.rdma_cm_event;
import io.rdma4j.nativeloader.bindings.rdma_cm_id;
import io.rdma4j.nativeloader.bindings.rdma_conn_param;
import io.rdma4j.nativeloader.bindings.rdma_event_channel;
import io.rdma4j.nativeloader.bindings.sockaddr_in;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;

/**
 * librdmacm's connection manager as typed calls: event channels, cm ids, address and route resolution,
 * connect/accept with private data, and the events, copied out of {@code struct rdma_cm_event} before
 * they are acknowledged. Failures throw {@link NativeCallException} with the captured errno. Handles are the
 * raw native pointers ({@code struct rdma_cm_id *}, ...), valid until destroyed here. IPv4 only.
 */
public final class RdmaCm {

    public static final int ADDR_RESOLVED = RdmaBindings.RDMA_CM_EVENT_ADDR_RESOLVED();
    public static final int ROUTE_RESOLVED = RdmaBindings.RDMA_CM_EVENT_ROUTE_RESOLVED();
    public static final int CONNECT_REQUEST = RdmaBindings.RDMA_CM_EVENT_CONNECT_REQUEST();
    public static final int ESTABLISHED = RdmaBindings.RDMA_CM_EVENT_ESTABLISHED();
    public static final int DISCONNECTED = RdmaBindings.RDMA_CM_EVENT_DISCONNECTED();
    public static final int DEVICE_REMOVAL = RdmaBindings.RDMA_CM_EVENT_DEVICE_REMOVAL();
    public static final int CONNECT_ERROR = RdmaBindings.RDMA_CM_EVENT_CONNECT_ERROR();
    public static final int UNREACHABLE = RdmaBindings.RDMA_CM_EVENT_UNREACHABLE();
    public static final int REJECTED = RdmaBindings.RDMA_CM_EVENT_REJECTED();

    private static final long ID_SIZE = rdma_cm_id.sizeof();

    private RdmaCm() {
    }

    /** What an rdma_cm event said, copied out of the native event before it is acknowledged. */
    public record Event(long id, long listenId, int type, int status, byte[] privateData, int initiatorDepth,
                        int responderResources) {

        /** The cm id the event is about (for a connect request: the new id of the incoming connection). */
        public MemorySegment idHandle() {
            return MemorySegment.ofAddress(id).reinterpret(ID_SIZE);
        }

        /** e.g. {@code RDMA_CM_EVENT_REJECTED (status 28)}. */
        public String describe() {
            return eventName(type) + (status != 0 ? " (status " + status + ")" : "");
        }
    }

    /** The {@code struct rdma_conn_param} of a connect or accept. */
    public record ConnectionParameters(byte[] privateData, int responderResources, int initiatorDepth, int retryCount,
                                       int rnrRetryCount) {
        public ConnectionParameters {
            if (privateData.length > 255) {
                throw new IllegalArgumentException("rdma_cm private data holds at most 255 bytes, got " + privateData.length);
            }
        }
    }

    /** {@code rdma_create_event_channel()}. */
    public static MemorySegment createEventChannel() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment errno = Errno.allocateState(a);
            return NativeCall.pointer("rdma_create_event_channel", errno,
                    (MemorySegment) NativeCall.CREATE_EVENT_CHANNEL.invokeExact(errno)).reinterpret(rdma_event_channel.sizeof());
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /** The channel's file descriptor, to wait for events with a timeout ({@link Poll}). */
    public static int eventChannelFd(MemorySegment channel) {
        return rdma_event_channel.fd(channel.reinterpret(rdma_event_channel.sizeof()));
    }

    public static void destroyEventChannel(MemorySegment channel) {
        RdmaBindings.rdma_destroy_event_channel(channel);
    }

    /** {@code rdma_create_id(channel, &id, NULL, RDMA_PS_TCP)}: a reliable-connected id reporting to {@code channel}. */
    public static MemorySegment createId(MemorySegment channel) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment errno = Errno.allocateState(a);
            MemorySegment out = a.allocate(ValueLayout.ADDRESS);
            NativeCall.check("rdma_create_id", errno, (int) NativeCall.CREATE_ID.invokeExact(errno, channel, out,
                    MemorySegment.NULL, RdmaBindings.RDMA_PS_TCP()));
            return out.get(ValueLayout.ADDRESS, 0).reinterpret(ID_SIZE);
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /** {@code rdma_destroy_id}: waits until every event of the id has been acknowledged. */
    public static void destroyId(MemorySegment id) {
        RdmaBindings.rdma_destroy_id(id);
    }

    /** {@code rdma_bind_addr}: binding to a device's address also attaches the id to that device. */
    public static void bind(MemorySegment id, InetSocketAddress address) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment errno = Errno.allocateState(a);
            NativeCall.check("rdma_bind_addr(" + address + ")", errno,
                    (int) NativeCall.BIND_ADDR.invokeExact(errno, id, sockaddr(a, address)));
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    public static void listen(MemorySegment id, int backlog) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment errno = Errno.allocateState(a);
            NativeCall.check("rdma_listen", errno, (int) NativeCall.LISTEN.invokeExact(errno, id, backlog));
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /** The port a bound id listens on ({@code rdma_get_src_port}, host byte order). */
    public static int sourcePort(MemorySegment id) {
        return Short.toUnsignedInt(Short.reverseBytes(RdmaBindings.rdma_get_src_port(id)));
    }

    /** {@code rdma_resolve_addr}; the outcome arrives as an event. */
    public static void resolveAddress(MemorySegment id, InetSocketAddress source, InetSocketAddress destination,
                                      int timeoutMillis) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment errno = Errno.allocateState(a);
            NativeCall.check("rdma_resolve_addr(" + destination + ")", errno, (int) NativeCall.RESOLVE_ADDR.invokeExact(
                    errno, id, sockaddr(a, source), sockaddr(a, destination), timeoutMillis));
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /** {@code rdma_resolve_route}; the outcome arrives as an event. */
    public static void resolveRoute(MemorySegment id, int timeoutMillis) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment errno = Errno.allocateState(a);
            NativeCall.check("rdma_resolve_route", errno, (int) NativeCall.RESOLVE_ROUTE.invokeExact(errno, id, timeoutMillis));
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /**
     * {@code rdma_create_qp}: a reliable-connected queue pair on {@code id} whose sends and receives complete
     * on {@code cq}, one SGE per work request, only signalled sends completing. Returns {@code id->qp}.
     */
    public static MemorySegment createQueuePair(MemorySegment id, MemorySegment pd, MemorySegment cq, int maxSendWr,
                                                int maxRecvWr) {
        return createQueuePair(id, pd, cq, cq, maxSendWr, maxRecvWr, MemorySegment.NULL);
    }

    /**
     * {@code rdma_create_qp} like {@link #createQueuePair(MemorySegment, MemorySegment, MemorySegment, int, int)},
     * but the queue pair takes its receives from the shared receive queue {@code srq}
     * ({@link Verbs#createSharedReceiveQueue}), so it has no receive queue of its own; receive completions still
     * arrive on {@code cq}. Destroy the queue pair before the SRQ.
     */
    public static MemorySegment createQueuePair(MemorySegment id, MemorySegment pd, MemorySegment cq, int maxSendWr,
                                                MemorySegment srq) {
        return createQueuePair(id, pd, cq, cq, maxSendWr, srq);
    }

    /**
     * {@code rdma_create_qp} on the shared receive queue {@code srq}, whose sends complete on {@code sendCq} and whose
     * receives complete on {@code receiveCq}, which other queue pairs may share: a completion's {@code qp_num} then
     * says whose it is.
     */
    public static MemorySegment createQueuePair(MemorySegment id, MemorySegment pd, MemorySegment sendCq,
                                                MemorySegment receiveCq, int maxSendWr, MemorySegment srq) {
        if (srq.equals(MemorySegment.NULL)) {
            throw new IllegalArgumentException("a queue pair on a shared receive queue needs the SRQ, got NULL");
        }
        return createQueuePair(id, pd, sendCq, receiveCq, maxSendWr, 0, srq);
    }

    private static MemorySegment createQueuePair(MemorySegment id, MemorySegment pd, MemorySegment sendCq,
                                                 MemorySegment receiveCq, int maxSendWr, int maxRecvWr, MemorySegment srq) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment init = ibv_qp_init_attr.allocate(a);
            ibv_qp_init_attr.send_cq(init, sendCq);
            ibv_qp_init_attr.recv_cq(init, receiveCq);
            ibv_qp_init_attr.srq(init, srq);
            ibv_qp_init_attr.qp_type(init, RdmaBindings.IBV_QPT_RC());
            ibv_qp_init_attr.sq_sig_all(init, 0);
            MemorySegment cap = ibv_qp_init_attr.cap(init);
            ibv_qp_cap.max_send_wr(cap, maxSendWr);
            ibv_qp_cap.max_recv_wr(cap, maxRecvWr);
            ibv_qp_cap.max_send_sge(cap, 1);
            // on an SRQ the receive capacities are the SRQ's; libibverbs ignores these
            ibv_qp_cap.max_recv_sge(cap, srq.equals(MemorySegment.NULL) ? 1 : 0);
            MemorySegment errno = Errno.allocateState(a);
            NativeCall.check("rdma_create_qp", errno, (int) NativeCall.CREATE_QP.invokeExact(errno, id, pd, init));
            return rdma_cm_id.qp(id.reinterpret(ID_SIZE));
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /** {@code rdma_destroy_qp}. */
    public static void destroyQueuePair(MemorySegment id) {
        RdmaBindings.rdma_destroy_qp(id);
    }

    /** {@code rdma_connect}; ESTABLISHED (or a failure) arrives as an event. */
    public static void connect(MemorySegment id, ConnectionParameters parameters) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment errno = Errno.allocateState(a);
            NativeCall.check("rdma_connect", errno, (int) NativeCall.CONNECT.invokeExact(errno, id, connParam(a, parameters)));
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /** {@code rdma_accept} of a connect request's id. */
    public static void accept(MemorySegment id, ConnectionParameters parameters) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment errno = Errno.allocateState(a);
            NativeCall.check("rdma_accept", errno, (int) NativeCall.ACCEPT.invokeExact(errno, id, connParam(a, parameters)));
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /** {@code rdma_reject} without private data; the caller still destroys the id. */
    public static void reject(MemorySegment id) {
        RdmaBindings.rdma_reject(id, MemorySegment.NULL, (byte) 0);
    }

    /** {@code rdma_disconnect}: moves the queue pair to the error state, flushing what is posted. */
    public static void disconnect(MemorySegment id) {
        RdmaBindings.rdma_disconnect(id);
    }

    /** {@code id->verbs}: the device context the id is attached to, or NULL when it is on no RDMA device. */
    public static MemorySegment deviceContext(MemorySegment id) {
        return rdma_cm_id.verbs(id.reinterpret(ID_SIZE));
    }

    /** {@code rdma_get_local_addr(id)}, or null when it is not IPv4. */
    public static InetSocketAddress localAddress(MemorySegment id) {
        return fromSockaddr(RdmaCmOps.localAddress(id));
    }

    /** {@code rdma_get_peer_addr(id)}, or null when it is not IPv4. */
    public static InetSocketAddress peerAddress(MemorySegment id) {
        return fromSockaddr(RdmaCmOps.peerAddress(id));
    }

    /**
     * {@code rdma_get_cm_event}, the event copied out and acknowledged ({@code rdma_destroy_id} waits for the
     * acknowledgement of its events). Blocks until an event is there; {@code null} when the call failed.
     */
    public static Event nextEvent(MemorySegment channel) {
        MemorySegment ev;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment errno = Errno.allocateState(a);
            MemorySegment out = a.allocate(ValueLayout.ADDRESS);
            if ((int) NativeCall.GET_CM_EVENT.invokeExact(errno, channel, out) != 0) {
                return null;
            }
            ev = out.get(ValueLayout.ADDRESS, 0).reinterpret(rdma_cm_event.sizeof());
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
        Event e = read(ev);
        RdmaBindings.rdma_ack_cm_event(ev);
        return e;
    }

    /** Whether an event of {@code type} ends an established (or accepted) connection. */
    public static boolean endsConnection(int type) {
        return type == DISCONNECTED || type == DEVICE_REMOVAL || type == CONNECT_ERROR || type == UNREACHABLE
                || type == REJECTED;
    }

    /** {@code rdma_event_str(event)}, e.g. {@code RDMA_CM_EVENT_ESTABLISHED}. */
    public static String eventName(int event) {
        return RdmaBindings.rdma_event_str(event).reinterpret(64).getString(0);
    }

    static Event read(MemorySegment ev) {
        int type = rdma_cm_event.event(ev);
        MemorySegment conn = rdma_cm_event.param.conn(rdma_cm_event.param(ev));
        byte[] privateData = new byte[0];
        int length = Byte.toUnsignedInt(rdma_conn_param.private_data_len(conn));
        MemorySegment p = rdma_conn_param.private_data(conn);
        if (length > 0 && !p.equals(MemorySegment.NULL)) {
            privateData = p.reinterpret(length).toArray(ValueLayout.JAVA_BYTE);
        }
        return new Event(rdma_cm_event.id(ev).address(), rdma_cm_event.listen_id(ev).address(), type,
                rdma_cm_event.status(ev), privateData, Byte.toUnsignedInt(rdma_conn_param.initiator_depth(conn)),
                Byte.toUnsignedInt(rdma_conn_param.responder_resources(conn)));
    }

    static MemorySegment connParam(Arena a, ConnectionParameters c) {
        MemorySegment p = rdma_conn_param.allocate(a);
        if (c.privateData().length > 0) {
            rdma_conn_param.private_data(p, a.allocateFrom(ValueLayout.JAVA_BYTE, c.privateData()));
            rdma_conn_param.private_data_len(p, (byte) c.privateData().length);
        }
        rdma_conn_param.responder_resources(p, (byte) c.responderResources());
        rdma_conn_param.initiator_depth(p, (byte) c.initiatorDepth());
        rdma_conn_param.retry_count(p, (byte) c.retryCount());
        rdma_conn_param.rnr_retry_count(p, (byte) c.rnrRetryCount());
        return p;
    }

    static MemorySegment sockaddr(Arena a, InetSocketAddress address) {
        if (!(address.getAddress() instanceof Inet4Address v4)) {
            throw new IllegalArgumentException("the verbs provider supports IPv4 addresses only, got " + address);
        }
        MemorySegment s = sockaddr_in.allocate(a);
        sockaddr_in.sin_family(s, (short) RdmaBindings.AF_INET());
        sockaddr_in.sin_port(s, Short.reverseBytes((short) address.getPort()));
        s.asSlice(sockaddr_in.sin_addr$offset(), 4).copyFrom(MemorySegment.ofArray(v4.getAddress()));
        return s;
    }

    static InetSocketAddress fromSockaddr(MemorySegment s) {
        s = s.reinterpret(sockaddr_in.sizeof());
        if (sockaddr_in.sin_family(s) != RdmaBindings.AF_INET()) {
            return null;
        }
        byte[] ip = s.asSlice(sockaddr_in.sin_addr$offset(), 4).toArray(ValueLayout.JAVA_BYTE);
        int port = Short.toUnsignedInt(Short.reverseBytes(sockaddr_in.sin_port(s)));
        try {
            return new InetSocketAddress(InetAddress.getByAddress(ip), port);
        } catch (UnknownHostException e) {
            throw new AssertionError(e);
        }
    }
}
