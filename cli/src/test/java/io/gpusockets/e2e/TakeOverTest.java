package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code gpusockets backend --take-over} (issue 23 item 2) against real backend JVMs on the emulated device, isolation
 * process: a new backend takes over a running one's listeners and its workers' sessions while 8 programs run kernels
 * and copies whose results they check. Every program finishes correctly, the old backend exits with 0, new programs
 * connect at the same addresses (also while the take-over runs), the new backend's status lists the adopted sessions,
 * and the take-over connection carried a few KB while the sessions held hundreds of MiB; refusals say why; an adopted
 * session's end gives its tenant charge back in the new backend; several allocations per session keep their contents
 * while a program thread allocates and frees through the take-over (process and context modes); in context mode,
 * sessions that share IPC memory are handed over together and a session alone by itself.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class TakeOverTest {
    private static final Pattern TOOK = Pattern.compile("took over pid (\\d+): (\\d+) session\\(s\\) adopted, (\\d+) listener\\(s\\), (\\d+) bytes");
    private static final int PROGRAMS = 8;
    private static final long HELD = 40L << 20;
    private static final int WORDS = 1024;

    @Test
    void eightRunningProgramsMoveToTheNewBackendAndFinishCorrectlyAndTheOldBackendExits() throws Exception {
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "process", "--idle-workers", "2",
                "--max-workers", "12")) {
            String unix = a.unix();
            String tcp = a.tcp();
            AtomicBoolean takenOver = new AtomicBoolean();
            AtomicBoolean finish = new AtomicBoolean();
            CountDownLatch started = new CountDownLatch(PROGRAMS);
            ExecutorService pool = Executors.newFixedThreadPool(PROGRAMS + 1);
            List<Future<Integer>> programs = new ArrayList<>();
            for (int i = 0; i < PROGRAMS; i++) {
                String address = i % 2 == 0 ? unix : tcp;
                int seed = i + 1;
                programs.add(pool.submit(() -> program(address, seed, started, takenOver, finish)));
            }
            assertTrue(started.await(150, TimeUnit.SECONDS), "every program started");
            Map<String, Object> before = StatusTest.statusJson(a);
            assertEquals(PROGRAMS, StatusTest.list(before, "sessions").size(), "A serves the 8 sessions");
            long held = tenantMemory(before);
            assertTrue(held >= PROGRAMS * HELD, "the sessions hold " + held + " bytes");

            // programs connecting while the take-over runs: none is refused
            AtomicBoolean connecting = new AtomicBoolean(true);
            AtomicInteger served = new AtomicInteger();
            Future<String> during = pool.submit(() -> connectLoop(List.of(unix, tcp), connecting, served));

            try (BackendProcess b = BackendProcess.startTakingOver(a.adminSocket(), a.adminSocket(), 2,
                    "--isolation", "process", "--idle-workers", "1", "--max-workers", "12")) {
                takenOver.set(true);
                String line = b.awaitLog("took over pid", 30_000);
                Matcher m = TOOK.matcher(line);
                assertTrue(m.find(), line);
                assertEquals(a.pid(), Long.parseLong(m.group(1)), line);
                int adopted = Integer.parseInt(m.group(2));
                // the 8 programs, and the connecting loop's session when one was open at that moment
                assertTrue(adopted == PROGRAMS || adopted == PROGRAMS + 1, line);
                assertEquals(2, Integer.parseInt(m.group(3)), "both listeners crossed: " + line);
                long bytes = Long.parseLong(m.group(4));
                assertTrue(bytes > 0 && bytes < 64 << 10, "the take-over connection carried " + bytes + " bytes, for "
                        + held + " bytes of device memory held");

                assertTrue(a.awaitExit(30), "the old backend exits");
                assertEquals(0, a.exitValue(), "the old backend exits with 0");
                a.awaitLog("taken over: handed " + adopted + " session(s) and 2 listener(s)", 5_000);

                // B lists the 8 sessions, adopted, and charges what they hold
                Map<String, Object> onB = StatusTest.statusJson(b);
                List<Map<String, Object>> sessions = StatusTest.list(onB, "sessions");
                for (Future<Integer> p : programs) {
                    assertFalse(p.isDone(), "the programs still run");
                }
                assertTrue(sessions.stream().filter(s -> String.valueOf(s.get("peer")).contains("adopted from pid " + a.pid()))
                        .count() >= PROGRAMS, "B lists the adopted sessions: " + sessions);
                assertTrue(tenantMemory(onB) >= PROGRAMS * HELD, "B charges what they hold: " + tenantMemory(onB));
                for (Future<Integer> p : programs) {
                    assertFalse(p.isDone() && p.state() == Future.State.FAILED, "no program failed");
                }
                finish.set(true);
                for (Future<Integer> p : programs) {
                    assertTrue(p.get(120, TimeUnit.SECONDS) >= 7, "every program ran its rounds, checked");
                }
                connecting.set(false);
                assertEquals("", during.get(60, TimeUnit.SECONDS), "no connection was refused during the take-over");
                assertTrue(served.get() > 0, "connections were made during the take-over");

                // new programs at the same addresses, served by B
                for (String address : List.of(unix, tcp)) {
                    AtomicBoolean yes = new AtomicBoolean(true);
                    assertTrue(program(address, 99, new CountDownLatch(1), yes, yes) >= 7, "a new program at " + address);
                }
                awaitTrue(() -> StatusTest.list(StatusTest.statusJson(b), "sessions").isEmpty(), "every session ended in B");
                assertEquals(0, tenantMemory(StatusTest.statusJson(b)), "every charge given back in B");
                pool.shutdown();
            }
        }
    }

    @Test
    void theNewBackendListsTheAdoptedSessionsAndGivesBackTheChargeOfOneThatEnds() throws Exception {
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "process", "--idle-workers", "1")) {
            RemoteCudaDriver first = RemoteCudaDriver.connect(a.unix());
            RemoteCudaDriver second = RemoteCudaDriver.connect(a.tcp());
            Cuda c1 = new Cuda(first);
            Cuda c2 = new Cuda(second);
            c1.primaryContext();
            c2.primaryContext();
            long p1 = c1.alloc(8 << 20);
            long p2 = c2.alloc(4 << 20);
            c1.put(p1, new byte[] {1, 2, 3});
            c2.put(p2, new byte[] {4, 5, 6});
            awaitTrue(() -> tenantMemory(StatusTest.statusJson(a)) == (12 << 20), "A charges both sessions");
            Path admin = a.adminSocket().resolveSibling("b-admin.sock");
            try (BackendProcess b = BackendProcess.startTakingOver(a.adminSocket(), admin, 2, "--isolation", "process",
                    "--metrics", "tcp://127.0.0.1:0")) {
                assertTrue(a.awaitExit(30), "the old backend exits");
                String metrics = StatusTest.metrics(b);
                assertEquals(1.0, StatusTest.sample(metrics, "gpusockets_takeovers_total"), metrics);
                assertEquals(2.0, StatusTest.sample(metrics, "gpusockets_takeover_sessions_total"), metrics);
                double bytes = StatusTest.sample(metrics, "gpusockets_takeover_bytes_total");
                assertTrue(bytes > 0 && bytes < 16 << 10, "take-over bytes: " + bytes);
                Map<String, Object> s = StatusTest.statusJson(b);
                List<Map<String, Object>> sessions = StatusTest.list(s, "sessions");
                assertEquals(2, sessions.size(), "B lists both sessions: " + sessions);
                for (Map<String, Object> x : sessions) {
                    assertTrue(String.valueOf(x.get("peer")).contains("adopted from pid " + a.pid()), "marked adopted: " + x);
                }
                assertEquals(12L << 20, tenantMemory(s), "B charges the tenant what the sessions hold");

                // the sessions go on in their workers, reserves now answered by B
                long more = c2.alloc(1 << 20);
                awaitTrue(() -> tenantMemory(StatusTest.statusJson(b)) == (13 << 20), "a reserve after the take-over is charged in B");
                assertArrayEquals(new byte[] {1, 2, 3}, c1.get(p1, 3));
                first.close();
                awaitTrue(() -> tenantMemory(StatusTest.statusJson(b)) == (5 << 20),
                        "the ended session's charge is given back in B");
                awaitTrue(() -> StatusTest.list(StatusTest.statusJson(b), "sessions").size() == 1, "one session left");
                b.awaitLog("exited (status unknown: adopted from pid " + a.pid(), 30_000);
                assertArrayEquals(new byte[] {4, 5, 6}, c2.get(p2, 3));
                Cuda.ok(second.cuMemFree(more), "cuMemFree");
                second.close();
            }
        }
    }

    @Test
    void inContextModeTheOldBackendServesItsOwnSessionsUntilTheyEndAndARingListenerIsBoundAnew() throws Exception {
        String ring = "ring://take-over-" + ProcessHandle.current().pid();
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "context", "--listen", ring)) {
            RemoteCudaDriver kept = RemoteCudaDriver.connect(a.unix());
            Cuda k = new Cuda(kept);
            k.primaryContext();
            long p = k.alloc(1 << 20);
            k.put(p, new byte[] {5, 6, 7});
            Path admin = a.adminSocket().resolveSibling("b-admin.sock");
            // the ring listener does not cross (its connections are set up with files of the listening process): the
            // old backend closes it and the new one, whose --listen names it, binds it anew
            try (BackendProcess b = BackendProcess.startTakingOver(a.adminSocket(), admin, 3, "--isolation", "context",
                    "--listen", ring)) {
                b.awaitLog("took over pid " + a.pid() + ": 0 session(s) adopted, 2 listener(s)", 5_000);
                a.awaitLog("listener " + ring + " cannot be handed over", 5_000);
                assertTrue(a.awaitLog("stays here until it ends: session", 5_000).contains("it was not granted resume"),
                        "A says why its session stays");
                Map<String, Object> onA = StatusTest.statusJson(a);
                assertTrue(String.valueOf(onA.get("backend")).contains("draining"), "A says it drains: " + onA.get("backend"));
                assertEquals(1, StatusTest.list(onA, "sessions").size(), "A still serves its own session");
                for (String address : List.of(a.unix(), a.tcp(), ring)) {
                    try (RemoteCudaDriver d = RemoteCudaDriver.connect(address)) {
                        Cuda cu = new Cuda(d);
                        cu.primaryContext();
                        long q = cu.alloc(4096);
                        cu.put(q, new byte[] {1, 2});
                        assertArrayEquals(new byte[] {1, 2}, cu.get(q, 2), address);
                        // the previous address's session, closed, may not have ended in B yet
                        awaitTrue(() -> StatusTest.list(StatusTest.statusJson(b), "sessions").size() == 1, "B serves " + address);
                    }
                }
                assertArrayEquals(new byte[] {5, 6, 7}, k.get(p, 3), "the old backend's own session goes on");
                assertTrue(a.alive(), "A lives while its own session does");
                kept.close();
                assertTrue(a.awaitExit(30), "A exits once its last session ended");
                assertEquals(0, a.exitValue());
                a.awaitLog("taken over: the last session of this process ended", 5_000);
            }
        }
    }

    private static final Pattern HANDED = Pattern.compile("(\\d+) session\\(s\\) handed over \\((\\d+) bytes of device memory"
            + " mapped, (\\d+) copied\\)");

    @Test
    void inContextModeWithStableAddressesEveryRunningSessionIsHandedOverWithNoMemoryCopiedAndTheOldBackendExits()
            throws Exception {
        int n = 6;
        String was = System.setProperty("gpusockets.resume", "true");
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "context", "--stable-addresses",
                "--resume-grace", "60")) {
            AtomicBoolean takenOver = new AtomicBoolean();
            AtomicBoolean finish = new AtomicBoolean();
            CountDownLatch started = new CountDownLatch(n);
            ExecutorService pool = Executors.newFixedThreadPool(n);
            List<Future<Integer>> programs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                String address = i % 2 == 0 ? a.unix() : a.tcp();
                int seed = i + 1;
                programs.add(pool.submit(() -> program(address, seed, started, takenOver, finish)));
            }
            assertTrue(started.await(150, TimeUnit.SECONDS), "every program started");
            assertEquals(n, StatusTest.list(StatusTest.statusJson(a), "sessions").size(), "A serves the sessions");
            long held = tenantMemory(StatusTest.statusJson(a));
            assertTrue(held >= n * HELD, "the sessions hold " + held + " bytes");
            try (BackendProcess b = BackendProcess.startTakingOver(a.adminSocket(), a.adminSocket().resolveSibling("b.sock"),
                    2, "--isolation", "context", "--stable-addresses", "--resume-grace", "60")) {
                takenOver.set(true);
                String line = b.awaitLog("took over pid " + a.pid(), 60_000);
                Matcher m = HANDED.matcher(line);
                assertTrue(m.find(), line);
                assertTrue(line.contains(": 0 session(s) adopted, 2 listener(s)"), line);
                assertEquals(n, Integer.parseInt(m.group(1)), "every session handed over: " + line);
                assertTrue(Long.parseLong(m.group(2)) >= n * HELD, "their memory mapped in B: " + line);
                assertEquals(0, Long.parseLong(m.group(3)), "no device memory copied: " + line);
                assertTrue(line.endsWith("0 session(s) stay in the old backend until they end"), line);
                assertTrue(a.awaitExit(30), "the old backend exits");
                assertEquals(0, a.exitValue(), "the old backend exits with 0");
                a.awaitLog("handed over " + n + " session(s) of this process", 5_000);

                List<Map<String, Object>> onB = StatusTest.list(StatusTest.statusJson(b), "sessions");
                assertEquals(n, onB.size(), "B serves the sessions: " + onB);
                assertTrue(tenantMemory(StatusTest.statusJson(b)) >= n * HELD, "B charges what they hold");
                finish.set(true);
                for (Future<Integer> p : programs) {
                    assertTrue(p.get(120, TimeUnit.SECONDS) >= 7, "every program ran its rounds, checked");
                }
                for (String address : List.of(a.unix(), a.tcp())) {
                    AtomicBoolean yes = new AtomicBoolean(true);
                    assertTrue(program(address, 99, new CountDownLatch(1), yes, yes) >= 7, "a new program at " + address);
                }
                awaitTrue(() -> StatusTest.list(StatusTest.statusJson(b), "sessions").isEmpty(), "every session ended in B");
                pool.shutdown();
            }
        } finally {
            if (was == null) {
                System.clearProperty("gpusockets.resume");
            } else {
                System.setProperty("gpusockets.resume", was);
            }
        }
    }

    /**
     * The shape of the GPU pass's bench-takeover (several allocations a session, a program thread allocating and freeing
     * all along), in both isolation modes that move sessions: 3 sessions each hold {@link #ALLOCATIONS} allocations of
     * different sizes, every one set to a word of its own (cuMemsetD32), two of them freed again so that the address
     * space has holes; session 0's probe thread allocates, writes, checks and frees 64 KiB blocks (a few of them live at
     * any time) before, during and after the take-over. After it every allocation's first and last word are what they
     * were set to, the probe's blocks too, and allocations made in B land on none of them.
     */
    @ParameterizedTest
    @ValueSource(strings = {"process", "context"})
    void everyAllocationKeepsItsWordsThroughATakeOverWhileTheSessionAllocatesAndFrees(String mode) throws Exception {
        int n = 3;
        String was = System.setProperty("gpusockets.resume", "true");
        List<String> options = new ArrayList<>(List.of("--isolation", mode, "--resume-grace", "60"));
        if (mode.equals("context")) {
            options.add("--stable-addresses"); // what a hand-over needs
        }
        List<RemoteCudaDriver> drivers = new ArrayList<>();
        try (BackendProcess a = BackendProcess.startWithStatus(options.toArray(String[]::new))) {
            List<Cuda> cus = new ArrayList<>();
            long[] contexts = new long[n];
            List<long[]> held = new ArrayList<>(); // per session: pointer, size, pointer, size, ... (0 size: freed)
            for (int i = 0; i < n; i++) {
                RemoteCudaDriver d = RemoteCudaDriver.connect(i % 2 == 0 ? a.unix() : a.tcp());
                drivers.add(d);
                Cuda cu = new Cuda(d);
                cus.add(cu);
                contexts[i] = cu.primaryContext();
                long[] mine = new long[2 * ALLOCATIONS];
                for (int k = 0; k < ALLOCATIONS; k++) {
                    long size = (k + 1) * (192L << 10) + (k % 3) * 4096L;
                    mine[2 * k] = cu.alloc(size);
                    mine[2 * k + 1] = size;
                    Cuda.ok(d.cuMemsetD32(mine[2 * k], value(i, k), size / 4), "cuMemsetD32");
                }
                for (int k : new int[] {2, 6}) { // holes between live allocations
                    Cuda.ok(d.cuMemFree(mine[2 * k]), "cuMemFree");
                    mine[2 * k + 1] = 0;
                }
                Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
                checkWords(cu, i, mine, "before the take-over");
                held.add(mine);
            }
            AtomicBoolean stop = new AtomicBoolean();
            AtomicInteger rounds = new AtomicInteger();
            ExecutorService pool = Executors.newSingleThreadExecutor();
            Future<?> probe = pool.submit(() -> probe(cus.getFirst(), contexts[0], stop, rounds));
            awaitTrue(() -> rounds.get() >= 20 || probe.isDone(), "the probe thread runs");
            try (BackendProcess b = BackendProcess.startTakingOver(a.adminSocket(), a.adminSocket().resolveSibling("b.sock"),
                    2, options.toArray(String[]::new))) {
                String line = b.awaitLog("took over pid " + a.pid(), 60_000);
                assertTrue(line.contains(mode.equals("process") ? ": " + n + " session(s) adopted"
                        : n + " session(s) handed over"), "every session moved: " + line);
                assertTrue(a.awaitExit(30), "the old backend exits");
                assertEquals(0, a.exitValue());
                int after = rounds.get();
                awaitTrue(() -> rounds.get() >= after + 20 || probe.isDone(), "the probe thread runs on in B");
                stop.set(true);
                probe.get(60, TimeUnit.SECONDS); // its own checks' failure, if any
                pool.shutdown();
                for (int i = 0; i < n; i++) {
                    Cuda.ok(cus.get(i).d.cuCtxSetCurrent(contexts[i]), "cuCtxSetCurrent");
                    checkWords(cus.get(i), i, held.get(i), "after the take-over");
                }
                // allocations made in B, each set to a word of its own, overwrite none of the session's
                for (int i = 0; i < n; i++) {
                    Cuda cu = cus.get(i);
                    Cuda.ok(cu.d.cuCtxSetCurrent(contexts[i]), "cuCtxSetCurrent");
                    for (int k = 0; k < 4; k++) {
                        long q = cu.alloc(256 << 10);
                        Cuda.ok(cu.d.cuMemsetD32(q, ~value(i, k), (256 << 10) / 4), "cuMemsetD32");
                    }
                    Cuda.ok(cu.d.cuCtxSynchronize(), "cuCtxSynchronize");
                    checkWords(cu, i, held.get(i), "after allocations in the new backend");
                }
            }
        } finally {
            drivers.forEach(RemoteCudaDriver::close);
            if (was == null) {
                System.clearProperty("gpusockets.resume");
            } else {
                System.setProperty("gpusockets.resume", was);
            }
        }
    }

    private static final int ALLOCATIONS = 8;

    /** Allocation {@code allocation}'s word in session {@code session}: each of them different. */
    private static int value(int session, int allocation) {
        return (session * 131 + allocation + 1) * 0x9E3779B1;
    }

    /** Each live allocation's first and last word in {@code held} (pointer, size, ...; size 0: freed) is its value. */
    private static void checkWords(Cuda cu, int session, long[] held, String when) {
        for (int k = 0; k < held.length / 2; k++) {
            if (held[2 * k + 1] == 0) {
                continue;
            }
            for (long at : new long[] {held[2 * k], held[2 * k] + held[2 * k + 1] - 4}) {
                int got = word(cu, at);
                assertEquals(value(session, k), got, String.format("session %d allocation %d (0x%x, %d bytes): word at 0x%x is"
                        + " 0x%08x, not 0x%08x %s", session, k, held[2 * k], held[2 * k + 1], at, got, value(session, k), when));
            }
        }
    }

    private static int word(Cuda cu, long at) {
        return java.nio.ByteBuffer.wrap(cu.get(at, 4)).order(java.nio.ByteOrder.LITTLE_ENDIAN).getInt();
    }

    /**
     * The program thread of {@link #everyAllocationKeepsItsWordsThroughATakeOverWhileTheSessionAllocatesAndFrees}: in
     * its own thread, in {@code context}, allocates 64 KiB, writes a word of the round at its start and end, and keeps
     * the last 4 blocks live; the oldest is checked and freed each round (so blocks made before the take-over are
     * freed after it). Runs until {@code stop}; counts its rounds.
     */
    private static Void probe(Cuda cu, long context, AtomicBoolean stop, AtomicInteger rounds) {
        Cuda.ok(cu.d.cuCtxSetCurrent(context), "cuCtxSetCurrent");
        java.util.ArrayDeque<long[]> live = new java.util.ArrayDeque<>(); // pointer, its word
        int size = 64 << 10;
        for (int r = 0; !stop.get(); r++) {
            long p = cu.alloc(size);
            int w = 0x5A5A0000 | r & 0xFFFF;
            byte[] bytes = java.nio.ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(w).array();
            cu.put(p, bytes);
            cu.put(p + size - 4, bytes);
            live.add(new long[] {p, w});
            if (live.size() > 4) {
                long[] old = live.poll();
                assertEquals((int) old[1], word(cu, old[0]), "probe block 0x" + Long.toHexString(old[0]) + ": first word");
                assertEquals((int) old[1], word(cu, old[0] + size - 4), "probe block 0x" + Long.toHexString(old[0]) + ": last word");
                Cuda.ok(cu.d.cuMemFree(old[0]), "cuMemFree");
            }
            rounds.incrementAndGet();
        }
        for (long[] old : live) {
            assertEquals((int) old[1], word(cu, old[0]), "probe block 0x" + Long.toHexString(old[0]));
            Cuda.ok(cu.d.cuMemFree(old[0]), "cuMemFree");
        }
        return null;
    }

    /**
     * In context mode, sessions that share IPC memory and an event (E exports an allocation that I opens; I exports an
     * event that E opens) are handed over together, and a session alone by itself: all three move with nothing copied,
     * the importer reads the exporter's data through its old pointer in B, writes cross both ways, E's opened event
     * follows I's recording, and A exits. Before group hand-overs the pair passed the pre-check, was announced, then
     * refused, which ended the hand-overs: the pair and the sessions after it stayed in A.
     */
    @Test
    void inContextModeSessionsSharingIpcMemoryAreHandedOverTogetherAndASessionAloneToo() throws Exception {
        int size = IpcGroupCheckpointTest.SIZE;
        String was = System.setProperty("gpusockets.resume", "true");
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "context", "--stable-addresses",
                "--resume-grace", "60");
             RemoteCudaDriver de = RemoteCudaDriver.connect(a.unix()); RemoteCudaDriver di = RemoteCudaDriver.connect(a.unix());
             RemoteCudaDriver dx = RemoteCudaDriver.connect(a.unix())) {
            Cuda ce = new Cuda(de), ci = new Cuda(di), cx = new Cuda(dx);
            ce.primaryContext();
            ci.primaryContext();
            cx.primaryContext();
            IpcGroupCheckpointTest.Shared shared = IpcGroupCheckpointTest.shareMemory(de, ce, di, ci, new byte[] {1, 2, 3}, 1);
            long p = shared.exporter(), q = shared.opener();
            IpcGroupCheckpointTest.SharedEvent event = IpcGroupCheckpointTest.shareEvent(di, ci, de, ce);
            long alone = cx.alloc(1 << 20);
            cx.put(alone, new byte[] {2, 7});
            try (BackendProcess b = BackendProcess.startTakingOver(a.adminSocket(), a.adminSocket().resolveSibling("b.sock"),
                    2, "--isolation", "context", "--stable-addresses", "--resume-grace", "60")) {
                String line = b.awaitLog("took over pid " + a.pid(), 60_000);
                Matcher m = HANDED.matcher(line);
                assertTrue(m.find(), line);
                assertEquals(3, Integer.parseInt(m.group(1)), "the pair and the session alone handed over: " + line
                        + "\nA:\n" + String.join("\n", a.output()) + "\nB:\n" + String.join("\n", b.output()));
                assertTrue(Long.parseLong(m.group(2)) >= size, "the shared memory mapped in B: " + line);
                assertEquals(0, Long.parseLong(m.group(3)), "no device memory copied: " + line);
                assertTrue(line.endsWith("0 session(s) stay in the old backend until they end"), line);

                assertArrayEquals(new byte[] {1, 2, 3}, ci.get(q, 3), "the importer reads through its old pointer in B");
                ce.put(p + 10, new byte[] {7});
                assertArrayEquals(new byte[] {7}, ci.get(q + 10, 1), "the exporter's write reaches the importer");
                ci.put(q + 11, new byte[] {8});
                assertArrayEquals(new byte[] {7, 8}, ce.get(p + 10, 2), "and the importer's the exporter");
                Cuda.ok(di.cuEventRecord(event.exporter().get(java.lang.foreign.ValueLayout.JAVA_LONG, 0), 0),
                        "cuEventRecord(I's event)");
                Cuda.ok(de.cuEventSynchronize(event.opener().get(java.lang.foreign.ValueLayout.JAVA_LONG, 0)),
                        "E's opened event follows I's recording");
                assertArrayEquals(new byte[] {2, 7}, cx.get(alone, 2), "the session alone moved by itself");
                assertEquals(3, StatusTest.list(StatusTest.statusJson(b), "sessions").size(), "B serves all three");
                assertTrue(a.awaitExit(30), "the old backend exits");
                assertEquals(0, a.exitValue());
            }
        } finally {
            if (was == null) {
                System.clearProperty("gpusockets.resume");
            } else {
                System.setProperty("gpusockets.resume", was);
            }
        }
    }

    @Test
    void aSessionTheNewBackendRefusesStaysWithTheOldBackendAndRunsOnThere() throws Exception {
        Path dir = Files.createTempDirectory("gpusockets-take-over-refused");
        Path conf = dir.resolve("tenants.conf");
        Files.writeString(conf, "[tenant carol]\nmatch = uid:" + Files.getAttribute(dir, "unix:uid") + "\n");
        String was = System.setProperty("gpusockets.resume", "true");
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "context", "--stable-addresses",
                "--resume-grace", "60", "--tenants", conf.toString());
             RemoteCudaDriver d = RemoteCudaDriver.connect(a.unix())) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long p = cu.alloc(4 << 20);
            cu.put(p, new byte[] {3, 1, 4});
            // B knows no tenant carol: its restore of the handed session refuses, and the session runs on at A
            try (BackendProcess b = BackendProcess.startTakingOver(a.adminSocket(), a.adminSocket().resolveSibling("b.sock"),
                    2, "--isolation", "context", "--stable-addresses")) {
                String line = b.awaitLog("took over pid " + a.pid(), 60_000);
                assertTrue(line.contains("0 session(s) handed over") && line.endsWith("1 session(s) stay in the old backend"
                        + " until they end"), line);
                b.awaitLog("could not be handed over", 5_000);
                a.awaitLog("could not be handed over", 5_000);
                assertArrayEquals(new byte[] {3, 1, 4}, cu.get(p, 3), "the session runs on at A");
                long q = cu.alloc(1 << 20);
                cu.put(q, new byte[] {2, 7});
                assertArrayEquals(new byte[] {2, 7}, cu.get(q, 2));
                assertEquals(1, StatusTest.list(StatusTest.statusJson(a), "sessions").size(), "A still serves it");
                assertTrue(a.alive(), "A lives while its session does");
                d.close();
                assertTrue(a.awaitExit(30), "A exits once the session ended");
                assertEquals(0, a.exitValue());
            }
        } finally {
            if (was == null) {
                System.clearProperty("gpusockets.resume");
            } else {
                System.setProperty("gpusockets.resume", was);
            }
            Files.deleteIfExists(conf);
            Files.deleteIfExists(dir);
        }
    }

    @Test
    void aConnectionAcceptedBeforeTheTakeOverAndOneMadeDuringItAreBothServed() throws Exception {
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "process", "--idle-workers", "1")) {
            ExecutorService pool = Executors.newFixedThreadPool(2);
            try (RawClient early = new RawClient(a.unix())) { // accepted by A, its handshake not done yet
                Future<BackendProcess> taking = pool.submit(() -> BackendProcess.startTakingOver(a.adminSocket(),
                        a.adminSocket().resolveSibling("b.sock"), 2, "--isolation", "process"));
                a.awaitLog("take-over: stopped accepting (2 listening socket(s) kept for the new backend), 1 handshake", 60_000);
                // A accepts no more and B serves nothing yet (A waits for the early handshake): this one waits in the
                // listening socket's backlog, and B accepts it
                Future<byte[]> during = pool.submit(() -> {
                    try (RemoteCudaDriver d = RemoteCudaDriver.connect(a.tcp())) {
                        Cuda cu = new Cuda(d);
                        cu.primaryContext();
                        long p = cu.alloc(4096);
                        cu.put(p, new byte[] {6, 5, 4});
                        return cu.get(p, 3);
                    }
                });
                Thread.sleep(300);
                assertFalse(during.isDone(), "nobody accepts while A waits for the early handshake: " + during.state());
                RawClient.Frame welcome = early.hello(io.gpusockets.protocol.wire.Handshake.PROTOCOL_VERSION);
                assertEquals(io.gpusockets.protocol.wire.Opcodes.WELCOME, welcome.header().opcode(), "A finished its handshake");
                try (BackendProcess b = taking.get(60, TimeUnit.SECONDS)) {
                    assertArrayEquals(new byte[] {6, 5, 4}, during.get(60, TimeUnit.SECONDS), "the program that connected"
                            + " during the take-over is served by B");
                    b.awaitLog("took over pid " + a.pid() + ": 1 session(s) adopted", 5_000);
                    RawClient.Frame count = early.call(RawClient.opcode("cuDeviceGetCount"), RawClient.body(0));
                    assertEquals(0, count.body().order(java.nio.ByteOrder.LITTLE_ENDIAN).getInt(), "the early session,"
                            + " handed to a worker by A and adopted by B, answers");
                    assertTrue(a.awaitExit(30), "A exits");
                    assertEquals(0, a.exitValue());
                }
            } finally {
                pool.shutdownNow();
            }
        }
    }

    @Test
    void aTenantTheNewBackendDoesNotKnowKeepsTheLimitsItHad() throws Exception {
        Path dir = Files.createTempDirectory("gpusockets-take-over-tenants");
        Path conf = dir.resolve("tenants.conf");
        Files.writeString(conf, "[tenant carol]\nmatch = uid:" + Files.getAttribute(dir, "unix:uid") + "\nmemory = 8MiB\n");
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "process", "--tenants", conf.toString())) {
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(a.unix())) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                long p = cu.alloc(4 << 20);
                cu.put(p, new byte[] {8});
                try (BackendProcess b = BackendProcess.startTakingOver(a.adminSocket(), a.adminSocket().resolveSibling("b.sock"),
                        2, "--isolation", "process")) { // no --tenants: B knows only its default tenant
                    b.awaitLog("belongs to tenant carol, which this backend's tenants file does not name: it keeps the limits"
                            + " it had", 5_000);
                    List<Map<String, Object>> sessions = StatusTest.list(StatusTest.statusJson(b), "sessions");
                    assertEquals("carol", sessions.getFirst().get("tenant"), "the session keeps its tenant: " + sessions);
                    long q = cu.alloc(2 << 20); // within carol's 8 MiB, answered by B
                    MemorySegment cell = cu.arena.allocate(8);
                    assertEquals(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_OUT_OF_MEMORY, d.cuMemAlloc(cell, 4 << 20),
                            "past carol's 8 MiB, as in A (B's own default tenant has no limit)");
                    Cuda.ok(d.cuMemFree(q), "cuMemFree");
                    assertArrayEquals(new byte[] {8}, cu.get(p, 1));
                }
            }
        } finally {
            Files.deleteIfExists(conf);
            Files.deleteIfExists(dir);
        }
    }

    @Test
    void anAdoptedSessionResumesThroughTheNewBackendAfterItsConnectionIsCut() throws Exception {
        String was = System.setProperty("gpusockets.resume", "true");
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "process", "--resume-grace", "30")) {
            java.net.SocketAddress backend = java.net.UnixDomainSocketAddress.of(a.unix().substring("unix://".length()));
            try (ResumeTest.CuttingProxy proxy = new ResumeTest.CuttingProxy("unix",
                    Files.createTempDirectory("gpusockets-take-over-resume"), backend, 3, 256 << 10);
                 RemoteCudaDriver d = RemoteCudaDriver.connect(proxy.uri)) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                long p = cu.alloc(1 << 20);
                Random random = new Random(5);
                byte[] first = new byte[1 << 16];
                random.nextBytes(first);
                cu.put(p, first);
                try (BackendProcess b = BackendProcess.startTakingOver(a.adminSocket(), a.adminSocket().resolveSibling("b.sock"),
                        2, "--isolation", "process")) {
                    assertTrue(a.awaitExit(30), "A exits");
                    proxy.arm(); // from now on the connection is cut; the frontend resumes at the same address: B
                    for (int i = 0; i < 100 && proxy.cuts.get() < 2; i++) {
                        byte[] data = new byte[1 << 16];
                        random.nextBytes(data);
                        cu.put(p + (1 << 16), data);
                        assertArrayEquals(data, cu.get(p + (1 << 16), data.length), "round " + i);
                    }
                    proxy.armed = false;
                    assertTrue(proxy.cuts.get() >= 1, "the proxy cut the connection");
                    assertArrayEquals(first, cu.get(p, first.length), "the session's memory is intact");
                    String line = b.awaitLog("resuming connection from", 10_000);
                    assertTrue(line.contains("handed to worker pid"), "B hands the resume to the adopted worker: " + line);
                }
            }
        } finally {
            if (was == null) {
                System.clearProperty("gpusockets.resume");
            } else {
                System.setProperty("gpusockets.resume", was);
            }
        }
    }

    @Test
    void aSessionWhoseTlsConnectionTheOldBackendRelaysStaysThereUntilItEnds() throws Exception {
        io.gpusockets.protocol.transport.TestCertificates certs = io.gpusockets.protocol.transport.TestCertificates.get();
        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "process", "--listen", "tls://127.0.0.1:0",
                "--tls-key-store", certs.serverKeyStore().toString(),
                "--tls-key-store-password-file", certs.passwordFile().toString())) {
            Map<String, String> env = new java.util.HashMap<>();
            env.put(io.gpusockets.frontend.FrontendConfig.SERVER_ENV, a.address("tls"));
            env.put(io.gpusockets.frontend.FrontendConfig.TLS_CA_ENV, certs.caPem().toString());
            try (RemoteCudaDriver relayed = RemoteCudaDriver.connect(io.gpusockets.frontend.FrontendConfig.fromEnvironment(env));
                 RemoteCudaDriver handed = RemoteCudaDriver.connect(a.unix())) {
                Cuda r = new Cuda(relayed);
                Cuda h = new Cuda(handed);
                r.primaryContext();
                h.primaryContext();
                long rp = r.alloc(1 << 20);
                long hp = h.alloc(1 << 20);
                r.put(rp, new byte[] {1, 1});
                h.put(hp, new byte[] {2, 2});
                try (BackendProcess b = BackendProcess.startTakingOver(a.adminSocket(), a.adminSocket().resolveSibling("b.sock"),
                        2, "--isolation", "process")) {
                    b.awaitLog("took over pid " + a.pid() + ": 1 session(s) adopted, 2 listener(s)", 5_000);
                    a.awaitLog("connection is relayed by this process", 5_000);
                    assertArrayEquals(new byte[] {2, 2}, h.get(hp, 2), "the handed session goes on in B");
                    assertArrayEquals(new byte[] {1, 1}, r.get(rp, 2), "the relayed session goes on in A");
                    assertTrue(a.alive(), "A lives while it relays a session");
                    relayed.close();
                    assertTrue(a.awaitExit(30), "A exits once the relayed session ended");
                    assertEquals(0, a.exitValue());
                    a.awaitLog("taken over: the last session of this process ended", 5_000);
                    assertArrayEquals(new byte[] {2, 2}, h.get(hp, 2));
                }
            }
        }
    }

    @Test
    void refusalsSayWhy() throws Exception {
        Path missing = Files.createTempDirectory("gpusockets-take-over-test").resolve("no-such.sock");
        Run r = run("--take-over", missing.toString(), "--isolation", "process");
        assertEquals(2, r.exit(), r.out());
        assertTrue(r.out().contains("--take-over " + missing + ": no such file"), r.out());

        try (BackendProcess a = BackendProcess.startWithStatus("--isolation", "process", "--idle-workers", "0")) {
            Run mismatch = run("--take-over", a.adminSocket().toString(), "--isolation", "context");
            assertEquals(2, mismatch.exit(), mismatch.out());
            assertTrue(mismatch.out().contains("isolation mismatch: this backend runs isolation process, the new one context"),
                    mismatch.out());
            assertTrue(a.alive(), "a refused take-over leaves the backend serving");
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(a.unix())) {
                new Cuda(d).primaryContext();
            }

            RemoteCudaDriver held = RemoteCudaDriver.connect(a.unix());
            Cuda h = new Cuda(held);
            h.primaryContext();
            long hp = h.alloc(1 << 20);
            h.put(hp, new byte[] {4, 4});
            // a second take-over while the first runs: the first holds A until its new backend answers DONE, so ask
            // by hand (a take-over socket nobody answers on) and then again
            Path dir = Files.createTempDirectory("gpusockets-take-over-test");
            Path hanging = dir.resolve("hanging.sock");
            try (var l = io.gpusockets.protocol.transport.Transports.listen(
                    io.gpusockets.protocol.transport.TransportUri.parse("fdunix://" + hanging))) {
                java.nio.channels.SocketChannel asking = java.nio.channels.SocketChannel.open(
                        java.net.UnixDomainSocketAddress.of(a.adminSocket()));
                asking.write(java.nio.ByteBuffer.wrap(("take-over fdunix://" + hanging + " process\n").getBytes(StandardCharsets.UTF_8)));
                var from = l.accept(); // A connected: it is being taken over now
                Run second = run("--take-over", a.adminSocket().toString(), "--isolation", "process");
                assertEquals(2, second.exit(), second.out());
                assertTrue(second.out().contains("this backend is being taken over already"), second.out());
                from.close(); // the "new backend" fails before it answers: A takes everything back and serves on
                a.awaitLog("take-over failed before the new backend answered: serving on", 10_000);
                asking.close();
            }
            long more = h.alloc(1 << 20); // its worker, marked and taken back, is A's again: reserves are answered
            assertArrayEquals(new byte[] {4, 4}, h.get(hp, 2), "the session in a worker goes on after the failed take-over");
            awaitTrue(() -> tenantMemory(StatusTest.statusJson(a)) == (2 << 20), "A charges the taken-back session");
            for (String address : List.of(a.unix(), a.tcp())) {
                try (RemoteCudaDriver d = RemoteCudaDriver.connect(address)) {
                    Cuda cu = new Cuda(d);
                    cu.primaryContext();
                    long p = cu.alloc(4096);
                    cu.put(p, new byte[] {3, 1});
                    assertArrayEquals(new byte[] {3, 1}, cu.get(p, 2), "A serves " + address + " again");
                }
            }
            // and it can be taken over for real afterwards
            try (BackendProcess b = BackendProcess.startTakingOver(a.adminSocket(), a.adminSocket().resolveSibling("b.sock"), 2,
                    "--isolation", "process", "--idle-workers", "0")) {
                assertTrue(a.awaitExit(30), "A exits after the second take-over");
                assertEquals(0, a.exitValue());
                b.awaitLog("took over pid " + a.pid() + ": 1 session(s) adopted", 5_000);
                Cuda.ok(held.cuMemFree(more), "cuMemFree");
                assertArrayEquals(new byte[] {4, 4}, h.get(hp, 2), "the session goes on in B");
                held.close();
            }
        }
    }

    /** A backend run to its end (a refused take-over): its exit status and output. */
    private record Run(int exit, String out) {
    }

    private static Run run(String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Xmx256m", "-cp", System.getProperty("java.class.path"),
                "io.gpusockets.cli.Main", "backend", "--device", "emulated"));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        StringBuilder out = new StringBuilder();
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            for (String line; (line = r.readLine()) != null; ) {
                out.append(line).append('\n');
            }
        }
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("the backend did not end: " + out);
        }
        return new Run(p.exitValue(), out.toString());
    }

    /**
     * One program: holds {@link #HELD} bytes of device memory (a pattern written at its start), and runs rounds of a
     * kernel and copies, each checked, until 5 rounds after {@code takenOver} was seen and {@code finish} is set;
     * then checks the pattern is intact. Returns the rounds it ran.
     */
    private static int program(String address, int seed, CountDownLatch started, AtomicBoolean takenOver, AtomicBoolean finish)
            throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(address)) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long fill = cu.function(cu.loadKernels(), "gpus_fill_u32");
            long held = cu.alloc(HELD);
            long words = cu.alloc(4L * WORDS);
            Random random = new Random(seed);
            byte[] pattern = new byte[1 << 16];
            random.nextBytes(pattern);
            cu.put(held, pattern);
            cu.put(held + HELD - pattern.length, pattern);
            int rounds = 0;
            int after = 0;
            while (after < 5 || !finish.get()) {
                if (rounds == 2) {
                    started.countDown();
                }
                if (takenOver.get() && rounds >= 2) {
                    after++;
                }
                int value = seed * 100_000 + rounds;
                Cuda.ok(d.cuLaunchKernel(fill, WORDS / 256, 1, 1, 256, 1, 1, 0, 0,
                        cu.params(cu.u64(words), cu.u32(value), cu.u32(WORDS)), MemorySegment.NULL), "fill");
                byte[] got = cu.get(words, 4 * WORDS);
                MemorySegment s = MemorySegment.ofArray(got);
                for (int i = 0; i < WORDS; i++) {
                    int w = s.getAtIndex(JAVA_INT.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN).withByteAlignment(1), i);
                    if (w != value) {
                        throw new AssertionError("program " + seed + " round " + rounds + ": word " + i + " is " + w + ", not " + value);
                    }
                }
                byte[] data = new byte[4096];
                random.nextBytes(data);
                long at = (1 << 16) + (long) (rounds % 64) * data.length;
                cu.put(held + at, data);
                assertArrayEquals(data, cu.get(held + at, data.length), "program " + seed + " round " + rounds);
                rounds++;
                Thread.sleep(20);
            }
            assertArrayEquals(pattern, cu.get(held, pattern.length), "program " + seed + ": its memory is intact");
            assertArrayEquals(pattern, cu.get(held + HELD - pattern.length, pattern.length), "program " + seed + ": its end too");
            Cuda.ok(d.cuMemFree(held), "cuMemFree");
            return rounds;
        }
    }

    /** Connects and makes a context at each address in turn until told to stop; "" or what failed first. */
    private static String connectLoop(List<String> addresses, AtomicBoolean going, AtomicInteger served) {
        int i = 0;
        while (going.get()) {
            String address = addresses.get(i++ % addresses.size());
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(address)) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                long p = cu.alloc(4096);
                cu.put(p, new byte[] {9, 8, 7});
                assertArrayEquals(new byte[] {9, 8, 7}, cu.get(p, 3));
                served.incrementAndGet();
            } catch (Exception | AssertionError e) {
                return "connection " + i + " to " + address + ": " + e;
            }
        }
        return "";
    }

    /** The default tenant's device memory charged, from a status snapshot. */
    private static long tenantMemory(Map<String, Object> status) {
        return StatusTest.list(status, "tenants").stream().filter(t -> "default".equals(t.get("name")))
                .mapToLong(t -> (Long) t.get("memoryUsedBytes")).sum();
    }

    private static void awaitTrue(java.util.function.BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within 30 s: " + what);
            }
            Thread.sleep(50);
        }
    }
}
