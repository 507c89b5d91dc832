package io.gpusockets.emulated.ptx;

import static io.gpusockets.emulated.ptx.Types.norm;

/**
 * Lane-by-lane semantics of the ALU instructions, comparisons and conversions, from raw register
 * values (each operand is extended here by the type the instruction reads it as). Results follow the
 * PTX ISA: integer results wrap, shifts clamp their count, float arithmetic is IEEE round-to-nearest
 * (Java's float/double operators and Math.fma) or, where {@code in.mod} is .rz/.rm/.rp, directed
 * ({@link Rounding}), NaN results are the canonical NaN the GPU writes.
 */
final class Alu {
    static final int CANONICAL_NAN_F32 = 0x7FFF_FFFF;
    static final long CANONICAL_NAN_F64 = 0x7FFF_FFFF_FFFF_FFFFL;

    // setp comparisons
    static final int EQ = 1, NE = 2, LT = 3, LE = 4, GT = 5, GE = 6, LO = 7, LS = 8, HI = 9, HS = 10;
    static final int EQU = 11, NEU = 12, LTU = 13, LEU = 14, GTU = 15, GEU = 16, NUM = 17, NAN = 18;
    // setp's combining with a third predicate
    static final int BOOL_AND = 1, BOOL_OR = 2, BOOL_XOR = 3;
    // atom/red operations (Insn.mod)
    static final int ATOM_ADD = 1, ATOM_MIN = 2, ATOM_MAX = 3, ATOM_AND = 4, ATOM_OR = 5, ATOM_XOR = 6;
    static final int ATOM_EXCH = 7, ATOM_CAS = 8, ATOM_INC = 9, ATOM_DEC = 10;

    private Alu() {
    }

    static long eval(Insn in, long a, long b, long c, long e) {
        int t = in.type;
        if (in.op == Insn.HALF) {
            return Half.eval(in, a, b, c);
        }
        if (in.op == Insn.CVT_HALF) {
            return Half.convert(in, a, b);
        }
        if (in.op == Insn.SET) {
            return set(in, a, b, c);
        }
        if (in.op >= Insn.LOP3) {
            return bits(in, a, b, c);
        }
        if (Types.isFloat(t) && in.op != Insn.MOV && in.op != Insn.SELP && in.op != Insn.CVT && in.op != Insn.SLCT) {
            return Types.size(t) == 4 ? f32(in, a, b, c) : f64(in, a, b, c);
        }
        int bits = Types.bits(t);
        boolean s = Types.signed(t);
        return switch (in.op) {
            case Insn.MOV -> a;
            case Insn.ADD -> in.sat ? saturate32(norm(a, t) + norm(b, t)) : a + b;
            case Insn.SUB -> in.sat ? saturate32(norm(a, t) - norm(b, t)) : a - b;
            case Insn.MUL -> a * b;
            case Insn.MUL_HI -> mulHi(norm(a, t), norm(b, t), t);
            case Insn.MUL_WIDE -> norm(a, t) * norm(b, t);
            case Insn.MAD -> a * b + c;
            case Insn.MAD_HI -> mulHi(norm(a, t), norm(b, t), t) + c;
            case Insn.MAD_WIDE -> norm(a, t) * norm(b, t) + c;
            case Insn.DIV -> divide(norm(a, t), norm(b, t), t);
            case Insn.REM -> remainder(norm(a, t), norm(b, t), t);
            case Insn.MIN -> lessThan(norm(a, t), norm(b, t), t) ? a : b;
            case Insn.MAX -> lessThan(norm(a, t), norm(b, t), t) ? b : a;
            case Insn.ABS -> Math.abs(norm(a, t));
            case Insn.NEG -> -a;
            case Insn.AND -> a & b;
            case Insn.OR -> a | b;
            case Insn.XOR -> a ^ b;
            case Insn.NOT -> t == Types.PRED ? a ^ 1 : ~a;
            case Insn.CNOT -> norm(a, t) == 0 ? 1 : 0;
            case Insn.SHL -> {
                long n = b & 0xFFFF_FFFFL;
                yield n >= bits ? 0 : a << n;
            }
            case Insn.SHR -> {
                long n = b & 0xFFFF_FFFFL;
                long v = norm(a, t);
                if (s) {
                    yield n >= bits ? (v < 0 ? -1 : 0) : v >> n;
                }
                yield n >= bits ? 0 : v >>> n;
            }
            case Insn.POPC -> Long.bitCount(norm(a, t));
            case Insn.CLZ -> bits == 32 ? Integer.numberOfLeadingZeros((int) a) : Long.numberOfLeadingZeros(a);
            case Insn.BREV -> bits == 32 ? Integer.reverse((int) a) & 0xFFFF_FFFFL : Long.reverse(a);
            case Insn.BFE -> bitFieldExtract(norm(a, t), b & 0xFF, c & 0xFF, bits, s);
            case Insn.BFI -> bitFieldInsert(a, b, c & 0xFF, e & 0xFF, bits);
            case Insn.PRMT -> permute(a, b, c);
            case Insn.SELP -> (c & 1) != 0 ? a : b;
            case Insn.SLCT -> (Types.isFloat(in.type2) ? Float.intBitsToFloat((int) c) >= 0f : (int) c >= 0) ? a : b;
            case Insn.CVT -> norm(Convert.convert(in, a), t);   // a narrow result is extended into its register
            case Insn.CVTA -> a + in.offset;
            case Insn.MUL24 -> mul24(in, a, b);
            case Insn.MAD24 -> in.sat ? saturate32((int) mul24(in, a, b) + norm(c, t)) : mul24(in, a, b) + c;
            case Insn.SAD -> {
                long x = norm(a, t);
                long y = norm(b, t);
                yield (lessThan(x, y, t) ? y - x : x - y) + c;
            }
            default -> throw new IllegalStateException(in.toString());
        };
    }

    /** lop3, dp4a, dp2a, bfind, bmsk, szext, testp, isspacep, fns: the PTX ISA's pseudo-code for each, on 32-bit results. */
    private static long bits(Insn in, long a, long b, long c) {
        return switch (in.op) {
            case Insn.LOP3 -> {
                long d = 0;
                for (int i = 0; i < 8; i++) {
                    if ((in.mod >>> i & 1) != 0) {   // minterm i: a's bit is i's bit 2, b's bit 1, c's bit 0
                        d |= ((i & 4) != 0 ? a : ~a) & ((i & 2) != 0 ? b : ~b) & ((i & 1) != 0 ? c : ~c);
                    }
                }
                yield d & 0xFFFF_FFFFL;
            }
            case Insn.DP4A -> {
                boolean sa = Types.signed(in.type);
                boolean sb = Types.signed(in.type2);
                long d = c;
                for (int i = 0; i < 4; i++) {
                    long x = a >>> (8 * i) & 0xFF;
                    long y = b >>> (8 * i) & 0xFF;
                    d += (sa ? (byte) x : x) * (sb ? (byte) y : y);
                }
                yield d & 0xFFFF_FFFFL;
            }
            case Insn.DP2A -> {
                boolean sa = Types.signed(in.type);
                boolean sb = Types.signed(in.type2);
                int sel = in.mod == 1 ? 2 : 0;
                long d = c;
                for (int i = 0; i < 2; i++) {
                    long x = a >>> (16 * i) & 0xFFFF;
                    long y = b >>> (8 * (sel + i)) & 0xFF;
                    d += (sa ? (short) x : x) * (sb ? (byte) y : y);
                }
                yield d & 0xFFFF_FFFFL;
            }
            case Insn.BFIND -> {
                int msb = Types.bits(in.type) - 1;
                long v = norm(a, in.type);
                if (Types.signed(in.type) && v < 0) {
                    v = ~v;   // the most significant bit that differs from the sign
                }
                if (msb == 31) {
                    v &= 0xFFFF_FFFFL;
                }
                if (v == 0) {
                    yield 0xFFFF_FFFFL;
                }
                int pos = 63 - Long.numberOfLeadingZeros(v);
                yield in.mod == 1 ? msb - pos : pos;
            }
            case Insn.BMSK -> {
                long ua = a & 0xFFFF_FFFFL;
                long ub = b & 0xFFFF_FFFFL;
                int a1 = (int) (ua & 31);
                int b1 = (int) (ub & 31);
                int mask0 = -1 << a1;
                int sum = a1 + b1;
                int mask1 = sum >= 32 ? 0 : -1 << sum;
                boolean positionOverflow = false;
                boolean widthOverflow = false;
                if (in.mod == 0) {   // .clamp
                    if (ua >= 32) {
                        positionOverflow = true;
                        mask0 = 0;
                    }
                    widthOverflow = ub >= 32;
                }
                if (sum >= 32 || positionOverflow || widthOverflow) {
                    mask1 = 0;
                } else if (b1 == 0) {
                    mask1 = -1;
                }
                yield (mask0 & ~mask1) & 0xFFFF_FFFFL;
            }
            case Insn.SZEXT -> {
                long ub = b & 0xFFFF_FFFFL;
                int b1 = (int) (ub & 31);
                boolean tooLarge = ub >= 32 && in.mod == 0;
                int mask = tooLarge ? 0 : -1 << b1;
                boolean sign = b1 != 0 && !tooLarge && Types.signed(in.type) && (a >>> ((b1 - 1) & 31) & 1) != 0;
                yield (((int) a & ~mask) | (sign ? mask : 0)) & 0xFFFF_FFFFL;
            }
            case Insn.TESTP -> {
                boolean f32 = Types.size(in.type) == 4;
                long bits = f32 ? a & 0xFFFF_FFFFL : a;
                long exponent = f32 ? bits >>> 23 & 0xFF : bits >>> 52 & 0x7FF;
                long mantissa = f32 ? bits & 0x7F_FFFF : bits & 0xF_FFFF_FFFF_FFFFL;
                long top = f32 ? 0xFF : 0x7FF;
                boolean nan = exponent == top && mantissa != 0;
                boolean infinite = exponent == top && mantissa == 0;
                boolean r = switch (in.mod) {
                    case Insn.TESTP_FINITE -> exponent != top;
                    case Insn.TESTP_INFINITE -> infinite;
                    case Insn.TESTP_NUMBER -> !nan;
                    case Insn.TESTP_NOTANUMBER -> nan;
                    case Insn.TESTP_NORMAL -> exponent != 0 && exponent != top;
                    default -> exponent == 0 && mantissa != 0;   // subnormal: not zero
                };
                yield r ? 1 : 0;
            }
            case Insn.ISSPACEP -> {
                long v = norm(a, in.type);
                boolean shared = Long.compareUnsigned(v - Builders.SHARED_WINDOW, Builders.WINDOW_BYTES) < 0;
                boolean local = Long.compareUnsigned(v - Builders.LOCAL_WINDOW, Builders.WINDOW_BYTES) < 0;
                boolean param = Long.compareUnsigned(v - Builders.PARAM_WINDOW, Builders.WINDOW_BYTES) < 0;
                boolean r = switch (in.mod) {
                    case Insn.SHARED -> shared;
                    case Insn.LOCAL -> local;
                    case Insn.PARAM -> param;   // cvta.param's window (kernel parameters)
                    case Insn.GLOBAL -> !shared && !local && !param;   // everything else generic is global
                    // .const: module .const variables are global allocations here and cvta.const leaves their address
                    // as it is, so a generic address is never a constant-space one (it answers true to .global).
                    default -> false;
                };
                yield r ? 1 : 0;
            }
            case Insn.SHF -> {
                long n = (in.mod & 2) != 0 ? Math.min(c & 0xFFFF_FFFFL, 32) : c & 31;
                long v = (b & 0xFFFF_FFFFL) << 32 | (a & 0xFFFF_FFFFL);
                yield ((in.mod & 1) != 0 ? v >>> n : v << n >>> 32) & 0xFFFF_FFFFL;
            }
            case Insn.FNS -> {
                int mask = (int) a;
                int base = (int) b;
                int offset = (int) c;
                long d = 0xFFFF_FFFFL;
                if (offset == 0) {
                    if (base >= 0 && base < 32 && (mask >>> base & 1) != 0) {
                        d = base;
                    }
                } else {
                    // |offset| - 1 further set bits are passed over (a base past 31, undefined in PTX, finds nothing)
                    long count = Math.abs((long) offset) - 1;
                    int inc = offset > 0 ? 1 : -1;
                    for (int pos = base; pos >= 0 && pos < 32; pos += inc) {
                        if ((mask >>> pos & 1) != 0) {
                            if (count == 0) {
                                d = pos;
                                break;
                            }
                            count--;
                        }
                    }
                }
                yield d;
            }
            default -> throw new IllegalStateException(in.toString());
        };
    }

    /**
     * set: the comparison (combined with predicate c when the op has a BoolOp) as the destination type's true
     * (all ones for an integer, 1.0 for a float) or 0; .f16x2/.bf16x2 sources compare each half into a half of d.
     */
    private static long set(Insn in, long a, long b, long c) {
        int src = in.type2;
        int dst = in.type;
        int cmp = in.mod & 0xFF;
        int bool = in.mod >> 8;
        boolean cv = ((c & 1) != 0) != in.negC;
        if (Types.isHalf(src) && Types.size(src) == 4) {
            int element = Types.kind(src) << 4 | 2;
            long one = Types.isHalf(dst) ? (Half.bf(dst) ? 0x3F80 : 0x3C00) : 0xFFFF;
            long d = 0;
            for (int k = 0; k < 2; k++) {
                boolean r = compare(element, cmp, in.ftz, a >>> (16 * k) & 0xFFFF, b >>> (16 * k) & 0xFFFF);
                if (bool != 0 ? setCombine(bool, r, cv) : r) {
                    d |= one << (16 * k);
                }
            }
            return d;
        }
        boolean r = compare(src, cmp, in.ftz, a, b);
        if (bool != 0 ? setCombine(bool, r, cv) : r) {
            return Types.isFloat(dst) ? 0x3F80_0000L : Types.isHalf(dst) ? (Half.bf(dst) ? 0x3F80 : 0x3C00) : -1L;
        }
        return 0;
    }

    private static boolean setCombine(int op, boolean x, boolean c) {
        return switch (op) {
            case BOOL_AND -> x && c;
            case BOOL_OR -> x || c;
            default -> x ^ c;
        };
    }

    /** The 48-bit product of the low 24 bits of a and b (sign-extended for .s32): its low 32 bits, or bits 47..16 for .hi. */
    private static long mul24(Insn in, long a, long b) {
        boolean s = Types.signed(in.type);
        long x = s ? a << 40 >> 40 : a & 0xFF_FFFF;
        long y = s ? b << 40 >> 40 : b & 0xFF_FFFF;
        long p = x * y;
        return in.mod == 1 ? (s ? p >> 16 : p >>> 16) : p;
    }

    /** The addend carry ops add to or subtract from b (mad: c): a, or a * b's low or high half. */
    private static long carryFirst(Insn in, long a, long b) {
        if (in.op != Insn.MAD_CARRY) {
            return a;
        }
        int t = in.type;
        return (in.mod & Insn.CARRY_HI) != 0 ? mulHi(norm(a, t), norm(b, t), t) : a * b;
    }

    /** add.cc/addc, sub.cc/subc, mad.cc/madc: the result (raw; the flag comes from {@link #carryFlag}). */
    static long carrySum(Insn in, long a, long b, long c, long cf) {
        long x = carryFirst(in, a, b);
        long y = in.op == Insn.MAD_CARRY ? c : b;
        long cin = (in.mod & Insn.CARRY_IN) != 0 ? cf & 1 : 0;
        return in.op == Insn.SUB_CARRY ? x - y - cin : x + y + cin;
    }

    /** The carry (sub: the borrow) out of the type's width of the operation {@link #carrySum} computes. */
    static long carryFlag(Insn in, long a, long b, long c, long cf) {
        long x = carryFirst(in, a, b);
        long y = in.op == Insn.MAD_CARRY ? c : b;
        long cin = (in.mod & Insn.CARRY_IN) != 0 ? cf & 1 : 0;
        boolean sub = in.op == Insn.SUB_CARRY;
        if (Types.size(in.type) == 4) {
            long xs = x & 0xFFFF_FFFFL;
            long ys = y & 0xFFFF_FFFFL;
            return sub ? (xs - ys - cin < 0 ? 1 : 0) : (xs + ys + cin) >>> 32;
        }
        long s = sub ? x - y - cin : x + y + cin;
        return sub ? ((~x & y) | ((~x | y) & s)) >>> 63 : ((x & y) | ((x | y) & ~s)) >>> 63;
    }

    private static long saturate32(long v) {
        return Math.max(Integer.MIN_VALUE, Math.min(Integer.MAX_VALUE, v));
    }

    private static long mulHi(long a, long b, int t) {
        int bits = Types.bits(t);
        if (bits == 64) {
            return Types.signed(t) ? Math.multiplyHigh(a, b) : Math.unsignedMultiplyHigh(a, b);
        }
        long p = a * b;   // exact: both operands have at most 32 significant bits
        return Types.signed(t) ? p >> bits : p >>> bits;
    }

    /** Division by zero is undefined in PTX; the result here is all ones (what the GPU yields for .u32). */
    private static long divide(long a, long b, int t) {
        if (b == 0) {
            return -1;
        }
        if (Types.bits(t) == 64 && !Types.signed(t)) {
            return Long.divideUnsigned(a, b);
        }
        return a / b;
    }

    private static long remainder(long a, long b, int t) {
        if (b == 0) {
            return a;
        }
        if (Types.bits(t) == 64 && !Types.signed(t)) {
            return Long.remainderUnsigned(a, b);
        }
        return a % b;
    }

    static boolean lessThan(long a, long b, int t) {
        return Types.bits(t) == 64 && !Types.signed(t) ? Long.compareUnsigned(a, b) < 0 : a < b;
    }

    private static long bitFieldExtract(long a, long pos, long len, int bits, boolean signed) {
        int msb = bits - 1;
        if (len == 0) {
            return 0;
        }
        long sbit = signed ? (a >>> Math.min(pos + len - 1, msb)) & 1 : 0;
        long d = 0;
        for (int i = 0; i <= msb; i++) {
            long bit = (i < len && pos + i <= msb) ? (a >>> (pos + i)) & 1 : sbit;
            d |= bit << i;
        }
        return d;
    }

    private static long bitFieldInsert(long a, long b, long pos, long len, int bits) {
        long d = b;
        for (long i = 0; i < len && pos + i < bits; i++) {
            long bit = 1L << (pos + i);
            d = ((a >>> i) & 1) != 0 ? d | bit : d & ~bit;
        }
        return d;
    }

    /** prmt.b32 default mode: four byte selectors over the eight bytes {b, a}; bit 3 replicates a sign. */
    private static long permute(long a, long b, long c) {
        long bytes = (a & 0xFFFF_FFFFL) | (b & 0xFFFF_FFFFL) << 32;
        long d = 0;
        for (int i = 0; i < 4; i++) {
            int sel = (int) (c >>> (4 * i)) & 15;
            long v = (bytes >>> (8 * (sel & 7))) & 0xFF;
            if ((sel & 8) != 0) {
                v = (v & 0x80) != 0 ? 0xFF : 0;
            }
            d |= v << (8 * i);
        }
        return d;
    }

    static float ftz(float x) {
        return Math.abs(x) < Float.MIN_NORMAL ? Math.copySign(0f, x) : x;
    }

    private static long f32(Insn in, long ra, long rb, long rc) {
        float x = Float.intBitsToFloat((int) ra);
        float y = Float.intBitsToFloat((int) rb);
        float z = Float.intBitsToFloat((int) rc);
        if (in.ftz) {
            x = ftz(x);
            y = ftz(y);
            z = ftz(z);
        }
        float r = in.mod > Insn.RN ? Rounding.f32(in.op, in.mod, x, y, z) : switch (in.op) {
            case Insn.ADD -> x + y;
            case Insn.SUB -> x - y;
            case Insn.MUL -> x * y;
            case Insn.MAD, Insn.FMA -> Math.fma(x, y, z);
            case Insn.DIV -> x / y;
            case Insn.MIN -> Float.isNaN(x) ? y : Float.isNaN(y) ? x : Math.min(x, y);
            case Insn.MAX -> Float.isNaN(x) ? y : Float.isNaN(y) ? x : Math.max(x, y);
            case Insn.ABS -> Float.intBitsToFloat(Float.floatToRawIntBits(x) & 0x7FFF_FFFF);   // x: flushed if .ftz
            case Insn.NEG -> Float.intBitsToFloat(Float.floatToRawIntBits(x) ^ 0x8000_0000);
            case Insn.RCP -> 1f / x;
            case Insn.SQRT -> (float) Math.sqrt(x);
            case Insn.RSQRT -> (float) (1.0 / Math.sqrt(x));
            case Insn.EX2 -> (float) Math.pow(2.0, x);
            case Insn.LG2 -> (float) (Math.log(x) / Math.log(2.0));
            case Insn.SIN -> (float) Math.sin(x);
            case Insn.COS -> (float) Math.cos(x);
            case Insn.TANH -> (float) Math.tanh(x);
            case Insn.COPYSIGN -> Math.copySign(y, x);
            default -> throw new IllegalStateException(in.toString());
        };
        if (in.op == Insn.ABS || in.op == Insn.NEG) {
            return Float.floatToRawIntBits(r) & 0xFFFF_FFFFL;
        }
        if (in.sat) {
            r = Float.isNaN(r) ? 0f : Math.max(0f, Math.min(1f, r));
        }
        if (in.ftz) {
            r = ftz(r);
        }
        return Float.isNaN(r) ? CANONICAL_NAN_F32 : Float.floatToRawIntBits(r) & 0xFFFF_FFFFL;
    }

    private static long f64(Insn in, long ra, long rb, long rc) {
        double x = Double.longBitsToDouble(ra);
        double y = Double.longBitsToDouble(rb);
        double z = Double.longBitsToDouble(rc);
        double r = in.mod > Insn.RN ? Rounding.f64(in.op, in.mod, x, y, z) : switch (in.op) {
            case Insn.ADD -> x + y;
            case Insn.SUB -> x - y;
            case Insn.MUL -> x * y;
            case Insn.MAD, Insn.FMA -> Math.fma(x, y, z);
            case Insn.DIV -> x / y;
            case Insn.MIN -> Double.isNaN(x) ? y : Double.isNaN(y) ? x : Math.min(x, y);
            case Insn.MAX -> Double.isNaN(x) ? y : Double.isNaN(y) ? x : Math.max(x, y);
            case Insn.ABS -> Double.longBitsToDouble(ra & Long.MAX_VALUE);
            case Insn.NEG -> Double.longBitsToDouble(ra ^ Long.MIN_VALUE);
            case Insn.RCP -> 1.0 / x;
            case Insn.SQRT -> Math.sqrt(x);
            case Insn.RSQRT -> 1.0 / Math.sqrt(x);
            case Insn.COPYSIGN -> Math.copySign(y, x);
            default -> throw new IllegalStateException(in.toString());
        };
        if (in.op == Insn.ABS || in.op == Insn.NEG) {
            return Double.doubleToRawLongBits(r);
        }
        if (in.sat) {
            r = Double.isNaN(r) ? 0.0 : Math.max(0.0, Math.min(1.0, r));
        }
        return Double.isNaN(r) ? CANONICAL_NAN_F64 : Double.doubleToRawLongBits(r);
    }

    /** setp's comparison of a and b by the instruction's type. */
    static boolean compare(Insn in, long ra, long rb) {
        return compare(in.type, in.mod, in.ftz, ra, rb);
    }

    /** Comparison {@code cmp} of a and b as type {@code t} (a scalar type; .ftz flushes f32/f16 operands). */
    static boolean compare(int t, int cmp, boolean ftz, long ra, long rb) {
        if (Types.isFloat(t) || Types.isHalf(t)) {
            double x;
            double y;
            if (Types.isHalf(t)) {
                double[] v = Half.operands(t, ftz, ra, rb);
                x = v[0];
                y = v[1];
            } else if (Types.size(t) == 4) {
                float fx = Float.intBitsToFloat((int) ra);
                float fy = Float.intBitsToFloat((int) rb);
                if (ftz) {
                    fx = ftz(fx);
                    fy = ftz(fy);
                }
                x = fx;
                y = fy;
            } else {
                x = Double.longBitsToDouble(ra);
                y = Double.longBitsToDouble(rb);
            }
            boolean nan = Double.isNaN(x) || Double.isNaN(y);
            return switch (cmp) {
                case EQ -> !nan && x == y;
                case NE -> !nan && x != y;
                case LT -> !nan && x < y;
                case LE -> !nan && x <= y;
                case GT -> !nan && x > y;
                case GE -> !nan && x >= y;
                case EQU -> nan || x == y;
                case NEU -> nan || x != y;
                case LTU -> nan || x < y;
                case LEU -> nan || x <= y;
                case GTU -> nan || x > y;
                case GEU -> nan || x >= y;
                case NUM -> !nan;
                case NAN -> nan;
                default -> throw new IllegalStateException("comparison " + cmp);
            };
        }
        long a = norm(ra, t);
        long b = norm(rb, t);
        boolean unsigned = !Types.signed(t) || cmp >= LO && cmp <= HS;
        int order;
        if (unsigned) {
            int ut = Types.U << 4 | Types.size(t);
            order = Long.compareUnsigned(norm(ra, ut), norm(rb, ut));
        } else {
            order = Long.compare(a, b);
        }
        return switch (cmp) {
            case EQ -> order == 0;
            case NE -> order != 0;
            case LT, LO -> order < 0;
            case LE, LS -> order <= 0;
            case GT, HI -> order > 0;
            case GE, HS -> order >= 0;
            default -> throw new IllegalStateException("comparison " + cmp);
        };
    }

    /** The value an atomic writes, from the old value and the operands; {@code in.mod} is the op. */
    static long atomic(Insn in, long old, long b, long c) {
        int t = in.type;
        if (Types.isFloat(t)) {
            if (Types.size(t) == 4) {
                return Float.floatToRawIntBits(Float.intBitsToFloat((int) old) + Float.intBitsToFloat((int) b)) & 0xFFFF_FFFFL;
            }
            return Double.doubleToRawLongBits(Double.longBitsToDouble(old) + Double.longBitsToDouble(b));
        }
        long o = norm(old, t);
        long v = norm(b, t);
        return switch (in.mod) {
            case ATOM_ADD -> o + v;
            case ATOM_MIN -> lessThan(o, v, t) ? o : v;
            case ATOM_MAX -> lessThan(o, v, t) ? v : o;
            case ATOM_AND -> o & v;
            case ATOM_OR -> o | v;
            case ATOM_XOR -> o ^ v;
            case ATOM_EXCH -> v;
            case ATOM_CAS -> o == v ? norm(c, t) : o;   // compare with b, swap in c
            case ATOM_INC -> Long.compareUnsigned(o, v) >= 0 ? 0 : o + 1;
            case ATOM_DEC -> o == 0 || Long.compareUnsigned(o, v) > 0 ? v : o - 1;
            default -> throw new IllegalStateException(in.toString());
        };
    }
}
