package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
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
 * three programs go on at the target and end with their data intact.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class DrainToTest extends CheckpointTestSupport {
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
