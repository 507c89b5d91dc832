package io.gpusockets.emulated.ptx;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_LAUNCH_FAILED;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The warp-level matrix instructions: mma.sync with the PTX ISA's fragment layouts (written out again here from the
 * ISA's "Matrix Fragments for mma" figures), wmma load/mma/store through memory (whose fragment layout is the
 * device's own: only the results in memory are defined) and ldmatrix, each against a CPU product of small integers
 * (exact in every order of summation), under the engine this run uses.
 */
class WarpMatrixTest {
    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    private static int f16(float v) {
        return Float.floatToFloat16(v) & 0xFFFF;
    }

    private static int bf16(float v) {
        return Float.floatToRawIntBits(v) >>> 16;
    }

    private static float[][] matrix(Random r, int rows, int cols) {
        float[][] m = new float[rows][cols];
        for (int i = 0; i < rows; i++) {
            for (int j = 0; j < cols; j++) {
                m[i][j] = r.nextInt(9) - 4;
            }
        }
        return m;
    }

    private static float[][] product(float[][] a, float[][] b, float[][] c) {
        float[][] d = new float[c.length][c[0].length];
        for (int i = 0; i < d.length; i++) {
            for (int j = 0; j < d[0].length; j++) {
                float s = c[i][j];
                for (int k = 0; k < b.length; k++) {
                    s += a[i][k] * b[k][j];
                }
                d[i][j] = s;
            }
        }
        return d;
    }

    /** The mma kernel: lane t loads 12 words (a0..a3, b0..b1, c0..c3 at words 0, 4, 8), runs INSN, stores d (4 words). */
    private int[] runMma(String insn, int[] words) {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out, .param .u64 in)
                {
                    .reg .b32 %r<40>;
                    .reg .f32 %f<16>;
                    .reg .b64 %rd<8>;
                    mov.u32 %r1, %tid.x;
                    ld.param.u64 %rd1, [in];
                    ld.param.u64 %rd2, [out];
                    mul.wide.u32 %rd3, %r1, 48;
                    add.s64 %rd4, %rd1, %rd3;
                    ld.global.v4.b32 {%r2, %r3, %r4, %r5}, [%rd4];
                    ld.global.v4.b32 {%r6, %r7, %r8, %r9}, [%rd4+16];
                    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd4+32];
                    mov.b32 %r10, %f1;
                    mov.b32 %r11, %f2;
                    INSN
                    mul.wide.u32 %rd3, %r1, 16;
                    add.s64 %rd5, %rd2, %rd3;
                    st.global.v4.f32 [%rd5], {%f5, %f6, %f7, %f8};
                    ret;
                }
                """.replace("INSN", insn);
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new int[32 * 4]);
        long in = rig.upload(words);
        long compiled = PtxEngine.statistics().compiledLaunches();
        rig.run(f, 1, 32, out, in);
        if (PtxEngine.current() != PtxEngine.INTERPRETER) {
            assertEquals(compiled + 1, PtxEngine.statistics().compiledLaunches(), "the launch ran compiled");
        }
        return rig.ints(out, 32 * 4);
    }

    /** C/D of m16n8: element i of lane l is (g + 8 * (i / 2), 2 * t + i % 2). */
    private static float[] cFragment(float[][] c, int l) {
        int g = l >> 2;
        int t = l & 3;
        float[] v = new float[4];
        for (int i = 0; i < 4; i++) {
            v[i] = c[g + 8 * (i >> 1)][2 * t + (i & 1)];
        }
        return v;
    }

    private static void checkD(int[] out, float[][] want) {
        for (int l = 0; l < 32; l++) {
            float[] w = cFragment(want, l);
            for (int i = 0; i < 4; i++) {
                assertEquals(w[i], Float.intBitsToFloat(out[4 * l + i]), "lane " + l + " d" + i);
            }
        }
    }

    @Test
    void mmaM16n8k16OfHalvesAccumulatesInF32() {
        for (boolean bf : new boolean[] {false, true}) {
            Random r = new Random(bf ? 2 : 1);
            float[][] a = matrix(r, 16, 16);
            float[][] b = matrix(r, 16, 8);
            float[][] c = matrix(r, 16, 8);
            int[] words = new int[32 * 12];
            for (int l = 0; l < 32; l++) {
                int g = l >> 2;
                int t = l & 3;
                for (int i = 0; i < 8; i++) {   // A: row g (+8 for a2,a3,a6,a7), col 2t + i%2 (+8 for i >= 4)
                    float v = a[g + 8 * ((i >> 1) & 1)][2 * t + (i & 1) + 8 * (i >> 2)];
                    words[12 * l + i / 2] |= (bf ? bf16(v) : f16(v)) << (16 * (i & 1));
                }
                for (int i = 0; i < 4; i++) {   // B: row 2t + i%2 (+8 for b2,b3), col g
                    float v = b[2 * t + (i & 1) + 8 * (i >> 1)][g];
                    words[12 * l + 4 + i / 2] |= (bf ? bf16(v) : f16(v)) << (16 * (i & 1));
                }
                float[] cf = cFragment(c, l);
                for (int i = 0; i < 4; i++) {
                    words[12 * l + 8 + i] = Float.floatToRawIntBits(cf[i]);
                }
            }
            String type = bf ? "bf16" : "f16";
            int[] out = runMma("mma.sync.aligned.m16n8k16.row.col.f32." + type + "." + type
                    + ".f32 {%f5, %f6, %f7, %f8}, {%r2, %r3, %r4, %r5}, {%r6, %r7}, {%f1, %f2, %f3, %f4};", words);
            checkD(out, product(a, b, c));
        }
    }

    @Test
    void mmaM16n8k8OfTf32() {
        Random r = new Random(3);
        float[][] a = matrix(r, 16, 8);
        float[][] b = matrix(r, 8, 8);
        float[][] c = matrix(r, 16, 8);
        int[] words = new int[32 * 12];
        for (int l = 0; l < 32; l++) {
            int g = l >> 2;
            int t = l & 3;
            for (int i = 0; i < 4; i++) {   // A: row g (+8 for a1,a3), col t (+4 for a2,a3)
                words[12 * l + i] = Float.floatToRawIntBits(a[g + 8 * (i & 1)][t + 4 * (i >> 1)]);
            }
            for (int i = 0; i < 2; i++) {   // B: row t (+4 for b1), col g
                words[12 * l + 4 + i] = Float.floatToRawIntBits(b[t + 4 * i][g]);
            }
            float[] cf = cFragment(c, l);
            for (int i = 0; i < 4; i++) {
                words[12 * l + 8 + i] = Float.floatToRawIntBits(cf[i]);
            }
        }
        int[] out = runMma("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f5, %f6, %f7, %f8}, {%r2, %r3, %r4, %r5}, "
                + "{%r6, %r7}, {%f1, %f2, %f3, %f4};", words);
        checkD(out, product(a, b, c));
    }

    @Test
    void mmaWithHalfAccumulators() {
        Random r = new Random(4);
        float[][] a = matrix(r, 16, 16);
        float[][] b = matrix(r, 16, 8);
        float[][] c = matrix(r, 16, 8);
        int[] words = new int[32 * 12];
        for (int l = 0; l < 32; l++) {
            int g = l >> 2;
            int t = l & 3;
            for (int i = 0; i < 8; i++) {
                words[12 * l + i / 2] |= f16(a[g + 8 * ((i >> 1) & 1)][2 * t + (i & 1) + 8 * (i >> 2)]) << (16 * (i & 1));
            }
            for (int i = 0; i < 4; i++) {
                words[12 * l + 4 + i / 2] |= f16(b[2 * t + (i & 1) + 8 * (i >> 1)][g]) << (16 * (i & 1));
            }
            float[] cf = cFragment(c, l);
            for (int i = 0; i < 4; i++) {   // c0,c1 in the first f16x2, c2,c3 in the second: loaded as %f1, %f2's bits
                words[12 * l + 8 + i / 2] |= f16(cf[i]) << (16 * (i & 1));
            }
        }
        // d in %r12, %r13 (two f16x2), widened to f32 into %f5..%f8 for the common store
        int[] out = runMma("""
                mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%r12, %r13}, {%r2, %r3, %r4, %r5}, {%r6, %r7}, {%r10, %r11};
                mov.b32 {%rs1, %rs2}, %r12;
                mov.b32 {%rs3, %rs4}, %r13;
                cvt.f32.f16 %f5, %rs1;
                cvt.f32.f16 %f6, %rs2;
                cvt.f32.f16 %f7, %rs3;
                cvt.f32.f16 %f8, %rs4;
                """.replace("mma.sync", ".reg .b16 %rs<8>;\n mma.sync"), words);
        checkD(out, product(a, b, c));
    }

    @Test
    void wmmaLoadMultiplyStoreThroughMemory() {
        Random r = new Random(5);
        float[][] a = matrix(r, 16, 16);
        float[][] b = matrix(r, 16, 16);
        float[][] c = matrix(r, 16, 16);
        int[] ah = new int[128];
        int[] bh = new int[128];
        float[] cf = new float[256];
        for (int i = 0; i < 16; i++) {
            for (int j = 0; j < 16; j++) {
                int e = i * 16 + j;   // A row-major, B column-major (element (i, j) of B at j * 16 + i), C row-major
                ah[e / 2] |= f16(a[i][j]) << (16 * (e & 1));
                int eb = j * 16 + i;
                bh[eb / 2] |= f16(b[i][j]) << (16 * (eb & 1));
                cf[e] = c[i][j];
            }
        }
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out, .param .u64 pa, .param .u64 pb, .param .u64 pc)
                {
                    .reg .b32 %r<40>;
                    .reg .f32 %f<40>;
                    .reg .b64 %rd<8>;
                    ld.param.u64 %rd1, [pa];
                    ld.param.u64 %rd2, [pb];
                    ld.param.u64 %rd3, [pc];
                    ld.param.u64 %rd4, [out];
                    mov.u32 %r30, 16;
                    wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8}, [%rd1], %r30;
                    wmma.load.b.sync.aligned.col.m16n16k16.global.f16 {%r9, %r10, %r11, %r12, %r13, %r14, %r15, %r16}, [%rd2], %r30;
                    wmma.load.c.sync.aligned.row.m16n16k16.global.f32 {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}, [%rd3], %r30;
                    wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%f9, %f10, %f11, %f12, %f13, %f14, %f15, %f16}, {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8}, {%r9, %r10, %r11, %r12, %r13, %r14, %r15, %r16}, {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8};
                    wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%rd4], {%f9, %f10, %f11, %f12, %f13, %f14, %f15, %f16}, %r30;
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new float[256]);
        rig.run(f, 1, 32, out, rig.upload(ah), rig.upload(bh), rig.upload(cf));
        float[] got = rig.floats(out, 256);
        float[][] want = product(a, b, c);
        for (int i = 0; i < 16; i++) {
            for (int j = 0; j < 16; j++) {
                assertEquals(want[i][j], got[i * 16 + j], "D[" + i + "][" + j + "]");
            }
        }
    }

    @Test
    void ldmatrixGivesEachLaneItsRowsAndTransposes() {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out)
                {
                    .reg .b32 %r<40>;
                    .reg .b64 %rd<8>;
                    .shared .align 16 .b8 tile[512];
                    ld.param.u64 %rd1, [out];
                    mov.u32 %r1, %tid.x;
                    mov.u32 %r2, tile;
                    shl.b32 %r3, %r1, 3;
                    add.s32 %r4, %r2, %r3;
                    shl.b32 %r5, %r1, 16;
                    add.s32 %r6, %r5, %r1;
                    add.s32 %r6, %r6, 0x10000;
                    st.shared.u32 [%r4], %r1;
                    st.shared.u32 [%r4+4], %r6;
                    shl.b32 %r3, %r1, 2;
                    add.s32 %r4, %r2, %r3;
                    st.shared.u32 [%r4+256], %r6;
                    bar.sync 0;
                    shl.b32 %r7, %r1, 4;
                    add.s32 %r8, %r2, %r7;
                    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r10, %r11, %r12, %r13}, [%r8];
                    ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r14, %r15}, [%r8];
                    mul.wide.u32 %rd2, %r1, 24;
                    add.s64 %rd3, %rd1, %rd2;
                    st.global.v2.u32 [%rd3], {%r10, %r11};
                    st.global.v2.u32 [%rd3+8], {%r12, %r13};
                    st.global.v2.u32 [%rd3+16], {%r14, %r15};
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new int[32 * 6]);
        rig.run(f, 1, 32, out);
        int[] got = rig.ints(out, 32 * 6);
        // the 16-bit elements of the tile as the threads wrote them
        int[] tile = new int[256];
        for (int t = 0; t < 32; t++) {
            int w0 = t;
            int w1 = (t << 16) + t + 0x10000;
            tile[4 * t] = w0 & 0xFFFF;
            tile[4 * t + 1] = w0 >>> 16;
            tile[4 * t + 2] = w1 & 0xFFFF;
            tile[4 * t + 3] = w1 >>> 16;
        }
        for (int t = 0; t < 32; t++) {
            int w1 = (t << 16) + t + 0x10000;
            tile[128 + 2 * t] = w1 & 0xFFFF;
            tile[128 + 2 * t + 1] = w1 >>> 16;
        }
        for (int l = 0; l < 32; l++) {
            int row = l / 4;
            int col = 2 * (l % 4);
            for (int j = 0; j < 4; j++) {   // matrix j: rows at lanes 8j..8j+7, each 16 bytes from lane's address (lane * 16)
                int base = (8 * j + row) * 8;
                int want = tile[base + col] | tile[base + col + 1] << 16;
                assertEquals(want, got[6 * l + j], "x4 lane " + l + " matrix " + j);
            }
            for (int j = 0; j < 2; j++) {   // .trans: (row 2*(l%4), col l/4) and the next row
                int lo = tile[(8 * j + col) * 8 + row];
                int hi = tile[(8 * j + col + 1) * 8 + row];
                assertEquals(lo | hi << 16, got[6 * l + 4 + j], "x2.trans lane " + l + " matrix " + j);
            }
        }
    }

    @Test
    void mmaByAPartialWarpFailsTheLaunch() {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out)
                {
                    .reg .b32 %r<16>;
                    .reg .f32 %f<16>;
                    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f5, %f6, %f7, %f8}, {%r2, %r3, %r4, %r5}, {%r6, %r7}, {%f1, %f2, %f3, %f4};
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        rig.ok(rig.launch(f, new int[] {1, 1, 1}, new int[] {16, 1, 1}, 0, rig.alloc(16)));
        assertEquals(CUDA_ERROR_LAUNCH_FAILED, rig.device.cuCtxSynchronize());
    }

    @Test
    void unsupportedMatrixFormsAreRefusedAtLaunch() {
        for (String insn : new String[] {
            "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r1, %r2, %r3, %r4}, {%r5, %r6, %r7, %r8}, {%r9, %r10}, {%r1, %r2, %r3, %r4};",
            "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}, {%r1, %r2}, {%r3, %r4}, "
                    + "{%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8};"}) {
            String ptx = Rig.HEADER + """
                    .visible .entry k(.param .u64 out)
                    {
                        .reg .b32 %r<16>;
                        .reg .f32 %f<16>;
                        INSN
                        ret;
                    }
                    """.replace("INSN", insn);
            long f = rig.function(rig.module(ptx), "k");
            assertEquals(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED,
                    rig.launch(f, new int[] {1, 1, 1}, new int[] {32, 1, 1}, 0, rig.alloc(16)), insn);
        }
    }
}
