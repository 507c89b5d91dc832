package io.gpusockets.frontend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The dns:// grammar and the order of the backends it resolves to (end to end: cli's DnsDiscoveryTest). */
class DnsDiscoveryTest {
    @Test
    void parsesNamePortAndTransport() {
        assertEquals(new DnsDiscovery.Target("gpusockets-backend.gpusockets.svc.cluster.local", 7070, "tcp"),
                DnsDiscovery.parse("dns://gpusockets-backend.gpusockets.svc.cluster.local:7070"));
        assertEquals(new DnsDiscovery.Target("backend", 7443, "tls"), DnsDiscovery.parse("DNS://backend:7443?transport=TLS"));
        assertEquals(new DnsDiscovery.Target("backend", 1, "tcp"), DnsDiscovery.parse("dns://backend:1?transport=tcp"));
        assertEquals("dns://backend:7443?transport=tls", DnsDiscovery.parse("dns://backend:7443?transport=tls").toString());
        assertTrue(DnsDiscovery.isDns("Dns://x:1"));
        assertFalse(DnsDiscovery.isDns("tcp://x:1"));
    }

    @Test
    void rejectsMalformedUris() {
        for (String bad : List.of("dns://backend", "dns://backend:0", "dns://:7070", "dns://backend:70000",
                "dns://backend:7070/path", "dns://backend:7070?transport=unix", "dns://backend:7070?port=1",
                "dns://user@backend:7070", "dns://back end:7070")) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> DnsDiscovery.parse(bad), bad);
            assertTrue(e.getMessage().contains(bad), e.getMessage());
        }
    }

    @Test
    void sortsIpv4BeforeIpv6EachByItsBytes() throws Exception {
        InetAddress[] found = {
            InetAddress.getByName("10.0.0.10"), InetAddress.getByName("fd00::2"), InetAddress.getByName("10.0.0.9"),
            InetAddress.getByName("192.168.1.1"), InetAddress.getByName("fd00::1"), InetAddress.getByName("10.0.0.200")};
        DnsDiscovery.Target t = DnsDiscovery.parse("dns://backend:7070");
        assertEquals(List.of("tcp://10.0.0.9:7070", "tcp://10.0.0.10:7070", "tcp://10.0.0.200:7070",
                        "tcp://192.168.1.1:7070", "tcp://[fd00:0:0:0:0:0:0:1]:7070", "tcp://[fd00:0:0:0:0:0:0:2]:7070"),
                DnsDiscovery.sorted(found).stream().map(t::uriFor).toList());
    }

    @Test
    void resolvesALiteralAddressWithoutAsking() throws Exception {
        // A name that resolves to nothing is tested end to end with a hosts file of its own (cli's
        // DnsDiscoveryTest): here it would ask this machine's DNS servers.
        assertEquals(List.of("tls://127.0.0.1:7443"), DnsDiscovery.resolve(DnsDiscovery.parse("dns://127.0.0.1:7443?transport=tls")));
    }

    @Test
    void configChecksDnsUrisAndRefusesPlaintextWithTlsSettings() {
        assertThrows(IllegalArgumentException.class,
                () -> FrontendConfig.fromEnvironment(Map.of(FrontendConfig.SERVER_ENV, "dns://backend")));
        var e = assertThrows(IllegalArgumentException.class, () -> FrontendConfig.fromEnvironment(Map.of(
                FrontendConfig.SERVER_ENV, "dns://backend:7070", FrontendConfig.TLS_CA_ENV, Path.of("ca.pem").toString())));
        assertTrue(e.getMessage().contains("?transport=tls"), e.getMessage());
        FrontendConfig ok = FrontendConfig.fromEnvironment(Map.of(
                FrontendConfig.SERVER_ENV, "dns://backend:7443?transport=tls", FrontendConfig.TLS_CA_ENV, "ca.pem"));
        assertEquals(List.of("dns://backend:7443?transport=tls"), ok.servers());
    }
}
