package io.gpusockets.emulated.ptx;

import static io.gpusockets.emulated.ptx.Types.norm;

/**
 * cvt: integer widths with sign/zero extension and optional saturation, float to integer (rounding
 * to an integer first, always clamped to the destination's range, NaN to 0, as the PTX ISA defines),
 * integer to float and float to float with the rounding modifier honoured exactly.
 */
final class Convert {
    private static final double TWO_63 = 9.223372036854775808E18;
    private static final double TWO_64 = 1.8446744073709551616E19;

    private Convert() {
    }

    static long convert(Insn in, long raw) {
        int dst = in.type;
        int src = in.type2;
        if (Types.isFloat(src)) {
            double x = Types.size(src) == 4 ? Float.intBitsToFloat((int) raw) : Double.longBitsToDouble(raw);
            if (in.ftz && Types.size(src) == 4) {
                x = Alu.ftz((float) x);
            }
            if (Types.isFloat(dst)) {
                return toFloat(in, x, dst);
            }
            return floatToInt(roundIntegral(x, in.mod), dst);
        }
        long v = norm(raw, src);
        boolean srcUnsigned64 = Types.size(src) == 8 && !Types.signed(src);
        if (Types.isFloat(dst)) {
            double d;
            if (srcUnsigned64 && v < 0) {
                // 2^63..2^64-1: halve with the lost bit kept sticky, convert, double (exact scaling).
                if (Types.size(dst) == 4) {
                    return bits(roundToFloat((double) ((v >>> 1) | (v & 1)), in.mod) * 2f);
                }
                return Double.doubleToRawLongBits((double) ((v >>> 1) | (v & 1)) * 2.0);
            }
            d = Types.size(src) == 8 && Types.size(dst) == 4 ? Double.NaN : (double) v;
            if (Types.size(dst) == 4) {
                return bits(Double.isNaN(d) ? (float) v : roundToFloat(d, in.mod));
            }
            return Double.doubleToRawLongBits((double) v);
        }
        if (!in.sat) {
            return v;
        }
        return clamp(v, srcUnsigned64, dst);
    }

    private static long bits(float f) {
        return Float.floatToRawIntBits(f) & 0xFFFF_FFFFL;
    }

    private static long toFloat(Insn in, double x, int dst) {
        if (in.mod >= Insn.RNI) {
            x = roundIntegral(x, in.mod);
        }
        if (in.sat) {
            x = Double.isNaN(x) ? 0.0 : Math.max(0.0, Math.min(1.0, x));
        }
        if (Types.size(dst) == 4) {
            float f = roundToFloat(x, in.mod >= Insn.RNI ? Insn.RN : in.mod);
            if (in.ftz) {
                f = Alu.ftz(f);
            }
            return Float.isNaN(f) ? Alu.CANONICAL_NAN_F32 : bits(f);
        }
        return Double.isNaN(x) ? Alu.CANONICAL_NAN_F64 : Double.doubleToRawLongBits(x);
    }

    static double roundIntegral(double x, int mode) {
        return switch (mode) {
            case Insn.RNI -> Math.rint(x);
            case Insn.RMI -> Math.floor(x);
            case Insn.RPI -> Math.ceil(x);
            default -> x < 0 ? Math.ceil(x) : Math.floor(x);   // .rzi
        };
    }

    /** A double rounded to float by {@code mode} (.rn, .rz, .rm, .rp): the nearest, then one step if needed. */
    static float roundToFloat(double d, int mode) {
        float f = (float) d;
        if (mode == Insn.RN || mode == 0 || Double.isNaN(d) || (double) f == d) {
            return f;
        }
        boolean above = (double) f > d;
        return switch (mode) {
            case Insn.RZ -> d > 0 ? (above ? Math.nextDown(f) : f) : (above ? f : Math.nextUp(f));
            case Insn.RM -> above ? Math.nextDown(f) : f;
            case Insn.RP -> above ? f : Math.nextUp(f);
            default -> f;
        };
    }

    static long floatToInt(double x, int dst) {
        if (Double.isNaN(x)) {
            return 0;
        }
        int bits = Types.bits(dst);
        if (Types.signed(dst)) {
            if (bits == 64) {
                return (long) x;   // Java saturates like PTX
            }
            double max = Math.pow(2, bits - 1) - 1;
            return (long) Math.max(-max - 1, Math.min(max, x));
        }
        if (x <= 0) {
            return 0;
        }
        if (bits == 64) {
            if (x >= TWO_64) {
                return -1L;
            }
            return x >= TWO_63 ? (long) (x - TWO_63) + Long.MIN_VALUE : (long) x;
        }
        return (long) Math.min(Math.pow(2, bits) - 1, x);
    }

    private static long clamp(long v, boolean srcUnsigned64, int dst) {
        int bits = Types.bits(dst);
        if (srcUnsigned64 && v < 0) {
            return Types.signed(dst) ? (bits == 64 ? Long.MAX_VALUE : (1L << (bits - 1)) - 1) : (bits == 64 ? v : (1L << bits) - 1);
        }
        if (Types.signed(dst)) {
            if (bits == 64) {
                return v;
            }
            long max = (1L << (bits - 1)) - 1;
            return Math.max(-max - 1, Math.min(max, v));
        }
        if (v < 0) {
            return 0;
        }
        return bits == 64 ? v : Math.min((1L << bits) - 1, v);
    }
}
