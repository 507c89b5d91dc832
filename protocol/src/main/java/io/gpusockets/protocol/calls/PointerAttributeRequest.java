package io.gpusockets.protocol.calls;

import java.nio.ByteBuffer;

/**
 * The request and reply bodies of cuPointerGetAttribute, and which attributes are forwarded. The
 * others ({@code HOST_POINTER}, {@code P2P_TOKENS}, ...) describe the program's own host, or need
 * more than one value: both sides refuse them with CUDA_ERROR_NOT_SUPPORTED.
 *
 * <pre>
 *  request                                                           reply (after the CUresult)
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+  +-----------------------+
 *  |                  attribute i32 (CUpointer_attribute)          |  0 | value u64 (a 4-byte  |  0
 *  +---------------------------------------------------------------+  | attribute widened; a |
 *  |                       ptr u64 (CUdeviceptr)                   |  4 | context as the       |
 *  |                                                               |  | session's handle id) |
 *  +---------------------------------------------------------------+ 12 +-----------------------+  8
 * </pre>
 *
 * The frontend writes the value's low {@link #valueBytes} bytes to the program's {@code data}.
 */
public final class PointerAttributeRequest {
    /** CUpointer_attribute values (from cuda.h: CU_POINTER_ATTRIBUTE_*), those that are forwarded. */
    public static final int CONTEXT = 1;
    public static final int MEMORY_TYPE = 2;
    public static final int DEVICE_POINTER = 3;
    public static final int SYNC_MEMOPS = 6;
    public static final int BUFFER_ID = 7;
    public static final int IS_MANAGED = 8;
    public static final int DEVICE_ORDINAL = 9;
    public static final int RANGE_START_ADDR = 11;
    public static final int RANGE_SIZE = 12;
    public static final int MAPPED = 13;

    public static final int ATTRIBUTE_OFFSET = 0;
    public static final int PTR_OFFSET = 4;
    public static final int REQUEST_BYTES = 12;
    public static final int VALUE_OFFSET = 0;
    public static final int REPLY_BYTES = 8;

    private PointerAttributeRequest() {
    }

    /** A decoded request. */
    public record Request(int attribute, long ptr) {
    }

    /**
     * Bytes the attribute's value has in the program's {@code data} (types from cuda.h's
     * documentation of CUpointer_attribute): 8 for CONTEXT (CUcontext), DEVICE_POINTER,
     * RANGE_START_ADDR (CUdeviceptr), BUFFER_ID (unsigned long long) and RANGE_SIZE (size_t); 4 for
     * MEMORY_TYPE (CUmemorytype), SYNC_MEMOPS, IS_MANAGED, MAPPED (bool as unsigned int) and
     * DEVICE_ORDINAL (int); 0 for every other attribute: not forwarded.
     */
    public static int valueBytes(int attribute) {
        return switch (attribute) {
            case CONTEXT, DEVICE_POINTER, BUFFER_ID, RANGE_START_ADDR, RANGE_SIZE -> 8;
            case MEMORY_TYPE, SYNC_MEMOPS, IS_MANAGED, DEVICE_ORDINAL, MAPPED -> 4;
            default -> 0;
        };
    }

    /** Writes the request ({@code b} little-endian). */
    public static void put(ByteBuffer b, int attribute, long ptr) {
        b.putInt(attribute).putLong(ptr);
    }

    /**
     * Reads a request; {@link java.nio.BufferUnderflowException} on a truncated body. The attribute
     * is not checked here: one with {@code valueBytes(attribute) == 0} is refused by the caller with
     * CUDA_ERROR_NOT_SUPPORTED, which is a result, not a protocol error.
     */
    public static Request read(ByteBuffer b) {
        int attribute = b.getInt();
        long ptr = b.getLong();
        return new Request(attribute, ptr);
    }

    /** Writes the reply's value (after the CUresult, by whoever writes that). */
    public static void putValue(ByteBuffer b, long value) {
        b.putLong(value);
    }

    /** Reads the reply's value (after the CUresult). */
    public static long readValue(ByteBuffer b) {
        return b.getLong();
    }

    /**
     * cuPointerGetAttributes, several attributes of one pointer: request {@code count u32 | ptr u64 |
     * attribute i32 x count}, reply {@code value u64 x count} (an attribute not forwarded answers 0 with
     * its slot left alone by the frontend, as the driver leaves those it cannot answer).
     */
    public static final int MAX_ATTRIBUTES = 32;

    /** A decoded cuPointerGetAttributes request. */
    public record Several(int[] attributes, long ptr) {
    }

    public static void putSeveral(ByteBuffer b, int[] attributes, long ptr) {
        b.putInt(attributes.length).putLong(ptr);
        for (int a : attributes) {
            b.putInt(a);
        }
    }

    /** Reads a cuPointerGetAttributes request; the count is bounded by {@link #MAX_ATTRIBUTES} before anything is allocated. */
    public static Several readSeveral(ByteBuffer b) throws io.gpusockets.protocol.wire.ProtocolException {
        int n = b.getInt();
        if (n < 0 || n > MAX_ATTRIBUTES) {
            throw new io.gpusockets.protocol.wire.ProtocolException("cuPointerGetAttributes: numAttributes=" + n + " out of range");
        }
        long ptr = b.getLong();
        int[] attributes = new int[n];
        for (int i = 0; i < n; i++) {
            attributes[i] = b.getInt();
        }
        return new Several(attributes, ptr);
    }
}
