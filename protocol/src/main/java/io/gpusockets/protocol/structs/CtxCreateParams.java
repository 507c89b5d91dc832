package io.gpusockets.protocol.structs;

import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The {@code CUctxCreateParams} of cuCtxCreate_v4 (cuda.h 13.0, x86-64), which every CUDA 13 driver-API
 * program passes, zeroed, as {@code cuCtxCreate(&ctx, &params, flags, dev)}:
 *
 * <pre>
 *    0  CUexecAffinityParam *execAffinityParams
 *    8  int numExecAffinityParams, 4 bytes padding
 *   16  CUctxCigParam *cigParams
 *   (24 bytes)
 * </pre>
 *
 * Read field by field (the padding may hold anything). No execution affinity and no CIG parameters
 * ask for nothing: the context is made as with NULL. Execution affinity (a share of the GPU's SMs)
 * partitions the physical GPU, which is the backend's to allot between tenants (cuCtxGetExecAffinity
 * and green contexts are not forwarded either); CIG (CUDA in graphics) shares a D3D12 or Vulkan
 * command queue of the process, which a guest's process does not have on the GPU's host. Both are
 * refused with CUDA_ERROR_NOT_SUPPORTED, which the driver also answers where a device cannot do them.
 */
public final class CtxCreateParams {
    public static final long SIZE = 24;
    private static final long AFFINITY = 0, NUM_AFFINITY = 8, CIG = 16;

    private CtxCreateParams() {
    }

    /**
     * CUDA_SUCCESS for NULL or parameters that ask for nothing; CUDA_ERROR_INVALID_VALUE for a negative
     * count or a count without its array; CUDA_ERROR_NOT_SUPPORTED for execution affinity or CIG.
     * {@code params} is the program's pointer (a bare native address is widened to {@link #SIZE}).
     */
    public static int check(MemorySegment params) {
        if (params.isNative() && params.address() == 0) {
            return CuResult.CUDA_SUCCESS;
        }
        MemorySegment p = params.isNative() && params.byteSize() < SIZE ? params.reinterpret(SIZE) : params;
        long affinity = p.get(ValueLayout.JAVA_LONG_UNALIGNED, AFFINITY);
        int numAffinity = p.get(ValueLayout.JAVA_INT_UNALIGNED, NUM_AFFINITY);
        long cig = p.get(ValueLayout.JAVA_LONG_UNALIGNED, CIG);
        if (numAffinity < 0 || numAffinity > 0 && affinity == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        return numAffinity > 0 || cig != 0 ? CuResult.CUDA_ERROR_NOT_SUPPORTED : CuResult.CUDA_SUCCESS;
    }

    /** Why {@link #check} refused {@code params}, for the one-line notice on stderr. */
    public static String refusal(MemorySegment params) {
        MemorySegment p = params.isNative() && params.byteSize() < SIZE ? params.reinterpret(SIZE) : params;
        return p.get(ValueLayout.JAVA_INT_UNALIGNED, NUM_AFFINITY) > 0
                ? "execution affinity partitions the physical GPU, which the backend allots between tenants"
                : "CIG (CUDA in graphics) shares a graphics command queue the guest's process does not have on the GPU's host";
    }
}
