package io.gpusockets.protocol.structs;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A CUDA_ARRAY3D_DESCRIPTOR (cuda.h 13.0, the _v2 layout) and the shapes it describes. cudart 13 makes
 * every array with cuArray3DCreate, 1D and 2D ones too.
 *
 * <pre>
 *    0  size_t Width            elements per row
 *    8  size_t Height           rows (0: a 1D or 1D layered array)
 *   16  size_t Depth            slices: 3D depth, layers, or 6 faces per cubemap (0: no slices)
 *   24  CUarray_format Format   u32
 *   28  unsigned NumChannels    1, 2 or 4
 *   32  unsigned Flags          CUDA_ARRAY3D_* (+4 pad)
 *   (40 bytes)
 * </pre>
 *
 * <p>Shapes (cuArray3DCreate's documentation): 1D {@code W>0, H=0, D=0}; 2D {@code W,H>0, D=0}; 3D
 * {@code W,H,D>0}; 1D layered {@code W>0, H=0, D>0} with LAYERED; 2D layered {@code W,H,D>0} with LAYERED;
 * cubemap {@code W=H>0, D=6} with CUBEMAP; cubemap layered {@code W=H>0}, D a multiple of 6, with both.
 */
public record Array3DDescriptor(long width, long height, long depth, int format, int numChannels, int flags) {
    public static final long SIZE = 40;
    private static final long WIDTH = 0, HEIGHT = 8, DEPTH = 16, FORMAT = 24, NUM_CHANNELS = 28, FLAGS = 32;

    public static final int LAYERED = 0x01;
    public static final int SURFACE_LDST = 0x02;
    public static final int CUBEMAP = 0x04;
    public static final int TEXTURE_GATHER = 0x08;
    public static final int DEPTH_TEXTURE = 0x10;
    public static final int COLOR_ATTACHMENT = 0x20;
    public static final int SPARSE = 0x40;
    public static final int DEFERRED_MAPPING = 0x80;
    public static final int VIDEO_ENCODE_DECODE = 0x100;
    /** Every flag cuda.h 13.0 defines. */
    public static final int KNOWN_FLAGS = 0x1ff;

    /** What an array is, from its dimensions and flags. */
    public enum Shape {
        ONE_D(1, false), TWO_D(2, false), THREE_D(3, false), LAYERED_1D(1, true), LAYERED_2D(2, true),
        CUBEMAP(2, false), CUBEMAP_LAYERED(2, true);

        /** Dimensions of one layer (a cubemap's face is 2D). */
        public final int dimensions;
        public final boolean layered;

        Shape(int dimensions, boolean layered) {
            this.dimensions = dimensions;
            this.layered = layered;
        }
    }

    public static Array3DDescriptor read(MemorySegment s) {
        return new Array3DDescriptor(s.get(ValueLayout.JAVA_LONG_UNALIGNED, WIDTH), s.get(ValueLayout.JAVA_LONG_UNALIGNED, HEIGHT),
                s.get(ValueLayout.JAVA_LONG_UNALIGNED, DEPTH), s.get(ValueLayout.JAVA_INT_UNALIGNED, FORMAT),
                s.get(ValueLayout.JAVA_INT_UNALIGNED, NUM_CHANNELS), s.get(ValueLayout.JAVA_INT_UNALIGNED, FLAGS));
    }

    public void write(MemorySegment s) {
        s.asSlice(0, SIZE).fill((byte) 0);
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, WIDTH, width);
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, HEIGHT, height);
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, DEPTH, depth);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, FORMAT, format);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, NUM_CHANNELS, numChannels);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, FLAGS, flags);
    }

    /** The 3D form of a cuArrayCreate descriptor: depth 0, no flags. */
    public static Array3DDescriptor of(ArrayDescriptor d) {
        return new Array3DDescriptor(d.width(), d.height(), 0, d.format(), d.numChannels(), 0);
    }

    /** The cuArrayCreate form (depth and flags dropped), as cuArrayGetDescriptor answers it. */
    public ArrayDescriptor flat() {
        return new ArrayDescriptor(width, height, format, numChannels);
    }

    /** The shape these dimensions and flags describe, or null when they describe none (INVALID_VALUE). */
    public Shape shape() {
        boolean layered = (flags & LAYERED) != 0, cubemap = (flags & CUBEMAP) != 0;
        if (width <= 0 || height < 0 || depth < 0) {
            return null;
        }
        if (cubemap) {
            if (height != width || depth <= 0 || depth % 6 != 0 || (!layered && depth != 6)) {
                return null;
            }
            return layered ? Shape.CUBEMAP_LAYERED : Shape.CUBEMAP;
        }
        if (layered) {
            if (depth == 0) {
                return null;
            }
            return height == 0 ? Shape.LAYERED_1D : Shape.LAYERED_2D;
        }
        if (height == 0) {
            return depth == 0 ? Shape.ONE_D : null;
        }
        return depth == 0 ? Shape.TWO_D : Shape.THREE_D;
    }

    /**
     * Whether the driver gives the array no memory of its own: a sparse or deferred-mapping array's tiles (or
     * whole memory) are bound later to VMM allocations by cuMemMapArrayAsync, and those allocations hold the memory.
     */
    public boolean unbacked() {
        return (flags & (SPARSE | DEFERRED_MAPPING)) != 0;
    }

    /** Rows per slice: max(height, 1). */
    public long rows() {
        return Math.max(height, 1);
    }

    /** Slices (3D depth, layers, or cubemap faces): max(depth, 1). */
    public long slices() {
        return Math.max(depth, 1);
    }

    /**
     * Level {@code level} of a mipmapped array of this descriptor: width, height and (for a 3D array) depth
     * halved per level, never below 1 (a dimension of 0 stays 0); layers and cubemap faces are not halved.
     */
    public Array3DDescriptor level(int level) {
        long w = Math.max(1, width >> level);
        long h = height == 0 ? 0 : Math.max(1, height >> level);
        long d = depth == 0 || shape() != Shape.THREE_D ? depth : Math.max(1, depth >> level);
        return new Array3DDescriptor(w, h, d, format, numChannels, flags);
    }

    /** The most levels a mipmapped array of this descriptor can have: 1 + floor(log2(the largest halved dimension)). */
    public int maxLevels() {
        long largest = Math.max(width, Math.max(height, shape() == Shape.THREE_D ? depth : 0));
        return largest <= 0 ? 0 : 64 - Long.numberOfLeadingZeros(largest);
    }

    /**
     * Bytes of {@code levels} levels ({@link #bytes} of each; levels past the 64th, all of one element, are not
     * counted: no driver makes them), 0 for no level at all (a count the driver refuses), or
     * {@link Long#MAX_VALUE} on overflow.
     */
    public long mipmapBytes(int levels, int unknownElementBytes) {
        if (levels < 1) {
            return 0;
        }
        long total = 0;
        for (int l = 0; l < Math.min(levels, 64); l++) {
            long b = level(l).bytes(unknownElementBytes);
            if (b == Long.MAX_VALUE || total > Long.MAX_VALUE - b) {
                return Long.MAX_VALUE;
            }
            total += b;
        }
        return total;
    }

    /**
     * Bytes of the elements: width × rows × slices × element bytes ({@code elementBytes} when the
     * format's is not known), or {@link Long#MAX_VALUE} when a dimension is negative or the product overflows.
     */
    public long bytes(int unknownElementBytes) {
        int e = ArrayDescriptor.elementBytes(format, numChannels);
        long element = e > 0 ? e : unknownElementBytes;
        if (width < 0 || height < 0 || depth < 0) {
            return Long.MAX_VALUE;
        }
        try {
            return Math.multiplyExact(Math.multiplyExact(Math.multiplyExact(width, rows()), slices()), element);
        } catch (ArithmeticException x) {
            return Long.MAX_VALUE;
        }
    }
}
