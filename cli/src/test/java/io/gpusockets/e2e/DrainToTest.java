package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code gpusockets backend --drain-to URI} (issue 23): a backend process in the default isolation mode (process)
 * serving three running programs ({@link MigrationTest.Program}: launches dirtying a changing subset of their
 * allocations, checked against a CPU model) gets SIGTERM; it migrates all three to the target backend process
 * (started with {@code --accept-migrations}, over unix, proven by the shared uid), says so, and exits 0; the
 * three programs go on at the target and end with their data intact. And {@link BackendServer#drainTo} in this
 * process, isolation mode context: what cannot move is reported with why, new sessions are refused.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class DrainToTest extends CheckpointTestSupport {
    /**
     * {@link BackendServer#drainTo} in isolation mode context, in this process: the two resumable running programs move
     * and finish at B; a session granted no resume (A's grace 0 when it connected) is reported as not moved with why
     * and runs on at A; a new session is refused from the drain on.
     */
    @Test
    void drainToMovesTheSessionsThatCanMoveAndReportsTheOthersAndRefusesNewOnes() throws Exception {
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer serverA = server(a); BackendServer serverB = server(b)) {
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            serverB.acceptMigrations(true);
            serverA.resumeGrace(Duration.ZERO); // the first session is granted no resume
            try (RemoteCudaDriver stays = RemoteCudaDriver.connect(unixA)) {
                new MigrationTest.Program(stays);
                long staysId = onlySession(serverA);
                serverA.resumeGrace(Duration.ofSeconds(60));
                try (RemoteCudaDriver d1 = RemoteCudaDriver.connect(unixA); RemoteCudaDriver d2 = RemoteCudaDriver.connect(unixA)) {
                    List<MigrationTest.Program> programs = List.of(new MigrationTest.Program(d1), new MigrationTest.Program(d2));
                    for (MigrationTest.Program p : programs) {
                        p.start();
                        p.runs(2);
                    }
                    BackendServer.Drain drain = serverA.drainTo(unixB, Duration.ofSeconds(120), 2);
                    assertEquals(2, drain.moved().size(), drain.toString());
                    assertEquals(java.util.Set.of(staysId), drain.notMoved().keySet(), drain.toString());
                    assertTrue(drain.notMoved().get(staysId).contains("not granted resume"), drain.toString());
                    java.io.IOException refused = assertThrows(java.io.IOException.class, () -> RemoteCudaDriver.connect(unixA));
                    assertTrue(refused.getMessage().contains("shutting down"), refused.getMessage());
                    for (MigrationTest.Program p : programs) {
                        p.runs(3);
                        assertEquals(unixB, p.d.backendUri());
                        p.finish();
                    }
                    assertEquals(unixA, stays.backendUri(), "the session that could not move runs on at A");
                }
            }
        } finally {
            a.close();
            b.close();
        }
    }

    @Test
    void sigtermMovesEveryRunningSessionToTheTargetAndTheSourceExitsZero() throws Exception {
        try (BackendProcess b = BackendProcess.start("--resume-grace", "60", "--accept-migrations",
                "--idle-workers", "1", "--max-workers", "4")) {
            BackendProcess a = BackendProcess.start("--resume-grace", "60", "--idle-workers", "1", "--max-workers", "4",
                    "--drain-to", b.unix(), "--drain-timeout", "120");
            List<RemoteCudaDriver> drivers = new ArrayList<>();
            List<MigrationTest.Program> programs = new ArrayList<>();
            try {
                for (int i = 0; i < 3; i++) {
                    RemoteCudaDriver d = RemoteCudaDriver.connect(a.unix());
                    drivers.add(d);
                    programs.add(new MigrationTest.Program(d));
                }
                for (MigrationTest.Program p : programs) {
                    p.start();
                }
                for (MigrationTest.Program p : programs) {
                    p.runs(2);
                }
                a.handle().destroy(); // SIGTERM
                assertTrue(a.awaitExit(240), "the source stops once its sessions moved");
                assertEquals(0, a.exitValue(), () -> "exit status; A:\n" + String.join("\n", a.output()));
                String log = String.join("\n", a.output());
                assertTrue(log.contains("SIGTERM: moving 3 session(s) to " + b.unix()), log);
                assertTrue(log.contains("drained: 3 session(s) moved to " + b.unix() + ", 0 not moved"), log);
                for (int i = 0; i < 3; i++) {
                    programs.get(i).runs(3); // at B now
                    assertEquals(b.unix(), drivers.get(i).backendUri(), "program " + i + " follows its session to B");
                }
                for (MigrationTest.Program p : programs) {
                    p.finish();
                }
            } finally {
                for (RemoteCudaDriver d : drivers) {
                    d.close();
                }
                a.close();
            }
        }
    }
}
