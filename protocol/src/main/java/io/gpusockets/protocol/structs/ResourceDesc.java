package io.gpusockets.protocol.structs;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Field offsets of a CUDA_RESOURCE_DESC (cuda.h 13.0) and the sizes of the texture descriptors that
 * travel with it. Only the fields that name memory are read: an array handle to translate, or a device
 * range to check.
 *
 * <pre>
 *    0  CUresourcetype resType  u32 (+4 pad)
 *    8  union res (128 bytes):
 *         array:   8 CUarray hArray
 *         mipmap:  8 CUmipmappedArray hMipmappedArray
 *         linear:  8 CUdeviceptr devPtr, 16 CUarray_format format, 20 unsigned numChannels, 24 size_t sizeInBytes
 *         pitch2D: 8 CUdeviceptr devPtr, 16 format, 20 numChannels, 24 size_t width, 32 size_t height,
 *                  40 size_t pitchInBytes
 *  136  unsigned flags (+4 pad)
 *  (144 bytes; CUDA_TEXTURE_DESC is 104 bytes, CUDA_RESOURCE_VIEW_DESC 112, neither holds a pointer)
 * </pre>
 */
public final class ResourceDesc {
    public static final long SIZE = 144;
    public static final long TEXTURE_DESC_SIZE = 104;
    public static final long VIEW_DESC_SIZE = 112;

    public static final int TYPE_ARRAY = 0;
    public static final int TYPE_MIPMAPPED_ARRAY = 1;
    public static final int TYPE_LINEAR = 2;
    public static final int TYPE_PITCH2D = 3;

    public static final long RES_TYPE = 0;
    /** hArray, hMipmappedArray or devPtr, depending on the type. */
    public static final long HANDLE_OR_POINTER = 8;
    public static final long FORMAT = 16;
    public static final long NUM_CHANNELS = 20;
    public static final long LINEAR_SIZE = 24;
    public static final long PITCH2D_WIDTH = 24;
    public static final long PITCH2D_HEIGHT = 32;
    public static final long PITCH2D_PITCH = 40;
    public static final long FLAGS = 136;

    private ResourceDesc() {
    }

    public static int type(MemorySegment s) {
        return s.get(ValueLayout.JAVA_INT_UNALIGNED, RES_TYPE);
    }

    public static long getLong(MemorySegment s, long offset) {
        return s.get(ValueLayout.JAVA_LONG_UNALIGNED, offset);
    }

    public static int getInt(MemorySegment s, long offset) {
        return s.get(ValueLayout.JAVA_INT_UNALIGNED, offset);
    }

    public static void setLong(MemorySegment s, long offset, long value) {
        s.set(ValueLayout.JAVA_LONG_UNALIGNED, offset, value);
    }

    /**
     * Bytes of device memory a pitch2D resource reads from devPtr: {@code (height-1)*pitch + width*element}
     * for a format of known element size, else the whole {@code height*pitch}; -1 when out of range.
     */
    public static long pitch2DSpan(MemorySegment s) {
        long width = getLong(s, PITCH2D_WIDTH), height = getLong(s, PITCH2D_HEIGHT), pitch = getLong(s, PITCH2D_PITCH);
        int element = ArrayDescriptor.elementBytes(getInt(s, FORMAT), getInt(s, NUM_CHANNELS));
        if (width < 0 || height < 0 || pitch < 0) {
            return -1;
        }
        try {
            long row = element > 0 ? Math.multiplyExact(width, element) : pitch;
            return height == 0 || row == 0 ? 0 : Math.addExact(Math.multiplyExact(height - 1, pitch), row);
        } catch (ArithmeticException e) {
            return -1;
        }
    }
}
