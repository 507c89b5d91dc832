package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_CONTEXT;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_FOUND;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_OUT_OF_MEMORY;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

class DeviceMemoryTest {
    private static long readLong(MemorySegment s) {
        return s.get(ValueLayout.JAVA_LONG, 0);
    }

    @Test
    void handsOutAlignedDeviceAddressesThatAreNeverReused() {
        try (Emulated e = new Emulated()) {
            Set<Long> seen = new HashSet<>();
            for (int i = 0; i < 20; i++) {
                long p = e.alloc(1 + 37L * i);
                assertTrue(p >= EmulatedMemory.BASE && p < EmulatedMemory.LIMIT, Long.toHexString(p));
                assertEquals(0, p % 256);
                assertTrue(seen.add(p));
                e.ok(e.device.cuMemFree(p));
            }
        }
    }

    private static final String GLOBALS_PTX = """
            .version 7.0
            .target sm_50
            .address_size 64
            .visible .global .align 8 .u64 first;
            .visible .global .align 4 .u32 second[100];
            """;

    /** The address of global {@code name} of a fresh load of {@link #GLOBALS_PTX} on {@code e}'s device. */
    private static long globalOfNewModule(Emulated e, String name) {
        MemorySegment out = e.arena.allocate(8), size = e.arena.allocate(8);
        e.ok(e.device.cuModuleLoadData(out, e.nativeString(GLOBALS_PTX)));
        e.ok(e.device.cuModuleGetGlobal(out, size, readLong(out), e.nativeString(name)));
        return readLong(out);
    }

    /**
     * Module data lies in its own range, at an offset per device instance (as a driver in a new process places a
     * module's globals elsewhere: issue 27's finding), in order within one instance; the system property pins it.
     */
    @Test
    void placesModuleGlobalsAtAnOffsetPerInstanceThatAPropertyPins() {
        try (Emulated a = new Emulated(); Emulated b = new Emulated()) {
            long first = globalOfNewModule(a, "first"), again = globalOfNewModule(a, "first");
            assertTrue(first >= EmulatedMemory.MODULE_BASE && first < EmulatedMemory.OWN_END, Long.toHexString(first));
            assertTrue(again > first, "in order within one instance, never reused");
            assertTrue(globalOfNewModule(a, "second") > again);
            assertTrue(first != globalOfNewModule(b, "first"), "another instance places the same module elsewhere");
            long p = a.alloc(4096);
            assertTrue(p < EmulatedMemory.MODULE_BASE, "allocations below the module data: " + Long.toHexString(p));
        }
        String was = System.setProperty(EmulatedMemory.MODULE_OFFSET_PROPERTY, Long.toString(3 << 16));
        try (Emulated a = new Emulated(); Emulated b = new Emulated()) {
            assertEquals(EmulatedMemory.MODULE_BASE + (3 << 16), globalOfNewModule(a, "first"), "pinned");
            assertEquals(EmulatedMemory.MODULE_BASE + (3 << 16), globalOfNewModule(b, "first"), "pinned for every instance");
        } finally {
            if (was == null) {
                System.clearProperty(EmulatedMemory.MODULE_OFFSET_PROPERTY);
            } else {
                System.setProperty(EmulatedMemory.MODULE_OFFSET_PROPERTY, was);
            }
        }
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> EmulatedMemory.moduleOffset(100));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> EmulatedMemory.moduleOffset(64L << 30));
        assertEquals(0, EmulatedMemory.moduleOffset(0));
    }

    @Test
    void copiesRoundTripThroughDeviceMemory() {
        try (Emulated e = new Emulated()) {
            long a = e.alloc(4096);
            long b = e.alloc(4096);
            float[] values = new float[1024];
            for (int i = 0; i < values.length; i++) {
                values[i] = i * 0.5f;
            }
            e.upload(a, values);
            e.ok(e.device.cuMemcpyDtoD(b, a, 4096));
            assertArrayEquals(values, e.downloadFloats(b, 1024));
            // Zero-length segments, as native code passes them.
            MemorySegment host = e.arena.allocate(16);
            e.ok(e.device.cuMemcpyDtoH(Emulated.asNative(host), a + 8, 16));
            assertArrayEquals(new float[] {1f, 1.5f, 2f, 2.5f}, host.toArray(ValueLayout.JAVA_FLOAT));
        }
    }

    @Test
    void rejectsCopiesOutsideOneAllocation() {
        try (Emulated e = new Emulated()) {
            long a = e.alloc(1024);
            long b = e.alloc(1024);
            MemorySegment host = e.arena.allocate(4096);
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyHtoD(a, host, 1025));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyDtoH(host, a + 1000, 100));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyDtoH(host, a - 1, 4));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyDtoD(b, a, 2048), "may not span two allocations");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyHtoD(0x1000, host, 4), "a host-like address");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyHtoD(a, MemorySegment.NULL, 4));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyHtoD(a, MemorySegment.ofArray(new byte[2]), 4),
                    "a heap segment shorter than the count cannot be widened");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyDtoH(e.arena.allocate(8), a, 16),
                    "a sized native segment is not widened past its size");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyHtoD(a, Emulated.asNative(host), -1), "size_t above 2^63");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyDtoD(b, a, -1));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyHtoDAsync(a, host, 2048, 0));
            e.ok(e.device.cuMemcpyHtoD(a, host, 1024));
            e.ok(e.device.cuMemcpyHtoD(a, host, 0));
        }
    }

    @Test
    void rejectsFreedPointersAndDoubleFree() {
        try (Emulated e = new Emulated()) {
            long a = e.alloc(256);
            MemorySegment host = e.arena.allocate(256);
            e.ok(e.device.cuMemFree(a));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemFree(a));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyHtoD(a, host, 4));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemsetD8(a, (byte) 1, 4));
            long b = e.alloc(256);
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemFree(b + 16), "interior pointer");
            e.ok(e.device.cuMemFree(0));
        }
    }

    @Test
    void refusesAllocationsBeyondTheAdvertisedSize() {
        try (Emulated e = new Emulated(new EmulatedDevice(1, 1 << 20))) {
            long context = Contexts.CONTEXT_BYTES;   // the footprint model's share of the context Emulated made
            MemorySegment out = e.arena.allocate(8);
            assertEquals(CUDA_ERROR_OUT_OF_MEMORY, e.device.cuMemAlloc(out, (1 << 20) + 1));
            long a = e.alloc(768 << 10);
            assertEquals(CUDA_ERROR_OUT_OF_MEMORY, e.device.cuMemAlloc(out, 512 << 10));
            assertEquals((256 << 10) - context, e.freeBytes());
            e.ok(e.device.cuMemFree(a));
            assertEquals((1 << 20) - context, e.freeBytes());
            assertEquals(CUDA_ERROR_OUT_OF_MEMORY, e.device.cuMemAlloc(out, 1 << 20), "the context holds some");
            e.alloc((1 << 20) - context);
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemAlloc(out, 0));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemAlloc(MemorySegment.NULL, 16));
        }
    }

    @Test
    void keepsEachContextsMemoryToItself() {
        try (Emulated e = new Emulated()) {
            long mine = e.alloc(256);
            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
            MemorySegment host = e.arena.allocate(256);
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyDtoH(host, mine, 4));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemFree(mine));
            e.ok(e.device.cuCtxPopCurrent(out));
            e.ok(e.device.cuMemcpyDtoH(host, mine, 4));
            e.ok(e.device.cuCtxPopCurrent(out));
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, e.device.cuMemAlloc(out, 16));
        }
    }

    @Test
    void setsEightSixteenAndThirtyTwoBitPatterns() {
        try (Emulated e = new Emulated()) {
            long a = e.alloc(64);
            e.ok(e.device.cuMemsetD8(a, (byte) 0xAB, 64));
            e.ok(e.device.cuMemsetD16(a + 2, (short) 0x1234, 3));
            e.ok(e.device.cuMemsetD32Async(a + 16, 0xCAFEBABE, 5, 0));
            e.ok(e.device.cuStreamSynchronize(0));
            MemorySegment host = e.arena.allocate(64);
            e.ok(e.device.cuMemcpyDtoH(host, a, 64));
            assertEquals((byte) 0xAB, host.get(ValueLayout.JAVA_BYTE, 0));
            assertEquals((short) 0x1234, host.get(ValueLayout.JAVA_SHORT, 2));
            assertEquals((short) 0x1234, host.get(ValueLayout.JAVA_SHORT, 6));
            assertEquals((byte) 0xAB, host.get(ValueLayout.JAVA_BYTE, 8));
            for (int i = 0; i < 5; i++) {
                assertEquals(0xCAFEBABE, host.get(ValueLayout.JAVA_INT, 16 + 4L * i));
            }
            assertEquals((byte) 0xAB, host.get(ValueLayout.JAVA_BYTE, 36));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemsetD32(a + 2, 0, 1), "misaligned for 32-bit");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemsetD16(a, (short) 0, 33), "past the end");
        }
    }

    @Test
    void answersPointerAttributesAndAddressRanges() {
        try (Emulated e = new Emulated()) {
            long a = e.alloc(1000);
            MemorySegment out = e.arena.allocate(8);
            MemorySegment size = e.arena.allocate(8);
            e.ok(e.device.cuPointerGetAttribute(Emulated.asNative(out), 1, a + 10));
            assertEquals(e.context, readLong(out));
            e.ok(e.device.cuPointerGetAttribute(out, 2, a));
            assertEquals(2, out.get(ValueLayout.JAVA_INT, 0), "CU_MEMORYTYPE_DEVICE");
            e.ok(e.device.cuPointerGetAttribute(out, 3, a + 10));
            assertEquals(a + 10, readLong(out));
            e.ok(e.device.cuPointerGetAttribute(out, 9, a));
            assertEquals(0, out.get(ValueLayout.JAVA_INT, 0));
            e.ok(e.device.cuPointerGetAttribute(out, 11, a + 999));
            assertEquals(a, readLong(out));
            e.ok(e.device.cuPointerGetAttribute(out, 12, a + 999));
            assertEquals(1000, readLong(out));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuPointerGetAttribute(out, 1, a + 1000));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuPointerGetAttribute(out, 4, a));

            e.ok(e.device.cuMemGetAddressRange(out, size, a + 500));
            assertEquals(a, readLong(out));
            assertEquals(1000, readLong(size));
            e.ok(e.device.cuMemGetAddressRange(MemorySegment.NULL, size, a));
            assertEquals(CUDA_ERROR_NOT_FOUND, e.device.cuMemGetAddressRange(out, size, a + 1000));
        }
    }

    @Test
    void allocatesPitchedRows() {
        try (Emulated e = new Emulated()) {
            MemorySegment ptr = e.arena.allocate(8);
            MemorySegment pitch = e.arena.allocate(8);
            long before = e.freeBytes();
            e.ok(e.device.cuMemAllocPitch(ptr, pitch, 100, 10, 4));
            assertEquals(512, readLong(pitch));
            assertEquals(before - 5120, e.freeBytes());
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemAllocPitch(ptr, pitch, 100, 10, 3));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemAllocPitch(ptr, pitch, 0, 10, 4));
        }
    }
}
