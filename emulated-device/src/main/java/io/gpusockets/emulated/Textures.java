package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;

import io.gpusockets.protocol.structs.ArrayDescriptor;
import io.gpusockets.protocol.structs.ResourceDesc;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Texture objects (cuTexObjectCreate, Destroy, GetResourceDesc, GetTextureDesc, GetResourceViewDesc) and
 * surface objects (cuSurfObjectCreate, Destroy, GetResourceDesc). A texture's resource must be an array or a
 * mipmapped array of the current context (mipmapFilterMode POINT), or linear / pitch-2D memory inside one of
 * its allocations with a plain format; it samples as {@link TextureSampler} says. A surface's resource must be an array;
 * one made without CUDA_ARRAY3D_SURFACE_LDST is taken too, as the driver takes it (an H100, 580.159.04). Kernels reach both through {@link KernelTextures}. A resource view is taken
 * when it views the whole resource as it is (format NONE, the resource's size or 0, every level and layer);
 * others are refused with CUDA_ERROR_NOT_SUPPORTED. Their values come from {@link Handles#issueObject} (1, 2, 3, ...
 * per device), so the same objects made in the same order on a fresh device get the same values.
 */
final class Textures {
    /** CUDA_RESOURCE_VIEW_DESC offsets. */
    private static final long VIEW_FORMAT = 0, VIEW_WIDTH = 8, VIEW_HEIGHT = 16, VIEW_DEPTH = 24, VIEW_FIRST_LEVEL = 32,
            VIEW_LAST_LEVEL = 36, VIEW_FIRST_LAYER = 40, VIEW_LAST_LAYER = 44;

    private final Handles handles;
    private final Contexts contexts;
    private final EmulatedMemory memory;
    private final CudaArrays arrays;
    private final MipmappedArrays mipmaps;

    Textures(Handles handles, Contexts contexts, EmulatedMemory memory, CudaArrays arrays, MipmappedArrays mipmaps) {
        this.handles = handles;
        this.contexts = contexts;
        this.memory = memory;
        this.arrays = arrays;
        this.mipmaps = mipmaps;
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
        TextureSampler sampler;
        EmulatedArray array = null;
        long devPtr = 0;
        EmulatedTexture.Mip mip = null;
        switch (ResourceDesc.type(res)) {
            case ResourceDesc.TYPE_ARRAY -> {
                array = arrays.of(c, target, "res.array.hArray");
                sampler = new TextureSampler(TextureSampler.Source.ARRAY, array.shape, array.descriptor.format(),
                        array.descriptor.numChannels(), array.width(), array.rows(), array.slices(), array.rowBytes(), tex);
            }
            case ResourceDesc.TYPE_LINEAR -> {
                checkLinear(c, res, target, ResourceDesc.getLong(res, ResourceDesc.LINEAR_SIZE));
                int format = ResourceDesc.getInt(res, ResourceDesc.FORMAT), channels = ResourceDesc.getInt(res, ResourceDesc.NUM_CHANNELS);
                long elements = ResourceDesc.getLong(res, ResourceDesc.LINEAR_SIZE) / ArrayDescriptor.elementBytes(format, channels);
                sampler = new TextureSampler(TextureSampler.Source.LINEAR, null, format, channels, elements, 1, 1, 0, tex);
                devPtr = target;
            }
            case ResourceDesc.TYPE_PITCH2D -> {
                checkLinear(c, res, target, ResourceDesc.pitch2DSpan(res));
                sampler = new TextureSampler(TextureSampler.Source.PITCH2D, null, ResourceDesc.getInt(res, ResourceDesc.FORMAT),
                        ResourceDesc.getInt(res, ResourceDesc.NUM_CHANNELS), ResourceDesc.getLong(res, ResourceDesc.PITCH2D_WIDTH),
                        ResourceDesc.getLong(res, ResourceDesc.PITCH2D_HEIGHT), 1, ResourceDesc.getLong(res, ResourceDesc.PITCH2D_PITCH), tex);
                devPtr = target;
            }
            case ResourceDesc.TYPE_MIPMAPPED_ARRAY -> {
                EmulatedMipmappedArray m = mipmaps.of(c, target, "res.mipmap.hMipmappedArray");
                int filter = tex.get(ValueLayout.JAVA_INT_UNALIGNED, TextureSampler.MIPMAP_FILTER_MODE);
                if (filter != 0) {
                    throw new CudaError(filter == 1 ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE,
                            "mipmapFilterMode=" + filter + ": only POINT (the nearest level) is emulated");
                }
                TextureSampler[] levels = new TextureSampler[m.levels().length];
                for (int l = 0; l < levels.length; l++) {
                    EmulatedArray a = m.levels()[l];
                    levels[l] = new TextureSampler(TextureSampler.Source.ARRAY, a.shape, a.descriptor.format(),
                            a.descriptor.numChannels(), a.width(), a.rows(), a.slices(), a.rowBytes(), tex);
                }
                array = m.levels()[0];
                sampler = levels[0];
                mip = new EmulatedTexture.Mip(levels, m.levels(), tex.get(ValueLayout.JAVA_FLOAT_UNALIGNED, TextureSampler.MIPMAP_BIAS),
                        tex.get(ValueLayout.JAVA_FLOAT_UNALIGNED, TextureSampler.MIN_LEVEL_CLAMP),
                        tex.get(ValueLayout.JAVA_FLOAT_UNALIGNED, TextureSampler.MAX_LEVEL_CLAMP));
            }
            default -> throw new CudaError(CUDA_ERROR_INVALID_VALUE, "resType=" + ResourceDesc.type(res));
        }
        if (view != null) {
            checkView(view, sampler);
        }
        Arena arena = Arena.ofAuto();
        long h = handles.issueObject();
        handles.own(c, h, new EmulatedTexture(h, c, arena.allocate(ResourceDesc.SIZE).copyFrom(res),
                arena.allocate(ResourceDesc.TEXTURE_DESC_SIZE).copyFrom(tex),
                view == null ? null : arena.allocate(ResourceDesc.VIEW_DESC_SIZE).copyFrom(view), sampler, array, devPtr, mip));
        return h;
    }

    /** A view is taken when it changes nothing: no format of its own, the whole size, every level and layer. */
    private static void checkView(MemorySegment view, TextureSampler s) {
        int format = view.get(ValueLayout.JAVA_INT_UNALIGNED, VIEW_FORMAT);
        long w = view.get(ValueLayout.JAVA_LONG_UNALIGNED, VIEW_WIDTH), h = view.get(ValueLayout.JAVA_LONG_UNALIGNED, VIEW_HEIGHT),
                d = view.get(ValueLayout.JAVA_LONG_UNALIGNED, VIEW_DEPTH);
        int firstLevel = view.get(ValueLayout.JAVA_INT_UNALIGNED, VIEW_FIRST_LEVEL), lastLevel = view.get(ValueLayout.JAVA_INT_UNALIGNED, VIEW_LAST_LEVEL);
        int firstLayer = view.get(ValueLayout.JAVA_INT_UNALIGNED, VIEW_FIRST_LAYER), lastLayer = view.get(ValueLayout.JAVA_INT_UNALIGNED, VIEW_LAST_LAYER);
        boolean whole = format == 0 && (w == 0 || w == s.width) && (h == 0 || h == s.height) && (d == 0 || d == s.slices)
                && firstLevel == 0 && lastLevel == 0 && firstLayer == 0 && (lastLayer == 0 || lastLayer == s.slices - 1);
        if (!whole) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "resource views other than the whole resource as it is are not emulated");
        }
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

    void textureDesc(MemorySegment pTexDesc, long texObject) {
        EmulatedTexture t = contexts.lookup(texObject, EmulatedTexture.class, "texObject");
        HostSegments.sized(pTexDesc, ResourceDesc.TEXTURE_DESC_SIZE, "pTexDesc").copyFrom(t.texture());
    }

    /** The view the object was made with; one made without a view answers a zeroed descriptor (it views nothing apart). */
    void resourceViewDesc(MemorySegment pResViewDesc, long texObject) {
        EmulatedTexture t = contexts.lookup(texObject, EmulatedTexture.class, "texObject");
        MemorySegment out = HostSegments.sized(pResViewDesc, ResourceDesc.VIEW_DESC_SIZE, "pResViewDesc");
        if (t.view() == null) {
            out.fill((byte) 0);
        } else {
            out.copyFrom(t.view());
        }
    }

    // ---- surface objects -------------------------------------------------------------------------

    long createSurface(MemorySegment pResDesc) {
        EmulatedContext c = contexts.active();
        MemorySegment res = HostSegments.sized(pResDesc, ResourceDesc.SIZE, "pResDesc");
        if (ResourceDesc.getInt(res, ResourceDesc.FLAGS) != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "pResDesc->flags must be 0");
        }
        if (ResourceDesc.type(res) != ResourceDesc.TYPE_ARRAY) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "a surface object's resource must be an array (resType=" + ResourceDesc.type(res) + ")");
        }
        EmulatedArray array = arrays.of(c, ResourceDesc.getLong(res, ResourceDesc.HANDLE_OR_POINTER), "res.array.hArray");
        long h = handles.issueObject();
        handles.own(c, h, new EmulatedSurface(h, c, Arena.ofAuto().allocate(ResourceDesc.SIZE).copyFrom(res), array));
        return h;
    }

    void destroySurface(long surfObject) {
        EmulatedSurface s = contexts.lookup(surfObject, EmulatedSurface.class, "surfObject");
        if (handles.remove(surfObject, s)) {
            s.context().owned.remove(surfObject);
        }
    }

    void surfaceResourceDesc(MemorySegment pResDesc, long surfObject) {
        EmulatedSurface s = contexts.lookup(surfObject, EmulatedSurface.class, "surfObject");
        HostSegments.sized(pResDesc, ResourceDesc.SIZE, "pResDesc").copyFrom(s.resource());
    }
}
