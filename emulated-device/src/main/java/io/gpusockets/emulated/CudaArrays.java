package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_OUT_OF_MEMORY;

import io.gpusockets.protocol.structs.Array3DDescriptor;
import io.gpusockets.protocol.structs.Array3DDescriptor.Shape;
import io.gpusockets.protocol.structs.ArrayDescriptor;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * cuArrayCreate, cuArray3DCreate, cuArrayDestroy, cuArrayGetDescriptor, cuArray3DGetDescriptor: arrays of
 * every shape cuArray3DCreate documents (1D, 2D, 3D, 1D and 2D layered, cubemap, cubemap layered), with
 * the surface load/store and texture gather flags, of the plain formats (8/16/32-bit integers, half,
 * float) with 1, 2 or 4 channels and of the normalized ones (UNORM/SNORM_INT8Xn, _INT16Xn), sized within
 * an H200's texture and surface limits (those of compute capability 9.0 in the CUDA C++ Programming
 * Guide's technical specifications). Block-compressed and video formats, and sparse, deferred-mapping,
 * depth, color-attachment and video arrays fail with CUDA_ERROR_NOT_SUPPORTED naming what is missing.
 * Array memory counts against the device's advertised memory (a reservation of its context), as on a GPU.
 */
final class CudaArrays {
    /** CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH, TEXTURE2D_WIDTH / _HEIGHT of the device the emulator imitates. */
    static final long MAX_WIDTH = 131072;
    static final long MAX_HEIGHT = 65536;
    /** MAXIMUM_TEXTURE3D_WIDTH / HEIGHT / DEPTH (SURFACE3D's are the same). */
    static final long MAX_3D = 16384;
    /** MAXIMUM_TEXTURE1D/2D_LAYERED_WIDTH (and height), TEXTURECUBEMAP_WIDTH, SURFACE1D_WIDTH. */
    static final long MAX_LAYERED = 32768;
    /** MAXIMUM_TEXTURE1D/2D_LAYERED_LAYERS. */
    static final long MAX_LAYERS = 2048;
    /** MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS. */
    static final long MAX_CUBEMAP_LAYERS = 2046;
    /** Flags the emulated device does not make arrays with (CUDA_ERROR_NOT_SUPPORTED). */
    private static final int UNSUPPORTED_FLAGS = Array3DDescriptor.DEPTH_TEXTURE | Array3DDescriptor.COLOR_ATTACHMENT
            | Array3DDescriptor.SPARSE | Array3DDescriptor.DEFERRED_MAPPING | Array3DDescriptor.VIDEO_ENCODE_DECODE;

    private final Handles handles;
    private final Contexts contexts;
    private final EmulatedMemory deviceMemory;

    CudaArrays(Handles handles, Contexts contexts, EmulatedMemory deviceMemory) {
        this.handles = handles;
        this.contexts = contexts;
        this.deviceMemory = deviceMemory;
    }

    long create(MemorySegment pAllocateArray) {
        ArrayDescriptor d = ArrayDescriptor.read(HostSegments.sized(pAllocateArray, ArrayDescriptor.SIZE, "pAllocateArray"));
        return create(Array3DDescriptor.of(d));
    }

    long create3D(MemorySegment pAllocateArray) {
        return create(Array3DDescriptor.read(HostSegments.sized(pAllocateArray, Array3DDescriptor.SIZE, "pAllocateArray")));
    }

    private long create(Array3DDescriptor d) {
        EmulatedContext c = contexts.active();
        int element = check(d);
        long bytes = d.bytes(element);
        EmulatedMemory.Reservation r = deviceMemory.reserve(c, bytes);
        MemorySegment memory;
        try {
            memory = Arena.ofAuto().allocate(bytes, 256);
        } catch (OutOfMemoryError e) {
            deviceMemory.release(r);
            throw new CudaError(CUDA_ERROR_OUT_OF_MEMORY, "host memory for an array of " + bytes + " bytes unavailable");
        }
        long h = handles.issue();
        handles.own(c, h, new EmulatedArray(h, c, d, element, memory, r, 0));
        return h;
    }

    /** Checks a descriptor as the driver does; returns its element's bytes. */
    static int check(Array3DDescriptor d) {
        int channels = d.numChannels();
        if (channels != 1 && channels != 2 && channels != 4) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "NumChannels=" + channels + " must be 1, 2 or 4");
        }
        int element = ArrayDescriptor.elementBytes(d.format(), channels);
        if (element < 0) {
            if (ArrayDescriptor.impliedChannels(d.format()) != 0) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "Format=0x" + Integer.toHexString(d.format()) + " has "
                        + ArrayDescriptor.impliedChannels(d.format()) + " channels, not NumChannels=" + channels);
            }
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "Format=0x" + Integer.toHexString(d.format())
                    + " is not emulated (block-compressed and video formats are not)");
        }
        int flags = d.flags();
        if ((flags & ~Array3DDescriptor.KNOWN_FLAGS) != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "Flags=0x" + Integer.toHexString(flags) + " has unknown bits");
        }
        if ((flags & UNSUPPORTED_FLAGS) != 0) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "Flags=0x" + Integer.toHexString(flags)
                    + ": sparse, deferred-mapping, depth, color-attachment and video arrays are not emulated");
        }
        Shape shape = d.shape();
        if (shape == null) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "Width=" + d.width() + " Height=" + d.height() + " Depth=" + d.depth()
                    + " Flags=0x" + Integer.toHexString(flags) + " describe no array shape");
        }
        if ((flags & Array3DDescriptor.TEXTURE_GATHER) != 0 && shape != Shape.TWO_D) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "CUDA_ARRAY3D_TEXTURE_GATHER is for 2D arrays");
        }
        boolean fits = switch (shape) {
            case ONE_D -> d.width() <= ((flags & Array3DDescriptor.SURFACE_LDST) != 0 ? MAX_LAYERED : MAX_WIDTH);
            case TWO_D -> (flags & Array3DDescriptor.TEXTURE_GATHER) != 0
                    ? d.width() <= MAX_LAYERED && d.height() <= MAX_LAYERED : d.width() <= MAX_WIDTH && d.height() <= MAX_HEIGHT;
            case THREE_D -> d.width() <= MAX_3D && d.height() <= MAX_3D && d.depth() <= MAX_3D;
            case LAYERED_1D -> d.width() <= MAX_LAYERED && d.depth() <= MAX_LAYERS;
            case LAYERED_2D -> d.width() <= MAX_LAYERED && d.height() <= MAX_LAYERED && d.depth() <= MAX_LAYERS;
            case CUBEMAP -> d.width() <= MAX_LAYERED;
            case CUBEMAP_LAYERED -> d.width() <= MAX_LAYERED && d.depth() / 6 <= MAX_CUBEMAP_LAYERS;
        };
        if (!fits) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "Width=" + d.width() + " Height=" + d.height() + " Depth=" + d.depth()
                    + " exceed the device's limits for a " + shape + " array");
        }
        return element;
    }

    void destroy(long hArray) {
        EmulatedArray a = contexts.lookup(hArray, EmulatedArray.class, "hArray");
        if (a.owner != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hArray is a level of a mipmapped array: it goes with cuMipmappedArrayDestroy");
        }
        if (handles.remove(hArray, a)) {
            a.context.owned.remove(hArray);
            deviceMemory.release(a.reservation);
        }
    }

    /** cuArrayGetDescriptor: the 2D form (a 3D array's depth and flags are not part of it). */
    ArrayDescriptor descriptor(long hArray) {
        return contexts.lookup(hArray, EmulatedArray.class, "hArray").descriptor.flat();
    }

    Array3DDescriptor descriptor3D(long hArray) {
        return contexts.lookup(hArray, EmulatedArray.class, "hArray").descriptor;
    }

    /** A live array of context {@code c}. */
    EmulatedArray of(EmulatedContext c, long hArray, String what) {
        EmulatedArray a = contexts.lookup(hArray, EmulatedArray.class, what);
        if (a.context != c) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, what + " belongs to another context than the current one");
        }
        return a;
    }
}
