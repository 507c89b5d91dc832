package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_FOUND;

/**
 * cuMemAlloc and friends. Allocation, freeing and address-range queries see only the current
 * context's memory (as its kernels do); cuPointerGetAttribute answers for any emulated pointer, since
 * naming the owning context is its purpose.
 */
final class Allocations {
    /** Row pitch granularity of cuMemAllocPitch, as on current GPUs. */
    static final long PITCH_ALIGNMENT = 512;

    private final Contexts contexts;
    private final EmulatedMemory memory;

    Allocations(Contexts contexts, EmulatedMemory memory) {
        this.contexts = contexts;
        this.memory = memory;
    }

    /** Allocating and freeing are "potentially unsafe" during a capture (Captures). */
    long allocate(long bytes) {
        contexts.captures.checkUnsafe("cuMemAlloc");
        return memory.allocate(contexts.active(), bytes, Allocation.Kind.ALLOCATED).base();
    }

    /** Returns {base, pitch}. */
    long[] allocatePitch(long widthInBytes, long height, int elementSizeBytes) {
        EmulatedContext c = contexts.active();
        if (elementSizeBytes != 4 && elementSizeBytes != 8 && elementSizeBytes != 16) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "ElementSizeBytes=" + elementSizeBytes + " must be 4, 8 or 16");
        }
        if (widthInBytes <= 0 || height <= 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "WidthInBytes=" + widthInBytes + " Height=" + height);
        }
        long pitch = (widthInBytes + PITCH_ALIGNMENT - 1) / PITCH_ALIGNMENT * PITCH_ALIGNMENT;
        if (pitch <= 0 || height > Long.MAX_VALUE / pitch) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "WidthInBytes=" + widthInBytes + " Height=" + height + " overflow");
        }
        return new long[] {memory.allocate(c, pitch * height, Allocation.Kind.ALLOCATED).base(), pitch};
    }

    /**
     * Like the driver's cuMemFree (a synchronizing call), waits for the context's queued work, which may still use the
     * memory, and only then takes the memory out of the address space and frees it: work queued before the free
     * completes with it. (Unmapping first made that work fault, a sticky CUDA_ERROR_ILLEGAL_ADDRESS that the program's
     * next call returned.)
     */
    void free(long dptr) {
        EmulatedContext c = contexts.current();
        contexts.captures.checkUnsafe("cuMemFree");
        if (dptr == 0) {
            return;
        }
        Allocation a = memory.find(dptr);
        if (a == null || a.owner() != c || a.base() != dptr || a.kind() != Allocation.Kind.ALLOCATED) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE,
                    "dptr=0x" + Long.toHexString(dptr) + " is not the start of a live cuMemAlloc allocation of the current context");
        }
        c.allWork().join();
        if (!memory.unmap(a)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "dptr=0x" + Long.toHexString(dptr) + " was freed concurrently");
        }
        memory.release(a);
    }

    /** Returns {free, total} of the current context's device. */
    long[] info() {
        EmulatedContext c = contexts.current();
        return new long[] {memory.capacity() - memory.used(c.device), memory.capacity()};
    }

    Allocation range(long dptr) {
        EmulatedContext c = contexts.current();
        Allocation a = memory.find(dptr);
        if (a == null || a.owner() != c) {
            throw new CudaError(CUDA_ERROR_NOT_FOUND, "dptr=0x" + Long.toHexString(dptr) + " is in no allocation of the current context");
        }
        return a;
    }

    Allocation pointer(long ptr) {
        contexts.requireInit();
        Allocation a = memory.find(ptr);
        if (a == null) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "ptr=0x" + Long.toHexString(ptr) + " is no emulated device memory");
        }
        return a;
    }
}
