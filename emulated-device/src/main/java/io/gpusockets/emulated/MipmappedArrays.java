package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_OUT_OF_MEMORY;

import io.gpusockets.protocol.structs.Array3DDescriptor;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * cuMipmappedArrayCreate, cuMipmappedArrayGetLevel, cuMipmappedArrayDestroy: every level an array
 * ({@link CudaArrays#check} applies to level 0), each dimension halved per level (layers and cubemap faces
 * are not), at most {@code 1 + floor(log2(largest dimension))} levels, within the H200's mipmapped limits
 * (32768). The queries of sparse and deferred-mapping arrays (cuArrayGetSparseProperties,
 * cu(Mipmapped)ArrayGetMemoryRequirements) and cuArrayGetPlane answer CUDA_ERROR_INVALID_VALUE, as the driver
 * does for arrays that are none of those: the emulated device makes no sparse, deferred-mapping or
 * multi-planar arrays.
 */
final class MipmappedArrays {
    /** CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH / HEIGHT, TEXTURE1D_MIPMAPPED_WIDTH. */
    static final long MAX_MIPMAPPED = 32768;

    private final Handles handles;
    private final Contexts contexts;
    private final EmulatedMemory deviceMemory;

    MipmappedArrays(Handles handles, Contexts contexts, EmulatedMemory deviceMemory) {
        this.handles = handles;
        this.contexts = contexts;
        this.deviceMemory = deviceMemory;
    }

    long create(MemorySegment pDesc, int numLevels) {
        EmulatedContext c = contexts.active();
        Array3DDescriptor d = Array3DDescriptor.read(HostSegments.sized(pDesc, Array3DDescriptor.SIZE, "pMipmappedArrayDesc"));
        int element = CudaArrays.check(d);
        if (d.width() > MAX_MIPMAPPED || d.height() > MAX_MIPMAPPED) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "Width=" + d.width() + " Height=" + d.height()
                    + " exceed the device's mipmapped limit of " + MAX_MIPMAPPED);
        }
        if (numLevels < 1 || numLevels > d.maxLevels()) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "numMipmapLevels=" + Integer.toUnsignedString(numLevels)
                    + ": 1 to " + d.maxLevels() + " for these dimensions");
        }
        long bytes = d.mipmapBytes(numLevels, element);
        EmulatedMemory.Reservation r = deviceMemory.reserve(c, bytes);
        long h = handles.issue();
        EmulatedArray[] levels = new EmulatedArray[numLevels];
        try {
            for (int l = 0; l < numLevels; l++) {
                Array3DDescriptor ld = d.level(l);
                MemorySegment memory = Arena.ofAuto().allocate(ld.bytes(element), 256);
                levels[l] = new EmulatedArray(handles.issue(), c, ld, element, memory, null, h);
            }
        } catch (OutOfMemoryError e) {
            deviceMemory.release(r);
            throw new CudaError(CUDA_ERROR_OUT_OF_MEMORY, "host memory for a mipmapped array of " + bytes + " bytes unavailable");
        }
        for (EmulatedArray level : levels) {
            handles.own(c, level.handle, level);
        }
        handles.own(c, h, new EmulatedMipmappedArray(h, c, d, levels, r));
        return h;
    }

    long level(long hMipmappedArray, int level) {
        EmulatedMipmappedArray m = contexts.lookup(hMipmappedArray, EmulatedMipmappedArray.class, "hMipmappedArray");
        if (level < 0 || level >= m.levels().length) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "level=" + Integer.toUnsignedString(level) + " of " + m.levels().length);
        }
        return m.levels()[level].handle;
    }

    void destroy(long hMipmappedArray) {
        EmulatedMipmappedArray m = contexts.lookup(hMipmappedArray, EmulatedMipmappedArray.class, "hMipmappedArray");
        if (handles.remove(hMipmappedArray, m)) {
            m.context().owned.remove(hMipmappedArray);
            for (EmulatedArray level : m.levels()) {
                handles.remove(level.handle, level);
                m.context().owned.remove(level.handle);
            }
            deviceMemory.release(m.reservation());
        }
    }

    /** A live mipmapped array of context {@code c}. */
    EmulatedMipmappedArray of(EmulatedContext c, long handle, String what) {
        EmulatedMipmappedArray m = contexts.lookup(handle, EmulatedMipmappedArray.class, what);
        if (m.context() != c) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, what + " belongs to another context than the current one");
        }
        return m;
    }

    /** cuArrayGetPlane, cuArrayGetSparseProperties, cuArrayGetMemoryRequirements: the array must exist; none has planes or tiles. */
    void refuseArrayQuery(long hArray, String what) {
        contexts.lookup(hArray, EmulatedArray.class, "array");
        throw new CudaError(CUDA_ERROR_INVALID_VALUE, what);
    }

    /** cuMipmappedArrayGetSparseProperties, cuMipmappedArrayGetMemoryRequirements: likewise. */
    void refuseMipmapQuery(long handle, String what) {
        contexts.lookup(handle, EmulatedMipmappedArray.class, "mipmap");
        throw new CudaError(CUDA_ERROR_INVALID_VALUE, what);
    }
}
