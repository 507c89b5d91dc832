package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.WindowSlots;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.ref.Cleaner;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.BooleanSupplier;

/**
 * How one call travels: the calling thread's lane, its request frame, its bulk data as DATA frames
 * (or through the connection's shared window), and its reply. The generic stubs and every
 * hand-written call of the frontend send through here; what goes into a request is theirs.
 */
final class CallChannel {
    private static final Cleaner LANE_CLEANER = Cleaner.create();
    private static final int REQUEST_BUFFER = 64 << 10;
    private static final ThreadLocal<ByteBuffer> REQUEST =
            ThreadLocal.withInitial(() -> ByteBuffer.allocate(REQUEST_BUFFER).order(ByteOrder.LITTLE_ENDIAN));

    private final BackendConnection connection;
    private final AtomicInteger laneIds = new AtomicInteger(1);
    private final ThreadLocal<LaneTicket> lane = ThreadLocal.withInitial(this::newLane);
    private final AtomicBoolean lossReported = new AtomicBoolean();
    /** Whether calls from the current thread are refused (a stream callback running here). */
    private volatile BooleanSupplier refused = () -> false;
    /** Requests sent, and the times a caller waited for replies (one per call that waits, one per batch). */
    private final LongAdder requests = new LongAdder();
    private final LongAdder roundTrips = new LongAdder();
    /** The calling thread's current context as far as the frontend knows it. */
    private final CurrentContexts contexts = new CurrentContexts();

    /** A client thread's lane; when the thread is gone the backend is told to end the lane. */
    private static final class LaneTicket {
        final int id;

        LaneTicket(int id) {
            this.id = id;
        }
    }

    CallChannel(BackendConnection connection) {
        this.connection = connection;
    }

    /** Calls from a thread for which {@code refused} holds fail with CUDA_ERROR_NOT_PERMITTED. */
    void refuseWhen(BooleanSupplier refused) {
        this.refused = refused;
    }

    /** Managed memory's hook, told of every request before it is sent ({@link ManagedMemory#beforeCall}). */
    void managedMemory(ManagedMemory managed) {
        this.managed = managed;
    }

    private ManagedMemory managed;

    BackendConnection connection() {
        return connection;
    }

    CurrentContexts contexts() {
        return contexts;
    }

    /** Requests sent to the backend so far. */
    long requests() {
        return requests.sum();
    }

    /** Times a caller waited for the backend so far: each call that waited for its reply, each batch once. */
    long roundTrips() {
        return roundTrips.sum();
    }

    /**
     * Whether a call from this thread may be answered from what the frontend knows: it would not be
     * refused here and the connection is up (a lost connection fails every call, known or not).
     */
    boolean answersLocally() {
        return !refused.getAsBoolean() && connection.broken() == null;
    }

    /** Whether async calls are pipelined on this connection (asked for and granted). */
    boolean pipelining() {
        return connection.async();
    }

    /** This thread's request buffer, cleared. */
    static ByteBuffer request() {
        return REQUEST.get().clear();
    }

    /** A call's CUresult and, when it waited, the rest of the reply body (its outputs). */
    record Reply(int result, ByteBuffer body) {
    }

    /** From now on a lost connection is not reported (the driver is closing on purpose). */
    void closing() {
        lossReported.set(true);
    }

    private LaneTicket newLane() {
        int id = laneIds.getAndIncrement();
        LaneTicket ticket = new LaneTicket(id);
        BackendConnection conn = connection;
        LANE_CLEANER.register(ticket, () -> {
            try {
                conn.send(Opcodes.LANE_END, 0, id, 0);
            } catch (IOException ignored) {
                // the connection is gone, and the lane with it
            }
        });
        return ticket;
    }

    private int lost(IOException e) {
        if (lossReported.compareAndSet(false, true)) {
            System.err.println("gpusockets: " + e.getMessage() + "; CUDA calls now fail with "
                    + CuResult.name(RemoteCudaDriver.CONNECTION_LOST));
        }
        return RemoteCudaDriver.CONNECTION_LOST;
    }

    /** Frames gather at most this many pieces of bulk input (IOV_MAX is 1024). */
    private static final int MAX_GATHER = 1000;

    /** Sends one request (and its bulk inputs, each in frames of its own), then, unless pipelined, waits for the reply. */
    Reply exchange(ApiFunction f, ByteBuffer request, List<MemorySegment> bulk, List<MemorySegment> outBytes,
                           boolean noReply) {
        return exchange(f, request, bulk, false, outBytes, noReply);
    }

    /**
     * Sends one request and its bulk input as DATA frames of up to a chunk each, then, unless
     * pipelined, waits for the reply; bulk outputs land in {@code outBytes} in order. With
     * {@code gather} the bulk segments are the pieces of one input (the rows of a pitched copy) and
     * consecutive pieces share frames; without it each segment is a parameter of its own and starts a
     * new frame, as the backend's generic dispatch reads them.
     */
    Reply exchange(ApiFunction f, ByteBuffer request, List<MemorySegment> bulk, boolean gather,
                   List<MemorySegment> outBytes, boolean noReply) {
        return exchange(f, request, bulk, gather, outBytes, noReply, ManagedMemory.NO_STREAM);
    }

    /**
     * A kernel launch on {@code stream} (no bulk data): as {@link #exchange}, the stream telling managed memory which
     * allocations the launch may use ({@link ManagedMemory#beforeCall}: memory attached to the host or to another
     * stream is left where it is).
     */
    Reply launch(ApiFunction f, ByteBuffer request, long stream, boolean noReply) {
        return exchange(f, request, List.of(), false, List.of(), noReply, stream);
    }

    private Reply exchange(ApiFunction f, ByteBuffer request, List<MemorySegment> bulk, boolean gather,
                           List<MemorySegment> outBytes, boolean noReply, long launchStream) {
        if (refused.getAsBoolean()) {
            // A stream callback waiting on the stream it holds would never return; CUDA forbids the call too.
            return new Reply(CuResult.CUDA_ERROR_NOT_PERMITTED, null);
        }
        if (managed != null) {
            managed.beforeCall(f, bulk, outBytes, launchStream);
        }
        int laneId = lane.get().id;
        boolean resumable = connection.resumable();
        if (noReply && resumable && (bytes(bulk) > BackendConnection.RESUME_PIPELINED_BULK_MAX
                || connection.keptBytes(laneId) > BackendConnection.RESUME_LANE_KEPT_MAX)) {
            // kept for a resume, a pipelined call's input is a copy: a large one waits for its reply instead,
            // and so does the next call of a lane that keeps much (its reply acknowledges what the lane kept)
            noReply = false;
        }
        FrontendWindow held = noReply ? null : windowFor(bulk, outBytes);
        contexts.beforeCall(f);
        try {
            BackendConnection.Pending p = noReply ? null : connection.expect(outBytes);
            long requestId = p != null ? p.requestId : connection.nextRequestId();
            // ACKED: this thread has the replies of all its earlier calls (it waited for each)
            int flags = (noReply ? FrameHeader.FLAG_NO_REPLY : 0) | (held != null ? FrameHeader.FLAG_WINDOW : 0)
                    | (resumable ? FrameHeader.FLAG_ACKED : 0);
            int chunk = connection.maxBody() / 4;
            // small bulk input (one piece, one DATA frame) goes in the same write as the call
            MemorySegment small = held == null && bulk.size() == 1 && bulk.getFirst().byteSize() > 0
                    && bulk.getFirst().byteSize() <= Math.min(chunk, SMALL_BULK_MAX) ? bulk.getFirst() : null;
            if (held != null) {
                connection.sendVia(held, f.opcode(), flags, laneId, requestId, null, request);
            } else if (small != null) {
                connection.sendWithData(f.opcode(), flags, laneId, requestId, !noReply, new ByteBuffer[] {request},
                        new ByteBuffer[] {small.asByteBuffer()});
                bulk = List.of();
            } else {
                connection.send(f.opcode(), flags, laneId, requestId, !noReply, request);
            }
            requests.increment();
            List<ByteBuffer> frame = new ArrayList<>();
            long frameBytes = 0;
            // with the window: where the current frame's bytes go; after a resume (another ring, another window) the
            // rest goes through the byte stream
            long slot = -1;
            boolean viaWindow = held != null;
            for (MemorySegment b : bulk) {
                for (long off = 0; off < b.byteSize(); ) {
                    long n = Math.min(chunk - frameBytes, b.byteSize() - off);
                    if (viaWindow && frameBytes == 0) {
                        slot = connection.nextInputSlot(held);
                        viaWindow = slot >= 0;
                    }
                    if (viaWindow) {
                        SplitCopier.copy(b, off, held.segment(), slot + frameBytes, n);
                    }
                    frame.add(b.asSlice(off, n).asByteBuffer()); // through the window: what a resume resends instead
                    frameBytes += n;
                    off += n;
                    if (frameBytes == chunk || frame.size() == MAX_GATHER || (!gather && off == b.byteSize())) {
                        viaWindow = sendData(laneId, requestId, frame, viaWindow ? held : null, slot, frameBytes, !noReply);
                        frame.clear();
                        frameBytes = 0;
                    }
                }
            }
            if (!frame.isEmpty()) {
                sendData(laneId, requestId, frame, viaWindow ? held : null, slot, frameBytes, !noReply);
            }
            if (p == null) {
                return new Reply(CuResult.CUDA_SUCCESS, null);
            }
            roundTrips.increment();
            ByteBuffer body = connection.await(p).order(ByteOrder.LITTLE_ENDIAN);
            Reply reply = new Reply(body.getInt(), body);
            if (managed != null) {
                managed.afterCall(f, reply.result());
            }
            return reply;
        } catch (IOException e) {
            return new Reply(lost(e), null);
        } finally {
            contexts.afterCall(f);
            if (held != null) {
                connection.releaseWindow(held);
            }
        }
    }

    /** One request of a {@link #batch}: a generic call without bulk input, and where its bulk output goes. */
    record BatchCall(ApiFunction f, ByteBuffer request, List<MemorySegment> outBytes) {
    }

    /**
     * Sends every request on this thread's lane, then waits for all their replies: one round trip for
     * the lot. Only for calls that wait for their reply, carry no bulk input and change no context
     * (known entries); the caller bounds the batch so that requests and replies fit the transport's
     * buffers (the backend answers while the batch is still being sent). Null when the connection is lost.
     */
    List<Reply> batch(List<BatchCall> calls) {
        if (refused.getAsBoolean()) {
            return null;
        }
        int laneId = lane.get().id;
        List<BackendConnection.Pending> waiting = new ArrayList<>(calls.size());
        try {
            for (BatchCall c : calls) {
                BackendConnection.Pending p = connection.expect(c.outBytes());
                // ACKED on the first only: the batch's later requests go out before the earlier replies arrive
                int flags = waiting.isEmpty() && connection.resumable() ? FrameHeader.FLAG_ACKED : 0;
                waiting.add(p);
                connection.send(c.f().opcode(), flags, laneId, p.requestId, true, c.request());
                requests.increment();
            }
            roundTrips.increment();
            List<Reply> replies = new ArrayList<>(calls.size());
            for (BackendConnection.Pending p : waiting) {
                ByteBuffer body = connection.await(p).order(ByteOrder.LITTLE_ENDIAN);
                replies.add(new Reply(body.getInt(), body));
            }
            return replies;
        } catch (IOException e) {
            lost(e);
            return null;
        }
    }

    private static long bytes(List<MemorySegment> segments) {
        long n = 0;
        for (MemorySegment m : segments) {
            n += m.byteSize();
        }
        return n;
    }

    /**
     * Bulk data of at least this many bytes (in or out) goes through the connection's shared window
     * when it has one: it is copied once, into a few slots the backend's device reads (or writes)
     * where they are, instead of through a ring and out again. Smaller data rides in the byte stream.
     */
    static final long WINDOW_MIN_BYTES = 64 << 10;
    /**
     * Bulk input up to this size, in one piece, is written together with its call ({@link BackendConnection#sendWithData}):
     * one write instead of two, and the backend finds the data with the call.
     */
    static final long SMALL_BULK_MAX = 64 << 10;

    /** The shared window for a call with this bulk data, held until the reply; null to use the byte stream. */
    private FrontendWindow windowFor(List<MemorySegment> bulk, List<MemorySegment> outBytes) {
        long in = 0, out = 0;
        for (MemorySegment b : bulk) {
            in += b.byteSize();
        }
        for (MemorySegment o : outBytes) {
            out += o.byteSize();
        }
        return Math.max(in, out) >= WINDOW_MIN_BYTES ? connection.acquireWindow(in > 0) : null;
    }

    /**
     * Sends one DATA frame: {@code frame}'s buffers, or, with {@code held}, a reference to the {@code bytes}
     * already copied to {@code slot} of that window. Returns whether the next frame may go through the window
     * too (false once the session resumed on a new ring: the frame went as its bytes).
     */
    private boolean sendData(int laneId, long requestId, List<ByteBuffer> frame, FrontendWindow held, long slot, long bytes,
                             boolean stable) throws IOException {
        if (held == null) {
            connection.send(Opcodes.DATA, 0, laneId, requestId, stable, frame.toArray(ByteBuffer[]::new));
            return false;
        }
        if (!connection.sendVia(held, Opcodes.DATA, FrameHeader.FLAG_WINDOW, laneId, requestId,
                frame.toArray(ByteBuffer[]::new), WindowSlots.ref(slot, bytes))) {
            return false;
        }
        held.inputSent();
        return true;
    }
}
