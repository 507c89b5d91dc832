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
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, local.devicePointer());
            assertEquals(CuResult.CUDA_SUCCESS, local.freeHost(p));
        }
    }
}
