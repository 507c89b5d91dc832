package io.gpusockets.protocol.calls;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

class LaunchRequestTest {
    private static final long F = 0x1122334455667788L;
    private static final long STREAM = 0x0102030405060708L;

    /** The frontend's request buffer: heap, 64 KiB, little-endian. */
    private static ByteBuffer request() {
        return ByteBuffer.allocate(64 << 10).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static byte[] bytes(ByteBuffer b) {
        ByteBuffer f = b.duplicate().flip();
        byte[] out = new byte[f.remaining()];
        f.get(out);
        return out;
    }

    private static ByteBuffer body(byte[] bytes) {
        return ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** Records what the decoders ask for; hands out memory full of garbage, as a slicing allocator may. */
    private static final class Recording implements SegmentAllocator {
        final Arena arena;
        final List<long[]> asked = new ArrayList<>();

        Recording(Arena arena) {
            this.arena = arena;
        }

        @Override
        public MemorySegment allocate(long byteSize, long byteAlignment) {
            asked.add(new long[] {byteSize, byteAlignment});
            return arena.allocate(byteSize, byteAlignment).fill((byte) 0x5A);
        }
    }

    /** The 48-byte header as the layout diagram puts it, written at literal offsets. */
    private static ByteBuffer expectedHeader(int capacity, int mode) {
        ByteBuffer e = ByteBuffer.allocate(capacity).order(ByteOrder.LITTLE_ENDIAN);
        e.putLong(0, F).putInt(8, 1).putInt(12, 2).putInt(16, 3).putInt(20, 4).putInt(24, 5).putInt(28, 6)
                .putInt(32, 7).putLong(36, STREAM).putInt(44, mode);
        return e.position(48);
    }

    private static void header(ByteBuffer b) {
        LaunchRequest.putHeader(b, F, 1, 2, 3, 4, 5, 6, 7, STREAM);
    }

    /** A native void*[] of pointers to the given values. */
    private static MemorySegment params(Arena a, byte[]... values) {
        MemorySegment array = a.allocate(8L * Math.max(values.length, 1), 8);
        for (int i = 0; i < values.length; i++) {
            MemorySegment v = a.allocate(values[i].length, 16);
            v.copyFrom(MemorySegment.ofArray(values[i]));
            array.setAtIndex(ValueLayout.ADDRESS, i, v);
        }
        return MemorySegment.ofAddress(array.address()); // as C hands it over: zero length
    }

    /** A native extra array of the given words, seen as a bare pointer. */
    private static MemorySegment extra(Arena a, long... words) {
        MemorySegment e = a.allocate(8L * LaunchRequest.MAX_EXTRA_WORDS, 8);
        for (int i = 0; i < words.length; i++) {
            e.setAtIndex(ValueLayout.JAVA_LONG, i, words[i]);
        }
        return MemorySegment.ofAddress(e.address());
    }

    private static MemorySegment cell(Arena a, long value) {
        MemorySegment c = a.allocate(8, 8);
        c.set(ValueLayout.JAVA_LONG, 0, value);
        return c;
    }

    @Test
    void constantsAreTheLimitsBothSidesUse() {
        assertEquals(1024, LaunchRequest.MAX_PARAMS);
        assertEquals(32764, LaunchRequest.MAX_PARAM_BYTES);
        assertEquals(0, LaunchRequest.MODE_KERNEL_PARAMS);
        assertEquals(1, LaunchRequest.MODE_EXTRA);
        assertEquals(0, LaunchRequest.CU_LAUNCH_PARAM_END);
        assertEquals(1, LaunchRequest.CU_LAUNCH_PARAM_BUFFER_POINTER);
        assertEquals(2, LaunchRequest.CU_LAUNCH_PARAM_BUFFER_SIZE);
        assertEquals(64, LaunchRequest.MAX_EXTRA_WORDS);
        assertEquals(LaunchRequest.MODE_OFFSET + 4, LaunchRequest.HEADER_BYTES);
        assertEquals(LaunchRequest.STREAM_OFFSET + 8, LaunchRequest.MODE_OFFSET);
    }

    @Test
    void kernelParamsGoOnTheWireExactlyAsTheFrontendWritesThem() {
        try (Arena a = Arena.ofConfined()) {
            ByteBuffer b = request();
            header(b);
            assertEquals(44, b.position());
            LaunchRequest.putKernelParams(b, new long[] {4, 8, 1},
                    params(a, new byte[] {1, 2, 3, 4}, new byte[] {9, 8, 7, 6, 5, 4, 3, 2}, new byte[] {(byte) 0xEE}));
            ByteBuffer e = expectedHeader(48 + 4 + 4 + 4 + 4 + 8 + 4 + 1, 0);
            e.putInt(3).putInt(4).put(new byte[] {1, 2, 3, 4}).putInt(8).put(new byte[] {9, 8, 7, 6, 5, 4, 3, 2})
                    .putInt(1).put((byte) 0xEE);
            assertArrayEquals(e.array(), bytes(b));
        }
    }

    @Test
    void extraGoesOnTheWireExactlyAsTheFrontendWritesIt() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment buf = a.allocate(12, 8);
            for (int i = 0; i < 12; i++) {
                buf.set(ValueLayout.JAVA_BYTE, i, (byte) (0x30 + i));
            }
            ByteBuffer b = request();
            header(b);
            assertEquals(CuResult.CUDA_SUCCESS, LaunchRequest.putExtra(b, extra(a, 1, buf.address(), 2, cell(a, 12).address(), 0)));
            ByteBuffer e = expectedHeader(48 + 4 + 12, 1);
            e.putInt(12);
            for (int i = 0; i < 12; i++) {
                e.put((byte) (0x30 + i));
            }
            assertArrayEquals(e.array(), bytes(b));
        }
    }

    @Test
    void kernelParamsRoundTripIntoANativePointerArray() throws ProtocolException {
        try (Arena a = Arena.ofConfined()) {
            byte[] p0 = {1, 2, 3, 4};
            byte[] p1 = new byte[16];
            Arrays.fill(p1, (byte) 0x77);
            ByteBuffer b = request();
            header(b);
            LaunchRequest.putKernelParams(b, new long[] {4, 16}, params(a, p0, p1));
            ByteBuffer in = b.flip();
            LaunchRequest.Header h = LaunchRequest.readHeader(in);
            assertEquals(new LaunchRequest.Header(F, 1, 2, 3, 4, 5, 6, 7, STREAM, LaunchRequest.MODE_KERNEL_PARAMS), h);
            Recording scratch = new Recording(a);
            MemorySegment array = LaunchRequest.readKernelParams(in, scratch).reinterpret(16);
            assertEquals(0, in.remaining());
            assertArrayEquals(p0, array.getAtIndex(ValueLayout.ADDRESS, 0).reinterpret(4).toArray(ValueLayout.JAVA_BYTE));
            assertArrayEquals(p1, array.getAtIndex(ValueLayout.ADDRESS, 1).reinterpret(16).toArray(ValueLayout.JAVA_BYTE));
            for (long[] ask : scratch.asked) {
                assertEquals(LaunchRequest.ALIGNMENT, ask[1]);
                assertTrue(ask[0] >= LaunchRequest.MIN_ALLOCATION);
            }
            assertEquals(16, scratch.asked.get(0)[0]); // the array first, then each copy
            assertEquals(3, scratch.asked.size());
        }
    }

    @Test
    void noParametersGiveANullFirstPointerEvenFromAGarbageAllocator() throws ProtocolException {
        try (Arena a = Arena.ofConfined()) {
            ByteBuffer b = request();
            header(b);
            LaunchRequest.putKernelParams(b, new long[0], MemorySegment.NULL);
            ByteBuffer in = b.flip();
            LaunchRequest.readHeader(in);
            MemorySegment array = LaunchRequest.readKernelParams(in, new Recording(a));
            assertEquals(0, array.get(ValueLayout.JAVA_LONG, 0));
            assertEquals(0, in.remaining());
        }
    }

    @Test
    void extraRoundTripsIntoTheFiveWordArray() throws ProtocolException {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment buf = a.allocate(20, 8);
            for (int i = 0; i < 20; i++) {
                buf.set(ValueLayout.JAVA_BYTE, i, (byte) i);
            }
            ByteBuffer b = request();
            header(b);
            // Keys in the other order, as a program may write them.
            assertEquals(CuResult.CUDA_SUCCESS, LaunchRequest.putExtra(b, extra(a, 2, cell(a, 20).address(), 1, buf.address(), 0)));
            ByteBuffer in = b.flip();
            assertEquals(LaunchRequest.MODE_EXTRA, LaunchRequest.readHeader(in).mode());
            MemorySegment e = LaunchRequest.readExtra(in, new Recording(a)).reinterpret(LaunchRequest.EXTRA_ARRAY_BYTES);
            assertEquals(0, in.remaining());
            assertEquals(1, e.getAtIndex(ValueLayout.JAVA_LONG, 0));
            assertArrayEquals(buf.toArray(ValueLayout.JAVA_BYTE),
                    e.getAtIndex(ValueLayout.ADDRESS, 1).reinterpret(20).toArray(ValueLayout.JAVA_BYTE));
            assertEquals(2, e.getAtIndex(ValueLayout.JAVA_LONG, 2));
            assertEquals(20, e.getAtIndex(ValueLayout.ADDRESS, 3).reinterpret(8).get(ValueLayout.JAVA_LONG, 0));
            assertEquals(0, e.getAtIndex(ValueLayout.JAVA_LONG, 4));
        }
    }

    @Test
    void directBuffersWorkOnBothSides() throws ProtocolException {
        try (Arena a = Arena.ofConfined()) {
            ByteBuffer b = ByteBuffer.allocateDirect(256).order(ByteOrder.LITTLE_ENDIAN);
            header(b);
            LaunchRequest.putKernelParams(b, new long[] {3}, params(a, new byte[] {5, 6, 7}));
            ByteBuffer in = b.flip();
            LaunchRequest.readHeader(in);
            MemorySegment array = LaunchRequest.readKernelParams(in, a).reinterpret(8);
            assertArrayEquals(new byte[] {5, 6, 7}, array.getAtIndex(ValueLayout.ADDRESS, 0).reinterpret(3).toArray(ValueLayout.JAVA_BYTE));
            assertEquals(0, in.remaining());
        }
    }

    @Test
    void badExtraArraysAreInvalidValueAndWriteNothing() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment buf = a.allocate(64, 8);
            long size8 = cell(a, 8).address();
            long[][] bad = {
                    {1, buf.address(), 3, 0, 0},                               // unknown key
                    {2, size8, 0},                                             // no buffer
                    {1, buf.address(), 0},                                     // no size
                    {1, buf.address(), 2, 0, 0},                               // NULL size pointer
                    {1, 0, 2, size8, 0},                                       // NULL buffer with a size
                    {1, buf.address(), 2, cell(a, -1).address(), 0},           // negative size
                    {1, buf.address(), 2, cell(a, 32765).address(), 0},        // above MAX_PARAM_BYTES
            };
            for (long[] words : bad) {
                ByteBuffer b = request();
                header(b);
                assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, LaunchRequest.putExtra(b, extra(a, words)), Arrays.toString(words));
                assertEquals(44, b.position(), Arrays.toString(words));
            }
            // A buffer that does not fit with 64 bytes to spare.
            ByteBuffer small = ByteBuffer.allocate(44 + 8 + 63).order(ByteOrder.LITTLE_ENDIAN);
            header(small);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, LaunchRequest.putExtra(small, extra(a, 1, buf.address(), 2, size8, 0)));
            assertEquals(44, small.position());
            ByteBuffer enough = ByteBuffer.allocate(44 + 8 + 64).order(ByteOrder.LITTLE_ENDIAN);
            header(enough);
            assertEquals(CuResult.CUDA_SUCCESS, LaunchRequest.putExtra(enough, extra(a, 1, buf.address(), 2, size8, 0)));
            assertEquals(44 + 8 + 8, enough.position());
        }
    }

    @Test
    void extraOfTheLargestSizeIsSent() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment buf = a.allocate(LaunchRequest.MAX_PARAM_BYTES, 8);
            ByteBuffer b = request();
            header(b);
            assertEquals(CuResult.CUDA_SUCCESS,
                    LaunchRequest.putExtra(b, extra(a, 1, buf.address(), 2, cell(a, LaunchRequest.MAX_PARAM_BYTES).address(), 0)));
            assertEquals(48 + 4 + LaunchRequest.MAX_PARAM_BYTES, b.position());
        }
    }

    // ---- the decoders' bounds -------------------------------------------------------------------

    /** A body from after the header: the given ints, then {@code tail} bytes of zeros. */
    private static ByteBuffer after(int tail, int... ints) {
        ByteBuffer b = ByteBuffer.allocate(4 * ints.length + tail).order(ByteOrder.LITTLE_ENDIAN);
        for (int v : ints) {
            b.putInt(v);
        }
        return b.position(0);
    }

    private static ProtocolException rejectedParams(ByteBuffer b, Recording scratch) {
        return assertThrows(ProtocolException.class, () -> LaunchRequest.readKernelParams(b, scratch));
    }

    @Test
    void aCountAboveMaxParamsIsRejectedBeforeAnyAllocation() {
        try (Arena a = Arena.ofConfined()) {
            Recording scratch = new Recording(a);
            ProtocolException e = rejectedParams(after(0, 1025), scratch);
            assertTrue(e.getMessage().contains("count=1025"), e.getMessage());
            e = rejectedParams(after(0, -1), scratch);
            assertTrue(e.getMessage().contains("count=-1"), e.getMessage());
            assertEquals(List.of(), scratch.asked);
        }
    }

    @Test
    void maxParamsParametersAreAccepted() throws ProtocolException {
        try (Arena a = Arena.ofConfined()) {
            ByteBuffer b = ByteBuffer.allocate(4 + 5 * LaunchRequest.MAX_PARAMS).order(ByteOrder.LITTLE_ENDIAN);
            b.putInt(LaunchRequest.MAX_PARAMS);
            for (int i = 0; i < LaunchRequest.MAX_PARAMS; i++) {
                b.putInt(1).put((byte) i);
            }
            MemorySegment array = LaunchRequest.readKernelParams(b.flip(), a).reinterpret(8L * LaunchRequest.MAX_PARAMS);
            assertEquals((byte) 1023, array.getAtIndex(ValueLayout.ADDRESS, 1023).reinterpret(1).get(ValueLayout.JAVA_BYTE, 0));
        }
    }

    @Test
    void aSizeOfZeroOrLessIsRejected() {
        try (Arena a = Arena.ofConfined()) {
            for (int size : new int[] {0, -1, Integer.MIN_VALUE}) {
                Recording scratch = new Recording(a);
                ProtocolException e = rejectedParams(after(16, 1, size), scratch);
                assertTrue(e.getMessage().contains("size=" + size), e.getMessage());
                assertEquals(1, scratch.asked.size()); // the array only, no copy
            }
        }
    }

    @Test
    void aSizeBeyondTheBodyIsRejectedBeforeItsCopyIsAllocated() {
        try (Arena a = Arena.ofConfined()) {
            Recording scratch = new Recording(a);
            ProtocolException e = rejectedParams(after(7, 1, 8), scratch);
            assertTrue(e.getMessage().contains("size=8"), e.getMessage());
            assertEquals(1, scratch.asked.size());
        }
    }

    @Test
    void aTotalAboveMaxParamBytesIsRejected() throws ProtocolException {
        try (Arena a = Arena.ofConfined()) {
            int first = LaunchRequest.MAX_PARAM_BYTES - 4;
            ByteBuffer over = ByteBuffer.allocate(4 + 4 + first + 4 + 5).order(ByteOrder.LITTLE_ENDIAN);
            over.putInt(2).putInt(first).position(8 + first).putInt(5);
            ProtocolException e = rejectedParams(over.position(0), new Recording(a));
            assertTrue(e.getMessage().contains("size=5"), e.getMessage());
            // Exactly MAX_PARAM_BYTES is fine.
            ByteBuffer exact = ByteBuffer.allocate(4 + 4 + first + 4 + 4).order(ByteOrder.LITTLE_ENDIAN);
            exact.putInt(2).putInt(first).position(8 + first).putInt(4);
            LaunchRequest.readKernelParams(exact.position(0), a);
            assertEquals(0, exact.remaining());
        }
    }

    @Test
    void extraSizesOutOfRangeAreRejectedBeforeAllocation() throws ProtocolException {
        try (Arena a = Arena.ofConfined()) {
            for (ByteBuffer b : new ByteBuffer[] {after(40_000, LaunchRequest.MAX_PARAM_BYTES + 1), after(0, -1), after(9, 10)}) {
                Recording scratch = new Recording(a);
                ProtocolException e = assertThrows(ProtocolException.class, () -> LaunchRequest.readExtra(b, scratch));
                assertTrue(e.getMessage().contains("size="), e.getMessage());
                assertEquals(List.of(), scratch.asked);
            }
            ByteBuffer empty = after(0, 0);
            MemorySegment e = LaunchRequest.readExtra(empty, a).reinterpret(LaunchRequest.EXTRA_ARRAY_BYTES);
            assertEquals(0, e.getAtIndex(ValueLayout.ADDRESS, 3).reinterpret(8).get(ValueLayout.JAVA_LONG, 0));
            assertTrue(e.getAtIndex(ValueLayout.ADDRESS, 1).address() != 0);
        }
    }

    @Test
    void anUnknownModeIsRejected() {
        for (int mode : new int[] {2, -1}) {
            ByteBuffer b = expectedHeader(52, mode).position(0);
            ProtocolException e = assertThrows(ProtocolException.class, () -> LaunchRequest.readHeader(b));
            assertTrue(e.getMessage().contains("mode=" + mode), e.getMessage());
        }
    }

    @Test
    void truncatedBodiesUnderflow() {
        try (Arena a = Arena.ofConfined()) {
            ByteBuffer header = expectedHeader(48, 0).position(0).limit(47);
            assertThrows(BufferUnderflowException.class, () -> LaunchRequest.readHeader(header));
            assertThrows(BufferUnderflowException.class, () -> LaunchRequest.readKernelParams(after(3), a));
            // One parameter announced, its size missing.
            assertThrows(BufferUnderflowException.class, () -> LaunchRequest.readKernelParams(after(2, 1), a));
            assertThrows(BufferUnderflowException.class, () -> LaunchRequest.readExtra(after(3), a));
        }
    }

    @Test
    void aFullRequestBufferOverflowsAsAPutWould() {
        try (Arena a = Arena.ofConfined()) {
            ByteBuffer b = ByteBuffer.allocate(44 + 8 + 4 + 3).order(ByteOrder.LITTLE_ENDIAN);
            header(b);
            assertThrows(java.nio.BufferOverflowException.class,
                    () -> LaunchRequest.putKernelParams(b, new long[] {4}, params(a, new byte[] {1, 2, 3, 4})));
        }
    }
}
