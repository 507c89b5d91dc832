package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.tenant.DeviceShare;
import io.gpusockets.backend.tenant.TenantConfig;
import io.gpusockets.backend.tenant.TenantRegistry;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Launches of tenants with device-time shares go through the scheduler on a real backend (emulated
 * device): each is admitted, followed to its completion by an event, and nothing stays in flight when
 * the sessions end, even with kernels still running.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TenantDeviceShareTest {
    private static final long MS = 1_000_000;

    private static RemoteCudaDriver connect(String address, String identity) throws Exception {
        return RemoteCudaDriver.connect(new FrontendConfig(List.of(address), Duration.ofSeconds(10), true,
                (identity + "-key").getBytes(StandardCharsets.UTF_8), identity));
    }

    private static void awaitNothingInFlight(DeviceShare s) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (s.inFlight() != 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals(0, s.inFlight(), "launches still holding the scheduler's window");
    }

    @Test
    void launchesOfTenantsWithSharesAreAdmittedFollowedAndLetGo(@TempDir Path dir) throws Exception {
        for (String t : List.of("alice", "bob")) {
            Files.writeString(dir.resolve(t + ".key"), t + "-key");
        }
        Files.writeString(dir.resolve("tenants.conf"), """
                [tenant alice]
                match = psk:alice
                psk-file = alice.key
                device-share = 0.75
                [tenant bob]
                match = psk:bob
                psk-file = bob.key
                device-share = 0.25
                """);
        TenantRegistry tenants = new TenantRegistry(TenantConfig.read(dir.resolve("tenants.conf")));
        DeviceShare scheduler = tenants.deviceShare();
        assertTrue(scheduler.active());
        try (BackendServer server = new BackendServer(DriverHost.initialise(new EmulatedDevice(), "emulated"),
                BackendSettings.fromSystemProperties(), tenants);
             ExecutorService pool = Executors.newFixedThreadPool(2)) {
            String address = server.listen(TransportUri.parse("tcp://127.0.0.1:0")).toString();
            List<Future<Integer>> results = pool.invokeAll(List.<Callable<Integer>>of(
                    () -> fillAndCheck(address, "alice", 40), () -> fillAndCheck(address, "bob", 40)));
            for (Future<Integer> f : results) {
                assertEquals(40, f.get());
            }
            assertTrue(scheduler.admitted("alice") >= 40, "alice: " + scheduler.admitted("alice"));
            assertTrue(scheduler.admitted("bob") >= 40, "bob: " + scheduler.admitted("bob"));
            awaitNothingInFlight(scheduler);

            // a session that ends with kernels still running lets go of their slots
            try (RemoteCudaDriver d = connect(address, "bob")) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                long sleep = cu.function(cu.loadKernels(), "gpus_sleep");
                long s = cu.stream();
                for (int i = 0; i < 3; i++) {
                    Cuda.ok(d.cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, s, cu.params(cu.u64(300 * MS)), MemorySegment.NULL), "sleep");
                }
                Cuda.ok(d.cuCtxGetDevice(cu.cell()), "a round trip: the launches reached the backend");
            }
            awaitNothingInFlight(scheduler);
        }
    }

    /** Launches {@code n} fills of a buffer, each writing its index; returns how many wrote what they should. */
    private static int fillAndCheck(String address, String tenant, int n) throws Exception {
        try (RemoteCudaDriver d = connect(address, tenant)) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long fill = cu.function(cu.loadKernels(), "gpus_fill_u32");
            long p = cu.alloc(4L * 64);
            int good = 0;
            for (int i = 0; i < n; i++) {
                Cuda.ok(d.cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, 0, cu.params(cu.u64(p), cu.u32(i), cu.u32(64)),
                        MemorySegment.NULL), "fill");
                ByteBuffer b = ByteBuffer.wrap(cu.get(p, 4 * 64)).order(ByteOrder.LITTLE_ENDIAN);
                boolean ok = true;
                for (int k = 0; k < 64; k++) {
                    ok &= b.getInt() == i;
                }
                good += ok ? 1 : 0;
            }
            return good;
        }
    }
}
