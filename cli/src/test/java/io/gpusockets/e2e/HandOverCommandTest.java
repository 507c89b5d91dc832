package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.status.StatusJson;
import io.gpusockets.frontend.RemoteCudaDriver;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code gpusockets migrate SESSION --hand-over-to ADMIN_SOCKET} between two backend processes on one host
 * ({@code --isolation context}, emulated device, address-stable memory, both {@code --accept-migrations}): their
 * emulated devices share nothing but the memory files of the exported allocations, as two processes on one GPU. A
 * Java program in this JVM ({@link MigrationTest.Program}: kernels changing several allocations, with a CPU model)
 * that also holds two 32 MiB allocations, a pitched one and a 16 MiB pool allocation is handed A to B and back while
 * it runs: each command exits 0 with JSON saying 0 bytes copied and at least the 64 MiB handed over, the frontend
 * follows, the session shows (with its memory) only where it is, and every byte is intact at the end. Two sessions
 * that share IPC memory are handed over together ({@code gpusockets migrate E I --hand-over-to ADMIN_SOCKET}); one
 * alone is refused, naming the command.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class HandOverCommandTest {
    private static final int BIG = 32 << 20;
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

    @SuppressWarnings("unchecked")
    private static void handOver(String id, BackendProcess from, BackendProcess to, RemoteCudaDriver d) throws Exception {
        CheckpointNativeTest.Result moved = CheckpointNativeTest.cli("migrate", id, "--hand-over-to",
                to.adminSocket().toString(), "--frontend-uri", to.unix(), "--socket", from.adminSocket().toString());
        assertEquals(0, moved.exit(), () -> "hand-over: " + moved.out() + moved.err() + "\nfrom:\n" + String.join("\n",
                from.output()) + "\nto:\n" + String.join("\n", to.output()));
        Map<String, Object> r = (Map<String, Object>) StatusJson.parse(moved.out().strip());
        assertEquals(Long.parseLong(id), r.get("session"));
        assertEquals(to.unix(), r.get("frontend"));
        assertEquals(0L, r.get("copiedBytes"), "no memory copied: " + moved.out());
        assertTrue((Long) r.get("handedBytes") >= 2L * BIG, moved.out());
        for (String k : List.of("downtimeMillis", "drainMillis", "exportMillis", "imageMillis", "restoreMillis",
                "switchMillis")) {
            assertTrue(r.get(k) instanceof Number, k + " in " + moved.out());
        }
        assertTrue(moved.err().contains("handed over to " + to.unix()), moved.err());
        List<Map<String, Object>> onTo = StatusTest.list(StatusTest.statusJson(to), "sessions");
        assertEquals(1, onTo.size(), () -> "target's sessions: " + onTo);
        assertTrue(((Number) onTo.getFirst().get("memoryBytes")).longValue() >= 2L * BIG, "the target shows its memory: " + onTo);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!StatusTest.list(StatusTest.statusJson(from), "sessions").isEmpty() && System.nanoTime() < deadline) {
            Thread.sleep(20); // the moved session's thread removes it once released
        }
        assertTrue(StatusTest.list(StatusTest.statusJson(from), "sessions").isEmpty(), "the source holds it no more");
    }

    @Test
    void theCliHandsARunningSessionToAnotherBackendProcessAndBackWithNoMemoryCopied() throws Exception {
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "context", "--stable-addresses",
                "--resume-grace", "60", "--accept-migrations");
             BackendProcess b = BackendProcess.startWithStatus("--isolation", "context", "--stable-addresses",
                     "--resume-grace", "60", "--accept-migrations");
             RemoteCudaDriver d = RemoteCudaDriver.connect(a.unix())) {
            MigrationTest.Program p = new MigrationTest.Program(d);
            Cuda cu = p.cu;
            Random random = new Random(11);
            long[] big = {cu.alloc(BIG), cu.alloc(BIG)};
            byte[][] bigData = new byte[2][BIG];
            for (int i = 0; i < 2; i++) {
                random.nextBytes(bigData[i]);
                cu.put(big[i], bigData[i]);
            }
            MemorySegment c = cu.cell(), pitch = cu.cell();
            Cuda.ok(d.cuMemAllocPitch(c, pitch, 3000, 50, 4), "cuMemAllocPitch");
            long pitched = c.get(ValueLayout.JAVA_LONG, 0);
            byte[] pitchedData = new byte[(int) pitch.get(ValueLayout.JAVA_LONG, 0) * 50];
            random.nextBytes(pitchedData);
            cu.put(pitched, pitchedData);
            long stream = cu.stream();
            Cuda.ok(d.cuMemAllocAsync(c, 16 << 20, stream), "cuMemAllocAsync");
            long pooled = c.get(ValueLayout.JAVA_LONG, 0);
            Cuda.ok(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
            byte[] pooledData = new byte[16 << 20];
            random.nextBytes(pooledData);
            cu.put(pooled, pooledData);
            List<Map<String, Object>> sessions = StatusTest.list(StatusTest.statusJson(a), "sessions");
            assertEquals(1, sessions.size(), () -> "sessions: " + sessions);
            String id = String.valueOf(sessions.getFirst().get("id"));

            p.start();
            p.runs(2);
            handOver(id, a, b, d);
            p.runs(3);
            assertEquals(b.unix(), d.backendUri(), "the frontend follows the session to B");
            handOver(id, b, a, d);
            p.runs(3);
            assertEquals(a.unix(), d.backendUri(), "and back to A");
            p.finish();
            for (int i = 0; i < 2; i++) {
                assertArrayEquals(bigData[i], cu.get(big[i], BIG), "32 MiB allocation " + i);
            }
            assertArrayEquals(pitchedData, cu.get(pitched, pitchedData.length), "the pitched allocation");
            assertArrayEquals(pooledData, cu.get(pooled, pooledData.length), "the pool allocation");
        }
    }
    /**
     * {@code gpusockets migrate E I --hand-over-to B_ADMIN} hands sessions that share IPC memory over together (one
     * alone is refused, naming the command): a summary line each, nothing copied, the importer reads through its old
     * pointer at B and the writes cross.
     */
    @Test
    @SuppressWarnings("unchecked")
    void theCliHandsSessionsSharingIpcMemoryOverTogether() throws Exception {
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "context", "--stable-addresses",
                "--resume-grace", "60");
             BackendProcess b = BackendProcess.startWithStatus("--isolation", "context", "--stable-addresses",
                     "--resume-grace", "60", "--accept-migrations");
             RemoteCudaDriver de = RemoteCudaDriver.connect(a.unix()); RemoteCudaDriver di = RemoteCudaDriver.connect(a.unix())) {
            Cuda ce = new Cuda(de), ci = new Cuda(di);
            ce.primaryContext();
            ci.primaryContext();
            IpcGroupCheckpointTest.Shared shared = IpcGroupCheckpointTest.shareMemory(de, ce, di, ci, new byte[] {6, 7}, 1);
            long p = shared.exporter(), q = shared.opener();
            String e = String.valueOf(de.sessionId()), i = String.valueOf(di.sessionId());
            String admin = a.adminSocket().toString(), target = b.adminSocket().toString();

            CheckpointNativeTest.Result alone = CheckpointNativeTest.cli("migrate", i, "--hand-over-to", target,
                    "--socket", admin);
            assertEquals(1, alone.exit(), alone.out());
            assertTrue(alone.err().contains("gpusockets migrate " + IpcGroupCheckpointTest.inOrder(e, i)
                    + " --hand-over-to ADMIN_SOCKET"), alone.err());

            CheckpointNativeTest.Result moved = CheckpointNativeTest.cli("migrate", e, i, "--hand-over-to", target,
                    "--frontend-uri", b.unix(), "--socket", admin);
            assertEquals(0, moved.exit(), () -> moved.out() + moved.err() + "\nfrom:\n" + String.join("\n", a.output())
                    + "\nto:\n" + String.join("\n", b.output()));
            Map<String, Object> r = (Map<String, Object>) StatusJson.parse(moved.out().strip());
            List<Object> each = (List<Object>) r.get("sessions");
            assertEquals(2, each.size(), moved.out());
            for (Object o : each) {
                assertEquals(0L, ((Map<String, Object>) o).get("copiedBytes"), "no memory copied: " + moved.out());
            }
            assertTrue(moved.err().contains("session " + e + " handed over to " + b.unix())
                    && moved.err().contains("session " + i + " handed over to " + b.unix()), moved.err());
            assertArrayEquals(new byte[] {6, 7}, ci.get(q, 2), "the importer reads through its old pointer at B");
            ci.put(q + 2, new byte[] {8});
            assertArrayEquals(new byte[] {6, 7, 8}, ce.get(p, 3), "its write reaches the exporter");
            assertEquals(b.unix(), de.backendUri());
            assertEquals(b.unix(), di.backendUri());
            assertEquals(2, StatusTest.list(StatusTest.statusJson(b), "sessions").size());
        }
    }
}
