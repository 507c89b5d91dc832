package io.gpusockets.protocol.calls;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.structs.Memcpy3D.Side;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

class PitchedCopyRequestTest {
    /** A side whose fields are base+1 .. base+9 (host 0: it never travels). */
    private static Side side(int type, long base) {
        return new Side(type, base + 1, base + 2, base + 3, base + 4, 0, base + 6, base + 7, base + 8, base + 9, 0);
    }

    private static final Memcpy3D COPY = new Memcpy3D(side(Memcpy3D.HOST, 100), side(Memcpy3D.DEVICE, 200), 300, 400, 500);

    private static ByteBuffer le(int n) {
        return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** The request as the layout diagram puts it, at literal offsets. */
    private static byte[] expected(boolean async, long stream, long bulk) {
        ByteBuffer e = le(async ? 176 : 168);
        for (int s = 0; s < 2; s++) {
            int at = s * 68;
            long base = s == 0 ? 100 : 200;
            e.putInt(at, s == 0 ? Memcpy3D.HOST : Memcpy3D.DEVICE);
            e.putLong(at + 4, base + 1).putLong(at + 12, base + 2).putLong(at + 20, base + 3).putLong(at + 28, base + 4)
                    .putLong(at + 36, base + 6).putLong(at + 44, base + 7).putLong(at + 52, base + 8).putLong(at + 60, base + 9);
        }
        e.putLong(136, 300).putLong(144, 400).putLong(152, 500);
        if (async) {
            e.putLong(160, stream).putLong(168, bulk);
        } else {
            e.putLong(160, bulk);
        }
        return e.array();
    }

    private static byte[] sent(ByteBuffer b) {
        ByteBuffer f = b.duplicate().flip();
        byte[] out = new byte[f.remaining()];
        f.get(out);
        return out;
    }

    @Test
    void sizesFollowTheLayout() {
        assertEquals(160, PitchedCopyRequest.COPY_BYTES);
        assertEquals(168, PitchedCopyRequest.wireBytes(false));
        assertEquals(176, PitchedCopyRequest.wireBytes(true));
    }

    @Test
    void synchronousRequestBytesAreExactlyTodays() {
        ByteBuffer b = le(512);
        PitchedCopyRequest.put(b, COPY, false, 0x5555L, 60_000_000L);
        assertArrayEquals(expected(false, 0, 60_000_000L), sent(b));
    }

    @Test
    void asyncRequestBytesAreExactlyTodays() {
        ByteBuffer b = le(512);
        PitchedCopyRequest.put(b, COPY, true, 0x5555L, 0);
        assertArrayEquals(expected(true, 0x5555L, 0), sent(b));
    }

    @Test
    void requestsRoundTrip() {
        for (boolean async : new boolean[] {false, true}) {
            ByteBuffer b = le(512);
            PitchedCopyRequest.put(b, COPY, async, 77, 123);
            PitchedCopyRequest.Request r = PitchedCopyRequest.read(b.flip(), async);
            assertEquals(0, b.remaining());
            assertEquals(new PitchedCopyRequest.Request(COPY, async ? 77 : 0, 123), r);
        }
    }

    @Test
    void bulkBytesAreAHostSourcesTotal() {
        assertEquals(300L * 400 * 500, PitchedCopyRequest.bulkBytes(COPY));
        Memcpy3D fromDevice = COPY.with(side(Memcpy3D.DEVICE, 1), side(Memcpy3D.HOST, 2));
        assertEquals(0, PitchedCopyRequest.bulkBytes(fromDevice));
        assertEquals(-1, PitchedCopyRequest.bulkBytes(COPY.withExtent(Long.MAX_VALUE, 2, 1)));
    }

    @Test
    void truncatedBodiesUnderflow() {
        assertThrows(BufferUnderflowException.class, () -> PitchedCopyRequest.read(ByteBuffer.wrap(expected(false, 0, 1), 0, 167)
                .slice().order(ByteOrder.LITTLE_ENDIAN), false));
        assertThrows(BufferUnderflowException.class, () -> PitchedCopyRequest.read(ByteBuffer.wrap(expected(false, 0, 1))
                .order(ByteOrder.LITTLE_ENDIAN), true));
        assertThrows(BufferUnderflowException.class, () -> PitchedCopyRequest.read(le(100), false));
    }
}
