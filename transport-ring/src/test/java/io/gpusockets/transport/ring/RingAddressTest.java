package io.gpusockets.transport.ring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

class RingAddressTest {

    @Test
    void parsesNameAndDefaultSize() {
        RingAddress a = RingAddress.of(TransportUri.parse("ring://backend_0.a-b"));
        assertEquals("backend_0.a-b", a.name());
        assertEquals(RingDescriptor.DEFAULT_CAPACITY, a.capacity());
        assertEquals("gpusockets-ring-backend_0.a-b.sock", a.socket().getFileName().toString());
    }

    @Test
    void parsesSizeSuffixes() {
        assertEquals(1 << 20, RingAddress.of(TransportUri.parse("ring://x?size=1m")).capacity());
        assertEquals(64 << 10, RingAddress.of(TransportUri.parse("ring://x?size=64K")).capacity());
        assertEquals(1 << 30, RingAddress.of(TransportUri.parse("ring://x?size=1g")).capacity());
        assertEquals(8192, RingAddress.of(TransportUri.parse("ring://x?size=8192")).capacity());
    }

    @Test
    void parsesTheSharedWindow() {
        assertEquals(16 << 20, RingAddress.of(TransportUri.parse("ring://x")).window());
        assertEquals(0, RingAddress.of(TransportUri.parse("ring://x?window=0")).window());
        assertEquals(1 << 20, RingAddress.of(TransportUri.parse("ring://x?size=64k&window=1m")).window());
        assertThrows(IllegalArgumentException.class, () -> RingAddress.of(TransportUri.parse("ring://x?window=3k")));
        assertThrows(IllegalArgumentException.class, () -> RingAddress.of(TransportUri.parse("ring://x?window=")));
    }

    @ParameterizedTest
    @ValueSource(strings = {"ring://a/b", "ring://..", "ring://a b", "ring://x?size=3k", "ring://x?size=2k",
            "ring://x?size=2g", "ring://x?size=", "ring://x?size=1t", "ring://x?color=red", "ring://x?size=99999999999g",
            "ring://?size=1m", "tcp://x"})
    void rejectsBadAddresses(String uri) {
        assertThrows(IllegalArgumentException.class, () -> RingAddress.of(TransportUri.parse(uri)));
    }

    @Test
    void isFoundByScheme() {
        assertInstanceOf(RingTransport.class, Transports.forUri(TransportUri.parse("ring://x")));
    }
}
