package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.server.Migration;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.CheckpointRefused;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Migration between two in-process backends while the program runs (issue 23 item 1, {@link BackendServer#migrate}):
 * a Java program (RemoteCudaDriver) launches, again and again, a kernel that adds to a changing subset of the chunks
 * of several allocations ({@link PreCopyTest#PTX}), and keeps a CPU model of what it wrote. It is migrated A to B
 * (over tcp, both backends holding the same pre-shared key; the frontend told B's unix URI) and then B to A (over
 * unix, proven by the backend's own uid) while it runs; at the end the data on the device equals the model, and the
 * migration results count rounds, bytes and the downtime split. A target that does not accept migrations refuses,
 * and the program runs on at A.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class MigrationTest extends CheckpointTestSupport {
    static final int ALLOC = 64 << 10;
    static final int DIRTIED = 4;

    private static BackendServer server(EmulatedDevice device, byte[] psk) {
        BackendSettings s = BackendSettings.fromSystemProperties();
        s = s.withServer(psk, s.allowedUids(), s.allowedCids(), s.handshakeMillis(), s.warmContexts());
        BackendServer server = new BackendServer(DriverHost.initialise(device, "emulated"), s);
        server.resumeGrace(Duration.ofSeconds(60));
        return server;
    }

    /** The program: allocations with random data, then launches that dirty a changing subset, with its model. */
    static final class Program {
        final RemoteCudaDriver d;
        final Cuda cu;
        final long fn;
        final long[] at = new long[DIRTIED + 1];
        final int[][] model = new int[at.length][];
        final AtomicBoolean stop = new AtomicBoolean();
        final AtomicReference<Throwable> failed = new AtomicReference<>();
        volatile int launches;
        Thread thread;

        Program(RemoteCudaDriver d) {
            this.d = d;
            this.cu = new Cuda(d);
            cu.primaryContext();
            byte[] ptx = (PreCopyTest.PTX + "\0").getBytes(StandardCharsets.US_ASCII);
            MemorySegment image = cu.arena.allocate(ptx.length);
            MemorySegment.copy(ptx, 0, image, JAVA_BYTE, 0, ptx.length);
            MemorySegment c = cu.cell();
            Cuda.ok(d.cuModuleLoadData(c, image), "cuModuleLoadData");
            fn = cu.function(c.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0), "dirty");
            Random random = new Random(9);
            for (int i = 0; i < at.length; i++) {
                at[i] = cu.alloc(ALLOC);
                byte[] data = new byte[ALLOC];
                random.nextBytes(data);
                cu.put(at[i], data);
                java.nio.IntBuffer ib = java.nio.ByteBuffer.wrap(data).order(java.nio.ByteOrder.LITTLE_ENDIAN).asIntBuffer();
                model[i] = new int[ib.remaining()];
                ib.get(model[i]);
            }
        }

        void start() {
            thread = Thread.ofPlatform().name("program").start(() -> {
                try {
                    cu.primaryContext();
                    for (int k = 0; !stop.get(); k++) {
                        for (int i = 0; i < DIRTIED; i++) {
                            int words = ALLOC / 4;
                            Cuda.ok(d.cuLaunchKernel(fn, words / 256, 1, 1, 256, 1, 1, 0, 0,
                                    cu.params(cu.u64(at[i]), cu.u32(words), cu.u32(k)), MemorySegment.NULL), "launch");
                            for (int w = 0; w < words; w++) {
                                if (((w >> 8) * 3 + k) % 5 == 0) {
                                    model[i][w] += k + 1;
                                }
                            }
                        }
                        Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
                        launches++;
                    }
                } catch (Throwable t) {
                    failed.set(t);
                }
            });
        }

        /** Waits for {@code n} more launches (bounded by the test's timeout). */
        void runs(int n) throws InterruptedException {
            int until = launches + n;
            while (launches < until && failed.get() == null) {
                Thread.sleep(5);
            }
        }

        void finish() throws InterruptedException {
            stop.set(true);
            thread.join();
            if (failed.get() != null) {
                throw new AssertionError("the program failed", failed.get());
            }
            for (int i = 0; i < at.length; i++) {
                byte[] expected = new byte[ALLOC];
                java.nio.ByteBuffer.wrap(expected).order(java.nio.ByteOrder.LITTLE_ENDIAN).asIntBuffer().put(model[i]);
                assertArrayEquals(expected, cu.get(at[i], ALLOC), "allocation " + i + " after the run");
            }
        }
    }

    private static void checkResult(Migration.Result r) {
        assertTrue(r.rounds().size() >= 2, "pre-copy rounds and a final round: " + r);
        assertTrue(r.rounds().getLast().drained(), "the last round ran on the drained session");
        assertEquals(r.rounds().getFirst().chunks(), r.rounds().getFirst().sentChunks(), "round 0 sends everything");
        assertTrue(r.bytes() >= (long) (DIRTIED + 1) * ALLOC, "at least the memory once: " + r.bytes());
        assertTrue(r.downtimeNanos() > 0 && r.drainNanos() >= 0 && r.restoreNanos() > 0, r.toString());
        assertEquals(0, r.imageMemoryBytes(), "the target landed all the memory as it came: " + r);
        // the source's stages run one after another within the stop; the restore is timed by the target, which may
        // start it while the source's last write is still returning, so it is inside the downtime but not after them
        assertTrue(r.downtimeNanos() >= r.drainNanos() + r.hashNanos() + r.finalCopyNanos() + r.switchNanos(),
                "the downtime holds the source's stages: " + r);
        assertTrue(r.restoreNanos() < r.downtimeNanos(), "the restore is inside the downtime: " + r);
    }

    private static void awaitNoSessions(BackendServer s) throws InterruptedException {
        while (!s.sessions().isEmpty()) {
            Thread.sleep(10); // the moved session's thread removes it once released (bounded by the test's timeout)
        }
    }

    @Test
    void aRunningProgramMigratesToAnotherBackendAndBackWithItsDataIntact() throws Exception {
        byte[] psk = "migration test key".getBytes(StandardCharsets.UTF_8);
        Path key = dir.resolve("psk");
        Files.write(key, psk);
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer serverA = server(a, psk); BackendServer serverB = server(b, psk)) {
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            String tcpB = serverB.listen(TransportUri.parse("tcp://127.0.0.1:0")).toString();
            serverA.acceptMigrations(true);
            serverB.acceptMigrations(true);
            serverB.migrationBufferBytes(ALLOC); // most chunks spill to the temp file
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(FrontendConfig.fromEnvironment(Map.of(
                    FrontendConfig.SERVER_ENV, unixA, FrontendConfig.PSK_FILE_ENV, key.toString())))) {
                Program p = new Program(d);
                long id = serverA.sessions().get(0).id();
                p.start();
                p.runs(2);
                Migration.Result ab = serverA.migrate(id, tcpB, unixB, null);
                checkResult(ab);
                p.runs(3); // on B now
                assertEquals(unixB, d.backendUri(), "the frontend follows the session to B");
                assertEquals(1, serverB.resumesAccepted());
                awaitNoSessions(serverA);
                Migration.Result ba = serverB.migrate(id, unixA, null, null);
                checkResult(ba);
                p.runs(3);
                assertEquals(unixA, d.backendUri(), "and back to A");
                assertEquals(new long[] {1, 0, 0}[0], serverA.migrations()[0]);
                assertEquals(1, serverB.migrations()[0]);
                assertTrue(serverA.migrationBytes() > 0);
                p.finish();
            }
        } finally {
            a.close();
            b.close();
        }
    }

    /**
     * Managed memory (issue 25) migrates with its session: the allocation is managed at its address on B, holds what
     * the CPU sent and the kernel wrote, a page the guest wrote after the last launch (DIRTY across the move) reaches
     * B's device at the first GPU work there, and an absent page is fetched from B.
     */
    @Test
    void managedMemoryMigratesWithItsSession() throws Exception {
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        long page = 4096, size = 4 * page;
        try (BackendServer serverA = server(a, null); BackendServer serverB = server(b, null)) {
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            serverB.acceptMigrations(true);
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(unixA)) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                long fill = cu.function(cu.loadKernels(), "gpus_fill_u32");
                MemorySegment c = cu.cell();
                Cuda.ok(d.cuMemAllocManaged(c, size, 1), "cuMemAllocManaged");
                long m = c.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0);
                MemorySegment cpu = MemorySegment.ofAddress(m).reinterpret(size);
                d.prepareManagedAccess(m, page, true);
                cpu.set(java.lang.foreign.ValueLayout.JAVA_INT, 0, 0x0A0A);
                int n = (int) (3 * page / 4);
                Cuda.ok(d.cuLaunchKernel(fill, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0,
                        cu.params(cu.u64(m + page), cu.u32(0xC0DE), cu.u32(n)), MemorySegment.NULL), "fill");
                Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
                d.prepareManagedAccess(m + 2 * page, page, true);
                cpu.set(java.lang.foreign.ValueLayout.JAVA_INT, 2 * page, 0xD1D1); // DIRTY across the move
                long id = serverA.sessions().get(0).id();
                serverA.migrate(id, unixB, null, null);
                MemorySegment data = cu.cell().fill((byte) 0);
                Cuda.ok(d.cuPointerGetAttribute(data, 8, m + 8), "IS_MANAGED");
                assertEquals(unixB, d.backendUri(), "on B now");
                assertEquals(1, data.get(java.lang.foreign.ValueLayout.JAVA_INT, 0), "managed on B");
                d.prepareManagedAccess(m, size, false);
                assertEquals(0x0A0A, cpu.get(java.lang.foreign.ValueLayout.JAVA_INT, 0), "page 0: the CPU's, from B");
                assertEquals(0xC0DE, cpu.get(java.lang.foreign.ValueLayout.JAVA_INT, 3 * page + 4), "page 3: the kernel's, from B");
                assertEquals(0xD1D1, cpu.get(java.lang.foreign.ValueLayout.JAVA_INT, 2 * page), "page 2: the guest's own");
                Cuda.ok(d.cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, 0,
                        cu.params(cu.u64(m + 3 * page), cu.u32(0xE0E0), cu.u32(1)), MemorySegment.NULL), "fill on B");
                Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
                MemorySegment back = cu.cell();
                Cuda.ok(d.cuMemcpyDtoH(back, m + 2 * page, 4), "cuMemcpyDtoH");
                assertEquals(0xD1D1, back.get(java.lang.foreign.ValueLayout.JAVA_INT, 0), "B's device has the DIRTY page");
                Cuda.ok(d.cuMemFree(m), "cuMemFree");
            }
        } finally {
            a.close();
            b.close();
        }
    }

    @Test
    void statusShowsTheSessionAsMigratingWhileItMigratesAndCountsIt() throws Exception {
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer serverA = server(a, null); BackendServer serverB = server(b, null)) {
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            serverB.acceptMigrations(true);
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(unixA)) {
                Program p = new Program(d);
                long id = serverA.sessions().get(0).id();
                assertEquals(false, serverA.snapshot().sessions().getFirst().migrating());
                java.util.List<String> seen = new java.util.concurrent.CopyOnWriteArrayList<>();
                p.start();
                p.runs(1);
                serverA.migrate(id, unixB, null, (stage, done, total) -> serverA.snapshot().sessions().stream()
                        .filter(x -> x.id() == id).findFirst().ifPresent(x -> seen.add(stage + "=" + x.migrating())));
                assertTrue(!seen.isEmpty() && seen.stream().allMatch(x -> x.endsWith("=true")), seen.toString());
                assertEquals(1, serverA.snapshot().operations().migrations());
                assertEquals(serverA.migrationBytes(), serverA.snapshot().operations().migrationBytes());
                assertTrue(serverA.migrationBytes() > 0);
                p.runs(2);
                assertEquals(unixB, d.backendUri());
                p.finish();
            }
        } finally {
            a.close();
            b.close();
        }
    }

    @Test
    void aTargetThatDoesNotAcceptMigrationsRefusesAndTheProgramRunsOn() throws Exception {
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer serverA = server(a, null); BackendServer serverB = server(b, null)) {
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            String tcpB = serverB.listen(TransportUri.parse("tcp://127.0.0.1:0")).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(unixA)) {
                Program p = new Program(d);
                long id = serverA.sessions().get(0).id();
                p.start();
                p.runs(1);
                CheckpointRefused off = assertThrows(CheckpointRefused.class, () -> serverA.migrate(id, unixB, null, null));
                assertTrue(off.getMessage().contains("--accept-migrations"), off.getMessage());
                serverB.acceptMigrations(true);
                CheckpointRefused unproven = assertThrows(CheckpointRefused.class, () -> serverA.migrate(id, tcpB, null, null));
                assertTrue(unproven.getMessage().contains("pre-shared key"), unproven.getMessage());
                p.runs(2);
                assertEquals(unixA, d.backendUri());
                assertEquals(2, serverA.migrations()[1], "two refused");
                assertTrue(serverB.sessions().isEmpty());
                p.finish();
            }
        } finally {
            a.close();
            b.close();
        }
    }
}
