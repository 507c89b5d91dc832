package io.gpusockets.cli.workloads;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import org.HdrHistogram.Histogram;

/**
 * The cost of the cheapest call: {@code count} cuCtxGetDevice calls, each timed with System.nanoTime
 * into an HdrHistogram, after as many untimed warm-up calls (up to 1000). Needs a current context.
 */
public final class NullCalls {
    public static final int DEFAULT_COUNT = 10_000;
    private static final int MAX_WARMUP = 1_000;

    private NullCalls() {
    }

    public record Result(int count, int failures, int firstFailure, int device, double p50Micros, double p99Micros,
                         double maxMicros, long driverNanos) implements WorkloadResult {
        @Override
        public boolean passed() {
            return failures == 0;
        }

        @Override
        public String summary() {
            String s = String.format("%d x cuCtxGetDevice: p50 %.2f us, p99 %.2f us, max %.1f us", count, p50Micros,
                    p99Micros, maxMicros);
            return failures == 0 ? s : s + "; " + failures + " failed, first with " + CuResult.name(firstFailure);
        }

        /** The device the current context is on (timings differ between runs by nature). */
        @Override
        public byte[] comparableOutput() {
            return ByteBuffer.allocate(Integer.BYTES).putInt(device).array();
        }
    }

    public static Result run(CudaDriver cu, int count) {
        Histogram histogram = new Histogram(3);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment device = arena.allocate(JAVA_INT);
            for (int i = 0, warmup = Math.min(count, MAX_WARMUP); i < warmup; i++) {
                cu.cuCtxGetDevice(device);
            }
            int failures = 0;
            int firstFailure = CuResult.CUDA_SUCCESS;
            long start = System.nanoTime();
            for (int i = 0; i < count; i++) {
                long t0 = System.nanoTime();
                int r = cu.cuCtxGetDevice(device);
                long t1 = System.nanoTime();
                histogram.recordValue(Math.max(0, t1 - t0));
                if (r != CuResult.CUDA_SUCCESS && failures++ == 0) {
                    firstFailure = r;
                }
            }
            long nanos = System.nanoTime() - start;
            return new Result(count, failures, firstFailure, device.get(JAVA_INT, 0),
                    histogram.getValueAtPercentile(50) / 1e3, histogram.getValueAtPercentile(99) / 1e3,
                    histogram.getMaxValue() / 1e3, nanos);
        }
    }
}
