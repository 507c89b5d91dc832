package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Area {@code vmm}: shareable handles of physical allocations. On the wire a shareable handle is the backend's 64-byte
 * opaque token, both ways (never the driver's handle, never a descriptor of the backend's host); this class turns it
 * into what the guest program expects for each handle type:
 * <ul>
 *   <li>CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: a descriptor of the guest that carries the token
 *       ({@link ShareableFiles}), written as an int to {@code *shareableHandle}; the import takes the descriptor's
 *       value as {@code osHandle} (cast to a pointer, as CUDA documents) and reads the token back from it. A descriptor
 *       GPUsockets did not make, or a closed one, is CUDA_ERROR_INVALID_VALUE without a round trip.</li>
 *   <li>CU_MEM_HANDLE_TYPE_FABRIC: the token itself is the 64-byte CUmemFabricHandle.</li>
 *   <li>Any other type: sent with a zeroed token for the backend to refuse (its error is returned); the program's
 *       {@code osHandle}, whose meaning this frontend does not know, is never read.</li>
 * </ul>
 * Whether a token may be imported (the same tenant, the allocation still exported) is the backend's decision alone.
 */
final class VmmCalls implements FrontendHandlers.Vmm {
    static final int POSIX_FILE_DESCRIPTOR = 1;
    static final int FABRIC = 8;
    /** "not a descriptor GPUsockets made" is said once per process; later refusals are only returned. */
    private static final AtomicBoolean FOREIGN_REPORTED = new AtomicBoolean();

    private final RemoteCudaDriver driver;

    VmmCalls(RemoteCudaDriver driver) {
        this.driver = driver;
    }

    @Override
    public int cuMemExportToShareableHandle(MemorySegment shareableHandle, long handle, int handleType, long flags) {
        if (isNull(shareableHandle)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        if (handleType == FABRIC) {
            return driver.call(ApiEntries.cuMemExportToShareableHandle, WireValues.sized(shareableHandle, ShareableFiles.TOKEN_BYTES),
                    handle, handleType, flags);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment token = arena.allocate(ShareableFiles.TOKEN_BYTES);
            int r = driver.call(ApiEntries.cuMemExportToShareableHandle, token, handle, handleType, flags);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            if (handleType != POSIX_FILE_DESCRIPTOR) {
                return CuResult.CUDA_ERROR_NOT_SUPPORTED; // a backend that knows a type this frontend has no guest form for
            }
            int fd;
            try {
                fd = ShareableFiles.create(token);
            } catch (ShareableFiles.ShareableFileException e) {
                System.err.println("gpusockets: cuMemExportToShareableHandle: cannot make the descriptor that carries the "
                        + "handle: " + e.getMessage());
                return CuResult.CUDA_ERROR_OPERATING_SYSTEM;
            }
            WireValues.sized(shareableHandle, 4).set(ValueLayout.JAVA_INT_UNALIGNED, 0, fd);
            return CuResult.CUDA_SUCCESS;
        }
    }

    @Override
    public int cuMemImportFromShareableHandle(MemorySegment handle, MemorySegment osHandle, int shHandleType) {
        if (isNull(handle)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        if (shHandleType == FABRIC) {
            if (isNull(osHandle)) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
            return driver.call(ApiEntries.cuMemImportFromShareableHandle, handle,
                    WireValues.sized(osHandle, ShareableFiles.TOKEN_BYTES), shHandleType);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment token = arena.allocate(ShareableFiles.TOKEN_BYTES);
            if (shHandleType == POSIX_FILE_DESCRIPTOR) {
                long value = osHandle.address();
                String why = value > Integer.MAX_VALUE ? "descriptor " + value + " is out of range"
                        : ShareableFiles.read((int) value, token);
                if (why != null) {
                    if (FOREIGN_REPORTED.compareAndSet(false, true)) {
                        System.err.println("gpusockets: cuMemImportFromShareableHandle: not a descriptor GPUsockets made ("
                                + why + "): CUDA_ERROR_INVALID_VALUE");
                    }
                    return CuResult.CUDA_ERROR_INVALID_VALUE;
                }
            }
            return driver.call(ApiEntries.cuMemImportFromShareableHandle, handle, token, shHandleType);
        }
    }

    private static boolean isNull(MemorySegment s) {
        return s.isNative() && s.address() == 0;
    }
}
