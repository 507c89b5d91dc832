package io.gpusockets.benchmarks;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.cli.workloads.Cu;
import io.gpusockets.cli.workloads.DeviceBuffer;
import io.gpusockets.cli.workloads.Kernels;
import io.gpusockets.cli.workloads.PrimaryContext;
import io.gpusockets.cli.workloads.VectorAdd;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.HdrHistogram.Histogram;

/**
 * The issue-5 workloads on one {@link CudaDriver} (the real driver in-process, or a RemoteCudaDriver),
 * in the context current on the calling thread. Nothing here knows which it is talking to.
 */
final class DriverBench {
    static final String EMPTY_KERNEL = "gpus_empty";

    private DriverBench() {
    }

    /** A connection to a target: the driver and what closing it takes (nothing, in-process). */
    interface Client extends AutoCloseable {
        CudaDriver driver();

        @Override
        void close();
    }

    /** Opens one more client of a target (for the concurrent-clients workload). */
    interface Opener {
        Client open() throws Exception;
    }

    /** cuCtxGetDevice round trips, as a {@link PingPong} so that they interleave with the raw baseline. */
    static PingPong nullCalls(CudaDriver cu) {
        Arena arena = Arena.ofConfined();
        MemorySegment device = arena.allocate(JAVA_INT);
        return new PingPong() {
            @Override
            public void roundTrips(int n, Histogram into) {
                for (int i = 0; i < n; i++) {
                    long t0 = System.nanoTime();
                    int r = cu.cuCtxGetDevice(device);
                    long t1 = System.nanoTime();
                    if (r != CuResult.CUDA_SUCCESS) {
                        Cu.check(r, "cuCtxGetDevice");
                    }
                    if (into != null) {
                        into.recordValue(Math.max(0, t1 - t0));
                    }
                }
            }

            @Override
            public void close() {
                arena.close();
            }
        };
    }

    /** Measured rounds of {@link #asyncLaunches}: the median is reported, so one disturbed round does not decide. */
    static final int LAUNCH_ROUNDS = 3;

    /**
     * {@code warmup} async launches of gpus_empty (1×1) on the default stream and a cuCtxSynchronize, then
     * {@link #LAUNCH_ROUNDS} rounds of {@code n} launches each followed by one cuCtxSynchronize: the median
     * launches/s. The warm-up must be long enough for the JIT to compile the launch path on both sides
     * (tens of thousands of calls): a short one measures the interpreter.
     */
    static double asyncLaunches(CudaDriver cu, long function, int warmup, int n) {
        launchRate(cu, function, warmup);
        double[] rates = new double[LAUNCH_ROUNDS];
        for (int round = 0; round < rates.length; round++) {
            rates[round] = launchRate(cu, function, n);
        }
        return median(rates);
    }

    /**
     * Async launches natively and remotely in alternating rounds ({@code rounds} of {@code n} each way,
     * after {@code warmup} each way), so that both meet the same machine: on a shared host the rate
     * drifts by more than the difference measured minutes apart. Returns the median launches/s,
     * {native, remote}.
     */
    static double[] pairedLaunches(CudaDriver nativeCu, long nativeFunction, CudaDriver remoteCu, long remoteFunction,
                                   int warmup, int n, int rounds) {
        launchRate(nativeCu, nativeFunction, warmup);
        launchRate(remoteCu, remoteFunction, warmup);
        double[] nat = new double[rounds];
        double[] rem = new double[rounds];
        for (int round = 0; round < rounds; round++) {
            nat[round] = launchRate(nativeCu, nativeFunction, n);
            rem[round] = launchRate(remoteCu, remoteFunction, n);
        }
        return new double[] {median(nat), median(rem)};
    }

    /** {@code n} async launches of gpus_empty (1×1) on the default stream, then one cuCtxSynchronize: launches/s. */
    private static double launchRate(CudaDriver cu, long function, int n) {
        long t0 = System.nanoTime();
        launches(cu, function, n);
        Cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize after " + n + " launches");
        return n / ((System.nanoTime() - t0) / 1e9);
    }

    private static void launches(CudaDriver cu, long function, int n) {
        for (int i = 0; i < n; i++) {
            int r = cu.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, 0L, MemorySegment.NULL, MemorySegment.NULL);
            if (r != CuResult.CUDA_SUCCESS) {
                Cu.check(r, "cuLaunchKernel(" + EMPTY_KERNEL + ")");
            }
        }
    }

    /** One gpus_empty launch then cuCtxSynchronize, timed together. */
    static Histogram launchSync(CudaDriver cu, long function, int warmup, int n) {
        Histogram h = new Histogram(3);
        for (int i = 0; i < warmup + n; i++) {
            long t0 = System.nanoTime();
            int r = cu.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, 0L, MemorySegment.NULL, MemorySegment.NULL);
            int s = cu.cuCtxSynchronize();
            long t1 = System.nanoTime();
            Cu.check(r, "cuLaunchKernel(" + EMPTY_KERNEL + ")");
            Cu.check(s, "cuCtxSynchronize");
            if (i >= warmup) {
                h.recordValue(Math.max(0, t1 - t0));
            }
        }
        return h;
    }

    /**
     * Copy sizes: 8 B × 4^k below {@code max}, then {@code max} itself, plus 16 MiB (the size of DESIGN
     * §10's copy target, which the ×4 ladder steps over) when it lies below {@code max}.
     */
    static long[] copySizes(long max) {
        java.util.TreeSet<Long> sizes = new java.util.TreeSet<>();
        for (long s = 8; s < max; s *= 4) {
            sizes.add(s);
        }
        if (TARGET_COPY_BYTES < max) {
            sizes.add(TARGET_COPY_BYTES);
        }
        sizes.add(max);
        return sizes.stream().mapToLong(Long::longValue).toArray();
    }

    /** DESIGN §10's copy size. */
    static final long TARGET_COPY_BYTES = 16L << 20;

    /** How many copies of {@code bytes} to time: about {@code budget} bytes, at least 3, at most {@code maxReps}. */
    static int copyReps(long bytes, long budget, int maxReps) {
        return (int) Math.max(3, Math.min(maxReps, budget / bytes));
    }

    /** Per size, GB/s one way. */
    record CopyResult(long bytes, double htod, double dtoh) {
    }

    /**
     * cuMemcpyHtoD then cuMemcpyDtoH at each size, from pageable memory (an FFM arena) or from
     * cuMemAllocHost memory ({@code pinned}; through the frontend that is local host memory, not
     * page-locked). The bytes that come back are checked at each size.
     */
    static List<CopyResult> copies(CudaDriver cu, long[] sizes, boolean pinned, long budget, int maxReps) {
        long max = Arrays.stream(sizes).max().orElseThrow();
        List<CopyResult> out = new ArrayList<>();
        try (Arena arena = Arena.ofConfined(); DeviceBuffer dev = DeviceBuffer.allocate(cu, max)) {
            MemorySegment src = pinned ? allocHost(cu, arena, max) : arena.allocate(max, 64);
            MemorySegment dst = pinned ? allocHost(cu, arena, max) : arena.allocate(max, 64);
            try {
                for (long i = 0; i + Long.BYTES <= max; i += Long.BYTES) {
                    src.set(JAVA_LONG, i, i * 0x9E3779B97F4A7C15L);
                }
                for (long bytes : sizes) {
                    MemorySegment s = src.asSlice(0, bytes);
                    MemorySegment d = dst.asSlice(0, bytes);
                    int reps = copyReps(bytes, budget, maxReps);
                    int warm = Math.min(reps, 2);
                    for (int i = 0; i < warm; i++) {
                        dev.copyFrom(s);
                        dev.copyTo(d);
                    }
                    d.fill((byte) 0);
                    long t0 = System.nanoTime();
                    for (int i = 0; i < reps; i++) {
                        dev.copyFrom(s);
                    }
                    long t1 = System.nanoTime();
                    for (int i = 0; i < reps; i++) {
                        dev.copyTo(d);
                    }
                    long t2 = System.nanoTime();
                    long mismatch = s.mismatch(d);
                    if (mismatch >= 0) {
                        throw new IllegalStateException("cuMemcpyDtoH returned different bytes: bytes=" + bytes
                                + " firstMismatch=" + mismatch);
                    }
                    out.add(new CopyResult(bytes, (double) reps * bytes / (t1 - t0), (double) reps * bytes / (t2 - t1)));
                }
            } finally {
                if (pinned) {
                    Cu.check(cu.cuMemFreeHost(src), "cuMemFreeHost");
                    Cu.check(cu.cuMemFreeHost(dst), "cuMemFreeHost");
                }
            }
        }
        return out;
    }

    private static MemorySegment allocHost(CudaDriver cu, Arena arena, long bytes) {
        MemorySegment pp = arena.allocate(ADDRESS);
        Cu.check(cu.cuMemAllocHost(pp, bytes), "cuMemAllocHost(" + bytes + ")");
        return pp.get(ADDRESS, 0).reinterpret(bytes);
    }

    /** cuModuleLoadData of the shipped PTX then cuModuleUnload, {@code reps} times: ms per load. */
    static double[] moduleLoads(CudaDriver cu, int reps) {
        double[] ms = new double[reps];
        for (int i = 0; i < reps; i++) {
            long t0 = System.nanoTime();
            Kernels k = Kernels.load(cu);
            ms[i] = (System.nanoTime() - t0) / 1e6;
            k.close();
        }
        return ms;
    }

    /** The vector-add program of 1M floats (HtoD a, b; launch; DtoH c), {@code reps} times: ms each, checked. */
    static double[] vectorAdd(CudaDriver cu, Kernels kernels, int reps) {
        double[] ms = new double[reps];
        for (int i = 0; i < reps; i++) {
            VectorAdd.Result r = VectorAdd.run(cu, kernels, VectorAdd.DEFAULT_N, 42 + i);
            if (!r.passed()) {
                throw new IllegalStateException("vector add: " + r.summary());
            }
            ms[i] = r.driverNanos() / 1e6;
        }
        return ms;
    }

    /**
     * {@code n} clients, each on its own thread with its own connection (opened by {@code opener}), its
     * own primary context and module: after a barrier each launches gpus_empty {@code launches} times
     * asynchronously and synchronises. Returns the aggregate launches/s, from the barrier to the last
     * client's synchronise.
     */
    static double concurrentLaunches(Opener opener, int n, int warmup, int launches) throws Exception {
        CyclicBarrier ready = new CyclicBarrier(n + 1);
        CyclicBarrier done = new CyclicBarrier(n + 1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        for (int c = 0; c < n; c++) {
            threads.add(Thread.ofPlatform().name("bench-client-" + c).daemon().start(() -> {
                try (Client client = opener.open()) {
                    CudaDriver cu = client.driver();
                    try (PrimaryContext ctx = PrimaryContext.retain(cu, 0); Kernels k = Kernels.load(cu)) {
                        long f = k.function(EMPTY_KERNEL);
                        launches(cu, f, warmup);
                        Cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize");
                        ready.await();
                        launches(cu, f, launches);
                        Cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize");
                        done.await();
                    }
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                    // wakes the others and the timer, which then report the failure
                    ready.reset();
                    done.reset();
                }
            }));
        }
        try {
            ready.await(120, TimeUnit.SECONDS);
            long t0 = System.nanoTime();
            done.await(300, TimeUnit.SECONDS);
            long t1 = System.nanoTime();
            return (double) n * launches / ((t1 - t0) / 1e9);
        } catch (Exception e) {
            Throwable f = failure.get();
            if (f != null) {
                throw new IllegalStateException("a client failed: " + f, f);
            }
            throw e;
        } finally {
            for (Thread t : threads) {
                t.join(10_000);
            }
        }
    }

    static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }
}
