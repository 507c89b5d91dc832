package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NO_BINARY_FOR_GPU;

import io.gpusockets.protocol.calls.ModuleImageKind;
import io.gpusockets.protocol.images.FatbinImage;
import io.gpusockets.protocol.images.ImageError;
import io.gpusockets.protocol.images.PtxText;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

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
    static final long MAX_PTX = PtxText.MAX_PTX;

    private ModuleImage() {
    }

    static String ptxText(MemorySegment image) {
        try {
            return imagePtx(image);
        } catch (ImageError e) {
            throw new CudaError(e.code, e.getMessage());
        }
    }

    private static String imagePtx(MemorySegment image) {
        if (HostSegments.isNull(image)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "image is NULL");
        }
        boolean unsized = image.byteSize() == 0 && image.isNative();
        ModuleImageKind kind = ModuleImageKind.of(image);
        return switch (kind) {
            case PTX -> ptx(unsized ? image.reinterpret(MAX_PTX) : image, unsized);
            case FATBIN -> fatbinPtx(image, unsized);
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
                yield fatbinPtx(fatbin, false);
            }
        };
    }

    /**
     * The PTX of a fatbin. An -rdc program's image is its device-linked fatbin (SASS only: nvlink
     * emits no PTX; empty in a PTX-only build) followed by the prelinked fatbins of its translation
     * units ({@link ModuleImageKind#image}); without PTX of its own, the best PTX of each of those is
     * taken and the units are linked ({@link PtxLinker}), as the driver links their code. A fatbin
     * without PTX the device can run (cudadevrt's, SASS only) is left out of the link; a symbol only
     * it could define is then reported unresolved, with the reason.
     */
    private static String fatbinPtx(MemorySegment image, boolean unsized) {
        MemorySegment first = extent(image, unsized, "fatbin");
        try {
            return FatbinImage.ptx(first, capability());
        } catch (ImageError noPtx) {
            if (unsized || noPtx.code != CUDA_ERROR_NO_BINARY_FOR_GPU || first.byteSize() >= image.byteSize()) {
                throw noPtx;
            }
            List<PtxLinker.Unit> units = new ArrayList<>();
            int skipped = 0;
            int index = 0;
            for (long off = first.byteSize(); off < image.byteSize(); ) {
                MemorySegment rest = image.asSlice(off);
                if (rest.byteSize() < ModuleImageKind.FATBIN_MIN_BYTES || ModuleImageKind.of(rest) != ModuleImageKind.FATBIN) {
                    throw noPtx;   // not a run of fatbins: what follows is not ours to read
                }
                MemorySegment next = extent(rest, false, "prelinked fatbin");
                index++;
                try {
                    units.add(new PtxLinker.Unit("translation unit " + index, FatbinImage.ptx(next, capability())));
                } catch (ImageError none) {
                    if (none.code != CUDA_ERROR_NO_BINARY_FOR_GPU) {
                        throw none;
                    }
                    skipped++;
                }
                off += next.byteSize();
            }
            if (units.isEmpty()) {
                throw noPtx;
            }
            String note = skipped == 0 ? null : skipped + " of the " + index + " prelinked fatbins (cudadevrt's, or units built "
                    + "for SASS only) hold no PTX for compute capability " + capability() / 10 + "." + capability() % 10
                    + " and were left out: the symbol may be defined there as SASS, which the emulated device cannot run";
            return PtxLinker.link(units, note);
        }
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
