package io.gpusockets.transport.vchan;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class VchanAddressTest {
    @Test
    void parsesPeerDomainAndXenstorePath() {
        assertEquals(new VchanAddress(0, "/local/domain/0/data/gpusockets"),
                VchanAddress.parse(TransportUri.parse("vchan://0/local/domain/0/data/gpusockets")));
        assertEquals(new VchanAddress(32751, "/a"), VchanAddress.parse(TransportUri.parse("vchan://32751/a")));
    }

    @ParameterizedTest
    @ValueSource(strings = {"vchan://0", "vchan://0/", "vchan:///path", "vchan://x/path", "vchan://32752/path",
            "vchan://0/a//b", "vchan://0/a b", "vchan://-1/a"})
    void rejectsMalformedAddresses(String text) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> VchanAddress.parse(TransportUri.parse(text)));
        assertTrue(e.getMessage().contains(text), e.getMessage());
    }

    @Test
    void isFoundByServiceLoader() {
        assertTrue(Transports.byScheme().get("vchan") instanceof VchanTransport);
    }
}
