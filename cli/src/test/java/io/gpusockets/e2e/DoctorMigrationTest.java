package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.status.AdminSocket;
import io.gpusockets.backend.status.StatusJson;
import io.gpusockets.cli.doctor.Check;
import io.gpusockets.cli.doctor.MigrationChecks;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import picocli.CommandLine;

/**
 * {@code gpusockets doctor migration} ({@link MigrationChecks}, issue 23 item 4) against in-process backends on emulated
 * devices: a target that accepts migrations passes each check (reachable, accepts, migratable sessions, tenants,
 * memory: from a client session there, or from its admin socket's status), and the command prints them; a target that
 * does not accept them, one that wants a key not given, and an address nobody listens on each fail with their fix;
 * tenants the target lacks, sessions without address-stable memory and more memory than the target has free are
 * each found (the statuses given by the test). The probe leaves nothing at the target.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class DoctorMigrationTest extends CheckpointTestSupport {
    private static final Duration TIMEOUT = Duration.ofSeconds(5);

    private static Check named(List<Check> checks, String name) {
        return checks.stream().filter(c -> c.name().equals(name)).findFirst()
                .orElseThrow(() -> new AssertionError("no check " + name + " in " + checks));
    }

    private static Object status(BackendServer s) {
        return StatusJson.parse(StatusJson.write(s.snapshot()));
    }

    /** Statuses by admin socket path: "source" and "target" name the two servers. */
    private static MigrationChecks.StatusSource statuses(BackendServer source, BackendServer target) {
        return p -> switch (p.toString()) {
            case "source" -> status(source);
            case "target" -> status(target);
            default -> throw new IOException("no admin socket at " + p);
        };
    }

    @Test
    void aTargetThatAcceptsMigrationsPassesEveryCheck() throws Exception {
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer source = server(a); BackendServer target = server(b)) {
            String unixA = source.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = target.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            target.acceptMigrations(true);
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(unixA)) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                cu.alloc(3 << 20);
                long id = onlySession(source);
                List<Check> checks = new MigrationChecks(unixB, null, Path.of("source"), null, null, TIMEOUT,
                        statuses(source, target)).run();
                assertEquals(Check.Status.OK, named(checks, "migration target " + unixB + " reachable").status(), checks.toString());
                Check accepts = named(checks, "migration target " + unixB + " accepts migrations");
                assertEquals(Check.Status.OK, accepts.status(), checks.toString());
                assertTrue(accepts.found().contains("proven by this user's uid"), accepts.found());
                assertEquals(Check.Status.OK, named(checks, "migratable sessions").status(), checks.toString());
                // without the target's admin socket the tenants cannot be compared: said, with what must be there
                Check tenants = named(checks, "migration tenants");
                assertEquals(Check.Status.WARN, tenants.status(), checks.toString());
                assertTrue(tenants.advice().contains("--target-socket") && tenants.found().contains("[default]"), tenants.toString());
                Check memory = named(checks, "migration memory");
                assertEquals(Check.Status.OK, memory.status(), checks.toString());
                assertTrue(memory.found().contains("cuMemGetInfo in a client session"), memory.found());
                assertTrue(memory.found().startsWith("the sessions hold 3.0 MiB"), memory.found());

                checks = new MigrationChecks(unixB, null, Path.of("source"), id, Path.of("target"), TIMEOUT,
                        statuses(source, target)).run();
                assertEquals(Check.Status.OK, named(checks, "migration tenants").status(), checks.toString());
                memory = named(checks, "migration memory");
                assertEquals(Check.Status.OK, memory.status(), checks.toString());
                assertTrue(memory.found().contains("the target's status"), memory.found());
                assertTrue(checks.stream().noneMatch(c -> c.status() != Check.Status.OK), checks.toString());

                checks = new MigrationChecks(unixB, null, Path.of("source"), id + 1, null, TIMEOUT,
                        statuses(source, target)).run();
                assertEquals(Check.Status.FAIL, named(checks, "migration session " + (id + 1)).status(), checks.toString());
            }
            assertTrue(target.sessions().isEmpty(), "the probes left no session at the target");
        } finally {
            a.close();
            b.close();
        }
    }

    @Test
    void theCommandPrintsTheChecksFromTheSourcesAdminSocket() throws Exception {
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer source = server(a); BackendServer target = server(b);
             AdminSocket admin = AdminSocket.open(dir.resolve("admin.sock"), null, source::snapshot)) {
            String unixA = source.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = target.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            target.acceptMigrations(true);
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(unixA)) {
                new Cuda(d).primaryContext();
                StringWriter out = new StringWriter();
                int rc = new CommandLine(new io.gpusockets.cli.Main()).setOut(new PrintWriter(out)).execute(
                        "doctor", "migration", "--to", unixB, "--socket", dir.resolve("admin.sock").toString());
                String text = out.toString();
                assertEquals(0, rc, text);
                assertTrue(text.startsWith("gpusockets doctor: migration checks (as asked: gpusockets doctor migration --to "
                        + unixB + ")"), text);
                assertTrue(text.contains("[ ok ] migration target " + unixB + " accepts migrations: yes"), text);
                assertTrue(text.contains("[ ok ] migratable sessions: 1 session(s), each with address-stable memory"), text);
                assertTrue(text.contains("[warn] migration tenants: "), text);
                assertTrue(text.contains("[ ok ] migration memory: the sessions hold 0.0 MiB"), text);
            }
        } finally {
            a.close();
            b.close();
        }
    }

    @Test
    void aTargetThatRefusesOrIsNotThereFailsWithItsFix() throws Exception {
        byte[] psk = "doctor migration key".getBytes(StandardCharsets.UTF_8);
        Path key = dir.resolve("psk");
        Files.write(key, psk);
        EmulatedDevice b = new EmulatedDevice();
        io.gpusockets.backend.session.BackendSettings s = io.gpusockets.backend.session.BackendSettings.fromSystemProperties();
        s = s.withServer(psk, s.allowedUids(), s.allowedCids(), s.handshakeMillis(), s.warmContexts());
        try (BackendServer target = new BackendServer(io.gpusockets.backend.session.DriverHost.initialise(b, "emulated"), s)) {
            String unixB = target.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            String tcpB = target.listen(TransportUri.parse("tcp://127.0.0.1:0")).toString();
            MigrationChecks.StatusSource none = p -> {
                throw new IOException("not asked");
            };
            // the target holds a key: without it even its own uid is refused at the handshake's authentication
            List<Check> checks = new MigrationChecks(unixB, null, null, null, null, TIMEOUT, none).run();
            Check accepts = named(checks, "migration target " + unixB + " accepts migrations");
            assertEquals(Check.Status.FAIL, accepts.status(), checks.toString());
            assertTrue(accepts.found().contains("authentication failed"), accepts.found());
            assertTrue(accepts.advice().contains("same --psk-file"), accepts.advice());
            checks = new MigrationChecks(unixB, key, null, null, null, TIMEOUT, none).run();
            accepts = named(checks, "migration target " + unixB + " accepts migrations");
            assertEquals(Check.Status.FAIL, accepts.status(), checks.toString());
            assertTrue(accepts.found().contains("does not accept migrations"), accepts.found());
            assertTrue(accepts.advice().contains("--accept-migrations"), accepts.advice());
            // nothing to compare without the source's admin socket: said
            assertEquals(Check.Status.WARN, named(checks, "migration tenants").status(), checks.toString());
            assertEquals(Check.Status.WARN, named(checks, "migration memory").status(), checks.toString());

            target.acceptMigrations(true);
            checks = new MigrationChecks(tcpB, null, null, null, null, TIMEOUT, none).run();
            accepts = named(checks, "migration target " + tcpB + " accepts migrations");
            assertEquals(Check.Status.FAIL, accepts.status(), checks.toString());
            assertTrue(accepts.advice().contains("same --psk-file"), accepts.advice());
            checks = new MigrationChecks(tcpB, key, null, null, null, TIMEOUT, none).run();
            accepts = named(checks, "migration target " + tcpB + " accepts migrations");
            assertEquals(Check.Status.OK, accepts.status(), checks.toString());
            assertTrue(accepts.found().contains("proven by the pre-shared key"), accepts.found());

            String nobody = "unix://" + dir.resolve("nobody.sock");
            checks = new MigrationChecks(nobody, null, null, null, null, TIMEOUT, none).run();
            Check reach = named(checks, "migration target " + nobody + " reachable");
            assertEquals(Check.Status.FAIL, reach.status(), checks.toString());
            assertTrue(reach.advice().contains("--accept-migrations"), reach.advice());
            assertTrue(target.sessions().isEmpty());
        } finally {
            b.close();
        }
    }

    @Test
    void missingTenantsSessionsWithoutStableMemoryAndTooLittleFreeMemoryAreFound() throws Exception {
        EmulatedDevice b = new EmulatedDevice();
        try (BackendServer target = server(b)) {
            String unixB = target.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            target.acceptMigrations(true);
            String source = "{\"sessions\":[{\"id\":5,\"tenant\":\"alice\",\"memoryBytes\":" + (6L << 30)
                    + ",\"stableAddresses\":true},{\"id\":6,\"tenant\":\"bob\",\"memoryBytes\":" + (3L << 30)
                    + ",\"stableAddresses\":false},{\"id\":7,\"tenant\":\"default\",\"memoryBytes\":0,\"stableAddresses\":true}]}";
            String there = "{\"tenants\":[{\"name\":\"alice\"}],\"devices\":[{\"index\":0,\"memoryUsedBytes\":" + (1L << 30)
                    + ",\"memoryTotalBytes\":" + (8L << 30) + "},{\"index\":1,\"memoryUsedBytes\":" + (7L << 30)
                    + ",\"memoryTotalBytes\":" + (8L << 30) + "}]}";
            MigrationChecks.StatusSource statuses = p -> StatusJson.parse(p.toString().equals("source") ? source : there);
            List<Check> checks = new MigrationChecks(unixB, null, Path.of("source"), null, Path.of("target"), TIMEOUT,
                    statuses).run();
            Check stable = named(checks, "migratable sessions");
            assertEquals(Check.Status.WARN, stable.status(), checks.toString());
            assertTrue(stable.found().contains("[6]"), stable.found());
            Check tenants = named(checks, "migration tenants");
            assertEquals(Check.Status.FAIL, tenants.status(), checks.toString());
            assertTrue(tenants.found().contains("tenant(s) [bob]"), tenants.found());
            assertTrue(tenants.advice().contains("--tenants file"), tenants.advice());
            Check memory = named(checks, "migration memory");
            assertEquals(Check.Status.FAIL, memory.status(), checks.toString());
            assertEquals("the sessions hold 9216.0 MiB; the target has 8192.0 MiB free (device 0 7168.0 MiB, device 1"
                    + " 1024.0 MiB; the target's status)", memory.found());
            // one session that fits
            checks = new MigrationChecks(unixB, null, Path.of("source"), 5L, Path.of("target"), TIMEOUT, statuses).run();
            assertEquals(Check.Status.OK, named(checks, "migration memory").status(), checks.toString());
            assertEquals(Check.Status.OK, named(checks, "migration tenants").status(), checks.toString());
            assertEquals(Check.Status.OK, named(checks, "migratable sessions").status(), checks.toString());
        } finally {
            b.close();
        }
    }
}
