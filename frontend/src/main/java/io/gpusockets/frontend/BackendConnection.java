package io.gpusockets.frontend;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.SharedWindow;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.ProtocolException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One connection to a backend: the handshake, request ids, and delivery of replies and DATA frames.
 *
 * <p>No reader thread: a caller waiting for its reply reads the connection itself when nobody else
 * is (leader/follower), so a single-threaded program never pays a thread hand-off per call. Frames
 * for other waiters are delivered to them and they are woken; DATA frames are read straight into
 * the destination memory the waiting call registered.
 */
final class BackendConnection implements AutoCloseable {
    private static final ScheduledExecutorService WATCHDOG = Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().daemon().name("gpusockets-connect-watchdog").factory());

    /** A request awaiting its reply (and its DATA, in the order of {@code destinations}). */
    static final class Pending {
        final long requestId;
        final Thread waiter;
        final List<MemorySegment> destinations;
        int destination;
        long offset;
        volatile ByteBuffer reply;

        Pending(long requestId, Thread waiter, List<MemorySegment> destinations) {
            this.requestId = requestId;
            this.waiter = waiter;
            this.destinations = destinations;
        }

        /** Moves past {@code n} bytes written into the current destination (and past empty ones). */
        void advance(long n) {
            offset += n;
            while (destination < destinations.size() && offset == destinations.get(destination).byteSize()) {
                destination++;
                offset = 0;
            }
        }
    }

    private final TransportUri uri;
    private final FrameChannel channel;
    private final Handshake.Welcome welcome;
    private final boolean async;
    private final AtomicLong requestIds = new AtomicLong(1);
    private final Map<Long, Pending> pending = new ConcurrentHashMap<>();
    private final ReentrantLock readLock = new ReentrantLock();
    /** The connection's shared window when the backend agreed to use it, else null. */
    private final FrontendWindow window;
    private volatile IOException broken;

    private BackendConnection(TransportUri uri, FrameChannel channel, Handshake.Welcome welcome, boolean async,
                              SharedWindow window) {
        this.uri = uri;
        this.channel = channel;
        this.welcome = welcome;
        this.async = async;
        this.window = window == null ? null : new FrontendWindow(window, windowSlotBytes());
    }

    /**
     * The shared window for one call with bulk data going out ({@code in}) or coming back ({@code out}),
     * if this connection has one with slots for it and no other call holds it; the caller gives it back
     * with {@link #releaseWindow} after the reply. Null when the call should use the byte stream.
     */
    MemorySegment acquireWindow(boolean in) {
        if (window == null || !window.tryHold(in)) {
            return null;
        }
        if (broken != null) {
            window.letGo();
            return null;
        }
        return window.segment();
    }

    /** Bytes of one input slot: the chunk a DATA frame carries. */
    long windowSlotBytes() {
        return maxBody() / 4;
    }

    /**
     * Where the next input frame goes in the window ({@link FrontendWindow#nextInputSlot}); call
     * {@link #inputSent} after sending it. Throws when the connection breaks or the backend goes away
     * (the ring notices a dead peer within its liveness period).
     */
    long nextInputSlot() throws IOException {
        long slot = window.nextInputSlot(() -> broken != null || channel.connection().peerClosed());
        if (slot < 0) {
            if (broken != null) {
                throw broken;
            }
            throw fail(new IOException("backend closed the connection"));
        }
        return slot;
    }

    /** The frame for the slot {@link #nextInputSlot} gave is sent. */
    void inputSent() {
        window.inputSent();
    }

    /** Gives back the window {@link #acquireWindow} lent. */
    void releaseWindow() {
        window.letGo();
    }

    /** Connects and runs the handshake, all within the configured timeout. */
    static BackendConnection open(String uriText, FrontendConfig config) throws IOException {
        TransportUri uri = TransportUri.parse(uriText);
        Connection c = Transports.connect(uri, config.connectTimeout(), config.transportOptions());
        FrameChannel channel = new FrameChannel(c);
        // set before the close, so that the read the close ends already sees it (isDone() is true only once close returns)
        java.util.concurrent.atomic.AtomicBoolean timedOut = new java.util.concurrent.atomic.AtomicBoolean();
        ScheduledFuture<?> watchdog = WATCHDOG.schedule(() -> {
            timedOut.set(true);
            c.close();
        }, config.connectTimeout().toMillis(), TimeUnit.MILLISECONDS);
        SharedWindow window = null;
        try {
            FrameHeader h = channel.readHeader();
            if (h.opcode() != Opcodes.SERVER_HELLO || h.length() > 4096) {
                throw new ProtocolException(uri + " is not a GPUsockets backend (first frame " + h + ")");
            }
            Handshake.ServerHello hello = Handshake.ServerHello.decode(channel.readBody(h.length()));
            if (Handshake.PROTOCOL_VERSION < hello.minVersion() || Handshake.PROTOCOL_VERSION > hello.maxVersion()) {
                throw new ProtocolException("backend " + uri + " speaks protocol versions " + hello.minVersion() + ".."
                        + hello.maxVersion() + "; this frontend speaks " + Handshake.PROTOCOL_VERSION);
            }
            byte[] proof = new byte[0];
            if (hello.authMethod() == Handshake.AUTH_PSK) {
                if (config.preSharedKey() == null) {
                    throw new IOException("backend " + uri + " requires a pre-shared key: set "
                            + FrontendConfig.PSK_FILE_ENV + " to the key file");
                }
                proof = Handshake.proof(config.preSharedKey(), hello.nonce(), config.identity());
            } else if (hello.authMethod() != Handshake.AUTH_NONE) {
                throw new ProtocolException("backend " + uri + " asks for unknown auth method " + hello.authMethod());
            }
            window = c.takeSharedWindow().orElse(null);
            int features = (config.async() ? Handshake.FEATURE_ASYNC : 0) | (window != null ? Handshake.FEATURE_WINDOW : 0);
            channel.send(Opcodes.HELLO, 0, 0, 0,
                    new Handshake.Hello(Handshake.PROTOCOL_VERSION, features, config.identity(), proof).encode());
            h = channel.readHeader();
            if (h.opcode() == Opcodes.REFUSE) {
                throw new IOException("backend " + uri + " refused the connection: "
                        + Handshake.readString(channel.readBody(h.length())));
            }
            if (h.opcode() != Opcodes.WELCOME || h.length() > 8192) {
                throw new ProtocolException("expected WELCOME from " + uri + ", got " + h);
            }
            Handshake.Welcome welcome = Handshake.Welcome.decode(channel.readBody(h.length()));
            boolean async = (welcome.features() & Handshake.FEATURE_ASYNC) != 0;
            if (window != null && (welcome.features() & Handshake.FEATURE_WINDOW) == 0) {
                window.release();
                window = null;
            }
            if (!watchdog.cancel(false)) {
                throw new IOException("timed out after " + config.connectTimeout().toMillis() + " ms");
            }
            return new BackendConnection(uri, channel, welcome, async, window);
        } catch (IOException | RuntimeException e) {
            watchdog.cancel(false);
            c.close();
            if (window != null) {
                window.release();
            }
            if (timedOut.get()) {
                throw new IOException("backend " + uri + " did not complete the handshake within "
                        + config.connectTimeout().toMillis() + " ms"
                        + (uri.scheme().equals("tcp") ? " (a tls:// port waits like this for a tcp:// client: is it one?)" : ""), e);
            }
            throw e;
        }
    }

    TransportUri uri() {
        return uri;
    }

    Handshake.Welcome welcome() {
        return welcome;
    }

    boolean async() {
        return async;
    }

    int maxBody() {
        return channel.maxBody();
    }

    IOException broken() {
        return broken;
    }

    /** Registers a request whose reply the calling thread will wait for. */
    Pending expect(List<MemorySegment> destinations) {
        long id = requestIds.getAndIncrement();
        Pending p = new Pending(id, Thread.currentThread(), destinations);
        pending.put(id, p);
        return p;
    }

    long nextRequestId() {
        return requestIds.getAndIncrement();
    }

    void send(int opcode, int flags, int lane, long requestId, ByteBuffer... body) throws IOException {
        IOException b = broken;
        if (b != null) {
            throw b;
        }
        try {
            channel.send(opcode, flags, lane, requestId, body);
        } catch (IOException e) {
            throw fail(e);
        }
    }

    /** Waits for the reply of {@code p}, reading the connection whenever no other thread is. */
    ByteBuffer await(Pending p) throws IOException {
        try {
            while (p.reply == null) {
                IOException b = broken;
                if (b != null) {
                    throw b;
                }
                if (readLock.tryLock()) {
                    try {
                        while (p.reply == null) {
                            readOne();
                        }
                    } finally {
                        readLock.unlock();
                        wakeWaiters();
                    }
                } else {
                    LockSupport.parkNanos(this, 1_000_000);
                }
            }
            return p.reply;
        } finally {
            pending.remove(p.requestId);
        }
    }

    private void wakeWaiters() {
        for (Pending other : pending.values()) {
            if (other.reply == null) {
                LockSupport.unpark(other.waiter);
            }
        }
    }

    private void readOne() throws IOException {
        try {
            FrameHeader h = channel.readHeader();
            Pending p = pending.get(h.requestId());
            if (h.opcode() == Opcodes.DATA) {
                if (p == null || p.destination >= p.destinations.size()) {
                    throw new ProtocolException("DATA frame for no waiting request: " + h);
                }
                if (h.inWindow()) {
                    scatter(p, windowRef(h), h);
                    window.outputTaken(); // copied out: the backend may fill that slot again
                    return;
                }
                MemorySegment dst = p.destinations.get(p.destination);
                if (h.length() <= dst.byteSize() - p.offset) {
                    channel.readBody(dst.asSlice(p.offset, h.length()).asByteBuffer());
                    p.advance(h.length());
                } else {
                    // spans destinations (the rows of a pitched copy): read whole, then scatter
                    scatter(p, MemorySegment.ofBuffer(channel.readBody(h.length())), h);
                }
            } else if (h.isReply()) {
                ByteBuffer body = channel.readBody(h.length());
                if (p == null) {
                    throw new ProtocolException("reply for no waiting request: " + h);
                }
                p.reply = body;
                if (p.waiter != Thread.currentThread()) {
                    LockSupport.unpark(p.waiter);
                }
            } else {
                throw new ProtocolException("unexpected frame from backend: " + h);
            }
        } catch (IOException e) {
            throw fail(e);
        }
    }

    /** The window bytes a window DATA frame refers to, checked against the window. */
    private MemorySegment windowRef(FrameHeader h) throws IOException {
        if (window == null || h.length() != Handshake.WINDOW_REF_BYTES) {
            throw new ProtocolException("window DATA frame " + (window == null ? "without a shared window" : "of bad length") + ": " + h);
        }
        return window.resolve(channel.readBody(h.length()));
    }

    private static void scatter(Pending p, MemorySegment src, FrameHeader h) throws ProtocolException {
        long off = 0;
        while (off < src.byteSize()) {
            if (p.destination >= p.destinations.size()) {
                throw new ProtocolException("DATA frame overruns its destinations: " + h);
            }
            MemorySegment dst = p.destinations.get(p.destination);
            long n = Math.min(src.byteSize() - off, dst.byteSize() - p.offset);
            SplitCopier.copy(src, off, dst, p.offset, n);
            off += n;
            p.advance(n);
        }
    }

    private IOException fail(IOException e) {
        if (broken == null) {
            broken = new IOException("connection to backend " + uri + " lost: " + e.getMessage(), e);
            channel.close();
            wakeWaiters();
        }
        return broken;
    }

    @Override
    public void close() {
        if (broken == null) {
            try {
                channel.send(Opcodes.GOODBYE, 0, 0, 0);
            } catch (IOException ignored) {
                // closing anyway
            }
            broken = new IOException("connection to backend " + uri + " closed");
        }
        channel.close();
        if (window != null) {
            window.close(); // broken is set: no call takes it any more
        }
    }
}
