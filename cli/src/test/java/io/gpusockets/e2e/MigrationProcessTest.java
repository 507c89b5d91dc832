package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.isolation.Workers;
import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.server.Migration;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Migration in isolation mode process (issue 23; {@link Workers#migrate}): the session's worker process runs the
 * source's side and connects to the target itself, and a target in mode process has an idle worker restore what it
 * received. The program of {@link MigrationTest} (launches dirtying a changing subset of its allocations, checked
 * against its CPU model at the end) migrates A to B and back, both in mode process, and between a mode-process and a
 * mode-context backend both ways; a worker killed during its migration fails the migration with a message and its
 * program fails cleanly (its session died with the worker: its frontend's resume is refused until the grace period
 * ends, then its calls fail with CUDA_ERROR_DEVICE_UNAVAILABLE), without a hang; one that stops answering fails it
 * after the quiet timeout and, when it goes on, still moves the session.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class MigrationProcessTest extends CheckpointTestSupport {
    /** A backend on {@code device} with {@code psk}, a resume grace of 60 s and, unless null, these workers. */
    private static BackendServer server(EmulatedDevice device, byte[] psk, Workers workers) {
        BackendSettings s = BackendSettings.fromSystemProperties();
        s = s.withServer(psk, s.allowedUids(), s.allowedCids(), s.handshakeMillis(), s.warmContexts());
        BackendServer server = new BackendServer(DriverHost.initialise(device, "emulated"), s);
        server.resumeGrace(Duration.ofSeconds(60));
        if (workers != null) {
            server.handSessionsTo(workers);
        }
        server.acceptMigrations(true);
        return server;
    }

    /** Worker processes on the emulated device (this JVM's classpath), one kept idle. */
    static Workers workers() throws IOException {
        return new Workers(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(), "--enable-native-access=ALL-UNNAMED",
                "-Xmx256m", "-Dgpusockets.backend.stableAddresses=true", "-Dgpusockets.worker.aotCacheDir=off",
                "-cp", System.getProperty("java.class.path"), io.gpusockets.cli.Main.class.getName(), "worker",
                "--device", "emulated"), 1, 3);
    }

    private static void checkResult(Migration.Result r, long id, String target) {
        assertEquals(id, r.sessionId());
        assertEquals(target, r.target());
        assertTrue(r.rounds().size() >= 2 && r.rounds().getLast().drained(), "pre-copy rounds and a final one: " + r);
        assertTrue(r.bytes() >= (long) (MigrationTest.DIRTIED + 1) * MigrationTest.ALLOC, "the memory at least once: " + r);
        assertTrue(r.downtimeNanos() > 0 && r.restoreNanos() > 0, r.toString());
    }

    /** Waits (bounded by the test's timeout) until {@code s} lists no session: the moved one's worker has ended. */
    private static void awaitNoSessions(BackendServer s) throws InterruptedException {
        while (!s.sessions().isEmpty()) {
            Thread.sleep(10);
        }
    }

    @Test
    void aRunningProgramMigratesBetweenTwoProcessModeBackendsAndBackWithItsDataIntact() throws Exception {
        byte[] psk = "migration test key".getBytes(StandardCharsets.UTF_8);
        Path key = dir.resolve("psk");
        Files.write(key, psk);
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer serverA = server(a, psk, workers()); BackendServer serverB = server(b, psk, workers())) {
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            String tcpB = serverB.listen(TransportUri.parse("tcp://127.0.0.1:0")).toString();
            serverB.migrationBufferBytes(MigrationTest.ALLOC); // most chunks spill to the temp file
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(FrontendConfig.fromEnvironment(Map.of(
                    FrontendConfig.SERVER_ENV, unixA, FrontendConfig.PSK_FILE_ENV, key.toString())))) {
                MigrationTest.Program p = new MigrationTest.Program(d);
                long id = onlySession(serverA);
                p.start();
                p.runs(2);
                List<String> seen = new CopyOnWriteArrayList<>();
                Migration.Result ab = serverA.migrate(id, tcpB, unixB, (stage, done, total) -> serverA.snapshot().sessions()
                        .stream().filter(x -> x.id() == id).findFirst().ifPresent(x -> seen.add(stage + "=" + x.migrating())));
                checkResult(ab, id, tcpB);
                assertTrue(seen.stream().anyMatch(x -> x.startsWith("pre-copy")), "the worker's progress: " + seen);
                assertTrue(seen.stream().allMatch(x -> x.endsWith("=true")), "status shows it migrating: " + seen);
                p.runs(3); // in B's worker now
                assertEquals(unixB, d.backendUri(), "the frontend follows the session to B");
                assertEquals(1, serverB.resumesAccepted());
                assertEquals(1, serverB.snapshot().operations().restores(), "B's worker restored it");
                awaitNoSessions(serverA);
                Migration.Result ba = serverB.migrate(id, unixA, null, null);
                checkResult(ba, id, unixA);
                p.runs(3);
                assertEquals(unixA, d.backendUri(), "and back to A (no MOVED left there from the first move)");
                assertEquals(1, serverA.migrations()[0]);
                assertEquals(1, serverB.migrations()[0]);
                assertEquals(ab.bytes(), serverA.migrationBytes());
                p.finish();
                awaitNoSessions(serverB);
            }
        } finally {
            a.close();
            b.close();
        }
    }

    @Test
    void aProgramMigratesFromAProcessModeBackendToAContextModeOneAndBack() throws Exception {
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer serverA = server(a, null, workers()); BackendServer serverB = server(b, null, null)) {
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(unixA)) {
                MigrationTest.Program p = new MigrationTest.Program(d);
                long id = onlySession(serverA);
                p.start();
                p.runs(2);
                checkResult(serverA.migrate(id, unixB, null, null), id, unixB);
                p.runs(3);
                assertEquals(unixB, d.backendUri());
                assertEquals(id, onlySession(serverB), "served in B's own process");
                awaitNoSessions(serverA);
                checkResult(serverB.migrate(id, unixA, null, null), id, unixA); // into A's workers
                p.runs(3);
                assertEquals(unixA, d.backendUri());
                p.finish();
            }
        } finally {
            a.close();
            b.close();
        }
    }

    /** kill -SIGNAL for each of {@code pids}. */
    private static void signal(String signal, List<Long> pids) throws Exception {
        for (long pid : pids) {
            Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(pid)).inheritIO().start();
            assertEquals(0, kill.waitFor(), "kill -" + signal + " " + pid);
        }
    }

    /**
     * A worker that stops answering during its migration (SIGSTOP at the first pre-copy round) fails it after the quiet
     * timeout with a message; when it goes on (SIGCONT) it finishes the migration, the session moves to B after all
     * (the front takes the late answer: its token answers MOVED) and the program ends there with its data intact.
     */
    @Test
    void aMigrationWhoseWorkerStopsAnsweringFailsAfterTheQuietTimeoutAndALateSuccessStillMovesTheSession() throws Exception {
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        Workers workersA = workers();
        workersA.quietTimeout(Duration.ofSeconds(5)); // the first round comes well within it, even on a loaded machine
        try (BackendServer serverA = server(a, null, workersA); BackendServer serverB = server(b, null, null)) {
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(unixA)) {
                MigrationTest.Program p = new MigrationTest.Program(d);
                long id = onlySession(serverA);
                p.start();
                p.runs(2);
                AtomicBoolean stopped = new AtomicBoolean();
                List<Long> pids = workersA.pids();
                IOException e;
                try {
                    e = assertThrows(IOException.class, () -> serverA.migrate(id, unixB, null, (stage, done, total) -> {
                        if (stopped.compareAndSet(false, true)) {
                            try {
                                signal("STOP", pids);
                            } catch (Exception x) {
                                throw new IllegalStateException(x);
                            }
                        }
                    }));
                } finally {
                    signal("CONT", pids);
                }
                assertTrue(stopped.get());
                assertTrue(e.getMessage().contains("sent nothing for 5 s"), e.getMessage());
                assertEquals(1, serverA.migrations()[2], "counted as failed");
                while (!unixB.equals(d.backendUri()) && p.failed.get() == null) {
                    Thread.sleep(10); // the worker goes on and the session moves after all (bounded by the test's timeout)
                }
                p.runs(3);
                assertEquals(unixB, d.backendUri());
                p.finish();
                awaitNoSessions(serverA);
            }
        } finally {
            a.close();
            b.close();
        }
    }

    @Test
    void aWorkerKilledDuringItsMigrationFailsItWithAMessageAndItsProgramFailsCleanly() throws Exception {
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        Workers workersA = workers();
        try (BackendServer serverA = server(a, null, workersA); BackendServer serverB = server(b, null, null)) {
            // the frontend retries a refused resume until its grace ends: 60 s would be a long wait for nothing
            serverA.resumeGrace(Duration.ofSeconds(3));
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(unixA)) {
                MigrationTest.Program p = new MigrationTest.Program(d);
                long id = onlySession(serverA);
                p.start();
                p.runs(2);
                AtomicBoolean killed = new AtomicBoolean();
                IOException e = assertThrows(IOException.class, () -> serverA.migrate(id, unixB, null, (stage, done, total) -> {
                    if (killed.compareAndSet(false, true)) { // at the first pre-copy round: every worker of A, kill -9
                        workersA.pids().forEach(pid -> ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly));
                    }
                }));
                assertTrue(killed.get(), "the migration reported progress before it failed");
                assertTrue(e.getMessage().contains("the migration of session " + id) && e.getMessage().contains("is gone"),
                        e.getMessage());
                assertEquals(1, serverA.migrations()[2], "counted as failed");
                assertFalse(serverA.migrating(id));
                p.thread.join(); // the program's next call fails once its grace ends: its session died with its worker
                assertNotNull(p.failed.get(), "the program failed rather than hang");
                assertTrue(serverB.sessions().isEmpty(), "nothing reached B");
                assertEquals(0, serverB.snapshot().operations().restores());
            }
        } finally {
            a.close();
            b.close();
        }
    }
}
