package io.gpusockets.emulated.ptx;

import java.lang.foreign.MemorySegment;

/**
 * Device memory as a running kernel sees it, supplied by the emulated device: the allocation that
 * holds an access, or the fault to throw (it becomes the context's sticky error).
 */
public interface GlobalMemory {
    /** Host memory of one allocation: device addresses [base, end) map to {@code host} from offset 0. */
    record Region(long base, long end, MemorySegment host) {
    }

    /** The allocation of the launching context holding [address, address+bytes); throws the fault if none. */
    Region region(long address, long bytes);

    /** The fault for an access outside the memory it may touch ({@code space} names it). */
    RuntimeException illegalAddress(String space, long address, long bytes);

    /** The fault for an access not aligned to its size. */
    RuntimeException misaligned(long address, long alignment);

    /**
     * The fault for a kernel that cannot go on (call depth or stack exceeded, a bad free): as on a
     * device, the launch fails with CUDA_ERROR_ILLEGAL_ADDRESS, the context's sticky error.
     */
    RuntimeException fault(String detail);

    /**
     * The fault for a device-side assert() that failed ({@code __assertfail}): as on a device, the
     * launch fails with CUDA_ERROR_ASSERT, the context's sticky error.
     */
    RuntimeException assertion(String detail);

    /**
     * The fault for a {@code trap} (or {@code brkpt}) a thread executed ({@code __trap()}): as on a device, the launch
     * fails with CUDA_ERROR_LAUNCH_FAILED, the context's sticky error.
     */
    RuntimeException trap(String detail);

    /**
     * The fault for an instruction this device does not emulate in the form a running kernel asks for (a tensor map's
     * mode): the launch fails with CUDA_ERROR_NOT_SUPPORTED, the context's sticky error, saying what.
     */
    default RuntimeException unsupported(String detail) {
        return fault("not supported: " + detail);
    }

    /** The device heap's malloc: a block of at least {@code size} bytes of device memory, or 0 when the heap is exhausted. */
    long malloc(long size);

    /** The device heap's free; false when {@code address} is not a block malloc returned (free(0) does nothing). */
    boolean free(long address);

    /**
     * cudaGraphSetConditional: sets the value of conditional handle {@code handle} of the launching
     * context; false when it is none of the context's (the kernel then faults).
     */
    default boolean setConditional(long handle, int value) {
        return false;
    }

    /** True once the context is being destroyed: a running kernel stops. */
    boolean cancelled();

    /** The launching context's texture and surface objects (tex, suld, sust); none by default. */
    default TextureUnit textures() {
        throw fault("texture and surface instructions need texture and surface objects, which this memory has none of");
    }
}
