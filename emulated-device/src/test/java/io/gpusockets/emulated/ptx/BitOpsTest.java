package io.gpusockets.emulated.ptx;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_LAUNCH_FAILED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * lop3, dp4a/dp2a, bfind, bmsk, szext, fns, testp and isspacep at their edges, against the PTX ISA's
 * pseudo-code written out independently here (and its examples), under the engine this run uses.
 */
class BitOpsTest {
    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    /**
     * Thread t runs {@code body} with %r1, %r2, %r3 = in[t][0..2], %rd5 = {%r1, %r2} (a b64), %rd1 = its {@code results}
     * u32 results (stored by the body at [%rd1 + 4k]).
     */
    private int[] run(String body, int[][] in, int results) {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out, .param .u64 in)
                {
                    .reg .pred %p<8>;
                    .reg .b32 %r<32>;
                    .reg .b64 %rd<16>;
                    .reg .f32 %f<4>;
                    .reg .f64 %fd<4>;
                    mov.u32 %r10, %tid.x;
                    ld.param.u64 %rd1, [out];
                    ld.param.u64 %rd2, [in];
                    mul.wide.u32 %rd3, %r10, 12;
                    add.s64 %rd2, %rd2, %rd3;
                    ld.global.u32 %r1, [%rd2];
                    ld.global.u32 %r2, [%rd2+4];
                    ld.global.u32 %r3, [%rd2+8];
                    mov.b64 %rd5, {%r1, %r2};
                    mul.wide.u32 %rd3, %r10, RESULTS;
                    add.s64 %rd1, %rd1, %rd3;
                """.replace("RESULTS", String.valueOf(4 * results)) + body + "\n    ret;\n}\n";
        int[] flat = new int[3 * in.length];
        for (int t = 0; t < in.length; t++) {
            System.arraycopy(in[t], 0, flat, 3 * t, 3);
        }
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new int[in.length * results]);
        rig.run(f, 1, in.length, out, rig.upload(flat));
        return rig.ints(out, in.length * results);
    }

    private static final int[] EDGES = {0, 1, -1, 2, 31, 32, 33, 63, 64, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF_FFFF, 0x8000_0000,
        0x8080_8080, 0x7F7F_7F7F, 0xAAAA_AAAA, 0x5555_5555, 0xFFFF_0000, 0x0000_FFFF, 0x1234_5678, -32, -33};

    /** Every triple of EDGES is too many; the edges in each position against each other plus random words, 96 threads. */
    private static int[][] inputs(long seed) {
        Random r = new Random(seed);
        int[][] in = new int[96][3];
        for (int t = 0; t < in.length; t++) {
            for (int k = 0; k < 3; k++) {
                in[t][k] = t < 72 && r.nextInt(3) != 0 ? EDGES[r.nextInt(EDGES.length)] : r.nextInt();
            }
            if (t < EDGES.length) {
                in[t][0] = EDGES[t];
                in[t][1] = EDGES[(t * 7) % EDGES.length];
            }
        }
        return in;
    }

    private static int lop3(int a, int b, int c, int lut) {
        int d = 0;
        for (int i = 0; i < 32; i++) {
            int index = (a >>> i & 1) << 2 | (b >>> i & 1) << 1 | (c >>> i & 1);
            d |= (lut >>> index & 1) << i;
        }
        return d;
    }

    @Test
    void lop3AppliesItsTruthTableToEveryBit() {
        int[] luts = {0x00, 0xFF, 0xF0, 0xCC, 0xAA, 0x96, 0xE8, 0x80, 0xFE, 0x01, 0x6A, 0x1B};
        StringBuilder body = new StringBuilder();
        for (int k = 0; k < luts.length; k++) {
            body.append("lop3.b32 %r4, %r1, %r2, %r3, ").append(luts[k]).append(";\nst.global.u32 [%rd1+").append(4 * k)
                    .append("], %r4;\n");
        }
        body.append("lop3.b32 %r4, %r1, 0x0F0F0F0F, %r3, 0x96;\nst.global.u32 [%rd1+48], %r4;\n");
        int[][] in = inputs(1);
        int[] r = run(body.toString(), in, 13);
        for (int t = 0; t < in.length; t++) {
            int a = in[t][0];
            int b = in[t][1];
            int c = in[t][2];
            for (int k = 0; k < luts.length; k++) {
                assertEquals(lop3(a, b, c, luts[k]), r[13 * t + k], "lop3 lut 0x" + Integer.toHexString(luts[k]) + " thread " + t);
            }
            assertEquals(a, r[13 * t + 2], "0xF0 is a");
            assertEquals(b, r[13 * t + 3], "0xCC is b");
            assertEquals(c, r[13 * t + 4], "0xAA is c");
            assertEquals(a ^ b ^ c, r[13 * t + 5], "0x96 is a ^ b ^ c");
            assertEquals(a & b | b & c | a & c, r[13 * t + 6], "0xE8 is the majority");
            assertEquals(~(a | b | c), r[13 * t + 9], "0x01 is ~a & ~b & ~c");
            assertEquals(a ^ 0x0F0F0F0F ^ c, r[13 * t + 12], "an immediate b");
        }
    }

    static int dp4a(int a, int b, int c, boolean sa, boolean sb) {
        int d = c;
        for (int i = 0; i < 4; i++) {
            int x = sa ? (byte) (a >> 8 * i) : a >> 8 * i & 0xFF;
            int y = sb ? (byte) (b >> 8 * i) : b >> 8 * i & 0xFF;
            d += x * y;
        }
        return d;
    }

    static int dp2a(int a, int b, int c, boolean sa, boolean sb, boolean hi) {
        int d = c;
        for (int i = 0; i < 2; i++) {
            int x = sa ? (short) (a >> 16 * i) : a >> 16 * i & 0xFFFF;
            int s = (hi ? 2 : 0) + i;
            int y = sb ? (byte) (b >> 8 * s) : b >> 8 * s & 0xFF;
            d += x * y;
        }
        return d;
    }

    @Test
    void dotProductsInEverySignednessWrapTo32Bits() {
        String[] ty = {"u32", "s32"};
        StringBuilder body = new StringBuilder();
        int k = 0;
        for (String at : ty) {
            for (String bt : ty) {
                body.append("dp4a.").append(at).append('.').append(bt).append(" %r4, %r1, %r2, %r3;\nst.global.u32 [%rd1+")
                        .append(4 * k++).append("], %r4;\n");
                for (String mode : new String[] {"lo", "hi"}) {
                    body.append("dp2a.").append(mode).append('.').append(at).append('.').append(bt)
                            .append(" %r4, %r1, %r2, %r3;\nst.global.u32 [%rd1+").append(4 * k++).append("], %r4;\n");
                }
            }
        }
        int[][] in = inputs(2);
        in[0] = new int[] {-1, -1, 0};
        in[1] = new int[] {0x8080_8080, 0x8080_8080, Integer.MAX_VALUE};
        in[2] = new int[] {0xFFFF_8000, 0x0000_807F, 5};
        int[] r = run(body.toString(), in, 12);
        for (int t = 0; t < in.length; t++) {
            int a = in[t][0];
            int b = in[t][1];
            int c = in[t][2];
            int j = 0;
            for (int sa = 0; sa < 2; sa++) {
                for (int sb = 0; sb < 2; sb++) {
                    String what = ty[sa] + "." + ty[sb] + " thread " + t;
                    assertEquals(dp4a(a, b, c, sa == 1, sb == 1), r[12 * t + j++], "dp4a." + what);
                    assertEquals(dp2a(a, b, c, sa == 1, sb == 1, false), r[12 * t + j++], "dp2a.lo." + what);
                    assertEquals(dp2a(a, b, c, sa == 1, sb == 1, true), r[12 * t + j++], "dp2a.hi." + what);
                }
            }
        }
        assertEquals(4 * 255 * 255, r[0], "dp4a.u32.u32 of all ones");
        assertEquals(-4 * 255, r[3], "dp4a.u32.s32 of all ones: 255 * -1 four times");
        assertEquals(4, r[9], "dp4a.s32.s32 of all ones");
        assertEquals(Integer.MAX_VALUE + 4 * 128 * 128, r[12 + 9], "dp4a.s32.s32 wraps past INT_MAX");
        assertEquals(5 + -32768 * 127 + -1 * -128, r[24 + 10], "dp2a.lo.s32.s32");
        assertEquals(5, r[24 + 11], "dp2a.hi.s32.s32 of b's zero high bytes");
    }

    private static int bfind(long v, int bits, boolean signed, boolean shift) {
        if (signed && v < 0) {
            v = ~v;
        }
        for (int i = bits - 1; i >= 0; i--) {
            if ((v >>> i & 1) != 0) {
                return shift ? bits - 1 - i : i;
            }
        }
        return -1;
    }

    @Test
    void bfindFindsTheMostSignificantNonSignBit() {
        StringBuilder body = new StringBuilder();
        String[] forms = {"bfind.u32 %r4, %r1", "bfind.s32 %r4, %r1", "bfind.shiftamt.u32 %r4, %r1", "bfind.shiftamt.s32 %r4, %r1",
            "bfind.u64 %r4, %rd5", "bfind.s64 %r4, %rd5", "bfind.shiftamt.u64 %r4, %rd5", "bfind.shiftamt.s64 %r4, %rd5"};
        for (int k = 0; k < forms.length; k++) {
            body.append(forms[k]).append(";\nst.global.u32 [%rd1+").append(4 * k).append("], %r4;\n");
        }
        int[][] in = inputs(3);
        in[0] = new int[] {0, 0, 0};
        in[1] = new int[] {-1, -1, 0};
        in[2] = new int[] {0x8000_0000, 0x8000_0000, 0};
        in[3] = new int[] {1, 0, 0};
        in[4] = new int[] {0x4000_0000, 0, 0};
        in[5] = new int[] {-2, 0x7FFF_FFFF, 0};
        int[] r = run(body.toString(), in, 8);
        for (int t = 0; t < in.length; t++) {
            int a = in[t][0];
            long l = (a & 0xFFFF_FFFFL) | (long) in[t][1] << 32;
            int[] expected = {bfind(a & 0xFFFF_FFFFL, 32, false, false), bfind(a, 32, true, false), bfind(a & 0xFFFF_FFFFL, 32, false, true),
                bfind(a, 32, true, true), bfind(l, 64, false, false), bfind(l, 64, true, false), bfind(l, 64, false, true),
                bfind(l, 64, true, true)};
            for (int k = 0; k < 8; k++) {
                assertEquals(expected[k], r[8 * t + k], forms[k] + " of 0x" + Long.toHexString(l));
            }
        }
        assertEquals("[-1, -1, -1, -1, -1, -1, -1, -1]", java.util.Arrays.toString(java.util.Arrays.copyOfRange(r, 0, 8)), "no bit: 0xffffffff");
        assertEquals("[-1, -1, -1, -1]", java.util.Arrays.toString(new int[] {r[9], r[11], r[13], r[15]}), "-1 has no non-sign bit");
        assertEquals("[31, 30, 0, 1, 63, 62, 0, 1]", java.util.Arrays.toString(java.util.Arrays.copyOfRange(r, 16, 24)), "INT_MIN, LONG_MIN");
        assertEquals("[0, 0, 31, 31, 0, 0, 63, 63]", java.util.Arrays.toString(java.util.Arrays.copyOfRange(r, 24, 32)), "1");
        assertEquals(0, r[41], "bfind.s32 of -2 (~ is 1)");
        assertEquals(62, r[45], "bfind.s64 of 0x7fffffff_fffffffe");
    }

    private static int bmsk(int a, int b, boolean clamp) {
        long ua = a & 0xFFFF_FFFFL;
        long ub = b & 0xFFFF_FFFFL;
        long start = clamp ? Math.min(ua, 32) : ua & 31;
        long width = clamp ? Math.min(ub, 32) : ub & 31;
        long end = Math.min(start + width, 32);
        long mask = 0;
        for (long i = start; i < end; i++) {
            mask |= 1L << i;
        }
        return (int) mask;
    }

    private static int szext(int a, int b, boolean clamp, boolean signed) {
        long ub = b & 0xFFFF_FFFFL;
        long n = clamp ? Math.min(ub, 32) : ub & 31;
        if (n == 0) {
            return 0;
        }
        if (n == 32) {
            return a;
        }
        int shift = (int) (32 - n);
        return signed ? a << shift >> shift : a << shift >>> shift;
    }

    @Test
    void bmskAndSzextClampOrWrapPositionAndWidth() {
        String body = """
                bmsk.clamp.b32 %r4, %r1, %r2;
                st.global.u32 [%rd1], %r4;
                bmsk.wrap.b32 %r4, %r1, %r2;
                st.global.u32 [%rd1+4], %r4;
                szext.clamp.u32 %r4, %r1, %r2;
                st.global.u32 [%rd1+8], %r4;
                szext.clamp.s32 %r4, %r1, %r2;
                st.global.u32 [%rd1+12], %r4;
                szext.wrap.u32 %r4, %r1, %r2;
                st.global.u32 [%rd1+16], %r4;
                szext.wrap.s32 %r4, %r1, %r2;
                st.global.u32 [%rd1+20], %r4;
                bmsk.wrap.b32 %r4, 1, 2;
                st.global.u32 [%rd1+24], %r4;
                szext.wrap.u32 %r4, 0xffffffff, 0;
                st.global.u32 [%rd1+28], %r4;
                """;
        int[][] in = inputs(4);
        int[][] edges = {{0, 32}, {32, 5}, {30, 4}, {4, 0}, {3, 5}, {-1, 3}, {31, 1}, {0, -1}, {0x80, 8}, {0x1FF, 8}, {0x7F, 36},
            {5, 3}, {-7, 33}, {0x8000_0000, 32}, {0x8000_0000, 31}, {1, 1}};
        for (int i = 0; i < edges.length; i++) {
            in[i] = new int[] {edges[i][0], edges[i][1], 0};
        }
        int[] r = run(body, in, 8);
        for (int t = 0; t < in.length; t++) {
            int a = in[t][0];
            int b = in[t][1];
            String what = " of " + a + ", " + b;
            assertEquals(bmsk(a, b, true), r[8 * t], "bmsk.clamp" + what);
            assertEquals(bmsk(a, b, false), r[8 * t + 1], "bmsk.wrap" + what);
            assertEquals(szext(a, b, true, false), r[8 * t + 2], "szext.clamp.u32" + what);
            assertEquals(szext(a, b, true, true), r[8 * t + 3], "szext.clamp.s32" + what);
            assertEquals(szext(a, b, false, false), r[8 * t + 4], "szext.wrap.u32" + what);
            assertEquals(szext(a, b, false, true), r[8 * t + 5], "szext.wrap.s32" + what);
            assertEquals(6, r[8 * t + 6], "the ISA's example bmsk.wrap.b32 d, 1, 2");
            assertEquals(0, r[8 * t + 7], "the ISA's example szext.wrap.u32 d, 0xffffffff, 0");
        }
        assertEquals(-1, r[0], "bmsk.clamp from 0, width 32: all ones");
        assertEquals(0, r[1], "bmsk.wrap width 32 wraps to 0");
        assertEquals(0, r[8], "bmsk.clamp from 32");
        assertEquals(0x1F, r[9], "bmsk.wrap from 32 is from 0");
        assertEquals(0xC000_0000, r[16], "bmsk.clamp 30 + 4 stops at bit 31");
        assertEquals(0xFFFF_FF80, r[8 * 8 + 3], "szext.clamp.s32 of 0x80, 8");
        assertEquals(0xFF, r[8 * 9 + 2], "szext.clamp.u32 of 0x1ff, 8");
        assertEquals(-1, r[8 * 10 + 5], "szext.wrap.s32 of 0x7f, 36 (4 bits)");
        assertEquals(0x7F, r[8 * 10 + 3], "szext.clamp.s32 of 0x7f, 36 (32 bits)");
        assertEquals(-3, r[8 * 11 + 3], "szext.clamp.s32 of 0b101, 3");
    }

    static int fns(int mask, int base, int offset) {
        if (offset == 0) {
            return base >= 0 && base < 32 && (mask >>> base & 1) != 0 ? base : -1;
        }
        int seen = 0;
        long want = Math.abs((long) offset);
        for (int pos = base; pos >= 0 && pos < 32; pos += offset > 0 ? 1 : -1) {
            if ((mask >>> pos & 1) != 0 && ++seen == want) {
                return pos;
            }
        }
        return -1;
    }

    @Test
    void fnsFindsTheNthSetBitUpOrDownFromTheBase() {
        String body = """
                fns.b32 %r4, %r1, %r2, %r3;
                st.global.u32 [%rd1], %r4;
                fns.b32 %r4, 0xaaaaaaaa, 3, 1;
                fns.b32 %r5, 0xaaaaaaaa, 3, -1;
                fns.b32 %r6, 0xaaaaaaaa, 2, 1;
                fns.b32 %r7, 0xaaaaaaaa, 2, -1;
                mad.lo.s32 %r4, %r4, 100, %r5;
                mad.lo.s32 %r4, %r4, 100, %r6;
                mad.lo.s32 %r4, %r4, 100, %r7;
                st.global.u32 [%rd1+4], %r4;
                """;
        int[][] in = inputs(5);
        int[][] edges = {{0xAAAA_AAAA, 2, 0}, {0xAAAA_AAAA, 3, 0}, {-1, 0, 32}, {-1, 0, 33}, {0x8000_0001, 31, -2}, {0, 5, 1},
            {1, 0, Integer.MIN_VALUE}, {-1, 31, -32}, {-1, 31, 1}, {-1, 32, 0}, {-1, 40, -1}, {-1, -1, 1}, {0x10, 0, 1}};
        for (int i = 0; i < edges.length; i++) {
            in[i] = edges[i].clone();
        }
        for (int t = edges.length; t < in.length; t++) {
            in[t][1] &= 31;   // a base past 31 is undefined in PTX: the random ones stay within it
            in[t][2] = in[t][2] % 40;
        }
        int[] r = run(body, in, 2);
        for (int t = 0; t < in.length; t++) {
            assertEquals(fns(in[t][0], in[t][1], in[t][2]), r[2 * t], "fns of " + java.util.Arrays.toString(in[t]));
            assertEquals(((3 * 100 + 3) * 100 + 3) * 100 + 1, r[2 * t + 1], "the ISA's examples: 3, 3, 3, 1");
        }
        assertEquals("[-1, 3, 31, -1, 0, -1, -1, 0, 31, -1, -1, -1, 4]",
                java.util.Arrays.toString(java.util.stream.IntStream.range(0, edges.length).map(i -> r[2 * i]).toArray()));
    }

    @Test
    void testpClassifiesF32AndF64() {
        float[] fs = {0f, -0f, 1f, -1.5f, Float.MIN_VALUE, -1e-40f, Float.MIN_NORMAL, -Float.MAX_VALUE, Float.POSITIVE_INFINITY,
            Float.NEGATIVE_INFINITY, Float.NaN, Float.intBitsToFloat(0xFF80_0001), Float.intBitsToFloat(0x007F_FFFF)};
        double[] ds = {0.0, -0.0, 1.0, Double.MIN_VALUE, -1e-310, Double.MIN_NORMAL, Double.MAX_VALUE, Double.POSITIVE_INFINITY,
            Double.NEGATIVE_INFINITY, Double.NaN, Double.longBitsToDouble(0xFFF0_0000_0000_0001L), 1e-300};
        int[][] in = new int[Math.max(fs.length, ds.length)][3];
        for (int t = 0; t < in.length; t++) {
            long d = Double.doubleToRawLongBits(ds[t % ds.length]);
            in[t] = new int[] {(int) d, (int) (d >>> 32), Float.floatToRawIntBits(fs[t % fs.length])};
        }
        StringBuilder body = new StringBuilder("mov.b32 %f1, %r3;\nmov.b64 %fd1, %rd5;\nmov.u32 %r4, 0;\nmov.u32 %r5, 0;\n");
        String[] ops = {"finite", "infinite", "number", "notanumber", "normal", "subnormal"};
        for (int k = 0; k < ops.length; k++) {
            body.append("testp.").append(ops[k]).append(".f32 %p1, %f1;\nselp.u32 %r6, ").append(1 << k).append(", 0, %p1;\n")
                    .append("or.b32 %r4, %r4, %r6;\n");
            body.append("testp.").append(ops[k]).append(".f64 %p2, %fd1;\nselp.u32 %r6, ").append(1 << k).append(", 0, %p2;\n")
                    .append("or.b32 %r5, %r5, %r6;\n");
        }
        body.append("st.global.u32 [%rd1], %r4;\nst.global.u32 [%rd1+4], %r5;\n");
        int[] r = run(body.toString(), in, 2);
        for (int t = 0; t < in.length; t++) {
            float f = fs[t % fs.length];
            double d = ds[t % ds.length];
            int ef = classes(Float.isFinite(f), Float.isInfinite(f), Float.isNaN(f), Math.abs(f) >= Float.MIN_NORMAL, f != 0);
            int ed = classes(Double.isFinite(d), Double.isInfinite(d), Double.isNaN(d), Math.abs(d) >= Double.MIN_NORMAL, d != 0);
            assertEquals(ef, r[2 * t], "testp of f32 " + f);
            assertEquals(ed, r[2 * t + 1], "testp of f64 " + d);
        }
        assertEquals(1 | 4, r[0], "0 is finite and a number, neither normal nor subnormal");
        assertEquals(1 | 4 | 32, r[8], "MIN_VALUE is subnormal");
        assertEquals(8, r[20], "NaN");
    }

    private static int classes(boolean finite, boolean infinite, boolean nan, boolean atLeastNormal, boolean nonzero) {
        int c = 0;
        c |= finite ? 1 : 0;
        c |= infinite ? 2 : 0;
        c |= !nan ? 4 : 0;
        c |= nan ? 8 : 0;
        c |= finite && atLeastNormal ? 16 : 0;
        c |= finite && !atLeastNormal && nonzero ? 32 : 0;
        return c;
    }

    /** isspacep of generic addresses: each result a bit (1 global, 2 shared, 4 local, 8 const, 16 param). */
    private static String isspacep(String register) {
        StringBuilder b = new StringBuilder("mov.u32 %r20, 0;\n");
        String[] spaces = {"global", "shared", "local", "const", "param"};
        for (int k = 0; k < spaces.length; k++) {
            b.append("isspacep.").append(spaces[k]).append(" %p3, ").append(register).append(";\nselp.u32 %r21, ").append(1 << k)
                    .append(", 0, %p3;\nor.b32 %r20, %r20, %r21;\n");
        }
        return b.toString();
    }

    @Test
    void isspacepTellsTheSharedAndLocalWindowsFromGlobalMemory() {
        String ptx = Rig.HEADER + """
                .const .align 4 .b32 table[4];
                .visible .entry k(.param .u64 out)
                {
                    .reg .pred %p<4>;
                    .reg .b32 %r<32>;
                    .reg .b64 %rd<16>;
                    .shared .align 4 .b8 buf[64];
                    .local .align 4 .b8 scratch[16];
                    ld.param.u64 %rd1, [out];
                    cvta.to.global.u64 %rd1, %rd1;
                    cvta.global.u64 %rd2, %rd1;
                """ + isspacep("%rd2") + """
                    st.global.u32 [%rd1], %r20;
                    mov.u64 %rd3, buf;
                    cvta.shared.u64 %rd3, %rd3;
                    add.s64 %rd3, %rd3, 60;
                """ + isspacep("%rd3") + """
                    st.global.u32 [%rd1+4], %r20;
                    mov.u64 %rd4, scratch;
                    cvta.local.u64 %rd4, %rd4;
                """ + isspacep("%rd4") + """
                    st.global.u32 [%rd1+8], %r20;
                    mov.u64 %rd5, table;
                    cvta.const.u64 %rd5, %rd5;
                """ + isspacep("%rd5") + """
                    st.global.u32 [%rd1+12], %r20;
                """ + isspacep("0") + """
                    st.global.u32 [%rd1+16], %r20;
                    mov.u32 %r5, 0x1000;
                """ + isspacep("%r5") + """
                    st.global.u32 [%rd1+20], %r20;
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new int[6]);
        rig.run(f, 1, 1, out);
        // .const: module .const variables are global allocations here, and cvta.const leaves their address as it is
        assertEquals("[1, 2, 4, 1, 1, 1]", java.util.Arrays.toString(rig.ints(out, 6)),
                "global, shared (its last word), local, a .const variable (global here), null, a 32-bit address");
    }

    @Test
    void nvccsWarpMatchDotProductAndFnsIntrinsicsGiveTheReferenceResults(@TempDir Path dir) throws Exception {
        String ptx = CallsTest.nvcc(dir, """
                extern "C" __global__ void k(const unsigned *in, unsigned *out, int bad) {
                    unsigned t = threadIdx.x + blockIdx.x * blockDim.x;
                    unsigned v = in[t];
                    unsigned any = __match_any_sync(__activemask(), v % 5);
                    int pred;
                    unsigned all = __match_all_sync(0xffffffffu, (unsigned long long) (v >> 31) << 40, &pred);
                    int dp = __dp4a((int) v, (int) (v * 2654435761u), (int) t);
                    unsigned dp2 = __dp2a_hi(v, v ^ 0x5a5a5a5au, t);
                    unsigned f = __fns(v, t % 32, (int) (t % 7) - 3);
                    __nanosleep(10);
                    if ((int) t == bad) __trap();
                    out[5 * t] = any; out[5 * t + 1] = all ^ (unsigned) (pred << 4); out[5 * t + 2] = dp; out[5 * t + 3] = dp2; out[5 * t + 4] = f;
                }
                """);
        for (String insn : new String[] {"match.any.sync.b32", "match.all.sync.b64", "dp4a.s32.s32", "dp2a.hi.u32.u32", "fns.b32",
            "nanosleep.u32", "trap;"}) {
            assertTrue(ptx.contains(insn), "nvcc emits " + insn);
        }
        int n = 3 * 64;
        Random random = new Random(6);
        int[] in = new int[n];
        for (int t = 0; t < n; t++) {
            in[t] = random.nextInt(4) == 0 ? EDGES[random.nextInt(EDGES.length)] : random.nextInt();
        }
        for (int t = 64; t < 96; t++) {
            in[t] &= 0x7FFF_FFFF;   // one warp whose top bits all agree
        }
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new int[5 * n]);
        rig.run(f, 3, 64, rig.upload(in), out, -1);
        int[] r = rig.ints(out, 5 * n);
        for (int t = 0; t < n; t++) {
            int w = t / 32 * 32;
            int any = 0;
            boolean same = true;
            for (int u = w; u < w + 32; u++) {
                any |= (Integer.remainderUnsigned(in[u], 5) == Integer.remainderUnsigned(in[t], 5) ? 1 : 0) << (u - w);
                same &= in[u] >>> 31 == in[t] >>> 31;
            }
            int v = in[t];
            assertEquals(any, r[5 * t], "__match_any_sync " + t);
            assertEquals(same ? ~0x10 : 0, r[5 * t + 1], "__match_all_sync: the mask, the predicate in bit 4 " + t);
            assertEquals(dp4a(v, v * (int) 2654435761L, t, true, true), r[5 * t + 2], "__dp4a " + t);
            assertEquals(dp2a(v, v ^ 0x5a5a5a5a, t, false, false, true), r[5 * t + 3], "__dp2a_hi " + t);
            assertEquals(fns(v, t % 32, t % 7 - 3), r[5 * t + 4], "__fns " + t);
        }
        assertEquals(CUDA_ERROR_LAUNCH_FAILED, rig.launch(f, new int[] {3, 1, 1}, new int[] {64, 1, 1}, 0, rig.upload(in), out, 77) == 0
                ? rig.device.cuCtxSynchronize() : -1, "__trap() in thread 77");
    }

    private int refused(String line) {
        String ptx = Rig.HEADER + """
                .visible .entry k()
                {
                    .reg .pred %p<4>;
                    .reg .b32 %r<8>;
                    .reg .b64 %rd<4>;
                    LINE;
                    ret;
                }
                """.replace("LINE", line);
        long f = rig.function(rig.module(ptx), "k");
        return rig.launch(f, new int[] {1, 1, 1}, new int[] {1, 1, 1}, 0);
    }

    @Test
    void formsOutsideTheCoveredOnesAreRefusedByName() {
        String[][] cases = {
            {"lop3.or.b32 %r1|%p1, %r2, %r3, %r4, 0x96, %p2", "lop3"},
            {"lop3.b32 %r1, %r2, %r3, %r4, %r5", "lop3"},
            {"lop3.b32 %r1, %r2, %r3, %r4, 256", "lop3"},
            {"dp4a.u32.b32 %r1, %r2, %r3, %r4", "dp4a"},
            {"dp2a.u32.u32 %r1, %r2, %r3, %r4", "dp2a"},
            {"bfind.b32 %r1, %r2", "bfind"},
            {"bmsk.b32 %r1, %r2, %r3", "bmsk"},
            {"szext.clamp.b32 %r1, %r2, %r3", "szext"},
            {"testp.finite.f16 %p1, %r2", "f16"},
            {"testp.zero.f32 %p1, %r2", "testp"},
            {"isspacep.param::entry %p1, %rd1", "isspacep"},
            {"match.any.sync.b32 %r1|%p1, %r2, -1", "match.any"},
            {"match.all.b32 %r1, %r2, -1", "match"},
            {"match.any.sync.u16 %r1, %r2, -1", "match"},
            {"prefetch.global.L3 [%rd1]", "prefetch"},
            {"discard.global.L2 [%rd1], 64", "discard"},
            {"nanosleep.u64 %rd1", "nanosleep"},
        };
        for (String[] c : cases) {
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, refused(c[0]), c[0]);
            String detail = rig.device.lastErrorDetail();
            assertTrue(detail.contains(c[1]), c[0] + ": " + detail);
        }
    }
}
