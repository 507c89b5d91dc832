package io.gpusockets.backend.tenant;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.isolation.Isolation;
import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.protocol.wire.Handshake;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalInt;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TenantRegistryTest {
    private static PeerInfo uid(int uid) {
        return new PeerInfo("unix:///s (uid " + uid + ")", OptionalInt.of(uid));
    }

    private static TenantConfig config(Path dir, String text) throws Exception {
        Path f = dir.resolve("tenants.conf");
        Files.writeString(f, text);
        return TenantConfig.read(f);
    }

    @Test
    void resolvesEachKindOfProvenIdentity(@TempDir Path dir) throws Exception {
        Files.writeString(dir.resolve("a.key"), "key-a");
        TenantRegistry reg = new TenantRegistry(config(dir, """
                [tenant a]
                match = psk:alice
                psk-file = a.key
                [tenant b]
                match = uid:1001, cid:7, domid:9, cert:CN=bob, O=lab
                """));
        assertEquals("a", reg.admit(PeerInfo.of("tcp://x"), "alice").tenant().name());
        assertEquals("b", reg.admit(uid(1001), null).tenant().name());
        assertEquals("b", reg.admit(PeerInfo.vsock("vsock://7:1", 7), null).tenant().name());
        assertEquals("b", reg.admit(PeerInfo.of("vchan://9").withDomid(9), null).tenant().name());
        // certificate subjects compare as X.500 names (spacing and case of attribute types do not matter)
        assertEquals("b", reg.admit(PeerInfo.of("tcp://y").withCertificate("cn=bob,o=lab"), null).tenant().name());
        assertEquals("default", reg.admit(uid(1002), null).tenant().name());
        // a PSK identity with no key of its own proves nothing: the uid decides
        assertEquals("b", reg.admit(uid(1001), "alice-impostor").tenant().name());
    }

    @Test
    void proofsUseTheIdentitysOwnKeyElseTheDefault(@TempDir Path dir) throws Exception {
        Files.writeString(dir.resolve("a.key"), "key-a\n");
        TenantRegistry reg = new TenantRegistry(config(dir, "[tenant a]\nmatch = psk:alice\npsk-file = a.key\n"));
        assertTrue(reg.hasKeys());
        byte[] nonce = new byte[Handshake.NONCE_BYTES];
        byte[] keyA = "key-a".getBytes(StandardCharsets.UTF_8);
        byte[] shared = "shared".getBytes(StandardCharsets.UTF_8);
        assertTrue(reg.proofMatches(shared, nonce, "alice", Handshake.proof(keyA, nonce, "alice")));
        assertFalse(reg.proofMatches(shared, nonce, "alice", Handshake.proof(shared, nonce, "alice")),
                "the shared key must not prove a tenant's identity");
        assertTrue(reg.proofMatches(shared, nonce, "someone", Handshake.proof(shared, nonce, "someone")));
        assertFalse(reg.proofMatches(null, nonce, "someone", Handshake.proof(shared, nonce, "someone")));
    }

    @Test
    void refusesDeniedPeersAndTenantsAtTheirSessionLimit(@TempDir Path dir) throws Exception {
        TenantRegistry reg = new TenantRegistry(config(dir, "[default]\ndeny\n[tenant a]\nmatch = uid:1000\nsessions = 1\n"));
        TenantRegistry.Admission stranger = reg.admit(uid(4242), null);
        assertNull(stranger.tenant());
        assertEquals("no tenant matches this peer (uid:4242) and the backend admits no others", stranger.refusal());
        Tenant a = reg.admit(uid(1000), null).tenant();
        assertNotNull(a);
        assertEquals("tenant a is at its limit of 1 session(s)", reg.admit(uid(1000), null).refusal());
        a.closeSession();
        assertSame(a, reg.admit(uid(1000), null).tenant());
        assertEquals(1, a.rejections().get("sessions"));
    }

    @Test
    void reloadKeepsTenantsAndTheirAccountingAndChangesLimits(@TempDir Path dir) throws Exception {
        TenantRegistry reg = new TenantRegistry(config(dir, """
                [tenant a]
                match = uid:1000
                memory = 1GiB
                [tenant b]
                match = uid:1001
                """));
        Tenant a = reg.admit(uid(1000), null).tenant();
        Tenant b = reg.admit(uid(1001), null).tenant();
        assertTrue(a.reserveMemory(512L << 20));
        config(dir, """
                [tenant a]
                match = uid:1000
                memory = 2GiB
                [tenant c]
                match = uid:1002
                """);
        assertNull(reg.reload());
        assertSame(a, reg.admit(uid(1000), null).tenant(), "a stays the same Tenant");
        assertEquals(2, a.sessions());
        assertEquals(512L << 20, a.memoryUsed(), "what a held is still counted");
        assertEquals(2L << 30, a.limits().memoryBytes());
        assertTrue(a.reserveMemory(1L << 30), "the new limit is in force");
        assertEquals("c", reg.admit(uid(1002), null).tenant().name());
        // b was removed: its session keeps running, new ones are refused
        assertEquals(1, b.sessions());
        assertEquals("tenant b (uid:1001) was removed from the backend's tenants", reg.admit(uid(1001), null).refusal());
        assertFalse(b.openSession(), "a handshake that resolved b before the reload cannot open a session");
    }

    @Test
    void aReloadThatFailsKeepsTheConfigInForce(@TempDir Path dir) throws Exception {
        TenantRegistry reg = new TenantRegistry(config(dir, "[tenant a]\nmatch = uid:1000\nmemory = 1GiB\n"));
        Tenant a = reg.admit(uid(1000), null).tenant();
        Files.writeString(dir.resolve("tenants.conf"), "[tenant a]\nmatch = uid:1000\nmemory = lots\n");
        String why = reg.reload();
        assertTrue(why.endsWith("tenants.conf:3: memory = lots: expected a size such as 8GiB, 512MiB or 4096, or unlimited"), why);
        assertEquals(1L << 30, a.limits().memoryBytes());
        assertSame(a, reg.admit(uid(1000), null).tenant());
    }

    /** Mode process (the default) schedules no device time: a device-share is refused, at start and on reload. */
    @Test
    void aDeviceShareIsRefusedInIsolationModeProcessAtStartAndOnReload(@TempDir Path dir) throws Exception {
        TenantConfig plain = config(dir, "[tenant a]\nmatch = uid:1000\nmemory = 1GiB\n");
        assertNull(Isolation.PROCESS.tenantsRefusal(plain));
        TenantRegistry reg = new TenantRegistry(plain);
        reg.checkReloadsWith(Isolation.PROCESS::tenantsRefusal);
        Files.writeString(dir.resolve("tenants.conf"), "[tenant a]\nmatch = uid:1000\nmemory = 2GiB\n\n[tenant b]\n"
                + "match = uid:1001\ndevice-share = 0.5\n");
        String why = reg.reload();
        assertTrue(why.endsWith("tenants.conf:5: [tenant b] has device-share = 0.5, which isolation mode process (the default)"
                + " does not schedule: each session's worker is a process of its own and its launches never reach the front;"
                + " run the backend with --isolation context to share device time, or remove device-share"), why);
        assertEquals(1L << 30, reg.admit(uid(1000), null).tenant().limits().memoryBytes(), "the previous file stays in force");
        assertEquals(why, Isolation.PROCESS.tenantsRefusal(TenantConfig.read(dir.resolve("tenants.conf"))), "as at start");
        assertNull(Isolation.CONTEXT.tenantsRefusal(TenantConfig.read(dir.resolve("tenants.conf"))));
        assertTrue(Isolation.PROCESS.tenantsRefusal(config(dir, "[default]\ndevice-share = 0.25\n")).contains("[default] has"));
    }
}
