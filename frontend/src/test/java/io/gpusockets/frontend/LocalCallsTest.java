package io.gpusockets.frontend;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

class LocalCallsTest {
    @Test
    void registrationsAreKeptApartFromAllocationsWithTheirFlags() {
        try (LocalCalls local = new LocalCalls(); Arena a = Arena.ofConfined()) {
            MemorySegment buf = a.allocate(4096, 4096), flags = a.allocate(4), pp = a.allocate(8);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, local.register(buf, 4096, 0x10), "unknown flag");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, local.register(MemorySegment.NULL, 4096, 0));
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, local.register(buf, 4096, LocalCalls.HOST_REGISTER_IOMEMORY));
            assertEquals(CuResult.CUDA_SUCCESS, local.register(buf, 4096, LocalCalls.HOST_REGISTER_READ_ONLY));
            assertEquals(CuResult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, local.register(buf.asSlice(4095), 1, 0));
            assertEquals(CuResult.CUDA_SUCCESS, local.flags(flags, buf.asSlice(4095)));
            assertEquals(LocalCalls.HOST_REGISTER_READ_ONLY, flags.get(ValueLayout.JAVA_INT, 0));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, local.freeHost(buf), "registered, not allocated");
            assertEquals(CuResult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, local.unregister(buf.asSlice(1)), "not the base");
            assertEquals(CuResult.CUDA_SUCCESS, local.unregister(buf));

            assertEquals(CuResult.CUDA_SUCCESS, local.allocHost(pp, 100, 0x02));
            MemorySegment p = pp.get(ValueLayout.ADDRESS, 0);
            assertEquals(CuResult.CUDA_SUCCESS, local.flags(flags, p));
            assertEquals(0x02, flags.get(ValueLayout.JAVA_INT, 0));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, local.flags(flags, MemorySegment.ofAddress(p.address() + 100)));
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, local.devicePointer(pp, p, 0), "no mapper: not mapped");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, local.devicePointer(pp, p, 1), "flags must be 0");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, local.devicePointer(pp, buf, 0), "not a host block");
            assertEquals(CuResult.CUDA_SUCCESS, local.freeHost(p));
        }
    }

    /** DEVICEMAP goes to the mapper; the device pointer is the host pointer; cuMemFreeHost frees through it. */
    @Test
    void mappedAllocationsGoThroughTheMapper() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment block = a.allocate(8192, 4096), pp = a.allocate(8), dp = a.allocate(8), flags = a.allocate(4);
            java.util.List<Long> freed = new java.util.ArrayList<>();
            LocalCalls.Mapper mapper = new LocalCalls.Mapper() {
                @Override
                public int allocMapped(long bytesize, long[] base) {
                    base[0] = block.address();
                    return bytesize <= 8192 ? CuResult.CUDA_SUCCESS : CuResult.CUDA_ERROR_OUT_OF_MEMORY;
                }

                @Override
                public int freeMapped(long base) {
                    freed.add(base);
                    return CuResult.CUDA_SUCCESS;
                }
            };
            try (LocalCalls local = new LocalCalls(mapper)) {
                assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, local.allocHost(pp, 1 << 20, LocalCalls.HOST_ALLOC_DEVICEMAP));
                assertEquals(CuResult.CUDA_SUCCESS, local.allocHost(pp, 100, LocalCalls.HOST_ALLOC_DEVICEMAP | 0x01));
                MemorySegment p = pp.get(ValueLayout.ADDRESS, 0);
                assertEquals(block.address(), p.address());
                assertEquals(CuResult.CUDA_SUCCESS, local.devicePointer(dp, MemorySegment.ofAddress(p.address() + 40), 0));
                assertEquals(p.address() + 40, dp.get(ValueLayout.JAVA_LONG, 0), "the device pointer is the host pointer");
                assertEquals(CuResult.CUDA_SUCCESS, local.flags(flags, p));
                assertEquals(0x03, flags.get(ValueLayout.JAVA_INT, 0));
                assertEquals(CuResult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, local.unregister(p), "allocated, not registered");
                assertEquals(CuResult.CUDA_SUCCESS, local.allocHost(pp, 100, 0));
                MemorySegment plain = pp.get(ValueLayout.ADDRESS, 0);
                assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, local.devicePointer(dp, plain, 0), "cuMemAllocHost: not mapped");
                assertEquals(CuResult.CUDA_SUCCESS, local.freeHost(p));
                assertEquals(java.util.List.of(block.address()), freed);
                assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, local.freeHost(p), "freed already");
                assertEquals(CuResult.CUDA_SUCCESS, local.freeHost(plain));
            }
        }
    }
}
