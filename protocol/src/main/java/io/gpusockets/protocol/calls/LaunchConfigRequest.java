package io.gpusockets.protocol.calls;

import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;

/**
 * The request body of the calls that take a {@code CUlaunchConfig}: cuLaunchKernelEx,
 * cuOccupancyMaxPotentialClusterSize and cuOccupancyMaxActiveClusters. The config's attribute array
 * is copied at the call (bounded by {@link #MAX_ATTRIBUTES}), then the config's other fields follow
 * as {@link LaunchRequest}'s header, and then its parameters: cuLaunchKernelEx's kernel parameters
 * or {@code extra} buffer, for the occupancy calls mode 0 with no parameters. The reply is the
 * CUresult, and for the occupancy calls the i32 answer.
 *
 * <pre>
 *   0  count u32 (0..MAX_ATTRIBUTES)
 *   4  count times: id u32 | value 64 bytes (CUlaunchAttributeValue as the program wrote it)
 *   .. LaunchRequest: function u64 (handle id) | grid xyz | block xyz | sharedMemBytes | stream u64 | mode | parameters
 * </pre>
 *
 * The program's structs (cuda.h 13.0, x86-64, checked with offsetof):
 * <pre>
 *  CUlaunchConfig (56 bytes)                 CUlaunchAttribute (72 bytes)
 *   0 gridDimX, 4 gridDimY, 8 gridDimZ u32     0 id u32 (CUlaunchAttributeID), 4 padding
 *  12 blockDimX, 16 blockDimY, 20 blockDimZ    8 value: a 64-byte union (CUlaunchAttributeValue)
 *  24 sharedMemBytes u32, 28 padding
 *  32 hStream, 40 attrs pointer, 48 numAttrs u32, 52 padding
 * </pre>
 * The values are copied as bytes; what a value names (an event, a device range) is the backend's
 * to check or translate, by id ({@link #EVENT_ATTRIBUTES}, {@link #ACCESS_POLICY_WINDOW}).
 */
public final class LaunchConfigRequest {
    /** Most attributes one config may carry (cuda.h defines 17 ids). */
    public static final int MAX_ATTRIBUTES = 32;
    public static final int CONFIG_BYTES = 56;
    public static final int ATTRIBUTE_BYTES = 72;
    public static final int VALUE_BYTES = 64;
    public static final int VALUE_OFFSET = 8;
    public static final int STREAM_OFFSET = 32;
    public static final int ATTRS_OFFSET = 40;
    public static final int NUM_ATTRS_OFFSET = 48;

    /** CUlaunchAttributeID values whose value's first 8 bytes are a CUevent. */
    public static final int PROGRAMMATIC_EVENT = 7;
    public static final int LAUNCH_COMPLETION_EVENT = 12;
    /** Its value starts with base_ptr (a device address, 8 bytes) and num_bytes (size_t). */
    public static final int ACCESS_POLICY_WINDOW = 1;
    /** A graphs-only attribute whose value is written back with a graph node handle. */
    public static final int DEVICE_UPDATABLE_KERNEL_NODE = 13;

    private static final String NAME = "CUlaunchConfig";

    private LaunchConfigRequest() {
    }

    /** A CUlaunchConfig as the frontend read it: its launch fields, and the stream's handle. */
    public record Config(int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ, int sharedMemBytes,
                         long stream) {
    }

    /** The attributes of a request, as a native CUlaunchAttribute array the backend may patch. */
    public record Attributes(MemorySegment array, int count) {
        public int id(int i) {
            return array.get(ValueLayout.JAVA_INT, (long) i * ATTRIBUTE_BYTES);
        }

        /** The i-th attribute's value (64 bytes). */
        public MemorySegment value(int i) {
            return array.asSlice((long) i * ATTRIBUTE_BYTES + VALUE_OFFSET, VALUE_BYTES);
        }
    }

    // ---- encoding (frontend) --------------------------------------------------------------------

    /**
     * Reads the program's config (a bare pointer from C is widened to 56 bytes), writes its
     * attributes to {@code b} and returns the config's other fields, or null for a NULL config, more
     * than {@link #MAX_ATTRIBUTES} attributes, or a NULL array with a count (the caller answers
     * CUDA_ERROR_INVALID_VALUE; nothing useful was written).
     */
    public static Config putAttributes(ByteBuffer b, MemorySegment config) {
        if (config.isNative() && config.address() == 0) {
            return null;
        }
        MemorySegment c = widened(config, CONFIG_BYTES);
        int count = c.get(ValueLayout.JAVA_INT_UNALIGNED, NUM_ATTRS_OFFSET);
        MemorySegment attrs = c.get(ValueLayout.ADDRESS_UNALIGNED, ATTRS_OFFSET);
        if (count < 0 || count > MAX_ATTRIBUTES || (count > 0 && attrs.address() == 0)) {
            return null;
        }
        b.putInt(count);
        MemorySegment a = attrs.reinterpret((long) count * ATTRIBUTE_BYTES);
        for (int i = 0; i < count; i++) {
            long at = (long) i * ATTRIBUTE_BYTES;
            b.putInt(a.get(ValueLayout.JAVA_INT_UNALIGNED, at));
            for (int k = 0; k < VALUE_BYTES; k += 8) {
                b.putLong(a.get(ValueLayout.JAVA_LONG_UNALIGNED, at + VALUE_OFFSET + k));
            }
        }
        return new Config(c.get(ValueLayout.JAVA_INT_UNALIGNED, 0), c.get(ValueLayout.JAVA_INT_UNALIGNED, 4),
                c.get(ValueLayout.JAVA_INT_UNALIGNED, 8), c.get(ValueLayout.JAVA_INT_UNALIGNED, 12),
                c.get(ValueLayout.JAVA_INT_UNALIGNED, 16), c.get(ValueLayout.JAVA_INT_UNALIGNED, 20),
                c.get(ValueLayout.JAVA_INT_UNALIGNED, 24), c.get(ValueLayout.JAVA_LONG_UNALIGNED, STREAM_OFFSET));
    }

    /** For the occupancy calls: the header of {@code config} for {@code function}, and no parameters. */
    public static void putHeaderWithoutParams(ByteBuffer b, long function, Config config) {
        LaunchRequest.putHeader(b, function, config.gridX(), config.gridY(), config.gridZ(), config.blockX(),
                config.blockY(), config.blockZ(), config.sharedMemBytes(), config.stream());
        b.putInt(LaunchRequest.MODE_KERNEL_PARAMS).putInt(0);
    }

    // ---- decoding (backend) ---------------------------------------------------------------------

    /** Reads the attributes into a native array from {@code scratch}; the count is bounded before allocating. */
    public static Attributes readAttributes(ByteBuffer b, SegmentAllocator scratch) throws ProtocolException {
        int count = b.getInt();
        if (count < 0 || count > MAX_ATTRIBUTES || (long) count * (4 + VALUE_BYTES) > b.remaining()) {
            throw new ProtocolException(NAME + ": attribute count out of range: count=" + count);
        }
        MemorySegment array = scratch.allocate(Math.max(1, count) * (long) ATTRIBUTE_BYTES, 16);
        array.fill((byte) 0);
        for (int i = 0; i < count; i++) {
            long at = (long) i * ATTRIBUTE_BYTES;
            array.set(ValueLayout.JAVA_INT, at, b.getInt());
            for (int k = 0; k < VALUE_BYTES; k += 8) {
                array.set(ValueLayout.JAVA_LONG, at + VALUE_OFFSET + k, b.getLong());
            }
        }
        return new Attributes(array, count);
    }

    /** A native CUlaunchConfig for the driver: the header's fields, the real stream and the (checked) attributes. */
    public static MemorySegment config(SegmentAllocator scratch, LaunchRequest.Header h, long realStream, Attributes attrs) {
        MemorySegment c = scratch.allocate(CONFIG_BYTES, 16);
        c.fill((byte) 0);
        c.set(ValueLayout.JAVA_INT, 0, h.gridX());
        c.set(ValueLayout.JAVA_INT, 4, h.gridY());
        c.set(ValueLayout.JAVA_INT, 8, h.gridZ());
        c.set(ValueLayout.JAVA_INT, 12, h.blockX());
        c.set(ValueLayout.JAVA_INT, 16, h.blockY());
        c.set(ValueLayout.JAVA_INT, 20, h.blockZ());
        c.set(ValueLayout.JAVA_INT, 24, h.sharedMemBytes());
        c.set(ValueLayout.JAVA_LONG, STREAM_OFFSET, realStream);
        c.set(ValueLayout.ADDRESS, ATTRS_OFFSET, attrs.count() == 0 ? MemorySegment.NULL : attrs.array());
        c.set(ValueLayout.JAVA_INT, NUM_ATTRS_OFFSET, attrs.count());
        return c;
    }

    private static MemorySegment widened(MemorySegment seg, long n) {
        return seg.isNative() && seg.byteSize() < n ? seg.reinterpret(n) : seg;
    }
}
