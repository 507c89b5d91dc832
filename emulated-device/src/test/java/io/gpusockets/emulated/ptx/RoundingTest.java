package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.math.BigDecimal;
import java.math.MathContext;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Directed rounding (.rz/.rm/.rp, and .rn for comparison) of add, sub, mul, fma, mad, div, rcp and
 * sqrt on .f32 and .f64, bit for bit against a reference computed here from the exact value
 * (BigDecimal): overflow, underflow into denormals, ties, exact zeros' signs, NaN and infinities.
 */
class RoundingTest {
    private static final String[] MODES = {"rn", "rz", "rm", "rp"};
    private static final String[] OPS = {"add", "sub", "mul", "fma", "mad", "div", "rcp", "sqrt"};
    private static final MathContext PRECISE = new MathContext(2500);

    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    /** Every op in every mode for each (x, y, z) triple; results[thread][op * 4 + mode] as raw bits. */
    private long[][] run(boolean f64, double[][] triples) {
        String t = f64 ? "f64" : "f32";
        int size = f64 ? 8 : 4;
        int outs = OPS.length * MODES.length;
        StringBuilder body = new StringBuilder();
        int k = 0;
        for (String op : OPS) {
            for (String mode : MODES) {
                String operands = switch (op) {
                    case "fma", "mad" -> "%f1, %f2, %f3";
                    case "rcp", "sqrt" -> "%f1";
                    default -> "%f1, %f2";
                };
                body.append("    ").append(op).append('.').append(mode).append('.').append(t).append(" %f10, ").append(operands).append(";\n");
                body.append("    st.global.").append(t).append(" [%rd6+").append(k * size).append("], %f10;\n");
                k++;
            }
        }
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out, .param .u64 in, .param .u32 n)
                {
                    .reg .pred %p<2>;
                    .reg .T %f<16>;
                    .reg .b32 %r<8>;
                    .reg .b64 %rd<8>;
                    mov.u32 %r1, %tid.x;
                    mov.u32 %r2, %ctaid.x;
                    mov.u32 %r3, %ntid.x;
                    mad.lo.s32 %r4, %r2, %r3, %r1;
                    ld.param.u32 %r5, [n];
                    setp.ge.u32 %p1, %r4, %r5;
                    @%p1 bra DONE;
                    ld.param.u64 %rd1, [out];
                    ld.param.u64 %rd2, [in];
                    mul.wide.u32 %rd3, %r4, IN;
                    add.s64 %rd4, %rd2, %rd3;
                    ld.global.T %f1, [%rd4];
                    ld.global.T %f2, [%rd4+S1];
                    ld.global.T %f3, [%rd4+S2];
                    mul.wide.u32 %rd5, %r4, OUT;
                    add.s64 %rd6, %rd1, %rd5;
                """.replace(".T", "." + t).replace("IN", String.valueOf(3 * size)).replace("S1", String.valueOf(size))
                .replace("S2", String.valueOf(2 * size)).replace("OUT", String.valueOf(outs * size))
                + body + "DONE:\n    ret;\n}\n";
        long f = rig.function(rig.module(ptx), "k");
        int n = triples.length;
        long in;
        if (f64) {
            double[] v = new double[3 * n];
            for (int i = 0; i < n; i++) {
                System.arraycopy(triples[i], 0, v, 3 * i, 3);
            }
            in = rig.upload(rig.arena.allocateFrom(ValueLayout.JAVA_DOUBLE, v));
        } else {
            float[] v = new float[3 * n];
            for (int i = 0; i < n; i++) {
                for (int j = 0; j < 3; j++) {
                    v[3 * i + j] = (float) triples[i][j];
                }
            }
            in = rig.upload(v);
        }
        long out = rig.alloc((long) n * outs * size);
        int block = 128;
        rig.run(f, (n + block - 1) / block, block, out, in, n);
        long[][] r = new long[n][outs];
        if (f64) {
            long[] all = rig.longs(out, n * outs);
            for (int i = 0; i < n; i++) {
                System.arraycopy(all, i * outs, r[i], 0, outs);
            }
        } else {
            int[] all = rig.ints(out, n * outs);
            for (int i = 0; i < n; i++) {
                for (int j = 0; j < outs; j++) {
                    r[i][j] = all[i * outs + j] & 0xFFFF_FFFFL;
                }
            }
        }
        return r;
    }

    private static double[][] inputs(boolean f64) {
        List<Double> special = new ArrayList<>(List.of(0.0, -0.0, 1.0, -1.0, 3.0, 0.1, -7.5, 2.0, 0.5, Double.NaN,
                Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY));
        if (f64) {
            special.addAll(List.of(Double.MIN_VALUE, -Double.MIN_VALUE, Double.MIN_NORMAL, Double.MAX_VALUE, -Double.MAX_VALUE,
                    Math.nextUp(1.0), Math.nextDown(1.0), 0x1p-1000, 0x1p1000, 3 * Double.MIN_VALUE, 0x1.8p-1022, 1e308));
        } else {
            special.addAll(List.of((double) Float.MIN_VALUE, (double) -Float.MIN_VALUE, (double) Float.MIN_NORMAL, (double) Float.MAX_VALUE,
                    (double) -Float.MAX_VALUE, (double) Math.nextUp(1f), (double) Math.nextDown(1f), 0x1p-100, 0x1p100, 0x1p-140,
                    (double) (3 * Float.MIN_VALUE), 1e38));
        }
        if (!f64) {
            special.replaceAll(v -> (double) (float) (double) v);
        }
        List<double[]> out = new ArrayList<>();
        for (double x : special) {
            for (double y : special) {
                out.add(new double[] {x, y, special.get((out.size() * 7) % special.size())});
            }
        }
        Random random = new Random(42);
        for (int i = 0; i < 1500; i++) {
            double[] t = new double[3];
            for (int j = 0; j < 3; j++) {
                int span = f64 ? 2200 : 300;
                double v = (random.nextDouble() + 1) * Math.pow(2, random.nextInt(i % 3 == 0 ? span : 60) - (i % 3 == 0 ? span / 2 : 30));
                t[j] = random.nextBoolean() ? -v : v;
            }
            if (i % 5 == 0) {
                t[2] = -t[0] * t[1];   // near cancellation in fma
            }
            if (i % 7 == 0) {
                t[1] = -t[0];   // exact cancellation in add
            }
            if (!f64) {
                for (int j = 0; j < 3; j++) {
                    t[j] = (float) t[j];
                }
            }
            out.add(t);
        }
        return out.toArray(new double[0][]);
    }

    private static BigDecimal exact(double d) {
        return new BigDecimal(d);
    }

    /** The exact value of op (null when it is not finite and nonzero-exact: those are checked against Java's IEEE result). */
    private static BigDecimal exactResult(String op, double x, double y, double z) {
        boolean three = op.equals("fma") || op.equals("mad");
        boolean one = op.equals("rcp") || op.equals("sqrt");
        if (!Double.isFinite(x) || !one && !Double.isFinite(y) || three && !Double.isFinite(z)) {
            return null;
        }
        return switch (op) {
            case "add" -> exact(x).add(exact(y));
            case "sub" -> exact(x).subtract(exact(y));
            case "mul" -> exact(x).multiply(exact(y));
            case "fma", "mad" -> exact(x).multiply(exact(y)).add(exact(z));
            case "div" -> y == 0 ? null : exact(x).divide(exact(y), PRECISE);
            case "rcp" -> x == 0 ? null : BigDecimal.ONE.divide(exact(x), PRECISE);
            default -> x < 0 ? null : exact(x).sqrt(PRECISE);
        };
    }

    /** The value of the format nearest to e in mode: largest below (rm), smallest above (rp), toward zero (rz), nearest even (rn). */
    private static double reference(BigDecimal e, String mode, boolean f64) {
        double c = f64 ? e.doubleValue() : e.floatValue();   // correctly rounded to nearest
        int cmp;
        if (Double.isInfinite(c)) {
            cmp = c > 0 ? -1 : 1;
        } else {
            cmp = e.compareTo(exact(c));
        }
        double up = f64 ? Math.nextUp(c) : Math.nextUp((float) c);
        double down = f64 ? Math.nextDown(c) : Math.nextDown((float) c);
        boolean positive = e.signum() > 0;
        return switch (mode) {
            case "rn" -> c;
            case "rm" -> cmp < 0 ? down : c;
            case "rp" -> cmp > 0 ? up : c;
            default -> cmp == 0 ? c : positive ? (cmp < 0 ? down : c) : (cmp > 0 ? up : c);
        };
    }

    private static double javaNearest(String op, double x, double y, double z, boolean f64) {
        if (f64) {
            return switch (op) {
                case "add" -> x + y;
                case "sub" -> x - y;
                case "mul" -> x * y;
                case "fma", "mad" -> Math.fma(x, y, z);
                case "div" -> x / y;
                case "rcp" -> 1 / x;
                default -> Math.sqrt(x);
            };
        }
        float a = (float) x;
        float b = (float) y;
        float c = (float) z;
        return switch (op) {
            case "add" -> a + b;
            case "sub" -> a - b;
            case "mul" -> a * b;
            case "fma", "mad" -> Math.fma(a, b, c);
            case "div" -> a / b;
            case "rcp" -> 1 / a;
            default -> (float) Math.sqrt(a);
        };
    }

    private static double expected(String op, String mode, double x, double y, double z, boolean f64) {
        BigDecimal e = exactResult(op, x, y, z);
        double nearest = javaNearest(op, x, y, z, f64);
        if (e == null || Double.isNaN(nearest)) {
            return nearest;   // NaN, infinities, division by zero: exact in every mode
        }
        if (e.signum() == 0) {
            // an exact zero: the sign of a product/quotient/root is fixed; a sum of not-both +0 addends is -0 under .rm
            boolean sum = op.equals("add") || op.equals("sub") || op.equals("fma") || op.equals("mad");
            return sum && mode.equals("rm") && !bothPlusZero(op, x, y, z) ? -0.0 : nearest;
        }
        return reference(e, mode, f64);
    }

    private static boolean bothPlusZero(String op, double x, double y, double z) {
        long zero = 0;
        return switch (op) {
            case "add" -> Double.doubleToRawLongBits(x) == zero && Double.doubleToRawLongBits(y) == zero;
            case "sub" -> Double.doubleToRawLongBits(x) == zero && Double.doubleToRawLongBits(-y) == zero;
            default -> (x == 0 || y == 0) && Double.doubleToRawLongBits(x * y) == zero && Double.doubleToRawLongBits(z) == zero;
        };
    }

    private static long bitsOf(double v, boolean f64) {
        if (Double.isNaN(v)) {
            return f64 ? Alu.CANONICAL_NAN_F64 : Alu.CANONICAL_NAN_F32;
        }
        return f64 ? Double.doubleToRawLongBits(v) : Float.floatToRawIntBits((float) v) & 0xFFFF_FFFFL;
    }

    private void check(boolean f64) {
        double[][] in = inputs(f64);
        long[][] r = run(f64, in);
        int failures = 0;
        StringBuilder report = new StringBuilder();
        for (int i = 0; i < in.length; i++) {
            double x = in[i][0];
            double y = in[i][1];
            double z = in[i][2];
            for (int o = 0; o < OPS.length; o++) {
                for (int m = 0; m < MODES.length; m++) {
                    long want = bitsOf(expected(OPS[o], MODES[m], x, y, z, f64), f64);
                    long got = r[i][o * MODES.length + m];
                    if (want != got && failures++ < 20) {
                        report.append(String.format("%s.%s(%s, %s, %s): expected %x, got %x%n", OPS[o], MODES[m], x, y, z, want, got));
                    }
                }
            }
        }
        assertEquals(0, failures, report::toString);
    }

    @Test
    void f32DirectedRoundingMatchesTheExactValueRoundedEveryWay() {
        check(false);
    }

    @Test
    void f64DirectedRoundingMatchesTheExactValueRoundedEveryWay() {
        check(true);
    }

    /** Hand-checked edges: overflow to the largest finite value, x + -x = -0 under .rm only, a tie, a denormal step. */
    @Test
    void handPickedEdges() {
        double[][] in = {{Float.MAX_VALUE, Float.MAX_VALUE, 0}, {1.5, -1.5, 0}, {1.0, 0x1p-24, 0}, {Float.MIN_VALUE, 0.5, 0}};
        long[][] r = run(false, in);
        int add = 0;
        int mul = 2 * MODES.length;
        assertEquals(Float.floatToRawIntBits(Float.POSITIVE_INFINITY), (int) r[0][add], "add.rn overflows to inf");
        assertEquals(Float.floatToRawIntBits(Float.MAX_VALUE), (int) r[0][add + 1], "add.rz overflow: MAX");
        assertEquals(Float.floatToRawIntBits(Float.MAX_VALUE), (int) r[0][add + 2], "add.rm overflow: MAX");
        assertEquals(Float.floatToRawIntBits(Float.POSITIVE_INFINITY), (int) r[0][add + 3], "add.rp overflow: inf");
        assertEquals(0, (int) r[1][add], "1.5 + -1.5 = +0 (rn)");
        assertEquals(0, (int) r[1][add + 1], "+0 (rz)");
        assertEquals(0x8000_0000, (int) r[1][add + 2], "-0 (rm)");
        assertEquals(0, (int) r[1][add + 3], "+0 (rp)");
        assertEquals(Float.floatToRawIntBits(1f), (int) r[2][add], "tie to even");
        assertEquals(Float.floatToRawIntBits(Math.nextUp(1f)), (int) r[2][add + 3], "tie rounded up by .rp");
        assertEquals(0, (int) r[3][mul], "MIN_VALUE * 0.5 ties to +0");
        assertEquals(0, (int) r[3][mul + 1]);
        assertEquals(Float.floatToRawIntBits(Float.MIN_VALUE), (int) r[3][mul + 3], ".rp keeps the smallest denormal");
        assertTrue(r.length == 4);
    }

    @Test
    void nvccDirectedRoundingIntrinsics() throws Exception {
        String ptx = CallsTest.nvcc(java.nio.file.Files.createTempDirectory("rounding"), """
                extern "C" __global__ void k(const float* f, const double* d, float* fo, double* dout) {
                    int i = blockIdx.x * blockDim.x + threadIdx.x;
                    float x = f[2 * i], y = f[2 * i + 1];
                    double u = d[2 * i], v = d[2 * i + 1];
                    fo[6 * i] = __fadd_rd(x, y);
                    fo[6 * i + 1] = __fmul_ru(x, y);
                    fo[6 * i + 2] = __fdiv_rz(x, y);
                    fo[6 * i + 3] = __fsqrt_ru(x);
                    fo[6 * i + 4] = __frcp_rd(y);
                    fo[6 * i + 5] = __fmaf_rz(x, y, x);
                    dout[6 * i] = __dadd_ru(u, v);
                    dout[6 * i + 1] = __dmul_rz(u, v);
                    dout[6 * i + 2] = __ddiv_rd(u, v);
                    dout[6 * i + 3] = __dsqrt_rd(u);
                    dout[6 * i + 4] = __drcp_ru(v);
                    dout[6 * i + 5] = __fma_rd(u, v, u);
                }
                """);
        double[][] fin = inputs(false);
        double[][] din = inputs(true);
        int n = Math.min(fin.length, din.length) / 128 * 128;
        float[] f = new float[2 * n];
        double[] d = new double[2 * n];
        for (int i = 0; i < n; i++) {
            f[2 * i] = (float) fin[i][0];
            f[2 * i + 1] = (float) fin[i][1];
            d[2 * i] = din[i][0];
            d[2 * i + 1] = din[i][1];
        }
        long fn = rig.function(rig.module(ptx), "k");
        long fo = rig.alloc(24L * n);
        long dout = rig.alloc(48L * n);
        rig.run(fn, n / 128, 128, rig.upload(f), rig.upload(rig.arena.allocateFrom(ValueLayout.JAVA_DOUBLE, d)), fo, dout);
        int[] fr = rig.ints(fo, 6 * n);
        long[] dr = rig.longs(dout, 6 * n);
        String[][] fops = {{"add", "rm"}, {"mul", "rp"}, {"div", "rz"}, {"sqrt", "rp"}, {"rcp", "rm"}, {"fma", "rz"}};
        String[][] dops = {{"add", "rp"}, {"mul", "rz"}, {"div", "rm"}, {"sqrt", "rm"}, {"rcp", "rp"}, {"fma", "rm"}};
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < 6; k++) {
                double x = f[2 * i];
                double y = f[2 * i + 1];
                double e = k == 4 ? expected("rcp", fops[k][1], y, 0, 0, false) : expected(fops[k][0], fops[k][1], x, y, x, false);
                assertEquals(bitsOf(e, false), fr[6 * i + k] & 0xFFFF_FFFFL, fops[k][0] + "." + fops[k][1] + ".f32 of " + x + ", " + y);
                double u = d[2 * i];
                double v = d[2 * i + 1];
                double g = k == 4 ? expected("rcp", dops[k][1], v, 0, 0, true) : expected(dops[k][0], dops[k][1], u, v, u, true);
                assertEquals(bitsOf(g, true), dr[6 * i + k], dops[k][0] + "." + dops[k][1] + ".f64 of " + u + ", " + v);
            }
        }
    }

    @Test
    void ftzAndSatApplyAfterTheDirectedRounding() {
        double[][] in = {{0x1p-126, -0x1p-127, 0}, {0.75, 0.5, 0}};
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out, .param .u64 in)
                {
                    .reg .f32 %f<8>;
                    .reg .b64 %rd<4>;
                    ld.param.u64 %rd1, [out];
                    ld.param.u64 %rd2, [in];
                    ld.global.f32 %f1, [%rd2];
                    ld.global.f32 %f2, [%rd2+4];
                    ld.global.f32 %f3, [%rd2+8];
                    ld.global.f32 %f4, [%rd2+12];
                    add.rp.f32 %f5, %f1, %f2;
                    st.global.f32 [%rd1], %f5;
                    add.rp.ftz.f32 %f6, %f1, %f2;
                    st.global.f32 [%rd1+4], %f6;
                    add.rz.sat.f32 %f7, %f3, %f4;
                    st.global.f32 [%rd1+8], %f7;
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new int[3]);
        rig.run(f, 1, 1, out, rig.upload(new float[] {(float) in[0][0], (float) in[0][1], (float) in[1][0], (float) in[1][1]}));
        int[] r = rig.ints(out, 3);
        assertEquals(Float.floatToRawIntBits(0x1p-127f), r[0], "a denormal result");
        assertEquals(Float.floatToRawIntBits(0x1p-126f), r[1], ".ftz flushes the denormal operand -2^-127 first: 2^-126 + 0");
        assertEquals(Float.floatToRawIntBits(1f), r[2], ".sat clamps 1.25 to 1");
    }

    @Test
    void directedRoundingOnIntegerTypesIsRefused() {
        String ptx = Rig.HEADER + """
                .visible .entry k()
                {
                    .reg .b32 %r<4>;
                    add.rz.s32 %r1, %r2, %r3;
                    ret;
                }
                """;
        assertEquals(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED,
                rig.launch(rig.function(rig.module(ptx), "k"), new int[] {1, 1, 1}, new int[] {1, 1, 1}, 0));
        assertTrue(rig.device.lastErrorDetail().contains("rounding"), rig.device.lastErrorDetail());
    }
}
