package io.gpusockets.backend.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.backend.session.BackendSettings;
import java.util.OptionalInt;
import java.util.Set;
import org.junit.jupiter.api.Test;

class CidAllowListTest {
    private static final PeerInfo GUEST_5 = PeerInfo.vsock("vsock://5:1234", 5);

    @Test
    void refusesAVsockPeerWhoseCidIsNotListedNamingTheCid() {
        assertEquals("peer CID 5 is not allowed (allowed: 3, 4)", BackendServer.cidRefusal(Set.of(4L, 3L), GUEST_5));
    }

    @Test
    void admitsAListedCid() {
        assertNull(BackendServer.cidRefusal(Set.of(3L, 5L), GUEST_5));
    }

    @Test
    void anEmptyListAdmitsEveryCid() {
        assertNull(BackendServer.cidRefusal(Set.of(), GUEST_5));
    }

    @Test
    void peersWithoutACidAreLeftToTheirOwnChecks() {
        assertNull(BackendServer.cidRefusal(Set.of(3L), PeerInfo.of("tcp://127.0.0.1:5000")));
        assertNull(BackendServer.cidRefusal(Set.of(3L), new PeerInfo("unix:///run/g.sock (uid 0)", OptionalInt.of(0))));
    }

    @Test
    void optionsKeepTheirFourArgumentFormWithAnEmptyCidList() {
        assertEquals(Set.of(), BackendSettings.fromSystemProperties().allowedCids());
    }
}
