package io.gpusockets.protocol.calls;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PointerAttributeRequestTest {
    private static ByteBuffer le(int n) {
        return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
    }

    @Test
    void attributeNumbersAreCudaHs() {
        // CUpointer_attribute in cuda.h.
        assertEquals(1, PointerAttributeRequest.CONTEXT);
        assertEquals(2, PointerAttributeRequest.MEMORY_TYPE);
        assertEquals(3, PointerAttributeRequest.DEVICE_POINTER);
        assertEquals(6, PointerAttributeRequest.SYNC_MEMOPS);
        assertEquals(7, PointerAttributeRequest.BUFFER_ID);
        assertEquals(8, PointerAttributeRequest.IS_MANAGED);
        assertEquals(9, PointerAttributeRequest.DEVICE_ORDINAL);
        assertEquals(11, PointerAttributeRequest.RANGE_START_ADDR);
        assertEquals(12, PointerAttributeRequest.RANGE_SIZE);
        assertEquals(13, PointerAttributeRequest.MAPPED);
    }

    @Test
    void valueBytesOfEveryAttribute() {
        // What the frontend's size switch and the backend's forwarded set said: these ten, nothing else.
        Map<Integer, Integer> forwarded = Map.of(1, 8, 3, 8, 7, 8, 11, 8, 12, 8, 2, 4, 6, 4, 8, 4, 9, 4, 13, 4);
        for (int attribute = -2; attribute <= 40; attribute++) {
            assertEquals(forwarded.getOrDefault(attribute, 0), PointerAttributeRequest.valueBytes(attribute), "attribute=" + attribute);
        }
        assertEquals(0, PointerAttributeRequest.valueBytes(Integer.MAX_VALUE));
        assertEquals(0, PointerAttributeRequest.valueBytes(Integer.MIN_VALUE));
    }

    @Test
    void requestBytesAreAttributeThenPointer() {
        ByteBuffer b = le(64);
        PointerAttributeRequest.put(b, PointerAttributeRequest.RANGE_SIZE, 0x7F00_0000_1234_5678L);
        byte[] expected = {12, 0, 0, 0, 0x78, 0x56, 0x34, 0x12, 0, 0, 0, 0x7F};
        byte[] actual = new byte[b.flip().remaining()];
        b.get(actual);
        assertArrayEquals(expected, actual);
        assertEquals(PointerAttributeRequest.REQUEST_BYTES, actual.length);
    }

    @Test
    void requestAndReplyRoundTrip() {
        ByteBuffer b = le(64);
        PointerAttributeRequest.put(b, 99, -5L);
        PointerAttributeRequest.Request r = PointerAttributeRequest.read(b.flip());
        assertEquals(new PointerAttributeRequest.Request(99, -5L), r);
        assertEquals(0, b.remaining());

        ByteBuffer reply = le(8);
        PointerAttributeRequest.putValue(reply, 0x0102030405060708L);
        assertArrayEquals(new byte[] {8, 7, 6, 5, 4, 3, 2, 1}, reply.array());
        assertEquals(0x0102030405060708L, PointerAttributeRequest.readValue(reply.flip()));
    }

    @Test
    void truncatedRequestsUnderflow() {
        assertThrows(BufferUnderflowException.class, () -> PointerAttributeRequest.read(le(11)));
        assertThrows(BufferUnderflowException.class, () -> PointerAttributeRequest.read(le(3)));
        assertThrows(BufferUnderflowException.class, () -> PointerAttributeRequest.readValue(le(7)));
    }
}
