package io.gpusockets.frontend;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The launch configuration checks the driver makes before it queues a launch, made in the guest:
 * a pipelined launch gets no reply, so without them a block of 4096 threads would be refused only at
 * the next synchronizing call, where the driver (and cudart's cudaGetLastError right after the
 * launch, as CUDA programs check) reports it at once. The limits are the device's attributes
 * (threads per block, block and grid dimensions, opt-in shared memory per block), asked once of
 * device 0 (every device of one backend is the same GPU model here; a finer limit, e.g. a
 * function's own maximum of dynamic shared memory, is still checked by the driver, asynchronously).
 * Measured on the H200 (driver 580): these launches fail with CUDA_ERROR_INVALID_VALUE.
 */
final class LaunchLimits {
    /** cuda.h CUdevice_attribute values, in the order of {@link #limits}. */
    private static final int[] ATTRIBUTES = {
        1,  // MAX_THREADS_PER_BLOCK
        2, 3, 4,  // MAX_BLOCK_DIM_X, Y, Z
        5, 6, 7,  // MAX_GRID_DIM_X, Y, Z
        97, // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    };

    private final CudaDriver driver;
    /** The attributes, or null until asked; an empty array when they could not be asked (no checks then). */
    private volatile long[] limits;

    LaunchLimits(CudaDriver driver) {
        this.driver = driver;
    }

    /** CUDA_SUCCESS, or the error the driver gives this configuration at the launch. */
    int check(int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ, int sharedMemBytes) {
        long[] l = limits();
        if (l.length == 0) {
            return CuResult.CUDA_SUCCESS;
        }
        long bx = Integer.toUnsignedLong(blockX), by = Integer.toUnsignedLong(blockY), bz = Integer.toUnsignedLong(blockZ);
        long gx = Integer.toUnsignedLong(gridX), gy = Integer.toUnsignedLong(gridY), gz = Integer.toUnsignedLong(gridZ);
        boolean bad = bx == 0 || by == 0 || bz == 0 || gx == 0 || gy == 0 || gz == 0
                || bx > l[1] || by > l[2] || bz > l[3] || bx * by * bz > l[0]
                || gx > l[4] || gy > l[5] || gz > l[6]
                || Integer.toUnsignedLong(sharedMemBytes) > l[7];
        return bad ? CuResult.CUDA_ERROR_INVALID_VALUE : CuResult.CUDA_SUCCESS;
    }

    private long[] limits() {
        long[] l = limits;
        if (l == null) {
            l = new long[ATTRIBUTES.length];
            try (Arena a = Arena.ofConfined()) {
                MemorySegment v = a.allocate(4);
                for (int i = 0; i < ATTRIBUTES.length; i++) {
                    if (driver.cuDeviceGetAttribute(v, ATTRIBUTES[i], 0) != CuResult.CUDA_SUCCESS) {
                        l = new long[0];
                        break;
                    }
                    l[i] = Integer.toUnsignedLong(v.get(ValueLayout.JAVA_INT, 0));
                }
            }
            limits = l;
        }
        return l;
    }
}
