package io.gpusockets.cli.workloads;

import io.gpusockets.protocol.api.CuResult;

/** A driver call returned something other than CUDA_SUCCESS. */
public final class CudaException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int result;
    private final String call;

    public CudaException(int result, String call) {
        super(call + " failed: " + CuResult.name(result) + " (" + result + "): " + CuResult.description(result));
        this.result = result;
        this.call = call;
    }

    /** The CUresult. */
    public int result() {
        return result;
    }

    /** The call that failed, e.g. "cuMemAlloc(4194304)". */
    public String call() {
        return call;
    }
}
