package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.ValueLayout;
import java.math.BigDecimal;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * .f16/.bf16 (and their x2 pairs) bit for bit: add/sub/mul/fma against the exact value rounded to
 * nearest-even by a reference that searches the format's values, min/max/neg/abs, .ftz/.sat, cvt from
 * f32/f64/integers in all four rounding modes and back, setp, and the {a, b} packing of mov.
 */
class HalfTest {
    private static final int OUT = 36;   // 16-bit results per thread

    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    // ---- reference ----

    private static double value(int bits, boolean bf) {
        return bf ? Float.intBitsToFloat((bits & 0xFFFF) << 16) : Float.float16ToFloat((short) bits);
    }

    private static boolean isNaN(int bits, boolean bf) {
        return Double.isNaN(value(bits, bf));
    }

    /** e rounded to the format by mode ("rn", "rz", "rm", "rp"), by a search over its non-negative values (monotonic in their bits). */
    static int round(BigDecimal e, boolean negativeZero, String mode, boolean bf) {
        int inf = bf ? 0x7F80 : 0x7C00;
        if (e.signum() == 0) {
            return negativeZero ? 0x8000 : 0;
        }
        int sign = e.signum() < 0 ? 0x8000 : 0;
        BigDecimal m = e.abs();
        int lo = 0;
        int hi = inf;   // invariant: value(lo) <= m; hi: the first with value > m (inf counts as 2^(emax+1))
        BigDecimal infValue = new BigDecimal(bf ? 0x1p128 : 0x1p16);
        while (hi - lo > 1) {
            int mid = (lo + hi) >>> 1;
            if (new BigDecimal(value(mid, bf)).compareTo(m) <= 0) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        BigDecimal lower = new BigDecimal(value(lo, bf));
        if (lower.compareTo(m) == 0) {
            return sign | lo;
        }
        if (infValue.compareTo(m) <= 0) {
            lo = inf - 1;   // beyond the largest finite value
            hi = inf;
            lower = new BigDecimal(value(lo, bf));
        }
        BigDecimal upper = hi == inf ? infValue : new BigDecimal(value(hi, bf));
        boolean up = switch (mode) {
            case "rz" -> false;
            case "rp" -> sign == 0;
            case "rm" -> sign != 0;
            default -> {
                int c = m.subtract(lower).compareTo(upper.subtract(m));
                yield c > 0 || c == 0 && (lo & 1) != 0;
            }
        };
        if (!up && hi == inf && infValue.compareTo(m) <= 0) {
            return sign | (inf - 1);
        }
        return sign | (up ? hi : lo);
    }

    private static BigDecimal exact(double d) {
        return new BigDecimal(d);
    }

    /** add/sub/mul/fma of x, y, z (bits) rounded to nearest, with IEEE's NaN, infinity and zero-sign rules. */
    static int arithmetic(String op, int x, int y, int z, boolean bf) {
        double a = value(x, bf);
        double b = value(y, bf);
        double c = value(z, bf);
        double nearest = switch (op) {
            case "add" -> a + b;
            case "sub" -> a - b;
            case "mul" -> a * b;
            default -> a * b + c;
        };
        if (Double.isNaN(nearest)) {
            return Half.NAN;
        }
        if (Double.isInfinite(a) || Double.isInfinite(b) || op.equals("fma") && Double.isInfinite(c)) {
            return (nearest > 0 ? 0 : 0x8000) | (bf ? 0x7F80 : 0x7C00);
        }
        BigDecimal e = switch (op) {
            case "add" -> exact(a).add(exact(b));
            case "sub" -> exact(a).subtract(exact(b));
            case "mul" -> exact(a).multiply(exact(b));
            default -> exact(a).multiply(exact(b)).add(exact(c));
        };
        boolean negativeZero = Double.doubleToRawLongBits(switch (op) {
            case "add" -> a + b;
            case "sub" -> a - b;
            case "mul" -> a * b;
            default -> a * b == 0 ? a * b + c : 0.0;   // an exact nonzero product cancelling c gives +0
        }) < 0;
        return round(e, negativeZero, "rn", bf);
    }

    // ---- the kernel ----

    private static final String KERNEL = Rig.HEADER + """
            .visible .entry k(.param .u64 out, .param .u64 in, .param .u32 n)
            {
                .reg .pred %p<4>;
                .reg .b16 %rs<64>;
                .reg .f16 %h<4>;
                .reg .b32 %r<32>;
                .reg .f32 %f<4>;
                .reg .f64 %fd<4>;
                .reg .b64 %rd<16>;
                mov.u32 %r1, %tid.x;
                mov.u32 %r2, %ctaid.x;
                mov.u32 %r3, %ntid.x;
                mad.lo.s32 %r4, %r2, %r3, %r1;
                ld.param.u32 %r5, [n];
                setp.ge.u32 %p1, %r4, %r5;
                @%p1 bra DONE;
                ld.param.u64 %rd1, [out];
                ld.param.u64 %rd2, [in];
                mul.wide.u32 %rd3, %r4, 24;
                add.s64 %rd4, %rd2, %rd3;
                mul.wide.u32 %rd5, %r4, 72;
                add.s64 %rd6, %rd1, %rd5;
                ld.global.b16 %rs1, [%rd4];
                ld.global.b16 %rs2, [%rd4+2];
                ld.global.b16 %rs3, [%rd4+4];
                ld.global.f32 %f1, [%rd4+8];
                ld.global.f64 %fd1, [%rd4+16];
                add.rn.f16 %rs10, %rs1, %rs2;
                st.global.b16 [%rd6], %rs10;
                sub.rn.f16 %rs11, %rs1, %rs2;
                st.global.b16 [%rd6+2], %rs11;
                mul.rn.f16 %rs12, %rs1, %rs2;
                st.global.b16 [%rd6+4], %rs12;
                fma.rn.f16 %rs13, %rs1, %rs2, %rs3;
                st.global.b16 [%rd6+6], %rs13;
                min.f16 %rs14, %rs1, %rs2;
                st.global.b16 [%rd6+8], %rs14;
                max.f16 %rs15, %rs1, %rs2;
                st.global.b16 [%rd6+10], %rs15;
                neg.f16 %rs16, %rs1;
                st.global.b16 [%rd6+12], %rs16;
                abs.f16 %rs17, %rs1;
                st.global.b16 [%rd6+14], %rs17;
                add.rn.ftz.f16 %rs18, %rs1, %rs2;
                st.global.b16 [%rd6+16], %rs18;
                mul.rn.sat.f16 %rs19, %rs1, %rs2;
                st.global.b16 [%rd6+18], %rs19;
                add.rn.bf16 %rs20, %rs1, %rs2;
                st.global.b16 [%rd6+20], %rs20;
                sub.rn.bf16 %rs21, %rs1, %rs2;
                st.global.b16 [%rd6+22], %rs21;
                mul.rn.bf16 %rs22, %rs1, %rs2;
                st.global.b16 [%rd6+24], %rs22;
                fma.rn.bf16 %rs23, %rs1, %rs2, %rs3;
                st.global.b16 [%rd6+26], %rs23;
                min.bf16 %rs24, %rs1, %rs2;
                st.global.b16 [%rd6+28], %rs24;
                max.bf16 %rs25, %rs1, %rs2;
                st.global.b16 [%rd6+30], %rs25;
                cvt.rn.f16.f32 %rs26, %f1;
                st.global.b16 [%rd6+32], %rs26;
                cvt.rz.f16.f32 %rs27, %f1;
                st.global.b16 [%rd6+34], %rs27;
                cvt.rm.f16.f32 %rs28, %f1;
                st.global.b16 [%rd6+36], %rs28;
                cvt.rp.f16.f32 %rs29, %f1;
                st.global.b16 [%rd6+38], %rs29;
                cvt.rn.bf16.f32 %rs30, %f1;
                st.global.b16 [%rd6+40], %rs30;
                cvt.rz.bf16.f32 %rs31, %f1;
                st.global.b16 [%rd6+42], %rs31;
                cvt.rm.bf16.f32 %rs32, %f1;
                st.global.b16 [%rd6+44], %rs32;
                cvt.rp.bf16.f32 %rs33, %f1;
                st.global.b16 [%rd6+46], %rs33;
                cvt.rn.f16.f64 %rs34, %fd1;
                st.global.b16 [%rd6+48], %rs34;
                cvt.rz.f16.f64 %rs35, %fd1;
                st.global.b16 [%rd6+50], %rs35;
                cvt.rm.bf16.f64 %rs36, %fd1;
                st.global.b16 [%rd6+52], %rs36;
                cvt.rp.bf16.f64 %rs37, %fd1;
                st.global.b16 [%rd6+54], %rs37;
                // pairs: {x, y} + {z, x} and {x, y} * {z, x}; cvt.rn.f16x2.f32 packs (f1 high, f1 * 2 low)
                mov.b32 %r10, {%rs1, %rs2};
                mov.b32 %r11, {%rs3, %rs1};
                add.rn.f16x2 %r12, %r10, %r11;
                st.global.b32 [%rd6+56], %r12;
                mul.rn.bf16x2 %r13, %r10, %r11;
                st.global.b32 [%rd6+60], %r13;
                add.f32 %f2, %f1, %f1;
                cvt.rn.f16x2.f32 %r14, %f1, %f2;
                st.global.b32 [%rd6+64], %r14;
                // back: f16 to f32, to s32 (rni), setp.lt.f16 / setp.gtu.bf16 as bits 0 and 1
                cvt.f32.f16 %f3, %rs1;
                st.global.f32 [%rd6+68], %f3;
                DONE:
                ret;
            }
            """;

    private static int u16(java.lang.foreign.MemorySegment s, long offset) {
        return s.get(ValueLayout.JAVA_SHORT_UNALIGNED, offset) & 0xFFFF;
    }

    private static int fromFloat(double v, String mode, boolean bf) {
        if (Double.isNaN(v)) {
            return Half.NAN;
        }
        if (Double.isInfinite(v)) {
            return (v > 0 ? 0 : 0x8000) | (bf ? 0x7F80 : 0x7C00);
        }
        return round(exact(v), Double.doubleToRawLongBits(v) < 0, mode, bf);
    }

    @Test
    void arithmeticAndConversionsMatchTheExactValueRounded() {
        Random random = new Random(3);
        int n = 3000;
        short[] h = new short[3 * n];
        float[] f = new float[n];
        double[] d = new double[n];
        int[] special = {0, 0x8000, 1, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0x3C01,
            0x3555, 0x0080, 0x7F7F, 0x7F80, 0xFF80, 0x3F80, 0x0001, 0x007F, 0x4000};
        for (int i = 0; i < 3 * n; i++) {
            h[i] = (short) (i < special.length * special.length * 3 && i % 3 != 2
                    ? special[(i % 3 == 0 ? i / 3 / special.length : i / 3 % special.length)]
                    : random.nextInt(8) == 0 ? special[random.nextInt(special.length)] : random.nextInt(1 << 16));
        }
        for (int i = 0; i < n; i++) {
            int kind = random.nextInt(4);
            f[i] = switch (kind) {
                case 0 -> Float.intBitsToFloat(random.nextInt());
                case 1 -> Float.float16ToFloat((short) random.nextInt(1 << 16)) * (1 + (random.nextInt(3) - 1) * 0x1p-11f);
                case 2 -> (float) ((random.nextDouble() - 0.5) * Math.pow(2, random.nextInt(60) - 30));
                default -> Float.intBitsToFloat((random.nextInt(1 << 16) << 16) | (random.nextBoolean() ? 0x8000 : random.nextInt(1 << 16)));
            };
            d[i] = i % 2 == 0 ? (double) f[i] + Math.ulp(f[i]) * random.nextDouble() : Double.longBitsToDouble(random.nextLong());
        }
        f[0] = 65520f;   // the f16 overflow tie
        f[1] = -65519.996f;
        f[2] = 0x1p-25f;   // half the smallest f16 denormal: a tie to +0
        f[3] = 0x1.8p-25f;
        f[4] = Float.MAX_VALUE;
        f[5] = Float.NaN;
        f[6] = 1.00390625f;   // a bf16 tie to even
        f[7] = -0f;
        var in = rig.arena.allocate(24L * n, 8);
        for (int i = 0; i < n; i++) {
            in.set(ValueLayout.JAVA_SHORT_UNALIGNED, 24L * i, h[3 * i]);
            in.set(ValueLayout.JAVA_SHORT_UNALIGNED, 24L * i + 2, h[3 * i + 1]);
            in.set(ValueLayout.JAVA_SHORT_UNALIGNED, 24L * i + 4, h[3 * i + 2]);
            in.set(ValueLayout.JAVA_FLOAT_UNALIGNED, 24L * i + 8, f[i]);
            in.set(ValueLayout.JAVA_DOUBLE_UNALIGNED, 24L * i + 16, d[i]);
        }
        long fn = rig.function(rig.module(KERNEL), "k");
        long out = rig.alloc(72L * n);
        rig.run(fn, (n + 127) / 128, 128, out, rig.upload(in), n);
        var r = rig.download(out, 72L * n);
        int failures = 0;
        StringBuilder report = new StringBuilder();
        for (int i = 0; i < n; i++) {
            int x = h[3 * i] & 0xFFFF;
            int y = h[3 * i + 1] & 0xFFFF;
            int z = h[3 * i + 2] & 0xFFFF;
            long o = 72L * i;
            int[] want = new int[OUT];
            int[] got = new int[OUT];
            String[] what = new String[OUT];
            int k = 0;
            for (boolean bf : new boolean[] {false, true}) {
                for (String op : new String[] {"add", "sub", "mul", "fma"}) {
                    what[k] = op + (bf ? ".bf16" : ".f16");
                    want[k++] = arithmetic(op, x, y, z, bf);
                }
                what[k] = "min";
                want[k++] = minMax(x, y, bf, true);
                what[k] = "max";
                want[k++] = minMax(x, y, bf, false);
                if (!bf) {
                    what[k] = "neg";
                    want[k++] = x ^ 0x8000;
                    what[k] = "abs";
                    want[k++] = x & 0x7FFF;
                    what[k] = "add.ftz";
                    want[k++] = flush(arithmetic("add", flush(x), flush(y), 0, false));
                    what[k] = "mul.sat";
                    want[k++] = sat(arithmetic("mul", x, y, 0, false));
                }
            }
            for (boolean bf : new boolean[] {false, true}) {
                for (String mode : new String[] {"rn", "rz", "rm", "rp"}) {
                    what[k] = "cvt." + mode + (bf ? ".bf16" : ".f16") + ".f32(" + f[i] + ")";
                    want[k++] = fromFloat(f[i], mode, bf);
                }
            }
            String[] dm = {"rn.f16", "rz.f16", "rm.bf16", "rp.bf16"};
            for (String m : dm) {
                what[k] = "cvt." + m + ".f64(" + d[i] + ")";
                want[k++] = fromFloat(d[i], m.substring(0, 2), m.endsWith("bf16"));
            }
            for (int j = 0; j < k; j++) {
                got[j] = u16(r, o + 2L * j);
            }
            // pairs
            what[k] = "add.f16x2 low";
            want[k] = arithmetic("add", x, z, 0, false);
            got[k++] = u16(r, o + 56);
            what[k] = "add.f16x2 high";
            want[k] = arithmetic("add", y, x, 0, false);
            got[k++] = u16(r, o + 58);
            what[k] = "mul.bf16x2 low";
            want[k] = arithmetic("mul", x, z, 0, true);
            got[k++] = u16(r, o + 60);
            what[k] = "mul.bf16x2 high";
            want[k] = arithmetic("mul", y, x, 0, true);
            got[k++] = u16(r, o + 62);
            what[k] = "cvt.rn.f16x2.f32 low (2f)";
            want[k] = fromFloat(f[i] + f[i], "rn", false);
            got[k++] = u16(r, o + 64);
            what[k] = "cvt.rn.f16x2.f32 high";
            want[k] = fromFloat(f[i], "rn", false);
            got[k++] = u16(r, o + 66);
            float back = r.get(ValueLayout.JAVA_FLOAT_UNALIGNED, o + 68);
            what[k] = "cvt.f32.f16 (low 16 bits of the f32 bits)";
            want[k] = isNaN(x, false) ? 0x7FFF : Float.floatToRawIntBits(Float.float16ToFloat((short) x)) & 0xFFFF;
            got[k++] = isNaN(x, false) ? Float.floatToRawIntBits(back) >>> 16 : Float.floatToRawIntBits(back) & 0xFFFF;
            assertTrue(k <= OUT);
            for (int j = 0; j < k; j++) {
                if (want[j] != got[j] && failures++ < 25) {
                    report.append(String.format("thread %d %s of %04x %04x %04x: expected %04x, got %04x%n", i, what[j], x, y, z, want[j], got[j]));
                }
            }
        }
        assertEquals(0, failures, report::toString);
    }

    private static int minMax(int x, int y, boolean bf, boolean min) {
        boolean nx = isNaN(x, bf);
        boolean ny = isNaN(y, bf);
        if (nx && ny) {
            return Half.NAN;
        }
        if (nx || ny) {
            return nx ? y : x;
        }
        double a = value(x, bf);
        double b = value(y, bf);
        if (a == b && a == 0) {
            boolean xNegative = (x & 0x8000) != 0;
            return min == xNegative ? x : y;   // -0 below +0
        }
        return (a < b) == min ? x : y;
    }

    private static int flush(int h) {
        return (h & 0x7C00) == 0 ? h & 0x8000 : h;
    }

    private static int sat(int h) {
        double v = value(h, false);
        return Double.isNaN(v) || v <= 0 ? 0 : v >= 1 ? 0x3C00 : h;
    }

    @Test
    void conversionsToIntegersAndBackComparisonsAndWideIntegers() {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out)
                {
                    .reg .pred %p<8>;
                    .reg .b16 %rs<16>;
                    .reg .b32 %r<32>;
                    .reg .b64 %rd<8>;
                    ld.param.u64 %rd1, [out];
                    mov.b16 %rs1, 0x4140;       // 2.625
                    mov.b16 %rs2, 0xC140;       // -2.625
                    mov.b16 %rs3, 0x7E00;       // NaN
                    mov.b16 %rs4, 0x7C00;       // inf
                    cvt.rni.s32.f16 %r1, %rs1;
                    st.global.u32 [%rd1], %r1;
                    cvt.rmi.s32.f16 %r2, %rs2;
                    st.global.u32 [%rd1+4], %r2;
                    cvt.rzi.u32.f16 %r3, %rs2;
                    st.global.u32 [%rd1+8], %r3;
                    cvt.rzi.s32.f16 %r4, %rs3;
                    st.global.u32 [%rd1+12], %r4;
                    cvt.rzi.u8.f16 %r5, %rs4;
                    st.global.u32 [%rd1+16], %r5;
                    mov.u32 %r6, 2049;
                    cvt.rn.f16.s32 %rs5, %r6;
                    cvt.rp.f16.s32 %rs6, %r6;
                    mov.b32 %r7, {%rs5, %rs6};
                    st.global.u32 [%rd1+20], %r7;
                    mov.u64 %rd2, -1;
                    cvt.rz.bf16.u64 %rs7, %rd2;
                    cvt.rn.bf16.u64 %rs8, %rd2;
                    mov.b32 %r8, {%rs7, %rs8};
                    st.global.u32 [%rd1+24], %r8;
                    mov.u32 %r9, 70000;
                    cvt.rn.f16.u32 %rs9, %r9;
                    cvt.rz.f16.u32 %rs10, %r9;
                    mov.b32 %r10, {%rs9, %rs10};
                    st.global.u32 [%rd1+28], %r10;
                    setp.lt.f16 %p1, %rs2, %rs1;
                    selp.u32 %r11, 1, 0, %p1;
                    setp.lt.f16 %p2, %rs3, %rs1;
                    selp.u32 %r12, 1, 0, %p2;
                    mov.b16 %rs0, 0x7FC0;       // bf16 NaN
                    setp.ltu.bf16 %p3, %rs0, %rs1;
                    selp.u32 %r13, 1, 0, %p3;
                    setp.eq.ftz.f16 %p4, 0x0001, %rs1;
                    st.global.u32 [%rd1+32], %r11;
                    st.global.u32 [%rd1+36], %r12;
                    st.global.u32 [%rd1+40], %r13;
                    mov.b32 %r14, {%rs1, %rs2};
                    mov.b32 {%rs11, %rs12}, %r14;
                    neg.f16x2 %r15, %r14;
                    st.global.u32 [%rd1+44], %r15;
                    mov.b16 %rs13, 0x0001;
                    mov.b16 %rs14, 0x3C00;
                    fma.rn.sat.f16 %rs15, %rs14, %rs14, %rs14;
                    mov.b32 %r16, {%rs15, %rs12};
                    st.global.u32 [%rd1+48], %r16;
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx.replace("setp.eq.ftz.f16 %p4, 0x0001, %rs1;\n", "")), "k");
        long out = rig.upload(new int[13]);
        rig.run(f, 1, 1, out);
        int[] r = rig.ints(out, 13);
        assertEquals(3, r[0], "rni 2.625");
        assertEquals(-3, r[1], "rmi -2.625");
        assertEquals(0, r[2], "negative to u32 clamps at 0");
        assertEquals(0, r[3], "NaN to s32 is 0");
        assertEquals(255, r[4], "inf to u8 saturates");
        assertEquals(0x6800, r[5] & 0xFFFF, "2049 rounds to 2048 (tie to even)");
        assertEquals(0x6801, r[5] >>> 16, "rp: 2050");
        assertEquals(0x5F7F, r[6] & 0xFFFF, "2^64-1 to bf16, rz: the largest below 2^64");
        assertEquals(0x5F80, r[6] >>> 16, "rn: 2^64");
        assertEquals(0x7C00, r[7] & 0xFFFF, "70000 overflows f16 to inf (rn)");
        assertEquals(0x7BFF, r[7] >>> 16, "rz: 65504");
        assertEquals(1, r[8], "-2.625 < 2.625");
        assertEquals(0, r[9], "NaN < x is false");
        assertEquals(1, r[10], "ltu with NaN is true");
        assertEquals(0x4140C140, r[11], "neg.f16x2 of {2.625, -2.625}");
        assertEquals(0xC140_3C00, r[12], "fma.sat clamps 2 to 1; the unpacked high half");
    }

    @Test
    void nvccHalfIntrinsicsMatchTheReference() throws Exception {
        String ptx = CallsTest.nvcc(java.nio.file.Files.createTempDirectory("half"), """
                #include <cuda_fp16.h>
                #include <cuda_bf16.h>
                extern "C" __global__ void k(const unsigned short* in, const float* f, unsigned short* out, int n) {
                    int i = blockIdx.x * blockDim.x + threadIdx.x;
                    if (i >= n) return;
                    __half x = __ushort_as_half(in[3 * i]), y = __ushort_as_half(in[3 * i + 1]), z = __ushort_as_half(in[3 * i + 2]);
                    __nv_bfloat16 bx = __ushort_as_bfloat16(in[3 * i]), by = __ushort_as_bfloat16(in[3 * i + 1]);
                    unsigned short* o = out + 8 * i;
                    o[0] = __half_as_ushort(__hadd(x, y));
                    o[1] = __half_as_ushort(__hmul(x, y));
                    o[2] = __half_as_ushort(__hfma(x, y, z));
                    __half2 p = __hadd2(__halves2half2(x, y), __halves2half2(z, x));
                    o[3] = __half_as_ushort(__high2half(p));
                    o[4] = __half_as_ushort(__float2half_rz(f[i]));
                    o[5] = __bfloat16_as_ushort(__float2bfloat16(f[i]));
                    o[6] = __bfloat16_as_ushort(__hmul(bx, by));
                    o[7] = __hlt(x, y) ? 1 : 0;
                }
                """);
        Random random = new Random(11);
        int n = 2000;
        short[] h = new short[3 * n];
        float[] f = new float[n];
        for (int i = 0; i < 3 * n; i++) {
            h[i] = (short) random.nextInt(1 << 16);
        }
        for (int i = 0; i < n; i++) {
            f[i] = i % 2 == 0 ? Float.intBitsToFloat(random.nextInt()) : (float) ((random.nextDouble() - 0.5) * Math.pow(2, random.nextInt(50) - 25));
        }
        long fn = rig.function(rig.module(ptx), "k");
        long out = rig.alloc(16L * n);
        rig.run(fn, (n + 127) / 128, 128, rig.upload(rig.arena.allocateFrom(ValueLayout.JAVA_SHORT, h)), rig.upload(f), out, n);
        var r = rig.download(out, 16L * n);
        for (int i = 0; i < n; i++) {
            int x = h[3 * i] & 0xFFFF;
            int y = h[3 * i + 1] & 0xFFFF;
            int z = h[3 * i + 2] & 0xFFFF;
            String at = String.format(" of %04x %04x %04x / %s", x, y, z, f[i]);
            assertEquals(arithmetic("add", x, y, 0, false), u16(r, 16L * i), "__hadd" + at);
            assertEquals(arithmetic("mul", x, y, 0, false), u16(r, 16L * i + 2), "__hmul" + at);
            assertEquals(arithmetic("fma", x, y, z, false), u16(r, 16L * i + 4), "__hfma" + at);
            assertEquals(arithmetic("add", y, x, 0, false), u16(r, 16L * i + 6), "__hadd2 high" + at);
            assertEquals(fromFloat(f[i], "rz", false), u16(r, 16L * i + 8), "__float2half_rz" + at);
            assertEquals(fromFloat(f[i], "rn", true), u16(r, 16L * i + 10), "__float2bfloat16" + at);
            assertEquals(arithmetic("mul", x, y, 0, true), u16(r, 16L * i + 12), "bf16 __hmul" + at);
            assertEquals(value(x, false) < value(y, false) ? 1 : 0, u16(r, 16L * i + 14), "__hlt" + at);
        }
    }

    @Test
    void nvccHalf2ComparisonsIntegralRoundingAndRelu() throws Exception {
        String ptx = CallsTest.nvcc(java.nio.file.Files.createTempDirectory("half2"), """
                #include <cuda_fp16.h>
                #include <cuda_bf16.h>
                extern "C" __global__ void k(const unsigned* in, unsigned* out) {
                    int i = blockIdx.x * blockDim.x + threadIdx.x;
                    __half2 a = *(const __half2*)&in[2 * i], b = *(const __half2*)&in[2 * i + 1];
                    __nv_bfloat162 c = *(const __nv_bfloat162*)&in[2 * i], d = *(const __nv_bfloat162*)&in[2 * i + 1];
                    __half2 r = __hlt2(a, b);
                    out[8 * i] = *(unsigned*)&r;
                    out[8 * i + 1] = __hle2_mask(a, b);
                    out[8 * i + 2] = __hbgtu2(a, b);
                    __nv_bfloat162 q = __hge2(c, d);
                    out[8 * i + 3] = *(unsigned*)&q;
                    __half h = hrint(__low2half(a)), t = htrunc(__high2half(a));
                    out[8 * i + 4] = __half_as_ushort(h) | (__half_as_ushort(t) << 16);
                    out[8 * i + 5] = __half_as_ushort(__hfma_relu(__low2half(a), __low2half(b), __high2half(b)));
                    out[8 * i + 6] = __bfloat16_as_ushort(hfloor(__low2bfloat16(c)));
                    out[8 * i + 7] = __hisnan(__low2half(a)) + 2 * __hisinf(__high2half(a));
                }
                """);
        Random random = new Random(5);
        int n = 1024;
        int[] in = new int[2 * n];
        int[] special = {0x7C00, 0xFC00, 0x7E00, 0x3C00, 0x0001, 0x8000, 0, 0x7F80, 0x7FC0, 0x4140};
        for (int i = 0; i < in.length; i++) {
            in[i] = random.nextInt(4) == 0 ? special[random.nextInt(special.length)] | special[random.nextInt(special.length)] << 16 : random.nextInt();
        }
        long fn = rig.function(rig.module(ptx), "k");
        long out = rig.alloc(32L * n);
        rig.run(fn, n / 128, 128, rig.upload(in), out);
        int[] r = rig.ints(out, 8 * n);
        for (int i = 0; i < n; i++) {
            int a = in[2 * i];
            int b = in[2 * i + 1];
            int[] ah = {a & 0xFFFF, a >>> 16};
            int[] bh = {b & 0xFFFF, b >>> 16};
            int lt = 0;
            int le = 0;
            int gtu = 1;
            int ge = 0;
            for (int k = 0; k < 2; k++) {
                double x = value(ah[k], false);
                double y = value(bh[k], false);
                lt |= (x < y ? 0x3C00 : 0) << (16 * k);
                le |= (x <= y ? 0xFFFF : 0) << (16 * k);
                gtu &= Double.isNaN(x) || Double.isNaN(y) || x > y ? 1 : 0;
                ge |= (value(ah[k], true) >= value(bh[k], true) ? 0x3F80 : 0) << (16 * k);
            }
            String at = String.format(" of %08x %08x", a, b);
            assertEquals(lt, r[8 * i], "__hlt2" + at);
            assertEquals(le, r[8 * i + 1], "__hle2_mask" + at);
            assertEquals(gtu, r[8 * i + 2], "__hbgtu2" + at);
            assertEquals(ge, r[8 * i + 3], "bf16 __hge2" + at);
            double lo = value(ah[0], false);
            double hi = value(ah[1], false);
            int rint = Double.isNaN(lo) ? Half.NAN : Float.floatToFloat16((float) Math.rint(lo)) & 0xFFFF;
            int trunc = Double.isNaN(hi) ? Half.NAN : Float.floatToFloat16((float) (hi < 0 ? Math.ceil(hi) : Math.floor(hi))) & 0xFFFF;
            assertEquals(rint | trunc << 16, r[8 * i + 4], "hrint, htrunc" + at);
            int fma = arithmetic("fma", ah[0], bh[0], bh[1], false);
            assertEquals(fma != Half.NAN && (fma & 0x8000) != 0 ? 0 : fma, r[8 * i + 5], "__hfma_relu" + at);
            double c = value(ah[0], true);
            assertEquals(Double.isNaN(c) ? Half.NAN : Float.floatToRawIntBits((float) Math.floor(c)) >>> 16, r[8 * i + 6], "bf16 hfloor" + at);
            // __hisinf is 1 for +inf and -1 for -inf
            assertEquals((Double.isNaN(lo) ? 1 : 0) + 2 * (Double.isInfinite(hi) ? (hi > 0 ? 1 : -1) : 0), r[8 * i + 7], "__hisnan, __hisinf" + at);
        }
    }

    @Test
    void setComparesIntoMasksOrOnesAndIntegralRoundingAndRelu() {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out)
                {
                    .reg .pred %p<4>;
                    .reg .b16 %rs<16>;
                    .reg .b32 %r<32>;
                    .reg .f32 %f<4>;
                    .reg .b64 %rd<4>;
                    ld.param.u64 %rd1, [out];
                    mov.b32 %r1, 0x7E003C00;      // {1.0, NaN}
                    mov.b32 %r2, 0x40004000;      // {2.0, 2.0}
                    set.lt.f16x2.f16x2 %r3, %r1, %r2;
                    st.global.u32 [%rd1], %r3;
                    set.ltu.u32.f16x2 %r4, %r1, %r2;
                    st.global.u32 [%rd1+4], %r4;
                    mov.b32 %r5, 0x7FC03F80;      // bf16 {1.0, NaN}
                    set.ge.bf16x2.bf16x2 %r6, %r2, %r5;
                    st.global.u32 [%rd1+8], %r6;
                    mov.f32 %f1, 0f3F800000;
                    set.gt.u32.f32 %r7, %f1, 0f00000000;
                    st.global.u32 [%rd1+12], %r7;
                    set.gt.f32.s32 %r8, -1, 2;
                    st.global.u32 [%rd1+16], %r8;
                    setp.eq.u32 %p1, 1, 1;
                    set.lo.xor.s32.u32 %r9, 1, -1, %p1;
                    st.global.u32 [%rd1+20], %r9;
                    set.eq.f32.f32 %r10, %f1, %f1;
                    st.global.u32 [%rd1+24], %r10;
                    mov.b16 %rs1, 0xC140;         // -2.625
                    cvt.rni.f16.f16 %rs2, %rs1;
                    cvt.rzi.f16.f16 %rs3, %rs1;
                    cvt.rmi.bf16.bf16 %rs4, %rs1;  // bf16 0xC140 is -12.0
                    cvt.rpi.f16.f16 %rs5, %rs1;
                    mov.b32 %r11, {%rs2, %rs3};
                    mov.b32 %r12, {%rs4, %rs5};
                    st.global.u32 [%rd1+28], %r11;
                    st.global.u32 [%rd1+32], %r12;
                    mov.b16 %rs6, 0x3C00;
                    fma.rn.relu.f16 %rs7, %rs1, %rs6, %rs6;   // -2.625 + 1 < 0: 0
                    fma.rn.relu.f16 %rs8, %rs6, %rs6, %rs6;   // 2
                    mov.b32 %r13, {%rs7, %rs8};
                    st.global.u32 [%rd1+36], %r13;
                    mov.b16 %rs9, 0x7E00;
                    min.NaN.f16 %rs10, %rs1, %rs9;
                    max.f16 %rs11, %rs1, %rs9;
                    mov.b32 %r14, {%rs10, %rs11};
                    st.global.u32 [%rd1+40], %r14;
                    mov.b32 %r15, 0x7FC03F80;       // bf16 {1, NaN}
                    max.NaN.bf16x2 %r16, %r15, %r15;
                    st.global.u32 [%rd1+44], %r16;
                    cvt.ftz.f32.f16 %f2, %rs1;
                    st.global.f32 [%rd1+48], %f2;
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new int[13]);
        rig.run(f, 1, 1, out);
        int[] r = rig.ints(out, 13);
        assertEquals(0x0000_3C00, r[0], "{1 < 2, NaN < 2} as f16 ones");
        assertEquals(0xFFFF_FFFF, r[1], "ltu: NaN counts as true; a u32 mask");
        assertEquals(0x0000_3F80, r[2], "{2 >= 1, 2 >= NaN} as bf16 ones");
        assertEquals(-1, r[3], "set.gt.u32.f32 true: all ones");
        assertEquals(0, r[4], "-1 > 2 is false");
        assertEquals(0, r[5], "1 <u 0xFFFFFFFF is true, xor true: false");
        assertEquals(0x3F80_0000, r[6], "1.0f for true");
        assertEquals(0xC000_C200, r[7], "rni(-2.625) = -3, rzi = -2");
        assertEquals(0xC000_C140, r[8], "rmi of bf16 -12 is itself; rpi(-2.625) = -2");
        assertEquals(0x4000_0000, r[9], "relu: 0, then 2");
        assertEquals(0xC140_7FFF, r[10], "min.NaN with a NaN: the canonical NaN; max without .NaN: the number");
        assertEquals(0x7FFF_3F80, r[11], "max.NaN.bf16x2 per half");
        assertEquals(Float.floatToRawIntBits(-2.625f), r[12], "cvt.ftz.f32.f16");
    }

    @Test
    void formsThatAreNotCoveredAreRefused() {
        for (String insn : new String[] {"add.rz.f16 %rs1, %rs2, %rs3;", "fma.f16 %rs1, %rs2, %rs2, %rs3;", "add.ftz.bf16 %rs1, %rs2, %rs3;",
                "fma.rn.relu.sat.f16 %rs1, %rs2, %rs2, %rs3;", "cvt.rn.relu.f16.f32 %rs1, %r1;", "min.xorsign.abs.f16 %rs1, %rs2, %rs3;", "min.NaN.f32 %r1, %r2, %r3;", "cvt.f16.f32 %rs1, %r1;", "cvt.rn.bf16.f16 %rs1, %rs2;",
                "ex2.approx.f16 %rs1, %rs2;", "setp.lt.f16x2 %p1|%p2, %r1, %r2;", "add.f16 %rs1, %rs2, 0x3C00;", "ld.global.f16 %rs1, [%rd1];",
                "cvt.rn.f16.f16 %rs1, %rs2;", "cvt.rni.f16x2.f16x2 %r1, %r2;", "set.lt.pred.f32 %p1, %r1, %r2;", "and.f16 %rs1, %rs2, %rs3;"}) {
            String ptx = Rig.HEADER + ".visible .entry k()\n{\n    .reg .pred %p<4>;\n    .reg .b16 %rs<4>;\n    .reg .b32 %r<4>;\n"
                    + "    .reg .b64 %rd<4>;\n    " + insn + "\n    ret;\n}\n";
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED,
                    rig.launch(rig.function(rig.module(ptx), "k"), new int[] {1, 1, 1}, new int[] {1, 1, 1}, 0), insn);
        }
    }
}
