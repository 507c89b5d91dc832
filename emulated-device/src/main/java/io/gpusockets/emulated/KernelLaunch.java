package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;

import java.lang.foreign.MemorySegment;

/**
 * One launch as a Java kernel sees it: the grid and block dimensions, its own copy of the parameter
 * bytes (taken at cuLaunchKernel, so the caller may reuse its buffers at once), and the launching
 * context's memory, where every access must fall inside one allocation or the kernel faults.
 */
final class KernelLaunch {
    final long gridX;
    final long gridY;
    final long gridZ;
    final int blockX;
    final int blockY;
    final int blockZ;
    final long sharedMemBytes;
    private final PtxModule.Entry entry;
    private final MemorySegment params;
    private final EmulatedContext context;
    private final EmulatedMemory memory;

    private KernelLaunch(long[] grid, int[] block, long sharedMemBytes, PtxModule.Entry entry, MemorySegment params,
                         EmulatedContext context, EmulatedMemory memory) {
        this.gridX = grid[0];
        this.gridY = grid[1];
        this.gridZ = grid[2];
        this.blockX = block[0];
        this.blockY = block[1];
        this.blockZ = block[2];
        this.sharedMemBytes = sharedMemBytes;
        this.entry = entry;
        this.params = params;
        this.context = context;
        this.memory = memory;
    }

    /**
     * Checks the dimensions against the device limits (CUresult arguments are C unsigned ints) and
     * copies the parameter bytes. {@code maxDynamicShared} is the function's current limit.
     */
    static KernelLaunch prepare(int gx, int gy, int gz, int bx, int by, int bz, int shared, long maxDynamicShared,
                                PtxModule.Entry entry, MemorySegment kernelParams, MemorySegment extra,
                                EmulatedContext context, EmulatedMemory memory) {
        long[] grid = {Integer.toUnsignedLong(gx), Integer.toUnsignedLong(gy), Integer.toUnsignedLong(gz)};
        long[] block = {Integer.toUnsignedLong(bx), Integer.toUnsignedLong(by), Integer.toUnsignedLong(bz)};
        long sharedBytes = Integer.toUnsignedLong(shared);
        check(grid[0] >= 1 && grid[0] <= DeviceProperties.MAX_GRID_DIM_X
                && grid[1] >= 1 && grid[1] <= DeviceProperties.MAX_GRID_DIM_YZ
                && grid[2] >= 1 && grid[2] <= DeviceProperties.MAX_GRID_DIM_YZ,
                "grid=(" + grid[0] + "," + grid[1] + "," + grid[2] + ") outside the device limits");
        check(block[0] >= 1 && block[0] <= DeviceProperties.MAX_BLOCK_DIM_X
                && block[1] >= 1 && block[1] <= DeviceProperties.MAX_BLOCK_DIM_Y
                && block[2] >= 1 && block[2] <= DeviceProperties.MAX_BLOCK_DIM_Z,
                "block=(" + block[0] + "," + block[1] + "," + block[2] + ") outside the device limits");
        long threads = block[0] * block[1] * block[2];
        check(threads <= entry.maxThreadsPerBlock(),
                "block of " + threads + " threads exceeds the kernel's limit of " + entry.maxThreadsPerBlock());
        check(sharedBytes <= maxDynamicShared,
                "sharedMemBytes=" + sharedBytes + " exceeds the function's limit of " + maxDynamicShared);
        MemorySegment params = LaunchParams.copy(entry, kernelParams, extra);
        return new KernelLaunch(grid, new int[] {(int) block[0], (int) block[1], (int) block[2]}, sharedBytes, entry, params,
                context, memory);
    }

    private static void check(boolean ok, String detail) {
        if (!ok) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, detail);
        }
    }

    String kernelName() {
        return entry.name();
    }

    long u64(int param) {
        return params.get(HostSegments.LONG, entry.params().get(param).offset());
    }

    /** A C {@code unsigned int} parameter, widened without sign. */
    long u32(int param) {
        return Integer.toUnsignedLong(params.get(HostSegments.INT, entry.params().get(param).offset()));
    }

    float f32(int param) {
        return params.get(HostSegments.FLOAT, entry.params().get(param).offset());
    }

    /** The raw bytes of a parameter (a struct or vector passed by value). */
    MemorySegment bytes(int param) {
        PtxModule.Param p = entry.params().get(param);
        return params.asSlice(p.offset(), p.size());
    }

    /** Device memory [address, address+bytes) of the launching context, or a fault. */
    MemorySegment global(long address, long bytes, long alignment) {
        if (address % alignment != 0) {
            throw KernelFault.misaligned(address, alignment);
        }
        MemorySegment m = memory.resolve(context, address, bytes);
        if (m == null) {
            throw KernelFault.illegalAddress(address, bytes);
        }
        return m;
    }

    /** The launch's own copy of the parameter buffer. */
    MemorySegment paramBuffer() {
        return params;
    }

    EmulatedContext context() {
        return context;
    }

    EmulatedMemory memory() {
        return memory;
    }

    /** True once the context is being destroyed: long-running kernels stop early. */
    boolean cancelled() {
        return context.destroyed();
    }
}
