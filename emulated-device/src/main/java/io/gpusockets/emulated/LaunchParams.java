package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;

import io.gpusockets.protocol.calls.LaunchRequest;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Gathers a launch's parameter bytes into a private buffer laid out as the entry's PTX signature
 * says. Two ways in, as cuLaunchKernel defines them:
 * <ul>
 *   <li>{@code kernelParams}: a native {@code void*[]}, one pointer per parameter, each to that
 *       parameter's value;</li>
 *   <li>{@code extra}: {@code {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
 *       CU_LAUNCH_PARAM_END}} with the values already packed at their offsets in {@code buf}.</li>
 * </ul>
 * Both may arrive zero-length from native code; they are widened to what the signature implies.
 */
final class LaunchParams {
    static final long PARAM_END = LaunchRequest.CU_LAUNCH_PARAM_END;
    static final long PARAM_BUFFER_POINTER = LaunchRequest.CU_LAUNCH_PARAM_BUFFER_POINTER;
    static final long PARAM_BUFFER_SIZE = LaunchRequest.CU_LAUNCH_PARAM_BUFFER_SIZE;
    /** More key/value pairs than any real {@code extra} array holds: bounds a walk over garbage. */
    private static final int MAX_EXTRA_PAIRS = 16;

    private LaunchParams() {
    }

    static MemorySegment copy(PtxModule.Entry entry, MemorySegment kernelParams, MemorySegment extra) {
        long size = entry.paramBufferSize();
        MemorySegment buffer = MemorySegment.ofArray(new byte[(int) size]);
        boolean byPointers = !HostSegments.isNull(kernelParams);
        boolean packed = !HostSegments.isNull(extra);
        if (byPointers && packed) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "both kernelParams and extra are given");
        }
        if (size == 0) {
            return buffer;
        }
        if (byPointers) {
            int count = entry.params().size();
            MemorySegment pointers = HostSegments.sized(kernelParams, 8L * count, "kernelParams");
            for (int i = 0; i < count; i++) {
                PtxModule.Param p = entry.params().get(i);
                long address = pointers.get(ValueLayout.JAVA_LONG_UNALIGNED, 8L * i);
                if (address == 0) {
                    throw new CudaError(CUDA_ERROR_INVALID_VALUE, "kernelParams[" + i + "] (" + p.name() + ") is NULL");
                }
                MemorySegment.copy(MemorySegment.ofAddress(address).reinterpret(p.size()), 0, buffer, p.offset(), p.size());
            }
        } else if (packed) {
            copyPacked(extra, buffer, size);
        } else {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE,
                    "kernel " + entry.name() + " takes " + entry.params().size() + " parameters; kernelParams and extra are NULL");
        }
        return buffer;
    }

    private static void copyPacked(MemorySegment extra, MemorySegment buffer, long size) {
        MemorySegment words = extra.byteSize() == 0 && extra.isNative()
                ? extra.reinterpret(16L * MAX_EXTRA_PAIRS + 8) : extra;
        long bufferAddress = 0;
        long sizeAddress = 0;
        for (int k = 0; ; k += 2) {
            if (k >= 2 * MAX_EXTRA_PAIRS || 8L * k + 8 > words.byteSize()) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "extra is not terminated by CU_LAUNCH_PARAM_END");
            }
            long key = words.get(ValueLayout.JAVA_LONG_UNALIGNED, 8L * k);
            if (key == PARAM_END) {
                break;
            }
            if (8L * k + 16 > words.byteSize()) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "extra key " + key + " has no value");
            }
            long value = words.get(ValueLayout.JAVA_LONG_UNALIGNED, 8L * k + 8);
            if (key == PARAM_BUFFER_POINTER) {
                bufferAddress = value;
            } else if (key == PARAM_BUFFER_SIZE) {
                sizeAddress = value;
            } else {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "extra key " + key + " is not supported");
            }
        }
        if (bufferAddress == 0 || sizeAddress == 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "extra needs both CU_LAUNCH_PARAM_BUFFER_POINTER and _SIZE");
        }
        long given = MemorySegment.ofAddress(sizeAddress).reinterpret(8).get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        if (given < size) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "parameter buffer size=" + given + " is below the kernel's " + size);
        }
        MemorySegment.copy(MemorySegment.ofAddress(bufferAddress).reinterpret(size), 0, buffer, 0, size);
    }
}
