package io.gpusockets.backend.session;

import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.transport.SharedWindow;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.ProtocolException;
import io.gpusockets.protocol.api.ParamType;
import java.io.EOFException;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One frontend connection after its handshake: reads frames, hands each to its lane, and when the
 * connection ends, however it ends, stops its lanes, destroys every context the session made (which
 * frees its memory, modules, streams and events on the device) and logs what it released. The parts
 * it owns do the rest: {@link BodyBudget} and {@link DataBufferPool} bound what the reader holds,
 * {@link Lanes} the lanes, {@link SessionWindow} the shared window, {@link SessionCleanup} the release.
 */
public final class Session {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");

    private final long id;
    private final FrameChannel channel;
    private final DriverHost host;
    private final BackendSettings settings;
    private final SessionLimits limits;
    /** {@link BackendSettings#pipelinedToLane}, read per frame. */
    private final boolean pipelinedToLane;
    private final String peer;
    private final boolean asyncGranted;
    private final SessionHandles handles;
    private final SessionMemory memory = new SessionMemory();
    private final SessionPools pools = new SessionPools();
    private final SessionVmm vmm = new SessionVmm();
    private final SessionWaits waits = new SessionWaits();
    private final PrimaryContexts primary;
    private final HostCallbackGates callbackGates = new HostCallbackGates();
    private final CaptureGuard captureGuard = new CaptureGuard();
    private final CallDispatcher dispatcher;
    private final Lanes lanes;
    private final DataBufferPool dataBuffers;
    private final BodyBudget bodyBudget;
    private final AtomicBoolean ended = new AtomicBoolean();
    /** Host buffers device-to-host copies stage through (pinned where the driver allows). */
    private final StagingPool staging;
    /** The memory shared with the frontend, or null. */
    private final SessionWindow window;
    private final SessionCleanup cleanup;
    private final ContextPool contextPool;
    /** Whose limits this session's holdings count against. */
    private final io.gpusockets.backend.tenant.TenantAccount tenant;
    private volatile String failure;
    /** Isolation mode shared: where the tenant's one context per device comes from, else null. */
    private volatile SharedContexts shared;

    /**
     * {@code window}: the memory shared with the frontend, if the handshake agreed to use it, else null;
     * {@code contextPool}: where the session's primary contexts come from when it has one ready, or null.
     */
    public Session(long id, FrameChannel channel, DriverHost host, BackendSettings settings, String peer, boolean asyncGranted,
                   SharedWindow window, ContextPool contextPool, io.gpusockets.backend.tenant.TenantAccount tenant) {
        if (tenant == null) {
            throw new IllegalArgumentException("tenant=null");
        }
        this.tenant = tenant;
        this.contextPool = contextPool;
        this.id = id;
        this.channel = channel;
        this.host = host;
        this.settings = settings;
        this.limits = settings.limits();
        this.pipelinedToLane = settings.pipelinedToLane();
        this.peer = peer;
        this.asyncGranted = asyncGranted;
        this.handles = new SessionHandles(id);
        this.primary = new PrimaryContexts(this);
        this.dispatcher = new CallDispatcher(this);
        this.lanes = new Lanes(this, limits.maxLanes());
        this.dataBuffers = new DataBufferPool(limits.chunkBytes());
        this.bodyBudget = new BodyBudget(limits.bodyBudget(), dataBuffers);
        this.staging = new StagingPool(host.driver(), id, outChunkBytes(limits.chunkBytes(), channel.maxBody()));
        this.window = window == null ? null
                : new SessionWindow(id, window, host.driver(), () -> ended.get() || channel.connection().peerClosed());
        this.cleanup = new SessionCleanup(id, host.driver(), handles, memory, staging, this.window, pools, vmm, waits);
    }

    /** The tenant this session belongs to. */
    public io.gpusockets.backend.tenant.TenantAccount tenant() {
        return tenant;
    }

    /**
     * Isolation mode shared: this session's primary contexts are its tenant's shared ones from {@code s}.
     * Set before {@link #serve}.
     */
    public void shareContexts(SharedContexts s) {
        this.shared = s;
        cleanup.shareContexts(s);
    }

    /** The shared contexts (isolation mode shared), or null. */
    SharedContexts shared() {
        return shared;
    }

    ContextPool contextPool() {
        return contextPool;
    }

    /** The memory shared with the frontend, or null. */
    SessionWindow window() {
        return window;
    }

    /** Bulk bytes that went through the shared window so far, both ways. */
    public long windowBytes() {
        return window == null ? 0 : window.bytes();
    }

    /**
     * The size of the DATA frames a large device-to-host copy is sent in: 4 MiB (fewer frames, fewer
     * driver calls) where the frame limit allows, never less than the receive chunk nor more than the limit.
     */
    static int outChunkBytes(int chunkBytes, int maxBody) {
        return Math.min(Math.max(chunkBytes, 4 << 20), maxBody);
    }

    StagingPool staging() {
        return staging;
    }

    /** Captures in which the backend refused host work (GraphCalls, CopyCalls, PitchedCalls, CallbackCalls). */
    CaptureGuard captureGuard() {
        return captureGuard;
    }

    /** Before {@code real}, a context of this session, is destroyed: its pinned staging buffers go first, and the window's registration in it. */
    void beforeContextDestroy(long real) {
        cleanup.destroyExecGraphs(handles.idOf(ParamType.CTX, real));
        staging.retire(real);
        if (window != null) {
            window.unpin(real);
        }
    }

    /** After {@code real} was destroyed (or its destruction was attempted). */
    void afterContextDestroy(long real) {
        staging.destroyed(real);
    }

    public long id() {
        return id;
    }

    DriverHost host() {
        return host;
    }

    BackendSettings settings() {
        return settings;
    }

    SessionLimits limits() {
        return limits;
    }

    SessionPools pools() {
        return pools;
    }

    SessionVmm vmm() {
        return vmm;
    }

    SessionWaits waits() {
        return waits;
    }

    SessionHandles handles() {
        return handles;
    }

    SessionMemory memory() {
        return memory;
    }

    PrimaryContexts primary() {
        return primary;
    }

    HostCallbackGates callbackGates() {
        return callbackGates;
    }

    CallDispatcher dispatcher() {
        return dispatcher;
    }

    Lanes lanes() {
        return lanes;
    }

    int chunkBytes() {
        return limits.chunkBytes();
    }

    boolean asyncGranted() {
        return asyncGranted;
    }

    /** Reads frames until the connection ends, then cleans up. Runs on the session's own thread. */
    public void serve() {
        String reason = "peer closed the connection";
        // This thread's state, fetched once: quick calls run here for every lane of the session.
        ExecutionThread exec = ExecutionThread.current(chunkBytes());
        try {
            while (true) {
                FrameHeader h = channel.readHeader();
                int op = h.opcode();
                if (op == Opcodes.GOODBYE) {
                    channel.skipBody(h.length());
                    reason = "clean close";
                    break;
                }
                if (op == Opcodes.LANE_END) {
                    channel.skipBody(h.length());
                    lanes.end(h.lane());
                    continue;
                }
                if (Opcodes.isControl(op) && op != Opcodes.DATA) {
                    throw new ProtocolException("unexpected control frame after handshake: " + h);
                }
                if (op != Opcodes.DATA && h.length() > limits.maxCallBody()) {
                    throw new ProtocolException("call body too large: " + h + " max=" + limits.maxCallBody());
                }
                if (op == Opcodes.DATA && h.inWindow()) {
                    Inbound in = windowData(h);
                    lanes.lane(h.lane()).enqueue(in);
                    continue;
                }
                int charge = bodyBudget.charge(h);
                bodyBudget.acquire(charge);
                ByteBuffer body = dataBuffers.bodyFor(h);
                body.order(ByteOrder.LITTLE_ENDIAN);
                try {
                    channel.readBody(body);
                } catch (IOException e) {
                    bodyBudget.release(charge);
                    throw e;
                }
                body.flip();
                Inbound in = new Inbound(h, body, charge);
                Lane lane = lanes.lane(h.lane());
                if (op != Opcodes.DATA && (h.wantsReply() || !pipelinedToLane) && lane.pending.get() == 0
                        && dispatcher.runsInline(op)) {
                    // The lane is idle, the call is quick and its caller waits: run it here, without waking
                    // a thread. A pipelined call (no reply awaited) goes to the lane's thread even when
                    // quick, so that this thread reads and queues the next frames while the driver runs it:
                    // a burst of launches then costs the driver's time per launch, not the driver's plus ours.
                    try {
                        dispatcher.execute(lane, in, exec);
                    } finally {
                        release(in);
                    }
                } else {
                    lane.enqueue(in);
                }
            }
        } catch (EOFException e) {
            reason = failure != null ? failure : "peer closed the connection";
        } catch (ProtocolException e) {
            reason = "protocol violation: " + e.getMessage();
        } catch (IOException e) {
            reason = failure != null ? failure : "connection lost: " + e.getMessage();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            reason = "backend shutting down";
        } catch (RuntimeException e) {
            reason = "internal error: " + e;
            LOG.log(Level.ERROR, "session " + id + ": internal error", e);
        } finally {
            end(failure != null ? failure : reason);
        }
    }

    /** A DATA frame whose bytes are in the shared window: its body names them ({@link SessionWindow#data}). */
    private Inbound windowData(FrameHeader h) throws IOException, InterruptedException {
        if (window == null || h.length() != Handshake.WINDOW_REF_BYTES) {
            channel.skipBody(h.length());
            throw new ProtocolException("window DATA frame " + (window == null ? "on a session without a shared window"
                    : "of bad length") + ": " + h);
        }
        return window.data(h, channel.readBody(h.length()), bodyBudget);
    }

    /** A frame is done with: its window slot, pooled buffer and budget go back. */
    void release(Inbound in) {
        boolean inWindow = in.header().opcode() == Opcodes.DATA && in.header().inWindow();
        if (inWindow) {
            window.inputDone(); // a frame of bytes in a window slot, which the frontend may now refill
        } else {
            dataBuffers.offer(in.body());
        }
        bodyBudget.release(in.charge());
    }

    /** Ends the session because the peer broke the protocol; the reader sees the closed channel. */
    void fail(String reason) {
        if (failure == null) {
            failure = reason;
        }
        channel.close();
    }

    void send(int opcode, int flags, int lane, long requestId, ByteBuffer... body) throws IOException {
        channel.send(opcode, flags, lane, requestId, body);
    }

    /** Stops the lanes, destroys what the session made, logs one line. Idempotent. */
    public void end(String reason) {
        if (!ended.compareAndSet(false, true)) {
            return;
        }
        channel.close();
        callbackGates.close();   // no stream may stay blocked on a guest that is gone
        boolean stuck = lanes.endAll();
        String released = cleanup.releaseAll();
        if (window != null && !stuck) {
            window.release(); // every lane has finished: nothing of ours touches it any more
        }
        LOG.log(stuck ? Level.WARNING : Level.INFO, SessionCleanup.endLine(id, reason, peer, released, stuck, windowBytes()));
    }

    /** Forgets a handle and what it owned ({@link SessionCleanup#dropHandle}). */
    void dropHandle(long handleId) {
        cleanup.dropHandle(handleId);
    }

    /** The handle id of a lane's current context (0 if none). */
    long currentContextId(Lane lane) {
        return handles.idOf(ParamType.CTX, lane.topContext());
    }

    /** A destroyed context leaves every lane's stack. */
    void forgetContext(long real) {
        ExecutionThread.contextDestroyed();
        lanes.forgetContext(real);
    }
}
