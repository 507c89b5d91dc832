package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import java.lang.System.Logger.Level;
import java.util.HashSet;
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

    SessionCleanup(long sessionId, CudaDriver driver, SessionHandles handles, SessionMemory memory, StagingPool staging,
                   SessionWindow window) {
        this.sessionId = sessionId;
        this.driver = driver;
        this.handles = handles;
        this.memory = memory;
        this.staging = staging;
        this.window = window;
    }

    /** Destroys every context of the session; returns what was released, as the end line words it. */
    String releaseAll() {
        int contexts = handles.count(ParamType.CTX);
        int allocations = memory.allocationCount();
        long bytes = memory.allocatedBytes();
        int modules = handles.count(ParamType.MOD) + handles.count(ParamType.LIB);
        int streams = handles.count(ParamType.STREAM);
        int events = handles.count(ParamType.EVENT);
        int failed = 0;
        int libFailed = 0;
        if (window != null) {
            window.unpin(0);  // before its context may go, and before the window is unmapped
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
                + (links > 0 ? ", " + links + " link state(s)" : "")
                + stagingSummary + (failed > 0 ? ", " + failed + " context(s) failed to destroy" : "")
                + (libFailed > 0 ? ", " + libFailed + " librar(ies) failed to unload" : "");
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
