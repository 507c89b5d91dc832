package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.transport.SharedWindow;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.ProtocolException;
import io.gpusockets.protocol.wire.WindowSlots;
import java.io.EOFException;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One frontend connection after its handshake: reads frames, hands each to its lane, and when the
 * connection ends, however it ends, destroys every context the session made (which frees its
 * memory, modules, streams and events on the device) and logs what it released.
 */
public final class Session {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");
    /** Smallest charge against the body budget, so that empty frames cannot queue without bound. */
    private static final int MIN_CHARGE = 64;
    /**
     * Whether pipelined quick calls go to the lane's thread (the default) rather than run on the reader
     * when the lane is idle. System property {@code gpusockets.backend.pipelinedToLane}, for measuring
     * one against the other (benchmarks/RESULTS.md).
     */
    static final boolean PIPELINED_TO_LANE =
            Boolean.parseBoolean(System.getProperty("gpusockets.backend.pipelinedToLane", "true"));

    private final long id;
    private final FrameChannel channel;
    private final DriverHost host;
    private final SessionLimits limits;
    private final String peer;
    private final boolean asyncGranted;
    private final SessionHandles handles;
    private final SessionMemory memory = new SessionMemory();
    private final PrimaryContexts primary;
    private final HostCallbackGates callbackGates = new HostCallbackGates();
    private final CallDispatcher dispatcher;
    private final Map<Integer, Lane> lanes = new ConcurrentHashMap<>();
    private final Semaphore bodyBudget;
    private final java.util.Queue<ByteBuffer> dataPool = new java.util.concurrent.ConcurrentLinkedQueue<>();
    private final AtomicBoolean ended = new AtomicBoolean();
    /** Host buffers device-to-host copies stage through (pinned where the driver allows). */
    private final StagingPool staging;
    /**
     * Memory this session shares with its frontend (the connection's window), or null. DATA frames
     * flagged FLAG_WINDOW refer to it; copies to the host may be placed in it. Only the frontend's own
     * data is ever in it, so a frontend that writes it at the wrong time harms nobody else.
     */
    private final SharedWindow window;
    private final ContextPool contextPool;
    /** Bulk bytes that went through the window, both ways. */
    private final java.util.concurrent.atomic.LongAdder windowBytes = new java.util.concurrent.atomic.LongAdder();
    private volatile String failure;

    /**
     * {@code window}: the memory shared with the frontend, if the handshake agreed to use it, else null;
     * {@code contextPool}: where the session's primary contexts come from when it has one ready, or null.
     */
    public Session(long id, FrameChannel channel, DriverHost host, SessionLimits limits, String peer, boolean asyncGranted,
                   SharedWindow window, ContextPool contextPool) {
        this.contextPool = contextPool;
        this.id = id;
        this.channel = channel;
        this.host = host;
        this.limits = limits;
        this.peer = peer;
        this.asyncGranted = asyncGranted;
        this.handles = new SessionHandles(id);
        this.primary = new PrimaryContexts(this);
        this.dispatcher = new CallDispatcher(this);
        this.bodyBudget = new Semaphore(limits.bodyBudget());
        this.staging = new StagingPool(host.driver(), id, outChunkBytes(limits.chunkBytes(), channel.maxBody()));
        this.window = window;
    }

    ContextPool contextPool() {
        return contextPool;
    }

    /** The memory shared with the frontend, or null. */
    MemorySegment window() {
        return window == null ? null : window.segment();
    }

    /** Window input frames done with, ever; published to the frontend, which then reuses their slots. */
    private long windowInReleased;
    /** Window output frames sent, ever (by whichever lane holds the frontend's window call). */
    private long windowOutSent;

    private synchronized void windowInputDone() {
        WindowSlots.publish(window.segment(), WindowSlots.IN_RELEASED_OFFSET, ++windowInReleased);
    }

    /**
     * The window offset where the next output frame goes, in one of {@code slots} output slots of
     * {@code slotBytes}, once the frontend has copied out the frame that last used that slot; call
     * {@link #windowOutputSent} after sending it. Waits for as long as the frontend is there: it ends
     * with an IOException when the frontend goes away or the session ends, and an InterruptedException
     * when the lane is interrupted. A frontend that never takes its data holds only its own lane.
     */
    long nextWindowOutputSlot(int slots, long slotBytes) throws IOException, InterruptedException {
        MemorySegment w = window.segment();
        long sent;
        synchronized (this) {
            sent = windowOutSent;
        }
        boolean[] interrupted = new boolean[1];
        if (!WindowSlots.await(w, WindowSlots.OUT_TAKEN_OFFSET, sent - slots + 1,
                () -> (interrupted[0] = Thread.interrupted()) || ended.get() || channel.connection().peerClosed())) {
            if (interrupted[0]) {
                throw new InterruptedException("session ending while waiting for the frontend to take window data");
            }
            throw new IOException("frontend gone while window data was waiting for it");
        }
        return WindowSlots.outputSlotOffset(w.byteSize(), (int) (sent % slots), slotBytes);
    }

    /** An output frame of {@code bytes} was sent through the window. */
    synchronized void windowOutputSent(long bytes) {
        windowOutSent++;
        windowBytes.add(bytes);
    }

    /** Bulk bytes that went through the shared window so far, both ways. */
    public long windowBytes() {
        return windowBytes.sum();
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

    /** Before {@code real}, a context of this session, is destroyed: its pinned staging buffers go first, and the window's registration in it. */
    void beforeContextDestroy(long real) {
        staging.retire(real);
        unpinWindow(real);
    }

    /** cuMemHostRegister flag: the registration is seen by every context, not only the registering one. */
    private static final int MEMHOSTREGISTER_PORTABLE = 0x01;
    /** The real context the shared window is page-locked in (cuMemHostRegister), 0 while it is not. Guarded by this. */
    private long windowPinnedIn;
    /** The driver refused to page-lock the window once: copies through it go through the driver's own staging. */
    private boolean windowPinRefused;

    /**
     * Page-locks the shared window with the driver, once, portably (so that any context may DMA to
     * and from it), in {@code context}, the caller's current context. Then the device reads and writes
     * the window itself, with no copy on this side. False where the driver will not (the emulated
     * device has no page-locking): copies through the window then go through the driver's staging.
     */
    synchronized boolean pinWindow(long context) {
        if (windowPinnedIn != 0) {
            return true;
        }
        if (window == null || windowPinRefused || context == 0) {
            return false;
        }
        MemorySegment w = window.segment();
        int r = host.driver().cuMemHostRegister(w, w.byteSize(), MEMHOSTREGISTER_PORTABLE);
        if (r == CuResult.CUDA_SUCCESS) {
            windowPinnedIn = context;
            return true;
        }
        windowPinRefused = true;
        LOG.log(r == CuResult.CUDA_ERROR_NOT_SUPPORTED ? Level.DEBUG : Level.INFO, "session " + id
                + ": the shared window could not be page-locked (" + CuResult.name(r) + "); copies through it are staged by the driver");
        return false;
    }

    /** Undoes {@link #pinWindow} if it was done in {@code context} (in any context when 0), from any thread. */
    private synchronized void unpinWindow(long context) {
        if (windowPinnedIn == 0 || (context != 0 && windowPinnedIn != context)) {
            return;
        }
        CudaDriver driver = host.driver();
        boolean pushed = driver.cuCtxPushCurrent(windowPinnedIn) == CuResult.CUDA_SUCCESS;
        int r = driver.cuMemHostUnregister(window.segment());
        if (pushed) {
            try (java.lang.foreign.Arena a = java.lang.foreign.Arena.ofConfined()) {
                driver.cuCtxPopCurrent(a.allocate(java.lang.foreign.ValueLayout.ADDRESS));
            }
        }
        if (r != CuResult.CUDA_SUCCESS) {
            LOG.log(Level.WARNING, "session " + id + ": cuMemHostUnregister of the shared window failed: " + CuResult.name(r));
        }
        windowPinnedIn = 0;
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

    SessionLimits limits() {
        return limits;
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
                    Lane lane = lanes.remove(h.lane());
                    if (lane != null) {
                        lane.end();
                    }
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
                    lane(h.lane()).enqueue(in);
                    continue;
                }
                boolean pooled = op == Opcodes.DATA && h.length() <= limits.chunkBytes();
                // A pooled DATA buffer costs its whole capacity, so tiny DATA frames cannot pin many chunks.
                int charge = pooled ? limits.chunkBytes() : Math.max(h.length(), MIN_CHARGE);
                bodyBudget.acquire(charge);
                ByteBuffer body = pooled ? dataBuffer(h.length())
                        : op == Opcodes.DATA ? ByteBuffer.allocateDirect(h.length()) : ByteBuffer.allocate(h.length());
                body.order(ByteOrder.LITTLE_ENDIAN);
                try {
                    channel.readBody(body);
                } catch (IOException e) {
                    bodyBudget.release(charge);
                    throw e;
                }
                body.flip();
                Inbound in = new Inbound(h, body, charge);
                Lane lane = lane(h.lane());
                if (op != Opcodes.DATA && (h.wantsReply() || !PIPELINED_TO_LANE) && lane.pending.get() == 0
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

    /**
     * A DATA frame whose bytes are in the shared window: its body names them (offset u64, length u64),
     * checked against the window, and the bytes are used in place, never copied out first.
     */
    private Inbound windowData(FrameHeader h) throws IOException, InterruptedException {
        if (window == null || h.length() != Handshake.WINDOW_REF_BYTES) {
            channel.skipBody(h.length());
            throw new ProtocolException("window DATA frame " + (window == null ? "on a session without a shared window"
                    : "of bad length") + ": " + h);
        }
        MemorySegment bytes = WindowSlots.resolve(window.segment(), channel.readBody(h.length()));
        bodyBudget.acquire(MIN_CHARGE);
        windowBytes.add(bytes.byteSize());
        return new Inbound(h, bytes.asByteBuffer().order(ByteOrder.LITTLE_ENDIAN), MIN_CHARGE);
    }

    private Lane lane(int laneId) throws ProtocolException {
        Lane lane = lanes.get(laneId);
        if (lane == null) {
            if (lanes.size() >= limits.maxLanes()) {
                throw new ProtocolException("too many lanes: max=" + limits.maxLanes());
            }
            lane = new Lane(this, laneId);
            lanes.put(laneId, lane);
        }
        return lane;
    }

    /**
     * A direct buffer for a DATA body, reused across frames: bulk data moves from the transport
     * into native memory the driver copies from, with no allocation (and no GC-freed direct memory)
     * per chunk. At most bodyBudget / chunkBytes exist per session.
     */
    private ByteBuffer dataBuffer(int length) {
        ByteBuffer b = dataPool.poll();
        if (b == null) {
            b = ByteBuffer.allocateDirect(limits.chunkBytes());
        }
        return b.clear().limit(length);
    }

    void release(Inbound in) {
        boolean inWindow = in.header().opcode() == Opcodes.DATA && in.header().inWindow();
        if (inWindow) {
            windowInputDone(); // a frame of bytes in a window slot, which the frontend may now refill
        }
        ByteBuffer body = in.body();
        if (!inWindow && body != null && body.isDirect() && body.capacity() == limits.chunkBytes()) {
            dataPool.offer(body);
        }
        if (in.charge() > 0) {
            bodyBudget.release(in.charge());
        }
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
        List<Lane> all = new ArrayList<>(lanes.values());
        lanes.clear();
        for (Lane l : all) {
            l.end();
        }
        boolean stuck = false;
        try {
            for (Lane l : all) {
                // A lane inside a long driver call finishes it first; a lane waiting for data that will never come is interrupted.
                if (!l.join(2000)) {
                    l.interrupt();
                    stuck |= !l.join(10_000);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        String released = releaseAll();
        if (window != null && !stuck) {
            window.release(); // every lane has finished: nothing of ours touches it any more
        }
        long carried = windowBytes.sum();
        LOG.log(stuck ? Level.WARNING : Level.INFO, "session " + id + " ended (" + reason + "), peer " + peer
                + ": released " + released + (stuck ? "; a lane was still inside a driver call" : "")
                + (carried > 0 ? "; " + carried + " bytes went through the shared window" : ""));
    }

    /** Destroys every context of the session; the driver frees everything made in them. */
    private String releaseAll() {
        int contexts = handles.count(ParamType.CTX);
        int allocations = memory.allocationCount();
        long bytes = memory.allocatedBytes();
        int modules = handles.count(ParamType.MOD) + handles.count(ParamType.LIB);
        int streams = handles.count(ParamType.STREAM);
        int events = handles.count(ParamType.EVENT);
        int failed = 0;
        unpinWindow(0);  // before its context may go, and before the window is unmapped
        staging.close(); // pinned buffers belong to contexts: free them while those still exist
        String stagingSummary = staging.summary();
        for (SessionHandles.Entry ctx : handles.all(ParamType.CTX)) {
            int r = host.driver().cuCtxDestroy(ctx.real());
            ExecutionThread.contextDestroyed();
            if (r != CuResult.CUDA_SUCCESS) {
                failed++;
                LOG.log(Level.WARNING, "session " + id + ": cuCtxDestroy failed during cleanup: " + CuResult.name(r));
            }
            dropHandle(ctx.id());
        }
        return contexts + " context(s), " + allocations + " allocation(s) (" + bytes + " bytes), " + modules
                + " module(s)/librar(ies), " + streams + " stream(s), " + events + " event(s)"
                + stagingSummary + (failed > 0 ? ", " + failed + " context(s) failed to destroy" : "");
    }

    /** Forgets a handle and what it owned, including device ranges owned by dropped contexts and modules. */
    void dropHandle(long handleId) {
        Set<Long> owners = new HashSet<>();
        for (SessionHandles.Entry e : handles.remove(handleId)) {
            owners.add(e.id());
        }
        if (!owners.isEmpty()) {
            memory.removeOwnedBy(owners);
        }
    }

    /** The handle id of a lane's current context (0 if none). */
    long currentContextId(Lane lane) {
        return handles.idOf(ParamType.CTX, lane.topContext());
    }

    /** A destroyed context leaves every lane's stack. */
    void forgetContext(long real) {
        ExecutionThread.contextDestroyed();
        for (Lane l : lanes.values()) {
            l.forgetContext(real);
        }
    }
}
