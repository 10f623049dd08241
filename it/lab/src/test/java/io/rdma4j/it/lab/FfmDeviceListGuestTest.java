package io.rdma4j.it.lab;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The smallest JDK 25 FFM round trip into libibverbs: {@code ibv_get_device_list} must name both lab
 * devices. Only opaque pointers and C strings cross the boundary, so no struct layout is involved.
 */
@SuppressWarnings("restricted") // calls libibverbs directly, by design: no bindings in between
class FfmDeviceListGuestTest {

    private final LabDevice device = LabDevice.current();

    @Test
    void deviceListNamesBothLabDevices() throws Throwable {
        Linker linker = Linker.nativeLinker();
        try (Arena arena = Arena.ofConfined()) {
            SymbolLookup verbs = SymbolLookup.libraryLookup("libibverbs.so.1", arena);
            // struct ibv_device **ibv_get_device_list(int *num_devices)
            MethodHandle getDeviceList = linker.downcallHandle(verbs.findOrThrow("ibv_get_device_list"),
                    FunctionDescriptor.of(ADDRESS, ADDRESS));
            // const char *ibv_get_device_name(struct ibv_device *device)
            MethodHandle getDeviceName = linker.downcallHandle(verbs.findOrThrow("ibv_get_device_name"),
                    FunctionDescriptor.of(ADDRESS, ADDRESS));
            // void ibv_free_device_list(struct ibv_device **list)
            MethodHandle freeDeviceList = linker.downcallHandle(verbs.findOrThrow("ibv_free_device_list"),
                    FunctionDescriptor.ofVoid(ADDRESS));

            MemorySegment count = arena.allocate(JAVA_INT);
            MemorySegment list = (MemorySegment) getDeviceList.invokeExact(count);
            assertThat(list).as("ibv_get_device_list returned NULL").isNotEqualTo(MemorySegment.NULL);
            List<String> names = new ArrayList<>();
            try {
                int n = count.get(JAVA_INT, 0);
                MemorySegment devices = list.reinterpret(ADDRESS.byteSize() * (n + 1L));
                for (int i = 0; i < n; i++) {
                    MemorySegment dev = devices.getAtIndex(ADDRESS, i);
                    MemorySegment name = (MemorySegment) getDeviceName.invokeExact(dev);
                    names.add(name.reinterpret(Long.MAX_VALUE).getString(0));
                }
                assertThat(devices.getAtIndex(ADDRESS, n)).as("NULL terminator").isEqualTo(MemorySegment.NULL);
            } finally {
                freeDeviceList.invokeExact(list);
            }

            assertThat(names).as("devices seen through FFM")
                    .containsExactlyInAnyOrderElementsOf(LabDevice.ALL.stream().map(LabDevice::name).toList())
                    .contains(device.name());
        }
    }
}
