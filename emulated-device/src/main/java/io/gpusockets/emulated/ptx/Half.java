package io.gpusockets.emulated.ptx;

import static io.gpusockets.emulated.ptx.Types.norm;

import java.math.BigDecimal;

/**
 * .f16 (IEEE binary16) and .bf16 (bfloat16) values, scalar and packed in pairs (.f16x2/.bf16x2, the
 * first element in the low 16 bits): arithmetic ({@link Insn#HALF}), conversions ({@link Insn#CVT_HALF})
 * and comparisons. Every half value is exact in a double, so an operation is computed exactly (or as
 * a double plus the sign of its error, TwoSum) and rounded once to the 16-bit format by
 * {@link #encode}, in any of the four IEEE modes. NaN results are the canonical NaN 0x7FFF.
 */
final class Half {
    static final int NAN = 0x7FFF;

    private Half() {
    }

    static boolean bf(int type) {
        return Types.kind(type) == Types.BF;
    }

    /** The exact value of 16 bits of the format. */
    static double decode(int bits, boolean bf) {
        return bf ? Float.intBitsToFloat((bits & 0xFFFF) << 16) : Float.float16ToFloat((short) bits);
    }

    /**
     * The value {@code v + (a tiny amount of sign lo)} rounded to the format by {@code mode} (Insn.RN..RP,
     * 0 meaning RN); {@code lo} is the sign of the exact value's difference from {@code v}, which must be
     * smaller than one ulp of v in double.
     */
    static int encode(double v, int lo, int mode, boolean bf) {
        if (Double.isNaN(v)) {
            return NAN;
        }
        int man = bf ? 7 : 10;
        int minExp = bf ? -126 : -14;
        int maxExp = bf ? 127 : 15;
        int inf = bf ? 0x7F80 : 0x7C00;
        int sign = Double.doubleToRawLongBits(v) < 0 ? 0x8000 : 0;
        double a = Math.abs(v);
        if (Double.isInfinite(a)) {
            return sign | inf;
        }
        int loMag = sign != 0 ? -lo : lo;   // the exact magnitude's side of a
        if (a == 0 && loMag == 0) {
            return sign;
        }
        // the rounding of the magnitude: 0 nearest-even, 1 away from zero, -1 toward zero
        int dir = switch (mode) {
            case Insn.RZ -> -1;
            case Insn.RM -> sign != 0 ? 1 : -1;
            case Insn.RP -> sign != 0 ? -1 : 1;
            default -> 0;
        };
        int e = a == 0 ? minExp : Math.max(Math.getExponent(a), minExp);
        if (e > maxExp) {
            return sign | (dir < 0 ? inf - 1 : inf);   // beyond the largest finite value even truncated
        }
        double q = Math.scalb(1.0, e - man);
        double n = a / q;   // exact: a power-of-two scaling
        double k = Math.floor(n);
        double frac = n - k;
        float t = (float) (k * q);   // exact: a value of the format
        int r = bf ? Float.floatToRawIntBits(t) >>> 16 : Float.floatToFloat16(t) & 0x7FFF;
        if (frac == 0 && loMag == 0) {
            return sign | r;
        }
        if (frac == 0 && loMag < 0) {   // just below the value r
            return sign | (dir < 0 ? r - 1 : r);
        }
        // strictly between r and r + 1 (which is inf after the largest finite value)
        boolean up = switch (dir) {
            case 1 -> true;
            case -1 -> false;
            default -> frac > 0.5 || frac == 0.5 && (loMag > 0 || loMag == 0 && (r & 1) != 0);
        };
        return sign | (up ? r + 1 : r);
    }

    private static boolean subnormal(int h, boolean bf) {
        int exp = bf ? 0x7F80 : 0x7C00;
        return (h & exp) == 0 && (h & 0x7FFF) != 0;
    }

    private static int flush(int h, boolean bf) {
        return subnormal(h, bf) ? h & 0x8000 : h;
    }

    /** Insn.HALF: {@code in.mod} on each 16-bit element. */
    static long eval(Insn in, long a, long b, long c) {
        boolean bf = bf(in.type);
        long low = one(in, bf, (int) a & 0xFFFF, (int) b & 0xFFFF, (int) c & 0xFFFF);
        if (Types.size(in.type) == 2) {
            return low;
        }
        long high = one(in, bf, (int) (a >>> 16) & 0xFFFF, (int) (b >>> 16) & 0xFFFF, (int) (c >>> 16) & 0xFFFF);
        return low | high << 16;
    }

    private static int one(Insn in, boolean bf, int x, int y, int z) {
        if (in.ftz) {
            x = flush(x, bf);
            y = flush(y, bf);
            z = flush(z, bf);
        }
        double dx = decode(x, bf);
        double dy = decode(y, bf);
        double hi;
        int lo = 0;
        switch (in.mod & 0xFF) {
            case Insn.NEG -> {
                return x ^ 0x8000;
            }
            case Insn.ABS -> {
                return x & 0x7FFF;
            }
            case Insn.MIN, Insn.MAX -> {
                if (Double.isNaN(dx) && Double.isNaN(dy) || (in.mod & Insn.HALF_NAN) != 0 && (Double.isNaN(dx) || Double.isNaN(dy))) {
                    return NAN;
                }
                if (Double.isNaN(dx) || Double.isNaN(dy)) {
                    return Double.isNaN(dx) ? y : x;
                }
                double m = (in.mod & 0xFF) == Insn.MIN ? Math.min(dx, dy) : Math.max(dx, dy);   // -0 below +0
                return Double.doubleToRawLongBits(m) == Double.doubleToRawLongBits(dx) ? x : y;
            }
            case Insn.ADD, Insn.SUB -> {
                if (in.mod == Insn.SUB) {
                    dy = -dy;
                }
                hi = dx + dy;
                lo = Double.isFinite(hi) ? (int) Math.signum(Rounding.twoSumError(dx, dy, hi)) : 0;
            }
            case Insn.MUL -> hi = dx * dy;   // exact: at most 22 significant bits
            case Insn.FMA -> {
                double p = dx * dy;
                double dz = decode(z, bf);
                hi = p + dz;
                lo = Double.isFinite(hi) ? (int) Math.signum(Rounding.twoSumError(p, dz, hi)) : 0;
            }
            default -> throw new IllegalStateException(in.toString());
        }
        int r = encode(hi, lo, Insn.RN, bf);
        if ((in.mod & Insn.HALF_RELU) != 0 && r != NAN && (r & 0x8000) != 0) {
            r = 0;
        }
        if (in.sat) {
            r = saturate(r, bf);
        }
        if (in.ftz) {
            r = flush(r, bf);
        }
        return r;
    }

    /** .sat: clamped to [0, 1], NaN to +0. */
    private static int saturate(int h, boolean bf) {
        double v = decode(h, bf);
        if (Double.isNaN(v) || v <= 0) {
            return 0;
        }
        return v >= 1 ? (bf ? 0x3F80 : 0x3C00) : h;
    }

    /** Insn.CVT_HALF: to or from a half type (an x2 destination: a into the high half, b into the low). */
    static long convert(Insn in, long a, long b) {
        int dst = in.type;
        int src = in.type2;
        if (Types.isHalf(dst)) {
            boolean bf = bf(dst);
            if (dst == src) {   // cvt.rni.f16.f16...: an integral value of the format is one of its values
                return encode(Convert.roundIntegral(decode((int) a, bf), in.mod), 0, Insn.RN, bf);
            }
            if (Types.size(dst) == 4) {
                return (long) toHalf(in, b, src, bf) | (long) toHalf(in, a, src, bf) << 16;
            }
            return toHalf(in, a, src, bf);
        }
        double x = decode((int) a, bf(src));
        if (Types.isFloat(dst)) {
            if (Types.size(dst) == 4) {
                return Double.isNaN(x) ? Alu.CANONICAL_NAN_F32 : Float.floatToRawIntBits((float) x) & 0xFFFF_FFFFL;
            }
            return Double.isNaN(x) ? Alu.CANONICAL_NAN_F64 : Double.doubleToRawLongBits(x);
        }
        return norm(Convert.floatToInt(Convert.roundIntegral(x, in.mod), dst), dst);
    }

    private static int toHalf(Insn in, long raw, int src, boolean bf) {
        double x;
        int lo = 0;
        if (Types.isFloat(src)) {
            if (Types.size(src) == 4) {
                float f = Float.intBitsToFloat((int) raw);
                x = in.ftz ? Alu.ftz(f) : f;
            } else {
                x = Double.longBitsToDouble(raw);
            }
        } else {
            long v = norm(raw, src);
            if (Types.size(src) < 8) {
                x = v;   // exact
            } else {
                BigDecimal exact = Types.signed(src) ? BigDecimal.valueOf(v) : new BigDecimal(Long.toUnsignedString(v));
                x = exact.doubleValue();
                lo = exact.compareTo(new BigDecimal(x));
            }
        }
        if (in.sat) {
            if (Double.isNaN(x) || x <= 0) {
                return 0;
            }
            if (x >= 1) {
                return bf ? 0x3F80 : 0x3C00;
            }
        }
        return encode(x, lo, in.mod, bf);
    }

    /** setp of two .f16/.bf16 values: as the float comparison of their exact values (ftz flushes them first). */
    static double[] operands(int type, boolean ftz, long ra, long rb) {
        boolean bf = bf(type);
        int x = (int) ra & 0xFFFF;
        int y = (int) rb & 0xFFFF;
        if (ftz) {
            x = flush(x, bf);
            y = flush(y, bf);
        }
        return new double[] {decode(x, bf), decode(y, bf)};
    }
}
