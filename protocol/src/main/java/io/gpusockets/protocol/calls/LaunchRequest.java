package io.gpusockets.protocol.calls;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.nio.BufferOverflowException;
import java.nio.ByteBuffer;

/**
 * The request body of cuLaunchKernel. Kernel parameters are copied at the call, as the driver does:
 * either each parameter by value ({@code kernelParams}, mode 0; the frontend knows the sizes from
 * cuFuncGetParamInfo) or the packed buffer of an {@code extra} array (mode 1). The reply is the
 * CUresult alone.
 *
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *  |                  function u64 (session handle id)             |  0
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                          gridX u32                            |  8
 *  +---------------------------------------------------------------+
 *  |                          gridY u32                            | 12
 *  +---------------------------------------------------------------+
 *  |                          gridZ u32                            | 16
 *  +---------------------------------------------------------------+
 *  |                          blockX u32                           | 20
 *  +---------------------------------------------------------------+
 *  |                          blockY u32                           | 24
 *  +---------------------------------------------------------------+
 *  |                          blockZ u32                           | 28
 *  +---------------------------------------------------------------+
 *  |                      sharedMemBytes u32                       | 32
 *  +---------------------------------------------------------------+
 *  |                 stream u64 (session handle id, 0)             | 36
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |          mode u32: MODE_KERNEL_PARAMS 0 | MODE_EXTRA 1         | 44
 *  +---------------------------------------------------------------+ 48 = HEADER_BYTES
 *
 *  mode 0 (MODE_KERNEL_PARAMS), from 48:
 *  +---------------------------------------------------------------+
 *  |                count u32 (0..MAX_PARAMS)                      |
 *  +---------------------------------------------------------------+
 *  |          size u32 of parameter 0 (1.., sum <= MAX_PARAM_BYTES) |
 *  +---------------------------------------------------------------+
 *  |                 size bytes: the value of parameter 0          |
 *  |                              ...                              |
 *  +---------------------------------------------------------------+
 *  |                 ... the same for each further parameter       |
 *  +---------------------------------------------------------------+
 *
 *  mode 1 (MODE_EXTRA), from 48:
 *  +---------------------------------------------------------------+
 *  |                size u32 (0..MAX_PARAM_BYTES)                  |
 *  +---------------------------------------------------------------+
 *  |        size bytes: the CU_LAUNCH_PARAM_BUFFER_POINTER buffer  |
 *  |                              ...                              |
 *  +---------------------------------------------------------------+
 * </pre>
 *
 * Offsets are from the start of the body; the fields carry no padding and no alignment.
 */
public final class LaunchRequest {
    /** Most parameters a kernel may have on the wire (and that the frontend asks cuFuncGetParamInfo for). */
    public static final int MAX_PARAMS = 1024;
    /** Most bytes of parameters, in all (CUDA 12.1+ allows 32764 bytes of kernel parameters). */
    public static final int MAX_PARAM_BYTES = 32764;
    public static final int MODE_KERNEL_PARAMS = 0;
    public static final int MODE_EXTRA = 1;

    /** Keys of cuLaunchKernel's {@code extra} array (values from cuda.h: CU_LAUNCH_PARAM_*, as pointers). */
    public static final int CU_LAUNCH_PARAM_END = 0;
    public static final int CU_LAUNCH_PARAM_BUFFER_POINTER = 1;
    public static final int CU_LAUNCH_PARAM_BUFFER_SIZE = 2;
    /** Words of a program's {@code extra} array the encoder reads at most, looking for CU_LAUNCH_PARAM_END. */
    public static final int MAX_EXTRA_WORDS = 64;

    public static final int FUNCTION_OFFSET = 0;
    public static final int GRID_X_OFFSET = 8;
    public static final int GRID_Y_OFFSET = 12;
    public static final int GRID_Z_OFFSET = 16;
    public static final int BLOCK_X_OFFSET = 20;
    public static final int BLOCK_Y_OFFSET = 24;
    public static final int BLOCK_Z_OFFSET = 28;
    public static final int SHARED_MEM_OFFSET = 32;
    public static final int STREAM_OFFSET = 36;
    public static final int MODE_OFFSET = 44;
    /** Bytes up to and including the mode; the parameters follow. */
    public static final int HEADER_BYTES = 48;
    /** Bytes of a count or a size field. */
    public static final int SIZE_BYTES = 4;

    /**
     * Alignment the decoders ask of their allocator for every block (the parameter copies, the
     * packed buffer, the size cell and the pointer arrays): 16, enough for any kernel parameter type
     * (a float4 or double2 by value) and for the 8-byte pointers and sizes of the arrays.
     */
    public static final int ALIGNMENT = 16;
    /** The decoders never ask their allocator for fewer bytes than this (a zero-size buffer still gets a real address). */
    public static final int MIN_ALLOCATION = 8;
    /** Bytes of the native {@code extra} array {@link #readExtra} builds: five words. */
    public static final int EXTRA_ARRAY_BYTES = 5 * 8;
    /**
     * Room the frontend keeps in its request buffer beyond an extra buffer's bytes, as it always has
     * (the mode and size fields and slack); a buffer that does not fit so is refused with INVALID_VALUE.
     */
    private static final int EXTRA_HEADROOM = 64;
    private static final String NAME = "cuLaunchKernel";

    private LaunchRequest() {
    }

    /** The fixed part of the request, as read by {@link #readHeader}. */
    public record Header(long function, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
                         int sharedMemBytes, long stream, int mode) {
    }

    // ---- encoding (frontend) --------------------------------------------------------------------

    /** Writes the fields up to, not including, the mode (44 bytes); {@code b} must be little-endian. */
    public static void putHeader(ByteBuffer b, long function, int gridX, int gridY, int gridZ, int blockX, int blockY,
                                 int blockZ, int sharedMemBytes, long stream) {
        b.putLong(function).putInt(gridX).putInt(gridY).putInt(gridZ)
                .putInt(blockX).putInt(blockY).putInt(blockZ).putInt(sharedMemBytes).putLong(stream);
    }

    /**
     * Writes mode 0: the count and each parameter's size and bytes, read through the program's
     * {@code void*[]} {@code kernelParams} ({@code sizes.length} pointers; a zero-length native
     * segment from C is widened). The sizes are the function's, from cuFuncGetParamInfo; they are
     * not checked here (the backend bounds them). Throws {@link BufferOverflowException} when
     * {@code b} has no room, as a put does.
     */
    public static void putKernelParams(ByteBuffer b, long[] sizes, MemorySegment kernelParams) {
        b.putInt(MODE_KERNEL_PARAMS).putInt(sizes.length);
        MemorySegment array = widened(kernelParams, 8L * sizes.length);
        for (int i = 0; i < sizes.length; i++) {
            int size = (int) sizes[i];
            MemorySegment value = array.getAtIndex(ValueLayout.ADDRESS, i).reinterpret(sizes[i]);
            b.putInt(size);
            putBytes(b, value, size);
        }
    }

    /**
     * Writes mode 1 from the program's {@code extra} array: {@code {CU_LAUNCH_PARAM_BUFFER_POINTER,
     * buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END}} in any order, read up to
     * {@link #MAX_EXTRA_WORDS} words (an array with no END within them ends there). Returns
     * CUDA_SUCCESS, or CUDA_ERROR_INVALID_VALUE without writing anything for an unknown key, a
     * missing or NULL buffer or size pointer, a size outside 0..{@link #MAX_PARAM_BYTES}, or a
     * buffer that does not fit in {@code b} with 64 bytes to spare.
     */
    public static int putExtra(ByteBuffer b, MemorySegment extra) {
        MemorySegment e = widened(extra, 8L * MAX_EXTRA_WORDS);
        MemorySegment buffer = null;
        long size = -1;
        for (int i = 0; i + 1 < MAX_EXTRA_WORDS; i += 2) {
            long key = e.getAtIndex(ValueLayout.JAVA_LONG, i);
            if (key == CU_LAUNCH_PARAM_END) {
                break;
            }
            MemorySegment value = e.getAtIndex(ValueLayout.ADDRESS, i + 1);
            if (key == CU_LAUNCH_PARAM_BUFFER_POINTER) {
                buffer = value;
            } else if (key == CU_LAUNCH_PARAM_BUFFER_SIZE) {
                if (value.address() == 0) {
                    return CuResult.CUDA_ERROR_INVALID_VALUE;
                }
                size = value.reinterpret(8).get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
            } else {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
        }
        if (buffer == null || size < 0 || size > MAX_PARAM_BYTES || size + EXTRA_HEADROOM > b.remaining()
                || (buffer.address() == 0 && size > 0)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        b.putInt(MODE_EXTRA).putInt((int) size);
        putBytes(b, buffer.reinterpret(size), (int) size);
        return CuResult.CUDA_SUCCESS;
    }

    // ---- decoding (backend) ---------------------------------------------------------------------

    /**
     * Reads the fixed part, mode included. Throws {@link java.nio.BufferUnderflowException} on a
     * truncated body and ProtocolException for a mode other than 0 and 1.
     */
    public static Header readHeader(ByteBuffer b) throws ProtocolException {
        long function = b.getLong();
        int gx = b.getInt(), gy = b.getInt(), gz = b.getInt();
        int bx = b.getInt(), by = b.getInt(), bz = b.getInt();
        int shared = b.getInt();
        long stream = b.getLong();
        int mode = b.getInt();
        if (mode != MODE_KERNEL_PARAMS && mode != MODE_EXTRA) {
            throw new ProtocolException(NAME + ": unknown parameter mode: mode=" + mode);
        }
        return new Header(function, gx, gy, gz, bx, by, bz, shared, stream, mode);
    }

    /**
     * Reads mode 0's parameters (after {@link #readHeader}) into native memory from {@code scratch}
     * and returns the {@code void*[]} for cuLaunchKernel: {@code max(count, 1)} pointers (a NULL
     * one when there are no parameters), each to a copy of its parameter. Every block is asked of
     * {@code scratch} with {@link #ALIGNMENT} and at least {@link #MIN_ALLOCATION} bytes; it need not
     * be zeroed, every byte the driver reads is written. The count is bounded by {@link #MAX_PARAMS}
     * before the array is allocated, and each size (1.., within the body, the sum at most
     * {@link #MAX_PARAM_BYTES}) before its copy is.
     */
    public static MemorySegment readKernelParams(ByteBuffer b, SegmentAllocator scratch) throws ProtocolException {
        int count = b.getInt();
        if (count < 0 || count > MAX_PARAMS) {
            throw new ProtocolException(NAME + ": parameter count out of range: count=" + count);
        }
        MemorySegment array = allocate(scratch, 8L * Math.max(count, 1));
        if (count == 0) {
            array.setAtIndex(ValueLayout.ADDRESS, 0, MemorySegment.NULL);
        }
        int total = 0;
        for (int i = 0; i < count; i++) {
            int size = b.getInt();
            if (size <= 0 || size > b.remaining() || size > MAX_PARAM_BYTES - total) {
                throw new ProtocolException(NAME + ": parameter size out of range: size=" + size + " (index=" + i
                        + ", total=" + total + ", remaining=" + b.remaining() + ")");
            }
            total += size;
            MemorySegment value = allocate(scratch, size);
            takeBytes(b, value, size);
            array.setAtIndex(ValueLayout.ADDRESS, i, value);
        }
        return array;
    }

    /**
     * Reads mode 1's buffer (after {@link #readHeader}) into native memory from {@code scratch} and
     * returns the {@code extra} array for cuLaunchKernel: {@code {CU_LAUNCH_PARAM_BUFFER_POINTER,
     * buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END}} ({@link #EXTRA_ARRAY_BYTES}).
     * Allocation as in {@link #readKernelParams}; the size (0..{@link #MAX_PARAM_BYTES}, within the
     * body) is checked before the buffer is allocated.
     */
    public static MemorySegment readExtra(ByteBuffer b, SegmentAllocator scratch) throws ProtocolException {
        int size = b.getInt();
        if (size < 0 || size > MAX_PARAM_BYTES || size > b.remaining()) {
            throw new ProtocolException(NAME + ": extra buffer size out of range: size=" + size
                    + " (remaining=" + b.remaining() + ")");
        }
        MemorySegment buffer = allocate(scratch, size);
        takeBytes(b, buffer, size);
        MemorySegment sizeCell = allocate(scratch, 8);
        sizeCell.set(ValueLayout.JAVA_LONG, 0, size);
        MemorySegment extra = allocate(scratch, EXTRA_ARRAY_BYTES);
        extra.setAtIndex(ValueLayout.JAVA_LONG, 0, CU_LAUNCH_PARAM_BUFFER_POINTER);
        extra.setAtIndex(ValueLayout.ADDRESS, 1, buffer);
        extra.setAtIndex(ValueLayout.JAVA_LONG, 2, CU_LAUNCH_PARAM_BUFFER_SIZE);
        extra.setAtIndex(ValueLayout.ADDRESS, 3, sizeCell);
        extra.setAtIndex(ValueLayout.JAVA_LONG, 4, CU_LAUNCH_PARAM_END);
        return extra;
    }

    // ---- helpers --------------------------------------------------------------------------------

    private static MemorySegment allocate(SegmentAllocator scratch, long bytes) {
        return scratch.allocate(Math.max(bytes, MIN_ALLOCATION), ALIGNMENT);
    }

    /** A zero-length native segment from C with room for {@code n} bytes; any other keeps its bounds. */
    private static MemorySegment widened(MemorySegment seg, long n) {
        return seg.isNative() && seg.byteSize() < n ? seg.reinterpret(n) : seg;
    }

    /** Appends {@code size} bytes of {@code src}; into a heap buffer's array without a view object. */
    private static void putBytes(ByteBuffer b, MemorySegment src, int size) {
        if (size > b.remaining()) {
            throw new BufferOverflowException();
        }
        if (b.hasArray()) {
            MemorySegment.copy(src, ValueLayout.JAVA_BYTE, 0, b.array(), b.arrayOffset() + b.position(), size);
            b.position(b.position() + size);
        } else {
            b.put(src.asSlice(0, size).asByteBuffer());
        }
    }

    /** Takes {@code size} bytes (already checked to be there) off {@code b} into {@code dst}. */
    private static void takeBytes(ByteBuffer b, MemorySegment dst, int size) {
        if (b.hasArray()) {
            MemorySegment.copy(b.array(), b.arrayOffset() + b.position(), dst, ValueLayout.JAVA_BYTE, 0, size);
        } else {
            MemorySegment.copy(MemorySegment.ofBuffer(b), 0, dst, 0, size);
        }
        b.position(b.position() + size);
    }
}
