package io.gpusockets.protocol.wire;

import io.gpusockets.protocol.api.ParamType;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;

/**
 * How parameter values travel. A request body holds the input parameters in C order: scalars in
 * {@link ParamType#wireBytes()} bytes (u8/u16 widened to 4), a cstr as u32 length + bytes (no NUL),
 * a bytes/image parameter as its u64 length (its content follows in DATA frames), nothing for
 * null/zero/ptr/hostptr. A reply body is the i32 CUresult and, on success, each scalar output in
 * C order (4 bytes for 32-bit types, 8 otherwise); bytes outputs arrive before it in DATA frames.
 */
public final class WireValues {
    public static final int MAX_CSTR = 4096;

    private WireValues() {
    }

    /**
     * {@code seg} with room for {@code n} bytes: a zero-length native segment from C (or an FFM
     * upcall) is widened; a Java segment keeps its bounds, so a short one fails with an exception.
     */
    public static MemorySegment sized(MemorySegment seg, long n) {
        return seg.isNative() && seg.byteSize() < n ? seg.reinterpret(n) : seg;
    }

    /** Writes a scalar input; {@code value} is the boxed Java type of {@link ParamType#javaType()}. */
    public static void putScalar(ByteBuffer b, ParamType type, Object value) {
        switch (type) {
            case U8 -> b.putInt(((Byte) value) & 0xff);
            case U16 -> b.putInt(((Short) value) & 0xffff);
            case F32 -> b.putFloat((Float) value);
            default -> {
                if (type.wireBytes() == 4) {
                    b.putInt((Integer) value);
                } else {
                    b.putLong((Long) value);
                }
            }
        }
    }

    /** Reads a scalar input as its boxed Java type. */
    public static Object getScalar(ByteBuffer b, ParamType type) {
        return switch (type) {
            case U8 -> (byte) b.getInt();
            case U16 -> (short) b.getInt();
            case F32 -> b.getFloat();
            default -> type.wireBytes() == 4 ? (Object) b.getInt() : (Object) b.getLong();
        };
    }

    /** Bytes an output scalar of this type takes in a reply. */
    public static int outWireBytes(ParamType type) {
        return type.outBytes() <= 4 ? 4 : 8;
    }

    /** Copies an output the driver wrote at {@code src} into a reply. */
    public static void putOut(ByteBuffer b, ParamType type, MemorySegment src) {
        switch (type.outBytes()) {
            case 1 -> b.putInt(src.get(ValueLayout.JAVA_BYTE, 0) & 0xff);
            case 2 -> b.putInt(src.get(ValueLayout.JAVA_SHORT_UNALIGNED, 0) & 0xffff);
            case 4 -> b.putInt(src.get(ValueLayout.JAVA_INT_UNALIGNED, 0));
            default -> b.putLong(src.get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
        }
    }

    /** Writes an output from a reply to where the program asked for it ({@code dst} may be NULL: skipped). */
    public static void getOut(ByteBuffer b, ParamType type, MemorySegment dst) {
        long v = outWireBytes(type) == 4 ? b.getInt() : b.getLong();
        if (dst.isNative() && dst.address() == 0) {
            return;
        }
        MemorySegment d = sized(dst, type.outBytes());
        switch (type.outBytes()) {
            case 1 -> d.set(ValueLayout.JAVA_BYTE, 0, (byte) v);
            case 2 -> d.set(ValueLayout.JAVA_SHORT_UNALIGNED, 0, (short) v);
            case 4 -> d.set(ValueLayout.JAVA_INT_UNALIGNED, 0, (int) v);
            default -> d.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, v);
        }
    }
}
