package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.ProtocolException;
import io.gpusockets.protocol.wire.WireValues;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * One call being served on a lane: its request body, the validation helpers every handler uses,
 * scratch memory for outputs, the bulk DATA frames that follow it, and its reply. Every handle and
 * device range it checks, and its lane's context, stay in use by it ({@link Uses}) until it is
 * {@link #close closed}, after its driver call: a destroy or free on another lane waits for that
 * ({@link SessionUses}).
 */
final class Call {
    final Session session;
    final Lane lane;
    final FrameHeader header;
    final ByteBuffer body;
    final ApiFunction function;
    /** The thread running this call: its scratch and staging memory and its current context. */
    final ExecutionThread exec;
    /** Outputs after the result slot; sent only when the call succeeds. */
    final ByteBuffer outs = ByteBuffer.allocate(256).order(ByteOrder.LITTLE_ENDIAN);
    /** Slices of the thread's scratch, made on the call's first small scratch. */
    private SegmentAllocator scratch;
    private Arena arena;
    /** Bytes taken from {@link #arena}, counted in {@link Session#callNativeBytes}. */
    private long arenaBytes;
    /** The memory of bulk inputs received whole, each in an arena of its own; freed by {@link #close}. */
    private final java.util.List<Arena> bulk = new java.util.ArrayList<>(2);
    /** Bytes in {@link #bulk}, counted in {@link Session#callNativeBytes}. */
    private long bulkBytes;
    /** DATA bytes announced by the request and not yet taken off the lane. */
    private long bulkPending;
    /** A chunk taken off the lane by {@link #peekChunk} and not yet handed out. */
    private Inbound peeked;
    /** Room this call reserved in the session's handle table ({@link #reserveHandles}), given back by {@link #close}. */
    private int reservedHandles, reservedStreams;
    /**
     * What this call uses ({@link Uses}, published in its lane's {@link UseSlot}), and for each the result
     * to refuse with should it go meanwhile (0: the lane's context).
     */
    private Uses[] held = new Uses[4];
    private int[] heldRefusal = new int[4];
    private int heldCount;
    /** The DATA bytes this call consumed, kept for a checkpoint record ({@link #captureData}), or null. */
    private java.io.ByteArrayOutputStream captured;
    /** Whether this call holds the session's destroy lock ({@link #retire}). */
    private boolean destroying;

    /**
     * The shared window of the connection the call came on, or null: where a call flagged
     * {@link FrameHeader#FLAG_WINDOW} gets its bulk output, while that window is not retired.
     */
    SessionWindow window;

    Call(Session session, Lane lane, FrameHeader header, ByteBuffer body, ApiFunction function, ExecutionThread exec) {
        this.session = session;
        this.lane = lane;
        this.header = header;
        this.body = body;
        this.function = function;
        this.exec = exec;
    }

    String name() {
        return function == null ? Opcodes.name(header.opcode()) : function.name();
    }

    /** Zeroed memory for one output or small input; from lane scratch, or a per-call arena when large. */
    MemorySegment scratch(long bytes) {
        if (bytes <= 1024) {
            if (scratch == null) {
                scratch = SegmentAllocator.slicingAllocator(exec.scratch());
            }
            try {
                return scratch.allocate(Math.max(bytes, 8), 16).fill((byte) 0);
            } catch (IndexOutOfBoundsException full) {
                // fall through to the arena
            }
        }
        if (arena == null) {
            arena = Arena.ofConfined();
        }
        MemorySegment m = arena.allocate(Math.max(bytes, 8), 16);
        arenaBytes += m.byteSize();
        session.callNativeBytes(m.byteSize());
        return m;
    }

    long readLong() {
        return body.getLong();
    }

    void expectEnd() throws ProtocolException {
        if (body.hasRemaining()) {
            throw new ProtocolException(name() + ": " + body.remaining() + " unexpected trailing bytes in request");
        }
    }

    /** A u32-length string from the request, copied to native memory with a NUL. */
    MemorySegment readCString() throws ProtocolException {
        int n = body.getInt();
        if (n < 0 || n > WireValues.MAX_CSTR || n > body.remaining()) {
            throw new ProtocolException(name() + ": string length out of range: length=" + n);
        }
        MemorySegment s = scratch(n + 1L);
        for (int i = 0; i < n; i++) {
            byte b = body.get();
            if (b == 0) {
                throw new ProtocolException(name() + ": NUL inside string parameter");
            }
            s.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, b);
        }
        s.set(java.lang.foreign.ValueLayout.JAVA_BYTE, n, (byte) 0);
        return s;
    }

    int device(int dev) throws CallRejected {
        if (dev < 0 || dev >= session.host().deviceCount()) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_DEVICE, "device=" + dev);
        }
        return dev;
    }

    /**
     * The real driver value behind a handle id of this session. Streams 0, 1 and 2 are the special
     * default streams; a FUNC parameter also takes the session's KERNEL ids.
     */
    long handle(ParamType kind, long id, boolean nullable) throws CallRejected {
        if (id == 0 && (nullable || kind == ParamType.STREAM)) {
            return 0;
        }
        if (kind == ParamType.STREAM && (id == 1 || id == 2)) {
            return id;
        }
        return entry(kind, id).real();
    }

    /**
     * The entry behind a handle id of {@code kind} (not a special stream), a use of it taken for this call as
     * {@link #handle} takes one; a FUNC id may be a CUkernel's (which the driver takes wherever it takes a CUfunction).
     */
    SessionHandles.Entry entry(ParamType kind, long id) throws CallRejected {
        SessionHandles.Entry e = session.handles().get(id, kind);
        if (e == null && kind == ParamType.FUNC) {
            // The driver takes a CUkernel wherever it takes a CUfunction (cudart launches CUkernels): the
            // session's kernel id stands for its real CUkernel, which the driver resolves in the current context.
            e = session.handles().get(id, ParamType.KERNEL);
        }
        int refusal = kind == ParamType.CTX ? CuResult.CUDA_ERROR_INVALID_CONTEXT : CuResult.CUDA_ERROR_INVALID_HANDLE;
        if (e == null) {
            throw new CallRejected(refusal, kind + " handle not issued to this session: " + id);
        }
        if (!use(e.uses, refusal)) {
            throw new CallRejected(refusal, kind + " handle being destroyed by another call: " + id);
        }
        return e;
    }

    /**
     * Takes a use of the lane's context {@code real} for this call; returns the context to make
     * current: {@code real}, or 0 (none: the driver refuses what needs one) when it is being destroyed.
     */
    long useContext(long real) {
        if (real == 0) {
            return 0;
        }
        long epoch = ExecutionThread.destroyedEpoch();
        SessionHandles.Entry e;
        if (real == lane.usedContext && epoch == lane.usedContextEpoch) {
            e = lane.usedContextEntry; // a destroy marks the entry dying before the driver sees it: use() then refuses
        } else {
            e = session.handles().entryOf(ParamType.CTX, real);
            if (e != null) {
                lane.usedContext = real;
                lane.usedContextEntry = e;
                lane.usedContextEpoch = epoch;
            }
        }
        return e != null && use(e.uses, 0) ? real : 0;
    }

    private boolean use(Uses u, int refusal) {
        if (!lane.uses.use(u)) {
            return false;
        }
        if (heldCount == held.length) {
            held = java.util.Arrays.copyOf(held, heldCount * 2);
            heldRefusal = java.util.Arrays.copyOf(heldRefusal, heldCount * 2);
        }
        held[heldCount] = u;
        heldRefusal[heldCount++] = refusal;
        return true;
    }

    /** Ends this call's uses of what is in {@code set} (a retirement of its own: it destroys them). */
    void releaseUsesOf(java.util.Set<Uses> set) {
        int kept = 0;
        boolean dying = lane.uses.end(set);
        for (int i = 0; i < heldCount; i++) {
            if (!set.contains(held[i])) {
                held[kept] = held[i];
                heldRefusal[kept++] = heldRefusal[i];
            }
        }
        java.util.Arrays.fill(held, kept, heldCount, null);
        heldCount = kept;
        if (dying) {
            session.uses().released();
        }
    }

    private void releaseUses() {
        boolean dying = lane.uses.endAll();
        java.util.Arrays.fill(held, 0, heldCount, null);
        heldCount = 0;
        if (dying) {
            session.uses().released();
        }
    }

    /**
     * Retires what this call is about to destroy or free ({@link SessionUses#retire}): the handles
     * {@code handleIds} with all they hold, the allocations at {@code rangeBases}. Takes the session's
     * destroy lock first (held until the call ends), letting go of this call's uses while it waits for
     * it and taking them again after: a refusal when something it checked went meanwhile.
     */
    SessionUses.Retirement retire(long[] handleIds, long[] rangeBases) throws CallRejected, InterruptedException {
        if (!destroying) {
            Uses[] had = java.util.Arrays.copyOf(held, heldCount);
            int[] refusals = java.util.Arrays.copyOf(heldRefusal, heldCount);
            releaseUses();
            session.uses().lockDestroys();
            destroying = true;
            for (int i = 0; i < had.length; i++) {
                if (use(had[i], refusals[i])) {
                    continue;
                }
                if (refusals[i] == 0) {
                    exec.apply(session.driver(), 0);   // the lane's context went meanwhile
                } else {
                    throw new CallRejected(refusals[i], "destroyed by another call meanwhile");
                }
            }
        }
        return session.uses().retire(this, handleIds, rangeBases);
    }

    /**
     * Reserves room for {@code n} more handles of the session, {@code streams} of them streams, until
     * this call ends; refused with CUDA_ERROR_OUT_OF_MEMORY (what the driver answers when it cannot make
     * one) past the session's or its tenant's caps. Called before the driver makes them, so that a
     * refusal leaks nothing; and before a handle is issued for something the driver already holds.
     */
    void reserveHandles(int n, int streams) throws CallRejected {
        if (n <= 0 && streams <= 0) {
            return;
        }
        String refused = session.reserveHandles(n, streams);
        if (refused != null) {
            throw new CallRejected(CuResult.CUDA_ERROR_OUT_OF_MEMORY, "the session holds as many " + refused
                    + " as it may (" + refused + " cap " + session.handleCap(refused) + ")");
        }
        reservedHandles += n;
        reservedStreams += streams;
    }

    /** As {@link #reserveHandles}, for the first {@code n} real {@code kind} values in {@code reals} the session has no id for yet. */
    void reserveUnknown(ParamType kind, MemorySegment reals, long n) throws CallRejected {
        reserveHandles(session.handles().unknown(kind, reals, n), 0);
    }

    /**
     * Checks that [p, p+n) lies within one of the session's device ranges and returns p's real address: p itself,
     * or where p is a restored module global's address as the program knows it, where the global lies now
     * ({@link GlobalTranslation}; the caller passes the returned address to the driver).
     */
    long deviceRange(long p, long n) throws CallRejected {
        p = session.toReal(p);
        SessionMemory memory = session.memory();
        SessionMemory.Range r = memory.covering(p, n);
        if (r == null) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE,
                    String.format("device range 0x%x+%d outside the session's allocations", p, n));
        }
        while (true) {
            if (!use(r.uses, CuResult.CUDA_ERROR_INVALID_VALUE)) {
                throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE,
                        String.format("device range 0x%x+%d being freed by another call", p, n));
            }
            if (r.base() + r.size() - p >= n) {
                return p;
            }
            r = memory.next(r);   // a span over adjacent mappings: each of them is used
            if (r == null) {
                throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE,
                        String.format("device range 0x%x+%d outside the session's allocations", p, n));
            }
        }
    }

    /** Announces {@code n} bytes of DATA frames that belong to this call. */
    void expectBulk(long n) throws ProtocolException {
        if (n < 0) {
            throw new ProtocolException(name() + ": negative bulk length");
        }
        bulkPending += n;
    }

    /** The next DATA chunk of this call, without taking it: {@link #nextChunk} returns it next. */
    Inbound peekChunk() throws ProtocolException, InterruptedException {
        if (peeked == null) {
            peeked = nextChunk();
        }
        return peeked;
    }

    /** The next DATA chunk of this call (the caller must release it with {@link #release}). */
    Inbound nextChunk() throws ProtocolException, InterruptedException {
        if (peeked != null) {
            Inbound in = peeked;
            peeked = null;
            return in;
        }
        Inbound in = lane.nextData(header.requestId());
        int n = in.body().remaining();
        if (n == 0 || n > bulkPending) {
            lane.release(in);
            throw new ProtocolException(name() + ": DATA frame of " + n + " bytes with " + bulkPending + " expected");
        }
        bulkPending -= n;
        if (captured != null) {
            ByteBuffer b = in.body().duplicate();
            byte[] bytes = new byte[b.remaining()];
            b.get(bytes);
            captured.writeBytes(bytes);
        }
        return in;
    }

    /**
     * Keeps the DATA bytes this call consumes from now on (a call a checkpoint may record: module images, and the
     * node arrays and parameters a codec= entry such as cuGraphAddKernelNode announces itself).
     */
    void captureData() {
        if (function != null && (function.codec() != io.gpusockets.protocol.api.WireCodec.GENERIC
                || function.params().stream().anyMatch(p -> !p.out() && p.type().isBulk()))) {
            captured = new java.io.ByteArrayOutputStream();
        }
    }

    /** The DATA bytes kept by {@link #captureData}, or null. */
    byte[] capturedData() {
        return captured == null ? null : captured.toByteArray();
    }

    void release(Inbound in) {
        lane.release(in);
    }

    /**
     * Receives a whole bulk input into native memory (bounded by the session limits). The memory grows
     * with the bytes that arrive, from one chunk (or {@code n}, if smaller) and doubling up to {@code n}:
     * a header that announces a large input and sends nothing commits at most a chunk, never {@code n}.
     * It is the call's until {@link #close}.
     */
    MemorySegment receiveBulk(long n) throws ProtocolException, InterruptedException, CallRejected {
        if (n > session.limits().maxBulkBytes()) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "bulk input of " + n + " bytes over the limit");
        }
        if (n <= 1024) {
            return receiveInto(scratch(n), n);
        }
        Arena held = Arena.ofConfined();
        MemorySegment dst = allocateBulk(held, Math.min(n, session.chunkBytes()));
        long off = 0;
        try {
            while (off < n) {
                Inbound in = nextChunk();
                try {
                    int len = in.body().remaining();
                    if (len > n - off) {
                        throw new ProtocolException(name() + ": DATA frame of " + len + " bytes crosses the end of a "
                                + n + "-byte parameter");
                    }
                    if (off + len > dst.byteSize()) {
                        // Grown to what has arrived, at least doubling (amortized copies), never past n.
                        Arena bigger = Arena.ofConfined();
                        MemorySegment grown = allocateBulk(bigger, Math.min(n, Math.max(off + len, 2 * dst.byteSize())));
                        MemorySegment.copy(dst, 0, grown, 0, off);
                        freeBulk(held, dst.byteSize());
                        held = bigger;
                        dst = grown;
                    }
                    MemorySegment.copy(MemorySegment.ofBuffer(in.body()), 0, dst, off, len);
                    off += len;
                } finally {
                    release(in);
                }
            }
        } catch (ProtocolException | InterruptedException | RuntimeException e) {
            freeBulk(held, dst.byteSize());
            throw e;
        }
        bulk.add(held);
        bulkBytes += dst.byteSize();
        return dst.asSlice(0, n);
    }

    /** Fills {@code dst} with the next {@code n} bytes of this call's DATA frames. */
    /** Receives {@code n} bytes of bulk input straight into {@code dst} (announced with {@link #expectBulk} first by codec calls). */
    MemorySegment receiveInto(MemorySegment dst, long n) throws ProtocolException, InterruptedException {
        long off = 0;
        while (off < n) {
            Inbound in = nextChunk();
            try {
                int len = in.body().remaining();
                if (len > n - off) {
                    throw new ProtocolException(name() + ": DATA frame of " + len + " bytes crosses the end of a "
                            + n + "-byte parameter");
                }
                MemorySegment.copy(MemorySegment.ofBuffer(in.body()), 0, dst, off, len);
                off += len;
            } finally {
                release(in);
            }
        }
        return dst.asSlice(0, n);
    }

    private MemorySegment allocateBulk(Arena a, long bytes) {
        MemorySegment m = a.allocate(bytes, 16);
        session.callNativeBytes(bytes);
        return m;
    }

    private void freeBulk(Arena a, long bytes) {
        a.close();
        session.callNativeBytes(-bytes);
    }

    /** Takes and drops the DATA frames this call announced but did not consume (a rejected call). */
    void drainBulk() throws ProtocolException, InterruptedException {
        while (bulkPending > 0) {
            release(nextChunk());
        }
    }

    /** Sends {@code src} to the frontend as DATA frames of this call, each at most a staging buffer long. */
    /**
     * Output of this call held back to go in one write with its reply ({@link #sendDataWithReply}), or null: small copy
     * output, in the executor's staging buffer, which stays as it is until the reply is sent on this thread.
     */
    ByteBuffer withReply;

    /**
     * {@code src}, at most one staging buffer, as one DATA frame sent with the call's reply (one write where the session
     * is not resumable; where it is, or where no reply follows, as two frames, as {@link #sendData} sends it): the
     * frontend's reader then takes both at once. {@code src} must stay unchanged until the reply is sent.
     */
    void sendDataWithReply(MemorySegment src) throws IOException {
        if (withReply != null || src.byteSize() > session.staging().bufferBytes()) {
            throw new IllegalStateException(name() + ": output held back for the reply twice, or larger than a staging buffer");
        }
        if (!header.wantsReply()) {
            sendData(src);
            return;
        }
        withReply = src.asByteBuffer();
    }

    void sendData(MemorySegment src) throws IOException {
        long n = src.byteSize();
        int chunk = session.staging().bufferBytes();
        for (long off = 0; off < n; off += chunk) {
            MemorySegment part = src.asSlice(off, Math.min(chunk, n - off));
            session.send(Opcodes.DATA, 0, header.lane(), header.requestId(), part.asByteBuffer());
        }
    }

    /**
     * Tells the frontend that {@code length} bytes of this call's output are in the shared window {@code w} at
     * {@code offset} ({@link Session#sendWindowData}).
     */
    void sendWindowData(SessionWindow w, long offset, long length) throws IOException {
        session.sendWindowData(w, header.lane(), header.requestId(), offset, length);
    }

    void close() {
        releaseUses();
        if (destroying) {
            destroying = false;
            session.uses().unlockDestroys();
        }
        if (reservedHandles + reservedStreams > 0) {
            session.handles().unreserve(reservedHandles, reservedStreams);
            reservedHandles = 0;
            reservedStreams = 0;
        }
        if (peeked != null) {
            lane.release(peeked);
            peeked = null;
        }
        if (arena != null) {
            arena.close();
            arena = null;
            session.callNativeBytes(-arenaBytes);
            arenaBytes = 0;
        }
        for (Arena a : bulk) {
            a.close();
        }
        bulk.clear();
        session.callNativeBytes(-bulkBytes);
        bulkBytes = 0;
    }
}
