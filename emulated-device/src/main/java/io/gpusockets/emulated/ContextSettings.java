package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_PERMITTED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_UNSUPPORTED_LIMIT;

import io.gpusockets.protocol.api.LimitFootprint;

/**
 * A context's resource limits (cuCtxGetLimit/cuCtxSetLimit) and preferred cache configuration.
 * Nothing in the emulated device is bounded by them; they are kept so that programs which set a
 * limit and read it back see what an H200 (compute capability 9.0, driver 580 / CUDA 13.0) answers:
 * the defaults, the rounding and clamping, and the error for each limit that cannot be set, all as
 * measured on that GPU.
 *
 * <p>In the footprint model the stack, printf FIFO and malloc heap reserve device memory by
 * {@link LimitFootprint}'s rule: the context's own reservation ({@link Contexts#CONTEXT_BYTES}) stands for
 * them at their defaults, and a limit set above its default reserves the difference (a reservation of the
 * context, taken before the limit changes: past the device's memory the call fails with
 * CUDA_ERROR_OUT_OF_MEMORY and the limit stays), given back when it is lowered or the context goes. A launch
 * of a kernel whose local memory per thread is more than the stack reservation grows the reservation to it
 * ({@link #growStack}), as the driver does (measured on an H100, driver 580): the growth stays until the stack
 * limit is set again, which reserves anew at the size set; the limit itself still reads what was set.
 */
final class ContextSettings {
    static final int STACK_SIZE = 0;
    static final int PRINTF_FIFO_SIZE = 1;
    static final int MALLOC_HEAP_SIZE = 2;
    static final int DEV_RUNTIME_SYNC_DEPTH = 3;
    static final int DEV_RUNTIME_PENDING_LAUNCH_COUNT = 4;
    static final int MAX_L2_FETCH_GRANULARITY = 5;
    static final int PERSISTING_L2_CACHE_SIZE = 6;
    static final int SHMEM_SIZE = 7;
    static final int CIG_ENABLED = 8;
    static final int CIG_SHMEM_FALLBACK_ENABLED = 9;
    /** CU_LIMIT_MAX: one past the last limit of cuda.h 13.0. */
    static final int LIMIT_COUNT = 10;

    /** Largest per-thread stack cc 9.0 accepts (512 KiB of local memory per thread). */
    static final long MAX_STACK_SIZE = 512 << 10;
    static final long MIN_PRINTF_FIFO_SIZE = 512 << 10;
    static final long MAX_PRINTF_FIFO_SIZE = 1L << 31;
    static final long MIN_MALLOC_HEAP_SIZE = 4 << 20;
    static final long MIN_PENDING_LAUNCH_COUNT = 32;
    static final long MAX_PENDING_LAUNCH_COUNT = 599186;
    static final long MAX_L2_FETCH_BYTES = 128;
    /** Persisting L2 is set aside in units of this many bytes (the H200 rounds every request up to one). */
    static final long PERSISTING_L2_GRANULE = 3932160;

    /** CU_FUNC_CACHE_PREFER_NONE .. CU_FUNC_CACHE_PREFER_EQUAL. */
    static final int MAX_CACHE_CONFIG = 3;

    private static final long[] DEFAULTS = {
        1024,                                        // stack size
        8650752,                                     // printf FIFO
        8 << 20,                                     // malloc heap
        -1,                                          // sync depth: unsupported on cc 9.0
        2048,                                        // pending launches
        64,                                          // L2 fetch granularity
        3 * PERSISTING_L2_GRANULE,                   // persisting L2
        DeviceProperties.SHARED_MEMORY_PER_BLOCK_OPTIN, // shared memory of a (non-CIG) context
        0,                                           // CIG enabled: no
        -1,                                          // CIG fallback: unsupported outside CIG contexts
    };
    private final long[] limits = DEFAULTS.clone();
    /** The per-thread stack reserved now: the stack limit, or what a launch grew it to since it was set. */
    private long stackReserved = DEFAULTS[STACK_SIZE];
    private int cacheConfig;
    /** By limit: what it reserves above its default, or null. */
    private final EmulatedMemory.Reservation[] reserved = new EmulatedMemory.Reservation[LIMIT_COUNT];
    /** Threads an H200 holds at once, which the stack limit reserves local memory for. */
    static final long RESIDENT_THREADS = LimitFootprint.residentThreads(DeviceProperties.MAX_THREADS_PER_MULTIPROCESSOR,
            DeviceProperties.MULTIPROCESSOR_COUNT);

    synchronized long limit(int limit) {
        checkKnown(limit);
        return limits[limit];
    }

    /**
     * Sets a limit as the driver would: rounded, clamped, or refused, with the device memory it reserves
     * above its default taken from {@code memory} for {@code owner} first.
     *
     * @param deviceMemory the device's memory; the malloc heap is clamped to an eighth of it
     */
    synchronized void setLimit(int limit, long value, long deviceMemory, EmulatedMemory memory, EmulatedContext owner) {
        long resolved = resolve(limit, value, deviceMemory);
        long above = LimitFootprint.bytes(limit, resolved, RESIDENT_THREADS) - LimitFootprint.bytes(limit, DEFAULTS[limit], RESIDENT_THREADS);
        EmulatedMemory.Reservation r = above > 0 ? memory.reserve(owner, above) : null;
        memory.release(reserved[limit]);
        reserved[limit] = r;
        limits[limit] = resolved;
        if (limit == STACK_SIZE) {
            stackReserved = resolved;
        }
    }

    /**
     * A launch of a kernel needing {@code perThread} bytes of stack a thread: when that is more than is reserved, the
     * reservation grows to it (rounded up to 1 KiB, as the backend's charge assumes) for every resident thread,
     * taken from {@code memory} for {@code owner}; past the device's memory the launch fails with
     * CUDA_ERROR_OUT_OF_MEMORY and nothing changes.
     */
    synchronized void growStack(long perThread, EmulatedMemory memory, EmulatedContext owner) {
        long need = (perThread + 1023) / 1024 * 1024;
        if (perThread <= 0 || need <= stackReserved) {
            return;
        }
        long above = LimitFootprint.bytes(STACK_SIZE, need, RESIDENT_THREADS)
                - LimitFootprint.bytes(STACK_SIZE, DEFAULTS[STACK_SIZE], RESIDENT_THREADS);
        EmulatedMemory.Reservation r = memory.reserve(owner, above);
        memory.release(reserved[STACK_SIZE]);
        reserved[STACK_SIZE] = r;
        stackReserved = need;
    }

    /** The value the driver would keep for {@code limit} set to {@code value}, or its error. */
    private long resolve(int limit, long value, long deviceMemory) {
        checkKnown(limit);
        return switch (limit) {
            case STACK_SIZE -> {
                if (value < 0 || value > MAX_STACK_SIZE) {
                    throw new CudaError(CUDA_ERROR_INVALID_VALUE, "stack size " + Long.toUnsignedString(value)
                            + " over " + MAX_STACK_SIZE + " bytes per thread");
                }
                yield (value + 15) & ~15L;
            }
            case PRINTF_FIFO_SIZE -> clamp(value, MIN_PRINTF_FIFO_SIZE, MAX_PRINTF_FIFO_SIZE);
            case MALLOC_HEAP_SIZE -> clamp(value, MIN_MALLOC_HEAP_SIZE, Math.max(MIN_MALLOC_HEAP_SIZE, deviceMemory / 8));
            case DEV_RUNTIME_PENDING_LAUNCH_COUNT -> clamp(value, MIN_PENDING_LAUNCH_COUNT, MAX_PENDING_LAUNCH_COUNT);
            case MAX_L2_FETCH_GRANULARITY -> {
                if (value < 0 || value > MAX_L2_FETCH_BYTES) {
                    throw new CudaError(CUDA_ERROR_INVALID_VALUE, "L2 fetch granularity " + Long.toUnsignedString(value)
                            + " outside 0.." + MAX_L2_FETCH_BYTES);
                }
                yield value;
            }
            case PERSISTING_L2_CACHE_SIZE -> {
                long max = DeviceProperties.MAX_PERSISTING_L2_CACHE_SIZE;
                if (value < 0 || value > max) {
                    throw new CudaError(CUDA_ERROR_INVALID_VALUE, "persisting L2 size " + Long.toUnsignedString(value)
                            + " over " + max);
                }
                yield (value + PERSISTING_L2_GRANULE - 1) / PERSISTING_L2_GRANULE * PERSISTING_L2_GRANULE;
            }
            case SHMEM_SIZE, CIG_ENABLED ->
                    throw new CudaError(CUDA_ERROR_NOT_PERMITTED, "limit " + limit + " can only be queried");
            default -> throw new AssertionError(limit);
        };
    }

    /** Unsigned: a size_t above Long.MAX_VALUE is simply large. */
    private static long clamp(long value, long min, long max) {
        if (Long.compareUnsigned(value, max) > 0) {
            return max;
        }
        return Math.max(value, min);
    }

    private void checkKnown(int limit) {
        if (limit < 0 || limit >= LIMIT_COUNT) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "limit=" + limit + " is no CUlimit");
        }
        if (limits[limit] < 0) {
            throw new CudaError(CUDA_ERROR_UNSUPPORTED_LIMIT, "limit " + limit + " is not supported on compute capability 9.0");
        }
    }

    synchronized int cacheConfig() {
        return cacheConfig;
    }

    synchronized void cacheConfig(int config) {
        if (config < 0 || config > MAX_CACHE_CONFIG) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "config=" + config + " is no CUfunc_cache");
        }
        cacheConfig = config;
    }
}
