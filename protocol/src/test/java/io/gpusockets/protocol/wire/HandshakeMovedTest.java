package io.gpusockets.protocol.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** MOVED's body ({@link Handshake.Moved}): a transport URI, bounded, parsed; anything else is a protocol violation. */
class HandshakeMovedTest {
    @Test
    void roundTripsAUri() throws Exception {
        for (String uri : new String[] {"tcp://10.0.0.2:7000", "unix:///run/gpusockets/b.sock", "ring:///tmp/r.sock",
                "tls://[::1]:7001"}) {
            assertEquals(uri, Handshake.Moved.decode(new Handshake.Moved(uri).encode()).uri());
        }
    }

    @Test
    void refusesWhatIsNoUriTooLongOrFollowedByBytes() {
        assertThrows(ProtocolException.class, () -> Handshake.Moved.decode(Handshake.encodeString("no uri")));
        assertThrows(ProtocolException.class, () -> Handshake.Moved.decode(Handshake.encodeString("tcp://")));
        assertThrows(ProtocolException.class, () -> Handshake.Moved.decode(Handshake.encodeString("tcp://a:1\nx")));
        String longUri = "tcp://" + "a".repeat(Handshake.Moved.MAX_MOVED_URI) + ":1";
        assertThrows(ProtocolException.class, () -> Handshake.Moved.decode(Handshake.encodeString(longUri)));
        assertThrows(IllegalArgumentException.class, () -> new Handshake.Moved(longUri));
        ByteBuffer trailing = ByteBuffer.allocate(64).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        byte[] u = "tcp://a:1".getBytes(StandardCharsets.UTF_8);
        trailing.putInt(u.length).put(u).put((byte) 0).flip();
        assertThrows(ProtocolException.class, () -> Handshake.Moved.decode(trailing));
        ByteBuffer lying = ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(1 << 20).putInt(0).flip();
        assertThrows(ProtocolException.class, () -> Handshake.Moved.decode(lying));
        assertEquals("MOVED", Opcodes.name(Opcodes.MOVED));
    }
}
