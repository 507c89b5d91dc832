package io.gpusockets.protocol.structs;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * One CUmemDecompressParams (cuda.h 13.0), as cuMemBatchDecompressAsync takes an array of them.
 *
 * <pre>
 *  0 srcNumBytes   size_t   compressed bytes read at src
 *  8 dstNumBytes   size_t   bytes expected at dst (the driver's scheduling hint; the backend's bound, below)
 * 16 dstActBytes   u32*     where the bytes written are recorded (4 bytes, device memory)
 * 24 src           void*
 * 32 dst           void*
 * 40 algo          u32      CUmemDecompressAlgorithm: one of DEFLATE 1, SNAPPY 2, LZ4 4
 * 44 padding[20]   zero
 * </pre>
 */
public final class DecompressParams {
    public static final int SIZE = 64;
    /** Operations one batch may carry here (the driver documents no limit; a bound keeps the backend's memory bounded). */
    public static final int MAX_COUNT = 4096;
    public static final long SRC_BYTES = 0, DST_BYTES = 8, DST_ACT_BYTES = 16, SRC = 24, DST = 32, ALGO = 40, PADDING = 44;
    public static final int PADDING_BYTES = 20;
    public static final int DEFLATE = 1, SNAPPY = 2, LZ4 = 4;
    /** errorIndex for an error of no operation in particular (SIZE_MAX). */
    public static final long NO_INDEX = -1;

    private DecompressParams() {
    }

    public static long at(MemorySegment params, long index, long field) {
        return params.get(ValueLayout.JAVA_LONG_UNALIGNED, index * SIZE + field);
    }

    public static int algo(MemorySegment params, long index) {
        return params.get(ValueLayout.JAVA_INT_UNALIGNED, index * SIZE + ALGO);
    }

    /** Whether the algorithm is one cuda.h 13.0 defines. */
    public static boolean knownAlgorithm(int algo) {
        return algo == DEFLATE || algo == SNAPPY || algo == LZ4;
    }

    /** Whether the padding of operation {@code index} is zero, as the driver requires. */
    public static boolean paddingZero(MemorySegment params, long index) {
        for (int i = 0; i < PADDING_BYTES; i++) {
            if (params.get(ValueLayout.JAVA_BYTE, index * SIZE + PADDING + i) != 0) {
                return false;
            }
        }
        return true;
    }

    /**
     * Why operation {@code index} is refused before it leaves the guest or reaches the driver (null: its shape is
     * fine): a known algorithm, zero padding, a source and destination of at least one byte, no NULL pointer.
     * The backend requires dstNumBytes: it bounds the range checked at dst.
     */
    public static String shapeRefusal(MemorySegment params, long index) {
        int algo = algo(params, index);
        if (!knownAlgorithm(algo)) {
            return "algo=" + algo + " is no CUmemDecompressAlgorithm";
        }
        if (!paddingZero(params, index)) {
            return "padding is not zero";
        }
        if (at(params, index, SRC_BYTES) <= 0 || at(params, index, DST_BYTES) <= 0) {
            return "srcNumBytes=" + at(params, index, SRC_BYTES) + " dstNumBytes=" + at(params, index, DST_BYTES)
                    + " (both must be given)";
        }
        if (at(params, index, SRC) == 0 || at(params, index, DST) == 0 || at(params, index, DST_ACT_BYTES) == 0) {
            return "a NULL src, dst or dstActBytes";
        }
        return null;
    }
}
