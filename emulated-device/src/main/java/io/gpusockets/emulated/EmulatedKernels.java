package io.gpusockets.emulated;

import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;

/**
 * The kernels of {@code gpusockets_kernels.cu}, written in Java and found by entry name. Each keeps
 * the CUDA code's exact semantics, including what the launch geometry does to it: only indices below
 * both gridDim.x*blockDim.x and n are computed, block_sum reduces in the same tree order as the GPU
 * (so float sums are bit-identical) and needs blockDim.x floats of dynamic shared memory, saxpy uses
 * a fused multiply-add as the PTX does. A whole launch runs on its stream's thread; thread and block
 * indices are loops, not threads.
 */
final class EmulatedKernels {
    /** A kernel body; it throws {@link KernelFault} for a bad access. */
    @FunctionalInterface
    interface Body {
        void run(KernelLaunch launch);
    }

    /** A Java kernel and the parameter sizes it expects, checked against the PTX entry before launch. */
    record Kernel(String name, long[] paramSizes, Body body) {
        /** Why {@code entry} cannot run on this kernel, or null if its parameters match. */
        String mismatch(PtxModule.Entry entry) {
            long[] actual = entry.params().stream().mapToLong(PtxModule.Param::size).toArray();
            return Arrays.equals(actual, paramSizes) ? null
                    : "kernel " + name + " has parameter sizes " + Arrays.toString(actual) + " in the PTX, the emulated one "
                    + Arrays.toString(paramSizes);
        }
    }

    private static final ValueLayout.OfFloat F32 = HostSegments.FLOAT;
    private static final ValueLayout.OfInt U32 = HostSegments.INT;
    /** gpus_mixed12 writes parameter k (k = 0..10) into its own 16-byte slot of {@code out}. */
    private static final int MIXED_SLOT = 16;
    private static final int MIXED_OUT_BYTES = 176;

    private static final Map<String, Kernel> KERNELS = Map.of(
            "gpus_vector_add", new Kernel("gpus_vector_add", new long[] {8, 8, 8, 4}, EmulatedKernels::vectorAdd),
            "gpus_saxpy", new Kernel("gpus_saxpy", new long[] {4, 8, 8, 4}, EmulatedKernels::saxpy),
            "gpus_fill_u32", new Kernel("gpus_fill_u32", new long[] {8, 4, 4}, EmulatedKernels::fillU32),
            "gpus_empty", new Kernel("gpus_empty", new long[] {}, launch -> { }),
            "gpus_sleep", new Kernel("gpus_sleep", new long[] {8}, EmulatedKernels::sleep),
            "gpus_block_sum", new Kernel("gpus_block_sum", new long[] {8, 8, 4}, EmulatedKernels::blockSum),
            "gpus_mixed12", new Kernel("gpus_mixed12", new long[] {1, 2, 4, 8, 4, 8, 8, 16, 2, 4, 16, 8},
                    EmulatedKernels::mixed12));

    private EmulatedKernels() {
    }

    /** The Java kernel for a PTX entry name, or null. */
    static Kernel find(String name) {
        return KERNELS.get(name);
    }

    static Set<String> names() {
        return KERNELS.keySet();
    }

    /** Elements a 1-D "i = blockIdx.x*blockDim.x + threadIdx.x; if (i < n)" kernel touches. */
    private static long covered(KernelLaunch l, long n) {
        return Math.min(n, l.gridX * l.blockX);
    }

    private static void vectorAdd(KernelLaunch l) {
        long count = covered(l, l.u32(3));
        if (count == 0) {
            return;
        }
        MemorySegment a = l.global(l.u64(0), 4 * count, 4);
        MemorySegment b = l.global(l.u64(1), 4 * count, 4);
        MemorySegment c = l.global(l.u64(2), 4 * count, 4);
        for (long i = 0; i < 4 * count; i += 4) {
            c.set(F32, i, a.get(F32, i) + b.get(F32, i));
        }
    }

    private static void saxpy(KernelLaunch l) {
        float alpha = l.f32(0);
        long count = covered(l, l.u32(3));
        if (count == 0) {
            return;
        }
        MemorySegment x = l.global(l.u64(1), 4 * count, 4);
        MemorySegment y = l.global(l.u64(2), 4 * count, 4);
        for (long i = 0; i < 4 * count; i += 4) {
            y.set(F32, i, Math.fma(x.get(F32, i), alpha, y.get(F32, i)));   // fma.rn.f32, as compiled
        }
    }

    private static void fillU32(KernelLaunch l) {
        int value = (int) l.u32(1);
        long count = covered(l, l.u32(2));
        if (count == 0) {
            return;
        }
        MemorySegment p = l.global(l.u64(0), 4 * count, 4);
        for (long i = 0; i < 4 * count; i += 4) {
            p.set(U32, i, value);
        }
    }

    /** Waits about {@code nanoseconds} once per launch: all its threads would spin side by side on a GPU. */
    private static void sleep(KernelLaunch l) {
        long nanos = l.u64(0);
        long duration = nanos < 0 ? Long.MAX_VALUE : nanos;   // unsigned long long: huge means "forever"
        long start = System.nanoTime();
        long elapsed;
        while ((elapsed = System.nanoTime() - start) < duration && !l.cancelled()) {
            LockSupport.parkNanos(Math.min(duration - elapsed, 1_000_000L));
        }
    }

    private static void blockSum(KernelLaunch l) {
        long n = l.u32(2);
        int blockDim = l.blockX;
        if (l.sharedMemBytes < 4L * blockDim) {
            throw new KernelFault(CuResult.CUDA_ERROR_ILLEGAL_ADDRESS,
                    "gpus_block_sum writes blockDim.x=" + blockDim + " floats of dynamic shared memory; sharedMemBytes="
                    + l.sharedMemBytes);
        }
        long read = covered(l, n);
        MemorySegment in = read == 0 ? null : l.global(l.u64(0), 4 * read, 4);
        MemorySegment out = l.global(l.u64(1), 4 * l.gridX, 4);
        float[] partial = new float[blockDim];
        for (long block = 0; block < l.gridX; block++) {
            for (int t = 0; t < blockDim; t++) {
                long i = (block * blockDim + t) & 0xFFFF_FFFFL;   // unsigned int index arithmetic
                partial[t] = i < n ? in.get(F32, 4 * i) : 0.0f;
            }
            for (int s = blockDim / 2; s > 0; s >>= 1) {
                for (int t = 0; t < s; t++) {
                    partial[t] += partial[t + s];
                }
            }
            out.set(F32, 4 * block, partial[0]);
        }
    }

    private static void mixed12(KernelLaunch l) {
        MemorySegment out = l.global(l.u64(11), MIXED_OUT_BYTES, 1);
        out.fill((byte) 0);
        for (int k = 0; k <= 10; k++) {
            MemorySegment value = l.bytes(k);
            MemorySegment.copy(value, 0, out, (long) MIXED_SLOT * k, value.byteSize());
        }
    }
}
