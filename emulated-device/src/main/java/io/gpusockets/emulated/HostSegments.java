package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * Reading and writing the host-side pointers a caller hands to the driver. Segments that come from
 * native code (the C frontend's upcalls) are zero-length: they are widened with {@code reinterpret}
 * to the size the C signature implies before any access. NULL ({@code address() == 0}) is refused
 * unless the CUDA function documents the pointer as optional.
 */
final class HostSegments {
    static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** Longest C string read for a name (kernel or global): far beyond any real mangled name. */
    static final long MAX_NAME = 64 * 1024;

    private HostSegments() {
    }

    static boolean isNull(MemorySegment segment) {
        return segment == null || segment.address() == 0;
    }

    /**
     * {@code segment} viewed as exactly {@code bytes} long. Only a zero-length native segment (a raw C
     * pointer, size unknown) is widened, trusting the C contract; a segment that states its size must
     * be long enough, so a Java caller's short buffer is refused instead of overrun.
     */
    static MemorySegment sized(MemorySegment segment, long bytes, String what) {
        if (isNull(segment)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + " is NULL");
        }
        if (bytes < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + ": byte count " + Long.toUnsignedString(bytes) + " is out of range");
        }
        if (segment.byteSize() >= bytes) {
            return segment.asSlice(0, bytes);
        }
        if (segment.byteSize() != 0 || !segment.isNative()) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE,
                    what + " holds " + segment.byteSize() + " bytes, needs " + bytes);
        }
        return segment.reinterpret(bytes);
    }

    static void putInt(MemorySegment out, int value, String what) {
        sized(out, 4, what).set(INT, 0, value);
    }

    static void putLong(MemorySegment out, long value, String what) {
        sized(out, 8, what).set(LONG, 0, value);
    }

    static void putFloat(MemorySegment out, float value, String what) {
        sized(out, 4, what).set(FLOAT, 0, value);
    }

    /** For out-parameters CUDA lets the caller leave NULL. */
    static void putLongIfPresent(MemorySegment out, long value, String what) {
        if (!isNull(out)) {
            putLong(out, value, what);
        }
    }

    static void putIntIfPresent(MemorySegment out, int value, String what) {
        if (!isNull(out)) {
            putInt(out, value, what);
        }
    }

    /** A NUL-terminated string of at most {@code max} bytes (UTF-8). */
    static String cString(MemorySegment segment, long max, String what) {
        if (isNull(segment)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + " is NULL");
        }
        MemorySegment bounded = segment.byteSize() == 0 && segment.isNative() ? segment.reinterpret(max) : segment;
        long length = strlen(bounded, Math.min(max, bounded.byteSize()));
        if (length < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + " has no NUL within " + max + " bytes");
        }
        return new String(bounded.asSlice(0, length).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
    }

    /**
     * Index of the first NUL below {@code limit}, or -1. Reads byte by byte so that a string ending just
     * before an unmapped page is never read past its terminator.
     */
    static long strlen(MemorySegment segment, long limit) {
        for (long i = 0; i < limit; i++) {
            if (segment.get(ValueLayout.JAVA_BYTE, i) == 0) {
                return i;
            }
        }
        return -1;
    }
}
