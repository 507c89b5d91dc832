package io.gpusockets.protocol.structs;

import java.lang.foreign.MemorySegment;

/**
 * The arrays of cuTensorMapEncodeTiled/Im2col/Im2colWide as they travel: each at its largest size (cuda.h 13.0:
 * rank at most 5), zero-padded past the rank's entries, so no length on the wire depends on the rank.
 *
 * <pre>
 *   globalDim       5 x cuuint64_t (rank entries)        40 bytes
 *   globalStrides   4 x cuuint64_t (rank - 1 entries)    32 bytes
 *   boxDim          5 x cuuint32_t (rank entries)        20 bytes
 *   elementStrides  5 x cuuint32_t (rank entries)        20 bytes
 *   pixelBox*Corner 3 x int        (rank - 2 entries)    12 bytes
 * </pre>
 *
 * The frontend copies each array's entries out of the program's memory ({@link #padded}); the backend checks the rank
 * and the enums ({@link #check}) and copies the entries into native memory of the exact size ({@link #exact}) before
 * the driver reads them, so a rank the guest chose never makes anything read past what was received.
 */
public final class TensorMapArgs {
    /** sizeof(CUtensorMap), and the alignment the driver requires of it. */
    public static final int MAP = 128, MAP_ALIGNMENT = 64;
    public static final int MAX_RANK = 5;
    public static final int DIMS = 40, STRIDES = 32, BOX = 20, ELEMENT_STRIDES = 20, CORNERS = 12;
    /** Which encoder: tiled (rank 1..5), im2col and im2col wide (rank 3..5). */
    public static final int TILED = 0, IM2COL = 1, IM2COL_WIDE = 2;

    private TensorMapArgs() {
    }

    /** The least rank the encoder takes: 1 tiled, 3 im2col (and any interleaved map). */
    public static int minRank(int encoder) {
        return encoder == TILED ? 1 : 3;
    }

    /** True when the rank lies in the encoder's range (the driver's own first check). */
    public static boolean rankValid(int encoder, int rank) {
        return rank >= minRank(encoder) && rank <= MAX_RANK;
    }

    /**
     * Null when the enums and rank are ones cuda.h 13.0 defines (the backend's check before the driver sees them),
     * else what is wrong: CUtensorMapDataType 0..15, CUtensorMapInterleave 0..2, CUtensorMapSwizzle 0..6,
     * CUtensorMapL2promotion 0..3, CUtensorMapFloatOOBfill 0..1, CUtensorMapIm2ColWideMode 0..1 (-1: none).
     */
    public static String check(int encoder, int rank, int type, int interleave, int swizzle, int l2, int oobFill, int wideMode) {
        if (!rankValid(encoder, rank)) {
            return "tensorRank=" + Integer.toUnsignedString(rank);
        }
        if (type < 0 || type > 15) {
            return "tensorDataType=" + type;
        }
        if (interleave < 0 || interleave > 2) {
            return "interleave=" + interleave;
        }
        if (swizzle < 0 || swizzle > 6) {
            return "swizzle=" + swizzle;
        }
        if (l2 < 0 || l2 > 3) {
            return "l2Promotion=" + l2;
        }
        if (oobFill < 0 || oobFill > 1) {
            return "oobFill=" + oobFill;
        }
        if (wideMode != -1 && (wideMode < 0 || wideMode > 1)) {
            return "mode=" + wideMode;
        }
        return null;
    }

    /**
     * {@code count} entries of {@code element} bytes from the program's array into {@code into} (its wire size,
     * zeroed); false when the array is NULL but entries are needed.
     */
    public static boolean padded(MemorySegment array, int element, int count, MemorySegment into) {
        into.fill((byte) 0);
        if (count <= 0) {
            return true;
        }
        if (array.isNative() && array.address() == 0) {
            return false;
        }
        long n = (long) element * count;
        MemorySegment src = array.isNative() && array.byteSize() < n ? array.reinterpret(n) : array;
        MemorySegment.copy(src, 0, into, 0, n);
        return true;
    }

    /**
     * The first {@code count} entries of {@code element} bytes of a received array, in native memory of exactly that
     * size (at least one entry's room, zeroed, when {@code count} is 0: the driver then reads nothing).
     */
    public static MemorySegment exact(java.lang.foreign.Arena arena, MemorySegment received, int element, int count) {
        long n = (long) element * Math.max(count, 0);
        MemorySegment out = arena.allocate(Math.max(n, element), 8);
        MemorySegment.copy(received, 0, out, 0, Math.min(n, received.byteSize()));
        return out.asSlice(0, Math.max(n, element));
    }
}
