package io.gpusockets.emulated;

/**
 * A failed driver call inside the emulated device: the CUresult to return and a sentence saying why.
 * Thrown only inside this package and turned into a return code at the {@link EmulatedDevice} boundary,
 * so no exception ever reaches a caller (an upcall from C must always get a CUresult). Stackless:
 * it is control flow, not a bug report.
 */
final class CudaError extends RuntimeException {
    private static final long serialVersionUID = 1L;

    final int code;

    CudaError(int code, String detail) {
        super(detail, null, false, false);
        this.code = code;
    }
}
