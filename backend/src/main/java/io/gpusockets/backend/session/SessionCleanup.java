package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import java.lang.System.Logger.Level;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What a session gives back to the driver: at its end, every link state and every library it made
 * (neither belongs to a context), then every context it made (the driver frees the
 * memory, modules, streams and events made in them), after the window's page-locking and the pinned
 * staging buffers that belong to those contexts; during its life, one handle with everything it
 * owned. Also the wording of the line the end logs, which users and tests read.
 */
final class SessionCleanup {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");

    private final long sessionId;
    private final CudaDriver driver;
    private final SessionHandles handles;
    private final SessionMemory memory;
    private final StagingPool staging;
    /** The shared window, or null. */
    private final SessionWindow window;
    /** The session's shared windows (the current one and retired ones not yet unmapped), or null: see {@link #windows}. */
    private volatile java.util.List<SessionWindow> windows;
    private final SessionPools pools;
    private final SessionVmm vmm;
    private final SessionWaits waits;
    /** Told of every handle dropped (an array's quota charge goes back: {@link SessionQuota#handleDropped}). */
    private java.util.function.Consumer<SessionHandles.Entry> onHandleDropped = e -> { };
    /** Isolation mode shared: contexts this session uses but must not destroy, else null. */
    private volatile SharedContexts shared;

    SessionCleanup(long sessionId, CudaDriver driver, SessionHandles handles, SessionMemory memory, StagingPool staging,
                   SessionWindow window) {
        this(sessionId, driver, handles, memory, staging, window, new SessionPools(), new SessionVmm(), new SessionWaits());
    }

    SessionCleanup(long sessionId, CudaDriver driver, SessionHandles handles, SessionMemory memory, StagingPool staging,
                   SessionWindow window, SessionPools pools, SessionVmm vmm, SessionWaits waits) {
        this.pools = pools;
        this.vmm = vmm;
        this.waits = waits;
        this.sessionId = sessionId;
        this.driver = driver;
        this.handles = handles;
        this.memory = memory;
        this.staging = staging;
        this.window = window;
    }

    /** The session's shared windows, as they stand when it ends: each is unpinned before the contexts go. */
    void windows(java.util.List<SessionWindow> windows) {
        this.windows = windows;
    }

    void shareContexts(SharedContexts s) {
        this.shared = s;
    }

    /** Destroys every context of the session; returns what was released, as the end line words it. */
    /**
     * Lets go of the streams the session's waits hold, ahead of {@link #releaseAll} (which then has none
     * left to release): a lane stuck in a synchronize behind such a wait can then return.
     */
    void releaseWaitsFirst() {
        earlyWaits = releaseWaits();
    }

    /** What {@link #releaseWaitsFirst} released, for the end line. */
    private String earlyWaits = "";

    String releaseAll() {
        int contexts = handles.count(ParamType.CTX);
        int allocations = memory.allocationCount();
        long bytes = memory.allocatedBytes();
        int modules = handles.count(ParamType.MOD) + handles.count(ParamType.LIB);
        int streams = handles.count(ParamType.STREAM);
        int events = handles.count(ParamType.EVENT);
        int graphs = handles.count(ParamType.GRAPH);
        int execs = handles.count(ParamType.GEXEC);
        int failed = 0;
        int libFailed = 0;
        if (window != null) {
            window.unpin(0);  // before its context may go, and before the window is unmapped
        }
        java.util.List<SessionWindow> all = windows;
        if (all != null) {
            for (SessionWindow w : all) {
                w.unpin(0);
            }
        }
        staging.close(); // pinned buffers belong to contexts: free them while those still exist
        String stagingSummary = staging.summary();
        // Link states belong to no context and hold the driver's linked images: destroyed explicitly, first.
        int links = 0;
        for (SessionHandles.Entry link : handles.all(ParamType.LINK)) {
            int r = driver.cuLinkDestroy(link.real());
            if (r != CuResult.CUDA_SUCCESS) {
                LOG.log(Level.WARNING, "session " + sessionId + ": cuLinkDestroy failed during cleanup: " + CuResult.name(r));
            }
            links++;
            dropHandle(link.id());
        }
        // Streams held by waits are let go (cuCtxDestroy would block on them); then what the driver does
        // not free with a context goes, while the contexts still exist.
        String waitSummary = earlyWaits + releaseWaits();
        String poolSummary = releasePools();
        String vmmSummary = releaseVmm();
        String ipcSummary = releaseIpc();
        // The driver does not destroy graphs with a context: exec graphs first (they were made from graphs), then graphs.
        int graphsFailed = destroyExecGraphs(-1);
        for (SessionHandles.Entry g : handles.all(ParamType.GRAPH)) {
            if (g.owner() != 0) {
                continue;   // a conditional node's body graph: its node's graph destroys it (and dropping that drops it)
            }
            int r = driver.cuGraphDestroy(g.real());
            if (r != CuResult.CUDA_SUCCESS) {
                graphsFailed++;
                LOG.log(Level.WARNING, "session " + sessionId + ": cuGraphDestroy failed during cleanup: " + CuResult.name(r));
            }
            dropHandle(g.id());
        }
        // Libraries belong to no context: cuCtxDestroy leaves them loaded, so they go first, explicitly.
        for (SessionHandles.Entry lib : handles.all(ParamType.LIB)) {
            int r = driver.cuLibraryUnload(lib.real());
            if (r != CuResult.CUDA_SUCCESS) {
                libFailed++;
                LOG.log(Level.WARNING, "session " + sessionId + ": cuLibraryUnload failed during cleanup: " + CuResult.name(r));
            }
            dropHandle(lib.id());
        }
        for (SessionHandles.Entry ctx : handles.all(ParamType.CTX)) {
            SharedContexts sc = shared;
            if (sc != null && sc.isShared(ctx.real())) {
                failed += releaseFromShared(ctx);
                sc.release(ctx.real());
                dropHandle(ctx.id());
                continue;
            }
            int r = driver.cuCtxDestroy(ctx.real());
            ExecutionThread.contextDestroyed();
            if (r != CuResult.CUDA_SUCCESS) {
                failed++;
                LOG.log(Level.WARNING, "session " + sessionId + ": cuCtxDestroy failed during cleanup: " + CuResult.name(r));
            }
            dropHandle(ctx.id());
        }
        return contexts + " context(s), " + allocations + " allocation(s) (" + bytes + " bytes), " + modules
                + " module(s)/librar(ies), " + streams + " stream(s), " + events + " event(s)"
                + (graphs + execs > 0 ? ", " + graphs + " graph(s), " + execs + " exec graph(s)" : "")
                + (graphsFailed > 0 ? ", " + graphsFailed + " graph(s) failed to destroy" : "")
                + (links > 0 ? ", " + links + " link state(s)" : "")
                + stagingSummary + waitSummary + poolSummary + vmmSummary + ipcSummary
                + (failed > 0 ? ", " + failed + " context(s) failed to destroy" : "")
                + (libFailed > 0 ? ", " + libFailed + " librar(ies) failed to unload" : "");
    }

    /**
     * Isolation mode shared: what this session made in the tenant's shared context goes one by one (the
     * context stays for the tenant's other sessions): streams and events after their work, modules, texture
     * and surface objects, arrays and mipmapped arrays, then allocations. Returns the failures (0 or 1, logged).
     */
    private int releaseFromShared(SessionHandles.Entry ctx) {
        if (driver.cuCtxPushCurrent(ctx.real()) != CuResult.CUDA_SUCCESS) {
            LOG.log(Level.WARNING, "session " + sessionId + ": cannot make the shared context current to free the session's objects");
            return 1;
        }
        int failed = 0;
        try {
            driver.cuCtxSynchronize(); // nothing of the session's may still run on what is freed below
            for (SessionHandles.Entry e : handles.all(ParamType.STREAM)) {
                if (e.context() == ctx.id()) {
                    failed += driver.cuStreamDestroy(e.real()) == CuResult.CUDA_SUCCESS ? 0 : 1;
                }
            }
            for (SessionHandles.Entry e : handles.all(ParamType.EVENT)) {
                if (e.context() == ctx.id()) {
                    failed += driver.cuEventDestroy(e.real()) == CuResult.CUDA_SUCCESS ? 0 : 1;
                }
            }
            for (SessionHandles.Entry e : handles.all(ParamType.TEX)) {
                if (e.context() == ctx.id()) {
                    failed += driver.cuTexObjectDestroy(e.real()) == CuResult.CUDA_SUCCESS ? 0 : 1;
                }
            }
            for (SessionHandles.Entry e : handles.all(ParamType.SURF)) {
                if (e.context() == ctx.id()) {
                    failed += driver.cuSurfObjectDestroy(e.real()) == CuResult.CUDA_SUCCESS ? 0 : 1;
                }
            }
            for (SessionHandles.Entry e : handles.all(ParamType.ARRAY)) {
                if (e.context() == ctx.id() && e.owner() == 0) {   // levels and planes go with what owns them
                    failed += driver.cuArrayDestroy(e.real()) == CuResult.CUDA_SUCCESS ? 0 : 1;
                }
            }
            for (SessionHandles.Entry e : handles.all(ParamType.MIPMAP)) {
                if (e.context() == ctx.id()) {
                    failed += driver.cuMipmappedArrayDestroy(e.real()) == CuResult.CUDA_SUCCESS ? 0 : 1;
                }
            }
            for (SessionHandles.Entry e : handles.all(ParamType.MOD)) {
                if (e.context() == ctx.id()) {
                    failed += driver.cuModuleUnload(e.real()) == CuResult.CUDA_SUCCESS ? 0 : 1;
                }
            }
            for (long base : memory.allocationsOwnedBy(ctx.id())) {
                failed += driver.cuMemFree(base) == CuResult.CUDA_SUCCESS ? 0 : 1;
            }
        } finally {
            try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
                driver.cuCtxPopCurrent(arena.allocate(8));
            }
        }
        if (failed > 0) {
            LOG.log(Level.WARNING, "session " + sessionId + ": " + failed + " object(s) in the shared context failed to free");
        }
        return failed > 0 ? 1 : 0;
    }

    /**
     * Writes, on a NON_BLOCKING stream of each context (which waits for no other stream), a value that
     * satisfies each wait the session queued, so no stream of the session stays blocked: the driver's
     * cuCtxDestroy does not return while one is (a wait no value can satisfy stays, and is logged).
     */
    private String releaseWaits() {
        int written = 0;
        int unreleasable = 0;
        for (var e : waits.take().entrySet()) {
            if (handles.idOf(ParamType.CTX, e.getKey()) == 0 || driver.cuCtxPushCurrent(e.getKey()) != CuResult.CUDA_SUCCESS) {
                continue;
            }
            try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
                java.lang.foreign.MemorySegment out = arena.allocate(8);
                if (driver.cuStreamCreate(out, 1) == CuResult.CUDA_SUCCESS) {
                    long stream = out.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0);
                    for (SessionWaits.Wait w : e.getValue()) {
                        Long v = w.releasing();
                        if (v == null) {
                            unreleasable++;
                        } else if (memory.contains(w.address(), w.width())) {
                            int r = w.width() == 4 ? driver.cuStreamWriteValue32_v2(stream, w.address(), (int) (long) v, 0)
                                    : driver.cuStreamWriteValue64_v2(stream, w.address(), v, 0);
                            written += r == CuResult.CUDA_SUCCESS ? 1 : 0;
                        }
                    }
                    driver.cuStreamSynchronize(stream);
                    driver.cuStreamDestroy(stream);
                }
                driver.cuCtxPopCurrent(arena.allocate(8));
            }
        }
        if (unreleasable > 0) {
            LOG.log(Level.WARNING, "session " + sessionId + ": " + unreleasable + " stream wait(s) no value can satisfy;"
                    + " destroying their context may block");
        }
        return written == 0 ? "" : ", " + written + " stream wait(s) released";
    }

    /**
     * Frees the session's outstanding stream-ordered allocations, in the context each was made in and in
     * stream order on its legacy stream (so after the work that may still use them, and without waiting
     * on the host: a stream held by a wait that never completes must not hold the session's end), then
     * destroys its pools (the driver releases a pool once its pending frees have run). Neither goes with
     * a context.
     */
    private String releasePools() {
        int freed = 0;
        int failed = 0;
        for (var e : pools.takeAllocations().entrySet()) {
            boolean pushed = pushContextFor(e.getKey());
            for (SessionPools.AsyncAllocation a : e.getValue()) {
                if (memory.allocationAt(a.base()) == null) {
                    continue;   // freed by cuMemFree meanwhile
                }
                if (driver.cuMemFreeAsync(a.base(), 0) == CuResult.CUDA_SUCCESS) {
                    freed++;
                } else {
                    failed++;
                }
                memory.remove(a.base());
            }
            if (pushed) {
                try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
                    driver.cuCtxPopCurrent(arena.allocate(8));
                }
            }
        }
        int destroyed = 0;
        for (SessionPools.Pool p : pools.takePools()) {
            int r = driver.cuMemPoolDestroy(p.real());
            if (r == CuResult.CUDA_SUCCESS) {
                destroyed++;
            } else {
                failed++;
                LOG.log(Level.WARNING, "session " + sessionId + ": cuMemPoolDestroy failed during cleanup: " + CuResult.name(r));
            }
            dropHandle(handles.idOf(ParamType.POOL, p.real()));
        }
        if (freed + destroyed + failed == 0) {
            return "";
        }
        return ", " + freed + " async allocation(s), " + destroyed + " pool(s)" + (failed > 0 ? " (" + failed + " failed)" : "");
    }

    /**
     * Makes {@code context} current, or, when the program destroyed it, another live context of the
     * session (pool memory belongs to the device, not to the context that allocated it).
     */
    /** What the session opened of other sessions' shares, or null. */
    private SessionShares sharing;

    /** The driver under the session's address-stable layer: an IPC window mapping is the driver's, not the window's. */
    private CudaDriver realDriver;

    void sharing(SessionShares s, CudaDriver real) {
        this.sharing = s;
        this.realDriver = real;
    }

    /**
     * Closes the IPC memory the session opened (cuIpcCloseMemHandle, in the context it was opened in, while that
     * still exists): the exporter's allocation stays, and the driver's mapping of it here goes.
     */
    private String releaseIpc() {
        SessionShares s = sharing;
        if (s == null) {
            return "";
        }
        int closed = 0;
        for (var e : s.takeMemory().entrySet()) {
            if (e.getValue().mapped() != null) { // isolation context: the session's own mapping of another's memory
                memory.remove(e.getKey());
                IpcCalls.unmapWindow(realDriver, e.getValue().mapped());
                closed++;
                continue;
            }
            SessionHandles.Entry ctx = handles.get(e.getValue().context(), ParamType.CTX);
            boolean pushed = ctx != null && pushContextFor(ctx.real());
            for (int i = 0; i < e.getValue().opens(); i++) {
                if (driver.cuIpcCloseMemHandle(e.getKey()) == CuResult.CUDA_SUCCESS) {
                    closed++;
                } else {
                    LOG.log(Level.WARNING, "session " + sessionId + ": cuIpcCloseMemHandle failed during cleanup");
                }
            }
            memory.remove(e.getKey());
            if (pushed) {
                try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
                    driver.cuCtxPopCurrent(arena.allocate(8));
                }
            }
        }
        return closed == 0 ? "" : ", " + closed + " IPC memory mapping(s) closed";
    }

    private boolean pushContextFor(long context) {
        if (context != 0 && handles.idOf(ParamType.CTX, context) != 0 && driver.cuCtxPushCurrent(context) == CuResult.CUDA_SUCCESS) {
            return true;
        }
        for (SessionHandles.Entry ctx : handles.all(ParamType.CTX)) {
            if (driver.cuCtxPushCurrent(ctx.real()) == CuResult.CUDA_SUCCESS) {
                return true;
            }
        }
        return false;
    }

    /** Unmaps the session's mappings, releases its allocation handles (each reference), frees its reservations: in that order. */
    private String releaseVmm() {
        int failed = 0;
        List<SessionVmm.Mapping> mappings = vmm.takeMappings();
        for (SessionVmm.Mapping m : mappings) {
            if (driver.cuMemUnmap(m.base(), m.size()) != CuResult.CUDA_SUCCESS) {
                failed++;
            }
            memory.remove(m.base());
        }
        Map<Long, Integer> references = vmm.takeReferences();
        for (var e : references.entrySet()) {
            for (int i = 0; i < e.getValue(); i++) {
                if (driver.cuMemRelease(e.getKey()) != CuResult.CUDA_SUCCESS) {
                    failed++;
                }
            }
            dropHandle(handles.idOf(ParamType.MEMH, e.getKey()));
        }
        vmm.clearBindings();
        List<SessionVmm.Reservation> reservations = vmm.takeReservations();
        for (SessionVmm.Reservation r : reservations) {
            if (driver.cuMemAddressFree(r.base, r.size) != CuResult.CUDA_SUCCESS) {
                failed++;
            }
        }
        if (mappings.size() + references.size() + reservations.size() == 0) {
            return "";
        }
        if (failed > 0) {
            LOG.log(Level.WARNING, "session " + sessionId + ": " + failed + " VMM release(s) failed during cleanup");
        }
        return ", " + mappings.size() + " mapping(s), " + references.size() + " VMM handle(s), " + reservations.size()
                + " reservation(s)" + (failed > 0 ? " (" + failed + " failed)" : "");
    }

    /**
     * Destroys the exec graphs made in context {@code contextId} (-1: all), before the context goes:
     * whether cuCtxDestroy frees them is not documented, so they never outlive it. Returns the failures.
     */
    int destroyExecGraphs(long contextId) {
        int failed = 0;
        for (SessionHandles.Entry x : handles.all(ParamType.GEXEC)) {
            if (contextId >= 0 && x.context() != contextId) {
                continue;
            }
            int r = driver.cuGraphExecDestroy(x.real());
            if (r != CuResult.CUDA_SUCCESS) {
                failed++;
                LOG.log(Level.WARNING, "session " + sessionId + ": cuGraphExecDestroy failed: " + CuResult.name(r));
            }
            dropHandle(x.id());
        }
        return failed;
    }

    void onHandleDropped(java.util.function.Consumer<SessionHandles.Entry> listener) {
        this.onHandleDropped = listener;
    }

    /** Forgets a handle and what it owned, including device ranges owned by dropped contexts and modules. */
    void dropHandle(long handleId) {
        Set<Long> owners = new HashSet<>();
        for (SessionHandles.Entry e : handles.remove(handleId)) {
            owners.add(e.id());
            onHandleDropped.accept(e);
        }
        if (!owners.isEmpty()) {
            memory.removeOwnedBy(owners);
        }
    }

    /**
     * The line the session's end logs: {@code released} from {@link #releaseAll}; {@code stuck} when a
     * lane did not stop; {@code windowBytes} carried through the shared window.
     */
    static String endLine(long sessionId, String reason, String peer, String released, boolean stuck, long windowBytes) {
        return "session " + sessionId + " ended (" + reason + "), peer " + peer
                + ": released " + released + (stuck ? "; a lane was still inside a driver call" : "")
                + (windowBytes > 0 ? "; " + windowBytes + " bytes went through the shared window" : "");
    }
}
