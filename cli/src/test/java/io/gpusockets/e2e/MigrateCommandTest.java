package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.status.StatusJson;
import io.gpusockets.frontend.RemoteCudaDriver;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code gpusockets migrate} between two backend processes ({@code gpusockets backend --isolation context}, emulated
 * device, address-stable memory): a Java program in this JVM ({@link MigrationTest.Program}) runs on backend A while
 * the CLI asks A, over its admin socket, to move its session to B (started with {@code --accept-migrations}) over
 * unix (proven by the processes' shared uid). The command prints progress and a readable summary on stderr and the
 * JSON result (rounds, bytes, the downtime split) on stdout, exits 0, and the program goes on at B with its data
 * intact; A's metrics count it as done with its bytes. Then a migration from B back to A, which does not accept
 * migrations, exits 1 with the target's reason, the program runs on at B, and B's metrics count it as refused.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class MigrateCommandTest {
    private String wasResume;

    @BeforeEach
    void on() {
        wasResume = System.setProperty("gpusockets.resume", "true");
    }

    @AfterEach
    void off() {
        if (wasResume == null) {
            System.clearProperty("gpusockets.resume");
        } else {
            System.setProperty("gpusockets.resume", wasResume);
        }
    }

    @Test
    @SuppressWarnings("unchecked")
    void theCliMigratesARunningSessionToABackendThatAcceptsAndReportsARefusalWithItsReason() throws Exception {
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "context", "--stable-addresses",
                "--resume-grace", "60");
             BackendProcess b = BackendProcess.startWithStatus("--isolation", "context", "--stable-addresses",
                     "--resume-grace", "60", "--accept-migrations", "--migration-buffer", "0");
             RemoteCudaDriver d = RemoteCudaDriver.connect(a.unix())) {
            MigrationTest.Program p = new MigrationTest.Program(d);
            List<Map<String, Object>> sessions = StatusTest.list(StatusTest.statusJson(a), "sessions");
            assertEquals(1, sessions.size(), () -> "sessions: " + sessions);
            assertEquals("serving", sessions.getFirst().get("state"));
            String id = String.valueOf(sessions.getFirst().get("id"));
            p.start();
            p.runs(2);

            CheckpointNativeTest.Result moved = CheckpointNativeTest.cli("migrate", id, "--to", b.unix(),
                    "--socket", a.adminSocket().toString());
            assertEquals(0, moved.exit(), () -> "migrate: " + moved.out() + moved.err() + "\nA:\n" + String.join("\n",
                    a.output()) + "\nB:\n" + String.join("\n", b.output()));
            Map<String, Object> r = (Map<String, Object>) StatusJson.parse(moved.out().strip());
            assertEquals(Long.parseLong(id), r.get("session"));
            assertEquals(b.unix(), r.get("target"));
            List<Map<String, Object>> rounds = (List<Map<String, Object>>) r.get("rounds");
            assertTrue(rounds.size() >= 2, "pre-copy rounds and the final one: " + rounds);
            assertEquals(true, rounds.getLast().get("drained"), "the last round is the final one: " + rounds);
            assertTrue((Long) r.get("bytes") >= (long) (MigrationTest.DIRTIED + 1) * MigrationTest.ALLOC, moved.out());
            for (String k : List.of("downtimeMillis", "drainMillis", "hashMillis", "finalCopyMillis", "restoreMillis",
                    "switchMillis")) {
                assertTrue(r.get(k) instanceof Number, k + " in " + moved.out());
            }
            assertTrue(moved.err().contains("gpusockets migrate: pre-copy 1 / 8"), moved.err());
            assertTrue(moved.err().contains("gpusockets migrate: session " + id + " moved to " + b.unix() + "; rounds: #"),
                    moved.err());
            assertTrue(moved.err().contains(" downtime "), moved.err());

            p.runs(3); // on B now
            assertEquals(b.unix(), d.backendUri(), "the frontend follows the session to B");
            String metricsA = StatusTest.metrics(a);
            assertTrue(metricsA.contains("gpusockets_migrations_total{result=\"ok\"} 1.0\n"), metricsA);
            assertTrue(metricsA.contains("gpusockets_migration_bytes_total " + (double) (Long) r.get("bytes") + "\n")
                    || metricsA.contains("gpusockets_migration_bytes_total " + r.get("bytes") + ".0\n"), metricsA);
            List<Map<String, Object>> onB = StatusTest.list(StatusTest.statusJson(b), "sessions");
            assertEquals(1, onB.size(), () -> "B's sessions: " + onB);
            assertEquals(Long.parseLong(id), onB.getFirst().get("id"), "the session keeps its id at B");

            CheckpointNativeTest.Result refused = CheckpointNativeTest.cli("migrate", id, "--to", a.unix(),
                    "--socket", b.adminSocket().toString());
            assertEquals(1, refused.exit(), () -> "migrate back: " + refused.out() + refused.err());
            assertTrue(refused.err().contains("does not accept migrations (start it with --accept-migrations)"),
                    refused.err());
            assertEquals("", refused.out());
            p.runs(2);
            assertEquals(b.unix(), d.backendUri(), "a refused migration leaves the program where it was");
            String metricsB = StatusTest.metrics(b);
            assertTrue(metricsB.contains("gpusockets_migrations_total{result=\"refused\"} 1.0\n"), metricsB);
            assertTrue(metricsB.contains("gpusockets_migrations_total{result=\"ok\"} 0.0\n"), metricsB);

            CheckpointNativeTest.Result unknown = CheckpointNativeTest.cli("migrate", "999", "--to", a.unix(),
                    "--socket", b.adminSocket().toString());
            assertEquals(1, unknown.exit());
            assertTrue(unknown.err().contains("no session 999"), unknown.err());
            p.finish();
        }
    }
}
