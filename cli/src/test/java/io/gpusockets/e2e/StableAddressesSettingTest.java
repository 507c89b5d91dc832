package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.CheckpointRefused;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.SessionIds;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.StableWindows;
import io.gpusockets.protocol.transport.TransportUri;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Address-stable memory as a setting (issue 22): {@code gpusockets backend --stable-addresses} for every tenant that
 * sets nothing, a tenant's {@code stable-addresses = on|off} over it, re-read on SIGHUP for new sessions, in a worker
 * process as in the backend's own; status shows it per session; a checkpoint of a session without it is refused,
 * naming both settings. Fleet ids ({@code --fleet-id}): session ids and address windows of two backends differ.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StableAddressesSettingTest {
    private static final long WINDOWS_BASE = StableWindows.base();
    private static final long WINDOWS_END = StableWindows.end();
    /** The emulated device's default 8 GiB: the size of its windows. */
    private static final long WINDOW = 8L << 30;

    private static boolean inWindows(long p) {
        // the windows lie in the guest's managed range (this process is the guest); without one, from the windows' base
        return io.gpusockets.protocol.api.ManagedRange.inGuest(p) || p >= WINDOWS_BASE && p < WINDOWS_END;
    }

    private static RemoteCudaDriver as(String tenant, BackendProcess b, Path dir) throws Exception {
        return RemoteCudaDriver.connect(FrontendConfig.fromEnvironment(Map.of(FrontendConfig.SERVER_ENV, b.tcp(),
                FrontendConfig.PSK_FILE_ENV, dir.resolve(tenant + ".key").toString(), FrontendConfig.IDENTITY_ENV, tenant)));
    }

    private static final String CAROL = "[tenant carol]\nmatch = psk:carol\npsk-file = carol.key\n";
    private static final String DAVE = "[tenant dave]\nmatch = psk:dave\npsk-file = dave.key\n";

    private static long firstAlloc(RemoteCudaDriver d) {
        Cuda cu = new Cuda(d);
        cu.primaryContext();
        return cu.alloc(4096);
    }

    /** The sessions' rows of status --json, by id, once every one of {@code ids} has one. */
    private static Map<Long, Map<String, Object>> rows(BackendProcess b, long... ids) throws InterruptedException {
        Map<Long, Map<String, Object>> byId = Map.of();
        for (int i = 0; i < 200; i++) {
            byId = new java.util.HashMap<>();
            for (Map<String, Object> x : StatusTest.list(StatusTest.statusJson(b), "sessions")) {
                byId.put((Long) x.get("id"), x);
            }
            if (java.util.Arrays.stream(ids).allMatch(byId::containsKey)) {
                return byId;
            }
            Thread.sleep(50);
        }
        return byId;
    }

    @ParameterizedTest
    @ValueSource(strings = {"process", "context"})
    void theTenantsSettingWinsOverTheBackendsForNewSessions(String isolation, @TempDir Path dir) throws Exception {
        Files.writeString(dir.resolve("carol.key"), "carol-key");
        Files.writeString(dir.resolve("dave.key"), "dave-key");
        Path conf = dir.resolve("tenants.conf");
        Files.writeString(conf, CAROL + "stable-addresses = off\n" + DAVE);
        try (BackendProcess b = BackendProcess.startWithStatus("--tenants", conf.toString(), "--stable-addresses",
                "--isolation", isolation, "--idle-workers", "2");
             RemoteCudaDriver plain = as("dave", b, dir);
             RemoteCudaDriver off = as("carol", b, dir)) {
            long p = firstAlloc(plain), q = firstAlloc(off);
            assertTrue(inWindows(p), "dave sets nothing: --stable-addresses; 0x" + Long.toHexString(p));
            assertFalse(inWindows(q), "carol's stable-addresses = off; 0x" + Long.toHexString(q));
            Map<Long, Map<String, Object>> rows = rows(b, plain.sessionId(), off.sessionId());
            assertEquals(true, rows.get(plain.sessionId()).get("stableAddresses"), rows.toString());
            assertEquals(false, rows.get(off.sessionId()).get("stableAddresses"), rows.toString());
            assertTrue(StatusTest.status("--socket", b.adminSocket().toString()).out().contains("STABLE"));

            Files.writeString(conf, CAROL + "stable-addresses = on\n" + DAVE + "stable-addresses = off\n");
            Process kill = new ProcessBuilder("kill", "-HUP", Long.toString(b.pid())).inheritIO().start();
            assertEquals(0, kill.waitFor());
            b.awaitLog("tenants reloaded from", 20_000);
            try (RemoteCudaDriver on = as("carol", b, dir); RemoteCudaDriver plainOff = as("dave", b, dir)) {
                long r = firstAlloc(on), s = firstAlloc(plainOff);
                assertTrue(inWindows(r), "carol's new session after the reload: on; 0x" + Long.toHexString(r));
                assertFalse(inWindows(s), "dave's stable-addresses = off over --stable-addresses; 0x" + Long.toHexString(s));
                assertFalse(inWindows(new Cuda(off).alloc(4096)), "a session keeps what it started with");
                rows = rows(b, on.sessionId(), plainOff.sessionId());
                assertEquals(true, rows.get(on.sessionId()).get("stableAddresses"), rows.toString());
                assertEquals(false, rows.get(plainOff.sessionId()).get("stableAddresses"), rows.toString());
            }
        }
    }

    @Test
    void aCheckpointOfASessionWithoutItNamesHowToTurnItOn(@TempDir Path dir) throws Exception {
        try (EmulatedDevice device = new EmulatedDevice();
             BackendServer server = new BackendServer(DriverHost.initialise(device, "emulated"),
                     BackendSettings.fromProperties(new java.util.Properties(), 2))) {
            String uri = server.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                assertFalse(inWindows(firstAlloc(d)), "off by default");
                assertFalse(server.snapshot().sessions().getFirst().stableAddresses());
                CheckpointRefused e = assertThrows(CheckpointRefused.class,
                        () -> server.checkpoint(d.sessionId(), dir.resolve("x.img"), false, null));
                assertTrue(e.getMessage().contains("stable-addresses = on") && e.getMessage().contains("--stable-addresses"),
                        e.getMessage());
            }
        }
    }

    /**
     * Two backends of a fleet, ids 0 and 1, on devices of their own (two hosts): the first session of each gets the
     * id and the window slot {@code SessionIds} and {@code StableAddresses.windowSlot} give, fleet 0's as before fleet
     * ids ({@code 7919 mod 127}), fleet 1's the next slot (one device per backend), so no two share a window.
     */
    @Test
    void backendsWithDistinctFleetIdsGiveDistinctSessionIdsAndWindows(@TempDir Path dir) throws Exception {
        System.setProperty("gpusockets.managed.range", "off"); // the slots: where windows lie without a guest's range
        try {
            fleetSlots(dir);
        } finally {
            System.clearProperty("gpusockets.managed.range");
        }
    }

    private void fleetSlots(Path dir) throws Exception {
        long slots = (WINDOWS_END - WINDOWS_BASE) / WINDOW;
        try (EmulatedDevice da = new EmulatedDevice(); EmulatedDevice db = new EmulatedDevice();
             BackendServer a = new BackendServer(DriverHost.initialise(da, "emulated"),
                     BackendSettings.fromProperties(new java.util.Properties(), 2).withStableAddresses(true));
             BackendServer b = new BackendServer(DriverHost.initialise(db, "emulated"),
                     BackendSettings.fromProperties(new java.util.Properties(), 2).withStableAddresses(true))) {
            b.fleetId(1);
            assertThrows(IllegalArgumentException.class, () -> b.fleetId(SessionIds.MAX_FLEET + 1));
            String ua = a.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String ub = b.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver x = RemoteCudaDriver.connect(ua); RemoteCudaDriver y = RemoteCudaDriver.connect(ub)) {
                assertEquals(1, x.sessionId(), "fleet id 0: the ids as before");
                assertEquals((1L << 37) + 1, y.sessionId(), "fleet id 1, counter 1");
                assertEquals(1, SessionIds.fleet(y.sessionId()));
                assertEquals(1, SessionIds.counter(y.sessionId()));
                long p = firstAlloc(x), q = firstAlloc(y);
                assertTrue(inWindows(p) && inWindows(q), Long.toHexString(p) + " " + Long.toHexString(q));
                assertEquals(7919 % slots, (p - WINDOWS_BASE) / WINDOW, "fleet 0's window: as before fleet ids");
                assertEquals((7919 + 1) % slots, (q - WINDOWS_BASE) / WINDOW, "fleet 1's: the next slot");
                assertTrue(a.snapshot().sessions().getFirst().stableAddresses());
                assertEquals(List.of(y.sessionId()), b.snapshot().sessions().stream().map(s -> s.id()).toList());
            }
        }
    }
}
