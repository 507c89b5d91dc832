package io.gpusockets.frontend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.TlsOptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
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
    void readsTlsCertificatesFromTheEnvironmentOrTheConfigFile(@TempDir Path dir) throws Exception {
        FrontendConfig env = FrontendConfig.fromEnvironment(Map.of(
                FrontendConfig.SERVER_ENV, "tls://gpu.example:7443",
                FrontendConfig.TLS_CA_ENV, "/etc/gpusockets/ca.pem",
                FrontendConfig.TLS_KEY_STORE_ENV, "/etc/gpusockets/client.p12",
                FrontendConfig.TLS_KEY_STORE_PASSWORD_FILE_ENV, "/etc/gpusockets/client.pw"));
        assertEquals(Optional.of(Path.of("/etc/gpusockets/ca.pem")), env.transportOptions().get(TlsOptions.TRUST));
        assertEquals(Optional.of(Path.of("/etc/gpusockets/client.p12")), env.transportOptions().get(TlsOptions.KEY_STORE));
        assertEquals(Optional.of(Path.of("/etc/gpusockets/client.pw")),
                env.transportOptions().get(TlsOptions.KEY_STORE_PASSWORD_FILE));
        assertEquals(Optional.empty(), env.transportOptions().get(TlsOptions.TRUST_PASSWORD_FILE));

        Path file = dir.resolve("frontend.conf");
        Files.writeString(file, "# guest settings\nGPUSOCKETS_TLS_CA=/opt/ca.pem\n");
        String before = System.getProperty(FrontendConfig.CONFIG_FILE_PROP);
        System.setProperty(FrontendConfig.CONFIG_FILE_PROP, file.toString());
        try {
            Map<String, String> fromFile = new HashMap<>();
            fromFile.put(FrontendConfig.SERVER_ENV, "tls://gpu.example:7443");
            assertEquals(Optional.of(Path.of("/opt/ca.pem")),
                    FrontendConfig.fromEnvironment(fromFile).transportOptions().get(TlsOptions.TRUST));
        } finally {
            if (before == null) {
                System.clearProperty(FrontendConfig.CONFIG_FILE_PROP);
            } else {
                System.setProperty(FrontendConfig.CONFIG_FILE_PROP, before);
            }
        }
    }

    @Test
    void refusesAPlaintextTcpBackendWhenTlsIsConfigured() {
        var e = assertThrows(IllegalArgumentException.class, () -> FrontendConfig.fromEnvironment(Map.of(
                FrontendConfig.SERVER_ENV, "tcp://gpu.example:7070",
                FrontendConfig.TLS_CA_ENV, "/etc/gpusockets/ca.pem")));
        assertTrue(e.getMessage().contains("use tls://gpu.example:7070"), e.getMessage());
        assertTrue(FrontendConfig.fromEnvironment(Map.of(FrontendConfig.SERVER_ENV, "tcp://gpu.example:7070"))
                .transportOptions().isEmpty(), "no TLS settings, no options");
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

    @Test
    void copyThreadsAsAskedElseByCores() {
        assertEquals(1, FrontendConfig.copyThreads("1", 64));
        assertEquals(2, FrontendConfig.copyThreads("2", 2));
        assertEquals(2, FrontendConfig.copyThreads(null, 3));
        assertEquals(1, FrontendConfig.copyThreads(null, 2));
        assertEquals(1, FrontendConfig.copyThreads("many", 2), "an unknown value means the default");
    }

    @Test
    void startupTraceOffWhenAbsentAndTimesWhenSet() {
        assertEquals(null, FrontendConfig.startupTraceTimes(null));
        long[] t = FrontendConfig.startupTraceTimes("100,250");
        assertEquals(100, t[0]);
        assertEquals(250, t[1]);
        assertEquals(2, FrontendConfig.startupTraceTimes("garbled").length, "a bad value still traces, from now");
    }

    @Test
    void configFileFromItsProperty(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("frontend.conf");
        Files.writeString(file, "# test\nGPUSOCKETS_SERVER=tcp://from-file:9\n");
        String before = System.getProperty(FrontendConfig.CONFIG_FILE_PROP);
        System.setProperty(FrontendConfig.CONFIG_FILE_PROP, file.toString());
        try {
            Map<String, String> noServer = new HashMap<>();
            assertEquals(List.of("tcp://from-file:9"), FrontendConfig.fromEnvironment(noServer).servers());
        } finally {
            if (before == null) {
                System.clearProperty(FrontendConfig.CONFIG_FILE_PROP);
            } else {
                System.setProperty(FrontendConfig.CONFIG_FILE_PROP, before);
            }
        }
    }
}
