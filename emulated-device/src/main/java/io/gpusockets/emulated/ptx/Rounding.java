package io.gpusockets.emulated.ptx;

import java.math.BigDecimal;

/**
 * Directed rounding (.rz, .rm, .rp) of add, sub, mul, fma/mad, div, rcp and sqrt on .f32 and .f64,
 * bit-exact: the round-to-nearest result {@code hi} is computed in Java, then the side on which the
 * exact result lies ({@code lo}, its sign: -1, 0, +1) is found exactly (error-free transformations:
 * TwoSum, Math.fma residuals, BigDecimal where those could underflow), and {@code hi} is stepped one
 * ulp toward the requested direction when the exact value lies on the other side. An overflow to
 * infinity counts as "exact value below infinity" (so .rz gives the largest finite value).
 * An exactly zero sum of operands that are not both +0 is -0 under .rm, +0 otherwise (IEEE 754).
 */
final class Rounding {
    private Rounding() {
    }

    /** {@code op} (an Insn op code) of f32 operands rounded by {@code mode} (Insn.RZ/RM/RP). */
    static float f32(int op, int mode, float x, float y, float z) {
        double a = x;
        double b = y;
        double hi;
        int lo;
        double zeroA = Double.NaN;   // the two addends, for the sign of an exact zero sum
        double zeroB = Double.NaN;
        switch (op) {
            case Insn.ADD, Insn.SUB -> {
                if (op == Insn.SUB) {
                    b = -b;
                }
                hi = a + b;
                lo = (int) Math.signum(twoSumError(a, b, hi));
                zeroA = a;
                zeroB = b;
            }
            case Insn.MUL -> {
                hi = a * b;   // exact: 48 significant bits, within double's exponent range
                lo = 0;
            }
            case Insn.MAD, Insn.FMA -> {
                double p = a * b;   // exact
                hi = p + z;
                lo = (int) Math.signum(twoSumError(p, z, hi));
                zeroA = p;
                zeroB = z;
            }
            case Insn.DIV, Insn.RCP -> {
                if (op == Insn.RCP) {
                    b = a;
                    a = 1.0;
                }
                hi = a / b;
                // the residual is exact in double for float operands; exact/hi lies on its side (times b's sign)
                lo = Double.isFinite(hi) ? (int) (Math.signum(Math.fma(-hi, b, a)) * Math.signum(b)) : 0;
            }
            case Insn.SQRT -> {
                hi = Math.sqrt(a);
                lo = Double.isFinite(hi) ? (int) Math.signum(Math.fma(-hi, hi, a)) : 0;
            }
            default -> throw new IllegalStateException("directed rounding of op " + op);
        }
        if (!Double.isFinite(hi)) {
            return (float) hi;   // NaN or an infinity from infinite or NaN operands, or x/0: exact
        }
        float f = (float) hi;
        int dir = hi > f ? 1 : hi < f ? -1 : lo;   // where the exact value lies relative to f
        float r = step(f, dir, mode);
        if (r == 0f && hi == 0 && lo == 0 && mode == Insn.RM && !Double.isNaN(zeroA) && !(positiveZero(zeroA) && positiveZero(zeroB))) {
            return -0f;
        }
        return r;
    }

    /** {@code op} of f64 operands rounded by {@code mode}. */
    static double f64(int op, int mode, double x, double y, double z) {
        double hi;
        int lo;
        double zeroA = Double.NaN;
        double zeroB = Double.NaN;
        switch (op) {
            case Insn.ADD, Insn.SUB -> {
                if (op == Insn.SUB) {
                    y = -y;
                }
                hi = x + y;
                if (!Double.isFinite(x) || !Double.isFinite(y)) {
                    return hi;
                }
                if (!Double.isFinite(hi)) {
                    lo = overflow(hi);
                } else {
                    double error = twoSumError(x, y, hi);
                    // TwoSum's intermediates can overflow next to the largest finite values: then exactly
                    lo = Double.isFinite(error) ? (int) Math.signum(error) : exact(x).add(exact(y)).compareTo(exact(hi));
                }
                zeroA = x;
                zeroB = y;
            }
            case Insn.MUL -> {
                hi = x * y;
                if (!Double.isFinite(x) || !Double.isFinite(y)) {
                    return hi;
                }
                if (!Double.isFinite(hi)) {
                    lo = overflow(hi);
                } else if (Math.abs(hi) >= 0x1p-969) {
                    lo = (int) Math.signum(Math.fma(x, y, -hi));   // the product's error is a double here
                } else {
                    lo = exact(x).multiply(exact(y)).compareTo(exact(hi));
                }
            }
            case Insn.MAD, Insn.FMA -> {
                hi = Math.fma(x, y, z);
                if (!Double.isFinite(x) || !Double.isFinite(y) || !Double.isFinite(z)) {
                    return hi;
                }
                lo = Double.isFinite(hi) ? exact(x).multiply(exact(y)).add(exact(z)).compareTo(exact(hi)) : overflow(hi);
                double p = x * y;
                zeroA = p == 0 && (x == 0 || y == 0) ? p : 1.0;   // an exact zero product keeps its sign
                zeroB = z;
            }
            case Insn.DIV, Insn.RCP -> {
                if (op == Insn.RCP) {
                    y = x;
                    x = 1.0;
                }
                hi = x / y;
                if (!Double.isFinite(x) || !Double.isFinite(y) || y == 0) {
                    return hi;
                }
                lo = Double.isFinite(hi) ? exact(x).subtract(exact(hi).multiply(exact(y))).signum() * (int) Math.signum(y) : overflow(hi);
            }
            case Insn.SQRT -> {
                hi = Math.sqrt(x);
                if (!Double.isFinite(x) || x <= 0) {
                    return hi;   // ±0, NaN, +inf
                }
                BigDecimal h = exact(hi);
                lo = exact(x).subtract(h.multiply(h)).signum();
            }
            default -> throw new IllegalStateException("directed rounding of op " + op);
        }
        if (Double.isNaN(hi)) {
            return hi;
        }
        double r = step(hi, lo, mode);
        if (r == 0 && hi == 0 && lo == 0 && mode == Insn.RM && !Double.isNaN(zeroA) && !(positiveZero(zeroA) && positiveZero(zeroB))) {
            return -0.0;
        }
        return r;
    }

    /** An overflowed round-to-nearest result: the exact value lies between it and zero. */
    private static int overflow(double inf) {
        return inf > 0 ? -1 : 1;
    }

    private static BigDecimal exact(double d) {
        return new BigDecimal(d);
    }

    private static boolean positiveZero(double d) {
        return Double.doubleToRawLongBits(d) == 0;
    }

    /** Knuth's TwoSum: the exact error of {@code s = a + b} (no overflow). */
    static double twoSumError(double a, double b, double s) {
        double bb = s - a;
        return (a - (s - bb)) + (b - bb);
    }

    /** f, one step toward the exact value when {@code mode} asks for that side ({@code dir}: the exact value's side). */
    static float step(float f, int dir, int mode) {
        boolean negative = Float.floatToRawIntBits(f) < 0;
        if (dir > 0 && (mode == Insn.RP || mode == Insn.RZ && negative)) {
            return Math.nextUp(f);
        }
        if (dir < 0 && (mode == Insn.RM || mode == Insn.RZ && !negative)) {
            return Math.nextDown(f);
        }
        return f;
    }

    static double step(double f, int dir, int mode) {
        boolean negative = Double.doubleToRawLongBits(f) < 0;
        if (dir > 0 && (mode == Insn.RP || mode == Insn.RZ && negative)) {
            return Math.nextUp(f);
        }
        if (dir < 0 && (mode == Insn.RM || mode == Insn.RZ && !negative)) {
            return Math.nextDown(f);
        }
        return f;
    }
}
