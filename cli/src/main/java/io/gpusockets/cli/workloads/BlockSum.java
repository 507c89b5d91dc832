package io.gpusockets.cli.workloads;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;

import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;

/**
 * gpus_block_sum with 256 threads per block and 256 floats of dynamic shared memory over {@code n}
 * random floats in [-1, 1); n is deliberately not a multiple of 256, so the last block sums padding.
 *
 * <p>Check: every block's sum must be within a relative 1e-3 of the exact result's scale (the sum of
 * the block's absolute values), which any correct summation order meets: float rounding over 256
 * terms costs at most about 256 * 2^-24 = 1.5e-5 of that scale, while one wrong or missing element
 * moves the sum by about 1/128 of it. The tolerance, not bit-exactness, is the pass criterion
 * because the kernel's contract is "the sum": an implementation that adds in another order (the
 * emulated device, a future kernel) is still correct. The result also counts the blocks that equal,
 * bit for bit, the same tree reduction done in Java in the kernel's order; on a real GPU that is
 * every block (float addition is deterministic and the kernel's order is fixed), and the GPU suite
 * compares the sums between native and remote runs bit for bit.
 */
public final class BlockSum {
    public static final int DEFAULT_N = (1 << 20) + 77;
    public static final int THREADS = 256;
    public static final double RELATIVE_TOLERANCE = 1e-3;

    private BlockSum() {
    }

    public record Result(int n, int blocks, int bitExactBlocks, double maxRelativeError, int worstBlock,
                         byte[] sums, long driverNanos) implements WorkloadResult {
        @Override
        public boolean passed() {
            return maxRelativeError <= RELATIVE_TOLERANCE;
        }

        @Override
        public String summary() {
            return String.format("%d blocks, %d bit-exact to the tree order, max rel. error %.2e%s", blocks,
                    bitExactBlocks, maxRelativeError, passed() ? "" : " at block " + worstBlock + " (limit 1e-3)");
        }

        @Override
        public byte[] comparableOutput() {
            return sums.clone();
        }
    }

    public static Result run(CudaDriver cu, Kernels kernels, int n, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        float[] in = new float[n];
        for (int i = 0; i < n; i++) {
            in[i] = (float) (random.nextDouble() * 2 - 1);
        }
        int blocks = (n + THREADS - 1) / THREADS;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment hin = arena.allocateFrom(JAVA_FLOAT, in);
            MemorySegment hout = arena.allocate((long) blocks * Float.BYTES, Float.BYTES);
            long t0 = System.nanoTime();
            try (DeviceBuffer din = DeviceBuffer.allocate(cu, hin.byteSize());
                 DeviceBuffer dout = DeviceBuffer.allocate(cu, hout.byteSize())) {
                din.copyFrom(hin);
                MemorySegment params = new KernelParams(arena).pointer(din.address()).pointer(dout.address()).i32(n).build();
                kernels.launchAndSync(Kernels.BLOCK_SUM, blocks, THREADS, THREADS * Float.BYTES, params);
                dout.copyTo(hout);
            }
            long nanos = System.nanoTime() - t0;
            float[] got = hout.toArray(JAVA_FLOAT);
            float[] partial = new float[THREADS];
            int exact = 0;
            double worst = 0;
            int worstBlock = -1;
            for (int b = 0; b < blocks; b++) {
                double scale = 0;
                for (int t = 0; t < THREADS; t++) {
                    int i = b * THREADS + t;
                    partial[t] = i < n ? in[i] : 0.0f;
                    scale += Math.abs(partial[t]);
                }
                float expected = treeSum(partial);
                if (Float.floatToRawIntBits(expected) == Float.floatToRawIntBits(got[b])) {
                    exact++;
                }
                double error = Math.abs((double) got[b] - expected) / Math.max(scale, Float.MIN_NORMAL);
                if (!(error <= worst)) { // also catches NaN
                    worst = Double.isNaN(error) ? Double.POSITIVE_INFINITY : error;
                    worstBlock = b;
                }
            }
            return new Result(n, blocks, exact, worst, worstBlock, hout.toArray(JAVA_BYTE), nanos);
        }
    }

    /** The kernel's reduction, step for step: partial[t] += partial[t + s] for s = 128, 64, ..., 1. Destroys {@code partial}. */
    static float treeSum(float[] partial) {
        for (int s = partial.length / 2; s > 0; s >>= 1) {
            for (int t = 0; t < s; t++) {
                partial[t] += partial[t + s];
            }
        }
        return partial[0];
    }
}
