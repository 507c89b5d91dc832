package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;

import io.gpusockets.protocol.calls.ModuleImageKind;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;

/**
 * Turns a module image handed to cuModuleLoadData* / cuModuleLoadFatBinary / cuLibraryLoadData into
 * PTX text: PTX as it is, the best PTX entry of a fatbin ({@link FatbinImage}), a fatbin wrapper's
 * fatbin, a cubin's PTX section (-G only). SASS cannot run on a Java device: an image without PTX is
 * CUDA_ERROR_NO_BINARY_FOR_GPU. A zero-length segment (from native code) is a bare pointer: PTX is
 * then a NUL-terminated string scanned up to {@link #MAX_PTX} bytes, a fatbin or cubin as long as its
 * header says (up to {@link ModuleImageKind#MAX_IMAGE}); a sized segment (the backend's copy of a
 * client's image) is never read past its end. The format is told by {@link ModuleImageKind}, which
 * reads the magic numbers one byte at a time and only while they match, so a short string is never
 * read past its NUL.
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
        ModuleImageKind kind = ModuleImageKind.of(image);
        return switch (kind) {
            case PTX -> ptx(unsized ? image.reinterpret(MAX_PTX) : image, unsized);
            case FATBIN -> FatbinImage.ptx(extent(image, unsized, "fatbin"), capability());
            case CUBIN_ELF -> FatbinImage.elfPtx(extent(image, unsized, "cubin"));
            case FATBIN_WRAPPER -> {
                // The wrapper holds a pointer into the caller's process: only a bare pointer from
                // that process may be followed, never bytes that arrived as data (they could point anywhere).
                if (!unsized) {
                    throw new CudaError(CUDA_ERROR_INVALID_IMAGE, "a fatbin wrapper passed as bytes: its fatbin pointer "
                            + "cannot be followed (pass the fatbin itself)");
                }
                MemorySegment fatbin = ModuleImageKind.image(image);
                if (fatbin == null || ModuleImageKind.of(fatbin) != ModuleImageKind.FATBIN) {
                    throw new CudaError(CUDA_ERROR_INVALID_IMAGE, "the fatbin wrapper does not point to a valid fatbin");
                }
                yield FatbinImage.ptx(fatbin, capability());
            }
        };
    }

    /** The emulated device's compute capability as major * 10 + minor (90). */
    static int capability() {
        return 10 * DeviceProperties.attribute(DeviceProperties.COMPUTE_CAPABILITY_MAJOR, 0)
                + DeviceProperties.attribute(DeviceProperties.COMPUTE_CAPABILITY_MINOR, 0);
    }

    /** The fatbin or cubin at the image's start, cut to the length its headers give. */
    private static MemorySegment extent(MemorySegment image, boolean unsized, String what) {
        if (!unsized && image.byteSize() < ModuleImageKind.FATBIN_MIN_BYTES) {
            // (ModuleImageKind would take so short a native segment for a bare pointer and read on)
            throw new CudaError(CUDA_ERROR_INVALID_IMAGE, "the " + what + " is cut short: " + image.byteSize() + " bytes");
        }
        MemorySegment s = unsized ? image.reinterpret(ModuleImageKind.MAX_IMAGE) : image;
        long length = ModuleImageKind.length(s);
        if (length < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_IMAGE, "the " + what + "'s headers give no length within "
                    + (unsized ? ModuleImageKind.MAX_IMAGE : image.byteSize()) + " bytes");
        }
        return s.asSlice(0, length);
    }

    private static String ptx(MemorySegment bytes, boolean unsized) {
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
