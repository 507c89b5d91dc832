package io.gpusockets.protocol.structs;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * One CUstreamBatchMemOpParams (cuda.h 13.0), a 48-byte union, as cuStreamBatchMemOp takes an array of them.
 *
 * <pre>
 *  0 operation u32 (CUstreamBatchMemOpType)
 *  waitValue / writeValue:                    flushRemoteWrites / memoryBarrier:
 *  8 address   CUdeviceptr                     4 flags u32
 * 16 value     u32 or u64 (value64)
 * 24 flags     u32
 * 32 alias     CUdeviceptr (driver internal; the backend zeroes it)
 * </pre>
 */
public final class BatchMemOp {
    public static final int SIZE = 48;
    /** Operations one cuStreamBatchMemOp may carry here (the driver documents no limit; a bound keeps the backend's memory bounded). */
    public static final int MAX_BATCH = 256;

    public static final int WAIT_VALUE_32 = 1, WRITE_VALUE_32 = 2, FLUSH_REMOTE_WRITES = 3, WAIT_VALUE_64 = 4,
            WRITE_VALUE_64 = 5, BARRIER = 6;
    public static final long OPERATION = 0, ADDRESS = 8, VALUE = 16, FLAGS = 24, ALIAS = 32, PLAIN_FLAGS = 4;

    private BatchMemOp() {
    }

    public static int operation(MemorySegment ops, long at) {
        return ops.get(ValueLayout.JAVA_INT_UNALIGNED, at + OPERATION);
    }

    public static long address(MemorySegment ops, long at) {
        return ops.get(ValueLayout.JAVA_LONG_UNALIGNED, at + ADDRESS);
    }

    public static long value(MemorySegment ops, long at) {
        return ops.get(ValueLayout.JAVA_LONG_UNALIGNED, at + VALUE);
    }

    public static int flags(MemorySegment ops, long at) {
        return ops.get(ValueLayout.JAVA_INT_UNALIGNED, at + FLAGS);
    }

    public static void clearAlias(MemorySegment ops, long at) {
        ops.set(ValueLayout.JAVA_LONG_UNALIGNED, at + ALIAS, 0);
    }

    /** Bytes at the operation's address: 4 or 8 for waits and writes, 0 for those without one, -1 for an unknown operation. */
    public static int width(int operation) {
        return switch (operation) {
            case WAIT_VALUE_32, WRITE_VALUE_32 -> 4;
            case WAIT_VALUE_64, WRITE_VALUE_64 -> 8;
            case FLUSH_REMOTE_WRITES, BARRIER -> 0;
            default -> -1;
        };
    }
}
