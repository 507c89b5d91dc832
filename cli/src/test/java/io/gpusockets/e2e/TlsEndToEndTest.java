package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TestCertificates;
import java.io.IOException;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A backend process listening on tls:// with client certificates required, and Java frontends configured
 * as users configure them (GPUSOCKETS_TLS_* settings): the one holding a certificate signed by the CA
 * gets its calls served; a frontend without one, one trusting another CA, and a plaintext tcp:// frontend
 * on the tls:// port each get a clear error within the connect timeout, and the backend serves on. An
 * unmodified C program (libcuda.so.1) runs over tls:// too, where gcc and the built library are there.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TlsEndToEndTest {
    private static TestCertificates certs;
    private static BackendProcess backend;
    private static String tls;

    @BeforeAll
    static void startBackend() throws Exception {
        certs = TestCertificates.get();
        backend = BackendProcess.start("--listen", "tls://127.0.0.1:0",
                "--tls-key-store", certs.serverKeyStore().toString(),
                "--tls-key-store-password-file", certs.passwordFile().toString(),
                "--tls-client-ca", certs.caPem().toString(), "--tls-require-client-cert");
        tls = backend.address("tls");
    }

    @AfterAll
    static void stopBackend() throws Exception {
        if (backend != null) {
            backend.close();
        }
    }

    private static FrontendConfig config(String server, Map<String, String> tlsSettings) {
        Map<String, String> env = new HashMap<>(tlsSettings);
        env.put(FrontendConfig.SERVER_ENV, server);
        env.put(FrontendConfig.CONNECT_TIMEOUT_ENV, "10000");
        return FrontendConfig.fromEnvironment(env);
    }

    private static Map<String, String> withClientCertificate() {
        return Map.of(FrontendConfig.TLS_CA_ENV, certs.caPem().toString(),
                FrontendConfig.TLS_KEY_STORE_ENV, certs.clientKeyStore().toString(),
                FrontendConfig.TLS_KEY_STORE_PASSWORD_FILE_ENV, certs.passwordFile().toString());
    }

    @Test
    void aFrontendWithAClientCertificateIsServedOverTls() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(config(tls, withClientCertificate()))) {
            Cuda cuda = new Cuda(d);
            assertEquals(1, cuda.deviceCount());
            cuda.primaryContext();
            byte[] data = new byte[3 << 20];
            new java.util.Random(7).nextBytes(data);
            long dptr = cuda.alloc(data.length);
            cuda.put(dptr, data);
            assertArrayEquals(data, cuda.get(dptr, data.length), "3 MiB there and back through TLS");
        }
        assertTrue(backend.awaitLog("peer tls://127.0.0.1:", 10_000).contains("session"));
    }

    /** libcuda.so.1 reads the same GPUSOCKETS_TLS_* settings: an unmodified C program over tls://. */
    @Test
    void anUnmodifiedCProgramRunsOverTls() throws Exception {
        NativePrograms programs = NativePrograms.locate();
        String skip = programs.cannotRun("the C program over tls://");
        assumeTrue(skip == null, skip);
        java.nio.file.Path work = java.nio.file.Files.createTempDirectory("gpusockets-tls-cprogram");
        try {
            java.nio.file.Path exe = programs.build("memory_roundtrip", work);
            Map<String, String> env = new HashMap<>(withClientCertificate());
            env.put("LD_LIBRARY_PATH", programs.libDir.toString());
            env.put(FrontendConfig.SERVER_ENV, tls);
            env.put("GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"));
            env.put("GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path"));
            NativePrograms.Run r = NativePrograms.run(java.util.List.of(exe.toString()), env, work, 60);
            String context = "memory_roundtrip over " + tls + "\n--- stdout:\n" + r.stdout() + "--- stderr:\n" + r.stderrTail();
            assertEquals(0, r.exit(), context);
            assertEquals(java.nio.file.Files.readString(programs.golden("memory_roundtrip")), r.stdout(), context);
        } finally {
            NativePrograms.deleteTree(work);
        }
    }

    @Test
    void aFrontendWithoutACertificateIsRefusedClearly() throws Exception {
        IOException e = assertThrows(IOException.class, () -> RemoteCudaDriver.connect(config(tls,
                Map.of(FrontendConfig.TLS_CA_ENV, certs.caPem().toString()))).close());
        assertTrue(e.getMessage().contains("certificate_required") || e.getMessage().contains("client certificate"),
                e.getMessage());
        backend.awaitLog("requires a client certificate", 10_000);
        assertTrue(backend.alive());
    }

    @Test
    void aFrontendTrustingAnotherCaRefusesTheBackend() {
        IOException e = assertThrows(IOException.class, () -> RemoteCudaDriver.connect(config(tls,
                Map.of(FrontendConfig.TLS_CA_ENV, certs.otherCaPem().toString()))).close());
        assertTrue(e.getMessage().contains("not signed by a CA this end trusts"), e.getMessage());
        assertTrue(e.getMessage().contains(tls), e.getMessage());
    }

    @Test
    void aPlaintextFrontendOnTheTlsPortFailsWithinItsTimeout() throws Exception {
        String plaintext = "tcp://" + tls.substring("tls://".length());
        Map<String, String> env = new HashMap<>();
        env.put(FrontendConfig.SERVER_ENV, plaintext);
        env.put(FrontendConfig.CONNECT_TIMEOUT_ENV, "2000");
        long start = System.nanoTime();
        IOException e = assertThrows(IOException.class, () -> RemoteCudaDriver.connect(FrontendConfig.fromEnvironment(env)).close());
        assertTrue(e.getMessage().contains("tls://"), "the message should suggest tls://: " + e.getMessage());
        Duration took = Duration.ofNanos(System.nanoTime() - start);
        assertTrue(took.compareTo(Duration.ofSeconds(30)) < 0, "took " + took);
        // and the backend still serves TLS clients
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(config(tls, withClientCertificate()))) {
            assertEquals(1, new Cuda(d).deviceCount());
        }
    }
}
