package io.gpusockets.emulated.ptx;

import static io.gpusockets.emulated.ptx.Types.norm;

/**
 * The compiled engine's value helpers: small static methods the generated code calls with constant
 * type and mode arguments, so that the JVM's compiler inlines them and folds those arguments away.
 * Each gives exactly what {@link Alu} gives for the same instruction (registers hold raw bits; a
 * reader extends them by its type); {@link JitCompiler} calls one only where that holds, and
 * {@link Alu} itself everywhere else.
 */
final class JitOps {
    private JitOps() {
    }

    static long f32(float r) {
        return Float.isNaN(r) ? Alu.CANONICAL_NAN_F32 : Float.floatToRawIntBits(r) & 0xFFFF_FFFFL;
    }

    static long f64(double r) {
        return Double.isNaN(r) ? Alu.CANONICAL_NAN_F64 : Double.doubleToRawLongBits(r);
    }

    static float fl(long v) {
        return Float.intBitsToFloat((int) v);
    }

    static double db(long v) {
        return Double.longBitsToDouble(v);
    }

    static long addF32(long a, long b) {
        return f32(fl(a) + fl(b));
    }

    static long subF32(long a, long b) {
        return f32(fl(a) - fl(b));
    }

    static long mulF32(long a, long b) {
        return f32(fl(a) * fl(b));
    }

    static long divF32(long a, long b) {
        return f32(fl(a) / fl(b));
    }

    static long fmaF32(long a, long b, long c) {
        return f32(Math.fma(fl(a), fl(b), fl(c)));
    }

    static long minF32(long a, long b) {
        float x = fl(a);
        float y = fl(b);
        return f32(Float.isNaN(x) ? y : Float.isNaN(y) ? x : Math.min(x, y));
    }

    static long maxF32(long a, long b) {
        float x = fl(a);
        float y = fl(b);
        return f32(Float.isNaN(x) ? y : Float.isNaN(y) ? x : Math.max(x, y));
    }

    static long negF32(long a) {
        return (a ^ 0x8000_0000L) & 0xFFFF_FFFFL;
    }

    static long absF32(long a) {
        return a & 0x7FFF_FFFFL;
    }

    // The same without canonicalising a NaN, for registers only such instructions read (JitCompiler.nanBlindness).

    static long addF32Raw(long a, long b) {
        return Float.floatToRawIntBits(fl(a) + fl(b)) & 0xFFFF_FFFFL;
    }

    static long subF32Raw(long a, long b) {
        return Float.floatToRawIntBits(fl(a) - fl(b)) & 0xFFFF_FFFFL;
    }

    static long mulF32Raw(long a, long b) {
        return Float.floatToRawIntBits(fl(a) * fl(b)) & 0xFFFF_FFFFL;
    }

    static long fmaF32Raw(long a, long b, long c) {
        return Float.floatToRawIntBits(Math.fma(fl(a), fl(b), fl(c))) & 0xFFFF_FFFFL;
    }

    static long addF64Raw(long a, long b) {
        return Double.doubleToRawLongBits(db(a) + db(b));
    }

    static long subF64Raw(long a, long b) {
        return Double.doubleToRawLongBits(db(a) - db(b));
    }

    static long mulF64Raw(long a, long b) {
        return Double.doubleToRawLongBits(db(a) * db(b));
    }

    static long fmaF64Raw(long a, long b, long c) {
        return Double.doubleToRawLongBits(Math.fma(db(a), db(b), db(c)));
    }

    static long addF64(long a, long b) {
        return f64(db(a) + db(b));
    }

    static long subF64(long a, long b) {
        return f64(db(a) - db(b));
    }

    static long mulF64(long a, long b) {
        return f64(db(a) * db(b));
    }

    static long divF64(long a, long b) {
        return f64(db(a) / db(b));
    }

    static long fmaF64(long a, long b, long c) {
        return f64(Math.fma(db(a), db(b), db(c)));
    }

    static long minF64(long a, long b) {
        double x = db(a);
        double y = db(b);
        return f64(Double.isNaN(x) ? y : Double.isNaN(y) ? x : Math.min(x, y));
    }

    static long maxF64(long a, long b) {
        double x = db(a);
        double y = db(b);
        return f64(Double.isNaN(x) ? y : Double.isNaN(y) ? x : Math.max(x, y));
    }

    static long shl(long a, long b, int bits) {
        long n = b & 0xFFFF_FFFFL;
        return n >= bits ? 0 : a << n;
    }

    /** shr of {@code v}, already extended by the instruction's type. */
    static long shr(long v, long b, int bits, boolean signed) {
        long n = b & 0xFFFF_FFFFL;
        if (signed) {
            return n >= bits ? (v < 0 ? -1 : 0) : v >> n;
        }
        return n >= bits ? 0 : v >>> n;
    }

    static long min(long a, long b, int t) {
        return Alu.lessThan(norm(a, t), norm(b, t), t) ? a : b;
    }

    static long max(long a, long b, int t) {
        return Alu.lessThan(norm(a, t), norm(b, t), t) ? b : a;
    }

    static long selp(long a, long b, long c) {
        return (c & 1) != 0 ? a : b;
    }

    /** setp's integer comparison ({@link Alu#compare} without the float cases). */
    static boolean compareInt(long ra, long rb, int t, int cmp) {
        int order;
        if (!Types.signed(t) || cmp >= Alu.LO && cmp <= Alu.HS) {
            int ut = Types.U << 4 | Types.size(t);
            order = Long.compareUnsigned(norm(ra, ut), norm(rb, ut));
        } else {
            order = Long.compare(norm(ra, t), norm(rb, t));
        }
        return switch (cmp) {
            case Alu.EQ -> order == 0;
            case Alu.NE -> order != 0;
            case Alu.LT, Alu.LO -> order < 0;
            case Alu.LE, Alu.LS -> order <= 0;
            case Alu.GT, Alu.HI -> order > 0;
            default -> order >= 0;
        };
    }

    /** setp's float comparison without .ftz ({@link Alu#compare}). */
    static boolean compareFloat(double x, double y, int cmp) {
        boolean nan = Double.isNaN(x) || Double.isNaN(y);
        return switch (cmp) {
            case Alu.EQ -> !nan && x == y;
            case Alu.NE -> !nan && x != y;
            case Alu.LT -> !nan && x < y;
            case Alu.LE -> !nan && x <= y;
            case Alu.GT -> !nan && x > y;
            case Alu.GE -> !nan && x >= y;
            case Alu.EQU -> nan || x == y;
            case Alu.NEU -> nan || x != y;
            case Alu.LTU -> nan || x < y;
            case Alu.LEU -> nan || x <= y;
            case Alu.GTU -> nan || x > y;
            case Alu.GEU -> nan || x >= y;
            case Alu.NUM -> !nan;
            default -> nan;
        };
    }

    static boolean compareF32(long a, long b, int cmp) {
        return compareFloat(fl(a), fl(b), cmp);
    }

    static boolean compareF64(long a, long b, int cmp) {
        return compareFloat(db(a), db(b), cmp);
    }

    /** setp's combining of the comparison {@code x} with predicate c (negated when {@code negC}): 1 or 0. */
    static long combine(int op, boolean x, long c, boolean negC) {
        boolean cv = ((c & 1) != 0) != negC;
        boolean r = switch (op) {
            case Alu.BOOL_AND -> x && cv;
            case Alu.BOOL_OR -> x || cv;
            default -> x ^ cv;
        };
        return r ? 1 : 0;
    }

    static long bit(boolean b) {
        return b ? 1 : 0;
    }
}
