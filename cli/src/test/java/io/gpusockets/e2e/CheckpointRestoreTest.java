package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.CheckpointRefused;
import io.gpusockets.backend.session.CheckpointResult;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Checkpoint and restore (issue 22, items 3 to 5): a program builds a linked list over allocations of varied sizes
 * (below 256 bytes, within a granule, beyond one), keeps its head in a {@code __device__} global, and walks it with
 * a kernel that adds 1 to every node, on a stream with a priority, with an event and a function attribute set.
 * Backend A (emulated device, address-stable memory, isolation context) checkpoints it with stop and is shut down,
 * its device discarded; backend B, on a new emulated device, restores the image and listens where the program
 * reconnects: the program goes on and gets exactly the data of an uninterrupted run, every address unchanged.
 * Also: pitched, stream-ordered and program-pool allocations come back at their addresses in their pools; a
 * checkpoint without stop keeps the session running; an image with a flipped byte in a chunk is refused at restore
 * and leaves nothing.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class CheckpointRestoreTest extends CheckpointTestSupport {
    /** A list walker: every node is {u64 next, u32 value, ...}; the head pointer lives in the global {@code head}. */
    static final String PTX = """
            .version 7.0
            .target sm_50
            .address_size 64
            .visible .global .align 8 .u64 head;
            .visible .entry walk_bump()
            {
                .reg .u64 %rd<3>;
                .reg .u32 %r<3>;
                .reg .pred %p<2>;
                ld.global.u64 %rd1, [head];
            LOOP:
                setp.eq.u64 %p1, %rd1, 0;
                @%p1 bra DONE;
                ld.global.u32 %r1, [%rd1+8];
                add.u32 %r1, %r1, 1;
                st.global.u32 [%rd1+8], %r1;
                ld.global.u64 %rd1, [%rd1];
                bra LOOP;
            DONE:
                ret;
            }
            """;
    /** Node sizes: some below 256 B, some within a 2 MiB granule, some beyond one. */
    static final long[] SIZES = {64, 100, 200, 3000, 5L << 20, 16, 4096, 3L << 20, 300};
    private static final int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

    /** The program's state: its handles and addresses. */
    static final class Program {
        final RemoteCudaDriver d;
        final Cuda cu;
        final Arena arena = Arena.ofShared();
        long module, fn, stream, event, headAddr;
        final List<Long> nodes = new ArrayList<>();
        final List<byte[]> tails = new ArrayList<>();
        int walks;

        Program(RemoteCudaDriver d) {
            this.d = d;
            this.cu = new Cuda(d);
        }

        void build() {
            cu.primaryContext();
            byte[] ptx = (PTX + "\0").getBytes(StandardCharsets.US_ASCII);
            MemorySegment image = arena.allocate(ptx.length);
            MemorySegment.copy(ptx, 0, image, JAVA_BYTE, 0, ptx.length);
            MemorySegment c = arena.allocate(8), size = arena.allocate(8);
            Cuda.ok(d.cuModuleLoadData(c, image), "cuModuleLoadData");
            module = c.get(JAVA_LONG, 0);
            fn = cu.function(module, "walk_bump");
            Cuda.ok(d.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024), "cuFuncSetAttribute");
            Cuda.ok(d.cuStreamCreateWithPriority(c, 1, -1), "cuStreamCreateWithPriority");
            stream = c.get(JAVA_LONG, 0);
            event = cu.event();
            for (long s : SIZES) {
                nodes.add(cu.alloc(s));
            }
            Random random = new Random(22);
            for (int i = 0; i < SIZES.length; i++) {
                java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(16).order(java.nio.ByteOrder.LITTLE_ENDIAN);
                b.putLong(i + 1 < SIZES.length ? nodes.get(i + 1) : 0).putInt(i * 10).putInt(0);
                cu.put(nodes.get(i), b.array());
                byte[] tail = new byte[(int) Math.min(SIZES[i] - 16, 1 << 20)];
                random.nextBytes(tail);
                if (tail.length > 0) {
                    cu.put(nodes.get(i) + SIZES[i] - tail.length, tail);
                }
                tails.add(tail);
            }
            Cuda.ok(d.cuModuleGetGlobal(c, size, module, arena.allocateFrom("head")), "cuModuleGetGlobal");
            headAddr = c.get(JAVA_LONG, 0);
            assertEquals(8, size.get(JAVA_LONG, 0));
            cu.put(headAddr, le(nodes.get(0)));
        }

        void walk() {
            Cuda.ok(d.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, cu.params(), MemorySegment.NULL), "launch");
            Cuda.ok(d.cuEventRecord(event, stream), "cuEventRecord");
            Cuda.ok(d.cuEventSynchronize(event), "cuEventSynchronize");
            walks++;
        }

        /** Everything the program can see, as an uninterrupted run would have it after {@link #walks} walks. */
        void check() {
            for (int i = 0; i < SIZES.length; i++) {
                byte[] head = cu.get(nodes.get(i), 16);
                java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(head).order(java.nio.ByteOrder.LITTLE_ENDIAN);
                assertEquals(i + 1 < SIZES.length ? nodes.get(i + 1) : 0L, b.getLong(), "node " + i + " next");
                assertEquals(i * 10 + walks, b.getInt(), "node " + i + " value after " + walks + " walks");
                byte[] tail = tails.get(i);
                if (tail.length > 0) {
                    assertArrayEquals(tail, cu.get(nodes.get(i) + SIZES[i] - tail.length, tail.length), "node " + i + " tail");
                }
                MemorySegment base = arena.allocate(8), size = arena.allocate(8);
                Cuda.ok(d.cuMemGetAddressRange(base, size, nodes.get(i) + 1), "cuMemGetAddressRange");
                assertEquals((long) nodes.get(i), base.get(JAVA_LONG, 0), "node " + i + " address");
                assertEquals(SIZES[i], size.get(JAVA_LONG, 0));
            }
            MemorySegment c = arena.allocate(8), size = arena.allocate(8);
            Cuda.ok(d.cuModuleGetGlobal(c, size, module, arena.allocateFrom("head")), "cuModuleGetGlobal");
            assertEquals(headAddr, c.get(JAVA_LONG, 0), "the global's address");
            assertArrayEquals(le(nodes.get(0)), cu.get(headAddr, 8), "the global's contents");
            Cuda.ok(d.cuStreamGetPriority(stream, c), "cuStreamGetPriority");
            assertEquals(-1, c.get(JAVA_INT, 0), "the stream's priority");
            Cuda.ok(d.cuFuncGetAttribute(c, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn), "cuFuncGetAttribute");
            assertEquals(1024, c.get(JAVA_INT, 0), "the function's attribute");
        }
    }

    static byte[] le(long v) {
        return java.nio.ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN).putLong(v).array();
    }

    private BackendServer server(EmulatedDevice device) {
        BackendServer s = new BackendServer(DriverHost.initialise(device, "emulated"), BackendSettings.fromSystemProperties());
        s.resumeGrace(Duration.ofSeconds(60));
        return s;
    }

    /**
     * A backend in isolation mode process: its sessions live in worker processes (this JVM's classpath, the
     * emulated device, address-stable memory on) that take the checkpoints and make the restores.
     */
    private BackendServer processServer(EmulatedDevice device) throws java.io.IOException {
        BackendServer s = server(device);
        s.handSessionsTo(new io.gpusockets.backend.isolation.Workers(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(), "--enable-native-access=ALL-UNNAMED",
                "-Xmx256m", "-Dgpusockets.backend.stableAddresses=true", "-Dgpusockets.worker.aotCacheDir=off",
                "-cp", System.getProperty("java.class.path"), io.gpusockets.cli.Main.class.getName(), "worker",
                "--device", "emulated"), 1, 2));
        return s;
    }

    @Test
    void aSessionCheckpointedWithStopGoesOnInAnotherBackendOnANewDevice() throws Exception {
        Path sock = dir.resolve("b.sock");
        Path image = dir.resolve("session.ckpt");
        EmulatedDevice a = new EmulatedDevice();
        BackendServer serverA = server(a);
        String uri = serverA.listen(TransportUri.parse("unix://" + sock)).toString();
        EmulatedDevice b = new EmulatedDevice();
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Program p = new Program(d);
            p.build();
            p.walk();
            p.walk();
            p.check();
            long id = onlySession(serverA);
            List<String> stages = new ArrayList<>();
            CheckpointResult r = serverA.checkpoint(id, image, true, (stage, done, total) -> stages.add(stage));
            assertEquals(SIZES.length + 1, r.allocations(), "every node and the global");
            assertTrue(r.bytesWritten() > (8L << 20), "the contents are in the image: " + r.bytesWritten());
            assertTrue(stages.contains("drain") && stages.contains("contents"), stages.toString());
            serverA.close();
            a.close();
            Files.deleteIfExists(sock);
            try (BackendServer serverB = server(b)) {
                assertEquals(id, serverB.restore(image, null));
                serverB.listen(TransportUri.parse("unix://" + sock));
                p.check(); // the program resumes on B here: nothing of it was lost
                p.walk();
                p.check();
                p.walk();
                p.check();
                assertEquals(1, serverB.resumesAccepted());
            }
        } finally {
            b.close();
        }
    }

    /**
     * Allocations larger than a chunk and no multiple of it (and one byte past one) go through the pipelined copies
     * both ways: after a checkpoint with stop, a restore in another backend on a new device and the program's
     * resume, every byte is back at its address.
     */
    @Test
    void contentsSpanningSeveralChunksComeBackByteForByteAtTheirAddresses() throws Exception {
        Path sock = dir.resolve("c.sock");
        Path image = dir.resolve("chunks.ckpt");
        long chunk = 8L << 20;
        long[] sizes = {3 * chunk + 12345, chunk + 1, 777};
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        BackendServer serverA = server(a);
        String uri = serverA.listen(TransportUri.parse("unix://" + sock)).toString();
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            Random random = new Random(33);
            long[] at = new long[sizes.length];
            byte[][] data = new byte[sizes.length][];
            for (int i = 0; i < sizes.length; i++) {
                at[i] = cu.alloc(sizes[i]);
                data[i] = new byte[(int) sizes[i]];
                random.nextBytes(data[i]);
                cu.put(at[i], data[i]);
            }
            CheckpointResult r = serverA.checkpoint(onlySession(serverA), image, true, null);
            long contents = sizes[0] + sizes[1] + sizes[2];
            assertTrue(r.bytesWritten() > contents, "the contents are in the image: " + r.bytesWritten());
            serverA.close();
            a.close();
            Files.deleteIfExists(sock);
            try (BackendServer serverB = server(b)) {
                serverB.restore(image, null);
                serverB.listen(TransportUri.parse("unix://" + sock));
                for (int i = 0; i < sizes.length; i++) {
                    assertArrayEquals(data[i], cu.get(at[i], data[i].length), "allocation " + i + " of " + sizes[i] + " bytes");
                    MemorySegment base = cu.arena.allocate(8), size = cu.arena.allocate(8);
                    Cuda.ok(d.cuMemGetAddressRange(base, size, at[i] + sizes[i] - 1), "cuMemGetAddressRange");
                    assertEquals(at[i], base.get(JAVA_LONG, 0), "allocation " + i + " address");
                    assertEquals(sizes[i], size.get(JAVA_LONG, 0));
                }
                assertEquals(1, serverB.resumesAccepted());
            }
        } finally {
            b.close();
        }
    }

    /**
     * Managed memory (issue 25) across a checkpoint with stop and a restore in another backend on a new device: written
     * by the CPU (sent before a launch), by a kernel (fetched by the CPU, CLEAN), and by the CPU after the last launch
     * (DIRTY in the guest at the checkpoint: the guest keeps it and sends it at the first GPU work after the resume),
     * with an absent page fetched from the restored device; the allocation comes back managed at its address (range
     * attributes, prefetch), and mapped host memory too. Every value equals the uninterrupted program's.
     */
    @Test
    void managedMemoryComesBackAtItsAddressWithWhatTheCpuAndTheGpuWrote() throws Exception {
        managedRoundTrip(this::server, "m.sock");
    }

    /** As {@link #managedMemoryComesBackAtItsAddressWithWhatTheCpuAndTheGpuWrote}, in isolation mode process. */
    @Test
    void inIsolationModeProcessManagedMemoryComesBackInTheRestoredWorker() throws Exception {
        managedRoundTrip(this::processServer, "mp.sock");
    }

    @FunctionalInterface
    private interface Servers {
        BackendServer make(EmulatedDevice device) throws java.io.IOException;
    }

    private void managedRoundTrip(Servers servers, String socket) throws Exception {
        Path sock = dir.resolve(socket);
        Path image = dir.resolve(socket + ".ckpt");
        EmulatedDevice a = new EmulatedDevice();
        BackendServer serverA = servers.make(a);
        String uri = serverA.listen(TransportUri.parse("unix://" + sock)).toString();
        EmulatedDevice b = new EmulatedDevice();
        long page = 4096;
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Program p = new Program(d);
            p.build();
            Cuda cu = p.cu;
            long fill = cu.function(cu.loadKernels(), "gpus_fill_u32");
            java.lang.foreign.MemorySegment c = cu.cell();
            long size = 4 * page;
            Cuda.ok(d.cuMemAllocManaged(c, size, 1), "cuMemAllocManaged");
            long m = c.get(JAVA_LONG, 0);
            Cuda.ok(d.cuMemHostAlloc(c, page, 2), "cuMemHostAlloc DEVICEMAP");
            long host = c.get(JAVA_LONG, 0);
            java.lang.foreign.MemorySegment cpu = java.lang.foreign.MemorySegment.ofAddress(m).reinterpret(size);
            d.prepareManagedAccess(m, page, true);
            for (long i = 0; i < page; i += 4) {
                cpu.set(JAVA_INT, i, (int) (i * 3 + 7)); // page 0: the CPU's, sent at the launch
            }
            int n = (int) (3 * page / 4);
            Cuda.ok(d.cuLaunchKernel(fill, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0,
                    cu.params(cu.u64(m + page), cu.u32(0xC0DE), cu.u32(n)), java.lang.foreign.MemorySegment.NULL), "fill");
            Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
            d.prepareManagedAccess(m + page, page, false);
            assertEquals(0xC0DE, cpu.get(JAVA_INT, page + 8), "page 1: the kernel's, fetched (CLEAN)");
            d.prepareManagedAccess(m + 2 * page, page, true);
            cpu.set(JAVA_INT, 2 * page, 0xD1D1); // page 2: DIRTY in the guest at the checkpoint
            java.lang.foreign.MemorySegment hostMem = java.lang.foreign.MemorySegment.ofAddress(host).reinterpret(page);
            d.prepareManagedAccess(host, page, true);
            hostMem.set(JAVA_INT, 0, 0x4051);
            p.walk();

            long id = onlySession(serverA);
            serverA.checkpoint(id, image, true, null);
            serverA.close();
            a.close();
            Files.deleteIfExists(sock);
            try (BackendServer serverB = servers.make(b)) {
                assertEquals(id, serverB.restore(image, null));
                serverB.listen(TransportUri.parse("unix://" + sock));
                p.check(); // the program resumes on B here
                java.lang.foreign.MemorySegment data = cu.cell().fill((byte) 0);
                Cuda.ok(d.cuPointerGetAttribute(data, 8, m + 100), "IS_MANAGED");
                assertEquals(1, data.get(JAVA_INT, 0), "managed again after the restore");
                d.prepareManagedAccess(m, size, false);
                for (long i = 0; i < page; i += 4) {
                    assertEquals((int) (i * 3 + 7), cpu.get(JAVA_INT, i), "page 0 at +" + i);
                }
                assertEquals(0xC0DE, cpu.get(JAVA_INT, page + 8), "page 1");
                assertEquals(0xD1D1, cpu.get(JAVA_INT, 2 * page), "page 2: the guest's own bytes");
                assertEquals(0xC0DE, cpu.get(JAVA_INT, 2 * page + 4), "page 2: the kernel's bytes");
                assertEquals(0xC0DE, cpu.get(JAVA_INT, 3 * page + 12), "page 3: fetched from the restored device");
                // GPU work after the resume sends the DIRTY page to the restored device
                Cuda.ok(d.cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, 0,
                        cu.params(cu.u64(m + 3 * page), cu.u32(0xE0E0), cu.u32(1)), java.lang.foreign.MemorySegment.NULL), "fill");
                Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
                java.lang.foreign.MemorySegment back = cu.cell();
                Cuda.ok(d.cuMemcpyDtoH(back, m + 2 * page, 4), "cuMemcpyDtoH");
                assertEquals(0xD1D1, back.get(JAVA_INT, 0), "the restored device has the guest's DIRTY page");
                Cuda.ok(d.cuMemcpyDtoH(back, host, 4), "cuMemcpyDtoH");
                assertEquals(0x4051, back.get(JAVA_INT, 0), "mapped host memory on the restored device");
                d.prepareManagedAccess(m + 3 * page, 4, false);
                assertEquals(0xE0E0, cpu.get(JAVA_INT, 3 * page), "the kernel on the restored device");
                Cuda.ok(d.cuMemFree(m), "cuMemFree");
                Cuda.ok(d.cuMemFreeHost(java.lang.foreign.MemorySegment.ofAddress(host)), "cuMemFreeHost");
                p.walk();
                p.check();
                assertEquals(1, serverB.resumesAccepted());
            }
        } finally {
            b.close();
        }
    }

    @Test
    void aCheckpointWithoutStopKeepsTheSessionRunning() throws Exception {
        EmulatedDevice a = new EmulatedDevice();
        try (BackendServer server = server(a)) {
            String uri = server.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                Program p = new Program(d);
                p.build();
                p.walk();
                CheckpointResult r = server.checkpoint(onlySession(server), dir.resolve("s.ckpt"), false, null);
                assertTrue(r.records() >= SIZES.length + 5, "records: " + r.records());
                p.walk();
                p.check();
                assertEquals(0, server.resumesAccepted());
            }
        } finally {
            a.close();
        }
    }

    /**
     * What a checkpoint cannot capture is refused, naming it, and the session goes on untouched: here a change of
     * pointer attribute (a setter no record keeps, which a restore would silently lose); nothing is written.
     */
    @Test
    void uncapturableStateIsRefusedByNameAndTheSessionKeepsRunning() throws Exception {
        EmulatedDevice a = new EmulatedDevice();
        try (BackendServer server = server(a)) {
            String uri = server.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                Program p = new Program(d);
                p.build();
                p.walk();
                Path image = dir.resolve("refused.ckpt");
                long id = onlySession(server);
                // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
                Cuda.ok(d.cuPointerSetAttribute(p.cu.u32(1), 6, p.nodes.get(0)), "cuPointerSetAttribute");
                CheckpointRefused flags = assertThrows(CheckpointRefused.class, () -> server.checkpoint(id, image, true, null));
                assertTrue(flags.getMessage().contains("changes made with cuPointerSetAttribute"), flags.getMessage());
                assertFalse(Files.exists(image), "a refused checkpoint writes nothing");
                p.walk();
                p.check();
                assertEquals(1, server.snapshot().operations().checkpointsRefused());
            }
        } finally {
            a.close();
        }
    }

    /**
     * Isolation mode process: the session's worker takes the checkpoint on its own driver and its progress comes
     * back through the front; what cannot be captured is refused there, naming it, the session running on; a session
     * no worker serves is refused.
     */
    @Test
    void inIsolationModeProcessTheWorkerTakesTheCheckpointAndARefusalNamesTheFeature() throws Exception {
        EmulatedDevice a = new EmulatedDevice();
        try (BackendServer server = processServer(a)) {
            String uri = server.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                Program p = new Program(d);
                p.build();
                p.walk();
                long id = onlySession(server);
                Path taken = dir.resolve("s.ckpt");
                List<String> stages = new java.util.concurrent.CopyOnWriteArrayList<>();
                CheckpointResult r = server.checkpoint(id, taken, false, (stage, done, total) -> stages.add(stage));
                assertTrue(r.records() >= SIZES.length + 5, "records: " + r.records());
                assertEquals(Files.size(taken), r.bytesWritten(), "the worker wrote the image");
                assertTrue(stages.contains("drain") && stages.contains("contents"), stages.toString());
                p.walk();
                p.check();
                Path image = dir.resolve("refused.ckpt");
                // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
                Cuda.ok(d.cuPointerSetAttribute(p.cu.u32(1), 6, p.nodes.get(0)), "cuPointerSetAttribute");
                CheckpointRefused flags = assertThrows(CheckpointRefused.class, () -> server.checkpoint(id, image, true, null));
                assertTrue(flags.getMessage().contains("changes made with cuPointerSetAttribute"), flags.getMessage());
                assertFalse(Files.exists(image), "a refused checkpoint writes nothing");
                CheckpointRefused unknown = assertThrows(CheckpointRefused.class,
                        () -> server.checkpoint(id + 1000, image, false, null));
                assertTrue(unknown.getMessage().contains("no session " + (id + 1000)), unknown.getMessage());
                p.walk();
                p.check();
                assertEquals(1, server.snapshot().operations().checkpoints());
                assertEquals(2, server.snapshot().operations().checkpointsRefused());
            }
        } finally {
            a.close();
        }
    }

    /**
     * Isolation mode process end to end through the Java API: checkpointed with stop in backend A's worker (the front
     * no longer offers its token), A closed; backend B restores it in a worker of its own, refuses a second restore of
     * the live id, lists it, and hands the reconnecting program to that worker, which goes on with its data intact.
     */
    @Test
    void inIsolationModeProcessARestoredSessionResumesInItsWorker() throws Exception {
        Path sock = dir.resolve("b.sock");
        Path image = dir.resolve("session.ckpt");
        EmulatedDevice a = new EmulatedDevice();
        BackendServer serverA = processServer(a);
        String uri = serverA.listen(TransportUri.parse("unix://" + sock)).toString();
        EmulatedDevice b = new EmulatedDevice();
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Program p = new Program(d);
            p.build();
            p.walk();
            p.check();
            long id = onlySession(serverA);
            CheckpointResult r = serverA.checkpoint(id, image, true, null);
            assertEquals(SIZES.length + 1, r.allocations(), "every node and the global");
            serverA.close();
            a.close();
            Files.deleteIfExists(sock);
            try (BackendServer serverB = processServer(b)) {
                List<String> stages = new java.util.concurrent.CopyOnWriteArrayList<>();
                assertEquals(id, serverB.restore(image, (stage, done, total) -> stages.add(stage)));
                assertTrue(stages.contains("contents"), "the worker's progress: " + stages);
                assertEquals(id, onlySession(serverB), "status lists the restored session");
                CheckpointRefused twice = assertThrows(CheckpointRefused.class, () -> serverB.restore(image, null));
                assertTrue(twice.getMessage().contains("session " + id + " is live"), twice.getMessage());
                serverB.listen(TransportUri.parse("unix://" + sock));
                p.check(); // the program resumes in B's worker here
                p.walk();
                p.check();
                assertEquals(1, serverB.resumesAccepted());
                assertEquals(1, serverB.snapshot().operations().restores());
            }
        } finally {
            b.close();
        }
    }

    /** CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC. */
    private static final int POOL_RELEASE_THRESHOLD = 4, POOL_REUSE_ALLOW_OPPORTUNISTIC = 2;

    /**
     * Pitched, stream-ordered (the device's default pool, as cudaMallocAsync) and program-pool allocations, each
     * holding a pointer to the next, come back at their addresses, in their pools, with their contents; the
     * program pool's attributes too; one freed async before the checkpoint stays freed.
     */
    @Test
    void pitchedAsyncAndPoolAllocationsComeBackAtTheirAddressesInTheirPools() throws Exception {
        Path sock = dir.resolve("b.sock");
        Path image = dir.resolve("session.ckpt");
        EmulatedDevice a = new EmulatedDevice();
        BackendServer serverA = server(a);
        String uri = serverA.listen(TransportUri.parse("unix://" + sock)).toString();
        EmulatedDevice b = new EmulatedDevice();
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Program p = new Program(d);
            p.build();
            MemorySegment c = p.arena.allocate(8), pitch = p.arena.allocate(8);
            Cuda.ok(d.cuMemAllocPitch(c, pitch, 1000, 10, 4), "cuMemAllocPitch");
            long pitched = c.get(JAVA_LONG, 0), pitchBytes = pitch.get(JAVA_LONG, 0);
            Cuda.ok(d.cuMemAllocAsync(c, 300, p.stream), "cuMemAllocAsync");
            long asyncSmall = c.get(JAVA_LONG, 0);
            Cuda.ok(d.cuMemAllocAsync(c, 3 << 20, p.stream), "cuMemAllocAsync");
            long asyncLarge = c.get(JAVA_LONG, 0);
            Cuda.ok(d.cuMemAllocAsync(c, 4096, p.stream), "cuMemAllocAsync");
            long freedAsync = c.get(JAVA_LONG, 0);
            MemorySegment props = p.arena.allocate(88, 8).fill((byte) 0);
            props.set(JAVA_INT, 0, 1); // pinned
            props.set(JAVA_INT, 8, 1); // device 0
            Cuda.ok(d.cuMemPoolCreate(c, props), "cuMemPoolCreate");
            long pool = c.get(JAVA_LONG, 0);
            MemorySegment v = p.arena.allocate(8);
            v.set(JAVA_LONG, 0, 5L << 20);
            Cuda.ok(d.cuMemPoolSetAttribute(pool, POOL_RELEASE_THRESHOLD, v), "release threshold");
            v.set(JAVA_INT, 0, 0);
            Cuda.ok(d.cuMemPoolSetAttribute(pool, POOL_REUSE_ALLOW_OPPORTUNISTIC, v), "opportunistic off");
            Cuda.ok(d.cuMemAllocFromPoolAsync(c, 200, pool, p.stream), "cuMemAllocFromPoolAsync");
            long poolSmall = c.get(JAVA_LONG, 0);
            Cuda.ok(d.cuMemAllocFromPoolAsync(c, 1 << 20, pool, p.stream), "cuMemAllocFromPoolAsync");
            long poolLarge = c.get(JAVA_LONG, 0);
            Cuda.ok(d.cuMemFreeAsync(freedAsync, p.stream), "cuMemFreeAsync");
            long[] chain = {pitched, asyncSmall, asyncLarge, poolSmall, poolLarge};
            long[] sizes = {pitchBytes * 10, 300, 3 << 20, 200, 1 << 20};
            for (int i = 0; i < chain.length; i++) {
                p.cu.put(chain[i], le(i + 1 < chain.length ? chain[i + 1] : 0));
                p.cu.put(chain[i] + sizes[i] - 8, le(0x5eed0000L + i));
            }
            Cuda.ok(d.cuStreamSynchronize(p.stream), "cuStreamSynchronize");
            p.walk();
            long id = onlySession(serverA);
            serverA.checkpoint(id, image, true, null);
            serverA.close();
            a.close();
            Files.deleteIfExists(sock);
            try (BackendServer serverB = server(b)) {
                assertEquals(id, serverB.restore(image, null));
                serverB.listen(TransportUri.parse("unix://" + sock));
                p.check(); // the program resumes on B here
                for (int i = 0; i < chain.length; i++) {
                    assertArrayEquals(le(i + 1 < chain.length ? chain[i + 1] : 0), p.cu.get(chain[i], 8), "pointer in " + i);
                    assertArrayEquals(le(0x5eed0000L + i), p.cu.get(chain[i] + sizes[i] - 8, 8), "tail of " + i);
                    MemorySegment base = p.arena.allocate(8), size = p.arena.allocate(8);
                    Cuda.ok(d.cuMemGetAddressRange(base, size, chain[i] + 1), "cuMemGetAddressRange " + i);
                    assertEquals(chain[i], base.get(JAVA_LONG, 0), "allocation " + i + " at its address");
                    assertEquals(sizes[i], size.get(JAVA_LONG, 0), "allocation " + i + "'s size");
                }
                assertTrue(d.cuMemGetAddressRange(p.arena.allocate(8), p.arena.allocate(8), freedAsync) != 0,
                        "memory freed before the checkpoint is not made again");
                Cuda.ok(d.cuMemPoolGetAttribute(pool, POOL_RELEASE_THRESHOLD, v), "release threshold");
                assertEquals(5L << 20, v.get(JAVA_LONG, 0), "the pool's release threshold");
                Cuda.ok(d.cuMemPoolGetAttribute(pool, POOL_REUSE_ALLOW_OPPORTUNISTIC, v), "opportunistic");
                assertEquals(0, v.get(JAVA_INT, 0), "the pool's reuse flag");
                Cuda.ok(d.cuMemPoolGetAttribute(pool, 7, v), "used memory"); // CU_MEMPOOL_ATTR_USED_MEM_CURRENT
                assertEquals(200 + (1 << 20), v.get(JAVA_LONG, 0), "the pool holds its two allocations");
                Cuda.ok(d.cuMemFreeAsync(poolSmall, p.stream), "cuMemFreeAsync after the restore");
                Cuda.ok(d.cuMemFreeAsync(asyncLarge, p.stream), "cuMemFreeAsync after the restore");
                Cuda.ok(d.cuMemAllocFromPoolAsync(c, 200, pool, p.stream), "cuMemAllocFromPoolAsync after the restore");
                Cuda.ok(d.cuStreamSynchronize(p.stream), "cuStreamSynchronize");
                Cuda.ok(d.cuMemFree(pitched), "cuMemFree of the pitched allocation");
                p.walk();
                p.check();
                assertEquals(1, serverB.resumesAccepted());
            }
        } finally {
            b.close();
        }
    }

    @Test
    void aDamagedImageIsRefusedAtRestoreAndLeavesNothing() throws Exception {
        Path image = dir.resolve("s.ckpt");
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer server = server(a)) {
            String uri = server.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                Program p = new Program(d);
                p.build();
                p.walk();
                server.checkpoint(onlySession(server), image, false, null);
            }
        }
        a.close();
        byte[] bytes = Files.readAllBytes(image);
        Path damaged = dir.resolve("damaged.ckpt");
        byte[] flipped = bytes.clone();
        flipped[flipped.length - 8 - 4 - 100] ^= 0x10; // inside the last chunk's bytes
        Files.write(damaged, flipped);
        EmulatedDevice c = new EmulatedDevice();
        try (BackendServer serverB = server(b); BackendServer serverC = server(c); Arena arena = Arena.ofConfined()) {
            MemorySegment ctx = arena.allocate(8), free = arena.allocate(8), total = arena.allocate(8);
            Cuda.ok(b.cuInit(0), "cuInit");
            Cuda.ok(b.cuCtxCreate_v2(ctx, 0, 0), "cuCtxCreate");
            Cuda.ok(b.cuMemGetInfo(free, total), "cuMemGetInfo");
            long before = free.get(JAVA_LONG, 0);
            Exception e = assertThrows(Exception.class, () -> serverB.restore(damaged, null));
            assertTrue(e.getMessage().contains("does not match its hash"), e.getMessage());
            assertEquals(0, serverB.sessionCount(), "no session left");
            Cuda.ok(b.cuMemGetInfo(free, total), "cuMemGetInfo");
            assertEquals(before, free.get(JAVA_LONG, 0), "no device memory left");
            // the undamaged image restores (on a device that never loaded its module)
            long id = serverC.restore(image, null);
            assertEquals(1, serverC.sessionCount());
            CheckpointRefused taken = assertThrows(CheckpointRefused.class, () -> serverC.restore(image, null));
            assertTrue(taken.getMessage().contains("session " + id + " is live"), taken.getMessage());
        } finally {
            b.close();
            c.close();
        }
    }
}
