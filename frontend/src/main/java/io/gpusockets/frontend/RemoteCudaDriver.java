package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.ContextRule;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.ModuleImageKind;
import io.gpusockets.protocol.wire.WireValues;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The CUDA driver API of a remote GPU. Every call goes to the backend except those the API table
 * marks local (host memory, error strings) and, unless GPUSOCKETS_LOCAL_ANSWERS=0, the table's known
 * entries and cuCtxGetCurrent, answered from what the connection learned ({@link KnownAnswers},
 * {@link CurrentContexts}). Usable from any JVM program:
 * <pre>{@code
 *   try (RemoteCudaDriver cu = RemoteCudaDriver.connect("tcp://gpu-host:7070")) {
 *       cu.cuInit(0); ...
 *   }
 * }</pre>
 * Each client thread is its own lane: its calls run in order on the backend, and a blocking call on
 * one thread never delays another thread's calls. Calls the table marks async are pipelined (sent
 * without waiting) unless GPUSOCKETS_ASYNC=0; their errors come back from the next synchronizing call.
 */
public final class RemoteCudaDriver extends GeneratedRemoteDriver implements AutoCloseable {
    /** What every call returns once the backend is gone. */
    public static final int CONNECTION_LOST = CuResult.CUDA_ERROR_DEVICE_UNAVAILABLE;

    private final BackendConnection connection;
    private final CallChannel channel;
    private final LocalCalls local = new LocalCalls(new LocalCalls.Mapper() {
        @Override
        public int allocMapped(long bytesize, long[] base) {
            return allocMappedHost(bytesize, base);
        }

        @Override
        public int freeMapped(long base) {
            return freeMappedHost(base);
        }
    });
    private final DeviceRanges ranges = DeviceRanges.askingBackend(this);
    private final StreamCallbacks callbacks;
    /** Managed memory: guest mappings at the backend's addresses, pages moved at launch and synchronisation points. */
    private final ManagedMemory managed;
    /** User objects and the references graphs own (answered here; graph calls followed by {@link #call}). */
    private final UserObjects userObjects = new UserObjects(this);
    /** Whether known entries and cuCtxGetCurrent may be answered here (GPUSOCKETS_LOCAL_ANSWERS=0 turns it off). */
    private final boolean localAnswers;
    /** The backend's answers to the table's known entries, asked at the first of them; null before. */
    private volatile KnownAnswers known;

    private RemoteCudaDriver(BackendConnection connection, boolean localAnswers, long[] managedRange) {
        this.connection = connection;
        this.localAnswers = localAnswers;
        this.channel = new CallChannel(connection);
        this.managed = new ManagedMemory(channel, this, managedRange);
        channel.managedMemory(managed);
        this.callbacks = new StreamCallbacks((f, request, bulk, outs) -> channel.exchange(f, request, bulk, outs, false));
        // A stream callback waiting on the stream it holds would never return; CUDA forbids the call too, and
        // from a user object's destructor (which would hold up every destructor after it).
        channel.refuseWhen(() -> callbacks.runningHere() || UserObjects.runningHere());
        LaunchCalls launches = new LaunchCalls(channel, this);
        bind(new FrontendHandlers(new ContextCalls(this), new ModuleCalls(this), new PointerCalls(channel, managed), local,
                new CopyCalls(this, ranges), launches, local, callbacks, new PitchedCalls(channel, this, ranges),
                new TensorMapCalls(channel, this), new LibraryCalls(channel),
                new OccupancyCalls(this), new PoolCalls(channel), new VmmCalls(this), new GraphCalls(channel, launches, this, callbacks, ranges, userObjects), new LinkCalls(this, channel)));
    }

    /** Connects to one backend ({@code tcp://host:port}, {@code unix:///path}, ...) with settings from the environment. */
    public static RemoteCudaDriver connect(String uri) throws IOException {
        return connect(FrontendConfig.forServer(uri));
    }

    /**
     * Connects to the first backend of {@code config} ({@link FrontendDrivers#connect} merges them all). The session's
     * managed range (GPUSOCKETS_MANAGED_RANGE) is reserved first and announced in the HELLO
     * ({@link io.gpusockets.protocol.wire.Handshake#FEATURE_MANAGED_RANGE}); where the backend does not accept it, it is
     * given back. A bad GPUSOCKETS_MANAGED_RANGE fails the connection, naming the setting.
     */
    public static RemoteCudaDriver connect(FrontendConfig config) throws IOException {
        String uri = config.servers().getFirst();
        long[] range;
        try {
            range = ManagedMemory.reserveRange(ManagedMemory.rangeSetting(FrontendConfig.setting("GPUSOCKETS_MANAGED_RANGE")));
        } catch (IllegalArgumentException e) {
            throw new IOException(e.getMessage(), e);
        }
        BackendConnection connection;
        try {
            connection = BackendConnection.open(uri, config, range);
        } catch (IOException | RuntimeException | Error e) {
            ManagedMemory.releaseRange(range);
            throw e;
        }
        if (range != null && (connection.welcome().features() & io.gpusockets.protocol.wire.Handshake.FEATURE_MANAGED_RANGE) == 0) {
            ManagedMemory.releaseRange(range); // a backend without managed ranges: the driver's addresses
            range = null;
        }
        return new RemoteCudaDriver(connection, config.localAnswers(), range);
    }

    /** Connects to GPUSOCKETS_SERVER. */
    public static RemoteCudaDriver fromEnvironment() throws IOException {
        return connect(FrontendConfig.fromEnvironment(Map.of()));
    }

    /** The backend's own description of its driver (it says when the device is emulated). */
    public String backendDescription() {
        return connection.welcome().description();
    }

    public long sessionId() {
        return connection.welcome().sessionId();
    }

    public String backendUri() {
        return connection.uri().toString();
    }

    /**
     * The managed range {base, size} this session reserved in the guest and the backend accepted
     * ({@link io.gpusockets.protocol.wire.Handshake#FEATURE_MANAGED_RANGE}), or null (GPUSOCKETS_MANAGED_RANGE=off, an
     * older backend, or no free place).
     */
    public long[] managedRange() {
        return managed.range();
    }

    /** Whether the backend granted resume: a lost connection is resumed, not the session's end (README: Resume). */
    public boolean resumable() {
        return connection.resumable();
    }

    /** Times the session resumed on a new connection after losing one. */
    public long resumes() {
        return connection.resumes();
    }

    /**
     * Of {@link #resumes}, those that came while a call had its bulk data in ring://'s shared window (a resume
     * brings a new ring and window; that call finishes through the byte stream). For testing resume.
     */
    public long resumesDuringWindowCopies() {
        return connection.windowCallsResumed();
    }

    /** Whether the connection now has a shared window (ring://) that bulk copies go through. */
    public boolean sharedWindow() {
        return connection.hasWindow();
    }

    /**
     * Ends a resumable session now (GOODBYE): the program is exiting and the backend would otherwise keep the
     * session detached, waiting for a resume, for its grace period.
     */
    void endIfResumable() {
        if (connection.resumable()) {
            channel.closing();
            connection.close();
        }
    }

    /** Whether async calls are pipelined on this connection (asked for and granted). */
    public boolean pipelining() {
        return channel.pipelining();
    }

    /** Requests sent to the backend so far (calls, and the known entries asked in advance). */
    public long requestsSent() {
        return channel.requests();
    }

    /** Times a caller waited for the backend so far: each call that waited for its reply, each batch once. */
    public long roundTrips() {
        return channel.roundTrips();
    }

    /** The backend's answers to the known entries, asked now if not yet. */
    private KnownAnswers known() {
        KnownAnswers k = known;
        if (k == null) {
            synchronized (this) {
                k = known;
                if (k == null) {
                    known = k = KnownAnswers.fetch(channel, connection.welcome().deviceCount());
                }
            }
        }
        return k;
    }

    /**
     * Whether a stream capture may be active on this connection (one begun and not yet ended): only then
     * can an async host copy be captured, and only then does {@link CapturedCopies} ask a stream's capture
     * status, so outside capture windows async copies stay pipelined. The count errs high (a capture is
     * counted before it begins and uncounted only once an end call ended it); if it ever erred low, the
     * copy would travel with its data and the backend would refuse it in the capture, never run it wrongly.
     */
    boolean captureActive() {
        return activeCaptures.get() > 0;
    }

    private final AtomicInteger activeCaptures = new AtomicInteger();

    /**
     * The generic marshalling: inputs in C order, bulk inputs as DATA, outputs from the reply. Every call
     * passes here, whichever path made it, so the graph calls are shown to {@link UserObjects} before and
     * after (the references graphs own follow clones, child nodes, instantiation and destruction).
     */
    @Override
    protected int call(ApiFunction f, Object... args) {
        boolean begin = f == ApiEntries.cuStreamBeginCapture || f == ApiEntries.cuStreamBeginCapture_v1
                || f == ApiEntries.cuStreamBeginCaptureToGraph;
        if (begin) {
            activeCaptures.incrementAndGet();
        }
        long captureGraph = userObjects.before(f, args);
        int r = marshal(f, args);
        userObjects.after(f, args, r, captureGraph);
        if (begin && r != CuResult.CUDA_SUCCESS) {
            activeCaptures.decrementAndGet();
        } else if (f == ApiEntries.cuStreamEndCapture && (r == CuResult.CUDA_SUCCESS
                || r == CuResult.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED || r == CuResult.CUDA_ERROR_STREAM_CAPTURE_UNJOINED)) {
            activeCaptures.updateAndGet(n -> Math.max(0, n - 1));
        }
        return r;
    }

    private int marshal(ApiFunction f, Object... args) {
        if (refusedOnMappedHost(f, args)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        if (f == ApiEntries.cuMemRangeGetAttribute) { // answered in the guest, from what advice and prefetches said
            return managed.rangeAttribute((MemorySegment) args[0], (Long) args[1], (Integer) args[2], (Long) args[3], (Long) args[4]);
        } else if (f == ApiEntries.cuMemRangeGetAttributes) {
            return managed.rangeAttributes((MemorySegment) args[0], (MemorySegment) args[1], (MemorySegment) args[2],
                    (Long) args[3], (Long) args[4], (Long) args[5]);
        }
        ContextRule rule = f.context();
        if (rule == ContextRule.GET && localAnswers && channel.answersLocally()) {
            long ctx = channel.contexts().current();
            MemorySegment out = (MemorySegment) args[0];
            if (ctx >= 0 && !(out.isNative() && out.address() == 0)) {
                WireValues.sized(out, 8).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, ctx);
                return CuResult.CUDA_SUCCESS;
            }
        }
        long generation = channel.contexts().generation();
        List<ApiParam> params = f.params();
        ByteBuffer req = CallChannel.request();
        List<MemorySegment> bulk = new ArrayList<>(1);
        List<MemorySegment> outBytes = new ArrayList<>(1);
        for (int i = 0; i < params.size(); i++) {
            ApiParam p = params.get(i);
            Object a = args[i];
            if (p.out()) {
                if (p.type() == ParamType.BYTES) {
                    long n = p.length().evaluate(k -> longValue(args[k]));
                    if (n < 0) {
                        return CuResult.CUDA_ERROR_INVALID_VALUE;
                    }
                    if (n > 0) {
                        outBytes.add(WireValues.sized((MemorySegment) a, n).asSlice(0, n));
                    }
                } else if (((MemorySegment) a).isNative() && ((MemorySegment) a).address() == 0 && !p.optional()) {
                    return CuResult.CUDA_ERROR_INVALID_VALUE;
                }
                continue;
            }
            if (f.async() && p.type().isHandle() && !p.nullable() && p.type() != ParamType.STREAM
                    && p.type() != ParamType.CTX && (Long) a == 0) {
                // a pipelined call gets no reply: refuse a NULL handle now, as the driver does at the call
                return CuResult.CUDA_ERROR_INVALID_HANDLE;
            }
            switch (p.type()) {
                case NULL -> {
                    if (((MemorySegment) a).address() != 0) {
                        return CuResult.CUDA_ERROR_NOT_SUPPORTED;
                    }
                }
                case ZERO -> {
                    if ((Integer) a != 0) {
                        return CuResult.CUDA_ERROR_NOT_SUPPORTED;
                    }
                }
                case CSTR -> {
                    byte[] s = cString((MemorySegment) a);
                    if (s == null) {
                        return CuResult.CUDA_ERROR_INVALID_VALUE;
                    }
                    req.putInt(s.length).put(s);
                }
                case BYTES -> {
                    if (p.nullable() && ((MemorySegment) a).isNative() && ((MemorySegment) a).address() == 0) {
                        req.putLong(0);
                        continue;
                    }
                    long n = p.length().evaluate(k -> longValue(args[k]));
                    if (n < 0 || n > 0 && ((MemorySegment) a).isNative() && ((MemorySegment) a).address() == 0) {
                        return CuResult.CUDA_ERROR_INVALID_VALUE; // a NULL the driver would refuse: never read here
                    }
                    req.putLong(n);
                    if (n > 0) {
                        bulk.add(WireValues.sized((MemorySegment) a, n).asSlice(0, n));
                    }
                }
                case IMAGE -> {
                    MemorySegment image = ModuleImageKind.image((MemorySegment) a);
                    if (image == null) {
                        return CuResult.CUDA_ERROR_INVALID_IMAGE;
                    }
                    req.putLong(image.byteSize());
                    bulk.add(image);
                }
                default -> WireValues.putScalar(req, p.type(), a);
            }
        }
        // A copy whose data comes back must be waited for even when async: its bytes land in the
        // program's memory before the call returns (pipelined DtoH is left to the sync that follows).
        boolean noReply = f.async() && channel.pipelining() && outBytes.isEmpty();
        req.flip();
        KnownAnswers.Answer answer = null;
        if (f.known() && localAnswers && channel.answersLocally()) {
            answer = known().lookup(f, req);
        }
        CallChannel.Reply reply = answer != null ? KnownAnswers.replay(answer, outBytes)
                : channel.exchange(f, req, bulk, outBytes, noReply);
        if (reply.result() == CuResult.CUDA_SUCCESS) {
            long[] outs = new long[params.size()];
            if (reply.body() != null) {
                ByteBuffer body = reply.body();
                for (int i = 0; i < params.size(); i++) {
                    ApiParam p = params.get(i);
                    if (p.out() && p.type() != ParamType.BYTES) {
                        outs[i] = WireValues.outWireBytes(p.type()) == 4 ? body.getInt(body.position()) : body.getLong(body.position());
                        WireValues.getOut(body, p.type(), (MemorySegment) args[i]);
                    }
                }
            }
            int managedResult = managedAfter(f, args, outs);
            if (managedResult != CuResult.CUDA_SUCCESS) {
                return managedResult;
            }
            ranges.afterCall(f, args, reply.body() != null ? outs : null);
        } else if (f == ApiEntries.cuMemAllocManaged && reply.result() == CuResult.CUDA_ERROR_OUT_OF_MEMORY) {
            managed.refusedOnBackend((Long) args[1]);
        }
        learnContext(f, args, reply.result(), generation);
        return reply.result();
    }

    /** CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY and _CONCURRENT_MANAGED_ACCESS. */
    private static final int ATTRIBUTE_MANAGED_MEMORY = 83;
    private static final int ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 89;
    /** CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: 1, mapped host memory being offered ({@link LocalCalls}). */
    private static final int ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19;

    /**
     * Managed memory's part of a successful call ({@link ManagedMemory}): a managed allocation is mapped here (a clash
     * frees it again and answers the error), a freed one unmapped, a prefetch to the CPU fetched; the device attributes
     * say what the guest offers: managed memory without concurrent access, and mapped host memory.
     */
    private int managedAfter(ApiFunction f, Object[] args, long[] outs) {
        if (f == ApiEntries.cuMemAllocManaged) {
            return managed.allocated(outs[0], (Long) args[1], (Integer) args[2]);
        } else if (f == ApiEntries.cuStreamAttachMemAsync) {
            managed.attached((Long) args[0], (Long) args[1], (Integer) args[3]);
        } else if (f == ApiEntries.cuMemFree) {
            managed.freed((Long) args[0]);
        } else if (f == ApiEntries.cuLibraryUnload) {
            managed.libraryUnloaded((Long) args[0]);
        } else if (f == ApiEntries.cuMemPrefetchAsync || f == ApiEntries.cuMemPrefetchAsync_v2) {
            long location = f == ApiEntries.cuMemPrefetchAsync ? ManagedMemory.locationOfDevice((Integer) args[2])
                    : ManagedMemory.locationOfWire((Long) args[2]);
            managed.prefetched((Long) args[0], (Long) args[1], location, ManagedMemory.isHost(location),
                    (Long) args[f == ApiEntries.cuMemPrefetchAsync ? 3 : 4]);
        } else if (f == ApiEntries.cuMemAdvise || f == ApiEntries.cuMemAdvise_v2) {
            long location = f == ApiEntries.cuMemAdvise ? ManagedMemory.locationOfDevice((Integer) args[3])
                    : ManagedMemory.locationOfWire((Long) args[3]);
            managed.advised((Long) args[0], (Long) args[1], (Integer) args[2], location);
        } else if (f == ApiEntries.cuDeviceGetAttribute) {
            int attribute = (Integer) args[1];
            if (attribute == ATTRIBUTE_MANAGED_MEMORY || attribute == ATTRIBUTE_CONCURRENT_MANAGED_ACCESS
                    || attribute == ATTRIBUTE_CAN_MAP_HOST_MEMORY) {
                WireValues.sized((MemorySegment) args[0], 4).set(ValueLayout.JAVA_INT_UNALIGNED, 0,
                        attribute == ATTRIBUTE_CONCURRENT_MANAGED_ACCESS ? 0 : 1);
            }
        }
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * Mapped pinned host memory (cuMemHostAlloc with DEVICEMAP, {@link LocalCalls}): a managed allocation (GLOBAL) the
     * guest maps at its device address, then marked as host memory ({@link ManagedMemory#markMappedHost}).
     */
    private int allocMappedHost(long bytesize, long[] base) {
        try (java.lang.foreign.Arena call = java.lang.foreign.Arena.ofConfined()) {
            MemorySegment out = call.allocate(8);
            int r = cuMemAllocManaged(out, bytesize, 1);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            base[0] = out.get(ValueLayout.JAVA_LONG, 0);
            managed.markMappedHost(base[0], true);
            return CuResult.CUDA_SUCCESS;
        }
    }

    /** cuMemFreeHost of mapped host memory: both sides go (the program's own cuMemFree of it is refused). */
    private int freeMappedHost(long base) {
        managed.markMappedHost(base, false);
        int r = cuMemFree(base);
        if (r != CuResult.CUDA_SUCCESS) {
            managed.markMappedHost(base, true);
        }
        return r;
    }

    /**
     * Calls the driver refuses on pinned host memory, which mapped host memory is to the program: cuMemFree, advice,
     * prefetches and attachment (CUDA_ERROR_INVALID_VALUE, as for any memory that is not device or managed memory).
     */
    private boolean refusedOnMappedHost(ApiFunction f, Object[] args) {
        if (f == ApiEntries.cuMemFree || f == ApiEntries.cuMemAdvise || f == ApiEntries.cuMemAdvise_v2
                || f == ApiEntries.cuMemPrefetchAsync || f == ApiEntries.cuMemPrefetchAsync_v2) {
            return managed.isMappedHost((Long) args[0]);
        }
        return f == ApiEntries.cuStreamAttachMemAsync && managed.isMappedHost((Long) args[1]);
    }

    /** A library's {@code __managed__} variable at [address, address + size): managed memory of the guest too. */
    int managedGlobal(long address, long size, long library) {
        return managed.adoptGlobal(address, size, library);
    }

    /** What managed memory moved so far (pages and bytes sent and fetched; {@link ManagedMemory}). */
    public ManagedMemoryStats managedMemoryStats() {
        return managed.stats();
    }

    /**
     * For Java programs: makes the managed memory in {@code [address, address + length)} ready for this thread to read
     * (and, with {@code write}, to write) through a {@link MemorySegment}. Call it after GPU work and before touching
     * managed memory from Java: a JVM thread must not block in a page fault that another JVM thread resolves (a
     * safepoint could wait for both). C programs need nothing of the kind: their faults are resolved as they come.
     */
    public void prepareManagedAccess(long address, long length, boolean write) {
        managed.hostAccess(address, length, write);
    }

    /** The program is exiting: GPUSOCKETS_MANAGED_STATS=1 prints what managed memory moved. */
    void programExiting() {
        managed.programExiting();
    }

    /**
     * What a successful context call tells about this thread's current context ({@link CurrentContexts});
     * what it forgot, the channel already made unknown before sending it.
     */
    private void learnContext(ApiFunction f, Object[] args, int result, long generation) {
        ContextRule rule = f.context();
        if (result != CuResult.CUDA_SUCCESS || rule == ContextRule.NONE) {
            return;
        }
        int at = contextParam(f, rule == ContextRule.GET || rule == ContextRule.CREATE);
        switch (rule) {
            case GET, CREATE -> {
                MemorySegment out = (MemorySegment) args[at];
                if (!(out.isNative() && out.address() == 0)) {
                    channel.contexts().learnt(WireValues.sized(out, 8).get(ValueLayout.JAVA_LONG_UNALIGNED, 0), generation);
                }
            }
            case PUSH -> channel.contexts().learnt((Long) args[at], generation);
            case SET -> {
                if ((Long) args[at] != 0) { // NULL pops: what lies below is not known here
                    channel.contexts().learnt((Long) args[at], generation);
                }
            }
            default -> {
            }
        }
    }

    /** The index of the first ctx parameter that is an output ({@code out}) or an input (the table checks there is one). */
    private static int contextParam(ApiFunction f, boolean out) {
        for (ApiParam p : f.params()) {
            if (p.out() == out && p.type() == ParamType.CTX) {
                return p.index();
            }
        }
        return -1;
    }

    private static long longValue(Object o) {
        return o instanceof Number n ? n.longValue() : 0;
    }

    private static byte[] cString(MemorySegment s) {
        if (s.isNative() && s.address() == 0) {
            return null;
        }
        MemorySegment m = WireValues.sized(s, WireValues.MAX_CSTR + 1);
        long limit = Math.min(m.byteSize(), WireValues.MAX_CSTR + 1);
        for (long i = 0; i < limit; i++) {
            if (m.get(ValueLayout.JAVA_BYTE, i) == 0) {
                return m.asSlice(0, i).toArray(ValueLayout.JAVA_BYTE);
            }
        }
        return null;
    }

    /**
     * Closes the connection to the backend now, as a network failure would: a session granted resume
     * ({@code gpusockets.resume}) resumes on a new connection and its calls carry on; any other session ends
     * and its calls fail. For testing resume where no proxy can sit between frontend and backend (ring://).
     */
    public void dropConnection() {
        connection.dropConnection();
    }

    @Override
    public void close() {
        channel.closing();        // closing on purpose: nothing to report
        callbacks.close();
        managed.close();
        connection.close();
        local.close();
    }
}
