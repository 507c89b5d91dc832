package io.gpusockets.emulated.ptx;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The emulated device's CUtensorMap: the 128 bytes cuTensorMapEncodeTiled/Im2col/Im2colWide write and
 * cp.async.bulk.tensor reads. NVIDIA does not document the driver's own layout (cuda.h calls the map opaque),
 * so this device defines its own; a program only copies the bytes (to a __grid_constant__ parameter, to device
 * memory) and hands them to TMA instructions, so any layout the encoder and the instructions agree on serves.
 * On a GPU the backend forwards the encoders to the real driver, whose bytes are then its own.
 *
 * <pre>
 * offset size  field (little-endian)
 *   0     4    magic 0x6d747367 ("gstm")
 *   4     2    version (1)
 *   6     1    kind: 0 tiled, 1 im2col, 2 im2col wide
 *   7     1    rank (1..5)
 *   8     1    CUtensorMapDataType
 *   9     1    CUtensorMapInterleave
 *  10     1    CUtensorMapSwizzle
 *  11     1    CUtensorMapL2promotion
 *  12     1    CUtensorMapFloatOOBfill
 *  13     1    CUtensorMapIm2ColWideMode (im2col wide)
 *  14     2    channelsPerPixel (im2col)
 *  16     8    global address
 *  24    40    globalDim[5], u64 each (1..2^32)
 *  64    32    globalStrides[4], bytes, u64 each: the strides of dimensions 1..4
 *  96     5    boxDim[5] - 1, u8 each (tiled)
 * 101     5    elementStrides[5], u8 each (1..8)
 * 106     2    pixelsPerColumn (im2col)
 * 108     6    pixelBoxLowerCorner[3], i16 each (im2col; wide: [0] the W offset)
 * 114     6    pixelBoxUpperCorner[3], i16 each (im2col; wide: [0] the W offset)
 * 120     8    zero
 * </pre>
 */
public final class TensorMapLayout {
    public static final int SIZE = 128;
    public static final int MAGIC = 0x6d74_7367;
    public static final int VERSION = 1;
    public static final int KIND_TILED = 0, KIND_IM2COL = 1, KIND_IM2COL_WIDE = 2;
    static final int OFF_MAGIC = 0, OFF_VERSION = 4, OFF_KIND = 6, OFF_RANK = 7, OFF_TYPE = 8, OFF_INTERLEAVE = 9,
            OFF_SWIZZLE = 10, OFF_L2 = 11, OFF_OOB = 12, OFF_WIDE_MODE = 13, OFF_CHANNELS = 14, OFF_ADDRESS = 16,
            OFF_DIMS = 24, OFF_STRIDES = 64, OFF_BOX = 96, OFF_ELEMENT_STRIDES = 101, OFF_PIXELS = 106, OFF_LOWER = 108,
            OFF_UPPER = 114;

    public static final int SWIZZLE_NONE = 0, SWIZZLE_32B = 1, SWIZZLE_64B = 2, SWIZZLE_128B = 3;
    public static final int INTERLEAVE_NONE = 0, INTERLEAVE_32B = 2;
    public static final int TYPE_16U4_ALIGN8B = 13, TYPE_16U4_ALIGN16B = 14, TYPE_16U6_ALIGN16B = 15;

    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED;

    /** The decoded fields; arrays hold {@code rank} entries (strides: the stride of each dimension, [0] the element size). */
    public record Map(int kind, int rank, int dataType, int interleave, int swizzle, int l2, int oobFill, int wideMode,
                      int channelsPerPixel, long address, long[] dims, long[] strides, int[] box, int[] elementStrides,
                      int pixelsPerColumn, int[] lower, int[] upper) {
        public int elementBytes() {
            return TensorMapLayout.elementBits(dataType) / 8;
        }
    }

    private TensorMapLayout() {
    }

    /** Bits of one element of CUtensorMapDataType {@code type} (the packed 16U4/16U6 types: 4 or 6); 0 for none. */
    public static int elementBits(int type) {
        return switch (type) {
            case 0 -> 8;
            case 1, 6, 9 -> 16;
            case 2, 3, 7, 10, 11, 12 -> 32;
            case 4, 5, 8 -> 64;
            case TYPE_16U4_ALIGN8B, TYPE_16U4_ALIGN16B -> 4;
            case TYPE_16U6_ALIGN16B -> 6;
            default -> 0;
        };
    }

    /** True for the floating-point types, the only ones an OOB NaN fill may be asked for. */
    public static boolean floating(int type) {
        return type >= 6 && type <= 12;
    }

    /** Writes a map; {@code dims, box, elementStrides} hold {@code rank} entries, {@code strides} rank - 1 (dimensions 1..). */
    public static void write(MemorySegment out, int kind, int rank, int dataType, int interleave, int swizzle, int l2,
                             int oobFill, int wideMode, int channelsPerPixel, long address, long[] dims, long[] strides,
                             int[] box, int[] elementStrides, int pixelsPerColumn, int[] lower, int[] upper) {
        out.asSlice(0, SIZE).fill((byte) 0);
        out.set(INT, OFF_MAGIC, MAGIC);
        out.set(SHORT, OFF_VERSION, (short) VERSION);
        out.set(ValueLayout.JAVA_BYTE, OFF_KIND, (byte) kind);
        out.set(ValueLayout.JAVA_BYTE, OFF_RANK, (byte) rank);
        out.set(ValueLayout.JAVA_BYTE, OFF_TYPE, (byte) dataType);
        out.set(ValueLayout.JAVA_BYTE, OFF_INTERLEAVE, (byte) interleave);
        out.set(ValueLayout.JAVA_BYTE, OFF_SWIZZLE, (byte) swizzle);
        out.set(ValueLayout.JAVA_BYTE, OFF_L2, (byte) l2);
        out.set(ValueLayout.JAVA_BYTE, OFF_OOB, (byte) oobFill);
        out.set(ValueLayout.JAVA_BYTE, OFF_WIDE_MODE, (byte) wideMode);
        out.set(SHORT, OFF_CHANNELS, (short) channelsPerPixel);
        out.set(LONG, OFF_ADDRESS, address);
        for (int i = 0; i < rank; i++) {
            out.set(LONG, OFF_DIMS + 8L * i, dims[i]);
            if (i > 0) {
                out.set(LONG, OFF_STRIDES + 8L * (i - 1), strides[i - 1]);
            }
            if (box != null) {
                out.set(ValueLayout.JAVA_BYTE, OFF_BOX + i, (byte) (box[i] - 1));
            }
            out.set(ValueLayout.JAVA_BYTE, OFF_ELEMENT_STRIDES + i, (byte) elementStrides[i]);
        }
        out.set(SHORT, OFF_PIXELS, (short) pixelsPerColumn);
        for (int i = 0; lower != null && i < lower.length; i++) {
            out.set(SHORT, OFF_LOWER + 2L * i, (short) lower[i]);
            out.set(SHORT, OFF_UPPER + 2L * i, (short) upper[i]);
        }
    }

    /** True when the 128 bytes are a map this device encoded (magic and version). */
    public static boolean valid(MemorySegment map) {
        return map.get(INT, OFF_MAGIC) == MAGIC && map.get(SHORT, OFF_VERSION) == VERSION
                && map.get(ValueLayout.JAVA_BYTE, OFF_RANK) >= 1 && map.get(ValueLayout.JAVA_BYTE, OFF_RANK) <= 5;
    }

    public static long address(MemorySegment map) {
        return map.get(LONG, OFF_ADDRESS);
    }

    public static void setAddress(MemorySegment map, long address) {
        map.set(LONG, OFF_ADDRESS, address);
    }

    /** The fields of a map {@link #valid} accepts. */
    public static Map read(MemorySegment m) {
        int rank = m.get(ValueLayout.JAVA_BYTE, OFF_RANK);
        int type = u8(m, OFF_TYPE);
        long[] dims = new long[rank];
        long[] strides = new long[rank];
        int[] box = new int[rank];
        int[] es = new int[rank];
        for (int i = 0; i < rank; i++) {
            dims[i] = m.get(LONG, OFF_DIMS + 8L * i);
            strides[i] = i == 0 ? Math.max(1, elementBits(type) / 8) : m.get(LONG, OFF_STRIDES + 8L * (i - 1));
            box[i] = u8(m, OFF_BOX + i) + 1;
            es[i] = u8(m, OFF_ELEMENT_STRIDES + i);
        }
        int[] lower = new int[3], upper = new int[3];
        for (int i = 0; i < 3; i++) {
            lower[i] = m.get(SHORT, OFF_LOWER + 2L * i);
            upper[i] = m.get(SHORT, OFF_UPPER + 2L * i);
        }
        return new Map(u8(m, OFF_KIND), rank, type, u8(m, OFF_INTERLEAVE), u8(m, OFF_SWIZZLE), u8(m, OFF_L2), u8(m, OFF_OOB),
                u8(m, OFF_WIDE_MODE), m.get(SHORT, OFF_CHANNELS) & 0xFFFF, m.get(LONG, OFF_ADDRESS), dims, strides, box, es,
                m.get(SHORT, OFF_PIXELS) & 0xFFFF, lower, upper);
    }

    private static int u8(MemorySegment m, long offset) {
        return m.get(ValueLayout.JAVA_BYTE, offset) & 0xFF;
    }
}
