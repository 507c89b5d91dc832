package io.gpusockets.protocol.calls;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

class LaunchConfigRequestTest {
    private static ByteBuffer request() {
        return ByteBuffer.allocate(64 << 10).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** A CUlaunchConfig as a program lays it out (cuda.h 13.0, offsets checked with offsetof). */
    private static MemorySegment config(Arena a, long stream, MemorySegment attrs, int numAttrs) {
        MemorySegment c = a.allocate(LaunchConfigRequest.CONFIG_BYTES, 8);
        int[] dims = {3, 2, 1, 128, 2, 1, 4096};
        for (int i = 0; i < dims.length; i++) {
            c.set(ValueLayout.JAVA_INT, 4L * i, dims[i]);
        }
        c.set(ValueLayout.JAVA_LONG, 32, stream);
        c.set(ValueLayout.ADDRESS, 40, attrs);
        c.set(ValueLayout.JAVA_INT, 48, numAttrs);
        return c;
    }

    @Test
    void attributesAndConfigRoundTripIntoTheDriversLayout() throws ProtocolException {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attrs = a.allocate(2L * LaunchConfigRequest.ATTRIBUTE_BYTES, 8);
            attrs.set(ValueLayout.JAVA_INT, 0, LaunchConfigRequest.PROGRAMMATIC_EVENT);
            attrs.set(ValueLayout.JAVA_LONG, 8, 0xE7E7L);
            attrs.set(ValueLayout.JAVA_INT, 16, 3);
            attrs.set(ValueLayout.JAVA_INT, 72, 4);
            attrs.set(ValueLayout.JAVA_INT, 80, 2);
            attrs.set(ValueLayout.JAVA_LONG, 72 + 8 + 56, -1L);  // the union's last word travels too
            ByteBuffer b = request();
            LaunchConfigRequest.Config c = LaunchConfigRequest.putAttributes(b, MemorySegment.ofAddress(config(a, 0x55, attrs, 2).address()));
            assertEquals(new LaunchConfigRequest.Config(3, 2, 1, 128, 2, 1, 4096, 0x55), c);
            LaunchConfigRequest.putHeaderWithoutParams(b, 0xF00, c);
            ByteBuffer body = b.flip();
            SegmentAllocator scratch = (bytes, align) -> a.allocate(bytes, align);
            LaunchConfigRequest.Attributes got = LaunchConfigRequest.readAttributes(body, scratch);
            assertEquals(2, got.count());
            assertEquals(LaunchConfigRequest.PROGRAMMATIC_EVENT, got.id(0));
            assertEquals(0xE7E7L, got.value(0).get(ValueLayout.JAVA_LONG, 0));
            assertEquals(3, got.value(0).get(ValueLayout.JAVA_INT, 8));
            assertEquals(4, got.id(1));
            assertEquals(-1L, got.value(1).get(ValueLayout.JAVA_LONG, 56));
            LaunchRequest.Header h = LaunchRequest.readHeader(body);
            assertEquals(0xF00, h.function());
            assertEquals(0, body.getInt(), "no parameters");
            assertEquals(0, body.remaining());
            MemorySegment native_ = LaunchConfigRequest.config(scratch, h, 0xABCDL, got);
            assertEquals(128, native_.get(ValueLayout.JAVA_INT, 12));
            assertEquals(4096, native_.get(ValueLayout.JAVA_INT, 24));
            assertEquals(0xABCDL, native_.get(ValueLayout.JAVA_LONG, 32));
            assertEquals(got.array().address(), native_.get(ValueLayout.ADDRESS, 40).address());
            assertEquals(2, native_.get(ValueLayout.JAVA_INT, 48));
        }
    }

    @Test
    void theEncoderRefusesWhatTheDriverWouldAndTheDecoderBoundsTheCount() {
        try (Arena a = Arena.ofConfined()) {
            assertNull(LaunchConfigRequest.putAttributes(request(), MemorySegment.NULL));
            assertNull(LaunchConfigRequest.putAttributes(request(), config(a, 0, MemorySegment.NULL, 1)), "a count without its array");
            assertNull(LaunchConfigRequest.putAttributes(request(), config(a, 0, a.allocate(8),
                    LaunchConfigRequest.MAX_ATTRIBUTES + 1)), "over the bound");
            ByteBuffer b = request().putInt(LaunchConfigRequest.MAX_ATTRIBUTES + 1).flip();
            assertThrows(ProtocolException.class, () -> LaunchConfigRequest.readAttributes(b, (n, al) -> a.allocate(n, al)));
            ByteBuffer shortBody = request().putInt(2).putInt(1).flip();
            assertThrows(ProtocolException.class, () -> LaunchConfigRequest.readAttributes(shortBody, (n, al) -> a.allocate(n, al)),
                    "a count the body cannot hold is refused before allocating");
        }
    }
}
