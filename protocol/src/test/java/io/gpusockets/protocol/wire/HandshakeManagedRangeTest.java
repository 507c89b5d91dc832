package io.gpusockets.protocol.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.ManagedRange;
import java.nio.ByteBuffer;
import org.junit.jupiter.api.Test;

/**
 * The managed range in a HELLO ({@link Handshake#FEATURE_MANAGED_RANGE}): base and size after the resume token, only
 * with the bit; a HELLO with the bit and no range is malformed; a HELLO without it reads as before.
 */
class HandshakeManagedRangeTest {
    private static final long BASE = 0x2000_0000_0000L, SIZE = 256L << 30;

    @Test
    void roundTripsTheRangeAfterTheToken() throws Exception {
        Handshake.Hello h = new Handshake.Hello(Handshake.PROTOCOL_VERSION,
                Handshake.FEATURE_ASYNC | Handshake.FEATURE_MANAGED_RANGE, "guest", new byte[32], new byte[0], BASE, SIZE);
        Handshake.Hello d = Handshake.Hello.decode(h.encode());
        assertTrue(d.hasManagedRange());
        assertEquals(BASE, d.managedBase());
        assertEquals(SIZE, d.managedSize());
        assertEquals(Handshake.FEATURE_ASYNC | Handshake.FEATURE_MANAGED_RANGE, d.features());
    }

    @Test
    void aHelloWithoutTheBitCarriesNoRange() throws Exception {
        Handshake.Hello d = Handshake.Hello.decode(new Handshake.Hello(Handshake.PROTOCOL_VERSION, Handshake.FEATURE_ASYNC,
                "guest", new byte[0]).encode());
        assertFalse(d.hasManagedRange());
        assertEquals(0, d.managedBase());
        // the short constructors cannot ask for a range they do not carry
        assertFalse(new Handshake.Hello(1, Handshake.FEATURE_MANAGED_RANGE, "guest", new byte[0]).hasManagedRange());
    }

    @Test
    void theBitWithoutTheRangeIsMalformed() {
        Handshake.Hello h = new Handshake.Hello(Handshake.PROTOCOL_VERSION, Handshake.FEATURE_MANAGED_RANGE, "guest",
                new byte[0], new byte[0], BASE, SIZE);
        ByteBuffer b = h.encode();
        ByteBuffer cut = b.slice(0, b.remaining() - 8).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        ProtocolException e = assertThrows(ProtocolException.class, () -> Handshake.Hello.decode(cut));
        assertTrue(e.getMessage().contains("FEATURE_MANAGED_RANGE"), e.getMessage());
    }

    @Test
    void checkAcceptsAlignedRangesInTheUserSpaceOnly() {
        assertNull(ManagedRange.check(BASE, SIZE));
        assertNotNull(ManagedRange.check(BASE + 4096, SIZE));
        assertNotNull(ManagedRange.check(BASE, SIZE + 4096));
        assertNotNull(ManagedRange.check(0, SIZE));
        assertNotNull(ManagedRange.check(BASE, 0));
        assertNotNull(ManagedRange.check(BASE, Long.MAX_VALUE & -ManagedRange.ALIGNMENT));
        assertNotNull(ManagedRange.check(-ManagedRange.ALIGNMENT, ManagedRange.ALIGNMENT));
    }
}
