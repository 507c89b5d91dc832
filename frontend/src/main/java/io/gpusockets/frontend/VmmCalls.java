package io.gpusockets.frontend;

import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.MemorySegment;

/**
 * Area {@code vmm}: shareable handles of physical allocations. Not forwarded yet: both answer
 * CUDA_ERROR_NOT_SUPPORTED, as the backend did before the wire carried a token (issue 24 makes a POSIX descriptor
 * in the guest that carries the backend's token).
 */
final class VmmCalls implements FrontendHandlers.Vmm {
    @Override
    public int cuMemExportToShareableHandle(MemorySegment shareableHandle, long handle, int handleType, long flags) {
        return CuResult.CUDA_ERROR_NOT_SUPPORTED;
    }

    @Override
    public int cuMemImportFromShareableHandle(MemorySegment handle, MemorySegment osHandle, int shHandleType) {
        return CuResult.CUDA_ERROR_NOT_SUPPORTED;
    }
}
