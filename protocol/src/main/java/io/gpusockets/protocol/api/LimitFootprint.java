package io.gpusockets.protocol.api;

/**
 * The device memory a context's limit reserves (cuCtxSetLimit), written once: the backend charges a
 * tenant by it and the emulated device allocates by it.
 * <ul>
 *   <li>{@code CU_LIMIT_STACK_SIZE}: the per-thread stack times the threads the device can hold at once
 *       (maxThreadsPerMultiProcessor × multiProcessorCount: 2048 × 132 on an H200), since the driver
 *       reserves local memory for every thread that can be resident;</li>
 *   <li>{@code CU_LIMIT_PRINTF_FIFO_SIZE} and {@code CU_LIMIT_MALLOC_HEAP_SIZE}: the bytes;</li>
 *   <li>every other limit: nothing.</li>
 * </ul>
 * {@code scripts/gpu-pass-quota} records how the device's free memory moves with each limit at several values,
 * beside what the tenant was charged: on an H100 (driver 580) the stack takes exactly (size − 1 KiB) × 270336
 * threads over the default 1 KiB. A launch of a kernel whose local memory per thread is more than the stack
 * reservation grows it by the same rule, as if the stack were set to the kernel's need (the backend's
 * {@code LaunchStack} charges that; the emulated device grows its own the same way).
 */
public final class LimitFootprint {
    /** CUlimit values (cuda.h). */
    public static final int STACK_SIZE = 0;
    public static final int PRINTF_FIFO_SIZE = 1;
    public static final int MALLOC_HEAP_SIZE = 2;
    /** CUdevice_attribute values the stack rule reads. */
    public static final int ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
    public static final int ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39;

    private LimitFootprint() {
    }

    /** Whether setting {@code limit} reserves device memory. */
    public static boolean reservesMemory(int limit) {
        return limit == STACK_SIZE || limit == PRINTF_FIFO_SIZE || limit == MALLOC_HEAP_SIZE;
    }

    /**
     * Bytes of device memory {@code limit} at {@code value} (a size_t, so unsigned) reserves on a device
     * holding {@code residentThreads} threads at once; Long.MAX_VALUE when that overflows.
     */
    public static long bytes(int limit, long value, long residentThreads) {
        if (!reservesMemory(limit)) {
            return 0;
        }
        if (value < 0) {
            return Long.MAX_VALUE;   // above 2^63 bytes
        }
        if (limit != STACK_SIZE) {
            return value;
        }
        long threads = Math.max(residentThreads, 1);
        return Math.multiplyHigh(value, threads) != 0 || value * threads < 0 ? Long.MAX_VALUE : value * threads;
    }

    /** Threads a device holds at once, from its attributes. */
    public static long residentThreads(int maxThreadsPerMultiProcessor, int multiProcessorCount) {
        return (long) Math.max(maxThreadsPerMultiProcessor, 1) * Math.max(multiProcessorCount, 1);
    }
}
