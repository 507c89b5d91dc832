package io.gpusockets.backend.tenant;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TenantConfigTest {
    private static final Path FILE = Path.of("/etc/gpusockets/tenants.conf");

    private static String error(String text) {
        return assertThrows(IllegalArgumentException.class, () -> TenantConfig.parse(FILE, text)).getMessage();
    }

    @Test
    void parsesTenantsLimitsIdentitiesAndDefault(@TempDir Path dir) throws Exception {
        Files.writeString(dir.resolve("alice.key"), "alice-secret\n");
        Path file = dir.resolve("tenants.conf");
        Files.writeString(file, """
                # two tenants
                [default]
                memory = 1GiB
                deny

                [tenant alice]
                match = uid:1000, psk:alice, cert:CN=alice,O=lab, cid:5, domid:3
                psk-file = alice.key
                memory = 8GiB
                sessions = 4
                lanes = 64
                handles = 10000
                streams = 256
                pinned = 512 MiB
                device-share = 0.5
                resume-grace = 300

                [tenant bob]
                match = uid:1001
                memory = unlimited
                """);
        TenantConfig c = TenantConfig.read(file);
        assertTrue(c.defaults().deny());
        assertEquals(1L << 30, c.defaults().limits().memoryBytes());
        assertEquals(2, c.tenants().size());
        TenantConfig.Section alice = c.tenants().get(0);
        assertEquals("alice", alice.name());
        assertEquals(new TenantLimits(8L << 30, 4, 64, 10000, 256, 512L << 20, 0.5, 300), alice.limits());
        assertEquals(java.time.Duration.ofSeconds(300), alice.limits().resumeGrace(java.time.Duration.ofSeconds(60)));
        assertEquals(List.of(new TenantConfig.Identity(TenantConfig.Kind.UID, "1000"),
                new TenantConfig.Identity(TenantConfig.Kind.PSK, "alice"),
                new TenantConfig.Identity(TenantConfig.Kind.CERT, "CN=alice,O=lab"),
                new TenantConfig.Identity(TenantConfig.Kind.CID, "5"),
                new TenantConfig.Identity(TenantConfig.Kind.DOMID, "3")), alice.matches());
        assertArrayEquals("alice-secret".getBytes(StandardCharsets.UTF_8), alice.pskKey());
        TenantConfig.Section bob = c.tenants().get(1);
        assertEquals(TenantLimits.UNLIMITED, bob.limits());
        assertEquals(java.time.Duration.ofSeconds(60), bob.limits().resumeGrace(java.time.Duration.ofSeconds(60)),
                "no resume-grace: the backend's");
        assertFalse(TenantConfig.parse(FILE, "[tenant x]\nmatch = uid:1\n").defaults().deny());
    }

    @Test
    void resumeGraceIsWholeSecondsUpToADay() {
        assertEquals(0, TenantConfig.parse(FILE, "[tenant x]\nmatch = uid:1\nresume-grace = 0\n").tenants().get(0).limits()
                .resumeGraceSeconds());
        assertTrue(error("[tenant x]\nmatch = uid:1\nresume-grace = -1\n").contains("resume-grace = -1"));
        assertTrue(error("[tenant x]\nmatch = uid:1\nresume-grace = 86401\n").contains("0 to 86400"));
        assertTrue(error("[tenant x]\nmatch = uid:1\nresume-grace = soon\n").contains("whole seconds"));
    }

    @Test
    void stableAddressesIsOnOrOffElseTheBackends() {
        TenantConfig c = TenantConfig.parse(FILE, "[tenant x]\nmatch = uid:1\nstable-addresses = on\n[tenant y]\nmatch = uid:2\n"
                + "stable-addresses = OFF\n[tenant z]\nmatch = uid:3\n[default]\nstable-addresses = on\n");
        TenantLimits x = c.tenants().get(0).limits(), y = c.tenants().get(1).limits(), z = c.tenants().get(2).limits();
        assertEquals(TenantLimits.Stable.ON, x.stableAddresses());
        assertEquals(TenantLimits.Stable.OFF, y.stableAddresses());
        assertEquals(TenantLimits.Stable.BACKEND, z.stableAddresses(), "not given: the backend's --stable-addresses");
        assertEquals(TenantLimits.Stable.ON, c.defaults().limits().stableAddresses());
        assertTrue(x.stableAddresses().resolve(false) && !y.stableAddresses().resolve(true));
        assertTrue(z.stableAddresses().resolve(true) && !z.stableAddresses().resolve(false));
        assertEquals(FILE + ":3: stable-addresses = yes: expected on or off",
                error("[tenant x]\nmatch = uid:1\nstable-addresses = yes\n"));
        assertEquals(FILE + ":4: stable-addresses given twice",
                error("[tenant x]\nmatch = uid:1\nstable-addresses = on\nstable-addresses = off\n"));
    }

    @Test
    void sizesTakeBinaryAndDecimalUnits() {
        assertEquals(8L << 30, TenantConfig.parseSize("8GiB"));
        assertEquals(1_000_000_000L, TenantConfig.parseSize("1GB"));
        assertEquals(1536L << 20, TenantConfig.parseSize("1.5 GiB"));
        assertEquals(4096, TenantConfig.parseSize("4096"));
        assertEquals(Long.MAX_VALUE, TenantConfig.parseSize("unlimited"));
        assertThrows(IllegalArgumentException.class, () -> TenantConfig.parseSize("8 parsecs"));
        assertThrows(IllegalArgumentException.class, () -> TenantConfig.parseSize("GiB"));
    }

    @Test
    void badInputIsNamedByFileAndLine() {
        assertEquals("/etc/gpusockets/tenants.conf:3: unknown setting 'memroy' (known: match, psk-file, memory, pinned,"
                + " sessions, lanes, handles, streams, device-share, resume-grace, stable-addresses)", error("[tenant a]\nmatch = uid:1\nmemroy = 1GiB\n"));
        assertTrue(error("memory = 1GiB\n").startsWith(FILE + ":1: a setting before the first"));
        assertTrue(error("[tenant a]\nmatch = uid:1\nmemory = 8 parsecs\n").startsWith(FILE + ":3: memory = 8 parsecs: unknown unit"));
        assertTrue(error("[tenant a]\nmatch = uid:one\n").startsWith(FILE + ":2: 'uid:one': uid must be a whole number"));
        assertTrue(error("[tenant a]\nmatch = gid:4\n").startsWith(FILE + ":2: 'gid:4': expected uid:N"));
        assertTrue(error("[tenant a]\nmatch = uid:1\n[tenant b]\nmatch = uid:1\n").startsWith(FILE + ":4: uid:1 already belongs to tenant a"));
        assertTrue(error("[tenant a]\nmatch = uid:1\n[tenant a]\nmatch = uid:2\n").startsWith(FILE + ":3: tenant a is defined twice"));
        assertTrue(error("[tenant a]\nmemory = 1GiB\n").startsWith(FILE + ":1: tenant a has no 'match ='"));
        assertTrue(error("[tenant a]\nmatch = psk:a\n").startsWith(FILE + ":1: tenant a matches a psk: identity but has no psk-file"));
        assertTrue(error("[tenant a]\nmatch = uid:1\npsk-file = /nonexistent/key\n").startsWith(FILE + ":3: psk-file /nonexistent/key cannot be read"));
        assertTrue(error("[tenant a]\nmatch = uid:1\nsessions = -1\n").startsWith(FILE + ":3: sessions = -1: expected a whole number of 0 or more"));
        assertTrue(error("[tenant a]\nmatch = uid:1\nlanes = 0\n").startsWith(FILE + ":3: lanes = 0: expected a whole number of 1 or more"));
        assertTrue(error("[tenant a]\nmatch = uid:1\ndevice-share = 1.5\n").startsWith(FILE + ":3: device-share = 1.5"));
        assertTrue(error("[tenant a]\nmatch = uid:1\ndevice-share = 0.6\n[tenant b]\nmatch = uid:2\ndevice-share = 0.6\n")
                .contains("add up to"));
        assertTrue(error("[tenant a]\nmatch = uid:1\ndeny\n").startsWith(FILE + ":3: 'deny' belongs in [default]"));
        assertTrue(error("[default]\nmatch = uid:1\n").startsWith(FILE + ":2: [default] matches every peer"));
        assertTrue(error("[tenants a]\n").startsWith(FILE + ":1: unknown section"));
        assertTrue(error("[tenant a b]\n").startsWith(FILE + ":1: tenant name 'a b'"));
        assertTrue(error("[tenant a]\nmatch = uid:1\nmemory = 1GiB\nmemory = 2GiB\n").startsWith(FILE + ":4: memory given twice"));
        assertTrue(error("[tenant a]\nmatch\n").startsWith(FILE + ":2: expected 'key = value'"));
    }
}
