package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Sessions that share IPC memory and an IPC event are checkpointed and restored together in isolation process (each
 * session a worker process of a backend process; emulated device, {@code --stable-addresses}): E exports an
 * interprocess event and a cuMemAlloc allocation (window memory: its physical allocations cross as descriptors) and I
 * opens both; {@code gpusockets checkpoint E I --to DIR --stop} drains both workers and writes both images, the backend is
 * killed, and a new backend process on the same address restores both ({@code gpusockets restore FILE FILE}, or
 * {@code gpusockets backend --restore FILE --restore FILE}), each in a worker of its own (the importer's image alone is
 * refused first, and leaves nothing behind). Both programs resume with
 * their old handles and pointers: I reads E's data through its old pointer and a write of either reaches the other; a
 * recording of E's event held behind a gate keeps I's opened event pending until the gate opens,
 * and a recording of I's event does the same to E's, as before the checkpoint. A group that leaves a partner out is
 * refused naming it, and one whose member's worker dies during the group's drain is refused naming that session; the
 * others run on.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class IpcGroupCheckpointProcessTest extends CheckpointTestSupport {
    private static final Pattern HANDED = Pattern.compile("session (\\d+) handed to worker pid (\\d+)");

    /** A non-blocking stream of {@code cu}'s session held until {@link #open} writes 1 to {@code flag}. */
    private static long gated(Cuda cu, long flag) {
        Cuda.ok(cu.d.cuMemsetD32(flag, 0, 1), "clear the gate");
        MemorySegment c = cu.cell();
        Cuda.ok(cu.d.cuStreamCreate(c, 1), "cuStreamCreate(non-blocking)");
        long s = c.get(JAVA_LONG, 0);
        Cuda.ok(cu.d.cuStreamWaitValue32(s, flag, 1, 0), "held until the gate opens");
        return s;
    }

    private static void open(Cuda cu, long flag) {
        MemorySegment c = cu.cell();
        Cuda.ok(cu.d.cuStreamCreate(c, 1), "cuStreamCreate(non-blocking)");
        Cuda.ok(cu.d.cuStreamWriteValue32(c.get(JAVA_LONG, 0), flag, 1, 0), "open the gate");
    }

    /**
     * A recording of {@code recorder}'s event behind a gate keeps {@code waiter}'s event (the same IPC event) pending
     * until the gate opens; then it completes.
     */
    private static void followsRecording(Cuda recorder, long recorded, Cuda waiter, long waited, String what) {
        long gate = recorder.alloc(4);
        long held = gated(recorder, gate);
        Cuda.ok(recorder.d.cuEventRecord(recorded, held), "cuEventRecord(held) " + what);
        assertEquals(CuResult.CUDA_ERROR_NOT_READY, recorder.d.cuEventQuery(recorded), what + ": held (the pipelined"
                + " record has run)");
        assertEquals(CuResult.CUDA_ERROR_NOT_READY, waiter.d.cuEventQuery(waited), what + ": pending behind the gate");
        open(recorder, gate);
        Cuda.ok(waiter.d.cuEventSynchronize(waited), "cuEventSynchronize " + what);
        Cuda.ok(waiter.d.cuEventQuery(waited), "cuEventQuery once the gate opened " + what);
    }

    @ParameterizedTest(name = "restored by {0}")
    @ValueSource(strings = {"gpusockets restore", "gpusockets backend --restore"})
    void sessionsSharingIpcMemoryAndAnEventCheckpointTogetherAndResumeInANewBackendProcessStillSharingThem(String how)
            throws Exception {
        BackendProcess first = BackendProcess.startWithStatus("--isolation", "process", "--stable-addresses",
                "--resume-grace", "120", "--idle-workers", "2");
        BackendProcess second = null;
        try {
            String uri = first.unix();
            try (RemoteCudaDriver de = RemoteCudaDriver.connect(uri); RemoteCudaDriver di = RemoteCudaDriver.connect(uri)) {
                Cuda ce = new Cuda(de), ci = new Cuda(di);
                ce.primaryContext();
                ci.primaryContext();
                IpcGroupCheckpointTest.SharedEvent ev = IpcGroupCheckpointTest.shareEvent(de, ce, di, ci);
                long mine = ev.exporter().get(JAVA_LONG, 0), theirs = ev.opener().get(JAVA_LONG, 0);
                followsRecording(ce, mine, ci, theirs, "E's recording, before");
                IpcGroupCheckpointTest.Shared shared = IpcGroupCheckpointTest.shareMemory(de, ce, di, ci,
                        new byte[] {6, 7}, 1);
                long p = shared.exporter(), q = shared.opener();
                ci.put(q + 2, new byte[] {8});
                assertArrayEquals(new byte[] {6, 7, 8}, ce.get(p, 3), "shared before the checkpoint");
                String e = String.valueOf(de.sessionId()), i = String.valueOf(di.sessionId());
                String admin = first.adminSocket().toString();

                CheckpointNativeTest.Result alone = CheckpointNativeTest.cli("checkpoint", i, "--to",
                        dir.resolve("alone.ckpt").toString(), "--stop", "--socket", admin);
                assertEquals(1, alone.exit());
                assertTrue(alone.err().contains("gpusockets checkpoint " + IpcGroupCheckpointTest.inOrder(e, i)), alone.err());
                CheckpointNativeTest.Result ck = CheckpointNativeTest.cli("checkpoint", e, i, "--to", dir.toString(),
                        "--stop", "--socket", admin);
                assertEquals(0, ck.exit(), () -> ck.out() + ck.err() + String.join("\n", first.output()));
                Path imageE = dir.resolve("session-" + e + ".ckpt"), imageI = dir.resolve("session-" + i + ".ckpt");
                assertTrue(Files.exists(imageE) && Files.exists(imageI), ck.out());

                ProcessHandle.of(first.pid()).orElseThrow().destroyForcibly();
                assertTrue(first.awaitExit(30), "the killed backend did not exit");
                if (how.equals("gpusockets restore")) {
                    second = BackendProcess.startWithStatus("--isolation", "process", "--stable-addresses",
                            "--resume-grace", "120", "--listen", uri);
                    BackendProcess restoring = second;
                    // the importer's image without its exporter's is refused, and leaves nothing
                    CheckpointNativeTest.Result no = CheckpointNativeTest.cli("restore", imageI.toString(), "--socket",
                            second.adminSocket().toString());
                    assertEquals(1, no.exit(), no.out());
                    assertTrue(no.err().contains("restore the images of the sessions it shares with together"), no.err());
                    CheckpointNativeTest.Result rs = CheckpointNativeTest.cli("restore", imageI.toString(), imageE.toString(),
                            "--socket", second.adminSocket().toString());
                    assertEquals(0, rs.exit(), () -> rs.out() + rs.err() + String.join("\n", restoring.output()));
                    assertTrue(rs.out().contains("\"sessions\":[" + i + "," + e + "]"), rs.out());
                } else { // the importer's image first: restored together, in any order
                    second = BackendProcess.startWithStatus("--isolation", "process", "--stable-addresses",
                            "--resume-grace", "120", "--listen", uri, "--restore", imageI.toString(), "--restore",
                            imageE.toString());
                    BackendProcess restoring = second;
                    assertTrue(second.output().stream().anyMatch(l -> l.contains("session " + i
                            + " restored with its group in worker pid")), () -> String.join("\n", restoring.output()));
                }

                // the programs resume with their old handles and pointers, still sharing the memory and the event
                assertArrayEquals(new byte[] {6, 7, 8}, ci.get(q, 3), "the importer reads through its old pointer");
                ci.put(q + 3, new byte[] {9});
                assertArrayEquals(new byte[] {6, 7, 8, 9}, ce.get(p, 4), "and its write reaches the exporter");
                ce.put(p, new byte[] {1});
                assertArrayEquals(new byte[] {1, 7, 8, 9}, ci.get(q, 4), "and the exporter's write reaches it");
                followsRecording(ce, mine, ci, theirs, "E's recording, after the restore");
                followsRecording(ci, theirs, ce, mine, "I's recording, after the restore");
            }
        } finally {
            first.close();
            if (second != null) {
                second.close();
            }
        }
    }

    @Test
    void aGroupThatLeavesAPartnerOutOrWhoseWorkerDiesDuringTheDrainIsRefusedAndTheOthersRunOn() throws Exception {
        try (BackendProcess bp = BackendProcess.startWithStatus("--isolation", "process", "--stable-addresses",
                "--resume-grace", "120", "--idle-workers", "3");
             RemoteCudaDriver de = RemoteCudaDriver.connect(bp.unix());
             RemoteCudaDriver di = RemoteCudaDriver.connect(bp.unix());
             RemoteCudaDriver dx = RemoteCudaDriver.connect(bp.unix())) {
            Cuda ce = new Cuda(de), ci = new Cuda(di), cx = new Cuda(dx);
            ce.primaryContext();
            ci.primaryContext();
            cx.primaryContext();
            IpcGroupCheckpointTest.SharedEvent ev = IpcGroupCheckpointTest.shareEvent(de, ce, di, ci);
            long mine = ev.exporter().get(JAVA_LONG, 0), theirs = ev.opener().get(JAVA_LONG, 0);
            MemorySegment xs = cx.cell();
            Cuda.ok(dx.cuIpcOpenEventHandle(xs, ev.handle()), "cuIpcOpenEventHandle (X)");
            String e = String.valueOf(de.sessionId()), i = String.valueOf(di.sessionId()), x = String.valueOf(dx.sessionId());
            String admin = bp.adminSocket().toString();

            // X opened E's event too: a checkpoint of E and I alone is refused, naming all three
            CheckpointNativeTest.Result left = CheckpointNativeTest.cli("checkpoint", e, i, "--to", dir.toString(),
                    "--socket", admin);
            assertEquals(1, left.exit(), left.out());
            assertTrue(left.err().contains("gpusockets checkpoint " + IpcGroupCheckpointTest.inOrder(e, i, x) + " --to DIR"),
                    left.err());
            followsRecording(ce, mine, ci, theirs, "after the refusal");

            // I is in a call that the drain waits for (a stream held behind a gate) when its worker is killed
            long gate = ci.alloc(4);
            long held = gated(ci, gate);
            Thread.ofPlatform().daemon().start(() -> di.cuStreamSynchronize(held)); // fails once the worker is gone
            long worker = workerOf(bp, i);
            CheckpointNativeTest.Result[] gone = new CheckpointNativeTest.Result[1];
            Thread ck = Thread.ofPlatform().start(() -> gone[0] = CheckpointNativeTest.cli("checkpoint", e, i, x, "--to",
                    dir.toString(), "--socket", admin));
            bp.awaitLog("group checkpoint of sessions", 60_000); // the front leads the drain now
            ProcessHandle.of(worker).orElseThrow().destroyForcibly();
            ck.join();
            assertEquals(1, gone[0].exit(), gone[0].out());
            assertTrue(gone[0].err().contains("session " + i), gone[0].err());
            for (String f : new String[] {e, i, x}) {
                assertTrue(!Files.exists(dir.resolve("session-" + f + ".ckpt")), "no image is left: " + f);
            }
            // E and X were let go: they run on and still share the event
            long xe = xs.get(JAVA_LONG, 0);
            followsRecording(ce, mine, cx, xe, "E's recording, after the group's refusal");
            followsRecording(cx, xe, ce, mine, "X's recording, after the group's refusal");
        }
    }

    /** The pid of the worker the backend handed session {@code id} to. */
    private static long workerOf(BackendProcess bp, String id) throws InterruptedException {
        String line = bp.awaitLog("session " + id + " handed to worker pid", 30_000);
        Matcher m = HANDED.matcher(line);
        assertTrue(m.find(), line);
        return Long.parseLong(m.group(2));
    }
}
