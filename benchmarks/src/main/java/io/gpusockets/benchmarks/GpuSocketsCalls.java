package io.gpusockets.benchmarks;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.cli.workloads.Cu;
import io.gpusockets.cli.workloads.DeviceBuffer;
import io.gpusockets.cli.workloads.PrimaryContext;
import io.gpusockets.frontend.RemoteCudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/** The same questions asked through GPUsockets: a null call and 1 MiB copies, on one RemoteCudaDriver. */
public final class GpuSocketsCalls implements AutoCloseable {
    public static final long COPY_BYTES = 1L << 20;

    private final RemoteCudaDriver cu;
    private final PrimaryContext context;

    private GpuSocketsCalls(RemoteCudaDriver cu, PrimaryContext context) {
        this.cu = cu;
        this.context = context;
    }

    /** Connects, cuInit, and makes device 0's primary context current on the calling thread. */
    public static GpuSocketsCalls open(String uri) throws java.io.IOException {
        RemoteCudaDriver cu = RemoteCudaDriver.connect(uri);
        try {
            Cu.check(cu.cuInit(0), "cuInit(0)");
            return new GpuSocketsCalls(cu, PrimaryContext.retain(cu, 0));
        } catch (RuntimeException e) {
            cu.close();
            throw e;
        }
    }

    /** The driver, its primary context current on the thread that opened it. */
    public RemoteCudaDriver driver() {
        return cu;
    }

    /** cuCtxGetDevice round trips; any result but CUDA_SUCCESS fails the run. */
    public PingPong nullCalls() {
        return DriverBench.nullCalls(cu);
    }

    /** GB/s of HtoD then DtoH, {@code reps} 1 MiB copies each from pageable memory; the data is checked once. */
    public double[] copies(int warmup, int reps) {
        return copies(COPY_BYTES, warmup, reps);
    }

    /** GB/s of HtoD then DtoH, {@code reps} copies of {@code bytes} each from pageable memory; the data is checked once. */
    public double[] copies(long bytes, int warmup, int reps) {
        try (Arena arena = Arena.ofConfined(); DeviceBuffer dev = DeviceBuffer.allocate(cu, bytes)) {
            MemorySegment src = arena.allocate(bytes, 64);
            MemorySegment dst = arena.allocate(bytes, 64);
            for (long i = 0; i < bytes; i += Long.BYTES) {
                src.set(JAVA_LONG, i, i * 0x9E3779B97F4A7C15L);
            }
            for (int i = 0; i < warmup; i++) {
                dev.copyFrom(src);
                dev.copyTo(dst);
            }
            long t0 = System.nanoTime();
            for (int i = 0; i < reps; i++) {
                dev.copyFrom(src);
            }
            long t1 = System.nanoTime();
            for (int i = 0; i < reps; i++) {
                dev.copyTo(dst);
            }
            long t2 = System.nanoTime();
            long mismatch = src.mismatch(dst);
            if (mismatch >= 0) {
                throw new IllegalStateException("cuMemcpyDtoH returned different bytes: firstMismatch=" + mismatch);
            }
            return new double[] {(double) reps * bytes / (t1 - t0), (double) reps * bytes / (t2 - t1)};
        }
    }

    @Override
    public void close() {
        try {
            context.close();
        } finally {
            cu.close();
        }
    }
}
