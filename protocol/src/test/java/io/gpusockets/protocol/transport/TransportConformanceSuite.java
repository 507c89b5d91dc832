package io.gpusockets.protocol.transport;

import static io.gpusockets.protocol.transport.ThreadProbes.assertStillBlocked;
import static io.gpusockets.protocol.transport.ThreadProbes.awaitStall;
import static io.gpusockets.protocol.transport.ThreadProbes.failureOf;
import static io.gpusockets.protocol.transport.ThreadProbes.resultOf;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The behaviour every transport owes the protocol (DESIGN.md §7), checked through {@link FrameChannel}
 * over the transport's {@link Connection}s. A transport module runs it by extending this class and
 * supplying a fresh listen address per test.
 *
 * <p>Every test has a timeout: a transport that hangs fails instead of stalling the build. Background
 * work runs on virtual threads, as backend lanes do; the tests of a thread blocked in the transport run
 * on platform threads too (frontend callers are platform threads, and the JDK unblocks the two kinds
 * by different means).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
public abstract class TransportConformanceSuite {
    protected static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(5);
    /** An API-range opcode (not control) for test frames. */
    private static final int OPCODE = 0x0C0FFEE0;

    private Transport transport;
    private Listener listener;
    private ExecutorService threads;
    private ExecutorService platformThreads;
    private final Deque<AutoCloseable> opened = new ConcurrentLinkedDeque<>();

    /** A listen address no other test uses, e.g. {@code tcp://127.0.0.1:0} or a socket in a temp dir. */
    protected abstract TransportUri listenUri();

    /** The transport under test; by default whatever {@link Transports} finds for the URI's scheme. */
    protected Transport transportFor(TransportUri uri) {
        return Transports.forUri(uri);
    }

    /**
     * The most bytes a writer may get rid of while nobody reads: the transport's own buffering (kernel
     * socket buffers, a ring) plus slack. A transport that queues without bound fails the back-pressure test.
     */
    protected long maxBufferedBytes() {
        return 16L << 20;
    }

    /**
     * How long {@link #servesManyConnectionsAtOnce} waits for each of its 64 clients, which connect at
     * once: a transport whose connection set-up costs CPU (a TLS handshake) needs more on a busy machine.
     */
    protected Duration connectionSetUpBudget() {
        return ThreadProbes.PROMPTLY;
    }

    @BeforeEach
    final void openListener() throws IOException {
        TransportUri uri = listenUri();
        transport = transportFor(uri);
        threads = Executors.newVirtualThreadPerTaskExecutor();
        platformThreads = Executors.newThreadPerTaskExecutor(Thread.ofPlatform().daemon().name("conformance-", 0).factory());
        listener = opened(transport.listen(uri));
    }

    @AfterEach
    final void closeEverything() throws InterruptedException {
        for (AutoCloseable c; (c = opened.pollLast()) != null; ) {
            try {
                c.close();
            } catch (Exception ignored) {
                // teardown: the test's verdict is already in
            }
        }
        for (ExecutorService executor : List.of(threads, platformThreads)) {
            executor.shutdownNow();
            assertTrue(executor.awaitTermination(10, TimeUnit.SECONDS), "threads still blocked after every close");
        }
    }

    /** Which kind of thread blocks in the transport. */
    protected enum ThreadKind { VIRTUAL, PLATFORM }

    private ExecutorService on(ThreadKind kind) {
        return kind == ThreadKind.VIRTUAL ? threads : platformThreads;
    }

    // ---- ordering and integrity ----

    @Test
    @Timeout(30)
    void keepsFrameOrderPerLaneWithLanesInterleaved() throws Exception {
        Link link = link();
        int lanes = 5;
        int count = 4000;
        Random random = new Random(42);
        int[] laneOf = new int[count];
        int[] sizeOf = new int[count];
        for (int i = 0; i < count; i++) {
            laneOf[i] = random.nextInt(lanes);
            sizeOf[i] = random.nextInt(8) == 0 ? 0 : random.nextInt(3000);
        }
        Future<?> writer = threads.submit(() -> {
            long[] seq = new long[lanes];
            for (int i = 0; i < count; i++) {
                int lane = laneOf[i];
                link.client().send(OPCODE, 0, lane, seq[lane], FramePattern.of(lane, seq[lane]++, sizeOf[i]));
            }
            return null;
        });
        long[] expected = new long[lanes];
        for (int i = 0; i < count; i++) {
            Frame f = receive(link.server());
            int lane = f.header().lane();
            assertEquals(laneOf[i], lane, "frame " + i + " lane");
            assertEquals(expected[lane]++, f.header().requestId(), "frame " + i + " out of order on lane " + lane);
            assertEquals(OPCODE, f.header().opcode(), "frame " + i + " opcode");
            assertEquals(sizeOf[i], f.header().length(), "frame " + i + " length");
            assertPattern(f);
        }
        resultOf(writer, "writer");
    }

    @Test
    @Timeout(60)
    void concurrentWritersNeverInterleaveFrames() throws Exception {
        Link link = link();
        int writers = 8;
        int perWriter = 14;
        // up to the maximum body: larger than a loopback TCP socket hands over in one syscall
        int[] sizes = {0, 1, 100, 4096, 65_539, 1_048_577, FrameChannel.DEFAULT_MAX_BODY};
        AtomicLong sent = new AtomicLong();
        List<Future<?>> sending = new ArrayList<>();
        for (int w = 0; w < writers; w++) {
            int lane = w;
            sending.add(threads.submit(() -> {
                for (int seq = 0; seq < perWriter; seq++) {
                    ByteBuffer body = FramePattern.of(lane, seq, sizes[(seq + lane) % sizes.length]);
                    link.client().send(OPCODE, 0, lane, seq, body);
                    sent.addAndGet(body.capacity());
                }
                return null;
            }));
        }
        // Let the pipe fill first: then every writer is blocked and its frame goes out in pieces as the
        // reader drains, which is where a missing write lock shows up as interleaved bytes.
        awaitStall(sent::get);
        long[] next = new long[writers];
        for (int i = 0; i < writers * perWriter; i++) {
            Frame f = receive(link.server());
            int lane = f.header().lane();
            assertTrue(lane >= 0 && lane < writers, "unknown lane " + lane + " in frame " + i);
            long seq = next[lane]++;
            assertEquals(seq, f.header().requestId(), "lane " + lane + " out of order");
            assertEquals(sizes[(int) ((seq + lane) % sizes.length)], f.header().length(), "lane " + lane + " seq " + seq);
            assertPattern(f);
        }
        for (Future<?> s : sending) {
            resultOf(s, "writer");
        }
    }

    @ParameterizedTest(name = "{0} bytes")
    @ValueSource(ints = {0, 1, 4095, 4096, 65537, 1 << 20, FrameChannel.DEFAULT_MAX_BODY})
    @Timeout(30)
    void echoesFramesOfEdgeSizes(int size) throws Exception {
        Link link = link();
        Future<?> echo = threads.submit(() -> {
            Frame f = receive(link.server());
            link.server().send(f.header().opcode(), FrameHeader.FLAG_REPLY, f.header().lane(), f.header().requestId(), f.body());
            return null;
        });
        link.client().send(OPCODE, 0, 3, 77, FramePattern.of(3, 77, size));
        Frame back = receive(link.client());
        assertTrue(back.header().isReply(), "reply flag");
        assertEquals(3, back.header().lane());
        assertEquals(77, back.header().requestId());
        assertEquals(size, back.header().length());
        assertPattern(back);
        resultOf(echo, "echo");
    }

    @Test
    @Timeout(60)
    void streams64MiBAsOneMiBFramesByteForByte() throws Exception {
        Link link = link();
        int chunk = FrameChannel.DEFAULT_CHUNK;
        int count = 64;
        int lane = 9;
        Future<?> writer = threads.submit(() -> {
            ByteBuffer body = ByteBuffer.allocateDirect(chunk);
            for (int seq = 0; seq < count; seq++) {
                FramePattern.fill(body.clear(), lane, seq).flip();
                link.client().send(Opcodes.DATA, 0, lane, seq, body);
            }
            return null;
        });
        ByteBuffer in = ByteBuffer.allocateDirect(chunk);
        for (int seq = 0; seq < count; seq++) {
            FrameHeader h = link.server().readHeader();
            assertEquals(chunk, h.length(), "chunk " + seq);
            assertEquals(seq, h.requestId(), "chunk order");
            link.server().readBody(in.clear());
            assertPattern(new Frame(h, in.flip()));
        }
        resultOf(writer, "writer");
    }

    // ---- peer death: the other side sees a clean error, never a hang ----

    @Test
    @Timeout(10)
    void readerSeesEofWhenPeerClosesBeforeSending() throws Exception {
        Link link = link();
        link.client().close();
        assertThrows(EOFException.class, () -> link.server().readHeader());
    }

    @Test
    @Timeout(10)
    void readerSeesCutWhenPeerDiesMidHeader() throws Exception {
        Link link = link();
        link.client().connection().write(ByteBuffer.allocate(FrameHeader.BYTES / 2));
        link.client().close();
        assertCut(assertThrows(IOException.class, () -> link.server().readHeader()));
    }

    @Test
    @Timeout(10)
    void readerSeesCutWhenPeerDiesBetweenHeaderAndBody() throws Exception {
        Link link = link();
        link.client().connection().write(rawHeader(1000));
        link.client().close();
        assertEquals(1000, link.server().readHeader().length());
        assertCut(assertThrows(IOException.class, () -> link.server().readBody(1000)));
    }

    @Test
    @Timeout(10)
    void readerSeesCutWhenPeerDiesMidBody() throws Exception {
        Link link = link();
        link.client().connection().write(rawHeader(1000), FramePattern.of(1, 1, 500));
        link.client().close();
        assertEquals(1000, link.server().readHeader().length());
        assertCut(assertThrows(IOException.class, () -> link.server().readBody(1000)));
    }

    @ParameterizedTest
    @EnumSource(ThreadKind.class)
    @Timeout(10)
    void blockedReaderSeesEofWhenPeerCloses(ThreadKind kind) throws Exception {
        Link link = link();
        Future<FrameHeader> reading = on(kind).submit(() -> link.client().readHeader());
        assertStillBlocked(reading, Duration.ofMillis(100), "read with nothing sent");
        link.server().close();
        assertInstanceOf(EOFException.class, failureOf(reading, "blocked read after the peer closed"));
    }

    @ParameterizedTest
    @EnumSource(ThreadKind.class)
    @Timeout(20)
    void blockedWriterFailsWhenPeerCloses(ThreadKind kind) throws Exception {
        Link link = link();
        AtomicLong sent = new AtomicLong();
        Future<?> writing = on(kind).submit(() -> floodUntilFailure(link.client(), sent));
        awaitStall(sent::get);
        assertFalse(writing.isDone(), "writer should be blocked on a full pipe");
        link.server().close();
        assertInstanceOf(IOException.class, failureOf(writing, "blocked write after the peer closed"));
    }

    @ParameterizedTest
    @EnumSource(ThreadKind.class)
    @Timeout(10)
    void closeUnblocksOwnBlockedReader(ThreadKind kind) throws Exception {
        Link link = link();
        Future<FrameHeader> reading = on(kind).submit(() -> link.client().readHeader());
        assertStillBlocked(reading, Duration.ofMillis(100), "read with nothing sent");
        link.client().close();
        assertInstanceOf(IOException.class, failureOf(reading, "blocked read after close()"));
    }

    @ParameterizedTest
    @EnumSource(ThreadKind.class)
    @Timeout(20)
    void closeUnblocksOwnBlockedWriter(ThreadKind kind) throws Exception {
        Link link = link();
        AtomicLong sent = new AtomicLong();
        Future<?> writing = on(kind).submit(() -> floodUntilFailure(link.client(), sent));
        awaitStall(sent::get);
        assertFalse(writing.isDone(), "writer should be blocked on a full pipe");
        link.client().close();
        assertInstanceOf(IOException.class, failureOf(writing, "blocked write after close()"));
    }

    // ---- the accepting end after its handshake: served by platform threads alone (Connection.platformThreadsOnly)

    /**
     * A handshake's exchange on a virtual thread, then {@link Connection#platformThreadsOnly}: a link
     * whose accepting end from then on is read and written by platform threads, as a backend session's.
     */
    private Link servedLink() throws Exception {
        Link link = link();
        Future<?> handshake = threads.submit(() -> {
            Frame hello = receive(link.server());
            link.server().send(hello.header().opcode(), FrameHeader.FLAG_REPLY, 0, hello.header().requestId(), hello.body());
            link.server().connection().platformThreadsOnly();
            return null;
        });
        link.client().send(OPCODE, 0, 0, 1, FramePattern.of(0, 1, 48));
        assertPattern(receive(link.client()));
        resultOf(handshake, "handshake on a virtual thread");
        return link;
    }

    @Test
    @Timeout(30)
    void servedByPlatformThreadsAfterAHandshakeOnAVirtualThread() throws Exception {
        Link link = servedLink();
        Future<?> echo = platformThreads.submit(() -> {
            for (int i = 0; i < 200; i++) {
                Frame f = receive(link.server());
                link.server().send(f.header().opcode(), FrameHeader.FLAG_REPLY, f.header().lane(), f.header().requestId(), f.body());
            }
            return null;
        });
        for (int i = 0; i < 200; i++) {
            int size = i % 2 == 0 ? 64 : 1 << 20;
            link.client().send(OPCODE, 0, 1, i, FramePattern.of(1, i, size));
            Frame back = receive(link.client());
            assertEquals(i, back.header().requestId());
            assertEquals(size, back.header().length());
            assertPattern(back);
        }
        resultOf(echo, "echo on a platform thread");
    }

    @Test
    @Timeout(10)
    void closeUnblocksAServedEndsBlockedReader() throws Exception {
        Link link = servedLink();
        Future<FrameHeader> reading = platformThreads.submit(() -> link.server().readHeader());
        assertStillBlocked(reading, Duration.ofMillis(100), "read with nothing sent");
        link.server().close();
        assertInstanceOf(IOException.class, failureOf(reading, "blocked read after close()"));
    }

    @Test
    @Timeout(20)
    void closeUnblocksAServedEndsBlockedWriter() throws Exception {
        Link link = servedLink();
        AtomicLong sent = new AtomicLong();
        Future<?> writing = platformThreads.submit(() -> floodUntilFailure(link.server(), sent));
        awaitStall(sent::get);
        assertFalse(writing.isDone(), "writer should be blocked on a full pipe");
        link.server().close();
        assertInstanceOf(IOException.class, failureOf(writing, "blocked write after close()"));
    }

    @Test
    @Timeout(10)
    void aServedEndsBlockedReaderSeesEofWhenPeerCloses() throws Exception {
        Link link = servedLink();
        Future<FrameHeader> reading = platformThreads.submit(() -> link.server().readHeader());
        assertStillBlocked(reading, Duration.ofMillis(100), "read with nothing sent");
        link.client().close();
        assertInstanceOf(EOFException.class, failureOf(reading, "blocked read after the peer closed"));
    }

    @Test
    @Timeout(10)
    void closeUnblocksAnAcceptingEndsReadWaitingInItsHandshake() throws Exception {
        Link link = link();
        Future<FrameHeader> reading = threads.submit(() -> link.server().readHeader());
        assertStillBlocked(reading, Duration.ofMillis(100), "handshake read with nothing sent");
        link.server().close();
        assertInstanceOf(IOException.class, failureOf(reading, "handshake read after close()"));
    }

    @Test
    @Timeout(10)
    void closedConnectionRefusesIoAndClosesAgainQuietly() throws Exception {
        Link link = link();
        link.client().close();
        link.client().close();
        assertThrows(IOException.class, () -> link.client().send(OPCODE, 0, 0, 0));
        assertThrows(IOException.class, () -> link.client().readHeader());
    }

    // ---- back-pressure ----

    @Test
    @Timeout(60)
    void writerBlocksWhenReaderStopsAndResumesWhenDrained() throws Exception {
        Link link = link();
        long bound = maxBufferedBytes();
        int body = 64 << 10;
        long frames = 2 * bound / body + 16;
        AtomicLong sent = new AtomicLong();
        Future<?> writer = threads.submit(() -> {
            ByteBuffer buffer = ByteBuffer.allocateDirect(body);
            for (long seq = 0; seq < frames; seq++) {
                FramePattern.fill(buffer.clear(), 5, seq).flip();
                link.client().send(OPCODE, 0, 5, seq, buffer);
                sent.addAndGet(FrameHeader.BYTES + body);
            }
            return null;
        });
        long stalledAt = awaitStall(sent::get);
        assertFalse(writer.isDone(), "writer finished " + frames + " frames with nobody reading: unbounded buffering");
        assertTrue(stalledAt <= bound, "writer got rid of " + stalledAt + " bytes before blocking; bound " + bound);

        ByteBuffer in = ByteBuffer.allocateDirect(body);
        for (long seq = 0; seq < frames; seq++) {
            FrameHeader h = link.server().readHeader();
            assertEquals(seq, h.requestId(), "order after back-pressure");
            link.server().readBody(in.clear().limit(h.length()));
            assertPattern(new Frame(h, in.flip()));
        }
        resultOf(writer, "writer after the reader drained");
    }

    // ---- many connections, connect and listener life cycle ----

    @Test
    @Timeout(60)
    void servesManyConnectionsAtOnce() throws Exception {
        int clients = 64;
        Future<?> server = threads.submit(() -> {
            for (int i = 0; i < clients; i++) {
                FrameChannel ch = new FrameChannel(opened(listener.accept()));
                threads.submit(() -> {
                    Frame f = receive(ch);
                    ch.send(f.header().opcode(), FrameHeader.FLAG_REPLY, f.header().lane(), f.header().requestId(), f.body());
                    return null;
                });
            }
            return null;
        });
        List<Future<?>> calls = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            int lane = i;
            calls.add(threads.submit(() -> {
                FrameChannel ch = new FrameChannel(opened(transport.connect(listener.address(), CONNECT_TIMEOUT)));
                ch.send(OPCODE, 0, lane, 1000 + lane, FramePattern.of(lane, 1000 + lane, 1000 + 97 * lane));
                Frame reply = receive(ch);
                assertTrue(reply.header().isReply());
                assertEquals(lane, reply.header().lane());
                assertEquals(1000 + 97 * lane, reply.header().length());
                assertPattern(reply);
                return null;
            }));
        }
        for (Future<?> call : calls) {
            resultOf(call, "client round trip", connectionSetUpBudget());
        }
        resultOf(server, "accept loop", connectionSetUpBudget());
    }

    @Test
    @Timeout(20)
    void connectToAddressNobodyListensOnFailsWithinTheTimeout() throws Exception {
        TransportUri gone = listener.address();
        listener.close();
        Duration timeout = Duration.ofSeconds(3);
        long start = System.nanoTime();
        IOException e = assertThrows(IOException.class, () -> opened(transport.connect(gone, timeout)));
        Duration took = Duration.ofNanos(System.nanoTime() - start);
        assertTrue(took.compareTo(timeout.plusSeconds(1)) < 0, "connect took " + took);
        assertTrue(String.valueOf(e.getMessage()).contains(gone.toString()), "message should name the address: " + e);
    }

    @ParameterizedTest
    @EnumSource(ThreadKind.class)
    @Timeout(10)
    void closingListenerUnblocksAccept(ThreadKind kind) throws Exception {
        Future<Connection> accepting = on(kind).submit(listener::accept);
        assertStillBlocked(accepting, Duration.ofMillis(100), "accept with no client");
        listener.close();
        assertInstanceOf(IOException.class, failureOf(accepting, "accept after the listener closed"));
        assertThrows(IOException.class, listener::accept);
        listener.close();
    }

    @Test
    @Timeout(10)
    void bothEndsDescribeTheirPeer() throws Exception {
        Link link = link();
        assertFalse(link.client().connection().peer().description().isBlank());
        assertFalse(link.server().connection().peer().description().isBlank());
    }

    // ---- helpers ----

    /** Both framed ends of one connection. */
    protected record Link(FrameChannel client, FrameChannel server) {
    }

    /** A received frame. */
    protected record Frame(FrameHeader header, ByteBuffer body) {
    }

    /** Connects a client to the listener and accepts it (accepting on another thread, as a handshake may need). */
    protected final Link link() throws Exception {
        Future<Connection> accepted = threads.submit(listener::accept);
        Connection client = opened(transport.connect(listener.address(), CONNECT_TIMEOUT));
        Connection server = opened(resultOf(accepted, "accept"));
        return new Link(new FrameChannel(client), new FrameChannel(server));
    }

    /** Closes {@code c} after the test, before the threads are stopped. */
    protected final <C extends AutoCloseable> C opened(C c) {
        opened.add(c);
        return c;
    }

    protected final Listener listener() {
        return listener;
    }

    protected final Transport transport() {
        return transport;
    }

    protected static Frame receive(FrameChannel channel) throws IOException {
        FrameHeader h = channel.readHeader();
        return new Frame(h, channel.readBody(h.length()));
    }

    protected static void assertPattern(Frame f) {
        int at = FramePattern.firstMismatch(f.body(), f.header().lane(), f.header().requestId());
        if (at >= 0) {
            fail("body corrupt at offset " + at + " of " + f.header());
        }
    }

    /** A cut mid-frame is an IOException but not an EOFException, which means "closed between frames". */
    private static void assertCut(IOException e) {
        assertFalse(e instanceof EOFException, "a cut frame was reported as a clean end: " + e);
    }

    private static ByteBuffer rawHeader(int length) {
        return ByteBuffer.allocate(FrameHeader.BYTES).order(ByteOrder.LITTLE_ENDIAN)
                .putInt(length).putInt(OPCODE).putInt(0).putInt(1).putLong(1).flip();
    }

    /** Sends 64 KiB frames until a send fails; counts the bytes handed over. */
    private static Void floodUntilFailure(FrameChannel channel, AtomicLong sent) throws IOException {
        ByteBuffer body = FramePattern.of(2, 2, 64 << 10);
        for (long seq = 0; ; seq++) {
            channel.send(OPCODE, 0, 2, seq, body.duplicate());
            sent.addAndGet(FrameHeader.BYTES + body.capacity());
        }
    }
}
