package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** A backend started with --psk-file lets in only frontends that prove they hold the key. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AuthTest {

    @Test
    void onlyFrontendsHoldingTheKeyGetIn(@TempDir Path dir) throws Exception {
        Path key = dir.resolve("psk");
        Files.writeString(key, "correct horse battery staple\n");
        Path wrong = dir.resolve("wrong");
        Files.writeString(wrong, "tr0ub4dor&3\n");
        try (BackendProcess backend = BackendProcess.start("--psk-file", key.toString())) {
            var noKey = assertThrows(IOException.class, () -> RemoteCudaDriver.connect(
                    FrontendConfig.fromEnvironment(Map.of(FrontendConfig.SERVER_ENV, backend.tcp(),
                            FrontendConfig.PSK_FILE_ENV, ""))));
            assertTrue(noKey.getMessage().contains("requires a pre-shared key"), noKey.getMessage());

            var badKey = assertThrows(IOException.class, () -> RemoteCudaDriver.connect(
                    FrontendConfig.fromEnvironment(Map.of(FrontendConfig.SERVER_ENV, backend.tcp(),
                            FrontendConfig.PSK_FILE_ENV, wrong.toString()))));
            assertTrue(badKey.getMessage().contains("authentication failed"), badKey.getMessage());

            try (RemoteCudaDriver d = RemoteCudaDriver.connect(FrontendConfig.fromEnvironment(Map.of(
                    FrontendConfig.SERVER_ENV, backend.tcp(), FrontendConfig.PSK_FILE_ENV, key.toString())))) {
                assertEquals(1, new Cuda(d).deviceCount());
            }
        }
    }
}
