package io.gpusockets.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.status.StatusJson;
import io.gpusockets.cli.doctor.Check;
import io.gpusockets.cli.doctor.DoctorReport;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code gpusockets doctor} against deliberately broken set-ups, in this JVM: each planted fault is found,
 * as a [FAIL] with its fix, and a healthy backend host passes with exit status 0. (A real backend and a
 * guest are in e2e.DoctorTest.) Also: an unknown command says so and exits 2.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DoctorCommandTest {
    private static final Map<String, String> ENV = Map.of("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");

    private record Run(int code, String out, String err) {
    }

    private static Run run(Map<String, String> env, String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = Main.commandLine(DoctorCommand.factory(env)).setOut(new PrintWriter(out, true))
                .setErr(new PrintWriter(err, true)).execute(args);
        return new Run(code, out.toString(), err.toString());
    }

    private static Path secret(Path dir, String name, String mode) throws Exception {
        Path f = dir.resolve(name);
        Files.writeString(f, "correct horse battery staple\n");
        Files.setPosixFilePermissions(f, PosixFilePermissions.fromString(mode));
        return f;
    }

    /** The backend command's options for a backend on the emulated device that can start here, plus {@code more}. */
    private static String[] backend(Path dir, String... more) {
        List<String> a = new ArrayList<>(List.of("doctor", "backend", "--device", "emulated", "--listen", "tcp://127.0.0.1:0",
                "--listen", "unix://" + dir.resolve("backend.sock")));
        a.addAll(List.of(more));
        return a.toArray(String[]::new);
    }

    private static Check only(DoctorReport r, String name) {
        return r.check(name);
    }

    @Test
    void unknownCommandSaysSoListsTheCommandsAndExitsTwo() {
        Run r = run(ENV, "doctr");
        assertEquals(2, r.code(), r.err());
        assertTrue(r.err().contains("gpusockets: unknown command 'doctr'"), r.err());
        assertTrue(r.err().contains("Commands: backend,") && r.err().contains("doctor"), r.err());
        assertTrue(!r.err().contains("worker"), "hidden commands stay hidden: " + r.err());

        Run sub = run(ENV, "doctor", "patient");
        assertEquals(2, sub.code(), sub.err());
        assertTrue(sub.err().contains("gpusockets doctor: unknown command 'patient'"), sub.err());
        assertTrue(sub.err().contains("Commands: backend, guest"), sub.err());
    }

    @Test
    void healthyBackendHostPassesWithExitZero(@TempDir Path dir) throws Exception {
        Path key = secret(dir, "psk", "rw-------");
        Path tenants = dir.resolve("tenants.conf");
        Files.writeString(tenants, "[tenant alice]\nmatch = psk:alice\npsk-file = alice.key\nmemory = 1GiB\n");
        secret(dir, "alice.key", "rw-------");
        Run r = run(ENV, backend(dir, "--psk-file", key.toString(), "--tenants", tenants.toString(),
                "--admin-socket", dir.resolve("admin.sock").toString()));
        assertEquals(0, r.code(), r.out() + r.err());
        assertTrue(r.out().contains("[ ok ] driver: the emulated device"), r.out());
        assertTrue(r.out().contains("[ ok ] GPUs: 1 emulated device(s)"), r.out());
        assertTrue(r.out().contains("[ ok ] listener tcp://127.0.0.1:0: can listen"), r.out());
        assertTrue(r.out().contains("[ ok ] PSK file (--psk-file): " + key), r.out());
        assertTrue(r.out().contains("[ ok ] tenants file (--tenants): " + tenants + ": 1 tenant(s) [alice]"), r.out());
        assertTrue(r.out().contains("[ ok ] tenant key alice.key"), r.out());
        assertTrue(!r.out().contains("[FAIL]") && !r.out().contains("[warn]"), r.out());
        assertTrue(r.out().endsWith("all 8 checks passed\n"), r.out());
    }

    @Test
    void worldReadablePskFileFails(@TempDir Path dir) throws Exception {
        Path key = secret(dir, "psk", "rw-r--r--");
        DoctorReport r = DoctorCommand.backend(ENV, args(backend(dir, "--psk-file", key.toString())), "test");
        Check c = only(r, "PSK file (--psk-file)");
        assertEquals(Check.Status.FAIL, c.status(), c.toString());
        assertTrue(c.found().contains("mode 0644") && c.found().contains("readable by every user"), c.found());
        assertEquals("chmod 600 " + key + " (and give it a new key: anyone could have read this one)", c.advice());
        assertEquals(1, r.exitCode());
    }

    @Test
    void missingPskFileFails(@TempDir Path dir) {
        Path key = dir.resolve("no-such-psk");
        DoctorReport r = DoctorCommand.backend(ENV, args(backend(dir, "--psk-file", key.toString())), "test");
        Check c = only(r, "PSK file (--psk-file)");
        assertEquals(Check.Status.FAIL, c.status(), c.toString());
        assertEquals(key + " does not exist", c.found());
        assertTrue(c.advice().contains("(umask 077; head -c 32 /dev/urandom | base64 > " + key + ")"), c.advice());
        assertEquals(1, r.exitCode());
    }

    @Test
    void listenerPortAlreadyBoundFailsNamingTheProcess(@TempDir Path dir) throws Exception {
        try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            String uri = "tcp://127.0.0.1:" + taken.getLocalPort();
            DoctorReport r = DoctorCommand.backend(ENV, new String[] {"--device", "emulated", "--listen", uri}, "test");
            Check c = only(r, "listener " + uri);
            assertEquals(Check.Status.FAIL, c.status(), c.toString());
            assertTrue(c.found().startsWith("port " + taken.getLocalPort() + " is in use by pid " + ProcessHandle.current().pid() + " ("),
                    c.found());
            assertEquals("stop that process, or choose another address in --listen", c.advice());
            assertEquals(1, r.exitCode());
        }
    }

    @Test
    void tenantsFileWithASyntaxErrorFailsNamingTheLine(@TempDir Path dir) throws Exception {
        Path tenants = dir.resolve("tenants.conf");
        Files.writeString(tenants, "[tenant alice]\nmatch = uid:1000\nmemory 2GiB\n");
        DoctorReport r = DoctorCommand.backend(ENV, args(backend(dir, "--tenants", tenants.toString())), "test");
        Check c = only(r, "tenants file (--tenants)");
        assertEquals(Check.Status.FAIL, c.status(), c.toString());
        assertTrue(c.found().startsWith("does not parse: " + tenants + ":3: "), c.found());
        assertTrue(c.advice().startsWith("fix that line"), c.advice());
        assertEquals(1, r.exitCode());
    }

    @Test
    void aLibcudaThatIsNotOursFirstInLdLibraryPathFails(@TempDir Path dir) throws Exception {
        // a real ELF shared object for this machine (the loader would take it), but not GPUsockets'
        Path fake = Files.createDirectories(dir.resolve("fake"));
        Files.copy(Path.of(System.getProperty("java.home"), "lib", "libjava.so"), fake.resolve("libcuda.so.1"),
                StandardCopyOption.REPLACE_EXISTING);
        Path notElf = Files.createDirectories(dir.resolve("text"));
        Files.writeString(notElf.resolve("libcuda.so.1"), "not a library\n");
        Map<String, String> env = Map.of("LD_LIBRARY_PATH", notElf + ":" + fake, "PATH", "/usr/bin:/bin");
        DoctorReport r = DoctorCommand.guest(env, Map.of(), "test");
        Check c = only(r, "libcuda.so.1 a program loads");
        assertEquals(Check.Status.FAIL, c.status(), c.toString());
        assertTrue(c.found().startsWith(fake.resolve("libcuda.so.1") + " (from LD_LIBRARY_PATH entry " + fake + "): not GPUsockets'"),
                c.found());
        assertTrue(c.found().contains("passed over: " + notElf.resolve("libcuda.so.1") + " (not an ELF file)"), c.found());
        assertTrue(c.advice().startsWith("put the frontend's lib directory first: export LD_LIBRARY_PATH=PREFIX/lib:$LD_LIBRARY_PATH"),
                c.advice());
        assertEquals(1, r.exitCode());
    }

    @Test
    void jsonCarriesEveryCheckAndTheVerdict(@TempDir Path dir) throws Exception {
        Path key = secret(dir, "psk", "rw-rw-rw-");
        Run r = run(ENV, backend(dir, "--psk-file", key.toString(), "--json"));
        assertEquals(1, r.code(), r.out() + r.err());
        @SuppressWarnings("unchecked")
        Map<String, Object> json = (Map<String, Object>) StatusJson.parse(r.out().strip());
        assertEquals("backend", json.get("role"));
        assertEquals(false, json.get("ok"));
        assertEquals(1L, ((Number) json.get("failures")).longValue());
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> checks = (List<Map<String, Object>>) json.get("checks");
        Map<String, Object> psk = checks.stream().filter(c -> c.get("name").equals("PSK file (--psk-file)")).findFirst().orElseThrow();
        assertEquals("fail", psk.get("status"));
        assertTrue(String.valueOf(psk.get("advice")).startsWith("chmod 600 "), psk.toString());
    }

    @Test
    void nativeDeviceWithoutADriverFailsWhereAutoOnlyWarns(@TempDir Path dir) {
        Map<String, String> env = Map.of("LD_LIBRARY_PATH", dir.toString());
        String missing = dir.resolve("libcuda.so.1").toString();
        DoctorReport auto = DoctorCommand.backend(env, new String[] {"--libcuda", missing, "--listen", "tcp://127.0.0.1:0"}, "test");
        assertEquals(Check.Status.WARN, auto.check("NVIDIA driver").status(), auto.text());
        assertTrue(auto.check("NVIDIA driver").found().contains("would serve the emulated device"), auto.text());
        DoctorReport strict = DoctorCommand.backend(env, new String[] {"--device", "native", "--libcuda", missing,
                "--listen", "tcp://127.0.0.1:0"}, "test");
        assertEquals(Check.Status.FAIL, strict.check("NVIDIA driver").status(), strict.text());
        assertTrue(strict.check("NVIDIA driver").advice().startsWith("install the NVIDIA driver"), strict.text());
    }

    @Test
    void plainDoctorChecksAGuestWhenGpusocketsServerIsSet() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        Run r = run(Map.of("GPUSOCKETS_SERVER", "tcp://127.0.0.1:" + port, "PATH", "/usr/bin:/bin"), "doctor", "--json");
        assertEquals(1, r.code(), r.out() + r.err());
        @SuppressWarnings("unchecked")
        Map<String, Object> json = (Map<String, Object>) StatusJson.parse(r.out().strip());
        assertEquals("guest", json.get("role"));
        assertEquals("GPUSOCKETS_SERVER is set in the environment", json.get("why"));
    }

    @Test
    void protocolVersionMismatchNamesBothVersions() throws Exception {
        try (Listener l = Transports.listen(TransportUri.parse("tcp://127.0.0.1:0"))) {
            Thread server = Thread.ofVirtual().start(() -> {
                try (Connection c = l.accept()) {
                    new FrameChannel(c).send(Opcodes.SERVER_HELLO, 0, 0, 0,
                            new Handshake.ServerHello(7, 9, Handshake.AUTH_NONE, new byte[Handshake.NONCE_BYTES]).encode());
                    Thread.sleep(2000);
                } catch (Exception ignored) {
                    // the doctor hung up
                }
            });
            String uri = l.address().toString();
            DoctorReport r = DoctorCommand.guest(Map.of("GPUSOCKETS_SERVER", uri, "PATH", "/usr/bin:/bin"), Map.of(), "test");
            Check c = r.check("backend " + uri + " protocol");
            assertEquals(Check.Status.FAIL, c.status(), c.toString());
            assertEquals("the backend speaks protocol version 7..9, this frontend speaks " + Handshake.PROTOCOL_VERSION, c.found());
            assertTrue(c.advice().startsWith("install the same GPUsockets release on both sides"), c.advice());
            server.interrupt();
        }
    }

    @Test
    void expiredTlsCertificateFails(@TempDir Path dir) throws Exception {
        Path store = dir.resolve("server.p12");
        Path password = secret(dir, "password", "rw-------");
        Process keytool = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "keytool").toString(),
                "-genkeypair", "-storetype", "PKCS12", "-keyalg", "EC", "-alias", "gpusockets", "-dname", "CN=old",
                "-startdate", "-3d", "-validity", "1", "-keystore", store.toString(),
                "-storepass", "correct horse battery staple").redirectErrorStream(true).start();
        String log = new String(keytool.getInputStream().readAllBytes());
        assertEquals(0, keytool.waitFor(), log);
        Files.setPosixFilePermissions(store, PosixFilePermissions.fromString("rw-------"));
        DoctorReport r = DoctorCommand.backend(ENV, new String[] {"--device", "emulated", "--listen", "tls://127.0.0.1:0",
                "--tls-key-store", store.toString(), "--tls-key-store-password-file", password.toString()}, "test");
        assertEquals(Check.Status.OK, r.check("TLS key store (--tls-key-store)").status(), r.text());
        Check c = r.check("TLS server certificate");
        assertEquals(Check.Status.FAIL, c.status(), r.text());
        assertTrue(c.found().startsWith("alias gpusockets, CN=old expired "), c.found());
        assertTrue(c.advice().startsWith("make a new certificate"), c.advice());
    }

    private static String[] args(String[] commandLine) {
        return java.util.Arrays.copyOfRange(commandLine, 2, commandLine.length);
    }
}
