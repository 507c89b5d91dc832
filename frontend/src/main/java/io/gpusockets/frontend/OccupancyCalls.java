package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Area {@code occupancy}: cuOccupancyMaxPotentialBlockSize(WithFlags). Without a
 * {@code blockSizeToDynamicSMemSize} callback the backend's driver answers. With one, the callback is
 * a function of the guest program and must run here: the frontend then runs the driver's search
 * itself, as CUDA documents it (cuda_occupancy.h, cudaOccMaxPotentialOccupancyBlockSize): from the
 * largest block size the device, the function and {@code blockSizeLimit} allow, down by a warp at
 * a time, it asks the callback for the dynamic shared memory, asks the backend for that block
 * size's occupancy (cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags: the driver's own
 * calculator, so no model of the GPU lives here), keeps the block size with the most resident
 * threads (the larger on a tie) and stops early once a multiprocessor is full. The answer is then
 * the driver's for every candidate it tries, at the cost of one round trip per candidate (at most
 * 32 for 1024-thread blocks) and four attribute queries.
 */
final class OccupancyCalls implements FrontendHandlers.Occupancy {
    static final int FUNC_MAX_THREADS_PER_BLOCK = 0;
    static final int DEV_MAX_THREADS_PER_BLOCK = 1;
    static final int DEV_WARP_SIZE = 10;
    static final int DEV_MULTIPROCESSOR_COUNT = 16;
    static final int DEV_MAX_THREADS_PER_MULTIPROCESSOR = 39;
    private static final FunctionDescriptor CALLBACK = FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT);

    private final RemoteCudaDriver driver;

    OccupancyCalls(RemoteCudaDriver driver) {
        this.driver = driver;
    }

    @Override
    public int cuOccupancyMaxPotentialBlockSize(MemorySegment minGridSize, MemorySegment blockSize, long func,
                                                MemorySegment blockSizeToDynamicSMemSize, long dynamicSMemSize,
                                                int blockSizeLimit) {
        if (isNull(blockSizeToDynamicSMemSize)) {
            return driver.call(ApiEntries.cuOccupancyMaxPotentialBlockSize, minGridSize, blockSize, func,
                    MemorySegment.NULL, dynamicSMemSize, blockSizeLimit);
        }
        return search(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, blockSizeLimit, 0);
    }

    @Override
    public int cuOccupancyMaxPotentialBlockSizeWithFlags(MemorySegment minGridSize, MemorySegment blockSize, long func,
                                                         MemorySegment blockSizeToDynamicSMemSize, long dynamicSMemSize,
                                                         int blockSizeLimit, int flags) {
        if (isNull(blockSizeToDynamicSMemSize)) {
            return driver.call(ApiEntries.cuOccupancyMaxPotentialBlockSizeWithFlags, minGridSize, blockSize, func,
                    MemorySegment.NULL, dynamicSMemSize, blockSizeLimit, flags);
        }
        return search(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, blockSizeLimit, flags);
    }

    private int search(MemorySegment minGridSize, MemorySegment blockSize, long func, MemorySegment callback,
                       int blockSizeLimit, int flags) {
        if (isNull(minGridSize) || isNull(blockSize)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MethodHandle smemFor = Linker.nativeLinker().downcallHandle(callback, CALLBACK);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment cell = arena.allocate(8);
            int r = driver.cuCtxGetDevice(cell);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            int dev = cell.get(ValueLayout.JAVA_INT, 0);
            int[] values = new int[4];
            int[] attributes = {DEV_MAX_THREADS_PER_BLOCK, DEV_WARP_SIZE, DEV_MULTIPROCESSOR_COUNT, DEV_MAX_THREADS_PER_MULTIPROCESSOR};
            for (int i = 0; i < attributes.length; i++) {
                r = driver.cuDeviceGetAttribute(cell, attributes[i], dev);
                if (r != CuResult.CUDA_SUCCESS) {
                    return r;
                }
                values[i] = cell.get(ValueLayout.JAVA_INT, 0);
            }
            r = driver.cuFuncGetAttribute(cell, FUNC_MAX_THREADS_PER_BLOCK, func);
            if (r == CuResult.CUDA_ERROR_INVALID_HANDLE) {
                // a CUkernel: the driver answers its attributes through cuKernelGetAttribute only (seen on the H200)
                r = driver.cuKernelGetAttribute(cell, FUNC_MAX_THREADS_PER_BLOCK, func, dev);
            }
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            int limit = Math.min(values[0], cell.get(ValueLayout.JAVA_INT, 0));
            if (blockSizeLimit > 0) {
                limit = Math.min(limit, blockSizeLimit);
            }
            int granularity = Math.max(1, values[1]);
            int occupancyLimit = values[3];
            int best = 0, bestBlocks = 0, bestThreads = 0;
            int aligned = (limit + granularity - 1) / granularity * granularity;
            for (int tryAligned = aligned; tryAligned > 0; tryAligned -= granularity) {
                int size = Math.min(limit, tryAligned);
                long smem = (long) smemFor.invokeExact(size);
                r = driver.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(cell, func, size, smem, flags);
                if (r != CuResult.CUDA_SUCCESS) {
                    return r;
                }
                int blocks = cell.get(ValueLayout.JAVA_INT, 0);
                if (size * blocks > bestThreads) {
                    best = size;
                    bestBlocks = blocks;
                    bestThreads = size * blocks;
                }
                if (bestThreads == occupancyLimit) {
                    break;
                }
            }
            WireValues.sized(minGridSize, 4).set(ValueLayout.JAVA_INT, 0, bestBlocks * values[2]);
            WireValues.sized(blockSize, 4).set(ValueLayout.JAVA_INT, 0, best);
            return CuResult.CUDA_SUCCESS;
        } catch (Throwable t) {
            return CuResult.CUDA_ERROR_UNKNOWN;   // the callback cannot throw into Java; the downcall's linkage could
        }
    }

    private static boolean isNull(MemorySegment s) {
        return s.isNative() && s.address() == 0;
    }
}
