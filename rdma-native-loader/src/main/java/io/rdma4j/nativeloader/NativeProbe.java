package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.RdmaBindings;

import java.lang.foreign.Arena;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;

/**
 * Asks libibverbs and librdmacm which devices they see, telling "no devices" apart from errors.
 * On a host without RDMA, {@code ibv_get_device_list} returns NULL with errno ENOSYS (no uverbs in the
 * kernel) and {@code rdma_create_event_channel} NULL with ENODEV: both are a normal "no devices".
 */
public final class NativeProbe {

    /** Result of {@code ibv_get_device_list}: device names, or none with the errno that explains why. */
    public record VerbsDevices(List<String> names, int errno) {
        public VerbsDevices {
            names = List.copyOf(names);
        }

        public boolean none() {
            return names.isEmpty();
        }

        /** Why the list is empty, for reports. */
        public String describe() {
            if (!names.isEmpty()) {
                return "libibverbs sees " + names.size() + " device(s): " + String.join(", ", names);
            }
            return switch (errno) {
                case Errno.ENOSYS -> "libibverbs sees no devices (ENOSYS: the kernel has no RDMA/uverbs support loaded)";
                case 0 -> "libibverbs sees no devices (no provider matched; is ibverbs-providers installed?)";
                default -> "libibverbs sees no devices (" + Errno.name(errno) + ")";
            };
        }
    }

    /** Result of creating (and destroying) an rdma_cm event channel. */
    public record RdmaCmStatus(boolean available, int errno) {
        public String describe() {
            return available ? "rdma_cm available"
                    : "rdma_cm unavailable (" + Errno.name(errno) + ": no RDMA devices / rdma_ucm not loaded)";
        }
    }

    private NativeProbe() {
    }

    private static final class Handles { // created once, after NativeLibraries.require()
        static final MethodHandle GET_DEVICE_LIST = Linker.nativeLinker().downcallHandle(
                RdmaBindings.ibv_get_device_list$address(), RdmaBindings.ibv_get_device_list$descriptor(),
                Errno.CAPTURE);
        static final MethodHandle CREATE_EVENT_CHANNEL = Linker.nativeLinker().downcallHandle(
                RdmaBindings.rdma_create_event_channel$address(),
                RdmaBindings.rdma_create_event_channel$descriptor(), Errno.CAPTURE);
    }

    /**
     * Lists the devices libibverbs sees.
     *
     * @throws NativeLibraryUnavailableException when libibverbs is not installed
     * @throws NativeCallException for an errno other than ENOSYS/ENODEV (e.g. ENOMEM, EPERM)
     */
    public static VerbsDevices verbsDevices() {
        NativeLibraries.require();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = Errno.allocateState(arena);
            MemorySegment count = arena.allocate(ValueLayout.JAVA_INT);
            MemorySegment list = (MemorySegment) Handles.GET_DEVICE_LIST.invokeExact(state, count);
            if (list.equals(MemorySegment.NULL)) {
                int errno = Errno.read(state);
                if (errno == Errno.ENOSYS || errno == Errno.ENODEV) {
                    return new VerbsDevices(List.of(), errno);
                }
                throw new NativeCallException("ibv_get_device_list", errno);
            }
            try {
                int n = count.get(ValueLayout.JAVA_INT, 0);
                MemorySegment devices = list.reinterpret(ValueLayout.ADDRESS.byteSize() * n);
                List<String> names = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    MemorySegment dev = devices.getAtIndex(ValueLayout.ADDRESS, i);
                    // the name is a char[IBV_SYSFS_NAME_MAX] inside struct ibv_device
                    names.add(RdmaBindings.ibv_get_device_name(dev)
                            .reinterpret(RdmaBindings.IBV_SYSFS_NAME_MAX()).getString(0));
                }
                return new VerbsDevices(names, 0);
            } finally {
                RdmaBindings.ibv_free_device_list(list);
            }
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /**
     * Creates and destroys an rdma_cm event channel to see whether rdma_cm can be used at all.
     *
     * @throws NativeLibraryUnavailableException when librdmacm is not installed
     * @throws NativeCallException for an errno other than ENODEV/ENOSYS/ENOENT
     */
    public static RdmaCmStatus rdmaCm() {
        NativeLibraries.require();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = Errno.allocateState(arena);
            MemorySegment channel = (MemorySegment) Handles.CREATE_EVENT_CHANNEL.invokeExact(state);
            if (channel.equals(MemorySegment.NULL)) {
                int errno = Errno.read(state);
                // ENOENT: /dev/infiniband/rdma_cm missing (module not loaded): also "no devices"
                if (errno == Errno.ENODEV || errno == Errno.ENOSYS || errno == Errno.ENOENT) {
                    return new RdmaCmStatus(false, errno);
                }
                throw new NativeCallException("rdma_create_event_channel", errno);
            }
            RdmaBindings.rdma_destroy_event_channel(channel);
            return new RdmaCmStatus(true, 0);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
