package io.gpusockets.protocol.structs;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A CUDA_MEMCPY2D or CUDA_MEMCPY3D: read from and written to native memory in the layouts of
 * cuda.h 13.0 (LP64: size_t, pointers and CUarray are 8 bytes, CUmemorytype 4 bytes padded to 8),
 * and encoded on the wire between frontend and backend. A 2D copy is a 3D copy of depth 1 whose
 * sides have z = 0, lod = 0 and height = 0.
 *
 * <pre>
 * CUDA_MEMCPY2D (128 bytes)                  CUDA_MEMCPY3D (200 bytes)
 *   src   dst                                  src   dst
 *     0    56  size_t XInBytes                   0    88  size_t XInBytes
 *     8    64  size_t Y                          8    96  size_t Y
 *    16    72  CUmemorytype MemoryType (+4 pad) 16   104  size_t Z
 *    24    80  void* Host                       24   112  size_t LOD
 *    32    88  CUdeviceptr Device               32   120  CUmemorytype MemoryType (+4 pad)
 *    40    96  CUarray Array                    40   128  void* Host
 *    48   104  size_t Pitch                     48   136  CUdeviceptr Device
 *   112        size_t WidthInBytes              56   144  CUarray Array
 *   120        size_t Height                    64   152  void* reserved (must be NULL)
 *                                               72   160  size_t Pitch
 *                                               80   168  size_t Height
 *                                              176        size_t WidthInBytes
 *                                              184        size_t Height
 *                                              192        size_t Depth
 * </pre>
 *
 * <p>On the wire (little-endian), per side, source first: {@code type u32, x u64, y u64, z u64,
 * lod u64, device u64, array u64, pitch u64, height u64}, then {@code width u64, height u64,
 * depth u64}. Host pointers never travel: a host side's bytes follow as DATA frames, packed row after
 * row with no gaps, and {@code device} carries an array's session handle id for ARRAY sides.
 *
 * @param src    the source side
 * @param dst    the destination side
 * @param width  WidthInBytes
 * @param height rows per slice
 * @param depth  slices (1 for 2D)
 */
public record Memcpy3D(Side src, Side dst, long width, long height, long depth) {
    public static final int HOST = 1;
    public static final int DEVICE = 2;
    public static final int ARRAY = 3;
    public static final int UNIFIED = 4;

    public static final long SIZE_2D = 128;
    public static final long SIZE_3D = 200;
    /** Bytes of {@link #encode}. */
    public static final int WIRE_BYTES = 2 * (4 + 8 * 8) + 3 * 8;

    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;

    /** Offsets of one side's fields in CUDA_MEMCPY2D, from the side's base (0 or 56). */
    private static final long S2_X = 0, S2_Y = 8, S2_TYPE = 16, S2_HOST = 24, S2_DEVICE = 32, S2_ARRAY = 40, S2_PITCH = 48;
    private static final long DST_2D = 56, WIDTH_2D = 112, HEIGHT_2D = 120;
    /** Offsets of one side's fields in CUDA_MEMCPY3D, from the side's base (0 or 88). */
    private static final long S3_X = 0, S3_Y = 8, S3_Z = 16, S3_LOD = 24, S3_TYPE = 32, S3_HOST = 40, S3_DEVICE = 48,
            S3_ARRAY = 56, S3_RESERVED = 64, S3_PITCH = 72, S3_HEIGHT = 80;
    private static final long DST_3D = 88, WIDTH_3D = 176, HEIGHT_3D = 184, DEPTH_3D = 192;

    /**
     * One side of a copy. For HOST sides {@code host} is the address; for DEVICE and UNIFIED sides
     * {@code device}; for ARRAY sides {@code array} (a CUarray, or a session handle id on the wire).
     * {@code reserved} is the 3D struct's reserved pointer, which must be NULL.
     */
    public record Side(int memoryType, long x, long y, long z, long lod, long host, long device, long array,
                       long pitch, long height, long reserved) {

        /** This side as a HOST side at {@code address} with the given pitch and slice height, from its origin. */
        public Side asHost(long address, long newPitch, long newHeight) {
            return new Side(HOST, 0, 0, 0, 0, address, 0, 0, newPitch, newHeight, 0);
        }

        /** This side with memory type and address replaced (UNIFIED resolved to HOST or DEVICE). */
        public Side resolved(int type) {
            long address = memoryType == UNIFIED ? device : type == HOST ? host : device;
            return new Side(type, x, y, z, lod, type == HOST ? address : 0, type == DEVICE ? address : 0, array,
                    pitch, height, reserved);
        }

        /** This side moved by {@code dx} bytes, {@code dy} rows and {@code dz} slices. */
        public Side offset(long dx, long dy, long dz) {
            return new Side(memoryType, x + dx, y + dy, z + dz, lod, host, device, array, pitch, height, reserved);
        }

        /** The same side with its array replaced (a session id translated to the driver's handle). */
        public Side withArray(long newArray) {
            return new Side(memoryType, x, y, z, lod, host, device, newArray, pitch, height, reserved);
        }

        /** Base address of a pitched side (host or device). */
        public long base() {
            return memoryType == HOST ? host : device;
        }
    }

    /** A HOST side at {@code address}, from its origin (pitch and height unused by a one-row copy). */
    public static Side hostSide(long address) {
        return new Side(HOST, 0, 0, 0, 0, address, 0, 0, 0, 0, 0);
    }

    /** A DEVICE side at {@code address}, from its origin. */
    public static Side deviceSide(long address) {
        return new Side(DEVICE, 0, 0, 0, 0, 0, address, 0, 0, 0, 0);
    }

    /** An ARRAY side at byte {@code offset} of row 0 of {@code array}. */
    public static Side arraySide(long array, long offset) {
        return new Side(ARRAY, offset, 0, 0, 0, 0, 0, array, 0, 0, 0);
    }

    /**
     * The 2D copy that stands for an array copy of cuMemcpyHtoA/AtoH/DtoA/AtoD/AtoA (and Async): {@code bytes}
     * in one row, at the sides' byte offsets. For a 1D array (the arrays those calls take) it is the same copy.
     */
    public static Memcpy3D arrayRow(Side src, Side dst, long bytes) {
        return new Memcpy3D(src, dst, bytes, 1, 1);
    }

    /** Reads a CUDA_MEMCPY2D; {@code s} must hold {@link #SIZE_2D} bytes. */
    public static Memcpy3D read2D(MemorySegment s) {
        return new Memcpy3D(side2D(s, 0), side2D(s, DST_2D), s.get(LONG, WIDTH_2D), s.get(LONG, HEIGHT_2D), 1);
    }

    private static Side side2D(MemorySegment s, long b) {
        return new Side(s.get(INT, b + S2_TYPE), s.get(LONG, b + S2_X), s.get(LONG, b + S2_Y), 0, 0,
                s.get(LONG, b + S2_HOST), s.get(LONG, b + S2_DEVICE), s.get(LONG, b + S2_ARRAY), s.get(LONG, b + S2_PITCH), 0, 0);
    }

    /** Reads a CUDA_MEMCPY3D; {@code s} must hold {@link #SIZE_3D} bytes. */
    public static Memcpy3D read3D(MemorySegment s) {
        return new Memcpy3D(side3D(s, 0), side3D(s, DST_3D), s.get(LONG, WIDTH_3D), s.get(LONG, HEIGHT_3D),
                s.get(LONG, DEPTH_3D));
    }

    private static Side side3D(MemorySegment s, long b) {
        return new Side(s.get(INT, b + S3_TYPE), s.get(LONG, b + S3_X), s.get(LONG, b + S3_Y), s.get(LONG, b + S3_Z),
                s.get(LONG, b + S3_LOD), s.get(LONG, b + S3_HOST), s.get(LONG, b + S3_DEVICE), s.get(LONG, b + S3_ARRAY),
                s.get(LONG, b + S3_PITCH), s.get(LONG, b + S3_HEIGHT), s.get(LONG, b + S3_RESERVED));
    }

    /** Writes this copy as a CUDA_MEMCPY2D (z, lod, slice height and depth are not part of it). */
    public void write2D(MemorySegment s) {
        s.asSlice(0, SIZE_2D).fill((byte) 0);
        writeSide2D(s, 0, src);
        writeSide2D(s, DST_2D, dst);
        s.set(LONG, WIDTH_2D, width);
        s.set(LONG, HEIGHT_2D, height);
    }

    private static void writeSide2D(MemorySegment s, long b, Side side) {
        s.set(LONG, b + S2_X, side.x());
        s.set(LONG, b + S2_Y, side.y());
        s.set(INT, b + S2_TYPE, side.memoryType());
        s.set(LONG, b + S2_HOST, side.host());
        s.set(LONG, b + S2_DEVICE, side.device());
        s.set(LONG, b + S2_ARRAY, side.array());
        s.set(LONG, b + S2_PITCH, side.pitch());
    }

    /** Writes this copy as a CUDA_MEMCPY3D (reserved pointers NULL). */
    public void write3D(MemorySegment s) {
        s.asSlice(0, SIZE_3D).fill((byte) 0);
        writeSide3D(s, 0, src);
        writeSide3D(s, DST_3D, dst);
        s.set(LONG, WIDTH_3D, width);
        s.set(LONG, HEIGHT_3D, height);
        s.set(LONG, DEPTH_3D, depth);
    }

    private static void writeSide3D(MemorySegment s, long b, Side side) {
        s.set(LONG, b + S3_X, side.x());
        s.set(LONG, b + S3_Y, side.y());
        s.set(LONG, b + S3_Z, side.z());
        s.set(LONG, b + S3_LOD, side.lod());
        s.set(INT, b + S3_TYPE, side.memoryType());
        s.set(LONG, b + S3_HOST, side.host());
        s.set(LONG, b + S3_DEVICE, side.device());
        s.set(LONG, b + S3_ARRAY, side.array());
        s.set(LONG, b + S3_PITCH, side.pitch());
        s.set(LONG, b + S3_HEIGHT, side.height());
    }

    /** Appends the wire form ({@link #WIRE_BYTES} bytes; host addresses are left out). */
    public void encode(ByteBuffer b) {
        b.order(ByteOrder.LITTLE_ENDIAN);
        encodeSide(b, src);
        encodeSide(b, dst);
        b.putLong(width).putLong(height).putLong(depth);
    }

    private static void encodeSide(ByteBuffer b, Side s) {
        b.putInt(s.memoryType()).putLong(s.x()).putLong(s.y()).putLong(s.z()).putLong(s.lod())
                .putLong(s.device()).putLong(s.array()).putLong(s.pitch()).putLong(s.height());
    }

    /** Reads the wire form written by {@link #encode}. */
    public static Memcpy3D decode(ByteBuffer b) {
        Side src = decodeSide(b);
        Side dst = decodeSide(b);
        return new Memcpy3D(src, dst, b.getLong(), b.getLong(), b.getLong());
    }

    private static Side decodeSide(ByteBuffer b) {
        int type = b.getInt();
        long x = b.getLong(), y = b.getLong(), z = b.getLong(), lod = b.getLong();
        long device = b.getLong(), array = b.getLong(), pitch = b.getLong(), height = b.getLong();
        return new Side(type, x, y, z, lod, 0, device, array, pitch, height, 0);
    }

    /**
     * A CUDA_MEMCPY3D_PEER read with {@link #read3D} (the same layout, with srcContext and dstContext where
     * CUDA_MEMCPY3D has its reserved pointers) as the CUDA_MEMCPY3D of the same copy: the contexts dropped.
     */
    public Memcpy3D withoutPeerContexts() {
        return with(new Side(src.memoryType, src.x, src.y, src.z, src.lod, src.host, src.device, src.array, src.pitch, src.height, 0),
                new Side(dst.memoryType, dst.x, dst.y, dst.z, dst.lod, dst.host, dst.device, dst.array, dst.pitch, dst.height, 0));
    }

    public Memcpy3D with(Side newSrc, Side newDst) {
        return new Memcpy3D(newSrc, newDst, width, height, depth);
    }

    public Memcpy3D withExtent(long w, long h, long d) {
        return new Memcpy3D(src, dst, w, h, d);
    }

    /** Bytes moved: width * height * depth, or -1 when a count is above 2^63 or the product overflows. */
    public long totalBytes() {
        if (width < 0 || height < 0 || depth < 0) {
            return -1;
        }
        try {
            return Math.multiplyExact(Math.multiplyExact(width, height), depth);
        } catch (ArithmeticException e) {
            return -1;
        }
    }

    /** Distance between two slices of a pitched side: pitch * its height. -1 on overflow. */
    public static long sliceStride(Side s) {
        try {
            return s.pitch() < 0 || s.height() < 0 ? -1 : Math.multiplyExact(s.pitch(), s.height());
        } catch (ArithmeticException e) {
            return -1;
        }
    }

    /** Offset of the first byte touched on a pitched side from its base: x + y*pitch + z*pitch*height; -1 on overflow. */
    public static long startOffset(Side s) {
        long stride = sliceStride(s);
        if (s.x() < 0 || s.y() < 0 || s.z() < 0 || stride < 0) {
            return -1;
        }
        try {
            return Math.addExact(s.x(), Math.addExact(Math.multiplyExact(s.y(), s.pitch()), Math.multiplyExact(s.z(), stride)));
        } catch (ArithmeticException e) {
            return -1;
        }
    }

    /**
     * Bytes from the first to one past the last byte this copy touches on a pitched side:
     * {@code (depth-1)*pitch*height + (height-1)*pitch + width}; 0 for an empty copy; -1 on overflow.
     */
    public long extent(Side s) {
        long total = totalBytes();
        long stride = sliceStride(s);
        if (total < 0 || stride < 0) {
            return -1;
        }
        if (total == 0) {
            return 0;
        }
        try {
            return Math.addExact(Math.multiplyExact(depth - 1, stride), Math.addExact(Math.multiplyExact(height - 1, s.pitch()), width));
        } catch (ArithmeticException e) {
            return -1;
        }
    }

    /**
     * Whether the rows of a pitched side lie back to back, so that the touched bytes are one block of
     * {@link #totalBytes()} (pitch equals width, and slices follow each other, or there is one row or slice).
     */
    public boolean contiguous(Side s) {
        boolean rows = height <= 1 || s.pitch() == width;
        boolean slices = depth <= 1 || sliceStride(s) == height * width;
        return rows && slices;
    }

    /** Offset from the first touched byte of row {@code row} (counting through all slices) on a pitched side. */
    public long rowOffset(Side s, long row) {
        long slice = row / Math.max(height, 1);
        long inSlice = row % Math.max(height, 1);
        return slice * sliceStride(s) + inSlice * s.pitch();
    }

    /** Rows in all slices: height * depth. */
    public long rows() {
        return height * depth;
    }
}
