package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;

import io.gpusockets.protocol.calls.LaunchConfigRequest;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Launches with options (issue 11): cuLaunchCooperativeKernel, cuLaunchKernelEx with its
 * CUlaunchConfig, and the occupancy calculator's other entries, from {@link Occupancy} and the
 * device's properties. A cluster is one CTA here (what the PTX engine runs), so the largest cluster
 * is 1 and a launch asking for more is CUDA_ERROR_NOT_SUPPORTED; a cooperative grid must fit on the
 * device at once, as on a GPU (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE).
 */
final class LaunchOptions {
    static final int CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720;
    /** CU_OCCUPANCY_DEFAULT and CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE. */
    static final int OCCUPANCY_FLAGS = 0x1;
    static final int ATTRIBUTE_IGNORE = 0;
    static final int ATTRIBUTE_COOPERATIVE = 2;
    static final int ATTRIBUTE_CLUSTER_DIMENSION = 4;
    private static final FunctionDescriptor SMEM_CALLBACK = FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT);

    private final Launcher launcher;

    LaunchOptions(Launcher launcher) {
        this.launcher = launcher;
    }

    void cooperative(long f, int gx, int gy, int gz, int bx, int by, int bz, int shared, long hStream, MemorySegment kernelParams) {
        checkFitsAtOnce(f, gx, gy, gz, bx, by, bz, shared);
        launcher.launch(f, gx, gy, gz, bx, by, bz, shared, hStream, kernelParams, MemorySegment.NULL);
    }

    /** The config's attributes: hints are accepted, cooperative checked, 1x1x1 clusters taken, anything else refused. */
    void launchEx(MemorySegment config, long f, MemorySegment kernelParams, MemorySegment extra) {
        Config c = Config.read(config);
        boolean cooperative = false;
        for (int i = 0; i < c.numAttrs; i++) {
            MemorySegment v = c.value(i);
            switch (c.id(i)) {
                case ATTRIBUTE_IGNORE, 3, 5, 6, 8, 9, 10, 11, 14, 16 -> {
                    // policies and hints: nothing to schedule differently on a CPU
                }
                case ATTRIBUTE_COOPERATIVE -> cooperative = v.get(HostSegments.INT, 0) != 0;
                case ATTRIBUTE_CLUSTER_DIMENSION -> {
                    if (clusterBlocks(v) != 1) {
                        throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "clusters of more than one block: a cluster is one CTA "
                                + "on the emulated device");
                    }
                }
                default -> throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "launch attribute " + c.id(i)
                        + " is not supported by the emulated device");
            }
        }
        if (cooperative) {
            checkFitsAtOnce(f, c.gx, c.gy, c.gz, c.bx, c.by, c.bz, c.shared);
        }
        launcher.launch(f, c.gx, c.gy, c.gz, c.bx, c.by, c.bz, c.shared, c.stream, kernelParams, extra);
    }

    int activeBlocks(long func, int blockSize, long dynamicSMemSize, int flags) {
        checkFlags(flags);
        return launcher.occupancy(func, blockSize, dynamicSMemSize);
    }

    /**
     * The driver's search (cuda_occupancy.h): from the largest allowed block size down by a warp, the
     * one with the most resident threads per multiprocessor; {@code [minGridSize, blockSize]}.
     */
    int[] potentialBlockSize(long func, MemorySegment callback, long dynamicSMemSize, int blockSizeLimit, int flags) {
        checkFlags(flags);
        MethodHandle smemFor = HostSegments.isNull(callback) ? null : Linker.nativeLinker().downcallHandle(callback, SMEM_CALLBACK);
        int limit = Math.min(DeviceProperties.MAX_THREADS_PER_BLOCK, launcher.attribute(func, EmulatedFunction.MAX_THREADS_PER_BLOCK));
        if (blockSizeLimit > 0) {
            limit = Math.min(limit, blockSizeLimit);
        }
        int warp = DeviceProperties.WARP_SIZE;
        int best = 0, bestBlocks = 0, bestThreads = 0;
        for (int aligned = (limit + warp - 1) / warp * warp; aligned > 0; aligned -= warp) {
            int size = Math.min(limit, aligned);
            long smem = dynamicSMemSize;
            if (smemFor != null) {
                try {
                    smem = (long) smemFor.invokeExact(size);
                } catch (Throwable t) {
                    throw new CudaError(CUDA_ERROR_INVALID_VALUE, "blockSizeToDynamicSMemSize failed: " + t);
                }
            }
            int blocks = launcher.occupancy(func, size, smem);
            if (size * blocks > bestThreads) {
                best = size;
                bestBlocks = blocks;
                bestThreads = size * blocks;
            }
            if (bestThreads == DeviceProperties.MAX_THREADS_PER_MULTIPROCESSOR) {
                break;
            }
        }
        return new int[] {bestBlocks * DeviceProperties.MULTIPROCESSOR_COUNT, best};
    }

    /**
     * Dynamic shared memory per block with {@code numBlocks} blocks of {@code blockSize} resident on
     * one multiprocessor: its shared memory shared out, less each block's reserved part, within the
     * function's limit; 0 when that many blocks cannot be resident at all.
     */
    long availableDynamicShared(long func, int numBlocks, int blockSize) {
        if (numBlocks <= 0 || blockSize <= 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "numBlocks=" + numBlocks + " blockSize=" + blockSize);
        }
        if (launcher.occupancy(func, blockSize, 0) < numBlocks) {
            return 0;
        }
        long perBlock = DeviceProperties.SHARED_MEMORY_PER_MULTIPROCESSOR / numBlocks - DeviceProperties.RESERVED_SHARED_MEMORY_PER_BLOCK;
        return Math.max(0, Math.min(perBlock, launcher.function(func).maxDynamicShared()));
    }

    int maxClusterSize(long func, MemorySegment config) {
        launcher.function(func);
        Config.read(config);
        return 1;
    }

    /** Clusters of one block: as many as blocks fit on the device; a larger cluster size cannot run here (0). */
    int maxActiveClusters(long func, MemorySegment config) {
        Config c = Config.read(config);
        for (int i = 0; i < c.numAttrs; i++) {
            if (c.id(i) == ATTRIBUTE_CLUSTER_DIMENSION && clusterBlocks(c.value(i)) != 1) {
                return 0;
            }
        }
        return launcher.occupancy(func, c.bx * c.by * c.bz, c.shared) * DeviceProperties.MULTIPROCESSOR_COUNT;
    }

    private void checkFitsAtOnce(long f, int gx, int gy, int gz, int bx, int by, int bz, int shared) {
        launcher.refuseGridBarrier(f);
        long blocks = (long) gx * gy * gz;
        long resident = (long) launcher.occupancy(f, bx * by * bz, shared) * DeviceProperties.MULTIPROCESSOR_COUNT;
        if (blocks > resident) {
            throw new CudaError(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, blocks + " blocks, at most " + resident
                    + " can be resident at once");
        }
    }

    private static long clusterBlocks(MemorySegment value) {
        return (long) value.get(HostSegments.INT, 0) * value.get(HostSegments.INT, 4) * value.get(HostSegments.INT, 8);
    }

    private static void checkFlags(int flags) {
        if ((flags & ~OCCUPANCY_FLAGS) != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "flags=0x" + Integer.toHexString(flags));
        }
    }

    /** A program's CUlaunchConfig (layout in {@link LaunchConfigRequest}). */
    private record Config(int gx, int gy, int gz, int bx, int by, int bz, int shared, long stream, MemorySegment attrs,
                          int numAttrs) {
        static Config read(MemorySegment config) {
            MemorySegment c = HostSegments.sized(config, LaunchConfigRequest.CONFIG_BYTES, "config");
            int n = c.get(HostSegments.INT, LaunchConfigRequest.NUM_ATTRS_OFFSET);
            MemorySegment attrs = c.get(ValueLayout.ADDRESS_UNALIGNED, LaunchConfigRequest.ATTRS_OFFSET);
            if (n < 0 || n > LaunchConfigRequest.MAX_ATTRIBUTES || (n > 0 && attrs.address() == 0)) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "numAttrs=" + n);
            }
            return new Config(c.get(HostSegments.INT, 0), c.get(HostSegments.INT, 4), c.get(HostSegments.INT, 8),
                    c.get(HostSegments.INT, 12), c.get(HostSegments.INT, 16), c.get(HostSegments.INT, 20),
                    c.get(HostSegments.INT, 24), c.get(HostSegments.LONG, LaunchConfigRequest.STREAM_OFFSET),
                    attrs.reinterpret((long) n * LaunchConfigRequest.ATTRIBUTE_BYTES), n);
        }

        int id(int i) {
            return attrs.get(HostSegments.INT, (long) i * LaunchConfigRequest.ATTRIBUTE_BYTES);
        }

        MemorySegment value(int i) {
            return attrs.asSlice((long) i * LaunchConfigRequest.ATTRIBUTE_BYTES + LaunchConfigRequest.VALUE_OFFSET,
                    LaunchConfigRequest.VALUE_BYTES);
        }
    }
}
