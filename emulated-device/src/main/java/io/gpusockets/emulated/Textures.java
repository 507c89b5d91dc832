package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;

import io.gpusockets.protocol.structs.ArrayDescriptor;
import io.gpusockets.protocol.structs.ResourceDesc;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * cuTexObjectCreate, cuTexObjectDestroy, cuTexObjectGetResourceDesc. The resource must be an array
 * of the current context, or linear / pitch-2D memory inside one of its allocations with a plain
 * format; mipmapped arrays do not exist here.
 */
final class Textures {
    private final Handles handles;
    private final Contexts contexts;
    private final EmulatedMemory memory;
    private final CudaArrays arrays;

    Textures(Handles handles, Contexts contexts, EmulatedMemory memory, CudaArrays arrays) {
        this.handles = handles;
        this.contexts = contexts;
        this.memory = memory;
        this.arrays = arrays;
    }

    long create(MemorySegment pResDesc, MemorySegment pTexDesc, MemorySegment pResViewDesc) {
        EmulatedContext c = contexts.active();
        MemorySegment res = HostSegments.sized(pResDesc, ResourceDesc.SIZE, "pResDesc");
        MemorySegment tex = HostSegments.sized(pTexDesc, ResourceDesc.TEXTURE_DESC_SIZE, "pTexDesc");
        MemorySegment view = HostSegments.isNull(pResViewDesc) ? null
                : HostSegments.sized(pResViewDesc, ResourceDesc.VIEW_DESC_SIZE, "pResViewDesc");
        if (ResourceDesc.getInt(res, ResourceDesc.FLAGS) != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "pResDesc->flags must be 0");
        }
        long target = ResourceDesc.getLong(res, ResourceDesc.HANDLE_OR_POINTER);
        switch (ResourceDesc.type(res)) {
            case ResourceDesc.TYPE_ARRAY -> arrays.of(c, target, "res.array.hArray");
            case ResourceDesc.TYPE_LINEAR -> checkLinear(c, res, target, ResourceDesc.getLong(res, ResourceDesc.LINEAR_SIZE));
            case ResourceDesc.TYPE_PITCH2D -> checkLinear(c, res, target, ResourceDesc.pitch2DSpan(res));
            case ResourceDesc.TYPE_MIPMAPPED_ARRAY ->
                    throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "mipmapped arrays are not emulated");
            default -> throw new CudaError(CUDA_ERROR_INVALID_VALUE, "resType=" + ResourceDesc.type(res));
        }
        Arena arena = Arena.ofAuto();
        long h = handles.issue();
        handles.own(c, h, new EmulatedTexture(h, c, arena.allocate(ResourceDesc.SIZE).copyFrom(res),
                arena.allocate(ResourceDesc.TEXTURE_DESC_SIZE).copyFrom(tex),
                view == null ? null : arena.allocate(ResourceDesc.VIEW_DESC_SIZE).copyFrom(view)));
        return h;
    }

    private void checkLinear(EmulatedContext c, MemorySegment res, long devPtr, long bytes) {
        if (ArrayDescriptor.elementBytes(ResourceDesc.getInt(res, ResourceDesc.FORMAT),
                ResourceDesc.getInt(res, ResourceDesc.NUM_CHANNELS)) < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "format/numChannels of the resource are not a plain format");
        }
        if (bytes <= 0 || memory.resolve(c, devPtr, bytes) == null) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "resource memory 0x" + Long.toHexString(devPtr) + "+" + bytes
                    + " is not inside one allocation of the current context");
        }
    }

    void destroy(long texObject) {
        EmulatedTexture t = contexts.lookup(texObject, EmulatedTexture.class, "texObject");
        if (handles.remove(texObject, t)) {
            t.context().owned.remove(texObject);
        }
    }

    void resourceDesc(MemorySegment pResDesc, long texObject) {
        EmulatedTexture t = contexts.lookup(texObject, EmulatedTexture.class, "texObject");
        HostSegments.sized(pResDesc, ResourceDesc.SIZE, "pResDesc").copyFrom(t.resource());
    }
}
