package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.transport.TransportOptions;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Resume (issue 22, item 1): a proxy between a Java program (RemoteCudaDriver) and an in-process backend on
 * the emulated device cuts the connection at points drawn from a fixed seed (mid-call, mid-bulk-copy, between
 * pipelined launches, mid-frame); the program must finish with the right output, and the backend must have run
 * each of its calls exactly once (the driver calls counted against a run without cuts, and a kernel that adds
 * 1 in place, so a launch run twice or lost shows in the data). Tokens presented by another identity, after
 * the grace period, or guessed are refused and counted.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class ResumeTest {
    private static final int COPY_FLOATS = (3 << 20) / 4 + 123; // 3 MiB and a bit: several DATA frames each way
    private static final int KERNEL_N = 4096;                   // elements the kernel touches (emulated: keep it small)
    private static final int ROUNDS = 10;
    private static final int LAUNCHES = 6;

    /** The emulated device behind a proxy that counts the driver calls the backend makes. */
    static final class Counted {
        final EmulatedDevice device = new EmulatedDevice();
        final Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();
        /** Bytes the driver copied to the host (cuMemcpyDtoH, cuMemcpyDtoHAsync). */
        final AtomicLong bytesToHost = new AtomicLong();
        final CudaDriver driver = (CudaDriver) Proxy.newProxyInstance(CudaDriver.class.getClassLoader(),
                new Class<?>[] {CudaDriver.class}, (proxy, m, args) -> {
                    if (m.getDeclaringClass() == Object.class) {
                        return m.invoke(device, args);
                    }
                    calls.computeIfAbsent(m.getName(), k -> new AtomicInteger()).incrementAndGet();
                    if (m.getName().startsWith("cuMemcpyDtoH")) {
                        bytesToHost.addAndGet((Long) args[2]);
                    }
                    try {
                        return m.invoke(device, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });

        /** The program's own calls (launches, copies, allocations), by name. */
        Map<String, Integer> programCalls() {
            Map<String, Integer> m = new TreeMap<>();
            calls.forEach((k, v) -> {
                if (k.startsWith("cuLaunch") || k.startsWith("cuMemcpy") || k.startsWith("cuMemAlloc")
                        || k.startsWith("cuModuleLoad")) {
                    m.put(k, v.get());
                }
            });
            return m;
        }

        /**
         * {@link #programCalls}, but copies to the host as the bytes copied: how many driver calls a copy takes
         * depends on whether it goes through ring://'s shared window (a chunk per slot) or the byte stream
         * (double-buffered staging), and a resume changes that for the calls it resends.
         */
        Map<String, Long> programCallsCopiesToHostInBytes() {
            Map<String, Long> m = new TreeMap<>();
            programCalls().forEach((k, v) -> {
                if (!k.startsWith("cuMemcpyDtoH")) {
                    m.put(k, (long) v);
                }
            });
            m.put("bytes copied to the host", bytesToHost.get());
            return m;
        }
    }

    /**
     * Forwards connections to the backend and cuts the current one (both sides closed) once a byte budget drawn
     * from the seed is spent: the last piece forwarded is cut short, so a frame is left half sent.
     */
    static final class CuttingProxy implements AutoCloseable {
        final ServerSocketChannel server;
        final SocketAddress backend;
        final Random random;
        final long maxBudget;
        final AtomicLong budget = new AtomicLong(Long.MAX_VALUE);
        final AtomicInteger cuts = new AtomicInteger();
        volatile boolean armed;
        final String uri;

        CuttingProxy(String scheme, Path dir, SocketAddress backend, long seed, long maxBudget) throws IOException {
            this.backend = backend;
            this.random = new Random(seed);
            this.maxBudget = maxBudget;
            if (scheme.equals("unix")) {
                Path p = dir.resolve("proxy.sock");
                server = ServerSocketChannel.open(StandardProtocolFamily.UNIX).bind(UnixDomainSocketAddress.of(p));
                uri = "unix://" + p;
            } else {
                server = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
                uri = "tcp://127.0.0.1:" + ((InetSocketAddress) server.getLocalAddress()).getPort();
            }
            Thread.ofPlatform().daemon().name("cutting-proxy").start(this::acceptLoop);
        }

        void arm() {
            armed = true;
            budget.set(nextBudget());
        }

        private synchronized long nextBudget() {
            return 1 + (long) (random.nextDouble() * maxBudget);
        }

        private void acceptLoop() {
            while (server.isOpen()) {
                try {
                    SocketChannel front = server.accept();
                    SocketChannel back = SocketChannel.open(backend);
                    Thread.ofPlatform().daemon().start(() -> pump(front, back));
                    Thread.ofPlatform().daemon().start(() -> pump(back, front));
                } catch (IOException e) {
                    return;
                }
            }
        }

        private void pump(SocketChannel from, SocketChannel to) {
            ByteBuffer b = ByteBuffer.allocateDirect(64 << 10);
            try {
                while (true) {
                    b.clear();
                    if (from.read(b) < 0) {
                        break;
                    }
                    b.flip();
                    if (armed) {
                        long left = budget.addAndGet(-b.remaining());
                        if (left < 0) {
                            long keep = b.remaining() + left; // what the budget allowed of this piece
                            if (budget.compareAndSet(left, nextBudget())) {
                                b.limit((int) Math.max(0, keep));
                                while (b.hasRemaining()) {
                                    to.write(b);
                                }
                                cuts.incrementAndGet();
                                break;
                            }
                        }
                    }
                    while (b.hasRemaining()) {
                        to.write(b);
                    }
                }
            } catch (IOException ignored) {
                // the other pump cut it
            } finally {
                close(from);
                close(to);
            }
        }

        private static void close(SocketChannel c) {
            try {
                c.close();
            } catch (IOException ignored) {
                // closing anyway
            }
        }

        @Override
        public void close() throws IOException {
            server.close();
        }
    }

    /** The value round {@code r} copies in at element {@code i}: different each round, so a stale chunk shows. */
    private static float value(int r, int i) {
        return 1 + (i + r) % 5;
    }

    /**
     * The program: per round, copy a 3 MiB buffer in (waits; its values differ per round and element), six
     * pipelined launches that add it to x in place, a small pipelined copy in, a synchronize, and the buffers back
     * out (3 MiB twice and 4 KiB), every element checked against what the rounds so far must have made: a copy
     * either way that lost, repeated or misplaced a chunk across a cut shows.
     */
    private static void program(RemoteCudaDriver d) throws IOException {
        Cuda cu = new Cuda(d);
        cu.primaryContext();
        long fn = cu.function(cu.loadKernels(), "gpus_vector_add");
        long bytes = 4L * COPY_FLOATS;
        long x = cu.alloc(bytes), ones = cu.alloc(bytes), tag = cu.alloc(4L * 1024);
        Arena arena = Arena.ofConfined();
        MemorySegment host = arena.allocate(bytes, 16);
        for (int i = 0; i < COPY_FLOATS; i++) {
            host.setAtIndex(JAVA_FLOAT, i, 1f);
        }
        Cuda.ok(d.cuMemcpyHtoD(ones, host, bytes), "ones in");
        float[] sum = new float[KERNEL_N];
        MemorySegment zero = arena.allocate(bytes, 16);
        Cuda.ok(d.cuMemcpyHtoD(x, zero, bytes), "x in");
        MemorySegment params = cu.params(cu.u64(x), cu.u64(ones), cu.u64(x), cu.u32(KERNEL_N));
        MemorySegment small = arena.allocate(4L * 1024, 16);
        MemorySegment back = arena.allocate(bytes, 16);
        for (int r = 1; r <= ROUNDS; r++) {
            for (int i = 0; i < COPY_FLOATS; i++) {
                host.setAtIndex(JAVA_FLOAT, i, value(r, i));
            }
            for (int i = 0; i < KERNEL_N; i++) {
                sum[i] += LAUNCHES * value(r, i);
            }
            Cuda.ok(d.cuMemcpyHtoD(ones, host, bytes), "values in, round " + r);
            for (int k = 0; k < LAUNCHES; k++) {
                Cuda.ok(d.cuLaunchKernel(fn, KERNEL_N / 256, 1, 1, 256, 1, 1, 0, 0, params, MemorySegment.NULL), "launch");
            }
            for (int i = 0; i < 1024; i++) {
                small.setAtIndex(JAVA_FLOAT, i, r * 1000 + i);
            }
            Cuda.ok(d.cuMemcpyHtoDAsync(tag, small, 4L * 1024, 0), "small async copy in");
            Cuda.ok(d.cuCtxSynchronize(), "synchronize, round " + r);
            Cuda.ok(d.cuMemcpyDtoH(back, x, bytes), "x out, round " + r);
            for (int i = 0; i < COPY_FLOATS; i++) {
                float want = i < KERNEL_N ? sum[i] : 0f;
                if (back.getAtIndex(JAVA_FLOAT, i) != want) {
                    assertEquals(want, back.getAtIndex(JAVA_FLOAT, i), "x[" + i + "] after round " + r);
                }
            }
            Cuda.ok(d.cuMemcpyDtoH(back, ones, bytes), "values out, round " + r);
            long differs = back.mismatch(host);
            assertEquals(-1L, differs, "the values copied in and out again differ at byte " + differs + ", round " + r);
            MemorySegment tagBack = arena.allocate(4L * 1024, 16);
            Cuda.ok(d.cuMemcpyDtoH(tagBack, tag, 4L * 1024), "tag out");
            for (int i = 0; i < 1024; i++) {
                assertEquals((float) r * 1000 + i, tagBack.getAtIndex(JAVA_FLOAT, i), "tag[" + i + "], round " + r);
            }
        }
        arena.close();
    }

    private static SocketAddress socketAddress(TransportUri bound) {
        String s = bound.toString();
        if (s.startsWith("unix://")) {
            return UnixDomainSocketAddress.of(s.substring("unix://".length()));
        }
        String hostPort = s.substring("tcp://".length());
        int colon = hostPort.lastIndexOf(':');
        return new InetSocketAddress(hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)));
    }

    @ParameterizedTest
    @ValueSource(strings = {"tcp", "unix"})
    void programFinishesRightThroughCutsAndEachCallRunsOnce(String scheme) throws Exception {
        Path dir = Files.createTempDirectory("gpusockets-resume");
        Counted clean = new Counted(), cut = new Counted();
        String was = System.setProperty("gpusockets.resume", "true");
        try {
            // the same program without cuts: how many driver calls it makes
            try (BackendServer server = server(clean, scheme, dir, "a");
                 CuttingProxy proxy = new CuttingProxy(scheme, dir.resolve("a"), socketAddress(server.addresses().get(0)), 1, 1)) {
                try (RemoteCudaDriver d = RemoteCudaDriver.connect(proxy.uri)) {
                    program(d);
                }
                CopyOutStagingTest.awaitNoSessions(server);
            }
            int cuts;
            long resumed;
            try (BackendServer server = server(cut, scheme, dir, "b");
                 CuttingProxy proxy = new CuttingProxy(scheme, dir.resolve("b"), socketAddress(server.addresses().get(0)),
                         22, 12L << 20)) {
                try (RemoteCudaDriver d = RemoteCudaDriver.connect(proxy.uri)) {
                    proxy.arm();
                    program(d);
                    proxy.armed = false;
                }
                CopyOutStagingTest.awaitNoSessions(server);
                cuts = proxy.cuts.get();
                resumed = server.resumesAccepted();
            }
            assertTrue(cuts >= 3, "the proxy cut the connection only " + cuts + " times");
            assertTrue(resumed >= cuts, cuts + " cuts, " + resumed + " resumes");
            assertEquals(clean.programCalls(), cut.programCalls(), "driver calls the backend made, without and with "
                    + cuts + " cuts");
            assertEquals(ROUNDS * LAUNCHES, cut.programCalls().get("cuLaunchKernel"));
        } finally {
            if (was == null) {
                System.clearProperty("gpusockets.resume");
            } else {
                System.setProperty("gpusockets.resume", was);
            }
            clean.device.close();
            cut.device.close();
        }
    }

    /**
     * Isolation mode process (the default): the session lives in a worker process; each resuming connection is
     * checked by the front and handed to that worker. The program's data show a launch lost or run twice; the
     * backend's log shows each resuming connection handed to the session's worker.
     */
    @ParameterizedTest
    @ValueSource(strings = {"tcp", "unix"})
    void aSessionInAWorkerProcessResumesThroughCuts(String scheme) throws Exception {
        String was = System.setProperty("gpusockets.resume", "true");
        try (BackendProcess b = BackendProcess.start("--isolation", "process", "--idle-workers", "1", "--resume-grace", "30")) {
            SocketAddress backend = socketAddress(TransportUri.parse(scheme.equals("tcp") ? b.tcp() : b.unix()));
            int cuts;
            try (CuttingProxy proxy = new CuttingProxy(scheme, Files.createTempDirectory("gpusockets-resume"), backend, 7,
                    12L << 20)) {
                try (RemoteCudaDriver d = RemoteCudaDriver.connect(proxy.uri)) {
                    proxy.arm();
                    program(d);
                    proxy.armed = false;
                } catch (AssertionError e) {
                    throw new AssertionError(e.getMessage() + " after " + proxy.cuts.get() + " cuts; the backend said:\n"
                            + String.join("\n", b.output()), e);
                }
                cuts = proxy.cuts.get();
            }
            assertTrue(cuts >= 3, "the proxy cut the connection only " + cuts + " times");
            long handed = 0;
            for (int i = 0; i < 500 && handed < cuts; i++) {
                handed = b.output().stream().filter(l -> l.contains("resuming connection from") && l.contains("handed to worker"))
                        .count();
                Thread.sleep(10);
            }
            assertTrue(handed >= cuts, cuts + " cuts, " + handed + " resuming connections handed to the worker:\n"
                    + String.join("\n", b.output()));
        } finally {
            if (was == null) {
                System.clearProperty("gpusockets.resume");
            } else {
                System.setProperty("gpusockets.resume", was);
            }
        }
    }

    /**
     * ring:// (no proxy can sit in shared memory): the program's own connection is dropped at seeded moments
     * ({@link RemoteCudaDriver#dropConnection}); each drop makes a new ring, and the session resumes on it with its
     * calls run exactly once. The copies go through the ring's shared window, which each resume re-creates on the
     * new ring: bytes went through windows taken at resumes, and some drops came mid-copy through the window
     * (the runs go on until one did), whose data still check out to the byte.
     */
    @Test
    void aRingSessionResumesOnANewRing() throws Exception {
        Counted clean = new Counted(), cut = new Counted();
        String was = System.setProperty("gpusockets.resume", "true");
        String ring = "ring://resume-" + ProcessHandle.current().pid();
        try {
            try (BackendServer server = new BackendServer(DriverHost.initialise(clean.driver, "emulated (counted)"),
                    BackendSettings.fromSystemProperties())) {
                server.resumeGrace(Duration.ofSeconds(30));
                server.listen(TransportUri.parse(ring + "-a"));
                try (RemoteCudaDriver d = RemoteCudaDriver.connect(ring + "-a")) {
                    program(d);
                }
                CopyOutStagingTest.awaitNoSessions(server);
            }
            int drops = 0;
            int runs = 0;
            long resumed;
            long midCopy;
            long windowBytes;
            long resumedWindowBytes;
            try (BackendServer server = new BackendServer(DriverHost.initialise(cut.driver, "emulated (counted)"),
                    BackendSettings.fromSystemProperties())) {
                server.resumeGrace(Duration.ofSeconds(30));
                server.listen(TransportUri.parse(ring + "-b"));
                try (RemoteCudaDriver d = RemoteCudaDriver.connect(ring + "-b")) {
                    java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();
                    AtomicInteger dropped = new AtomicInteger();
                    Thread cutter = Thread.ofPlatform().daemon().name("ring-cutter").start(() -> {
                        Random r = new Random(5);
                        while (!done.get()) {
                            try {
                                Thread.sleep(10 + r.nextInt(60));
                            } catch (InterruptedException e) {
                                return;
                            }
                            if (!done.get()) {
                                d.dropConnection();
                                dropped.incrementAndGet();
                            }
                        }
                    });
                    try {
                        // again until the cutter dropped the connection three times: how long one run takes depends
                        // on the machine, the cutter's pauses do not
                        assertTrue(d.sharedWindow(), "the resumable ring session has no shared window");
                        do {
                            program(d);
                            runs++;
                        } while ((dropped.get() < 3 || d.resumesDuringWindowCopies() < 1) && runs < 100);
                        assertTrue(d.sharedWindow(), "the session has no shared window after " + d.resumes() + " resumes");
                    } finally {
                        done.set(true);
                        cutter.join();
                    }
                    drops = dropped.get();
                    midCopy = d.resumesDuringWindowCopies();
                }
                CopyOutStagingTest.awaitNoSessions(server);
                resumed = server.resumesAccepted();
                windowBytes = server.windowBytesCarried();
                resumedWindowBytes = server.resumedWindowBytesCarried();
            }
            System.out.println("ResumeTest ring: " + runs + " runs, " + drops + " drops, " + resumed + " resumes ("
                    + midCopy + " mid-copy through the window); " + windowBytes + " bytes through shared windows, "
                    + resumedWindowBytes + " through windows re-created at resumes");
            assertTrue(drops >= 3, "the connection was dropped only " + drops + " times");
            assertTrue(resumed >= 3 && resumed <= drops, drops + " drops, " + resumed + " resumes");
            assertTrue(midCopy >= 1, "no drop came while a copy went through the window (" + runs + " runs)");
            assertTrue(resumedWindowBytes >= 3L * COPY_FLOATS * 4, "only " + resumedWindowBytes
                    + " bytes went through windows re-created at resumes: the resumed session does without the window");
            int times = runs;
            Map<String, Long> expected = new TreeMap<>();
            clean.programCallsCopiesToHostInBytes().forEach((name, n) -> expected.put(name, n * times));
            Map<String, Long> got = new TreeMap<>(cut.programCallsCopiesToHostInBytes());
            // the backend's page-locked staging is made once per session, not per run
            assertEquals(expected.getOrDefault("cuMemAllocHost", 0L), got.getOrDefault("cuMemAllocHost", 0L) * times,
                    "staging allocations");
            expected.remove("cuMemAllocHost");
            got.remove("cuMemAllocHost");
            assertEquals(expected, got, "driver calls of " + runs + " uncut runs and of " + runs + " runs with " + drops + " drops");
        } finally {
            if (was == null) {
                System.clearProperty("gpusockets.resume");
            } else {
                System.setProperty("gpusockets.resume", was);
            }
            clean.device.close();
            cut.device.close();
        }
    }

    /**
     * ring:// in isolation mode process: the ring crosses to the session's worker whole, shared window included,
     * and so does each resuming connection's new ring (the front grants the window again only because it does).
     * The program's connection is dropped at seeded moments until a drop came mid-copy through the window; its data
     * check out, each resuming connection was handed to the worker, and the session still has a window.
     */
    @Test
    void aRingSessionInAWorkerProcessResumesWithItsWindow() throws Exception {
        String was = System.setProperty("gpusockets.resume", "true");
        String ring = "ring://resume-worker-" + ProcessHandle.current().pid();
        try (BackendProcess b = BackendProcess.start("--isolation", "process", "--idle-workers", "1", "--resume-grace", "30",
                "--listen", ring)) {
            long resumes;
            long midCopy;
            int drops;
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(b.address("ring"))) {
                assertTrue(d.sharedWindow(), "the resumable ring session in a worker has no shared window");
                java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();
                AtomicInteger dropped = new AtomicInteger();
                Thread cutter = Thread.ofPlatform().daemon().name("ring-cutter").start(() -> {
                    Random r = new Random(11);
                    while (!done.get()) {
                        try {
                            Thread.sleep(20 + r.nextInt(80));
                        } catch (InterruptedException e) {
                            return;
                        }
                        if (!done.get()) {
                            d.dropConnection();
                            dropped.incrementAndGet();
                        }
                    }
                });
                int runs = 0;
                try {
                    do {
                        program(d);
                        runs++;
                    } while ((dropped.get() < 3 || d.resumesDuringWindowCopies() < 1) && runs < 50);
                } catch (AssertionError e) {
                    throw new AssertionError(e.getMessage() + " after " + dropped.get() + " drops; the backend said:\n"
                            + String.join("\n", b.output()), e);
                } finally {
                    done.set(true);
                    cutter.join();
                }
                assertTrue(d.sharedWindow(), "the session has no shared window after " + d.resumes() + " resumes");
                resumes = d.resumes();
                midCopy = d.resumesDuringWindowCopies();
                drops = dropped.get();
            }
            assertTrue(resumes >= 3 && midCopy >= 1, drops + " drops, " + resumes + " resumes, " + midCopy
                    + " mid-copy through the window");
            long handed = 0;
            for (int i = 0; i < 500 && handed < resumes; i++) {
                handed = b.output().stream().filter(l -> l.contains("resuming connection from") && l.contains("handed to worker"))
                        .count();
                Thread.sleep(10);
            }
            assertTrue(handed >= resumes, resumes + " resumes, " + handed + " resuming connections handed to the worker:\n"
                    + String.join("\n", b.output()));
        } finally {
            if (was == null) {
                System.clearProperty("gpusockets.resume");
            } else {
                System.setProperty("gpusockets.resume", was);
            }
        }
    }

    private static BackendServer server(Counted c, String scheme, Path dir, String name) throws IOException {
        Files.createDirectories(dir.resolve(name));
        BackendServer s = new BackendServer(DriverHost.initialise(c.driver, "emulated (counted)"),
                BackendSettings.fromSystemProperties());
        s.resumeGrace(Duration.ofSeconds(30));
        s.listen(TransportUri.parse(scheme.equals("unix") ? "unix://" + dir.resolve(name).resolve("b.sock") : "tcp://127.0.0.1:0"));
        return s;
    }

    /** A raw handshake asking for resume; returns the WELCOME, or throws with the REFUSE reason. */
    static Handshake.Welcome hello(String uri, byte[] psk, String identity, byte[] token, FrameChannel[] keep)
            throws IOException {
        FrameChannel ch = new FrameChannel(Transports.connect(TransportUri.parse(uri), Duration.ofSeconds(5), TransportOptions.NONE));
        FrameHeader h = ch.readHeader();
        Handshake.ServerHello sh = Handshake.ServerHello.decode(ch.readBody(h.length()));
        ch.send(Opcodes.HELLO, 0, 0, 0, new Handshake.Hello(Handshake.PROTOCOL_VERSION, Handshake.FEATURE_RESUME, identity,
                psk.length == 0 ? new byte[0] : Handshake.proof(psk, sh.nonce(), identity), token).encode());
        h = ch.readHeader();
        if (h.opcode() == Opcodes.REFUSE) {
            String why = Handshake.readString(ch.readBody(h.length()));
            ch.close();
            throw new IOException(why);
        }
        Handshake.Welcome w = Handshake.Welcome.decode(ch.readBody(h.length()));
        keep[0] = ch;
        return w;
    }

    private static String refusal(String uri, byte[] psk, String identity, byte[] token) {
        try {
            FrameChannel[] keep = new FrameChannel[1];
            hello(uri, psk, identity, token, keep);
            keep[0].close();
            return null;
        } catch (IOException e) {
            return e.getMessage();
        }
    }

    @Test
    void tokensOfAnotherIdentityAfterTheGraceOrGuessedAreRefused() throws Exception {
        EmulatedDevice device = new EmulatedDevice();
        try (BackendServer server = pskServer(device)) {
            server.resumeGrace(Duration.ofSeconds(1));
            String uri = server.listen(TransportUri.parse("tcp://127.0.0.1:0")).toString();
            FrameChannel[] alice = new FrameChannel[1];
            Handshake.Welcome w = hello(uri, PSK, "alice", new byte[0], alice);
            assertTrue((w.features() & Handshake.FEATURE_RESUME) != 0, "resume granted");
            assertEquals(Handshake.TOKEN_BYTES, w.resumeToken().length);
            alice[0].close(); // the session is detached now, waiting a second

            String other = refusal(uri, PSK, "mallory", w.resumeToken());
            assertTrue(other != null && other.contains("another identity"), String.valueOf(other));
            byte[] guess = w.resumeToken().clone();
            guess[5] ^= 1;
            String guessed = refusal(uri, PSK, "alice", guess);
            assertTrue(guessed != null && guessed.contains("unknown or expired"), String.valueOf(guessed));

            CopyOutStagingTest.awaitNoSessions(server); // the grace runs out: the session ends
            String late = refusal(uri, PSK, "alice", w.resumeToken());
            assertTrue(late != null && late.contains("unknown or expired"), String.valueOf(late));
            assertEquals(3, server.resumeRefusals());
            assertEquals(0, server.resumesAccepted());
        } finally {
            device.close();
        }
    }

    /** A tenant's own resume-grace decides its sessions' grace over --resume-grace; 0 grants no resume. */
    @Test
    void aTenantsResumeGraceOverridesTheBackends() throws Exception {
        EmulatedDevice device = new EmulatedDevice();
        var tenants = new io.gpusockets.backend.tenant.TenantRegistry(io.gpusockets.backend.tenant.TenantConfig.parse(
                Path.of("tenants.conf"), "[tenant brief]\nmatch = uid:" + uid() + "\nresume-grace = 5\n"));
        var none = new io.gpusockets.backend.tenant.TenantRegistry(io.gpusockets.backend.tenant.TenantConfig.parse(
                Path.of("tenants.conf"), "[tenant none]\nmatch = uid:" + uid() + "\nresume-grace = 0\n"));
        Path dir = Files.createTempDirectory("gpusockets-resume");
        try (BackendServer brief = new BackendServer(DriverHost.initialise(device, "emulated"),
                BackendSettings.fromSystemProperties(), tenants);
             BackendServer off = new BackendServer(DriverHost.initialise(device, "emulated"),
                     BackendSettings.fromSystemProperties(), none)) {
            brief.resumeGrace(Duration.ofSeconds(60));
            off.resumeGrace(Duration.ofSeconds(60));
            String a = brief.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String b = off.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            FrameChannel[] ch = new FrameChannel[1];
            Handshake.Welcome w = hello(a, new byte[0], "", new byte[0], ch);
            assertTrue((w.features() & Handshake.FEATURE_RESUME) != 0, "resume granted");
            assertEquals(5, w.graceSeconds(), "the tenant's grace, not the backend's 60 s");
            ch[0].send(Opcodes.GOODBYE, 0, 0, 0);
            ch[0].close();
            w = hello(b, new byte[0], "", new byte[0], ch);
            assertEquals(0, w.features() & Handshake.FEATURE_RESUME, "resume-grace = 0: no resume");
            assertEquals(0, w.resumeToken().length);
            ch[0].send(Opcodes.GOODBYE, 0, 0, 0);
            ch[0].close();
            CopyOutStagingTest.awaitNoSessions(brief);
            CopyOutStagingTest.awaitNoSessions(off);
        } finally {
            device.close();
        }
    }

    private static final byte[] PSK = "a pre-shared key for the resume test".getBytes(java.nio.charset.StandardCharsets.UTF_8);

    /** A backend on {@code device} that asks every peer for {@link #PSK}. */
    private static BackendServer pskServer(EmulatedDevice device) {
        BackendSettings settings = BackendSettings.fromSystemProperties();
        settings = settings.withServer(PSK, settings.allowedUids(), settings.allowedCids(), settings.handshakeMillis(),
                settings.warmContexts());
        return new BackendServer(DriverHost.initialise(device, "emulated"), settings);
    }

    private static long uid() throws IOException {
        return ((Number) Files.getAttribute(Path.of("/proc/self"), "unix:uid")).longValue();
    }

    @Test
    void theRightIdentityResumesWithinTheGrace() throws Exception {
        EmulatedDevice device = new EmulatedDevice();
        try (BackendServer server = pskServer(device)) {
            server.resumeGrace(Duration.ofSeconds(20));
            String uri = server.listen(TransportUri.parse("tcp://127.0.0.1:0")).toString();
            FrameChannel[] ch = new FrameChannel[1];
            Handshake.Welcome w = hello(uri, PSK, "alice", new byte[0], ch);
            ch[0].close();
            // detached: still a session of its tenant, and status says it waits
            String peer = "";
            for (int i = 0; i < 500 && !peer.contains("[detached"); i++) {
                Thread.sleep(10);
                peer = server.sessions().isEmpty() ? "" : server.sessions().get(0).peer();
            }
            assertTrue(peer.contains("[detached: peer closed the connection]"), peer);
            assertEquals(1, server.sessionCount());
            Handshake.Welcome again = hello(uri, PSK, "alice", w.resumeToken(), ch);
            assertEquals(w.sessionId(), again.sessionId());
            FrameHeader h = ch[0].readHeader();
            assertEquals(Opcodes.RESUMED, h.opcode());
            Handshake.ResumeState st = Handshake.ResumeState.decode(ch[0].readBody(h.length()));
            assertEquals(Map.of(), st.lanes());
            // counted once the session has the connection, which is just after RESUMED went out
            for (int i = 0; i < 500 && server.resumesAccepted() == 0; i++) {
                Thread.sleep(10);
            }
            assertEquals(1, server.resumesAccepted());
            assertEquals(1, server.sessionCount(), "one session, resumed");
            ch[0].send(Opcodes.GOODBYE, 0, 0, 0);
            ch[0].close();
            CopyOutStagingTest.awaitNoSessions(server);
        } finally {
            device.close();
        }
    }
}
