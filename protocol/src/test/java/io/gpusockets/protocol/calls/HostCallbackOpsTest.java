package io.gpusockets.protocol.calls;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.wire.ProtocolException;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

class HostCallbackOpsTest {
    /** The frontend's callback request buffer: 32 bytes, little-endian. */
    private static ByteBuffer request() {
        return ByteBuffer.allocate(32).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static byte[] sent(ByteBuffer b) {
        ByteBuffer f = b.flip();
        byte[] out = new byte[f.remaining()];
        f.get(out);
        f.rewind();
        return out;
    }

    @Test
    void opNumbers() {
        assertEquals(0, HostCallbackOps.ENQUEUE);
        assertEquals(1, HostCallbackOps.AWAIT);
        assertEquals(2, HostCallbackOps.OPEN);
    }

    @Test
    void requestBytesAreExactlyTodays() {
        ByteBuffer enqueue = request();
        HostCallbackOps.putEnqueue(enqueue, 0x0A0B0C0D01020304L, 7, 0x55L);
        assertArrayEquals(new byte[] {0, 0, 0, 0, 4, 3, 2, 1, 0x0D, 0x0C, 0x0B, 0x0A, 7, 0, 0, 0, 0x55, 0, 0, 0, 0, 0, 0, 0},
                sent(enqueue));
        ByteBuffer await = request();
        HostCallbackOps.putAwait(await);
        assertArrayEquals(new byte[] {1, 0, 0, 0}, sent(await));
        ByteBuffer open = request();
        HostCallbackOps.putOpen(open, 0x1122L);
        assertArrayEquals(new byte[] {2, 0, 0, 0, 0x22, 0x11, 0, 0, 0, 0, 0, 0}, sent(open));
        assertEquals(HostCallbackOps.ENQUEUE_BYTES, 24);
        assertEquals(HostCallbackOps.AWAIT_BYTES, 4);
        assertEquals(HostCallbackOps.OPEN_BYTES, 12);
    }

    @Test
    void replyBytesAreExactlyTodays() {
        ByteBuffer gate = request();
        HostCallbackOps.putEnqueueReply(gate, 0x42L);
        assertArrayEquals(new byte[] {0x42, 0, 0, 0, 0, 0, 0, 0}, sent(gate));
        assertEquals(0x42L, HostCallbackOps.readEnqueueReply(gate));
        ByteBuffer reached = request();
        HostCallbackOps.putAwaitReply(reached, 0x43L, 719, 5L, 0x100L);
        assertArrayEquals(new byte[] {0x43, 0, 0, 0, 0, 0, 0, 0, (byte) 0xCF, 2, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0,
                0, 1, 0, 0, 0, 0, 0, 0}, sent(reached));
        assertEquals(new HostCallbackOps.Reached(0x43L, 719, 5L, 0x100L), HostCallbackOps.readAwaitReply(reached));
        assertEquals(HostCallbackOps.AWAIT_REPLY_BYTES, 28);
    }

    @Test
    void eachRequestRoundTripsToItsRecord() throws ProtocolException {
        ByteBuffer b = request();
        HostCallbackOps.putEnqueue(b, -3L, 0, 9L);
        assertEquals(new HostCallbackOps.Enqueue(-3L, 0, 9L), HostCallbackOps.read(b.flip()));
        assertEquals(0, b.remaining());
        b = request();
        HostCallbackOps.putAwait(b);
        assertEquals(new HostCallbackOps.Await(), HostCallbackOps.read(b.flip()));
        assertEquals(0, b.remaining());
        b = request();
        HostCallbackOps.putOpen(b, 99L);
        assertEquals(new HostCallbackOps.Open(99L), HostCallbackOps.read(b.flip()));
        assertEquals(0, b.remaining());
        b = request();
        HostCallbackOps.putPut(b, 7L, 4096L);
        assertEquals(HostCallbackOps.PUT_BYTES, b.position());
        assertEquals(new HostCallbackOps.Put(7L, 4096L), HostCallbackOps.read(b.flip()));
        assertEquals(0, b.remaining());
        b = request();
        HostCallbackOps.putGet(b, 8L);
        assertEquals(HostCallbackOps.GET_BYTES, b.position());
        assertEquals(new HostCallbackOps.Get(8L), HostCallbackOps.read(b.flip()));
        assertEquals(0, b.remaining());
    }

    @Test
    void aNegativePutSizeIsRejected() {
        ByteBuffer b = request().putInt(HostCallbackOps.PUT).putLong(1).putLong(-1).flip();
        assertThrows(ProtocolException.class, () -> HostCallbackOps.read(b));
    }

    @Test
    void unknownOpsAreRejectedByName() {
        for (int op : new int[] {5, -1, Integer.MAX_VALUE}) {
            ByteBuffer b = request().putInt(op).putLong(0).flip();
            ProtocolException e = assertThrows(ProtocolException.class, () -> HostCallbackOps.read(b));
            assertTrue(e.getMessage().contains("op=" + op), e.getMessage());
        }
    }

    @Test
    void truncatedBodiesUnderflow() {
        assertThrows(BufferUnderflowException.class, () -> HostCallbackOps.read(request().limit(3)));
        assertThrows(BufferUnderflowException.class, () -> HostCallbackOps.read(request().putInt(0).putLong(1).flip()));
        assertThrows(BufferUnderflowException.class, () -> HostCallbackOps.read(request().putInt(2).putInt(1).flip()));
        assertThrows(BufferUnderflowException.class, () -> HostCallbackOps.readAwaitReply(request().putLong(1).flip()));
    }
}
