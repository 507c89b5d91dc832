package io.gpusockets.cli.workloads;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;

import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;

/**
 * gpus_vector_add over {@code n} random floats: HtoD a and b, launch, DtoH c, and compare c with
 * a + b computed in Java. The comparison is exact (bit for bit): a single IEEE binary32 addition
 * rounds the same way in Java and on the GPU (add.f32 rounds to nearest even).
 */
public final class VectorAdd {
    public static final int DEFAULT_N = 1 << 20;
    static final int BLOCK = 256;

    private VectorAdd() {
    }

    public record Result(int n, int mismatches, int firstMismatch, byte[] c, long driverNanos) implements WorkloadResult {
        @Override
        public boolean passed() {
            return mismatches == 0;
        }

        @Override
        public String summary() {
            return mismatches == 0
                    ? n + " elements equal a+b bit for bit"
                    : mismatches + " of " + n + " elements differ from a+b, first at index " + firstMismatch;
        }

        @Override
        public byte[] comparableOutput() {
            return c.clone();
        }
    }

    public static Result run(CudaDriver cu, Kernels kernels, int n, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        float[] a = new float[n];
        float[] b = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = (float) ((random.nextDouble() * 2 - 1) * 1000);
            b[i] = (float) ((random.nextDouble() * 2 - 1) * 1000);
        }
        long bytes = (long) n * Float.BYTES;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ha = arena.allocateFrom(JAVA_FLOAT, a);
            MemorySegment hb = arena.allocateFrom(JAVA_FLOAT, b);
            MemorySegment hc = arena.allocate(bytes, Float.BYTES);
            long t0 = System.nanoTime();
            try (DeviceBuffer da = DeviceBuffer.allocate(cu, bytes);
                 DeviceBuffer db = DeviceBuffer.allocate(cu, bytes);
                 DeviceBuffer dc = DeviceBuffer.allocate(cu, bytes)) {
                da.copyFrom(ha);
                db.copyFrom(hb);
                MemorySegment params = new KernelParams(arena)
                        .pointer(da.address()).pointer(db.address()).pointer(dc.address()).i32(n)
                        .build();
                kernels.launchAndSync(Kernels.VECTOR_ADD, (n + BLOCK - 1) / BLOCK, BLOCK, 0, params);
                dc.copyTo(hc);
            }
            long nanos = System.nanoTime() - t0;
            float[] c = hc.toArray(JAVA_FLOAT);
            int mismatches = 0;
            int first = -1;
            for (int i = 0; i < n; i++) {
                if (Float.floatToRawIntBits(c[i]) != Float.floatToRawIntBits(a[i] + b[i])) {
                    if (mismatches++ == 0) {
                        first = i;
                    }
                }
            }
            return new Result(n, mismatches, first, hc.toArray(JAVA_BYTE), nanos);
        }
    }
}
