package io.gpusockets.emulated;

/**
 * cuOccupancyMaxActiveBlocksPerMultiprocessor for the emulated device: the smallest of the limits an
 * SM 9.0 multiprocessor imposes (resident threads, resident blocks, registers at
 * {@link EmulatedFunction#REGISTERS} per thread, shared memory), each counted in whole warps as the
 * hardware allocates them. Good enough for programs that size grids from it; not a timing model.
 */
final class Occupancy {
    private Occupancy() {
    }

    static int blocksPerMultiprocessor(int maxThreadsPerBlock, int blockSize, long dynamicSharedBytes) {
        if (blockSize > maxThreadsPerBlock || dynamicSharedBytes < 0
                || dynamicSharedBytes > DeviceProperties.SHARED_MEMORY_PER_BLOCK_OPTIN) {
            return 0;
        }
        int warps = (blockSize + DeviceProperties.WARP_SIZE - 1) / DeviceProperties.WARP_SIZE;
        int threadsPerBlock = warps * DeviceProperties.WARP_SIZE;
        int byThreads = DeviceProperties.MAX_THREADS_PER_MULTIPROCESSOR / threadsPerBlock;
        int byRegisters = DeviceProperties.REGISTERS_PER_MULTIPROCESSOR / (EmulatedFunction.REGISTERS * threadsPerBlock);
        long sharedPerBlock = dynamicSharedBytes + DeviceProperties.RESERVED_SHARED_MEMORY_PER_BLOCK;
        long byShared = DeviceProperties.SHARED_MEMORY_PER_MULTIPROCESSOR / sharedPerBlock;
        return (int) Math.min(Math.min(byThreads, byRegisters), Math.min(byShared, DeviceProperties.MAX_BLOCKS_PER_MULTIPROCESSOR));
    }
}
