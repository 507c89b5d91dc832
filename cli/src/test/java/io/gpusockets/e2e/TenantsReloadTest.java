package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code gpusockets backend --tenants FILE}: SIGHUP re-reads the file; sessions running keep running under the new limits. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class TenantsReloadTest {
    private static final long MIB = 1L << 20;

    private static void hangup(BackendProcess b) throws Exception {
        Process kill = new ProcessBuilder("kill", "-HUP", Long.toString(b.pid())).inheritIO().start();
        assertEquals(0, kill.waitFor());
    }

    @Test
    void sighupReloadsWithoutDroppingSessions(@TempDir Path dir) throws Exception {
        Files.writeString(dir.resolve("carol.key"), "carol-key");
        Path conf = dir.resolve("tenants.conf");
        Files.writeString(conf, "[tenant carol]\nmatch = psk:carol\npsk-file = carol.key\nmemory = 4MiB\n");
        try (BackendProcess backend = BackendProcess.start("--tenants", conf.toString());
             RemoteCudaDriver d = RemoteCudaDriver.connect(FrontendConfig.fromEnvironment(java.util.Map.of(
                     FrontendConfig.SERVER_ENV, backend.tcp(), FrontendConfig.PSK_FILE_ENV, dir.resolve("carol.key").toString(),
                     FrontendConfig.IDENTITY_ENV, "carol")))) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment p = cu.cell();
            assertEquals("CUDA_ERROR_OUT_OF_MEMORY", CuResult.name(d.cuMemAlloc(p, 6 * MIB)));

            Files.writeString(conf, "[tenant carol]\nmatch = psk:carol\npsk-file = carol.key\nmemory = 1 fortnight\n");
            hangup(backend);
            String kept = backend.awaitLog("tenants not reloaded", 20_000);
            assertTrue(kept.contains("tenants.conf:4: memory = 1 fortnight"), kept);
            assertEquals("CUDA_ERROR_OUT_OF_MEMORY", CuResult.name(d.cuMemAlloc(p, 6 * MIB)), "the old limit stays");

            Files.writeString(conf, "[tenant carol]\nmatch = psk:carol\npsk-file = carol.key\nmemory = 8MiB\n");
            hangup(backend);
            backend.awaitLog("tenants reloaded from", 20_000);
            Cuda.ok(d.cuMemAlloc(p, 6 * MIB), "6 MiB of 8 on the session that ran through both reloads");
            cu.put(p.get(JAVA_LONG, 0), new byte[] {7});
            assertTrue(backend.alive());
        }
    }

    @Test
    void aReloadReachesTheSessionsProcessModeWorkersServe(@TempDir Path dir) throws Exception {
        Files.writeString(dir.resolve("carol.key"), "carol-key");
        Path conf = dir.resolve("tenants.conf");
        Files.writeString(conf, "[tenant carol]\nmatch = psk:carol\npsk-file = carol.key\nstreams = 3\n");
        try (BackendProcess backend = BackendProcess.start("--tenants", conf.toString(), "--isolation", "process",
                "--idle-workers", "1");
             RemoteCudaDriver d = RemoteCudaDriver.connect(FrontendConfig.fromEnvironment(java.util.Map.of(
                     FrontendConfig.SERVER_ENV, backend.tcp(), FrontendConfig.PSK_FILE_ENV, dir.resolve("carol.key").toString(),
                     FrontendConfig.IDENTITY_ENV, "carol")))) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment s = cu.cell();
            Cuda.ok(d.cuStreamCreate(s, 0), "stream 1 of 3");
            Cuda.ok(d.cuStreamCreate(s, 0), "stream 2 of 3");

            Files.writeString(conf, "[tenant carol]\nmatch = psk:carol\npsk-file = carol.key\nstreams = 2\n");
            hangup(backend);
            backend.awaitLog("tenants reloaded from", 20_000);
            // the worker has its new limits once the front has sent them: a message behind the reload's log line
            String third = null;
            for (int i = 0; i < 100 && !"CUDA_ERROR_OUT_OF_MEMORY".equals(third); i++) {
                int r = d.cuStreamCreate(s, 0);
                third = CuResult.name(r);
                if (r == CuResult.CUDA_SUCCESS) {
                    Cuda.ok(d.cuStreamDestroy(s.get(JAVA_LONG, 0)), "destroy the stream the old limit allowed");
                    Thread.sleep(100);
                }
            }
            assertEquals("CUDA_ERROR_OUT_OF_MEMORY", third, "a third stream past the reloaded limit of 2, in the worker's session");
            assertTrue(backend.alive());
        }
    }

    @Test
    void aBadTenantsFileStopsTheStartWithItsLine(@TempDir Path dir) throws Exception {
        Path conf = dir.resolve("tenants.conf");
        Files.writeString(conf, "[tenant carol]\nmatch = uid:carol\n");
        var e = org.junit.jupiter.api.Assertions.assertThrows(java.io.IOException.class,
                () -> BackendProcess.start("--tenants", conf.toString()));
        assertTrue(e.getMessage().contains("tenants.conf:2: 'uid:carol': uid must be a whole number"), e.getMessage());
    }
}
