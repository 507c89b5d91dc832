package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Sessions that share IPC memory and an IPC event migrate together from a backend process in isolation process (the
 * default; each session a worker process, {@code --stable-addresses}, emulated device) to a backend process in
 * isolation context or process ({@code gpusockets migrate E I --to URI};
 * {@link io.gpusockets.backend.server.BackendServer#migrateGroup}: the workers drain and write their images, the front
 * sends them, stop and copy): E exports a cuMemAlloc allocation and an interprocess event and I opens both; X shares
 * nothing. A group of E and X, which leaves I out, is refused naming it and sends nothing; a target that can restore
 * only one of them keeps neither: both run on at the source, still sharing. E and I migrate together: both frontends
 * follow their sessions to the target (in isolation process restored together, each in a worker of its own), I reads
 * E's data through its old pointer there, a write of either reaches the other, I's opened event follows E's
 * recording, and the source holds neither any more (their workers ended) while X runs on there.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class IpcGroupMigrationProcessTest extends CheckpointTestSupport {
    @ParameterizedTest(name = "to a target in isolation {0}")
    @ValueSource(strings = {"context", "process"})
    void sessionsSharingIpcMemoryAndAnEventMigrateTogetherFromWorkerProcesses(String target) throws Exception {
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "process", "--stable-addresses",
                "--resume-grace", "60", "--idle-workers", "3");
             BackendProcess b = BackendProcess.startWithStatus("--isolation", target, "--stable-addresses",
                     "--resume-grace", "60", "--accept-migrations");
             BackendProcess one = BackendProcess.startWithStatus("--isolation", target, "--stable-addresses",
                     "--resume-grace", "60", "--accept-migrations", "--max-sessions", "1");
             RemoteCudaDriver de = RemoteCudaDriver.connect(a.unix()); RemoteCudaDriver di = RemoteCudaDriver.connect(a.unix());
             RemoteCudaDriver dx = RemoteCudaDriver.connect(a.unix())) {
            Cuda ce = new Cuda(de), ci = new Cuda(di), cx = new Cuda(dx);
            ce.primaryContext();
            ci.primaryContext();
            cx.primaryContext();
            IpcGroupCheckpointTest.SharedEvent ev = IpcGroupCheckpointTest.shareEvent(de, ce, di, ci);
            long mine = ev.exporter().get(JAVA_LONG, 0), theirs = ev.opener().get(JAVA_LONG, 0);
            IpcGroupCheckpointTest.Shared shared = IpcGroupCheckpointTest.shareMemory(de, ce, di, ci, new byte[] {6, 7}, 1);
            long p = shared.exporter(), q = shared.opener();
            ci.put(q + 2, new byte[] {5});
            long alone = cx.alloc(64);
            cx.put(alone, new byte[] {2, 7});
            String e = String.valueOf(de.sessionId()), i = String.valueOf(di.sessionId()), x = String.valueOf(dx.sessionId());
            String admin = a.adminSocket().toString();

            // a group that leaves I out is refused, naming it and the command; nothing goes to the target
            CheckpointNativeTest.Result left = CheckpointNativeTest.cli("migrate", e, x, "--to", b.unix(), "--socket", admin);
            assertEquals(1, left.exit(), left.out());
            assertTrue(left.err().contains("session(s) " + i) && left.err().contains("gpusockets migrate "
                    + IpcGroupCheckpointTest.inOrder(e, i, x) + " --to URI"), left.err());
            assertEquals(List.of(), StatusTest.list(StatusTest.statusJson(b), "sessions"), "nothing sent to the target");
            assertArrayEquals(new byte[] {6, 7, 5}, ce.get(p, 3), "both run on at the source, still sharing");

            // a target that restores one and refuses the other (room for one session) keeps neither; both run on here
            CheckpointNativeTest.Result full = CheckpointNativeTest.cli("migrate", e, i, "--to", one.unix(), "--socket",
                    admin);
            assertEquals(1, full.exit(), full.out());
            assertTrue(full.err().contains("failed the migration"), full.err());
            assertEquals(List.of(), StatusTest.list(StatusTest.statusJson(one), "sessions"), "nothing left at the target");
            ci.put(q + 1, new byte[] {4});
            assertArrayEquals(new byte[] {6, 4, 5}, ce.get(p, 3), "both run on at the source, still sharing");
            ce.put(p + 1, new byte[] {7}); // the exporter writes it back: as it was
            assertEquals(a.unix(), de.backendUri());
            assertEquals(a.unix(), di.backendUri());
            assertEquals(Set.of(Long.parseLong(e), Long.parseLong(i), Long.parseLong(x)), ids(a));

            CheckpointNativeTest.Result moved = CheckpointNativeTest.cli("migrate", e, i, "--to", b.unix(), "--socket",
                    admin);
            assertEquals(0, moved.exit(), () -> moved.out() + moved.err() + "\nA:\n" + String.join("\n", a.output())
                    + "\nB:\n" + String.join("\n", b.output()));
            assertTrue(moved.err().contains("session " + e + " moved to " + b.unix())
                    && moved.err().contains("session " + i + " moved to " + b.unix()), moved.err());

            assertArrayEquals(new byte[] {6, 7, 5}, ci.get(q, 3), "the importer reads through its old pointer at B");
            ci.put(q + 3, new byte[] {8});
            assertArrayEquals(new byte[] {6, 7, 5, 8}, ce.get(p, 4), "and its write reaches the exporter");
            ce.put(p, new byte[] {1});
            assertArrayEquals(new byte[] {1, 7, 5, 8}, ci.get(q, 4), "and the exporter's write reaches the importer");
            assertEquals(b.unix(), de.backendUri(), "the exporter's frontend followed its session to B");
            assertEquals(b.unix(), di.backendUri(), "and the importer's");
            Cuda.ok(de.cuEventRecord(mine, 0), "cuEventRecord(E's event) at B");
            Cuda.ok(di.cuEventSynchronize(theirs), "I's opened event follows E's recording at B");
            assertEquals(Set.of(Long.parseLong(e), Long.parseLong(i)), ids(b), "both at B");

            while (!ids(a).equals(Set.of(Long.parseLong(x)))) {
                Thread.sleep(50); // the moved sessions' workers end once they told their frontends (bounded by the timeout)
            }
            assertArrayEquals(new byte[] {2, 7}, cx.get(alone, 2), "the session left out runs on at the source");
            assertEquals(a.unix(), dx.backendUri());
        }
    }

    /** The ids of the sessions {@code b} serves, from its status. */
    private static Set<Long> ids(BackendProcess b) {
        return StatusTest.list(StatusTest.statusJson(b), "sessions").stream()
                .map((Map<String, Object> s) -> ((Number) s.get("id")).longValue()).collect(Collectors.toSet());
    }
}
