package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusockets.cli.doctor.BackendChecks;
import io.gpusockets.cli.doctor.BackendSetup;
import io.gpusockets.cli.doctor.Check;
import io.gpusockets.cli.doctor.GuestChecks;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code gpusockets doctor guest} against a real backend process (emulated device) that asks for a
 * pre-shared key: a healthy guest (our libcuda.so.1 installed as install-frontend lays it out, the right
 * key) passes with exit status 0 when run as a command of its own; a wrong key and a closed port are each
 * found, with their fix.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class DoctorTest {
    private static Path dir;
    private static Path key;
    private static BackendProcess backend;

    @BeforeAll
    static void start() throws Exception {
        dir = Files.createTempDirectory("gpusockets-doctor");
        key = dir.resolve("psk");
        Files.writeString(key, "correct horse battery staple\n");
        Files.setPosixFilePermissions(key, PosixFilePermissions.fromString("rw-------"));
        backend = BackendProcess.start("--psk-file", key.toString());
    }

    @AfterAll
    static void stop() throws Exception {
        if (backend != null) {
            backend.close();
        }
    }

    /** Only the settings given: nothing from this JVM's environment or /etc/gpusockets. */
    private static Map<String, String> env(String... kv) {
        Map<String, String> m = new HashMap<>(Map.of("PATH", "/usr/bin:/bin"));
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    private static Check named(List<Check> checks, String name) {
        return checks.stream().filter(c -> c.name().equals(name)).findFirst()
                .orElseThrow(() -> new AssertionError("no check " + name + " in " + checks));
    }

    @Test
    void healthyGuestPassesWithExitZero(@TempDir Path prefix) throws Exception {
        Path built = NativePrograms.locate().library();
        assumeTrue(Files.isRegularFile(built), "frontend/target/native/libcuda.so.1 not built");
        // install-frontend's layout: PREFIX/lib/libcuda.so.1 beside PREFIX/runtime (this JVM's); the jars are
        // this test's class path (GPUSOCKETS_CLASSPATH), which holds the frontend's classes
        Files.createDirectories(prefix.resolve("lib"));
        Files.copy(built, prefix.resolve("lib/libcuda.so.1"));
        Files.createSymbolicLink(prefix.resolve("runtime"), Path.of(System.getProperty("java.home")));
        ProcessBuilder pb = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Xshare:auto", "-XX:TieredStopAtLevel=1",
                "-cp", System.getProperty("java.class.path"), "io.gpusockets.cli.Main", "doctor").redirectErrorStream(true);
        pb.environment().keySet().removeIf(k -> k.startsWith("GPUSOCKETS_"));
        pb.environment().put("LD_LIBRARY_PATH", prefix.resolve("lib").toString());
        pb.environment().put("GPUSOCKETS_SERVER", backend.tcp() + "," + backend.unix());
        pb.environment().put("GPUSOCKETS_PSK_FILE", key.toString());
        pb.environment().put("GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path"));
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        Files.delete(prefix.resolve("runtime")); // the link, before @TempDir's clean-up warns about it
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.startsWith("gpusockets doctor: guest checks (GPUSOCKETS_SERVER is set in the environment)"), out);
        assertTrue(out.contains("[ ok ] libcuda.so.1 a program loads: " + prefix.resolve("lib/libcuda.so.1")
                + " (from LD_LIBRARY_PATH entry " + prefix.resolve("lib") + "); dlopen agrees: GPUsockets' frontend"), out);
        assertTrue(out.contains("[ ok ] frontend Java runtime: "), out);
        for (String uri : List.of(backend.tcp(), backend.unix())) {
            assertTrue(out.contains("[ ok ] backend " + uri + " reachable: connected"), out);
            assertTrue(out.contains("[ ok ] backend " + uri + " protocol: version 1"), out);
            // the emulated device is a warning (a user may expect a GPU), not a failure
            assertTrue(out.contains("[warn] backend " + uri + " authentication: pre-shared key accepted; session "), out);
        }
        assertTrue(!out.contains("[FAIL]"), out);
    }

    @Test
    void aRunningBackendsAddressesWarnNamingItsProcess() {
        BackendSetup setup = new BackendSetup(List.of(backend.tcp(), backend.unix()), "emulated", null, key, null, null, null,
                null, null, null, null, "context", System.getProperty("user.name"));
        List<Check> checks = new BackendChecks(setup, env()).run();
        for (String uri : List.of(backend.tcp(), backend.unix())) {
            Check c = named(checks, "listener " + uri);
            assertEquals(Check.Status.WARN, c.status(), checks.toString());
            assertTrue(c.found().contains(" is served by a running GPUsockets backend, pid " + backend.pid() + " (java "), c.found());
            assertTrue(c.advice().contains("kill " + backend.pid()), c.advice());
        }
    }

    @Test
    void wrongPskFailsAuthentication() throws Exception {
        Path wrong = dir.resolve("wrong");
        Files.writeString(wrong, "tr0ub4dor&3\n");
        Files.setPosixFilePermissions(wrong, PosixFilePermissions.fromString("rw-------"));
        List<Check> checks = new GuestChecks(env("GPUSOCKETS_SERVER", backend.tcp(), "GPUSOCKETS_PSK_FILE", wrong.toString()),
                Map.of()).run();
        assertEquals(Check.Status.OK, named(checks, "backend " + backend.tcp() + " reachable").status(), checks.toString());
        Check auth = named(checks, "backend " + backend.tcp() + " authentication");
        assertEquals(Check.Status.FAIL, auth.status(), auth.toString());
        assertEquals("the backend refused this client: authentication failed: the pre-shared key does not match", auth.found());
        assertTrue(auth.advice().startsWith("GPUSOCKETS_PSK_FILE holds another key than the backend's --psk-file"), auth.advice());

        List<Check> none = new GuestChecks(env("GPUSOCKETS_SERVER", backend.unix()), Map.of()).run();
        Check noKey = named(none, "backend " + backend.unix() + " authentication");
        assertEquals(Check.Status.FAIL, noKey.status(), noKey.toString());
        assertTrue(noKey.advice().startsWith("set GPUSOCKETS_PSK_FILE=FILE"), noKey.advice());
    }

    @Test
    void unreachableBackendFails() throws IOException {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        String uri = "tcp://127.0.0.1:" + port;
        List<Check> checks = new GuestChecks(env("GPUSOCKETS_SERVER", uri, "GPUSOCKETS_CONNECT_TIMEOUT_MS", "2000"), Map.of()).run();
        Check c = named(checks, "backend " + uri + " reachable");
        assertEquals(Check.Status.FAIL, c.status(), c.toString());
        assertTrue(c.found().startsWith("cannot connect: "), c.found());
        assertTrue(c.advice().startsWith("nothing listens at 127.0.0.1:" + port + ": start the backend there"), c.advice());
        assertTrue(checks.stream().noneMatch(x -> x.name().equals("backend " + uri + " authentication")), checks.toString());
    }
}
