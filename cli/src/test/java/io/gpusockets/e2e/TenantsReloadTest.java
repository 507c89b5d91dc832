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
    void aBadTenantsFileStopsTheStartWithItsLine(@TempDir Path dir) throws Exception {
        Path conf = dir.resolve("tenants.conf");
        Files.writeString(conf, "[tenant carol]\nmatch = uid:carol\n");
        var e = org.junit.jupiter.api.Assertions.assertThrows(java.io.IOException.class,
                () -> BackendProcess.start("--tenants", conf.toString()));
        assertTrue(e.getMessage().contains("tenants.conf:2: 'uid:carol': uid must be a whole number"), e.getMessage());
    }
}
