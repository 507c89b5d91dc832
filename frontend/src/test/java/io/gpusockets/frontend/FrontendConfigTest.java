package io.gpusockets.frontend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FrontendConfigTest {

    @Test
    void readsServersTimeoutAsyncAndKey(@TempDir Path dir) throws Exception {
        Path key = dir.resolve("psk");
        Files.writeString(key, "s3cret\n");
        FrontendConfig c = FrontendConfig.fromEnvironment(Map.of(
                FrontendConfig.SERVER_ENV, "tcp://a:1, unix:///b",
                FrontendConfig.CONNECT_TIMEOUT_ENV, "1500",
                FrontendConfig.ASYNC_ENV, "0",
                FrontendConfig.PSK_FILE_ENV, key.toString()));
        assertEquals(List.of("tcp://a:1", "unix:///b"), c.servers());
        assertEquals(Duration.ofMillis(1500), c.connectTimeout());
        assertFalse(c.async());
        assertEquals("s3cret", new String(c.preSharedKey()));
    }

    @Test
    void pipelinesByDefault() {
        assertTrue(FrontendConfig.forServer("tcp://a:1").async());
    }

    @Test
    void saysWhatToSetWhenNoServerIsGiven() {
        Map<String, String> none = new HashMap<>();
        none.put(FrontendConfig.SERVER_ENV, "");
        var e = assertThrows(IllegalArgumentException.class, () -> FrontendConfig.fromEnvironment(none));
        assertTrue(e.getMessage().contains("GPUSOCKETS_SERVER"), e.getMessage());
    }

    @Test
    void refusesAMissingKeyFileByName() {
        var e = assertThrows(IllegalArgumentException.class, () -> FrontendConfig.fromEnvironment(Map.of(
                FrontendConfig.SERVER_ENV, "tcp://a:1", FrontendConfig.PSK_FILE_ENV, "/nonexistent/psk")));
        assertTrue(e.getMessage().contains("/nonexistent/psk"), e.getMessage());
    }
}
