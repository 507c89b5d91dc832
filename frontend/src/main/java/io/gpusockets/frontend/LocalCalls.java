package io.gpusockets.frontend;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Calls the frontend answers without the backend: page-locked host memory lives beside the program
 * that uses it (a remote GPU cannot map it anyway), and error names and strings come from cuda.h.
 */
final class LocalCalls implements AutoCloseable {
    private static final Map<Integer, MemorySegment[]> ERROR_TEXT = new ConcurrentHashMap<>();
    private final Map<Long, Arena> hostAllocations = new ConcurrentHashMap<>();

    int allocHost(MemorySegment pp, long bytesize) {
        if (pp.isNative() && pp.address() == 0 || bytesize <= 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        Arena arena = Arena.ofShared();
        MemorySegment m;
        try {
            m = arena.allocate(bytesize, 4096);
        } catch (OutOfMemoryError | IllegalArgumentException e) {
            arena.close();
            return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
        }
        hostAllocations.put(m.address(), arena);
        WireValues.sized(pp, 8).set(ValueLayout.ADDRESS, 0, m);
        return CuResult.CUDA_SUCCESS;
    }

    int freeHost(MemorySegment p) {
        Arena arena = hostAllocations.remove(p.address());
        if (arena == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        arena.close();
        return CuResult.CUDA_SUCCESS;
    }

    int errorText(int error, MemorySegment pStr, boolean name) {
        if (pStr.isNative() && pStr.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment out = WireValues.sized(pStr, 8);
        if (!CuResult.isKnown(error)) {
            out.set(ValueLayout.ADDRESS, 0, MemorySegment.NULL);
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment[] text = ERROR_TEXT.computeIfAbsent(error, e -> new MemorySegment[] {
                Arena.global().allocateFrom(CuResult.name(e)), Arena.global().allocateFrom(CuResult.description(e))});
        out.set(ValueLayout.ADDRESS, 0, text[name ? 0 : 1]);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public void close() {
        for (Arena a : hostAllocations.values()) {
            a.close();
        }
        hostAllocations.clear();
    }
}
