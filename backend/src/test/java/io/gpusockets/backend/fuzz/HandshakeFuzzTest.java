package io.gpusockets.backend.fuzz;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * Coverage-guided fuzzing (Jazzer) of the backend's handshake: a real {@link BackendServer} on a unix
 * socket in a temporary directory, on a {@link CappedGpu}, with a 500 ms handshake timeout. Each input
 * is what a peer sends after reading the SERVER_HELLO; the peer then half-closes, or (every
 * {@value #SILENT_EVERY}th input) stays silent until the server closes or welcomes it. The properties:
 * the server closes the connection (after a REFUSE, a WELCOME and a session that ends with the peer, or after
 * its resume grace of a second when resume was asked for, or nothing) within the handshake timeout plus a
 * generous margin, never hangs; no thread of it dies of an
 * uncaught exception and it logs no internal error; it holds no session and no device memory afterwards;
 * and a legitimate client is served afterwards (every {@value #LEGIT_EVERY} inputs and at the end).
 */
class HandshakeFuzzTest {
    static final long HANDSHAKE_MILLIS = 500;
    static final long CLOSE_WITHIN_MILLIS = HANDSHAKE_MILLIS + 10_000;
    static final int LEGIT_EVERY = 256;
    /** Every so many inputs the peer stays silent after sending: the handshake timeout must end it (it costs that long). */
    static final int SILENT_EVERY = 128;

    static final AtomicLong INPUTS = new AtomicLong();
    static final AtomicLong WELCOMED = new AtomicLong();
    static final AtomicLong REFUSED = new AtomicLong();
    static final List<String> UNCAUGHT = new CopyOnWriteArrayList<>();

    static Path dir;
    static Path socket;
    static CappedGpu gpu;
    static BackendServer server;
    static BackendLogs logs;
    static ScheduledExecutorService watchdog;
    static Thread.UncaughtExceptionHandler previousHandler;

    @BeforeAll
    static void start() throws IOException, InterruptedException {
        logs = BackendLogs.capture();
        previousHandler = Thread.getDefaultUncaughtExceptionHandler();
        Thread.setDefaultUncaughtExceptionHandler((t, e) -> UNCAUGHT.add(t.getName() + ": " + e));
        dir = Files.createTempDirectory("gpusockets-fuzz");
        socket = dir.resolve("backend.sock");
        gpu = new CappedGpu();
        BackendSettings settings = BackendSettings.fromProperties(new Properties(), 2)
                .withServer(null, Set.of(), Set.of(), HANDSHAKE_MILLIS, 0);
        server = new BackendServer(new DriverHost(gpu, "fuzz", 1, 13000), settings);
        // an input that asks for resume gets a session that waits detached this long after its peer goes
        server.resumeGrace(java.time.Duration.ofSeconds(1));
        server.listen(io.gpusockets.protocol.transport.TransportUri.parse("unix://" + socket));
        watchdog = Executors.newSingleThreadScheduledExecutor(Thread.ofPlatform().daemon().name("fuzz-watchdog").factory());
        // once before fuzzing: the classes of a whole session are loaded (and instrumented) outside the timeout
        legitimateClientServed();
    }

    @AfterAll
    static void stop() throws Exception {
        try {
            legitimateClientServed();
            assertNoLeftovers();
        } finally {
            System.out.println("fuzz HandshakeFuzzTest: " + INPUTS.get() + " inputs (" + WELCOMED.get() + " welcomed, "
                    + REFUSED.get() + " refused)");
            server.close();
            watchdog.shutdownNow();
            Thread.setDefaultUncaughtExceptionHandler(previousHandler);
            logs.close();
            Files.deleteIfExists(socket);
            Files.deleteIfExists(dir);
        }
    }

    @FuzzTest(maxDuration = "30s")
    void handshake(byte[] input) throws Exception {
        long n = INPUTS.incrementAndGet();

        boolean silent = n % SILENT_EVERY == 0;
        AtomicBoolean timedOut = new AtomicBoolean();
        try (SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX)) {
            ch.connect(UnixDomainSocketAddress.of(socket));
            ScheduledFuture<?> dog = watchdog.schedule(() -> {
                timedOut.set(true);
                closeQuietly(ch);
            }, CLOSE_WITHIN_MILLIS, TimeUnit.MILLISECONDS);
            try {
                FrameHeader hello = readFrameHeader(ch);
                assertEquals(Opcodes.SERVER_HELLO, hello.opcode());
                readBody(ch, hello.length());
                try {
                    ch.write(ByteBuffer.wrap(input));
                    if (!silent) {
                        ch.shutdownOutput();
                    }
                } catch (IOException e) {
                    // the server closed early (it refused what it had read): the reads below see that
                }
                if (readUntilClosed(ch, silent)) {
                    // welcomed: a session now, which no handshake timeout ends (an idle one is not this test's
                    // business), so the silent peer goes now and the session must end
                    ch.shutdownOutput();
                    readUntilClosed(ch);
                }
            } finally {
                dog.cancel(false);
            }
        }
        assertTrue(!timedOut.get(), "the server neither answered nor closed within " + CLOSE_WITHIN_MILLIS + " ms");
        awaitNoSession();
        assertNoLeftovers();
        if (n % LEGIT_EVERY == 0) {
            legitimateClientServed();
        }
    }

    /**
     * Reads the server's frames until it closes; counts WELCOME and REFUSE. Returns early, true, on a
     * WELCOME when the peer is silent (it would wait for ever otherwise); else false once closed.
     */
    private static boolean readUntilClosed(SocketChannel ch, boolean silent) {
        try {
            while (true) {
                FrameHeader h = readFrameHeader(ch);
                readBody(ch, h.length());
                if (h.opcode() == Opcodes.WELCOME) {
                    WELCOMED.incrementAndGet();
                    if (silent) {
                        return true;
                    }
                } else if (h.opcode() == Opcodes.REFUSE) {
                    REFUSED.incrementAndGet();
                }
            }
        } catch (IOException e) {
            return false; // closed: what the property wants
        }
    }

    private static void readUntilClosed(SocketChannel ch) {
        readUntilClosed(ch, false);
    }

    private static void awaitNoSession() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (server.sessionCount() != 0) {
            if (System.nanoTime() > deadline) {
                fail("a session is still held after its peer closed: sessions=" + server.sessionCount());
            }
            Thread.sleep(1);
        }
    }

    private static void assertNoLeftovers() throws InterruptedException {
        assertEquals(List.of(), UNCAUGHT, "uncaught exceptions in the backend's threads");
        assertEquals(List.of(), logs.takeErrors(), "internal errors logged by the backend");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (gpu.held() != null && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertNull(gpu.held(), "device resources held after every session ended");
    }

    /** A client as the frontend is: HELLO, WELCOME, cuDriverGetVersion answered with 13000, GOODBYE. */
    static void legitimateClientServed() throws IOException, InterruptedException {
        try (SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX)) {
            ch.connect(UnixDomainSocketAddress.of(socket));
            FrameHeader h = readFrameHeader(ch);
            Handshake.ServerHello sh = Handshake.ServerHello.decode(readBody(ch, h.length()));
            assertEquals(Handshake.AUTH_NONE, sh.authMethod());
            writeFrame(ch, Opcodes.HELLO, 0, 0, Handshake.Hello.decode(new Handshake.Hello(Handshake.PROTOCOL_VERSION,
                    0, "legitimate", new byte[0]).encode()).encode());
            try {
                h = readFrameHeader(ch);
            } catch (IOException e) {
                throw new AssertionError("a legitimate client was not welcomed (" + e + "); the backend logged:\n"
                        + logs.recent(), e);
            }
            assertEquals(Opcodes.WELCOME, h.opcode(), () -> "a legitimate client was not welcomed; the backend logged:\n"
                    + logs.recent());
            Handshake.Welcome.decode(readBody(ch, h.length()));
            int op = ApiTable.get().byName("cuDriverGetVersion").opcode();
            writeFrame(ch, op, 1, 77, ByteBuffer.allocate(0));
            h = readFrameHeader(ch);
            ByteBuffer reply = readBody(ch, h.length());
            assertEquals(op, h.opcode());
            assertEquals(77, h.requestId());
            assertEquals(0, reply.getInt(), "cuDriverGetVersion result");
            assertEquals(13000, reply.getInt());
            writeFrame(ch, Opcodes.GOODBYE, 0, 0, ByteBuffer.allocate(0));
            readUntilClosed(ch);
        }
        awaitNoSession();
    }

    static void writeFrame(SocketChannel ch, int opcode, int lane, long requestId, ByteBuffer body) throws IOException {
        ByteBuffer h = ByteBuffer.allocate(FrameHeader.BYTES).order(ByteOrder.LITTLE_ENDIAN)
                .putInt(body.remaining()).putInt(opcode).putInt(0).putInt(lane).putLong(requestId).flip();
        while (h.hasRemaining() || body.hasRemaining()) {
            ch.write(new ByteBuffer[]{h, body});
        }
    }

    static FrameHeader readFrameHeader(SocketChannel ch) throws IOException {
        ByteBuffer b = readBody(ch, FrameHeader.BYTES);
        return new FrameHeader(b.getInt(), b.getInt(), b.getInt(), b.getInt(), b.getLong());
    }

    static ByteBuffer readBody(SocketChannel ch, int length) throws IOException {
        if (length < 0 || length > (1 << 20)) {
            throw new IOException("frame length from the server out of range: " + length);
        }
        ByteBuffer b = ByteBuffer.allocate(length).order(ByteOrder.LITTLE_ENDIAN);
        while (b.hasRemaining()) {
            if (ch.read(b) < 0) {
                throw new java.io.EOFException("closed");
            }
        }
        return b.flip();
    }

    private static void closeQuietly(SocketChannel ch) {
        try {
            ch.close();
        } catch (IOException ignored) {
            // already closed
        }
    }
}
