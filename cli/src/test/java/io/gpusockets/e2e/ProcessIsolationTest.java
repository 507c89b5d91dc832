package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Isolation mode process (the default) against a real backend JVM on the emulated device: each session runs
 * in a worker process of its own, over unix://, tcp:// and ring:// alike (the socket, or the ring's shared
 * memory with its shared window, is handed to the worker); killing one worker with SIGKILL ends only its
 * session while the others finish with correct results; no worker outlives its session, the backend's stop,
 * or the backend's own death; a session past --max-workers is refused at its handshake with the reason.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class ProcessIsolationTest {
    private static final Pattern HANDED = Pattern.compile("session (\\d+) handed to worker pid (\\d+)");

    @Test
    void aKilledWorkerEndsOnlyItsSessionAndTheOthersFinishCorrectly() throws Exception {
        int clients = 4;
        List<ProcessHandle> seen = new ArrayList<>();
        try (BackendProcess b = BackendProcess.start("--isolation", "process", "--idle-workers", "2", "--max-workers", "8")) {
            RemoteCudaDriver victim = RemoteCudaDriver.connect(b.unix());
            Cuda v = new Cuda(victim);
            v.primaryContext();
            long vp = v.alloc(4096);
            v.put(vp, new byte[] {7, 7, 7});
            long victimPid = workerOf(b, victim.sessionId());
            assertNotEquals(ProcessHandle.current().pid(), victimPid);
            try (RemoteCudaDriver other = RemoteCudaDriver.connect(b.tcp())) {
                assertArrayEquals(uuid(v), uuid(new Cuda(other)), "every session, whatever its worker, sees the same device");
            }
            assertTrue(b.handle().children().anyMatch(c -> c.pid() == victimPid), "the session runs in a child of the backend");

            CountDownLatch started = new CountDownLatch(clients);
            CountDownLatch killed = new CountDownLatch(1);
            ExecutorService pool = Executors.newFixedThreadPool(clients);
            List<Future<Integer>> results = new ArrayList<>();
            for (int i = 0; i < clients; i++) {
                String address = i % 2 == 0 ? b.unix() : b.tcp();
                int seed = i;
                results.add(pool.submit(() -> roundTrips(address, seed, started, killed)));
            }
            assertTrue(started.await(120, TimeUnit.SECONDS), "every client started");
            b.handle().descendants().forEach(seen::add);
            ProcessHandle.of(victimPid).orElseThrow().destroyForcibly(); // SIGKILL: as a crash would
            killed.countDown();
            for (Future<Integer> r : results) {
                assertEquals(40, r.get(120, TimeUnit.SECONDS), "every round trip of the other sessions came back intact");
            }
            pool.shutdown();

            b.awaitLog("worker pid " + victimPid + " of session " + victim.sessionId() + " died: exit 137 (signal 9)", 20_000);
            int r;
            try (Arena a = Arena.ofConfined()) {
                r = victim.cuMemcpyDtoH(a.allocate(3), vp, 3);
            }
            assertNotEquals(CuResult.CUDA_SUCCESS, r, "the killed worker's session is over");
            victim.close();
            assertTrue(b.alive(), "the backend lives on");

            // the sessions are over: only the idle workers kept started ahead are left
            awaitTrue(() -> b.handle().children().count() == 2, () -> "two idle workers left, no session's worker; children "
                    + b.handle().children().map(ProcessHandle::pid).toList() + "; log:\n" + String.join("\n", b.output()));
            b.handle().descendants().forEach(seen::add);
        }
        for (ProcessHandle p : seen) {
            awaitTrue(() -> !p.isAlive(), "worker pid " + p.pid() + " gone after the backend stopped");
        }
    }

    @Test
    void workersEndWhenTheBackendIsKilled() throws Exception {
        List<ProcessHandle> workers;
        try (BackendProcess b = BackendProcess.start("--isolation", "process", "--idle-workers", "1")) {
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(b.tcp())) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                long p = cu.alloc(1 << 16);
                cu.put(p, new byte[] {1, 2, 3});
                assertArrayEquals(new byte[] {1, 2, 3}, cu.get(p, 3));
                workerOf(b, d.sessionId());
                awaitTrue(() -> b.handle().children().count() == 2, "one worker serving, one idle");
                workers = b.handle().children().toList();
                b.handle().destroyForcibly(); // the front dies without stopping anything
                for (ProcessHandle w : workers) {
                    awaitTrue(() -> !w.isAlive(), "worker pid " + w.pid() + " ended with its front");
                }
            }
        }
    }

    @Test
    void aRingSessionCrossesToItsWorkerWholeWithItsSharedWindowAndEndsCleanlyWhenTheWorkerIsKilled() throws Exception {
        String ring = "ring://isolation-" + ProcessHandle.current().pid();
        try (BackendProcess b = BackendProcess.start("--isolation", "process", "--idle-workers", "1", "--listen", ring)) {
            b.awaitLog("listening on " + ring, 30_000);
            long first;
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(ring)) {
                first = d.sessionId();
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                int n = 3 << 20; // past the window's threshold: the bytes go through the shared window, both ways
                long p = cu.alloc(n);
                byte[] data = new byte[n];
                new Random(5).nextBytes(data);
                cu.put(p, data);
                assertArrayEquals(data, cu.get(p, n));
                long worker = workerOf(b, d.sessionId());
                assertTrue(b.handle().children().anyMatch(c -> c.pid() == worker));
                b.awaitLog("session " + d.sessionId() + " handed to worker pid " + worker + " (peer ring://", 5_000);
                assertTrue(b.awaitLog("session " + d.sessionId() + " handed to worker", 1_000)
                        .contains("the ring's shared memory mapped by the worker"));
            }
            String end = b.awaitLog("session " + first + " ended", 30_000);
            assertTrue(end.contains("bytes went through the shared window"), "the worker used the window: " + end);
            assertTrue(b.output().stream().noneMatch(l -> l.contains("relays its frames")), "nothing relayed");

            try (RemoteCudaDriver d = RemoteCudaDriver.connect(ring)) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                long p = cu.alloc(4096);
                long worker = workerOf(b, d.sessionId());
                ProcessHandle.of(worker).orElseThrow().destroyForcibly(); // SIGKILL: no closed flag set in the ring
                long killed = System.nanoTime();
                int r;
                try (Arena a = Arena.ofConfined()) {
                    r = d.cuMemcpyDtoH(a.allocate(16), p, 16);
                }
                assertNotEquals(CuResult.CUDA_SUCCESS, r, "the killed worker's session is over");
                assertTrue(System.nanoTime() - killed < TimeUnit.SECONDS.toNanos(10), "the frontend learned it at once");
                b.awaitLog("worker pid " + worker + " of session " + d.sessionId() + " died: exit 137 (signal 9)", 20_000);
            }
            assertTrue(b.alive(), "the backend lives on");
        }
    }

    @Test
    void aSessionPastMaxWorkersIsRefusedAtItsHandshakeSayingWhy() throws Exception {
        try (BackendProcess b = BackendProcess.start("--isolation", "process", "--max-workers", "1", "--idle-workers", "0")) {
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(b.unix())) {
                new Cuda(d).primaryContext();
                java.io.IOException refused = org.junit.jupiter.api.Assertions.assertThrows(java.io.IOException.class,
                        () -> RemoteCudaDriver.connect(b.unix()));
                assertTrue(refused.getMessage().contains("no worker process for a new session: isolation mode process serves"
                        + " each session in a worker process of its own and all 1 the backend may run (--max-workers) serve"
                        + " sessions"), refused.getMessage());
                assertEquals(1, new Cuda(d).deviceCount(), "the session being served goes on");
            }
        }
    }

    private static byte[] uuid(Cuda cu) {
        MemorySegment u = cu.arena.allocate(16);
        Cuda.ok(cu.d.cuDeviceGetUuid(u, 0), "cuDeviceGetUuid");
        return u.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
    }

    /** The pid of the worker serving {@code sessionId}, from the front's log. */
    private static long workerOf(BackendProcess b, long sessionId) throws InterruptedException {
        String line = b.awaitLog("session " + sessionId + " handed to worker pid", 30_000);
        Matcher m = HANDED.matcher(line);
        assertTrue(m.find(), line);
        return Long.parseLong(m.group(2));
    }

    /** 40 writes and reads of a pseudo-random 64 KiB, checked; the kill happens after the fifth. */
    private static int roundTrips(String address, int seed, CountDownLatch started, CountDownLatch killed) throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(address)) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long p = cu.alloc(1 << 16);
            Random random = new Random(seed);
            int ok = 0;
            for (int i = 0; i < 40; i++) {
                if (i == 5) {
                    started.countDown();
                    killed.await(120, TimeUnit.SECONDS);
                }
                byte[] data = new byte[1 << 16];
                random.nextBytes(data);
                cu.put(p, data);
                assertArrayEquals(data, cu.get(p, data.length), "client " + seed + " round trip " + i);
                ok++;
            }
            Cuda.ok(d.cuMemFree(p), "cuMemFree");
            return ok;
        }
    }

    private static void awaitTrue(java.util.function.BooleanSupplier condition, String what) throws InterruptedException {
        awaitTrue(condition, () -> what);
    }

    private static void awaitTrue(java.util.function.BooleanSupplier condition, java.util.function.Supplier<String> what)
            throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within 30 s: " + what.get());
            }
            Thread.sleep(50);
        }
    }
}
