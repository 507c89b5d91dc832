package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_OUT_OF_MEMORY;

import io.gpusockets.protocol.structs.ArrayDescriptor;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * cuArrayCreate, cuArrayDestroy, cuArrayGetDescriptor: 1D and 2D arrays of the plain formats
 * (8/16/32-bit integers, half, float) with 1, 2 or 4 channels, sized within an H200's 2D texture
 * limits. Other formats (normalized, block-compressed, video) fail with CUDA_ERROR_NOT_SUPPORTED.
 * Array memory counts against the device's advertised memory (a reservation of its context), as on a GPU.
 */
final class CudaArrays {
    /** CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH / _HEIGHT of the device the emulator imitates. */
    static final long MAX_WIDTH = 131072;
    static final long MAX_HEIGHT = 65536;

    private final Handles handles;
    private final Contexts contexts;
    private final EmulatedMemory deviceMemory;

    CudaArrays(Handles handles, Contexts contexts, EmulatedMemory deviceMemory) {
        this.handles = handles;
        this.contexts = contexts;
        this.deviceMemory = deviceMemory;
    }

    long create(MemorySegment pAllocateArray) {
        EmulatedContext c = contexts.active();
        ArrayDescriptor d = ArrayDescriptor.read(HostSegments.sized(pAllocateArray, ArrayDescriptor.SIZE, "pAllocateArray"));
        int channels = d.numChannels();
        if (channels != 1 && channels != 2 && channels != 4) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "NumChannels=" + channels + " must be 1, 2 or 4");
        }
        int element = ArrayDescriptor.elementBytes(d.format(), channels);
        if (element < 0) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "Format=0x" + Integer.toHexString(d.format()) + " is not emulated");
        }
        if (d.width() <= 0 || d.width() > MAX_WIDTH || d.height() < 0 || d.height() > MAX_HEIGHT) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "Width=" + d.width() + " Height=" + d.height());
        }
        long bytes = d.width() * element * Math.max(d.height(), 1);
        EmulatedMemory.Reservation r = deviceMemory.reserve(c, bytes);
        MemorySegment memory;
        try {
            memory = Arena.ofAuto().allocate(bytes, 256);
        } catch (OutOfMemoryError e) {
            deviceMemory.release(r);
            throw new CudaError(CUDA_ERROR_OUT_OF_MEMORY, "host memory for an array of " + bytes + " bytes unavailable");
        }
        long h = handles.issue();
        handles.own(c, h, new EmulatedArray(h, c, d, element, memory, r));
        return h;
    }

    void destroy(long hArray) {
        EmulatedArray a = contexts.lookup(hArray, EmulatedArray.class, "hArray");
        if (handles.remove(hArray, a)) {
            a.context.owned.remove(hArray);
            deviceMemory.release(a.reservation);
        }
    }

    ArrayDescriptor descriptor(long hArray) {
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
