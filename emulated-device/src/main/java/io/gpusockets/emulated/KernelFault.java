package io.gpusockets.emulated;

import io.gpusockets.protocol.api.CuResult;

/**
 * A kernel (or a queued copy) touched memory it may not, a kernel's assert() failed or it trapped: it becomes the
 * context's sticky error, as a GPU fault does, and is reported by the next synchronizing call rather
 * than by the launch.
 */
final class KernelFault extends RuntimeException {
    private static final long serialVersionUID = 1L;

    final int code;

    KernelFault(int code, String detail) {
        super(detail, null, false, false);
        this.code = code;
    }

    static KernelFault illegalAddress(long address, long bytes) {
        return new KernelFault(CuResult.CUDA_ERROR_ILLEGAL_ADDRESS,
                "address=0x" + Long.toHexString(address) + " bytes=" + bytes + " is not inside one allocation of the context");
    }

    /** A device-side assert() failed: CUDA_ERROR_ASSERT, sticky like a memory fault. */
    static KernelFault assertion(String detail) {
        return new KernelFault(CuResult.CUDA_ERROR_ASSERT, detail);
    }

    /** A thread executed trap (__trap()) or brkpt: CUDA_ERROR_LAUNCH_FAILED, sticky like a memory fault. */
    static KernelFault trap(String detail) {
        return new KernelFault(CuResult.CUDA_ERROR_LAUNCH_FAILED, detail);
    }

    static KernelFault misaligned(long address, long alignment) {
        return new KernelFault(CuResult.CUDA_ERROR_MISALIGNED_ADDRESS,
                "address=0x" + Long.toHexString(address) + " is not aligned to " + alignment + " bytes");
    }
}
