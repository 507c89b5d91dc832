package io.gpusockets.protocol.calls;

import java.nio.ByteBuffer;

/**
 * The request and reply bodies of cuMemPoolSetAttribute and cuMemPoolGetAttribute, whose {@code void *value}
 * is an int or a cuuint64_t depending on the attribute.
 *
 * <pre>
 *  request                                                          reply (after the CUresult)
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+  +------------------------+
 *  |                   pool u64 (the session's handle id)          |  0 | value u64 (Get only;  |  0
 *  +---------------------------------------------------------------+  | a 4-byte attribute    |
 *  |                 attribute i32 (CUmemPool_attribute)           |  8 | widened)              |
 *  +---------------------------------------------------------------+  +-----------------------+  8
 *  |              value u64 (Set: the program's value, widened;    | 12
 *  |                         Get: 0)                               |
 *  +---------------------------------------------------------------+ 20
 * </pre>
 */
public final class PoolAttributeRequest {
    /** CUmemPool_attribute values (cuda.h: CU_MEMPOOL_ATTR_*). */
    public static final int REUSE_FOLLOW_EVENT_DEPENDENCIES = 1;
    public static final int REUSE_ALLOW_OPPORTUNISTIC = 2;
    public static final int REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3;
    public static final int RELEASE_THRESHOLD = 4;
    public static final int RESERVED_MEM_CURRENT = 5;
    public static final int RESERVED_MEM_HIGH = 6;
    public static final int USED_MEM_CURRENT = 7;
    public static final int USED_MEM_HIGH = 8;

    public static final int REQUEST_BYTES = 20;
    public static final int REPLY_BYTES = 8;

    private PoolAttributeRequest() {
    }

    /** A decoded request. */
    public record Request(long pool, int attribute, long value) {
    }

    /** Bytes the value has in the program's memory: 4 (int) for the REUSE_* flags, 8 (cuuint64_t) for the others, 0 if unknown. */
    public static int valueBytes(int attribute) {
        return switch (attribute) {
            case REUSE_FOLLOW_EVENT_DEPENDENCIES, REUSE_ALLOW_OPPORTUNISTIC, REUSE_ALLOW_INTERNAL_DEPENDENCIES -> 4;
            case RELEASE_THRESHOLD, RESERVED_MEM_CURRENT, RESERVED_MEM_HIGH, USED_MEM_CURRENT, USED_MEM_HIGH -> 8;
            default -> 0;
        };
    }

    public static void put(ByteBuffer b, long pool, int attribute, long value) {
        b.putLong(pool).putInt(attribute).putLong(value);
    }

    /** Reads a request; {@link java.nio.BufferUnderflowException} on a truncated body. */
    public static Request read(ByteBuffer b) {
        long pool = b.getLong();
        int attribute = b.getInt();
        long value = b.getLong();
        return new Request(pool, attribute, value);
    }

    public static void putValue(ByteBuffer b, long value) {
        b.putLong(value);
    }

    public static long readValue(ByteBuffer b) {
        return b.getLong();
    }
}
