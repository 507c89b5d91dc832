package io.gpusockets.transport.vsock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.TransportUri;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

class VsockAddressTest {

    @Test
    void parsesCidAndPort() {
        assertEquals(new VsockAddress(3, 7070), VsockAddress.parse(TransportUri.parse("vsock://3:7070")));
        assertEquals(new VsockAddress(4294967295L, 1), VsockAddress.parse(TransportUri.parse("vsock://4294967295:1")));
        VsockAddress any = VsockAddress.parse(TransportUri.parse("vsock://any:0"));
        assertTrue(any.anyCid());
        assertTrue(any.anyPort());
        assertTrue(VsockAddress.parse(TransportUri.parse("vsock://any:any")).anyPort());
    }

    @ParameterizedTest
    @ValueSource(strings = {"vsock://3", "vsock://:7070", "vsock://3:", "vsock://-1:5", "vsock://3:+5",
            "vsock://4294967296:1", "vsock://3:99999999999", "vsock://host:1", "vsock://3:7070/x"})
    void rejectsMalformedAddresses(String text) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> VsockAddress.parse(TransportUri.parse(text)));
        assertTrue(e.getMessage().contains(text), e.getMessage());
    }
}
