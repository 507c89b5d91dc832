package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Kernels as nvcc -O3 compiles them, run by the interpreter and checked against CPU references. */
class NvccKernelsTest {
    static final String SOURCE = """
            extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) c[i] = a[i] + b[i];
            }
            #define T 16
            extern "C" __global__ void matmul(const float* A, const float* B, float* C, int n) {
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
            extern "C" __global__ void reduce(const float* in, float* out, int n) {
                float v = 0;
                for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v += in[i];
                for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
                __shared__ float w[32];
                int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
                if (lane == 0) w[wid] = v;
                __syncthreads();
                if (wid == 0) {
                    v = lane < blockDim.x / 32 ? w[lane] : 0;
                    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
                    if (lane == 0) atomicAdd(out, v);
                }
            }
            extern "C" __global__ void hist(const unsigned char* in, unsigned int* bins, int n) {
                __shared__ unsigned int s[256];
                for (int i = threadIdx.x; i < 256; i += blockDim.x) s[i] = 0;
                __syncthreads();
                for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) atomicAdd(&s[in[i]], 1u);
                __syncthreads();
                for (int i = threadIdx.x; i < 256; i += blockDim.x) atomicAdd(&bins[i], s[i]);
            }
            extern "C" __global__ void scan(const int* in, int* out, int n) {
                extern __shared__ int t[];
                int tid = threadIdx.x;
                int i = blockIdx.x * blockDim.x + tid;
                t[tid] = i < n ? in[i] : 0;
                __syncthreads();
                for (int o = 1; o < blockDim.x; o <<= 1) {
                    int x = tid >= o ? t[tid - o] : 0;
                    __syncthreads();
                    t[tid] += x;
                    __syncthreads();
                }
                if (i < n) out[i] = t[tid];
            }
            """;

    static String ptx;
    Rig rig;
    long module;

    /** SOURCE as nvcc -ptx -arch=compute_90 -O3 compiles it (once per JVM); the test is skipped without nvcc. */
    static synchronized String ptx() throws IOException, InterruptedException {
        if (ptx == null) {
            Path nvcc = Path.of(System.getProperty("gpusockets.nvcc", "/usr/local/bin/nvcc"));
            assumeTrue(Files.isExecutable(nvcc), "nvcc not found at " + nvcc + ": the nvcc-compiled kernel tests need it");
            Path dir = Files.createTempDirectory("gpusockets-nvcc-kernels");
            Path cu = dir.resolve("kernels.cu");
            Files.writeString(cu, SOURCE);
            Path out = dir.resolve("kernels.ptx");
            Process p = new ProcessBuilder(nvcc.toString(), "-ptx", "-arch=compute_90", "-O3", cu.toString(), "-o", out.toString())
                    .redirectErrorStream(true).start();
            String log = new String(p.getInputStream().readAllBytes());
            assumeTrue(p.waitFor(120, TimeUnit.SECONDS) && p.exitValue() == 0, "nvcc failed: " + log);
            ptx = Files.readString(out);
            Files.delete(cu);
            Files.delete(out);
            Files.delete(dir);
        }
        return ptx;
    }

    @BeforeAll
    static void compile() throws IOException, InterruptedException {
        ptx();
    }

    @BeforeEach
    void load() {
        rig = new Rig();
        module = rig.module(ptx);
    }

    @AfterEach
    void close() {
        rig.close();
    }

    @Test
    void vectorAddMatchesTheCpuExactlyAndLeavesTheTailUntouched() {
        int n = 1000;
        float[] a = new float[n + 24];
        float[] b = new float[n + 24];
        Random r = new Random(1);
        for (int i = 0; i < a.length; i++) {
            a[i] = r.nextFloat() * 100 - 50;
            b[i] = r.nextFloat();
        }
        long da = rig.upload(a);
        long db = rig.upload(b);
        long dc = rig.upload(new float[n + 24]);
        rig.run(rig.function(module, "vadd"), (n + 255) / 256, 256, da, db, dc, n);
        float[] c = rig.floats(dc, n + 24);
        for (int i = 0; i < c.length; i++) {
            assertEquals(i < n ? a[i] + b[i] : 0f, c[i], "c[" + i + "]");
        }
    }

    @Test
    void tiledMatrixMultiplyThroughSharedMemoryAndBarriers() {
        int n = 64;
        float[] a = new float[n * n];
        float[] b = new float[n * n];
        Random r = new Random(2);
        for (int i = 0; i < a.length; i++) {
            a[i] = r.nextInt(17) - 8;   // small integers: every partial sum is exact, so any order agrees
            b[i] = r.nextInt(17) - 8;
        }
        long dc = rig.upload(new float[n * n]);
        rig.ok(rig.launch(rig.function(module, "matmul"), new int[] {n / 16, n / 16, 1}, new int[] {16, 16, 1}, 0,
                rig.upload(a), rig.upload(b), dc, n));
        rig.ok(rig.device.cuCtxSynchronize());
        float[] c = rig.floats(dc, n * n);
        float[] expected = new float[n * n];
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) {
                float s = 0;
                for (int k = 0; k < n; k++) {
                    s = Math.fma(a[i * n + k], b[k * n + j], s);
                }
                expected[i * n + j] = s;
            }
        }
        assertArrayEquals(expected, c);
    }

    @Test
    void warpShuffleReductionWithAtomicAddOfEachBlock() {
        int n = 100_000;
        float[] in = new float[n];
        for (int i = 0; i < n; i++) {
            in[i] = (i % 7) - 3;   // integers: the sum is exact in any order
        }
        long out = rig.upload(new float[1]);
        rig.run(rig.function(module, "reduce"), 40, 256, rig.upload(in), out, n);
        double expected = 0;
        for (float v : in) {
            expected += v;
        }
        assertEquals((float) expected, rig.floats(out, 1)[0]);
    }

    @Test
    void atomicHistogramCountsEveryByteUnderContention() {
        int n = 50_000;
        byte[] data = new byte[n];
        new Random(3).nextBytes(data);
        for (int i = 0; i < n / 4; i++) {
            data[i] = 7;   // one hot bin: many lanes of a warp hit the same word
        }
        long in = rig.upload(rig.arena.allocateFrom(java.lang.foreign.ValueLayout.JAVA_BYTE, data));
        long bins = rig.upload(new int[256]);
        rig.run(rig.function(module, "hist"), 8, 192, in, bins, n);
        int[] expected = new int[256];
        for (byte v : data) {
            expected[v & 0xFF]++;
        }
        assertArrayEquals(expected, rig.ints(bins, 256));
    }

    @Test
    void blockScanInDynamicSharedMemory() {
        int n = 1000;
        int block = 128;
        int[] in = new int[n];
        Random r = new Random(4);
        for (int i = 0; i < n; i++) {
            in[i] = r.nextInt(1000) - 500;
        }
        long out = rig.upload(new int[n]);
        rig.ok(rig.launch(rig.function(module, "scan"), new int[] {(n + block - 1) / block, 1, 1}, new int[] {block, 1, 1},
                4 * block, rig.upload(in), out, n));
        rig.ok(rig.device.cuCtxSynchronize());
        int[] got = rig.ints(out, n);
        int[] expected = new int[n];
        for (int i = 0; i < n; i++) {
            expected[i] = in[i] + (i % block == 0 ? 0 : expected[i - 1]);
        }
        assertArrayEquals(expected, got);
    }
}
