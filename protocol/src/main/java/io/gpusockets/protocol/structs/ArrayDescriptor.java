package io.gpusockets.protocol.structs;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A CUDA_ARRAY_DESCRIPTOR (cuda.h 13.0, the _v2 layout), and the sizes of CUarray_format elements.
 *
 * <pre>
 *    0  size_t Width            elements per row
 *    8  size_t Height           rows (0: a 1D array, one row)
 *   16  CUarray_format Format   u32
 *   20  unsigned NumChannels    1, 2 or 4
 *   (24 bytes)
 * </pre>
 */
public record ArrayDescriptor(long width, long height, int format, int numChannels) {
    public static final long SIZE = 24;
    private static final long WIDTH = 0, HEIGHT = 8, FORMAT = 16, NUM_CHANNELS = 20;

    public static ArrayDescriptor read(MemorySegment s) {
        return new ArrayDescriptor(s.get(ValueLayout.JAVA_LONG_UNALIGNED, WIDTH), s.get(ValueLayout.JAVA_LONG_UNALIGNED, HEIGHT),
                s.get(ValueLayout.JAVA_INT_UNALIGNED, FORMAT), s.get(ValueLayout.JAVA_INT_UNALIGNED, NUM_CHANNELS));
    }

    public void write(MemorySegment s) {
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, WIDTH, width);
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, HEIGHT, height);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, FORMAT, format);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, NUM_CHANNELS, numChannels);
    }

    /**
     * Bytes of one channel of a plain CUarray_format (the integer, half and float formats) or of a
     * normalized one (UNORM/SNORM_INT8Xn, _INT16Xn), or -1 for the others (block-compressed and video
     * formats), whose element sizes differ by kind.
     */
    public static int channelBytes(int format) {
        return switch (format) {
            case 0x01, 0x08 -> 1;        // UNSIGNED_INT8, SIGNED_INT8
            case 0x02, 0x09, 0x10 -> 2;  // UNSIGNED_INT16, SIGNED_INT16, HALF
            case 0x03, 0x0a, 0x20 -> 4;  // UNSIGNED_INT32, SIGNED_INT32, FLOAT
            case 0xc0, 0xc1, 0xc2, 0xc6, 0xc7, 0xc8 -> 1;  // UNORM_INT8X1/2/4, SNORM_INT8X1/2/4
            case 0xc3, 0xc4, 0xc5, 0xc9, 0xca, 0xcb -> 2;  // UNORM_INT16X1/2/4, SNORM_INT16X1/2/4
            default -> -1;
        };
    }

    /**
     * The channel count a normalized format (UNORM/SNORM_INT8Xn, _INT16Xn) names (1, 2 or 4), or 0 for a
     * format whose channel count is the descriptor's NumChannels.
     */
    public static int impliedChannels(int format) {
        if (format < 0xc0 || format > 0xcb) {
            return 0;
        }
        return switch ((format - 0xc0) % 3) {
            case 0 -> 1;
            case 1 -> 2;
            default -> 4;
        };
    }

    /**
     * Bytes of one element (all channels), or -1 for formats {@link #channelBytes} does not know, a channel
     * count other than 1, 2 or 4, or a normalized format with another channel count than it names.
     */
    public static int elementBytes(int format, int numChannels) {
        int c = channelBytes(format);
        int implied = impliedChannels(format);
        if (c < 0 || (numChannels != 1 && numChannels != 2 && numChannels != 4) || (implied != 0 && implied != numChannels)) {
            return -1;
        }
        return c * numChannels;
    }
}
