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
 * <p><b>Resume</b> ({@link Handshake#FEATURE_RESUME}, asked for with {@code GPUSOCKETS_RESUME=1} or
 * {@code -Dgpusockets.resume=true}): when the backend grants it, a lost connection is not the end. The
 * thread that notices reconnects to the same URI with backoff (20 ms doubling to 1 s) for the grace period
 * the backend announced, presenting the session token; RESUMED says per lane which call the backend
 * received last and how many of its DATA frames, and each lane resends the rest from what it kept
 * ({@link LaneLog}: every frame since the lane's last reply; a call that waits for its reply keeps views of
 * its own buffers, which live until then; a pipelined call keeps a copy). Calls waiting for a reply restart
 * their outputs, and the backend sends again the replies it had not seen acknowledged; a reply that arrives
 * twice is skipped. Request ids rise per session (across connections), so a lane's ids rise too. The
 * program sees a pause; only a refused resume or the end of the grace period fails calls, with
 * CUDA_ERROR_DEVICE_UNAVAILABLE as a lost connection always did. A backend that knows no session by the token
 * ({@link Handshake#REFUSAL_UNKNOWN_SESSION}) is asked again until the grace period ends: it may be a backend
 * restarted where the session's checkpoint is being restored; another identity's refusal is final.
 * A backend may tell a resumable session that it moved to another backend ({@link Opcodes#MOVED}, after a
 * migration or a checkpoint restored elsewhere), on the connection or in answer to a resume: the session is
 * resumed at the URI it names, as after a lost connection, and later resumes go there too.
 * A resumable connection over TCP has keepalive on ({@link #keepAlive}): a connection whose far end
 * vanished without a word (a guest VM restored from a snapshot, whose user-mode NAT lost its state; a
 * NAT or firewall that dropped it) is noticed within seconds of silence even by a thread that waits for
 * a reply and sends nothing, instead of never.
 *
 * <p>ring://'s shared window belongs to its ring, and each resume makes a new ring: the resumed session uses the
 * new ring's window ({@link FrontendWindow}, one per connection). What a lane keeps of a frame that refers to the
 * window is its form without it (a window DATA frame as views of the call's own bytes, which live until its reply;
 * a call frame without {@code FLAG_WINDOW}), and that is what a resume resends; a call that held the old window
 * sends the rest of its bulk data through the byte stream, and its output comes back that way.
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

    /** Environment variable and system property that ask backends for resume ({@link Handshake#FEATURE_RESUME}). */
    static final String RESUME_ENV = "GPUSOCKETS_RESUME";
    static final String RESUME_PROP = "gpusockets.resume";
    /** A pipelined call whose bulk input is larger is sent as one that waits (its copy would be kept otherwise). */
    static final long RESUME_PIPELINED_BULK_MAX = 1 << 20;
    /** Once a lane keeps this many copied bytes, its next pipelined call waits for its reply (which acknowledges them). */
    static final long RESUME_LANE_KEPT_MAX = 4 << 20;

    /** Keepalive of a resumable TCP connection: the first probe after this many seconds of silence. */
    static final int KEEPALIVE_IDLE_SECONDS = 5;
    /** Keepalive: seconds between unanswered probes. */
    static final int KEEPALIVE_INTERVAL_SECONDS = 2;
    /** Keepalive: unanswered probes before the kernel gives the connection up. */
    static final int KEEPALIVE_PROBES = 3;

    static boolean resumeRequested() {
        String e = System.getenv(RESUME_ENV);
        return Boolean.getBoolean(RESUME_PROP) || (e != null && e.strip().equals("1"));
    }

    /** What one lane sent since its last reply: each frame as sent, for a resume to send again. */
    static final class LaneLog {
        final java.util.ArrayDeque<Sent> sent = new java.util.ArrayDeque<>();
        /** Bytes of copies kept. */
        long copied;
        /** The connection generation whose channel has every frame in {@link #sent} (or had, when lost). */
        int generation;
        /** Replies received through this request id: frames up to it are forgotten. Set by the reader. */
        volatile long ackedThrough;

        void prune() {
            long acked = ackedThrough;
            for (Sent f; (f = sent.peekFirst()) != null && f.requestId <= acked; ) {
                sent.pollFirst();
                copied -= f.copied;
            }
        }
    }

    record Sent(long requestId, int opcode, int flags, ByteBuffer[] body, long copied) {
    }

    /** The backend said the session moved ({@link Opcodes#MOVED}): it is resumed at {@link #to}. */
    static final class SessionMoved extends IOException {
        private final TransportUri to;

        SessionMoved(TransportUri from, TransportUri to) {
            super("backend " + from + " says the session moved to " + to);
            this.to = to;
        }

        TransportUri to() {
            return to;
        }
    }

    /** Moves followed one after another without a resume that succeeded, before the frontend gives up (a loop). */
    static final int MAX_MOVES = 8;

    /** A backend refused to resume the session: trying again will not help. */
    static final class ResumeRefused extends IOException {
        private final boolean unknownSession;

        ResumeRefused(String message, boolean unknownSession) {
            super(message);
            this.unknownSession = unknownSession;
        }

        /** The backend knew no session by the token ({@link Handshake#REFUSAL_UNKNOWN_SESSION}): it may, later. */
        boolean unknownSession() {
            return unknownSession;
        }
    }

    /** Where the session is: the URI it was opened at, or the last one a backend said it moved to. */
    private volatile TransportUri uri;
    private final FrontendConfig config;
    private volatile FrameChannel channel;
    private final Handshake.Welcome welcome;
    /** Resume granted: the token, else null. */
    private final byte[] token;
    private final Map<Integer, LaneLog> laneLogs = new ConcurrentHashMap<>();
    private final ReentrantLock reconnectLock = new ReentrantLock();
    /** Bumped on each resume; guarded by readLock for writers. */
    private volatile int generation;
    private volatile Handshake.ResumeState resumeState;
    private final java.util.concurrent.atomic.AtomicLong resumes = new java.util.concurrent.atomic.AtomicLong();
    /** Resumes that came while a call held the shared window (its bulk data partly through the old ring's). */
    private final java.util.concurrent.atomic.AtomicLong windowCallsResumed = new java.util.concurrent.atomic.AtomicLong();
    private final boolean async;
    private final AtomicLong requestIds = new AtomicLong(1);
    private final Map<Long, Pending> pending = new ConcurrentHashMap<>();
    private final ReentrantLock readLock = new ReentrantLock();
    /** The current connection's shared window when the backend agreed to use it, else null; replaced at a resume. */
    private volatile FrontendWindow window;
    private volatile IOException broken;

    private BackendConnection(TransportUri uri, FrontendConfig config, FrameChannel channel, Handshake.Welcome welcome,
                              boolean async, SharedWindow window) {
        this.uri = uri;
        this.config = config;
        this.channel = channel;
        this.welcome = welcome;
        this.token = (welcome.features() & Handshake.FEATURE_RESUME) != 0 && welcome.resumeToken().length == Handshake.TOKEN_BYTES
                ? welcome.resumeToken() : null;
        this.async = async;
        this.window = window == null ? null : new FrontendWindow(window, windowSlotBytes(), channel);
    }

    /**
     * The shared window for one call with bulk data going out ({@code in}) or coming back ({@code out}),
     * if this connection has one with slots for it and no other call holds it; the caller gives it back
     * with {@link #releaseWindow} after the reply. Null when the call should use the byte stream.
     */
    FrontendWindow acquireWindow(boolean in) {
        FrontendWindow w = window;
        if (w == null || !w.tryHold(in)) {
            return null;
        }
        if (broken != null) {
            w.letGo();
            return null;
        }
        return w;
    }

    /** Bytes of one input slot: the chunk a DATA frame carries. */
    long windowSlotBytes() {
        return maxBody() / 4;
    }

    /**
     * Where the next input frame goes in {@code held}, the window {@link #acquireWindow} lent
     * ({@link FrontendWindow#nextInputSlot}); call {@link FrontendWindow#inputSent} once {@link #sendVia} sent it
     * through the window. -1 when {@code held} is no longer the connection's window (the session resumed on a new
     * ring, here or by another thread): the call sends the rest through the byte stream. Throws when the connection
     * breaks for good or the backend goes away (the ring notices a dead peer within its liveness period).
     */
    long nextInputSlot(FrontendWindow held) throws IOException {
        FrameChannel ch = channel;
        if (held != window || held.channel() != ch) {
            return -1;
        }
        long slot = held.nextInputSlot(() -> broken != null || held != window || ch.connection().peerClosed());
        if (slot >= 0) {
            return slot;
        }
        if (broken != null) {
            throw broken;
        }
        if (held != window) {
            return -1;
        }
        IOException lost = new IOException("backend closed the connection");
        if (token == null) {
            throw fail(lost);
        }
        reconnect(ch, lost); // resumes on a new ring, whose window this call does not hold
        return -1;
    }

    /** Gives back the window {@link #acquireWindow} lent. */
    void releaseWindow(FrontendWindow held) {
        held.letGo();
    }

    /** Connects and runs the handshake, all within the configured timeout. */
    static BackendConnection open(String uriText, FrontendConfig config) throws IOException {
        return open(uriText, config, null);
    }

    /**
     * As {@link #open(String, FrontendConfig)}, announcing the guest's managed range {base, size} in the HELLO
     * ({@link Handshake#FEATURE_MANAGED_RANGE}; null: none). WELCOME's features say whether the backend accepted it.
     */
    static BackendConnection open(String uriText, FrontendConfig config, long[] managedRange) throws IOException {
        TransportUri uri = TransportUri.parse(uriText);
        Opened o = handshake(uri, config, null, managedRange);
        return new BackendConnection(uri, config, o.channel(), o.welcome(), o.async(), o.window());
    }

    private record Opened(FrameChannel channel, Handshake.Welcome welcome, boolean async, SharedWindow window,
                          Handshake.ResumeState state) {
    }

    /** The handshake of a resume, within the connect timeout. */
    private static Opened handshake(TransportUri uri, FrontendConfig config, byte[] token) throws IOException {
        return handshake(uri, config, token, null);
    }

    /**
     * The handshake of a new session ({@code token} null; {@code managedRange} the guest's managed range to announce, or
     * null) or of a resume, within the connect timeout.
     */
    private static Opened handshake(TransportUri uri, FrontendConfig config, byte[] token, long[] managedRange)
            throws IOException {
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
            boolean resume = token != null || resumeRequested();
            // a resume asks for the new ring's window too: the session uses it from here on
            window = c.takeSharedWindow().orElse(null);
            int features = (config.async() ? Handshake.FEATURE_ASYNC : 0) | (window != null ? Handshake.FEATURE_WINDOW : 0)
                    | (resume ? Handshake.FEATURE_RESUME : 0);
            boolean range = token == null && managedRange != null;
            channel.send(Opcodes.HELLO, 0, 0, 0, new Handshake.Hello(Handshake.PROTOCOL_VERSION,
                    features | (range ? Handshake.FEATURE_MANAGED_RANGE : 0), config.identity(), proof,
                    token == null ? new byte[0] : token, range ? managedRange[0] : 0, range ? managedRange[1] : 0).encode());
            h = channel.readHeader();
            if (h.opcode() == Opcodes.REFUSE) {
                String why = Handshake.readString(channel.readBody(h.length()));
                if (token != null) {
                    throw new ResumeRefused("backend " + uri + " refused to resume the session: " + why,
                            why.startsWith(Handshake.REFUSAL_UNKNOWN_SESSION));
                }
                throw new IOException("backend " + uri + " refused the connection: " + why);
            }
            if (h.opcode() == Opcodes.MOVED && token != null) {
                throw new SessionMoved(uri, moved(channel, h));
            }
            if (h.opcode() != Opcodes.WELCOME || h.length() > 8192) {
                throw new ProtocolException("expected WELCOME from " + uri + ", got " + h);
            }
            Handshake.Welcome welcome = Handshake.Welcome.decode(channel.readBody(h.length()));
            boolean async = (welcome.features() & Handshake.FEATURE_ASYNC) != 0;
            Handshake.ResumeState state = null;
            if (token != null) {
                h = channel.readHeader();
                if (h.opcode() != Opcodes.RESUMED || h.length() > 16 * Handshake.ResumeState.MAX_LANES + 4) {
                    throw new ProtocolException("expected RESUMED from " + uri + ", got " + h);
                }
                state = Handshake.ResumeState.decode(channel.readBody(h.length()));
            }
            if ((welcome.features() & Handshake.FEATURE_RESUME) != 0) {
                c.livenessChannel().ifPresent(BackendConnection::keepAlive);
            }
            if (window != null && (welcome.features() & Handshake.FEATURE_WINDOW) == 0) {
                window.release();
                window = null;
            }
            if (!watchdog.cancel(false)) {
                throw new IOException("timed out after " + config.connectTimeout().toMillis() + " ms");
            }
            return new Opened(channel, welcome, async, window, state);
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

    /**
     * Turns TCP keepalive on for {@code channel} (a no-op for a unix socket): after
     * {@value #KEEPALIVE_IDLE_SECONDS} s of silence the kernel probes the peer every
     * {@value #KEEPALIVE_INTERVAL_SECONDS} s, and fails the socket's reads after {@value #KEEPALIVE_PROBES}
     * unanswered probes, or at once when the probe is answered with a reset (a peer that no longer knows
     * the connection). A live peer answers the probes however long it computes, so a long call is never
     * cut; a lost connection then resumes. Costs one small packet each way per idle period.
     */
    static void keepAlive(java.nio.channels.SocketChannel channel) {
        if (!channel.supportedOptions().contains(jdk.net.ExtendedSocketOptions.TCP_KEEPIDLE)) {
            return; // a unix socket: its peer cannot vanish without the kernel knowing
        }
        try {
            channel.setOption(java.net.StandardSocketOptions.SO_KEEPALIVE, true);
            channel.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPIDLE, KEEPALIVE_IDLE_SECONDS);
            channel.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPINTERVAL, KEEPALIVE_INTERVAL_SECONDS);
            channel.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPCOUNT, KEEPALIVE_PROBES);
        } catch (IOException e) {
            // the connection works without it; only a silent loss of it would then go unnoticed
            System.err.println("gpusockets: could not turn TCP keepalive on for the connection to the backend ("
                    + e.getMessage() + "): a connection lost without a reset is not noticed");
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

    /** Whether the backend granted resume: calls keep what a resume would resend. */
    boolean resumable() {
        return token != null;
    }

    /** Times this connection resumed its session on a new transport connection. */
    long resumes() {
        return resumes.get();
    }

    /** Resumes that came while a call held the shared window (it finished through the byte stream). */
    long windowCallsResumed() {
        return windowCallsResumed.get();
    }

    /** Whether the current connection has a shared window the backend agreed to use. */
    boolean hasWindow() {
        return window != null;
    }

    /** Bytes of copies {@code lane} keeps for a resume now. */
    long keptBytes(int lane) {
        LaneLog log = laneLogs.get(lane);
        if (log == null) {
            return 0;
        }
        synchronized (log) {
            log.prune();
            return log.copied;
        }
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
        send(opcode, flags, lane, requestId, false, body);
    }

    /**
     * Sends one frame. On a resumable session the lane keeps it until a reply acknowledges it: as views when
     * {@code stable} (the buffers stay valid until the call's reply), else as a copy; a lost connection is
     * then resumed here and the frame resent, and the call goes on.
     */
    void send(int opcode, int flags, int lane, long requestId, boolean stable, ByteBuffer... body) throws IOException {
        send(opcode, flags, body, -1, lane, requestId, stable, null);
    }

    /**
     * Sends a call frame and its one DATA frame in one write of the connection ({@link FrameChannel#sendTwo}), kept for
     * a resume as two frames, as {@link #send} keeps each (views when {@code stable}). For a call whose bulk input is
     * small: the backend then finds the data with the call instead of waking its lane a second time.
     */
    void sendWithData(int opcode, int flags, int lane, long requestId, boolean stable, ByteBuffer[] body, ByteBuffer[] data)
            throws IOException {
        send(opcode, flags, body, Opcodes.DATA, lane, requestId, stable, data);
    }

    /** One frame, or with {@code data} (not null) a DATA frame ({@code dataOpcode}) after it in the same write. */
    private void send(int opcode, int flags, ByteBuffer[] body, int dataOpcode, int lane, long requestId, boolean stable,
                      ByteBuffer[] data) throws IOException {
        IOException b = broken;
        if (b != null) {
            throw b;
        }
        if (token == null || Opcodes.isControl(opcode) && opcode != Opcodes.DATA) {
            try {
                if (data == null) {
                    channel.send(opcode, flags, lane, requestId, body);
                } else {
                    channel.sendTwo(opcode, flags, body, dataOpcode, 0, data, lane, requestId);
                }
            } catch (IOException e) {
                if (token != null) {
                    // LANE_END on a lost connection: not resent (the lane ends with the session instead); the
                    // threads that wait for replies resume the session
                    throw e;
                }
                throw fail(e);
            }
            return;
        }
        LaneLog log = laneLogs.computeIfAbsent(lane, l -> new LaneLog());
        Sent first = kept(requestId, opcode, flags, body, stable);
        Sent second = data == null ? null : kept(requestId, dataOpcode, 0, data, stable);
        FrameChannel ch;
        IOException lostBy;
        synchronized (log) {
            log.prune();
            log.sent.addLast(first);
            log.copied += first.copied();
            if (second != null) {
                log.sent.addLast(second);
                log.copied += second.copied();
            }
            ch = channel;
            try {
                if (log.generation != generation) {
                    resendLane(lane, log, ch); // sends these frames too
                } else if (data == null) {
                    ch.send(opcode, flags, lane, requestId, body); // kept holds views or copies of its own
                } else {
                    ch.sendTwo(opcode, flags, body, dataOpcode, 0, data, lane, requestId);
                }
                return;
            } catch (IOException e) {
                lostBy = e;
            }
        }
        reconnect(ch, lostBy); // resends every lane's missing frames, these included
    }

    /** What a lane keeps of a frame it sends: views of the body when {@code stable}, else a copy. */
    private static Sent kept(long requestId, int opcode, int flags, ByteBuffer[] body, boolean stable) {
        ByteBuffer[] kept = new ByteBuffer[body.length];
        long copied = 0;
        for (int i = 0; i < body.length; i++) {
            if (stable) {
                kept[i] = body[i].duplicate();
            } else {
                kept[i] = ByteBuffer.allocate(body[i].remaining()).put(body[i].duplicate()).flip();
                copied += kept[i].capacity();
            }
        }
        return new Sent(requestId, opcode, flags, kept, copied);
    }

    /**
     * Sends a frame that refers to {@code via}, the window the calling thread holds: a call frame flagged
     * {@code FLAG_WINDOW} ({@code plain} null), or a window DATA frame ({@code body} the reference, {@code plain}
     * views of the bytes it names, which live until the call's reply). It goes as it is only on {@code via}'s own
     * connection; after a resume it goes without the window (the call's flag cleared, the DATA frame's bytes
     * instead), and a lane keeps it in that form, which is what a resume resends. Returns whether it went through
     * the window (then the caller counts the input slot used).
     */
    boolean sendVia(FrontendWindow via, int opcode, int flags, int lane, long requestId, ByteBuffer[] plain,
                    ByteBuffer... body) throws IOException {
        IOException b = broken;
        if (b != null) {
            throw b;
        }
        if (token == null) {
            try {
                channel.send(opcode, flags, lane, requestId, body); // one connection, one window
            } catch (IOException e) {
                throw fail(e);
            }
            return true;
        }
        int plainFlags = flags & ~FrameHeader.FLAG_WINDOW;
        ByteBuffer[] plainBody = plain != null ? plain : body;
        LaneLog log = laneLogs.computeIfAbsent(lane, l -> new LaneLog());
        ByteBuffer[] kept = dup(plainBody); // views: the call's buffers live until its reply
        FrameChannel ch;
        IOException lostBy;
        synchronized (log) {
            log.prune();
            log.sent.addLast(new Sent(requestId, opcode, plainFlags, kept, 0));
            ch = channel;
            try {
                if (log.generation != generation) {
                    resendLane(lane, log, ch); // sends this frame too, without the window
                    return false;
                }
                if (via.channel() == ch && via == window) {
                    ch.send(opcode, flags, lane, requestId, body);
                    return true;
                }
                ch.send(opcode, plainFlags, lane, requestId, dup(plainBody));
                return false;
            } catch (IOException e) {
                lostBy = e;
            }
        }
        reconnect(ch, lostBy); // resends every lane's missing frames, this one included (without the window)
        return false;
    }

    private static ByteBuffer[] dup(ByteBuffer[] b) {
        ByteBuffer[] d = new ByteBuffer[b.length];
        for (int i = 0; i < b.length; i++) {
            d[i] = b[i].duplicate();
        }
        return d;
    }

    /**
     * Sends what {@code lane} kept that the backend did not receive before the connection it resumed from
     * was lost ({@link #resumeState}): calls after the last one it received, and DATA frames of that one past
     * those it received. Holds the lane's log.
     */
    private void resendLane(int lane, LaneLog log, FrameChannel ch) throws IOException {
        Handshake.ResumeState st = resumeState;
        long[] got = st == null ? null : st.lanes().get(lane);
        long last = got == null ? 0 : got[0];
        long skipData = 0;
        boolean received = false;
        for (Sent f : log.sent) {
            if (f.opcode() != Opcodes.DATA) {
                received = f.requestId() <= last;
                skipData = f.requestId() == last ? got[1] : 0;
                if (received) {
                    continue;
                }
            } else if (received) {
                if (f.requestId() < last) {
                    continue;
                }
                if (skipData > 0) {
                    skipData--;
                    continue;
                }
            }
            // what a lane keeps never refers to a window (each connection has its own)
            ch.send(f.opcode(), f.flags() & ~FrameHeader.FLAG_WINDOW, lane, f.requestId(), dup(f.body()));
        }
        log.generation = generation;
    }

    /**
     * Closes the current connection as a network failure would: the next read or write on it fails, and a
     * resumable session resumes on a new one (else the session ends).
     */
    void dropConnection() {
        channel.close();
    }

    /**
     * After {@code failed} was lost ({@code cause}): resumes the session on a new connection, or fails the
     * connection for good (no resume granted, a protocol violation, refused, or the grace period is over).
     * Only one thread reconnects; others that noticed the same loss wait for it and go on.
     */
    private void reconnect(FrameChannel failed, IOException cause) throws IOException {
        if (token == null || cause instanceof ProtocolException) {
            throw fail(cause);
        }
        reconnectLock.lock();
        try {
            IOException b = broken;
            if (b != null) {
                throw b;
            }
            if (channel != failed) {
                return; // another thread resumed already
            }
            failed.close();
            if (cause instanceof SessionMoved m) {
                System.err.println("gpusockets: the session moved from backend " + uri + " to " + m.to()
                        + "; resuming it there");
                uri = m.to();
            } else {
                System.err.println("gpusockets: connection to backend " + uri + " lost (" + cause.getMessage()
                        + "); resuming the session");
            }
            int moves = cause instanceof SessionMoved ? 1 : 0;
            long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(welcome.graceSeconds())
                    + config.connectTimeout().toNanos();
            long backoff = 20;
            while (true) {
                Opened o;
                try {
                    o = handshake(uri, config, token);
                } catch (IOException e) {
                    if (e instanceof SessionMoved m) {
                        if (++moves > MAX_MOVES) {
                            throw fail(new IOException("the session moved " + MAX_MOVES + " times without resuming (last: "
                                    + m.getMessage() + ")", cause));
                        }
                        System.err.println("gpusockets: " + m.getMessage() + "; resuming it there");
                        uri = m.to();
                        continue; // at once: the backend that has it says where it is
                    }
                    if (e instanceof ResumeRefused r && !r.unknownSession()) {
                        throw fail(r);
                    }
                    // no connection, or the session not known there (yet: a backend restarted with its checkpoint
                    // restores it in a moment): again after a pause, within the grace period
                    if (System.nanoTime() + backoff * 1_000_000 > deadline) {
                        throw fail(new IOException("session not resumed within its grace period of " + welcome.graceSeconds()
                                + " s (last attempt: " + e.getMessage() + ")", cause));
                    }
                    try {
                        Thread.sleep(backoff);
                    } catch (InterruptedException stop) {
                        Thread.currentThread().interrupt();
                        throw fail(cause);
                    }
                    backoff = Math.min(backoff * 2, 1000);
                    continue;
                }
                FrontendWindow old;
                readLock.lock(); // no reader fills a destination while they restart
                try {
                    for (Pending p : pending.values()) {
                        if (p.reply == null) {
                            p.destination = 0;
                            p.offset = 0;
                        }
                    }
                    resumeState = o.state();
                    old = window;
                    // the new ring's window, if the backend took it: frames on the new connection refer to it
                    window = o.window() == null ? null : new FrontendWindow(o.window(), o.channel().maxBody() / 4, o.channel());
                    channel = o.channel();
                    generation++;
                } finally {
                    readLock.unlock();
                }
                if (old != null) {
                    if (old.held()) {
                        windowCallsResumed.incrementAndGet(); // that call goes on through the byte stream
                    }
                    old.retire(); // unmapped here once no call holds it
                }
                try {
                    for (Map.Entry<Integer, LaneLog> e : laneLogs.entrySet()) {
                        LaneLog log = e.getValue();
                        synchronized (log) {
                            if (log.generation != generation) {
                                log.prune();
                                resendLane(e.getKey(), log, o.channel());
                            }
                        }
                    }
                    resumes.incrementAndGet();
                    return;
                } catch (IOException again) {
                    failed = o.channel();
                    failed.close(); // lost again: resume once more, after a pause
                    if (System.nanoTime() + backoff * 1_000_000 > deadline) {
                        throw fail(new IOException("session not resumed within its grace period of " + welcome.graceSeconds()
                                + " s (the connection was lost again while resending)", again));
                    }
                    try {
                        Thread.sleep(backoff);
                    } catch (InterruptedException stop) {
                        Thread.currentThread().interrupt();
                        throw fail(cause);
                    }
                    backoff = Math.min(backoff * 2, 1000);
                }
            }
        } finally {
            reconnectLock.unlock();
            wakeWaiters();
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
                    FrameChannel ch = channel;
                    IOException lost = null;
                    try {
                        while (p.reply == null && ch == channel) {
                            readOne(ch);
                        }
                    } catch (IOException e) {
                        if (token == null) {
                            throw e;
                        }
                        lost = e;
                    } finally {
                        readLock.unlock();
                        wakeWaiters();
                    }
                    if (lost != null) {
                        reconnect(ch, lost); // outside the read lock, which a resume takes
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

    private void readOne(FrameChannel channel) throws IOException {
        if (token != null && channel != this.channel) {
            return; // resumed meanwhile: the caller reads the new connection
        }
        try {
            FrameHeader h = channel.readHeader();
            Pending p = pending.get(h.requestId());
            if (token != null && (p == null || p.reply != null)
                    && (h.opcode() == Opcodes.DATA || h.isReply())) {
                channel.skipBody(h.length()); // a reply the backend sent again after a resume, already here
                return;
            }
            if (h.opcode() == Opcodes.DATA) {
                if (p == null || p.destination >= p.destinations.size()) {
                    throw new ProtocolException("DATA frame for no waiting request: " + h);
                }
                if (h.inWindow()) {
                    FrontendWindow w = window;
                    scatter(p, windowRef(w, channel, h), h);
                    w.outputTaken(); // copied out: the backend may fill that slot again
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
                if (token != null) {
                    LaneLog log = laneLogs.get(h.lane());
                    if (log != null && log.ackedThrough < h.requestId()) {
                        log.ackedThrough = h.requestId(); // the lane's frames up to here arrived: forget them
                    }
                }
                p.reply = body;
                if (p.waiter != Thread.currentThread()) {
                    LockSupport.unpark(p.waiter);
                }
            } else if (h.opcode() == Opcodes.MOVED && token != null) {
                throw new SessionMoved(uri, moved(channel, h)); // the caller resumes there
            } else {
                throw new ProtocolException("unexpected frame from backend: " + h);
            }
        } catch (IOException e) {
            if (token != null && !(e instanceof ProtocolException)) {
                throw e; // the caller resumes
            }
            throw fail(e);
        }
    }

    /** The URI of a MOVED frame whose header was read from {@code ch}, checked ({@link Handshake.Moved#decode}). */
    private static TransportUri moved(FrameChannel ch, FrameHeader h) throws IOException {
        if (h.length() > 4 + Handshake.Moved.MAX_MOVED_URI) {
            throw new ProtocolException("MOVED frame too long: " + h);
        }
        return TransportUri.parse(Handshake.Moved.decode(ch.readBody(h.length())).uri());
    }

    /** The window bytes a window DATA frame read on {@code ch} refers to, checked against {@code w}, that connection's window. */
    private static MemorySegment windowRef(FrontendWindow w, FrameChannel ch, FrameHeader h) throws IOException {
        if (w == null || w.channel() != ch || h.length() != Handshake.WINDOW_REF_BYTES) {
            throw new ProtocolException("window DATA frame " + (w == null || w.channel() != ch ? "without a shared window"
                    : "of bad length") + ": " + h);
        }
        return w.resolve(ch.readBody(h.length()));
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

    /**
     * The connection was lost just as the program ends: one resume (within the connect timeout) to say GOODBYE, so
     * that the backend ends the session now instead of keeping it detached for its grace period. Calls still
     * unanswered are not resent: the program no longer waits for them.
     */
    private void goodbyeOnANewConnection() {
        try {
            Opened o = null;
            for (int moves = 0; o == null; moves++) {
                try {
                    o = handshake(uri, config, token);
                } catch (SessionMoved m) {
                    if (moves >= MAX_MOVES) {
                        throw m;
                    }
                    uri = m.to(); // say it where the session is now
                }
            }
            try {
                o.channel().send(Opcodes.GOODBYE, 0, 0, 0);
            } finally {
                o.channel().close();
                if (o.window() != null) {
                    o.window().release();
                }
            }
        } catch (IOException | RuntimeException e) {
            // the backend keeps the session for its grace period, then ends it
        }
    }

    @Override
    public void close() {
        if (broken == null) {
            try {
                channel.send(Opcodes.GOODBYE, 0, 0, 0);
            } catch (IOException lost) {
                if (token != null) {
                    goodbyeOnANewConnection();
                }
            }
            broken = new IOException("connection to backend " + uri + " closed");
        }
        channel.close();
        FrontendWindow w = window;
        if (w != null) {
            w.close(); // broken is set: no call takes it any more
        }
    }
}
