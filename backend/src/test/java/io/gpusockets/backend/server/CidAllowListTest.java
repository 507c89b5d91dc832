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
    void theUidListAppliesOnlyWhereTheKernelProvesAUid() {
        PeerInfo tcp = PeerInfo.of("tcp://127.0.0.1:5000");
        PeerInfo unix1000 = new PeerInfo("unix:///run/g.sock (uid 1000)", OptionalInt.of(1000));
        PeerInfo unixUnknown = new PeerInfo("unix:///run/g.sock (uid unknown)", OptionalInt.empty());
        assertNull(BackendServer.uidRefusal(Set.of(0), "tcp", tcp), "tcp peers have no uid: PSK/TLS check them");
        assertNull(BackendServer.uidRefusal(Set.of(0), "vsock", PeerInfo.vsock("vsock://5:1", 5)));
        assertNull(BackendServer.uidRefusal(Set.of(1000), "unix", unix1000));
        assertNull(BackendServer.uidRefusal(Set.of(), "unix", unixUnknown), "an empty list admits everyone");
        assertEquals("peer uid 1000 is not allowed", BackendServer.uidRefusal(Set.of(0), "unix", unix1000));
        assertEquals("peer uid 1000 is not allowed", BackendServer.uidRefusal(Set.of(0), "ring", unix1000));
        assertEquals("peer uid unknown is not allowed", BackendServer.uidRefusal(Set.of(0), "fdunix", unixUnknown));
    }

    @Test
    void optionsKeepTheirFourArgumentFormWithAnEmptyCidList() {
        assertEquals(Set.of(), BackendSettings.fromSystemProperties().allowedCids());
    }
}
