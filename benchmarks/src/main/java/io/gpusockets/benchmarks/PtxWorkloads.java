package io.gpusockets.benchmarks;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.SplittableRandom;
import java.util.stream.IntStream;

/**
 * The kernels of {@code scripts/bench emulated-ptx} ({@link PtxBench}): CUDA C that nvcc compiles to PTX at
 * run time, each with its inputs, launch shape and CPU reference. The kernel names avoid those of the
 * shipped kernels gpus_sleep and gpus_empty, which the emulated device runs as Java code instead of their PTX.
 */
final class PtxWorkloads {
    private PtxWorkloads() {
    }

    /** One translation unit for every workload (nvcc -arch=sm_90 -ptx). */
    static final String SOURCE = """
            extern "C" __global__ void ptxbench_vadd(const float* a, const float* b, float* c, int n) {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) c[i] = a[i] + b[i];
            }

            #define T 16
            extern "C" __global__ void ptxbench_sgemm(const float* A, const float* B, float* C, int n) {
                __shared__ float As[T][T];
                __shared__ float Bs[T][T];
                int tx = threadIdx.x, ty = threadIdx.y;
                int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
                float acc = 0.f;
                for (int t = 0; t < n / T; t++) {
                    As[ty][tx] = A[row * n + t * T + tx];
                    Bs[ty][tx] = B[(t * T + ty) * n + col];
                    __syncthreads();
                    for (int k = 0; k < T; k++) acc += As[ty][k] * Bs[k][tx];
                    __syncthreads();
                }
                C[row * n + col] = acc;
            }

            extern "C" __global__ void ptxbench_reduce(const float* in, float* out, int n) {
                float v = 0.f;
                for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v += in[i];
                for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
                __shared__ float warpSums[32];
                int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
                if (lane == 0) warpSums[warp] = v;
                __syncthreads();
                if (warp == 0) {
                    v = lane < blockDim.x / 32 ? warpSums[lane] : 0.f;
                    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
                    if (lane == 0) atomicAdd(out, v);
                }
            }

            extern "C" __global__ void ptxbench_histogram(const unsigned char* in, unsigned int* bins, int n) {
                __shared__ unsigned int s[256];
                for (int i = threadIdx.x; i < 256; i += blockDim.x) s[i] = 0;
                __syncthreads();
                for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
                    atomicAdd(&s[in[i]], 1u);
                }
                __syncthreads();
                for (int i = threadIdx.x; i < 256; i += blockDim.x) atomicAdd(&bins[i], s[i]);
            }

            // A real call (call.uni with .param passing), not inlined.
            __device__ __noinline__ float ptxbench_poly(float x, float a, float b) {
                return (a * x + b) * x + 1.0f;
            }
            extern "C" __global__ void ptxbench_call(const float* x, float* y, float a, float b, int n) {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) y[i] = ptxbench_poly(x[i], a, b);
            }
            """;

    /** Sizes of one run: full (the issue's) or {@code --quick}. */
    record Sizes(int vectorN, int sgemmN, int reduceN, int histogramN, int callN) {
        static final Sizes FULL = new Sizes(1 << 20, 1024, 1 << 24, 1 << 24, 1 << 20);
        static final Sizes QUICK = new Sizes(1 << 18, 256, 1 << 20, 1 << 20, 1 << 18);
    }

    /** What a launch needs: the kernel's name, grid and block, and its arguments (Long, Integer, Float). */
    record Launch(String kernel, int[] grid, int[] block, Object... args) {
    }

    /**
     * One workload on one device: inputs uploaded by {@link #prepare}, then any number of launches, each
     * preceded by {@link #reset} (outside the timing) and followed by {@link #check}.
     */
    interface Workload {
        /** The name in results.csv, with its size (e.g. {@code vector-add-1M}). */
        String name();

        /** What it computes, for the progress lines and summary.md. */
        String description();

        /** The target for its full size on a 2-core machine, ms per launch; NaN where there is none. */
        double targetMs();

        /** Allocates and uploads the inputs; returns the launch. */
        Launch prepare(PtxDevice d);

        /** Clears the outputs before a launch. */
        void reset(PtxDevice d);

        /** Downloads the outputs and compares them with the CPU reference; null if right, else what is wrong. */
        String check(PtxDevice d);

        /** Frees the device memory. */
        void free(PtxDevice d);
    }

    static List<Workload> all(Sizes s, long seed) {
        List<Workload> w = new ArrayList<>();
        w.add(new VectorAdd(s.vectorN(), seed));
        w.add(new Sgemm(s.sgemmN(), seed + 1));
        w.add(new Reduce(s.reduceN(), seed + 2));
        w.add(new Histogram(s.histogramN(), seed + 3));
        w.add(new DeviceCall(s.callN(), seed + 4));
        return w;
    }

    static String count(long n) {
        if (n >= 1 << 20 && n % (1 << 20) == 0) {
            return (n >> 20) + "M";
        }
        if (n >= 1 << 10 && n % (1 << 10) == 0) {
            return (n >> 10) + "K";
        }
        return Long.toString(n);
    }

    static float[] randomFloats(int n, long seed, float lo, float hi) {
        SplittableRandom r = new SplittableRandom(seed);
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = lo + (float) r.nextDouble() * (hi - lo);
        }
        return v;
    }

    /** A float differs from a reference by more than a relative tolerance of {@code scale}. */
    static boolean off(float got, double expected, double scale, double tolerance) {
        return !(Math.abs(got - expected) <= tolerance * Math.max(scale, Double.MIN_NORMAL));
    }

    static final class VectorAdd implements Workload {
        final int n;
        final float[] a;
        final float[] b;
        long da;
        long db;
        long dc;

        VectorAdd(int n, long seed) {
            this.n = n;
            a = randomFloats(n, seed, -50, 50);
            b = randomFloats(n, seed + 100, -1, 1);
        }

        public String name() {
            return "vector-add-" + count(n);
        }

        public String description() {
            return "c = a + b, " + count(n) + " floats, 256 threads/block";
        }

        public double targetMs() {
            return n == Sizes.FULL.vectorN() ? 50 : Double.NaN;
        }

        public Launch prepare(PtxDevice d) {
            da = d.upload(a);
            db = d.upload(b);
            dc = d.alloc(4L * n);
            return new Launch("ptxbench_vadd", new int[] {(n + 255) / 256, 1, 1}, new int[] {256, 1, 1}, da, db, dc, n);
        }

        public void reset(PtxDevice d) {
            d.zero(dc, 4L * n);
        }

        public String check(PtxDevice d) {
            float[] c = d.floats(dc, n);
            for (int i = 0; i < n; i++) {
                if (Float.floatToRawIntBits(c[i]) != Float.floatToRawIntBits(a[i] + b[i])) {
                    return String.format(Locale.ROOT, "c[%d] = %s, expected %s", i, c[i], a[i] + b[i]);
                }
            }
            return null;
        }

        public void free(PtxDevice d) {
            d.free(da, db, dc);
        }
    }

    static final class Sgemm implements Workload {
        final int n;
        final float[] a;
        final float[] b;
        /** C = A·B in double, and Σ|A||B| per element for the tolerance; computed on first check. */
        double[] expected;
        double[] magnitude;
        long da;
        long db;
        long dc;

        Sgemm(int n, long seed) {
            this.n = n;
            a = randomFloats(n * n, seed, -1, 1);
            b = randomFloats(n * n, seed + 100, -1, 1);
        }

        public String name() {
            return "sgemm-" + n;
        }

        public String description() {
            return n + "×" + n + " float C = A·B, 16×16 shared-memory tiles, `__syncthreads`";
        }

        public double targetMs() {
            return n == Sizes.FULL.sgemmN() ? 2000 : Double.NaN;
        }

        public Launch prepare(PtxDevice d) {
            da = d.upload(a);
            db = d.upload(b);
            dc = d.alloc(4L * n * n);
            return new Launch("ptxbench_sgemm", new int[] {n / 16, n / 16, 1}, new int[] {16, 16, 1}, da, db, dc, n);
        }

        public void reset(PtxDevice d) {
            d.zero(dc, 4L * n * n);
        }

        private void reference() {
            expected = new double[n * n];
            magnitude = new double[n * n];
            IntStream.range(0, n).parallel().forEach(i -> {
                double[] s = new double[n];
                double[] m = new double[n];
                for (int k = 0; k < n; k++) {
                    double aik = a[i * n + k];
                    for (int j = 0; j < n; j++) {
                        double bkj = b[k * n + j];
                        s[j] += aik * bkj;
                        m[j] += Math.abs(aik * bkj);
                    }
                }
                System.arraycopy(s, 0, expected, i * n, n);
                System.arraycopy(m, 0, magnitude, i * n, n);
            });
        }

        public String check(PtxDevice d) {
            if (expected == null) {
                reference();
            }
            float[] c = d.floats(dc, n * n);
            for (int i = 0; i < n * n; i++) {
                // float accumulation over n terms errs by at most about n·2^-24 of Σ|a·b| (6e-5 at n = 1024)
                if (off(c[i], expected[i], magnitude[i], 1e-4)) {
                    return String.format(Locale.ROOT, "C[%d][%d] = %s, expected %s", i / n, i % n, c[i], expected[i]);
                }
            }
            return null;
        }

        public void free(PtxDevice d) {
            d.free(da, db, dc);
        }
    }

    static final class Reduce implements Workload {
        static final int BLOCK = 256;
        static final int GRID = 1024;
        final int n;
        final float[] in;
        final double expected;
        final double magnitude;
        long din;
        long dout;

        Reduce(int n, long seed) {
            this.n = n;
            in = randomFloats(n, seed, -1, 1);
            double s = 0;
            double m = 0;
            for (float v : in) {
                s += v;
                m += Math.abs(v);
            }
            expected = s;
            magnitude = m;
        }

        public String name() {
            return "reduce-shfl-" + count(n);
        }

        public String description() {
            return "sum of " + count(n) + " floats: grid-stride loop (" + GRID + "×" + BLOCK
                    + " threads), `__shfl_down_sync` per warp, shared memory per block, one `atomicAdd` per block";
        }

        public double targetMs() {
            return n == Sizes.FULL.reduceN() ? 200 : Double.NaN;
        }

        public Launch prepare(PtxDevice d) {
            din = d.upload(in);
            dout = d.alloc(4);
            return new Launch("ptxbench_reduce", new int[] {GRID, 1, 1}, new int[] {BLOCK, 1, 1}, din, dout, n);
        }

        public void reset(PtxDevice d) {
            d.zero(dout, 4);
        }

        public String check(PtxDevice d) {
            float got = d.floats(dout, 1)[0];
            // float partial sums and GRID float atomics: inside 1e-4 of Σ|x|
            return off(got, expected, magnitude, 1e-4)
                    ? String.format(Locale.ROOT, "sum = %s, expected %s (Σ|x| = %s)", got, expected, magnitude) : null;
        }

        public void free(PtxDevice d) {
            d.free(din, dout);
        }
    }

    static final class Histogram implements Workload {
        static final int BLOCK = 256;
        static final int GRID = 256;
        final int n;
        final byte[] in;
        final int[] expected = new int[256];
        long din;
        long dbins;

        Histogram(int n, long seed) {
            this.n = n;
            in = new byte[n];
            new Random(seed).nextBytes(in);
            for (int i = 0; i < n / 8; i++) {
                in[i * 8] = 7;   // a hot bin: lanes of a warp contend for one word
            }
            for (byte v : in) {
                expected[v & 0xFF]++;
            }
        }

        public String name() {
            return "histogram-" + count(n);
        }

        public String description() {
            return "256-bin histogram of " + count(n) + " bytes (1/8 in one bin): shared-memory `atomicAdd`, then global ("
                    + GRID + "×" + BLOCK + " threads)";
        }

        public double targetMs() {
            return Double.NaN;
        }

        public Launch prepare(PtxDevice d) {
            din = d.upload(in);
            dbins = d.alloc(4 * 256);
            return new Launch("ptxbench_histogram", new int[] {GRID, 1, 1}, new int[] {BLOCK, 1, 1}, din, dbins, n);
        }

        public void reset(PtxDevice d) {
            d.zero(dbins, 4 * 256);
        }

        public String check(PtxDevice d) {
            int[] bins = d.ints(dbins, 256);
            for (int i = 0; i < 256; i++) {
                if (bins[i] != expected[i]) {
                    return "bin " + i + " = " + bins[i] + ", expected " + expected[i];
                }
            }
            return null;
        }

        public void free(PtxDevice d) {
            d.free(din, dbins);
        }
    }

    static final class DeviceCall implements Workload {
        static final float A = 0.75f;
        static final float B = -0.5f;
        final int n;
        final float[] x;
        long dx;
        long dy;

        DeviceCall(int n, long seed) {
            this.n = n;
            x = randomFloats(n, seed, -4, 4);
        }

        public String name() {
            return "device-call-" + count(n);
        }

        public String description() {
            return "y = poly(x) through a `__noinline__ __device__` function (`call` with `.param`s), " + count(n)
                    + " floats, 256 threads/block";
        }

        public double targetMs() {
            return Double.NaN;
        }

        public Launch prepare(PtxDevice d) {
            dx = d.upload(x);
            dy = d.alloc(4L * n);
            return new Launch("ptxbench_call", new int[] {(n + 255) / 256, 1, 1}, new int[] {256, 1, 1}, dx, dy, A, B, n);
        }

        public void reset(PtxDevice d) {
            d.zero(dy, 4L * n);
        }

        public String check(PtxDevice d) {
            float[] y = d.floats(dy, n);
            for (int i = 0; i < n; i++) {
                double e = ((double) A * x[i] + B) * x[i] + 1.0;
                double scale = Math.abs((double) A * x[i] * x[i]) + Math.abs((double) B * x[i]) + 1.0;
                // nvcc may or may not contract to fma: a few float ulps of the terms either way
                if (off(y[i], e, scale, 1e-6)) {
                    return String.format(Locale.ROOT, "y[%d] = %s, expected %s (x = %s)", i, y[i], e, x[i]);
                }
            }
            return null;
        }

        public void free(PtxDevice d) {
            d.free(dx, dy);
        }
    }
}
