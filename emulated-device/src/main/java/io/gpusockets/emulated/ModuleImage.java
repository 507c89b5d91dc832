package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;

import io.gpusockets.protocol.calls.ModuleImageKind;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;

/**
 * Turns a module image handed to cuModuleLoadData* / cuLibraryLoadData into PTX text. Only PTX is
 * understood: compiled code (cubin ELF, fatbin, the fatbin wrapper) cannot run on a Java device.
 * A zero-length segment (from native code) is PTX's own convention, a NUL-terminated string, scanned
 * up to {@link #MAX_PTX} bytes; the format is told by {@link ModuleImageKind}, which reads the magic
 * numbers one byte at a time and only while they match, so a short string is never read past its NUL.
 */
final class ModuleImage {
    static final long MAX_PTX = 64L << 20;

    private ModuleImage() {
    }

    static String ptxText(MemorySegment image) {
        if (HostSegments.isNull(image)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "image is NULL");
        }
        boolean unsized = image.byteSize() == 0 && image.isNative();
        MemorySegment bytes = unsized ? image.reinterpret(MAX_PTX) : image;
        String kind = switch (ModuleImageKind.of(bytes)) {
            case CUBIN_ELF -> "a cubin (ELF)";
            case FATBIN -> "a fatbin";
            case FATBIN_WRAPPER -> "a fatbin wrapper";
            case PTX -> null;
        };
        if (kind != null) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED,
                    "image is " + kind + "; the emulated device runs PTX text only (compile with -ptx)");
        }
        long length = HostSegments.strlen(bytes, bytes.byteSize());
        if (length < 0) {
            if (unsized) {
                throw new CudaError(CUDA_ERROR_INVALID_IMAGE, "PTX image has no NUL within " + MAX_PTX + " bytes");
            }
            length = bytes.byteSize();   // a sized segment may omit the terminator
        }
        if (length == 0) {
            throw new CudaError(CUDA_ERROR_INVALID_IMAGE, "image is empty");
        }
        return new String(bytes.asSlice(0, length).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
    }
}
