package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.server.Migration;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.PreCopy;
import io.gpusockets.backend.status.StatusJson;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.wire.FrameHeader;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Migration end to end (issue 23, Tests), beyond {@link MigrationTest}: a program on ring:// migrated back and forth
 * over ring:// while it dirties a changing subset of many allocations; the final round's resent chunks counted for a
 * set of changes the test makes at a gate between the last pre-copy round and the stop; a change planted between a
 * round's hash pass and its copy pass and written back to the value the hash pass saw (the ABA case the hash-and-copy
 * rule guards) never missed; and a target that restored the session but whose DONE was lost (a proxy cuts the
 * migration connection when the DONE comes): the program runs on at the source, the target's detached copy ends
 * after its grace period, and no device memory stays allocated on either side.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class MigrationEndToEndTest extends CheckpointTestSupport {
    /** The program's allocations: each one chunk of the migration (chunks are 1 MiB; a chunk never spans two). */
    static final int ALLOCS = 24;
    static final int ALLOC = 16 << 10;
    static final byte[] PSK = "migration end-to-end key".getBytes(StandardCharsets.UTF_8);

    private static BackendServer server(CudaDriver driver, byte[] psk, Duration grace) {
        BackendSettings s = BackendSettings.fromSystemProperties();
        s = s.withServer(psk, s.allowedUids(), s.allowedCids(), s.handshakeMillis(), s.warmContexts());
        BackendServer server = new BackendServer(DriverHost.initialise(driver, "emulated"), s);
        server.resumeGrace(grace);
        server.acceptMigrations(true);
        return server;
    }

    private Path keyFile() throws IOException {
        Path key = dir.resolve("psk");
        Files.write(key, PSK);
        return key;
    }

    private static RemoteCudaDriver connect(String uri, Path key) throws IOException {
        return RemoteCudaDriver.connect(FrontendConfig.fromEnvironment(Map.of(FrontendConfig.SERVER_ENV, uri,
                FrontendConfig.PSK_FILE_ENV, key.toString())));
    }

    /**
     * The program: {@link #ALLOCS} allocations of random data, then launches of {@link PreCopyTest#PTX}'s kernel,
     * each pass over a changing subset of them (allocation i in pass k when (7i + k) % 4 == 0), with its CPU model.
     */
    static final class Program {
        final RemoteCudaDriver d;
        final Cuda cu;
        final long fn;
        final long[] at = new long[ALLOCS];
        final int[][] model = new int[ALLOCS][];
        final AtomicBoolean stop = new AtomicBoolean();
        final AtomicReference<Throwable> failed = new AtomicReference<>();
        volatile int passes;
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
            fn = cu.function(c.get(JAVA_LONG, 0), "dirty");
            Random random = new Random(15);
            for (int i = 0; i < ALLOCS; i++) {
                at[i] = cu.alloc(ALLOC);
                byte[] data = new byte[ALLOC];
                random.nextBytes(data);
                cu.put(at[i], data);
                model[i] = ints(data);
            }
        }

        void start() {
            thread = Thread.ofPlatform().name("program").start(() -> {
                try {
                    cu.primaryContext();
                    for (int k = 0; !stop.get(); k++) {
                        int words = ALLOC / 4;
                        for (int i = 0; i < ALLOCS; i++) {
                            if ((7 * i + k) % 4 != 0) {
                                continue;
                            }
                            Cuda.ok(d.cuLaunchKernel(fn, words / 256, 1, 1, 256, 1, 1, 0, 0,
                                    cu.params(cu.u64(at[i]), cu.u32(words), cu.u32(k)), MemorySegment.NULL), "launch");
                            for (int w = 0; w < words; w++) {
                                if (((w >> 8) * 3 + k) % 5 == 0) {
                                    model[i][w] += k + 1;
                                }
                            }
                        }
                        Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
                        passes++;
                    }
                } catch (Throwable t) {
                    failed.set(t);
                }
            });
        }

        /** Waits for {@code n} more passes (bounded by the test's timeout). */
        void runs(int n) throws InterruptedException {
            int until = passes + n;
            while (passes < until && failed.get() == null) {
                Thread.sleep(5);
            }
            if (failed.get() != null) {
                throw new AssertionError("the program failed", failed.get());
            }
        }

        /** Stops the program thread (if started) and checks every allocation against the model. */
        void finish() throws InterruptedException {
            stop.set(true);
            if (thread != null) {
                thread.join();
            }
            if (failed.get() != null) {
                throw new AssertionError("the program failed", failed.get());
            }
            check();
        }

        void check() {
            cu.primaryContext();
            for (int i = 0; i < ALLOCS; i++) {
                assertArrayEquals(bytes(model[i]), cu.get(at[i], ALLOC), "allocation " + i + " after the run");
            }
        }

        /** Writes {@code value} into word 0 of allocation {@code i} through the session, and the model. */
        void write(int i, int value) {
            cu.primaryContext();
            model[i][0] = value;
            cu.put(at[i], ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(value).array());
        }
    }

    static int[] ints(byte[] data) {
        java.nio.IntBuffer ib = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
        int[] out = new int[ib.remaining()];
        ib.get(out);
        return out;
    }

    static byte[] bytes(int[] words) {
        byte[] out = new byte[words.length * 4];
        ByteBuffer.wrap(out).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().put(words);
        return out;
    }

    private static void awaitNoSessions(BackendServer s) throws InterruptedException {
        while (!s.sessions().isEmpty()) {
            Thread.sleep(10); // bounded by the test's timeout
        }
    }

    /** The rounds of {@code r} as "sent/chunks" per round, for messages. */
    private static List<String> sent(Migration.Result r) {
        List<String> out = new ArrayList<>();
        for (PreCopy.Round x : r.rounds()) {
            out.add(x.sentChunks() + "/" + x.chunks() + (x.drained() ? " (final)" : ""));
        }
        return out;
    }

    /**
     * A program connected over ring:// migrates A to B, back, and again, four times, the migration stream itself
     * over ring:// (both backends hold the same pre-shared key; the frontend follows to the target's ring), while it
     * dirties a changing subset of its allocations in every pass; at the end its memory equals its model (what an
     * uninterrupted run computes), each migration sent everything in its first round and ended with a drained final
     * round, and neither device holds memory afterwards. (How many chunks the final round resends depends on how many
     * passes the program made meanwhile: {@link #theFinalRoundResendsExactlyTheChunksChangedAtTheGateAndAChangeWrittenBackIsNotMissed}
     * counts them where the test decides the changes.)
     */
    @Test
    void aProgramOnRingMigratesBackAndForthOverRingWithItsDataIntact() throws Exception {
        Path key = keyFile();
        String ring = "ring://migration-" + ProcessHandle.current().pid();
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer serverA = server(a, PSK, Duration.ofSeconds(60));
             BackendServer serverB = server(b, PSK, Duration.ofSeconds(60))) {
            String ringA = serverA.listen(TransportUri.parse(ring + "-a")).toString();
            String ringB = serverB.listen(TransportUri.parse(ring + "-b")).toString();
            long freeA = free(a), freeB = free(b);
            try (RemoteCudaDriver d = connect(ringA, key)) {
                Program p = new Program(d);
                long id = onlySession(serverA);
                p.start();
                p.runs(2);
                BackendServer[] servers = {serverA, serverB};
                String[] uris = {ringA, ringB};
                for (int m = 0; m < 4; m++) {
                    BackendServer from = servers[m % 2];
                    String to = uris[(m + 1) % 2];
                    Migration.Result r = from.migrate(id, to, null, null);
                    List<String> rounds = sent(r);
                    assertTrue(r.rounds().size() >= 2 && r.rounds().getLast().drained(), rounds.toString());
                    assertEquals(ALLOCS, r.rounds().getFirst().chunks(), "one chunk per allocation: " + rounds);
                    assertEquals(ALLOCS, r.rounds().getFirst().sentChunks(), "round 0 sends everything: " + rounds);
                    p.runs(2); // on the target now
                    assertEquals(to, d.backendUri(), "migration " + m + ": the frontend follows the session");
                    awaitNoSessions(from);
                }
                assertEquals(2, serverA.migrations()[0]);
                assertEquals(2, serverB.migrations()[0]);
                assertTrue(d.backendUri().equals(ringA));
                p.finish();
            }
            awaitNoSessions(serverA);
            assertEquals(freeA, free(a), "device memory at A after the program");
            assertEquals(freeB, free(b), "device memory at B after the program left it");
        } finally {
            a.close();
            b.close();
        }
    }

    /**
     * The driver of a source backend, with a hook in the migration's hash-and-copy pass: when the chunk descriptors of
     * a pass that copies (a descriptor with a copy destination) name {@code plantAt}, the hook writes {@code plant}
     * there first, so the copy pass reads a value the round's hash pass did not see.
     */
    static final class PlantingDriver {
        final EmulatedDevice device = new EmulatedDevice();
        volatile long plantAt;
        volatile int plant;
        final AtomicInteger planted = new AtomicInteger();
        final CudaDriver driver = (CudaDriver) Proxy.newProxyInstance(CudaDriver.class.getClassLoader(),
                new Class<?>[] {CudaDriver.class}, (proxy, m, args) -> {
                    if (m.getDeclaringClass() == Object.class) {
                        return m.invoke(device, args);
                    }
                    if (m.getName().equals("cuMemcpyHtoDAsync") && plantAt != 0) {
                        MemorySegment descriptors = (MemorySegment) args[1];
                        long n = (Long) args[2];
                        for (long j = 0; n % 32 == 0 && j < n; j += 32) {
                            if (descriptors.get(JAVA_LONG, j) == plantAt && descriptors.get(JAVA_LONG, j + 16) != 0) {
                                try (Arena arena = Arena.ofConfined()) {
                                    MemorySegment v = arena.allocate(4);
                                    v.set(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, 0, plant);
                                    Cuda.ok(device.cuMemcpyHtoD(plantAt, v, 4), "planting");
                                }
                                plantAt = 0;
                                planted.incrementAndGet();
                                break;
                            }
                        }
                    }
                    try {
                        return m.invoke(device, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    /**
     * The program stops; the test drives what changes between rounds, through the migration's progress (a gate the
     * migration passes after each round). After round 0 (everything sent) it writes a new value B into chunk X; in
     * round 1 the hash pass sees B and, between it and the copy pass, the driver hook writes C, so the copy pass
     * sends C; after round 1 the test writes B back (ABA: the value round 1's hash pass saw). A pre-copy that
     * remembered the hash pass's hash instead of the copy pass's would now take X for unchanged and leave C at the
     * target. Then, at the gate after the last pre-copy round, the test changes three other chunks: the final round
     * must resend exactly those three, and the program, continuing at the target, must read its model everywhere.
     */
    @Test
    void theFinalRoundResendsExactlyTheChunksChangedAtTheGateAndAChangeWrittenBackIsNotMissed() throws Exception {
        PlantingDriver source = new PlantingDriver();
        EmulatedDevice b = new EmulatedDevice();
        try (BackendServer serverA = server(source.driver, null, Duration.ofSeconds(60));
             BackendServer serverB = server(b, null, Duration.ofSeconds(60))) {
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(unixA)) {
                Program p = new Program(d);
                long id = onlySession(serverA);
                int x = 0;
                int[] gate = {5, 9, 14};
                int valueA = p.model[x][0], valueB = valueA ^ 0x0b0b0b0b, valueC = valueA ^ 0x0c0c0c0c;
                List<String> seen = new java.util.concurrent.CopyOnWriteArrayList<>();
                int[] lastPreCopy = {0};
                Migration.Result r = serverA.migrate(id, unixB, null, (stage, done, total) -> {
                    if (!stage.equals("pre-copy")) {
                        return;
                    }
                    seen.add(stage + " " + done);
                    lastPreCopy[0] = (int) done;
                    if (done == 1) {
                        p.write(x, valueB);
                        source.plant = valueC;
                        source.plantAt = p.at[x];
                    } else if (done == 2) {
                        assertEquals(1, source.planted.get(), "round 1 copied X after its hash pass saw B");
                        p.write(x, valueB); // written back: what round 1's hash pass saw
                    } else if (done == 3) {
                        for (int i : gate) {
                            p.write(i, p.model[i][0] + 1);
                        }
                    }
                });
                List<String> rounds = sent(r);
                p.check(); // on B: X holds B, the gate's chunks their new words, everything else as it was
                assertEquals(unixB, d.backendUri(), "the frontend follows the session to B");
                assertEquals(1, source.planted.get(), "the hook planted its change: " + rounds);
                assertEquals(3, lastPreCopy[0], "three pre-copy rounds: " + seen + ", " + rounds);
                assertEquals(4, r.rounds().size(), rounds.toString());
                assertEquals(ALLOCS, r.rounds().get(0).sentChunks(), rounds.toString());
                assertEquals(1, r.rounds().get(1).sentChunks(), "round 1 sends X (as C): " + rounds);
                assertEquals(1, r.rounds().get(2).sentChunks(), "round 2 sends X again (B again, whose hash round 1's"
                        + " hash pass saw): " + rounds);
                PreCopy.Round last = r.rounds().getLast();
                assertTrue(last.drained());
                assertEquals(gate.length, last.sentChunks(), "the final round resends exactly the chunks changed at the"
                        + " gate: " + rounds);
                assertEquals((long) gate.length * ALLOC, last.sentBytes());
            }
        } finally {
            source.device.close();
            b.close();
        }
    }

    /**
     * A TCP proxy in front of a migration target that passes the handshake's two frames from the target (SERVER_HELLO,
     * WELCOME) and cuts both connections when the target's next frame (DONE) arrives: the target restored the
     * session, the source never hears it.
     */
    static final class DoneCutter implements AutoCloseable {
        final ServerSocketChannel listener;
        final AtomicBoolean cut = new AtomicBoolean();
        final Thread thread;

        DoneCutter(InetSocketAddress target) throws IOException {
            listener = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
            thread = Thread.ofPlatform().daemon().name("done-cutter").start(() -> {
                try (SocketChannel source = listener.accept(); SocketChannel to = SocketChannel.open(target)) {
                    Thread up = Thread.ofPlatform().daemon().start(() -> {
                        ByteBuffer buf = ByteBuffer.allocate(1 << 16);
                        try {
                            while (source.read(buf.clear()) >= 0) {
                                buf.flip();
                                while (buf.hasRemaining()) {
                                    to.write(buf);
                                }
                            }
                        } catch (IOException e) {
                            // cut
                        }
                    });
                    for (int frame = 0; ; frame++) {
                        ByteBuffer header = ByteBuffer.allocate(FrameHeader.BYTES).order(ByteOrder.LITTLE_ENDIAN);
                        readFully(to, header);
                        if (frame == 2) {
                            cut.set(true);
                            break; // DONE: both connections close here
                        }
                        ByteBuffer body = ByteBuffer.allocate(header.getInt(FrameHeader.LENGTH_OFFSET));
                        readFully(to, body);
                        source.write(header.flip());
                        source.write(body.flip());
                    }
                    source.close();
                    to.close();
                    up.join();
                } catch (IOException | InterruptedException e) {
                    // the test sees what did not happen
                }
            });
        }

        private static void readFully(SocketChannel ch, ByteBuffer b) throws IOException {
            while (b.hasRemaining()) {
                if (ch.read(b) < 0) {
                    throw new java.io.EOFException();
                }
            }
        }

        String uri() throws IOException {
            InetSocketAddress at = (InetSocketAddress) listener.getLocalAddress();
            return "tcp://127.0.0.1:" + at.getPort();
        }

        @Override
        public void close() throws IOException {
            listener.close();
        }
    }

    /** Free memory on {@code device} (a context of its own, for the query). */
    static long free(EmulatedDevice device) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ctx = arena.allocate(8), f = arena.allocate(8), t = arena.allocate(8);
            Cuda.ok(device.cuInit(0), "cuInit");
            Cuda.ok(device.cuCtxCreate_v2(ctx, 0, 0), "cuCtxCreate");
            try {
                Cuda.ok(device.cuMemGetInfo(f, t), "cuMemGetInfo");
                return f.get(JAVA_LONG, 0);
            } finally {
                device.cuCtxDestroy(ctx.get(JAVA_LONG, 0));
            }
        }
    }

    /**
     * The target restores the session and answers DONE, which a proxy cuts: the source's migrate fails, its drain
     * lets go and the program runs on there to a correct end; the target's restored copy waits detached (status
     * says so) until the grace period (the source's, carried in the image) ends, then ends; neither device holds
     * any memory afterwards beyond what it held before the program.
     */
    @Test
    void aLostDoneLeavesTheProgramAtTheSourceAndTheTargetsCopyEndsAfterItsGrace() throws Exception {
        Path key = keyFile();
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer serverA = server(a, PSK, Duration.ofSeconds(2));
             BackendServer serverB = server(b, PSK, Duration.ofSeconds(2))) {
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            TransportUri tcpB = serverB.listen(TransportUri.parse("tcp://127.0.0.1:0"));
            serverB.snapshot(); // status's device monitor makes its context (64 KiB on the emulated device) once, now
            long freeA = free(a), freeB = free(b);
            try (DoneCutter cutter = new DoneCutter(new InetSocketAddress("127.0.0.1", tcpB.port()));
                 RemoteCudaDriver d = connect(unixA, key)) {
                Program p = new Program(d);
                long id = onlySession(serverA);
                p.start();
                p.runs(2);
                IOException lost = assertThrows(IOException.class, () -> serverA.migrate(id, cutter.uri(), unixB, null));
                assertTrue(cutter.cut.get(), "the proxy cut the DONE: " + lost);
                assertEquals(1, serverA.migrations()[2], "one failed migration");
                // the target restored it before it answered: its copy waits detached
                assertEquals(List.of(id), serverB.sessions().stream().map(s -> s.id()).toList());
                String status = StatusJson.write(serverB.snapshot());
                assertTrue(status.contains("\"state\":\"detached\""), status);
                p.runs(3); // at the source, on
                assertEquals(unixA, d.backendUri(), "the frontend was never sent to the target");
                awaitNoSessions(serverB); // its grace period ends
                p.finish();
            }
            awaitNoSessions(serverA);
            assertEquals(freeA, free(a), "device memory at the source after the program");
            assertEquals(freeB, free(b), "device memory at the target after its copy ended");
        } finally {
            a.close();
            b.close();
        }
    }
}
