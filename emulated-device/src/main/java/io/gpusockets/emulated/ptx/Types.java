package io.gpusockets.emulated.ptx;

/**
 * PTX fundamental types as ints: {@code kind << 4 | bytes}. Register values are kept in longs;
 * a value is read through {@link #norm}, which extends it by the instruction's type, so writers
 * store raw results and never mask.
 */
final class Types {
    static final int U = 1;
    static final int S = 2;
    static final int B = 3;
    static final int F = 4;
    static final int PRED = 5 << 4 | 1;
    /** IEEE binary16 (.f16, and .f16x2: two of them in a .b32, the first in the low half). */
    static final int H = 6;
    /** bfloat16 (.bf16, .bf16x2): the high half of an f32. */
    static final int BF = 7;
    static final int F16 = H << 4 | 2;
    static final int F16X2 = H << 4 | 4;
    static final int BF16 = BF << 4 | 2;
    static final int BF16X2 = BF << 4 | 4;

    private Types() {
    }

    static int kind(int t) {
        return t >> 4;
    }

    static int size(int t) {
        return t & 15;
    }

    static int bits(int t) {
        return (t & 15) * 8;
    }

    /** The type a modifier names ({@code u32}), 0 when it names none, -1 for a type not covered (b128, e4m3...). */
    static int parse(String m) {
        return switch (m) {
            case "u8" -> U << 4 | 1;
            case "u16" -> U << 4 | 2;
            case "u32" -> U << 4 | 4;
            case "u64" -> U << 4 | 8;
            case "s8" -> S << 4 | 1;
            case "s16" -> S << 4 | 2;
            case "s32" -> S << 4 | 4;
            case "s64" -> S << 4 | 8;
            case "b8" -> B << 4 | 1;
            case "b16" -> B << 4 | 2;
            case "b32" -> B << 4 | 4;
            case "b64" -> B << 4 | 8;
            case "f32" -> F << 4 | 4;
            case "f64" -> F << 4 | 8;
            case "pred" -> PRED;
            case "f16" -> F16;
            case "f16x2" -> F16X2;
            case "bf16" -> BF16;
            case "bf16x2" -> BF16X2;
            case "b128", "e4m3", "e5m2", "tf32", "e4m3x2", "e5m2x2" -> -1;
            default -> 0;
        };
    }

    static boolean signed(int t) {
        return kind(t) == S;
    }

    static boolean isFloat(int t) {
        return kind(t) == F;
    }

    /** .f16, .f16x2, .bf16, .bf16x2: not {@link #isFloat} (that is .f32/.f64); only the instructions that opt in take them. */
    static boolean isHalf(int t) {
        return kind(t) == H || kind(t) == BF;
    }

    /** {@code v} extended by type {@code t}: sign for .s, zero for .u/.b/.f, 0/1 for .pred. */
    static long norm(long v, int t) {
        return switch (t) {
            case S << 4 | 1 -> (byte) v;
            case S << 4 | 2 -> (short) v;
            case S << 4 | 4 -> (int) v;
            case U << 4 | 1, B << 4 | 1 -> v & 0xFF;
            case U << 4 | 2, B << 4 | 2, F16, BF16 -> v & 0xFFFF;
            case U << 4 | 4, B << 4 | 4, F << 4 | 4, F16X2, BF16X2 -> v & 0xFFFF_FFFFL;
            case PRED -> v & 1;
            default -> v;
        };
    }
}
