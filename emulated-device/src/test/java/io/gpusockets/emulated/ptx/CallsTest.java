package io.gpusockets.emulated.ptx;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_ADDRESS;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** .func definitions and call: arguments and return values, recursion, the depth bound, warps across calls. */
class CallsTest {
    static final String NVCC_SOURCE = """
            __device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
            __device__ __noinline__ int add3(int a, int b, int c) { return a * 7 + b * 3 + c; }
            __device__ __noinline__ void store(int *p, int i, long long v) { p[i] = (int)(v >> 1); }
            __device__ __noinline__ int twice(int x) { return 2 * x; }
            __device__ __noinline__ int thrice(int x) { return 3 * x; }
            struct Pair { int a; double b; };
            __device__ __noinline__ Pair mk(int x) { Pair p; p.a = x; p.b = x * 0.5; return p; }
            extern "C" __global__ void calls(int *out, int *mask, int n) {
                int t = blockIdx.x * blockDim.x + threadIdx.x;
                if (t >= n) return;
                int v = add3(t, t + 1, t * t);
                store(out, t, (long long)v * 2);
                int w = (t & 1) ? twice(t) : thrice(t);
                mask[t] = __activemask();
                out[n + t] = w + fib(t % 18);
                Pair p = mk(t); out[2 * n + t] = p.a + (int)(p.b * 4);
            }
            """;

    /** down(n) = n by n nested calls; the kernel calls down(n + tid), so the lanes of a warp recurse to different depths. */
    static final String RECURSION = Rig.HEADER + """
            .visible .func (.param .b32 r) down(.param .b32 n)
            {
                .reg .pred %p<2>;
                .reg .b32 %r<5>;
                ld.param.u32 %r1, [n];
                setp.eq.s32 %p1, %r1, 0;
                @%p1 bra DONE;
                add.s32 %r2, %r1, -1;
                {
                .param .b32 a;
                .param .b32 b;
                st.param.b32 [a], %r2;
                call.uni (b), down, (a);
                ld.param.b32 %r3, [b];
                }
                add.s32 %r4, %r3, 1;
                st.param.b32 [r], %r4;
                ret;
            DONE:
                st.param.b32 [r], 0;
                ret;
            }
            .visible .entry k(.param .u64 out, .param .u32 n)
            {
                .reg .b32 %r<5>;
                .reg .b64 %rd<3>;
                ld.param.u64 %rd1, [out];
                ld.param.u32 %r1, [n];
                mov.u32 %r2, %tid.x;
                add.s32 %r1, %r1, %r2;
                {
                .param .b32 a;
                .param .b32 b;
                st.param.b32 [a], %r1;
                call.uni (b), down, (a);
                ld.param.b32 %r3, [b];
                }
                activemask.b32 %r4;
                mul.wide.u32 %rd2, %r2, 8;
                add.s64 %rd2, %rd1, %rd2;
                st.global.v2.u32 [%rd2], {%r3, %r4};
                ret;
            }
            """;

    /** Even lanes call f, odd lanes g; each returns the active mask it ran with; after the if/else the warp is whole again. */
    static final String DIVERGENT = Rig.HEADER + """
            .func (.param .b32 r) f(.param .b32 x)
            {
                .reg .b32 %r<3>;
                ld.param.u32 %r1, [x];
                activemask.b32 %r2;
                st.param.b32 [r], %r2;
                ret;
            }
            .func (.param .b32 r) g(.param .b32 x)
            {
                .reg .b32 %r<4>;
                ld.param.u32 %r1, [x];
                activemask.b32 %r2;
                add.s32 %r3, %r2, %r1;
                st.param.b32 [r], %r3;
            }
            .visible .entry k(.param .u64 out)
            {
                .reg .pred %p<2>;
                .reg .b32 %r<8>;
                .reg .b64 %rd<4>;
                ld.param.u64 %rd1, [out];
                mov.u32 %r1, %tid.x;
                and.b32 %r2, %r1, 1;
                setp.ne.s32 %p1, %r2, 0;
                @%p1 bra ODD;
                {
                .param .b32 a;
                .param .b32 b;
                st.param.b32 [a], %r1;
                call (b), f, (a);
                ld.param.b32 %r5, [b];
                }
                bra JOIN;
            ODD:
                {
                .param .b32 a;
                .param .b32 b;
                st.param.b32 [a], %r1;
                call (b), g, (a);
                ld.param.b32 %r5, [b];
                }
            JOIN:
                activemask.b32 %r6;
                mul.wide.u32 %rd2, %r1, 8;
                add.s64 %rd3, %rd1, %rd2;
                st.global.v2.u32 [%rd3], {%r5, %r6};
                ret;
            }
            """;

    Rig rig;

    @BeforeEach
    void open() {
        rig = new Rig();
    }

    @AfterEach
    void close() {
        rig.close();
    }

    static int fib(int n) {
        return n < 2 ? n : fib(n - 1) + fib(n - 2);
    }

    @Test
    void nvccDeviceFunctionsWithArgumentsReturnValuesStructsAndRecursionMatchTheCpu(@TempDir Path dir) throws IOException, InterruptedException {
        String ptx = nvcc(dir, NVCC_SOURCE);
        assertTrue(ptx.contains("call.uni") && ptx.contains("_Z3fibi"), "nvcc kept the calls");
        int n = 100;
        long out = rig.alloc(4L * 3 * n);
        long mask = rig.alloc(4L * n);
        rig.run(rig.function(rig.module(ptx), "calls"), 2, 64, out, mask, n);
        int[] got = rig.ints(out, 3 * n);
        int[] masks = rig.ints(mask, n);
        for (int t = 0; t < n; t++) {
            assertEquals(t * 7 + (t + 1) * 3 + t * t, got[t], "add3/store, thread " + t);
            assertEquals(((t & 1) != 0 ? 2 * t : 3 * t) + fib(t % 18), got[n + t], "twice/thrice + fib, thread " + t);
            assertEquals(t + (int) (t * 0.5 * 4), got[2 * n + t], "struct return, thread " + t);
            int lanes = Math.min(32, n - t / 32 * 32);
            assertEquals(lanes == 32 ? -1 : (1 << lanes) - 1, masks[t], "warp whole after the calls, thread " + t);
        }
    }

    @Test
    void recursionToDifferentDepthsPerLaneReturnsAndReconverges() {
        long f = rig.function(rig.module(RECURSION), "k");
        long out = rig.alloc(8L * 32);
        rig.run(f, 1, 32, out, 900);
        int[] got = rig.ints(out, 64);
        for (int l = 0; l < 32; l++) {
            assertEquals(900 + l, got[2 * l], "down(900 + " + l + ")");
            assertEquals(-1, got[2 * l + 1], "lane " + l + " back in the whole warp");
        }
    }

    /** As RECURSION, with 900 bytes of .local in every frame. */
    static final String DEEP_FRAMES = RECURSION.replace(".reg .b32 %r<5>;\n    ld.param.u32 %r1, [n];",
            ".reg .b32 %r<5>;\n    .local .align 4 .b8 buf[900];\n    ld.param.u32 %r1, [n];");

    @Test
    void theStacksOfABlockTogetherStayWithinTheDevicesBound() {
        assertTrue(DEEP_FRAMES.contains("buf[900]"), "the frames have their .local buffer");
        long f = rig.function(rig.module(DEEP_FRAMES), "k");
        long out = rig.alloc(8L * 1024);
        // 500 frames of about 920 bytes fit one thread's 512 KiB stack ...
        rig.ok(rig.launch(f, new int[] {1, 1, 1}, new int[] {1, 1, 1}, 0, out, 500));
        rig.ok(rig.device.cuCtxSynchronize());
        // ... but thread t of a 512-thread block recursing t deep needs about 120 MB for the block.
        rig.ok(rig.launch(f, new int[] {1, 1, 1}, new int[] {512, 1, 1}, 0, out, 0));
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, rig.device.cuCtxSynchronize());
        assertTrue(rig.device.lastErrorDetail().contains("call stacks of a block"), rig.device.lastErrorDetail());
    }

    @Test
    void recursionPastTheDepthBoundIsAStickyKernelFault() {
        long f = rig.function(rig.module(RECURSION), "k");
        long out = rig.alloc(8L * 32);
        rig.ok(rig.launch(f, new int[] {1, 1, 1}, new int[] {1, 1, 1}, 0, out, 100_000));
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, rig.device.cuCtxSynchronize());
        assertTrue(rig.device.lastErrorDetail().contains("call depth"), rig.device.lastErrorDetail());
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, rig.device.cuCtxSynchronize(), "sticky");
    }

    @Test
    void divergentLanesRunTheirOwnFunctionsThenReconverge() {
        long f = rig.function(rig.module(DIVERGENT), "k");
        long out = rig.alloc(8L * 32);
        rig.run(f, 1, 32, out);
        int[] got = rig.ints(out, 64);
        int[] expected = new int[64];
        for (int l = 0; l < 32; l++) {
            expected[2 * l] = (l & 1) == 0 ? 0x5555_5555 : 0xAAAA_AAAA + l;
            expected[2 * l + 1] = -1;
        }
        assertArrayEquals(expected, got);
    }

    @Test
    void indirectCallsAndUnknownExternFunctionsAreNotSupportedByName() {
        String indirect = Rig.HEADER + """
                .visible .entry k()
                {
                    .reg .b64 %rd<2>;
                    proto: .callprototype _ (.param .b32 _);
                    mov.u64 %rd1, 0;
                    call %rd1, (), proto;
                    ret;
                }
                """;
        String extern = Rig.HEADER + """
                .extern .func (.param .b32 r) mystery(.param .b32 a);
                .visible .entry k()
                {
                    {
                    .param .b32 a;
                    .param .b32 b;
                    st.param.b32 [a], 1;
                    call.uni (b), mystery, (a);
                    }
                    ret;
                }
                """;
        assertEquals(CUDA_ERROR_NOT_SUPPORTED, rig.launch(rig.function(rig.module(extern), "k"), new int[] {1, 1, 1},
                new int[] {1, 1, 1}, 0));
        assertTrue(rig.device.lastErrorDetail().contains("mystery"), rig.device.lastErrorDetail());
        assertEquals(CUDA_ERROR_NOT_SUPPORTED, rig.launch(rig.function(rig.module(indirect), "k"), new int[] {1, 1, 1},
                new int[] {1, 1, 1}, 0));
    }

    static String nvcc(Path dir, String source) throws IOException, InterruptedException {
        Path nvcc = Path.of(System.getProperty("gpusockets.nvcc", "/usr/local/bin/nvcc"));
        assumeTrue(Files.isExecutable(nvcc), "nvcc not found at " + nvcc + ": the nvcc-compiled call tests need it");
        Path cu = dir.resolve("k.cu");
        Files.writeString(cu, source);
        Path out = dir.resolve("k.ptx");
        Process p = new ProcessBuilder(nvcc.toString(), "-ptx", "-arch=compute_90", "-O3", cu.toString(), "-o", out.toString())
                .redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes());
        assumeTrue(p.waitFor(120, TimeUnit.SECONDS) && p.exitValue() == 0, "nvcc failed: " + log);
        return Files.readString(out);
    }
}
