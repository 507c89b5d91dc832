package io.gpusockets.cli.workloads;

import io.gpusockets.protocol.api.CuResult;

/** Turns CUresults into exceptions for code that has nothing better to do with them. */
public final class Cu {
    private Cu() {
    }

    /** Returns when {@code result} is CUDA_SUCCESS, else throws {@link CudaException} naming {@code call}. */
    public static void check(int result, String call) {
        if (result != CuResult.CUDA_SUCCESS) {
            throw new CudaException(result, call);
        }
    }
}
